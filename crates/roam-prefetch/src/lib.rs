//! Informed Mobile Prefetching (IMP; Higgins' thesis, chapter 3; ../shared/spec/informed-prefetching.md):
//! prefetch when it pays, so that fetch latency is as low as it can be while energy and
//! cellular data end close to, but not over, their budgets. Built on Intentional Networking
//! (prefetches are background IROBs, demand fetches foreground) and on `roam-budget` (the
//! radios' energy, the prices of energy and data).
//!
//! - [`accuracy`]: how often each class of hints is consumed;
//! - [`decision`]: the sans-IO decision: which hints to prefetch now, on which networks;
//! - [`strategy`]: IMP or one of the thesis's baselines (never, size-limit, WiFi-only,
//!   always);
//! - [`runtime`]: the application's interface: hints, handles, background prefetches and
//!   demand fetches, over an [`Environment`] that supplies networks and prices;
//! - [`capi`]: the C ABI (`include/roam_prefetch.h`);
//! - [`device`]: the environment of a client on a device (roam-net's estimates, the radios
//!   driven by the interfaces' counters, the budgets' controllers).

#![warn(missing_docs)]

pub mod accuracy;
pub mod capi;
pub mod decision;
pub mod device;
pub mod runtime;
pub mod strategy;

pub use accuracy::{Accuracy, Class, DEFAULT_CLASS};
pub use decision::{decide, Candidate, Decision, LongRun, NetworkState, Prices};
pub use runtime::{Environment, GetError, Handle, Network, Prefetcher, Stats};
pub use strategy::Strategy;

#[cfg(test)]
mod tests;
