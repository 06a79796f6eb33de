//! `roam bench afc`: AFC against standard credit and what users have today, on real sockets in
//! the emulator (JSON on stdout, progress on stderr).
//!
//! It is `roam lab afc` at quick length (20 s a trial, one trial, development seed 1) over
//! all five scenarios of the Sanadhya thesis's Table 4, written to `--out` (default
//! `target/bench-afc`), with kernel TCP (fixed buffer, autotuned), QUIC (quinn) and roam-net with
//! standard credit, AFC and AFC's receiver-only variant:
//!
//! - `fraction_of_ideal`: AFC's goodput over the ideal, per scenario (target: at least 0.85);
//! - `vs_standard`, `vs_tcp_fixed`: AFC's goodput over standard credit's and fixed-buffer
//!   TCP's at the same memory (target: at least 1.5);
//! - `vs_autotuning`: over Linux autotuning's (target: at least 0.95, within 5%);
//! - `vs_quic`: over quinn's with the same receive windows;
//! - `peak_memory_vs_autotuning`: the largest over the scenarios of AFC's peak unread bytes
//!   over autotuning's (target: at most 1/3; `peak_memory_by_scenario` for each). Like with
//!   like: each is what the receiver held unread, sampled before each read (TCP's socket
//!   queue; roam's undelivered payload plus its connections' kernel queues);
//! - `receiver_only_fraction_of_ideal`: the receiver-only variant's, beside AFC's.
//!
//! Then the thesis's fairness dumbbell (ch. III §3.5, Fig. 5b-c; `roam lab afc --apps
//! dumbbell`) at quick length (60 s) in `--out`/dumbbell, ten flows on scenario 3's
//! bottleneck, so that every target is measured in one run:
//!
//! - `jain_afc`: Jain's fairness index among ten AFC flows (target: at least 0.95);
//! - `beside_afc_over_alone`: per baseline (standard credit, fixed-buffer TCP), the mean
//!   goodput of five of its flows beside five AFC flows over that of ten of its flows alone
//!   (target: at least 1, no loss to them).

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use roam_lab::harness::plan::{Plan, DEVELOPMENT_SEEDS};
use roam_lab::harness::study::{Request, Study};
use roam_lab::report::compare::values;
use roam_lab::report::Row;
use roam_lab::studies::afc::{systems::AfcSystem, Afc, APP};
use roam_net::proto::session::FlowPolicy;
use serde_json::{json, Value};

/// Arguments of `roam bench afc`.
#[derive(Args, Debug)]
pub struct BenchAfcArgs {
    /// Where the lab's trials are kept.
    #[arg(long, default_value = "target/bench-afc")]
    out: PathBuf,
    /// Trials run at once (each is one link of at most 15 Mbit/s).
    #[arg(long, default_value_t = 10)]
    jobs: usize,
}

/// The scenarios, by the names the JSON gives them.
const SCENARIOS: [(&str, &str); 5] = [
    ("s1", "afc-s1"),
    ("s2", "afc-s2"),
    ("s3", "afc-s3"),
    ("s4", "afc-s4"),
    ("s5", "afc-s5"),
];

/// The baselines whose flows share the dumbbell with AFC's (`beside_afc_over_alone`).
const BESIDE: [AfcSystem; 2] = [AfcSystem::Roam(FlowPolicy::Standard), AfcSystem::TcpFixed];

/// Run the benchmark and print JSON.
pub fn afc(a: &BenchAfcArgs) -> Result<()> {
    let systems = [
        AfcSystem::TcpFixed,
        AfcSystem::TcpAuto,
        AfcSystem::Quic,
        AfcSystem::Roam(FlowPolicy::Standard),
        AfcSystem::Roam(FlowPolicy::Afc),
        AfcSystem::Roam(FlowPolicy::AfcReceiverOnly),
    ];
    let scenarios = SCENARIOS.iter().map(|s| s.1.to_string()).collect();
    let (_, mut rows) = Afc.measure(
        &plan(a, APP, scenarios, &systems, a.out.clone()),
        &Request::default(),
    )?;
    let fairness = [AfcSystem::Roam(FlowPolicy::Afc), BESIDE[0], BESIDE[1]];
    let dumbbell = plan(
        a,
        DUMBBELL,
        vec![DUMBBELL_SCENARIO.into()],
        &fairness,
        a.out.join("dumbbell"),
    );
    rows.extend(Afc.measure(&dumbbell, &Request::default())?.1);
    println!("{}", serde_json::to_string_pretty(&summarise(&rows))?);
    Ok(())
}

/// One trial of each of `systems` on each of `scenarios`, at quick length.
fn plan(
    a: &BenchAfcArgs,
    app: &str,
    scenarios: Vec<String>,
    systems: &[AfcSystem],
    out: PathBuf,
) -> Plan {
    Plan {
        apps: vec![app.into()],
        scenarios,
        systems: systems
            .iter()
            .map(|s| roam_lab::harness::system::System::new(*s))
            .collect(),
        trials: 1,
        first_seed: DEVELOPMENT_SEEDS,
        quick: true,
        duration: None,
        jobs: a.jobs.max(1),
        out,
        emu_logs: None,
        resume: false,
        report_only: false,
        shard: None,
    }
}

/// The dumbbell's application and the scenario it runs on (scenario 3's bottleneck).
const DUMBBELL: &str = "dumbbell";
const DUMBBELL_SCENARIO: &str = "afc-s3";

/// The JSON of a run's rows (the bulk trials' and the dumbbell's).
fn summarise(rows: &[Row]) -> Value {
    let value_of = |app: &str, sc: &str, sys: AfcSystem, metric: &str| {
        values(rows, app, sc, sys.name(), metric)
            .into_iter()
            .find(|v| v.is_finite())
    };
    let value = |sc: &str, sys: AfcSystem, metric: &str| value_of(APP, sc, sys, metric);
    let afc = AfcSystem::Roam(FlowPolicy::Afc);
    let ratio = |sc: &str, other: AfcSystem, metric: &str| {
        Some(value(sc, afc, metric)? / value(sc, other, metric)?)
    };
    let per = |f: &dyn Fn(&str) -> Option<f64>| -> BTreeMap<&str, Option<f64>> {
        SCENARIOS.iter().map(|(k, sc)| (*k, f(sc))).collect()
    };
    let memory = per(&|sc| ratio(sc, AfcSystem::TcpAuto, "peak_unread_kb"));
    let worst_memory = memory
        .values()
        .flatten()
        .copied()
        .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
    json!({
        "fraction_of_ideal": per(&|sc| value(sc, afc, "fraction_of_ideal")),
        "vs_standard": per(&|sc| ratio(sc, AfcSystem::Roam(FlowPolicy::Standard), "goodput_mbps")),
        "vs_tcp_fixed": per(&|sc| ratio(sc, AfcSystem::TcpFixed, "goodput_mbps")),
        "vs_autotuning": per(&|sc| ratio(sc, AfcSystem::TcpAuto, "goodput_mbps")),
        "vs_quic": per(&|sc| ratio(sc, AfcSystem::Quic, "goodput_mbps")),
        "peak_memory_vs_autotuning": worst_memory,
        "peak_memory_by_scenario": memory,
        "receiver_only_fraction_of_ideal": per(&|sc| {
            value(sc, AfcSystem::Roam(FlowPolicy::AfcReceiverOnly), "fraction_of_ideal")
        }),
        "jain_afc": value_of(DUMBBELL, DUMBBELL_SCENARIO, afc, "jain_afc"),
        "beside_afc_over_alone": BESIDE
            .iter()
            .map(|&b| {
                let v = value_of(DUMBBELL, DUMBBELL_SCENARIO, b, "other_beside_afc_over_alone");
                (b.name(), v)
            })
            .collect::<BTreeMap<_, _>>(),
        "trial_seconds": roam_lab::studies::afc::apps()[0].quick.as_secs(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(app: &str, scenario: &str, system: AfcSystem, metric: &str, value: f64) -> Row {
        Row {
            app: app.into(),
            scenario: scenario.into(),
            system: system.name().into(),
            trial: 1,
            seed: 1,
            metric: metric.into(),
            value,
            unit: String::new(),
        }
    }

    #[test]
    fn the_json_holds_every_target_s_figure_from_the_trials_rows() {
        let afc = AfcSystem::Roam(FlowPolicy::Afc);
        let standard = AfcSystem::Roam(FlowPolicy::Standard);
        let mut rows = vec![
            row(APP, "afc-s2", afc, "fraction_of_ideal", 0.9),
            row(APP, "afc-s2", afc, "goodput_mbps", 3.6),
            row(APP, "afc-s2", standard, "goodput_mbps", 2.4),
            row(APP, "afc-s2", AfcSystem::TcpFixed, "goodput_mbps", 1.8),
            row(APP, "afc-s2", AfcSystem::TcpAuto, "goodput_mbps", 3.6),
            row(APP, "afc-s2", afc, "peak_unread_kb", 100.0),
            row(APP, "afc-s2", AfcSystem::TcpAuto, "peak_unread_kb", 400.0),
            row(APP, "afc-s3", afc, "peak_unread_kb", 300.0),
            row(APP, "afc-s3", AfcSystem::TcpAuto, "peak_unread_kb", 200.0),
            // A failed trial's NaN is passed over, not reported.
            row(APP, "afc-s4", afc, "fraction_of_ideal", f64::NAN),
            row(DUMBBELL, DUMBBELL_SCENARIO, afc, "jain_afc", 0.97),
            row(
                DUMBBELL,
                DUMBBELL_SCENARIO,
                standard,
                "other_beside_afc_over_alone",
                0.8,
            ),
        ];
        let j = summarise(&rows);
        assert_eq!(j["fraction_of_ideal"]["s2"], 0.9);
        assert!(j["fraction_of_ideal"]["s4"].is_null());
        assert_eq!(j["vs_standard"]["s2"], 1.5);
        assert_eq!(j["vs_tcp_fixed"]["s2"], 2.0);
        assert_eq!(j["vs_autotuning"]["s2"], 1.0);
        assert!(j["vs_quic"]["s2"].is_null(), "quinn did not run");
        // The worst scenario's memory ratio is the headline one.
        assert_eq!(j["peak_memory_by_scenario"]["s2"], 0.25);
        assert_eq!(j["peak_memory_vs_autotuning"], 1.5);
        assert_eq!(j["jain_afc"], 0.97);
        assert_eq!(j["beside_afc_over_alone"]["roam-standard"], 0.8);
        assert!(j["beside_afc_over_alone"]["tcp-fixed"].is_null());
        rows.clear();
        let empty = summarise(&rows);
        assert!(empty["jain_afc"].is_null() && empty["peak_memory_vs_autotuning"].is_null());
    }
}
