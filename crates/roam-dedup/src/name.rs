//! A chunk's name: 8 bytes of XXH3-64 over its content.
//!
//! The thesis used Bob Jenkins's hash at 8 bytes after its 4-byte version collided on 0.02% of
//! 5 GB (Table 5); XXH3 is as fast as any non-cryptographic hash and its 64 bits make a
//! collision among the ~2 million chunks of a 250 MB cache about 1 in 10^7. Collisions are
//! still detected end to end (each record's checksum) and repaired ([`crate::wire`]).

use twox_hash::XxHash3_64;

/// The name of a chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(pub u64);

impl Name {
    /// Bytes a name takes on the wire.
    pub const LEN: usize = 8;

    /// The name of `chunk`.
    pub fn of(chunk: &[u8]) -> Name {
        Name(XxHash3_64::oneshot(chunk))
    }

    /// The name of `chunk` kept to its low `bits` bits (64: [`Name::of`]): fewer bits make
    /// collisions common, which is how the tests check that they are caught and repaired.
    pub fn of_bits(chunk: &[u8], bits: u32) -> Name {
        let n = Name::of(chunk).0;
        Name(if bits >= 64 {
            n
        } else {
            n & ((1u64 << bits) - 1)
        })
    }
}

/// A checksum of a record's original bytes (XXH3-64 with a seed apart from names', so a
/// record of one chunk does not check itself against its own name).
pub fn checksum(bytes: &[u8]) -> u64 {
    XxHash3_64::oneshot_with_seed(0x5eed_c0de, bytes)
}

/// A hasher for maps keyed by [`Name`]: the name is already a good hash, so it is used as it is.
#[derive(Default, Clone, Copy)]
pub struct NameHasher(u64);

impl std::hash::Hasher for NameHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// A `HashMap` keyed by names.
pub type NameMap<V> = std::collections::HashMap<Name, V, std::hash::BuildHasherDefault<NameHasher>>;

/// A `HashSet` of names.
pub type NameSet = std::collections::HashSet<Name, std::hash::BuildHasherDefault<NameHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_differ_from_checksums_and_between_contents() {
        let a = b"a chunk of text";
        assert_eq!(Name::of(a), Name::of(a));
        assert_ne!(Name::of(a), Name::of(b"a chunk of test"));
        assert_ne!(Name::of(a).0, checksum(a));
    }
}
