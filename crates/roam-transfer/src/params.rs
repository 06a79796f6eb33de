//! The application-layer parameters FastHLA tunes (the FastHLA paper; ../shared/spec/fasthla.md):
//! concurrency (files in flight), parallelism (streams per file, each a byte range) and the I/O
//! block size (how much the client reads from a connection at a time), and, beyond the seed,
//! the HTTP version: under HTTP/1.1 every stream is a connection of its own, each with its
//! handshake and slow start; under HTTP/2 the streams share one connection, whose window
//! grows once for all of them (what many small files on a long path need, docs/fasthla.md).

use serde::{Deserialize, Serialize};

use crate::error::TransferError;

/// Bounds of the paper's sweeps: cc 1-32, p 1-8, bs 1-64 KB (larger ones are allowed, smaller
/// and zero are not).
pub const MAX_CC: u32 = 256;
/// See [`MAX_CC`].
pub const MAX_P: u32 = 64;
/// Smallest block size: hyper reads at least this much at a time.
pub const MIN_BS: usize = 1024;
/// Largest block size.
pub const MAX_BS: usize = 16 << 20;

/// HTTP version of a transfer.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
pub enum Protocol {
    /// HTTP/1.1: one request at a time per connection.
    #[default]
    Http1,
    /// HTTP/2 (cleartext, prior knowledge): every request a stream of one connection.
    Http2,
}

impl Protocol {
    /// `http1` or `http2`.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Http1 => "http1",
            Protocol::Http2 => "http2",
        }
    }
}

/// Concurrency, parallelism, block size and HTTP version of a transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Params {
    /// Files in flight at once.
    pub cc: u32,
    /// Streams (each a byte range) per file: connections under HTTP/1.1, streams of the one
    /// connection under HTTP/2.
    pub p: u32,
    /// Bytes read from a connection at a time.
    pub bs: usize,
    /// HTTP version (logs and models from before it was a parameter read as HTTP/1.1).
    #[serde(default)]
    pub protocol: Protocol,
}

impl Default for Params {
    /// One file at a time, one stream, 64 KiB reads: what a plain download does.
    fn default() -> Params {
        Params {
            cc: 1,
            p: 1,
            bs: 64 * 1024,
            protocol: Protocol::Http1,
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
