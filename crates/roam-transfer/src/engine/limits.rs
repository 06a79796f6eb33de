//! What a download may write ([`Limits`]): how large a file a server may announce, how many
//! bytes one transfer may bring in all, how much of the disk it leaves free, and whether a file
//! already in the output directory is replaced. A server's word on a file's size commits disk
//! space: it is checked against these before the file's partial file is created or a byte of it
//! asked for, and no body brings more than the range asked (the engine checks that).
//!
//! | limit | default | `roam transfer get` |
//! |---|---|---|
//! | largest file ([`Limits::max_file_size`]) | [`MAX_FILE_SIZE`], 64 GiB | `--max-file-size` |
//! | bytes of one transfer ([`Limits::max_total`]) | [`MAX_TOTAL`], 1 TiB | `--max-total` |
//! | disk left free ([`Limits::min_free`]) | [`MIN_FREE`], 64 MiB | (fixed) |
//! | files in the output directory | kept, not fetched | `--overwrite` replaces them |

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::TransferError;

/// The largest file a server may announce unless told otherwise: 64 GiB, more than any file
/// the lab's datasets hold (videos of a few hundred MB) and than most phones' free storage.
pub const MAX_FILE_SIZE: u64 = 64 << 30;

/// The most bytes one transfer (every file of it, every engine sharing its connections) may
/// bring unless told otherwise: 1 TiB. The disk check bounds what a transfer writes anyway;
/// this bounds what it may be made to download (a metered link's budget is worth lowering it
/// to).
pub const MAX_TOTAL: u64 = 1 << 40;

/// Disk space a transfer leaves free: a file is not started when what it lacks, with what the
/// transfer's other files have yet to write, would leave less than this (64 MiB) free on its
/// file system (`statvfs`'s space available to unprivileged users).
pub const MIN_FREE: u64 = 64 << 20;

/// What a download may write: a file's size, the transfer's total, the disk left free, and
/// files already in the output directory (see [`crate::engine`], "Servers are not trusted").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The largest file, bytes: a server announcing more is refused for that file.
    pub max_file_size: u64,
    /// The most bytes the transfer brings in all: a file whose missing bytes would take it
    /// past this is refused (bytes on disk from an earlier run do not count).
    pub max_total: u64,
    /// Bytes of the disk left free ([`MIN_FREE`]).
    pub min_free: u64,
    /// Replace a (regular) file already in the output directory; by default it is kept and
    /// not fetched (its log's outcome is `kept`). A symbolic link there is never replaced.
    pub overwrite: bool,
}

impl Default for Limits {
    /// [`MAX_FILE_SIZE`], [`MAX_TOTAL`], [`MIN_FREE`], files in the output directory kept.
    fn default() -> Limits {
        Limits {
            max_file_size: MAX_FILE_SIZE,
            max_total: MAX_TOTAL,
            min_free: MIN_FREE,
            overwrite: false,
        }
    }
}

/// `bytes` for a person: `64 GiB`, `1.5 MiB`, `900 B`.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// A size as a person writes it: bytes, or with a binary suffix (`K`, `M`, `G`, `T`, `P`,
/// optionally followed by `iB` or `B`: `64G`, `512MiB`, `100k`); `none` (or `unlimited`) for
/// no limit.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("none") || t.eq_ignore_ascii_case("unlimited") {
        return Ok(u64::MAX);
    }
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (n, unit) = t.split_at(digits);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("`{s}`: expected a number of bytes, e.g. 64G or 500M"))?;
    let unit = unit.trim().to_ascii_lowercase();
    let unit = unit
        .strip_suffix("ib")
        .or_else(|| unit.strip_suffix('b'))
        .unwrap_or(&unit);
    let shift = match unit {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        "p" => 50,
        _ => return Err(format!("`{s}`: unknown unit (K, M, G, T, P)")),
    };
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("`{s}`: too large"))
}

/// Bytes available to unprivileged users on the file system holding `dir`.
fn free_space(dir: &Path) -> std::io::Result<u64> {
    let c = CString::new(dir.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: statvfs writes into the struct we own; the path is NUL-terminated.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((s.f_bavail as u64).saturating_mul(s.f_frsize as u64))
}

/// What one transfer's files have been granted: shared by the engines that share connections
/// ([`super::Engine::sharing`]), so that `max_total` and the disk check see every file.
#[derive(Debug, Default)]
pub(super) struct Budget {
    /// Grants are decided one at a time (a file's disk check sees the others' grants).
    deciding: Mutex<()>,
    /// Bytes granted and not given back (`max_total`).
    granted: AtomicU64,
    /// Bytes granted and not yet written (what the disk must still hold).
    pending: AtomicU64,
}

/// Bytes one file may write; what it has not written when dropped goes back to the budget.
#[derive(Debug)]
pub(super) struct Grant {
    budget: Arc<Budget>,
    left: AtomicU64,
}

impl Budget {
    /// A grant of `lacking` bytes for `dest` (`url`), a file of `size` bytes, or why not: the
    /// file is larger than `max_file_size`, the transfer would pass `max_total`, or its disk
    /// would keep less than `min_free` once this file and the others granted are written.
    pub(super) fn admit(
        self: &Arc<Self>,
        limits: &Limits,
        url: &str,
        dest: &Path,
        size: u64,
        lacking: u64,
    ) -> Result<Grant, TransferError> {
        let refuse = |why: String| TransferError::Network {
            url: url.into(),
            why,
        };
        if size > limits.max_file_size {
            return Err(refuse(format!(
                "the server announces {size} bytes ({}), more than the largest file allowed \
                 ({}, --max-file-size)",
                human(size),
                human(limits.max_file_size)
            )));
        }
        let _one_at_a_time = self.deciding.lock().unwrap_or_else(|e| e.into_inner());
        let granted = self.granted.load(Ordering::Relaxed);
        if granted.saturating_add(lacking) > limits.max_total {
            return Err(refuse(format!(
                "its {lacking} bytes would take the transfer past its total of {} bytes ({}, \
                 --max-total; {granted} granted to other files)",
                limits.max_total,
                human(limits.max_total)
            )));
        }
        if lacking > 0 {
            let dir = dest.parent().filter(|d| !d.as_os_str().is_empty());
            let dir = dir.unwrap_or(Path::new("."));
            let free = free_space(dir).map_err(TransferError::io(dir))?;
            let pending = self.pending.load(Ordering::Relaxed);
            let needed = lacking
                .saturating_add(pending)
                .saturating_add(limits.min_free);
            if needed > free {
                return Err(TransferError::Io {
                    path: dest.to_path_buf(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::StorageFull,
                        format!(
                            "{lacking} bytes ({}) to write, {} free on its disk ({} still to \
                             be written by other files of this transfer, {} kept free): not \
                             started",
                            human(lacking),
                            human(free),
                            human(pending),
                            human(limits.min_free)
                        ),
                    ),
                });
            }
        }
        self.granted.fetch_add(lacking, Ordering::Relaxed);
        self.pending.fetch_add(lacking, Ordering::Relaxed);
        Ok(Grant {
            budget: self.clone(),
            left: AtomicU64::new(lacking),
        })
    }
}

impl Grant {
    /// `n` of the granted bytes are written.
    pub(super) fn wrote(&self, n: u64) {
        let took = self
            .left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| {
                Some(l.saturating_sub(n))
            })
            .map_or(0, |l| l.min(n));
        self.budget.pending.fetch_sub(took, Ordering::Relaxed);
    }
}

impl Drop for Grant {
    /// What was not written is given back: to the total, and to the disk.
    fn drop(&mut self) {
        let left = *self.left.get_mut();
        self.budget.pending.fetch_sub(left, Ordering::Relaxed);
        self.budget.granted.fetch_sub(left, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_read_and_shown_in_binary_units() {
        assert_eq!(parse_size("64G"), Ok(64 << 30));
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("100k"), Ok(100 << 10));
        assert_eq!(parse_size("1 TB"), Ok(1 << 40));
        assert_eq!(parse_size("12345"), Ok(12345));
        assert_eq!(parse_size("none"), Ok(u64::MAX));
        assert!(parse_size("12X").unwrap_err().contains("unit"));
        assert!(parse_size("G").is_err());
        assert!(parse_size("99999999P").unwrap_err().contains("too large"));
        assert_eq!(human(MAX_FILE_SIZE), "64 GiB");
        assert_eq!(human(MAX_TOTAL), "1 TiB");
        assert_eq!(human(1536 << 10), "1.5 MiB");
        assert_eq!(human(900), "900 B");
    }

    /// A grant's unwritten bytes go back when it is dropped; written ones stay counted in the
    /// total, not in what the disk must still hold.
    #[test]
    fn grants_are_counted_and_given_back() {
        let b = Arc::new(Budget::default());
        let l = Limits {
            max_file_size: 1000,
            max_total: 1000,
            min_free: 0,
            ..Limits::default()
        };
        let dest = std::env::temp_dir().join("f");
        let g = b.admit(&l, "u", &dest, 600, 600).unwrap();
        assert!(b.admit(&l, "u", &dest, 600, 600).is_err(), "past the total");
        g.wrote(400);
        assert_eq!(b.pending.load(Ordering::Relaxed), 200);
        drop(g);
        assert_eq!(b.granted.load(Ordering::Relaxed), 400);
        assert_eq!(b.pending.load(Ordering::Relaxed), 0);
        let e = b.admit(&l, "u", &dest, 1001, 0).unwrap_err().to_string();
        assert!(e.contains("largest file"), "{e}");
    }
}
