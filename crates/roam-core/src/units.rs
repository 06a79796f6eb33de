//! Typed units (DESIGN.md principle 3) and their text forms.
//!
//! Text forms follow `tc(8)`, which researchers already type for netem: rates in `bit`, `kbit`,
//! `mbit`, `gbit` (bits per second, decimal prefixes); sizes in `b`, `kb`, `mb` (bytes, binary
//! prefixes as tc uses them); durations in `us`, `ms`, `s`, `m`, `h`.

use std::fmt;
use std::time::Duration;

/// A text value did not parse as the unit it should carry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not a {what} (expected {expected})")]
pub struct UnitError {
    /// The text that was given.
    pub text: String,
    /// What kind of quantity was expected, e.g. "rate".
    pub what: &'static str,
    /// Examples of valid forms.
    pub expected: &'static str,
}

/// A data rate in bits per second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BitRate(pub u64);

impl BitRate {
    /// From bits per second.
    pub const fn bps(b: u64) -> BitRate {
        BitRate(b)
    }
    /// From kilobits per second (1000 bit/s).
    pub const fn kbps(k: u64) -> BitRate {
        BitRate(k * 1000)
    }
    /// From megabits per second.
    pub const fn mbps(m: u64) -> BitRate {
        BitRate(m * 1_000_000)
    }
    /// Bits per second.
    pub const fn as_bps(self) -> u64 {
        self.0
    }
    /// Kilobits per second, fractional.
    pub fn as_kbps_f64(self) -> f64 {
        self.0 as f64 / 1e3
    }
    /// Megabits per second, fractional.
    pub fn as_mbps_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
    /// Bytes per second, fractional.
    pub fn bytes_per_sec(self) -> f64 {
        self.0 as f64 / 8.0
    }
    /// Time to serialise `bytes` at this rate; `None` for a zero rate.
    pub fn transmit_time(self, bytes: u64) -> Option<Duration> {
        if self.0 == 0 {
            return None;
        }
        let ns = (bytes as u128 * 8 * 1_000_000_000).div_ceil(self.0 as u128);
        Some(Duration::from_nanos(ns.min(u64::MAX as u128) as u64))
    }
    /// Bytes this rate carries in `d`, rounded down.
    pub fn bytes_in(self, d: Duration) -> u64 {
        (self.0 as u128 * d.as_nanos() / 8 / 1_000_000_000) as u64
    }
    /// Parse a `tc`-style rate: `10mbit`, `600kbit`, `1gbit`, `9600bit`.
    pub fn parse(text: &str) -> Result<BitRate, UnitError> {
        let err = || UnitError {
            text: text.to_string(),
            what: "rate",
            expected: "a number with bit, kbit, mbit or gbit, e.g. 10mbit",
        };
        let t = text.trim().to_ascii_lowercase();
        let (num, mult) = split_suffix(
            &t,
            &[
                ("gbit", 1e9),
                ("mbit", 1e6),
                ("kbit", 1e3),
                ("bit", 1.0),
                ("bps", 1.0),
            ],
        )
        .ok_or_else(err)?;
        let v: f64 = num.parse().map_err(|_| err())?;
        if !v.is_finite() || v < 0.0 {
            return Err(err());
        }
        Ok(BitRate((v * mult).round() as u64))
    }
}

impl fmt::Display for BitRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0 as f64;
        if b >= 1e9 {
            write!(f, "{}gbit", trim(b / 1e9))
        } else if b >= 1e6 {
            write!(f, "{}mbit", trim(b / 1e6))
        } else if b >= 1e3 {
            write!(f, "{}kbit", trim(b / 1e3))
        } else {
            write!(f, "{}bit", self.0)
        }
    }
}

/// A number of bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bytes(pub u64);

impl Bytes {
    /// Parse a `tc`-style size: `1500b`, `64kb` (64 KiB), `1mb` (1 MiB); a bare number is bytes.
    pub fn parse(text: &str) -> Result<Bytes, UnitError> {
        let err = || UnitError {
            text: text.to_string(),
            what: "size",
            expected: "a number with b, kb or mb, e.g. 64kb",
        };
        let t = text.trim().to_ascii_lowercase();
        let (num, mult) = split_suffix(
            &t,
            &[
                ("mb", 1024.0 * 1024.0),
                ("kb", 1024.0),
                ("k", 1024.0),
                ("b", 1.0),
                ("", 1.0),
            ],
        )
        .ok_or_else(err)?;
        let v: f64 = num.parse().map_err(|_| err())?;
        if !v.is_finite() || v < 0.0 {
            return Err(err());
        }
        Ok(Bytes((v * mult).round() as u64))
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}b", self.0)
    }
}

/// `v` seconds as a `Duration`, or `None` if `v` is negative, not finite, or longer than a
/// `Duration` holds (2^64 s). Every duration read from a file, flag or frame goes through
/// here or [`parse_duration`]: `Duration::from_secs_f64` panics on such values.
pub fn seconds(v: f64) -> Option<Duration> {
    if v < 0.0 {
        return None;
    }
    Duration::try_from_secs_f64(v).ok()
}

/// Parse a duration: `20ms`, `1.5s`, `250us`, `2m`, `1h`. A bare number is rejected: a delay
/// without a unit is a classic netem mistake.
pub fn parse_duration(text: &str) -> Result<Duration, UnitError> {
    let err = || UnitError {
        text: text.to_string(),
        what: "duration",
        expected: "a number with us, ms, s, m or h, e.g. 20ms",
    };
    let t = text.trim().to_ascii_lowercase();
    let (num, mult) = split_suffix(
        &t,
        &[
            ("us", 1e-6),
            ("ms", 1e-3),
            ("s", 1.0),
            ("m", 60.0),
            ("h", 3600.0),
        ],
    )
    .ok_or_else(err)?;
    let v: f64 = num.parse().map_err(|_| err())?;
    if !v.is_finite() || v < 0.0 {
        return Err(err());
    }
    seconds(v * mult).ok_or_else(|| UnitError {
        text: text.to_string(),
        what: "duration",
        expected: "at most 2^64 seconds",
    })
}

fn split_suffix<'a>(t: &'a str, suffixes: &[(&str, f64)]) -> Option<(&'a str, f64)> {
    for (s, m) in suffixes {
        if let Some(num) = t.strip_suffix(s) {
            if !num.is_empty() && num.chars().all(|c| c.is_ascii_digit() || c == '.') {
                return Some((num, *m));
            }
        }
    }
    None
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(BitRate::parse("10mbit").unwrap(), BitRate::mbps(10));
        assert_eq!(BitRate::parse("0.6mbit").unwrap(), BitRate::kbps(600));
        assert_eq!(BitRate::parse("1GBIT").unwrap(), BitRate::mbps(1000));
        assert!(BitRate::parse("10").is_err());
        assert!(BitRate::parse("mbit").is_err());
        assert!(BitRate::parse("-1mbit").is_err());
        assert!(BitRate::parse("10mb").is_err());
        assert_eq!(BitRate::kbps(600).to_string(), "600kbit");
        assert_eq!(BitRate::kbps(2500).to_string(), "2.5mbit");
    }

    #[test]
    fn sizes_and_durations() {
        assert_eq!(Bytes::parse("64kb").unwrap(), Bytes(65536));
        assert_eq!(Bytes::parse("1500").unwrap(), Bytes(1500));
        assert!(Bytes::parse("lots").is_err());
        assert_eq!(parse_duration("20ms").unwrap(), Duration::from_millis(20));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("20").is_err());
        let e = parse_duration("20x").unwrap_err();
        assert!(e.to_string().contains("20x") && e.to_string().contains("ms"));
        // Found by fuzz/scenario_file: a delay longer than a Duration holds once panicked.
        let e = parse_duration("8888888888888888888888888888885ms").unwrap_err();
        assert!(e.to_string().contains("2^64"), "{e}");
    }

    #[test]
    fn transmit_time() {
        let r = BitRate::mbps(12);
        assert_eq!(r.transmit_time(1500), Some(Duration::from_millis(1)));
        assert_eq!(BitRate(0).transmit_time(1), None);
        assert_eq!(r.bytes_in(Duration::from_millis(1)), 1500);
    }
}
