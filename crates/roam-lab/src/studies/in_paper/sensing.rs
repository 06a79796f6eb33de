//! Vehicular sensing (the paper's §4.3 application, after a Ford specification): a vehicle
//! uploads ~25 KB/s of raw sensor samples and a 4 KB summary of each second, and, rarely,
//! urgent messages (traction loss, hard braking): 3 episodes of 5 messages within 7 s.
//!
//! - With roam: summaries are {background, small}, raw samples {background, large} and depend
//!   on their summary, urgent messages {foreground, small}. Background sends carry a thunk; if
//!   a thunk has not fired by the next raw sample, the old raw sample is dropped and the
//!   pending summary is re-averaged to cover one more second (at most 10 s).
//! - Without roam (the unmodified application): one connection; after more than 1 s of not
//!   being able to send, raw samples are dropped and summaries aggregated the same way.
//!
//! Measured: the urgent messages' one-way latency (client and server are threads of one
//! process, so they share a clock) and the bulk throughput (summary and raw bytes delivered
//! during the run, per second; 29 KB/s when nothing is dropped).

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use roam_net::runtime::{Thunk, ThunkHandle};
use roam_net::{IrobId, Label};

use crate::harness::channel::{Conn, Sent};
use crate::harness::trial::{Metric, Trial};

/// Raw sample bytes per second.
pub const RAW_PER_S: usize = 25_000;
/// Summary bytes per second of data.
pub const SUMMARY: usize = 4096;
/// Urgent message size.
pub const URGENT: usize = 512;
/// Most seconds one summary may cover.
pub const MAX_COVER: u32 = 10;
pub(super) const PORT: u16 = 6100;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Urgent = 0,
    Summary = 1,
    Raw = 2,
}

/// Header of every message: kind, sequence, send time (ns since the trial's epoch), seconds
/// covered.
fn message(kind: Kind, seq: u32, sent_ns: u64, cover: u32, size: usize) -> Vec<u8> {
    let mut m = vec![0u8; size.max(17)];
    m[0] = kind as u8;
    m[1..5].copy_from_slice(&seq.to_le_bytes());
    m[5..13].copy_from_slice(&sent_ns.to_le_bytes());
    m[13..17].copy_from_slice(&cover.to_le_bytes());
    m
}

/// When the urgent messages are sent (seconds from the start): 3 episodes (at about 1/4, 1/2
/// and 3/4 of the run), each 5 messages within 7 s.
pub fn urgent_schedule(duration: Duration, seed: u64) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5e45);
    let d = duration.as_secs_f64();
    let mut out = Vec::new();
    for k in 1..=3 {
        let start = d * k as f64 / 4.0 + rng.gen_range(-0.05..0.05) * d;
        let mut offs: Vec<f64> = (0..5).map(|_| rng.gen_range(0.0..7.0)).collect();
        offs.sort_by(f64::total_cmp);
        out.extend(offs.into_iter().map(|o| (start + o).clamp(0.0, d - 1.0)));
    }
    out.sort_by(f64::total_cmp);
    out
}

#[derive(Debug)]
pub(super) struct Arrival {
    kind: u8,
    bytes: usize,
    sent_ns: u64,
    at_ns: u64,
}

/// The header and rows of `sensing-urgent.csv`, which a trial writes into its log directory
/// (`--emu-logs`): every urgent message that arrived, when it was sent (seconds on the
/// emulator's clock, the `t_s` of the link logs beside it) and how long it took.
pub(super) fn urgent_csv(arrivals: &[Arrival]) -> String {
    let mut s = String::from("sent_s,latency_ms\n");
    for a in arrivals.iter().filter(|a| a.kind == Kind::Urgent as u8) {
        s.push_str(&format!(
            "{:.3},{:.1}\n",
            a.sent_ns as f64 / 1e9,
            a.at_ns.saturating_sub(a.sent_ns) as f64 / 1e6
        ));
    }
    s
}

/// Bulk data not yet handed to the connection.
struct Pending {
    /// Seconds the pending summary covers (0: the summary went out, only raw is pending).
    cover: u32,
    /// The summary's id when it went out (the raw sample depends on it).
    summary: Option<IrobId>,
    /// Raw sample second.
    raw_seq: u32,
    handle: Option<ThunkHandle>,
}

struct Client<'a> {
    conn: &'a Conn,
    epoch: Instant,
    ready: mpsc::Sender<()>,
    raw_dropped: u64,
}

impl Client<'_> {
    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn thunk(&self) -> Option<Thunk> {
        if !self.conn_is_roam() {
            return None;
        }
        let tx = self.ready.clone();
        Some(Thunk::new(move || {
            let _ = tx.send(());
        }))
    }

    fn conn_is_roam(&self) -> bool {
        matches!(self.conn, Conn::Roam(_))
    }

    /// Try to send `p`; what remains pending comes back.
    fn push(&mut self, mut p: Pending) -> Result<Option<Pending>> {
        if p.cover > 0 {
            let m = message(Kind::Summary, p.raw_seq, self.now_ns(), p.cover, SUMMARY);
            match self
                .conn
                .send(Label::BackgroundSmall, &[], m, self.thunk())?
            {
                Sent::Id(id) => {
                    p.cover = 0;
                    p.summary = Some(id);
                }
                Sent::Deferred(h) => {
                    p.handle = Some(h);
                    return Ok(Some(p));
                }
            }
        }
        let deps: Vec<IrobId> = p.summary.into_iter().collect();
        let m = message(Kind::Raw, p.raw_seq, self.now_ns(), 1, RAW_PER_S);
        match self
            .conn
            .send(Label::BackgroundLarge, &deps, m, self.thunk())?
        {
            Sent::Id(_) => Ok(None),
            Sent::Deferred(h) => {
                p.handle = Some(h);
                Ok(Some(p))
            }
        }
    }
}

/// The interactive event whose latencies a trial records ([`Trial::event_latencies`]): each
/// urgent message's one-way latency (one never delivered counts as unfinished).
pub const EVENT: &str = "urgent_ms";

/// The server: record every message's arrival (on the clock of `epoch`, the one the send
/// times are on) in `arrivals` until the connection ends.
pub(super) fn serve(
    c: Arc<Conn>,
    epoch: Instant,
    arrivals: Arc<Mutex<Vec<Arrival>>>,
) -> Result<()> {
    while let Some(m) = c.recv()? {
        let at_ns = epoch.elapsed().as_nanos() as u64;
        if m.data.len() < 17 {
            continue;
        }
        arrivals.lock().unwrap().push(Arrival {
            kind: m.data[0],
            bytes: m.data.len(),
            sent_ns: u64::from_le_bytes(m.data[5..13].try_into().unwrap()),
            at_ns,
        });
    }
    Ok(())
}

/// What the vehicle sent, and dropped, over a trial.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub(super) struct Uploaded {
    /// Raw sample bytes the sensors produced.
    pub(super) raw_generated: u64,
    /// Raw sample bytes dropped unsent (superseded while the connection could not take them).
    pub(super) raw_dropped: u64,
    /// Urgent messages sent.
    pub(super) urgent_sent: u32,
}

/// The vehicle while it drives: the client, the urgent messages still to send, and the bulk
/// data the connection has not yet taken.
struct Vehicle<'a> {
    cl: Client<'a>,
    /// Fires when a thunk of a deferred background send does (roam): the connection can take
    /// more.
    ready_rx: mpsc::Receiver<()>,
    /// When the drive started (second 0 of the schedule).
    start: Instant,
    /// Bulk data a roam connection has not yet taken.
    pending: Option<Pending>,
    /// The plain application's seconds aggregated while unable to send.
    plain_cover: u32,
    /// When the urgent messages still to send are due (seconds from `start`).
    urgent: std::iter::Peekable<std::vec::IntoIter<f64>>,
    urgent_seq: u32,
    raw_generated: u64,
    /// Whether this process sends the summaries and raw samples (all but the two-process
    /// version's urgent process do).
    sends_bulk: bool,
}

impl<'a> Vehicle<'a> {
    /// A vehicle about to drive over `conn`, its send times on the clock of `epoch`, with
    /// urgent messages due at `urgent_at` (seconds from now).
    fn new(conn: &'a Conn, epoch: Instant, urgent_at: Vec<f64>, sends_bulk: bool) -> Vehicle<'a> {
        let (ready, ready_rx) = mpsc::channel();
        let cl = Client {
            conn,
            epoch,
            ready,
            raw_dropped: 0,
        };
        Vehicle {
            cl,
            ready_rx,
            start: Instant::now(),
            pending: None,
            plain_cover: 0,
            urgent: urgent_at.into_iter().peekable(),
            urgent_seq: 0,
            raw_generated: 0,
            sends_bulk,
        }
    }

    /// Wait for `tick` (the next second's sample), sending the urgent messages due by then
    /// ({foreground, small}) and retrying deferred bulk data whenever a thunk fires.
    fn until_tick(&mut self, tick: Instant) -> Result<()> {
        loop {
            let next_u = self
                .urgent
                .peek()
                .map(|&u| self.start + Duration::from_secs_f64(u))
                .filter(|&u| u <= tick);
            let wake = next_u.unwrap_or(tick);
            let left = wake.saturating_duration_since(Instant::now());
            if self.ready_rx.recv_timeout(left).is_ok() {
                if let Some(p) = self.pending.take() {
                    self.pending = self.cl.push(p)?;
                }
                continue;
            }
            if next_u.is_some() {
                self.urgent.next();
                let m = message(Kind::Urgent, self.urgent_seq, self.cl.now_ns(), 0, URGENT);
                self.urgent_seq += 1;
                self.cl.conn.send(Label::ForegroundSmall, &[], m, None)?;
                continue;
            }
            return Ok(());
        }
    }

    /// Hand second `sec`'s summary and raw sample to the connection, the way the system's
    /// application does ([`Vehicle::bulk_roam`], [`Vehicle::bulk_plain`]).
    fn bulk(&mut self, sec: u32) -> Result<()> {
        if !self.sends_bulk {
            return Ok(());
        }
        self.raw_generated += RAW_PER_S as u64;
        if self.cl.conn_is_roam() {
            self.bulk_roam(sec)
        } else {
            self.bulk_plain(sec)
        }
    }

    /// With roam: the second's data joins what the connection has not taken yet, then goes
    /// out or waits for a thunk.
    fn bulk_roam(&mut self, sec: u32) -> Result<()> {
        let cover = match self.pending.take() {
            // The thunk did not fire before this sample: drop the old raw sample,
            // re-average the summary over one more second.
            Some(p) => {
                if let Some(h) = &p.handle {
                    h.cancel();
                }
                self.cl.raw_dropped += RAW_PER_S as u64;
                (p.cover + 1).min(MAX_COVER)
            }
            None => 1,
        };
        self.pending = self.cl.push(Pending {
            cover,
            summary: None,
            raw_seq: sec,
            handle: None,
        })?;
        Ok(())
    }

    /// Without roam (the unmodified application): after more than 1 s of not being able to
    /// send, drop the raw sample and aggregate the summary; else send the summary (covering
    /// the seconds aggregated so far) and the raw sample.
    fn bulk_plain(&mut self, sec: u32) -> Result<()> {
        if self.cl.conn.stalled_for() > Duration::from_secs(1) {
            self.cl.raw_dropped += RAW_PER_S as u64;
            self.plain_cover = (self.plain_cover + 1).min(MAX_COVER);
        } else {
            let p = Pending {
                cover: self.plain_cover + 1,
                summary: None,
                raw_seq: sec,
                handle: None,
            };
            self.plain_cover = 0;
            self.cl.push(p)?;
        }
        Ok(())
    }

    /// End the drive: pending data is abandoned; the connection stays open for urgent
    /// messages in flight.
    fn stop(self) -> Uploaded {
        let dropped = self.cl.raw_dropped;
        if let Some(h) = self.pending.and_then(|p| p.handle) {
            h.cancel();
        }
        Uploaded {
            raw_generated: self.raw_generated,
            raw_dropped: dropped,
            urgent_sent: self.urgent_seq,
        }
    }
}

/// Drive for `duration` over `conn` (send times on the clock of `epoch`): each second, wait
/// for its tick sending the urgent messages due ([`Vehicle::until_tick`]), then hand that
/// second's data to the connection ([`Vehicle::bulk`], unless `sends_bulk` is false: the
/// two-process version's urgent process). `progress` hears the seconds done.
pub(super) fn drive(
    conn: &Conn,
    epoch: Instant,
    (urgent_at, sends_bulk): (Vec<f64>, bool),
    duration: Duration,
    progress: &(dyn Fn(u64) + Send + Sync),
) -> Result<Uploaded> {
    let mut v = Vehicle::new(conn, epoch, urgent_at, sends_bulk);
    let secs = duration.as_secs() as u32;
    for sec in 0..secs {
        let tick = v.start + Duration::from_secs(sec as u64);
        v.until_tick(tick)?;
        progress(sec as u64 + 1);
        v.bulk(sec)?;
    }
    Ok(v.stop())
}

/// Give in-flight urgent messages up to 30 s to arrive: until `arrivals` holds as many as
/// were sent (`urgent_sent`).
pub(super) fn await_urgent(arrivals: &Mutex<Vec<Arrival>>, urgent_sent: u32) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let n = arrivals
            .lock()
            .unwrap()
            .iter()
            .filter(|a| a.kind == Kind::Urgent as u8)
            .count();
        if n as u32 >= urgent_sent {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// What the server received.
pub(super) struct Received {
    /// The urgent messages' one-way latencies, ms, in increasing order.
    pub(super) urgent: Vec<f64>,
    /// Summary and raw bytes delivered within the workload.
    bulk: usize,
    /// Raw bytes delivered within the workload.
    raw: usize,
}

impl Received {
    /// What `arrivals` hold, the bulk counted up to the workload's end (`duration` after the
    /// epoch).
    pub(super) fn of(a: &[Arrival], duration: Duration) -> Received {
        let end_ns = duration.as_nanos() as u64;
        let mut urgent: Vec<f64> = a
            .iter()
            .filter(|x| x.kind == Kind::Urgent as u8)
            .map(|x| (x.at_ns.saturating_sub(x.sent_ns)) as f64 / 1e6)
            .collect();
        let bulk: usize = a
            .iter()
            .filter(|x| x.kind != Kind::Urgent as u8 && x.at_ns <= end_ns)
            .map(|x| x.bytes)
            .sum();
        let raw: usize = a
            .iter()
            .filter(|x| x.kind == Kind::Raw as u8 && x.at_ns <= end_ns)
            .map(|x| x.bytes)
            .sum();
        urgent.sort_by(f64::total_cmp);
        Received { urgent, bulk, raw }
    }
}

/// Run one trial (the trial's emulator is up): start the server (`serve`), drive
/// (`drive`), wait for the urgent messages in flight (`await_urgent`), and report what
/// the server received (`Received`, `metrics`).
pub fn run(t: &Trial) -> Result<Vec<Metric>> {
    let duration = t.duration;
    let urgent_at = urgent_schedule(duration, t.seed);
    // Send times are on the emulator's clock, so the urgent log lines up with the link logs.
    let epoch = t.emu.clock().epoch();
    let arrivals: Arc<Mutex<Vec<Arrival>>> = Arc::default();
    let system = t.system.clone();
    let arr = arrivals.clone();
    let server = t.start_server(
        "sensing",
        PORT,
        || Ok(()),
        move |(), c| serve(c, epoch, arr),
    )?;
    let locals = t.client_links();
    let progress = t.progress.clone();
    let client = move || -> Result<(Uploaded, Conn)> {
        let conn = Conn::connect(system, &locals, PORT)?;
        let up = drive(&conn, epoch, (urgent_at, true), duration, &*progress)?;
        Ok((up, conn))
    };
    let (up, conn) = match t.run_client("sensing", client) {
        Ok(x) => x,
        Err(e) => {
            let _ = server.finish(None);
            return Err(e);
        }
    };
    await_urgent(&arrivals, up.urgent_sent);
    let (recovery, _) = server.finish(Some(&conn));
    let a = arrivals.lock().unwrap();
    let got = Received::of(&a, duration);
    t.keep_log("sensing-urgent.csv", || urgent_csv(&a))?;
    let lost = up.urgent_sent as usize - got.urgent.len().min(up.urgent_sent as usize);
    let never = std::iter::repeat_n(crate::report::UNFINISHED, lost);
    t.event_latencies(EVENT, got.urgent.iter().copied().chain(never));
    Ok(metrics(&got, &up, lost, duration, recovery))
}

/// The trial's metrics: the urgent messages' latencies and losses (`lost` of them), the bulk
/// throughput over `duration` and the raw samples' fates, then the connection's `recovery`
/// costs.
pub(super) fn metrics(
    got: &Received,
    up: &Uploaded,
    lost: usize,
    duration: Duration,
    recovery: Vec<Metric>,
) -> Vec<Metric> {
    vec![
        Metric::new("urgent_ms", crate::report::median(&got.urgent), "ms"),
        Metric::new("urgent_mean_ms", crate::report::mean(&got.urgent), "ms"),
        Metric::new("urgent_lost", lost as f64, "msgs"),
        Metric::new(
            "bulk_kBps",
            got.bulk as f64 / 1e3 / duration.as_secs_f64(),
            "KB/s",
        ),
        Metric::new(
            "raw_delivered_fraction",
            got.raw as f64 / up.raw_generated.max(1) as f64,
            "",
        ),
        Metric::new(
            "raw_dropped_fraction",
            up.raw_dropped as f64 / up.raw_generated.max(1) as f64,
            "",
        ),
    ]
    .into_iter()
    .chain(recovery)
    .collect()
}
