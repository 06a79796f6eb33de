//! The name of a sealed chunk ([`ChunkId`]): the BLAKE3 hash of its blob, so that anyone can
//! check a blob against its name without being able to open it. A leaf of the crate: the
//! errors ([`crate::error`]) name chunks by it, and the chunks ([`crate::chunk`]) are sealed
//! under it.

use std::fmt;

/// The name of a sealed chunk: the BLAKE3 hash of its blob.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChunkId(pub [u8; 32]);

impl ChunkId {
    /// The name of `blob`.
    pub fn of(blob: &[u8]) -> ChunkId {
        ChunkId(*blake3::hash(blob).as_bytes())
    }

    /// Its 64 hex digits.
    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Parse 64 hex digits.
    pub fn parse(s: &str) -> Option<ChunkId> {
        if s.len() != 64 || !s.is_ascii() {
            return None;
        }
        let mut id = [0u8; 32];
        for (i, b) in id.iter_mut().enumerate() {
            *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(ChunkId(id))
    }
}

impl fmt::Display for ChunkId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.hex())
    }
}

impl fmt::Debug for ChunkId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ChunkId({})", &self.hex()[..16])
    }
}
