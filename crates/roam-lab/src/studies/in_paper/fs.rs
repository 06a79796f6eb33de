//! File-system RPC standing in for BlueFS (the paper's §4.1 application): a block file service
//! whose client replays a recorded cold-cache build (configure + make of lighttpd 1.4.69; the
//! trace is `fixtures/lighttpd-build.trace`, recorded with strace, see docs/lab.md).
//!
//! The client caches 4 KB blocks. A read of a block it does not hold is a *demand fetch*
//! ({foreground, small}; the build waits for it). The first read of a file also *prefetches*
//! the rest of that file ({background, large}). A file the build created or truncated holds
//! only what the build wrote, so its reads never go to the server (the trace's `C` records).
//! Writes go to the cache and are *written back*
//! asynchronously ({background, large}), each write-back depending on the previous one, so the
//! server applies modifications in order. Replies carry the request's label. Between
//! operations the replay keeps the recorded gaps (the build's own computation).
//!
//! Measured: interactive time (how long the replayed build takes) and write-back time (from
//! the start until the server has acknowledged the last write).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use crate::report::UNFINISHED;
use roam_net::Label;

use crate::harness::channel::{background_sender, Conn, Readiness, Sent};
use crate::harness::trial::{Metric, Trial};

/// Block size of the file service.
pub const BLOCK: u64 = 4096;
/// Most bytes one prefetch reply carries (larger files take several).
const PREFETCH_MAX: u64 = 256 * 1024;
/// How long the trial waits for write-back after the replay, at least.
const WRITEBACK_WAIT: Duration = Duration::from_secs(60);
/// A demand read unanswered this long leaves the replay unfinished.
const DEMAND_WAIT: Duration = Duration::from_secs(120);
/// The whole replay may take this many times the recorded span it replays (at least
/// [`MIN_REPLAY_LIMIT`]) before it counts as unfinished: the quick lab's 6 s of build took
/// 77-91 s with roam and 106-424 s with MPTCP on the vehicular drive, and a replay without a
/// limit once set the length of the whole quick lab.
const REPLAY_LIMIT_FACTOR: u32 = 60;
/// See [`REPLAY_LIMIT_FACTOR`].
const MIN_REPLAY_LIMIT: Duration = Duration::from_secs(300);
const PORT: u16 = 6200;

/// The recorded build.
pub const FIXTURE: &str = include_str!("../../../fixtures/lighttpd-build.trace");

/// The recorded build, parsed once per process.
pub fn build_trace() -> Result<&'static FsTrace> {
    static TRACE: OnceLock<Result<FsTrace, String>> = OnceLock::new();
    TRACE
        .get_or_init(|| FsTrace::parse(FIXTURE).map_err(|e| format!("{e:#}")))
        .as_ref()
        .map_err(|e| anyhow!("fixtures/lighttpd-build.trace: {e}"))
}

/// What an operation of the trace does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// Read `len` bytes at `off`.
    Read,
    /// Write `len` bytes at `off`.
    Write,
    /// The build creates or truncates the file (`C` records): from now on its contents are
    /// what the build writes, held by the client, so its reads never go to the server.
    Create,
}

/// One operation of the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Op {
    /// Time since the start of the build, ms.
    pub t_ms: u64,
    /// Read, write or create.
    pub kind: OpKind,
    /// File id.
    pub file: u32,
    /// Byte offset (0 for [`OpKind::Create`]).
    pub off: u64,
    /// Length, bytes (0 for [`OpKind::Create`]).
    pub len: u64,
}

/// A parsed trace.
#[derive(Clone, Debug, Default)]
pub struct FsTrace {
    /// File sizes by id.
    pub sizes: HashMap<u32, u64>,
    /// Operations in time order.
    pub ops: Vec<Op>,
}

impl FsTrace {
    /// Parse the text format (v2, see `scripts/fs-trace-from-strace.py`; v1 is v2 without `C`
    /// records).
    pub fn parse(text: &str) -> Result<FsTrace> {
        let mut t = FsTrace::default();
        for (i, line) in text.lines().enumerate() {
            let n = i + 1;
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let f: Vec<&str> = line.split_whitespace().collect();
            let num = |k: usize| -> Result<u64> {
                f.get(k)
                    .ok_or_else(|| anyhow!("line {n}: missing field {k}"))?
                    .parse()
                    .with_context(|| format!("line {n}: field {k} is not a number"))
            };
            let op = match f[0] {
                "F" => {
                    t.sizes.insert(num(1)? as u32, num(2)?);
                    continue;
                }
                "C" => Op {
                    t_ms: num(1)?,
                    kind: OpKind::Create,
                    file: num(2)? as u32,
                    off: 0,
                    len: 0,
                },
                "O" => Op {
                    t_ms: num(1)?,
                    kind: match f.get(2) {
                        Some(&"R") => OpKind::Read,
                        Some(&"W") => OpKind::Write,
                        other => bail!("line {n}: operation {other:?} is neither R nor W"),
                    },
                    file: num(3)? as u32,
                    off: num(4)?,
                    len: num(5)?,
                },
                other => bail!("line {n}: unknown record `{other}`"),
            };
            if !t.sizes.contains_key(&op.file) {
                bail!("line {n}: file {} was not declared", op.file);
            }
            if t.ops.last().is_some_and(|p: &Op| p.t_ms > op.t_ms) {
                bail!("line {n}: time goes backwards");
            }
            t.ops.push(op);
        }
        Ok(t)
    }

    /// The operations of the first `d` of the build.
    pub fn prefix(&self, d: Duration) -> &[Op] {
        let end = d.as_millis() as u64;
        let n = self.ops.partition_point(|o| o.t_ms < end);
        &self.ops[..n]
    }

    /// Bytes of blocks the client asks the server for over the first `d` of the build (demand
    /// fetches and prefetches), if every block it asks for arrived at once: what the network
    /// must carry down, whatever the system. `honour_creates: false` ignores the `C` records
    /// (the trace's first version, which fetched the build's own output).
    pub fn fetched_bytes(&self, d: Duration, honour_creates: bool) -> u64 {
        let mut client = Client::default();
        let mut have = HashSet::new();
        let mut blocks = 0;
        for op in self.prefix(d) {
            if op.kind == OpKind::Create && !honour_creates {
                continue;
            }
            let size = self.sizes.get(&op.file).copied().unwrap_or(0);
            let n = client.plan(op, size, &mut have);
            let asked = n
                .prefetch
                .iter()
                .flat_map(|&(k, c)| k..k + c)
                .chain(n.demand);
            for k in asked {
                blocks += u64::from(have.insert((op.file, k)));
            }
        }
        blocks * BLOCK
    }

    /// Length of the recorded build.
    pub fn length(&self) -> Duration {
        Duration::from_millis(self.ops.last().map_or(0, |o| o.t_ms))
    }
}

fn blocks(off: u64, len: u64) -> std::ops::Range<u64> {
    off / BLOCK..(off + len).div_ceil(BLOCK)
}

// Requests: D file block | P file first count | W file off bytes...
// Replies:  d file block bytes | p file first count bytes | w seq
fn header(tag: u8, file: u32, a: u64, b: u64) -> Vec<u8> {
    let mut m = Vec::with_capacity(21);
    m.push(tag);
    m.extend_from_slice(&file.to_le_bytes());
    m.extend_from_slice(&a.to_le_bytes());
    m.extend_from_slice(&b.to_le_bytes());
    m
}

fn parse_header(m: &[u8]) -> Result<(u8, u32, u64, u64)> {
    if m.len() < 21 {
        bail!("short message ({} bytes)", m.len());
    }
    Ok((
        m[0],
        u32::from_le_bytes(m[1..5].try_into().unwrap()),
        u64::from_le_bytes(m[5..13].try_into().unwrap()),
        u64::from_le_bytes(m[13..21].try_into().unwrap()),
    ))
}

/// A prefetch reply the server has yet to send: `count` blocks of `file` from `first`,
/// composed when it is sent.
#[derive(Clone, Copy)]
struct Prefetch {
    label: Label,
    file: u32,
    first: u64,
    count: u64,
}

/// A message to send now, and what of the [`Prefetch`] remains after it.
type Step = ((Label, Vec<u8>), Option<Prefetch>);

impl Prefetch {
    /// The next message to send, given the blocks already sent on demand, and what remains
    /// once it is sent (`None`: nothing).
    fn next(&self, sent: &HashSet<(u32, u64)>) -> Option<Step> {
        let (file, end) = (self.file, self.first + self.count);
        let a = (self.first..end).find(|k| !sent.contains(&(file, *k)))?;
        let b = (a..end).find(|k| sent.contains(&(file, *k))).unwrap_or(end);
        let mut r = header(b'p', file, a, b - a);
        r.resize(21 + ((b - a) * BLOCK) as usize, file as u8);
        let rest = (b < end).then_some(Prefetch {
            first: b,
            count: end - b,
            ..*self
        });
        Some(((self.label, r), rest))
    }
}

/// Answer requests. Background replies go through their own threads, so a background send
/// that has to wait never holds up a demand fetch behind it.
///
/// Prefetch replies are composed only when they can go ([`Readiness`]; over roam with a
/// thunk, as the paper's BlueFS RPCs did, §4.1), leaving out blocks the client has meanwhile
/// fetched on demand, so those do not cross the network twice. The logic is the same for
/// every system; over roam a reply waits while its label's backlog is over the bound, over
/// TCP or MPTCP while the socket has not taken the previous message. Write-back acknowledgements have a thread of their own: each RPC is
/// answered on its own, so an acknowledgement waits for roam to take it, not behind prefetch
/// replies still deferred in the server (on the vehicular drive's collapsed 3G that queue
/// held the last acknowledgements for 20 s after the write-backs had arrived).
fn serve(conn: Arc<Conn>) -> Result<()> {
    let sent_on_demand: Arc<Mutex<HashSet<(u32, u64)>>> = Arc::default();
    let (ack_tx, acks) = background_sender(conn.clone());
    let (bg_tx, bg_rx) = mpsc::channel::<Prefetch>();
    let (bconn, bsent) = (conn.clone(), sent_on_demand.clone());
    let bg = std::thread::spawn(move || -> Result<()> {
        let ready = Readiness::default();
        for p in bg_rx {
            let mut p = Some(p);
            while let Some(cur) = p.take() {
                let Some(((label, m), rest)) = cur.next(&bsent.lock().unwrap()) else {
                    break;
                };
                // Deferred: composed again (without what went on demand meanwhile) and retried.
                p = if ready.send(&bconn, label, m)? {
                    rest
                } else {
                    Some(cur)
                };
            }
        }
        Ok(())
    });
    while let Some(m) = conn.recv()? {
        let (tag, file, a, b) = parse_header(&m.data)?;
        match tag {
            b'D' => {
                sent_on_demand.lock().unwrap().insert((file, a));
                let mut r = header(b'd', file, a, 1);
                r.resize(21 + BLOCK as usize, file as u8);
                conn.send(m.label, &[], r, None)?;
            }
            b'P' => {
                let count = b.min(PREFETCH_MAX / BLOCK);
                let p = Prefetch {
                    label: m.label,
                    file,
                    first: a,
                    count,
                };
                if bg_tx.send(p).is_err() {
                    break;
                }
            }
            b'W' => {
                if ack_tx.send((m.label, header(b'w', file, b, 0))).is_err() {
                    break;
                }
            }
            _ => bail!("unknown request {tag}"),
        }
    }
    drop(bg_tx);
    drop(ack_tx);
    let acked = acks
        .join()
        .map_err(|_| anyhow!("write-back acknowledgements panicked"))?;
    bg.join()
        .map_err(|_| anyhow!("background replies panicked"))?
        .and(acked)
}

/// The client's decisions, without I/O: what each operation of the build asks of the server
/// and which blocks it must then wait for. Blocks arrive (into the cache's `have`) elsewhere.
#[derive(Default)]
struct Client {
    /// Files the build created or truncated so far (their reads are local).
    created: HashSet<u32>,
    /// Per file read so far, the blocks its prefetch asked for.
    prefetched: HashMap<u32, std::ops::Range<u64>>,
    /// Blocks fetched on demand so far (each at most once).
    demanded: HashSet<(u32, u64)>,
    /// Demand fetches of blocks a prefetch had already asked for (the prefetch was late).
    overtaking: u64,
}

/// What one operation needs from the network.
#[derive(Debug, Default, PartialEq, Eq)]
struct Needs {
    /// Blocks to fetch on demand now.
    demand: Vec<u64>,
    /// Prefetch requests (first block, blocks), the rest of a file read the first time.
    prefetch: Vec<(u64, u64)>,
    /// Blocks the build waits for before its next operation.
    wait: Vec<u64>,
    /// The operation is a write: write it back.
    write_back: bool,
}

impl Client {
    /// Plan `op`; `have` is the cache's blocks (a write adds its blocks).
    fn plan(&mut self, op: &Op, size: u64, have: &mut HashSet<(u32, u64)>) -> Needs {
        match op.kind {
            OpKind::Create => {
                self.created.insert(op.file);
                return Needs::default();
            }
            OpKind::Write => {
                have.extend(blocks(op.off, op.len).map(|k| (op.file, k)));
                return Needs {
                    write_back: true,
                    ..Needs::default()
                };
            }
            // The build's own data (see `OpKind::Create`): in the client's cache.
            OpKind::Read if self.created.contains(&op.file) => return Needs::default(),
            OpKind::Read => {}
        }
        let want: Vec<u64> = blocks(op.off, op.len).collect();
        // A block the build needs now is fetched on demand even if a prefetch of it is under
        // way (it may be queued behind much more).
        let demand: Vec<u64> = want
            .iter()
            .copied()
            .filter(|k| !have.contains(&(op.file, *k)))
            .filter(|k| self.demanded.insert((op.file, *k)))
            .collect();
        self.overtaking += demand
            .iter()
            .filter(|k| self.prefetched.get(&op.file).is_some_and(|r| r.contains(k)))
            .count() as u64;
        let mut prefetch = Vec::new();
        if let std::collections::hash_map::Entry::Vacant(e) = self.prefetched.entry(op.file) {
            // First read of the file: prefetch the rest of it in the background.
            let (last, total) = (blocks(op.off, op.len).end, size.div_ceil(BLOCK));
            e.insert(last..total);
            let mut k = last;
            while k < total {
                let n = (total - k).min(PREFETCH_MAX / BLOCK);
                prefetch.push((k, n));
                k += n;
            }
        }
        Needs {
            demand,
            prefetch,
            wait: want,
            write_back: false,
        }
    }
}

#[derive(Default)]
struct Cache {
    have: HashSet<(u32, u64)>,
    acked: u64,
    /// Demand fetches in flight: when each was sent.
    asked: HashMap<(u32, u64), Instant>,
    /// Round-trip times of answered demand fetches, ms.
    demand_ms: Vec<f64>,
}

/// A read of the build that had to wait for the network.
struct Wait {
    /// When the build made it (recorded time, ms).
    t_ms: u64,
    /// When the replay made it, on the emulator's clock (the link logs' `t_s`).
    at: Duration,
    file: u32,
    /// Blocks it reads, and how many of them it fetched on demand.
    blocks: usize,
    demanded: usize,
    /// How long it waited.
    waited: Duration,
}

/// The header and rows of `fs-waits.csv`, which a trial writes into its log directory
/// (`--emu-logs`): every read that waited, to tell where a replay's time went
/// (`scripts/fs-waits.py` sums them by burst size).
fn waits_csv(waits: &[Wait]) -> String {
    let mut s = String::from("t_build_ms,file,blocks,demanded,waited_ms,at_s\n");
    for w in waits {
        s.push_str(&format!(
            "{},{},{},{},{:.1},{:.3}\n",
            w.t_ms,
            w.file,
            w.blocks,
            w.demanded,
            w.waited.as_secs_f64() * 1e3,
            w.at.as_secs_f64()
        ));
    }
    s
}

/// What one replay measured.
struct Replay {
    /// Seconds the replayed build took ([`UNFINISHED`] if a demand read went unanswered).
    interactive: f64,
    /// Seconds until the last write-back was acknowledged (0 without writes).
    writeback: f64,
    writes: u64,
    /// Round-trip times of answered demand fetches, ms.
    demand_ms: Vec<f64>,
    /// Demand fetches of blocks a prefetch had already asked for (the prefetch was late).
    overtaking: u64,
    /// Reads that waited.
    waits: Vec<Wait>,
    /// Why the replay or its write-back did not finish (for the trial's notes).
    unfinished: Option<String>,
}

impl Replay {
    fn unfinished(why: String) -> Replay {
        Replay {
            interactive: UNFINISHED,
            writeback: UNFINISHED,
            writes: 0,
            demand_ms: Vec::new(),
            overtaking: 0,
            waits: Vec::new(),
            unfinished: Some(why),
        }
    }
}

/// How long a replay of `span` of the recorded build may take (see `REPLAY_LIMIT_FACTOR`).
pub fn replay_limit(span: Duration) -> Duration {
    (span * REPLAY_LIMIT_FACTOR).max(MIN_REPLAY_LIMIT)
}

/// The interactive event whose latencies a trial records ([`Trial::event_latencies`]): each
/// demand fetch's round trip, from the request to its block's arrival (what a read of a
/// missing block waits for at least).
pub const EVENT: &str = "demand_fetch_ms";

/// Run one trial.
pub fn run(t: &Trial) -> Result<Vec<Metric>> {
    let trace = build_trace()?;
    let ops = trace.prefix(t.duration);
    // The replay sleeps the build's recorded gaps: no network makes it shorter than this.
    let span_s = ops.last().map_or(0.0, |o| o.t_ms as f64 / 1e3);
    let system = t.system;
    let server = t.start_server("file", PORT, || Ok(()), |(), c| serve(c))?;
    let locals = t.client_links();
    let progress = t.progress.clone();
    let limit = replay_limit(t.duration);
    let emu_epoch = t.emu.clock().epoch();
    type Out = (Replay, Arc<Conn>);
    let client = move || -> Result<Out> {
        let conn = Arc::new(Conn::connect(system, &locals, PORT)?);
        let cache = Arc::new((Mutex::new(Cache::default()), Condvar::new()));
        let last_ack_ns = Arc::new(AtomicU64::new(0));
        let start = Instant::now();
        // Replies: fill the cache, count write-back acknowledgements.
        let (rc, rcache, rlast) = (conn.clone(), cache.clone(), last_ack_ns.clone());
        let receiver = std::thread::spawn(move || -> Result<()> {
            while let Some(m) = rc.recv()? {
                let (tag, file, a, b) = parse_header(&m.data)?;
                let (lock, cv) = &*rcache;
                let mut c = lock.lock().unwrap();
                if tag == b'd' {
                    if let Some(t0) = c.asked.remove(&(file, a)) {
                        c.demand_ms.push(t0.elapsed().as_secs_f64() * 1e3);
                    }
                }
                match tag {
                    b'd' | b'p' => {
                        for k in a..a + b {
                            c.have.insert((file, k));
                        }
                    }
                    b'w' => {
                        c.acked += 1;
                        rlast.store(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
                    }
                    _ => bail!("unknown reply {tag}"),
                }
                cv.notify_all();
            }
            Ok(())
        });
        // Write-back: its own thread, so a full connection does not stall the build.
        let (wb_tx, wb_rx) = mpsc::channel::<Op>();
        let wconn = conn.clone();
        let writer = std::thread::spawn(move || -> Result<u64> {
            let mut prev = None;
            let mut n = 0;
            for op in wb_rx {
                let mut m = header(b'W', op.file, op.off, n);
                m.resize(21 + op.len as usize, 0x77);
                let deps: Vec<u64> = prev.into_iter().collect();
                if let Sent::Id(id) = wconn.send(Label::BackgroundLarge, &deps, m, None)? {
                    prev = Some(id);
                }
                n += 1;
            }
            Ok(n)
        });
        // Prefetch requests: their own thread too (a background send may wait for room).
        let (pf_tx, pf_rx) = mpsc::channel::<Vec<u8>>();
        let pconn = conn.clone();
        let prefetcher = std::thread::spawn(move || -> Result<()> {
            for m in pf_rx {
                pconn.send(Label::BackgroundLarge, &[], m, None)?;
            }
            Ok(())
        });
        let mut client = Client::default();
        let mut waits = Vec::new();
        let mut prev_t = 0u64;
        for op in ops {
            // The build's own computation between operations.
            std::thread::sleep(Duration::from_millis(op.t_ms - prev_t));
            prev_t = op.t_ms;
            progress(op.t_ms / 1000);
            let size = trace.sizes.get(&op.file).copied().unwrap_or(0);
            let needs = {
                let mut c = cache.0.lock().unwrap();
                let needs = client.plan(op, size, &mut c.have);
                let now = Instant::now();
                for &k in &needs.demand {
                    c.asked.insert((op.file, k), now);
                }
                needs
            };
            if needs.write_back {
                wb_tx
                    .send(*op)
                    .map_err(|_| anyhow!("write-back thread ended"))?;
                continue;
            }
            for &k in &needs.demand {
                conn.send(
                    Label::ForegroundSmall,
                    &[],
                    header(b'D', op.file, k, 1),
                    None,
                )?;
            }
            for &(k, n) in &needs.prefetch {
                pf_tx
                    .send(header(b'P', op.file, k, n))
                    .map_err(|_| anyhow!("prefetch thread ended"))?;
            }
            let want = needs.wait;
            let (lock, cv) = &*cache;
            let mut c = lock.lock().unwrap();
            let asked = Instant::now();
            while !want.iter().all(|k| c.have.contains(&(op.file, *k))) {
                let left = limit.saturating_sub(start.elapsed());
                let wait = DEMAND_WAIT.saturating_sub(asked.elapsed()).min(left);
                c = cv.wait_timeout(c, wait).unwrap().0;
                let unanswered = asked.elapsed() >= DEMAND_WAIT;
                if unanswered || start.elapsed() >= limit {
                    // A result ("unfinished"), not a failure.
                    let why = if unanswered {
                        format!(
                            "a demand read of {} block(s) of file {} got no reply within \
                             {DEMAND_WAIT:?} ({:.1} s into the replay)",
                            want.len(),
                            op.file,
                            asked.duration_since(start).as_secs_f64()
                        )
                    } else {
                        format!("the replay ran past its limit of {limit:?}")
                    };
                    // The demand fetches answered so far, and those never answered.
                    let mut demand_ms = std::mem::take(&mut c.demand_ms);
                    demand_ms.extend(std::iter::repeat_n(UNFINISHED, c.asked.len()));
                    drop(c);
                    drop((wb_tx, pf_tx));
                    let replay = Replay {
                        demand_ms,
                        ..Replay::unfinished(why)
                    };
                    return Ok((replay, conn));
                }
            }
            let waited = asked.elapsed();
            if waited >= Duration::from_millis(1) {
                waits.push(Wait {
                    t_ms: op.t_ms,
                    at: asked.saturating_duration_since(emu_epoch),
                    file: op.file,
                    blocks: want.len(),
                    demanded: needs.demand.len(),
                    waited,
                });
            }
        }
        let interactive = start.elapsed().as_secs_f64();
        drop((wb_tx, pf_tx));
        drop(prefetcher);
        let writes = writer
            .join()
            .map_err(|_| anyhow!("write-back thread panicked"))??;
        let (lock, cv) = &*cache;
        let mut c = lock.lock().unwrap();
        let wb_wait = WRITEBACK_WAIT.max(Duration::from_secs_f64(interactive));
        let deadline = Instant::now() + wb_wait;
        while c.acked < writes && Instant::now() < deadline {
            c = cv.wait_timeout(c, Duration::from_millis(500)).unwrap().0;
        }
        let complete = c.acked >= writes;
        let unfinished = (!complete).then(|| {
            format!(
                "write-back: {} of {writes} writes acknowledged within {:.1} s after the replay",
                c.acked,
                wb_wait.as_secs_f64()
            )
        });
        let demand_ms = std::mem::take(&mut c.demand_ms);
        drop(c);
        let wb = match (writes, complete) {
            (0, _) => 0.0,
            (_, true) => last_ack_ns.load(Ordering::Relaxed) as f64 / 1e9,
            (_, false) => UNFINISHED,
        };
        drop(receiver);
        let replay = Replay {
            interactive,
            writeback: wb,
            writes,
            demand_ms,
            overtaking: client.overtaking,
            waits,
            unfinished,
        };
        Ok((replay, conn))
    };
    let out = t.run_client("file-system", client);
    let (recovery, _) = server.finish(out.as_ref().ok().map(|(_, c)| &**c));
    let (r, _) = out?;
    t.keep_log("fs-waits.csv", || waits_csv(&r.waits))?;
    t.event_latencies(EVENT, r.demand_ms.iter().copied());
    if let Some(why) = &r.unfinished {
        t.note(why.clone());
    }
    // An unfinished replay has no counts or demand statistics to report.
    let done = |x: f64| {
        if r.interactive.is_finite() {
            x
        } else {
            f64::NAN
        }
    };
    Ok(vec![
        Metric::new("interactive_s", r.interactive, "s"),
        Metric::new("span_s", span_s, "s"),
        Metric::new("writeback_s", r.writeback, "s"),
        Metric::new("writebacks", done(r.writes as f64), "msgs"),
        Metric::new("demand_fetches", done(r.demand_ms.len() as f64), "msgs"),
        Metric::new("demand_overtaking", done(r.overtaking as f64), "msgs"),
        Metric::new("demand_ms", done(crate::report::median(&r.demand_ms)), "ms"),
        Metric::new(
            "demand_mean_ms",
            done(crate::report::mean(&r.demand_ms)),
            "ms",
        ),
    ]
    .into_iter()
    .chain(recovery)
    .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replay_has_a_limit() {
        // The quick lab's 6 s of build: six minutes (MPTCP once took 424 s).
        assert_eq!(
            replay_limit(Duration::from_secs(6)),
            Duration::from_secs(360)
        );
        assert_eq!(
            replay_limit(Duration::from_secs(1)),
            Duration::from_secs(300)
        );
    }

    #[test]
    fn fixture_parses_and_errors_name_the_line() {
        let t = FsTrace::parse(FIXTURE).unwrap();
        assert!(t.ops.len() > 100 && t.ops.iter().any(|o| o.kind == OpKind::Write));
        assert!(t.ops.iter().any(|o| o.kind == OpKind::Create));
        assert!(t.length() > Duration::from_secs(10));
        let e = FsTrace::parse("F 1 10 a\nO 5 X 1 0 4\n").unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
        let e = FsTrace::parse("O 5 R 9 0 4\n").unwrap_err();
        assert!(e.to_string().contains("not declared"), "{e}");
        let e = FsTrace::parse("F 1 10 a\nO 5 R 1 0 4\nO 4 R 1 0 4\n").unwrap_err();
        assert!(e.to_string().contains("backwards"), "{e}");
        let t = FsTrace::parse("F 1 10 a\nO 5 R 1 0 4\nO 900 R 1 0 4\n").unwrap();
        assert_eq!(t.prefix(Duration::from_millis(100)).len(), 1);
        let t = FsTrace::parse("F 1 10 a\nC 3 1\nO 5 W 1 0 4\n").unwrap();
        assert_eq!(t.ops[0].kind, OpKind::Create);
        assert_eq!((t.ops[0].t_ms, t.ops[0].file), (3, 1));
        let e = FsTrace::parse("F 1 10 a\nC 3 2\n").unwrap_err();
        assert!(
            e.to_string().contains("line 2: file 2 was not declared"),
            "{e}"
        );
    }

    /// What the recorded build makes the client fetch (docs/lab.md quotes these figures:
    /// `cargo test -p roam-lab --lib the_build_fetches -- --nocapture`).
    #[test]
    fn the_build_fetches_its_sources_not_its_own_output() {
        let t = build_trace().unwrap();
        let mb = |d, creates| t.fetched_bytes(d, creates) as f64 / 1e6;
        let (all, quick) = (t.length() + Duration::from_secs(1), Duration::from_secs(6));
        let (whole, first6, without) = (mb(all, true), mb(quick, true), mb(all, false));
        println!(
            "whole build {whole:.2} MB, first 6 s {first6:.2} MB; ignoring C records {without:.1} MB"
        );
        assert!((6.5..7.5).contains(&whole), "{whole} MB");
        assert!((2.0..3.0).contains(&first6), "{first6} MB");
        assert!(without > 40.0, "{without} MB");
    }

    #[test]
    fn a_prefetch_reply_leaves_out_blocks_sent_on_demand() {
        let sent: HashSet<(u32, u64)> = [(7, 2), (7, 3), (7, 6), (8, 0)].into_iter().collect();
        let prefetch = |first, count| Prefetch {
            label: Label::BackgroundLarge,
            file: 7,
            first,
            count,
        };
        let mut p = Some(prefetch(0, 8));
        let mut runs = Vec::new();
        while let Some(cur) = p.take() {
            let Some(((_, m), rest)) = cur.next(&sent) else {
                break;
            };
            let (tag, file, a, n) = parse_header(&m).unwrap();
            assert_eq!((tag, file), (b'p', 7));
            assert_eq!(m.len() as u64, 21 + n * BLOCK);
            runs.push((a, n));
            p = rest;
        }
        assert_eq!(runs, vec![(0, 2), (4, 2), (7, 1)]);
        // Everything already sent: nothing to send.
        assert!(prefetch(2, 2).next(&sent).is_none());
    }

    /// The client fetches a source file's missing blocks on demand and prefetches the rest on
    /// its first read, but never fetches a file the build created: those blocks are its own.
    #[test]
    fn the_client_fetches_source_files_but_not_the_builds_own() {
        let op = |kind, file, off, len| Op {
            t_ms: 0,
            kind,
            file,
            off,
            len,
        };
        let mut c = Client::default();
        let mut have = HashSet::new();
        // File 1 (20 blocks) from the source tree: blocks 0-1 on demand, the rest prefetched.
        let n = c.plan(&op(OpKind::Read, 1, 0, 8192), 20 * BLOCK, &mut have);
        assert_eq!(n.demand, vec![0, 1]);
        assert_eq!(n.prefetch, vec![(2, 18)]);
        assert_eq!(n.wait, vec![0, 1]);
        // Block 5 is needed before its prefetch arrived: fetched on demand, "overtaking".
        let n = c.plan(&op(OpKind::Read, 1, 5 * BLOCK, 10), 20 * BLOCK, &mut have);
        assert_eq!((n.demand, n.prefetch, c.overtaking), (vec![5], vec![], 1));
        // File 2 is created by the build, written in part, then read past what the trace
        // shows written (the linker seeks; `lseek` is not traced): nothing to fetch or await.
        assert_eq!(
            c.plan(&op(OpKind::Create, 2, 0, 0), 0, &mut have),
            Needs::default()
        );
        let n = c.plan(&op(OpKind::Write, 2, 0, 100), 64 * BLOCK, &mut have);
        assert!(n.write_back && have.contains(&(2, 0)));
        let n = c.plan(&op(OpKind::Read, 2, 100, 40_000), 64 * BLOCK, &mut have);
        assert_eq!(n, Needs::default());
        // A source file written before its first read: the written block is not fetched.
        c.plan(&op(OpKind::Write, 3, 0, 10), 3 * BLOCK, &mut have);
        let n = c.plan(&op(OpKind::Read, 3, 0, 2 * BLOCK), 3 * BLOCK, &mut have);
        assert_eq!((n.demand, n.prefetch), (vec![1], vec![(2, 1)]));
    }

    #[test]
    fn blocks_cover_the_range() {
        assert_eq!(blocks(0, 1), 0..1);
        assert_eq!(blocks(4095, 2), 0..2);
        assert_eq!(blocks(8192, 4096), 2..3);
    }
}
