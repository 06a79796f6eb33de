//! FastHLA for roam (seed 003; ../shared/spec/fasthla.md): bulk HTTP transfers whose
//! concurrency (files in flight), parallelism (range streams per file) and I/O block size are
//! chosen for the network and the dataset, to raise throughput and cut the energy a phone's
//! radio spends per byte.
//!
//! Built so far: the transfer engine ([`Engine`]: HTTP/1.1 and HTTP/2 on hyper, resumable
//! range downloads that never leave an incomplete file under its final name, a log record per
//! file), and the plan of a mixed-size dataset ([`mixed`]: clusters by size, parameters per
//! cluster, channels scaled to a limit). Not built yet (issue 26): the logs' collection and the
//! HLA server's clustering, spline surfaces and models, the device's broker and parameter
//! cache (which will run a mixed plan's clusters), `roam lab fasthla`, `roam bench transfer`.

pub mod engine;
pub mod error;
pub mod mixed;
pub mod params;
pub mod partial;

pub use engine::{Engine, FileLog, FileSpec, Protocol, Report};
pub use error::TransferError;
pub use params::Params;

#[cfg(test)]
mod tests;
