//! FastHLA for roam (seed 003; ../shared/spec/fasthla.md): bulk HTTP transfers whose
//! concurrency (files in flight), parallelism (range streams per file) and I/O block size are
//! chosen for the network and the dataset, to raise throughput and cut the energy a phone's
//! radio spends per byte.
//!
//! Built: the transfer engine ([`Engine`]: HTTP/1.1 and HTTP/2 on hyper, resumable range
//! downloads that never leave an incomplete file under its final name, a log record per file),
//! the plan of a mixed-size dataset ([`mixed`]: clusters by size, parameters per cluster,
//! channels scaled to a limit), the HLA server's offline analysis ([`hla`]: outliers,
//! clustering by condition, spline surfaces, the parameters of most throughput per joule), the
//! learnt models ([`model`]: a network, an SVM, nearest neighbours), the device's broker
//! ([`broker`]: cache, model, log ring) and the HLA server ([`server`]). The lab
//! (`roam lab fasthla`) and the benchmark (`roam bench transfer`) are in roam-lab and the CLI.

pub mod broker;
pub mod engine;
pub mod error;
pub mod hla;
pub mod mixed;
pub mod model;
pub mod params;
pub mod partial;
pub mod server;

pub use engine::{
    distinct_destinations, distinct_names, Engine, FileLog, FileSpec, Protocol, Report, Survey,
    Upload, MIN_STEAL_PIECE, STREAM_RETRIES, SURVEY_CC,
};
pub use error::TransferError;
pub use params::Params;

#[cfg(test)]
mod tests;
