//! `dumbbell`: AFC's fairness (the Sanadhya thesis, ch. III §3.5, Fig. 5b and 5c): ten flows
//! share one bottleneck, the thesis's ⟨2, 4, 4⟩ Mbit/s per 530 ms (scenario `afc-s3`'s
//! link), each read at ⟨0, 6, 6⟩ Mbit/s per round trip with a buffer of 22 KB (the thesis's
//! 5 ms access links are folded into the bottleneck's delay).
//!
//! A trial runs five AFC flows (`roam-afc`) beside five flows of the trial's system, or ten
//! AFC flows when the system is `roam-afc` itself (AFC with AFC, Fig. 5c). Metrics: each
//! group's mean goodput, Jain's fairness index among the AFC flows and among all ten. Whether
//! AFC takes anything from standard flows needs those flows' mean without AFC beside them
//! (ten of them), which this app does not run yet.

use anyhow::{anyhow, bail, Result};
use roam_net::proto::session::FlowPolicy;

use super::bulk::{one_flow, Flow, PORT};
use super::paper::table4;
use super::systems::AfcSystem;
use crate::harness::trial::{Metric, Trial};

/// Flows on the bottleneck.
pub const FLOWS: usize = 10;

/// The thesis's buffer on the dumbbell, bytes.
pub const BUFFER: u64 = 22_000;

/// Jain's fairness index of `x`: `(sum x)^2 / (n * sum x^2)`, 1 when all are equal.
pub fn jain(x: &[f64]) -> f64 {
    let (s, s2) = x.iter().fold((0.0, 0.0), |(s, s2), v| (s + v, s2 + v * v));
    if s2 == 0.0 {
        return f64::NAN;
    }
    s * s / (x.len() as f64 * s2)
}

/// One trial.
pub fn run(t: &Trial) -> Result<Vec<Metric>> {
    let Some(&other) = t.system.get::<AfcSystem>() else {
        bail!(
            "the AFC study runs its own systems, not `{}`",
            t.system.name()
        );
    };
    if t.scenario.name.split('+').next() != Some("afc-s3") {
        bail!(
            "the dumbbell runs on the thesis's bottleneck, scenario afc-s3 (with its changes, \
             e.g. afc-s3+queue=20pkt), not {}",
            t.scenario.name
        );
    }
    let table = table4("afc-s3").ok_or_else(|| anyhow!("Table 4 lacks scenario 3"))?;
    let afc = AfcSystem::Roam(FlowPolicy::Afc);
    // Five AFC flows beside five of the other system; AFC with itself: ten.
    let n_afc = if other == afc { FLOWS } else { FLOWS / 2 };
    let kinds: Vec<AfcSystem> = (0..FLOWS)
        .map(|i| if i < n_afc { afc } else { other })
        .collect();
    let results: Vec<Result<f64>> = std::thread::scope(|s| {
        let handles: Vec<_> = kinds
            .iter()
            .enumerate()
            .map(|(i, &sys)| {
                let flow = Flow {
                    port: PORT + 1 + i as u16,
                    buffer: BUFFER,
                };
                s.spawn(move || one_flow(t, sys, table, flow).map(|(r, _)| r.goodput_mbps()))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| anyhow!("a flow panicked"))?)
            .collect()
    });
    let mut goodput = Vec::with_capacity(FLOWS);
    for (i, r) in results.into_iter().enumerate() {
        goodput.push(r.map_err(|e| anyhow!("flow {i} ({}): {e:#}", kinds[i].name()))?);
    }
    // The first n_afc flows are AFC's (`kinds`).
    let (a, o) = goodput.split_at(n_afc);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let mut m = vec![
        Metric::new("afc_mean_mbps", mean(a), "Mbit/s"),
        Metric::new("jain_afc", jain(a), ""),
        Metric::new("jain_all", jain(&goodput), ""),
        Metric::new("total_mbps", goodput.iter().sum(), "Mbit/s"),
    ];
    if !o.is_empty() {
        m.push(Metric::new("other_mean_mbps", mean(o), "Mbit/s"));
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_is_one_for_equal_shares_and_one_over_n_for_one_taker() {
        assert!((jain(&[2.0, 2.0, 2.0]) - 1.0).abs() < 1e-12);
        assert!((jain(&[4.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
        assert!(jain(&[0.0, 0.0]).is_nan());
    }
}
