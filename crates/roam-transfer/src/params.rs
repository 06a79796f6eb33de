//! The three application-layer parameters FastHLA tunes (seed 003; ../shared/spec/fasthla.md):
//! concurrency (files in flight), parallelism (streams per file, each a byte range) and the I/O
//! block size (how much the client reads from a connection at a time).

use serde::{Deserialize, Serialize};

use crate::error::TransferError;

/// Bounds of the seed's sweeps: cc 1-32, p 1-8, bs 1-64 KB (larger ones are allowed, smaller
/// and zero are not).
pub const MAX_CC: u32 = 256;
/// See [`MAX_CC`].
pub const MAX_P: u32 = 64;
/// Smallest block size: hyper reads at least this much at a time.
pub const MIN_BS: usize = 1024;
/// Largest block size.
pub const MAX_BS: usize = 16 << 20;

/// Concurrency, parallelism and block size of a transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Params {
    /// Files in flight at once.
    pub cc: u32,
    /// Streams (connections, each a byte range) per file.
    pub p: u32,
    /// Bytes read from a connection at a time.
    pub bs: usize,
}

impl Default for Params {
    /// One file at a time, one stream, 64 KiB reads: what a plain download does.
    fn default() -> Params {
        Params {
            cc: 1,
            p: 1,
            bs: 64 * 1024,
        }
    }
}

impl Params {
    /// Refuse values outside the bounds, naming the parameter.
    pub fn validate(&self) -> Result<(), TransferError> {
        let bad = |what: &str, v: String, range: String| {
            Err(TransferError::Params(format!(
                "{what} {v} is outside {range}"
            )))
        };
        if !(1..=MAX_CC).contains(&self.cc) {
            return bad("concurrency", self.cc.to_string(), format!("1..={MAX_CC}"));
        }
        if !(1..=MAX_P).contains(&self.p) {
            return bad("parallelism", self.p.to_string(), format!("1..={MAX_P}"));
        }
        if !(MIN_BS..=MAX_BS).contains(&self.bs) {
            return bad(
                "block size",
                self.bs.to_string(),
                format!("{MIN_BS}..={MAX_BS} bytes"),
            );
        }
        Ok(())
    }
}
