//! What a study is: the contract between the framework and one paper's evaluation.
//!
//! A study names its applications, scenarios and systems, its defaults (what a full and a
//! `--quick` run measure), the paper's figures it is compared with, and how it writes its
//! report. The framework turns the user's [`Request`] into a [`Plan`] ([`plan`]), measures it
//! ([`crate::harness::matrix::measure`]) and hands the trials to the study's report.
//! `roam lab NAME` finds the study by name in the crate's registry of studies; nothing in the
//! framework knows any study.
//!
//! A new study is a folder under `studies/` with a type implementing [`Study`] and one line in
//! the registry, `studies/mod.rs` (docs/lab.md, "Writing a study").

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};

use crate::harness::plan::{App, Plan, DEVELOPMENT_SEEDS};
use crate::harness::sweep;
use crate::harness::system::System;
use crate::report::Row;

/// What a study runs unless the user says otherwise.
#[derive(Clone, Debug)]
pub struct Defaults {
    /// Scenarios of a full run (each a scenario's name, a scenario file, or either with
    /// changed parameters, [`sweep`]).
    pub scenarios: Vec<String>,
    /// Scenarios of a `--quick` run.
    pub quick_scenarios: Vec<String>,
    /// Applications of a full run.
    pub apps: Vec<String>,
    /// Applications of a `--quick` run.
    pub quick_apps: Vec<String>,
    /// Trials run at once in a full run.
    pub jobs: usize,
    /// Trials run at once in a `--quick` run (`None`: one per system).
    pub quick_jobs: Option<usize>,
    /// Where results go (`results/NAME`).
    pub out: &'static str,
}

/// What the user asked for (`roam lab NAME`'s flags): `None` where the study's default
/// applies. The default request is a full run on the development seeds.
#[derive(Clone, Debug)]
pub struct Request {
    /// Short workloads, one trial, the study's quick cells.
    pub quick: bool,
    /// Applications (the study's names).
    pub apps: Option<Vec<String>>,
    /// Scenarios (names or files, with `+key=value` changes).
    pub scenarios: Option<Vec<String>>,
    /// Parameter sweeps applied to every scenario (`queue=20pkt,100pkt`; [`sweep::expand`]).
    pub sweep: Vec<String>,
    /// Systems (the study's names, [`Study::system`]).
    pub systems: Option<Vec<String>>,
    /// Trials per cell (default 5; 1 with `quick`).
    pub trials: Option<u32>,
    /// The seed of every cell's first trial.
    pub first_seed: u64,
    /// Workload length for every application.
    pub duration: Option<Duration>,
    /// Trials run at once.
    pub jobs: Option<usize>,
    /// Results directory (default: [`Defaults::out`]).
    pub out: Option<PathBuf>,
    /// Keep every trial's emulator logs under this directory.
    pub emu_logs: Option<PathBuf>,
    /// Keep a matching run's trials and run only the missing or failed ones.
    pub resume: bool,
    /// Run nothing: rewrite the report from the results directory.
    pub report_only: bool,
    /// Learn from another run's sweep directory instead of sweeping (studies that sweep and
    /// learn, [`Study::learns_from_sweeps`]).
    pub sweep_from: Option<PathBuf>,
    /// Run only this part of the matrix ([`crate::harness::plan::Shard`]).
    pub shard: Option<crate::harness::plan::Shard>,
    /// Run the study's packet-level simulation instead of the emulator (studies that have
    /// one, [`Study::simulates`]).
    pub sim: bool,
}

impl Default for Request {
    fn default() -> Request {
        Request {
            quick: false,
            apps: None,
            scenarios: None,
            sweep: Vec::new(),
            systems: None,
            trials: None,
            first_seed: DEVELOPMENT_SEEDS,
            duration: None,
            jobs: None,
            out: None,
            emu_logs: None,
            resume: false,
            report_only: false,
            sweep_from: None,
            shard: None,
            sim: false,
        }
    }
}

/// What a study's run gives back.
pub struct Finished {
    /// Where its results are (`report.md`, `trials.csv`, charts).
    pub out: PathBuf,
    /// The report's text (also in `out/report.md`).
    pub report: String,
    /// Every trial's metrics.
    pub rows: Vec<Row>,
    /// What the terminal shows of it ([`Study::summary`]).
    pub summary: String,
}

impl Finished {
    /// How many trials failed (a run with failures exits with an error).
    pub fn failed(&self) -> usize {
        self.rows.iter().filter(|r| r.metric == "error").count()
    }
}

/// One paper's evaluation, run by the framework.
pub trait Study: Sync {
    /// Name on the command line (`roam lab NAME`) and of the default results directory.
    fn name(&self) -> &'static str;

    /// The paper it reproduces, by name and section (one line, for `roam lab --help` and
    /// reports).
    fn paper(&self) -> &'static str;

    /// What a full and a quick run measure.
    fn defaults(&self) -> Defaults;

    /// The study's applications (an unknown `--apps` name is refused with their list).
    fn apps(&self) -> Vec<App>;

    /// The system `--systems` names, or an error listing the study's systems.
    fn system(&self, name: &str) -> Result<System>;

    /// The systems a run compares when `--systems` is not given.
    fn systems(&self, quick: bool) -> Vec<System>;

    /// The paper's figure for a cell, as the report quotes it beside ours, where the paper
    /// gives one.
    fn paper_figure(&self, app: &str, scenario: &str, system: &str) -> Option<String>;

    /// Whether the study sweeps parameters and learns from the sweep, so that it can learn
    /// from another run's sweep instead ([`Request::sweep_from`]).
    fn learns_from_sweeps(&self) -> bool {
        false
    }

    /// Whether the study has a packet-level simulation it runs instead of the emulator
    /// ([`Request::sim`]; it overrides [`Study::run`] to run it).
    fn simulates(&self) -> bool {
        false
    }

    /// Measure `plan` (or, with `report_only`, read its directory back), write the report
    /// and charts into `plan.out`; the report's text and every trial's rows.
    fn measure(&self, plan: &Plan, request: &Request) -> Result<(String, Vec<Row>)>;

    /// What the terminal shows of a finished run: the report's tables, or a headline.
    fn summary(&self, plan: &Plan, report: &str, rows: &[Row]) -> String;

    /// Run what `request` asks for. The default makes one plan ([`plan`]) and measures it;
    /// a study whose applications need plans of their own (other systems or scenarios per
    /// application) overrides it.
    fn run(&self, request: &Request) -> Result<Finished> {
        run_matrix(self, request)
    }
}

/// Plan, measure and summarize `request` in the emulator: [`Study::run`]'s default.
pub fn run_matrix<S: Study + ?Sized>(study: &S, request: &Request) -> Result<Finished> {
    let plan = plan(study, request)?;
    let (report, rows) = study.measure(&plan, request)?;
    let summary = study.summary(&plan, &report, &rows);
    Ok(Finished {
        out: plan.out,
        report,
        rows,
        summary,
    })
}

/// The plan `request` asks of `study`: its defaults where the request says nothing.
pub fn plan<S: Study + ?Sized>(study: &S, request: &Request) -> Result<Plan> {
    let systems = match &request.systems {
        Some(names) => names
            .iter()
            .map(|s| study.system(s.trim()))
            .collect::<Result<Vec<_>>>()?,
        None => study.systems(request.quick),
    };
    plan_with(study, request, systems)
}

/// The plan `request` asks of `study`, over `systems`.
pub fn plan_with<S: Study + ?Sized>(
    study: &S,
    request: &Request,
    systems: Vec<System>,
) -> Result<Plan> {
    if request.sim && !study.simulates() {
        bail!(
            "--sim: `roam lab {}` has no packet-level simulation (only afc has)",
            study.name()
        );
    }
    if request.sweep_from.is_some() && !study.learns_from_sweeps() {
        bail!(
            "--sweep-from: `roam lab {}` does not learn from sweeps",
            study.name()
        );
    }
    let d = study.defaults();
    let r = request;
    let scenarios = r.scenarios.clone().unwrap_or(if r.quick {
        d.quick_scenarios
    } else {
        d.scenarios
    });
    let apps = r
        .apps
        .clone()
        .unwrap_or(if r.quick { d.quick_apps } else { d.apps });
    let jobs = r.jobs.unwrap_or(if r.quick {
        d.quick_jobs.unwrap_or(systems.len().max(1))
    } else {
        d.jobs
    });
    Ok(Plan {
        apps,
        scenarios: sweep::expand(&scenarios, &r.sweep)?,
        jobs,
        systems,
        trials: r.trials.unwrap_or(if r.quick { 1 } else { 5 }),
        first_seed: r.first_seed,
        quick: r.quick,
        duration: r.duration,
        out: r.out.clone().unwrap_or_else(|| PathBuf::from(d.out)),
        emu_logs: r.emu_logs.clone(),
        resume: r.resume,
        report_only: r.report_only,
        shard: r.shard,
    })
}

/// The lines of a report that a terminal shows: those `keep` accepts (tables and headings,
/// say), without the charts.
pub fn report_lines(report: &str, keep: impl Fn(&str) -> bool) -> String {
    report
        .lines()
        .filter(|l| keep(l))
        .map(|l| format!("{l}\n"))
        .collect()
}
