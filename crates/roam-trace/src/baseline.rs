//! The paper's single-link baselines, derived per second from a multi-link scenario.
//!
//! Intentional Networking (seed 001, section 7.1) compares against strategies that use one
//! virtual link rebuilt each second from the real networks: an oracle picks, for each second,
//! - **best-latency** migration: the available network with the lowest RTT;
//! - **best-bandwidth** migration: the available network with the highest downlink bandwidth;
//! - **idealized aggregation**: bandwidth = sum of the available networks, latency = the minimum.
//!
//! A network counts as available in a second if it was available for any part of it; its
//! capacity is then scaled by the fraction of the second it was available.

use crate::error::TraceError;
use crate::interval::{IntervalRow, IntervalTrace};
use crate::link::SecondSample;
use crate::scenario::Scenario;
use std::time::Duration;

/// Which single-link baseline to derive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Baseline {
    /// Oracle migration to the lowest-RTT network each second.
    BestLatency,
    /// Oracle migration to the highest-bandwidth network each second.
    BestBandwidth,
    /// One link with the sum of the bandwidths and the minimum latency.
    Aggregation,
}

impl Baseline {
    /// All baselines, in the paper's order.
    pub const ALL: [Baseline; 3] = [
        Baseline::BestLatency,
        Baseline::BestBandwidth,
        Baseline::Aggregation,
    ];

    /// Parse `best-latency`, `best-bandwidth` or `aggregation`.
    pub fn parse(s: &str) -> Result<Baseline, TraceError> {
        match s {
            "best-latency" => Ok(Baseline::BestLatency),
            "best-bandwidth" => Ok(Baseline::BestBandwidth),
            "aggregation" | "idealized-aggregation" => Ok(Baseline::Aggregation),
            other => Err(TraceError::Unknown {
                what: "baseline",
                name: other.into(),
                expected: "best-latency, best-bandwidth, aggregation".into(),
            }),
        }
    }

    /// The name `parse` accepts.
    pub fn name(self) -> &'static str {
        match self {
            Baseline::BestLatency => "best-latency",
            Baseline::BestBandwidth => "best-bandwidth",
            Baseline::Aggregation => "aggregation",
        }
    }
}

/// Derive a baseline's one-link interval trace over `[0, duration)`.
pub fn derive_baseline(
    scenario: &Scenario,
    baseline: Baseline,
    duration: Duration,
) -> Result<IntervalTrace, TraceError> {
    let per_link: Vec<Vec<SecondSample>> = scenario
        .links
        .iter()
        .map(|l| l.trace.per_second(duration))
        .collect();
    let secs = duration.as_secs().max(1) as usize;
    let mut rows = Vec::with_capacity(secs);
    for s in 0..secs {
        let avail: Vec<SecondSample> = per_link
            .iter()
            .filter_map(|l| l.get(s).copied())
            .filter(|x| x.available > 0.0)
            .map(|x| SecondSample {
                down_kbps: x.down_kbps * x.available,
                up_kbps: x.up_kbps * x.available,
                ..x
            })
            .collect();
        let row = |d: f64, u: f64, r: f64, a: bool| IntervalRow {
            t_ms: s as u64 * 1000,
            down_kbps: d,
            up_kbps: u,
            rtt_ms: r,
            available: a,
        };
        if avail
            .iter()
            .any(|x| !x.down_kbps.is_finite() || !x.up_kbps.is_finite())
        {
            return Err(TraceError::Unsupported(format!(
                "scenario `{}` has a link with unlimited capacity; baselines need rates or traces",
                scenario.name
            )));
        }
        let r = if avail.is_empty() {
            let rtt = per_link
                .iter()
                .filter_map(|l| l.get(s))
                .map(|x| x.rtt_ms)
                .fold(f64::INFINITY, f64::min);
            row(0.0, 0.0, if rtt.is_finite() { rtt } else { 0.0 }, false)
        } else {
            match baseline {
                Baseline::BestLatency => {
                    let b = avail
                        .iter()
                        .min_by(|a, b| {
                            a.rtt_ms
                                .total_cmp(&b.rtt_ms)
                                .then(b.down_kbps.total_cmp(&a.down_kbps))
                        })
                        .unwrap();
                    row(b.down_kbps, b.up_kbps, b.rtt_ms, true)
                }
                Baseline::BestBandwidth => {
                    let b = avail
                        .iter()
                        .max_by(|a, b| {
                            a.down_kbps
                                .total_cmp(&b.down_kbps)
                                .then(b.rtt_ms.total_cmp(&a.rtt_ms))
                        })
                        .unwrap();
                    row(b.down_kbps, b.up_kbps, b.rtt_ms, true)
                }
                Baseline::Aggregation => row(
                    avail.iter().map(|x| x.down_kbps).sum(),
                    avail.iter().map(|x| x.up_kbps).sum(),
                    avail.iter().map(|x| x.rtt_ms).fold(f64::INFINITY, f64::min),
                    true,
                ),
            }
        };
        rows.push(r);
    }
    Ok(IntervalTrace { rows })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hotspot_baselines() {
        let s = Scenario::by_name("hotspot", 1).unwrap();
        let d = Duration::from_secs(3);
        let lat = derive_baseline(&s, Baseline::BestLatency, d).unwrap();
        assert_eq!(lat.rows.len(), 3);
        assert_eq!((lat.rows[0].down_kbps, lat.rows[0].rtt_ms), (600.0, 20.0));
        let bw = derive_baseline(&s, Baseline::BestBandwidth, d).unwrap();
        assert_eq!((bw.rows[0].down_kbps, bw.rows[0].rtt_ms), (2000.0, 400.0));
        let agg = derive_baseline(&s, Baseline::Aggregation, d).unwrap();
        assert_eq!((agg.rows[0].down_kbps, agg.rows[0].rtt_ms), (2600.0, 20.0));
        assert!(agg.rows.iter().all(|r| r.available));
    }

    #[test]
    fn intermittent_follows_wifi() {
        let s = Scenario::by_name("intermittent", 3).unwrap();
        let d = Duration::from_secs(600);
        let wifi = s.links[0].trace.per_second(d);
        let lat = derive_baseline(&s, Baseline::BestLatency, d).unwrap();
        for (w, r) in wifi.iter().zip(&lat.rows) {
            if w.available == 1.0 {
                assert_eq!(r.rtt_ms, 60.0);
            } else if w.available == 0.0 {
                assert_eq!((r.rtt_ms, r.down_kbps), (400.0, 300.0));
            }
        }
        assert!(lat.rows.iter().any(|r| r.rtt_ms == 400.0));
        assert!(lat.rows.iter().any(|r| r.rtt_ms == 60.0));
        assert_eq!(
            Baseline::parse("best-bandwidth").unwrap(),
            Baseline::BestBandwidth
        );
        assert!(Baseline::parse("best").is_err());
    }
}
