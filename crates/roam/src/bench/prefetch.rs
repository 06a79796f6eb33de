//! `roam bench prefetch`: IMP's decision time, and the budgets' controllers over whole
//! simulated budget periods (JSON on stdout). No network, no privileges: everything here is
//! sans-IO under a virtual clock.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;
use roam_budget::controller::{offers_rising_and_falling, simulate, Simulated};
use roam_budget::{profile, Budget, Prices as ControllerPrices, Radio};
use roam_core::{BitRate, Bytes, Time};
use roam_prefetch::{decide, Accuracy, Candidate, LongRun, NetworkState, Prices, DEFAULT_CLASS};
use serde_json::json;

/// Arguments of `roam bench prefetch`.
#[derive(Args, Debug)]
pub struct BenchPrefetchArgs {
    /// Outstanding hints at each decision.
    #[arg(long, default_value_t = 100)]
    hints: u64,
    /// Decisions timed (the median is reported).
    #[arg(long, default_value_t = 2000)]
    decisions: u32,
    /// What the simulated offers could use, as a multiple of the budget.
    #[arg(long, default_value_t = 2.0)]
    demand: f64,
}

/// Microseconds per hint of one decision over `hints` outstanding hints on a 3G and a WiFi
/// network, at prices where only some batches pay (the median of `decisions` runs).
fn decision_us(hints: u64, decisions: u32) -> Result<f64> {
    let cell = Radio::new(Arc::new(profile("huang2012/3g")?), Time::ZERO);
    let wifi = Radio::new(Arc::new(profile("huang2012/wifi")?), Time::ZERO);
    let nets = [
        NetworkState {
            name: "cell",
            wifi: false,
            metered: true,
            bandwidth: BitRate::kbps(700),
            latency: Duration::from_millis(200),
            radio: &cell,
        },
        NetworkState {
            name: "wifi",
            wifi: true,
            metered: false,
            bandwidth: BitRate::mbps(5),
            latency: Duration::from_millis(20),
            radio: &wifi,
        },
    ];
    let mut long_run = LongRun::default();
    for s in 0..100 {
        long_run.observe(Time::from_millis(s * 1000), &nets[..1 + (s % 2) as usize]);
    }
    let candidates: Vec<Candidate> = (0..hints)
        .map(|id| Candidate {
            id,
            class: DEFAULT_CLASS,
            size: Some(Bytes(20_000 + 1000 * (id % 50))),
        })
        .collect();
    let prices = Prices {
        energy: 0.5,
        data: 1e-5,
    };
    let acc = Accuracy::new();
    let mut times = Vec::with_capacity(decisions as usize);
    for _ in 0..decisions.max(1) {
        let t = Instant::now();
        std::hint::black_box(decide(
            Time::from_millis(200_000),
            &candidates,
            &nets,
            &acc,
            &long_run,
            prices,
            Bytes(30_000),
        ));
        times.push(t.elapsed());
    }
    times.sort();
    Ok(times[times.len() / 2].as_secs_f64() * 1e6 / hints.max(1) as f64)
}

/// A whole period of `budget` against offers of `demand` times it, rising and falling over
/// `cycle` seconds.
fn period(budget: Budget, demand: f64, cycle: f64) -> Result<(Simulated, f64)> {
    let seconds = budget.end.saturating_since(budget.start).as_secs_f64();
    let mean = budget.total * demand / seconds;
    let t = Instant::now();
    let r = simulate(
        budget,
        ControllerPrices::default(),
        offers_rising_and_falling(mean, cycle, 1),
    )?;
    Ok((r, t.elapsed().as_secs_f64()))
}

/// Run it.
pub fn prefetch(a: &BenchPrefetchArgs) -> Result<()> {
    let decision = decision_us(a.hints, a.decisions)?;
    let eight_hours = Time::ZERO + Duration::from_secs(8 * 3600);
    let (energy, energy_s) = period(
        Budget::battery(10_000.0, Time::ZERO, eight_hours),
        a.demand,
        3600.0,
    )?;
    let (data, data_s) = period(
        Budget::data_plan(2_000_000_000, Time::ZERO, 30),
        a.demand,
        86_400.0,
    )?;
    let out = json!({
        "decision_us": decision,
        "outstanding_hints": a.hints,
        "budget_used_fraction": {"energy": energy.used_fraction(), "data": data.used_fraction()},
        "budget_overshoot": {"energy": energy.overshoot(), "data": data.overshoot()},
        "simulated": {
            "energy": "an 8-hour battery day of 10 kJ, offers rising and falling each hour",
            "data": "a 30-day 2 GB data plan, offers rising and falling each day",
            "offers_per_budget": a.demand,
            "wall_seconds": {"energy": energy_s, "data": data_s},
        },
        "targets": {"decision_us": "< 50", "budget_used_fraction": ">= 0.9", "budget_overshoot": 0},
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
