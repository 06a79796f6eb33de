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

impl Decoder {
    /// A decoder with the given limits.
    pub fn new(limits: WireLimits) -> Decoder {
        Decoder {
            buf: BytesMut::with_capacity(64 * 1024),
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
        mut body: Bytes,
    ) -> Result<Frame, WireError> {
        let lim = self.limits;
        let exact = |body: &Bytes, want: usize| {
            if body.len() == want {
                Ok(())
            } else {
                Err(malformed(
                    kind,
                    format!("body is {} bytes, {} expected", body.len(), want),
                ))
            }
        };
        let list = |n: usize, max: usize, what: &str| {
            if n > max {
                Err(malformed(
                    kind,
                    format!("{n} {what} exceed the limit of {max}"),
                ))
            } else {
                Ok(())
            }
        };
        Ok(match kind {
            Kind::Hello | Kind::HelloAck => {
                list(c, lim.max_list, "networks")?;
                exact(&body, KEY_LEN + c * NETINFO_LEN)?;
                let key = take_array::<KEY_LEN>(&mut body);
                let networks = take_nets(&mut body, c);
                if kind == Kind::Hello {
                    Frame::Hello {
                        key,
                        window: a,
                        networks,
                    }
                } else {
                    Frame::HelloAck {
                        session: a,
                        key,
                        window: b,
                        networks,
                    }
                }
            }
            Kind::Join => {
                exact(&body, NONCE_LEN)?;
                Frame::Join {
                    session: a,
                    nonce: take_array(&mut body),
                    net: c as u32,
                }
            }
            Kind::JoinChallenge => {
                exact(&body, NONCE_LEN + MAC_LEN)?;
                Frame::JoinChallenge {
                    nonce: take_array(&mut body),
                    mac: take_array(&mut body),
                }
            }
            Kind::JoinProof => {
                exact(&body, MAC_LEN)?;
                Frame::JoinProof {
                    mac: take_array(&mut body),
                }
            }
            Kind::JoinOk => {
                exact(&body, 0)?;
                Frame::JoinOk
            }
            Kind::Data => {
                let label = Label::from_wire(label).ok_or(WireError::Label(label))?;
                if flags & !(FLAG_END | FLAG_FIRST | FLAG_DEPS_ALL) != 0 {
                    return Err(malformed(kind, format!("unknown flags {flags:#04x}")));
                }
                list(c, lim.max_deps, "dependencies")?;
                list(d, lim.max_list, "acknowledgements")?;
                if (c + d) * 8 > body.len() {
                    return Err(malformed(
                        kind,
                        format!(
                            "{c} dependencies and {d} acks do not fit a {}-byte body",
                            body.len()
                        ),
                    ));
                }
                let first = flags & FLAG_FIRST != 0;
                let all = flags & FLAG_DEPS_ALL != 0;
                if !first && (all || c > 0) {
                    return Err(malformed(
                        kind,
                        "dependencies on a chunk without the FIRST flag",
                    ));
                }
                if all && c > 0 {
                    return Err(malformed(kind, "both DEPS_ALL and a dependency list"));
                }
                let dep_ids = take_ids(&mut body, c);
                if let Some(bad) = dep_ids.iter().find(|&&x| x >= a) {
                    return Err(malformed(
                        kind,
                        format!("IROB {a} depends on IROB {bad}, which is not lower"),
                    ));
                }
                let acks = take_ids(&mut body, d);
                if b.checked_add(body.len() as u64).is_none() {
                    return Err(malformed(kind, "offset overflows"));
                }
                let deps = if !first {
                    None
                } else if all {
                    Some(Deps::AllEarlier)
                } else {
                    Some(Deps::List(dep_ids))
                };
                Frame::Data(Chunk {
                    irob: a,
                    label,
                    offset: b,
                    deps,
                    end: flags & FLAG_END != 0,
                    acks,
                    data: own_if_small(body),
                })
            }
            Kind::Ack => {
                list(d, lim.max_list, "acknowledgements")?;
                exact(&body, d * 8)?;
                Frame::Ack {
                    acks: take_ids(&mut body, d),
                }
            }
            Kind::ResendRequest => {
                list(c, lim.max_list, "IROB ids")?;
                exact(&body, c * 8)?;
                Frame::ResendRequest {
                    irobs: take_ids(&mut body, c),
                }
            }
            Kind::Have => {
                list(c, lim.max_list, "entries")?;
                let mut entries = Vec::with_capacity(c);
                for i in 0..c {
                    if body.len() < 24 {
                        return Err(malformed(kind, format!("entry {i} truncated")));
                    }
                    let irob = body.get_u64();
                    let f = body.get_u8();
                    body.advance(3);
                    let n = body.get_u32() as usize;
                    let end = body.get_u64();
                    if n > lim.max_list || body.len() < n * 16 {
                        return Err(malformed(
                            kind,
                            format!("entry {i} announces {n} ranges that are not there"),
                        ));
                    }
                    let ranges: Vec<(u64, u64)> =
                        (0..n).map(|_| (body.get_u64(), body.get_u64())).collect();
                    if ranges.iter().any(|(s, t)| s >= t) {
                        return Err(malformed(
                            kind,
                            format!("entry {i} has an empty or inverted range"),
                        ));
                    }
                    entries.push(HaveEntry {
                        irob,
                        complete: f & 1 != 0,
                        first: f & 2 != 0,
                        end: (f & 4 != 0).then_some(end),
                        ranges,
                    });
                }
                if !body.is_empty() {
                    return Err(malformed(kind, format!("{} trailing bytes", body.len())));
                }
                Frame::Have { entries }
            }
            Kind::Estimate => {
                list(c, lim.max_list, "networks")?;
                exact(&body, c * NETINFO_LEN)?;
                Frame::Estimate {
                    networks: take_nets(&mut body, c),
                }
            }
            Kind::Probe => Frame::Probe {
                id: a,
                padding: body.len() as u32,
            },
            Kind::ProbeReply => {
                exact(&body, 0)?;
                Frame::ProbeReply {
                    id: a,
                    probe_size: b,
                }
            }
            Kind::Goodbye => {
                exact(&body, 0)?;
                Frame::Goodbye { irobs: a }
            }
            Kind::Error => Frame::Error {
                reason: String::from_utf8_lossy(&body).into_owned(),
                fatal: a & 1 != 0,
            },
        })
    }
}
