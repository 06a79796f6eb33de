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
    /// Render as SVG text.
    pub fn to_svg(&self) -> String {
        let width = 900.0;
        let panel_h = 220.0;
        let top = 40.0;
        let left = 70.0;
        let right = 170.0;
        let gap = 50.0;
        let height = top + self.panels.len() as f64 * (panel_h + gap) + 20.0;
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
        let plot_w = width - left - right;
        let mut out = String::new();
        let _ = writeln!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(
            out,
            r#"<rect width="100%" height="100%" fill="white"/><text x="{}" y="22" font-size="16" text-anchor="middle">{}</text>"#,
            width / 2.0,
            esc(&self.title)
        );
        for (i, p) in self.panels.iter().enumerate() {
            let y0 = top + i as f64 * (panel_h + gap) + 15.0;
            let ymax = p
                .series
                .iter()
                .flat_map(|s| s.points.iter().map(|&(_, y)| y))
                .fold(0.0f64, f64::max);
            let ymax = nice_ceiling(if ymax > 0.0 { ymax * 1.05 } else { 1.0 });
            let sx = |x: f64| left + (x - xmin) / (xmax - xmin) * plot_w;
            let sy = |y: f64| y0 + panel_h - (y / ymax).clamp(0.0, 1.0) * panel_h;
            let _ = writeln!(
                out,
                r#"<text x="{left}" y="{}" font-size="13" font-weight="bold">{}</text>"#,
                y0 - 5.0,
                esc(&p.title)
            );
            for &(a, b) in &p.bands {
                let _ = writeln!(
                    out,
                    r##"<rect x="{:.1}" y="{y0:.1}" width="{:.1}" height="{panel_h}" fill="#2ca02c" fill-opacity="0.12"/>"##,
                    sx(a),
                    (sx(b) - sx(a)).max(0.5)
                );
            }
            for k in 0..=4 {
                let v = ymax * k as f64 / 4.0;
                let y = sy(v);
                let _ = writeln!(
                    out,
                    r##"<line x1="{left}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                    left + plot_w,
                    left - 5.0,
                    y + 4.0,
                    fmt_num(v)
                );
            }
            for k in 0..=8 {
                let v = xmin + (xmax - xmin) * k as f64 / 8.0;
                let x = sx(v);
                let _ = writeln!(
                    out,
                    r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#888"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                    y0 + panel_h,
                    y0 + panel_h + 4.0,
                    y0 + panel_h + 16.0,
                    fmt_num(v)
                );
            }
            let _ = writeln!(
                out,
                r##"<rect x="{left}" y="{y0}" width="{plot_w}" height="{panel_h}" fill="none" stroke="#444"/>"##
            );
            let _ = writeln!(
                out,
                r#"<text transform="translate({:.1},{:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
                18.0,
                y0 + panel_h / 2.0,
                esc(&p.y_label)
            );
            let _ = writeln!(
                out,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                left + plot_w / 2.0,
                y0 + panel_h + 32.0,
                esc(&self.x_label)
            );
            let mut legend_y = y0 + 10.0;
            for (j, s) in p.series.iter().enumerate() {
                let color = PALETTE[j % PALETTE.len()];
                let mut pts = String::new();
                for &(x, y) in &s.points {
                    let _ = write!(pts, "{:.1},{:.1} ", sx(x), sy(y));
                }
                let _ = writeln!(
                    out,
                    r#"<polyline fill="none" stroke="{color}" stroke-width="1.2" points="{pts}"/>"#
                );
                let lx = left + plot_w + 10.0;
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
            if let Some(label) = &p.band_label {
                let lx = left + plot_w + 10.0;
                let _ = writeln!(
                    out,
                    r##"<rect x="{lx}" y="{:.1}" width="18" height="10" fill="#2ca02c" fill-opacity="0.25"/><text x="{}" y="{}">{}</text>"##,
                    legend_y - 5.0,
                    lx + 22.0,
                    legend_y + 4.0,
                    esc(label)
                );
            }
        }
        out.push_str("</svg>\n");
        out
    }
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
