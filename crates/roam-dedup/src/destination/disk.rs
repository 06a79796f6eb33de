//! The phone's cache on disk, so it survives restarts: a [redb](https://docs.rs/redb)
//! database beside the in-memory [`Store`], written incrementally (what changed since the last
//! save) in one transaction.
//!
//! Why redb: pure Rust (no C library to build on a phone's toolchain), ACID transactions with
//! copy-on-write pages (a save interrupted by a crash leaves the previous one whole), a stable
//! file format, actively maintained. The store's bound in bytes bounds the file too: it holds
//! what memory holds, and it is compacted when it has grown past twice that.
//!
//! **Corruption** is detected, not trusted: a file redb cannot open, a record that does not
//! decode, or a chunk whose bytes no longer match its name is reported and the cache rebuilt
//! empty ([`open`]).

use std::path::{Path, PathBuf};

use redb::{Database, ReadableTable, TableDefinition};

use super::store::{FlowletId, Store};
use crate::name::Name;

const CHUNKS: TableDefinition<u64, &[u8]> = TableDefinition::new("chunks");
const FLOWLETS: TableDefinition<u64, &[u8]> = TableDefinition::new("flowlets");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// The file format; another is refused as corrupt (and rebuilt).
const FORMAT: u64 = 1;

/// A cache file that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    /// redb failed (the file is damaged, locked by another process, unreadable).
    #[error("{path}: {err}")]
    Db { path: PathBuf, err: String },
    /// A record does not decode, or a chunk does not match its name.
    #[error("{path}: corrupt: {what}")]
    Corrupt { path: PathBuf, what: String },
}

/// The cache's file.
pub struct Disk {
    db: Database,
    path: PathBuf,
    limit: u64,
}

impl std::fmt::Debug for Disk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Disk({})", self.path.display())
    }
}

fn db_err(path: &Path) -> impl Fn(redb::Error) -> DiskError + '_ {
    move |e| DiskError::Db {
        path: path.to_path_buf(),
        err: e.to_string(),
    }
}

fn encode_flowlet(names: &[Name], next: Option<FlowletId>, used: u64) -> Vec<u8> {
    let mut b = Vec::with_capacity(16 + 8 * names.len());
    b.extend_from_slice(&used.to_le_bytes());
    b.extend_from_slice(&next.unwrap_or(0).to_le_bytes());
    for n in names {
        b.extend_from_slice(&n.0.to_le_bytes());
    }
    b
}

fn decode_flowlet(b: &[u8]) -> Option<(Vec<Name>, Option<FlowletId>, u64)> {
    if b.len() < 16 || (b.len() - 16) % 8 != 0 {
        return None;
    }
    let word = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
    let used = word(0);
    let next = Some(word(8)).filter(|&n| n != 0);
    let names = (16..b.len()).step_by(8).map(|i| Name(word(i))).collect();
    Some((names, next, used))
}

/// Open (or create) the cache at `path` bounded to `limit` bytes: the file and the store it
/// holds. A file that cannot be trusted is an error; [`open_or_rebuild`] replaces it.
pub fn open(path: &Path, limit: u64, name_bits: u32) -> Result<(Disk, Store), DiskError> {
    let db = Database::create(path).map_err(|e| db_err(path)(e.into()))?;
    let corrupt = |what: String| DiskError::Corrupt {
        path: path.to_path_buf(),
        what,
    };
    let rtx = db.begin_read().map_err(|e| db_err(path)(e.into()))?;
    // The file's flowlets and chunks, to drop those the store left out over its limit.
    let (mut file_flowlets, mut file_chunks) = (Vec::new(), Vec::new());
    let store = match rtx.open_table(META) {
        Err(redb::TableError::TableDoesNotExist(_)) => Store::new(limit),
        Err(e) => return Err(db_err(path)(e.into())),
        Ok(meta) => {
            let format = meta
                .get("format")
                .map_err(|e| db_err(path)(e.into()))?
                .map(|v| v.value());
            if format != Some(FORMAT) {
                return Err(corrupt(format!("format {format:?}, not {FORMAT}")));
            }
            let flowlets_t = rtx
                .open_table(FLOWLETS)
                .map_err(|e| db_err(path)(e.into()))?;
            let chunks_t = rtx.open_table(CHUNKS).map_err(|e| db_err(path)(e.into()))?;
            let mut flowlets = Vec::new();
            for e in flowlets_t.iter().map_err(|e| db_err(path)(e.into()))? {
                let (k, v) = e.map_err(|e| db_err(path)(e.into()))?;
                let (names, next, used) = decode_flowlet(v.value())
                    .ok_or_else(|| corrupt(format!("flowlet {} does not decode", k.value())))?;
                file_flowlets.push(k.value());
                flowlets.push((k.value(), names, next, used));
            }
            for e in chunks_t.iter().map_err(|e| db_err(path)(e.into()))? {
                file_chunks.push(e.map_err(|e| db_err(path)(e.into()))?.0.value());
            }
            let mut bad = None;
            let store = Store::rebuilt(limit, flowlets, |n| {
                let v = chunks_t.get(n.0).ok().flatten()?;
                let bytes = v.value();
                if Name::of_bits(bytes, name_bits) != n {
                    bad.get_or_insert(n);
                    return None;
                }
                Some(bytes.into())
            });
            if let Some(n) = bad {
                return Err(corrupt(format!(
                    "chunk {:016x} does not match its name",
                    n.0
                )));
            }
            store
        }
    };
    drop(rtx);
    let mut disk = Disk {
        db,
        path: path.to_path_buf(),
        limit,
    };
    let mut store = store;
    disk.prune(&mut store, &file_flowlets, &file_chunks)?;
    Ok((disk, store))
}

/// [`open`], and if the file cannot be trusted, delete it and start empty: the store, the file
/// (none if even a new one cannot be made), and why it was rebuilt.
pub fn open_or_rebuild(
    path: &Path,
    limit: u64,
    name_bits: u32,
) -> (Store, Option<Disk>, Option<DiskError>) {
    match open(path, limit, name_bits) {
        Ok((d, s)) => (s, Some(d), None),
        Err(e) => {
            // A file locked by another process is not corrupt: leave it, run in memory.
            if matches!(&e, DiskError::Db { err, .. } if err.contains("already open")) {
                return (Store::new(limit), None, Some(e));
            }
            let _ = std::fs::remove_file(path);
            match open(path, limit, name_bits) {
                Ok((d, s)) => (s, Some(d), Some(e)),
                Err(_) => (Store::new(limit), None, Some(e)),
            }
        }
    }
}

impl Disk {
    /// Write what changed in `store` since the last save, in one transaction.
    pub fn save(&mut self, store: &mut Store) -> Result<(), DiskError> {
        let path = self.path.clone();
        let err = db_err(&path);
        let tx = self.db.begin_write().map_err(|e| err(e.into()))?;
        {
            let ch = std::mem::take(&mut store.changes);
            let mut chunks = tx.open_table(CHUNKS).map_err(|e| err(e.into()))?;
            for n in &ch.chunks_removed {
                chunks.remove(n.0).map_err(|e| err(e.into()))?;
            }
            for n in &ch.chunks_added {
                if let Some(b) = store.get(*n) {
                    chunks.insert(n.0, b).map_err(|e| err(e.into()))?;
                }
            }
            let mut flowlets = tx.open_table(FLOWLETS).map_err(|e| err(e.into()))?;
            for id in &ch.flowlets_removed {
                flowlets.remove(*id).map_err(|e| err(e.into()))?;
            }
            for id in &ch.flowlets {
                if let Some((names, next, used)) = store.flowlet_entry(*id) {
                    flowlets
                        .insert(*id, &encode_flowlet(names, next, used)[..])
                        .map_err(|e| err(e.into()))?;
                }
            }
            let mut meta = tx.open_table(META).map_err(|e| err(e.into()))?;
            meta.insert("format", FORMAT).map_err(|e| err(e.into()))?;
        }
        tx.commit().map_err(|e| err(e.into()))?;
        // Bounded on disk: compact a file grown past twice what it holds.
        let len = std::fs::metadata(&self.path).map(|m| m.len()).unwrap_or(0);
        if len > 2 * self.limit.max(store.bytes()) + (16 << 20) {
            self.db.compact().map_err(|e| err(e.into()))?;
        }
        Ok(())
    }

    /// After loading: the file holds what it did and the store all of it or less (the least
    /// recently used flowlets past the limit left out): remove from the file what the store
    /// left out, so it holds exactly the store; then save from there on by changes.
    fn prune(
        &mut self,
        store: &mut Store,
        file_flowlets: &[FlowletId],
        file_chunks: &[u64],
    ) -> Result<(), DiskError> {
        store.changes = Default::default();
        store.changes.flowlets_removed = file_flowlets
            .iter()
            .copied()
            .filter(|id| store.flowlet(*id).is_none())
            .collect();
        store.changes.chunks_removed = file_chunks
            .iter()
            .map(|&n| Name(n))
            .filter(|n| store.get(*n).is_none())
            .collect();
        self.save(store)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_survives_a_restart_and_a_corrupt_file_is_rebuilt() {
        let dir = std::env::temp_dir().join(format!("roam-dedup-disk-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("cache.redb");
        let chunk = |i: u8| vec![i; 100];
        {
            let (mut disk, mut s) = open(&path, 10_000, 64).unwrap();
            let a = s.new_flowlet(None);
            s.append(a, Name::of(&chunk(1)), chunk(1).into());
            s.append(a, Name::of(&chunk(2)), chunk(2).into());
            disk.save(&mut s).unwrap();
            let b = s.new_flowlet(Some(a));
            s.append(b, Name::of(&chunk(3)), chunk(3).into());
            disk.save(&mut s).unwrap();
        }
        let (_disk, s) = open(&path, 10_000, 64).unwrap();
        assert_eq!(s.bytes(), 300);
        assert_eq!(s.get(Name::of(&chunk(2))), Some(&chunk(2)[..]));
        let ids = s.flowlets_with(&[Name::of(&chunk(1))], 0);
        assert_eq!(ids.len(), 1);
        assert!(
            s.flowlet(ids[0]).unwrap().next.is_some(),
            "the link survives"
        );
        drop(_disk);
        // Opened with room for one flowlet only: the least recent is left out, and the file
        // then holds no more than the store (reopened with room again, it is still gone).
        let (small, s) = open(&path, 250, 64).unwrap();
        assert_eq!(s.bytes(), 100);
        drop(small);
        let (again, s) = open(&path, 10_000, 64).unwrap();
        assert_eq!(s.bytes(), 100);
        drop(again);
        // Garbage where the file was: refused, then rebuilt empty.
        std::fs::write(&path, vec![0x5a; 5000]).unwrap();
        assert!(open(&path, 10_000, 64).is_err());
        let (s, disk, why) = open_or_rebuild(&path, 10_000, 64);
        assert!(why.is_some() && disk.is_some());
        assert_eq!(s.bytes(), 0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
