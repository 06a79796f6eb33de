//! FastHLA for roam (seed 003; ../shared/spec/fasthla.md): bulk HTTP transfers whose
//! concurrency (files in flight), parallelism (range streams per file) and I/O block size are
//! chosen for the network and the dataset, to raise throughput and cut the energy a phone's
//! radio spends per byte.
//!
//! Built so far: the transfer engine ([`Engine`]: HTTP/1.1 and HTTP/2 on hyper, resumable
//! range downloads that never leave an incomplete file under its final name, a log record per
//! file), the plan of a mixed-size dataset ([`mixed`]: clusters by size, parameters per
//! cluster, channels scaled to a limit), and the HLA server's offline analysis ([`hla`]:
//! outliers, clustering by condition, spline surfaces, the parameters of most throughput per
//! joule, a lookup table). Not built yet (issue 26): the logs' upload and `roam hla serve`, the
//! learnt models (network, SVM), the device's broker, `roam lab fasthla`, `roam bench
//! transfer`.

pub mod engine;
pub mod error;
pub mod hla;
pub mod mixed;
pub mod params;
pub mod partial;

pub use engine::{Engine, FileLog, FileSpec, Protocol, Report};
pub use error::TransferError;
pub use params::Params;

#[cfg(test)]
mod tests;
