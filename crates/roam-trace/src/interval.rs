//! Interval CSV traces: `t_ms,down_kbps,up_kbps,rtt_ms,available`.
//!
//! Each row gives the link's state from `t_ms` until the next row's `t_ms`. The first row starts
//! at 0, times strictly increase, and the last row lasts as long as the row before it; then the
//! trace repeats (as Mahimahi traces do). `available` is `1`/`0` (or `true`/`false`). A header
//! line naming the columns is optional; `#` starts a comment. This is the form in which roam
//! writes the per-second baselines derived from a scenario.

use crate::capacity::Capacity;
use crate::error::{content_lines, read_text, TraceError};
use crate::link::LinkTrace;
use crate::piecewise::Piecewise;
use roam_core::{BitRate, Time};
use std::path::Path;
use std::time::Duration;

/// The header roam writes and accepts.
pub const HEADER: &str = "t_ms,down_kbps,up_kbps,rtt_ms,available";

/// One row of an interval trace.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IntervalRow {
    /// Start of the interval, ms.
    pub t_ms: u64,
    /// Downlink capacity, kbit/s.
    pub down_kbps: f64,
    /// Uplink capacity, kbit/s.
    pub up_kbps: f64,
    /// Round-trip time, ms (half of it is applied each way).
    pub rtt_ms: f64,
    /// Whether the link is usable.
    pub available: bool,
}

/// A parsed interval trace.
#[derive(Clone, Debug, PartialEq)]
pub struct IntervalTrace {
    /// Rows in time order.
    pub rows: Vec<IntervalRow>,
}

impl IntervalTrace {
    /// Read an interval CSV file.
    pub fn load(path: &Path) -> Result<IntervalTrace, TraceError> {
        IntervalTrace::parse(&read_text(path)?, path)
    }

    /// Parse interval CSV text; `path` names the source in errors.
    pub fn parse(text: &str, path: &Path) -> Result<IntervalTrace, TraceError> {
        let mut rows: Vec<IntervalRow> = Vec::new();
        for (n, line) in content_lines(text) {
            if line.replace(' ', "") == HEADER {
                continue;
            }
            let cols: Vec<&str> = line.split(',').map(str::trim).collect();
            if cols.len() != 5 {
                return Err(TraceError::parse(
                    path,
                    n,
                    format!("expected 5 columns `{HEADER}`, found {}", cols.len()),
                ));
            }
            let num = |i: usize, name: &str| -> Result<f64, TraceError> {
                cols[i]
                    .parse::<f64>()
                    .ok()
                    // Finite, not negative, and (as a duration in ms) short enough for one.
                    .filter(|v| roam_core::seconds(*v / 1e3).is_some())
                    .ok_or_else(|| {
                        TraceError::parse(
                            path,
                            n,
                            format!(
                                "expected a non-negative number for {name}, found `{}`",
                                cols[i]
                            ),
                        )
                    })
            };
            let t_ms = cols[0].parse::<u64>().map_err(|_| {
                TraceError::parse(
                    path,
                    n,
                    format!("expected an integer t_ms, found `{}`", cols[0]),
                )
            })?;
            let available = match cols[4].to_ascii_lowercase().as_str() {
                "1" | "true" => true,
                "0" | "false" => false,
                other => {
                    return Err(TraceError::parse(
                        path,
                        n,
                        format!("expected 1 or 0 for available, found `{other}`"),
                    ))
                }
            };
            match rows.last() {
                None if t_ms != 0 => {
                    return Err(TraceError::parse(path, n, "the first row must have t_ms 0"))
                }
                Some(prev) if t_ms <= prev.t_ms => {
                    return Err(TraceError::parse(
                        path,
                        n,
                        format!("t_ms must increase ({t_ms} after {})", prev.t_ms),
                    ))
                }
                _ => {}
            }
            rows.push(IntervalRow {
                t_ms,
                down_kbps: num(1, "down_kbps")?,
                up_kbps: num(2, "up_kbps")?,
                rtt_ms: num(3, "rtt_ms")?,
                available,
            });
        }
        if rows.is_empty() {
            return Err(TraceError::invalid(path, "interval trace holds no rows"));
        }
        Ok(IntervalTrace { rows })
    }

    /// The trace's period: the last row lasts as long as the one before it (1 s if alone).
    pub fn period(&self) -> Duration {
        let n = self.rows.len();
        let last = self.rows[n - 1].t_ms;
        let step = if n >= 2 {
            last - self.rows[n - 2].t_ms
        } else {
            1000
        };
        Duration::from_millis(last + step)
    }

    /// As a link the emulator can reproduce.
    pub fn to_link(&self) -> LinkTrace {
        let period = Some(self.period());
        fn pw<T: Clone>(
            rows: &[IntervalRow],
            period: Option<Duration>,
            f: impl Fn(&IntervalRow) -> T,
        ) -> Piecewise<T> {
            Piecewise::new(
                rows.iter()
                    .map(|r| (Time::from_millis(r.t_ms), f(r)))
                    .collect(),
                period,
            )
            .expect("rows were validated")
        }
        let kbps = |v: f64| BitRate((v * 1000.0).round() as u64);
        let rows = &self.rows;
        LinkTrace {
            down: Capacity::Rate(pw(rows, period, |r| kbps(r.down_kbps))),
            up: Capacity::Rate(pw(rows, period, |r| kbps(r.up_kbps))),
            delay: pw(rows, period, |r| Duration::from_secs_f64(r.rtt_ms / 2000.0)),
            loss: 0.0,
            availability: pw(rows, period, |r| r.available),
        }
    }

    /// As CSV text with a header.
    pub fn to_csv(&self) -> String {
        let mut s = format!("{HEADER}\n");
        for r in &self.rows {
            s.push_str(&format!(
                "{},{:.1},{:.1},{:.1},{}\n",
                r.t_ms,
                r.down_kbps,
                r.up_kbps,
                r.rtt_ms,
                u8::from(r.available)
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_link() {
        let text = "t_ms,down_kbps,up_kbps,rtt_ms,available\n0,1000,500,40,1\n1000,0,0,40,0\n";
        let t = IntervalTrace::parse(text, Path::new("x.csv")).unwrap();
        assert_eq!(t.rows.len(), 2);
        assert_eq!(t.period(), Duration::from_secs(2));
        let again = IntervalTrace::parse(&t.to_csv(), Path::new("y.csv")).unwrap();
        assert_eq!(t, again);
        let link = t.to_link();
        assert_eq!(
            link.down.bytes_between(Time::ZERO, Time::from_millis(2000)),
            Some(125_000)
        );
        assert!(!*link.availability.value_at(Time::from_millis(1500)));
        assert!(*link.availability.value_at(Time::from_millis(2500)));
        assert_eq!(*link.delay.value_at(Time::ZERO), Duration::from_millis(20));
    }

    #[test]
    fn errors() {
        let cases = [
            ("0,1,2,3\n", "x.csv:1: expected 5 columns"),
            ("5,1,2,3,1\n", "x.csv:1: the first row must have t_ms 0"),
            ("0,1,2,3,1\n0,1,2,3,1\n", "x.csv:2: t_ms must increase"),
            (
                "0,fast,2,3,1\n",
                "x.csv:1: expected a non-negative number for down_kbps, found `fast`",
            ),
            (
                "0,1,2,3,yes\n",
                "x.csv:1: expected 1 or 0 for available, found `yes`",
            ),
            (
                "0,1,-2,3,1\n",
                "x.csv:1: expected a non-negative number for up_kbps",
            ),
        ];
        for (text, want) in cases {
            let e = IntervalTrace::parse(text, Path::new("x.csv")).unwrap_err();
            assert!(e.to_string().starts_with(want), "{e} vs {want}");
        }
    }
}
