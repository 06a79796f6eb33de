//! The wire format, version 3 (documented for implementers in `docs/wire-format.md`).
//!
//! Intentional Networking is not a new IP protocol: a multi-socket frames its data over ordinary
//! TCP connections (paper §4.2). Every frame starts with a fixed 32-byte header:
//!
//! ```text
//!  0      1      2      3      4              8                      16                     24             28            32
//!  +------+------+------+------+--------------+----------------------+----------------------+--------------+-------------+
//!  | ver  | kind |label |flags | body_len u32 | a: u64 (irob/session)| b: u64 (offset/...)  | c: u32       | d: u32      |
//!  +------+------+------+------+--------------+----------------------+----------------------+--------------+-------------+
//! ```
//!
//! All integers are big-endian. `body_len` bytes of body follow; their layout depends on `kind`.
//! For a data chunk, `a` is the IROB id, `b` the byte offset, `c` the number of dependencies and
//! `d` the number of piggybacked IROB acknowledgements; the body is the dependency ids, then the
//! acknowledged ids, then the data. The decoder checks every length against [`WireLimits`] before
//! allocating, so a peer cannot make us reserve memory it has not sent.

use std::net::{IpAddr, Ipv6Addr};

use bytes::Bytes;
use thiserror::Error;

use super::label::Label;

/// The protocol version this implementation speaks.
pub const VERSION: u8 = 3;
/// Length of the fixed chunk header.
pub const HEADER_LEN: usize = 32;
/// Length of the per-multi-socket keys exchanged on the first connection.
pub const KEY_LEN: usize = 32;
/// Length of the nonces of a join handshake.
pub const NONCE_LEN: usize = 16;
/// Length of an HMAC-SHA256 proof.
pub const MAC_LEN: usize = 32;
/// Encoded size of one [`NetInfo`].
pub const NETINFO_LEN: usize = 40;

/// Data chunk flag: this chunk ends its IROB.
pub const FLAG_END: u8 = 1;
/// Data chunk flag: this chunk carries the IROB's dependency list.
pub const FLAG_FIRST: u8 = 2;
/// Data chunk flag (with `FLAG_FIRST`): the IROB depends on every IROB with a lower id.
pub const FLAG_DEPS_ALL: u8 = 4;

/// Data payloads shorter than this are copied out of the receive buffer when decoded. A
/// payload is otherwise a slice of the buffer the driver read into, and keeps all of it alive
/// until the application takes the bytes: a peer that sent a one-byte chunk in every buffer,
/// padded with frames that are dropped, would pin a whole buffer (1 MiB in the runtime) per byte
/// the receive limit counts. With the copy, a payload held keeps at most its own length
/// alive, or, if it is longer than this, a buffer of a few times its length (the runtime reads
/// at most 4 × this at a time, see `runtime::conn_io`). Bulk chunks (256 KiB by default) stay
/// zero-copy.
pub const COPY_BELOW: usize = 256 * 1024;

/// `data` as a payload to hold: copied when shorter than [`COPY_BELOW`].
fn own_if_small(data: Bytes) -> Bytes {
    if data.len() < COPY_BELOW {
        Bytes::copy_from_slice(&data)
    } else {
        data
    }
}

/// What a peer announces it can do, in `Hello` and `HelloAck` (header `d`): each side uses a
/// capability only when both announced it. A peer that predates a bit sends 0 there and
/// ignores the field, so the pair falls back to what both speak (version 3 is unchanged).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Caps(pub u32);

impl Caps {
    /// No capabilities: the behaviour of every version-3 peer.
    pub const NONE: Caps = Caps(0);
    /// "I send [`Frame::Credit`] as my application reads, and honour the peer's": explicit,
    /// credit-based flow control in place of the fixed window and the driver's pause
    /// (`proto::session::flow`).
    pub const CREDIT: Caps = Caps(1);
    /// "As a sender I add the peer's read rate times the round trip to its credit"
    /// (Sanadhya thesis ch. III, AFC's feed-forward): a receiver sends its read rate only to
    /// a peer that announced this. Meaningful only with [`Caps::CREDIT`].
    pub const READ_RATE: Caps = Caps(2);
    /// Every bit this implementation knows.
    pub const KNOWN: Caps = Caps(3);

    /// Whether every bit of `other` is set here.
    pub fn contains(self, other: Caps) -> bool {
        self.0 & other.0 == other.0
    }

    /// The bits both sides announced (and this side knows).
    pub fn common(self, other: Caps) -> Caps {
        Caps(self.0 & other.0 & Caps::KNOWN.0)
    }
}

impl std::ops::BitOr for Caps {
    type Output = Caps;
    fn bitor(self, other: Caps) -> Caps {
        Caps(self.0 | other.0)
    }
}

/// Frame kinds (header byte 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// First frame of a new multi-socket: key, receive window, networks and estimates.
    Hello = 1,
    /// Answer to `Hello`: session id, key, window, networks.
    HelloAck = 2,
    /// First frame of a connection joining an existing multi-socket.
    Join = 3,
    /// The acceptor's nonce and proof of the key.
    JoinChallenge = 4,
    /// The initiator's proof of the key.
    JoinProof = 5,
    /// The join is accepted; data may flow.
    JoinOk = 6,
    /// A chunk of an IROB.
    Data = 7,
    /// IROB acknowledgements.
    Ack = 8,
    /// "Which bytes of these IROBs do you have?" after a connection broke.
    ResendRequest = 9,
    /// The answer to `ResendRequest`.
    Have = 10,
    /// Per-network estimates.
    Estimate = 11,
    /// An active measurement probe, echoed at once.
    Probe = 12,
    /// The echo of a `Probe`.
    ProbeReply = 13,
    /// The sender will begin no more IROBs.
    Goodbye = 14,
    /// The sender closes this connection (or the multi-socket) for the reason given.
    Error = 15,
    /// Flow-control credit: how many payload bytes the peer may have sent in all, and the
    /// receiving application's read rate (AFC). Sent only to a peer that announced
    /// [`Caps::CREDIT`].
    Credit = 16,
}

impl Kind {
    fn from_wire(b: u8) -> Option<Kind> {
        use Kind::*;
        Some(match b {
            1 => Hello,
            2 => HelloAck,
            3 => Join,
            4 => JoinChallenge,
            5 => JoinProof,
            6 => JoinOk,
            7 => Data,
            8 => Ack,
            9 => ResendRequest,
            10 => Have,
            11 => Estimate,
            12 => Probe,
            13 => ProbeReply,
            14 => Goodbye,
            15 => Error,
            16 => Credit,
            _ => return None,
        })
    }
}

/// One network of a peer, with that peer's current estimates (exchanged on the first connection
/// and piggybacked later, paper §4.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetInfo {
    /// The peer's identifier for the network (stable for the session).
    pub net: u32,
    /// Its address (IPv4 or IPv6; on the wire, 16 bytes, IPv4 as an IPv4-mapped IPv6 address).
    pub addr: IpAddr,
    /// Estimated one-way-plus-return latency (round-trip time), microseconds; 0 = unknown.
    pub rtt_us: u32,
    /// Bit 0: metered. Bit 1: usable.
    pub flags: u32,
    /// Estimated bandwidth, bits per second; 0 = unknown.
    pub bandwidth_bps: u64,
    /// The TCP port where the peer accepts connections on this network's address (joins
    /// only); 0 = it accepts none there. Either peer may open a connection (paper §4.2).
    pub port: u16,
}

/// What a receiver holds of one IROB (the answer to a resend request).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HaveEntry {
    /// The IROB.
    pub irob: u64,
    /// Every byte and the end have arrived (or it was delivered long ago).
    pub complete: bool,
    /// The dependency list has arrived.
    pub first: bool,
    /// The IROB's length, if its end has arrived.
    pub end: Option<u64>,
    /// Byte ranges `[start, end)` present.
    pub ranges: Vec<(u64, u64)>,
}

/// Dependencies of an IROB as carried by its first chunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Deps {
    /// Delivered after every IROB with a lower id (`send`, "TCP with labels").
    AllEarlier,
    /// Delivered after these IROBs (all lower than the IROB's own id).
    List(Vec<u64>),
}

/// A data chunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// The IROB.
    pub irob: u64,
    /// Its label.
    pub label: Label,
    /// Offset of `data` within the IROB.
    pub offset: u64,
    /// The dependency list, carried by the first chunk (and by a resent first chunk).
    pub deps: Option<Deps>,
    /// This chunk ends the IROB: its length is `offset + data.len()`.
    pub end: bool,
    /// Piggybacked acknowledgements of IROBs received from the peer.
    pub acks: Vec<u64>,
    /// The bytes.
    pub data: Bytes,
}

/// A decoded frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    /// See [`Kind::Hello`].
    Hello {
        key: [u8; KEY_LEN],
        window: u64,
        caps: Caps,
        networks: Vec<NetInfo>,
    },
    /// See [`Kind::HelloAck`].
    HelloAck {
        session: u64,
        key: [u8; KEY_LEN],
        window: u64,
        caps: Caps,
        networks: Vec<NetInfo>,
    },
    /// See [`Kind::Join`].
    Join {
        session: u64,
        nonce: [u8; NONCE_LEN],
        net: u32,
    },
    /// See [`Kind::JoinChallenge`].
    JoinChallenge {
        nonce: [u8; NONCE_LEN],
        mac: [u8; MAC_LEN],
    },
    /// See [`Kind::JoinProof`].
    JoinProof { mac: [u8; MAC_LEN] },
    /// See [`Kind::JoinOk`].
    JoinOk,
    /// See [`Kind::Data`].
    Data(Chunk),
    /// See [`Kind::Ack`].
    Ack { acks: Vec<u64> },
    /// See [`Kind::ResendRequest`].
    ResendRequest { irobs: Vec<u64> },
    /// See [`Kind::Have`].
    Have { entries: Vec<HaveEntry> },
    /// See [`Kind::Estimate`].
    Estimate { networks: Vec<NetInfo> },
    /// See [`Kind::Probe`]: `padding` zero bytes follow the header.
    Probe { id: u64, padding: u32 },
    /// See [`Kind::ProbeReply`].
    ProbeReply { id: u64, probe_size: u64 },
    /// See [`Kind::Goodbye`]: the sender began `irobs` IROBs in all.
    Goodbye { irobs: u64 },
    /// See [`Kind::Error`]. `fatal`: the sender failed the whole multi-socket (an abort, a
    /// limit the receiver exceeded), not only this connection.
    Error { reason: String, fatal: bool },
    /// See [`Kind::Credit`]: the peer may have sent `limit` payload bytes in all (first
    /// sends, cumulative), plus, with [`Caps::READ_RATE`], up to `feed_forward_kib` KiB more
    /// by the read rate `rate` (bytes per second; 0 = none) times its round trip.
    /// `proactive`: sent because the read rate moved, not because the credit ran low.
    Credit {
        limit: u64,
        rate: u64,
        feed_forward_kib: u32,
        proactive: bool,
    },
}

/// Bounds the decoder enforces before it allocates.
#[derive(Clone, Copy, Debug)]
pub struct WireLimits {
    /// Largest body of any frame.
    pub max_body: usize,
    /// Most dependencies one IROB may name.
    pub max_deps: usize,
    /// Most entries in any list (acks, networks, resend requests).
    pub max_list: usize,
}

impl Default for WireLimits {
    fn default() -> Self {
        WireLimits {
            max_body: 1 << 20,
            max_deps: 1024,
            max_list: 4096,
        }
    }
}

/// A malformed frame. The connection it came on is closed; the multi-socket lives on.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum WireError {
    /// Header byte 0 is not a version we speak.
    #[error("unsupported protocol version {0} (this side speaks {VERSION})")]
    Version(u8),
    /// Header byte 1 is not a frame kind.
    #[error("unknown frame kind {0}")]
    Kind(u8),
    /// A data chunk's header byte 2 is not a label.
    #[error("invalid label {0} in a data chunk (0..=3 expected)")]
    Label(u8),
    /// The body is longer than the limit.
    #[error("{kind:?} frame body of {len} bytes exceeds the limit of {max}")]
    TooLong {
        /// Frame kind.
        kind: Kind,
        /// Announced body length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The body does not have the layout its kind requires.
    #[error("malformed {kind:?} frame: {what}")]
    Malformed {
        /// Frame kind.
        kind: Kind,
        /// What is wrong.
        what: String,
    },
}

struct Header {
    kind: u8,
    label: u8,
    flags: u8,
    a: u64,
    b: u64,
    c: u32,
    d: u32,
}

fn put_header(out: &mut Vec<u8>, h: Header, body_len: usize) {
    out.push(VERSION);
    out.push(h.kind);
    out.push(h.label);
    out.push(h.flags);
    out.extend_from_slice(&(body_len as u32).to_be_bytes());
    out.extend_from_slice(&h.a.to_be_bytes());
    out.extend_from_slice(&h.b.to_be_bytes());
    out.extend_from_slice(&h.c.to_be_bytes());
    out.extend_from_slice(&h.d.to_be_bytes());
}

fn put_ids(out: &mut Vec<u8>, ids: &[u64]) {
    for id in ids {
        out.extend_from_slice(&id.to_be_bytes());
    }
}

fn put_nets(out: &mut Vec<u8>, nets: &[NetInfo]) {
    for n in nets {
        out.extend_from_slice(&n.net.to_be_bytes());
        let v6 = match n.addr {
            IpAddr::V4(a) => a.to_ipv6_mapped(),
            IpAddr::V6(a) => a,
        };
        out.extend_from_slice(&v6.octets());
        out.extend_from_slice(&n.rtt_us.to_be_bytes());
        out.extend_from_slice(&n.flags.to_be_bytes());
        out.extend_from_slice(&n.bandwidth_bps.to_be_bytes());
        out.extend_from_slice(&n.port.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
    }
}

fn hdr(kind: Kind) -> Header {
    Header {
        kind: kind as u8,
        label: 0,
        flags: 0,
        a: 0,
        b: 0,
        c: 0,
        d: 0,
    }
}

impl Frame {
    /// The frame's kind, by name (for error messages and logs).
    pub fn name(&self) -> &'static str {
        match self {
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
            Frame::Credit { .. } => "Credit",
        }
    }

    /// Encode: the header and any small body go into `head`; a data chunk's bytes are returned
    /// separately so that the driver can write them without a copy.
    ///
    /// Each kind is laid out by its own function below (the table of kinds in
    /// `docs/wire-format.md`, one row each); this one only writes the result: the header, whose
    /// `body_len` counts the body and the tail, then the body.
    pub fn encode(&self, head: &mut Vec<u8>) -> Bytes {
        let Layout { header, body, tail } = match self {
            Frame::Hello {
                key,
                window,
                caps,
                networks,
            } => encode_hello(key, *window, *caps, networks),
            Frame::HelloAck {
                session,
                key,
                window,
                caps,
                networks,
            } => encode_hello_ack(*session, key, *window, *caps, networks),
            Frame::Join {
                session,
                nonce,
                net,
            } => encode_join(*session, nonce, *net),
            Frame::JoinChallenge { nonce, mac } => encode_join_challenge(nonce, mac),
            Frame::JoinProof { mac } => encode_join_proof(mac),
            Frame::JoinOk => encode_join_ok(),
            Frame::Data(chunk) => encode_data(chunk),
            Frame::Ack { acks } => encode_ack(acks),
            Frame::ResendRequest { irobs } => encode_resend_request(irobs),
            Frame::Have { entries } => encode_have(entries),
            Frame::Estimate { networks } => encode_estimate(networks),
            Frame::Probe { id, padding } => encode_probe(*id, *padding),
            Frame::ProbeReply { id, probe_size } => encode_probe_reply(*id, *probe_size),
            Frame::Goodbye { irobs } => encode_goodbye(*irobs),
            Frame::Error { reason, fatal } => encode_error(reason, *fatal),
            Frame::Credit {
                limit,
                rate,
                feed_forward_kib,
                proactive,
            } => encode_credit(*limit, *rate, *feed_forward_kib, *proactive),
        };
        put_header(head, header, body.len() + tail.len());
        head.extend_from_slice(&body);
        tail
    }

    /// Encode into one buffer (tests and control frames).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut head = Vec::new();
        let tail = self.encode(&mut head);
        head.extend_from_slice(&tail);
        head
    }
}

// ----- encoding, one function per frame kind ---------------------------------------------------

/// One frame laid out for the wire, before its header is written: the header's fields, the
/// body built here, and the tail: body bytes that already sit in a buffer of their own (a data
/// chunk's payload, a probe's padding), which the driver writes after the body without copying
/// them. The header's `body_len` counts the body and the tail.
struct Layout {
    header: Header,
    body: Vec<u8>,
    tail: Bytes,
}

impl Layout {
    /// A frame that is its header alone.
    fn header_only(header: Header) -> Layout {
        Layout::with_body(header, Vec::new())
    }

    /// A frame whose whole body is built here (no tail).
    fn with_body(header: Header, body: Vec<u8>) -> Layout {
        Layout {
            header,
            body,
            tail: Bytes::new(),
        }
    }
}

/// `Hello` (kind 1), the client's first frame of a new multi-socket: `a` is its receive
/// window in bytes, `c` the number of its networks and `d` its [`Caps`]; the body is its
/// fresh 32-byte key, then one [`NetInfo`] per network (the first names the connection's own
/// network).
fn encode_hello(key: &[u8; KEY_LEN], window: u64, caps: Caps, networks: &[NetInfo]) -> Layout {
    Layout::with_body(
        Header {
            a: window,
            c: networks.len() as u32,
            d: caps.0,
            ..hdr(Kind::Hello)
        },
        key_and_networks(key, networks),
    )
}

/// `HelloAck` (kind 2), the server's answer to `Hello`: `a` is the session id it chose, `b`
/// its receive window, `c` the number of its networks and `d` its [`Caps`]; the body is laid
/// out as `Hello`'s, with the server's key. The multi-socket's secret is the client's key
/// followed by this one.
fn encode_hello_ack(
    session: u64,
    key: &[u8; KEY_LEN],
    window: u64,
    caps: Caps,
    networks: &[NetInfo],
) -> Layout {
    Layout::with_body(
        Header {
            a: session,
            b: window,
            c: networks.len() as u32,
            d: caps.0,
            ..hdr(Kind::HelloAck)
        },
        key_and_networks(key, networks),
    )
}

/// The body of `Hello` and `HelloAck`: the key, then the networks.
fn key_and_networks(key: &[u8; KEY_LEN], networks: &[NetInfo]) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(key);
    put_nets(&mut body, networks);
    body
}

/// `Join` (kind 3), the first frame of a connection joining an existing multi-socket: `a` is
/// the session id, `c` the id of the network it names (the initiator's own, or when the
/// server opens the connection, the client network whose listener it connects to); the body
/// is the initiator's 16-byte nonce, which the acceptor's challenge must answer.
fn encode_join(session: u64, nonce: &[u8; NONCE_LEN], net: u32) -> Layout {
    Layout::with_body(
        Header {
            a: session,
            c: net,
            ..hdr(Kind::Join)
        },
        nonce.to_vec(),
    )
}

/// `JoinChallenge` (kind 4): the acceptor's fresh nonce, then its HMAC proving that it knows
/// the multi-socket's secret. Its fresh nonce is what makes a recorded proof useless.
fn encode_join_challenge(nonce: &[u8; NONCE_LEN], mac: &[u8; MAC_LEN]) -> Layout {
    let mut body = Vec::new();
    body.extend_from_slice(nonce);
    body.extend_from_slice(mac);
    Layout::with_body(hdr(Kind::JoinChallenge), body)
}

/// `JoinProof` (kind 5): the initiator's HMAC over both nonces, its proof of the secret.
fn encode_join_proof(mac: &[u8; MAC_LEN]) -> Layout {
    Layout::with_body(hdr(Kind::JoinProof), mac.to_vec())
}

/// `JoinOk` (kind 6): the join is accepted and data may flow; the header alone.
fn encode_join_ok() -> Layout {
    Layout::header_only(hdr(Kind::JoinOk))
}

/// `Data` (kind 7), a chunk of an IROB: the header carries the IROB's label and the chunk's
/// flags, `a` the IROB id, `b` the offset of the data within the IROB, `c` the number of
/// dependencies and `d` the number of piggybacked acknowledgements. The body is the
/// dependency ids, then the acknowledged IROB ids (8 bytes each); the data follows as the
/// tail, so that a bulk chunk goes from the application's buffer to the socket uncopied.
fn encode_data(chunk: &Chunk) -> Layout {
    let (flags, deps) = data_flags(chunk);
    let mut body = Vec::new();
    put_ids(&mut body, deps);
    put_ids(&mut body, &chunk.acks);
    Layout {
        header: Header {
            label: chunk.label.to_wire(),
            flags,
            a: chunk.irob,
            b: chunk.offset,
            c: deps.len() as u32,
            d: chunk.acks.len() as u32,
            ..hdr(Kind::Data)
        },
        body,
        tail: chunk.data.clone(),
    }
}

/// A data chunk's flags, and the dependency ids its body lists. END marks the chunk that ends
/// its IROB. FIRST marks a chunk that carries the IROB's dependencies: a list of ids (in the
/// body), or with DEPS_ALL every IROB with a lower id, which costs no body bytes however long
/// the stream (`send`, "TCP with labels").
fn data_flags(chunk: &Chunk) -> (u8, &[u64]) {
    let end = if chunk.end { FLAG_END } else { 0 };
    match &chunk.deps {
        None => (end, &[]),
        Some(Deps::AllEarlier) => (end | FLAG_FIRST | FLAG_DEPS_ALL, &[]),
        Some(Deps::List(ids)) => (end | FLAG_FIRST, ids),
    }
}

/// `Ack` (kind 8): IROB acknowledgements with no data to ride on; `d` counts them, and the
/// body is their ids, 8 bytes each (the field a data chunk's piggybacked ones use).
fn encode_ack(acks: &[u64]) -> Layout {
    let mut body = Vec::new();
    put_ids(&mut body, acks);
    Layout::with_body(
        Header {
            d: acks.len() as u32,
            ..hdr(Kind::Ack)
        },
        body,
    )
}

/// `ResendRequest` (kind 9), sent after a connection broke: "which bytes of these IROBs do
/// you have?"; `c` counts the IROBs, and the body is their ids, 8 bytes each.
fn encode_resend_request(irobs: &[u64]) -> Layout {
    let mut body = Vec::new();
    put_ids(&mut body, irobs);
    Layout::with_body(
        Header {
            c: irobs.len() as u32,
            ..hdr(Kind::ResendRequest)
        },
        body,
    )
}

/// `Have` (kind 10), the answer to a `ResendRequest`: `c` counts the entries, and the body is
/// the entries one after another ([`put_have_entry`]).
fn encode_have(entries: &[HaveEntry]) -> Layout {
    let mut body = Vec::new();
    for e in entries {
        put_have_entry(&mut body, e);
    }
    Layout::with_body(
        Header {
            c: entries.len() as u32,
            ..hdr(Kind::Have)
        },
        body,
    )
}

/// One `Have` entry (24 bytes, then 16 a range): the IROB id (u64); a flags byte (1 complete,
/// 2 first chunk held, 4 end known) and three zero bytes; the number of ranges (u32); the
/// IROB's length (u64, 0 unless its end is known); then each byte range held, as start and
/// end (u64 each).
fn put_have_entry(out: &mut Vec<u8>, e: &HaveEntry) {
    out.extend_from_slice(&e.irob.to_be_bytes());
    let f = (e.complete as u8) | ((e.first as u8) << 1) | ((e.end.is_some() as u8) << 2);
    out.extend_from_slice(&[f, 0, 0, 0]);
    out.extend_from_slice(&(e.ranges.len() as u32).to_be_bytes());
    out.extend_from_slice(&e.end.unwrap_or(0).to_be_bytes());
    for (s, t) in &e.ranges {
        out.extend_from_slice(&s.to_be_bytes());
        out.extend_from_slice(&t.to_be_bytes());
    }
}

/// `Estimate` (kind 11): the sender's networks with its current estimates, `c` of them, one
/// [`NetInfo`] each.
fn encode_estimate(networks: &[NetInfo]) -> Layout {
    let mut body = Vec::new();
    put_nets(&mut body, networks);
    Layout::with_body(
        Header {
            c: networks.len() as u32,
            ..hdr(Kind::Estimate)
        },
        body,
    )
}

/// `Probe` (kind 12), an active measurement the peer echoes at once: `a` is the probe's id,
/// and the body is `padding` zero bytes (sent as the tail), so that the probe's size, and with
/// it the time it takes to arrive, is the sender's choice.
fn encode_probe(id: u64, padding: u32) -> Layout {
    Layout {
        header: Header {
            a: id,
            ..hdr(Kind::Probe)
        },
        body: Vec::new(),
        tail: Bytes::from(vec![0u8; padding as usize]),
    }
}

/// `ProbeReply` (kind 13), the echo of a `Probe`: `a` is the probe's id and `b` the size it
/// arrived with; the header alone.
fn encode_probe_reply(id: u64, probe_size: u64) -> Layout {
    Layout::header_only(Header {
        a: id,
        b: probe_size,
        ..hdr(Kind::ProbeReply)
    })
}

/// `Goodbye` (kind 14): the sender will begin no more IROBs; `a` is how many it began in all,
/// so the receiver knows when it has delivered the last. The header alone.
fn encode_goodbye(irobs: u64) -> Layout {
    Layout::header_only(Header {
        a: irobs,
        ..hdr(Kind::Goodbye)
    })
}

/// `Error` (kind 15): the sender closes the connection; `a` is 1 when it fails the whole
/// multi-socket, else 0, and the body is the reason in UTF-8.
fn encode_error(reason: &str, fatal: bool) -> Layout {
    Layout::with_body(
        Header {
            a: fatal as u64,
            ..hdr(Kind::Error)
        },
        reason.as_bytes().to_vec(),
    )
}

/// `Credit` (kind 16), flow-control credit: `a` is the limit (payload bytes the peer may have
/// sent for the first time, in all), `b` the receiving application's smoothed read rate in
/// bytes per second (0 = none), `c` the most the peer may add to the limit by that rate, in
/// KiB, and `d` bit 0 marks a proactive update (the rate moved). The header alone.
fn encode_credit(limit: u64, rate: u64, feed_forward_kib: u32, proactive: bool) -> Layout {
    Layout::header_only(Header {
        a: limit,
        b: rate,
        c: feed_forward_kib,
        d: proactive as u32,
        ..hdr(Kind::Credit)
    })
}

mod decoder;
pub use decoder::{Decoder, FIRST_BUFFER};

#[cfg(test)]
mod tests;
