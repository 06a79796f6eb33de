//! A parcel's control state ([`Control`]: its version, the parcel key, the sealed keyrings, the
//! chunks not yet at the server) and control state as a tier holds it, with the ownership nonce
//! it is good under ([`Held`]). Control state moves only with ownership; the tiers and the
//! client keep it as a JSON file, written whole or not at all.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::wire::{chunk_id, hex, unhex};
use crate::error::StoreError;
use crate::files::{read_private_json, write_private};
use crate::id::ChunkId;
use crate::keyring::{Keyring, ParcelKey};

/// A parcel's control state: what its owner needs to run it, and what moves only with
/// ownership (the Horatio paper: the keyring and the configuration with its key).
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
        Ok(unhex::<32>(&self.parcel_key, "parcel key")?)
    }

    /// Each image's keyring, opened (a wrong key, a truncated or modified keyring: an error
    /// naming the image).
    pub fn keyrings(&self) -> Result<BTreeMap<String, Keyring>, StoreError> {
        let key = self.key()?;
        self.images
            .iter()
            .map(|(name, sealed)| {
                let k = unhex_vec(sealed)
                    .ok_or_else(|| StoreError::Keyring("not hex".into()))
                    .and_then(|bytes| Keyring::open(&bytes, &key))
                    .map_err(|e| e.within(format!("image `{name}`")))?;
                Ok((name.clone(), k))
            })
            .collect()
    }

    /// The chunks of [`Control::dirty`].
    pub fn dirty_ids(&self) -> Result<BTreeSet<ChunkId>, StoreError> {
        self.dirty
            .iter()
            .map(|s| Ok(chunk_id(s, "dirty chunk name")?))
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

impl Held {
    /// The control state kept in the file `path` (`None`: no such file); errors name the file.
    /// It holds the parcel key: a file its group or others may read is refused
    /// ([`StoreError::Exposed`]).
    pub fn read(path: &Path) -> Result<Option<Held>, StoreError> {
        read_private_json(path, "a control state (the parcel key)")
    }

    /// Keep it in the file `path`, whole or not at all, readable by its owner alone (mode
    /// 0600 from its creation).
    pub fn write(&self, path: &Path) -> Result<(), StoreError> {
        write_private(path, &self.to_bytes())
    }

    /// Its JSON, as it goes over a link or into a file.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("control state serializes")
    }
}

fn unhex_vec(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.is_ascii() {
        return None;
    }
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok())
        .collect()
}
