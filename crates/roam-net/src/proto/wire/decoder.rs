//! Decoding frames from a connection's byte stream, every length checked against
//! [`WireLimits`] before anything is allocated.

use bytes::{Buf, BytesMut};

use super::*;

/// Incremental frame decoder for one TCP connection's byte stream.
#[derive(Debug, Default)]
pub struct Decoder {
    buf: BytesMut,
    limits: WireLimits,
}

fn malformed(kind: Kind, what: impl Into<String>) -> WireError {
    WireError::Malformed {
        kind,
        what: what.into(),
    }
}

fn take_ids(body: &mut Bytes, n: usize) -> Vec<u64> {
    (0..n).map(|_| body.get_u64()).collect()
}

fn take_nets(body: &mut Bytes, n: usize) -> Vec<NetInfo> {
    (0..n)
        .map(|_| {
            let net = body.get_u32();
            let mut a = [0u8; 16];
            body.copy_to_slice(&mut a);
            let v6 = Ipv6Addr::from(a);
            let addr = v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4);
            NetInfo {
                net,
                addr,
                rtt_us: body.get_u32(),
                flags: body.get_u32(),
                bandwidth_bps: body.get_u64(),
                port: {
                    let port = body.get_u16();
                    body.advance(2); // reserved
                    port
                },
            }
        })
        .collect()
}

fn take_array<const N: usize>(body: &mut Bytes) -> [u8; N] {
    let mut a = [0u8; N];
    body.copy_to_slice(&mut a);
    a
}

/// The decoder's first buffer: enough for a handshake and an idle connection's frames. The
/// runtime's reader moves to larger buffers of its own once data flows (`runtime::conn_io`);
/// an idle connection keeps reusing this one, so it is all the receive memory an idle
/// connection holds (it was 64 KiB, which an idle connection's probes walked through).
pub const FIRST_BUFFER: usize = 16 * 1024;

impl Decoder {
    /// A decoder with the given limits.
    pub fn new(limits: WireLimits) -> Decoder {
        Decoder {
            buf: BytesMut::with_capacity(FIRST_BUFFER),
            limits,
        }
    }

    /// Append received bytes.
    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The buffer to read into directly (avoids a copy in the driver).
    pub fn buffer_mut(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    /// Bytes received but not yet decoded.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Bytes still to arrive to complete the frame at the front of the buffer, once its header
    /// has arrived (`None` before that, and for a header `next_frame` will refuse).
    pub fn missing(&self) -> Option<usize> {
        let h = self.buf.get(..HEADER_LEN)?;
        let body_len = u32::from_be_bytes(h[4..8].try_into().unwrap()) as usize;
        (body_len <= self.limits.max_body)
            .then(|| (HEADER_LEN + body_len).saturating_sub(self.buf.len()))
    }

    /// Decode the next complete frame, if one has arrived. After an error the stream is
    /// unusable (frame boundaries are lost): close the connection.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, WireError> {
        if self.buf.len() < HEADER_LEN {
            return Ok(None);
        }
        let h = &self.buf[..HEADER_LEN];
        if h[0] != VERSION {
            return Err(WireError::Version(h[0]));
        }
        let kind = Kind::from_wire(h[1]).ok_or(WireError::Kind(h[1]))?;
        let body_len = u32::from_be_bytes(h[4..8].try_into().unwrap()) as usize;
        if body_len > self.limits.max_body {
            return Err(WireError::TooLong {
                kind,
                len: body_len,
                max: self.limits.max_body,
            });
        }
        if self.buf.len() < HEADER_LEN + body_len {
            return Ok(None);
        }
        let mut head = self.buf.split_to(HEADER_LEN);
        let body = self.buf.split_to(body_len).freeze();
        head.advance(2);
        let label = head.get_u8();
        let flags = head.get_u8();
        head.advance(4);
        let (a, b, c, d) = (
            head.get_u64(),
            head.get_u64(),
            head.get_u32() as usize,
            head.get_u32() as usize,
        );
        self.decode_body(kind, label, flags, a, b, c, d, body)
            .map(Some)
    }

    /// Decode a frame's body, once its header is read and all of it has arrived. Each kind has
    /// its own function below (its row of the table of kinds in `docs/wire-format.md`), given
    /// the header fields that row gives a meaning: `a` and `b` are 64-bit values (ids, windows,
    /// offsets), `c` and `d` counts of what the body holds. Every count is checked against
    /// [`WireLimits`] and against the body's length before anything is allocated for it, so a
    /// peer cannot make us reserve memory it has not sent.
    #[allow(clippy::too_many_arguments)]
    fn decode_body(
        &self,
        kind: Kind,
        label: u8,
        flags: u8,
        a: u64,
        b: u64,
        c: usize,
        d: usize,
        body: Bytes,
    ) -> Result<Frame, WireError> {
        let lim = &self.limits;
        match kind {
            Kind::Hello => decode_hello(a, c, Caps(d as u32), body, lim),
            Kind::HelloAck => decode_hello_ack(a, b, c, Caps(d as u32), body, lim),
            Kind::Join => decode_join(a, c, body),
            Kind::JoinChallenge => decode_join_challenge(body),
            Kind::JoinProof => decode_join_proof(body),
            Kind::JoinOk => decode_join_ok(body),
            Kind::Data => {
                let h = DataHeader {
                    label,
                    flags,
                    irob: a,
                    offset: b,
                    deps: c,
                    acks: d,
                };
                decode_data(h, body, lim)
            }
            Kind::Ack => decode_ack(d, body, lim),
            Kind::ResendRequest => decode_resend_request(c, body, lim),
            Kind::Have => decode_have(c, body, lim),
            Kind::Estimate => decode_estimate(c, body, lim),
            Kind::Probe => Ok(decode_probe(a, body)),
            Kind::ProbeReply => decode_probe_reply(a, b, body),
            Kind::Goodbye => decode_goodbye(a, body),
            Kind::Error => Ok(decode_error(a, body)),
            Kind::Credit => decode_credit(a, b, c, d, body),
        }
    }
}

// ----- checks shared by the kinds ---------------------------------------------------------------

/// A body of a fixed layout must be exactly `want` bytes: a shorter one would leave fields
/// unread, a longer one bytes unexplained.
fn expect_len(kind: Kind, body: &Bytes, want: usize) -> Result<(), WireError> {
    if body.len() == want {
        Ok(())
    } else {
        Err(malformed(
            kind,
            format!("body is {} bytes, {} expected", body.len(), want),
        ))
    }
}

/// A count from the header (`n` items, `what`) must be within its limit: checked before the
/// count sizes anything.
fn check_count(kind: Kind, n: usize, max: usize, what: &str) -> Result<(), WireError> {
    if n > max {
        Err(malformed(
            kind,
            format!("{n} {what} exceed the limit of {max}"),
        ))
    } else {
        Ok(())
    }
}

/// A body of `n` ids of 8 bytes each (`Ack`, `ResendRequest`), `what` in errors: the count
/// checked against its limit, then the length against the count.
fn take_id_list(
    kind: Kind,
    n: usize,
    what: &str,
    mut body: Bytes,
    lim: &WireLimits,
) -> Result<Vec<u64>, WireError> {
    check_count(kind, n, lim.max_list, what)?;
    expect_len(kind, &body, n * 8)?;
    Ok(take_ids(&mut body, n))
}

// ----- the session's setup: hello and join -----------------------------------------------------

/// `Hello` (kind 1): `a` is the client's receive window, `c` its number of networks, `d` its
/// capabilities (bits this side does not know are dropped); the body is its key and its
/// networks ([`take_key_and_networks`]).
fn decode_hello(
    window: u64,
    n: usize,
    caps: Caps,
    body: Bytes,
    lim: &WireLimits,
) -> Result<Frame, WireError> {
    let (key, networks) = take_key_and_networks(Kind::Hello, n, body, lim)?;
    Ok(Frame::Hello {
        key,
        window,
        caps: caps.common(Caps::KNOWN),
        networks,
    })
}

/// `HelloAck` (kind 2): `a` is the session id, `b` the server's receive window, `c` its
/// number of networks, `d` its capabilities; the body is laid out as `Hello`'s.
fn decode_hello_ack(
    session: u64,
    window: u64,
    n: usize,
    caps: Caps,
    body: Bytes,
    lim: &WireLimits,
) -> Result<Frame, WireError> {
    let (key, networks) = take_key_and_networks(Kind::HelloAck, n, body, lim)?;
    Ok(Frame::HelloAck {
        session,
        key,
        window,
        caps: caps.common(Caps::KNOWN),
        networks,
    })
}

/// The body of `Hello` and `HelloAck`: a 32-byte key, then `n` networks of 40 bytes each
/// ([`NETINFO_LEN`]); nothing before, between or after.
fn take_key_and_networks(
    kind: Kind,
    n: usize,
    mut body: Bytes,
    lim: &WireLimits,
) -> Result<([u8; KEY_LEN], Vec<NetInfo>), WireError> {
    check_count(kind, n, lim.max_list, "networks")?;
    expect_len(kind, &body, KEY_LEN + n * NETINFO_LEN)?;
    let key = take_array::<KEY_LEN>(&mut body);
    Ok((key, take_nets(&mut body, n)))
}

/// `Join` (kind 3): `a` is the session id, `c` the network the connection joins for; the body
/// is the initiator's 16-byte nonce.
fn decode_join(session: u64, net: usize, mut body: Bytes) -> Result<Frame, WireError> {
    expect_len(Kind::Join, &body, NONCE_LEN)?;
    Ok(Frame::Join {
        session,
        nonce: take_array(&mut body),
        net: net as u32,
    })
}

/// `JoinChallenge` (kind 4): the acceptor's 16-byte nonce, then its 32-byte HMAC.
fn decode_join_challenge(mut body: Bytes) -> Result<Frame, WireError> {
    expect_len(Kind::JoinChallenge, &body, NONCE_LEN + MAC_LEN)?;
    Ok(Frame::JoinChallenge {
        nonce: take_array(&mut body),
        mac: take_array(&mut body),
    })
}

/// `JoinProof` (kind 5): the initiator's 32-byte HMAC.
fn decode_join_proof(mut body: Bytes) -> Result<Frame, WireError> {
    expect_len(Kind::JoinProof, &body, MAC_LEN)?;
    Ok(Frame::JoinProof {
        mac: take_array(&mut body),
    })
}

/// `JoinOk` (kind 6): the header alone.
fn decode_join_ok(body: Bytes) -> Result<Frame, WireError> {
    expect_len(Kind::JoinOk, &body, 0)?;
    Ok(Frame::JoinOk)
}

// ----- data and its acknowledgement ------------------------------------------------------------

/// A data chunk's header fields as they came off the wire, not yet checked.
struct DataHeader {
    /// Header byte 2.
    label: u8,
    /// Header byte 3: END, FIRST, DEPS_ALL.
    flags: u8,
    /// `a`.
    irob: u64,
    /// `b`: where the chunk's data starts within the IROB.
    offset: u64,
    /// `c`: how many dependency ids the body starts with.
    deps: usize,
    /// `d`: how many acknowledged IROB ids follow them.
    acks: usize,
}

/// `Data` (kind 7): the header in order (label, flags, counts, how the flags and the
/// dependency count agree), then the body: the dependency ids, each lower than the chunk's
/// own IROB, the acknowledged ids, and the rest is the data. A small payload is copied out of
/// the receive buffer ([`own_if_small`]).
fn decode_data(h: DataHeader, mut body: Bytes, lim: &WireLimits) -> Result<Frame, WireError> {
    let label = Label::from_wire(h.label).ok_or(WireError::Label(h.label))?;
    check_data_flags(h.flags)?;
    check_data_counts(&h, body.len(), lim)?;
    check_deps_flags(h.flags, h.deps)?;
    let dep_ids = take_dependencies(&mut body, h.deps, h.irob)?;
    let acks = take_ids(&mut body, h.acks);
    if h.offset.checked_add(body.len() as u64).is_none() {
        return Err(malformed(Kind::Data, "offset overflows"));
    }
    Ok(Frame::Data(Chunk {
        irob: h.irob,
        label,
        offset: h.offset,
        deps: chunk_deps(h.flags, dep_ids),
        end: h.flags & FLAG_END != 0,
        acks,
        data: own_if_small(body),
    }))
}

/// Only END, FIRST and DEPS_ALL are defined; a chunk with any other bit set comes from a peer
/// that means something we would not understand.
fn check_data_flags(flags: u8) -> Result<(), WireError> {
    if flags & !(FLAG_END | FLAG_FIRST | FLAG_DEPS_ALL) != 0 {
        return Err(malformed(Kind::Data, format!("unknown flags {flags:#04x}")));
    }
    Ok(())
}

/// The dependency and acknowledgement counts within their limits, and their ids (8 bytes
/// each) within the body of `body_len` bytes; what is left after them is the data.
fn check_data_counts(h: &DataHeader, body_len: usize, lim: &WireLimits) -> Result<(), WireError> {
    let (c, d) = (h.deps, h.acks);
    check_count(Kind::Data, c, lim.max_deps, "dependencies")?;
    check_count(Kind::Data, d, lim.max_list, "acknowledgements")?;
    if (c + d) * 8 > body_len {
        return Err(malformed(
            Kind::Data,
            format!("{c} dependencies and {d} acks do not fit a {body_len}-byte body"),
        ));
    }
    Ok(())
}

/// Only a chunk with FIRST carries dependencies, and it carries them one way: DEPS_ALL or a
/// list of `n` ids, not both.
fn check_deps_flags(flags: u8, n: usize) -> Result<(), WireError> {
    let first = flags & FLAG_FIRST != 0;
    let all = flags & FLAG_DEPS_ALL != 0;
    if !first && (all || n > 0) {
        return Err(malformed(
            Kind::Data,
            "dependencies on a chunk without the FIRST flag",
        ));
    }
    if all && n > 0 {
        return Err(malformed(Kind::Data, "both DEPS_ALL and a dependency list"));
    }
    Ok(())
}

/// The `n` dependency ids at the front of the body. Each must be lower than the IROB's own
/// id: IROB ids increase as IROBs begin, so an IROB can only depend on an earlier one, and a
/// dependency on itself or a later one could never be met.
fn take_dependencies(body: &mut Bytes, n: usize, irob: u64) -> Result<Vec<u64>, WireError> {
    let ids = take_ids(body, n);
    if let Some(bad) = ids.iter().find(|&&x| x >= irob) {
        return Err(malformed(
            Kind::Data,
            format!("IROB {irob} depends on IROB {bad}, which is not lower"),
        ));
    }
    Ok(ids)
}

/// The dependencies a chunk carries, by its (checked) flags: none without FIRST; with
/// DEPS_ALL, every earlier IROB; else the list of ids read.
fn chunk_deps(flags: u8, ids: Vec<u64>) -> Option<Deps> {
    if flags & FLAG_FIRST == 0 {
        None
    } else if flags & FLAG_DEPS_ALL != 0 {
        Some(Deps::AllEarlier)
    } else {
        Some(Deps::List(ids))
    }
}

/// `Ack` (kind 8): `d` acknowledged IROB ids, the whole body.
fn decode_ack(n: usize, body: Bytes, lim: &WireLimits) -> Result<Frame, WireError> {
    Ok(Frame::Ack {
        acks: take_id_list(Kind::Ack, n, "acknowledgements", body, lim)?,
    })
}

// ----- failover: resend request and have -------------------------------------------------------

/// `ResendRequest` (kind 9): `c` IROB ids, the whole body.
fn decode_resend_request(n: usize, body: Bytes, lim: &WireLimits) -> Result<Frame, WireError> {
    Ok(Frame::ResendRequest {
        irobs: take_id_list(Kind::ResendRequest, n, "IROB ids", body, lim)?,
    })
}

/// `Have` (kind 10): `c` entries of varying length ([`take_have_entry`]) filling the body
/// exactly. Each entry's range count is checked against what is left of the body as it is
/// read, so the entries' sizes need not be known in advance.
fn decode_have(n: usize, mut body: Bytes, lim: &WireLimits) -> Result<Frame, WireError> {
    check_count(Kind::Have, n, lim.max_list, "entries")?;
    let mut entries = Vec::with_capacity(n);
    for i in 0..n {
        entries.push(take_have_entry(&mut body, i, lim)?);
    }
    if !body.is_empty() {
        return Err(malformed(
            Kind::Have,
            format!("{} trailing bytes", body.len()),
        ));
    }
    Ok(Frame::Have { entries })
}

/// Entry `i` of a `Have` body: the IROB id (u64), a flags byte (1 complete, 2 first chunk
/// held, 4 end known) and three reserved bytes, the range count (u32), the IROB's length (u64,
/// meaningful with flag 4), then the ranges held as (start, end) pairs, each non-empty.
fn take_have_entry(body: &mut Bytes, i: usize, lim: &WireLimits) -> Result<HaveEntry, WireError> {
    if body.len() < 24 {
        return Err(malformed(Kind::Have, format!("entry {i} truncated")));
    }
    let irob = body.get_u64();
    let f = body.get_u8();
    body.advance(3);
    let n = body.get_u32() as usize;
    let end = body.get_u64();
    if n > lim.max_list || body.len() < n * 16 {
        return Err(malformed(
            Kind::Have,
            format!("entry {i} announces {n} ranges that are not there"),
        ));
    }
    let ranges: Vec<(u64, u64)> = (0..n).map(|_| (body.get_u64(), body.get_u64())).collect();
    if ranges.iter().any(|(s, t)| s >= t) {
        return Err(malformed(
            Kind::Have,
            format!("entry {i} has an empty or inverted range"),
        ));
    }
    Ok(HaveEntry {
        irob,
        complete: f & 1 != 0,
        first: f & 2 != 0,
        end: (f & 4 != 0).then_some(end),
        ranges,
    })
}

// ----- estimates, probes, the end --------------------------------------------------------------

/// `Estimate` (kind 11): `c` networks of 40 bytes each, the whole body.
fn decode_estimate(n: usize, mut body: Bytes, lim: &WireLimits) -> Result<Frame, WireError> {
    check_count(Kind::Estimate, n, lim.max_list, "networks")?;
    expect_len(Kind::Estimate, &body, n * NETINFO_LEN)?;
    Ok(Frame::Estimate {
        networks: take_nets(&mut body, n),
    })
}

/// `Probe` (kind 12): `a` is the probe's id; the body is padding of any length (within the
/// body limit). Only its length is kept: with the header's, it is the probe's size, which the
/// reply reports.
fn decode_probe(id: u64, body: Bytes) -> Frame {
    Frame::Probe {
        id,
        padding: body.len() as u32,
    }
}

/// `ProbeReply` (kind 13): `a` is the probe's id, `b` its size; the header alone.
fn decode_probe_reply(id: u64, probe_size: u64, body: Bytes) -> Result<Frame, WireError> {
    expect_len(Kind::ProbeReply, &body, 0)?;
    Ok(Frame::ProbeReply { id, probe_size })
}

/// `Goodbye` (kind 14): `a` is how many IROBs the sender began; the header alone.
fn decode_goodbye(irobs: u64, body: Bytes) -> Result<Frame, WireError> {
    expect_len(Kind::Goodbye, &body, 0)?;
    Ok(Frame::Goodbye { irobs })
}

/// `Error` (kind 15): bit 0 of `a` says fatal (the other bits are ignored); the body is the
/// reason, shown even when it is not valid UTF-8 (invalid sequences replaced), since it is
/// read by a person and the connection closes anyway.
fn decode_error(a: u64, body: Bytes) -> Frame {
    Frame::Error {
        reason: String::from_utf8_lossy(&body).into_owned(),
        fatal: a & 1 != 0,
    }
}

/// `Credit` (kind 16): `a` the limit, `b` the read rate in bytes per second, `c` the
/// feed-forward cap in KiB, `d` bit 0 proactive (other bits are reserved and ignored); no
/// body. Whether the values are believable is the session's to judge (`flow`): a rate or
/// limit is any u64 here.
fn decode_credit(
    limit: u64,
    rate: u64,
    kib: usize,
    d: usize,
    body: Bytes,
) -> Result<Frame, WireError> {
    expect_len(Kind::Credit, &body, 0)?;
    Ok(Frame::Credit {
        limit,
        rate,
        feed_forward_kib: kib as u32,
        proactive: d & 1 != 0,
    })
}
