//! What the chunk store refuses or fails at.

use std::path::PathBuf;

use thiserror::Error;

use crate::chunk::ChunkId;

/// A chunk-store error; each names the chunk, store or file concerned.
#[derive(Debug, Error)]
pub enum StoreError {
    /// A blob that is not what its name says (modified, truncated, or sealed under another key).
    #[error("chunk {id}: refused, {why}")]
    Tampered {
        /// The chunk.
        id: ChunkId,
        /// What is wrong with it.
        why: String,
    },
    /// No store had a valid copy of a chunk.
    #[error("chunk {id}: no valid copy ({tried})")]
    Missing {
        /// The chunk.
        id: ChunkId,
        /// What each store said.
        tried: String,
    },
    /// A keyring that cannot be used.
    #[error("keyring: {0}")]
    Keyring(String),
    /// An I/O error on a file of a store or an image.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A store's backend failed (an object store refused or could not be reached).
    #[error("{store}: {why}")]
    Backend {
        /// The store.
        store: String,
        /// What happened.
        why: String,
    },
    /// An image that does not match its keyring.
    #[error("image: {0}")]
    Image(String),
}

impl StoreError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> StoreError {
        let path = path.into();
        move |source| StoreError::Io { path, source }
    }
}
