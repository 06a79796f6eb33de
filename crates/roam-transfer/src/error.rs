//! What a transfer refuses or fails at.

use std::path::PathBuf;

use thiserror::Error;

/// A transfer error, naming the URL, file or parameter concerned.
#[derive(Debug, Error)]
pub enum TransferError {
    /// Parameters out of bounds.
    #[error("parameters: {0}")]
    Params(String),
    /// A URL this engine cannot fetch.
    #[error("{url}: {why}")]
    Url {
        /// The URL.
        url: String,
        /// Why.
        why: String,
    },
    /// The server answered with an error status.
    #[error("{url}: HTTP {status}")]
    Status {
        /// The URL.
        url: String,
        /// The status code.
        status: u16,
    },
    /// The connection failed or the response ended early.
    #[error("{url}: {why}")]
    Network {
        /// The URL.
        url: String,
        /// What happened.
        why: String,
    },
    /// A model file that cannot be used, or a model that cannot be trained.
    #[error("model: {0}")]
    Model(String),
    /// A local file could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl TransferError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> TransferError {
        let path = path.into();
        move |source| TransferError::Io { path, source }
    }
}
