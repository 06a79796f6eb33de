//! Time as an input (DESIGN.md principle 2).
//!
//! Core state machines never read the wall clock: they are handed a [`Time`], a count of
//! nanoseconds since some epoch chosen by the driver (the start of an emulation, the start of a
//! simulated drive). Drivers that do run in real time obtain it from a [`Clock`].

use std::fmt;
use std::ops::{Add, Sub};
use std::time::{Duration, Instant};

/// A point in time: nanoseconds since the driver's epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(pub u64);

impl Time {
    /// The epoch itself.
    pub const ZERO: Time = Time(0);
    /// A time later than any a run reaches; used for "never".
    pub const MAX: Time = Time(u64::MAX);

    /// From nanoseconds since the epoch.
    pub const fn from_nanos(ns: u64) -> Time {
        Time(ns)
    }
    /// From milliseconds since the epoch.
    pub const fn from_millis(ms: u64) -> Time {
        Time(ms * 1_000_000)
    }
    /// From (possibly fractional) seconds since the epoch; negative values clamp to zero.
    pub fn from_secs_f64(s: f64) -> Time {
        Time((s.max(0.0) * 1e9).round() as u64)
    }
    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Whole milliseconds since the epoch.
    pub const fn as_millis(self) -> u64 {
        self.0 / 1_000_000
    }
    /// Seconds since the epoch.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    /// The time `d` before this one, the epoch if that is earlier.
    pub fn saturating_sub(self, d: Duration) -> Time {
        Time(
            self.0
                .saturating_sub(d.as_nanos().min(u64::MAX as u128) as u64),
        )
    }
    /// Time elapsed since `earlier`, zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Time) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Time {
    type Output = Time;
    fn add(self, d: Duration) -> Time {
        Time(
            self.0
                .saturating_add(d.as_nanos().min(u64::MAX as u128) as u64),
        )
    }
}

impl Sub<Time> for Time {
    type Output = Duration;
    fn sub(self, rhs: Time) -> Duration {
        self.saturating_since(rhs)
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3}s", self.as_secs_f64())
    }
}

/// A real-time source of [`Time`] for drivers: nanoseconds since the clock was created.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    epoch: Instant,
}

impl Clock {
    /// A clock whose epoch is now.
    pub fn start() -> Clock {
        Clock {
            epoch: Instant::now(),
        }
    }
    /// A clock with the given epoch.
    pub fn with_epoch(epoch: Instant) -> Clock {
        Clock { epoch }
    }
    /// The epoch as an [`Instant`].
    pub fn epoch(&self) -> Instant {
        self.epoch
    }
    /// The current time.
    pub fn now(&self) -> Time {
        Time(self.epoch.elapsed().as_nanos() as u64)
    }
    /// The [`Instant`] at which `t` falls.
    pub fn instant(&self, t: Time) -> Instant {
        self.epoch + Duration::from_nanos(t.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic() {
        let t = Time::from_millis(1500);
        assert_eq!(t + Duration::from_millis(500), Time::from_millis(2000));
        assert_eq!(Time::from_millis(2000) - t, Duration::from_millis(500));
        assert_eq!(t - Time::from_millis(2000), Duration::ZERO);
        assert_eq!(Time::from_secs_f64(1.5), t);
        assert_eq!(Time::MAX + Duration::from_secs(1), Time::MAX);
    }
}
