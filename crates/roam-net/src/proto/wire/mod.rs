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
        networks: Vec<NetInfo>,
    },
    /// See [`Kind::HelloAck`].
    HelloAck {
        session: u64,
        key: [u8; KEY_LEN],
        window: u64,
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
        }
    }

    /// Encode: the header and any small body go into `head`; a data chunk's bytes are returned
    /// separately so that the driver can write them without a copy.
    pub fn encode(&self, head: &mut Vec<u8>) -> Bytes {
        let mut body = Vec::new();
        let mut tail = Bytes::new();
        let h = match self {
            Frame::Hello {
                key,
                window,
                networks,
            } => {
                body.extend_from_slice(key);
                put_nets(&mut body, networks);
                Header {
                    a: *window,
                    c: networks.len() as u32,
                    ..hdr(Kind::Hello)
                }
            }
            Frame::HelloAck {
                session,
                key,
                window,
                networks,
            } => {
                body.extend_from_slice(key);
                put_nets(&mut body, networks);
                Header {
                    a: *session,
                    b: *window,
                    c: networks.len() as u32,
                    ..hdr(Kind::HelloAck)
                }
            }
            Frame::Join {
                session,
                nonce,
                net,
            } => {
                body.extend_from_slice(nonce);
                Header {
                    a: *session,
                    c: *net,
                    ..hdr(Kind::Join)
                }
            }
            Frame::JoinChallenge { nonce, mac } => {
                body.extend_from_slice(nonce);
                body.extend_from_slice(mac);
                hdr(Kind::JoinChallenge)
            }
            Frame::JoinProof { mac } => {
                body.extend_from_slice(mac);
                hdr(Kind::JoinProof)
            }
            Frame::JoinOk => hdr(Kind::JoinOk),
            Frame::Data(ch) => {
                let mut flags = 0;
                let mut ndeps = 0;
                if ch.end {
                    flags |= FLAG_END;
                }
                match &ch.deps {
                    None => {}
                    Some(Deps::AllEarlier) => flags |= FLAG_FIRST | FLAG_DEPS_ALL,
                    Some(Deps::List(ids)) => {
                        flags |= FLAG_FIRST;
                        ndeps = ids.len();
                        put_ids(&mut body, ids);
                    }
                }
                put_ids(&mut body, &ch.acks);
                tail = ch.data.clone();
                Header {
                    label: ch.label.to_wire(),
                    flags,
                    a: ch.irob,
                    b: ch.offset,
                    c: ndeps as u32,
                    d: ch.acks.len() as u32,
                    ..hdr(Kind::Data)
                }
            }
            Frame::Ack { acks } => {
                put_ids(&mut body, acks);
                Header {
                    d: acks.len() as u32,
                    ..hdr(Kind::Ack)
                }
            }
            Frame::ResendRequest { irobs } => {
                put_ids(&mut body, irobs);
                Header {
                    c: irobs.len() as u32,
                    ..hdr(Kind::ResendRequest)
                }
            }
            Frame::Have { entries } => {
                for e in entries {
                    body.extend_from_slice(&e.irob.to_be_bytes());
                    let f = (e.complete as u8)
                        | ((e.first as u8) << 1)
                        | ((e.end.is_some() as u8) << 2);
                    body.extend_from_slice(&[f, 0, 0, 0]);
                    body.extend_from_slice(&(e.ranges.len() as u32).to_be_bytes());
                    body.extend_from_slice(&e.end.unwrap_or(0).to_be_bytes());
                    for (s, t) in &e.ranges {
                        body.extend_from_slice(&s.to_be_bytes());
                        body.extend_from_slice(&t.to_be_bytes());
                    }
                }
                Header {
                    c: entries.len() as u32,
                    ..hdr(Kind::Have)
                }
            }
            Frame::Estimate { networks } => {
                put_nets(&mut body, networks);
                Header {
                    c: networks.len() as u32,
                    ..hdr(Kind::Estimate)
                }
            }
            Frame::Probe { id, padding } => {
                tail = Bytes::from(vec![0u8; *padding as usize]);
                Header {
                    a: *id,
                    ..hdr(Kind::Probe)
                }
            }
            Frame::ProbeReply { id, probe_size } => Header {
                a: *id,
                b: *probe_size,
                ..hdr(Kind::ProbeReply)
            },
            Frame::Goodbye { irobs } => Header {
                a: *irobs,
                ..hdr(Kind::Goodbye)
            },
            Frame::Error { reason, fatal } => {
                body.extend_from_slice(reason.as_bytes());
                Header {
                    a: *fatal as u64,
                    ..hdr(Kind::Error)
                }
            }
        };
        put_header(head, h, body.len() + tail.len());
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

mod decoder;
pub use decoder::Decoder;

#[cfg(test)]
mod tests;
