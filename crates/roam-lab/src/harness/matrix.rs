//! The lab framework every lab shares: a matrix of applications x scenarios x systems x
//! trials, each trial in a fresh emulator ([`crate::harness::trial`], [`crate::harness::ends`]), `--jobs` at
//! once with a progress bar, every result appended as it comes (`trials.csv`, `events.csv`,
//! `trials.log`), `--resume` and `--report-only` over a results directory stamped with the
//! code that measured it (`run.json`), and the charts ([`charts`]). A lab supplies its
//! applications ([`App`]) and writes its own report from [`Measured`]
//! (`roam lab in-paper`: [`crate::studies::in_paper`]).

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};

use crate::harness::setup::Need;
use crate::harness::sweep;
use crate::harness::system::System;
use crate::harness::trial::{self, Metric, Trial};
use crate::report::chart::{self, Bar};
use crate::report::compare::values;
use crate::report::{self, summarize, Row};

/// One application of a lab: how to run a trial of it and which of its metrics the
/// report and charts show.
pub struct App {
    /// Name on the command line and in reports.
    pub name: &'static str,
    /// Run one trial.
    pub run: fn(&Trial) -> Result<Vec<Metric>>,
    /// Workload length of a full run.
    pub full: Duration,
    /// Workload length of a `--quick` run.
    pub quick: Duration,
    /// The interactive metric (lower is better) and how reports name it.
    pub interactive: (&'static str, &'static str),
    /// The background metric, how reports name it, and whether higher is better.
    pub background: (&'static str, &'static str, bool),
    /// The interactive event whose every latency a trial records (`events.csv`), and how
    /// the distribution charts name it.
    pub event: (&'static str, &'static str),
    /// What its trials need installed besides `ip` (checked, and installed as root, once
    /// per run).
    pub needs: &'static [Need],
    /// A metric giving the least the interactive metric can be on any network (the file
    /// system's replay cannot be shorter than the recorded build it replays), if there is one.
    pub interactive_floor: Option<&'static str>,
    /// For an application with periodic bursts of CPU (speech recognition every 30 s): trials
    /// of it run side by side start this long divided by `--jobs` apart, so their bursts do
    /// not line up and take CPU from each other. Each trial's own timeline is unchanged.
    pub stagger: Option<Duration>,
}

/// Every interactive event's latency, one row each, in `trials.csv`'s columns (the metric is
/// the event's name, [`App::event`]).
const EVENTS_CSV: &str = "events.csv";

/// What to run.
pub struct Plan {
    /// Applications (names).
    pub apps: Vec<String>,
    /// Scenarios.
    pub scenarios: Vec<String>,
    /// Systems.
    pub systems: Vec<System>,
    /// Trials per cell.
    pub trials: u32,
    /// The seed of the first trial of every cell; trial k has seed `first_seed + k - 1`. The
    /// development seeds start at 1 ([`DEVELOPMENT_SEEDS`]), the held-out ones at
    /// [`HELD_OUT_SEEDS`].
    pub first_seed: u64,
    /// Reduced workloads.
    pub quick: bool,
    /// Workload length for every application (overrides their defaults).
    pub duration: Option<Duration>,
    /// Trials run at once (each in its own emulator).
    pub jobs: usize,
    /// Output directory.
    pub out: PathBuf,
    /// Keep each trial's emulator logs (per-link CSV bins and a summary) in
    /// `<dir>/<app>-<scenario>-<system>-<trial>/`.
    pub emu_logs: Option<PathBuf>,
    /// Keep the trials already in `out/trials.csv` (measured by the same code with the same
    /// workloads, per `out/run.json`) and run only the missing or failed ones.
    pub resume: bool,
    /// Run nothing: write the report and charts of the trials already in `out` (measured by
    /// the code `out/run.json` names), e.g. after the report's explanations changed.
    pub report_only: bool,
}

/// The first seed of the trials roam-net was developed and tuned against (every run on
/// record before 2026-11-24 used seeds 1-5).
pub const DEVELOPMENT_SEEDS: u64 = 1;

/// The first of the seeds kept out of development (101-105 for five trials): no run used them
/// while roam-net was built, so figures measured on them cannot have been tuned to them. The
/// README's headline figures are to come from these.
pub const HELD_OUT_SEEDS: u64 = 101;

/// The source the lab was built from (`git describe --always --dirty`; see `build.rs`).
pub const VERSION: &str = env!("ROAM_VERSION");

/// What a results directory's trials were measured with (`run.json` beside `trials.csv`):
/// `--resume` adds trials only to a run that matches.
#[derive(Serialize, Deserialize, PartialEq, Debug)]
struct RunStamp {
    version: String,
    quick: bool,
    /// The seed of every cell's first trial (runs before this field used 1).
    #[serde(default = "development_seeds")]
    first_seed: u64,
    /// Workload length per application (ms).
    workload_ms: BTreeMap<String, u64>,
}

fn development_seeds() -> u64 {
    DEVELOPMENT_SEEDS
}

impl RunStamp {
    fn of(plan: &Plan, all: &[App]) -> RunStamp {
        RunStamp {
            version: VERSION.into(),
            quick: plan.quick,
            first_seed: plan.first_seed,
            workload_ms: all
                .iter()
                .map(|a| (a.name.to_string(), plan.workload(a).as_millis() as u64))
                .collect(),
        }
    }

    fn describe(&self) -> String {
        let w: Vec<String> = self
            .workload_ms
            .iter()
            .map(|(a, ms)| format!("{a} {}s", ms / 1000))
            .collect();
        format!(
            "roam {}, {}seeds from {}, {}",
            self.version,
            if self.quick { "quick, " } else { "" },
            self.first_seed,
            w.join(", ")
        )
    }
}

/// The trials of `out` a resumed run keeps: those of a run stamped like `stamp`, without
/// the failed ones (they run again). Errors name the directory and what differs.
fn resumable(out: &std::path::Path, stamp: &RunStamp) -> Result<Vec<Row>> {
    let csv_path = out.join("trials.csv");
    if !csv_path.exists() {
        return Ok(Vec::new());
    }
    let old = read_stamp(out, "--resume").with_context(|| {
        format!(
            "--resume: {} needs a run.json beside it (it says which code measured the \
             trials); use another --out, or run without --resume to start over",
            csv_path.display()
        )
    })?;
    if &old != stamp {
        bail!(
            "--resume: {} holds trials of {}; this run is {}. Trials are only added to a run \
             of the same code and workloads: use another --out, or run without --resume to \
             start over",
            out.display(),
            old.describe(),
            stamp.describe()
        );
    }
    let rows = read_trials(out, "--resume")?;
    let failed: HashSet<_> = rows
        .iter()
        .filter(|r| r.metric == "error")
        .map(trial_key)
        .collect();
    Ok(rows
        .into_iter()
        .filter(|r| !failed.contains(&trial_key(r)))
        .collect())
}

/// The trials of another run's directory `out` (its `trials.csv`, failed trials left out)
/// and the code that measured them (its `run.json`), for a lab that reuses them as they are
/// (`roam lab fasthla --sweep-from`); `what` (the option) names the read in errors.
pub fn read_run(out: &std::path::Path, what: &str) -> Result<(String, Vec<Row>)> {
    let stamp = read_stamp(out, what)?;
    let rows = read_trials(out, what)?;
    let failed: HashSet<_> = rows
        .iter()
        .filter(|r| r.metric == "error")
        .map(trial_key)
        .collect();
    let rows = rows
        .into_iter()
        .filter(|r| !failed.contains(&trial_key(r)))
        .collect();
    Ok((stamp.describe(), rows))
}

/// `out/run.json`; `what` (the option) names the read in errors.
fn read_stamp(out: &std::path::Path, what: &str) -> Result<RunStamp> {
    let path = out.join("run.json");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("{what}: reading {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{what}: {} is not a run stamp", path.display()))
}

/// The rows of `out/trials.csv`; `what` (the option) names the read in errors.
fn read_trials(out: &std::path::Path, what: &str) -> Result<Vec<Row>> {
    let path = out.join("trials.csv");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("{what}: reading {}", path.display()))?;
    report::parse_csv(&text, &path.display().to_string())
}

/// The rows of `out/events.csv` (every interactive event's latency), none if the run has no
/// such file (runs before 2026-11-24); `what` (the option) names the read in errors.
fn read_events(out: &std::path::Path, what: &str) -> Result<Vec<Row>> {
    let path = out.join(EVENTS_CSV);
    if !path.exists() {
        return Ok(Vec::new());
    }
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("{what}: reading {}", path.display()))?;
    report::parse_csv(&text, &path.display().to_string())
}

/// Which trial a row belongs to.
fn trial_key(r: &Row) -> (String, String, String, u32) {
    (r.app.clone(), r.scenario.clone(), r.system.clone(), r.trial)
}

/// A trial's name in progress lines, `trials.log` and the report: `app/scenario/system#trial`.
fn trial_name(app: &str, scenario: &str, system: &str, trial: u32) -> String {
    format!("{app}/{scenario}/{system}#{trial}")
}

/// A `trials.log` note's parts (`app/scenario/system#trial: text`, see `trial_name`).
pub struct NoteParts<'a> {
    /// The application (a lab's dataset or workload).
    pub app: &'a str,
    /// The scenario, with its changed parameters.
    pub scenario: &'a str,
    /// The system under test.
    pub system: &'a str,
    /// The trial's whole name, `app/scenario/system#trial`.
    pub name: &'a str,
    /// What the trial said.
    pub text: &'a str,
}

/// The parts of `note`, if it is one of a trial.
pub fn note_parts(note: &str) -> Option<NoteParts<'_>> {
    let (name, text) = note.split_once(": ")?;
    let (cell, _) = name.rsplit_once('#')?;
    let mut path = cell.splitn(3, '/');
    Some(NoteParts {
        app: path.next()?,
        scenario: path.next()?,
        system: path.next()?,
        name,
        text,
    })
}

/// The system of a `trials.log` note.
pub fn note_system(note: &str) -> Option<&str> {
    note_parts(note).map(|n| n.system)
}

/// The note of a trial that failed (it measured nothing): `name: failed` and then `detail`,
/// e.g. `: <the error>`. [`note_failed`] recognises it.
fn failed_note(name: &str, detail: &str) -> String {
    format!("{name}: failed{detail}")
}

/// Whether a `trials.log` note says its trial failed (`failed_note`) rather than why it did
/// not finish.
pub fn note_failed(note: &str) -> bool {
    note.split_once(": ")
        .is_some_and(|(_, said)| said.starts_with("failed"))
}

/// The name of the trial a row belongs to ([`trial_name`]).
fn row_trial_name(r: &Row) -> String {
    trial_name(&r.app, &r.scenario, &r.system, r.trial)
}

/// `trials.log` in a results directory: one line per note on a trial (why it did not
/// finish, why it failed), `app/scenario/system#trial: text`.
pub const TRIALS_LOG: &str = "trials.log";

/// `path` holding `text`, opened to append to (a results file that grows trial by trial).
fn start_appending(path: &std::path::Path, text: &str) -> Result<Mutex<std::fs::File>> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    let f = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    Ok(Mutex::new(f))
}

/// Each string as a line.
fn lines(v: &[String]) -> String {
    v.iter().map(|l| format!("{l}\n")).collect()
}

/// The lines of `out/trials.log` that belong to trials in `rows` (empty if there is none:
/// runs before the log existed).
pub(crate) fn read_notes(out: &std::path::Path, rows: &[Row]) -> Result<Vec<String>> {
    let path = out.join(TRIALS_LOG);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let names: HashSet<String> = rows.iter().map(row_trial_name).collect();
    Ok(text
        .lines()
        .filter(|l| l.split_once(": ").is_some_and(|(n, _)| names.contains(n)))
        .map(str::to_string)
        .collect())
}

impl Plan {
    /// How long `app`'s workload runs under this plan.
    pub fn workload(&self, app: &App) -> Duration {
        self.duration
            .unwrap_or(if self.quick { app.quick } else { app.full })
    }
}

struct Job {
    app: usize,
    scenario: String,
    system: System,
    trial: u32,
    duration: Duration,
}

/// What a run measured, or what a results directory holds (`--report-only`).
pub struct Measured {
    /// The plan's applications, as indices into the lab's list.
    pub app_ix: Vec<usize>,
    /// Every trial's metrics (`trials.csv`).
    pub rows: Vec<Row>,
    /// Every interactive event's latency (`events.csv`).
    pub events: Vec<Row>,
    /// What the trials said about themselves (`trials.log`).
    pub notes: Vec<String>,
    /// The code that measured them.
    pub version: String,
}

/// Run `plan` over the lab's applications `all` (or, with `report_only`, read what its
/// directory holds): every trial in a fresh emulator, `jobs` at once, with a progress bar;
/// each finished trial appended to `trials.csv`, `events.csv` and `trials.log` at once, so an
/// interrupted run keeps what it measured; `--resume` keeps a matching run's trials.
pub fn measure(plan: &Plan, all: &[App]) -> Result<Measured> {
    let mut app_ix = Vec::new();
    for a in &plan.apps {
        match all.iter().position(|x| x.name == a) {
            Some(i) => app_ix.push(i),
            None => bail!(
                "unknown application `{a}` (expected one of: {})",
                all.iter().map(|x| x.name).collect::<Vec<_>>().join(", ")
            ),
        }
    }
    for s in &plan.scenarios {
        sweep::scenario(s, 1)?;
    }
    if plan.trials == 0 || plan.jobs == 0 {
        bail!("--trials and --jobs must be at least 1");
    }
    if plan.report_only {
        return load(plan, app_ix);
    }
    // What every trial needs, checked (and installed, as root) once: otherwise each trial
    // fails with the same reason.
    roam_emu::sys::check_privileges().map_err(anyhow::Error::msg)?;
    let mut needs = vec![crate::harness::setup::IPROUTE2];
    for &a in &app_ix {
        needs.extend(all[a].needs);
    }
    crate::harness::setup::ensure(&needs)?;
    std::fs::create_dir_all(&plan.out)
        .with_context(|| format!("creating {}", plan.out.display()))?;
    let stamp = RunStamp::of(plan, all);
    let kept = if plan.resume {
        resumable(&plan.out, &stamp)?
    } else {
        Vec::new()
    };
    let done: HashSet<_> = kept.iter().map(trial_key).collect();
    // Every finished trial is appended at once, so an interrupted run keeps what it measured.
    let csv_path = plan.out.join("trials.csv");
    std::fs::write(
        plan.out.join("run.json"),
        serde_json::to_string_pretty(&stamp)?,
    )?;
    let csv_file = start_appending(&csv_path, &report::csv(&kept))?;
    // The events of the kept trials stay, like their rows.
    let kept_events: Vec<Row> = if plan.resume {
        read_events(&plan.out, "--resume")?
            .into_iter()
            .filter(|r| done.contains(&trial_key(r)))
            .collect()
    } else {
        Vec::new()
    };
    let events_path = plan.out.join(EVENTS_CSV);
    let events_file = start_appending(&events_path, &report::csv(&kept_events))?;
    // The notes of the kept trials stay; those of trials about to run again go.
    let kept_notes = read_notes(&plan.out, &kept)?;
    let log_path = plan.out.join(TRIALS_LOG);
    let log_file = start_appending(&log_path, &lines(&kept_notes))?;
    let mut jobs = VecDeque::new();
    for trial in 1..=plan.trials {
        for s in &plan.scenarios {
            for &a in &app_ix {
                let d = plan.workload(&all[a]);
                for &system in &plan.systems {
                    let key = (
                        all[a].name.to_string(),
                        s.clone(),
                        system.name().to_string(),
                        trial,
                    );
                    if done.contains(&key) {
                        continue;
                    }
                    jobs.push_back(Job {
                        app: a,
                        scenario: s.clone(),
                        system,
                        trial,
                        duration: d,
                    });
                }
            }
        }
    }
    let total: u64 = jobs.iter().map(|j| j.duration.as_secs()).sum();
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} workload-s, ETA {eta} {msg}",
        )
        .unwrap()
        .progress_chars("=> "),
    );
    let n_jobs = jobs.len();
    let finished = std::sync::atomic::AtomicUsize::new(0);
    let queue = Arc::new(Mutex::new(jobs));
    if !done.is_empty() {
        eprintln!(
            "resuming {}: {} trial(s) kept, {} to run",
            plan.out.display(),
            done.len(),
            n_jobs
        );
    }
    let rows: Arc<Mutex<Vec<Row>>> = Arc::new(Mutex::new(kept));
    let events: Arc<Mutex<Vec<Row>>> = Arc::new(Mutex::new(kept_events));
    let notes: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(kept_notes));
    let running: Arc<Mutex<Vec<String>>> = Arc::default();
    std::thread::scope(|scope| {
        let workers = plan.jobs.min(n_jobs);
        for worker in 0..workers {
            let (queue, rows, events, notes, running, bar, all) =
                (&queue, &rows, &events, &notes, &running, &bar, &all);
            let (csv_file, log_file, events_file) = (&csv_file, &log_file, &events_file);
            let finished = &finished;
            let mut first = true;
            scope.spawn(move || loop {
                let Some(j) = queue.lock().unwrap().pop_front() else {
                    return;
                };
                let app = &all[j.app];
                if let (true, Some(s)) = (std::mem::take(&mut first), app.stagger) {
                    std::thread::sleep(s * worker as u32 / workers as u32);
                }
                let name = trial_name(app.name, &j.scenario, j.system.name(), j.trial);
                let show_running = |r: &Vec<String>| bar.set_message(r.join(" "));
                {
                    let mut r = running.lock().unwrap();
                    r.push(name.clone());
                    show_running(&r);
                }
                let seed = plan.first_seed + j.trial as u64 - 1;
                let done = Arc::new(Mutex::new(0u64));
                let (b2, d2) = (bar.clone(), done.clone());
                let progress: Arc<dyn Fn(u64) + Send + Sync> = Arc::new(move |s| {
                    let mut d = d2.lock().unwrap();
                    if s > *d {
                        b2.inc(s - *d);
                        *d = s;
                    }
                });
                let result = sweep::scenario(&j.scenario, seed).and_then(|(sc, queue)| {
                    let logs = plan.emu_logs.as_ref().map(|d| {
                        d.join(format!(
                            "{}-{}-{}-{}",
                            app.name,
                            sc.name,
                            j.system.name(),
                            j.trial
                        ))
                    });
                    let queue = queue.unwrap_or(crate::harness::system::QUEUE);
                    trial::run(
                        app.run, &sc, queue, j.system, j.duration, seed, progress, logs,
                    )
                });
                let d = *done.lock().unwrap();
                bar.inc(j.duration.as_secs().saturating_sub(d));
                let base = |metric: &str, value: f64, unit: &str| Row {
                    app: app.name.into(),
                    scenario: j.scenario.clone(),
                    system: j.system.name().into(),
                    trial: j.trial,
                    seed,
                    metric: metric.into(),
                    value,
                    unit: unit.into(),
                };
                let (new, said, timed): (Vec<Row>, Vec<String>, Vec<Row>) = match result {
                    Ok(ran) => (
                        ran.metrics
                            .iter()
                            .map(|m| base(&m.name, m.value, &m.unit))
                            .collect(),
                        ran.notes.iter().map(|n| format!("{name}: {n}")).collect(),
                        ran.events.iter().map(|(e, v)| base(e, *v, "ms")).collect(),
                    ),
                    Err(e) => (
                        vec![base("error", f64::NAN, "")],
                        vec![failed_note(&name, &format!(": {e:#}"))],
                        Vec::new(),
                    ),
                };
                // One line each (an error may quote a multi-line log): trials.log is read by line.
                let said: Vec<String> = said
                    .into_iter()
                    .map(|l| l.lines().collect::<Vec<_>>().join(" | "))
                    .collect();
                for line in &said {
                    // Not `bar.println`: it draws nothing without a terminal (CI logs).
                    bar.suspend(|| eprintln!("{line}"));
                }
                let text = report::csv_lines(&new);
                if let Err(e) = csv_file.lock().unwrap().write_all(text.as_bytes()) {
                    bar.suspend(|| eprintln!("appending {name} to trials.csv: {e}"));
                }
                if let Err(e) = log_file.lock().unwrap().write_all(lines(&said).as_bytes()) {
                    bar.suspend(|| eprintln!("appending {name} to {TRIALS_LOG}: {e}"));
                }
                let text = report::csv_lines(&timed);
                if let Err(e) = events_file.lock().unwrap().write_all(text.as_bytes()) {
                    bar.suspend(|| eprintln!("appending {name} to {EVENTS_CSV}: {e}"));
                }
                events.lock().unwrap().extend(timed);
                notes.lock().unwrap().extend(said);
                rows.lock().unwrap().extend(new);
                let k = finished.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                if bar.is_hidden() {
                    // No terminal (CI logs): one line per finished trial instead of a bar.
                    eprintln!(
                        "[trial {k}/{n_jobs}; {}/{} workload-s] {name} done",
                        bar.position(),
                        bar.length().unwrap_or(0)
                    );
                }
                let mut r = running.lock().unwrap();
                r.retain(|x| *x != name);
                show_running(&r);
            });
        }
    });
    bar.finish_with_message("done");
    let rows = rows.lock().unwrap().clone();
    let notes = notes.lock().unwrap().clone();
    let events = events.lock().unwrap().clone();
    // Once more, whole: complete even if an append above failed.
    std::fs::write(plan.out.join("trials.csv"), report::csv(&rows))?;
    std::fs::write(&log_path, lines(&notes))?;
    std::fs::write(&events_path, report::csv(&events))?;
    Ok(Measured {
        app_ix,
        rows,
        events,
        notes,
        version: VERSION.into(),
    })
}

/// The trials already in `plan.out` (`--report-only`): nothing is run; the version is the
/// code that measured them (from `run.json`).
fn load(plan: &Plan, app_ix: Vec<usize>) -> Result<Measured> {
    let stamp = read_stamp(&plan.out, "--report-only")?;
    let rows = read_trials(&plan.out, "--report-only")?;
    let mut notes = read_notes(&plan.out, &rows)?;
    // Failed trials of runs from before `trials.log` existed.
    for r in rows.iter().filter(|r| r.metric == "error") {
        let name = row_trial_name(r);
        if !notes.iter().any(|l| l.starts_with(&format!("{name}: "))) {
            notes.push(failed_note(&name, " (the reason is in the log of the run)"));
        }
    }
    let events = read_events(&plan.out, "--report-only")?;
    Ok(Measured {
        app_ix,
        rows,
        events,
        notes,
        version: stamp.version,
    })
}

/// Write the charts of what was measured into `plan.out`: per application a bar chart of its
/// interactive and of its background metric (the mean, its interval, every trial), and per
/// scenario the distribution of its events ([`cdf_file`]).
pub fn charts(plan: &Plan, all: &[App], m: &Measured) -> Result<()> {
    let (rows, events) = (&m.rows, &m.events);
    for &a in &m.app_ix {
        let app = &all[a];
        for (metric, label, file) in [
            (app.interactive.0, app.interactive.1, "interactive"),
            (app.background.0, app.background.1, "background"),
        ] {
            let mut bars = Vec::new();
            for s in &plan.scenarios {
                for sys in &plan.systems {
                    let points = values(rows, app.name, s, sys.name(), metric);
                    let v = summarize(&points);
                    let interval = v.interval();
                    bars.push(Bar {
                        group: s.clone(),
                        series: sys.name().into(),
                        value: v.value(),
                        center: v.mean,
                        ci: interval.map_or(f64::NAN, |_| v.ci),
                        note: v.some_unfinished().unwrap_or_default(),
                        points,
                    });
                }
            }
            let svg = chart::bar_chart(
                &format!(
                    "{}: {label}\nbars: mean of the trials (median where one did not finish); \
                     whiskers: its 95% t interval (none where skewed); dots: the trials",
                    app.name
                ),
                label,
                &bars,
            );
            std::fs::write(plan.out.join(format!("{}-{file}.svg", app.name)), svg)?;
        }
        for s in &plan.scenarios {
            let curves = event_curves(plan, app, s, events);
            if curves.is_empty() {
                continue;
            }
            let svg = chart::cdf_chart(
                &format!(
                    "{} on {s}: {}\nevery event of every trial, pooled per system",
                    app.name, app.event.1
                ),
                app.event.1,
                &curves,
            );
            std::fs::write(plan.out.join(cdf_file(app, s)), svg)?;
        }
    }
    Ok(())
}

/// The distribution chart of `app`'s events on scenario `s`.
pub fn cdf_file(app: &App, s: &str) -> String {
    format!("{}-{s}-events.svg", app.name)
}

/// Each system's events of `app` on scenario `s`, pooled over its trials; none if no system
/// recorded any.
pub fn event_curves(plan: &Plan, app: &App, s: &str, events: &[Row]) -> Vec<chart::Curve> {
    let curves: Vec<chart::Curve> = plan
        .systems
        .iter()
        .map(|sys| chart::Curve {
            name: sys.name().into(),
            values: events
                .iter()
                .filter(|r| {
                    r.app == app.name
                        && r.scenario == s
                        && r.system == sys.name()
                        && r.metric == app.event.0
                })
                .map(|r| r.value)
                .collect(),
        })
        .collect();
    if curves.iter().all(|c| c.values.is_empty()) {
        return Vec::new();
    }
    curves
}

/// What a report says of the code that wrote it when another version measured its trials
/// (`measured`, from run.json): nothing if they are the same.
pub fn written_by(measured: &str) -> String {
    if measured == VERSION {
        String::new()
    } else {
        format!(" (report written by roam `{VERSION}`)")
    }
}

/// Which seeds the trials used, and whether they were held out of development.
pub fn seeds_line(rows: &[Row]) -> String {
    let seeds: std::collections::BTreeSet<u64> = rows.iter().map(|r| r.seed).collect();
    let (Some(lo), Some(hi)) = (seeds.first(), seeds.last()) else {
        return "No trials.".into();
    };
    let range = if lo == hi {
        format!("seed {lo}")
    } else {
        format!("seeds {lo}-{hi}")
    };
    let which = if *lo >= HELD_OUT_SEEDS {
        "held out of development: no run used them while roam-net was built"
    } else if *hi < HELD_OUT_SEEDS {
        "the development seeds, which roam-net was developed and tuned against; \
         `--seeds held-out` measures on seeds none of that saw"
    } else {
        "development and held-out seeds mixed"
    };
    format!("Trials used {range} ({which}).")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::report::compare::test_rows::rows;
    use crate::studies::in_paper::apps;

    /// A full (not quick) plan of mail on the hotspot over roam, writing to `out`.
    pub(crate) fn mail_plan(out: &std::path::Path, trials: u32, resume: bool) -> Plan {
        Plan {
            apps: vec!["mail".into()],
            scenarios: vec!["hotspot".into()],
            systems: vec![System::Roam],
            trials,
            first_seed: DEVELOPMENT_SEEDS,
            quick: false,
            duration: None,
            jobs: 1,
            out: out.to_path_buf(),
            emu_logs: None,
            resume,
            report_only: false,
        }
    }

    /// A resumed run keeps the finished trials of a matching run and drops the failed ones.
    #[test]
    fn resuming_keeps_finished_trials_and_retries_failed_ones() {
        let dir = std::env::temp_dir().join(format!("roam-lab-resume-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let plan = mail_plan(&dir, 2, true);
        let stamp = RunStamp::of(&plan, &apps());
        assert!(resumable(&dir, &stamp).unwrap().is_empty(), "nothing yet");
        let mut rows = rows(&[("roam", 300.0, 11.0)]);
        let mut failed = rows[0].clone();
        (failed.trial, failed.metric, failed.value) = (2, "error".into(), f64::NAN);
        rows.push(failed);
        std::fs::write(dir.join("trials.csv"), report::csv(&rows)).unwrap();
        let e = resumable(&dir, &stamp).unwrap_err();
        assert!(
            format!("{e:#}").contains("needs a run.json beside it"),
            "{e:#}"
        );
        std::fs::write(dir.join("run.json"), serde_json::to_string(&stamp).unwrap()).unwrap();
        let kept = resumable(&dir, &stamp).unwrap();
        assert_eq!(kept.len(), 2);
        assert!(kept.iter().all(|r| r.trial == 1));
        let other = RunStamp {
            version: "0000000".into(),
            ..RunStamp::of(&plan, &apps())
        };
        let e = resumable(&dir, &other).unwrap_err();
        assert!(format!("{e:#}").contains("roam 0000000"), "{e:#}");
        // Another lab reading these trials as they are (--sweep-from) gets the finished ones
        // and the code that measured them, whatever its own version.
        let (by, read) = read_run(&dir, "--sweep-from").unwrap();
        assert_eq!(read.len(), 2);
        assert!(by.contains(&format!("roam {VERSION}")), "{by}");
        let e = read_run(&dir.join("absent"), "--sweep-from").unwrap_err();
        assert!(format!("{e:#}").contains("--sweep-from"), "{e:#}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
