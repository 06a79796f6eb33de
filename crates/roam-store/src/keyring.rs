//! The keyring of an image (the Horatio paper: "per-chunk keys and hashes, encrypted with a key in the
//! configuration"): for each chunk of the image, in order, its name, its key and its length.
//! Whoever holds the keyring and the parcel key can read the image from any store; whoever
//! holds only blobs can check them against their names and nothing more.
//!
//! Sealed form: magic `RSKR`, format version 1, a random 12-byte nonce, then the AES-256-GCM
//! ciphertext (under the parcel key) of: the image length (u64), the chunk count (u64), and per
//! chunk its name (32 bytes), key (32 bytes) and length (u32), little-endian.

use aes_gcm::aead::{Aead, KeyInit};
use aes_gcm::{Aes256Gcm, Nonce};
use rand::RngCore;

use crate::chunk::{ChunkId, ChunkKey, CHUNK_SIZE};
use crate::error::StoreError;

const MAGIC: &[u8; 4] = b"RSKR";
const VERSION: u8 = 1;
const ENTRY: usize = 32 + 32 + 4;

/// A parcel's key: opens its keyrings.
pub type ParcelKey = [u8; 32];

/// One chunk of an image as its keyring records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The sealed chunk's name.
    pub id: ChunkId,
    /// Its key.
    pub key: ChunkKey,
    /// Its plaintext length (CHUNK_SIZE but for the last chunk).
    pub len: u32,
}

/// The chunks of one image, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Keyring {
    /// The image's length in bytes.
    pub image_len: u64,
    /// Its chunks.
    pub entries: Vec<Entry>,
}

impl Keyring {
    /// Seal under `parcel_key` (a fresh random nonce each time).
    pub fn seal(&self, parcel_key: &ParcelKey) -> Vec<u8> {
        let mut plain = Vec::with_capacity(16 + self.entries.len() * ENTRY);
        plain.extend_from_slice(&self.image_len.to_le_bytes());
        plain.extend_from_slice(&(self.entries.len() as u64).to_le_bytes());
        for e in &self.entries {
            plain.extend_from_slice(&e.id.0);
            plain.extend_from_slice(&e.key);
            plain.extend_from_slice(&e.len.to_le_bytes());
        }
        let mut nonce = [0u8; 12];
        rand::thread_rng().fill_bytes(&mut nonce);
        let sealed = Aes256Gcm::new(parcel_key.into())
            .encrypt(Nonce::from_slice(&nonce), &plain[..])
            .expect("AES-GCM encrypts a keyring");
        let mut out = Vec::with_capacity(5 + 12 + sealed.len());
        out.extend_from_slice(MAGIC);
        out.push(VERSION);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        out
    }

    /// Open a sealed keyring with `parcel_key`. A wrong key, a truncated or modified keyring,
    /// and entries that do not add up to the image length are each refused with what is wrong.
    pub fn open(sealed: &[u8], parcel_key: &ParcelKey) -> Result<Keyring, StoreError> {
        let bad = |why: String| StoreError::Keyring(why);
        if sealed.len() < 5 + 12 + 16 || &sealed[..4] != MAGIC {
            return Err(bad(format!(
                "not a keyring ({} bytes, without the `RSKR` header)",
                sealed.len()
            )));
        }
        if sealed[4] != VERSION {
            return Err(bad(format!(
                "format version {}, expected {VERSION}",
                sealed[4]
            )));
        }
        let plain = Aes256Gcm::new(parcel_key.into())
            .decrypt(Nonce::from_slice(&sealed[5..17]), &sealed[17..])
            .map_err(|_| {
                bad("it does not open with this parcel key (a wrong key, or a truncated or modified keyring)".into())
            })?;
        let u64_at = |i: usize| u64::from_le_bytes(plain[i..i + 8].try_into().unwrap());
        if plain.len() < 16 {
            return Err(bad("shorter than its header".into()));
        }
        let (image_len, count) = (u64_at(0), u64_at(8));
        if (plain.len() - 16) as u64 != count.saturating_mul(ENTRY as u64) {
            return Err(bad(format!(
                "{count} entries announced, {} bytes of entries",
                plain.len() - 16
            )));
        }
        let entries: Vec<Entry> = plain[16..]
            .chunks_exact(ENTRY)
            .map(|c| Entry {
                id: ChunkId(c[..32].try_into().unwrap()),
                key: c[32..64].try_into().unwrap(),
                len: u32::from_le_bytes(c[64..68].try_into().unwrap()),
            })
            .collect();
        let k = Keyring { image_len, entries };
        k.check()?;
        Ok(k)
    }

    /// Every chunk is CHUNK_SIZE long but the last, and the lengths add up to the image's.
    pub fn check(&self) -> Result<(), StoreError> {
        let n = self.entries.len();
        for (i, e) in self.entries.iter().enumerate() {
            let ok = if i + 1 < n {
                e.len as usize == CHUNK_SIZE
            } else {
                e.len as usize <= CHUNK_SIZE && e.len > 0
            };
            if !ok {
                return Err(StoreError::Keyring(format!(
                    "chunk {i} of {n} is {} bytes long",
                    e.len
                )));
            }
        }
        let total: u64 = self.entries.iter().map(|e| e.len as u64).sum();
        if total != self.image_len {
            return Err(StoreError::Keyring(format!(
                "its chunks add up to {total} bytes, the image is {}",
                self.image_len
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring() -> Keyring {
        Keyring {
            image_len: CHUNK_SIZE as u64 + 10,
            entries: vec![
                Entry {
                    id: ChunkId([1; 32]),
                    key: [2; 32],
                    len: CHUNK_SIZE as u32,
                },
                Entry {
                    id: ChunkId([3; 32]),
                    key: [4; 32],
                    len: 10,
                },
            ],
        }
    }

    #[test]
    fn a_keyring_opens_with_its_parcel_key_only() {
        let k = ring();
        let sealed = k.seal(&[9; 32]);
        assert_eq!(Keyring::open(&sealed, &[9; 32]).unwrap(), k);
        let e = Keyring::open(&sealed, &[8; 32]).unwrap_err().to_string();
        assert!(e.contains("does not open with this parcel key"), "{e}");
        let e = Keyring::open(&sealed[..sealed.len() - 1], &[9; 32])
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not open"), "{e}");
        let e = Keyring::open(&sealed[..10], &[9; 32])
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a keyring"), "{e}");
    }

    #[test]
    fn entries_that_do_not_add_up_are_refused() {
        let mut k = ring();
        k.image_len += 1;
        let e = Keyring::open(&k.seal(&[1; 32]), &[1; 32])
            .unwrap_err()
            .to_string();
        assert!(e.contains("add up"), "{e}");
        let mut k = ring();
        k.entries[0].len = 5;
        assert!(k.check().is_err());
    }
}
