//! The bytes dd-src and dd-dst exchange.
//!
//! **Downstream records** (dd-src to dd-dst), one per [`crate::Source::push`]ed stretch:
//!
//! ```text
//! record := kind:u8 seq:varint checksum:u64le body_len:varint body
//! body   := piece*
//! piece  := shim:u16be (literal: shim bytes) | (name: 8-byte name, little-endian)
//! shim   := bit 15: 1 = a name, 0 = literal bytes; bits 0-14: the length
//! ```
//!
//! `kind` is 0 for a record sent the first time, 1 for one sent again as literals after the
//! phone could not rebuild it, 2 for bytes passed through (encrypted, or dedup off for the
//! flow): literals the phone delivers without learning from them, 3 for a request to
//! acknowledge (no body): the phone acknowledges at once (see [`Kind::Ask`]). `seq` counts records from 0. `checksum` is
//! [`crate::name::checksum`] of the bytes the record stands for. The shim is the thesis's
//! (§4.4.4: one bit hash-or-literal, fifteen bits of length), with one change: a name's
//! length field carries the length of the chunk it names (the thesis's carried the name's own,
//! always 8), so a rebuilt record's length is known and checked before its checksum.
//!
//! **Upstream messages** (dd-dst to dd-src): `kind:u8` then
//! - 1 `Advertise`: `count:varint`, `count` names: chunks the phone holds and expects next;
//! - 2 `Ack`: `seq:varint`: every record up to `seq` was delivered;
//! - 3 `Resend`: `seq:varint count:varint`, names: record `seq` could not be rebuilt; forget
//!   these names and send it again as literals.
//!
//! Every length is bounded ([`MAX_BODY`], [`MAX_NAMES`]); anything else is a [`WireError`]
//! naming what and where.

use crate::name::Name;

/// The largest length a shim can carry.
pub const MAX_SHIM_LEN: usize = 0x7fff;
/// The largest record body accepted (a record stands for at most [`MAX_RECORD`] bytes, and a
/// literal costs 2 bytes per piece more).
pub const MAX_BODY: usize = 2 * MAX_RECORD;
/// The most bytes one record stands for.
pub const MAX_RECORD: usize = 256 * 1024;
/// The most names one upstream message carries.
pub const MAX_NAMES: usize = 4096;

const NAME_BIT: u16 = 0x8000;

/// Malformed bytes, and where.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    /// A record's kind byte is not 0, 1, 2 or 3.
    #[error("record kind {0} (expected 0, 1, 2 or 3)")]
    RecordKind(u8),
    /// An upstream message's kind byte is unknown.
    #[error("upstream message kind {0} (expected 1, 2 or 3)")]
    MessageKind(u8),
    /// A varint longer than 10 bytes or past u64.
    #[error("a variable-length integer at byte {0} does not end or overflows")]
    Varint(usize),
    /// A length past its bound.
    #[error("{what} of {len} at byte {at} exceeds {max}")]
    TooLong {
        what: &'static str,
        len: u64,
        max: u64,
        at: usize,
    },
    /// A piece runs past the body's end.
    #[error("piece at byte {at} of a record body needs {need} bytes, {left} remain")]
    Truncated { at: usize, need: usize, left: usize },
    /// A piece of length 0.
    #[error("piece at byte {0} of a record body has length 0")]
    Empty(usize),
}

/// One downstream record, borrowed from its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// Sent again (as literals) after the phone asked.
    pub resent: bool,
    /// Bytes passed through: deliver, do not learn.
    pub passthrough: bool,
    /// A request to acknowledge ([`Kind::Ask`]): no bytes; acknowledge everything at once.
    pub asks: bool,
    /// Its number, from 0.
    pub seq: u64,
    /// [`crate::name::checksum`] of the bytes it stands for.
    pub checksum: u64,
    /// Its pieces.
    pub body: &'a [u8],
}

/// One piece of a record's body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    /// Bytes as they are.
    Literal(&'a [u8]),
    /// A chunk of `len` bytes the phone holds under `name`.
    Name { name: Name, len: usize },
}

/// A message from dd-dst to dd-src.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Upstream {
    /// Chunks the phone holds and expects next (the thesis's feedback).
    Advertise(Vec<Name>),
    /// Every record up to this one was delivered.
    Ack(u64),
    /// This record could not be rebuilt: forget these names, send it again as literals.
    Resend { seq: u64, forget: Vec<Name> },
}

pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A varint at `buf[*at..]`: `Ok(None)` if it is not all there yet.
fn get_varint(buf: &[u8], at: &mut usize) -> Result<Option<u64>, WireError> {
    let start = *at;
    let mut v = 0u64;
    for i in 0..10 {
        let Some(&b) = buf.get(start + i) else {
            return Ok(None);
        };
        if i == 9 && b > 1 {
            return Err(WireError::Varint(start));
        }
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            *at = start + i + 1;
            return Ok(Some(v));
        }
    }
    Err(WireError::Varint(start))
}

/// Append a literal piece (at most [`MAX_SHIM_LEN`] bytes, at least 1).
pub fn put_literal(body: &mut Vec<u8>, bytes: &[u8]) {
    for part in bytes.chunks(MAX_SHIM_LEN) {
        body.extend_from_slice(&(part.len() as u16).to_be_bytes());
        body.extend_from_slice(part);
    }
}

/// Append a name piece for a chunk of `len` bytes (1 to [`MAX_SHIM_LEN`]).
pub fn put_name(body: &mut Vec<u8>, name: Name, len: usize) {
    debug_assert!(len > 0 && len <= MAX_SHIM_LEN);
    body.extend_from_slice(&(NAME_BIT | len as u16).to_be_bytes());
    body.extend_from_slice(&name.0.to_le_bytes());
}

/// The kind byte of a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Sent the first time.
    First = 0,
    /// Sent again, as literals.
    Resent = 1,
    /// Passed through.
    Passthrough = 2,
    /// Acknowledge at once: the source waits on it. It stands for no bytes. The phone holds
    /// an acknowledgement back for its next message up
    /// ([`crate::destination::DestinationConfig::ack_every`]), and a source sends this when
    /// waiting would cost: its pacing holds the stream back ([`crate::Source::ask`]), or the
    /// stream ended and the relay closes its side only once every record that named chunks
    /// is acknowledged, since a repair may be asked for until then ([`crate::Source::end`]).
    Ask = 3,
}

/// Append a whole record.
pub fn put_record(out: &mut Vec<u8>, kind: Kind, seq: u64, checksum: u64, body: &[u8]) {
    out.push(kind as u8);
    put_varint(out, seq);
    out.extend_from_slice(&checksum.to_le_bytes());
    put_varint(out, body.len() as u64);
    out.extend_from_slice(body);
}

/// The record at the start of `buf` and the bytes it takes, `Ok(None)` if it is not all there
/// yet (read more and call again).
pub fn record(buf: &[u8]) -> Result<Option<(Record<'_>, usize)>, WireError> {
    let Some(&kind) = buf.first() else {
        return Ok(None);
    };
    if kind > 3 {
        return Err(WireError::RecordKind(kind));
    }
    let mut at = 1;
    let Some(seq) = get_varint(buf, &mut at)? else {
        return Ok(None);
    };
    let Some(sum) = buf.get(at..at + 8) else {
        return Ok(None);
    };
    let checksum = u64::from_le_bytes(sum.try_into().expect("8 bytes"));
    at += 8;
    let len_at = at;
    let Some(len) = get_varint(buf, &mut at)? else {
        return Ok(None);
    };
    if len > MAX_BODY as u64 {
        return Err(WireError::TooLong {
            what: "record body",
            len,
            max: MAX_BODY as u64,
            at: len_at,
        });
    }
    if kind == Kind::Ask as u8 && len > 0 {
        return Err(WireError::TooLong {
            what: "ask record body",
            len,
            max: 0,
            at: len_at,
        });
    }
    let len = len as usize;
    let Some(body) = buf.get(at..at + len) else {
        return Ok(None);
    };
    Ok(Some((
        Record {
            resent: kind == 1,
            passthrough: kind == 2,
            asks: kind == 3,
            seq,
            checksum,
            body,
        },
        at + len,
    )))
}

/// The pieces of a record body, in order.
pub fn pieces(body: &[u8]) -> impl Iterator<Item = Result<Piece<'_>, WireError>> {
    let mut at = 0;
    let mut failed = false;
    std::iter::from_fn(move || {
        if failed || at >= body.len() {
            return None;
        }
        let r = piece(body, &mut at);
        failed = r.is_err();
        Some(r)
    })
}

fn piece<'a>(body: &'a [u8], at: &mut usize) -> Result<Piece<'a>, WireError> {
    let start = *at;
    let Some(shim) = body.get(start..start + 2) else {
        return Err(WireError::Truncated {
            at: start,
            need: 2,
            left: body.len() - start,
        });
    };
    let shim = u16::from_be_bytes([shim[0], shim[1]]);
    let len = usize::from(shim & !NAME_BIT);
    if len == 0 {
        return Err(WireError::Empty(start));
    }
    let is_name = shim & NAME_BIT != 0;
    let need = if is_name { Name::LEN } else { len };
    let Some(bytes) = body.get(start + 2..start + 2 + need) else {
        return Err(WireError::Truncated {
            at: start,
            need: 2 + need,
            left: body.len() - start,
        });
    };
    *at = start + 2 + need;
    Ok(if is_name {
        Piece::Name {
            name: Name(u64::from_le_bytes(bytes.try_into().expect("8 bytes"))),
            len,
        }
    } else {
        Piece::Literal(bytes)
    })
}

impl Upstream {
    /// Append the message.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let names = |out: &mut Vec<u8>, n: &[Name]| {
            put_varint(out, n.len() as u64);
            for name in n {
                out.extend_from_slice(&name.0.to_le_bytes());
            }
        };
        match self {
            Upstream::Advertise(n) => {
                out.push(1);
                names(out, n);
            }
            Upstream::Ack(seq) => {
                out.push(2);
                put_varint(out, *seq);
            }
            Upstream::Resend { seq, forget } => {
                out.push(3);
                put_varint(out, *seq);
                names(out, forget);
            }
        }
    }

    /// The message at the start of `buf` and the bytes it takes; `Ok(None)` if incomplete.
    pub fn decode(buf: &[u8]) -> Result<Option<(Upstream, usize)>, WireError> {
        let Some(&kind) = buf.first() else {
            return Ok(None);
        };
        let mut at = 1;
        let names = |at: &mut usize| -> Result<Option<Vec<Name>>, WireError> {
            let count_at = *at;
            let Some(count) = get_varint(buf, at)? else {
                return Ok(None);
            };
            if count > MAX_NAMES as u64 {
                return Err(WireError::TooLong {
                    what: "name count",
                    len: count,
                    max: MAX_NAMES as u64,
                    at: count_at,
                });
            }
            let need = count as usize * Name::LEN;
            let Some(bytes) = buf.get(*at..*at + need) else {
                return Ok(None);
            };
            *at += need;
            Ok(Some(
                bytes
                    .chunks_exact(Name::LEN)
                    .map(|b| Name(u64::from_le_bytes(b.try_into().expect("8 bytes"))))
                    .collect(),
            ))
        };
        let msg = match kind {
            1 => match names(&mut at)? {
                Some(n) => Upstream::Advertise(n),
                None => return Ok(None),
            },
            2 => match get_varint(buf, &mut at)? {
                Some(seq) => Upstream::Ack(seq),
                None => return Ok(None),
            },
            3 => {
                let Some(seq) = get_varint(buf, &mut at)? else {
                    return Ok(None);
                };
                match names(&mut at)? {
                    Some(forget) => Upstream::Resend { seq, forget },
                    None => return Ok(None),
                }
            }
            k => return Err(WireError::MessageKind(k)),
        };
        Ok(Some((msg, at)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_record_round_trips_and_is_incomplete_until_whole() {
        let mut body = Vec::new();
        put_literal(&mut body, b"hello");
        put_name(&mut body, Name(42), 300);
        let mut out = Vec::new();
        put_record(&mut out, Kind::First, 7, 99, &body);
        for cut in 0..out.len() {
            assert_eq!(record(&out[..cut]), Ok(None), "cut at {cut}");
        }
        let (r, used) = record(&out).unwrap().unwrap();
        assert_eq!(used, out.len());
        assert_eq!(
            (r.resent, r.passthrough, r.seq, r.checksum),
            (false, false, 7, 99)
        );
        let p: Vec<_> = pieces(r.body).collect::<Result<_, _>>().unwrap();
        assert_eq!(
            p,
            vec![
                Piece::Literal(b"hello"),
                Piece::Name {
                    name: Name(42),
                    len: 300
                }
            ]
        );
    }

    #[test]
    fn an_ask_has_no_body() {
        let mut out = Vec::new();
        put_record(&mut out, Kind::Ask, 3, 0, &[]);
        let (r, used) = record(&out).unwrap().unwrap();
        assert_eq!(used, out.len());
        assert!(r.asks && !r.resent && !r.passthrough && r.body.is_empty());
        let mut long = Vec::new();
        put_record(&mut long, Kind::Ask, 3, 0, b"x");
        assert!(matches!(
            record(&long),
            Err(WireError::TooLong {
                what: "ask record body",
                ..
            })
        ));
    }

    #[test]
    fn malformed_bytes_name_what_and_where() {
        assert_eq!(record(&[9]), Err(WireError::RecordKind(9)));
        assert_eq!(record(&[4]), Err(WireError::RecordKind(4)));
        let mut out = vec![0, 1];
        out.extend_from_slice(&[0; 8]);
        put_varint(&mut out, MAX_BODY as u64 + 1);
        assert!(matches!(
            record(&out),
            Err(WireError::TooLong { at: 10, .. })
        ));
        // A name piece cut short.
        let mut body = Vec::new();
        put_name(&mut body, Name(1), 10);
        body.truncate(6);
        let e = pieces(&body).next().unwrap().unwrap_err();
        assert_eq!(
            e,
            WireError::Truncated {
                at: 0,
                need: 10,
                left: 6
            }
        );
        assert_eq!(
            pieces(&[0, 0]).next().unwrap().unwrap_err(),
            WireError::Empty(0)
        );
        assert_eq!(Upstream::decode(&[7]), Err(WireError::MessageKind(7)));
        assert!(matches!(
            Upstream::decode(&[1, 0xff, 0xff, 0x03]),
            Err(WireError::TooLong {
                what: "name count",
                ..
            })
        ));
        assert_eq!(get_varint(&[0xff; 11], &mut 0), Err(WireError::Varint(0)));
    }

    proptest! {
        #[test]
        fn upstream_messages_round_trip(kind in 0u8..3, seq: u64, names in proptest::collection::vec(any::<u64>(), 0..50)) {
            let names: Vec<Name> = names.into_iter().map(Name).collect();
            let m = match kind {
                0 => Upstream::Advertise(names),
                1 => Upstream::Ack(seq),
                _ => Upstream::Resend { seq, forget: names },
            };
            let mut out = Vec::new();
            m.encode(&mut out);
            prop_assert_eq!(Upstream::decode(&out).unwrap(), Some((m, out.len())));
            for cut in 0..out.len() {
                prop_assert_eq!(Upstream::decode(&out[..cut]).unwrap(), None);
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = record(&bytes);
            let _ = Upstream::decode(&bytes);
            for p in pieces(&bytes) {
                let _ = p;
            }
        }
    }
}
