//! `roam bench decide`: how long a Meatballs decision takes, per evaluation method, with 2 and 4
//! single strategies and 50 or 500 error samples per predictor (JSON on stdout). Sans-IO: no
//! network, no privileges.
//!
//! The decision is network selection as in Meatballs thesis §4.4.2: each single strategy sends a 4 KB
//! response over one network whose bandwidth is a predictor (its latency, energy and data are
//! constants of the network), and the evaluator also holds every pair of networks as a
//! redundant strategy (1 pair of 2 networks, 6 of 4). Measurements are pseudo-random ratios of
//! the prediction, one in ten an outlier, so that redundancy is sometimes chosen.

use std::time::Instant;

use anyhow::Result;
use clap::Args;
use roam_decide::{CostLevel, Meatballs, Method, Outcome, Prices, MAX_JOINT};
use serde_json::json;

/// Arguments of `roam bench decide`.
#[derive(Args, Debug)]
pub struct BenchDecideArgs {
    /// Decisions timed per case at most (the median is reported); fewer when a case is slow.
    #[arg(long, default_value_t = 2000)]
    decisions: u32,
    /// Wall-clock seconds spent per case at most.
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
}

/// An instance with `strategies` networks and `samples` measurements per bandwidth predictor,
/// and its evaluator.
fn setup(
    strategies: usize,
    samples: usize,
    method: Method,
) -> Result<(Meatballs, roam_decide::EvaluatorId)> {
    let mut mb = Meatballs::with_ageing(
        Prices::level(CostLevel::Low),
        roam_decide::Ageing {
            decay: 1.0,
            negligible: 0.0,
        },
    );
    let mut singles = Vec::new();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..strategies {
        let bw = mb.create_predictor(format!("network {i} bandwidth"));
        let predicted = 100_000.0 * (i + 1) as f64;
        mb.set_prediction(bw, predicted)?;
        for k in 0..samples {
            // xorshift: deterministic ratios in [0.5, 1.5), one in ten a hundred times lower.
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let u = (seed >> 11) as f64 / (1u64 << 53) as f64;
            let ratio = if k % 10 == 9 { 0.01 } else { 0.5 + u };
            mb.add_measurement(bw, predicted * ratio, predicted)?;
        }
        let latency = 0.02 * (i + 1) as f64;
        let joules = 0.1 + 0.5 * i as f64;
        let metered = if i == 0 { 0.0 } else { 4_000.0 };
        singles.push(mb.make_strategy(format!("network {i}"), &[bw], move |v| {
            Outcome::new(latency + 4_000.0 / v[bw], joules, metered)
        })?);
    }
    let mut all = singles.clone();
    for a in 0..singles.len() {
        for b in a + 1..singles.len() {
            all.push(mb.make_redundant_strategy(format!("{a}+{b}"), &[singles[a], singles[b]])?);
        }
    }
    let ev = mb.register_strategies(&all, method)?;
    Ok((mb, ev))
}

/// Median microseconds of a decision (`redundant`: the evaluator's full decision, recomputed
/// each time by nudging the prices; else the quick non-redundant one).
fn time_case(
    strategies: usize,
    samples: usize,
    method: Method,
    redundant: bool,
    a: &BenchDecideArgs,
) -> Result<f64> {
    let (mut mb, ev) = setup(strategies, samples, method)?;
    let base = mb.prices();
    let mut times = Vec::new();
    let start = Instant::now();
    for i in 0..a.decisions.max(1) {
        // New prices each time, so that the cached decision is not simply returned.
        mb.set_prices(roam_decide::Prices {
            energy: base.energy * (1.0 + 1e-9 * (i % 2) as f64),
            ..base
        });
        let t = Instant::now();
        let c = if redundant {
            mb.choose(ev)?
        } else {
            mb.choose_single(ev)?
        };
        times.push(t.elapsed().as_secs_f64() * 1e6);
        std::hint::black_box(c);
        if start.elapsed().as_secs_f64() > a.seconds && times.len() >= 5 {
            break;
        }
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

/// Run the benchmark and print its JSON.
pub fn decide(a: &BenchDecideArgs) -> Result<()> {
    let cases = [
        ("s2_n50", 2, 50),
        ("s4_n50", 4, 50),
        ("s2_n500", 2, 500),
        ("s4_n500", 4, 500),
    ];
    let mut decide_us = serde_json::Map::new();
    for m in Method::ALL {
        let mut per = serde_json::Map::new();
        for (key, s, n) in cases {
            per.insert(key.into(), json!(time_case(s, n, m, true, a)?));
        }
        decide_us.insert(m.name().into(), per.into());
    }
    let mut single_us = serde_json::Map::new();
    for (key, s, n) in cases {
        single_us.insert(
            key.into(),
            json!(time_case(s, n, Method::Empirical, false, a)?),
        );
    }
    let out = json!({
        "decide_us": decide_us,
        "single_us": single_us,
        "max_joint": MAX_JOINT,
        "workload": "network selection: one bandwidth predictor per network, every pair of networks as a redundant strategy; s = networks, n = error samples per predictor",
        "targets": {"bounds": "< 20", "bayesian": "< 20", "empirical": "< 200 at n50"},
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
