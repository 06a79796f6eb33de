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
//!
//! The recorded build is in `trace`, the client's decisions (what each operation asks of the
//! server) in `client`, the replay that carries them out over a connection in `replay`,
//! and the file service in `server`; this module runs a trial and reports it.

mod client;
mod replay;
mod server;
mod trace;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};

use crate::harness::channel::Conn;
use crate::harness::trial::{Metric, Trial};
use replay::{waits_csv, Replay};

pub use trace::{build_trace, FsTrace, Op, OpKind, FIXTURE};

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

/// How long a replay of `span` of the recorded build may take (see `REPLAY_LIMIT_FACTOR`).
pub fn replay_limit(span: Duration) -> Duration {
    (span * REPLAY_LIMIT_FACTOR).max(MIN_REPLAY_LIMIT)
}

/// The interactive event whose latencies a trial records ([`Trial::event_latencies`]): each
/// demand fetch's round trip, from the request to its block's arrival (what a read of a
/// missing block waits for at least).
pub const EVENT: &str = "demand_fetch_ms";

/// Run one trial: start the file service, replay the first `t.duration` of the build against
/// it (`replay::replay`), and report what the replay measured (`record`, `metrics`).
pub fn run(t: &Trial) -> Result<Vec<Metric>> {
    let trace = build_trace()?;
    let ops = trace.prefix(t.duration);
    // The replay sleeps the build's recorded gaps: no network makes it shorter than this.
    let span_s = ops.last().map_or(0.0, |o| o.t_ms as f64 / 1e3);
    let system = t.system.clone();
    let server = t.start_server("file", PORT, || Ok(()), |(), c| server::serve(c))?;
    let locals = t.client_links();
    let progress = t.progress.clone();
    let limit = replay_limit(t.duration);
    let emu_epoch = t.emu.clock().epoch();
    type Out = (Replay, Arc<Conn>);
    let client = move || -> Result<Out> {
        let conn = Arc::new(Conn::connect(system, &locals, PORT)?);
        let replay = replay::replay(&conn, &trace.sizes, ops, &*progress, limit, emu_epoch)?;
        Ok((replay, conn))
    };
    let out = t.run_client("file-system", client);
    let (recovery, _) = server.finish(out.as_ref().ok().map(|(_, c)| &**c));
    let (r, _) = out?;
    record(t, &r)?;
    Ok(metrics(&r, span_s, recovery))
}

/// Keep what a replay leaves beside its metrics: the reads that waited (`fs-waits.csv` in the
/// trial's log directory, to tell where the time went), each demand fetch's round trip (the
/// interactive events' distribution) and why the replay did not finish (the trial's notes).
fn record(t: &Trial, r: &Replay) -> Result<()> {
    t.keep_log("fs-waits.csv", || waits_csv(&r.waits))?;
    t.event_latencies(EVENT, r.demand_ms.iter().copied());
    if let Some(why) = &r.unfinished {
        t.note(why.clone());
    }
    Ok(())
}

/// The trial's metrics: the replay's times and counts (`span_s`: the recorded span it
/// replayed), then the connection's `recovery` costs.
fn metrics(r: &Replay, span_s: f64, recovery: Vec<Metric>) -> Vec<Metric> {
    // An unfinished replay has no counts or demand statistics to report.
    let done = |x: f64| {
        if r.interactive.is_finite() {
            x
        } else {
            f64::NAN
        }
    };
    vec![
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
    .collect()
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
    fn blocks_cover_the_range() {
        assert_eq!(blocks(0, 1), 0..1);
        assert_eq!(blocks(4095, 2), 0..2);
        assert_eq!(blocks(8192, 4096), 2..3);
    }
}
