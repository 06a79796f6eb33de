//! Empirical CDFs, sampled by inverse transform.
//!
//! Format: two columns per line, `value cumulative_probability`, both non-decreasing, the
//! probability within [0, 1]. A draw u ~ U(0,1) maps to the value by linear interpolation
//! between neighbouring points; below the first point it is the first value, and above the last
//! point it is the last value (the Cabernet encounter CDF ends at p = 0.99 at 250 s; the
//! remaining 1% is 250 s, as ../shared/traces/README.md prescribes).

use crate::error::{content_lines, read_text, TraceError};
use rand::Rng;
use std::path::Path;

/// An empirical cumulative distribution function.
#[derive(Clone, Debug, PartialEq)]
pub struct EmpiricalCdf {
    points: Vec<(f64, f64)>,
}

impl EmpiricalCdf {
    /// Read a CDF file.
    pub fn load(path: &Path) -> Result<EmpiricalCdf, TraceError> {
        EmpiricalCdf::parse(&read_text(path)?, path)
    }

    /// Parse CDF text; `path` names the source in errors.
    pub fn parse(text: &str, path: &Path) -> Result<EmpiricalCdf, TraceError> {
        let mut points: Vec<(f64, f64)> = Vec::new();
        for (n, line) in content_lines(text) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            if cols.len() != 2 {
                return Err(TraceError::parse(
                    path,
                    n,
                    format!(
                        "expected two columns `value probability`, found {} column(s)",
                        cols.len()
                    ),
                ));
            }
            let num = |s: &str, what: &str| -> Result<f64, TraceError> {
                s.parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite())
                    .ok_or_else(|| {
                        TraceError::parse(
                            path,
                            n,
                            format!("expected a number for {what}, found `{s}`"),
                        )
                    })
            };
            let x = num(cols[0], "the value")?;
            let p = num(cols[1], "the cumulative probability")?;
            if x < 0.0 {
                return Err(TraceError::parse(path, n, format!("value {x} is negative")));
            }
            if !(0.0..=1.0).contains(&p) {
                return Err(TraceError::parse(
                    path,
                    n,
                    format!("cumulative probability {p} is outside [0, 1]"),
                ));
            }
            if points.last().is_some_and(|q| x < q.0) {
                return Err(TraceError::parse(path, n, "values must be non-decreasing"));
            }
            // Several points at one value are one vertical step of the CDF; digitised CDFs
            // (such as Cabernet's) list them in either order, so only the step as a whole must
            // not go below the previous step.
            let floor = points.iter().rev().find(|q| q.0 < x).map_or(0.0, |q| q.1);
            if p < floor {
                return Err(TraceError::parse(
                    path,
                    n,
                    format!("cumulative probability {p} is below the {floor} of a smaller value"),
                ));
            }
            points.push((x, p));
            let n_points = points.len();
            if n_points >= 2 && points[n_points - 2].0 == x {
                let start = points.iter().rposition(|q| q.0 != x).map_or(0, |i| i + 1);
                points[start..].sort_by(|a, b| a.1.total_cmp(&b.1));
            }
        }
        if points.is_empty() {
            return Err(TraceError::invalid(path, "CDF holds no points"));
        }
        Ok(EmpiricalCdf { points })
    }

    /// The value at cumulative probability `u` (inverse CDF).
    pub fn quantile(&self, u: f64) -> f64 {
        let pts = &self.points;
        if u <= pts[0].1 {
            return pts[0].0;
        }
        for w in pts.windows(2) {
            let ((x0, p0), (x1, p1)) = (w[0], w[1]);
            if u <= p1 {
                if p1 <= p0 {
                    return x1;
                }
                return x0 + (x1 - x0) * (u - p0) / (p1 - p0);
            }
        }
        pts.last().unwrap().0
    }

    /// Draw one sample.
    pub fn sample<R: Rng>(&self, rng: &mut R) -> f64 {
        self.quantile(rng.gen::<f64>())
    }

    /// Mean of the distribution (by numeric integration of the quantile function).
    pub fn mean(&self) -> f64 {
        let n = 10_000;
        (0..n)
            .map(|i| self.quantile((i as f64 + 0.5) / n as f64))
            .sum::<f64>()
            / n as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_transform() {
        let c = EmpiricalCdf::parse("1 0.0\n3 0.5\n5 1.0\n", Path::new("c")).unwrap();
        assert_eq!(c.quantile(0.0), 1.0);
        assert_eq!(c.quantile(0.25), 2.0);
        assert_eq!(c.quantile(0.75), 4.0);
        assert_eq!(c.quantile(1.0), 5.0);
        assert!((c.mean() - 3.0).abs() < 0.01);
    }

    #[test]
    fn errors() {
        let e = EmpiricalCdf::parse("1 0.1\n2\n", Path::new("c.cdf")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "c.cdf:2: expected two columns `value probability`, found 1 column(s)"
        );
        let e = EmpiricalCdf::parse("1 0.1\n2 1.5\n", Path::new("c.cdf")).unwrap_err();
        assert!(e
            .to_string()
            .contains("c.cdf:2: cumulative probability 1.5"));
        let e = EmpiricalCdf::parse("2 0.1\n1 0.2\n", Path::new("c.cdf")).unwrap_err();
        assert!(e
            .to_string()
            .contains("c.cdf:2: values must be non-decreasing"));
        let e = EmpiricalCdf::parse("1 0.3\n2 0.2\n", Path::new("c.cdf")).unwrap_err();
        assert!(e
            .to_string()
            .contains("c.cdf:2: cumulative probability 0.2 is below"));
        // A vertical step listed out of order is accepted and ordered.
        let c = EmpiricalCdf::parse("1 0.1\n2 0.5\n2 0.3\n3 1\n", Path::new("c.cdf")).unwrap();
        assert_eq!(c.quantile(0.4), 2.0);
        let e = EmpiricalCdf::parse("a 0.1\n", Path::new("c.cdf")).unwrap_err();
        assert!(e
            .to_string()
            .contains("expected a number for the value, found `a`"));
        assert!(EmpiricalCdf::parse("# nothing\n", Path::new("c.cdf")).is_err());
    }
}
