//! Network link traces for roam.
//!
//! A link is described by a [`LinkTrace`]: capacity over time in each direction ([`Capacity`]),
//! one-way delay over time, a random loss rate, and availability over time (a car driving in and
//! out of WiFi range). Traces come from measured files or seeded generators:
//!
//! - [`pdo`]: Mahimahi packet-delivery-opportunity files (the measured cellular traces);
//! - [`interval`]: an interval CSV, `t_ms,down_kbps,up_kbps,rtt_ms,available`;
//! - [`cdf`] and [`onoff`]: on/off availability sampled from the Cabernet encounter and
//!   disconnection CDFs, or read from an on/off schedule file;
//! - [`scenario`]: the Intentional Networking paper's `hotspot` and `intermittent` scenarios
//!   (Table 3) and a `vehicular` scenario built from a measured 3G trace and Cabernet WiFi;
//! - [`baseline`]: the paper's single-link baselines derived per second from a multi-link scenario
//!   (best-latency migration, best-bandwidth migration, idealized aggregation);
//! - [`stats`] and [`plot`]: the paper's trace table and an SVG of capacity and availability.

pub mod baseline;
pub mod capacity;
pub mod cdf;
pub mod error;
pub mod interval;
pub mod link;
pub mod onoff;
pub mod pdo;
pub mod piecewise;
pub mod plot;
pub mod scenario;
pub mod stats;

pub use baseline::{derive, derive_baseline, Baseline, BaselineSpec};
pub use capacity::Capacity;
pub use error::TraceError;
pub use link::{LinkKind, LinkTrace, NamedLink, SecondSample};
pub use pdo::PdoTrace;
pub use piecewise::Piecewise;
pub use scenario::Scenario;
