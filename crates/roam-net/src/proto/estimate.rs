//! Network estimation: flip-flop filters over active and passive samples (paper §4.1).
//!
//! Kim and Noble's flip-flop filter (MobiCom 2001) runs two exponentially weighted moving
//! averages over the same samples: an *agile* one that follows changes quickly and a *stable* one
//! that resists noise. A control chart over recent samples (mean ± 2.66 × mean moving range, the
//! Shewhart individuals chart) decides which to believe: while the agile estimate stays inside
//! the control limits, the network is behaving as recently observed and the agile value is used;
//! when it leaves them the samples are noisy and the stable value is used.
//!
//! Latency and bandwidth are separated by fitting `time = latency + size / bandwidth` over probes
//! of different sizes ([`SizeFit`]); TCP_INFO gives passive samples of both (minimum RTT and the
//! delivery rate of transfers that were not application-limited).

use std::collections::VecDeque;
use std::time::Duration;

use roam_core::BitRate;

/// Gain of the agile average (weight of a new sample).
pub const AGILE_GAIN: f64 = 0.9;
/// Gain of the stable average.
pub const STABLE_GAIN: f64 = 0.1;
/// Samples in the control chart's window.
pub const CONTROL_WINDOW: usize = 10;

/// Kim and Noble's flip-flop filter.
#[derive(Clone, Debug, Default)]
pub struct FlipFlopFilter {
    agile: Option<f64>,
    stable: Option<f64>,
    window: VecDeque<f64>,
}

impl FlipFlopFilter {
    /// An empty filter.
    pub fn new() -> FlipFlopFilter {
        FlipFlopFilter::default()
    }

    /// Add a sample.
    pub fn update(&mut self, x: f64) {
        if !x.is_finite() {
            return;
        }
        self.agile = Some(
            self.agile
                .map_or(x, |a| AGILE_GAIN * x + (1.0 - AGILE_GAIN) * a),
        );
        self.stable = Some(
            self.stable
                .map_or(x, |s| STABLE_GAIN * x + (1.0 - STABLE_GAIN) * s),
        );
        self.window.push_back(x);
        if self.window.len() > CONTROL_WINDOW {
            self.window.pop_front();
        }
    }

    /// The control limits `(lower, upper)` of the current window, if it has two samples.
    pub fn control_limits(&self) -> Option<(f64, f64)> {
        if self.window.len() < 2 {
            return None;
        }
        let mean = self.window.iter().sum::<f64>() / self.window.len() as f64;
        let mr = self
            .window
            .iter()
            .zip(self.window.iter().skip(1))
            .map(|(a, b)| (a - b).abs())
            .sum::<f64>()
            / (self.window.len() - 1) as f64;
        // A small floor keeps a perfectly steady window from excluding its own value by
        // rounding.
        let half = (2.66 * mr).max(1e-6 * mean.abs());
        Some((mean - half, mean + half))
    }

    /// The current estimate: agile inside the control limits, stable outside.
    pub fn value(&self) -> Option<f64> {
        let agile = self.agile?;
        match self.control_limits() {
            Some((lo, hi)) if agile < lo || agile > hi => self.stable,
            _ => Some(agile),
        }
    }
}

/// Least-squares fit of `time = latency + size / bandwidth` over recent probe samples.
#[derive(Clone, Debug, Default)]
pub struct SizeFit {
    samples: VecDeque<(f64, f64)>,
}

impl SizeFit {
    /// Most samples kept.
    pub const WINDOW: usize = 16;

    /// Record that `size` bytes took `time` from send to response.
    pub fn add(&mut self, size: u64, time: Duration) {
        self.samples.push_back((size as f64, time.as_secs_f64()));
        if self.samples.len() > Self::WINDOW {
            self.samples.pop_front();
        }
    }

    /// `(latency, bandwidth)`, when the samples span at least two sizes and give a positive slope.
    pub fn fit(&self) -> Option<(Duration, BitRate)> {
        let n = self.samples.len() as f64;
        if n < 2.0 {
            return None;
        }
        let mx = self.samples.iter().map(|s| s.0).sum::<f64>() / n;
        let my = self.samples.iter().map(|s| s.1).sum::<f64>() / n;
        let sxx: f64 = self.samples.iter().map(|s| (s.0 - mx).powi(2)).sum();
        if sxx <= 0.0 {
            return None;
        }
        let sxy: f64 = self.samples.iter().map(|s| (s.0 - mx) * (s.1 - my)).sum();
        let slope = sxy / sxx;
        if slope <= 0.0 {
            return None;
        }
        let latency = (my - slope * mx).max(0.0);
        Some((
            Duration::from_secs_f64(latency),
            BitRate::bps((8.0 / slope) as u64),
        ))
    }
}

/// What is known of one network: round-trip time and bandwidth, each through a flip-flop filter.
#[derive(Clone, Debug, Default)]
pub struct NetworkEstimate {
    rtt_us: FlipFlopFilter,
    bandwidth_bps: FlipFlopFilter,
    fit: SizeFit,
}

impl NetworkEstimate {
    /// A passive or active round-trip time sample.
    pub fn rtt_sample(&mut self, rtt: Duration) {
        self.rtt_us.update(rtt.as_secs_f64() * 1e6);
    }

    /// A bandwidth sample (e.g. TCP_INFO delivery rate of a transfer that filled the pipe).
    pub fn bandwidth_sample(&mut self, rate: BitRate) {
        if rate.as_bps() > 0 {
            self.bandwidth_bps.update(rate.as_bps() as f64);
        }
    }

    /// A probe of `size` bytes answered after `time`; feeds the size fit, whose latency and
    /// bandwidth then feed the filters.
    pub fn probe_sample(&mut self, size: u64, time: Duration) {
        self.fit.add(size, time);
        if let Some((lat, bw)) = self.fit.fit() {
            self.rtt_sample(lat);
            self.bandwidth_sample(bw);
        }
    }

    /// Current round-trip time estimate.
    pub fn rtt(&self) -> Option<Duration> {
        self.rtt_us
            .value()
            .map(|us| Duration::from_secs_f64(us.max(0.0) / 1e6))
    }

    /// Current bandwidth estimate.
    pub fn bandwidth(&self) -> Option<BitRate> {
        self.bandwidth_bps
            .value()
            .map(|b| BitRate::bps(b.max(0.0) as u64))
    }

    /// Replace with a peer's reported values (used when we have no samples of our own).
    pub fn adopt(&mut self, rtt: Option<Duration>, bandwidth: Option<BitRate>) {
        if self.rtt_us.value().is_none() {
            if let Some(r) = rtt {
                self.rtt_sample(r);
            }
        }
        if self.bandwidth_bps.value().is_none() {
            if let Some(b) = bandwidth {
                self.bandwidth_sample(b);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flip_flop_is_agile_on_a_level_shift_and_stable_under_noise() {
        let mut f = FlipFlopFilter::new();
        for _ in 0..10 {
            f.update(100.0);
        }
        // Steady: agile and stable agree.
        assert!((f.value().unwrap() - 100.0).abs() < 1e-9);
        // One outlier: the agile average jumps outside the limits of a quiet window; use stable.
        f.update(1000.0);
        let v = f.value().unwrap();
        assert!(v < 300.0, "outlier followed: {v}");
        // A persistent shift fills the window; the limits move with it and the agile value,
        // already at the new level, is used again (the stable one still lags far behind).
        for _ in 0..10 {
            f.update(1000.0);
        }
        assert!(f.value().unwrap() > 990.0);
    }

    #[test]
    fn size_fit_separates_latency_and_bandwidth() {
        let mut fit = SizeFit::default();
        // 20 ms latency, 1 Mbit/s = 125 000 B/s.
        for size in [100u64, 10_000, 50_000, 100] {
            fit.add(
                size,
                Duration::from_secs_f64(0.020 + size as f64 / 125_000.0),
            );
        }
        let (lat, bw) = fit.fit().unwrap();
        assert!((lat.as_secs_f64() - 0.020).abs() < 1e-6, "{lat:?}");
        assert!((bw.as_bps() as f64 - 1e6).abs() < 10.0, "{bw:?}");
        // One size only: no fit.
        let mut one = SizeFit::default();
        one.add(100, Duration::from_millis(5));
        one.add(100, Duration::from_millis(6));
        assert!(one.fit().is_none());
    }
}
