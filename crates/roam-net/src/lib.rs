//! Intentional Networking for roam: multi-sockets whose applications label their traffic.
//!
//! Applications label each IROB (isolated reliable ordered bytestream) foreground or background,
//! small or large; roam maps it to the most appropriate of several networks, stripes background
//! data, defers it (thunks) when no appropriate network is usable, reorders within the
//! application's ordering constraints and hides disconnections (Higgins et al., MobiCom 2010;
//! `../shared/spec/intentional-networking.md`).
//!
//! - [`proto`]: the sans-IO core (wire format, scheduling, reassembly, failover, estimators).
//! - [`runtime`]: the tokio driver and the blocking API over real TCP connections.
//! - [`capi`]: the C ABI with the paper's `ms_*` names (`include/roam_net.h`).

pub mod capi;
pub mod proto;
pub mod runtime;

pub use proto::{Delivery, Deps, IrobId, Label, SendError};
