//! Durable small files, as the tiers and the client keep their state (control states, the
//! ownership record, leases): written whole or not at all ([`write_atomic`]: a temporary file,
//! synced and renamed, the directory synced), read back as JSON naming the file when it does
//! not parse ([`read_json`]), and the temporaries a killed writer left removed
//! ([`remove_temporaries`]). Nothing under a real name is ever partial.
//!
//! **Secrets** (a control state: the parcel key and the keyrings; the ownership record and
//! the phone's `owned/` and `lent/` files: nonces and leases, which are bearer credentials; the
//! access secret; a tier's TLS private key) are written by [`write_private`]: the temporary
//! file is created with mode 0600 from the start (`O_CREAT|O_EXCL`, never widened by the
//! umask) and a directory it creates is 0700. They are read by [`read_private`] and
//! [`read_private_json`], which refuse a file that its group or others may read or write, as
//! OpenSSH refuses such a private key ([`StoreError::Exposed`], naming the file and the
//! `chmod 600` that fixes it).

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::de::DeserializeOwned;

use crate::error::StoreError;

/// Write `bytes` to `path` whole or not at all (temporary file `.NAME.PID.N.tmp`, sync,
/// rename, sync the directory), with the mode the umask gives.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    write_whole(path, bytes, None)
}

/// As [`write_atomic`], for a secret: the file is created with mode 0600 (whatever the umask),
/// and directories made for it with mode 0700.
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    write_whole(path, bytes, Some(0o600))
}

/// Temporaries of this process are numbered, so that two writers in it never share one.
static NEXT_TMP: AtomicU64 = AtomicU64::new(0);

fn write_whole(path: &Path, bytes: &[u8], mode: Option<u32>) -> Result<(), StoreError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.{}.{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("file"),
        std::process::id(),
        NEXT_TMP.fetch_add(1, Ordering::Relaxed)
    ));
    let mut open = fs::OpenOptions::new();
    open.write(true).create_new(true);
    match mode {
        Some(m) => {
            make_private_dir(dir)?;
            open.mode(m);
        }
        None => fs::create_dir_all(dir).map_err(StoreError::io(dir))?,
    }
    let mut f = open.open(&tmp).map_err(StoreError::io(&tmp))?;
    let written = f
        .write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(StoreError::io(&tmp))
        .and_then(|()| fs::rename(&tmp, path).map_err(StoreError::io(path)));
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written?;
    // The rename itself is durable only once the directory is synced.
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(StoreError::io(dir))
}

/// Create `dir` (and its missing parents) with mode 0700; one that exists is left as it is.
pub fn make_private_dir(dir: &Path) -> Result<(), StoreError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(StoreError::io(dir))
}

/// An error unless the file `path` (which holds `what`, a secret) is closed to its group and
/// others: mode 0600 or tighter, as OpenSSH wants a private key. `Ok(false)`: no such file.
pub fn check_private(path: &Path, what: &'static str) -> Result<bool, StoreError> {
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(StoreError::io(path)(e)),
    };
    let mode = meta.permissions().mode() & 0o777;
    if meta.is_file() && mode & 0o077 != 0 {
        return Err(StoreError::Exposed {
            path: path.to_path_buf(),
            mode,
            what,
        });
    }
    Ok(true)
}

/// The bytes of the file `path`, a secret (`what`), refused when its group or others may read
/// or write it ([`check_private`]); `None`: no such file.
pub fn read_private(path: &Path, what: &'static str) -> Result<Option<Vec<u8>>, StoreError> {
    if !check_private(path, what)? {
        return Ok(None);
    }
    match fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::io(path)(e)),
    }
}

/// As [`read_json`], for a file that holds a secret ([`read_private`]).
pub fn read_private_json<T: DeserializeOwned>(
    path: &Path,
    what: &'static str,
) -> Result<Option<T>, StoreError> {
    match read_private(path, what)? {
        Some(b) => parse_json(path, what, &b).map(Some),
        None => Ok(None),
    }
}

fn parse_json<T: DeserializeOwned>(
    path: &Path,
    what: &'static str,
    bytes: &[u8],
) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|error| StoreError::Corrupt {
        path: path.to_path_buf(),
        what,
        error,
    })
}

/// The JSON value kept in the file `path` (`None`: no such file); `what` names what it should
/// hold ("a control state") when it does not parse.
pub fn read_json<T: DeserializeOwned>(
    path: &Path,
    what: &'static str,
) -> Result<Option<T>, StoreError> {
    match fs::read(path) {
        Ok(b) => parse_json(path, what, &b).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::io(path)(e)),
    }
}

/// Remove the file `path`; one that is not there is no error.
pub fn remove_if_present(path: &Path) -> Result<(), StoreError> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(StoreError::io(path)(e)),
        _ => Ok(()),
    }
}

/// Remove the temporary files (`.NAME.tmp`) in `dir` that a killed writer left; a missing
/// `dir` has none. Only safe while no other process writes there (a tier calls it holding its
/// directory's lock). Returns how many went.
pub fn remove_temporaries(dir: &Path) -> Result<usize, StoreError> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(StoreError::io(dir)(e)),
    };
    let mut n = 0;
    for e in entries {
        let e = e.map_err(StoreError::io(dir))?;
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') && name.ends_with(".tmp") {
            fs::remove_file(e.path()).map_err(StoreError::io(e.path()))?;
            n += 1;
        }
    }
    Ok(n)
}
