//! One chunk: up to [`CHUNK_SIZE`] bytes of a disk or memory image, compressed, sealed under a
//! key of its own, and named by the hash of what was sealed (the Horatio paper: ISR's individually
//! encrypted and compressed 128 KB chunks; horatio.md's decision: content-addressed, per-chunk
//! keys, an authenticated cipher).
//!
//! The key is convergent: derived from the plaintext (BLAKE3 in key-derivation mode), so the
//! same chunk seals to the same blob wherever it is sealed, and a store holds it once. That
//! reveals which chunks are equal to whoever holds blobs, and nothing else; ISR made the same
//! choice. Since a key never seals two different plaintexts, the AES-256-GCM nonce is fixed.
//!
//! A sealed blob is: format version (1 byte), compression (1 byte: 0 none, 1 LZ4), then the
//! AES-256-GCM ciphertext of the (compressed) bytes with its 16-byte tag. Its name is the
//! BLAKE3 hash of the whole blob, so anyone can check a blob against its name (it is usable
//! only by whoever holds the keyring); the tag checks it again once opened.

use aes_gcm::aead::{Aead, KeyInit};
use aes_gcm::{Aes256Gcm, Nonce};

use crate::error::StoreError;
pub use crate::id::ChunkId;

/// Bytes of image per chunk (ISR's 128 KB).
pub const CHUNK_SIZE: usize = 128 * 1024;

/// Format version of a sealed blob.
const VERSION: u8 = 1;
const RAW: u8 = 0;
const LZ4: u8 = 1;
/// The context string of the convergent key derivation.
const KEY_CONTEXT: &str = "roam-store 2026-11 chunk key v1";

/// The key that opens one chunk.
pub type ChunkKey = [u8; 32];

/// A sealed chunk: its name, its key, the blob.
#[derive(Clone, Debug)]
pub struct Sealed {
    /// The blob's name.
    pub id: ChunkId,
    /// Its key (goes into the keyring).
    pub key: ChunkKey,
    /// What a store keeps.
    pub blob: Vec<u8>,
}

/// Seal `plain` (at most [`CHUNK_SIZE`] bytes): compress it if that makes it smaller,
/// encrypt it under its convergent key, name it by the hash of the result.
pub fn seal(plain: &[u8]) -> Sealed {
    let key = blake3::derive_key(KEY_CONTEXT, plain);
    let compressed = lz4_flex::compress_prepend_size(plain);
    let (kind, body) = if compressed.len() < plain.len() {
        (LZ4, &compressed[..])
    } else {
        (RAW, plain)
    };
    let cipher = Aes256Gcm::new((&key).into());
    let sealed = cipher
        .encrypt(&Nonce::default(), body)
        .expect("AES-GCM encrypts any chunk-sized input");
    let mut blob = Vec::with_capacity(2 + sealed.len());
    blob.push(VERSION);
    blob.push(kind);
    blob.extend_from_slice(&sealed);
    Sealed {
        id: ChunkId::of(&blob),
        key,
        blob,
    }
}

/// Open `blob`, which should be chunk `id`, with `key`: checks the hash against the name, the
/// tag against the key, and the size (at most [`CHUNK_SIZE`]).
pub fn open(id: &ChunkId, key: &ChunkKey, blob: &[u8]) -> Result<Vec<u8>, StoreError> {
    if ChunkId::of(blob) != *id {
        return Err(StoreError::Tampered {
            id: *id,
            why: "its hash does not match its name".into(),
        });
    }
    let bad = |why: &str| StoreError::Tampered {
        id: *id,
        why: why.into(),
    };
    let [version, kind, sealed @ ..] = blob else {
        return Err(bad("shorter than its header"));
    };
    if *version != VERSION {
        return Err(bad(&format!(
            "format version {version}, expected {VERSION}"
        )));
    }
    let cipher = Aes256Gcm::new(key.into());
    let body = cipher
        .decrypt(&Nonce::default(), sealed)
        .map_err(|_| bad("it does not open with its key from the keyring"))?;
    let plain = match *kind {
        RAW => body,
        LZ4 => {
            // The size prefix is checked before anything is allocated for it.
            let [a, b, c, d, rest @ ..] = &body[..] else {
                return Err(bad("its LZ4 body is shorter than its size"));
            };
            let size = u32::from_le_bytes([*a, *b, *c, *d]) as usize;
            if size > CHUNK_SIZE {
                return Err(bad("its LZ4 body claims more than a chunk"));
            }
            lz4_flex::block::decompress(rest, size)
                .map_err(|e| bad(&format!("its LZ4 body does not decompress: {e}")))?
        }
        k => return Err(bad(&format!("unknown compression {k}"))),
    };
    if plain.len() > CHUNK_SIZE {
        return Err(bad("longer than a chunk"));
    }
    Ok(plain)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_opens_to_what_was_sealed_and_equal_chunks_seal_alike() {
        let text = b"the same words again and again ".repeat(5000);
        let plain = &text[..CHUNK_SIZE];
        let s = seal(plain);
        assert!(
            s.blob.len() < plain.len() / 4,
            "compressed: {}",
            s.blob.len()
        );
        assert_eq!(open(&s.id, &s.key, &s.blob).unwrap(), plain);
        let again = seal(plain);
        assert_eq!((again.id, again.key), (s.id, s.key));
        let mut x: u32 = 1;
        let random: Vec<u8> = (0..1000)
            .map(|_| {
                x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (x >> 24) as u8
            })
            .collect();
        let r = seal(&random);
        assert_eq!(r.blob[1], RAW, "incompressible data is stored raw");
        assert_eq!(open(&r.id, &r.key, &r.blob).unwrap(), random);
        assert_eq!(ChunkId::parse(&s.id.hex()), Some(s.id));
    }

    #[test]
    fn a_modified_blob_or_a_wrong_key_is_refused() {
        let s = seal(b"some chunk of a disk image");
        let mut flipped = s.blob.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        let e = open(&s.id, &s.key, &flipped).unwrap_err().to_string();
        assert!(e.contains("hash does not match"), "{e}");
        // Renamed to match, the tag still fails.
        let e = open(&ChunkId::of(&flipped), &s.key, &flipped)
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not open"), "{e}");
        let e = open(&s.id, &[7; 32], &s.blob).unwrap_err().to_string();
        assert!(e.contains("does not open"), "{e}");
        assert!(open(&ChunkId::of(&[]), &s.key, &[]).is_err());
    }
}
