//! The sans-IO protocol core: labels, the wire format, the multi-socket state machine, join
//! authentication and estimators. No sockets, no clock; see [`session::Session`].

pub mod auth;
pub mod estimate;
pub mod label;
pub mod ranges;
pub mod routing;
pub mod session;
pub mod wire;

pub use label::Label;
pub use session::{
    Config, ConfigError, ConnId, Delivery, Event, Failure, IrobId, KernelQueue, KernelWindow,
    NetId, NetKind, PathLoad, SendError, Session, TcpSample, ThunkId, Transmit,
};
pub use wire::{Caps, Decoder, Deps, Frame, WireError, WireLimits};
