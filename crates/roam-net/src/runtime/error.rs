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
    /// The multi-socket failed (every network down past the timeout, or a peer violation).
    #[error("multi-socket failed: {0}")]
    Failed(String),
    /// The options' protocol configuration contradicts itself.
    #[error("invalid configuration: {0}")]
    Config(#[from] ConfigError),
    /// The first handshake did not complete in time.
    #[error("could not connect to {0}: {1}")]
    Connect(SocketAddr, String),
}

pub(super) fn io_err(context: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
    let context = context.into();
    move |source| Error::Io { context, source }
}
