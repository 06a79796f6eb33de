//! `roam lab in-paper`: reproduce the Intentional Networking evaluation (see `roam_lab`).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use roam_lab::lab::{self, Plan, SCENARIOS};
use roam_lab::system::System;

/// Arguments of `roam lab in-paper`.
#[derive(Args, Debug)]
pub struct InPaperArgs {
    /// Reduced matrix for CI and a first look: short workloads, one trial, the `vehicular`
    /// scenario only, every system at once (unless given explicitly).
    #[arg(long)]
    quick: bool,
    /// Applications, comma-separated.
    #[arg(long, value_delimiter = ',')]
    apps: Option<Vec<String>>,
    /// Scenarios, comma-separated (hotspot, intermittent, vehicular, vehicular-umts, or a
    /// scenario file FILE.toml), each optionally with changed parameters:
    /// `hotspot+queue=20pkt+rtt=100ms+rate=0.5`.
    #[arg(long, value_delimiter = ',')]
    scenarios: Option<Vec<String>>,
    /// Run every scenario at every value of a parameter: `queue=20pkt,100pkt,1000pkt`,
    /// `rtt=0ms,100ms,300ms` (added round-trip time), `rate=0.5,1,2` (capacity factor).
    /// Repeat for every combination of several.
    #[arg(long)]
    sweep: Vec<String>,
    /// Systems, comma-separated (roam, mptcp, aggregation, best-latency, best-bandwidth).
    #[arg(long, value_delimiter = ',')]
    systems: Option<Vec<String>>,
    /// Trials per cell (default 5; 1 with --quick).
    #[arg(long)]
    trials: Option<u32>,
    /// Which seeds the trials use: `development` (1, 2, ...: the seeds roam-net was developed
    /// against) or `held-out` (101, 102, ...: never used while developing it; the headline
    /// figures come from these), or the first seed as a number.
    #[arg(long, default_value = "development", value_parser = parse_seeds)]
    seeds: u64,
    /// Workload length for every application, e.g. `90s` (default: the paper's; short with
    /// --quick).
    #[arg(long, value_parser = crate::parse_dur)]
    duration: Option<Duration>,
    /// Trials run at once, each in its own emulator (default 1; with --quick, one per
    /// system). More than one shares the CPU between emulators.
    #[arg(long)]
    jobs: Option<usize>,
    /// Output directory.
    #[arg(long, default_value = "results/in-paper")]
    out: PathBuf,
    /// Keep every trial's emulator logs (per-link traffic in 100 ms bins, CSV, and a
    /// summary.json) under this directory, one subdirectory per trial.
    #[arg(long)]
    emu_logs: Option<PathBuf>,
    /// Keep the trials already in OUT/trials.csv and run only the missing or failed ones (a
    /// long run interrupted, or one built up over several invocations). Refused unless
    /// OUT/run.json shows the same code and workload lengths.
    #[arg(long)]
    resume: bool,
    /// Run nothing: rewrite OUT/report.md and the charts from OUT/trials.csv (the report names
    /// the code that measured them, from OUT/run.json). Give the same --apps, --scenarios and
    /// --systems as the run.
    #[arg(long, conflicts_with = "resume")]
    report_only: bool,
}

/// `--seeds`: a set's name, or the first seed.
fn parse_seeds(s: &str) -> Result<u64, String> {
    match s {
        "development" => Ok(lab::DEVELOPMENT_SEEDS),
        "held-out" => Ok(lab::HELD_OUT_SEEDS),
        n => n.parse::<u64>().ok().filter(|&n| n >= 1).ok_or_else(|| {
            format!("`{n}`: expected `development`, `held-out` or a first seed of 1 or more")
        }),
    }
}

/// Run it; print the report's headline table.
pub fn in_paper(a: &InPaperArgs) -> Result<()> {
    let systems = match &a.systems {
        Some(v) => v
            .iter()
            .map(|s| System::parse(s.trim()))
            .collect::<Result<Vec<_>>>()?,
        None => System::ALL.to_vec(),
    };
    let scenarios = a.scenarios.clone().unwrap_or_else(|| {
        if a.quick {
            vec!["vehicular".into()]
        } else {
            SCENARIOS.iter().map(|s| s.to_string()).collect()
        }
    });
    let scenarios = roam_lab::variant::expand(&scenarios, &a.sweep)?;
    let apps = a
        .apps
        .clone()
        .unwrap_or_else(|| lab::apps().iter().map(|x| x.name.to_string()).collect());
    let plan = Plan {
        apps,
        scenarios: scenarios.clone(),
        jobs: a.jobs.unwrap_or(if a.quick { systems.len() } else { 1 }),
        systems,
        trials: a.trials.unwrap_or(if a.quick { 1 } else { 5 }),
        first_seed: a.seeds,
        quick: a.quick,
        duration: a.duration,
        out: a.out.clone(),
        emu_logs: a.emu_logs.clone(),
        resume: a.resume,
        report_only: a.report_only,
    };
    let (_, rows) = lab::in_paper(&plan)?;
    for s in &scenarios {
        println!("{}", lab::headline(&rows, s));
    }
    println!(
        "Full report: {}/report.md (every trial: trials.csv; charts: *.svg)",
        a.out.display()
    );
    let failed = rows.iter().filter(|r| r.metric == "error").count();
    if failed > 0 && !a.report_only {
        anyhow::bail!("{failed} trial(s) failed (listed at the end of the report)");
    }
    Ok(())
}
