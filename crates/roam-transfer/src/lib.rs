//! FastHLA for roam (the FastHLA paper; ../shared/spec/fasthla.md): bulk HTTP transfers whose
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
//! ([`broker`]: cache, model, log ring), the HLA server ([`server`]), and the client session
//! that puts the device's side together ([`session`]: survey, size clusters, the broker's
//! parameters per cluster, the groups over the survey's warm connections), which both
//! `roam transfer get` and the lab's FastHLA tool run. The lab (`roam lab fasthla`) and the
//! benchmark (`roam bench transfer`) are in roam-lab and the CLI.

pub mod broker;
pub mod condition;
pub mod engine;
pub mod error;
pub mod hla;
pub mod mixed;
pub mod model;
pub mod params;
pub mod partial;
pub mod server;
pub mod session;

pub use engine::{
    distinct_destinations, distinct_names, Engine, FileLog, FileSpec, Protocol, Report, Survey,
    Upload, MIN_STEAL_PIECE, STREAM_RETRIES, SURVEY_CC,
};
pub use error::{SessionError, TransferError};
pub use params::Params;
pub use session::Session;

#[cfg(test)]
mod tests;
