//! E-mail with Informed Mobile Prefetching (the IMP thesis's first application, seed 000
//! §3.5): the client hints the 35 newest messages of its mailbox and the user reads 28 of them
//! (80% of the hints are right), one at a time with a think time between reads; IMP, or one of
//! the thesis's baseline strategies, decides which bodies to prefetch in the background, under
//! an energy budget, a data budget or both.
//!
//! The server side is the lab's mail endpoint in front of a real Dovecot ([`crate::mail`]);
//! the client speaks IMAP over one roam multi-socket, each fetch an IROB with the label IMP
//! gives (background for a prefetch, foreground for a read that finds its body missing).
//! Energy is modelled: the client namespace's interface counters drive PowerTutor's Nexus One
//! radios (the thesis's model) in [`roam_prefetch::device::DeviceEnvironment`], which also
//! charges the budgets' controllers; data is the 3G's bytes.
//!
//! Our decisions where the thesis is silent: the messages are the first 35 of the lab's
//! mailbox (sizes 50 B - 256 KB, log-uniform from the seed); the 28 read and their order come
//! from the seed; the user reads the first message 10 s into the run and then one after each
//! think time drawn uniformly from 30-60 s. A run shorter than the thesis's 20 minutes scales
//! the times and the budgets by its length (the thesis too scaled its budgets to its runs).

use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use roam_budget::{profile, Budget};
use roam_core::{Bytes, Time};
use roam_net::Label;
use roam_prefetch::device::{DeviceEnvironment, Interface};
use roam_prefetch::{Handle, Prefetcher, Strategy};

use crate::channel::Conn;
use crate::dovecot::{self, Dovecot};
use crate::imap::{self, Response};
use crate::mail::{command, endpoint, parse_fetch, recv_response, ENDPOINT_PORT};
use crate::report::UNFINISHED;
use crate::trial::{Metric, Trial};

/// Messages hinted.
pub const HINTED: usize = 35;
/// Messages the user reads.
pub const READ: usize = 28;
/// When the user reads the first message.
const FIRST_READ: Duration = Duration::from_secs(10);
/// The think time between reads, for a 20-minute run (uniform between the two).
const THINK: (f64, f64) = (30.0, 60.0);
/// The run length the think times are given for.
const FULL_RUN: Duration = Duration::from_secs(20 * 60);

/// A budget condition of the thesis's e-mail experiment.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Budgets {
    /// Joules for the run, if energy is budgeted.
    pub energy_j: Option<f64>,
    /// Bytes of 3G data for the run, if data is budgeted.
    pub data_bytes: Option<u64>,
}

/// The radios of the client's links: PowerTutor's Nexus One (the thesis's model), AT&T 3G.
fn interfaces() -> Result<Vec<Interface>> {
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

/// The responses to commands in flight, by tag: a reader thread hands each its response.
#[derive(Default)]
struct Waiters {
    by_tag: HashMap<String, mpsc::Sender<Response>>,
    closed: Option<String>,
}

/// The client's IMAP connection shared by the fetchers.
struct Client {
    conn: Arc<Conn>,
    waiters: Mutex<Waiters>,
    next_tag: std::sync::atomic::AtomicU64,
}

impl Client {
    /// Send `args` under a fresh tag with `label` and wait for its response.
    fn call(&self, label: Label, args: &str) -> Result<Response> {
        let tag = format!(
            "i{}",
            self.next_tag
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let (tx, rx) = mpsc::channel();
        {
            let mut w = self.waiters.lock().unwrap();
            if let Some(why) = &w.closed {
                bail!("the connection is closed: {why}");
            }
            w.by_tag.insert(tag.clone(), tx);
        }
        self.conn
            .send(label, &[], format!("{tag} {args}\r\n").into_bytes(), None)?;
        rx.recv()
            .map_err(|_| anyhow!("the connection closed before `{args}` was answered"))
    }

    /// Hand each response to its waiter, until the stream ends.
    fn read_loop(&self) {
        let why = loop {
            match recv_response(&self.conn) {
                Ok(Some(r)) => {
                    let tx = self.waiters.lock().unwrap().by_tag.remove(&r.tag);
                    if let Some(tx) = tx {
                        let _ = tx.send(r);
                    }
                }
                Ok(None) => break "the server closed the connection".to_string(),
                Err(e) => break format!("{e:#}"),
            }
        };
        let mut w = self.waiters.lock().unwrap();
        w.closed = Some(why);
        w.by_tag.clear();
    }
}

/// The body size a `UID FETCH n (BODY.PEEK[])` response carries.
fn body_size(r: &Response) -> Result<u64> {
    if !r.ok() {
        bail!("IMAP fetch failed: {}", r.status_line());
    }
    for line in imap::logical_lines(&r.bytes)? {
        if let Some(f) = parse_fetch(&line)? {
            if let Some(b) = f.body {
                return Ok(b);
            }
        }
    }
    bail!("the response carried no body")
}

/// The think times (seconds) before each of the `READ` reads after the first, for a run of
/// `duration`.
fn think_times(rng: &mut ChaCha8Rng, duration: Duration) -> Vec<f64> {
    let scale = scale(duration);
    (1..READ)
        .map(|_| rng.gen_range(THINK.0..THINK.1) * scale)
        .collect()
}

/// How much of the thesis's 20-minute run a run of `duration` is (at most 1).
fn scale(duration: Duration) -> f64 {
    (duration.as_secs_f64() / FULL_RUN.as_secs_f64()).min(1.0)
}

/// Run one trial of the e-mail application with `budgets` (for 20 minutes; scaled to the
/// run's length).
pub fn run(t: &Trial, budgets: Budgets) -> Result<Vec<Metric>> {
    let strategy = t
        .system
        .strategy()
        .ok_or_else(|| anyhow!("the IMP lab runs roam with a prefetching strategy"))?;
    let seed = t.seed;
    let duration = t.duration;
    let server = t.start_server(
        "imp mail",
        ENDPOINT_PORT,
        move || Dovecot::start(seed),
        |dove, c| endpoint(c).map_err(|e| anyhow!("{e:#}{}", dove.log_tail())),
    )?;
    let system = t.system;
    let locals = t.client_addrs();
    let progress = t.progress.clone();
    type Out = (Vec<f64>, f64, u64, roam_prefetch::Stats, Arc<Conn>);
    let client = move || -> Result<Out> {
        let conn = Arc::new(Conn::connect(system, &locals, ENDPOINT_PORT)?);
        let greeting = conn
            .recv()?
            .ok_or_else(|| anyhow!("the endpoint closed without a greeting"))?;
        imap::read_greeting(&mut &greeting.data[..])?;
        command(
            &conn,
            "l1",
            &format!("LOGIN {} {}", dovecot::USER.0, dovecot::USER.1),
        )?;
        command(&conn, "l2", "SELECT INBOX")?;
        let cl = Arc::new(Client {
            conn: conn.clone(),
            waiters: Mutex::default(),
            next_tag: std::sync::atomic::AtomicU64::new(1),
        });
        let reader = cl.clone();
        std::thread::spawn(move || reader.read_loop());
        // The hinted messages and their sizes.
        let listing = cl.call(
            Label::ForegroundSmall,
            &format!("UID FETCH 1:{HINTED} (UID RFC822.SIZE)"),
        )?;
        let mut messages = Vec::new();
        for line in imap::logical_lines(&listing.bytes)? {
            if let Some(f) = parse_fetch(&line)? {
                messages.push((f.uid, f.size.unwrap_or(0)));
            }
        }
        if messages.len() != HINTED {
            bail!("listed {} messages, expected {HINTED}", messages.len());
        }
        // IMP over the multi-socket's estimates and the namespace's interface counters.
        let est = conn.clone();
        let run_for = Time::ZERO + duration;
        let budget = |total: f64| Budget {
            total: total * scale(duration),
            start: Time::ZERO,
            end: run_for,
        };
        let env = Arc::new(
            DeviceEnvironment::new(
                interfaces()?,
                move || match &*est {
                    Conn::Roam(ms) => ms.estimates(),
                    Conn::Plain(_) => Vec::new(),
                },
                budgets.energy_j.map(budget),
                budgets.data_bytes.map(|b| budget(b as f64)),
            )
            .map_err(|e| anyhow!("{e}"))?,
        );
        let imp = Prefetcher::with_strategy(env.clone(), strategy);
        let mut handles: Vec<Option<Handle<u64>>> = messages
            .iter()
            .map(|&(uid, size)| {
                let c = cl.clone();
                let h = imp.prefetch(move |label| {
                    let r = c
                        .call(label, &format!("UID FETCH {uid} (BODY.PEEK[])"))
                        .map_err(|e| format!("{e:#}"))?;
                    body_size(&r).map_err(|e| format!("{e:#}"))
                });
                h.set_size(Bytes(size));
                Some(h)
            })
            .collect();
        // The user: 28 of the 35, in an order from the seed, a think time apart.
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x1a9_3a11);
        let mut order: Vec<usize> = (0..HINTED).collect();
        order.shuffle(&mut rng);
        let thinks = think_times(&mut rng, duration);
        let start = Instant::now();
        let deadline = start + duration;
        let mut at = FIRST_READ.mul_f64(scale(duration));
        let mut fetch_ms = Vec::new();
        for (k, &i) in order.iter().take(READ).enumerate() {
            if k > 0 {
                at += Duration::from_secs_f64(thinks[k - 1]);
            }
            std::thread::sleep((start + at).saturating_duration_since(Instant::now()));
            progress(start.elapsed().as_secs());
            let left = deadline.saturating_duration_since(Instant::now());
            let mut h = handles[i].take().expect("each message is read once");
            let t0 = Instant::now();
            let got = h.get(Some(left.max(Duration::from_secs(1))));
            let ms = t0.elapsed().as_secs_f64() * 1e3;
            match got {
                Ok(bytes) if bytes == messages[i].1 => fetch_ms.push(ms),
                Ok(bytes) => bail!(
                    "UID {}: a body of {bytes} bytes, listed as {}",
                    messages[i].0,
                    messages[i].1
                ),
                Err(roam_prefetch::GetError::Timeout(_)) => {
                    fetch_ms.push(UNFINISHED);
                    break;
                }
                Err(e) => bail!("reading UID {}: {e}", messages[i].0),
            }
        }
        // The hints never read are withdrawn.
        drop(handles);
        let stats = imp.stats();
        drop(imp);
        let (joules, metered) = env.spent();
        Ok((fetch_ms, joules, metered.0, stats, conn))
    };
    let out = t.run_client("imp mail", client);
    let (recovery, served) = server.finish(out.as_ref().ok().map(|o| &*o.4));
    let (fetch_ms, joules, metered, stats, _) = match out {
        Ok(o) => o,
        Err(e) => {
            if let Err(se) = served {
                bail!("{e:#}; server side: {se:#}");
            }
            return Err(e);
        }
    };
    t.event_latencies(EVENT, fetch_ms.iter().copied());
    let unfinished = fetch_ms.iter().any(|m| m.is_infinite());
    if unfinished {
        t.note(format!(
            "{} of {READ} reads done within the run; the last did not arrive",
            fetch_ms.len() - 1
        ));
    }
    let mean = if unfinished {
        UNFINISHED
    } else {
        crate::report::mean(&fetch_ms)
    };
    Ok(vec![
        Metric::new("fetch_ms", mean, "ms"),
        Metric::new("energy_J", joules, "J"),
        Metric::new("data_kB", metered as f64 / 1e3, "kB"),
        Metric::new(
            "energy_budget_J",
            budgets.energy_j.map_or(f64::NAN, |j| j * scale(duration)),
            "J",
        ),
        Metric::new(
            "data_budget_kB",
            budgets
                .data_bytes
                .map_or(f64::NAN, |b| b as f64 / 1e3 * scale(duration)),
            "kB",
        ),
        Metric::new("prefetches", stats.prefetches as f64, "msgs"),
        Metric::new("demand_fetches", stats.demand_fetches as f64, "msgs"),
        Metric::new("prefetch_hits", stats.prefetch_hits as f64, "msgs"),
    ]
    .into_iter()
    .chain(recovery)
    .collect())
}

/// The interactive event whose latencies a trial records: each read's wait.
pub const EVENT: &str = "read_ms";

/// The budget conditions of the thesis's e-mail experiment: 300 J; 2 MB; 325 J and 2 MB.
pub const CONDITIONS: [(&str, Budgets); 3] = [
    (
        "mail-energy",
        Budgets {
            energy_j: Some(300.0),
            data_bytes: None,
        },
    ),
    (
        "mail-data",
        Budgets {
            energy_j: None,
            data_bytes: Some(2_000_000),
        },
    ),
    (
        "mail-both",
        Budgets {
            energy_j: Some(325.0),
            data_bytes: Some(2_000_000),
        },
    ),
];

/// A trial under the energy budget.
pub fn run_energy(t: &Trial) -> Result<Vec<Metric>> {
    run(t, CONDITIONS[0].1)
}

/// A trial under the data budget.
pub fn run_data(t: &Trial) -> Result<Vec<Metric>> {
    run(t, CONDITIONS[1].1)
}

/// A trial under both budgets.
pub fn run_both(t: &Trial) -> Result<Vec<Metric>> {
    run(t, CONDITIONS[2].1)
}

/// Every strategy as a lab system.
pub fn systems() -> Vec<crate::system::System> {
    Strategy::ALL
        .into_iter()
        .map(crate::system::System::Prefetch)
        .collect()
}
