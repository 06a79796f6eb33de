//! One trial: an application on one system over one scenario, in a fresh emulator.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use roam_emu::queue::QueueLimit;
use roam_emu::{EmuConfig, Emulator};
use roam_trace::scenario::Scenario;
use serde::Serialize;

use crate::harness::system::System;

/// A measured quantity of one trial.
#[derive(Clone, Debug, Serialize)]
pub struct Metric {
    /// Name (a column of the report).
    pub name: String,
    /// Value.
    pub value: f64,
    /// Unit (empty for ratios).
    pub unit: String,
}

impl Metric {
    /// A metric.
    pub fn new(name: &str, value: f64, unit: &str) -> Metric {
        Metric {
            name: name.into(),
            value,
            unit: unit.into(),
        }
    }
}

/// The client's side of the emulated links, in the emulator's order.
#[derive(Clone, Debug, Default)]
pub struct ClientLinks {
    /// The client's address on each link (what a plain TCP or MPTCP client binds to).
    pub addrs: Vec<Ipv4Addr>,
    /// The names of the cellular ones: roam is told, as a phone's system tells which of its
    /// interfaces is the modem (`NetKind::cellular`: no chatter of its own while idle).
    pub cellular: Vec<String>,
}

/// What an application's `run` gets.
pub struct Trial {
    /// The emulator, already up with the system's links.
    pub emu: Emulator,
    /// The system under test.
    pub system: System,
    /// The scenario the links follow.
    pub scenario: Scenario,
    /// How long the workload runs (applications may stop earlier when they finish).
    pub duration: Duration,
    /// Seed of the workload's random parts (also the scenario's).
    pub seed: u64,
    /// Progress: seconds of the workload done so far.
    pub progress: Arc<dyn Fn(u64) + Send + Sync>,
    /// Where the trial's logs go (`--emu-logs`): the emulator's, and any an application keeps.
    pub log_dir: Option<PathBuf>,
    /// What the application says about this trial beyond its metrics: above all why a
    /// workload did not finish (the lab writes them to `trials.log` and the report).
    notes: Mutex<Vec<String>>,
    /// Interactive events' latencies ([`Trial::event_latencies`]).
    events: Mutex<Vec<(String, f64)>>,
}

impl Trial {
    /// The client's side of the emulated links: its addresses (what a plain TCP or MPTCP
    /// client binds to; see [`crate::harness::channel::connect_plain`]) and which links are cellular.
    pub fn client_links(&self) -> ClientLinks {
        let links = self.emu.links();
        ClientLinks {
            addrs: links.iter().map(|l| l.client_addr).collect(),
            cellular: links
                .iter()
                .filter(|l| l.config.kind == roam_trace::LinkKind::Cellular)
                .map(|l| l.name.clone())
                .collect(),
        }
    }

    /// Keep `name` with the text `make` gives in the trial's log directory, if it has one
    /// (`--emu-logs`): an application's per-event log beside the emulator's. The text is made
    /// only when it is kept.
    pub fn keep_log(&self, name: &str, make: impl FnOnce() -> String) -> Result<()> {
        let Some(p) = self.log_path(name) else {
            return Ok(());
        };
        std::fs::write(&p, make()).with_context(|| format!("writing {}", p.display()))
    }

    /// Where a log named `name` goes in the trial's log directory, if it has one
    /// (`--emu-logs`): for an application that writes its log as it goes.
    pub fn log_path(&self, name: &str) -> Option<PathBuf> {
        self.log_dir.as_ref().map(|d| d.join(name))
    }

    /// Record the latency, in ms, of each interactive event of this trial named `what` (each
    /// wait the user saw: a demand fetch, an opened message, an urgent message; unfinished
    /// ones as [`crate::report::UNFINISHED`]). The lab keeps them in `events.csv` and draws
    /// their distribution per scenario: the tail a mean or median hides.
    pub fn event_latencies(&self, what: &str, ms: impl IntoIterator<Item = f64>) {
        let mut e = self.events.lock().unwrap();
        e.extend(ms.into_iter().map(|v| (what.to_string(), v)));
    }

    /// Record a note on this trial, e.g. why its workload did not finish.
    pub fn note(&self, text: impl Into<String>) {
        self.notes.lock().unwrap().push(text.into());
    }
}

/// What one trial measured, and what its application noted on the way.
pub struct Ran {
    /// The metrics.
    pub metrics: Vec<Metric>,
    /// The notes ([`Trial::note`]), in order.
    pub notes: Vec<String>,
    /// The interactive events' latencies ([`Trial::event_latencies`]): (what, ms).
    pub events: Vec<(String, f64)>,
}

/// What each link carried in a trial, as metrics `link_NAME_down_kB` (towards the client),
/// `link_NAME_up_kB` and `link_NAME_avail_s` (the seconds of the trial its trace had it up):
/// whether a system used every link it could, checked by the report
/// ([`crate::report::links::unused_links`]).
fn link_metrics(links: &[roam_emu::LinkHandle], elapsed: roam_core::Time) -> Vec<Metric> {
    use std::sync::atomic::Ordering::Relaxed;
    let mut m = Vec::new();
    for l in links {
        let avail = l
            .config
            .trace
            .availability
            .fraction_true(roam_core::Time::ZERO, elapsed)
            * elapsed.as_secs_f64();
        let kb = |c: &roam_emu::emulator::DirCounters| c.delivered_bytes.load(Relaxed) as f64 / 1e3;
        m.push(Metric::new(
            &format!("link_{}_down_kB", l.name),
            kb(&l.down),
            "kB",
        ));
        m.push(Metric::new(
            &format!("link_{}_up_kB", l.name),
            kb(&l.up),
            "kB",
        ));
        m.push(Metric::new(&format!("link_{}_avail_s", l.name), avail, "s"));
    }
    m
}

/// Start the emulator for `system` on `scenario` (its links' queues bounded by `queue`,
/// [`system::QUEUE`] but in a sweep) and run `app` in it.
#[allow(clippy::too_many_arguments)]
pub fn run(
    app: fn(&Trial) -> Result<Vec<Metric>>,
    scenario: &Scenario,
    queue: QueueLimit,
    system: System,
    duration: Duration,
    seed: u64,
    progress: Arc<dyn Fn(u64) + Send + Sync>,
    log_dir: Option<PathBuf>,
) -> Result<Ran> {
    let links = system.links(scenario, duration, queue)?;
    let (hosts, ends) = system.topology();
    let emu = Emulator::start(EmuConfig {
        links,
        log_dir: log_dir.clone(),
        hosts,
        ends,
        // Every program in the trial (baselines' tools and servers included) runs CUBIC, as
        // on a phone; the lab's own sockets also set it and check it (`channel`).
        congestion_control: Some(crate::harness::channel::CC.into()),
        ..Default::default()
    })?;
    let mut t = Trial {
        emu,
        system,
        scenario: scenario.clone(),
        duration,
        seed,
        progress,
        log_dir,
        notes: Mutex::default(),
        events: Mutex::default(),
    };
    let r = app(&t);
    let elapsed = t.emu.clock().now();
    let _ = t.emu.shutdown();
    // The links' counters are final once the forwarders have stopped.
    let mut metrics = r?;
    metrics.extend(link_metrics(t.emu.links(), elapsed));
    Ok(Ran {
        metrics,
        notes: t.notes.into_inner().unwrap(),
        events: t.events.into_inner().unwrap(),
    })
}
