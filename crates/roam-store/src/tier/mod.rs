//! Horatio's three tiers (seed 004; ../shared/spec/horatio.md "Ownership and trust"): the
//! client (the borrowed PC, where `roam parcel` runs), the phone and the server, each a process
//! that can run in its own network namespace. The phone and the server run a [`TierService`]
//! behind [`serve`]; the client reaches them with a [`TierClient`], which is also a
//! [`ChunkStore`](crate::ChunkStore), so `fetch`, `ingest` and `restore` work across the links.
//!
//! - **What moves.** Data state (sealed chunks) may be cached or relayed by anyone: a tier
//!   keeps a chunk only when its hash is its name. Control state ([`Control`]: the version,
//!   the parcel key, the sealed keyrings) moves only with ownership, under the nonce the
//!   server's [`Registry`](crate::ownership::Registry) issued.
//! - **Handoff** (`crate::parcel::hand_off`): the source makes sure the destination holds every
//!   chunk the version names, prepares the handoff at the server (which issues the next
//!   nonce), gives the destination the control state with that nonce, has it validate every
//!   chunk (`Validate`), commits at the server, and then deletes its own control state. A
//!   handoff to the server is refused at commit unless the server validated the version
//!   itself: trust flows upstream only with validated state.
//! - **Links** are roam-net multi-sockets, with TLS under a certificate the tier made and the
//!   client pins (the CLI's default), and the user's access secret as the first message: a
//!   link that does not present it gets nothing. Self-cleaning goes over the phone's link to
//!   the server with the background label, so it never holds up the user's own traffic.
//! - **Hostile peers**: one request in flight per link, headers and payloads bounded
//!   ([`wire`]), at most [`MAX_LINKS`] links served at once, a link idle for
//!   [`LINK_IDLE`] closed; a chunk is kept only after its hash is checked, and the server keeps
//!   control state only for a parcel it is creating or a handoff to it that is prepared.

pub mod net;
pub mod service;
pub mod wire;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::chunk::ChunkId;
use crate::error::StoreError;
use crate::keyring::{Keyring, ParcelKey};
pub use net::{serve, serve_idle, ServeHandle, TierClient};
pub use service::TierService;
use wire::{hex, unhex};

/// Most links a tier serves at once; more are closed as they come.
pub const MAX_LINKS: usize = 32;
/// A link with no request for this long is closed.
pub const LINK_IDLE: Duration = Duration::from_secs(120);

/// A parcel's control state: what its owner needs to run it, and what moves only with
/// ownership (seed 004: the keyring and the configuration with its key).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Control {
    /// The parcel's name.
    pub parcel: String,
    /// Increases with every check-in of new state.
    pub version: u64,
    /// The parcel key (hex): opens the keyrings.
    pub parcel_key: String,
    /// Each image's sealed keyring (hex), by image name ("disk", "memory").
    pub images: BTreeMap<String, String>,
    /// The chunks of this version not yet at the server (hex names): what a phone it is
    /// suspended to must hold (the rest it fetches from the server on a miss).
    pub dirty: BTreeSet<String>,
}

impl Control {
    /// A control state for `keyrings`, sealed under `key`.
    pub fn new(parcel: &str, version: u64, key: &ParcelKey, keyrings: &[(&str, &Keyring)]) -> Self {
        Control {
            parcel: parcel.into(),
            version,
            parcel_key: hex(key),
            images: keyrings
                .iter()
                .map(|(name, k)| (name.to_string(), hex(&k.seal(key))))
                .collect(),
            dirty: BTreeSet::new(),
        }
    }

    /// The hash that names this version in the ownership record: BLAKE3 over the parcel, the
    /// version and each image's sealed keyring.
    pub fn hash(&self) -> [u8; 32] {
        let mut h = blake3::Hasher::new();
        h.update(self.parcel.as_bytes());
        h.update(&self.version.to_le_bytes());
        for (name, k) in &self.images {
            h.update(&(name.len() as u64).to_le_bytes());
            h.update(name.as_bytes());
            h.update(&(k.len() as u64).to_le_bytes());
            h.update(k.as_bytes());
        }
        h.update(&(self.dirty.len() as u64).to_le_bytes());
        for d in &self.dirty {
            h.update(d.as_bytes());
        }
        *h.finalize().as_bytes()
    }

    /// The parcel key.
    pub fn key(&self) -> Result<ParcelKey, StoreError> {
        unhex::<32>(&self.parcel_key, "parcel key").map_err(StoreError::Keyring)
    }

    /// Each image's keyring, opened (a wrong key, a truncated or modified keyring: an error
    /// naming the image).
    pub fn keyrings(&self) -> Result<BTreeMap<String, Keyring>, StoreError> {
        let key = self.key()?;
        self.images
            .iter()
            .map(|(name, sealed)| {
                let bytes = unhex_vec(sealed)
                    .ok_or_else(|| StoreError::Keyring(format!("image `{name}`: not hex")))?;
                let k = Keyring::open(&bytes, &key)
                    .map_err(|e| StoreError::Keyring(format!("image `{name}`: {e}")))?;
                Ok((name.clone(), k))
            })
            .collect()
    }

    /// The chunks of [`Control::dirty`].
    pub fn dirty_ids(&self) -> Result<BTreeSet<ChunkId>, String> {
        self.dirty
            .iter()
            .map(|s| {
                ChunkId::parse(s)
                    .ok_or_else(|| format!("dirty chunk name {s:?}: not 64 hex digits"))
            })
            .collect()
    }

    /// Every chunk the version names.
    pub fn chunk_ids(&self) -> Result<BTreeSet<ChunkId>, StoreError> {
        Ok(self
            .keyrings()?
            .values()
            .flat_map(|k| k.entries.iter().map(|e| e.id))
            .collect())
    }
}

/// Control state as a tier holds it: with the nonce it is good under.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    /// The control state.
    pub control: Control,
    /// The ownership nonce (hex) it was handed over with.
    pub nonce: String,
}

fn unhex_vec(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.is_ascii() {
        return None;
    }
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok())
        .collect()
}

#[cfg(test)]
mod tests;
