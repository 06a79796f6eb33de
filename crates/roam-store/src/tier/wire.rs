//! The messages between Horatio's tiers. Each request and each reply is a message on a roam-net
//! multi-socket: a 4-byte big-endian header length, the header (JSON, one [`Request`] or
//! [`Reply`]), then the payload (a blob, a control state), whose length is what is left.
//! Both lengths are bounded before anything is parsed ([`MAX_HEADER`], [`MAX_PAYLOAD`]). A
//! message travels as one or more IROBs, each a byte ([`MORE`] or [`LAST`]) and a fragment of
//! at most [`FRAGMENT`] bytes ([`super::net::send_message`], [`super::net::recv_message`]), so
//! that roam-net never holds a large IROB for a peer.

use serde::{Deserialize, Serialize};

pub use crate::error::WireError;
use crate::id::ChunkId;
use crate::ownership::Tier;

/// Largest header: a `Has` of [`MAX_HAS`] names fits with room to spare.
pub const MAX_HEADER: usize = 1 << 20;
/// Largest payload: a control state of a 64 GiB disk image's keyring (about 35 MB) fits.
pub const MAX_PAYLOAD: usize = 48 << 20;
/// Most chunk names one `Has` may ask about (callers split longer lists).
pub const MAX_HAS: usize = 8192;
/// Largest fragment of a message one IROB carries (after its flag byte): a chunk request or
/// reply (128 KiB and its header) fits in one.
pub const FRAGMENT: usize = 1 << 20;
/// The first byte of an IROB whose message goes on in the next IROB.
pub const MORE: u8 = 0;
/// The first byte of an IROB that ends its message.
pub const LAST: u8 = 1;

/// What a tier is asked. Chunk names are 64 hex digits, nonces 32.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// The first message on every link: the user's access secret (hex). Nothing else is
    /// answered before it; a wrong one closes the link.
    Auth {
        /// The secret.
        secret: String,
    },
    /// Which of these chunks the tier holds, validated (its copy's hash is its name).
    Has {
        /// Chunk names.
        ids: Vec<String>,
    },
    /// Keep the payload as chunk `id` (refused unless its hash is `id`).
    Put {
        /// Chunk name.
        id: String,
    },
    /// The blob of chunk `id`.
    Get {
        /// Chunk name.
        id: String,
    },
    /// Server: keep the payload as the parcel's control state (see [`super::Held`]), only
    /// while a handoff to the server of that version is prepared, or when creating the parcel.
    /// The phone refuses it: it takes control state only by `SwapControl`.
    PutControl {
        /// Parcel name.
        parcel: String,
    },
    /// Phone: keep the payload as the parcel's control state in place of the one it holds
    /// under nonce `replaces` (`None`: in place of none), a compare-and-swap: naming another
    /// state (a replay, a forgery, a race) is refused ([`crate::StoreError::StaleControl`])
    /// and changes nothing. A handoff to the phone delivers its control state so.
    SwapControl {
        /// Parcel name.
        parcel: String,
        /// The nonce of the control state it replaces (hex), if the phone holds one.
        replaces: Option<String>,
    },
    /// What control state of the parcel the tier holds: answers [`Reply::Holds`].
    Holds {
        /// Parcel name.
        parcel: String,
    },
    /// The parcel's control state, for whoever names the nonce it is held under.
    GetControl {
        /// Parcel name.
        parcel: String,
        /// The owner's nonce (hex); the server also answers the user with `None` (a checkout).
        nonce: Option<String>,
    },
    /// Phone: delete the parcel's control state held under `nonce` (a source after its handoff
    /// committed), a compare-and-swap as `SwapControl` is.
    DropControl {
        /// Parcel name.
        parcel: String,
        /// The nonce the phone holds it under (hex).
        nonce: String,
    },
    /// Whether the tier holds every chunk the control state in its store names, validated.
    /// Answers [`Reply::Missing`].
    Validate {
        /// Parcel name.
        parcel: String,
    },
    /// Server: a new parcel, owned by the server, whose control state was put first.
    Create {
        /// Parcel name.
        parcel: String,
    },
    /// Server: who owns the parcel, and its last committed version.
    Owner {
        /// Parcel name.
        parcel: String,
    },
    /// Server: phase 1 of a handoff (see [`crate::ownership::Registry::prepare`]).
    Prepare {
        /// Parcel name.
        parcel: String,
        /// The owner's nonce.
        nonce: String,
        /// The destination.
        to: Tier,
        /// The version handed over.
        version: u64,
        /// Its hash ([`super::Control::hash`]), 64 hex digits.
        hash: String,
    },
    /// Server: phase 2.
    Commit {
        /// Parcel name.
        parcel: String,
        /// The owner's nonce.
        nonce: String,
        /// The nonce prepared.
        next: String,
        /// The version's hash.
        hash: String,
    },
    /// Server: give up a prepared handoff.
    Abort {
        /// Parcel name.
        parcel: String,
        /// The owner's nonce.
        nonce: String,
    },
    /// Server: a lost device; the server takes the parcel back at its last committed version.
    Reclaim {
        /// Parcel name.
        parcel: String,
    },
    /// Phone: upload the parcel's chunks to the server and hand the parcel to it (self-
    /// cleaning). Answers at once; `Status` tells the progress.
    Clean {
        /// Parcel name.
        parcel: String,
    },
    /// Phone: hoard the chunks named in the payload (32 bytes each, `count` of them): fetch
    /// from the server those the phone lacks, so that a later resume (even one cut off from
    /// the server) finds them on the phone. Answers at once; `Status` tells the progress.
    Hoard {
        /// Parcel name.
        parcel: String,
        /// How many chunk names the payload holds.
        count: u64,
    },
    /// Phone: the handoff that gave the phone the parcel under `nonce` committed (the
    /// source says so after its commit at the server). Only a phone told this may lend the
    /// parcel while the server is out of reach.
    Committed {
        /// Parcel name.
        parcel: String,
        /// The nonce the phone now owns the parcel under.
        nonce: String,
    },
    /// Phone: lend the parcel it owns to a client cut off from the server (a disconnected
    /// resume, the Horatio paper §4.2): answers the control state under `lease`, if the phone holds
    /// every chunk of the version (hoarded). Asking again with the same lease answers the
    /// same; another lease is refused while this one is out.
    Lend {
        /// Parcel name.
        parcel: String,
        /// The client's lease (32 hex digits, random).
        lease: String,
    },
    /// Phone: the lent parcel comes back (the payload: its new control state, under the
    /// lease); the phone checks it holds the new version's dirty chunks, then owns it again
    /// under its own nonce.
    Return {
        /// Parcel name.
        parcel: String,
    },
    /// What the tier knows of the parcel ([`Reply::Status`]).
    Status {
        /// Parcel name.
        parcel: String,
    },
}

/// A tier's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reply {
    /// Done.
    Ok,
    /// Refused or failed; says why.
    Error(String),
    /// For `Has`: one flag per name asked.
    Have(Vec<bool>),
    /// For `Get` and `GetControl`: the payload is the blob or the control state.
    Payload,
    /// For `Get`: not held.
    NotFound,
    /// For `Validate`: how many chunks the control state names, and those not held valid
    /// (at most the first 100).
    Missing {
        /// Chunks named.
        total: u64,
        /// Not held, or held with a bad hash.
        missing: Vec<String>,
        /// How many are missing in all.
        count: u64,
    },
    /// For `Prepare`: the nonce that becomes the owner's on commit.
    Prepared {
        /// The next nonce (hex).
        next: String,
    },
    /// For `Create` and `Reclaim`: the server's nonce and version.
    Owned {
        /// The nonce.
        nonce: String,
        /// The version.
        version: u64,
    },
    /// For `Owner`.
    Owner {
        /// Who owns it.
        tier: Tier,
        /// The last committed version.
        committed: u64,
        /// A handoff is prepared.
        pending: bool,
    },
    /// For `Holds`: the version and the nonce of the control state held, if any.
    Holds {
        /// Its version.
        version: Option<u64>,
        /// The nonce it is held under (hex).
        nonce: Option<String>,
    },
    /// For `Status`.
    Status {
        /// This tier holds the parcel's control state, at this version.
        control: Option<u64>,
        /// Self-cleaning on this tier: what it is doing.
        cleaning: Option<String>,
        /// Chunks this tier holds (all parcels).
        chunks: u64,
    },
}

/// A message's bytes.
pub fn encode<T: Serialize>(header: &T, payload: &[u8]) -> Vec<u8> {
    let h = serde_json::to_vec(header).expect("tier messages serialize");
    let mut out = Vec::with_capacity(4 + h.len() + payload.len());
    out.extend_from_slice(&(h.len() as u32).to_be_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(payload);
    out
}

/// A message from its bytes: the header and the payload, or what is wrong with it.
pub fn decode<T: for<'de> Deserialize<'de>>(msg: &[u8]) -> Result<(T, &[u8]), WireError> {
    if msg.len() < 4 {
        return Err(WireError::Short { len: msg.len() });
    }
    let n = u32::from_be_bytes([msg[0], msg[1], msg[2], msg[3]]) as usize;
    if n > MAX_HEADER {
        return Err(WireError::HeaderTooLarge {
            len: n,
            max: MAX_HEADER,
        });
    }
    let rest = &msg[4..];
    if n > rest.len() {
        return Err(WireError::Truncated {
            header: n,
            len: msg.len(),
        });
    }
    let payload = &rest[n..];
    if payload.len() > MAX_PAYLOAD {
        return Err(WireError::PayloadTooLarge {
            len: payload.len(),
            max: MAX_PAYLOAD,
        });
    }
    let header = serde_json::from_slice(&rest[..n]).map_err(WireError::Header)?;
    Ok((header, payload))
}

/// The JSON value `payload` holds, `what` naming it when it does not parse.
pub fn decode_payload<T: for<'de> Deserialize<'de>>(
    payload: &[u8],
    what: &'static str,
) -> Result<T, WireError> {
    serde_json::from_slice(payload).map_err(|error| WireError::Payload { what, error })
}

/// Hex digits of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `N` bytes from `2N` hex digits, naming `what` when they are not.
pub fn unhex<const N: usize>(s: &str, what: &str) -> Result<[u8; N], WireError> {
    let bad = || WireError::NotHex {
        what: what.to_string(),
        digits: 2 * N,
    };
    if s.len() != 2 * N || !s.is_ascii() {
        return Err(bad());
    }
    let mut out = [0u8; N];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(out)
}

/// Chunk `s` named by its 64 hex digits (`what` names the field when they are not).
pub fn chunk_id(s: &str, what: &str) -> Result<ChunkId, WireError> {
    ChunkId::parse(s).ok_or_else(|| WireError::NotHex {
        what: format!("{what} {s:?}"),
        digits: 64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let r = Request::Prepare {
            parcel: "p".into(),
            nonce: hex(&[1; 16]),
            to: Tier::Phone,
            version: 3,
            hash: hex(&[2; 32]),
        };
        let bytes = encode(&r, b"payload");
        let (back, payload): (Request, &[u8]) = decode(&bytes).unwrap();
        assert_eq!(back, r);
        assert_eq!(payload, b"payload");
    }

    #[test]
    fn malformed_messages_are_refused_with_what_is_wrong() {
        let text = |msg: &[u8]| decode::<Request>(msg).unwrap_err().to_string();
        assert!(text(&[0, 0]).contains("shorter"));
        let mut big = (MAX_HEADER as u32 + 1).to_be_bytes().to_vec();
        big.extend_from_slice(b"{}");
        let e = text(&big);
        assert!(e.contains("at most"), "{e}");
        let mut lying = 100u32.to_be_bytes().to_vec();
        lying.extend_from_slice(b"{}");
        assert!(text(&lying).contains("in a message of"));
        let junk = encode(&"not a request", b"");
        assert!(text(&junk).starts_with("header:"));
        let e = unhex::<16>("zz", "nonce").unwrap_err().to_string();
        assert_eq!(e, "nonce: not 32 hex digits");
        let e = chunk_id("zz", "chunk name").unwrap_err().to_string();
        assert_eq!(e, "chunk name \"zz\": not 64 hex digits");
        assert_eq!(unhex::<2>("0aff", "x").unwrap(), [10, 255]);
    }
}
