//! Recovery (paper §4.2, failover): IROBs in doubt after a connection broke are asked about
//! (`ResendRequest`) over another connection and the peer's `Have` answer names what arrived;
//! the rest is resent. Lost acknowledgements are caught by `Config::ack_timeout`. Late small
//! foreground IROBs are hedged: sent again over another network (Meatballs' redundant
//! strategy). The answers a peer can make this side queue are bounded: a question repeated
//! before its answer went out is answered once, answers are built only when the connection
//! writes (`Session::next_have`), an entry names at most [`HAVE_RANGES`] ranges, and what waits
//! unsent counts against `Config::max_control_bytes`.

use std::collections::BTreeSet;
use std::time::Duration;

use roam_core::Time;

use super::*;
use crate::proto::ranges::RangeSet;
use crate::proto::wire::{Frame, HaveEntry};

/// Most byte ranges one `Have` entry names. An answer naming fewer ranges than are held is
/// still correct (the sender resends the rest, which is discarded as a duplicate); naming all
/// of them would let one 8-byte question about an IROB that a hostile peer had sent as
/// thousands of one-byte pieces ask for 64 KiB of answer, 256 MiB for one `ResendRequest`.
pub const HAVE_RANGES: usize = 32;

/// Encoded length of a `Have` entry without its ranges.
pub(super) const HAVE_ENTRY_LEN: usize = 24;

impl Session {
    /// Connection `conn` broke: decide what of the IROBs it carried is in doubt.
    pub(super) fn recover_after_break(&mut self, conn: ConnId) {
        // Every IROB with bytes in flight on the dead connection is in doubt: ask the peer.
        // So is every IROB sent completely but not acknowledged: its acknowledgement may have
        // been on the dead connection (acknowledgements are not repeated otherwise).
        // Except a small foreground IROB that was in flight only there: it is sent again,
        // whole, at once (as a hedge is; the peer ignores a second copy). Asking first costs a
        // round trip on the remaining network, which on the lab's vehicular 3G, its downlink
        // holding answers up to a second, made an urgent message 1.8 s late.
        for (&id, irob) in self.out.iter_mut() {
            let before = irob.inflight.len();
            irob.inflight.retain(|f| f.0 != conn);
            let lost_here = irob.inflight.len() != before;
            if irob.pinned == Some(conn) {
                irob.pinned = None;
            }
            if lost_here
                && irob.inflight.is_empty()
                && irob.ended
                && irob.label.is_foreground()
                && irob.label.is_small()
            {
                self.unsent[irob.label.rank()] += irob.send_whole_again();
                self.doubt.remove(&id);
                self.sendable[irob.label.rank()].insert(id);
                continue;
            }
            let ack_may_be_lost = irob.sent_whole();
            if lost_here || ack_may_be_lost {
                self.doubt.insert(id);
            }
        }
        // Requests sent on the dead connection must be asked again.
        let lost: Vec<IrobId> = self
            .requested
            .iter()
            .filter(|(_, &(c2, _))| c2 == conn)
            .map(|(&i, _)| i)
            .collect();
        for id in lost {
            self.requested.remove(&id);
        }
    }

    /// The next `Have` answer for connection `conn`: entries for the IROBs the peer asked
    /// about there (`Conn::asked`), as many as fit the peer's decoder (its body limit and list
    /// limit), each saying what is held now. `None` when nothing is asked.
    pub(super) fn next_have(&mut self, conn: ConnId) -> Option<Frame> {
        let max_body = self.config.wire.max_body;
        let max_list = self.config.wire.max_list;
        let mut entries = Vec::new();
        let mut body = 0;
        while entries.len() < max_list {
            let Some(&id) = self.conns.get(&conn)?.asked.first() else {
                break;
            };
            let e = self.have_entry(id);
            let len = HAVE_ENTRY_LEN + 16 * e.ranges.len();
            if !entries.is_empty() && body + len > max_body {
                break;
            }
            body += len;
            entries.push(e);
            self.conns.get_mut(&conn)?.asked.pop_first();
        }
        (!entries.is_empty()).then_some(Frame::Have { entries })
    }

    /// Each side detects a broken connection on its own, up to a TCP user timeout apart. An
    /// acknowledgement or a `Have` answer the peer sent on a connection that broke in between
    /// is lost without this side seeing a break it would act on (ours came first, and its
    /// doubts were already asked about over another connection). So an IROB sent completely
    /// and unacknowledged for `ack_timeout`, and a question unanswered that long, are asked
    /// about (again). The answer resends only ranges not in flight on a live connection, so an
    /// IROB merely slow to be acknowledged (held for a dependency) costs a few control bytes.
    pub(super) fn recheck_unacknowledged(&mut self, now: Time) {
        let t = self.config.ack_timeout;
        self.requested
            .retain(|_, &mut (_, at)| now.saturating_since(at) < t);
        for (&id, irob) in self.out.iter_mut() {
            if irob.sent_whole()
                && now.saturating_since(irob.last_sent) >= t
                && !self.doubt.contains(&id)
            {
                irob.last_sent = now;
                self.doubt.insert(id);
            }
        }
    }

    /// The RTT estimate of network `net` (1 s when unknown).
    pub(super) fn rtt_or_second(&self, net: NetId) -> Duration {
        self.networks
            .get(&net)
            .and_then(|n| n.estimate.rtt())
            .unwrap_or(Duration::from_secs(1))
    }

    /// From when connection `target` is worth a hedge of an IROB that went out on `from`:
    /// at once, unless `target` is suspect itself (`Conn::suspect_since`, or its kernel
    /// reports a retransmission timeout, [`KernelQueue::timed_out`]) and nothing has arrived
    /// on it since the last frame on `from`; then once its suspicion lapses (None: not while
    /// its kernel reports the timeout; the caller re-asks after every frame and report). A
    /// hedge into a connection silent longer than the one it replaces is unlikely to arrive
    /// sooner, and it would make the original connection suspect in turn: in the lab's
    /// vehicular sensing run, urgent messages that reached the server over 3G but were
    /// acknowledged late (the 3G downlink held its ACKs up to a second) were hedged into a
    /// WiFi gone for 3 s, the 3G became suspect, and the next urgent message went into the
    /// WiFi.
    pub(super) fn hedge_ready_at(&self, from: ConnId, target: &Conn) -> Option<Time> {
        let from_heard = self.conns.get(&from).map_or(Time::ZERO, |c| c.heard);
        if target.heard > from_heard {
            return Some(Time::ZERO);
        }
        if target.kernel_queue.is_some_and(|q| q.timed_out) {
            return None;
        }
        Some(target.suspect_since.map_or(Time::ZERO, |t| t + SUSPECT_FOR))
    }

    /// The small foreground IROBs that may be hedged: id, the network they went out over, and
    /// when they are due: `last_sent` plus the hedge delay, or later when no other network's
    /// connection is worth a hedge before ([`Session::hedge_ready_at`]). None with hedging
    /// off, or with fewer than two networks with an established connection (nowhere to hedge
    /// to).
    ///
    /// The hedge delay of an IROB sent over network `net`: it needs half that network's RTT to
    /// arrive, and its acknowledgement up to half the largest RTT among networks with an
    /// established connection to come back (it may come over any); twice that, plus 100 ms,
    /// within [250 ms, 2 s].
    pub(super) fn hedges(&self) -> Vec<(IrobId, NetId, Time)> {
        let nets = self.established_networks();
        let hedging = self.config.policy(Label::ForegroundSmall).hedge;
        if (!hedging && self.config.redundancy.is_none()) || nets.len() < 2 {
            return Vec::new();
        }
        let back = nets
            .iter()
            .map(|&n| self.rtt_or_second(n))
            .max()
            .unwrap_or_default();
        let delay = |net| {
            (self.rtt_or_second(net) + back + Duration::from_millis(100))
                .clamp(Duration::from_millis(250), Duration::from_secs(2))
        };
        self.out
            .iter()
            .filter(|(id, o)| {
                o.label.is_foreground()
                    && o.label.is_small()
                    && o.sent_whole()
                    && !o.hedged
                    && !self.doubt.contains(id)
                    && (hedging || o.selected.is_some())
            })
            .filter_map(|(&id, o)| {
                let conn = o.inflight.last()?.0;
                let net = self.conns.get(&conn)?.net;
                let ready = self
                    .conns
                    .values()
                    .filter(|c| c.state == ConnState::Established && c.net != net)
                    .filter_map(|c| self.hedge_ready_at(conn, c))
                    .min()?;
                // Placed by Meatballs: its copy or re-evaluation is due at its own time.
                let due = o
                    .selected
                    .map_or_else(|| o.last_sent + delay(net), |s| s.next);
                Some((id, net, due.max(ready)))
            })
            .collect()
    }

    /// Redundant retransmission of late small foreground IROBs (Meatballs' redundant strategy,
    /// Higgins' thesis ch. 4: send on both networks and keep the first arrival, worth it when the
    /// item is small and waiting costs the user). A small foreground IROB sent completely and
    /// unacknowledged for its hedge delay (`Session::hedges`) is sent once more, whole, over the
    /// lowest-RTT connection of another network that is worth it
    /// ([`Session::hedge_ready_at`]); the receiver delivers whichever copy arrives
    /// first and ignores the other. Why: a WiFi network that vanishes stalls its connection
    /// silently, and the break is detected only after the user timeout (4 s); the lab's
    /// vehicular sensing run saw urgent messages sent into the vanished WiFi arrive 1.8-4.4 s
    /// late. The cost of a hedge that was not needed is one small IROB's bytes.
    pub(super) fn hedge_late_foreground(&mut self, now: Time) {
        for (id, net, due) in self.hedges() {
            if due > now {
                continue;
            }
            let Some(from) = self.out[&id].inflight.last().map(|f| f.0) else {
                continue;
            };
            if !self.reevaluate_selected(id, now) {
                continue; // Meatballs: not worth another network yet
            }
            let alt = self
                .conns
                .iter()
                .filter(|(_, c)| c.state == ConnState::Established && c.net != net)
                .filter(|(_, c)| self.hedge_ready_at(from, c).is_some_and(|t| t <= now))
                .min_by_key(|(&cid, c)| {
                    let rtt = self.networks.get(&c.net).and_then(|n| n.estimate.rtt());
                    (rtt.unwrap_or(Duration::MAX), cid)
                })
                .map(|(&cid, _)| cid);
            let Some(alt) = alt else {
                continue;
            };
            if let Some(c) = self.conns.get_mut(&from) {
                // The latest late IROB restarts the suspicion (an older one may have expired).
                c.suspect_since = Some(now);
            }
            let o = self.out.get_mut(&id).unwrap();
            o.hedged = true;
            self.unsent[o.label.rank()] += o.send_whole_again();
            o.pinned = Some(alt);
            self.sendable[o.label.rank()].insert(id);
            self.hedges_sent += 1;
            if self.config.trace {
                let line = format!(
                    "hedge: irob {id} unacknowledged {:?} after its last send over network {net}; again on connection {alt}",
                    now.saturating_since(o.last_sent)
                );
                self.events.push_back(Event::Trace(line));
            }
        }
    }

    pub(super) fn on_ack(&mut self, id: IrobId, now: Time) {
        if let Some(irob) = self.out.get(&id) {
            if !irob.ended {
                return; // an ack of an unfinished IROB is not meaningful; ignore
            }
            let irob = self.out.remove(&id).unwrap();
            self.progress_at = now;
            if let Some(s) = irob.selected {
                self.selected_acknowledged(s, now);
            }
            if irob.label.is_foreground() {
                for f in &irob.inflight {
                    if let Some(c) = self.conns.get_mut(&f.0) {
                        c.fg_unacked = c.fg_unacked.saturating_sub(f.2 - f.1);
                    }
                }
            }
            self.buffered -= irob.len;
            self.outstanding -= irob.sent_hi;
            self.unsent[irob.label.rank()] -= irob.pending.len();
            self.sendable[irob.label.rank()].remove(&id);
            self.doubt.remove(&id);
            self.requested.remove(&id);
        }
    }

    pub(super) fn on_have(&mut self, e: HaveEntry, now: Time) {
        if !self.doubt.contains(&e.irob) {
            return;
        }
        if e.complete {
            self.on_ack(e.irob, now);
            return;
        }
        let live: BTreeSet<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.state == ConnState::Established)
            .map(|(&i, _)| i)
            .collect();
        let Some(irob) = self.out.get_mut(&e.irob) else {
            return;
        };
        let mut pending = RangeSet::new();
        pending.insert(0, irob.len);
        for (s, t) in &e.ranges {
            pending.remove(*s, *t);
        }
        let mut end_in_flight = false;
        let mut first_in_flight = false;
        for f in &irob.inflight {
            if live.contains(&f.0) {
                pending.remove(f.1, f.2);
                first_in_flight |= f.3;
                end_in_flight |= f.4;
            }
        }
        let rank = irob.label.rank();
        self.unsent[rank] = self.unsent[rank] - irob.pending.len() + pending.len();
        irob.pending = pending;
        irob.need_first = !e.first && !first_in_flight;
        irob.need_end = e.end.is_none() && !end_in_flight;
        let label = irob.label;
        self.doubt.remove(&e.irob);
        self.requested.remove(&e.irob);
        self.sendable[label.rank()].insert(e.irob);
    }

    pub(super) fn have_entry(&self, id: IrobId) -> HaveEntry {
        match self.incoming.get(&id) {
            None if self.acked.contains(id) => HaveEntry {
                irob: id,
                complete: true,
                first: true,
                end: None,
                ranges: vec![],
            },
            None => HaveEntry {
                irob: id,
                complete: false,
                first: false,
                end: None,
                ranges: vec![],
            },
            Some(i) => {
                // Delivered bytes were dropped from `have`'s segments but are still held. Only
                // the first ranges are cloned: the answer names at most `HAVE_RANGES`.
                let mut have = RangeSet::new();
                have.insert(0, i.delivered);
                for (s, e) in i.have.iter().take(HAVE_RANGES + 1) {
                    have.insert(s, e);
                }
                HaveEntry {
                    irob: id,
                    complete: i.acked,
                    first: i.deps.is_some(),
                    end: i.end,
                    ranges: have.iter().take(HAVE_RANGES).collect(),
                }
            }
        }
    }
}
