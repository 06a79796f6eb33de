//! Small SVG time-series charts, so results can be looked at rather than read.
//!
//! A [`Figure`] is a stack of [`Panel`]s sharing one x axis (time). Each panel draws line
//! [`Series`] and optional shaded x ranges ("bands"), such as the periods a link was available.
//! The output is self-contained SVG with no fonts or scripts to fetch.

use std::fmt::Write;

const PALETTE: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// One line on a panel.
#[derive(Clone, Debug, Default)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// (x, y) points in x order.
    pub points: Vec<(f64, f64)>,
}

/// One chart in a figure.
#[derive(Clone, Debug, Default)]
pub struct Panel {
    /// Title drawn above the panel.
    pub title: String,
    /// Label of the y axis, with its unit.
    pub y_label: String,
    /// Lines to draw.
    pub series: Vec<Series>,
    /// Shaded x ranges, e.g. when a link was available.
    pub bands: Vec<(f64, f64)>,
    /// Legend text for the bands.
    pub band_label: Option<String>,
}

/// A stack of panels over a shared x axis.
#[derive(Clone, Debug, Default)]
pub struct Figure {
    /// Title of the whole figure.
    pub title: String,
    /// Label of the shared x axis, with its unit.
    pub x_label: String,
    /// The panels, top to bottom.
    pub panels: Vec<Panel>,
}

impl Figure {
    /// Render as SVG text: the figure's title, then each panel in turn, stacked down the
    /// page, all over the same x range ([`Figure::x_range`]) so that a moment lines up across
    /// panels.
    pub fn to_svg(&self) -> String {
        let height = TOP + self.panels.len() as f64 * (PANEL_H + GAP) + 20.0;
        let (xmin, xmax) = self.x_range();
        let mut out = String::new();
        write_figure_title(&mut out, &self.title, height);
        for (i, p) in self.panels.iter().enumerate() {
            let axes = Axes {
                xmin,
                xmax,
                ymax: y_max(p),
                y0: TOP + i as f64 * (PANEL_H + GAP) + 15.0,
            };
            write_panel(&mut out, p, &axes, &self.x_label);
        }
        out.push_str("</svg>\n");
        out
    }

    /// The x range the panels share: from the least to the greatest x of any point or band
    /// of any panel. With nothing to draw it is [0, 1]; when every x is the same it is one
    /// unit wide, so that the scale never divides by zero.
    fn x_range(&self) -> (f64, f64) {
        let (mut xmin, mut xmax) = (f64::INFINITY, f64::NEG_INFINITY);
        for p in &self.panels {
            for s in &p.series {
                for &(x, _) in &s.points {
                    xmin = xmin.min(x);
                    xmax = xmax.max(x);
                }
            }
            for &(a, b) in &p.bands {
                xmin = xmin.min(a);
                xmax = xmax.max(b);
            }
        }
        if !xmin.is_finite() {
            xmin = 0.0;
            xmax = 1.0;
        }
        if xmax <= xmin {
            xmax = xmin + 1.0;
        }
        (xmin, xmax)
    }
}

// The page's layout, in SVG user units (pixels): a fixed width, a fixed height per panel.
/// Width of the figure.
const WIDTH: f64 = 900.0;
/// Height of one panel's plotting area.
const PANEL_H: f64 = 220.0;
/// Room above the first panel, for the figure's title.
const TOP: f64 = 40.0;
/// Room left of the plotting areas, for the y axis's tick labels and label.
const LEFT: f64 = 70.0;
/// Room right of the plotting areas, for the legends.
const RIGHT: f64 = 170.0;
/// Room between panels, for the x tick labels, the x label and the next panel's title.
const GAP: f64 = 50.0;
/// Width of a plotting area.
const PLOT_W: f64 = WIDTH - LEFT - RIGHT;

/// One panel's mapping from data to the page: x over the figure's shared range, y from 0 at
/// the bottom of the panel (at `y0 + PANEL_H`) to `ymax` at its top (at `y0`). Values outside
/// are clamped into the panel rather than drawn over its neighbours.
struct Axes {
    xmin: f64,
    xmax: f64,
    ymax: f64,
    /// The top of the panel's plotting area.
    y0: f64,
}

impl Axes {
    /// The page x of data x.
    fn x(&self, x: f64) -> f64 {
        LEFT + (x - self.xmin) / (self.xmax - self.xmin) * PLOT_W
    }

    /// The page y of data y.
    fn y(&self, y: f64) -> f64 {
        self.y0 + PANEL_H - (y / self.ymax).clamp(0.0, 1.0) * PANEL_H
    }
}

/// The top of a panel's y axis: its highest point plus 5% headroom, rounded up to a round
/// number ([`nice_ceiling`]) so that the grid lines fall on readable values; 1 when no point
/// is above 0. The axis always starts at 0, so that heights compare as ratios.
fn y_max(p: &Panel) -> f64 {
    let ymax = p
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|&(_, y)| y))
        .fold(0.0f64, f64::max);
    nice_ceiling(if ymax > 0.0 { ymax * 1.05 } else { 1.0 })
}

/// The SVG element, a white background (viewers otherwise show transparency as they like),
/// and the figure's title centred above the panels.
fn write_figure_title(out: &mut String, title: &str, height: f64) {
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        out,
        r#"<rect width="100%" height="100%" fill="white"/><text x="{}" y="22" font-size="16" text-anchor="middle">{}</text>"#,
        WIDTH / 2.0,
        esc(title)
    );
}

/// One panel, back to front: its title, the bands under everything, the grid and ticks, the
/// frame and axis labels, then the lines with their legend.
fn write_panel(out: &mut String, p: &Panel, axes: &Axes, x_label: &str) {
    let _ = writeln!(
        out,
        r#"<text x="{LEFT}" y="{}" font-size="13" font-weight="bold">{}</text>"#,
        axes.y0 - 5.0,
        esc(&p.title)
    );
    write_bands(out, &p.bands, axes);
    write_y_grid(out, axes);
    write_x_ticks(out, axes);
    write_frame(out, axes, &p.y_label, x_label);
    let legend_y = write_series(out, &p.series, axes);
    if let Some(label) = &p.band_label {
        write_band_legend(out, label, legend_y);
    }
}

/// The bands, as pale green rectangles the panel's full height. A band too short to see at
/// this scale is drawn half a pixel wide, so that a brief period is not lost.
fn write_bands(out: &mut String, bands: &[(f64, f64)], axes: &Axes) {
    let y0 = axes.y0;
    for &(a, b) in bands {
        let _ = writeln!(
            out,
            r##"<rect x="{:.1}" y="{y0:.1}" width="{:.1}" height="{PANEL_H}" fill="#2ca02c" fill-opacity="0.12"/>"##,
            axes.x(a),
            (axes.x(b) - axes.x(a)).max(0.5)
        );
    }
}

/// Five horizontal grid lines, from 0 to the top of the y axis in quarters, each labelled
/// at the left.
fn write_y_grid(out: &mut String, axes: &Axes) {
    for k in 0..=4 {
        let v = axes.ymax * k as f64 / 4.0;
        let y = axes.y(v);
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + PLOT_W,
            LEFT - 5.0,
            y + 4.0,
            fmt_num(v)
        );
    }
}

/// Nine ticks along the bottom of the panel, the x range in eighths, each labelled below.
fn write_x_ticks(out: &mut String, axes: &Axes) {
    let bottom = axes.y0 + PANEL_H;
    for k in 0..=8 {
        let v = axes.xmin + (axes.xmax - axes.xmin) * k as f64 / 8.0;
        let x = axes.x(v);
        let _ = writeln!(
            out,
            r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#888"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            bottom,
            bottom + 4.0,
            bottom + 16.0,
            fmt_num(v)
        );
    }
}

/// The frame around the plotting area, the y label turned up the left side, and the x label
/// centred below the ticks (every panel has its own, since panels are read one at a time).
fn write_frame(out: &mut String, axes: &Axes, y_label: &str, x_label: &str) {
    let y0 = axes.y0;
    let _ = writeln!(
        out,
        r##"<rect x="{LEFT}" y="{y0}" width="{PLOT_W}" height="{PANEL_H}" fill="none" stroke="#444"/>"##
    );
    let _ = writeln!(
        out,
        r#"<text transform="translate({:.1},{:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        18.0,
        y0 + PANEL_H / 2.0,
        esc(y_label)
    );
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        LEFT + PLOT_W / 2.0,
        y0 + PANEL_H + 32.0,
        esc(x_label)
    );
}

/// Each series as a line in the next colour of the palette, with its legend entry (a short
/// line of that colour and its name) right of the plot, one under another from the panel's
/// top. Returns where the next legend entry goes.
fn write_series(out: &mut String, series: &[Series], axes: &Axes) -> f64 {
    let lx = LEFT + PLOT_W + 10.0;
    let mut legend_y = axes.y0 + 10.0;
    for (j, s) in series.iter().enumerate() {
        let color = PALETTE[j % PALETTE.len()];
        let mut pts = String::new();
        for &(x, y) in &s.points {
            let _ = write!(pts, "{:.1},{:.1} ", axes.x(x), axes.y(y));
        }
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{color}" stroke-width="1.2" points="{pts}"/>"#
        );
        let _ = writeln!(
            out,
            r#"<line x1="{lx}" y1="{legend_y}" x2="{}" y2="{legend_y}" stroke="{color}" stroke-width="3"/><text x="{}" y="{}">{}</text>"#,
            lx + 18.0,
            lx + 22.0,
            legend_y + 4.0,
            esc(&s.name)
        );
        legend_y += 16.0;
    }
    legend_y
}

/// The bands' legend entry, a swatch of their colour and `label`, under the series' entries
/// at `legend_y`.
fn write_band_legend(out: &mut String, label: &str, legend_y: f64) {
    let lx = LEFT + PLOT_W + 10.0;
    let _ = writeln!(
        out,
        r##"<rect x="{lx}" y="{:.1}" width="18" height="10" fill="#2ca02c" fill-opacity="0.25"/><text x="{}" y="{}">{}</text>"##,
        legend_y - 5.0,
        lx + 22.0,
        legend_y + 4.0,
        esc(label)
    );
}

fn nice_ceiling(v: f64) -> f64 {
    let mag = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if m * mag >= v {
            return m * mag;
        }
    }
    10.0 * mag
}

fn fmt_num(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_series_bands_and_escapes() {
        let fig = Figure {
            title: "a < b".into(),
            x_label: "time (s)".into(),
            panels: vec![Panel {
                title: "wifi".into(),
                y_label: "Mbit/s".into(),
                series: vec![Series {
                    name: "down".into(),
                    points: vec![(0.0, 1.0), (1.0, 3.0)],
                }],
                bands: vec![(0.2, 0.6)],
                band_label: Some("available".into()),
            }],
        };
        let svg = fig.to_svg();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("a &lt; b"));
        assert!(svg.contains("<polyline"));
        assert!(svg.contains("available"));
        assert!(svg.trim_end().ends_with("</svg>"));
    }

    #[test]
    fn nice_ceilings() {
        assert_eq!(nice_ceiling(0.7), 1.0);
        assert_eq!(nice_ceiling(3.2), 5.0);
        assert_eq!(nice_ceiling(21.0), 25.0);
    }
}
