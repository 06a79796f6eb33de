//! A results directory: every trial's metrics (`trials.csv`), every interactive event's
//! latency (`events.csv`), what the trials said about themselves (`trials.log`), stamped with
//! the code and workloads that measured them (`run.json`). [`Recorder`] appends each trial as
//! it finishes, so an interrupted run keeps what it measured; `--resume` keeps a matching
//! run's finished trials ([`resumable`]) and `--report-only` reads a directory back ([`load`]).
//!
//! Nothing is forgotten: the failed trials `--resume` runs again are moved, rows and notes, to
//! `failures.csv` and `failures.log` (kept across every resume), and the report lists them
//! among its notes as earlier attempts.

use std::collections::{BTreeMap, HashSet};
use std::io::Write as _;
use std::path::Path;
use std::sync::Mutex;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::harness::plan::{App, Plan, DEVELOPMENT_SEEDS};
use crate::report::{self, Row};

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

/// What one trial gave: its metric rows, its notes (one line each) and its events' rows.
pub struct TrialRecord {
    /// The trial's name ([`trial_name`]).
    pub name: String,
    /// Its metrics (one `error` row if it failed).
    pub rows: Vec<Row>,
    /// Its notes, `name: text`.
    pub notes: Vec<String>,
    /// Its interactive events' latencies.
    pub events: Vec<Row>,
}

/// The results directory of a run in progress: what it keeps from an earlier run, and the
/// three files each finished trial is appended to.
pub struct Recorder {
    kept: HashSet<(String, String, String, u32)>,
    all: Mutex<Measured>,
    trials_csv: Mutex<std::fs::File>,
    events_csv: Mutex<std::fs::File>,
    trials_log: Mutex<std::fs::File>,
}

impl Recorder {
    /// Open `plan.out` for a run of `plan` over the lab's applications `all` (the plan's
    /// `app_ix`): stamp it (`run.json`), keep a matching earlier run's finished trials with
    /// their events and notes if the plan resumes, and start each file with what is kept.
    pub fn open(plan: &Plan, all: &[App], app_ix: Vec<usize>) -> Result<Recorder> {
        std::fs::create_dir_all(&plan.out)
            .with_context(|| format!("creating {}", plan.out.display()))?;
        let mut stamp = RunStamp::of(plan, all);
        let (rows, failed) = if plan.resume {
            resumable(&plan.out, &stamp)?
        } else {
            (Vec::new(), Vec::new())
        };
        // The invocations that wrote the trials kept, then this one.
        if plan.resume {
            if let Ok(old) = read_stamp(&plan.out, "--resume") {
                stamp.invocations = old.invocations;
                stamp.congestion_control = old.congestion_control;
            }
        }
        stamp.invocations.push(Invocation::now());
        keep_failures(&plan.out, &failed)?;
        let kept: HashSet<_> = rows.iter().map(trial_key).collect();
        std::fs::write(
            plan.out.join("run.json"),
            serde_json::to_string_pretty(&stamp)?,
        )?;
        // The events of the kept trials stay, like their rows.
        let events: Vec<Row> = if plan.resume {
            read_events(&plan.out, "--resume")?
                .into_iter()
                .filter(|r| kept.contains(&trial_key(r)))
                .collect()
        } else {
            Vec::new()
        };
        // The notes of the kept trials stay; those of trials about to run again go.
        let notes = read_notes(&plan.out, &rows)?;
        Ok(Recorder {
            trials_csv: start_appending(&plan.out.join("trials.csv"), &report::csv(&rows))?,
            events_csv: start_appending(&plan.out.join(EVENTS_CSV), &report::csv(&events))?,
            trials_log: start_appending(&plan.out.join(TRIALS_LOG), &lines(&notes))?,
            kept,
            all: Mutex::new(Measured {
                app_ix,
                rows,
                events,
                notes,
                version: VERSION.into(),
            }),
        })
    }

    /// Whether the trial `(app, scenario, system, trial)` was kept from an earlier run.
    pub fn has(&self, app: &str, scenario: &str, system: &str, trial: u32) -> bool {
        self.kept
            .contains(&(app.into(), scenario.into(), system.into(), trial))
    }

    /// How many trials were kept from an earlier run.
    pub fn kept(&self) -> usize {
        self.kept.len()
    }

    /// Append a finished trial to the files at once; a failed append is reported on stderr
    /// (through `say`) and made good when the run ends ([`Recorder::finish`]).
    pub fn record(&self, t: TrialRecord, say: impl Fn(&str)) {
        // A stopped run's trials under way ended because their processes were stopped: what
        // they measured is not a measurement, and `--resume` runs them again.
        if roam_emu::run::stopping() {
            return;
        }
        let appends: [(&Mutex<std::fs::File>, String, &str); 3] = [
            (&self.trials_csv, report::csv_lines(&t.rows), "trials.csv"),
            (&self.trials_log, lines(&t.notes), TRIALS_LOG),
            (&self.events_csv, report::csv_lines(&t.events), EVENTS_CSV),
        ];
        for (file, text, what) in appends {
            if let Err(e) = file.lock().unwrap().write_all(text.as_bytes()) {
                say(&format!("appending {} to {what}: {e}", t.name));
            }
        }
        let mut all = self.all.lock().unwrap();
        all.events.extend(t.events);
        all.notes.extend(t.notes);
        all.rows.extend(t.rows);
    }

    /// Write the three files once more, whole (complete even if an append failed), and give
    /// back everything measured and kept, with the notes of earlier failed attempts
    /// (`failures.log`) after the trials' own.
    pub fn finish(self, out: &Path) -> Result<Measured> {
        let mut m = self.all.into_inner().unwrap();
        std::fs::write(out.join("trials.csv"), report::csv(&m.rows))?;
        std::fs::write(out.join(TRIALS_LOG), lines(&m.notes))?;
        std::fs::write(out.join(EVENTS_CSV), report::csv(&m.events))?;
        // The congestion control the connections used, added to run.json.
        let mut stamp = read_stamp(out, "the run")?;
        stamp.add_congestion(crate::harness::channel::congestion_used());
        std::fs::write(out.join("run.json"), serde_json::to_string_pretty(&stamp)?)?;
        m.notes.extend(read_failures(out)?);
        Ok(m)
    }
}

/// Every interactive event's latency, one row each, in `trials.csv`'s columns (the metric is
/// the event's name, [`App::event`]).
const EVENTS_CSV: &str = "events.csv";

/// The source the lab was built from (`git describe --always --dirty`; see `build.rs`).
pub const VERSION: &str = env!("ROAM_VERSION");

/// What a results directory's trials were measured with (`run.json` beside `trials.csv`):
/// `--resume` adds trials only to a run that matches. `roam results index` lists the kept
/// runs from these ([`crate::harness::index`]).
#[derive(Serialize, Deserialize, PartialEq, Debug)]
pub(crate) struct RunStamp {
    pub(crate) version: String,
    pub(crate) quick: bool,
    /// The seed of every cell's first trial (runs before this field used 1).
    #[serde(default = "development_seeds")]
    pub(crate) first_seed: u64,
    /// Workload length per application (ms).
    pub(crate) workload_ms: BTreeMap<String, u64>,
    /// Every invocation that added trials, oldest first (runs before this field: none
    /// recorded); not part of what `--resume` matches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) invocations: Vec<Invocation>,
    /// The congestion control each kind of connection used in the trials this process ran
    /// (`tcp`, `mptcp`, `roam`; read back from the sockets, see
    /// `channel::congestion_used`), written when the run ends; not part of what `--resume`
    /// matches.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) congestion_control: BTreeMap<String, Vec<String>>,
}

/// One invocation of a lab that wrote trials into a results directory.
#[derive(Serialize, Deserialize, PartialEq, Eq, Debug, Clone)]
pub(crate) struct Invocation {
    /// Its command line.
    pub(crate) command: String,
    /// When it started (UTC, `2026-11-26T14:40:25Z`).
    pub(crate) started: String,
    /// The code that ran it.
    pub(crate) version: String,
}

impl Invocation {
    /// This process's invocation, now.
    pub(crate) fn now() -> Invocation {
        let argv: Vec<String> = std::env::args()
            .enumerate()
            .map(|(i, a)| {
                if i == 0 {
                    // The binary's name, not wherever it was built.
                    Path::new(&a)
                        .file_name()
                        .map_or(a.clone(), |n| n.to_string_lossy().into_owned())
                } else if a.contains(char::is_whitespace) {
                    format!("'{a}'")
                } else {
                    a
                }
            })
            .collect();
        Invocation {
            command: argv.join(" "),
            started: utc_now(),
            version: VERSION.into(),
        }
    }
}

/// The time now in UTC, `YYYY-MM-DDTHH:MM:SSZ`.
fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The civil date (year, month 1-12, day 1-31) `days` after 1970-01-01: Howard Hinnant's
/// `civil_from_days`.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m as u32, d as u32)
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
            invocations: Vec::new(),
            congestion_control: BTreeMap::new(),
        }
    }

    /// Add `used` (per kind of connection, the congestion controls its sockets used) to what
    /// the stamp records.
    fn add_congestion(&mut self, used: BTreeMap<String, Vec<String>>) {
        for (kind, used) in used {
            let v = self.congestion_control.entry(kind).or_default();
            v.extend(used);
            v.sort();
            v.dedup();
        }
    }

    /// Whether trials of a run stamped `self` may be added to one stamped `other` (the same
    /// code, seeds and workloads).
    fn same_run(&self, other: &RunStamp) -> bool {
        let bare = |s: &RunStamp| RunStamp {
            congestion_control: BTreeMap::new(),
            invocations: Vec::new(),
            version: s.version.clone(),
            workload_ms: s.workload_ms.clone(),
            ..*s
        };
        bare(self) == bare(other)
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

/// Failed trials that `--resume` ran again: their rows (`trials.csv`'s columns).
pub const FAILURES_CSV: &str = "failures.csv";
/// Their notes, each `name: failed (an earlier attempt, ...)`.
pub const FAILURES_LOG: &str = "failures.log";

/// Move the failed trials' rows `failed` (of a run `--resume` continues) and their notes to
/// `failures.csv` and `failures.log`, appending to what earlier resumes kept there.
fn keep_failures(out: &Path, failed: &[Row]) -> Result<()> {
    if failed.is_empty() {
        return Ok(());
    }
    let csv_path = out.join(FAILURES_CSV);
    let text = if csv_path.exists() {
        report::csv_lines(failed)
    } else {
        report::csv(failed)
    };
    let mut notes = read_notes(out, failed)?;
    for r in failed.iter().filter(|r| r.metric == "error") {
        let name = row_trial_name(r);
        if !notes.iter().any(|l| l.starts_with(&format!("{name}: "))) {
            notes.push(failed_note(&name, ""));
        }
    }
    let notes: Vec<String> = notes
        .iter()
        .map(|n| match n.split_once(": failed") {
            Some((name, rest)) => format!(
                "{name}: failed (an earlier attempt, run again by --resume of {VERSION}){rest}"
            ),
            None => format!("{n} (an earlier attempt, run again by --resume of {VERSION})"),
        })
        .collect();
    for (file, text) in [(FAILURES_CSV, text), (FAILURES_LOG, lines(&notes))] {
        let path = out.join(file);
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .with_context(|| format!("keeping the failed trials in {}", path.display()))?;
    }
    Ok(())
}

/// The notes of earlier failed attempts (`failures.log`; none if there is none).
fn read_failures(out: &Path) -> Result<Vec<String>> {
    let path = out.join(FAILURES_LOG);
    match std::fs::read_to_string(&path) {
        Ok(t) => Ok(t.lines().map(str::to_string).collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// The trials of `out` a resumed run keeps (those of a run stamped like `stamp`), and apart
/// the rows of the failed ones (they run again). Errors name the directory and what differs.
fn resumable(out: &std::path::Path, stamp: &RunStamp) -> Result<(Vec<Row>, Vec<Row>)> {
    let csv_path = out.join("trials.csv");
    if !csv_path.exists() {
        return Ok((Vec::new(), Vec::new()));
    }
    let old = read_stamp(out, "--resume").with_context(|| {
        format!(
            "--resume: {} needs a run.json beside it (it says which code measured the \
             trials); use another --out, or run without --resume to start over",
            csv_path.display()
        )
    })?;
    if !old.same_run(stamp) {
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
        .partition(|r| !failed.contains(&trial_key(r))))
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
pub(crate) fn read_stamp(out: &std::path::Path, what: &str) -> Result<RunStamp> {
    let path = out.join("run.json");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("{what}: reading {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{what}: {} is not a run stamp", path.display()))
}

/// The rows of `out/trials.csv`; `what` (the option) names the read in errors.
pub(crate) fn read_trials(out: &std::path::Path, what: &str) -> Result<Vec<Row>> {
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
pub fn trial_name(app: &str, scenario: &str, system: &str, trial: u32) -> String {
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
pub fn failed_note(name: &str, detail: &str) -> String {
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

/// Join results directories `parts` of one matrix (`--shard K/N` parts, or runs of the same
/// code and workloads kept apart) into `out`, for `--report-only` over the whole: their trials,
/// events, notes and failed attempts, and a `run.json` with every part's invocations. Refused,
/// naming the directory, if a part was measured by other code or workloads, if a trial is in
/// two parts, or if `out` already holds trials. How many trials `out` holds.
pub fn merge(out: &Path, parts: &[std::path::PathBuf]) -> Result<usize> {
    let Some(first) = parts.first() else {
        bail!("nothing to merge: name the parts' directories");
    };
    if out.join("trials.csv").exists() {
        bail!(
            "{} holds trials already: merge into a new directory",
            out.display()
        );
    }
    let mut stamp = read_stamp(first, "roam results merge")?;
    stamp.invocations.clear();
    let (mut rows, mut events, mut notes) = (Vec::new(), Vec::new(), Vec::new());
    let (mut failed_rows, mut failed_notes) = (Vec::new(), Vec::new());
    let mut from: BTreeMap<(String, String, String, u32), &Path> = BTreeMap::new();
    for part in parts {
        let s = read_stamp(part, "roam results merge")?;
        if !s.same_run(&stamp) {
            bail!(
                "{} holds trials of {}; {} holds {}: only parts of one run are merged",
                part.display(),
                s.describe(),
                first.display(),
                stamp.describe()
            );
        }
        stamp.invocations.extend(s.invocations);
        stamp.add_congestion(s.congestion_control);
        let part_rows = read_trials(part, "roam results merge")?;
        for key in part_rows.iter().map(trial_key).collect::<HashSet<_>>() {
            if let Some(other) = from.insert(key.clone(), part) {
                bail!(
                    "trial {} is in both {} and {}",
                    trial_name(&key.0, &key.1, &key.2, key.3),
                    other.display(),
                    part.display()
                );
            }
        }
        notes.extend(read_notes(part, &part_rows)?);
        rows.extend(part_rows);
        events.extend(read_events(part, "roam results merge")?);
        failed_notes.extend(read_failures(part)?);
        if let Ok(t) = std::fs::read_to_string(part.join(FAILURES_CSV)) {
            failed_rows.extend(report::parse_csv(
                &t,
                &part.join(FAILURES_CSV).display().to_string(),
            )?);
        }
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    std::fs::write(out.join("run.json"), serde_json::to_string_pretty(&stamp)?)?;
    std::fs::write(out.join("trials.csv"), report::csv(&rows))?;
    std::fs::write(out.join(EVENTS_CSV), report::csv(&events))?;
    std::fs::write(out.join(TRIALS_LOG), lines(&notes))?;
    if !failed_rows.is_empty() || !failed_notes.is_empty() {
        std::fs::write(out.join(FAILURES_CSV), report::csv(&failed_rows))?;
        std::fs::write(out.join(FAILURES_LOG), lines(&failed_notes))?;
    }
    Ok(from.len())
}

/// The trials already in `plan.out` (`--report-only`): nothing is run; the version is the
/// code that measured them (from `run.json`).
pub fn load(plan: &Plan, app_ix: Vec<usize>) -> Result<Measured> {
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
    notes.extend(read_failures(&plan.out)?);
    let events = read_events(&plan.out, "--report-only")?;
    Ok(Measured {
        app_ix,
        rows,
        events,
        notes,
        version: stamp.version,
    })
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::harness::system::Builtin;
    use std::time::Duration;

    /// An application of a lab for the framework's own tests: mail's metrics and lengths.
    fn apps() -> Vec<App> {
        vec![App {
            name: "mail",
            run: |_| Ok(Vec::new()),
            full: Duration::from_secs(600),
            quick: Duration::from_secs(180),
            interactive: ("ondemand_ms", "on-demand fetch delay (ms)"),
            background: ("background_s", "all messages fetched (s)", false),
            event: ("open", "wait for an opened message (ms)"),
            needs: &[],
            interactive_floor: None,
            stagger: None,
        }]
    }

    /// Trial 1 of mail on the hotspot over roam: its interactive and background metrics.
    fn rows(interactive: f64, background: f64) -> Vec<Row> {
        [("ondemand_ms", interactive), ("background_s", background)]
            .into_iter()
            .map(|(metric, value)| Row {
                app: "mail".into(),
                scenario: "hotspot".into(),
                system: "roam".into(),
                trial: 1,
                seed: 1,
                metric: metric.into(),
                value,
                unit: String::new(),
            })
            .collect()
    }

    /// A full (not quick) plan of mail on the hotspot over roam, writing to `out`.
    pub(crate) fn mail_plan(out: &std::path::Path, trials: u32, resume: bool) -> Plan {
        Plan {
            apps: vec!["mail".into()],
            scenarios: vec!["hotspot".into()],
            systems: vec![Builtin::Roam.into()],
            trials,
            first_seed: DEVELOPMENT_SEEDS,
            quick: false,
            duration: None,
            jobs: 1,
            out: out.to_path_buf(),
            emu_logs: None,
            resume,
            report_only: false,
            shard: None,
        }
    }

    /// A resumed run keeps the finished trials of a matching run and drops the failed ones.
    /// Shards of one run merge into one directory; a trial in two parts, or a part of other
    /// code, is refused.
    #[test]
    fn parts_of_one_run_merge() {
        let root = std::env::temp_dir().join(format!("roam-lab-merge-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let plan = mail_plan(&root, 2, false);
        let stamp = RunStamp::of(&plan, &apps());
        let part = |name: &str, trial: u32, stamp: &RunStamp| {
            let d = root.join(name);
            std::fs::create_dir_all(&d).unwrap();
            let mut r = rows(300.0, 11.0);
            for x in &mut r {
                x.trial = trial;
            }
            std::fs::write(d.join("trials.csv"), report::csv(&r)).unwrap();
            std::fs::write(d.join("run.json"), serde_json::to_string(stamp).unwrap()).unwrap();
            d
        };
        let (a, b) = (part("a", 1, &stamp), part("b", 2, &stamp));
        assert_eq!(
            merge(&root.join("all"), &[a.clone(), b.clone()]).unwrap(),
            2
        );
        let merged = read_trials(&root.join("all"), "test").unwrap();
        assert_eq!(merged.len(), 4);
        let e = merge(&root.join("again"), &[a.clone(), a.clone()]).unwrap_err();
        assert!(format!("{e:#}").contains("is in both"), "{e:#}");
        let other = RunStamp {
            version: "0000000".into(),
            ..RunStamp::of(&plan, &apps())
        };
        let c = part("c", 3, &other);
        let e = merge(&root.join("mixed"), &[a, c]).unwrap_err();
        assert!(format!("{e:#}").contains("only parts of one run"), "{e:#}");
        let e = merge(&root.join("all"), &[b]).unwrap_err();
        assert!(format!("{e:#}").contains("holds trials already"), "{e:#}");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn resuming_keeps_finished_trials_and_retries_failed_ones() {
        let dir = std::env::temp_dir().join(format!("roam-lab-resume-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let plan = mail_plan(&dir, 2, true);
        let stamp = RunStamp::of(&plan, &apps());
        assert!(resumable(&dir, &stamp).unwrap().0.is_empty(), "nothing yet");
        let mut rows = rows(300.0, 11.0);
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
        let (kept, failed) = resumable(&dir, &stamp).unwrap();
        assert_eq!(kept.len(), 2);
        assert!(kept.iter().all(|r| r.trial == 1));
        assert_eq!(failed.len(), 1);
        // The failed trial's rows and note are kept apart, across resumes, and reported.
        std::fs::write(
            dir.join(TRIALS_LOG),
            "mail/hotspot/roam#2: failed: the server did not start\n",
        )
        .unwrap();
        drop(Recorder::open(&plan, &apps(), vec![0]).unwrap());
        drop(Recorder::open(&plan, &apps(), vec![0]).unwrap());
        let log = std::fs::read_to_string(dir.join(FAILURES_LOG)).unwrap();
        assert_eq!(
            log.lines().count(),
            1,
            "the second resume had nothing failed: {log}"
        );
        assert!(
            log.starts_with(
                "mail/hotspot/roam#2: failed (an earlier attempt, run again by --resume of "
            ) && log.trim_end().ends_with("): the server did not start"),
            "{log}"
        );
        let csv = std::fs::read_to_string(dir.join(FAILURES_CSV)).unwrap();
        assert_eq!(report::parse_csv(&csv, "failures.csv").unwrap().len(), 1);
        let notes = load(&plan, vec![0]).unwrap().notes;
        assert!(
            notes.iter().any(|n| n.contains("an earlier attempt")),
            "{notes:?}"
        );
        std::fs::write(dir.join("trials.csv"), report::csv(&rows)).unwrap();
        std::fs::write(dir.join("run.json"), serde_json::to_string(&stamp).unwrap()).unwrap();
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
