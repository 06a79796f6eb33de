//! What the IMP lab's applications share on the client side (`roam lab imp`): requests over
//! one roam connection matched to their responses by id ([`Caller`]), and the reading session
//! itself ([`read`]): every item hinted to a [`Prefetcher`] with the trial's strategy under its
//! budgets, the user reading some of them a think time apart, energy and data charged by a
//! [`DeviceEnvironment`] on the client namespace's interfaces.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use roam_budget::{profile, Budget};
use roam_core::{Bytes, Time};
use roam_net::Label;
use roam_prefetch::device::{DeviceEnvironment, Interface};
use roam_prefetch::{GetError, Handle, Prefetcher, Stats, Strategy};

use crate::harness::channel::Conn;
use crate::harness::trial::Metric;
use crate::report::UNFINISHED;

/// The run length the thesis's times and budgets are given for.
pub const FULL_RUN: Duration = Duration::from_secs(20 * 60);

/// How much of the thesis's 20-minute run a run of `duration` is (at most 1): times and
/// budgets are scaled by it.
pub fn scale(duration: Duration) -> f64 {
    (duration.as_secs_f64() / FULL_RUN.as_secs_f64()).min(1.0)
}

/// A budget condition, per 20 minutes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Budgets {
    /// Joules, if energy is budgeted.
    pub energy_j: Option<f64>,
    /// Bytes of 3G data, if data is budgeted.
    pub data_bytes: Option<u64>,
}

/// One budget condition of the thesis (an application's name and its budgets), per scenario:
/// the thesis set them per experiment (driving, walking).
#[derive(Clone, Copy, Debug)]
pub struct Condition {
    /// The application's name (`mail-energy`, ...).
    pub name: &'static str,
    /// On the drive (and any scenario but `walking`).
    pub vehicular: Budgets,
    /// On the walk.
    pub walking: Budgets,
}

impl Condition {
    /// The budgets on scenario `scenario` (its name, with any `+` changes): the walk's on
    /// `walking`, the drive's on any other.
    pub fn for_scenario(&self, scenario: &str) -> Budgets {
        if scenario.split('+').next() == Some("walking") {
            self.walking
        } else {
            self.vehicular
        }
    }
}

/// The client's radios followed through a trial: energy (modelled) and metered data, from the
/// interface counters sampled every 100 ms by a thread of the client namespace.
pub(crate) struct Metered {
    env: Arc<DeviceEnvironment>,
    done: Arc<std::sync::atomic::AtomicBool>,
    sampler: std::thread::JoinHandle<()>,
}

impl Metered {
    /// Start following the client's interfaces (call from the client namespace), with
    /// `conn`'s estimates for the environment.
    pub(crate) fn start(conn: &Arc<Conn>) -> Result<Metered> {
        let env = device(conn, None, None)?;
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sampler = {
            let (env, done) = (env.clone(), done.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    env.spent();
                    std::thread::sleep(roam_budget::live::SAMPLE_EVERY);
                }
            })
        };
        Ok(Metered { env, done, sampler })
    }

    /// Stop: the energy (J, modelled) and the metered bytes over the trial.
    pub(crate) fn finish(self) -> (f64, u64) {
        self.done.store(true, Ordering::Relaxed);
        let _ = self.sampler.join();
        let (j, b) = self.env.spent();
        (j, b.0)
    }
}

/// The device as IMP sees it: the client's radios, `conn`'s estimates, the budgets if any.
fn device(
    conn: &Arc<Conn>,
    energy: Option<Budget>,
    data: Option<Budget>,
) -> Result<Arc<DeviceEnvironment>> {
    let est = conn.clone();
    let env = DeviceEnvironment::new(
        interfaces()?,
        move || match &*est {
            Conn::Roam(ms) => ms.estimates(),
            Conn::Plain(_) => Vec::new(),
        },
        energy,
        data,
    )
    .map_err(|e| anyhow!("{e}"))?;
    Ok(Arc::new(env))
}

/// The radios of the client's links: PowerTutor's Nexus One (the thesis's model), AT&T 3G.
pub(crate) fn interfaces() -> Result<Vec<Interface>> {
    Ok(vec![
        Interface {
            name: "wifi".into(),
            profile: profile("powertutor-nexus-one/wifi")?,
            wifi: true,
            metered: false,
        },
        Interface {
            name: "cell".into(),
            profile: profile("powertutor-nexus-one/3g-att")?,
            wifi: false,
            metered: true,
        },
    ])
}

#[derive(Default)]
struct Waiters {
    by_id: HashMap<String, mpsc::Sender<Vec<u8>>>,
    closed: Option<String>,
}

/// Requests over one connection, each answered by one message that names the request's id.
pub struct Caller {
    conn: Arc<Conn>,
    waiters: Mutex<Waiters>,
    next: AtomicU64,
    /// The id a response answers.
    id_of: fn(&[u8]) -> Result<String>,
}

impl Caller {
    /// A caller on `conn` whose responses name their request by `id_of`; its reader thread
    /// starts at once.
    pub fn start(conn: Arc<Conn>, id_of: fn(&[u8]) -> Result<String>) -> Arc<Caller> {
        let c = Arc::new(Caller {
            conn,
            waiters: Mutex::default(),
            next: AtomicU64::new(1),
            id_of,
        });
        let r = c.clone();
        std::thread::spawn(move || r.read_loop());
        c
    }

    /// Send the request `make(id)` with `label` under a fresh id; its id and where its
    /// response will come.
    fn send(
        &self,
        label: Label,
        make: impl FnOnce(&str) -> Vec<u8>,
    ) -> Result<(String, mpsc::Receiver<Vec<u8>>)> {
        let id = format!("i{}", self.next.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = mpsc::channel();
        {
            let mut w = self.waiters.lock().unwrap();
            if let Some(why) = &w.closed {
                bail!("the connection is closed: {why}");
            }
            w.by_id.insert(id.clone(), tx);
        }
        self.conn.send(label, &[], make(&id), None)?;
        Ok((id, rx))
    }

    /// Send the request `make(id)` with `label` under a fresh id and wait for its response.
    pub fn call(&self, label: Label, make: impl FnOnce(&str) -> Vec<u8>) -> Result<Vec<u8>> {
        let (id, rx) = self.send(label, make)?;
        rx.recv()
            .map_err(|_| anyhow!("the connection closed before request {id} was answered"))
    }

    /// As [`Caller::call`], giving up after `timeout` (`None`: no response by then).
    pub fn call_timeout(
        &self,
        label: Label,
        make: impl FnOnce(&str) -> Vec<u8>,
        timeout: Duration,
    ) -> Result<Option<Vec<u8>>> {
        let (id, rx) = self.send(label, make)?;
        match rx.recv_timeout(timeout) {
            Ok(r) => Ok(Some(r)),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                self.waiters.lock().unwrap().by_id.remove(&id);
                Ok(None)
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                bail!("the connection closed before request {id} was answered")
            }
        }
    }

    /// Hand each response to its waiter, until the stream ends.
    fn read_loop(&self) {
        let why = loop {
            match self.conn.recv() {
                Ok(Some(m)) => {
                    let Ok(id) = (self.id_of)(&m.data) else {
                        continue;
                    };
                    let tx = self.waiters.lock().unwrap().by_id.remove(&id);
                    if let Some(tx) = tx {
                        let _ = tx.send(m.data);
                    }
                }
                Ok(None) => break "the server closed the connection".to_string(),
                Err(e) => break format!("{e:#}"),
            }
        };
        let mut w = self.waiters.lock().unwrap();
        w.closed = Some(why);
        w.by_id.clear();
    }
}

/// An item the user may read.
pub struct Item {
    /// Its name, for errors.
    pub name: String,
    /// Its size as the listing gave it.
    pub size: u64,
    /// Its class (hints sharing an accuracy).
    pub class: u32,
    /// Fetch it with a label; the bytes it got.
    pub fetch: Box<dyn FnOnce(Label) -> Result<u64, String> + Send>,
}

/// What a reading session measured.
pub struct Outcome {
    /// Each read's wait (ms), [`UNFINISHED`] for one that did not arrive within the run.
    pub fetch_ms: Vec<f64>,
    /// Energy spent (J, modelled).
    pub joules: f64,
    /// Metered bytes moved.
    pub metered: u64,
    /// What the prefetcher did.
    pub stats: Stats,
}

/// When the user reads the first item (in a 20-minute run).
const FIRST_READ: Duration = Duration::from_secs(10);
/// The think time between reads, for a 20-minute run (uniform between the two, seconds).
const THINK: (f64, f64) = (30.0, 60.0);

/// The prefetching strategy of a trial of the IMP lab.
pub fn strategy_of(t: &crate::harness::trial::Trial) -> Result<Strategy> {
    t.system
        .get::<Strategy>()
        .copied()
        .ok_or_else(|| anyhow!("the IMP lab runs roam with a prefetching strategy"))
}

/// How the user reads: which items, when (from `rng`), under which strategy and budgets, for
/// how long.
pub struct Session<'a> {
    /// The items read (indices into the hinted items), in order.
    pub reads: Vec<usize>,
    /// Draws the think times.
    pub rng: &'a mut rand_chacha::ChaCha8Rng,
    /// The trial's strategy.
    pub strategy: Strategy,
    /// Its budgets.
    pub budgets: Budgets,
    /// The run's length (times and budgets are scaled to it).
    pub duration: Duration,
}

/// The reading session: hint every item, read `session.reads` in order, the first 10 s into a
/// 20-minute run and each next one a think time of 30-60 s later (scaled to the run's length);
/// withdraw the rest.
pub fn read(
    conn: &Arc<Conn>,
    items: Vec<Item>,
    session: Session,
    progress: &(dyn Fn(u64) + Send + Sync),
) -> Result<Outcome> {
    use rand::Rng;
    let Session {
        reads,
        rng,
        strategy,
        budgets,
        duration,
    } = session;
    let k = scale(duration);
    let thinks: Vec<f64> = (1..reads.len())
        .map(|_| rng.gen_range(THINK.0..THINK.1) * k)
        .collect();
    let first = FIRST_READ.mul_f64(k);
    let budget = |total: f64| Budget {
        total: total * scale(duration),
        start: Time::ZERO,
        end: Time::ZERO + duration,
    };
    let env = device(
        conn,
        budgets.energy_j.map(budget),
        budgets.data_bytes.map(|b| budget(b as f64)),
    )?;
    let imp = Prefetcher::with_strategy(env.clone(), strategy);
    let sizes: Vec<(String, u64)> = items.iter().map(|i| (i.name.clone(), i.size)).collect();
    let mut handles: Vec<Option<Handle<u64>>> = items
        .into_iter()
        .map(|i| {
            let h = imp.prefetch(i.fetch);
            h.set_size(Bytes(i.size));
            h.set_class(i.class);
            Some(h)
        })
        .collect();
    let start = Instant::now();
    let deadline = start + duration;
    let mut at = first;
    let mut fetch_ms = Vec::new();
    for (k, &i) in reads.iter().enumerate() {
        if k > 0 {
            at += Duration::from_secs_f64(thinks[k - 1]);
        }
        std::thread::sleep((start + at).saturating_duration_since(Instant::now()));
        progress(start.elapsed().as_secs());
        let left = deadline.saturating_duration_since(Instant::now());
        let mut h = handles[i]
            .take()
            .ok_or_else(|| anyhow!("{} read twice", sizes[i].0))?;
        let t0 = Instant::now();
        let got = h.get(Some(left.max(Duration::from_secs(1))));
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        match got {
            Ok(bytes) if bytes == sizes[i].1 => fetch_ms.push(ms),
            Ok(bytes) => bail!("{}: {bytes} bytes, listed as {}", sizes[i].0, sizes[i].1),
            Err(GetError::Timeout(_)) => {
                fetch_ms.push(UNFINISHED);
                break;
            }
            Err(e) => bail!("reading {}: {e}", sizes[i].0),
        }
    }
    // The hints never read are withdrawn.
    drop(handles);
    let stats = imp.stats();
    drop(imp);
    let (joules, metered) = env.spent();
    Ok(Outcome {
        fetch_ms,
        joules,
        metered: metered.0,
        stats,
    })
}

/// The trial's metrics: mean fetch time, energy and data against the budgets, what the
/// prefetcher did.
pub fn metrics(out: &Outcome, budgets: Budgets, duration: Duration) -> Vec<Metric> {
    let mean = crate::report::mean_or_unfinished(&out.fetch_ms);
    let k = scale(duration);
    vec![
        Metric::new("fetch_ms", mean, "ms"),
        Metric::new("energy_J", out.joules, "J"),
        Metric::new("data_kB", out.metered as f64 / 1e3, "kB"),
        Metric::new(
            "energy_budget_J",
            budgets.energy_j.map_or(f64::NAN, |j| j * k),
            "J",
        ),
        Metric::new(
            "data_budget_kB",
            budgets.data_bytes.map_or(f64::NAN, |b| b as f64 / 1e3 * k),
            "kB",
        ),
        Metric::new("prefetches", out.stats.prefetches as f64, "msgs"),
        Metric::new("demand_fetches", out.stats.demand_fetches as f64, "msgs"),
        Metric::new("prefetch_hits", out.stats.prefetch_hits as f64, "msgs"),
    ]
}

/// End a trial of an IMP application: stop both ends, record every read's wait, note a read
/// that never came, and give the metrics (the server side's error, with the client's, if the
/// client failed).
pub fn finish_trial(
    t: &crate::harness::trial::Trial,
    server: crate::harness::ends::ServerSide,
    out: Result<(Outcome, Arc<Conn>)>,
    budgets: Budgets,
    event: &str,
) -> Result<Vec<Metric>> {
    let (out, recovery) = server.finish_client(out)?;
    t.event_latencies(event, out.fetch_ms.iter().copied());
    if out.fetch_ms.iter().any(|m| m.is_infinite()) {
        t.note(format!(
            "{} read(s) done within the run; the next did not arrive",
            out.fetch_ms.len() - 1
        ));
    }
    Ok(metrics(&out, budgets, t.duration)
        .into_iter()
        .chain(recovery)
        .collect())
}
