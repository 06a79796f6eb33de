//! Where blobs are kept: [`ChunkStore`], with a local directory as the embedded backend
//! ([`DirStore`]), and reading a chunk from the first of several stores that holds a valid copy
//! ([`fetch`]: the phone first, the server on a miss, the Horatio paper).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::chunk::{ChunkId, ChunkKey};
use crate::error::StoreError;
pub use crate::files::remove_temporaries;

/// A place that keeps sealed blobs by name. It need not be trusted: every blob read is checked
/// against its name before use.
pub trait ChunkStore: Send + Sync {
    /// A name for errors and reports ("phone", "server", a path).
    fn name(&self) -> String;
    /// Keep `blob` under `id` (already kept: nothing to do).
    fn put(&self, id: &ChunkId, blob: &[u8]) -> Result<(), StoreError>;
    /// The blob under `id`, if kept.
    fn get(&self, id: &ChunkId) -> Result<Option<Vec<u8>>, StoreError>;
    /// Whether a blob is kept under `id`.
    fn has(&self, id: &ChunkId) -> Result<bool, StoreError>;
}

/// Blobs as files under a directory: `ab/abcdef...` (two hex digits of fan-out). A blob is
/// written to a temporary file, synced and renamed into place, so a crash never leaves a
/// partial blob under a name (and one left by another writer would fail its hash check).
pub struct DirStore {
    root: PathBuf,
}

impl DirStore {
    /// A store under `root`, created if missing.
    pub fn open(root: impl Into<PathBuf>) -> Result<DirStore, StoreError> {
        let root = root.into();
        fs::create_dir_all(&root).map_err(StoreError::io(&root))?;
        Ok(DirStore { root })
    }

    /// The file of blob `id`.
    pub fn path(&self, id: &ChunkId) -> PathBuf {
        let hex = id.hex();
        self.root.join(&hex[..2]).join(hex)
    }

    /// The store's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Remove the temporary files a killed writer left in the fan-out directories (only safe
    /// while no other process writes here: a tier calls it holding its directory's lock).
    /// Returns how many went.
    pub fn remove_temporaries(&self) -> Result<usize, StoreError> {
        let mut n = 0;
        let entries = fs::read_dir(&self.root).map_err(StoreError::io(&self.root))?;
        for e in entries {
            let e = e.map_err(StoreError::io(&self.root))?;
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                n += remove_temporaries(&e.path())?;
            }
        }
        Ok(n)
    }
}

impl ChunkStore for DirStore {
    fn name(&self) -> String {
        self.root.display().to_string()
    }

    fn put(&self, id: &ChunkId, blob: &[u8]) -> Result<(), StoreError> {
        let path = self.path(id);
        if path.exists() {
            return Ok(());
        }
        let dir = path.parent().expect("a fan-out directory");
        fs::create_dir_all(dir).map_err(StoreError::io(dir))?;
        let tmp = dir.join(format!(".{}.{}.tmp", id.hex(), std::process::id()));
        let mut f = fs::File::create(&tmp).map_err(StoreError::io(&tmp))?;
        f.write_all(blob).map_err(StoreError::io(&tmp))?;
        f.sync_data().map_err(StoreError::io(&tmp))?;
        fs::rename(&tmp, &path).map_err(StoreError::io(&path))
    }

    fn get(&self, id: &ChunkId) -> Result<Option<Vec<u8>>, StoreError> {
        let path = self.path(id);
        match fs::read(&path) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StoreError::Io { path, error: e }),
        }
    }

    fn has(&self, id: &ChunkId) -> Result<bool, StoreError> {
        Ok(self.path(id).exists())
    }
}

/// Chunk `id` opened with `key`, from the first of `stores` that holds a valid copy: a copy
/// whose hash or tag is wrong is refused and the next store asked. The error says what each
/// store answered.
pub fn fetch(
    id: &ChunkId,
    key: &ChunkKey,
    stores: &[&dyn ChunkStore],
) -> Result<Vec<u8>, StoreError> {
    let mut tried = Vec::new();
    for s in stores {
        match s.get(id) {
            Ok(Some(blob)) => match crate::chunk::open(id, key, &blob) {
                Ok(plain) => return Ok(plain),
                Err(e) => tried.push(format!("{}: {e}", s.name())),
            },
            Ok(None) => tried.push(format!("{}: not there", s.name())),
            Err(e) => tried.push(format!("{}: {e}", s.name())),
        }
    }
    Err(StoreError::Missing {
        id: *id,
        tried: tried.join("; "),
    })
}
