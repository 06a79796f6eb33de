//! Durable small files, as the tiers and the client keep their state (control states, the
//! ownership record, leases): written whole or not at all ([`write_atomic`]: a temporary file,
//! synced and renamed, the directory synced), read back as JSON naming the file when it does
//! not parse ([`read_json`]), and the temporaries a killed writer left removed
//! ([`remove_temporaries`]). Nothing under a real name is ever partial.

use std::fs;
use std::io::Write;
use std::path::Path;

use serde::de::DeserializeOwned;

use crate::error::StoreError;

/// Write `bytes` to `path` whole or not at all (temporary file `.NAME.PID.tmp`, sync, rename,
/// sync the directory).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("file"),
        std::process::id()
    ));
    fs::create_dir_all(dir).map_err(StoreError::io(dir))?;
    let mut f = fs::File::create(&tmp).map_err(StoreError::io(&tmp))?;
    f.write_all(bytes).map_err(StoreError::io(&tmp))?;
    f.sync_all().map_err(StoreError::io(&tmp))?;
    fs::rename(&tmp, path).map_err(StoreError::io(path))?;
    // The rename itself is durable only once the directory is synced.
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(StoreError::io(dir))
}

/// The JSON value kept in the file `path` (`None`: no such file); `what` names what it should
/// hold ("a control state") when it does not parse.
pub fn read_json<T: DeserializeOwned>(
    path: &Path,
    what: &'static str,
) -> Result<Option<T>, StoreError> {
    match fs::read(path) {
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|error| StoreError::Corrupt {
                path: path.to_path_buf(),
                what,
                error,
            }),
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
