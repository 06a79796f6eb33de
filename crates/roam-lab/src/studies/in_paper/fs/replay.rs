//! The client's side of a trial: the recorded build replayed over one connection, with a
//! cache that the replies fill and threads beside the build that receive replies, write back
//! and send prefetch requests, so that no background send ever stalls the build.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use roam_net::Label;

use super::client::{Client, Needs};
use super::{header, parse_header, Op, DEMAND_WAIT, WRITEBACK_WAIT};
use crate::harness::channel::{Conn, Sent};
use crate::report::UNFINISHED;

#[derive(Default)]
struct Cache {
    have: HashSet<(u32, u64)>,
    acked: u64,
    /// Demand fetches in flight: when each was sent.
    asked: HashMap<(u32, u64), Instant>,
    /// Round-trip times of answered demand fetches, ms.
    demand_ms: Vec<f64>,
}

/// The client's cache, shared with the thread that receives replies, which signals the
/// condition variable whenever a reply has changed it.
type Shared = Arc<(Mutex<Cache>, Condvar)>;

/// A read of the build that had to wait for the network.
pub(super) struct Wait {
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
pub(super) fn waits_csv(waits: &[Wait]) -> String {
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
pub(super) struct Replay {
    /// Seconds the replayed build took ([`UNFINISHED`] if a demand read went unanswered).
    pub(super) interactive: f64,
    /// Seconds until the last write-back was acknowledged (0 without writes).
    pub(super) writeback: f64,
    pub(super) writes: u64,
    /// Round-trip times of answered demand fetches, ms.
    pub(super) demand_ms: Vec<f64>,
    /// Demand fetches of blocks a prefetch had already asked for (the prefetch was late).
    pub(super) overtaking: u64,
    /// Reads that waited.
    pub(super) waits: Vec<Wait>,
    /// Why the replay or its write-back did not finish (for the trial's notes).
    pub(super) unfinished: Option<String>,
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

/// Replay `ops` (the build's operations; `sizes`, its files' sizes) over `conn`, keeping the
/// recorded gaps between operations, then wait for the write-back. `progress` hears the
/// recorded second each operation is at; past `limit` the replay stops unfinished, and each
/// read that waited is recorded with its start on the emulator's clock (from `emu_epoch`).
///
/// The steps: start the threads beside the build ([`spawn_receiver`], [`spawn_writer`],
/// [`spawn_prefetcher`]); per operation, decide what it needs ([`plan`]), hand a write to the
/// writer or ask for the blocks a read needs ([`ask`]) and wait for them ([`await_blocks`]);
/// then wait for the last write-back's acknowledgement ([`await_writeback`]).
pub(super) fn replay(
    conn: &Arc<Conn>,
    sizes: &HashMap<u32, u64>,
    ops: &[Op],
    progress: &(dyn Fn(u64) + Send + Sync),
    limit: Duration,
    emu_epoch: Instant,
) -> Result<Replay> {
    let cache: Shared = Arc::new((Mutex::new(Cache::default()), Condvar::new()));
    let last_ack_ns = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let receiver = spawn_receiver(conn.clone(), cache.clone(), last_ack_ns.clone(), start);
    let (wb_tx, writer) = spawn_writer(conn.clone());
    let (pf_tx, prefetcher) = spawn_prefetcher(conn.clone());
    let mut client = Client::default();
    let mut waits = Vec::new();
    let mut prev_t = 0u64;
    for op in ops {
        // The build's own computation between operations.
        std::thread::sleep(Duration::from_millis(op.t_ms - prev_t));
        prev_t = op.t_ms;
        progress(op.t_ms / 1000);
        let size = sizes.get(&op.file).copied().unwrap_or(0);
        let needs = plan(&cache, &mut client, op, size);
        if needs.write_back {
            wb_tx
                .send(*op)
                .map_err(|_| anyhow!("write-back thread ended"))?;
            continue;
        }
        ask(conn, &pf_tx, op, &needs)?;
        match await_blocks(&cache, op, &needs.wait, start, limit) {
            Awaited::Arrived { asked, waited } => {
                if waited >= Duration::from_millis(1) {
                    waits.push(Wait {
                        t_ms: op.t_ms,
                        at: asked.saturating_duration_since(emu_epoch),
                        file: op.file,
                        blocks: needs.wait.len(),
                        demanded: needs.demand.len(),
                        waited,
                    });
                }
            }
            Awaited::Unfinished(replay) => {
                drop((wb_tx, pf_tx));
                return Ok(replay);
            }
        }
    }
    let interactive = start.elapsed().as_secs_f64();
    drop((wb_tx, pf_tx));
    drop(prefetcher);
    let writes = writer
        .join()
        .map_err(|_| anyhow!("write-back thread panicked"))??;
    let wb = await_writeback(&cache, &last_ack_ns, writes, interactive);
    drop(receiver);
    Ok(Replay {
        interactive,
        writeback: wb.seconds,
        writes,
        demand_ms: wb.demand_ms,
        overtaking: client.overtaking,
        waits,
        unfinished: wb.unfinished,
    })
}

/// Start the thread that takes the replies: blocks fill the cache (a demand fetch's reply
/// also records its round trip), write-back acknowledgements are counted and the last one's
/// time since `start` kept in `last_ack_ns`. It wakes the build after every reply.
fn spawn_receiver(
    conn: Arc<Conn>,
    cache: Shared,
    last_ack_ns: Arc<AtomicU64>,
    start: Instant,
) -> JoinHandle<Result<()>> {
    std::thread::spawn(move || -> Result<()> {
        while let Some(m) = conn.recv()? {
            let (tag, file, a, b) = parse_header(&m.data)?;
            let (lock, cv) = &*cache;
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
                    last_ack_ns.store(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
                }
                _ => bail!("unknown reply {tag}"),
            }
            cv.notify_all();
        }
        Ok(())
    })
}

/// Start the write-back thread, so that a full connection does not stall the build: it sends
/// each write it is handed ({background, large}) depending on the previous one, so that the
/// server applies them in order, and ends with how many it sent once the sender is dropped.
fn spawn_writer(conn: Arc<Conn>) -> (mpsc::Sender<Op>, JoinHandle<Result<u64>>) {
    let (wb_tx, wb_rx) = mpsc::channel::<Op>();
    let writer = std::thread::spawn(move || -> Result<u64> {
        let mut prev = None;
        let mut n = 0;
        for op in wb_rx {
            let mut m = header(b'W', op.file, op.off, n);
            m.resize(21 + op.len as usize, 0x77);
            let deps: Vec<u64> = prev.into_iter().collect();
            if let Sent::Id(id) = conn.send(Label::BackgroundLarge, &deps, m, None)? {
                prev = Some(id);
            }
            n += 1;
        }
        Ok(n)
    });
    (wb_tx, writer)
}

/// Start the thread that sends prefetch requests: their own thread too, since a background
/// send may wait for room.
fn spawn_prefetcher(conn: Arc<Conn>) -> (mpsc::Sender<Vec<u8>>, JoinHandle<Result<()>>) {
    let (pf_tx, pf_rx) = mpsc::channel::<Vec<u8>>();
    let prefetcher = std::thread::spawn(move || -> Result<()> {
        for m in pf_rx {
            conn.send(Label::BackgroundLarge, &[], m, None)?;
        }
        Ok(())
    });
    (pf_tx, prefetcher)
}

/// What `op` (of a file of `size` bytes) needs, decided by `client` against the cache's
/// blocks; each demand fetch it asks for is noted as sent now, under the same lock, so that
/// the receiver can time its round trip.
fn plan(cache: &Shared, client: &mut Client, op: &Op, size: u64) -> Needs {
    let mut c = cache.0.lock().unwrap();
    let needs = client.plan(op, size, &mut c.have);
    let now = Instant::now();
    for &k in &needs.demand {
        c.asked.insert((op.file, k), now);
    }
    needs
}

/// Ask for what a read needs: its missing blocks on demand ({foreground, small}, sent here:
/// the build waits for them) and the rest of a file read the first time through the
/// prefetch thread (`prefetches`).
fn ask(conn: &Conn, prefetches: &mpsc::Sender<Vec<u8>>, op: &Op, needs: &Needs) -> Result<()> {
    for &k in &needs.demand {
        conn.send(
            Label::ForegroundSmall,
            &[],
            header(b'D', op.file, k, 1),
            None,
        )?;
    }
    for &(k, n) in &needs.prefetch {
        prefetches
            .send(header(b'P', op.file, k, n))
            .map_err(|_| anyhow!("prefetch thread ended"))?;
    }
    Ok(())
}

/// How a read's wait for its blocks ended.
enum Awaited {
    /// They all arrived: the wait began at `asked` and took `waited`.
    Arrived { asked: Instant, waited: Duration },
    /// A demand fetch went unanswered for [`DEMAND_WAIT`] or the replay ran past its limit:
    /// the replay ends here with what it measured so far.
    Unfinished(Replay),
}

/// Wait until the cache holds every block of `want` (of `op`'s file). A demand fetch
/// unanswered for [`DEMAND_WAIT`], or the replay (begun at `start`) past `limit`, ends the
/// replay: a result ("unfinished"), not a failure, whose demand fetches are those answered so
/// far and, as [`UNFINISHED`], those never answered.
fn await_blocks(cache: &Shared, op: &Op, want: &[u64], start: Instant, limit: Duration) -> Awaited {
    let (lock, cv) = &**cache;
    let mut c = lock.lock().unwrap();
    let asked = Instant::now();
    while !want.iter().all(|k| c.have.contains(&(op.file, *k))) {
        let left = limit.saturating_sub(start.elapsed());
        let wait = DEMAND_WAIT.saturating_sub(asked.elapsed()).min(left);
        c = cv.wait_timeout(c, wait).unwrap().0;
        let unanswered = asked.elapsed() >= DEMAND_WAIT;
        if unanswered || start.elapsed() >= limit {
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
            let mut demand_ms = std::mem::take(&mut c.demand_ms);
            demand_ms.extend(std::iter::repeat_n(UNFINISHED, c.asked.len()));
            return Awaited::Unfinished(Replay {
                demand_ms,
                ..Replay::unfinished(why)
            });
        }
    }
    Awaited::Arrived {
        asked,
        waited: asked.elapsed(),
    }
}

/// How the write-back ended.
struct WriteBack {
    /// Seconds from the start until the last acknowledgement (0 without writes,
    /// [`UNFINISHED`] if some never came).
    seconds: f64,
    /// How far it got, if it did not finish.
    unfinished: Option<String>,
    /// Round-trip times of the demand fetches answered by its end, ms.
    demand_ms: Vec<f64>,
}

/// Wait until the server has acknowledged all `writes` write-backs, for [`WRITEBACK_WAIT`]
/// or as long as the replay took (`interactive` seconds), whichever is longer. The demand
/// fetches' round trips are taken at the end, so that late replies still count.
fn await_writeback(
    cache: &Shared,
    last_ack_ns: &AtomicU64,
    writes: u64,
    interactive: f64,
) -> WriteBack {
    let (lock, cv) = &**cache;
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
    let seconds = match (writes, complete) {
        (0, _) => 0.0,
        (_, true) => last_ack_ns.load(Ordering::Relaxed) as f64 / 1e9,
        (_, false) => UNFINISHED,
    };
    WriteBack {
        seconds,
        unfinished,
        demand_ms,
    }
}
