//! Running a plan: every trial of applications x scenarios x systems x trials in a fresh
//! emulator ([`crate::harness::trial`]), `--jobs` at once with a progress bar, each finished
//! trial recorded in the results directory at once ([`crate::harness::results::Recorder`]).
//! A study supplies its applications ([`App`]) and writes its report from what
//! [`measure`] gives back.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use roam_core::progress::{Progress, Total, Unit};

use crate::harness::plan::{App, Plan};
use crate::harness::results::{self, failed_note, trial_name, Measured, Recorder, TrialRecord};
use crate::harness::sweep;
use crate::harness::system::System;
use crate::harness::trial;
use crate::report::Row;

/// One trial to run.
struct Job {
    app: usize,
    scenario: String,
    system: System,
    trial: u32,
    duration: Duration,
}

/// Run `plan` over the lab's applications `all` (or, with `report_only`, read what its
/// directory holds): every trial in a fresh emulator, `jobs` at once, with a progress bar;
/// each finished trial appended to `trials.csv`, `events.csv` and `trials.log` at once, so an
/// interrupted run keeps what it measured; `--resume` keeps a matching run's trials.
pub fn measure(plan: &Plan, all: &[App]) -> Result<Measured> {
    let app_ix = plan.check(all)?;
    if plan.report_only {
        return results::load(plan, app_ix);
    }
    prepare(all, &app_ix)?;
    let recorder = Recorder::open(plan, all, app_ix.clone())?;
    let jobs = jobs(plan, all, &app_ix, &recorder);
    if recorder.kept() > 0 {
        eprintln!(
            "resuming {}: {} trial(s) kept, {} to run",
            plan.out.display(),
            recorder.kept(),
            jobs.len()
        );
    }
    run_jobs(plan, all, jobs, &recorder);
    recorder.finish(&plan.out)
}

/// What every trial needs, checked (and installed, as root) once: otherwise each trial fails
/// with the same reason.
fn prepare(all: &[App], app_ix: &[usize]) -> Result<()> {
    roam_emu::sys::check_privileges().map_err(anyhow::Error::msg)?;
    let mut needs = vec![crate::harness::setup::IPROUTE2];
    for &a in app_ix {
        needs.extend(all[a].needs);
    }
    crate::harness::setup::ensure(&needs)
}

/// The plan's trials that the recorder does not hold already, trial 1 of every cell first;
/// with a shard, only its part of the matrix ([`crate::harness::plan::Shard`]).
fn jobs(plan: &Plan, all: &[App], app_ix: &[usize], recorder: &Recorder) -> VecDeque<Job> {
    let mut jobs = VecDeque::new();
    let mut place = 0;
    for trial in 1..=plan.trials {
        for s in &plan.scenarios {
            for &a in app_ix {
                for system in &plan.systems {
                    let ours = plan.shard.is_none_or(|sh| sh.holds(place));
                    place += 1;
                    if !ours || recorder.has(all[a].name, s, system.name(), trial) {
                        continue;
                    }
                    jobs.push_back(Job {
                        app: a,
                        scenario: s.clone(),
                        system: system.clone(),
                        trial,
                        duration: plan.workload(&all[a]),
                    });
                }
            }
        }
    }
    jobs
}

/// The progress bar of a run: workload seconds done of all the jobs', and the trials running.
fn progress_bar(jobs: &VecDeque<Job>) -> Progress {
    let total: u64 = jobs.iter().map(|j| j.duration.as_secs()).sum();
    Progress::builder(Unit::Count("workload-s"))
        .label("lab")
        .total(total)
        .start()
}

/// Run `jobs` on `workers` threads at once, each taking the next job as it finishes one:
/// `each(worker, job)`. The queue is locked only to take a job, never while one runs.
pub(crate) fn pool<J: Send>(jobs: VecDeque<J>, workers: usize, each: impl Fn(usize, J) + Sync) {
    let queue = Mutex::new(jobs);
    std::thread::scope(|scope| {
        for worker in 0..workers {
            let (queue, each) = (&queue, &each);
            scope.spawn(move || loop {
                // The guard must go before the job runs: in a `while let`, it would live
                // through the loop's body and the workers would run one job at a time.
                let next = queue.lock().unwrap().pop_front();
                let Some(j) = next else { return };
                each(worker, j);
            });
        }
    });
}

/// Run `jobs` on `plan.jobs` workers ([`pool`]), each job recorded as it finishes.
fn run_jobs(plan: &Plan, all: &[App], jobs: VecDeque<Job>, recorder: &Recorder) {
    let bar = progress_bar(&jobs);
    let n_jobs = jobs.len();
    let finished = AtomicUsize::new(0);
    let running: Mutex<Vec<String>> = Mutex::default();
    let workers = plan.jobs.min(n_jobs);
    let started: Vec<std::sync::atomic::AtomicBool> =
        (0..workers).map(|_| Default::default()).collect();
    pool(jobs, workers, |worker, j| {
        let app = &all[j.app];
        // Each worker's first trial is staggered (an application whose trials must not all
        // start at once says by how much).
        if !started[worker].swap(true, Ordering::Relaxed) {
            if let Some(s) = app.stagger {
                std::thread::sleep(s * worker as u32 / workers as u32);
            }
        }
        let name = trial_name(app.name, &j.scenario, j.system.name(), j.trial);
        let show = |r: &Vec<String>| bar.set_message(r.join(" "));
        {
            let mut r = running.lock().unwrap();
            r.push(name.clone());
            show(&r);
        }
        let record = run_job(plan, app, &j, name.clone(), &bar);
        for line in &record.notes {
            bar.println(line);
        }
        recorder.record(record, |e| bar.println(e));
        let k = finished.fetch_add(1, Ordering::Relaxed) + 1;
        if !bar.on_terminal() {
            // No terminal (CI logs): one line per finished trial besides the bar's.
            let total = match bar.total() {
                Total::Exact(n) | Total::AtLeast(n) => n,
                Total::Unknown => 0,
            };
            bar.println(&format!(
                "[trial {k}/{n_jobs}; {}/{total} workload-s] {name} done",
                bar.position()
            ));
        }
        let mut r = running.lock().unwrap();
        r.retain(|x| *x != name);
        show(&r);
    });
    bar.finish();
}

/// Run one job in a fresh emulator, advancing `bar` by its workload seconds as they pass;
/// what it measured (or why it failed) as rows and notes.
fn run_job(plan: &Plan, app: &App, j: &Job, name: String, bar: &Progress) -> TrialRecord {
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
            app.run,
            &sc,
            queue,
            j.system.clone(),
            j.duration,
            seed,
            progress,
            logs,
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
    let (rows, notes, events): (Vec<Row>, Vec<String>, Vec<Row>) = match result {
        Ok(ran) => {
            let mut notes: Vec<String> = ran.notes.iter().map(|n| format!("{name}: {n}")).collect();
            // Every unfinished trial has a note, whether or not its application wrote one.
            let unfinished: Vec<&str> = ran
                .metrics
                .iter()
                .filter(|m| m.value == crate::report::UNFINISHED)
                .map(|m| m.name.as_str())
                .collect();
            if notes.is_empty() && !unfinished.is_empty() {
                notes.push(format!(
                    "{name}: unfinished: {} did not finish within the trial's limit",
                    unfinished.join(", ")
                ));
            }
            (
                ran.metrics
                    .iter()
                    .map(|m| base(&m.name, m.value, &m.unit))
                    .collect(),
                notes,
                ran.events.iter().map(|(e, v)| base(e, *v, "ms")).collect(),
            )
        }
        Err(e) => (
            vec![base("error", f64::NAN, "")],
            vec![failed_note(&name, &format!(": {e:#}"))],
            Vec::new(),
        ),
    };
    // One line each (an error may quote a multi-line log): trials.log is read by line.
    let notes = notes
        .into_iter()
        .map(|l| l.lines().collect::<Vec<_>>().join(" | "))
        .collect();
    TrialRecord {
        name,
        rows,
        notes,
        events,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--jobs N` runs N trials at once: four jobs on four workers all wait at one barrier,
    /// which only opens when all four run together. (From 0a1e730 to the fix the queue's lock
    /// was held while a job ran, and every lab ran its trials one at a time.)
    #[test]
    fn workers_run_their_jobs_at_once() {
        let barrier = std::sync::Barrier::new(4);
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            pool((0..4).collect(), 4, |_, _: i32| {
                barrier.wait();
            });
            tx.send(()).unwrap();
        });
        assert!(
            rx.recv_timeout(std::time::Duration::from_secs(10)).is_ok(),
            "the workers ran one job at a time"
        );
        t.join().unwrap();
        // Every job runs once, whatever the number of workers.
        let seen = Mutex::new(Vec::new());
        pool((0..50).collect(), 3, |_, j: i32| {
            seen.lock().unwrap().push(j)
        });
        let mut seen = seen.into_inner().unwrap();
        seen.sort();
        assert_eq!(seen, (0..50).collect::<Vec<_>>());
    }
}
