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
//! It also keeps one idle-probe backoff per path ([`PathMemory::probe_turn`]): a multi-socket
//! whose idle connection falls due for a probe asks the memory first, and probes only if no
//! other multi-socket has probed the path within the gap it left; otherwise it waits for the
//! path's next turn (`Session::take_probe_turns`). The browser behind `roam net proxy` keeps
//! a dozen connections open, each a multi-socket; backing off each on its own, they probed one
//! WiFi path a dozen times as often as one multi-socket would.
//!
//! Bounded: at most [`MAX_PATHS`] paths (a relay faces many clients), the least recently
//! written forgotten first, and entries older than [`FORGET_AFTER`] are not recalled.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use roam_core::{BitRate, Time};

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

/// Whose turn an idle probe of a path is ([`PathMemory::probe_turn`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeTurn {
    /// The asker's: the path is recorded as probed now.
    Yours,
    /// Another multi-socket probed the path `ago`, leaving `gap` before the next.
    Taken {
        /// How long ago the path was last probed.
        ago: Duration,
        /// The least time from that probe to the next.
        gap: Duration,
    },
}

/// A path's last idle probe: when, and the gap it leaves before the next.
#[derive(Clone, Copy, Debug)]
struct LastProbe {
    at: Instant,
    gap: Duration,
}

/// The estimates of the paths of the multi-sockets that share it, and each path's last idle
/// probe (see the module).
#[derive(Debug, Default)]
pub struct PathMemory {
    paths: Mutex<HashMap<(IpAddr, IpAddr), Entry>>,
    probes: Mutex<HashMap<(IpAddr, IpAddr), LastProbe>>,
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
        make_room(&mut paths, (local, peer), |e| e.written);
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

    /// An idle probe of path `local` -> `peer` is due for one of the multi-sockets sharing the
    /// memory at `now`; sent, it would leave `gap` before the next. Its turn, unless another
    /// probed the path less than the gap that probe left ago (a probe older than
    /// [`FORGET_AFTER`] counts as none). The turn taken leaves at least the last one's gap:
    /// a multi-socket opened since, whose own backoff starts again from the idle-probe
    /// interval, does not start the path's again.
    ///
    /// A turn counts as a probe when it is given. If data goes out on the connection before
    /// its probe does, the probe is not sent (the connection is not idle, and its transfers
    /// measure the path) and the path waits the gap all the same.
    pub fn probe_turn(
        &self,
        (local, peer): (IpAddr, IpAddr),
        now: Instant,
        gap: Duration,
    ) -> ProbeTurn {
        let mut probes = self.probes.lock().unwrap_or_else(|p| p.into_inner());
        let mut least = Duration::ZERO;
        if let Some(last) = probes.get(&(local, peer)) {
            let ago = now.saturating_duration_since(last.at);
            if ago < FORGET_AFTER {
                if ago < last.gap {
                    return ProbeTurn::Taken { ago, gap: last.gap };
                }
                least = last.gap;
            }
        }
        make_room(&mut probes, (local, peer), |p| p.at);
        let gap = gap.max(least);
        probes.insert((local, peer), LastProbe { at: now, gap });
        ProbeTurn::Yours
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

/// Room in `map` for `key`: past [`MAX_PATHS`] the entry with the oldest `written` goes.
fn make_room<V>(
    map: &mut HashMap<(IpAddr, IpAddr), V>,
    key: (IpAddr, IpAddr),
    written: impl Fn(&V) -> Instant,
) {
    if !map.contains_key(&key) && map.len() >= MAX_PATHS {
        if let Some(oldest) = map.iter().min_by_key(|(_, v)| written(v)).map(|(&k, _)| k) {
            map.remove(&oldest);
        }
    }
}

impl super::Shared {
    /// Connection `conn`, just added to or accepted by session `s`, runs over `path`: start it
    /// from what the path memory holds of it, if any, and have its idle probes take turns
    /// with the others over the path ([`Shared::probe_turns`]).
    pub(super) fn recall_path(
        &self,
        s: &mut Session,
        conn: ConnId,
        path: Option<(IpAddr, IpAddr)>,
    ) {
        let (Some(m), Some(path)) = (&self.options.paths, path) else {
            return;
        };
        s.take_probe_turns(conn);
        if let Some(r) = m.recall(path, Instant::now()) {
            let measured = self.now().saturating_sub(r.age);
            s.recall_path(conn, r.rtt, r.bandwidth, measured);
        }
    }

    /// The ticker's pass over connections `conns` (id and path) at `now`: each whose idle
    /// probe is due asks the path memory whose turn it is, and is granted it or put off.
    pub(super) fn probe_turns(
        &self,
        s: &mut Session,
        conns: impl Iterator<Item = (ConnId, Option<(IpAddr, IpAddr)>)>,
        now: Time,
    ) {
        let Some(m) = &self.options.paths else {
            return;
        };
        for (conn, path) in conns {
            let (Some(path), Some(gap)) = (path, s.idle_probe_due(conn, now)) else {
                continue;
            };
            match m.probe_turn(path, self.clock.instant(now), gap) {
                ProbeTurn::Yours => s.grant_idle_probe(conn, now),
                ProbeTurn::Taken { ago, gap } => s.path_probed(conn, now.saturating_sub(ago), gap),
            }
        }
    }

    /// The ticker's reading of connection `conn`'s network estimates, for the path memory;
    /// not written while the connection's idle probes are put off by another multi-socket's
    /// (`Session::path_put_off`): its estimates are then older than the path's, and writing
    /// them back in turn with the prober's would make the memory's look freshly measured.
    pub(super) fn remember_path(
        &self,
        s: &Session,
        conn: ConnId,
        path: Option<(IpAddr, IpAddr)>,
        rtt: Option<Duration>,
        bandwidth: Option<BitRate>,
    ) {
        if s.path_put_off(conn) {
            return;
        }
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

    /// One idle-probe backoff per path: the first to ask takes the turn; until the gap it
    /// leaves has passed the others are told when the path was probed and the gap; then the
    /// next to ask takes it. Paths are independent, and a probe older than [`FORGET_AFTER`]
    /// counts as none.
    #[test]
    fn a_path_is_probed_in_turns() {
        let m = PathMemory::new();
        let t0 = Instant::now();
        let s = Duration::from_secs;
        assert_eq!(m.probe_turn(path(1), t0, s(10)), ProbeTurn::Yours);
        assert_eq!(
            m.probe_turn(path(1), t0 + s(4), s(20)),
            ProbeTurn::Taken {
                ago: s(4),
                gap: s(10)
            }
        );
        assert_eq!(m.probe_turn(path(2), t0 + s(4), s(10)), ProbeTurn::Yours);
        assert_eq!(m.probe_turn(path(1), t0 + s(10), s(20)), ProbeTurn::Yours);
        assert!(matches!(
            m.probe_turn(path(1), t0 + s(29), s(40)),
            ProbeTurn::Taken { gap, .. } if gap == s(20)
        ));
        // A newcomer (its own backoff at 10 s) takes the next turn; the path waits 20 s.
        assert_eq!(m.probe_turn(path(1), t0 + s(30), s(10)), ProbeTurn::Yours);
        assert!(matches!(
            m.probe_turn(path(1), t0 + s(45), s(20)),
            ProbeTurn::Taken { gap, .. } if gap == s(20)
        ));
        m.probe_turn(path(3), t0, FORGET_AFTER * 2);
        assert_eq!(
            m.probe_turn(path(3), t0 + FORGET_AFTER, s(10)),
            ProbeTurn::Yours
        );
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
        let gap = Duration::from_secs(300);
        for i in 0..MAX_PATHS as u32 + 10 {
            m.probe_turn(path(i), t0 + Duration::from_millis(i as u64), gap);
        }
        let probes = m.probes.lock().unwrap();
        assert_eq!(probes.len(), MAX_PATHS);
        assert!(!probes.contains_key(&path(0)));
    }
}
