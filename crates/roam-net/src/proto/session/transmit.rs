//! What goes out next on a connection: control frames first (handshake, answers, errors), then
//! data chunks by label priority as the placement policy allows, then acknowledgements,
//! active probes, the client's periodic `Estimate` and, once everything is acknowledged after
//! `close`, the `Goodbye`.

use bytes::Bytes;
use roam_core::Time;

use super::*;
use crate::proto::label::Label;
use crate::proto::wire::{Chunk, Frame, HEADER_LEN};

/// Sizes of the two active probes; their response times separate latency from bandwidth.
/// Together (with their frame headers) they fit in TCP's initial window of 10 segments, which
/// is also what an idle connection restarts with: a larger probe waits a round trip for the
/// window to open, which the fit reads as a slow network. With 16 KiB the client's first
/// estimate of the hotspot's 3G (2 Mbit/s, 400 ms) was 0.35 Mbit/s; with 12 KiB, 1.90.
pub const PROBE_SIZES: [u32; 2] = [64, 12 * 1024];

/// Acknowledgements of this much received payload go out at once, without waiting for
/// [`Config::ack_delay`](super::Config::ack_delay): a bulk transfer's sender gets its window
/// back per chunk (the default chunk is 256 KiB), as without coalescing.
pub const ACK_BYTES: u64 = 256 * 1024;

const _: () = assert!(
    PROBE_SIZES[0] + PROBE_SIZES[1] + 2 * HEADER_LEN as u32 <= 10 * 1448,
    "the probes must fit in TCP's initial window"
);

impl Session {
    /// The next frame to write on `conn`, if any. `background_room` is how many bytes of
    /// background data the connection may still take (see [`Session::background_cap`]);
    /// foreground data and control frames are not limited by it.
    pub fn poll_transmit(
        &mut self,
        conn: ConnId,
        now: Time,
        background_room: u64,
    ) -> Option<Transmit> {
        let t = self.next_transmit(conn, now, background_room)?;
        if let Some(q) = self
            .conns
            .get_mut(&conn)
            .and_then(|c| c.kernel_queue.as_mut())
        {
            q.unsent += t.len() as u64;
        }
        Some(t)
    }

    pub(super) fn next_transmit(
        &mut self,
        conn: ConnId,
        now: Time,
        background_room: u64,
    ) -> Option<Transmit> {
        let state = self.conns.get(&conn)?.state;
        let c = self.conns.get_mut(&conn).unwrap();
        if let Some(f) = c.control.pop() {
            return Some(encode(&f, 0));
        }
        if state != ConnState::Established {
            return None;
        }
        if let Some(f) = self.next_credit(conn) {
            return Some(encode(&f, 0));
        }
        if let Some(f) = self.next_have(conn) {
            return Some(encode(&f, 0));
        }
        if let Some(t) = self.next_chunk(conn, now, background_room) {
            return Some(t);
        }
        if self.acks_due(now) {
            let acks = self.take_acks();
            return Some(encode(&Frame::Ack { acks }, 0));
        }
        if let Some(t) = self.maybe_probe(conn, now) {
            return Some(t);
        }
        if self.estimate_due(conn, now) {
            let networks = self.netinfos();
            self.announced = topology(&networks);
            self.conns.get_mut(&conn).unwrap().last_estimate = Some(now);
            return Some(encode(&Frame::Estimate { networks }, 0));
        }
        if self.closing && !self.goodbye_sent && self.out.is_empty() {
            self.goodbye_sent = true;
            self.goodbye_on = Some(conn);
            return Some(encode(
                &Frame::Goodbye {
                    irobs: self.next_irob,
                },
                0,
            ));
        }
        None
    }

    /// Whether the client sends an `Estimate` on `conn` now: once every [`ESTIMATE_EVERY`] on
    /// each connection; on a cellular network only while data flows over it (it carried data
    /// within the last `ESTIMATE_EVERY`) or when the networks changed since the last
    /// announcement (see [`NetKind::cellular`]).
    fn estimate_due(&self, conn: ConnId, now: Time) -> bool {
        let Some(c) = self.conns.get(&conn) else {
            return false;
        };
        if self.role != Role::Client
            || c.last_estimate
                .is_some_and(|t| now.saturating_since(t) < ESTIMATE_EVERY)
        {
            return false;
        }
        !self.is_cellular(c.net)
            || now.saturating_since(c.last_data) < ESTIMATE_EVERY
            || topology(&self.netinfos()) != self.announced
    }

    /// Whether connection `conn` is over a cellular network ([`NetKind::cellular`]; on the
    /// server, as the client announced it).
    pub fn connection_is_cellular(&self, conn: ConnId) -> bool {
        self.conns
            .get(&conn)
            .is_some_and(|c| self.is_cellular(c.net))
    }

    /// Whether network `net` is cellular ([`NetKind::cellular`]).
    pub(super) fn is_cellular(&self, net: NetId) -> bool {
        self.networks.get(&net).is_some_and(|n| n.kind.cellular)
    }

    /// Whether a network that is not cellular, and that `label` may use, has an established
    /// connection (`NetworkChoice::PreferNonCellular` then keeps the label off cellular ones).
    fn has_established_non_cellular(&self, label: Label) -> bool {
        self.usable_networks(label)
            .into_iter()
            .any(|net| !self.is_cellular(net))
    }

    pub(super) fn maybe_probe(&mut self, conn: ConnId, now: Time) -> Option<Transmit> {
        let (interval, cap) = (self.config.probe_interval, self.config.max_probe_interval);
        let cellular = self.is_cellular(self.conns.get(&conn)?.net);
        let c = self.conns.get_mut(&conn)?;
        // A network that just appeared, or an idle one whose turn it is
        // (`Conn::idle_probe_falls_due`), in turn with the device's other multi-sockets over
        // the path when the driver shares them (`Session::take_probe_turns`).
        let appeared = c.last_probe.is_none() && c.probes.is_empty();
        let idle_turn = c.idle_probe_falls_due(now, interval, cellular) && c.may_probe(interval);
        if !appeared && !idle_turn {
            return None;
        }
        if c.last_probe.is_some() {
            c.probe_gap = c.gap_after_probe(interval, cap);
        }
        c.last_probe = Some(now);
        c.probe_granted = None;
        c.put_off = false;
        let mut t = Transmit::default();
        for size in PROBE_SIZES {
            let id = self.next_probe_id;
            self.next_probe_id += 1;
            c.probes.insert(id, (now, size as u64 + HEADER_LEN as u64));
            let one = encode(&Frame::Probe { id, padding: size }, 0);
            t.head.extend_from_slice(&one.head);
            t.head.extend_from_slice(&one.data);
        }
        Some(t)
    }

    pub(super) fn next_chunk(
        &mut self,
        conn: ConnId,
        now: Time,
        background_room: u64,
    ) -> Option<Transmit> {
        let has_other_bg_conn = |s: &Session| {
            s.conns.iter().any(|(&id, c)| {
                id != conn && c.state == ConnState::Established && !s.carries_foreground(id)
            })
        };
        // No IROB `IROB_SPAN` or more beyond the oldest unacknowledged one goes out (the
        // receiver would fail us: `waiting::IROB_SPAN`).
        let span_end = self
            .out
            .keys()
            .next()
            .map_or(u64::MAX, |&o| o.saturating_add(IROB_SPAN));
        // New bytes the peer's credit allows now (`flow`; unbounded without credit).
        let credit = self.credit_room(now);
        for label in Label::ALL {
            let fg = label.is_foreground();
            if !fg {
                if background_room == 0 {
                    return None;
                }
                let net = self.conns[&conn].net;
                if self
                    .networks
                    .get(&net)
                    .is_some_and(|n| !self.appropriate(label, n))
                {
                    continue;
                }
                if self.config.policy(label).networks == NetworkChoice::PreferNonCellular
                    && self.is_cellular(net)
                    && self.has_established_non_cellular(label)
                {
                    continue; // WiFi preferred: the cellular network only while there is none
                }
                if self.carries_foreground(conn) && has_other_bg_conn(self) {
                    return None; // background goes to networks not carrying foreground data
                }
            }
            // The preferred connection of an unpinned foreground IROB (computed once it is met).
            let mut best: Option<Option<ConnId>> = None;
            let ids: Vec<IrobId> = self.sendable[label.rank()]
                .iter()
                .copied()
                .take(64)
                .collect();
            for id in ids {
                if id >= span_end {
                    break; // and every later one of the label
                }
                if fg
                    && label.is_small()
                    && self.config.redundancy.is_some()
                    && self.out[&id].pinned.is_none()
                    && self.out[&id].has_work()
                {
                    // Meatballs pins it (or leaves it to the placement below).
                    self.select_network(id, now);
                }
                let o = &self.out[&id];
                if !o.has_work() {
                    if o.ended || o.pending.is_empty() {
                        // nothing now; re-added when data arrives
                        if !(o.need_first || (o.need_end && o.ended)) && o.pending.is_empty() {
                            self.sendable[label.rank()].remove(&id);
                        }
                    }
                    continue;
                }
                if fg {
                    match o.pinned {
                        Some(p) if p != conn => continue,
                        Some(_) => {}
                        None => {
                            let b = *best
                                .get_or_insert_with(|| self.best_connection(label, o.len, now));
                            if b != Some(conn) {
                                continue;
                            }
                        }
                    }
                }
                let mut limit = if fg {
                    self.config.chunk_size as u64
                } else {
                    background_room.min(self.config.chunk_size as u64)
                };
                // The window counts bytes: bytes never sent before go out only while the sent
                // bytes of unacknowledged IROBs stay within the peer's window, except for the
                // oldest unacknowledged IROB, whose dependencies are all acknowledged (so the
                // receiver can always finish it). Resent bytes are not new. The receiver then
                // holds at most window + max_irob_size unacknowledged bytes of an honest peer.
                //
                // Credit (`flow`) bounds new bytes too, the oldest IROB included: the receiver
                // credits what it holds undeliverable, so the oldest can always finish.
                let start = o.pending.first().map_or(o.len, |(s, _)| s);
                let resent = o.sent_hi.saturating_sub(start);
                let window = if self.out.keys().next() != Some(&id) {
                    self.peer_window.saturating_sub(self.outstanding)
                } else {
                    u64::MAX
                };
                let room = window.min(credit);
                if start < o.len && resent == 0 && room == 0 {
                    if credit == 0 {
                        self.credit_blocked(now); // resends of another IROB may still go
                    }
                    continue; // window full; another IROB (the oldest) may still go
                }
                limit = limit.min(resent.saturating_add(room));
                return Some(self.take_chunk(conn, id, limit, now));
            }
        }
        None
    }

    /// The acknowledgements for the next frame: at most the decoder's list limit, so that a
    /// peer that completed many IROBs at once gets them in several frames it can decode
    /// (one list beyond the limit is a malformed frame, which closes the connection).
    pub(super) fn take_acks(&mut self) -> Vec<IrobId> {
        let rest = match self.acks.iter().nth(self.config.wire.max_list) {
            Some(&first_left) => self.acks.split_off(&first_left),
            None => BTreeSet::new(),
        };
        if rest.is_empty() {
            self.acks_since = None;
            self.ack_bytes = 0;
        }
        std::mem::replace(&mut self.acks, rest)
            .into_iter()
            .collect()
    }

    /// Whether the acknowledgements waiting go out in a frame of their own now
    /// ([`Config::ack_delay`]): the oldest has waited `ack_delay`, or the payload received
    /// since acknowledgements last went out reached [`ACK_BYTES`], or more wait than one frame
    /// carries. Otherwise they wait for a data chunk to ride on, or for `ack_deadline`.
    pub(super) fn acks_due(&self, now: Time) -> bool {
        !self.acks.is_empty()
            && (self.ack_bytes >= ACK_BYTES
                || self.acks.len() >= self.config.wire.max_list
                || self.ack_deadline().is_none_or(|t| now >= t))
    }

    /// When the acknowledgements waiting are due at the latest ([`Session::acks_due`]).
    pub fn ack_deadline(&self) -> Option<Time> {
        if self.acks.is_empty() {
            return None;
        }
        Some(self.acks_since? + self.config.ack_delay)
    }

    pub(super) fn take_chunk(
        &mut self,
        conn: ConnId,
        id: IrobId,
        limit: u64,
        now: Time,
    ) -> Transmit {
        let acks = self.take_acks();
        let o = self.out.get_mut(&id).unwrap();
        o.started = true;
        if o.label.is_foreground() {
            if self.config.trace && o.pinned.is_none() {
                let line = self.placement_trace(id, conn, now);
                self.events.push_back(Event::Trace(line));
            }
            let o = self.out.get_mut(&id).unwrap();
            o.pinned = Some(conn);
            self.last_foreground = Some(now);
        }
        let o = self.out.get_mut(&id).unwrap();
        let (start, end) = match o.pending.first() {
            Some((s, e)) => (s, e.min(s + limit.max(1))),
            None => (o.len, o.len),
        };
        if end > o.sent_hi {
            self.outstanding += end - o.sent_hi;
            self.flow.tx.on_sent(end - o.sent_hi, now);
            o.sent_hi = end;
            self.progress_at = now;
        }
        o.pending.remove(start, end);
        self.unsent[o.label.rank()] -= end - start;
        let first = o.need_first;
        o.need_first = false;
        let is_end = o.ended && end == o.len && o.pending.is_empty() && o.need_end;
        if is_end {
            o.need_end = false;
        }
        o.last_sent = now;
        o.inflight.push((conn, start, end, first, is_end));
        let data = if end > start {
            o.slice(start, end)
        } else {
            Bytes::new()
        };
        let chunk = Chunk {
            irob: id,
            label: o.label,
            offset: start,
            deps: first.then(|| o.deps.clone()),
            end: is_end,
            acks,
            data,
        };
        let label = o.label;
        if !o.has_work() {
            self.sendable[label.rank()].remove(&id);
        }
        let c = self.conns.get_mut(&conn).unwrap();
        c.last_data = now;
        let bg = if label.is_foreground() {
            c.fg_unacked += end - start;
            0
        } else {
            end - start
        };
        encode(&Frame::Data(chunk), bg)
    }
}

/// The networks of an announcement with their estimates left out: what must reach the server
/// even over a quiet connection (a network's coming, going, address, port or kind).
fn topology(networks: &[NetInfo]) -> Vec<NetInfo> {
    networks
        .iter()
        .map(|i| NetInfo {
            rtt_us: 0,
            bandwidth_bps: 0,
            ..*i
        })
        .collect()
}
