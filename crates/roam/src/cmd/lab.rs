//! `roam lab STUDY`: run one of the lab's studies (`roam_lab::studies::ALL`) with the flags
//! every study shares; the study supplies its defaults, systems and report.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use roam_lab::harness::plan::{DEVELOPMENT_SEEDS, HELD_OUT_SEEDS};
use roam_lab::harness::study::Request;
use roam_lab::studies;

/// Arguments of `roam lab STUDY`.
#[derive(Args, Debug, Clone)]
pub struct LabArgs {
    /// The study: in-paper (Intentional Networking §7), imp (Informed Mobile Prefetching),
    /// meatballs (network selection and speech), fasthla (bulk transfers), horatio (a
    /// phone carrying a VM's state), afc (flow control with the read rate fed forward), dedup
    /// (asymmetric caching) or precog (prefetching by the user's actions). docs/lab.md
    /// describes each.
    #[arg(value_parser = clap::builder::PossibleValuesParser::new(studies::names()))]
    study: String,
    /// Reduced matrix for CI and a first look (a few minutes): short workloads, one trial,
    /// the study's quick cells (docs/lab.md says which), every system at once unless given.
    #[arg(long)]
    quick: bool,
    /// Applications, comma-separated (the study's own; an unknown name is refused with the
    /// list).
    #[arg(long, value_delimiter = ',')]
    apps: Option<Vec<String>>,
    /// Scenarios, comma-separated (a scenario's name or a scenario file FILE.toml), each
    /// optionally with changed parameters: `hotspot+queue=20pkt+rtt=100ms+rate=0.5`.
    #[arg(long, value_delimiter = ',')]
    scenarios: Option<Vec<String>>,
    /// Run every scenario at every value of a parameter: `queue=20pkt,100pkt,1000pkt`,
    /// `rtt=0ms,100ms,300ms` (added round-trip time), `rate=0.5,1,2` (capacity factor).
    /// Repeat for every combination of several.
    #[arg(long)]
    sweep: Vec<String>,
    /// Systems, comma-separated (the study's own, refused with the list when unknown; in-paper
    /// also takes a baseline file FILE.toml).
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
    /// Trials run at once, each in its own emulator (default: the study's; with --quick, one
    /// per system). More than one shares the CPU between emulators.
    #[arg(long)]
    jobs: Option<usize>,
    /// Output directory (default: results/STUDY, e.g. results/in-paper).
    #[arg(long)]
    out: Option<PathBuf>,
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
    /// Run only part K of N of the matrix (e.g. `3/8`): a deterministic, disjoint share of its
    /// trials, for spreading a matrix over machines (docs/lab.md, "Runs larger than one
    /// machine"); join the parts' directories with `roam results merge` and report with
    /// `--report-only`.
    #[arg(long, value_name = "K/N", value_parser = roam_lab::harness::plan::Shard::parse, conflicts_with = "report_only")]
    shard: Option<roam_lab::harness::plan::Shard>,
    /// fasthla: learn from the sweep trials of another run's sweep directory (`OUT/sweep` of
    /// an earlier run, whose `run.json` names the code that measured them, as the report
    /// does) instead of running the sweep. With `--report-only`, the sweep such a run learnt
    /// from.
    #[arg(long, value_name = "DIR")]
    sweep_from: Option<PathBuf>,
    /// afc: run the thesis's own experiments at packet level in ns-3 (Table 4, fairness,
    /// the sensitivity studies; `--apps` picks them) instead of real sockets in the
    /// emulator. Builds sim/ns3-afc against Debian's ns-3 3.37 (installed as root when
    /// missing). Results in results/afc-sim unless --out.
    #[arg(long)]
    sim: bool,
}

/// `--seeds`: a set's name, or the first seed.
fn parse_seeds(s: &str) -> Result<u64, String> {
    match s {
        "development" => Ok(DEVELOPMENT_SEEDS),
        "held-out" => Ok(HELD_OUT_SEEDS),
        n => n.parse::<u64>().ok().filter(|&n| n >= 1).ok_or_else(|| {
            format!("`{n}`: expected `development`, `held-out` or a first seed of 1 or more")
        }),
    }
}

impl LabArgs {
    /// What the user asked of the study.
    fn request(&self) -> Request {
        Request {
            quick: self.quick,
            apps: self.apps.clone(),
            scenarios: self.scenarios.clone(),
            sweep: self.sweep.clone(),
            systems: self.systems.clone(),
            trials: self.trials,
            first_seed: self.seeds,
            duration: self.duration,
            jobs: self.jobs,
            out: self.out.clone(),
            emu_logs: self.emu_logs.clone(),
            resume: self.resume,
            report_only: self.report_only,
            shard: self.shard,
            sweep_from: self.sweep_from.clone(),
            sim: self.sim,
        }
    }
}

/// Run the study; print its summary and where the report is. Failed trials make the run fail.
pub fn run(a: &LabArgs) -> Result<()> {
    let study = studies::find(&a.study)?;
    let done = study.run(&a.request())?;
    print!("{}", done.summary);
    println!(
        "Full report: {}/report.md (every trial: trials.csv; charts: *.svg)",
        done.out.display()
    );
    let failed = done.failed();
    if failed > 0 && !a.report_only {
        anyhow::bail!("{failed} trial(s) failed (listed at the end of the report)");
    }
    Ok(())
}
