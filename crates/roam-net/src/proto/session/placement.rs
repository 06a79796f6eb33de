//! Placement policy (paper §4.2): which connection carries which label, and how much background
//! data may sit in a connection ahead of the next foreground IROB (anticipatory scheduling).
//! Foreground small IROBs go where they would arrive first, foreground large ones to the
//! highest-bandwidth network; background data is striped over the networks not carrying
//! foreground data, each capped at its bandwidth × (RTT + [`anticipatory_budget`]).

use std::time::Duration;

use roam_core::Time;

use super::*;
use crate::proto::label::Label;

/// Bytes queued on a connection whose network has no bandwidth estimate yet below which a
/// small foreground IROB still counts it by its RTT alone (see `Session::best_connection`).
pub(super) const UNKNOWN_QUEUE_OK: u64 = 4 * 1024;

/// Background bytes a connection may hold before its network has a bandwidth estimate,
/// beyond the kernel's window while no queue has built (see [`Session::background_cap`]).
pub const UNMEASURED_CAP: u64 = 16 * 1024;

/// A connection's congestion window as the driver reads it from the kernel (TCP_INFO), for
/// [`Session::background_cap`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelWindow {
    /// The congestion window in bytes.
    pub cwnd: u64,
    /// In slow start: the window is below the slow-start threshold.
    pub slow_start: bool,
    /// A queue has built on the path (the smoothed RTT is well above the minimum).
    pub queue_built: bool,
}

impl KernelWindow {
    /// The kernel is still probing for the path's capacity: in slow start, with no queue
    /// built yet.
    pub fn probing(&self) -> bool {
        self.slow_start && !self.queue_built
    }
}

/// The anticipatory-scheduling budget: how much time's worth of background data may sit in a
/// connection beyond its base round trip, given how long ago foreground data was last seen.
///
/// Rule: 50 ms while foreground traffic was seen within the last 10 s; after that the budget
/// doubles every further 10 s of foreground silence (100, 200, 400, 800 ms) up to 1 s. An
/// application with periodic interactive traffic (a poll every few seconds) thus always finds at
/// most 50 ms of background data ahead of its next request, while an application that has gone
/// quiet gets deep buffers that ride out scheduling jitter. See docs/intentional-networking.md.
pub fn anticipatory_budget(since_foreground: Option<Duration>) -> Duration {
    const MIN: Duration = Duration::from_millis(50);
    const MAX: Duration = Duration::from_secs(1);
    const STEP: Duration = Duration::from_secs(10);
    match since_foreground {
        None => MAX,
        Some(d) => {
            let steps = (d.as_nanos() / STEP.as_nanos()) as u32;
            if steps == 0 {
                MIN
            } else {
                MIN.saturating_mul(1u32 << steps.min(5)).min(MAX)
            }
        }
    }
}

impl Session {
    /// The [`Event::Trace`] line for foreground IROB `id` going out first on `conn`: every
    /// established connection as [`Session::best_connection`] saw it (estimates, kernel
    /// queue, suspicion).
    pub(super) fn placement_trace(&self, id: IrobId, conn: ConnId, now: Time) -> String {
        let o = &self.out[&id];
        let mut line = format!("irob {id} {} {} B on connection {conn};", o.label, o.len);
        for (cid, c) in self
            .conns
            .iter()
            .filter(|(_, c)| c.state == ConnState::Established)
        {
            let (rtt, bw) = self
                .networks
                .get(&c.net)
                .map_or((None, None), |n| (n.estimate.rtt(), n.estimate.bandwidth()));
            let suspect = c.suspect_since.map(|t| now.saturating_since(t));
            line += &format!(
                " [conn {cid} net {}: rtt {rtt:?} bw {:?} kernel {:?} fg_unacked {} suspect for {suspect:?}]",
                c.net,
                bw.map(|b| b.as_bps()),
                c.kernel_queue,
                c.fg_unacked
            );
        }
        line
    }

    /// The preferred connection for a foreground IROB of `label` and `len` bytes.
    ///
    /// Small: the connection on which it would arrive first, by the estimates: half the RTT
    /// (one way) plus the bytes queued ahead of it and its own, at the network's bandwidth.
    /// Queued ahead: what the kernel holds unsent or in flight beyond the path's
    /// bandwidth-delay product ([`KernelQueue::ahead`]; as last reported by the driver plus
    /// what was handed over since; without reports, the foreground bytes not yet
    /// acknowledged). With nothing queued that is the lowest-latency
    /// network, the paper's rule; it differs when an application issues a burst of small IROBs
    /// (the lab's file system demand-fetches a 128 KB read as 32 blocks): the paper's rule
    /// serialises them all on the low-latency network (on the crowded hotspot, 55 ms each on
    /// the 0.6 Mbit/s WiFi) while the other network, though slower to reach, would deliver
    /// the tail of the burst sooner. It also keeps a small IROB off a network whose kernel
    /// holds a second of background data (the anticipatory cap allows that much after a
    /// second without foreground traffic) when another would deliver it sooner. A network
    /// without a bandwidth estimate counts its RTT if (almost) nothing is queued on it, else
    /// ranks last. A suspect connection (one whose last small foreground IROB had to be hedged,
    /// with nothing heard on it since; `Conn::suspect_since`) ranks after every other, for
    /// [`SUSPECT_FOR`], and so does one whose kernel reports a retransmission timeout
    /// ([`KernelQueue::timed_out`]); of two suspects, the one heard from more recently ranks
    /// first (the lab's vehicular sensing run: a 3G connection whose acknowledgements were
    /// slow, and a WiFi silent for 5 s since it vanished, were both suspect, and an urgent
    /// message went into the WiFi: 1.8 s late).
    /// Large: the highest-bandwidth network. Unknown estimates rank last, ties go to the
    /// lower id.
    pub(super) fn best_connection(&self, label: Label, len: u64, now: Time) -> Option<ConnId> {
        let cands: Vec<(&ConnId, &Conn)> = self
            .conns
            .iter()
            .map(|(id, c)| (id, &**c))
            .filter(|(_, c)| c.state == ConnState::Established)
            .filter(|(_, c)| {
                self.networks
                    .get(&c.net)
                    .is_none_or(|n| self.appropriate(label, n))
            })
            .collect();
        let est = |c: &Conn| {
            self.networks
                .get(&c.net)
                .map(|n| (n.estimate.rtt(), n.estimate.bandwidth()))
        };
        // `NetworkChoice::PreferNonCellular`: only the non-cellular candidates while there is
        // one.
        let cellular = |c: &Conn| self.networks.get(&c.net).is_some_and(|n| n.kind.cellular);
        let demote_cellular = self.config.policy(label).networks
            == NetworkChoice::PreferNonCellular
            && cands.iter().any(|(_, c)| !cellular(c));
        let cands = cands
            .into_iter()
            .filter(|(_, c)| !demote_cellular || !cellular(c));
        if label.is_small() {
            cands
                .min_by_key(|(&id, c)| {
                    let suspect = label.is_foreground() && c.suspect(now);
                    let q = c.kernel_queue.unwrap_or(KernelQueue {
                        unsent: c.fg_unacked,
                        ..KernelQueue::default()
                    });
                    let arrival = match est(c) {
                        Some((Some(rtt), Some(bw))) if bw.as_bps() > 0 => {
                            let pipe = bw.bytes_per_sec() * rtt.as_secs_f64();
                            let ahead = q.ahead(pipe as u64);
                            let queued = (ahead + len) as f64 / bw.bytes_per_sec();
                            (rtt / 2).saturating_add(Duration::from_secs_f64(queued.min(1e9)))
                        }
                        // How long the queue takes is unknown: only an empty one is counted.
                        Some((Some(rtt), _)) if q.total() < UNKNOWN_QUEUE_OK => rtt / 2,
                        _ => Duration::MAX,
                    };
                    // Among suspects, the one silent longer ranks later.
                    let silent = if suspect {
                        now.saturating_since(c.heard)
                    } else {
                        Duration::ZERO
                    };
                    (suspect, silent, arrival, id)
                })
                .map(|(&id, _)| id)
        } else {
            cands
                .min_by_key(|(&id, c)| {
                    let bw = est(c).and_then(|e| e.1).map_or(0, |b| b.as_bps());
                    (std::cmp::Reverse(bw), id)
                })
                .map(|(&id, _)| id)
        }
    }

    /// Whether connection `conn` is currently sending foreground data: a foreground IROB pinned
    /// to it still has bytes to hand to the kernel. (Once they are in the kernel, what may
    /// queue ahead of the next foreground IROB is bounded by the anticipatory cap instead.
    /// Counting foreground bytes until their acknowledgement kept background off a network for
    /// as long as an application exchanged small foreground messages over it: the lab's file
    /// system, demand-fetching over WiFi every few milliseconds, prefetched over 3G only.)
    pub(super) fn carries_foreground(&self, conn: ConnId) -> bool {
        Label::ALL[..2].iter().any(|l| {
            self.sendable[l.rank()].iter().any(|id| {
                self.out
                    .get(id)
                    .is_some_and(|o| o.pinned == Some(conn) && o.has_work())
            })
        })
    }

    /// How many bytes of background data may be outstanding in connection `conn` (anticipatory
    /// scheduling): the network's bandwidth × (its minimum RTT + [`anticipatory_budget`]). The
    /// driver compares this with the socket's unacknowledged bytes (SIOCOUTQ).
    ///
    /// `window` is the kernel's congestion window as the driver last read it. While the kernel
    /// is still probing for the path's capacity ([`KernelWindow::probing`]) the window is
    /// allowed in full. The bandwidth estimate is built from transfers this very cap limits, so
    /// on a network that just appeared the estimate would trail the path by seconds (the
    /// vehicular drives' WiFi sessions last a few). Background data thus ramps as fast as TCP's
    /// own slow start and no faster, and the estimate learns the path from transfers that fill
    /// it. Once a queue builds (or a loss ends slow start) the estimate rules again, so a slow,
    /// deep-buffered link is not filled with background data ahead of the next foreground one.
    ///
    /// Before the first estimate, the window is allowed whenever no queue has built, even after
    /// slow start ended: a window that fills no queue holds at most the path's pipe, which
    /// delays no foreground IROB. Slow start ends without a loss when cubic's HyStart sees the
    /// ACK train fill the pipe, at once on loopback; capping the window at
    /// [`UNMEASURED_CAP`] then held bulk transfers to a trickle until the first throughput
    /// sample ([`THROUGHPUT_INTERVAL`], 250 ms), and to the lower bound that trickle gave for
    /// another interval.
    pub fn background_cap(&self, conn: ConnId, now: Time, window: Option<KernelWindow>) -> u64 {
        let Some(c) = self.conns.get(&conn) else {
            return 0;
        };
        let cwnd_if = |keep: fn(&KernelWindow) -> bool| window.filter(keep).map_or(0, |w| w.cwnd);
        let unmeasured = || cwnd_if(|w| !w.queue_built).max(UNMEASURED_CAP);
        let budget = anticipatory_budget(self.since_foreground(now));
        let Some(n) = self.networks.get(&c.net) else {
            return unmeasured();
        };
        let (Some(rtt), Some(bw)) = (n.estimate.rtt(), n.estimate.bandwidth()) else {
            return unmeasured();
        };
        let bytes = bw.bytes_per_sec() * (rtt + budget).as_secs_f64();
        (bytes as u64)
            .max(4 * 1024)
            .max(cwnd_if(KernelWindow::probing))
    }

    /// How long a writer whose connection `conn` has reached its background cap may sleep
    /// before looking again (it is woken sooner by anything the session does). The cap lets
    /// bandwidth × budget of background data sit beyond the path's pipe, so a quarter of the
    /// budget drains while the writer sleeps and the pipe stays full: 12.5 ms for the 50 ms
    /// budget, at most 100 ms (the timer task wakes every writer that often anyway). Before
    /// its network has a bandwidth estimate the cap is small and the wait 5 ms. (A fixed
    /// 2 ms woke a capped writer 500 times a second for nothing.)
    pub fn background_recheck(&self, conn: ConnId, now: Time) -> Duration {
        const SHORTEST: Duration = Duration::from_millis(5);
        let measured = self
            .conns
            .get(&conn)
            .and_then(|c| self.networks.get(&c.net))
            .is_some_and(|n| n.estimate.bandwidth().is_some());
        if !measured {
            return SHORTEST;
        }
        let budget = anticipatory_budget(self.since_foreground(now));
        (budget / 4).clamp(SHORTEST, Duration::from_millis(100))
    }

    /// Another multi-socket on this device (another process's, or this one's) saw foreground
    /// data at `at` (the driver reads it from shared memory): the anticipatory budget here
    /// shrinks as if it had been seen here (paper §4.2: one application's interactive
    /// traffic holds back every application's background data on the device).
    pub fn foreground_elsewhere(&mut self, at: Time) {
        self.foreground_elsewhere = self.foreground_elsewhere.max(Some(at));
    }

    /// When this multi-socket last sent or received foreground data (for the driver to share
    /// with the device's other multi-sockets).
    pub fn last_foreground(&self) -> Option<Time> {
        self.last_foreground
    }

    /// How long ago foreground data was last seen, here or elsewhere on the device.
    fn since_foreground(&self, now: Time) -> Option<Duration> {
        let last = self.last_foreground.max(self.foreground_elsewhere)?;
        Some(now.saturating_since(last))
    }
}
