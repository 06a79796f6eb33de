//! `roam lab afc --sim`: the thesis's own experiments at packet level, in ns-3.
//!
//! The Sanadhya thesis evaluated AFC in NS2 (ch. III §3.5). This reproduces that evaluation in
//! ns-3 3.37 (Debian's `libns3-dev`): `sim/ns3-afc/afc-sim.cc` is AFC as a variant of ns-3's
//! TCP (Algorithms 1-4), beside ns-3's TCP with the window update after a read that Linux
//! sends (the baseline; ns-3.37 itself sends none, shown as `ns3`), with a receiving
//! application that reads by the thesis's profiles. The program's source and its build script
//! are compiled into roam; a run writes them to `OUT/build/`, builds them there (installing
//! the Debian packages as root when missing: `scripts/build-ns3-afc`), and runs every point of
//! every experiment ([`experiments`]) for every system and trial, `--jobs` at once. Each run
//! is one process whose CSV (one line per flow) becomes rows of `OUT/trials.csv`; a failed run
//! is kept as an `error` row and its message in `OUT/failures.log`. `--resume` runs only what
//! `trials.csv` lacks; `--report-only` rewrites the report ([`report`]).
//!
//! Trials differ by seed: the seed sets where in its read profile each reader starts, so a
//! trial is not the same simulation run again.

pub mod experiments;
mod report;

use std::collections::{HashSet, VecDeque};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use roam_core::progress::{Progress, Unit};
use serde::{Deserialize, Serialize};

use crate::harness::matrix::pool;
use crate::harness::results::{Invocation, VERSION};
use crate::harness::study::{Finished, Request};
use crate::report::{csv, csv_lines, parse_csv, Row};
use crate::studies::afc::dumbbell::jain;
use experiments::{Experiment, Point};

/// The ns-3 program's source (GPL-2.0: it links ns-3; roam runs it as a process).
const SOURCE: &str = include_str!("../../../../../../sim/ns3-afc/afc-sim.cc");
/// The script that builds it from Debian's packages.
const BUILD_SCRIPT: &str = include_str!("../../../../../../scripts/build-ns3-afc");

/// A full run's simulated length: the thesis's 600 s.
const FULL: Duration = Duration::from_secs(600);
/// A quick run's.
const QUICK: Duration = Duration::from_secs(60);

/// What `OUT/run.json` records, and `--resume` matches (the fields `roam results index`
/// reads of every lab's stamp, plus the simulated length).
#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
struct Stamp {
    version: String,
    quick: bool,
    simulated_s: u64,
    first_seed: u64,
    /// The simulated length in the other labs' form (`sim`: milliseconds).
    workload_ms: std::collections::BTreeMap<String, u64>,
    /// The invocations that wrote its runs, oldest first, as the other labs keep them (`roam
    /// results index` lists them); `--resume` does not compare them.
    #[serde(default)]
    invocations: Vec<Invocation>,
}

impl Stamp {
    fn new(quick: bool, simulated_s: u64, first_seed: u64) -> Stamp {
        Stamp {
            version: VERSION.into(),
            quick,
            simulated_s,
            first_seed,
            workload_ms: [("sim".to_string(), simulated_s * 1000)].into(),
            invocations: Vec::new(),
        }
    }

    /// Whether runs stamped `self` may join those stamped `other`: the same code, simulated
    /// length and seeds, whoever invoked them.
    fn same_run(&self, other: &Stamp) -> bool {
        let bare = |s: &Stamp| Stamp {
            invocations: Vec::new(),
            ..s.clone()
        };
        bare(self) == bare(other)
    }
}

/// One run of the program.
struct Job<'a> {
    experiment: &'a Experiment,
    point: &'a Point,
    system: &'static str,
    trial: u32,
    seed: u64,
}

/// Run (or, with `--report-only`, report) the experiments `request` asks for.
pub fn run(request: &Request) -> Result<Finished> {
    refuse_matrix_options(request)?;
    let all = experiments::all();
    let chosen = choose(&all, request)?;
    let out = request
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("results/afc-sim"));
    let duration = request
        .duration
        .unwrap_or(if request.quick { QUICK } else { FULL });
    let trials = request.trials.unwrap_or(if request.quick { 1 } else { 5 });
    if trials == 0 {
        bail!("--trials: at least 1");
    }
    let stamp = Stamp::new(request.quick, duration.as_secs().max(1), request.first_seed);
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let rows = if request.report_only {
        read_rows(&out)?
    } else {
        let program = build(&out)?;
        let kept = prepare(&out, &stamp, request.resume)?;
        let jobs = jobs(&chosen, trials, request.first_seed, &kept);
        let workers = request
            .jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1);
        execute(&out, &program, &stamp, jobs, workers)?;
        read_rows(&out)?
    };
    let measured = read_stamp(&out).map(|s| s.version).unwrap_or_default();
    let md = report::write(&out, &chosen, &rows, &measured, stamp.simulated_s)?;
    let summary = report::summary(&md);
    Ok(Finished {
        out,
        report: md,
        rows,
        summary,
    })
}

/// The options of the emulator's matrix mean nothing here: refuse them rather than ignore.
fn refuse_matrix_options(r: &Request) -> Result<()> {
    let given = [
        ("--scenarios", r.scenarios.is_some()),
        ("--systems", r.systems.is_some()),
        ("--sweep", !r.sweep.is_empty()),
        ("--emu-logs", r.emu_logs.is_some()),
        ("--shard", r.shard.is_some()),
        ("--sweep-from", r.sweep_from.is_some()),
    ];
    if let Some((flag, _)) = given.iter().find(|g| g.1) {
        bail!(
            "{flag}: not with --sim (the simulation's experiments are chosen with --apps: {})",
            experiments::all()
                .iter()
                .map(|e| e.name)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(())
}

/// The experiments `--apps` names (default: all; `--quick`: Table 4).
fn choose<'a>(all: &'a [Experiment], r: &Request) -> Result<Vec<&'a Experiment>> {
    let names: Vec<String> = match &r.apps {
        Some(a) => a.iter().map(|s| s.trim().to_string()).collect(),
        None if r.quick => experiments::QUICK.map(String::from).to_vec(),
        None => all.iter().map(|e| e.name.to_string()).collect(),
    };
    names
        .iter()
        .map(|n| {
            all.iter().find(|e| e.name == n).ok_or_else(|| {
                let known: Vec<&str> = all.iter().map(|e| e.name).collect();
                anyhow::anyhow!(
                    "--apps: unknown experiment `{n}` (expected {})",
                    known.join(", ")
                )
            })
        })
        .collect()
}

/// Write the program's source and build script into `OUT/build/` and build it there (as root,
/// installing Debian's ns-3 when missing); the program's path.
pub fn build(out: &Path) -> Result<PathBuf> {
    let dir = out.join("build");
    std::fs::create_dir_all(&dir)?;
    let (src, script, bin) = (
        dir.join("afc-sim.cc"),
        dir.join("build-ns3-afc"),
        dir.join("afc-sim"),
    );
    // Rewrite the source only when it changed, so the script's freshness check holds.
    if std::fs::read_to_string(&src).ok().as_deref() != Some(SOURCE) {
        std::fs::write(&src, SOURCE)?;
    }
    std::fs::write(&script, BUILD_SCRIPT)?;
    eprintln!("afc --sim: building the ns-3 program ({})", bin.display());
    let done = Command::new("sh")
        .arg(&script)
        .arg(&src)
        .arg(&bin)
        .output()
        .context("running sh (to build the ns-3 program)")?;
    if !done.status.success() {
        let err = String::from_utf8_lossy(&done.stderr);
        let tail: Vec<&str> = err.lines().rev().take(15).collect();
        bail!(
            "building the ns-3 program failed ({}):\n{}",
            done.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    Ok(bin)
}

/// Start `OUT/trials.csv` (or, resuming, check `run.json` and keep what it has): the runs
/// already done.
fn prepare(out: &Path, stamp: &Stamp, resume: bool) -> Result<HashSet<String>> {
    let trials = out.join("trials.csv");
    let mut stamp = Stamp {
        invocations: vec![Invocation::now()],
        ..stamp.clone()
    };
    if resume && trials.exists() {
        let old = read_stamp(out)?;
        if !old.same_run(&stamp) {
            bail!(
                "--resume: {} was measured by {:?}, not {:?} (code, simulated seconds and \
                 first seed must match)",
                out.display(),
                old,
                stamp
            );
        }
        stamp.invocations = [old.invocations, stamp.invocations].concat();
        let rows = read_rows(out)?;
        std::fs::write(out.join("run.json"), serde_json::to_string_pretty(&stamp)?)?;
        let failed: HashSet<String> = rows
            .iter()
            .filter(|r| r.metric == "error")
            .map(run_key)
            .collect();
        // A failed run is run again; its error row stays in the file, its message in
        // failures.log: the failure stays on record.
        return Ok(rows
            .iter()
            .map(run_key)
            .filter(|k| !failed.contains(k))
            .collect());
    }
    std::fs::write(&trials, csv(&[]))?;
    std::fs::write(out.join("run.json"), serde_json::to_string_pretty(&stamp)?)?;
    Ok(HashSet::new())
}

fn read_stamp(out: &Path) -> Result<Stamp> {
    let path = out.join("run.json");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not a run stamp", path.display()))
}

fn read_rows(out: &Path) -> Result<Vec<Row>> {
    let path = out.join("trials.csv");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    parse_csv(&text, &path.display().to_string())
}

fn run_key(r: &Row) -> String {
    format!("{}/{}/{}#{}", r.app, r.scenario, r.system, r.trial)
}

/// Every run not yet kept.
fn jobs<'a>(
    chosen: &[&'a Experiment],
    trials: u32,
    first_seed: u64,
    kept: &HashSet<String>,
) -> VecDeque<Job<'a>> {
    let mut jobs = VecDeque::new();
    for trial in 1..=trials {
        for e in chosen {
            for p in &e.points {
                for &system in e.systems {
                    let key = format!("{}/{}/{}#{}", e.name, p.label, system, trial);
                    if !kept.contains(&key) {
                        jobs.push_back(Job {
                            experiment: e,
                            point: p,
                            system,
                            trial,
                            seed: first_seed + u64::from(trial) - 1,
                        });
                    }
                }
            }
        }
    }
    jobs
}

/// Run `jobs` on `workers` at once, appending each run's rows to `trials.csv` as it ends.
fn execute(
    out: &Path,
    program: &Path,
    stamp: &Stamp,
    jobs: VecDeque<Job<'_>>,
    workers: usize,
) -> Result<()> {
    let bar = Progress::builder(Unit::Count("runs"))
        .label("afc --sim")
        .total(jobs.len() as u64)
        .start();
    let csv = Mutex::new(
        std::fs::OpenOptions::new()
            .append(true)
            .open(out.join("trials.csv"))?,
    );
    let failures = Mutex::new(
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(out.join("failures.log"))?,
    );
    let n = jobs.len();
    pool(jobs, workers.min(n.max(1)), |_, job| {
        let name = format!(
            "{}/{}/{}#{}",
            job.experiment.name, job.point.label, job.system, job.trial
        );
        bar.set_message(name.clone());
        let rows = match simulate(program, stamp, &job) {
            Ok(rows) => rows,
            Err(e) => {
                let mut f = failures.lock().unwrap_or_else(|e| e.into_inner());
                let _ = writeln!(f, "{name} (roam {}): {e:#}", stamp.version);
                vec![row(&job, "error", f64::NAN, "")]
            }
        };
        let mut f = csv.lock().unwrap_or_else(|e| e.into_inner());
        let _ = f.write_all(csv_lines(&rows).as_bytes());
        bar.inc(1);
    });
    bar.finish();
    Ok(())
}

/// One run of the built `program`: `experiment`'s point `point` (its label) for `system`,
/// `simulated_s` long, trial 1 with `seed`; the run's rows.
pub fn run_one(
    program: &Path,
    experiment: &str,
    point: &str,
    system: &'static str,
    simulated_s: u64,
    seed: u64,
) -> Result<Vec<Row>> {
    let all = experiments::all();
    let e = all
        .iter()
        .find(|e| e.name == experiment)
        .with_context(|| format!("no experiment `{experiment}`"))?;
    let p = e
        .points
        .iter()
        .find(|p| p.label == point)
        .with_context(|| format!("no point `{point}` in `{experiment}`"))?;
    let stamp = Stamp::new(false, simulated_s, seed);
    let job = Job {
        experiment: e,
        point: p,
        system,
        trial: 1,
        seed,
    };
    simulate(program, &stamp, &job)
}

fn row(job: &Job<'_>, metric: &str, value: f64, unit: &str) -> Row {
    Row {
        app: job.experiment.name.into(),
        scenario: job.point.label.clone(),
        system: job.system.into(),
        trial: job.trial,
        seed: job.seed,
        metric: metric.into(),
        value,
        unit: unit.into(),
    }
}

/// One run of the program: its options, its output parsed into the run's rows.
fn simulate(program: &Path, stamp: &Stamp, job: &Job<'_>) -> Result<Vec<Row>> {
    let mut cmd = Command::new(program);
    if !job.experiment.dumbbell {
        cmd.arg(format!("--system={}", job.system));
    }
    for (k, v) in &job.point.args {
        cmd.arg(format!("--{k}={v}"));
    }
    cmd.arg(format!("--duration={}", stamp.simulated_s))
        .arg(format!("--seed={}", job.seed));
    let done = cmd
        .output()
        .with_context(|| format!("starting {}", program.display()))?;
    if !done.status.success() {
        bail!(
            "{} ({})",
            String::from_utf8_lossy(&done.stderr).trim(),
            done.status
        );
    }
    let flows = parse_flows(&String::from_utf8_lossy(&done.stdout))?;
    Ok(metrics(job, &flows))
}

/// One flow's line of the program's output.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Flow {
    afc: bool,
    goodput_mbps: f64,
    peak_held: f64,
    window_updates: f64,
    proactive_acks: f64,
    not_stored: f64,
    zero_window_events: f64,
    suppressed_dupacks: f64,
}

/// The program's CSV: a header naming the columns, then one line per flow.
pub(crate) fn parse_flows(text: &str) -> Result<Vec<Flow>> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<&str> = lines
        .next()
        .context("the ns-3 program printed nothing")?
        .split(',')
        .collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .with_context(|| format!("the ns-3 program's output has no `{name}` column"))
    };
    let (sys, good, held, wu, pro, ns, zw, sup) = (
        col("system")?,
        col("goodput_mbps")?,
        col("peak_held_bytes")?,
        col("window_updates")?,
        col("proactive_acks")?,
        col("not_stored")?,
        col("zero_window_events")?,
        col("suppressed_dupacks")?,
    );
    let mut flows = Vec::new();
    for (i, line) in lines.enumerate() {
        let f: Vec<&str> = line.split(',').collect();
        if f.len() != header.len() {
            bail!(
                "line {} of the ns-3 program's output has {} fields, not {}: `{line}`",
                i + 2,
                f.len(),
                header.len()
            );
        }
        let num = |c: usize| -> Result<f64> {
            f[c].parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .with_context(|| {
                    format!(
                        "line {} of the ns-3 program's output: `{}` in column `{}` is not a \
                         number",
                        i + 2,
                        f[c],
                        header[c]
                    )
                })
        };
        flows.push(Flow {
            afc: f[sys] == "afc",
            goodput_mbps: num(good)?,
            peak_held: num(held)?,
            window_updates: num(wu)?,
            proactive_acks: num(pro)?,
            not_stored: num(ns)?,
            zero_window_events: num(zw)?,
            suppressed_dupacks: num(sup)?,
        });
    }
    if flows.is_empty() {
        bail!("the ns-3 program reported no flow");
    }
    Ok(flows)
}

/// The run's rows: on one link the flow's goodput, its fraction of ideal, what the receiver
/// held and the flow-control events; on the dumbbell each kind's mean share and Jain's index.
fn metrics(job: &Job<'_>, flows: &[Flow]) -> Vec<Row> {
    let ideal = job.point.ideal_mbps;
    let mean = |v: &[f64]| {
        if v.is_empty() {
            f64::NAN
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let mut rows = Vec::new();
    let mut put = |m: &str, v: f64, unit: &str| {
        if v.is_finite() {
            rows.push(row(job, m, v, unit));
        }
    };
    if job.experiment.dumbbell {
        let afc: Vec<f64> = flows
            .iter()
            .filter(|f| f.afc)
            .map(|f| f.goodput_mbps)
            .collect();
        let other: Vec<f64> = flows
            .iter()
            .filter(|f| !f.afc)
            .map(|f| f.goodput_mbps)
            .collect();
        let all: Vec<f64> = flows.iter().map(|f| f.goodput_mbps).collect();
        put("afc_mean_mbps", mean(&afc), "Mbit/s");
        put("default_mean_mbps", mean(&other), "Mbit/s");
        put("total_mbps", all.iter().sum(), "Mbit/s");
        put("jain_all", jain(&all), "");
        if afc.len() > 1 {
            put("jain_afc", jain(&afc), "");
        }
        return rows;
    }
    let f = &flows[0];
    put("goodput_mbps", f.goodput_mbps, "Mbit/s");
    put("fraction_of_ideal", f.goodput_mbps / ideal, "");
    put("peak_held_kb", f.peak_held / 1000.0, "kB");
    put("window_updates", f.window_updates, "");
    put("proactive_acks", f.proactive_acks, "");
    put("not_stored", f.not_stored, "segments");
    put("zero_window_events", f.zero_window_events, "");
    put("suppressed_dupacks", f.suppressed_dupacks, "");
    rows
}

/// Whether this machine can build the program: ns-3's headers are installed, or we are root
/// (the build installs them); else why not (for tests that need it).
pub fn available() -> Result<(), String> {
    if roam_emu::sys::is_root() || Path::new("/usr/include/ns3/tcp-socket-base.h").exists() {
        Ok(())
    } else {
        Err("ns-3 3.37 is not installed (apt-get install ns3 libns3-dev libgsl-dev)".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUT: &str = "flow,system,bytes_read,goodput_mbps,peak_held_bytes,window_updates,\
proactive_acks,zero_window_acks,not_stored,zero_window_events,suppressed_dupacks\n\
0,afc,236053248,3.14738,256000,1917,148368,744,1,371,39013\n";

    /// Each invocation that wrote runs is kept in `run.json`, a resumed one after the first;
    /// a resume is refused for other code or another length, whoever invoked it.
    #[test]
    fn run_json_keeps_every_invocation_and_resume_checks_the_rest() {
        let out = std::env::temp_dir().join(format!("roam-afc-stamp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        std::fs::create_dir_all(&out).unwrap();
        let stamp = Stamp::new(true, 60, 1);
        prepare(&out, &stamp, false).unwrap();
        assert_eq!(read_stamp(&out).unwrap().invocations.len(), 1);
        prepare(&out, &stamp, true).unwrap();
        let kept = read_stamp(&out).unwrap();
        assert_eq!(kept.invocations.len(), 2);
        assert!(kept.invocations.iter().all(|i| i.version == VERSION));
        let longer = Stamp::new(true, 61, 1);
        let e = prepare(&out, &longer, true).unwrap_err().to_string();
        assert!(e.contains("--resume"), "{e}");
        std::fs::remove_dir_all(&out).unwrap();
    }

    #[test]
    fn reads_the_programs_csv() {
        let f = parse_flows(OUT).unwrap();
        assert_eq!(f.len(), 1);
        assert!(f[0].afc);
        assert_eq!(f[0].goodput_mbps, 3.14738);
        assert_eq!(f[0].suppressed_dupacks, 39013.0);
    }

    #[test]
    fn malformed_output_is_refused_naming_the_line() {
        let short = format!("{OUT}1,tcp,5\n");
        let e = parse_flows(&short).unwrap_err().to_string();
        assert!(e.contains("line 3"), "{e}");
        let nan = OUT.replace("3.14738", "nan");
        let e = parse_flows(&nan).unwrap_err().to_string();
        assert!(e.contains("goodput_mbps"), "{e}");
        assert!(parse_flows("").is_err());
        assert!(parse_flows(OUT.lines().next().unwrap()).is_err());
    }

    #[test]
    fn matrix_options_are_refused() {
        let r = Request {
            systems: Some(vec!["tcp".into()]),
            ..Request::default()
        };
        assert!(refuse_matrix_options(&r)
            .unwrap_err()
            .to_string()
            .contains("--systems"));
        let r = Request {
            apps: Some(vec!["nope".into()]),
            ..Request::default()
        };
        let all = experiments::all();
        let e = choose(&all, &r).unwrap_err().to_string();
        assert!(e.contains("table4") && e.contains("nope"), "{e}");
    }
}
