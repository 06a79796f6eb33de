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
//! - [`proxy`]: unmodified programs' TCP connections carried over multi-sockets (a SOCKS5 or
//!   transparent proxy on the device, a relay at the server side; `roam net proxy` and
//!   `roam net relay`).

pub mod capi;
pub mod proto;
pub mod proxy;
pub mod runtime;

pub use proto::{Delivery, Deps, IrobId, Label, SendError};
