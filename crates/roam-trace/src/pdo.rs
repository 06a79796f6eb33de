//! Mahimahi packet-delivery-opportunity (PDO) traces.
//!
//! One integer per line, a millisecond timestamp from the trace start; each line is one
//! opportunity for one [`MTU_BYTES`]-byte packet to leave the bottleneck queue, and a timestamp
//! repeated k times gives k opportunities in that millisecond. When the trace ends it repeats,
//! with period equal to the last timestamp (Mahimahi's semantics, NSDI 2013 / ATC 2015).

use crate::error::{content_lines, read_text, TraceError};
use roam_core::Time;
use std::path::Path;
use std::time::Duration;

/// Bytes one delivery opportunity may carry (a full Ethernet-MTU packet).
pub const MTU_BYTES: u64 = 1500;

/// A parsed PDO trace: sorted millisecond timestamps repeating every `period_ms`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PdoTrace {
    ms: Vec<u64>,
    period_ms: u64,
    name: String,
}

/// A position in the infinite sequence of opportunities: the `idx`-th entry of repetition `cycle`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct OppCursor {
    cycle: u64,
    idx: usize,
}

/// The latest timestamp a trace may hold (one year, in ms): a trace's period repeats for as long
/// as a run lasts, and a time past about 584 years does not fit the emulator's nanosecond clock
/// (a timestamp of 18446744073710 ms overflowed it; found by fuzzing).
pub const MAX_TIMESTAMP_MS: u64 = 365 * 86_400 * 1000;

impl PdoTrace {
    /// Read a PDO file.
    pub fn load(path: &Path) -> Result<PdoTrace, TraceError> {
        let text = read_text(path)?;
        PdoTrace::parse(&text, path)
    }

    /// Parse PDO text; `path` names the source in errors.
    pub fn parse(text: &str, path: &Path) -> Result<PdoTrace, TraceError> {
        let mut ms = Vec::new();
        for (n, line) in content_lines(text) {
            let v: u64 = line.parse().map_err(|_| {
                TraceError::parse(
                    path,
                    n,
                    format!(
                        "expected a non-negative integer millisecond timestamp, found `{line}`"
                    ),
                )
            })?;
            if v > MAX_TIMESTAMP_MS {
                return Err(TraceError::parse(
                    path,
                    n,
                    format!(
                        "timestamp {v} ms is past the longest trace period roam accepts \
                         ({MAX_TIMESTAMP_MS} ms, one year)"
                    ),
                ));
            }
            if let Some(&prev) = ms.last() {
                if v < prev {
                    return Err(TraceError::parse(
                        path,
                        n,
                        format!("timestamps must not decrease ({v} after {prev})"),
                    ));
                }
            }
            ms.push(v);
        }
        let period_ms = *ms
            .last()
            .ok_or_else(|| TraceError::invalid(path, "trace holds no delivery opportunities"))?;
        if period_ms == 0 {
            return Err(TraceError::invalid(
                path,
                "the last timestamp must be positive (it is the trace's period)",
            ));
        }
        let name = path
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(PdoTrace {
            ms,
            period_ms,
            name,
        })
    }

    /// Build from timestamps directly (tests, generators).
    pub fn from_millis(ms: Vec<u64>, name: &str) -> Result<PdoTrace, TraceError> {
        let text: String = ms.iter().map(|m| format!("{m}\n")).collect();
        PdoTrace::parse(&text, Path::new(name))
    }

    /// The same trace with `k` times the opportunities (`k` > 0), for sweeps of a link's rate:
    /// the i-th opportunity becomes floor((i+1)k) - floor(ik) opportunities in its
    /// millisecond, so the rate scales by `k` evenly along the trace (a trace's bursts and
    /// gaps stay where they were). The last opportunity is always kept, since it fixes the
    /// period: at most one extra per period.
    pub fn scaled(&self, k: f64) -> Result<PdoTrace, String> {
        if !(k.is_finite() && k > 0.0) {
            return Err(format!("a rate factor must be positive, not {k}"));
        }
        let mut ms = Vec::with_capacity((self.ms.len() as f64 * k).ceil() as usize + 1);
        for (i, &t) in self.ms.iter().enumerate() {
            let copies = ((i + 1) as f64 * k).floor() - (i as f64 * k).floor();
            ms.extend(std::iter::repeat_n(t, copies as usize));
        }
        if ms.last() != Some(&self.period_ms) {
            ms.push(self.period_ms);
        }
        Ok(PdoTrace {
            ms,
            period_ms: self.period_ms,
            name: format!("{} x{k}", self.name),
        })
    }

    /// The same trace started again at `t` (to the millisecond below it): its first
    /// opportunities fall just after `t`, as at time zero, and it repeats from there. What an
    /// emulated link's `restart` command does, so that phases of an experiment that start at
    /// different times meet the same stretch of a drive. A trace with an opportunity at 0 and
    /// at its end (both, as at every period's turn) has both at `t` too: one more than at
    /// time zero, where no period came before.
    pub fn starting_at(&self, t: Time) -> PdoTrace {
        let shift = (t.as_nanos() / 1_000_000) % self.period_ms;
        if shift == 0 {
            return self.clone();
        }
        // An opportunity at `m` of a period moves to `m + shift`, into the next period when
        // that is past the end: the period's timestamps rotate.
        let mut ms: Vec<u64> = self
            .ms
            .iter()
            .map(|&m| {
                let m = m + shift;
                if m > self.period_ms {
                    m - self.period_ms
                } else {
                    m
                }
            })
            .collect();
        ms.sort_unstable();
        PdoTrace {
            ms,
            period_ms: self.period_ms,
            name: self.name.clone(),
        }
    }

    /// File name the trace came from.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The repetition period.
    pub fn period(&self) -> Duration {
        Duration::from_millis(self.period_ms)
    }

    /// Opportunities per period.
    pub fn len(&self) -> usize {
        self.ms.len()
    }

    /// Whether the trace is empty (never true for a parsed trace).
    pub fn is_empty(&self) -> bool {
        self.ms.is_empty()
    }

    /// Time of the opportunity at `c`.
    pub fn time_of(&self, c: OppCursor) -> Time {
        Time::from_millis(c.cycle * self.period_ms + self.ms[c.idx])
    }

    /// The opportunity after `c`.
    pub fn advance(&self, c: OppCursor) -> OppCursor {
        if c.idx + 1 < self.ms.len() {
            OppCursor {
                cycle: c.cycle,
                idx: c.idx + 1,
            }
        } else {
            OppCursor {
                cycle: c.cycle + 1,
                idx: 0,
            }
        }
    }

    /// The first opportunity strictly after `t`.
    pub fn first_after(&self, t: Time) -> OppCursor {
        // Opportunities sit on whole milliseconds, so the first one after t is the first one
        // after floor(t) in milliseconds.
        let t_ms = t.as_nanos() / 1_000_000;
        let cycle = t_ms / self.period_ms;
        let local = t_ms % self.period_ms;
        let idx = self.ms.partition_point(|&m| m <= local);
        if idx < self.ms.len() {
            OppCursor { cycle, idx }
        } else {
            OppCursor {
                cycle: cycle + 1,
                idx: 0,
            }
        }
    }

    /// Number of opportunities at or before `t`, counting from time zero.
    pub fn count_at_or_before(&self, t: Time) -> u64 {
        let t_ms = t.as_nanos() / 1_000_000;
        let cycle = t_ms / self.period_ms;
        let local = t_ms % self.period_ms;
        cycle * self.ms.len() as u64 + self.ms.partition_point(|&m| m <= local) as u64
    }

    /// Bytes of capacity in `[t0, t1)` (opportunities at or after t0 and before t1).
    pub fn bytes_between(&self, t0: Time, t1: Time) -> u64 {
        if t1 <= t0 {
            return 0;
        }
        let before = |t: Time| {
            if t.0 == 0 {
                0
            } else {
                self.count_at_or_before(Time(t.0 - 1))
            }
        };
        (before(t1) - before(t0)) * MTU_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_started_again_carries_from_then_what_it_carried_from_zero() {
        let t = PdoTrace::from_millis(vec![0, 3, 3, 9, 10, 14, 20], "t").unwrap();
        let ms = Time::from_millis;
        for at in [0, 1, 6, 14, 20, 27, 200] {
            let g = t.starting_at(ms(at));
            assert_eq!(g.period(), t.period());
            for a in 0..45 {
                for len in [1, 5, 21, 40] {
                    let (again, first) = (
                        g.bytes_between(ms(at + a), ms(at + a + len)),
                        t.bytes_between(ms(a), ms(a + len)),
                    );
                    if a == 0 && at != 0 {
                        // The opportunity at the end of the period before (at 20) falls
                        // at the restart too; at time zero there was no period before.
                        assert_eq!(again, first + MTU_BYTES, "at {at} for {len}");
                    } else {
                        assert_eq!(again, first, "at {at} from {a} for {len}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_scaled_trace_spreads_its_opportunities_evenly_and_keeps_its_period() {
        let t = PdoTrace::from_millis(vec![1, 2, 3, 4, 5, 6, 7, 8], "t").unwrap();
        let half = t.scaled(0.5).unwrap();
        assert_eq!(half.ms, vec![2, 4, 6, 8]);
        assert_eq!(half.period(), t.period());
        let double = t.scaled(2.0).unwrap();
        assert_eq!(double.len(), 16);
        assert_eq!(&double.ms[..4], &[1, 1, 2, 2]);
        // Thinned below one per period: the last stays, and fixes the period.
        let sparse = t.scaled(0.01).unwrap();
        assert_eq!((sparse.ms.clone(), sparse.period()), (vec![8], t.period()));
        let x15 = t.scaled(1.5).unwrap();
        assert_eq!(x15.len(), 12);
        assert!(t.scaled(0.0).is_err() && t.scaled(f64::NAN).is_err());
    }

    #[test]
    fn parses_and_repeats() {
        let t = PdoTrace::from_millis(vec![1, 1, 3, 4], "t").unwrap();
        assert_eq!(t.period(), Duration::from_millis(4));
        let c = t.first_after(Time::ZERO);
        assert_eq!(t.time_of(c), Time::from_millis(1));
        let c = t.advance(c);
        assert_eq!(t.time_of(c), Time::from_millis(1));
        let c = t.first_after(Time::from_millis(4));
        assert_eq!(t.time_of(c), Time::from_millis(5));
        assert_eq!(t.bytes_between(Time::ZERO, Time::from_millis(8)), 7 * 1500);
        assert_eq!(
            t.bytes_between(Time::from_millis(1), Time::from_millis(2)),
            2 * 1500
        );
    }

    #[test]
    fn errors_name_line_and_expectation() {
        let e = PdoTrace::parse("1\n2\nx\n", Path::new("f.down")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "f.down:3: expected a non-negative integer millisecond timestamp, found `x`"
        );
        let e = PdoTrace::parse("5\n2\n", Path::new("f")).unwrap_err();
        assert!(e
            .to_string()
            .starts_with("f:2: timestamps must not decrease"));
        assert!(PdoTrace::parse("", Path::new("f")).is_err());
        assert!(PdoTrace::parse("0\n0\n", Path::new("f")).is_err());
    }

    /// The fuzzer's input (fuzz/regressions/mahimahi_trace/): a timestamp the clock cannot hold
    /// was accepted, and the first delivery time overflowed.
    #[test]
    fn a_timestamp_past_the_clock_is_refused() {
        let input =
            include_str!("../../../fuzz/regressions/mahimahi_trace/timestamp-beyond-time.down");
        let e = PdoTrace::parse(input, Path::new("f")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("f:1: timestamp 18446744073710 ms is past"),
            "{e}"
        );
        let year = format!("{MAX_TIMESTAMP_MS}\n");
        let t = PdoTrace::parse(&year, Path::new("f")).unwrap();
        let c = t.first_after(Time::ZERO);
        assert_eq!(t.time_of(c), Time::from_millis(MAX_TIMESTAMP_MS));
    }

    #[test]
    fn first_after_is_strict() {
        let t = PdoTrace::from_millis(vec![0, 2, 2, 5], "t").unwrap();
        let c = t.first_after(Time::from_nanos(2_000_000));
        assert_eq!(t.time_of(c), Time::from_millis(5));
        let c = t.first_after(Time::from_nanos(1_999_999));
        assert_eq!(t.time_of(c), Time::from_millis(2));
    }
}
