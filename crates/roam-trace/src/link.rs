//! A whole link: capacity each way, delay, loss, availability.

use crate::capacity::Capacity;
use crate::piecewise::Piecewise;
use roam_core::{BitRate, Time};
use std::time::Duration;

/// What kind of network a link stands for; used to label statistics the way the paper does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkKind {
    /// WiFi: the intermittent, fast network.
    Wifi,
    /// Cellular (3G/LTE): the always-on, wide-area network.
    Cellular,
    /// Anything else (constant test links, derived baselines).
    Other,
}

/// Everything the emulator needs to reproduce one link.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkTrace {
    /// Server-to-client capacity.
    pub down: Capacity,
    /// Client-to-server capacity.
    pub up: Capacity,
    /// One-way propagation delay (applied in each direction).
    pub delay: Piecewise<Duration>,
    /// Probability that a packet is lost, each direction independently.
    pub loss: f64,
    /// When the link is usable; while it is not, packets in both directions are silently dropped.
    pub availability: Piecewise<bool>,
}

impl LinkTrace {
    /// A constant, always-available link with the same rate both ways.
    pub fn constant(rate: BitRate, one_way_delay: Duration) -> LinkTrace {
        LinkTrace {
            down: Capacity::constant(rate),
            up: Capacity::constant(rate),
            delay: Piecewise::constant(one_way_delay),
            loss: 0.0,
            availability: Piecewise::constant(true),
        }
    }

    /// The same link with `extra` added to its round-trip time (half each way), for sweeps of
    /// a link's RTT.
    pub fn with_extra_rtt(&self, extra: Duration) -> LinkTrace {
        let points = self
            .delay
            .points()
            .iter()
            .map(|(t, d)| (*t, *d + extra / 2))
            .collect();
        LinkTrace {
            // The breakpoints and period are the delay's own, already valid.
            delay: Piecewise::new(points, self.delay.period()).expect("same breakpoints"),
            ..self.clone()
        }
    }

    /// Per-second summary over `[0, duration)`: capacity each way (as a mean rate over the part
    /// of the second the link was available), round-trip time at the start of the second, and the
    /// fraction of the second the link was available.
    pub fn per_second(&self, duration: Duration) -> Vec<SecondSample> {
        let secs = duration.as_secs();
        (0..secs)
            .map(|s| {
                let t0 = Time::from_millis(s * 1000);
                let t1 = Time::from_millis((s + 1) * 1000);
                let available = self.availability.fraction_true(t0, t1);
                let rate = |c: &Capacity| {
                    c.mean_rate(t0, t1)
                        .map(|r| r.as_kbps_f64())
                        .unwrap_or(f64::INFINITY)
                };
                SecondSample {
                    t_s: s,
                    down_kbps: rate(&self.down),
                    up_kbps: rate(&self.up),
                    rtt_ms: self.delay.value_at(t0).as_secs_f64() * 2000.0,
                    available,
                }
            })
            .collect()
    }
}

/// One second of a link, as the paper's baselines and trace table see it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SecondSample {
    /// Second index from the start.
    pub t_s: u64,
    /// Downlink capacity, kbit/s (infinite when unlimited).
    pub down_kbps: f64,
    /// Uplink capacity, kbit/s (infinite when unlimited).
    pub up_kbps: f64,
    /// Round-trip propagation time, ms.
    pub rtt_ms: f64,
    /// Fraction of the second the link was available, in [0, 1].
    pub available: f64,
}

/// A link with its name and kind, as part of a scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct NamedLink {
    /// Name, also the emulator's device name (`wifi`, `cell`).
    pub name: String,
    /// What network it stands for.
    pub kind: LinkKind,
    /// Its behaviour.
    pub trace: LinkTrace,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_rtt_adds_half_each_way_at_every_step() {
        let mut l = LinkTrace::constant(BitRate::mbps(1), Duration::from_millis(20));
        l.delay = Piecewise::new(
            vec![
                (Time::ZERO, Duration::from_millis(20)),
                (Time::from_millis(500), Duration::from_millis(60)),
            ],
            Some(Duration::from_secs(1)),
        )
        .unwrap();
        let m = l.with_extra_rtt(Duration::from_millis(100));
        assert_eq!(*m.delay.value_at(Time::ZERO), Duration::from_millis(70));
        assert_eq!(
            *m.delay.value_at(Time::from_millis(1700)),
            Duration::from_millis(110)
        );
        assert_eq!((m.down, m.loss), (l.down, l.loss));
    }
}
