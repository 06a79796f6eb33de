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
//!   over autotuning's (target: at most 1/3; `peak_memory_by_scenario` for each). Not quite
//!   like with like: TCP's is its socket's receive queue (`FIONREAD`), roam's the
//!   acknowledged bytes its application had not read, without the bytes of IROBs not yet
//!   complete or what sits in the kernel beneath it (small with credit: roam's driver keeps
//!   reading its sockets);
//! - `receiver_only_fraction_of_ideal`: the receiver-only variant's, beside AFC's.
//!
//! Fairness (Jain's index among AFC flows on the thesis's dumbbell) is not measured here
//! (`jain_afc` is null): `roam lab afc --apps dumbbell --scenarios afc-s3` runs the dumbbell in
//! the emulator, `roam lab afc --sim --apps fairness,afc-afc` in ns-3.

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
    let plan = Plan {
        apps: vec![APP.into()],
        scenarios: SCENARIOS.iter().map(|s| s.1.to_string()).collect(),
        systems: systems
            .iter()
            .map(|s| roam_lab::harness::system::System::new(*s))
            .collect(),
        trials: 1,
        first_seed: DEVELOPMENT_SEEDS,
        quick: true,
        duration: None,
        jobs: a.jobs.max(1),
        out: a.out.clone(),
        emu_logs: None,
        resume: false,
        report_only: false,
        shard: None,
    };
    let (_, rows) = Afc.measure(&plan, &Request::default())?;
    println!("{}", serde_json::to_string_pretty(&summarise(&rows))?);
    Ok(())
}

/// The JSON of a run's rows.
fn summarise(rows: &[Row]) -> Value {
    let value = |sc: &str, sys: AfcSystem, metric: &str| {
        values(rows, APP, sc, sys.name(), metric)
            .into_iter()
            .find(|v| v.is_finite())
    };
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
        "jain_afc": Value::Null,
        "trial_seconds": roam_lab::studies::afc::apps()[0].quick.as_secs(),
    })
}
