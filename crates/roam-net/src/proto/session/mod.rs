//! The multi-socket protocol state machine (sans-IO): one [`Session`] per multi-socket.
//!
//! A driver hands the session events (a connection opened or broke, a frame arrived, TCP_INFO
//! was sampled, a timer fired, a network appeared) together with the current time, and asks it
//! for output: the next frame to write on a connection ([`Session::poll_transmit`]), events for
//! the driver ([`Session::poll_event`]: open or close a connection, fire a thunk) and the next
//! deadline ([`Session::poll_timeout`]). Nothing here reads a clock or touches a socket, so the
//! same code runs under tokio and under the virtual clock of the property tests.
//!
//! Sender (paper §4.2): per-label FIFOs of IROBs; a connection that can send takes the next chunk
//! of the first IROB of its highest-priority label. Foreground small IROBs go to the
//! lowest-latency network, foreground large ones to the highest-bandwidth network, whole (never
//! striped); background IROBs are striped chunk by chunk over the networks not carrying
//! foreground data. Every IROB's bytes are kept until the peer acknowledges the IROB.
//!
//! Receiver: chunks from all connections are reassembled; an IROB is released only when its
//! dependencies have been delivered; once any byte of an IROB is delivered no other IROB's bytes
//! are delivered until it completes (only foreground IROBs are streamed before they are
//! complete); among ready IROBs, higher priority first, FIFO within a label.
//!
//! Failover: when a connection breaks, the sender asks the receiver (over another connection)
//! which bytes of the IROBs it had sent on the broken one have arrived and resends the rest. The
//! application sees a failure only when no connection has been up for `failure_timeout`.
//!
//! The state machine is one struct; its parts live in submodules along the protocol's seams:
//! `config`, `connections` (and the frame dispatch), `handshake`, `networks` (and
//! reconnection), `sending`, `deferral`, `placement`, `transmit`, `recovery`,
//! `receiving`. They share `Session`'s fields; each documents its idea and the paper section.

mod config;
mod connections;
mod deferral;
pub mod flow;
mod handshake;
mod networks;
mod placement;
#[cfg(test)]
mod probe_tests;
mod receiving;
mod recovery;
mod selection;
#[cfg(test)]
mod selection_tests;
mod sending;
#[cfg(test)]
mod tests;
mod transmit;
mod waiting;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use bytes::Bytes;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use roam_core::Time;
use thiserror::Error;

use super::auth::Secret;
use super::estimate::NetworkEstimate;
use super::label::Label;
use super::wire::{Frame, NetInfo, WireLimits, KEY_LEN};

pub use config::{Config, ConfigError, LabelPolicy, NetworkChoice};
use connections::{Conn, ConnState};
pub use connections::{KernelQueue, ASKED_COST, ESTIMATE_EVERY, SUSPECT_FOR};
use flow::Flow;
pub use flow::{FlowConfig, FlowPolicy, FlowStats, Memory};
use networks::Network;
pub use networks::{
    NetKind, PathLoad, TcpSample, NET_CELLULAR, NET_METERED, NET_USABLE, THROUGHPUT_INTERVAL,
};
pub use placement::{anticipatory_budget, KernelWindow, UNMEASURED_CAP};
use receiving::InIrob;
pub use receiving::{DEP_OVERHEAD, MAX_PENDING_ACKS, MERGE_BELOW, PIECE_OVERHEAD};
pub use recovery::HAVE_RANGES;
pub use selection::{Redundancy, TransferEnergy};
use sending::OutIrob;
pub use transmit::{ACK_BYTES, PROBE_SIZES};
pub use waiting::IROB_SPAN;
use waiting::{DepWait, IdSet};

/// A driver's name for one TCP connection.
pub type ConnId = u64;

/// A network, named by the client's identifier for its local interface.
pub type NetId = u32;

/// An IROB id: unique and increasing per multi-socket and direction, starting at 0.
pub type IrobId = u64;

/// A driver's name for a registered thunk.
pub type ThunkId = u64;

/// Why a send could not be accepted.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SendError {
    /// No appropriate network can carry the label now (or its backlog is over the bound); the
    /// thunk given will fire when it can.
    #[error(
        "deferred: no appropriate network can carry {0} data now; the thunk will fire when one can"
    )]
    Deferred(Label),
    /// As `Deferred`, but no thunk was given: retry when the multi-socket is writable.
    #[error("would block: {0} data cannot be sent now")]
    WouldBlock(Label),
    /// A dependency names an IROB that is not lower than the new one.
    #[error("IROB {irob} cannot depend on IROB {dep}: dependencies must name lower ids")]
    BadDependency {
        /// The new IROB's id.
        irob: IrobId,
        /// The offending dependency.
        dep: IrobId,
    },
    /// More dependencies than the limit.
    #[error("{0} dependencies exceed the limit of {1}")]
    TooManyDeps(usize, usize),
    /// The IROB would exceed the size limit.
    #[error("IROB {0} would exceed the size limit of {1} bytes")]
    TooLarge(IrobId, u64),
    /// The send buffer (`Config::max_send_buffer`) is full: retry once the peer has
    /// acknowledged some of it (a non-blocking `irob_send`).
    #[error("the send buffer is full")]
    BufferFull,
    /// The IROB is not open (never begun, already ended, or not ours).
    #[error("IROB {0} is not open")]
    NotOpen(IrobId),
    /// `close` was called: no new IROBs.
    #[error("the multi-socket is closing: no new IROBs")]
    Closing,
    /// The multi-socket failed.
    #[error("the multi-socket failed: {0}")]
    Failed(Failure),
}

/// Why a multi-socket failed: what every pending and later call reports.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum Failure {
    /// No connection was up for `Config::failure_timeout`.
    #[error("no network has been usable for {0:?}")]
    NoNetwork(Duration),
    /// This side gave up ([`Session::abort`]), for the reason given.
    #[error("aborted: {0}")]
    Aborted(String),
    /// The peer gave up (a fatal `Error` frame), with its reason.
    #[error("the peer failed the multi-socket: {0}")]
    PeerFailed(String),
    /// The peer sent bytes of an IROB beyond `Config::max_irob_size`.
    #[error("peer sent IROB {irob} beyond the size limit of {limit} bytes")]
    IrobTooLarge {
        /// The IROB.
        irob: IrobId,
        /// `Config::max_irob_size`.
        limit: u64,
    },
    /// The peer had more than `Config::max_pending_irobs` IROBs unfinished here.
    #[error("peer has more than {0} unfinished IROBs")]
    TooManyPending(usize),
    /// The peer made this side hold more than `Config::receive_limit` unacknowledged bytes
    /// (payload and bookkeeping: `PIECE_OVERHEAD` per piece, `DEP_OVERHEAD` per dependency).
    #[error(
        "peer exceeded the receive limit: {held} unacknowledged bytes buffered, payload and \
         bookkeeping (limit {limit})"
    )]
    ReceiveLimit {
        /// Bytes held.
        held: u64,
        /// `Config::receive_limit`.
        limit: u64,
    },
    /// The peer sent a chunk of an IROB [`IROB_SPAN`] or more ids beyond the lowest one not
    /// acknowledged here (an honest sender stays within it).
    #[error(
        "peer sent IROB {irob}, {span} or more beyond IROB {lowest_unacknowledged}, the lowest \
         not yet acknowledged"
    )]
    IrobTooFar {
        /// The IROB.
        irob: IrobId,
        /// The lowest IROB id not acknowledged here.
        lowest_unacknowledged: IrobId,
        /// [`IROB_SPAN`].
        span: u64,
    },
    /// The peer sent more payload than the credit this side granted allowed (`flow`): an
    /// honest peer stays within the limit plus the feed-forward it was given.
    #[error(
        "peer sent {received} payload bytes, beyond the {bound} its credit allowed (flow \
         control)"
    )]
    CreditExceeded {
        /// Payload bytes received for the first time, in all.
        received: u64,
        /// The most the credit granted allowed.
        bound: u64,
    },
    /// The application released the multi-socket (dropped its last handle) and it made no
    /// progress (none of its data acknowledged or newly sent, no goodbye from the peer) for
    /// `Config::release_timeout`.
    #[error("released by the application and no progress for {0:?}")]
    Released(Duration),
}

/// Something the driver must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Open a TCP connection to the peer over this network, then call
    /// [`Session::add_connection`] (or [`Session::open_failed`] if it fails). The client opens
    /// it over its local network `net`; the server to the client's network `net`, at
    /// [`Session::peer_address`].
    OpenConnection {
        /// The network.
        net: NetId,
    },
    /// Flush what was transmitted and close this connection; `reason` is for the log.
    CloseConnection {
        /// The connection.
        conn: ConnId,
        /// Why.
        reason: String,
    },
    /// A deferred send's cause has cleared: run the thunk.
    ThunkReady(ThunkId),
    /// The multi-socket is established (first handshake done).
    Established,
    /// The multi-socket failed; every pending call should return this reason.
    Failed(Failure),
    /// A scheduling decision, for the log (only with [`Config::trace`]).
    Trace(String),
}

/// One delivery to the application: bytes of exactly one IROB.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The IROB the bytes belong to.
    pub irob: IrobId,
    /// Its label.
    pub label: Label,
    /// Offset of `data` within the IROB.
    pub offset: u64,
    /// The bytes.
    pub data: Bytes,
    /// These are the IROB's last bytes.
    pub end: bool,
}

/// A frame to write: `head` then `data`.
#[derive(Debug, Clone, Default)]
pub struct Transmit {
    /// Header and small body.
    pub head: Vec<u8>,
    /// Chunk payload.
    pub data: Bytes,
    /// Bytes of background data in this frame (to charge against the anticipatory cap).
    pub background: u64,
}

impl Transmit {
    /// Total length on the wire.
    pub fn len(&self) -> usize {
        self.head.len() + self.data.len()
    }
    /// Whether empty (never produced).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Which side of the multi-socket this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Opened the multi-socket (sent `Hello`).
    Client,
    /// Accepted it.
    Server,
}

/// The protocol state of one multi-socket.
pub struct Session {
    role: Role,
    config: Config,
    rng: ChaCha20Rng,
    session_id: u64,
    my_key: [u8; KEY_LEN],
    secret: Option<Secret>,
    established: bool,
    failed: Option<Failure>,
    closing: bool,
    goodbye_sent: bool,
    /// The connection our `Goodbye` went out on: if it breaks, the goodbye may be lost with it
    /// and is sent again (a repeated goodbye is harmless).
    goodbye_on: Option<ConnId>,
    peer_window: u64,
    /// Credit-based flow control, once negotiated (`flow`).
    flow: Flow,
    /// Boxed: an ordered map's node holds eleven values inline, so a session with one
    /// connection and one network held two nodes of several KiB each (issue 48's memory per
    /// idle session).
    conns: BTreeMap<ConnId, Box<Conn>>,
    networks: BTreeMap<NetId, Box<Network>>,
    events: VecDeque<Event>,
    all_down_since: Option<Time>,
    last_foreground: Option<Time>,
    /// The latest foreground activity another multi-socket on this device reported (through
    /// the driver; see [`Session::foreground_elsewhere`]).
    foreground_elsewhere: Option<Time>,
    next_probe_id: u64,
    /// The networks as the last `Estimate` announced them, estimates aside
    /// ([`Session::topology`]): a change goes out even over a quiet cellular connection.
    announced: Vec<NetInfo>,
    /// Meatballs' network selection, once `Config::redundancy` has had a decision to make.
    selector: Option<selection::Selector>,
    // sender
    next_irob: IrobId,
    out: BTreeMap<IrobId, OutIrob>,
    sendable: [BTreeSet<IrobId>; 4],
    /// Per label, the bytes of IROBs in `out` not yet handed to a connection (the sum of their
    /// `pending`; see [`Session::check_invariants`]).
    unsent: [u64; 4],
    /// Bytes sent of unacknowledged IROBs (the sum of their `sent_hi`): what the peer's window
    /// bounds.
    outstanding: u64,
    buffered: u64,
    doubt: BTreeSet<IrobId>,
    /// Small foreground IROBs sent a second time by [`Session::hedge_late_foreground`].
    hedges_sent: u64,
    /// Payload bytes received a second time (`Session::duplicate_bytes`).
    duplicate_bytes: u64,
    /// Events that may let `recv` return something new (see [`Session::arrivals`]).
    arrivals: u64,
    /// IROBs asked about: on which connection, when.
    requested: BTreeMap<IrobId, (ConnId, Time)>,
    deferred: [Vec<ThunkId>; 4],
    // receiver
    incoming: BTreeMap<IrobId, InIrob>,
    /// Per label, the IROBs the application may take bytes of now (dependencies delivered;
    /// complete, or foreground and streaming): `recv` takes the first of the highest label.
    ready: [BTreeSet<IrobId>; 4],
    acked: IdSet,
    /// Complete IROBs waiting for their dependencies to be acknowledged.
    ack_wait: DepWait,
    delivered: IdSet,
    /// IROBs waiting for their dependencies to be delivered.
    delivery_wait: DepWait,
    current: Option<IrobId>,
    /// IROBs to acknowledge in the next frames (a set: a resend acknowledged again is not
    /// queued twice); at most [`MAX_PENDING_ACKS`] before the driver stops reading.
    acks: BTreeSet<IrobId>,
    /// When the oldest of `acks` was queued, and the payload received since acknowledgements
    /// last went out (`Session::acks_due`).
    acks_since: Option<Time>,
    ack_bytes: u64,
    in_buffered: u64,
    acked_buffered: u64,
    /// Bookkeeping of the IROBs held (`InIrob::bookkeeping`), all and acknowledged ones.
    in_book: u64,
    acked_book: u64,
    peer_irobs: Option<u64>,
    /// When the application released the multi-socket ([`Session::release`]).
    released: Option<Time>,
    /// When this side's close last made progress (data of ours acknowledged or sent for the
    /// first time): a released multi-socket ends `Config::release_timeout` after it.
    progress_at: Time,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("role", &self.role)
            .field("session_id", &self.session_id)
            .field("established", &self.established)
            .field("conns", &self.conns.len())
            .field("unacked", &self.out.len())
            .field("incoming", &self.incoming.len())
            .finish()
    }
}

impl Session {
    fn new(role: Role, config: Config, seed: u64) -> Session {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let mut my_key = [0u8; KEY_LEN];
        rng.fill_bytes(&mut my_key);
        let window = config.window;
        let flow = Flow::new(config.flow);
        Session {
            role,
            config,
            rng,
            session_id: 0,
            my_key,
            secret: None,
            established: false,
            failed: None,
            closing: false,
            goodbye_sent: false,
            goodbye_on: None,
            peer_window: window,
            flow,
            conns: BTreeMap::new(),
            networks: BTreeMap::new(),
            events: VecDeque::new(),
            all_down_since: None,
            last_foreground: None,
            foreground_elsewhere: None,
            next_probe_id: 0,
            announced: Vec::new(),
            selector: None,
            next_irob: 0,
            out: BTreeMap::new(),
            sendable: Default::default(),
            unsent: [0; 4],
            outstanding: 0,
            buffered: 0,
            doubt: BTreeSet::new(),
            hedges_sent: 0,
            duplicate_bytes: 0,
            requested: BTreeMap::new(),
            arrivals: 0,
            deferred: Default::default(),
            incoming: BTreeMap::new(),
            ready: Default::default(),
            acked: IdSet::default(),
            ack_wait: DepWait::default(),
            delivered: IdSet::default(),
            delivery_wait: DepWait::default(),
            current: None,
            acks: BTreeSet::new(),
            acks_since: None,
            ack_bytes: 0,
            in_buffered: 0,
            acked_buffered: 0,
            in_book: 0,
            acked_book: 0,
            peer_irobs: None,
            released: None,
            progress_at: Time::ZERO,
        }
    }

    /// A client multi-socket. `seed` feeds the key and nonce generator: give it real randomness.
    pub fn client(config: Config, seed: u64) -> Session {
        Session::new(Role::Client, config, seed)
    }

    /// A server multi-socket with the given session id; hand it the connection that carried the
    /// client's `Hello` with [`Session::accept_connection`].
    pub fn server(config: Config, seed: u64, session_id: u64) -> Session {
        let mut s = Session::new(Role::Server, config, seed);
        s.session_id = session_id;
        s
    }

    /// This side's role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The session id (known to the client once the first handshake completes).
    pub fn session_id(&self) -> u64 {
        self.session_id
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Whether the first handshake has completed.
    pub fn is_established(&self) -> bool {
        self.established
    }

    /// Why the multi-socket failed, if it did.
    pub fn failure(&self) -> Option<&Failure> {
        self.failed.as_ref()
    }

    /// Both sides have said goodbye and everything we sent is acknowledged: the connections may
    /// close without the session treating it as a failure.
    pub fn is_finished(&self) -> bool {
        self.closing && self.out.is_empty() && self.goodbye_sent && self.peer_irobs.is_some()
    }

    fn fail(&mut self, failure: Failure) {
        if self.failed.is_some() {
            return;
        }
        self.arrivals += 1;
        let reason = failure.to_string();
        self.failed = Some(failure.clone());
        let ids: Vec<ConnId> = self.conns.keys().copied().collect();
        for id in ids {
            let c = self.conns.get_mut(&id).unwrap();
            c.control.clear();
            c.asked.clear();
            c.control.push(Frame::Error {
                reason: reason.clone(),
                fatal: true,
            });
            c.state = ConnState::Closing;
            self.events.push_back(Event::CloseConnection {
                conn: id,
                reason: reason.clone(),
            });
        }
        self.events.push_back(Event::Failed(failure));
        // Wake every deferred sender: they will see the failure.
        for l in 0..4 {
            for t in self.deferred[l].drain(..) {
                self.events.push_back(Event::ThunkReady(t));
            }
        }
    }

    /// Whether `close` was called (sends are refused from then on).
    pub fn is_closing(&self) -> bool {
        self.closing
    }

    /// Stop sending new IROBs; a `Goodbye` follows once every IROB is acknowledged.
    pub fn close(&mut self) {
        self.closing = true;
        for l in &mut self.deferred {
            l.clear();
        }
    }

    /// The application has let go of the multi-socket (its last handle was dropped): no new
    /// IROBs (as [`Session::close`]); what was sent is still delivered and the `Goodbye`
    /// follows, while whatever the peer sends is taken and dropped (nobody will read it). The
    /// multi-socket then ends when both sides have said goodbye, or fails
    /// ([`Failure::Released`]) once `Config::release_timeout` passes without progress: none
    /// of its data acknowledged or sent for the first time. So a peer that keeps its
    /// connections open and silent holds a released multi-socket (and a listener's slot) for
    /// that long, not for ever.
    pub fn release(&mut self, now: Time) {
        if self.released.is_some() {
            return;
        }
        self.released = Some(now);
        self.progress_at = now;
        self.close();
        self.drop_deliveries(now);
    }

    /// Whether the application released the multi-socket ([`Session::release`]).
    pub fn is_released(&self) -> bool {
        self.released.is_some()
    }

    /// A released multi-socket takes every delivery as it becomes ready, and drops it.
    fn drop_deliveries(&mut self, now: Time) {
        if self.released.is_some() {
            while self.recv(now).is_some() {}
        }
    }

    /// When a released multi-socket gives up waiting for progress, if it is one that waits.
    fn release_deadline(&self) -> Option<Time> {
        self.released?;
        if self.failed.is_some() || self.is_finished() {
            return None;
        }
        Some(self.progress_at + self.config.release_timeout)
    }

    /// Give up now: an `Error` frame with `reason` is queued for the peer, every connection
    /// closes and every pending call sees the failure (an application-level reset; unsent data
    /// is lost).
    pub fn abort(&mut self, reason: &str) {
        self.fail(Failure::Aborted(reason.to_string()));
    }

    /// Whether everything sent has been acknowledged and the goodbye is out.
    pub fn is_drained(&self) -> bool {
        self.closing && self.out.is_empty() && self.goodbye_sent
    }

    /// Bytes accepted from the application and not yet acknowledged by the peer.
    pub fn unacknowledged(&self) -> u64 {
        self.buffered
    }

    /// Nothing for a timer to watch between [`Session::poll_timeout`]'s deadlines: nothing
    /// unacknowledged, no deferred thunk waiting for its label, no IROB in doubt. The runtime's
    /// ticker then sleeps up to a second instead of 100 ms (a relay's idle sessions).
    pub fn is_quiet(&self) -> bool {
        self.buffered == 0 && self.doubt.is_empty() && self.deferred.iter().all(|d| d.is_empty())
    }

    /// How many small foreground IROBs this session has sent a second time over another
    /// network because they went unacknowledged too long (see [`LabelPolicy::hedge`]). Whether a
    /// hedge was needed is not known here (the peer acknowledges both copies alike); the
    /// count bounds what hedging cost: at most that many small IROBs' bytes.
    pub fn hedges_sent(&self) -> u64 {
        self.hedges_sent
    }

    /// Payload bytes that arrived here a second time: hedged copies, and resends after a
    /// connection broke of bytes the first connection had delivered after all. What roam's
    /// recovery cost on the wire beyond the application's data (headers not counted).
    pub fn duplicate_bytes(&self) -> u64 {
        self.duplicate_bytes
    }

    /// Check the session's running counts against what they count (for tests and fuzzing; it
    /// walks every IROB): per label the bytes not yet sent, the bytes sent of unacknowledged
    /// IROBs (what the window bounds), the bytes held for sending, and the receiver's bytes
    /// held and held acknowledged. The first mismatch, named.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut unsent = [0u64; 4];
        let (mut sent, mut held) = (0, 0);
        for o in self.out.values() {
            unsent[o.label.rank()] += o.pending.len();
            sent += o.sent_hi;
            held += o.len;
        }
        let (mut received, mut acked) = (0, 0);
        for i in self.incoming.values() {
            let bytes: u64 = i.segments.values().map(|b| b.len() as u64).sum();
            received += bytes;
            if i.acked {
                acked += bytes;
            }
        }
        let counts = [
            (
                "unsent bytes per label",
                format!("{:?}", self.unsent),
                format!("{unsent:?}"),
            ),
            (
                "bytes sent of unacknowledged IROBs",
                self.outstanding.to_string(),
                sent.to_string(),
            ),
            (
                "bytes held for sending",
                self.buffered.to_string(),
                held.to_string(),
            ),
            (
                "bytes received and held",
                self.in_buffered.to_string(),
                received.to_string(),
            ),
            (
                "acknowledged bytes held",
                self.acked_buffered.to_string(),
                acked.to_string(),
            ),
        ];
        for (what, kept, actual) in counts {
            if kept != actual {
                return Err(format!("{what}: counted {kept}, actually {actual}"));
            }
        }
        self.check_receiver()
    }

    /// The next driver event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When [`Session::handle_timeout`] should next be called.
    pub fn poll_timeout(&self) -> Option<Time> {
        let mut t = None::<Time>;
        let mut at = |x: Time| t = Some(t.map_or(x, |y| y.min(x)));
        if let Some(since) = self.all_down_since {
            if self.failed.is_none() {
                at(since + self.config.failure_timeout);
            }
        }
        // Reconnects: networks that are up but have no connection (re)open at `retry_at`.
        for (_, retry_at) in self.unconnected() {
            at(retry_at);
        }
        // Lost acknowledgements and answers (`recheck_unacknowledged`).
        let ack = self.config.ack_timeout;
        for &(_, asked) in self.requested.values() {
            at(asked + ack);
        }
        for (id, irob) in &self.out {
            if irob.sent_whole() && !self.doubt.contains(id) {
                at(irob.last_sent + ack);
            }
        }
        for c in self.conns.values() {
            if c.state.in_handshake() {
                at(c.opened + self.config.handshake_timeout);
            }
        }
        if let Some(t) = self.release_deadline() {
            at(t);
        }
        // The pacer (`flow::sender`).
        if let Some(t) = self.pacing_deadline() {
            at(t);
        }
        // Coalesced acknowledgements (`acks_due`).
        if let Some(t) = self.ack_deadline() {
            at(t);
        }
        // Hedges (`hedge_late_foreground`).
        for (_, _, due) in self.hedges() {
            at(due);
        }
        for c in self.conns.values() {
            // A cellular connection is not probed while idle (`NetKind::cellular`).
            if c.state == ConnState::Established && !self.is_cellular(c.net) {
                at(c.next_idle_probe(self.config.probe_interval));
            }
        }
        t
    }

    /// Timers: failure timeout, reconnects, lost acknowledgements, thunks.
    pub fn handle_timeout(&mut self, now: Time) {
        self.pacing_timeout(now);
        if self.release_deadline().is_some_and(|t| now >= t) {
            self.fail(Failure::Released(self.config.release_timeout));
        }
        self.expire_handshakes(now);
        self.maybe_open(now);
        self.recheck_unacknowledged(now);
        self.hedge_late_foreground(now);
        self.check_thunks(now);
    }
}

fn encode(f: &Frame, background: u64) -> Transmit {
    let mut head = Vec::with_capacity(64);
    let data = f.encode(&mut head);
    Transmit {
        head,
        data,
        background,
    }
}
