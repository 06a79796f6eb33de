//! The lab's charts, as self-contained SVG: grouped bars with the trials as dots and the
//! mean's interval as a whisker ([`bar_chart`]), and distributions of per-event latencies
//! ([`cdf_chart`]), where a tail that a mean or median hides shows.

use std::fmt::Write as _;

/// A value axis from 0 to at least `max`: a round step (1, 2 or 5 times a power of ten) and
/// how many steps (3 to 6), so tick labels read 0, 5000, 10000 rather than 0, 7719, 15438.
fn axis_ticks(max: f64) -> (f64, usize) {
    let rough = max / 5.0;
    let mag = 10f64.powf(rough.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|&s| s >= rough)
        .unwrap_or(10.0 * mag);
    (step, ((max / step).ceil() as usize).max(1))
}

/// One bar of a chart. (`bar_chart`'s title may have a second line, after a newline, saying
/// what the marks show.)
pub struct Bar {
    /// Group on the x axis (e.g. a scenario).
    pub group: String,
    /// Series (e.g. a system); one color each.
    pub series: String,
    /// Height.
    pub value: f64,
    /// The whisker: the confidence interval of the mean, (low, high); none where there is
    /// none.
    pub whisker: Option<(f64, f64)>,
    /// A few words written along the bar, e.g. "2 of 5 unfinished" when some trials of a cell
    /// whose median finished did not (the height alone would hide them); empty for none.
    pub note: String,
    /// Every trial's value, drawn as a dot on the bar (unfinished and failed ones left out).
    pub points: Vec<f64>,
}

const COLORS: [&str; 6] = [
    "#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The start of a `w` by `h` chart on white: the title's first line large, a second (after a
/// newline: what the marks show) small beneath it.
fn svg_start(w: f64, h: f64, title: &str) -> String {
    let (head, sub) = title.split_once('\n').unwrap_or((title, ""));
    format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12"><rect width="100%" height="100%" fill="white"/><text x="{}" y="18" font-size="15" text-anchor="middle">{}</text><text x="{}" y="33" font-size="10.5" fill="#444" text-anchor="middle">{}</text>"##,
        w / 2.0,
        esc(head),
        w / 2.0,
        esc(sub)
    )
}

/// Where a chart's plot area lies in its `w` by `h` SVG: the margins on its left, top and
/// right, and the plot's width `pw` and height `ph` (what the margins leave).
#[derive(Clone, Copy)]
struct Frame {
    w: f64,
    h: f64,
    left: f64,
    top: f64,
    right: f64,
    pw: f64,
    ph: f64,
}

impl Frame {
    fn new(w: f64, h: f64, left: f64, top: f64, bottom: f64, right: f64) -> Frame {
        Frame {
            w,
            h,
            left,
            top,
            right,
            pw: w - left - right,
            ph: h - top - bottom,
        }
    }
}

/// A grouped bar chart with 95% CI whiskers, as self-contained SVG: the value axis
/// (`value_axis`), each group's name and its bars in series order (`draw_bar`), and a
/// legend of the series (`series_legend`).
pub fn bar_chart(title: &str, y_label: &str, bars: &[Bar]) -> String {
    let (groups, series) = groups_and_series(bars);
    let (step, ticks) = axis_ticks(bar_top(bars));
    let ymax = step * ticks as f64;
    let f = Frame::new(760.0, 360.0, 70.0, 40.0, 50.0, 150.0);
    let Frame {
        left, top, pw, ph, ..
    } = f;
    let gw = pw / groups.len().max(1) as f64;
    let bw = gw * 0.8 / series.len().max(1) as f64;
    let mut s = svg_start(f.w, f.h, title);
    value_axis(&mut s, &f, step, ticks, y_label);
    for (gi, g) in groups.iter().enumerate() {
        let gx = left + gi as f64 * gw + gw * 0.1;
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            left + gi as f64 * gw + gw / 2.0,
            top + ph + 18.0,
            esc(g)
        );
        for (si, se) in series.iter().enumerate() {
            let Some(b) = bars.iter().find(|b| b.group == *g && b.series == *se) else {
                continue;
            };
            let x = gx + si as f64 * bw;
            draw_bar(&mut s, &f, b, x, bw, ymax, COLORS[si % COLORS.len()]);
        }
    }
    series_legend(&mut s, &f, &series);
    s.push_str("</svg>\n");
    s
}

/// The bars' groups (the x axis) and series (the colors), each in the order it first
/// appears.
fn groups_and_series(bars: &[Bar]) -> (Vec<&str>, Vec<&str>) {
    let mut groups: Vec<&str> = Vec::new();
    let mut series: Vec<&str> = Vec::new();
    for b in bars {
        if !groups.contains(&b.group.as_str()) {
            groups.push(&b.group);
        }
        if !series.contains(&b.series.as_str()) {
            series.push(&b.series);
        }
    }
    (groups, series)
}

/// The highest value the value axis must reach: every bar, the top of every whisker and
/// every trial's dot (at least a tiny positive value, so that an all-zero chart has an axis).
fn bar_top(bars: &[Bar]) -> f64 {
    bars.iter()
        .map(|b| b.value.max(b.whisker.map_or(0.0, |(_, hi)| hi)))
        .chain(bars.iter().flat_map(|b| b.points.iter().copied()))
        .filter(|x| x.is_finite())
        .fold(0.0f64, f64::max)
        .max(1e-9)
}

/// The value axis: a grid line and label at each of the `ticks` steps of `step` from 0, and
/// `y_label` along the side.
fn value_axis(s: &mut String, f: &Frame, step: f64, ticks: usize, y_label: &str) {
    let Frame {
        left, top, pw, ph, ..
    } = *f;
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    for k in 0..=ticks {
        let v = step * k as f64;
        let y = top + ph - ph * k as f64 / ticks as f64;
        let _ = write!(
            s,
            r##"<line x1="{left}" y1="{y}" x2="{}" y2="{y}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{v:.decimals$}</text>"##,
            left + pw,
            left - 6.0,
            y + 4.0,
        );
    }
    let _ = write!(
        s,
        r#"<text transform="translate(16,{}) rotate(-90)" text-anchor="middle">{}</text>"#,
        top + ph / 2.0,
        esc(y_label)
    );
}

/// Bar `b` at `x`, `bw` wide, on an axis up to `ymax`, in `color`: the bar with its note
/// along it, a dot per trial and the whisker. A bar over the time limit (infinite) is the word
/// "unfinished" where it would stand; one with no value (NaN) is nothing.
fn draw_bar(s: &mut String, f: &Frame, b: &Bar, x: f64, bw: f64, ymax: f64, color: &str) {
    let Frame { top, ph, .. } = *f;
    if b.value.is_infinite() {
        // Over the time limit: no bar can be tall enough; say so where it would stand.
        let _ = write!(
            s,
            r#"<text transform="translate({:.1},{:.1}) rotate(-90)" fill="{}">unfinished</text>"#,
            x + bw * 0.6,
            top + ph - 4.0,
            color
        );
        return;
    }
    if !b.value.is_finite() {
        return;
    }
    let bh = ph * b.value / ymax;
    let _ = write!(
        s,
        r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{bh:.1}" fill="{}"/>"#,
        top + ph - bh,
        bw * 0.9,
        color
    );
    if !b.note.is_empty() {
        // Along the bar from its foot, dark on a white halo: readable on any bar color
        // and above a short bar.
        let _ = write!(
            s,
            r#"<text transform="translate({:.1},{:.1}) rotate(-90)" font-size="11" stroke="white" stroke-width="3" paint-order="stroke">{}</text>"#,
            x + bw * 0.6,
            top + ph - 4.0,
            esc(&b.note)
        );
    }
    // The trials, spread across the bar so that equal values stay visible.
    let finite: Vec<f64> = b.points.iter().copied().filter(|p| p.is_finite()).collect();
    for (k, p) in finite.iter().enumerate() {
        let px = x + bw * 0.9 * (k as f64 + 1.0) / (finite.len() as f64 + 1.0);
        let py = top + ph - ph * p / ymax;
        let _ = write!(
            s,
            r#"<circle cx="{px:.1}" cy="{py:.1}" r="2.5" fill="white" stroke="black" stroke-width="0.8"/>"#
        );
    }
    if let Some((lo, hi)) = b
        .whisker
        .filter(|(lo, hi)| lo.is_finite() && hi.is_finite())
    {
        let cx = x + bw * 0.45;
        let y1 = top + ph - ph * hi / ymax;
        let y2 = top + ph - ph * lo.max(0.0) / ymax;
        let _ = write!(
            s,
            r#"<line x1="{cx:.1}" y1="{y1:.1}" x2="{cx:.1}" y2="{y2:.1}" stroke="black"/>"#
        );
    }
}

/// The legend right of the plot: a swatch of each series' color and its name.
fn series_legend(s: &mut String, f: &Frame, series: &[&str]) {
    let Frame { w, top, right, .. } = *f;
    for (si, se) in series.iter().enumerate() {
        let y = top + 10.0 + si as f64 * 18.0;
        let _ = write!(
            s,
            r#"<rect x="{}" y="{}" width="12" height="12" fill="{}"/><text x="{}" y="{}">{}</text>"#,
            w - right + 15.0,
            y - 10.0,
            COLORS[si % COLORS.len()],
            w - right + 32.0,
            y,
            esc(se)
        );
    }
}

/// One line of a [`cdf_chart`]: every event of one system, pooled over its trials.
pub struct Curve {
    /// The line's name (a system); one color each, in order.
    pub name: String,
    /// The events' latencies; [`crate::report::UNFINISHED`] for an event that never completed
    /// (it counts in the total, so the line stays below 1), NaN ignored.
    pub values: Vec<f64>,
}

/// Decades of a log axis covering `lo..=hi` (both positive): the first and last power of ten.
fn decades(lo: f64, hi: f64) -> (i32, i32) {
    let a = lo.log10().floor() as i32;
    let b = (hi.log10().ceil() as i32).max(a + 1);
    (a, b)
}

/// The empirical distribution of each curve's values (the fraction of events at or below a
/// latency), on a log latency axis, as self-contained SVG. Values below the axis's first
/// decade (say, a message already in a cache) sit on its left edge. A curve's legend says how
/// many events it has and how many never completed. `title` may have a second line, after a
/// newline, as [`bar_chart`]'s.
///
/// The axes (`CdfAxes::draw`), then each curve's steps and legend entry (`draw_curve`).
pub fn cdf_chart(title: &str, x_label: &str, curves: &[Curve]) -> String {
    let (d0, d1) = latency_decades(curves);
    let axes = CdfAxes {
        f: Frame::new(760.0, 360.0, 60.0, 40.0, 50.0, 200.0),
        d0,
        d1,
    };
    let mut s = svg_start(axes.f.w, axes.f.h, title);
    axes.draw(&mut s, x_label);
    for (i, c) in curves.iter().enumerate() {
        draw_curve(&mut s, &axes, i, c);
    }
    s.push_str("</svg>\n");
    s
}

/// The latency axis's first and last decade: from the fastest event to the slowest, but at
/// most five decades below the slowest (a cache hit's microseconds would otherwise squeeze the
/// network's milliseconds into a corner); 1 to 10 without any finished event.
fn latency_decades(curves: &[Curve]) -> (i32, i32) {
    let finite = || {
        curves
            .iter()
            .flat_map(|c| c.values.iter().copied())
            .filter(|v| v.is_finite() && *v > 0.0)
    };
    let hi = finite().fold(f64::NAN, f64::max);
    let lo = finite().fold(f64::NAN, f64::min);
    if hi.is_finite() {
        decades(lo.max(hi / 1e5), hi)
    } else {
        (0, 1)
    }
}

/// A [`cdf_chart`]'s axes: its frame, and the decades `d0` to `d1` its log latency axis spans.
struct CdfAxes {
    f: Frame,
    d0: i32,
    d1: i32,
}

impl CdfAxes {
    /// Where latency `v` lies across the plot (a value below the first decade, or not
    /// positive, on its left edge; above the last, on its right).
    fn x_of(&self, v: f64) -> f64 {
        let (d0, d1) = (self.d0, self.d1);
        let Frame { left, pw, .. } = self.f;
        let l = if v > 0.0 { v.log10() } else { d0 as f64 };
        left + pw * ((l - d0 as f64) / (d1 - d0) as f64).clamp(0.0, 1.0)
    }

    /// Where the fraction `f` of events lies up the plot.
    fn y_of(&self, f: f64) -> f64 {
        let Frame { top, ph, .. } = self.f;
        top + ph - ph * f
    }

    /// The grid and labels: a line per quarter of the events, one per decade of latency, and
    /// the axes' names (`x_label` below).
    fn draw(&self, s: &mut String, x_label: &str) {
        let Frame {
            h,
            left,
            top,
            pw,
            ph,
            ..
        } = self.f;
        for k in 0..=4 {
            let f = k as f64 / 4.0;
            let y = self.y_of(f);
            let _ = write!(
                s,
                r##"<line x1="{left}" y1="{y}" x2="{}" y2="{y}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{f:.2}</text>"##,
                left + pw,
                left - 6.0,
                y + 4.0
            );
        }
        for d in self.d0..=self.d1 {
            let v = 10f64.powi(d);
            let x = self.x_of(v);
            let label = if d >= 0 {
                format!("{v:.0}")
            } else {
                format!("{v:.*}", (-d) as usize)
            };
            let _ = write!(
                s,
                r##"<line x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{}" stroke="#ddd"/><text x="{x:.1}" y="{}" text-anchor="middle">{label}</text>"##,
                top + ph,
                top + ph + 16.0
            );
        }
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text><text transform="translate(16,{}) rotate(-90)" text-anchor="middle">fraction of events</text>"#,
            left + pw / 2.0,
            h - 10.0,
            esc(x_label),
            top + ph / 2.0
        );
    }
}

/// Curve `c`, the `i`th: a step up at each finished event (none if no event finished),
/// ending at the fraction that finished, and its legend entry with how many events it has and
/// how many never completed.
fn draw_curve(s: &mut String, axes: &CdfAxes, i: usize, c: &Curve) {
    let Frame {
        w,
        left,
        top,
        right,
        pw,
        ..
    } = axes.f;
    let color = COLORS[i % COLORS.len()];
    let mut v: Vec<f64> = c.values.iter().copied().filter(|v| !v.is_nan()).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let unfinished = v.iter().filter(|x| x.is_infinite()).count();
    if n > unfinished {
        // A step up at each event.
        let mut path = format!("M{:.1},{:.1}", axes.x_of(v[0]), axes.y_of(0.0));
        for (k, x) in v.iter().take_while(|x| x.is_finite()).enumerate() {
            let px = axes.x_of(*x);
            let _ = write!(
                path,
                " L{px:.1},{:.1} L{px:.1},{:.1}",
                axes.y_of(k as f64 / n as f64),
                axes.y_of((k + 1) as f64 / n as f64)
            );
        }
        let _ = write!(
            path,
            " L{:.1},{:.1}",
            left + pw,
            axes.y_of((n - unfinished) as f64 / n as f64)
        );
        let _ = write!(
            s,
            r#"<path d="{path}" fill="none" stroke="{color}" stroke-width="1.8"/>"#
        );
    }
    let note = match unfinished {
        0 => format!("{} ({n})", c.name),
        u => format!("{} ({n}, {u} never)", c.name),
    };
    let y = top + 10.0 + i as f64 * 18.0;
    let _ = write!(
        s,
        r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{color}" stroke-width="3"/><text x="{}" y="{y}">{}</text>"#,
        w - right + 15.0,
        y - 4.0,
        w - right + 29.0,
        y - 4.0,
        w - right + 34.0,
        esc(&note)
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::UNFINISHED;

    #[test]
    fn chart_axes_step_by_round_numbers() {
        assert_eq!(axis_ticks(30_876.0), (10_000.0, 4));
        assert_eq!(axis_ticks(99.0), (20.0, 5));
        assert_eq!(axis_ticks(0.7), (0.2, 4));
        assert_eq!(axis_ticks(5.0), (1.0, 5));
    }

    #[test]
    fn chart_has_a_bar_per_value() {
        let bars = vec![
            Bar {
                group: "hotspot".into(),
                series: "roam".into(),
                value: 1.0,
                whisker: Some((1.0, 1.2)),
                note: String::new(),
                points: vec![0.9, 1.0, 1.0, 1.2, 1.4],
            },
            Bar {
                group: "hotspot".into(),
                series: "mptcp".into(),
                value: 2.0,
                whisker: None,
                note: "2 of 5 unfinished".into(),
                points: vec![2.0, 3.0, 5.0, UNFINISHED, UNFINISHED],
            },
        ];
        let svg = bar_chart("t", "ms", &bars);
        assert_eq!(svg.matches("<rect x=").count(), 2 + 2); // bars + legend swatches
        assert_eq!(svg.matches(">2 of 5 unfinished</text>").count(), 1, "{svg}");
        // A dot per finished trial, and the axis reaches the highest (5.0 above a 2.0 bar).
        assert_eq!(svg.matches("<circle ").count(), 5 + 3, "{svg}");
        assert!(
            svg.contains(">5</text>") || svg.contains(">5.0</text>"),
            "{svg}"
        );
        assert!(svg.ends_with("</svg>\n"));
    }

    #[test]
    fn a_cdf_steps_once_per_event_and_stays_below_one_for_events_never_done() {
        let curves = [
            Curve {
                name: "roam".into(),
                values: vec![12.0, 30.0, 250.0, f64::NAN],
            },
            Curve {
                name: "mptcp".into(),
                values: vec![0.001, 900.0, 4000.0, UNFINISHED],
            },
        ];
        let svg = cdf_chart("t\nsub", "latency (ms)", &curves);
        assert_eq!(svg.matches("<path ").count(), 2, "{svg}");
        // The axis reaches five decades below the slowest event (4 s: 0.04 ms, so from
        // 0.01 ms) to 10 s; the 0.001 ms cache hit sits on its left edge.
        assert!(svg.contains(">roam (3)</text>"), "{svg}");
        assert!(svg.contains(">mptcp (4, 1 never)</text>"), "{svg}");
        assert!(
            svg.contains(">0.01</text>") && svg.contains(">10000</text>"),
            "{svg}"
        );
        assert!(!svg.contains(">0.001</text>"), "{svg}");
        assert!(svg.contains("d=\"M60.0,310.0"), "{svg}");
        // mptcp's line ends at 3/4: y = top + ph * (1 - 0.75) = 40 + 270 / 4.
        assert!(svg.contains(",107.5\""), "{svg}");
        assert_eq!(decades(0.5, 3000.0), (-1, 4));
        assert_eq!(decades(100.0, 100.0), (2, 3));
        assert!(cdf_chart("t", "ms", &[]).ends_with("</svg>\n"));
    }
}
