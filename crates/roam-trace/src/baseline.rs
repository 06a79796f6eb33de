//! The paper's single-link baselines, derived per second from a multi-link scenario.
//!
//! Intentional Networking (the Intentional Networking paper, section 7.1) compares against strategies that use one
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
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

/// A one-link baseline: its rule, how often it chooses, and whether it chooses knowing the
/// future. The paper's are oracles choosing every second ([`BaselineSpec::paper`]); a
/// baseline file (`roam_emu::baseline_file`) can make the choice less often, or from what
/// was measured before (a real migration strategy, which cannot see ahead).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BaselineSpec {
    /// Which network each choice picks (aggregation uses every available one, each second).
    pub rule: Baseline,
    /// How long each choice holds, in whole seconds (at least one).
    pub decide_every: Duration,
    /// True: each choice is made from the interval it holds for (the paper's oracle). False:
    /// from the interval before it (the first, with nothing measured yet, as the oracle would).
    pub oracle: bool,
}

impl BaselineSpec {
    /// The paper's baseline: an oracle choosing every second.
    pub fn paper(rule: Baseline) -> BaselineSpec {
        BaselineSpec {
            rule,
            decide_every: Duration::from_secs(1),
            oracle: true,
        }
    }
}

/// Derive a baseline's one-link interval trace over `[0, duration)`.
pub fn derive_baseline(
    scenario: &Scenario,
    baseline: Baseline,
    duration: Duration,
) -> Result<IntervalTrace, TraceError> {
    derive(scenario, &BaselineSpec::paper(baseline), duration)
}

/// Which link `rule` picks from the seconds `window` of every link (`None`: no link was
/// available in any of them). Best latency: the lowest mean RTT over the seconds a link was
/// available, then the higher bandwidth; best bandwidth: the highest mean downlink capacity
/// (an unavailable second counts as none), then the lower RTT.
fn choose(
    per_link: &[Vec<SecondSample>],
    window: std::ops::Range<usize>,
    rule: Baseline,
) -> Option<usize> {
    let score = |l: &Vec<SecondSample>| {
        let secs: Vec<&SecondSample> = l.get(window.clone()).unwrap_or_default().iter().collect();
        let up: Vec<&&SecondSample> = secs.iter().filter(|x| x.available > 0.0).collect();
        if up.is_empty() {
            return None;
        }
        let rtt = up.iter().map(|x| x.rtt_ms).sum::<f64>() / up.len() as f64;
        let down = secs.iter().map(|x| x.down_kbps * x.available).sum::<f64>() / secs.len() as f64;
        Some((rtt, down))
    };
    let scored: Vec<(usize, (f64, f64))> = per_link
        .iter()
        .enumerate()
        .filter_map(|(i, l)| score(l).map(|s| (i, s)))
        .collect();
    let best = match rule {
        Baseline::BestLatency => scored
            .iter()
            .min_by(|(_, a), (_, b)| a.0.total_cmp(&b.0).then(b.1.total_cmp(&a.1))),
        Baseline::BestBandwidth => scored
            .iter()
            .max_by(|(_, a), (_, b)| a.1.total_cmp(&b.1).then(b.0.total_cmp(&a.0))),
        Baseline::Aggregation => None,
    };
    best.map(|(i, _)| *i)
}

/// Derive the one-link interval trace of `spec` over `[0, duration)`.
pub fn derive(
    scenario: &Scenario,
    spec: &BaselineSpec,
    duration: Duration,
) -> Result<IntervalTrace, TraceError> {
    let every = spec.decide_every.as_secs() as usize;
    if every == 0 || spec.decide_every.subsec_nanos() != 0 {
        return Err(TraceError::Unsupported(format!(
            "a baseline decides every whole number of seconds, not every {:?}",
            spec.decide_every
        )));
    }
    let per_link: Vec<Vec<SecondSample>> = scenario
        .links
        .iter()
        .map(|l| l.trace.per_second(duration))
        .collect();
    if per_link
        .iter()
        .flatten()
        .any(|x| !x.down_kbps.is_finite() || !x.up_kbps.is_finite())
    {
        return Err(TraceError::Unsupported(format!(
            "scenario `{}` has a link with unlimited capacity; baselines need rates or traces",
            scenario.name
        )));
    }
    let secs = duration.as_secs().max(1) as usize;
    let mut rows = Vec::with_capacity(secs);
    let mut choice = None;
    for s in 0..secs {
        if s % every == 0 {
            let now = s..s + every;
            let before = s.saturating_sub(every)..s;
            let from = if spec.oracle || s == 0 { now } else { before };
            choice = choose(&per_link, from, spec.rule);
        }
        let row = |d: f64, u: f64, r: f64, a: bool| IntervalRow {
            t_ms: s as u64 * 1000,
            down_kbps: d,
            up_kbps: u,
            rtt_ms: r,
            available: a,
        };
        let this: Vec<SecondSample> = per_link.iter().filter_map(|l| l.get(s).copied()).collect();
        let avail: Vec<&SecondSample> = this.iter().filter(|x| x.available > 0.0).collect();
        let min_rtt = |v: &mut dyn Iterator<Item = f64>| v.fold(f64::INFINITY, f64::min);
        let r = match (spec.rule, choice) {
            (Baseline::Aggregation, _) if !avail.is_empty() => row(
                avail.iter().map(|x| x.down_kbps * x.available).sum(),
                avail.iter().map(|x| x.up_kbps * x.available).sum(),
                min_rtt(&mut avail.iter().map(|x| x.rtt_ms)),
                true,
            ),
            (Baseline::BestLatency | Baseline::BestBandwidth, Some(i))
                if this[i].available > 0.0 =>
            {
                let b = this[i];
                row(
                    b.down_kbps * b.available,
                    b.up_kbps * b.available,
                    b.rtt_ms,
                    true,
                )
            }
            // Nothing available, or the chosen network is not: the link is down this second.
            (_, chosen) => {
                let rtt = match chosen {
                    Some(i) => this[i].rtt_ms,
                    None => min_rtt(&mut this.iter().map(|x| x.rtt_ms)),
                };
                row(0.0, 0.0, if rtt.is_finite() { rtt } else { 0.0 }, false)
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

    #[test]
    fn a_reactive_baseline_follows_the_network_a_second_late_and_a_slow_one_holds_its_choice() {
        let s = Scenario::by_name("intermittent", 3).unwrap();
        let d = Duration::from_secs(600);
        let wifi = s.links[0].trace.per_second(d);
        let spec = |every: u64, oracle: bool| BaselineSpec {
            rule: Baseline::BestLatency,
            decide_every: Duration::from_secs(every),
            oracle,
        };
        let late = derive(&s, &spec(1, false), d).unwrap();
        let (mut arrivals, mut departures) = (0, 0);
        for k in 1..600 {
            let (was, is) = (wifi[k - 1].available, wifi[k].available);
            if was == 0.0 && is > 0.0 {
                // The WiFi is back, but the choice was made when it was not: still the 3G.
                assert_eq!((late.rows[k].rtt_ms, late.rows[k].available), (400.0, true));
                arrivals += 1;
            }
            if was > 0.0 && is == 0.0 {
                // Chosen while the WiFi was there, which it no longer is: no link.
                assert!(!late.rows[k].available, "second {k}");
                departures += 1;
            }
        }
        assert!(arrivals > 0 && departures > 0);
        // Every 10 s, as an oracle: one network per ten seconds.
        let slow = derive(&s, &spec(10, true), d).unwrap();
        for w in slow.rows.chunks(10) {
            let rtts: std::collections::BTreeSet<u64> = w
                .iter()
                .filter(|r| r.available)
                .map(|r| r.rtt_ms as u64)
                .collect();
            assert!(rtts.len() <= 1, "{w:?}");
        }
        assert!(derive(&s, &spec(0, true), d).is_err());
        let paper = derive(&s, &BaselineSpec::paper(Baseline::BestLatency), d).unwrap();
        assert_eq!(
            paper,
            derive_baseline(&s, Baseline::BestLatency, d).unwrap()
        );
    }
}
