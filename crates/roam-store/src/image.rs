//! Disk and memory images in and out of stores: [`ingest`] cuts an image into chunks, seals
//! each and keeps it where it is not already kept, and gives the image's [`Keyring`]; with the
//! keyring of the last check-in and the set of chunks written since (a dirty bitmap), only those
//! are sealed again. [`restore`] writes an image back from the first stores that hold valid
//! copies of its chunks.

use std::collections::BTreeSet;
use std::io::{Read, Write};

use crate::chunk::{seal, CHUNK_SIZE};
use crate::error::StoreError;
use crate::keyring::{Entry, Keyring};
use crate::store::{fetch, ChunkStore};

/// What an ingest did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ingested {
    /// The image's keyring.
    pub keyring: Keyring,
    /// Chunks sealed and newly kept.
    pub stored: u64,
    /// Chunks sealed and found already kept (equal chunks seal alike).
    pub already_kept: u64,
    /// Chunks taken from the base keyring unsealed (not dirty).
    pub unchanged: u64,
    /// Bytes of blobs newly kept.
    pub stored_bytes: u64,
}

/// Read `image` to its end, chunk by chunk, into `store`. With `base` (the keyring of the last
/// check-in) and `dirty` (the chunk numbers written since), a chunk that is not dirty and that
/// `base` has, of the same length, keeps its entry without being sealed again.
pub fn ingest(
    image: &mut dyn Read,
    store: &dyn ChunkStore,
    base: Option<(&Keyring, &BTreeSet<u64>)>,
) -> Result<Ingested, StoreError> {
    let mut out = Ingested::default();
    let mut buf = vec![0u8; CHUNK_SIZE];
    let mut index = 0u64;
    loop {
        let n = read_full(image, &mut buf)
            .map_err(|e| StoreError::Image(format!("reading chunk {index}: {e}")))?;
        if n == 0 {
            break;
        }
        let reuse = base.and_then(|(k, dirty)| {
            let e = k.entries.get(index as usize)?;
            (!dirty.contains(&index) && e.len as usize == n).then_some(*e)
        });
        let entry = match reuse {
            Some(e) => {
                out.unchanged += 1;
                e
            }
            None => {
                let s = seal(&buf[..n]);
                if store.has(&s.id)? {
                    out.already_kept += 1;
                } else {
                    store.put(&s.id, &s.blob)?;
                    out.stored += 1;
                    out.stored_bytes += s.blob.len() as u64;
                }
                Entry {
                    id: s.id,
                    key: s.key,
                    len: n as u32,
                }
            }
        };
        out.keyring.entries.push(entry);
        out.keyring.image_len += n as u64;
        index += 1;
        if n < CHUNK_SIZE {
            break;
        }
    }
    Ok(out)
}

/// Fill `buf` from `r` as far as it goes; the bytes read (fewer only at the end).
fn read_full(r: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Write the image of `keyring` to `out`, each chunk from the first of `stores` with a valid
/// copy. Nothing of a chunk is written before it is checked, and a chunk that no store has
/// valid stops the restore with an error naming it.
pub fn restore(
    keyring: &Keyring,
    stores: &[&dyn ChunkStore],
    out: &mut dyn Write,
) -> Result<(), StoreError> {
    keyring.check()?;
    for (i, e) in keyring.entries.iter().enumerate() {
        let plain = fetch(&e.id, &e.key, stores)?;
        if plain.len() != e.len as usize {
            return Err(StoreError::Image(format!(
                "chunk {i} ({}) is {} bytes, its keyring says {}",
                e.id,
                plain.len(),
                e.len
            )));
        }
        out.write_all(&plain)
            .map_err(|err| StoreError::Image(format!("writing chunk {i}: {err}")))?;
    }
    Ok(())
}

/// A synthetic image of `len` bytes, chunk by chunk a third zero blocks, a third text, a third
/// random bytes (what a disk mixes: free space, files that compress, files that do not); the
/// same `seed` gives the same bytes. For benchmarks and the lab.
pub fn synthetic(len: usize, seed: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let text = b"From: user@example.org; a working day's notes, mail and documents 0123456789\n";
    while v.len() < len {
        let chunk = v.len() / CHUNK_SIZE;
        for i in 0..CHUNK_SIZE.min(len - v.len()) {
            v.push(match chunk % 3 {
                0 => 0,
                1 => text[(i + chunk) % text.len()],
                _ => {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                }
            });
        }
    }
    v
}
