//! `dumbbell`: AFC's fairness (the Sanadhya thesis, ch. III §3.5, Fig. 5b and 5c): ten flows
//! share one bottleneck, the thesis's ⟨2, 4, 4⟩ Mbit/s per 530 ms (scenario `afc-s3`'s
//! link), each read at ⟨0, 6, 6⟩ Mbit/s per round trip with a buffer of 22 KB (the thesis's
//! 5 ms access links are folded into the bottleneck's delay).
//!
//! A trial runs five AFC flows (`roam-afc`) beside five flows of the trial's system, or ten
//! AFC flows when the system is `roam-afc` itself (AFC with AFC, Fig. 5c), in the trial's
//! second half; its first half runs ten flows of the system alone. Metrics: each group's mean
//! goodput, Jain's fairness index among the AFC flows and among all ten, and the other
//! flows' mean beside AFC over their mean alone (at least 1: AFC took nothing from them).

use anyhow::{anyhow, bail, Result};
use roam_net::proto::session::FlowPolicy;

use super::bulk::{one_flow, Flow, Shape, PORT};
use super::paper::table4;
use super::reader::Reading;
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
    let half = t.duration / 2;
    // First half: ten flows of the system alone (what AFC might take from); second: five AFC
    // flows beside five of it. AFC with itself: ten AFC flows in both halves.
    let slot = Shape::of(&t.scenario.name, table)?.slot;
    let alone = flows(t, table, &[other; FLOWS], half, slot, 0)?;
    let n_afc = if other == afc { FLOWS } else { FLOWS / 2 };
    let kinds: Vec<AfcSystem> = (0..FLOWS)
        .map(|i| if i < n_afc { afc } else { other })
        .collect();
    let mixed = flows(t, table, &kinds, half, slot, FLOWS as u16)?;
    let (a, o) = mixed.split_at(n_afc);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let mut m = vec![
        Metric::new("afc_mean_mbps", mean(a), "Mbit/s"),
        Metric::new("jain_afc", jain(a), ""),
        Metric::new("jain_all", jain(&mixed), ""),
        Metric::new("total_mbps", mixed.iter().sum(), "Mbit/s"),
        Metric::new("alone_mean_mbps", mean(&alone), "Mbit/s"),
        Metric::new("jain_alone", jain(&alone), ""),
    ];
    if !o.is_empty() {
        // Above 1: the other flows did better beside AFC than alone.
        m.push(Metric::new("other_mean_mbps", mean(o), "Mbit/s"));
        m.push(Metric::new(
            "other_beside_afc_over_alone",
            mean(o) / mean(&alone),
            "",
        ));
    }
    Ok(m)
}

/// Run `kinds` at once for `duration`, reading by slots of `slot`, on ports from
/// `PORT + 1 + offset`; each flow's goodput.
fn flows(
    t: &Trial,
    table: &'static super::paper::Table4,
    kinds: &[AfcSystem],
    duration: std::time::Duration,
    slot: std::time::Duration,
    offset: u16,
) -> Result<Vec<f64>> {
    let results: Vec<Result<f64>> = std::thread::scope(|s| {
        let handles: Vec<_> = kinds
            .iter()
            .enumerate()
            .map(|(i, &sys)| {
                let flow = Flow {
                    port: PORT + 1 + offset + i as u16,
                    buffer: BUFFER,
                    duration,
                    slot,
                    reading: Reading::Paced,
                };
                s.spawn(move || one_flow(t, sys, table, flow).map(|f| f.read.goodput_mbps()))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| anyhow!("a flow panicked"))?)
            .collect()
    });
    results
        .into_iter()
        .enumerate()
        .map(|(i, r)| r.map_err(|e| anyhow!("flow {i} ({}): {e:#}", kinds[i].name())))
        .collect()
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
