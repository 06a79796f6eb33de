//! The runtime API's typed error ([`Error`]).

use thiserror::Error as ThisError;

use super::*;

/// Errors of the runtime API.
#[derive(Debug, ThisError)]
pub enum Error {
    /// The protocol refused the call.
    #[error(transparent)]
    Send(#[from] SendError),
    /// The send was deferred; the thunk runs when the label can be sent. Cancel with the handle.
    #[error("deferred: the thunk will run when this label can be sent")]
    Deferred(ThunkHandle),
    /// A system call failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        source: io::Error,
    },
    /// The multi-socket failed (every network down past the timeout, a peer violation, an
    /// abort by either side).
    #[error("multi-socket failed: {0}")]
    Failed(Failure),
    /// The listener's accept loop has ended.
    #[error("the listener stopped")]
    ListenerStopped,
    /// The options' protocol configuration contradicts itself.
    #[error("invalid configuration: {0}")]
    Config(#[from] ConfigError),
    /// The multi-socket could not be opened.
    #[error("could not connect to {peer}: {why}")]
    Connect {
        /// The peer.
        peer: SocketAddr,
        /// Why.
        why: ConnectError,
    },
}

/// Why [`MultiSocket::connect`] could not open a multi-socket.
#[derive(Debug, ThisError)]
pub enum ConnectError {
    /// No local network of the peer's address family to connect over.
    #[error("no usable local network (no up, non-loopback interface with an address of the peer's family)")]
    NoNetwork,
    /// The multi-socket failed during its first handshake (the peer refused it, say).
    #[error("{0}")]
    Failed(Failure),
    /// No connection finished the first handshake in time.
    #[error(
        "no handshake within {timeout:?} over any network{}",
        last_attempt.as_ref().map_or(String::new(), |e| format!("; last attempt: {e}"))
    )]
    Timeout {
        /// `Options::connect_timeout`.
        timeout: Duration,
        /// How the latest connection attempt failed, if one did.
        last_attempt: Option<String>,
    },
}

pub(super) fn io_err(context: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
    let context = context.into();
    move |source| Error::Io { context, source }
}
