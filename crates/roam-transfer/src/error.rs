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
    /// A local file that cannot be used as what it was given for (a certificate, a key, a
    /// token file): why, without an error source of its own.
    #[error("{}: {why}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
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

/// The phase of a [`crate::session::Session`] that did not finish in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// The survey of the files (sizes, range support, HTTP versions, the round trip).
    Survey,
    /// The groups' transfers.
    Transfer,
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Phase::Survey => "survey",
            Phase::Transfer => "transfer",
        })
    }
}

/// What a client session ([`crate::session::Session`]) fails at: what its engines refuse or
/// fail at, a phase past the session's time limit, or a group's task lost.
#[derive(Debug, Error)]
pub enum SessionError {
    /// Files or parameters refused, a file the survey could not size, a group's engine or
    /// output directory: the engine's error, naming the URL, file or parameter.
    #[error(transparent)]
    Transfer(#[from] TransferError),
    /// A phase did not finish within the session's time limit.
    #[error("the {phase} did not finish within {:.1} s", limit.as_secs_f64())]
    TimedOut {
        /// The phase.
        phase: Phase,
        /// The limit.
        limit: std::time::Duration,
    },
    /// A group's transfer task ended without its report (it panicked).
    #[error("the transfer of group {group} ({files} file(s)) failed: {why}")]
    Task {
        /// The group's place in the plan.
        group: usize,
        /// Its files.
        files: usize,
        /// What the runtime said.
        why: String,
    },
}

/// An error with the errors that caused it, `outer: inner: ...` (hyper's client error says
/// only "client error (Connect)"; what failed to connect, and why, is in its sources).
pub fn with_causes(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cause = c.source();
    }
    s
}
