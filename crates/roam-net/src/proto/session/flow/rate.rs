//! [`ReadRate`]: the receiving application's read rate, smoothed as AFC measures it (Sanadhya
//! thesis ch. III, Algorithm 2, `ar_update`).
//!
//! A sample is the bytes the application read since the last sample over the time since it:
//! `smooth = h * smooth + (1 - h) * bytes / elapsed`, with `h` = 0.5 in the thesis's
//! evaluation. Samples are taken on each application read and on each data arrival while the
//! application has something to read (Algorithm 1, line 30): an application that stops reading
//! with data waiting drives the rate towards zero, one that is merely starved keeps its rate.
//! One sample per event, so that a batch of reads does not overshoot (§3.6).
//!
//! One deviation, configurable: events closer together than `min_interval` are merged into the
//! next sample (their bytes are carried). The thesis samples at every ACK of a simulated TCP
//! whose application reads steadily; a real application's reads come in bursts microseconds
//! or milliseconds apart, between arrivals, so `bytes / elapsed` would swing by orders of
//! magnitude (the default, 20 ms, is `FlowConfig::min_sample_interval`'s). `min_interval` = 0 is the thesis exactly (only zero-length intervals
//! are merged, where Algorithm 2 skips the sample).

use std::time::Duration;

use roam_core::Time;

/// A read rate below this many bytes a second is taken as zero: an application that stopped
/// reading decays geometrically and would otherwise never reach zero (and a receiver would
/// announce ever smaller rates for ever).
pub const MIN_RATE: f64 = 1024.0;

/// The smoothed read rate of one receiving application.
#[derive(Clone, Debug)]
pub struct ReadRate {
    /// Weight of the history (`h`).
    history: f64,
    /// Events closer than this to the last sample are merged into the next one.
    min_interval: Duration,
    /// The smoothed rate, bytes a second.
    smooth: f64,
    /// When the last sample was taken (or the first event seen).
    last: Option<Time>,
    /// Bytes read since the last sample.
    unsampled: u64,
}

impl ReadRate {
    /// A rate with history weight `history` (in [0, 1); the thesis's `h`) and merging interval
    /// `min_interval`.
    pub fn new(history: f64, min_interval: Duration) -> ReadRate {
        let history = if history.is_finite() {
            history.clamp(0.0, 0.999)
        } else {
            0.5
        };
        ReadRate {
            history,
            min_interval,
            smooth: 0.0,
            last: None,
            unsampled: 0,
        }
    }

    /// The application read `bytes` at `now` (Algorithm 3, line 8). Returns whether a sample
    /// was taken.
    pub fn on_read(&mut self, bytes: u64, now: Time) -> bool {
        self.unsampled = self.unsampled.saturating_add(bytes);
        self.sample(now)
    }

    /// Data arrived at `now` while the application has `unread` bytes it could take (Algorithm
    /// 1, line 30: a sample when something was read since the last one, or something waits).
    /// Returns whether a sample was taken.
    pub fn on_arrival(&mut self, unread: u64, now: Time) -> bool {
        if self.last.is_none() {
            self.last = Some(now);
            return false;
        }
        if self.unsampled == 0 && unread == 0 {
            return false;
        }
        self.sample(now)
    }

    /// Algorithm 2: one sample of the bytes read since the last one.
    fn sample(&mut self, now: Time) -> bool {
        let Some(last) = self.last else {
            self.last = Some(now);
            return false;
        };
        let elapsed = now.saturating_since(last);
        if elapsed.is_zero() || elapsed < self.min_interval {
            return false;
        }
        let x = self.unsampled as f64 / elapsed.as_secs_f64();
        let next = self.history * self.smooth + (1.0 - self.history) * x;
        self.smooth = if next.is_finite() { next } else { self.smooth };
        self.unsampled = 0;
        self.last = Some(now);
        true
    }

    /// The smoothed read rate, bytes a second (0 below [`MIN_RATE`]).
    pub fn bytes_per_sec(&self) -> f64 {
        if self.smooth < MIN_RATE {
            0.0
        } else {
            self.smooth
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Time {
        Time::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn the_ewma_follows_algorithm_2_with_h_one_half() {
        let mut r = ReadRate::new(0.5, Duration::ZERO);
        assert!(
            !r.on_arrival(0, at(0)),
            "the first event only starts the clock"
        );
        // 1000 bytes over 100 ms = 10 000 B/s: smooth = 0.5 * 0 + 0.5 * 10 000.
        assert!(r.on_read(1000, at(100)));
        assert_eq!(r.bytes_per_sec(), 5000.0);
        // 3000 bytes over 100 ms = 30 000 B/s: 0.5 * 5000 + 0.5 * 30 000.
        assert!(r.on_read(3000, at(200)));
        assert_eq!(r.bytes_per_sec(), 17_500.0);
        // A read at the same instant is not a sample (zero elapsed); its bytes are carried.
        assert!(!r.on_read(1000, at(200)));
        assert!(r.on_read(1000, at(300)));
        assert_eq!(r.bytes_per_sec(), 0.5 * 17_500.0 + 0.5 * 20_000.0);
    }

    #[test]
    fn arrivals_decay_a_stalled_reader_and_spare_a_starved_one() {
        let mut r = ReadRate::new(0.5, Duration::ZERO);
        r.on_arrival(0, at(0));
        r.on_read(100_000, at(100));
        let before = r.bytes_per_sec();
        // Nothing waits to be read: a starved reader keeps its rate.
        assert!(!r.on_arrival(0, at(150)));
        assert_eq!(r.bytes_per_sec(), before);
        // Data waits and nobody reads: each arrival halves the rate, until it counts as zero.
        assert!(r.on_arrival(5000, at(200)));
        assert_eq!(r.bytes_per_sec(), before / 2.0);
        for t in 0..40 {
            r.on_arrival(5000, at(300 + t * 10));
        }
        assert_eq!(r.bytes_per_sec(), 0.0);
    }

    #[test]
    fn events_closer_than_the_interval_are_merged_into_the_next_sample() {
        let mut r = ReadRate::new(0.5, Duration::from_millis(1));
        r.on_arrival(0, at(0));
        let t = Time::ZERO + Duration::from_micros(10);
        assert!(!r.on_read(256 * 1024, t), "10 µs after: merged");
        assert_eq!(r.bytes_per_sec(), 0.0);
        // The next sample carries the merged bytes: 512 KiB over 2 ms.
        assert!(r.on_read(256 * 1024, at(2)));
        assert_eq!(r.bytes_per_sec(), 0.5 * (512.0 * 1024.0 / 0.002));
        assert!(r.bytes_per_sec().is_finite());
    }

    #[test]
    fn a_weight_that_is_not_a_number_falls_back_to_the_thesis() {
        let mut r = ReadRate::new(f64::NAN, Duration::ZERO);
        r.on_arrival(0, at(0));
        r.on_read(10_000, at(1000));
        assert_eq!(r.bytes_per_sec(), 5000.0);
    }
}
