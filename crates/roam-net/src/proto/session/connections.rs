//! Connections: one TCP connection per network, its state ([`ConnState`]: handshake,
//! established, closing), what the driver reports of its kernel queue ([`KernelQueue`]), and
//! what happens when one breaks. Frames arriving on an established connection are dispatched
//! here to the sender, the receiver and recovery; handshake frames go to `handshake`.
//!
//! A broken connection is never an error the application sees: its IROBs are recovered over
//! another connection (`recovery`), and the session fails only when no connection has been up
//! for `Config::failure_timeout`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use roam_core::Time;

use super::*;
use crate::proto::wire::{Frame, HEADER_LEN, NONCE_LEN};

/// Bytes counted against `Config::max_control_bytes` for each IROB a peer asked about
/// (`ResendRequest`) whose answer is not sent yet (`Conn::asked`; an id in a B-tree set, with
/// room to spare).
pub const ASKED_COST: usize = 32;

/// Control frames waiting to go out on one connection, and the memory they take (what
/// `Config::max_control_bytes` bounds).
#[derive(Debug, Default, Clone)]
pub(super) struct ControlQueue {
    frames: VecDeque<Frame>,
    bytes: usize,
}

impl ControlQueue {
    pub(super) fn push(&mut self, f: Frame) {
        self.bytes += control_cost(&f);
        self.frames.push_back(f);
    }

    pub(super) fn pop(&mut self) -> Option<Frame> {
        let f = self.frames.pop_front()?;
        self.bytes -= control_cost(&f);
        Some(f)
    }

    pub(super) fn clear(&mut self) {
        self.frames.clear();
        self.bytes = 0;
    }

    /// Memory the queued frames take.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }
}

/// The memory a queued control frame takes: the frame and what it owns.
fn control_cost(f: &Frame) -> usize {
    let owned = match f {
        Frame::Hello { networks, .. }
        | Frame::HelloAck { networks, .. }
        | Frame::Estimate { networks } => std::mem::size_of_val(networks.as_slice()),
        Frame::Ack { acks: ids } | Frame::ResendRequest { irobs: ids } => 8 * ids.len(),
        Frame::Have { entries } => entries
            .iter()
            .map(|e| std::mem::size_of_val(e) + 16 * e.ranges.len())
            .sum(),
        Frame::Error { reason, .. } => reason.len(),
        Frame::Data(c) => 8 * c.acks.len() + c.data.len(),
        _ => 0,
    };
    std::mem::size_of::<Frame>() + owned
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ConnState {
    /// Initiator: connected while the first handshake runs on another connection; sends its
    /// `Join` once that handshake has given the secret (or its `Hello`, if that one breaks).
    Waiting,
    HelloSent,
    JoinSent,
    /// Acceptor: challenge sent, waiting for the proof.
    Challenged,
    /// Initiator: proof sent, waiting for `JoinOk`.
    Proved,
    Established,
    Closing,
}

impl ConnState {
    /// Sent or answered a handshake frame and waits for the peer's next one. (`Waiting` waits
    /// for this side's own first handshake on another connection, which has its own timeout.)
    pub(super) fn in_handshake(self) -> bool {
        matches!(
            self,
            ConnState::HelloSent | ConnState::JoinSent | ConnState::Challenged | ConnState::Proved
        )
    }
}

#[derive(Debug)]
pub(super) struct Conn {
    pub(super) net: NetId,
    pub(super) state: ConnState,
    pub(super) control: ControlQueue,
    /// IROBs the peer asked about (`ResendRequest`) on this connection whose `Have` answer has
    /// not gone out: answered, in id order, when the connection next writes (a question
    /// repeated meanwhile is answered once, and the answer says what is held then).
    pub(super) asked: BTreeSet<IrobId>,
    pub(super) opened: Time,
    pub(super) my_nonce: [u8; NONCE_LEN],
    pub(super) peer_nonce: [u8; NONCE_LEN],
    /// When data last went out or came in on this connection: it is probed only when idle in
    /// both directions. (Counting only data sent, the server of the lab's sensing application,
    /// which receives a steady upload and sends nothing, probed 3G every 10 s with 16 KiB
    /// down a link that otherwise carried only ACKs; on the vehicular trace's 3G downlink,
    /// which delivers nothing for seconds at a time, the probe held the upload's ACKs back
    /// 5 s and stalled the client's uplink, and urgent messages with it: mean 2.3 s against
    /// 0.3 s for the baselines.)
    pub(super) last_data: Time,
    /// The connection's smoothed RTT as TCP_INFO last gave it (`Session::tcp_sample`): the
    /// round trip flow control plans for (`flow`).
    pub(super) srtt: Option<Duration>,
    pub(super) last_probe: Option<Time>,
    /// The least time from one idle probe to the next ([`Conn::next_idle_probe`]).
    pub(super) probe_gap: Duration,
    /// Idle probes take turns with the device's other multi-sockets over this connection's
    /// path ([`Session::take_probe_turns`]): one goes out only once the driver grants it.
    pub(super) probe_turns: bool,
    /// When the driver last granted an idle probe ([`Session::grant_idle_probe`]). A grant
    /// from before the probe's due time (data moved it later) is spent.
    pub(super) probe_granted: Option<Time>,
    /// Its idle probe was put off by another multi-socket's probe of the path
    /// ([`Session::path_probed`]) since it last probed itself: its estimates are older than
    /// the path's ([`Session::path_put_off`]).
    pub(super) put_off: bool,
    pub(super) probes: BTreeMap<u64, (Time, u64)>,
    /// Foreground bytes handed to this connection whose IROBs are not yet acknowledged: what
    /// a new foreground IROB would queue behind, when the driver does not report the kernel's
    /// send queue (see `Session::best_connection`).
    pub(super) fg_unacked: u64,
    /// The kernel's send queue as the driver last reported it, plus every byte handed to the
    /// connection since (counted as unsent).
    pub(super) kernel_queue: Option<KernelQueue>,
    /// When a small foreground IROB sent here went unacknowledged past its hedge delay and was
    /// hedged, if nothing has arrived on this connection since: new small foreground IROBs
    /// avoid it (`Session::best_connection`, [`SUSPECT_FOR`]).
    pub(super) suspect_since: Option<Time>,
    /// When a frame last arrived on this connection (its opening, before any): of two
    /// suspect connections, the one silent longer is likelier dead.
    pub(super) heard: Time,
    /// When this connection last carried an `Estimate` (client only; see [`ESTIMATE_EVERY`]).
    pub(super) last_estimate: Option<Time>,
    /// The peer's address, as the driver saw it ([`Session::connection_from`]).
    pub(super) peer_addr: Option<IpAddr>,
    /// Start of the current throughput interval ([`Session::tcp_sample`]): when, the
    /// acknowledged-bytes counter then, and the path's load then.
    pub(super) throughput_from: Option<(Time, u64, PathLoad)>,
}

impl Conn {
    /// Suspect at `now`: its kernel reports a retransmission timeout
    /// ([`KernelQueue::timed_out`]), or a hedge left it suspect less than [`SUSPECT_FOR`]
    /// ago with nothing heard since (`suspect_since`).
    pub(super) fn suspect(&self, now: Time) -> bool {
        self.kernel_queue.is_some_and(|q| q.timed_out)
            || self
                .suspect_since
                .is_some_and(|t| now.saturating_since(t) < SUSPECT_FOR)
    }

    /// When this connection is next probed, if it is idle then (no data either way for
    /// `interval`): `probe_gap` after its last probe. The gap doubles with each idle probe,
    /// from `interval` up to [`Config::max_probe_interval`] (`Session::maybe_probe`), and
    /// data between probes does not shorten it: only a new connection starts again from
    /// `interval`. The spec's scout probes "periodically while idle"; how often is ours to
    /// choose. A fixed 10 s costs a connection idle for an hour 360 probe pairs (13.3 kB
    /// each) where this sends 16, and a connection that carries a request every half minute
    /// (a browser's, through `roam net proxy`) was probed twice after each. Passive samples
    /// measure the network while data flows, and the client's `Estimate` each second
    /// ([`ESTIMATE_EVERY`]), not the probes, is what shows a vanished network within a second.
    pub(super) fn next_idle_probe(&self, interval: Duration) -> Time {
        let idle = self.last_data + interval;
        match self.last_probe {
            Some(p) => idle.max(p + self.probe_gap),
            None => idle,
        }
    }

    /// Whether an idle probe of this connection falls due at `now`: it has been probed
    /// before, none is outstanding, it is not on a `cellular` network (never probed while
    /// idle: passive samples of its transfers keep its estimates, `NetKind::cellular`), and
    /// [`Conn::next_idle_probe`] has come.
    pub(super) fn idle_probe_falls_due(
        &self,
        now: Time,
        interval: Duration,
        cellular: bool,
    ) -> bool {
        self.last_probe.is_some()
            && self.probes.is_empty()
            && !cellular
            && now >= self.next_idle_probe(interval)
    }

    /// The gap an idle probe sent now leaves before the next: double the last, from
    /// `interval` up to `cap`.
    pub(super) fn gap_after_probe(&self, interval: Duration, cap: Duration) -> Duration {
        (self.probe_gap * 2).clamp(interval, cap.max(interval))
    }

    /// Whether the idle probe due now may go out: always, unless it waits for its turn on the
    /// path ([`Conn::probe_turns`]) and has not been granted one since it fell due.
    pub(super) fn may_probe(&self, interval: Duration) -> bool {
        !self.probe_turns
            || self
                .probe_granted
                .is_some_and(|g| g >= self.next_idle_probe(interval))
    }

    /// Memory held for answers on this connection: control frames and questions not
    /// answered yet.
    pub(super) fn answer_bytes(&self) -> usize {
        self.control.bytes() + ASKED_COST * self.asked.len()
    }

    pub(super) fn new(net: NetId, state: ConnState, now: Time) -> Conn {
        Conn {
            net,
            state,
            control: ControlQueue::default(),
            asked: BTreeSet::new(),
            opened: now,
            my_nonce: [0; NONCE_LEN],
            peer_nonce: [0; NONCE_LEN],
            last_data: now,
            last_probe: None,
            probe_gap: Duration::ZERO,
            probe_turns: false,
            probe_granted: None,
            put_off: false,
            probes: BTreeMap::new(),
            fg_unacked: 0,
            kernel_queue: None,
            suspect_since: None,
            heard: now,
            last_estimate: None,
            peer_addr: None,
            throughput_from: None,
            srtt: None,
        }
    }
}

/// How often a client sends an `Estimate` on *each* connection. Besides telling the server the
/// client's networks, it keeps a frame in flight on a connection that is otherwise idle, so
/// that a network which vanishes shows as the kernel's retransmission timeout
/// ([`KernelQueue::timed_out`]) within about a second, and small foreground IROBs avoid it,
/// instead of only once the next IROB has gone into it. Sent once a second for the whole
/// session, the estimate went on whichever connection asked first, the busy one: in one of
/// six quick vehicular sensing runs the WiFi vanished while its connection was idle, nothing
/// told the client, and an urgent message 2.4 s later went into it (789 ms, by its hedge).
pub const ESTIMATE_EVERY: Duration = Duration::from_secs(1);

/// How long a connection stays suspect after a hedge (see `Conn::suspect_since`) unless
/// something arrives on it: the user timeout that declares a silent connection broken (4 s).
/// A WiFi network that vanished stalls silently; without this, every urgent message sent in
/// those seconds went into it and arrived only through its hedge (the lab's quick vehicular
/// sensing run: three urgent messages 0.8 s late, 2.3-3.9 s after the WiFi left).
pub const SUSPECT_FOR: Duration = Duration::from_secs(4);

/// A connection's send queue in the kernel, all labels (see [`Session::kernel_queue`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelQueue {
    /// Bytes sent and not yet acknowledged (SIOCOUTQ minus the unsent ones).
    pub in_flight: u64,
    /// Bytes not yet sent (TCP_INFO's `tcpi_notsent_bytes`).
    pub unsent: u64,
    /// The kernel's retransmission timer has fired for data still unacknowledged (TCP_INFO's
    /// `tcpi_retransmits`, the timeouts not yet recovered from): the path has said nothing
    /// for longer than the kernel's RTO. A WiFi that vanished looks like this within a few
    /// hundred milliseconds, seconds before the user timeout breaks the connection; a new
    /// small foreground IROB avoids it as it avoids a suspect one
    /// (`Session::best_connection`).
    pub timed_out: bool,
}

impl KernelQueue {
    /// Bytes a new byte written now waits behind at the path's bottleneck, given the path's
    /// bandwidth-delay product `pipe`: everything unsent, and what is in flight beyond the
    /// pipe. Bytes in flight within the pipe are on their way (or their acknowledgement is)
    /// and hold nothing up; on a 400 ms, 2 Mbit/s 3G path that is 100 KB that counting every
    /// unacknowledged byte took for 400 ms of queue. (Underestimates right after a burst:
    /// bytes just sent sit at the bottleneck, not spread over the pipe; by at most a window.)
    pub fn ahead(&self, pipe: u64) -> u64 {
        self.unsent + self.in_flight.saturating_sub(pipe)
    }

    /// All bytes the socket holds.
    pub fn total(&self) -> u64 {
        self.in_flight + self.unsent
    }
}

impl Session {
    /// Number of connections (any state).
    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }

    /// Established connections and their networks.
    pub fn established_connections(&self) -> Vec<(ConnId, NetId)> {
        self.conns
            .iter()
            .filter(|(_, c)| c.state == ConnState::Established)
            .map(|(&id, c)| (id, c.net))
            .collect()
    }

    /// The driver saw connection `conn` break.
    pub fn connection_closed(&mut self, conn: ConnId, now: Time) {
        let Some(c) = self.conns.remove(&conn) else {
            self.update_down_since(now);
            return;
        };
        let wait = self.retry_wait();
        // On the server a network stays usable as the client last reported it (a broken
        // connection is often a stall, not a vanished network): the server may reopen it after
        // `peer_open_delay` unless the client does first or reports it unusable.
        if let Some(n) = self.networks.get_mut(&c.net) {
            n.opening = false;
            n.retry_at = now + wait;
        }
        self.recover_after_break(conn);
        self.flow_conn_lost(conn);
        if self.goodbye_on == Some(conn) && !self.is_finished() {
            self.goodbye_on = None;
            self.goodbye_sent = false;
        }
        // The first handshake broke: a connection waiting for it takes over.
        if self.secret.is_none() && !self.conns.values().any(|c| c.state == ConnState::HelloSent) {
            if let Some(&w) = self
                .conns
                .iter()
                .find(|(_, c)| c.state == ConnState::Waiting)
                .map(|(id, _)| id)
            {
                self.send_hello(w, now);
            }
        }
        self.update_down_since(now);
        self.maybe_open(now);
    }

    pub(super) fn update_down_since(&mut self, now: Time) {
        let any_up = self
            .conns
            .values()
            .any(|c| c.state == ConnState::Established);
        if any_up || self.is_finished() {
            self.all_down_since = None;
        } else if self.all_down_since.is_none() && self.established {
            self.all_down_since = Some(now);
        }
    }

    /// A frame arrived on `conn`. Protocol violations close the connection (or, for limits the
    /// peer exceeds, the multi-socket); the reason is in the resulting event.
    pub fn handle_frame(&mut self, conn: ConnId, frame: Frame, now: Time) {
        let Some(state) = self.conns.get(&conn).map(|c| c.state) else {
            return;
        };
        let result = match (state, frame) {
            (ConnState::Established, f) => self.handle_established(conn, f, now),
            (ConnState::Closing, _) => Ok(()),
            (_, Frame::Error { reason, .. }) => Err(format!("peer refused: {reason}")),
            (s, f) => self.handle_handshake(conn, s, f, now),
        };
        if let Err(reason) = result {
            self.close_conn_with_error(conn, reason, now);
        } else if let Some(held) = self.flooded_by(conn) {
            let reason = format!(
                "the peer asks for more answers (probe replies, Have) than it reads: {held} \
                 bytes queued, past the limit of {}",
                self.config.max_control_bytes
            );
            self.close_conn_with_error(conn, reason, now);
        }
        if !self.acks.is_empty() {
            self.acks_since.get_or_insert(now);
        }
        self.drop_deliveries(now);
        self.check_thunks(now);
    }

    /// The memory held for answers on every connection, if it is past
    /// `Config::max_control_bytes` and connection `conn` (which just asked) holds some.
    fn flooded_by(&self, conn: ConnId) -> Option<usize> {
        let c = self.conns.get(&conn)?;
        if c.state == ConnState::Closing || c.answer_bytes() == 0 {
            return None;
        }
        let held: usize = self.conns.values().map(|c| c.answer_bytes()).sum();
        (held > self.config.max_control_bytes).then_some(held)
    }

    /// A decoder error on `conn`: close only that connection.
    pub fn malformed(&mut self, conn: ConnId, reason: String, now: Time) {
        self.close_conn_with_error(conn, format!("malformed frame: {reason}"), now);
    }

    pub(super) fn close_conn_with_error(&mut self, conn: ConnId, reason: String, now: Time) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.control.clear();
            c.asked.clear();
            c.control.push(Frame::Error {
                reason: reason.clone(),
                fatal: false,
            });
            c.state = ConnState::Closing;
        }
        self.events
            .push_back(Event::CloseConnection { conn, reason });
        // Treat as broken now: nothing more is scheduled on it.
        let keep_control = self.conns.get(&conn).map(|c| c.control.clone());
        self.connection_closed(conn, now);
        if let Some(control) = keep_control {
            // Keep the connection only to flush the error frame.
            let mut c = Conn::new(u32::MAX, ConnState::Closing, now);
            c.control = control;
            self.conns.insert(conn, Box::new(c));
        }
    }

    /// Forget a connection the driver has closed after a `CloseConnection` event.
    pub fn forget_connection(&mut self, conn: ConnId, now: Time) {
        if self
            .conns
            .get(&conn)
            .is_some_and(|c| c.state == ConnState::Closing)
        {
            self.conns.remove(&conn);
        } else {
            self.connection_closed(conn, now);
        }
    }

    pub(super) fn handle_established(
        &mut self,
        conn: ConnId,
        frame: Frame,
        now: Time,
    ) -> Result<(), String> {
        // Anything arriving shows the connection is alive.
        if let Some(c) = self.conns.get_mut(&conn) {
            c.suspect_since = None;
            c.heard = now;
        }
        match frame {
            Frame::Data(chunk) => {
                // Data in either direction makes the connection busy (no active probe).
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.last_data = now;
                }
                for a in &chunk.acks {
                    self.on_ack(*a, now);
                }
                self.on_chunk(chunk, now)
            }
            Frame::Ack { acks } => {
                for a in acks {
                    self.on_ack(a, now);
                }
                Ok(())
            }
            Frame::ResendRequest { irobs } => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.asked.extend(irobs);
                }
                Ok(())
            }
            Frame::Have { entries } => {
                for e in entries {
                    self.on_have(e, now);
                }
                Ok(())
            }
            Frame::Estimate { networks } => {
                self.absorb_netinfos(&networks, now);
                Ok(())
            }
            Frame::Probe { id, padding } => {
                let size = padding as u64 + HEADER_LEN as u64;
                self.conns
                    .get_mut(&conn)
                    .unwrap()
                    .control
                    .push(Frame::ProbeReply {
                        id,
                        probe_size: size,
                    });
                Ok(())
            }
            Frame::ProbeReply { id, probe_size } => {
                let c = self.conns.get_mut(&conn).unwrap();
                if let Some((sent, size)) = c.probes.remove(&id) {
                    let net = c.net;
                    if let Some(n) = self.networks.get_mut(&net) {
                        n.estimate
                            .probe_sample(size.max(probe_size), now.saturating_since(sent));
                    }
                }
                Ok(())
            }
            Frame::Goodbye { irobs } => {
                self.arrivals += 1;
                self.peer_irobs = Some(irobs);
                Ok(())
            }
            Frame::Error {
                reason,
                fatal: true,
            } => {
                // The peer gave up on the multi-socket (aborted, or we exceeded a limit): fail
                // now rather than after every connection has stayed down `failure_timeout`.
                self.fail(Failure::PeerFailed(reason));
                Ok(())
            }
            Frame::Error { reason, .. } => Err(format!("peer closed the connection: {reason}")),
            Frame::Credit {
                limit,
                rate,
                feed_forward_kib,
                proactive,
            } => {
                self.on_credit(limit, rate, feed_forward_kib, proactive, now);
                Ok(())
            }
            other => Err(format!(
                "unexpected {} frame on an established connection",
                other.name()
            )),
        }
    }
}
