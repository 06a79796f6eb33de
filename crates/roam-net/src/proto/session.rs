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

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use bytes::Bytes;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use roam_core::{BitRate, Time};
use thiserror::Error;

use super::auth::{proofs_equal, Secret};
use super::estimate::NetworkEstimate;
use super::label::Label;
use super::ranges::RangeSet;
use super::wire::{Chunk, Deps, Frame, HaveEntry, NetInfo, WireLimits, KEY_LEN, NONCE_LEN};

/// A driver's name for one TCP connection.
pub type ConnId = u64;
/// A network, named by the client's identifier for its local interface.
pub type NetId = u32;
/// An IROB id: unique and increasing per multi-socket and direction, starting at 0.
pub type IrobId = u64;
/// A driver's name for a registered thunk.
pub type ThunkId = u64;

/// Flag bit of [`NetInfo::flags`]: the network is metered.
pub const NET_METERED: u32 = 1;
/// Flag bit of [`NetInfo::flags`]: the network is usable.
pub const NET_USABLE: u32 = 2;

/// Most byte ranges one `Have` entry names. An answer naming fewer ranges than are held is
/// still correct (the sender resends the rest, which is discarded as a duplicate); naming all
/// of them would let one 8-byte question about an IROB that a hostile peer had sent as
/// thousands of one-byte pieces ask for 64 KiB of answer, 256 MiB for one `ResendRequest`.
pub const HAVE_RANGES: usize = 32;
/// Most control frames queued on one connection. The peer's probes and resend requests queue
/// answers here; a peer that keeps asking without reading the answers would grow the queue
/// without bound, so past this the connection is closed (an honest peer asks a few at a time).
pub const MAX_CONTROL: usize = 8192;
/// Encoded length of a `Have` entry without its ranges.
const HAVE_ENTRY_LEN: usize = 24;

/// Bytes queued on a connection whose network has no bandwidth estimate yet below which a
/// small foreground IROB still counts it by its RTT alone (see `Session::best_connection`).
const UNKNOWN_QUEUE_OK: u64 = 4 * 1024;

/// Sizes of the two active probes; their response times separate latency from bandwidth.
/// Together (with their frame headers) they fit in TCP's initial window of 10 segments, which
/// is also what an idle connection restarts with: a larger probe waits a round trip for the
/// window to open, which the fit reads as a slow network. With 16 KiB the client's first
/// estimate of the hotspot's 3G (2 Mbit/s, 400 ms) was 0.35 Mbit/s; with 12 KiB, 1.90.
pub const PROBE_SIZES: [u32; 2] = [64, 12 * 1024];
const _: () = assert!(
    PROBE_SIZES[0] + PROBE_SIZES[1] + 2 * super::wire::HEADER_LEN as u32 <= 10 * 1448,
    "the probes must fit in TCP's initial window"
);

/// How loaded a connection's path was over a throughput sample's interval, which decides what
/// the throughput says about the network's bandwidth ([`Session::tcp_info`]). Ordered from
/// lightest to heaviest: an interval is only as loaded as its lighter end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PathLoad {
    /// The socket ran dry: a trickle of small messages says little of the path; a lower bound
    /// that only raises an existing estimate (probes give the first).
    Light,
    /// The socket held data throughout but no queue built (the sender, or a cap, limited the
    /// rate): a lower bound, which raises the estimate or becomes the first one.
    Backlogged,
    /// A queue had built on the path and the socket held data throughout: the throughput is
    /// the bandwidth.
    Saturated,
}

/// Background bytes a connection may hold before its network has a bandwidth estimate,
/// beyond the kernel's window while it probes (see [`Session::background_cap`]).
pub const UNMEASURED_CAP: u64 = 16 * 1024;

/// Tunables and limits of a multi-socket.
#[derive(Clone, Debug)]
pub struct Config {
    /// Largest data chunk.
    pub chunk_size: usize,
    /// Unacknowledged bytes in flight before new IROBs wait (also announced as receive window).
    pub window: u64,
    /// Largest IROB accepted (either direction).
    pub max_irob_size: u64,
    /// Most dependencies per IROB.
    pub max_deps: usize,
    /// Most IROBs the receiver holds unfinished at once.
    pub max_pending_irobs: usize,
    /// Bytes the application may queue for sending before calls would block.
    pub max_send_buffer: u64,
    /// Most TCP connections per multi-socket.
    pub max_connections: usize,
    /// A connection still in its handshake this long after it opened (hello or join sent,
    /// challenged, proof sent) is closed: a half-open join must not hold a connection slot
    /// for anyone who merely knows the session id.
    pub handshake_timeout: Duration,
    /// Most networks a peer may announce (server side; further network ids in its `Hello` or
    /// `Estimate` frames are ignored). Each announced network is a connection the server may
    /// open, so a peer must not be able to name thousands.
    pub max_networks: usize,
    /// The application sees a failure when no connection has been up this long.
    pub failure_timeout: Duration,
    /// Probe a connection whose network has been idle this long.
    pub probe_interval: Duration,
    /// Wait before reopening a connection over a network that is up.
    pub reconnect_backoff: Duration,
    /// The server opens a connection over a client network that accepts them (its `NetInfo`
    /// names a port) once the network has been usable without a connection this long and the
    /// server has data to send. The client, which sees its networks first, normally reopens
    /// within `reconnect_backoff`; this is the other peer's turn (paper §4.2: either peer may
    /// open a connection). `None`: the server never opens one.
    pub peer_open_delay: Option<Duration>,
    /// An IROB sent completely and not acknowledged this long, or asked about (`ResendRequest`)
    /// and not answered this long, is asked about (again): the acknowledgement or answer may
    /// have gone out on a connection that broke before the peer noticed (see
    /// `Session::recheck_unacknowledged`).
    pub ack_timeout: Duration,
    /// Send a late small foreground IROB again over another network (see
    /// `Session::hedge_late_foreground`).
    pub hedge: bool,
    /// Background may use metered networks (the deferral policy's default: yes).
    pub background_on_metered: bool,
    /// A thunk-carrying send is deferred when its label's unsent backlog exceeds this much time
    /// at the estimated bandwidth of its appropriate networks.
    pub backlog_bound: Duration,
    /// Frame decoder limits.
    pub wire: WireLimits,
    /// Report scheduling decisions as [`Event::Trace`] lines (where a foreground IROB went,
    /// and why; hedges): for tracing a slow message after the fact. Off by default.
    pub trace: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            chunk_size: 256 * 1024,
            window: 16 << 20,
            max_irob_size: 64 << 20,
            max_deps: 1024,
            max_pending_irobs: 1 << 16,
            max_send_buffer: 64 << 20,
            max_connections: 16,
            max_networks: 8,
            handshake_timeout: Duration::from_secs(10),
            failure_timeout: Duration::from_secs(30),
            probe_interval: Duration::from_secs(10),
            reconnect_backoff: Duration::from_secs(1),
            peer_open_delay: Some(Duration::from_secs(2)),
            ack_timeout: Duration::from_secs(10),
            hedge: true,
            background_on_metered: true,
            backlog_bound: Duration::from_secs(1),
            wire: WireLimits::default(),
            trace: false,
        }
    }
}

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
    /// The IROB is not open (never begun, already ended, or not ours).
    #[error("IROB {0} is not open")]
    NotOpen(IrobId),
    /// The multi-socket is closed or failed.
    #[error("the multi-socket is closed: {0}")]
    Closed(String),
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
    Failed(String),
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ConnState {
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
    fn in_handshake(self) -> bool {
        matches!(
            self,
            ConnState::HelloSent | ConnState::JoinSent | ConnState::Challenged | ConnState::Proved
        )
    }
}

#[derive(Debug)]
struct Conn {
    net: NetId,
    state: ConnState,
    control: VecDeque<Frame>,
    opened: Time,
    my_nonce: [u8; NONCE_LEN],
    peer_nonce: [u8; NONCE_LEN],
    /// When data last went out or came in on this connection: it is probed only when idle in
    /// both directions. (Counting only data sent, the server of the lab's sensing application,
    /// which receives a steady upload and sends nothing, probed 3G every 10 s with 16 KiB
    /// down a link that otherwise carried only ACKs; on the vehicular trace's 3G downlink,
    /// which delivers nothing for seconds at a time, the probe held the upload's ACKs back
    /// 5 s and stalled the client's uplink, and urgent messages with it: mean 2.3 s against
    /// 0.3 s for the baselines.)
    last_data: Time,
    last_probe: Option<Time>,
    probes: BTreeMap<u64, (Time, u64)>,
    /// Foreground bytes handed to this connection whose IROBs are not yet acknowledged: what
    /// a new foreground IROB would queue behind, when the driver does not report the kernel's
    /// send queue (see [`Session::best_connection`]).
    fg_unacked: u64,
    /// The kernel's send queue as the driver last reported it, plus every byte handed to the
    /// connection since (counted as unsent).
    kernel_queue: Option<KernelQueue>,
    /// When a small foreground IROB sent here went unacknowledged past its hedge delay and was
    /// hedged, if nothing has arrived on this connection since: new small foreground IROBs
    /// avoid it ([`Session::best_connection`], [`SUSPECT_FOR`]).
    suspect_since: Option<Time>,
    /// When a frame last arrived on this connection (its opening, before any): of two
    /// suspect connections, the one silent longer is likelier dead.
    heard: Time,
    /// When this connection last carried an `Estimate` (client only; see [`ESTIMATE_EVERY`]).
    last_estimate: Option<Time>,
    /// The peer's address, as the driver saw it ([`Session::connection_from`]).
    peer_addr: Option<[u8; 4]>,
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
    /// ([`Session::best_connection`]).
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

impl Conn {
    /// Suspect at `now`: its kernel reports a retransmission timeout
    /// ([`KernelQueue::timed_out`]), or a hedge left it suspect less than [`SUSPECT_FOR`]
    /// ago with nothing heard since (`suspect_since`).
    fn suspect(&self, now: Time) -> bool {
        self.kernel_queue.is_some_and(|q| q.timed_out)
            || self
                .suspect_since
                .is_some_and(|t| now.saturating_since(t) < SUSPECT_FOR)
    }

    fn new(net: NetId, state: ConnState, now: Time) -> Conn {
        Conn {
            net,
            state,
            control: VecDeque::new(),
            opened: now,
            my_nonce: [0; NONCE_LEN],
            peer_nonce: [0; NONCE_LEN],
            last_data: now,
            last_probe: None,
            probes: BTreeMap::new(),
            fg_unacked: 0,
            kernel_queue: None,
            suspect_since: None,
            heard: now,
            last_estimate: None,
            peer_addr: None,
        }
    }
}

/// A network as this session knows it.
#[derive(Debug, Clone, Default)]
struct Network {
    addr: [u8; 4],
    metered: bool,
    up: bool,
    estimate: NetworkEstimate,
    retry_at: Time,
    opening: bool,
    /// Client: the port of our listener on this network's address (advertised). Server: the
    /// client's port there, where we may open a connection. 0 = none.
    port: u16,
    /// Server: the address an authenticated connection of the client over this network came
    /// from. The server opens connections only there, never to an address merely announced
    /// (a `Hello` or `Estimate` could otherwise point the server at any host and port).
    seen_addr: Option<[u8; 4]>,
    /// Server: one connection attempt is allowed; spent by the attempt, given again when the
    /// client announces the network anew (usable again, another port) or a connection over
    /// it is established. At most one attempt per announcement, however often it is repeated.
    may_open: bool,
}

#[derive(Debug)]
struct OutIrob {
    label: Label,
    deps: Deps,
    segments: BTreeMap<u64, Bytes>,
    len: u64,
    ended: bool,
    pending: RangeSet,
    need_first: bool,
    need_end: bool,
    /// (connection, start, end, carried first, carried end)
    inflight: Vec<(ConnId, u64, u64, bool, bool)>,
    pinned: Option<ConnId>,
    started: bool,
    /// When a chunk of it was last handed to a connection (or it was last asked about).
    last_sent: Time,
    /// Already sent again over a second network (`Session::hedge_late_foreground`).
    hedged: bool,
}

impl OutIrob {
    fn has_work(&self) -> bool {
        !self.pending.is_empty() || self.need_first || (self.need_end && self.ended)
    }

    /// Every byte and the end have been handed to connections: only an acknowledgement is
    /// awaited.
    fn sent_whole(&self) -> bool {
        self.started && self.ended && !self.has_work()
    }

    /// Mark every byte, the first chunk and the end to be sent again (a hedge, or a small
    /// foreground IROB lost with its connection); the caller makes it sendable.
    fn send_whole_again(&mut self) {
        self.pending = RangeSet::new();
        self.pending.insert(0, self.len);
        self.need_first = true;
        self.need_end = true;
    }

    /// The bytes `[start, end)` (one slice when a single segment covers them).
    fn slice(&self, start: u64, end: u64) -> Bytes {
        let (&s0, seg) = self
            .segments
            .range(..=start)
            .next_back()
            .expect("range within data");
        let off = (start - s0) as usize;
        if (end - s0) as usize <= seg.len() {
            return seg.slice(off..(end - s0) as usize);
        }
        let mut out = Vec::with_capacity((end - start) as usize);
        for (&s, seg) in self.segments.range(s0..end) {
            let a = start.max(s) - s;
            let b = (end - s).min(seg.len() as u64);
            out.extend_from_slice(&seg[a as usize..b as usize]);
        }
        Bytes::from(out)
    }
}

#[derive(Debug)]
struct InIrob {
    label: Label,
    deps: Option<Deps>,
    segments: BTreeMap<u64, Bytes>,
    have: RangeSet,
    end: Option<u64>,
    delivered: u64,
    complete: bool,
    acked: bool,
}

/// Ids below a watermark plus a set above it: a compact record of "done" IROBs.
#[derive(Debug, Default, Clone)]
struct IdSet {
    below: u64,
    above: BTreeSet<u64>,
}

impl IdSet {
    fn contains(&self, id: u64) -> bool {
        id < self.below || self.above.contains(&id)
    }
    fn insert(&mut self, id: u64) {
        if id < self.below {
            return;
        }
        self.above.insert(id);
        while self.above.remove(&self.below) {
            self.below += 1;
        }
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

/// The protocol state of one multi-socket.
pub struct Session {
    role: Role,
    config: Config,
    rng: ChaCha20Rng,
    session_id: u64,
    my_key: [u8; KEY_LEN],
    secret: Option<Secret>,
    established: bool,
    failed: Option<String>,
    closing: bool,
    goodbye_sent: bool,
    /// The connection our `Goodbye` went out on: if it breaks, the goodbye may be lost with it
    /// and is sent again (a repeated goodbye is harmless).
    goodbye_on: Option<ConnId>,
    peer_window: u64,
    conns: BTreeMap<ConnId, Conn>,
    networks: BTreeMap<NetId, Network>,
    events: VecDeque<Event>,
    all_down_since: Option<Time>,
    last_foreground: Option<Time>,
    next_probe_id: u64,
    // sender
    next_irob: IrobId,
    out: BTreeMap<IrobId, OutIrob>,
    sendable: [BTreeSet<IrobId>; 4],
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
    by_label: [BTreeSet<IrobId>; 4],
    acked: IdSet,
    unacked_complete: BTreeSet<IrobId>,
    delivered: IdSet,
    current: Option<IrobId>,
    acks: Vec<IrobId>,
    in_buffered: u64,
    acked_buffered: u64,
    peer_irobs: Option<u64>,
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
            conns: BTreeMap::new(),
            networks: BTreeMap::new(),
            events: VecDeque::new(),
            all_down_since: None,
            last_foreground: None,
            next_probe_id: 0,
            next_irob: 0,
            out: BTreeMap::new(),
            sendable: Default::default(),
            outstanding: 0,
            buffered: 0,
            doubt: BTreeSet::new(),
            hedges_sent: 0,
            duplicate_bytes: 0,
            requested: BTreeMap::new(),
            arrivals: 0,
            deferred: Default::default(),
            incoming: BTreeMap::new(),
            by_label: Default::default(),
            acked: IdSet::default(),
            unacked_complete: BTreeSet::new(),
            delivered: IdSet::default(),
            current: None,
            acks: Vec::new(),
            in_buffered: 0,
            acked_buffered: 0,
            peer_irobs: None,
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

    /// The failure reason, if the multi-socket failed.
    pub fn failure(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    // ----- networks -------------------------------------------------------------------------

    /// A local network is up (client side; from the scout).
    pub fn network_up(&mut self, net: NetId, addr: [u8; 4], metered: bool, now: Time) {
        let n = self.networks.entry(net).or_default();
        n.addr = addr;
        n.metered = metered;
        n.up = true;
        n.retry_at = now;
        self.maybe_open(now);
        self.check_thunks(now);
    }

    /// The client accepts connections from the server on local network `net` at `port` (a
    /// listener on the network's address); 0 = no longer. Announced with the network's
    /// estimates, so the server may open a connection there (paper §4.2: either peer may).
    pub fn accepting_on(&mut self, net: NetId, port: u16) {
        if let Some(n) = self.networks.get_mut(&net) {
            n.port = port;
        }
    }

    /// Where to open a connection over the peer's network `net` (after an
    /// [`Event::OpenConnection`] on the server): the address the client's connections over it
    /// came from, and the port it announced there.
    pub fn peer_address(&self, net: NetId) -> Option<([u8; 4], u16)> {
        let n = self.networks.get(&net).filter(|n| n.port != 0)?;
        n.seen_addr.map(|a| (a, n.port))
    }

    /// The driver's record of where accepted connection `conn` came from (call it right after
    /// [`Session::accept_connection`]). Once the connection is authenticated (it carried the
    /// `Hello`, or its join proof checked out) the address becomes its network's
    /// `peer_address`.
    pub fn connection_from(&mut self, conn: ConnId, addr: [u8; 4]) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        c.peer_addr = Some(addr);
        if c.state == ConnState::Established {
            let net = c.net;
            self.network_seen(net, addr);
        }
    }

    fn network_seen(&mut self, net: NetId, addr: [u8; 4]) {
        if let Some(n) = self.networks.get_mut(&net) {
            n.seen_addr = Some(addr);
            n.may_open = true;
        }
    }

    /// A local network went away: its connection is treated as broken.
    pub fn network_down(&mut self, net: NetId, now: Time) {
        if let Some(n) = self.networks.get_mut(&net) {
            n.up = false;
        }
        let dead: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.net == net)
            .map(|(&id, _)| id)
            .collect();
        for c in dead {
            self.events.push_back(Event::CloseConnection {
                conn: c,
                reason: "network down".into(),
            });
            self.connection_closed(c, now);
        }
    }

    /// Current estimates per network: (net, round-trip time, bandwidth).
    pub fn estimates(&self) -> Vec<(NetId, Option<Duration>, Option<BitRate>)> {
        self.networks
            .iter()
            .map(|(&id, n)| (id, n.estimate.rtt(), n.estimate.bandwidth()))
            .collect()
    }

    fn netinfos(&self) -> Vec<NetInfo> {
        self.networks
            .iter()
            .map(|(&net, n)| NetInfo {
                net,
                addr: n.addr,
                rtt_us: n
                    .estimate
                    .rtt()
                    .map_or(0, |d| d.as_micros().min(u32::MAX as u128) as u32),
                flags: (n.metered as u32 * NET_METERED) | (n.up as u32 * NET_USABLE),
                bandwidth_bps: n.estimate.bandwidth().map_or(0, |b| b.as_bps()),
                port: n.port,
            })
            .collect()
    }

    fn absorb_netinfos(&mut self, infos: &[NetInfo], now: Time) {
        if self.role == Role::Client {
            return; // the client measures its own networks; the server's view is not needed
        }
        for i in infos {
            if !self.networks.contains_key(&i.net)
                && self.networks.len() >= self.config.max_networks
            {
                continue;
            }
            let connected = self.conns.values().any(|c| c.net == i.net);
            let n = self.networks.entry(i.net).or_default();
            let up = i.flags & NET_USABLE != 0 || connected;
            if (up && !n.up) || i.port != n.port {
                n.may_open = true; // announced anew
            }
            if let (true, false, false, Some(d)) =
                (up, n.up, connected, self.config.peer_open_delay)
            {
                // Newly usable and unconnected: the client's turn first (see `peer_open_delay`).
                n.retry_at = n.retry_at.max(now + d);
            }
            n.addr = i.addr;
            n.port = i.port;
            n.metered = i.flags & NET_METERED != 0;
            n.up = up;
            n.estimate.adopt(
                (i.rtt_us > 0).then(|| Duration::from_micros(i.rtt_us as u64)),
                (i.bandwidth_bps > 0).then_some(BitRate::bps(i.bandwidth_bps)),
            );
        }
    }

    /// Passive sample from TCP_INFO of a connection: minimum RTT, and throughput over the last
    /// interval with how loaded the path was meanwhile (see [`PathLoad`]).
    pub fn tcp_info(
        &mut self,
        conn: ConnId,
        min_rtt: Option<Duration>,
        throughput: Option<BitRate>,
        load: PathLoad,
    ) {
        let Some(c) = self.conns.get(&conn) else {
            return;
        };
        let Some(n) = self.networks.get_mut(&c.net) else {
            return;
        };
        if let Some(r) = min_rtt {
            n.estimate.rtt_sample(r);
        }
        if let Some(rate) = throughput {
            let current = n.estimate.bandwidth().map(|b| b.as_bps());
            let take = match load {
                PathLoad::Saturated => true,
                PathLoad::Backlogged => current.is_none_or(|c| rate.as_bps() > c),
                PathLoad::Light => current.is_some_and(|c| rate.as_bps() > c),
            };
            if take {
                n.estimate.bandwidth_sample(rate);
            }
        }
    }

    /// The driver read connection `conn`'s send queue in the kernel (bytes in flight and bytes
    /// not yet sent). Foreground IROBs are placed by what they would queue behind (see
    /// [`Session::best_connection`]).
    pub fn kernel_queue(&mut self, conn: ConnId, q: KernelQueue) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.kernel_queue = Some(q);
        }
    }

    // ----- connections ----------------------------------------------------------------------

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

    /// The driver opened connection `conn` over local network `net` (initiator side): the
    /// session queues `Hello` (first connection of a client) or `Join`.
    pub fn add_connection(&mut self, conn: ConnId, net: NetId, now: Time) {
        if let Some(n) = self.networks.get_mut(&net) {
            n.opening = false;
        }
        if self.conns.len() >= self.config.max_connections || self.failed.is_some() {
            self.events.push_back(Event::CloseConnection {
                conn,
                reason: "connection limit reached".into(),
            });
            return;
        }
        if self.secret.is_none() && self.role != Role::Client {
            self.events.push_back(Event::CloseConnection {
                conn,
                reason: "no session to join yet".into(),
            });
            return;
        }
        self.conns
            .insert(conn, Conn::new(net, ConnState::Waiting, now));
        let hello_pending = self.conns.values().any(|c| c.state == ConnState::HelloSent);
        if self.secret.is_some() {
            self.send_join(conn, now);
        } else if !hello_pending {
            self.send_hello(conn, now);
        }
        // Otherwise it waits for the hello under way on another connection.
    }

    /// Start the first handshake on `conn`.
    fn send_hello(&mut self, conn: ConnId, now: Time) {
        let mut networks = self.netinfos();
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let net = c.net;
        // The hello's first network names the connection's own network.
        if let Some(i) = networks.iter().position(|n| n.net == net) {
            networks.swap(0, i);
        } else {
            networks.insert(
                0,
                NetInfo {
                    net,
                    addr: [0; 4],
                    rtt_us: 0,
                    flags: NET_USABLE,
                    bandwidth_bps: 0,
                    port: 0,
                },
            );
        }
        c.state = ConnState::HelloSent;
        // The hello's round trip is what the first RTT sample measures (not a wait before it).
        c.opened = now;
        c.control.push_back(Frame::Hello {
            key: self.my_key,
            window: self.config.window,
            networks,
        });
    }

    /// Join `conn` to the session (the secret is known).
    fn send_join(&mut self, conn: ConnId, now: Time) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        self.rng.fill_bytes(&mut c.my_nonce);
        c.state = ConnState::JoinSent;
        // The join's round trips are what the first RTT sample measures.
        c.opened = now;
        c.control.push_back(Frame::Join {
            session: self.session_id,
            nonce: c.my_nonce,
            net: c.net,
        });
    }

    /// An accepted connection whose first frame (`Hello` or `Join`) is `first`, arriving over
    /// the client's network `net` (for a `Hello`: its first network; for a `Join`: the net field).
    pub fn accept_connection(&mut self, conn: ConnId, first: Frame, now: Time) {
        if self.conns.len() >= self.config.max_connections {
            self.events.push_back(Event::CloseConnection {
                conn,
                reason: "connection limit reached".into(),
            });
            return;
        }
        let mut c = Conn::new(0, ConnState::Established, now);
        match first {
            Frame::Hello {
                key,
                window,
                networks,
            } if self.secret.is_none() && self.role == Role::Server => {
                self.secret = Some(Secret::new(&key, &self.my_key));
                self.peer_window = window.min(self.config.window);
                c.net = networks.first().map_or(0, |n| n.net);
                self.absorb_netinfos(&networks, now);
                self.networks.entry(c.net).or_default().up = true;
                c.control.push_back(Frame::HelloAck {
                    session: self.session_id,
                    key: self.my_key,
                    window: self.config.window,
                    networks: vec![],
                });
                self.established = true;
                self.events.push_back(Event::Established);
            }
            Frame::Join {
                session,
                nonce,
                net,
            } if session == self.session_id
                && self.secret.is_some()
                && (self.role == Role::Server
                    || self.networks.get(&net).is_some_and(|n| n.up && n.port != 0)) =>
            {
                c.net = net;
                c.peer_nonce = nonce;
                self.rng.fill_bytes(&mut c.my_nonce);
                let mac =
                    self.secret
                        .as_ref()
                        .unwrap()
                        .acceptor_proof(session, &nonce, &c.my_nonce);
                c.state = ConnState::Challenged;
                c.control.push_back(Frame::JoinChallenge {
                    nonce: c.my_nonce,
                    mac,
                });
            }
            Frame::Join { net, .. } if self.role == Role::Client => {
                self.events.push_back(Event::CloseConnection {
                    conn,
                    reason: format!(
                        "a join naming another session, or network {net}, which accepts no \
                         connections now"
                    ),
                });
                return;
            }
            other => {
                self.events.push_back(Event::CloseConnection {
                    conn,
                    reason: format!("unexpected first frame {}", frame_name(&other)),
                });
                return;
            }
        }
        self.conns.insert(conn, c);
        self.update_down_since(now);
    }

    /// The driver could not open a connection over `net` (after an `OpenConnection`).
    pub fn open_failed(&mut self, net: NetId, now: Time) {
        let wait = self.retry_wait();
        if let Some(n) = self.networks.get_mut(&net) {
            n.opening = false;
            n.retry_at = now + wait;
        }
        self.update_down_since(now);
    }

    /// Both sides have said goodbye and everything we sent is acknowledged: the connections may
    /// close without the session treating it as a failure.
    pub fn is_finished(&self) -> bool {
        self.closing && self.out.is_empty() && self.goodbye_sent && self.peer_irobs.is_some()
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
                irob.send_whole_again();
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

    /// How long a network waits before this side (re)opens a connection over it.
    fn retry_wait(&self) -> Duration {
        match self.role {
            Role::Client => self.config.reconnect_backoff,
            Role::Server => self
                .config
                .peer_open_delay
                .unwrap_or(self.config.reconnect_backoff),
        }
    }

    fn update_down_since(&mut self, now: Time) {
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

    /// Networks this side should open a connection over (once their `retry_at` has come).
    /// The client: every usable network, also during the first handshake (the first
    /// connection to come up carries the hello, the others wait for it and then join, so a
    /// network in an outage or merely slow never holds the session up). The server: a client
    /// network that is usable and accepts connections, while the session is established and
    /// has data to send.
    fn unconnected(&self) -> Vec<(NetId, Time)> {
        if self.failed.is_some() || self.is_finished() {
            return Vec::new();
        }
        let server_may = self.role == Role::Server
            && self.config.peer_open_delay.is_some()
            && self.secret.is_some()
            && !self.out.is_empty();
        if self.role != Role::Client && !server_may {
            return Vec::new();
        }
        let have_conn: BTreeSet<NetId> = self.conns.values().map(|c| c.net).collect();
        self.networks
            .iter()
            .filter(|(id, n)| {
                n.up && !n.opening
                    && !have_conn.contains(id)
                    && (self.role == Role::Client
                        || (n.port != 0 && n.may_open && n.seen_addr.is_some()))
            })
            .map(|(&id, n)| (id, n.retry_at))
            .collect()
    }

    fn maybe_open(&mut self, now: Time) {
        let want: Vec<NetId> = self
            .unconnected()
            .into_iter()
            .filter(|&(_, at)| at <= now)
            .map(|(id, _)| id)
            .collect();
        for net in want {
            if self.conns.len() >= self.config.max_connections {
                break;
            }
            let n = self.networks.get_mut(&net).unwrap();
            n.opening = true;
            n.may_open = false;
            self.events.push_back(Event::OpenConnection { net });
        }
    }

    /// A frame arrived on `conn`. Protocol violations close the connection (or, for limits the
    /// peer exceeds, the multi-socket); the reason is in the resulting event.
    pub fn handle_frame(&mut self, conn: ConnId, frame: Frame, now: Time) {
        let Some(state) = self.conns.get(&conn).map(|c| c.state) else {
            return;
        };
        let result = match (state, frame) {
            (
                ConnState::HelloSent,
                Frame::HelloAck {
                    session,
                    key,
                    window,
                    networks,
                },
            ) => {
                self.session_id = session;
                self.secret = Some(Secret::new(&self.my_key, &key));
                self.peer_window = window.min(self.config.window);
                self.absorb_netinfos(&networks, now);
                self.establish(conn, now);
                self.established = true;
                self.events.push_back(Event::Established);
                let waiting: Vec<ConnId> = self
                    .conns
                    .iter()
                    .filter(|(_, c)| c.state == ConnState::Waiting)
                    .map(|(&id, _)| id)
                    .collect();
                for w in waiting {
                    self.send_join(w, now);
                }
                self.maybe_open(now);
                Ok(())
            }
            (ConnState::JoinSent, Frame::JoinChallenge { nonce, mac }) => {
                let secret = self.secret.clone().expect("join only after hello");
                let c = self.conns.get_mut(&conn).unwrap();
                let expected = secret.acceptor_proof(self.session_id, &c.my_nonce, &nonce);
                if !proofs_equal(&expected, &mac) {
                    Err("join challenge carries a wrong proof".to_string())
                } else {
                    c.peer_nonce = nonce;
                    let proof = secret.initiator_proof(self.session_id, &c.my_nonce, &nonce);
                    c.control.push_back(Frame::JoinProof { mac: proof });
                    c.state = ConnState::Proved;
                    Ok(())
                }
            }
            (ConnState::Challenged, Frame::JoinProof { mac }) => {
                let secret = self.secret.clone().expect("challenge only with a secret");
                let c = self.conns.get_mut(&conn).unwrap();
                let expected = secret.initiator_proof(self.session_id, &c.peer_nonce, &c.my_nonce);
                if !proofs_equal(&expected, &mac) {
                    Err("join refused: wrong proof (forged or replayed)".to_string())
                } else {
                    c.control.push_back(Frame::JoinOk);
                    let net = c.net;
                    let from = c.peer_addr;
                    self.networks.entry(net).or_default().up = true;
                    let rtt = now.saturating_since(c.opened);
                    self.establish(conn, now);
                    self.networks
                        .get_mut(&net)
                        .unwrap()
                        .estimate
                        .adopt(Some(rtt), None);
                    if let Some(a) = from {
                        self.network_seen(net, a);
                    }
                    Ok(())
                }
            }
            (ConnState::Proved, Frame::JoinOk) => {
                self.establish(conn, now);
                Ok(())
            }
            (ConnState::Established, f) => self.handle_established(conn, f, now),
            (ConnState::Closing, _) => Ok(()),
            (_, Frame::Error { reason, .. }) => Err(format!("peer refused: {reason}")),
            (s, f) => Err(format!(
                "unexpected {} frame during {:?}",
                frame_name(&f),
                s
            )),
        };
        let flooded = self
            .conns
            .get(&conn)
            .is_some_and(|c| c.state != ConnState::Closing && c.control.len() > MAX_CONTROL);
        if let Err(reason) = result {
            self.close_conn_with_error(conn, reason, now);
        } else if flooded {
            let reason = format!(
                "the peer asks for more than {MAX_CONTROL} answers (probe replies, Have) without \
                 reading them"
            );
            self.close_conn_with_error(conn, reason, now);
        }
        self.check_thunks(now);
    }

    /// A decoder error on `conn`: close only that connection.
    pub fn malformed(&mut self, conn: ConnId, reason: String, now: Time) {
        self.close_conn_with_error(conn, format!("malformed frame: {reason}"), now);
    }

    fn close_conn_with_error(&mut self, conn: ConnId, reason: String, now: Time) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.control.clear();
            c.control.push_back(Frame::Error {
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
            self.conns.insert(conn, c);
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

    fn establish(&mut self, conn: ConnId, now: Time) {
        let c = self.conns.get_mut(&conn).unwrap();
        c.state = ConnState::Established;
        c.last_data = now;
        let rtt = now.saturating_since(c.opened);
        let net = c.net;
        if self.role == Role::Client {
            if let Some(n) = self.networks.get_mut(&net) {
                n.estimate.adopt(Some(rtt), None);
            }
        }
        self.all_down_since = None;
        // Anything in doubt can now be asked about.
        self.check_thunks(now);
    }

    fn fail(&mut self, reason: String) {
        if self.failed.is_some() {
            return;
        }
        self.arrivals += 1;
        self.failed = Some(reason.clone());
        let ids: Vec<ConnId> = self.conns.keys().copied().collect();
        for id in ids {
            let c = self.conns.get_mut(&id).unwrap();
            c.control.clear();
            c.control.push_back(Frame::Error {
                reason: reason.clone(),
                fatal: true,
            });
            c.state = ConnState::Closing;
            self.events.push_back(Event::CloseConnection {
                conn: id,
                reason: reason.clone(),
            });
        }
        self.events.push_back(Event::Failed(reason));
        // Wake every deferred sender: they will see the failure.
        for l in 0..4 {
            for t in self.deferred[l].drain(..) {
                self.events.push_back(Event::ThunkReady(t));
            }
        }
    }

    fn handle_established(&mut self, conn: ConnId, frame: Frame, now: Time) -> Result<(), String> {
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
                    self.on_ack(*a);
                }
                self.on_chunk(chunk, now)
            }
            Frame::Ack { acks } => {
                for a in acks {
                    self.on_ack(a);
                }
                Ok(())
            }
            Frame::ResendRequest { irobs } => {
                let entries: Vec<HaveEntry> = irobs.iter().map(|&id| self.have_entry(id)).collect();
                let max_body = self.config.wire.max_body;
                let c = self.conns.get_mut(&conn).unwrap();
                // Split so that every frame fits the peer's decoder (its body limit).
                let mut frame: Vec<HaveEntry> = Vec::new();
                let mut body = 0;
                for e in entries {
                    let len = HAVE_ENTRY_LEN + 16 * e.ranges.len();
                    if !frame.is_empty() && body + len > max_body {
                        c.control.push_back(Frame::Have {
                            entries: std::mem::take(&mut frame),
                        });
                        body = 0;
                    }
                    body += len;
                    frame.push(e);
                }
                if !frame.is_empty() {
                    c.control.push_back(Frame::Have { entries: frame });
                }
                Ok(())
            }
            Frame::Have { entries } => {
                for e in entries {
                    self.on_have(e);
                }
                Ok(())
            }
            Frame::Estimate { networks } => {
                self.absorb_netinfos(&networks, now);
                Ok(())
            }
            Frame::Probe { id, padding } => {
                let size = padding as u64 + super::wire::HEADER_LEN as u64;
                self.conns
                    .get_mut(&conn)
                    .unwrap()
                    .control
                    .push_back(Frame::ProbeReply {
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
                self.fail(format!("the peer failed the multi-socket: {reason}"));
                Ok(())
            }
            Frame::Error { reason, .. } => Err(format!("peer closed the connection: {reason}")),
            other => Err(format!(
                "unexpected {} frame on an established connection",
                frame_name(&other)
            )),
        }
    }

    // ----- sender ---------------------------------------------------------------------------

    /// Whether `label` may be sent over network `net` under the deferral policy.
    fn appropriate(&self, label: Label, net: &Network) -> bool {
        label.is_foreground() || !net.metered || self.config.background_on_metered
    }

    /// The networks with an established connection.
    fn established_networks(&self) -> BTreeSet<NetId> {
        self.conns
            .values()
            .filter(|c| c.state == ConnState::Established)
            .map(|c| c.net)
            .collect()
    }

    fn usable_networks(&self, label: Label) -> Vec<NetId> {
        let established = self.established_networks();
        self.networks
            .iter()
            .filter(|(id, n)| established.contains(id) && self.appropriate(label, n))
            .map(|(&id, _)| id)
            .collect()
    }

    fn backlog(&self, label: Label) -> u64 {
        self.sendable[label.rank()]
            .iter()
            .filter_map(|id| self.out.get(id))
            .map(|o| o.pending.len())
            .sum()
    }

    /// Whether a send with `label` would be accepted now (the deferral policy's test).
    pub fn can_send(&self, label: Label) -> bool {
        if self.failed.is_some() || self.closing {
            return true; // the call will report the closure
        }
        if self.buffered >= self.config.max_send_buffer {
            return false;
        }
        if !self.established {
            return true; // queue until the first handshake completes
        }
        let nets = self.usable_networks(label);
        if nets.is_empty() {
            return false;
        }
        let bw: f64 = nets
            .iter()
            .map(|n| {
                self.networks[n]
                    .estimate
                    .bandwidth()
                    .map_or(1e6, |b| b.as_bps() as f64)
            })
            .sum();
        let bound = ((bw / 8.0) * self.config.backlog_bound.as_secs_f64()).max(64.0 * 1024.0);
        (self.backlog(label) as f64) <= bound
    }

    /// Begin an IROB. With a thunk, a label that cannot be sent now returns
    /// [`SendError::Deferred`] and the thunk fires (via [`Event::ThunkReady`]) when it can.
    pub fn begin_irob(
        &mut self,
        label: Label,
        deps: Deps,
        thunk: Option<ThunkId>,
        now: Time,
    ) -> Result<IrobId, SendError> {
        if let Some(f) = &self.failed {
            return Err(SendError::Closed(f.clone()));
        }
        if self.closing {
            return Err(SendError::Closed("close() was called".into()));
        }
        let id = self.next_irob;
        if let Deps::List(list) = &deps {
            if list.len() > self.config.max_deps {
                return Err(SendError::TooManyDeps(list.len(), self.config.max_deps));
            }
            if let Some(&bad) = list.iter().find(|&&d| d >= id) {
                return Err(SendError::BadDependency { irob: id, dep: bad });
            }
        }
        if !self.can_send(label) {
            return Err(match thunk {
                Some(t) => {
                    self.deferred[label.rank()].push(t);
                    SendError::Deferred(label)
                }
                None => SendError::WouldBlock(label),
            });
        }
        self.next_irob += 1;
        let deps = match deps {
            Deps::List(mut l) => {
                l.sort_unstable();
                l.dedup();
                Deps::List(l)
            }
            d => d,
        };
        self.out.insert(
            id,
            OutIrob {
                label,
                deps,
                segments: BTreeMap::new(),
                len: 0,
                ended: false,
                pending: RangeSet::new(),
                need_first: true,
                need_end: true,
                inflight: Vec::new(),
                pinned: None,
                started: false,
                last_sent: now,
                hedged: false,
            },
        );
        self.sendable[label.rank()].insert(id);
        if label.is_foreground() {
            self.last_foreground = Some(now);
        }
        self.maybe_open(now);
        Ok(id)
    }

    /// Append bytes to an open IROB. Sending starts before `end_irob`.
    pub fn irob_send(&mut self, id: IrobId, data: Bytes) -> Result<(), SendError> {
        if let Some(f) = &self.failed {
            return Err(SendError::Closed(f.clone()));
        }
        let max = self.config.max_irob_size;
        let irob = self
            .out
            .get_mut(&id)
            .filter(|o| !o.ended)
            .ok_or(SendError::NotOpen(id))?;
        if irob.len + data.len() as u64 > max {
            return Err(SendError::TooLarge(id, max));
        }
        if data.is_empty() {
            return Ok(());
        }
        let start = irob.len;
        irob.len += data.len() as u64;
        irob.pending.insert(start, irob.len);
        irob.segments.insert(start, data);
        self.buffered += irob.len - start;
        if irob.started {
            self.outstanding += irob.len - start;
        }
        self.sendable[irob.label.rank()].insert(id);
        Ok(())
    }

    /// End an IROB: no more bytes will be added.
    pub fn end_irob(&mut self, id: IrobId) -> Result<(), SendError> {
        let irob = self
            .out
            .get_mut(&id)
            .filter(|o| !o.ended)
            .ok_or(SendError::NotOpen(id))?;
        irob.ended = true;
        self.sendable[irob.label.rank()].insert(id);
        Ok(())
    }

    /// `send`: one IROB depending on every earlier IROB ("TCP with labels").
    pub fn send(
        &mut self,
        label: Label,
        data: Bytes,
        thunk: Option<ThunkId>,
        now: Time,
    ) -> Result<IrobId, SendError> {
        if data.len() as u64 > self.config.max_irob_size {
            return Err(SendError::TooLarge(
                self.next_irob,
                self.config.max_irob_size,
            ));
        }
        let id = self.begin_irob(label, Deps::AllEarlier, thunk, now)?;
        self.irob_send(id, data)?;
        self.end_irob(id)?;
        Ok(id)
    }

    /// Cancel a deferred thunk (e.g. a newer periodic update made it obsolete). Returns whether
    /// it was still pending.
    pub fn cancel_thunk(&mut self, thunk: ThunkId) -> bool {
        for l in &mut self.deferred {
            if let Some(i) = l.iter().position(|&t| t == thunk) {
                l.remove(i);
                return true;
            }
        }
        false
    }

    fn check_thunks(&mut self, now: Time) {
        if let Some(since) = self.all_down_since {
            if self.failed.is_none() && now.saturating_since(since) >= self.config.failure_timeout {
                self.fail(format!(
                    "no network has been usable for {:?}",
                    self.config.failure_timeout
                ));
            }
        }
        for label in Label::ALL {
            if !self.deferred[label.rank()].is_empty() && self.can_send(label) {
                for t in std::mem::take(&mut self.deferred[label.rank()]) {
                    self.events.push_back(Event::ThunkReady(t));
                }
            }
        }
        // Ask about IROBs in doubt over any established connection.
        let ask: Vec<IrobId> = self
            .doubt
            .iter()
            .filter(|id| !self.requested.contains_key(id))
            .copied()
            .collect();
        if !ask.is_empty() {
            if let Some((&cid, _)) = self
                .conns
                .iter()
                .find(|(_, c)| c.state == ConnState::Established)
            {
                for chunk in ask.chunks(self.config.wire.max_list) {
                    self.conns
                        .get_mut(&cid)
                        .unwrap()
                        .control
                        .push_back(Frame::ResendRequest {
                            irobs: chunk.to_vec(),
                        });
                }
                for id in ask {
                    self.requested.insert(id, (cid, now));
                }
            }
        }
    }

    /// Each side detects a broken connection on its own, up to a TCP user timeout apart. An
    /// acknowledgement or a `Have` answer the peer sent on a connection that broke in between
    /// is lost without this side seeing a break it would act on (ours came first, and its
    /// doubts were already asked about over another connection). So an IROB sent completely
    /// and unacknowledged for `ack_timeout`, and a question unanswered that long, are asked
    /// about (again). The answer resends only ranges not in flight on a live connection, so an
    /// IROB merely slow to be acknowledged (held for a dependency) costs a few control bytes.
    fn recheck_unacknowledged(&mut self, now: Time) {
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
    fn rtt_or_second(&self, net: NetId) -> Duration {
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
    fn hedge_ready_at(&self, from: ConnId, target: &Conn) -> Option<Time> {
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
    fn hedges(&self) -> Vec<(IrobId, NetId, Time)> {
        let nets = self.established_networks();
        if !self.config.hedge || nets.len() < 2 {
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
                Some((id, net, (o.last_sent + delay(net)).max(ready)))
            })
            .collect()
    }

    /// Redundant retransmission of late small foreground IROBs (Meatballs' redundant strategy,
    /// seed 000 ch. 4: send on both networks and keep the first arrival, worth it when the
    /// item is small and waiting costs the user). A small foreground IROB sent completely and
    /// unacknowledged for its hedge delay (`Session::hedges`) is sent once more, whole, over the
    /// lowest-RTT connection of another network that is worth it
    /// ([`Session::hedge_ready_at`]); the receiver delivers whichever copy arrives
    /// first and ignores the other. Why: a WiFi network that vanishes stalls its connection
    /// silently, and the break is detected only after the user timeout (4 s); the lab's
    /// vehicular sensing run saw urgent messages sent into the vanished WiFi arrive 1.8-4.4 s
    /// late. The cost of a hedge that was not needed is one small IROB's bytes.
    fn hedge_late_foreground(&mut self, now: Time) {
        for (id, net, due) in self.hedges() {
            if due > now {
                continue;
            }
            let Some(from) = self.out[&id].inflight.last().map(|f| f.0) else {
                continue;
            };
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
            o.send_whole_again();
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

    fn on_ack(&mut self, id: IrobId) {
        if let Some(irob) = self.out.get(&id) {
            if !irob.ended {
                return; // an ack of an unfinished IROB is not meaningful; ignore
            }
            let irob = self.out.remove(&id).unwrap();
            if irob.label.is_foreground() {
                for f in &irob.inflight {
                    if let Some(c) = self.conns.get_mut(&f.0) {
                        c.fg_unacked = c.fg_unacked.saturating_sub(f.2 - f.1);
                    }
                }
            }
            self.buffered -= irob.len;
            if irob.started {
                self.outstanding -= irob.len;
            }
            self.sendable[irob.label.rank()].remove(&id);
            self.doubt.remove(&id);
            self.requested.remove(&id);
        }
    }

    fn on_have(&mut self, e: HaveEntry) {
        if !self.doubt.contains(&e.irob) {
            return;
        }
        if e.complete {
            self.on_ack(e.irob);
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
        irob.pending = pending;
        irob.need_first = !e.first && !first_in_flight;
        irob.need_end = e.end.is_none() && !end_in_flight;
        let label = irob.label;
        self.doubt.remove(&e.irob);
        self.requested.remove(&e.irob);
        self.sendable[label.rank()].insert(e.irob);
    }

    /// The [`Event::Trace`] line for foreground IROB `id` going out first on `conn`: every
    /// established connection as [`Session::best_connection`] saw it (estimates, kernel
    /// queue, suspicion).
    fn placement_trace(&self, id: IrobId, conn: ConnId, now: Time) -> String {
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
    fn best_connection(&self, label: Label, len: u64, now: Time) -> Option<ConnId> {
        let cands = self
            .conns
            .iter()
            .filter(|(_, c)| c.state == ConnState::Established)
            .filter(|(_, c)| {
                self.networks
                    .get(&c.net)
                    .is_none_or(|n| self.appropriate(label, n))
            });
        let est = |c: &Conn| {
            self.networks
                .get(&c.net)
                .map(|n| (n.estimate.rtt(), n.estimate.bandwidth()))
        };
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
    fn carries_foreground(&self, conn: ConnId) -> bool {
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
    /// `probing_cwnd` is the kernel's congestion window in bytes while the connection is still
    /// probing for the path's capacity: in slow start, and with no queue built on the path yet
    /// (smoothed RTT near the minimum); `None` otherwise. The bandwidth estimate is built from
    /// transfers this very cap limits, so on a network that just appeared the estimate would
    /// trail the path by seconds (the vehicular drives' WiFi sessions last a few). While the
    /// kernel probes, its window is allowed in full: background data ramps as fast as TCP's
    /// own slow start and no faster, and the estimate learns the path from transfers that fill
    /// it. Once a queue builds (or a loss ends slow start) the estimate rules again, so a slow,
    /// deep-buffered link is not filled with background data ahead of the next foreground one.
    pub fn background_cap(&self, conn: ConnId, now: Time, probing_cwnd: Option<u64>) -> u64 {
        let Some(c) = self.conns.get(&conn) else {
            return 0;
        };
        let ramp = probing_cwnd.unwrap_or(0);
        let budget = anticipatory_budget(self.last_foreground.map(|t| now.saturating_since(t)));
        let Some(n) = self.networks.get(&c.net) else {
            return ramp.max(UNMEASURED_CAP);
        };
        let (Some(rtt), Some(bw)) = (n.estimate.rtt(), n.estimate.bandwidth()) else {
            // Unmeasured: a modest start that lets delivery-rate samples grow.
            return ramp.max(UNMEASURED_CAP);
        };
        let bytes = bw.bytes_per_sec() * (rtt + budget).as_secs_f64();
        (bytes as u64).max(4 * 1024).max(ramp)
    }

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

    fn next_transmit(&mut self, conn: ConnId, now: Time, background_room: u64) -> Option<Transmit> {
        let state = self.conns.get(&conn)?.state;
        let c = self.conns.get_mut(&conn).unwrap();
        if let Some(f) = c.control.pop_front() {
            return Some(encode(&f, 0));
        }
        if state != ConnState::Established {
            return None;
        }
        if let Some(t) = self.next_chunk(conn, now, background_room) {
            return Some(t);
        }
        if !self.acks.is_empty() {
            let acks = self.take_acks();
            return Some(encode(&Frame::Ack { acks }, 0));
        }
        if let Some(t) = self.maybe_probe(conn, now) {
            return Some(t);
        }
        let c = self.conns.get_mut(&conn).unwrap();
        if self.role == Role::Client
            && c.last_estimate
                .is_none_or(|t| now.saturating_since(t) >= ESTIMATE_EVERY)
        {
            c.last_estimate = Some(now);
            return Some(encode(
                &Frame::Estimate {
                    networks: self.netinfos(),
                },
                0,
            ));
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

    fn maybe_probe(&mut self, conn: ConnId, now: Time) -> Option<Transmit> {
        let interval = self.config.probe_interval;
        let c = self.conns.get_mut(&conn)?;
        let idle = now.saturating_since(c.last_data) >= interval;
        let due = match c.last_probe {
            None => true, // a network that just appeared
            Some(t) => idle && now.saturating_since(t) >= interval,
        };
        if !due || !c.probes.is_empty() {
            return None;
        }
        c.last_probe = Some(now);
        let mut t = Transmit::default();
        for size in PROBE_SIZES {
            let id = self.next_probe_id;
            self.next_probe_id += 1;
            c.probes
                .insert(id, (now, size as u64 + super::wire::HEADER_LEN as u64));
            let one = encode(&Frame::Probe { id, padding: size }, 0);
            t.head.extend_from_slice(&one.head);
            t.head.extend_from_slice(&one.data);
        }
        Some(t)
    }

    fn next_chunk(&mut self, conn: ConnId, now: Time, background_room: u64) -> Option<Transmit> {
        let has_other_bg_conn = |s: &Session| {
            s.conns.iter().any(|(&id, c)| {
                id != conn && c.state == ConnState::Established && !s.carries_foreground(id)
            })
        };
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
                // Window full: no new IROB starts, except the oldest unacknowledged one, whose
                // dependencies are all acknowledged (so the receiver can always finish it).
                if !o.started
                    && self.outstanding >= self.peer_window
                    && self.out.keys().next() != Some(&id)
                {
                    return None;
                }
                let limit = if fg {
                    self.config.chunk_size as u64
                } else {
                    background_room.min(self.config.chunk_size as u64)
                };
                return Some(self.take_chunk(conn, id, limit, now));
            }
        }
        None
    }

    /// The acknowledgements for the next frame: at most the decoder's list limit, so that a
    /// peer that completed many IROBs at once gets them in several frames it can decode
    /// (one list beyond the limit is a malformed frame, which closes the connection).
    fn take_acks(&mut self) -> Vec<IrobId> {
        let n = self.acks.len().min(self.config.wire.max_list);
        let rest = self.acks.split_off(n);
        std::mem::replace(&mut self.acks, rest)
    }

    fn take_chunk(&mut self, conn: ConnId, id: IrobId, limit: u64, now: Time) -> Transmit {
        let acks = self.take_acks();
        let o = self.out.get_mut(&id).unwrap();
        if !o.started {
            o.started = true;
            self.outstanding += o.len;
        }
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
        o.pending.remove(start, end);
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

    /// Give up now: an `Error` frame with `reason` is queued for the peer, every connection
    /// closes and every pending call sees the failure (an application-level reset; unsent data
    /// is lost).
    pub fn abort(&mut self, reason: &str) {
        self.fail(format!("aborted: {reason}"));
    }

    /// Whether everything sent has been acknowledged and the goodbye is out.
    pub fn is_drained(&self) -> bool {
        self.closing && self.out.is_empty() && self.goodbye_sent
    }

    /// Bytes accepted from the application and not yet acknowledged by the peer.
    pub fn unacknowledged(&self) -> u64 {
        self.buffered
    }

    /// How many small foreground IROBs this session has sent a second time over another
    /// network because they went unacknowledged too long (see `Config::hedge`). Whether a
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

    // ----- receiver -------------------------------------------------------------------------

    fn on_chunk(&mut self, ch: Chunk, now: Time) -> Result<(), String> {
        self.arrivals += 1;
        if self.acked.contains(ch.irob) && !self.incoming.contains_key(&ch.irob) {
            // A resend of something already delivered (a hedge, or a resend after a break):
            // ignore it, but acknowledge its end again, as the first acknowledgement may be
            // on a connection that is gone.
            self.duplicate_bytes += ch.data.len() as u64;
            if ch.end && !self.acks.contains(&ch.irob) {
                self.acks.push(ch.irob);
            }
            return Ok(());
        }
        if ch.label.is_foreground() {
            self.last_foreground = Some(now);
        }
        if let Some(total) = self.peer_irobs {
            if ch.irob >= total {
                return Err(format!(
                    "IROB {} after the peer's goodbye ({} IROBs)",
                    ch.irob, total
                ));
            }
        }
        let end_off = ch.offset + ch.data.len() as u64;
        if end_off > self.config.max_irob_size {
            self.fail(format!(
                "peer sent IROB {} beyond the size limit of {} bytes",
                ch.irob, self.config.max_irob_size
            ));
            return Ok(());
        }
        if !self.incoming.contains_key(&ch.irob) {
            if self.incoming.len() >= self.config.max_pending_irobs {
                self.fail(format!(
                    "peer has more than {} unfinished IROBs",
                    self.config.max_pending_irobs
                ));
                return Ok(());
            }
            self.incoming.insert(
                ch.irob,
                InIrob {
                    label: ch.label,
                    deps: None,
                    segments: BTreeMap::new(),
                    have: RangeSet::new(),
                    end: None,
                    delivered: 0,
                    complete: false,
                    acked: false,
                },
            );
            self.by_label[ch.label.rank()].insert(ch.irob);
        }
        let irob = self.incoming.get_mut(&ch.irob).unwrap();
        if irob.label != ch.label {
            return Err(format!(
                "IROB {} changed label from {} to {}",
                ch.irob, irob.label, ch.label
            ));
        }
        if let Some(d) = ch.deps {
            irob.deps = Some(d);
        }
        if ch.end {
            if let Some(e) = irob.end.filter(|&e| e != end_off) {
                return Err(format!("IROB {} ends at {} and at {}", ch.irob, e, end_off));
            }
            irob.end = Some(end_off);
        }
        let held_end = irob.have.last().map_or(0, |(_, e)| e).max(end_off);
        if irob.end.is_some_and(|e| held_end > e) {
            return Err(format!("IROB {} has bytes beyond its end", ch.irob));
        }
        // Store only the bytes not already held (resends may overlap).
        let mut added = 0;
        for (s, e) in irob.have.gaps(ch.offset.max(irob.delivered), end_off) {
            let part = ch
                .data
                .slice((s - ch.offset) as usize..(e - ch.offset) as usize);
            irob.segments.insert(s, part);
            irob.have.insert(s, e);
            added += e - s;
        }
        self.in_buffered += added;
        self.duplicate_bytes += ch.data.len() as u64 - added;
        let became_complete = !irob.complete
            && irob.deps.is_some()
            && irob.end.is_some_and(|e| irob.have.contains(0, e));
        if became_complete {
            irob.complete = true;
            self.unacked_complete.insert(ch.irob);
            self.try_ack();
        }
        let unacked = self.in_buffered - self.acked_buffered;
        if unacked > self.receive_limit() {
            self.fail(format!(
                "peer exceeded the receive limit: {unacked} unacknowledged bytes buffered (limit {})",
                self.receive_limit()
            ));
        }
        Ok(())
    }

    /// Most unacknowledged bytes an honest peer can have buffered here: its window of started
    /// IROBs plus the remainders of IROBs in progress (each at most `max_irob_size`).
    fn receive_limit(&self) -> u64 {
        self.config.window + 8 * self.config.max_irob_size
    }

    /// Acknowledge every complete IROB whose dependencies are acknowledged. Ids of dependencies
    /// are lower, so one ascending pass settles chains. Acknowledging only IROBs that are (or
    /// will be, once the application reads) deliverable keeps the peer's window a bound on
    /// what it can make us buffer.
    fn try_ack(&mut self) {
        let ids: Vec<IrobId> = self.unacked_complete.iter().copied().collect();
        for id in ids {
            let i = &self.incoming[&id];
            let ok = match i.deps.as_ref().unwrap() {
                Deps::AllEarlier => self.acked.below >= id,
                Deps::List(l) => l.iter().all(|&d| self.acked.contains(d)),
            };
            if ok {
                let i = self.incoming.get_mut(&id).unwrap();
                i.acked = true;
                self.acked_buffered += i.have.len() - i.delivered.min(i.have.len());
                self.unacked_complete.remove(&id);
                self.acked.insert(id);
                self.acks.push(id);
            }
        }
    }

    fn have_entry(&self, id: IrobId) -> HaveEntry {
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

    fn deps_delivered(&self, id: IrobId, deps: &Deps) -> bool {
        match deps {
            Deps::AllEarlier => self.delivered.below >= id,
            Deps::List(l) => l.iter().all(|&d| self.delivered.contains(d)),
        }
    }

    /// The next delivery for the application, if any IROB is ready.
    pub fn recv(&mut self) -> Option<Delivery> {
        let id = match self.current {
            Some(id) => id,
            None => {
                let mut pick = None;
                'labels: for label in Label::ALL {
                    for &id in &self.by_label[label.rank()] {
                        let i = &self.incoming[&id];
                        let Some(deps) = &i.deps else { continue };
                        let ready = i.complete || (label.is_foreground() && i.have.prefix() > 0);
                        if ready && self.deps_delivered(id, deps) {
                            pick = Some(id);
                            break 'labels;
                        }
                    }
                }
                pick?
            }
        };
        let i = self.incoming.get_mut(&id).unwrap();
        let next = i.segments.first_key_value().map(|(&s, b)| (s, b.clone()));
        let (offset, data) = match next {
            Some((s, seg)) if s == i.delivered => {
                i.segments.remove(&s);
                (s, seg)
            }
            _ if i.end == Some(i.delivered) => (i.delivered, Bytes::new()),
            _ => {
                self.current = Some(id);
                return None; // streaming a foreground IROB whose next bytes have not arrived
            }
        };
        let n = data.len() as u64;
        i.delivered += n;
        self.in_buffered -= n;
        if i.acked {
            self.acked_buffered -= n;
        }
        let end = i.end == Some(i.delivered);
        let label = i.label;
        if end {
            self.incoming.remove(&id);
            self.by_label[label.rank()].remove(&id);
            self.delivered.insert(id);
            self.current = None;
        } else {
            self.current = Some(id);
        }
        Some(Delivery {
            irob: id,
            label,
            offset,
            data,
            end,
        })
    }

    /// Whether [`Session::recv`] would return a delivery now.
    pub fn has_delivery(&self) -> bool {
        if let Some(id) = self.current {
            let i = &self.incoming[&id];
            return i
                .segments
                .first_key_value()
                .is_some_and(|(&s, _)| s == i.delivered)
                || i.end == Some(i.delivered);
        }
        Label::ALL.iter().any(|l| {
            self.by_label[l.rank()].iter().any(|id| {
                let i = &self.incoming[id];
                i.deps.as_ref().is_some_and(|d| {
                    (i.complete || (l.is_foreground() && i.have.prefix() > 0))
                        && self.deps_delivered(*id, d)
                })
            })
        })
    }

    /// Counts the events that can make [`Session::recv`] return something it could not before
    /// (a data chunk or the peer's goodbye arriving, the session failing). A driver wakes a
    /// waiting receiver only when it changed, not on every change of the session. (A delivery
    /// can also free IROBs that depended on it; the thread that called `recv` looks again.)
    pub fn arrivals(&self) -> u64 {
        self.arrivals
    }

    /// Whether the peer said goodbye and every IROB it sent has been delivered.
    pub fn peer_finished(&self) -> bool {
        self.peer_irobs
            .is_some_and(|n| self.delivered.below >= n && self.incoming.is_empty())
    }

    /// Bytes received and held for the application (all IROBs).
    pub fn receive_buffered(&self) -> u64 {
        self.in_buffered
    }

    /// Bytes of acknowledged IROBs the application has not read yet. A driver stops reading
    /// from its sockets while this exceeds the window (back-pressure that cannot deadlock:
    /// these bytes are deliverable once the application reads).
    pub fn receive_backlog(&self) -> u64 {
        self.acked_buffered
    }

    // ----- time -----------------------------------------------------------------------------

    /// Close every connection whose handshake has run past `Config::handshake_timeout`.
    fn expire_handshakes(&mut self, now: Time) {
        let t = self.config.handshake_timeout;
        let late: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.state.in_handshake() && now.saturating_since(c.opened) >= t)
            .map(|(&id, _)| id)
            .collect();
        for id in late {
            self.close_conn_with_error(id, format!("handshake not done within {t:?}"), now);
        }
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
        // Hedges (`hedge_late_foreground`).
        for (_, _, due) in self.hedges() {
            at(due);
        }
        for c in self.conns.values() {
            if c.state == ConnState::Established {
                at(c.last_data.max(c.last_probe.unwrap_or(Time::ZERO))
                    + self.config.probe_interval);
            }
        }
        t
    }

    /// Timers: failure timeout, reconnects, lost acknowledgements, thunks.
    pub fn handle_timeout(&mut self, now: Time) {
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

fn frame_name(f: &Frame) -> &'static str {
    match f {
        Frame::Hello { .. } => "Hello",
        Frame::HelloAck { .. } => "HelloAck",
        Frame::Join { .. } => "Join",
        Frame::JoinChallenge { .. } => "JoinChallenge",
        Frame::JoinProof { .. } => "JoinProof",
        Frame::JoinOk => "JoinOk",
        Frame::Data(_) => "Data",
        Frame::Ack { .. } => "Ack",
        Frame::ResendRequest { .. } => "ResendRequest",
        Frame::Have { .. } => "Have",
        Frame::Estimate { .. } => "Estimate",
        Frame::Probe { .. } => "Probe",
        Frame::ProbeReply { .. } => "ProbeReply",
        Frame::Goodbye { .. } => "Goodbye",
        Frame::Error { .. } => "Error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client session with two established connections, as on the crowded hotspot: conn 1 on
    /// WiFi (20 ms, 0.6 Mbit/s), conn 2 on 3G (400 ms, 2 Mbit/s). `bw` gives each bandwidth
    /// estimate, if any. Both were just probed (no probe frames queue ahead of the data).
    fn hotspot(bw: [Option<u64>; 2]) -> Session {
        let now = Time::ZERO;
        let mut s = Session::client(Config::default(), 1);
        for (net, rtt, bw) in [(1, 20, bw[0]), (2, 400, bw[1])] {
            s.network_up(net, [10, 0, net as u8, 2], false, now);
            let n = s.networks.get_mut(&net).unwrap();
            n.estimate.rtt_sample(Duration::from_millis(rtt));
            if let Some(b) = bw {
                n.estimate.bandwidth_sample(BitRate::bps(b));
            }
            let mut c = Conn::new(net, ConnState::Established, now);
            c.last_probe = Some(now);
            s.conns.insert(net as ConnId, c);
        }
        s.established = true;
        while s.poll_event().is_some() {}
        s
    }

    fn queue_small_irobs(s: &mut Session, n: usize, len: usize) {
        for _ in 0..n {
            let id = s
                .begin_irob(Label::ForegroundSmall, Deps::List(vec![]), None, Time::ZERO)
                .unwrap();
            s.irob_send(id, Bytes::from(vec![7u8; len])).unwrap();
            s.end_irob(id).unwrap();
        }
    }

    /// Poll both connections in turn (as their writers would) until neither has data to send;
    /// how many data frames each took.
    fn drain(s: &mut Session) -> [usize; 2] {
        let mut took = [0, 0];
        loop {
            let mut any = false;
            for conn in [1, 2] {
                // The next data frame (control frames and probes aside).
                while let Some(t) = s.poll_transmit(conn, Time::ZERO, 0) {
                    if !t.data.is_empty() {
                        took[conn as usize - 1] += 1;
                        any = true;
                        break;
                    }
                }
            }
            if !any {
                return took;
            }
        }
    }

    #[test]
    fn a_lone_small_irob_takes_the_lowest_latency_network() {
        let mut s = hotspot([Some(600_000), Some(2_000_000)]);
        queue_small_irobs(&mut s, 1, 4096);
        assert_eq!(drain(&mut s), [1, 0]);
    }

    #[test]
    fn a_burst_of_small_irobs_spills_over_to_the_network_that_delivers_it_sooner() {
        // 32 blocks of 4 KB: on the WiFi alone the last would arrive after 10 + 32 x 55 ms
        // (one way); 3G delivers a block 200 + 16 ms after it is queued, so the tail goes there.
        for reported in [false, true] {
            let mut s = hotspot([Some(600_000), Some(2_000_000)]);
            if reported {
                s.kernel_queue(1, kq(0, 0));
                s.kernel_queue(2, kq(0, 0));
            }
            queue_small_irobs(&mut s, 32, 4096);
            let [wifi, cell] = drain(&mut s);
            assert_eq!(wifi + cell, 32);
            // Equal arrival: 10 + 55 k = 200 + 16 (32 - k), k about 9.9.
            assert!((8..=12).contains(&wifi), "wifi {wifi}, cell {cell}");
        }
    }

    fn kq(in_flight: u64, unsent: u64) -> KernelQueue {
        KernelQueue {
            in_flight,
            unsent,
            timed_out: false,
        }
    }

    #[test]
    fn bytes_in_flight_within_the_pipe_do_not_delay_a_small_irob() {
        // 3G (2 Mbit/s, 400 ms: a 100 KB pipe) busy with background data in flight: a block
        // written now still arrives 200 + 16 ms later, so the burst splits as on an idle 3G.
        // The same bytes not yet sent are all ahead: 400 ms more on 3G, more on the WiFi.
        // Equal arrival: 10 + 55 k = 600 + 16 (32 - k), k about 15.5.
        for (cell, on_wifi) in [(kq(100_000, 0), 8..=12), (kq(0, 100_000), 14..=17)] {
            let mut s = hotspot([Some(600_000), Some(2_000_000)]);
            s.kernel_queue(1, kq(0, 0));
            s.kernel_queue(2, cell);
            queue_small_irobs(&mut s, 32, 4096);
            let [wifi, _] = drain(&mut s);
            assert!(on_wifi.contains(&wifi), "{cell:?}: wifi {wifi}");
        }
    }

    #[test]
    fn a_network_without_a_bandwidth_estimate_counts_only_while_its_queue_is_empty() {
        let mut s = hotspot([Some(600_000), None]);
        s.kernel_queue(1, kq(0, 0));
        s.kernel_queue(2, kq(0, 0));
        // 3G empty: counted by its one-way delay, so it takes a block past 200 ms.
        queue_small_irobs(&mut s, 32, 4096);
        let [wifi, cell] = drain(&mut s);
        assert!(cell > 0 && wifi >= 7, "wifi {wifi}, cell {cell}");
        // 3G holding 256 KB of unknown duration: everything stays on the WiFi.
        let mut s = hotspot([Some(600_000), None]);
        s.kernel_queue(1, kq(0, 0));
        s.kernel_queue(2, kq(256 * 1024, 0));
        queue_small_irobs(&mut s, 32, 4096);
        assert_eq!(drain(&mut s), [32, 0]);
    }

    #[test]
    fn an_unmeasured_network_takes_little_background_data_beyond_the_probing_window() {
        let s = hotspot([Some(600_000), None]);
        let now = Time::ZERO;
        // 3G has no bandwidth estimate: a modest cap, or TCP's window while it still probes.
        assert_eq!(s.background_cap(2, now, None), UNMEASURED_CAP);
        assert_eq!(s.background_cap(2, now, Some(64 * 1024)), 64 * 1024);
        // Measured WiFi (0.6 Mbit/s, 20 ms; no foreground yet: a 1 s budget): its pipe.
        assert_eq!(s.background_cap(1, now, None), 76_500);
    }

    #[test]
    fn an_unsaturated_throughput_sample_only_raises_an_estimate() {
        let mut s = hotspot([None, None]);
        // A trickle of small requests: 2 kbit/s, path not saturated. Not an estimate.
        s.tcp_info(1, None, Some(BitRate::bps(2_000)), PathLoad::Light);
        assert_eq!(s.networks[&1].estimate.bandwidth(), None);
        // Saturated: it is the bandwidth.
        s.tcp_info(1, None, Some(BitRate::bps(500_000)), PathLoad::Saturated);
        let bw = |s: &Session| s.networks[&1].estimate.bandwidth().unwrap().as_bps();
        assert_eq!(bw(&s), 500_000);
        // A lower bound above it raises it; one below does not lower it.
        s.tcp_info(1, None, Some(BitRate::bps(100_000)), PathLoad::Light);
        s.tcp_info(1, None, Some(BitRate::bps(100_000)), PathLoad::Backlogged);
        assert_eq!(bw(&s), 500_000);
        s.tcp_info(1, None, Some(BitRate::bps(900_000)), PathLoad::Light);
        assert!(bw(&s) > 500_000);
        // A sender that kept its socket full without building a queue (loopback, or our own
        // cap) gives a first estimate.
        s.tcp_info(
            2,
            None,
            Some(BitRate::bps(40_000_000)),
            PathLoad::Backlogged,
        );
        assert_eq!(
            s.networks[&2].estimate.bandwidth(),
            Some(BitRate::bps(40_000_000))
        );
    }

    /// The resend requests the connections would send at `now` (control frames of both).
    fn questions(s: &mut Session, now: Time) -> Vec<Vec<IrobId>> {
        s.handle_timeout(now);
        let mut asked = Vec::new();
        for conn in [1, 2] {
            while let Some(t) = s.poll_transmit(conn, now, 0) {
                let mut dec = super::super::Decoder::default();
                dec.push(&t.head);
                dec.push(&t.data);
                if let Ok(Some(Frame::ResendRequest { irobs })) = dec.next_frame() {
                    asked.push(irobs);
                }
            }
        }
        asked
    }

    /// The peer's acknowledgement went out on a connection that broke before the peer
    /// noticed: this side sees no break, so it asks after `ack_timeout`, and asks again if
    /// that question goes unanswered as long.
    #[test]
    fn a_lost_acknowledgement_is_asked_about_after_the_ack_timeout() {
        let mut s = hotspot([Some(600_000), Some(2_000_000)]);
        s.config.hedge = false; // a hedge would resend it long before

        queue_small_irobs(&mut s, 1, 100);
        assert_eq!(drain(&mut s).iter().sum::<usize>(), 1);
        let t = s.config.ack_timeout;
        let at = Time::ZERO + t;
        assert_eq!(
            s.poll_timeout(),
            Some(at.min(Time::ZERO + s.config.probe_interval))
        );
        assert!(questions(&mut s, Time::ZERO + (t - Duration::from_millis(1))).is_empty());
        assert_eq!(questions(&mut s, at), vec![vec![0]]);
        assert!(questions(&mut s, at + (t - Duration::from_millis(1))).is_empty());
        assert_eq!(questions(&mut s, at + t), vec![vec![0]]);
        // The answer: the peer has it all. Nothing more is asked.
        s.on_have(HaveEntry {
            irob: 0,
            complete: true,
            first: true,
            end: Some(100),
            ranges: vec![(0, 100)],
        });
        assert_eq!(s.unacknowledged(), 0);
        assert!(questions(&mut s, at + t * 3).is_empty());
    }

    /// Whether `conn` would send an active probe at `now`.
    fn probes(s: &mut Session, conn: ConnId, now: Time) -> bool {
        while let Some(t) = s.poll_transmit(conn, now, 0) {
            let mut dec = super::super::Decoder::default();
            dec.push(&t.head);
            dec.push(&t.data);
            if let Ok(Some(Frame::Probe { .. })) = dec.next_frame() {
                return true;
            }
        }
        false
    }

    /// A connection is probed only when idle in both directions: one that keeps receiving the
    /// peer's data is busy (the lab's sensing server, which only receives, probed its 3G link
    /// every 10 s with 16 KiB and starved the upload's ACKs).
    #[test]
    fn a_connection_receiving_data_is_not_probed() {
        let mut s = hotspot([Some(600_000), Some(2_000_000)]);
        let t = s.config.probe_interval;
        let chunk = |irob| {
            Frame::Data(super::super::wire::Chunk {
                irob,
                label: Label::BackgroundLarge,
                offset: 0,
                deps: Some(Deps::List(vec![])),
                end: true,
                acks: vec![],
                data: Bytes::from_static(b"sample"),
            })
        };
        // Data arrives on connection 1 only, every second.
        for i in 0..10u64 {
            s.handle_frame(1, chunk(i), Time::from_millis(i * 1000 + 500));
        }
        let now = Time::ZERO + t + Duration::from_millis(100);
        assert!(!probes(&mut s, 1, now), "a receiving connection was probed");
        assert!(probes(&mut s, 2, now), "an idle connection was not probed");
    }

    /// Every frame `conn` would send at `now` with `room` bytes of background room.
    fn frames_on(s: &mut Session, conn: ConnId, now: Time, room: u64) -> Vec<Frame> {
        let mut frames = Vec::new();
        while let Some(t) = s.poll_transmit(conn, now, room) {
            let mut dec = super::super::Decoder::default();
            dec.push(&t.head);
            dec.push(&t.data);
            while let Ok(Some(f)) = dec.next_frame() {
                frames.push(f);
            }
        }
        frames
    }

    /// The IROBs of the data frames `conn` would send at `now`.
    fn data_on(s: &mut Session, conn: ConnId, now: Time) -> Vec<IrobId> {
        frames_on(s, conn, now, u64::MAX)
            .into_iter()
            .filter_map(|f| match f {
                Frame::Data(c) => Some(c.irob),
                _ => None,
            })
            .collect()
    }

    /// Every connection of a client carries an `Estimate` once a second, the idle one too (a
    /// frame in flight there is what lets its kernel report a network that vanished), even
    /// when the busy connection's writer always asks first.
    #[test]
    fn every_connection_carries_an_estimate_each_second() {
        let mut s = hotspot([Some(600_000), Some(2_000_000)]);
        let mut estimates = [0, 0];
        for step in 0..=15 {
            let now = Time::from_millis(200 * step);
            for conn in [2, 1] {
                estimates[conn as usize - 1] += frames_on(&mut s, conn, now, 0)
                    .iter()
                    .filter(|f| matches!(f, Frame::Estimate { .. }))
                    .count();
            }
        }
        // At 0, 1, 2 and 3 s on each.
        assert_eq!(estimates, [4, 4]);
    }

    /// A small foreground IROB unacknowledged past the hedge delay is sent once more over the
    /// other network (the WiFi it went on may have vanished without a break yet); a large one
    /// and background ones are not, and neither is anything with hedging off.
    #[test]
    fn a_late_small_foreground_irob_is_sent_again_over_the_other_network() {
        for hedge in [true, false] {
            let mut s = hotspot([Some(600_000), Some(2_000_000)]);
            s.config.hedge = hedge;
            queue_small_irobs(&mut s, 1, 100);
            for label in [Label::BackgroundSmall, Label::ForegroundLarge] {
                let id = s
                    .begin_irob(label, Deps::List(vec![]), None, Time::ZERO)
                    .unwrap();
                s.irob_send(id, Bytes::from(vec![7u8; 100])).unwrap();
                s.end_irob(id).unwrap();
            }
            let mut first = data_on(&mut s, 1, Time::ZERO);
            first.extend(data_on(&mut s, 2, Time::ZERO));
            first.sort();
            assert_eq!(first, vec![0, 1, 2]);
            // WiFi's 20 ms there, up to the largest RTT (3G's 400 ms) back, plus 100 ms.
            let due = Time::from_millis(520);
            if hedge {
                assert_eq!(s.poll_timeout(), Some(due), "the hedge's timer");
            }
            let early = Time::from_millis(519);
            s.handle_timeout(early);
            assert!(data_on(&mut s, 2, early).is_empty());
            s.handle_timeout(due);
            let again = data_on(&mut s, 2, due);
            assert_eq!(again, if hedge { vec![0] } else { vec![] });
            assert_eq!(s.hedges_sent(), u64::from(hedge));
            // Once only.
            let later = due + Duration::from_secs(1);
            s.handle_timeout(later);
            assert!(data_on(&mut s, 1, later).is_empty());
            assert!(data_on(&mut s, 2, later).is_empty());
            assert_eq!(s.hedges_sent(), u64::from(hedge), "counted once");
            s.on_ack(0);
            assert_eq!(s.unacknowledged(), 200, "bytes of the other two");
        }
    }

    /// After a hedge, new small foreground IROBs avoid the connection the late one went on
    /// (a WiFi that vanished stalls silently) until something arrives on it, or for
    /// `SUSPECT_FOR`.
    #[test]
    fn a_connection_that_needed_a_hedge_is_avoided_until_heard_from() {
        let mut s = hotspot([Some(600_000), Some(2_000_000)]);
        assert_eq!(send_one(&mut s, Time::ZERO), "wifi");
        let due = Time::from_millis(520);
        s.handle_timeout(due);
        assert_eq!(data_on(&mut s, 2, due), vec![0], "the hedge");
        assert_eq!(send_one(&mut s, due), "cell", "the WiFi is suspect");
        // Something arrives on the WiFi: it is alive.
        let heard = due + Duration::from_millis(100);
        s.handle_frame(1, Frame::Ack { acks: vec![] }, heard);
        assert_eq!(send_one(&mut s, heard), "wifi");
        // Suspect again after another late one, then trusted again once SUSPECT_FOR passes.
        let due2 = heard + Duration::from_millis(520);
        s.handle_timeout(due2);
        let _ = data_on(&mut s, 2, due2);
        assert_eq!(send_one(&mut s, due2), "cell");
        // (That IROB's own hedge, back over the WiFi, is due in 520 ms: acknowledge it.)
        s.on_ack(3);
        let after = due2 + SUSPECT_FOR;
        assert_eq!(send_one(&mut s, after), "wifi");
    }

    /// Which network a new small foreground IROB sent at `now` went over.
    fn send_one(s: &mut Session, now: Time) -> &'static str {
        queue_small_irobs(s, 1, 100);
        let (wifi, cell) = (data_on(s, 1, now), data_on(s, 2, now));
        match (wifi.len(), cell.len()) {
            (1, 0) => "wifi",
            (0, 1) => "cell",
            other => panic!("{other:?}"),
        }
    }

    /// The lab's vehicular sensing story: the WiFi vanishes silently with an urgent message in
    /// it, which is hedged over 3G; the next one goes over 3G, which delivers it but whose
    /// acknowledgement is late. It is not hedged into the WiFi, silent longer than the 3G,
    /// until the WiFi's suspicion lapses, so the 3G does not become suspect and the third
    /// message goes over it too.
    #[test]
    fn a_late_irob_is_not_hedged_into_a_connection_silent_longer() {
        let mut s = hotspot([Some(600_000), Some(2_000_000)]);
        assert_eq!(send_one(&mut s, Time::ZERO), "wifi");
        let due = Time::from_millis(520);
        s.handle_timeout(due);
        assert_eq!(data_on(&mut s, 2, due), vec![0], "the hedge");
        let heard = Time::from_millis(600);
        s.handle_frame(2, Frame::Ack { acks: vec![0] }, heard);
        assert_eq!(send_one(&mut s, heard), "cell", "the WiFi is suspect");
        // Its hedge would be due after 400 + 400 + 100 ms; the only other connection is the
        // suspect WiFi, silent since before the 3G was last heard: not until it lapses.
        let lapse = due + SUSPECT_FOR;
        assert_eq!(
            s.poll_timeout(),
            Some(lapse),
            "the hedge waits for the WiFi"
        );
        let late = heard + Duration::from_millis(900);
        s.handle_timeout(late);
        assert!(data_on(&mut s, 1, late).is_empty(), "hedged into the WiFi");
        assert_eq!(s.hedges_sent(), 1);
        assert_eq!(send_one(&mut s, late), "cell", "the 3G was made suspect");
        // Once the WiFi's suspicion lapses both are hedged there after all.
        s.handle_timeout(lapse);
        assert_eq!(data_on(&mut s, 1, lapse), vec![1, 2]);
        assert_eq!(s.hedges_sent(), 3);
    }

    /// Of two suspect connections, a new small foreground IROB takes the one heard from more
    /// recently.
    #[test]
    fn of_two_suspects_the_one_heard_from_last_is_preferred() {
        let mut s = hotspot([Some(600_000), Some(2_000_000)]);
        let now = Time::from_millis(3000);
        for (conn, heard) in [(1, 500), (2, 2500)] {
            let c = s.conns.get_mut(&conn).unwrap();
            c.suspect_since = Some(Time::from_millis(2900));
            c.heard = Time::from_millis(heard);
        }
        assert_eq!(send_one(&mut s, now), "cell");
        s.on_ack(0);
        s.conns.get_mut(&1).unwrap().heard = Time::from_millis(2600);
        assert_eq!(send_one(&mut s, now), "wifi");
    }

    /// A connection whose kernel reports a retransmission timeout for data in flight is
    /// avoided by new small foreground IROBs until a report says otherwise.
    #[test]
    fn a_connection_in_retransmission_timeout_is_avoided() {
        let mut s = hotspot([Some(600_000), Some(2_000_000)]);
        let stalled = KernelQueue {
            in_flight: 88,
            unsent: 0,
            timed_out: true,
        };
        s.kernel_queue(1, stalled);
        assert_eq!(send_one(&mut s, Time::ZERO), "cell");
        // Nor is a late one hedged into it, while the kernel says so.
        assert_eq!(s.poll_timeout(), Some(Time::ZERO + s.config.probe_interval));
        let late = Time::from_millis(900);
        s.handle_timeout(late);
        assert!(
            data_on(&mut s, 1, late).is_empty(),
            "hedged into the stalled WiFi"
        );
        s.on_ack(0);
        s.kernel_queue(1, kq(0, 0));
        assert_eq!(send_one(&mut s, Time::ZERO), "wifi");
    }

    /// A small foreground IROB in flight only on a connection that breaks is sent again at
    /// once over another, without asking the peer what it has (a round trip); a background
    /// one in flight there is asked about as before.
    #[test]
    fn a_small_foreground_irob_on_a_broken_connection_is_sent_again_at_once() {
        let mut s = hotspot([Some(600_000), Some(2_000_000)]);
        assert_eq!(send_one(&mut s, Time::ZERO), "wifi");
        let id = s
            .begin_irob(Label::BackgroundSmall, Deps::List(vec![]), None, Time::ZERO)
            .unwrap();
        s.irob_send(id, Bytes::from(vec![7u8; 100])).unwrap();
        s.end_irob(id).unwrap();
        let mut bg = data_on(&mut s, 1, Time::ZERO);
        bg.extend(data_on(&mut s, 2, Time::ZERO));
        assert_eq!(bg, vec![1]);
        let broke = Time::from_millis(100);
        s.connection_closed(1, broke);
        s.handle_timeout(broke);
        assert_eq!(
            data_on(&mut s, 2, broke),
            vec![0],
            "the urgent one, at once"
        );
        assert!(s.doubt.contains(&1), "the background one is asked about");
        assert!(!s.doubt.contains(&0));
    }

    /// The receiver delivers the first copy of a hedged IROB and ignores the second, but
    /// acknowledges it again (the first acknowledgement may have gone out on a dead network).
    #[test]
    fn a_second_copy_is_not_delivered_but_acknowledged_again() {
        let mut s = hotspot([Some(600_000), Some(2_000_000)]);
        let chunk = || {
            Frame::Data(super::super::wire::Chunk {
                irob: 0,
                label: Label::ForegroundSmall,
                offset: 0,
                deps: Some(Deps::List(vec![])),
                end: true,
                acks: vec![],
                data: Bytes::from_static(b"brake"),
            })
        };
        let acks = |s: &mut Session, conn| {
            let mut n = 0;
            while let Some(t) = s.poll_transmit(conn, Time::ZERO, 0) {
                let mut dec = super::super::Decoder::default();
                dec.push(&t.head);
                dec.push(&t.data);
                while let Ok(Some(f)) = dec.next_frame() {
                    if let Frame::Ack { acks } = f {
                        n += acks.iter().filter(|&&a| a == 0).count();
                    }
                }
            }
            n
        };
        s.handle_frame(1, chunk(), Time::ZERO);
        assert_eq!(acks(&mut s, 1), 1);
        let d = s.recv().expect("the first copy is delivered");
        assert_eq!((d.irob, &d.data[..], d.end), (0, &b"brake"[..], true));
        assert_eq!(s.duplicate_bytes(), 0);
        s.handle_frame(2, chunk(), Time::ZERO);
        assert!(s.recv().is_none(), "the second copy was delivered");
        assert_eq!(acks(&mut s, 2), 1);
        assert_eq!(s.duplicate_bytes(), 5, "the second copy's bytes");
        // A resend overlapping bytes already held counts only the overlap.
        let part = |data: &'static [u8], end| {
            Frame::Data(super::super::wire::Chunk {
                irob: 1,
                label: Label::BackgroundLarge,
                offset: 0,
                deps: Some(Deps::List(vec![])),
                end,
                acks: vec![],
                data: Bytes::from_static(data),
            })
        };
        s.handle_frame(1, part(b"abc", false), Time::ZERO);
        s.handle_frame(2, part(b"abcdef", true), Time::ZERO);
        assert_eq!(s.duplicate_bytes(), 5 + 3);
    }
}
