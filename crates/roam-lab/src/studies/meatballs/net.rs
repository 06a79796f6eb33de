//! The Meatballs thesis's network-selection workload (Meatballs thesis §4.4.2): a user sends a request
//! of about 1 KB and waits for a response of about 4 KB, then thinks for U(10, 30) s, for 20
//! minutes. Every request and response is a small foreground IROB; the system under test
//! ([`crate::studies::meatballs::selection::Selection`]) decides which network each goes over, and whether over
//! two. The trial measures each wait, and the energy (modelled from the client's interface
//! counters with PowerTutor's Nexus One radios, as the IMP lab does) and the 3G data spent,
//! and from those the weighted cost at each of the thesis's cost levels: the total wait plus
//! the energy and data priced at that level.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use roam_net::Label;

use crate::harness::channel::Conn;
use crate::harness::trial::{Metric, Trial};
use crate::report::{mean_or_unfinished, UNFINISHED};
use crate::studies::imp::client::{Caller, Metered};
use roam_decide::{CostLevel, Prices};

/// The application's port.
const PORT: u16 = 6320;
/// Request and response sizes (bytes).
pub const REQUEST: usize = 1024;
/// See [`REQUEST`].
pub const RESPONSE: usize = 4096;
/// Think time between a response and the next request (uniform, seconds).
pub const THINK: (f64, f64) = (10.0, 30.0);
/// The first request, this long into the run (the networks' first estimates come first).
const FIRST: Duration = Duration::from_secs(5);
/// How long a request may take however near the run's end it was sent: a response that has
/// not come by then counts as unfinished. (With only the run's remaining time, at least 1 s,
/// a request sent in the run's last second was cut short: three trials of the first held-out
/// run ended so, each with one slow last request.)
pub const GRACE: Duration = Duration::from_secs(30);
/// The interactive event whose latencies a trial records: each response's wait.
pub const EVENT: &str = "response_ms";

/// A message's id: its first word.
fn id_of(m: &[u8]) -> Result<String> {
    let end = m
        .iter()
        .position(|&b| b == b' ')
        .ok_or_else(|| anyhow!("a message without an id"))?;
    Ok(String::from_utf8_lossy(&m[..end]).into_owned())
}

/// `ID ` padded to `len` bytes.
fn message(id: &str, len: usize) -> Vec<u8> {
    let mut m = format!("{id} ").into_bytes();
    m.resize(len.max(m.len()), b'.');
    m
}

/// The server: answer each request with a response of [`RESPONSE`] bytes naming its id.
fn serve(conn: Arc<Conn>) -> Result<()> {
    while let Some(m) = conn.recv()? {
        let id = id_of(&m.data)?;
        conn.send(Label::ForegroundSmall, &[], message(&id, RESPONSE), None)?;
    }
    Ok(())
}

/// The user: a request, its response, a think time, until `duration` is over; each wait (ms;
/// [`UNFINISHED`] for a response that did not come within the run, which ends it).
fn requests(
    caller: &Caller,
    seed: u64,
    duration: Duration,
    progress: &(dyn Fn(u64) + Send + Sync),
) -> Result<Vec<f64>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x3ea7_ba11);
    let start = Instant::now();
    let end = start + duration;
    let mut at = start + FIRST;
    let mut waits_ms = Vec::new();
    while at < end {
        std::thread::sleep(at.saturating_duration_since(Instant::now()));
        progress(start.elapsed().as_secs());
        let t0 = Instant::now();
        let left = end.saturating_duration_since(t0).max(GRACE);
        match caller.call_timeout(Label::ForegroundSmall, |id| message(id, REQUEST), left)? {
            Some(r) if r.len() == RESPONSE => waits_ms.push(t0.elapsed().as_secs_f64() * 1e3),
            Some(r) => bail!("a response of {} bytes, expected {RESPONSE}", r.len()),
            None => {
                waits_ms.push(UNFINISHED);
                break;
            }
        }
        at = Instant::now() + Duration::from_secs_f64(rng.gen_range(THINK.0..THINK.1));
    }
    Ok(waits_ms)
}

/// What a trial's client measured.
struct Measured {
    waits_ms: Vec<f64>,
    joules: f64,
    metered: u64,
}

/// Run one trial.
pub fn run(t: &Trial) -> Result<Vec<Metric>> {
    if let Some(s) = t
        .system
        .get::<crate::studies::meatballs::selection::Selection>()
    {
        if !s.network() {
            bail!(
                "`{}` is a speech rule, not a network-selection one",
                s.name()
            );
        }
    }
    let server = t.start_server("meatballs", PORT, || Ok(()), |(), c| serve(c))?;
    let (system, seed, duration) = (t.system.clone(), t.seed, t.duration);
    let locals = t.client_links();
    let progress = t.progress.clone();
    let client = move || -> Result<(Measured, Arc<Conn>)> {
        let conn = Arc::new(Conn::connect(system, &locals, PORT)?);
        // The radio models follow the interface counters (in the client namespace).
        let meter = Metered::start(&conn)?;
        let caller = Caller::start(conn.clone(), id_of);
        let waits = requests(&caller, seed, duration, &*progress);
        let (joules, metered) = meter.finish();
        Ok((
            Measured {
                waits_ms: waits?,
                joules,
                metered,
            },
            conn,
        ))
    };
    let out = t.run_client("meatballs", client);
    let (m, recovery) = server.finish_client(out)?;
    t.event_latencies(EVENT, m.waits_ms.iter().copied());
    let unfinished = m.waits_ms.iter().any(|w| w.is_infinite());
    if unfinished {
        t.note(format!(
            "{} response(s) within the run; the next did not arrive",
            m.waits_ms.len() - 1
        ));
    }
    let total_s = m.waits_ms.iter().sum::<f64>() / 1e3;
    let metrics = vec![
        Metric::new("response_ms", mean_or_unfinished(&m.waits_ms), "ms"),
        Metric::new("energy_J", m.joules, "J"),
        Metric::new("data_kB", m.metered as f64 / 1e3, "kB"),
        Metric::new("requests", m.waits_ms.len() as f64, "msgs"),
        Metric::new("wait_s", total_s, "s"),
    ];
    Ok(metrics
        .into_iter()
        .chain(weighted_costs(total_s, m.joules, m.metered))
        .chain(recovery)
        .collect())
}

/// A trial's weighted cost at every cost level (`cost_LEVEL_s`): its total wait plus its energy
/// and metered data at that level's prices.
pub(crate) fn weighted_costs(total_wait_s: f64, energy_j: f64, metered_bytes: u64) -> Vec<Metric> {
    CostLevel::ALL
        .into_iter()
        .map(|level| {
            let p = Prices::level(level);
            let cost = total_wait_s + p.energy * energy_j + p.data * metered_bytes as f64;
            Metric::new(cost_metric(level), cost, "s")
        })
        .collect()
}

/// The metric of the weighted cost at `level`.
pub fn cost_metric(level: CostLevel) -> &'static str {
    match level {
        CostLevel::None => "cost_none_s",
        CostLevel::Low => "cost_low_s",
        CostLevel::Mid => "cost_mid_s",
        CostLevel::High => "cost_high_s",
    }
}
