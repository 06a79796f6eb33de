//! What a device remembers of its paths, for the multi-sockets it opens later.
//!
//! The paper's connection scout measures each network "when a network appears" and hands its
//! estimates to every library that asks (spec: Architecture). A multi-socket of roam-net keeps
//! its own estimates, so one opened over a path another multi-socket has just measured would
//! probe it again: a 64 B and a 12 KiB probe each way (`PROBE_SIZES`) before its first
//! estimate. For a long-lived multi-socket that is noise; for `roam net proxy`, which opens a
//! multi-socket per carried connection, it was more than the connections carried: a page of
//! 9.5 kB cost 13 kB of probes each way on WiFi, on every fetch (docs/results/notebook.md,
//! "The proxy's probes").
//!
//! A [`PathMemory`] is that scout's memory, shared by the multi-sockets given the same one
//! ([`Options::paths`](super::Options::paths); the proxy and the relay share one across all
//! theirs). The ticker writes each connection's network estimates into it, keyed by the path
//! (local address, peer address), with the time the bandwidth last changed; a connection opened or
//! accepted over a path it holds starts from them (`Session::recall_path`), and its first probe
//! is then due as it would have been had the multi-socket been open all along: not while the
//! estimates are younger than the idle-probe interval, never on an idle cellular network.
//!
//! Bounded: at most [`MAX_PATHS`] paths (a relay faces many clients), the least recently
//! written forgotten first, and entries older than [`FORGET_AFTER`] are not recalled.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use roam_core::BitRate;

use crate::proto::session::{ConnId, Session};

/// Most paths remembered; past it the least recently written is forgotten.
pub const MAX_PATHS: usize = 1024;

/// Estimates older than this are not recalled: a path not used for this long may be another
/// network behind the same addresses (a different hotspot, a moved phone).
pub const FORGET_AFTER: Duration = Duration::from_secs(600);

/// What was last known of one path.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Recalled {
    /// Round-trip time estimate.
    pub rtt: Option<Duration>,
    /// Bandwidth estimate.
    pub bandwidth: BitRate,
    /// How long ago the bandwidth estimate last changed.
    pub age: Duration,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    rtt: Option<Duration>,
    bandwidth: BitRate,
    /// When `bandwidth` last changed: what the probe would measure. A multi-socket that
    /// recalled it and measured nothing new writes it back unchanged, so it ages rather than
    /// stays fresh forever. (Not the round-trip time: every connection measures its own, from
    /// TCP_INFO.)
    changed: Instant,
    /// When they were last written, for eviction.
    written: Instant,
}

/// The estimates of the paths of the multi-sockets that share it (see the module).
#[derive(Debug, Default)]
pub struct PathMemory {
    paths: Mutex<HashMap<(IpAddr, IpAddr), Entry>>,
}

impl PathMemory {
    /// An empty memory.
    pub fn new() -> PathMemory {
        PathMemory::default()
    }

    /// A multi-socket's current estimates of path `local` -> `peer`, at `now`. Only a path
    /// with a bandwidth estimate is remembered (the probe is what would measure it).
    pub fn remember(
        &self,
        (local, peer): (IpAddr, IpAddr),
        rtt: Option<Duration>,
        bandwidth: Option<BitRate>,
        now: Instant,
    ) {
        let Some(bandwidth) = bandwidth.filter(|b| b.as_bps() > 0) else {
            return;
        };
        let mut paths = self.paths.lock().unwrap_or_else(|p| p.into_inner());
        if !paths.contains_key(&(local, peer)) && paths.len() >= MAX_PATHS {
            if let Some(oldest) = paths.iter().min_by_key(|(_, e)| e.written).map(|(&k, _)| k) {
                paths.remove(&oldest);
            }
        }
        let e = paths.entry((local, peer)).or_insert(Entry {
            rtt,
            bandwidth,
            changed: now,
            written: now,
        });
        if e.bandwidth != bandwidth {
            e.changed = now;
        }
        (e.rtt, e.bandwidth, e.written) = (rtt, bandwidth, now);
    }

    /// What is known of path `local` -> `peer` at `now`, unless nothing or only something
    /// older than [`FORGET_AFTER`].
    pub fn recall(&self, (local, peer): (IpAddr, IpAddr), now: Instant) -> Option<Recalled> {
        let paths = self.paths.lock().unwrap_or_else(|p| p.into_inner());
        let e = paths.get(&(local, peer))?;
        let age = now.saturating_duration_since(e.changed);
        (age < FORGET_AFTER).then_some(Recalled {
            rtt: e.rtt,
            bandwidth: e.bandwidth,
            age,
        })
    }

    /// How many paths it holds.
    pub fn len(&self) -> usize {
        self.paths.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl super::Shared {
    /// Connection `conn`, just added to or accepted by session `s`, runs over `path`: start it
    /// from what the path memory holds of it, if any.
    pub(super) fn recall_path(
        &self,
        s: &mut Session,
        conn: ConnId,
        path: Option<(IpAddr, IpAddr)>,
    ) {
        let (Some(m), Some(path)) = (&self.options.paths, path) else {
            return;
        };
        if let Some(r) = m.recall(path, Instant::now()) {
            let measured = self.now().saturating_sub(r.age);
            s.recall_path(conn, r.rtt, r.bandwidth, measured);
        }
    }

    /// The ticker's reading of connection `path`'s network estimates, for the path memory.
    pub(super) fn remember_path(
        &self,
        path: Option<(IpAddr, IpAddr)>,
        rtt: Option<Duration>,
        bandwidth: Option<BitRate>,
    ) {
        if let (Some(m), Some(path)) = (&self.options.paths, path) {
            m.remember(path, rtt, bandwidth, Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    fn path(i: u32) -> (IpAddr, IpAddr) {
        (
            IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i)),
            IpAddr::V4(Ipv4Addr::new(10, 9, 9, 9)),
        )
    }

    #[test]
    fn a_path_is_recalled_with_the_age_of_its_last_change() {
        let m = PathMemory::new();
        let t0 = Instant::now();
        let rtt = Some(Duration::from_millis(40));
        m.remember(path(1), rtt, None, t0);
        assert_eq!(
            m.recall(path(1), t0),
            None,
            "no bandwidth, nothing to recall"
        );
        m.remember(path(1), rtt, Some(BitRate::mbps(8)), t0);
        // Written back unchanged (a multi-socket that measured nothing new): it ages.
        m.remember(
            path(1),
            rtt,
            Some(BitRate::mbps(8)),
            t0 + Duration::from_secs(5),
        );
        let r = m.recall(path(1), t0 + Duration::from_secs(7)).unwrap();
        assert_eq!(r.age, Duration::from_secs(7));
        assert_eq!((r.rtt, r.bandwidth), (rtt, BitRate::mbps(8)));
        // A new estimate is fresh.
        m.remember(
            path(1),
            rtt,
            Some(BitRate::mbps(9)),
            t0 + Duration::from_secs(8),
        );
        let r = m.recall(path(1), t0 + Duration::from_secs(8)).unwrap();
        assert_eq!((r.age, r.bandwidth), (Duration::ZERO, BitRate::mbps(9)));
        assert_eq!(m.recall(path(2), t0), None, "another path");
        assert_eq!(m.recall(path(1), t0 + FORGET_AFTER * 2), None, "forgotten");
    }

    #[test]
    fn it_holds_at_most_max_paths_forgetting_the_least_recently_written() {
        let m = PathMemory::new();
        let t0 = Instant::now();
        let bw = Some(BitRate::mbps(1));
        for i in 0..MAX_PATHS as u32 + 10 {
            m.remember(path(i), None, bw, t0 + Duration::from_millis(i as u64));
        }
        assert_eq!(m.len(), MAX_PATHS);
        assert!(m.recall(path(0), t0).is_none());
        assert!(m.recall(path(MAX_PATHS as u32 + 9), t0).is_some());
    }
}
