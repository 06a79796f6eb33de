//! What the crate refuses or fails at: [`StoreError`], one variant per reason, for the chunk
//! store, the tiers and their links, and the client's parcel operations; [`WireError`] for a
//! malformed message between tiers; [`VmError`] for the QEMU guest ([`crate::vm`]), which a [`StoreError`] also carries.
//!
//! Each error's message is whole: it names what and where (the chunk, file, tier or parcel)
//! and carries what the cause said, so it prints alone (`roam` prints `{e:#}`; a tier sends
//! `to_string()` as its refusal). The causes are kept as fields to match on, not returned by
//! `source()`, which would print them twice.
//!
//! A tier refuses a request with the text of the error it met; its client turns that text back
//! into [`StoreError::Refused`], naming the tier. The sans-IO ownership record keeps its own
//! [`OwnershipError`], carried whole.
//!
//! Near a leaf of the crate: it names chunks ([`crate::id`]), tiers and the ownership record's
//! errors ([`crate::ownership`]), neither of which uses it; everything else uses it. The
//! wire's error ([`WireError`]) is here too, so that the wire depends on this and not the
//! other way round.

use std::path::PathBuf;
use std::process::ExitStatus;

use thiserror::Error;

use crate::id::ChunkId;
use crate::ownership::{OwnershipError, Tier};

/// A chunk-store, tier or parcel error; each names the chunk, store, file, tier or parcel
/// concerned.
#[derive(Debug, Error)]
pub enum StoreError {
    // ---- Data: chunks, keyrings, images, stores. ----
    /// Integrity: a blob that is not what its name says (modified, truncated, sealed under
    /// another key, or larger than a chunk).
    #[error("chunk {id}: refused, {why}")]
    Tampered {
        /// The chunk.
        id: ChunkId,
        /// What is wrong with it.
        why: String,
    },
    /// No store had a valid copy of a chunk.
    #[error("chunk {id}: no valid copy ({tried})")]
    Missing {
        /// The chunk.
        id: ChunkId,
        /// What each store said.
        tried: String,
    },
    /// A chunk that should be in one place (a cache, the phone's store) is not there.
    #[error("chunk {id}: not {place}")]
    Absent {
        /// The chunk.
        id: ChunkId,
        /// Where it should have been ("in DIR", "on the phone").
        place: String,
    },
    /// A keyring that cannot be used (a wrong key, modified, entries that do not add up).
    #[error("keyring: {0}")]
    Keyring(String),
    /// An image that does not match its keyring, or that could not be read or written chunk
    /// by chunk.
    #[error("image: {0}")]
    Image(String),
    /// An error inside one part of a larger whole: which part (an image of a parcel, its
    /// file, the control state of a request), and the error.
    #[error("{what}: {error}")]
    Within {
        /// The part ("image `disk`", a path, "control state").
        what: String,
        /// What went wrong there.
        error: Box<StoreError>,
    },
    /// An I/O error on a file or directory (of a store, an image, a tier or a parcel).
    #[error("{}: {error}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        error: std::io::Error,
    },
    /// A file that does not hold what it should (a control state, the ownership record, a
    /// lease): it does not parse.
    #[error("{}: not {what}: {error}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What it should hold ("a control state").
        what: &'static str,
        /// The parser's complaint.
        error: serde_json::Error,
    },
    /// A file holding a secret (a control state, the ownership record, a lease, the access
    /// secret, a TLS private key) that its group or others may read or write: refused, as
    /// OpenSSH refuses such a private key.
    #[error("{}: holds {what} but is open to others (mode {mode:03o}): `chmod 600 {}` (and ask who may have read it)", path.display(), path.display())]
    Exposed {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
        /// What secret it holds ("a control state").
        what: &'static str,
    },
    /// A store's backend failed (an object store refused or could not be reached).
    #[error("{store}: {why}")]
    Backend {
        /// The store.
        store: String,
        /// What happened.
        why: String,
    },

    // ---- Requests and their values. ----
    /// A message, or a value in one, that does not decode: a request's header, a nonce, a
    /// hash or a chunk name that is not hex, a control state that does not parse.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// A parcel name that could not name a file.
    #[error("parcel name {0:?}: 1-64 of A-Z a-z 0-9 . _ -, not starting with a dot")]
    ParcelName(String),
    /// A request (over a link, or a call) that is well formed but asks what cannot be: more
    /// names than a request may carry, a payload that does not match, a control state of
    /// another parcel.
    #[error("{0}")]
    BadRequest(String),
    /// A request (or a setting) that belongs to another tier: the phone's asked of the server,
    /// the server's of the phone, a service for the client.
    #[error("{0}")]
    WrongTier(String),
    /// Another service holds the tier's directory (its lock).
    #[error("{}: another tier is serving this directory (it holds {})", dir.display(), lock.display())]
    Locked {
        /// The tier's directory.
        dir: PathBuf,
        /// Its lock file.
        lock: PathBuf,
    },

    // ---- Ownership and the parcel's state. ----
    /// The ownership record refused (an unknown parcel, a stale nonce, a commit that does not
    /// match what was prepared).
    #[error(transparent)]
    Ownership(#[from] OwnershipError),
    /// What the parcel's state does not allow, as a tier or the client sees it (it exists
    /// already, it is lent, its control state is not here, a commit that cannot be
    /// validated).
    #[error("parcel `{parcel}`: {why}")]
    Parcel {
        /// The parcel.
        parcel: String,
        /// Why not.
        why: String,
    },
    /// A control-state update (`SwapControl`, `DropControl`) that names a state the tier does
    /// not hold (a replay, a forgery, or a race with another update): refused, nothing
    /// changed. The compare-and-swap of the phone's control state, as the ownership record's
    /// nonces are for the server's.
    #[error("parcel `{parcel}`: stale control update refused: it names {} but the phone holds {}; nothing changed", named_state(.named), held_state(.held))]
    StaleControl {
        /// The parcel.
        parcel: String,
        /// The nonce of the state the update names (its first 8 hex digits), `None`: that
        /// the phone holds none.
        named: Option<String>,
        /// The version the phone holds (under another nonce), `None`: none.
        held: Option<u64>,
    },
    /// What the client's parcel directory does not allow (it holds no parcel, or one
    /// already, a guest runs on its images, it was lent).
    #[error("{}: {why}", path.display())]
    Client {
        /// The parcel directory (or the image) concerned.
        path: PathBuf,
        /// Why not.
        why: String,
    },
    /// An operation that needs the phone, called without a link to it.
    #[error("{why}: give its address (--phone)")]
    NeedsPhone {
        /// What needs it.
        why: String,
    },
    /// A handoff whose delivery to the destination failed: it was aborted at the server and
    /// the source keeps the parcel.
    #[error("handoff of parcel `{parcel}` to the {to:?} tier aborted: {error}")]
    HandoffAborted {
        /// The parcel.
        parcel: String,
        /// The destination.
        to: Tier,
        /// Why delivery failed.
        error: Box<StoreError>,
    },
    /// A tier lacks chunks of a version it was asked to validate.
    #[error("{tier}: lacks {count} of the {total} chunks of parcel `{parcel}` (first: {first})")]
    Incomplete {
        /// The tier.
        tier: String,
        /// The parcel.
        parcel: String,
        /// Chunks missing (or held with a bad hash).
        count: u64,
        /// Chunks the version names.
        total: u64,
        /// The first one missing (hex).
        first: String,
    },
    /// The phone's background task (self-cleaning, hoarding) ended in failure.
    #[error("{task} of parcel `{parcel}` failed: {why}")]
    Task {
        /// The task ("self-cleaning", "hoarding").
        task: &'static str,
        /// The parcel.
        parcel: String,
        /// What the phone said.
        why: String,
    },

    // ---- Links to tiers. ----
    /// A link to a tier could not be opened.
    #[error("{tier} at {addr}: {error}")]
    Connect {
        /// The tier ("phone", "server").
        tier: String,
        /// Its address.
        addr: std::net::SocketAddr,
        /// roam-net's error.
        error: Box<roam_net::runtime::Error>,
    },
    /// A tier could not listen for links.
    #[error("listening on {addr}: {error}")]
    Listen {
        /// The address.
        addr: std::net::SocketAddr,
        /// roam-net's error.
        error: Box<roam_net::runtime::Error>,
    },
    /// A link to a tier failed under a request (it could not send or receive).
    #[error("{tier}: {error}")]
    Link {
        /// The tier.
        tier: String,
        /// roam-net's error.
        error: Box<roam_net::runtime::Error>,
    },
    /// A tier closed the link without answering (or left a request unanswered too long).
    #[error("{tier}: closed the link")]
    Closed {
        /// The tier.
        tier: String,
    },
    /// A link that broke a deadline (the authentication's, a message's): closed.
    #[error("{tier}: {what} not within {limit:?}: the link is closed")]
    Deadline {
        /// The peer ("client", "server").
        tier: String,
        /// What was late ("the authentication", "a message").
        what: &'static str,
        /// The deadline.
        limit: std::time::Duration,
    },
    /// A tier's reply that does not decode.
    #[error("{tier}: malformed reply: {error}")]
    Malformed {
        /// The tier.
        tier: String,
        /// What is wrong with it.
        error: WireError,
    },
    /// A tier's reply that does not answer the request asked.
    #[error("{tier}: unexpected reply {reply}")]
    Unexpected {
        /// The tier.
        tier: String,
        /// The reply.
        reply: String,
    },
    /// A tier refused or failed a request: what it said.
    #[error("{tier}: {why}")]
    Refused {
        /// The tier.
        tier: String,
        /// Its answer.
        why: String,
    },

    // ---- The guest. ----
    /// The parcel's QEMU guest failed.
    #[error(transparent)]
    Vm(#[from] VmError),
}

/// The state a control update names, in its error.
fn named_state(named: &Option<String>) -> String {
    match named {
        Some(n) => format!("the control state under nonce {n}..."),
        None => "no control state".into(),
    }
}

/// The state the phone holds, in a control update's error.
fn held_state(held: &Option<u64>) -> String {
    match held {
        Some(v) => format!("version {v} under another nonce"),
        None => "none".into(),
    }
}

impl StoreError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> StoreError {
        let path = path.into();
        move |error| StoreError::Io { path, error }
    }

    /// `self`, inside `what` (an image, a file, a request's control state).
    pub fn within(self, what: impl std::fmt::Display) -> StoreError {
        StoreError::Within {
            what: what.to_string(),
            error: Box::new(self),
        }
    }

    /// What the parcel's state does not allow.
    pub fn parcel(parcel: &str, why: impl Into<String>) -> StoreError {
        StoreError::Parcel {
            parcel: parcel.to_string(),
            why: why.into(),
        }
    }
}

/// What is wrong with a message between tiers ([`crate::tier::wire`]), or with a value in one
/// (a field's hex digits, a payload that should hold a control state): each names the part and
/// how it is wrong.
#[derive(Debug, Error)]
pub enum WireError {
    /// Fewer bytes than the 4-byte header length.
    #[error("a message of {len} bytes, shorter than its header length")]
    Short {
        /// The message's length.
        len: usize,
    },
    /// A header longer than the wire's `MAX_HEADER`.
    #[error("a header of {len} bytes (at most {max})")]
    HeaderTooLarge {
        /// The header length announced.
        len: usize,
        /// The largest header (`MAX_HEADER`).
        max: usize,
    },
    /// A header length beyond the end of the message.
    #[error("a header of {header} bytes in a message of {len}")]
    Truncated {
        /// The header length announced.
        header: usize,
        /// The message's length.
        len: usize,
    },
    /// A payload longer than the wire's `MAX_PAYLOAD`.
    #[error("a payload of {len} bytes (at most {max})")]
    PayloadTooLarge {
        /// The payload's length.
        len: usize,
        /// The largest payload (`MAX_PAYLOAD`).
        max: usize,
    },
    /// A message (an IROB) larger than any a tier sends: refused before it is all in memory.
    #[error("a message over {max} bytes")]
    MessageTooLarge {
        /// The largest message.
        max: usize,
    },
    /// IROBs that do not make up a message (a fragment without its flag byte, or with
    /// another, or fragments of two messages interleaved).
    #[error("not a message's fragments: {0}")]
    Fragment(&'static str),
    /// A header that is not a request or a reply (the JSON parser's complaint).
    #[error("header: {0}")]
    Header(serde_json::Error),
    /// A payload that does not parse as what it should hold.
    #[error("{what}: {error}")]
    Payload {
        /// What it should hold ("control state").
        what: &'static str,
        /// The JSON parser's complaint.
        error: serde_json::Error,
    },
    /// A field that should be `digits` hex digits (a nonce, a hash, a chunk name, a key).
    #[error("{what}: not {digits} hex digits")]
    NotHex {
        /// The field, with its value where that helps.
        what: String,
        /// How many hex digits it should have.
        digits: usize,
    },
}

/// What running the parcel's QEMU guest ([`crate::vm`]) fails at; each names the program,
/// file, command or guest concerned.
#[derive(Debug, Error)]
pub enum VmError {
    /// A program the guest needs is not installed.
    #[error("{tool} is not installed (apt-get install {packages})")]
    NotInstalled {
        /// The program.
        tool: &'static str,
        /// The Debian packages that have it.
        packages: &'static str,
    },
    /// No guest kit (kernel and initramfs) in the directory.
    #[error("no guest in {} ({file} missing): build it with `scripts/build-guest {}`", dir.display(), dir.display())]
    NoGuest {
        /// The kit's directory.
        dir: PathBuf,
        /// The file missing.
        file: &'static str,
    },
    /// `ROAM_QEMU_ACCEL` names no accelerator.
    #[error("ROAM_QEMU_ACCEL={0}: use kvm or tcg")]
    Accel(String),
    /// An I/O error on a file, socket or directory of the guest, or running a program: what
    /// was being done, and the error.
    #[error("{what}: {error}")]
    Io {
        /// What, and where.
        what: String,
        /// The error.
        error: std::io::Error,
    },
    /// A path QEMU cannot be given (not UTF-8, a quote in a shell word).
    #[error("{path}: {why}")]
    Path {
        /// The path.
        path: String,
        /// Why not.
        why: &'static str,
    },
    /// A saved guest's RAM image that is not a whole number of MiB.
    #[error("{}: a RAM image of {len} bytes (not a whole number of MiB)", path.display())]
    RamImage {
        /// The RAM image.
        path: PathBuf,
        /// Its length.
        len: u64,
    },
    /// A guest is already running from the run directory.
    #[error("a guest is already running from {} (pid {pid}): suspend or stop it first", run.display())]
    AlreadyRunning {
        /// The run directory.
        run: PathBuf,
        /// Its QEMU.
        pid: u32,
    },
    /// A pid file that holds no pid.
    #[error("{}: a bad pid file", path.display())]
    PidFile {
        /// The file.
        path: PathBuf,
    },
    /// QEMU exited instead of starting the guest.
    #[error("qemu-system-x86_64 failed to start ({status}): {stderr}")]
    Start {
        /// Its exit status.
        status: ExitStatus,
        /// What it printed.
        stderr: String,
    },
    /// QEMU's control socket (QMP) said what is not QMP, or closed.
    #[error("{0}")]
    Qmp(String),
    /// QEMU refused a QMP command.
    #[error("QEMU refused {cmd}: {desc}")]
    Refused {
        /// The command.
        cmd: String,
        /// QEMU's description.
        desc: String,
    },
    /// A migration (saving or restoring the device state) failed or did not end in time.
    #[error("{what}: {why}")]
    Migration {
        /// Which ("saving the device state").
        what: String,
        /// What happened.
        why: String,
    },
    /// The guest did not answer on its console as it should (no answer in time, the console
    /// closed, a command it does not know).
    #[error("{0}")]
    Guest(String),
    /// `qemu-img map` of the dirty bitmap failed, or printed what is not a map of extents.
    #[error("{0}")]
    DirtyMap(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn portable<E: std::error::Error + Send + Sync + 'static>() {}

    /// The errors cross threads and go into `anyhow` (`?`, `anyhow::Error::msg`), and stay
    /// small enough to return by value.
    #[test]
    fn errors_are_portable_and_small() {
        portable::<StoreError>();
        portable::<VmError>();
        portable::<WireError>();
        assert!(std::mem::size_of::<StoreError>() <= 96);
    }

    /// A message names what and where, with the cause's text, and prints whole without its
    /// `source()` (which would print it twice under `{e:#}`).
    #[test]
    fn a_message_is_whole() {
        let e = StoreError::io("/x/control.json")(std::io::Error::other("disk on fire"));
        assert_eq!(e.to_string(), "/x/control.json: disk on fire");
        assert!(std::error::Error::source(&e).is_none());
        let e = StoreError::Keyring("not hex".into()).within("image `disk`");
        assert_eq!(e.to_string(), "image `disk`: keyring: not hex");
        let e = StoreError::from(OwnershipError::Unknown("p".into()));
        assert_eq!(e.to_string(), "parcel `p`: unknown");
    }
}
