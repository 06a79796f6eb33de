//! A file being downloaded: its bytes go to `NAME.part` at their offsets, and every byte range
//! finished is appended to `NAME.part.ranges` (one `start end` line each, synced) once its bytes
//! are synced. A transfer interrupted anywhere resumes with the ranges not yet listed; the file
//! gets its name only once every byte is listed, so a file under its final name is complete.
//!
//! Only files of its own are written. `NAME.part` is created with `O_CREAT|O_EXCL` when there
//! is none, and every file (`NAME.part`, `NAME.part.ranges`) is opened with `O_NOFOLLOW`: a
//! symbolic link at either path is refused, never followed, and so is anything but a regular
//! file with no other hard link (a second link would be another file's bytes, truncated and
//! overwritten through it); what was refused is left as it was. The final name is given by one
//! atomic rename, which by default refuses a name already taken (`renameat2` with
//! `RENAME_NOREPLACE`): a file that appeared there meanwhile is kept, the download stays in
//! `NAME.part`. Asked to replace, the rename replaces a regular file only, never a link.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::error::TransferError;

/// A partial file opened, the ranges already finished, and what its `admit` granted
/// ([`Partial::open_checked`]).
pub type Opened<T> = (Partial, Vec<(u64, u64)>, T);

/// A download in progress.
pub struct Partial {
    /// The final path.
    pub path: PathBuf,
    part: PathBuf,
    ranges: PathBuf,
    file: File,
    /// Serialises appends to the ranges file: streams finish concurrently, and a line written
    /// in several pieces by two of them at once would interleave.
    listing: std::sync::Mutex<()>,
    /// The total size.
    pub size: u64,
}

/// `path` with `suffix` appended to its file name.
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// The error refusing `path`, saying why.
pub(crate) fn refused(path: &Path, why: &str) -> TransferError {
    TransferError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidInput, why.to_string()),
    }
}

/// Refuse `path` unless `m` (its `lstat`, or its open file's `fstat`) is a regular file with
/// no other hard link.
fn own(path: &Path, m: &std::fs::Metadata) -> Result<(), TransferError> {
    if m.file_type().is_symlink() {
        return Err(refused(path, "a symbolic link: refused, not followed"));
    }
    if !m.is_file() {
        return Err(refused(path, "not a regular file: refused"));
    }
    if m.nlink() > 1 {
        return Err(refused(
            path,
            &format!(
                "a hard link of another file ({} links): refused, not written",
                m.nlink()
            ),
        ));
    }
    Ok(())
}

/// Whether `path` exists (not followed if a link); refused unless it is a file of our own.
fn existing(path: &Path) -> Result<bool, TransferError> {
    match std::fs::symlink_metadata(path) {
        Ok(m) => own(path, &m).map(|_| true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(TransferError::io(path)(e)),
    }
}

/// `path` opened with `opts`, never through a symbolic link (`O_NOFOLLOW`; `O_NONBLOCK`, so
/// that a FIFO put there cannot hold the open), and refused unless it is a file of our own.
fn open_own(path: &Path, opts: &mut OpenOptions) -> Result<File, TransferError> {
    let file = opts
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => refused(path, "a symbolic link: refused, not followed"),
            _ => TransferError::io(path)(e),
        })?;
    own(path, &file.metadata().map_err(TransferError::io(path))?)?;
    Ok(file)
}

impl Partial {
    /// Open (or resume) the download of `size` bytes to `path`; the ranges already finished.
    pub fn open(path: &Path, size: u64) -> Result<(Partial, Vec<(u64, u64)>), TransferError> {
        Partial::open_checked(path, size, |_| Ok(())).map(|(p, done, ())| (p, done))
    }

    /// [`Partial::open`], with `admit` asked first, with the bytes still to be written: its
    /// refusal leaves nothing behind (a `NAME.part` this call created is removed), its grant
    /// is returned. A partial file of another size is started over (resized, its ranges
    /// forgotten) only once admitted.
    pub fn open_checked<T>(
        path: &Path,
        size: u64,
        admit: impl FnOnce(u64) -> Result<T, TransferError>,
    ) -> Result<Opened<T>, TransferError> {
        let part = with_suffix(path, ".part");
        let ranges = with_suffix(path, ".part.ranges");
        let resumed = existing(&part)?;
        let mut opts = OpenOptions::new();
        opts.read(true).write(true);
        if !resumed {
            opts.create_new(true); // O_CREAT|O_EXCL
        }
        let file = open_own(&part, &mut opts)?;
        let have = file.metadata().map_err(TransferError::io(&part))?.len();
        let same = resumed && have == size;
        let done = if same {
            read_ranges(&ranges, size)?
        } else {
            Vec::new()
        };
        let lacking = missing(&done, size).iter().map(|(a, b)| b - a).sum();
        let granted = match admit(lacking) {
            Ok(g) => g,
            Err(e) => {
                if !resumed {
                    let _ = std::fs::remove_file(&part);
                }
                return Err(e);
            }
        };
        if !same {
            // Another size (the file changed on the server, or a fresh start): start over.
            file.set_len(size).map_err(TransferError::io(&part))?;
            match std::fs::remove_file(&ranges) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(TransferError::io(&ranges)(e))
                }
                _ => {}
            }
        }
        Ok((
            Partial {
                path: path.to_path_buf(),
                part,
                ranges,
                file,
                listing: std::sync::Mutex::new(()),
                size,
            },
            done,
            granted,
        ))
    }

    /// Whether a download of `path` has begun (something is at `NAME.part`, not followed).
    pub fn started(path: &Path) -> bool {
        std::fs::symlink_metadata(with_suffix(path, ".part")).is_ok()
    }

    /// Write `data` at `offset`.
    pub fn write_at(&self, offset: u64, data: &[u8]) -> Result<(), TransferError> {
        self.file
            .write_all_at(data, offset)
            .map_err(TransferError::io(&self.part))
    }

    /// Bytes `start..end` are written: sync them, then list the range.
    pub fn finished(&self, start: u64, end: u64) -> Result<(), TransferError> {
        self.file
            .sync_data()
            .map_err(TransferError::io(&self.part))?;
        let _one_at_a_time = self.listing.lock().unwrap_or_else(|e| e.into_inner());
        existing(&self.ranges)?;
        let mut f = open_own(&self.ranges, OpenOptions::new().create(true).append(true))?;
        // One write of the whole line.
        f.write_all(format!("{start} {end}\n").as_bytes())
            .map_err(TransferError::io(&self.ranges))?;
        f.sync_data().map_err(TransferError::io(&self.ranges))
    }

    /// Every byte is listed: give the file its name, by one atomic rename. Unless `replace`,
    /// a name already taken is refused (the download stays in `NAME.part`); with it, a
    /// regular file there is replaced, and anything else refused.
    pub fn complete(self, replace: bool) -> Result<PathBuf, TransferError> {
        let done = read_ranges(&self.ranges, self.size)?;
        let covered = missing(&done, self.size).is_empty();
        if !covered && self.size > 0 {
            return Err(TransferError::Network {
                url: self.path.display().to_string(),
                why: "not every byte range finished".into(),
            });
        }
        // The entry renamed is the file written: not something put in its place meanwhile.
        let now = std::fs::symlink_metadata(&self.part).map_err(TransferError::io(&self.part))?;
        let ours = self
            .file
            .metadata()
            .map_err(TransferError::io(&self.part))?;
        if (now.dev(), now.ino()) != (ours.dev(), ours.ino()) {
            return Err(refused(
                &self.part,
                "replaced by another file while it downloaded: refused",
            ));
        }
        if replace {
            match std::fs::symlink_metadata(&self.path) {
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(refused(
                        &self.path,
                        "a symbolic link: refused, neither followed nor replaced",
                    ))
                }
                Ok(m) if !m.is_file() => {
                    return Err(refused(&self.path, "not a regular file: not replaced"))
                }
                _ => {}
            }
            std::fs::rename(&self.part, &self.path).map_err(TransferError::io(&self.path))?;
        } else {
            rename_new(&self.part, &self.path).map_err(|e| match e.raw_os_error() {
                Some(libc::EEXIST) => refused(
                    &self.path,
                    "appeared while it downloaded: kept, not overwritten (the download is in \
                     its .part file)",
                ),
                _ => TransferError::io(&self.path)(e),
            })?;
        }
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            // The rename itself made durable.
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        let _ = std::fs::remove_file(&self.ranges);
        Ok(self.path)
    }
}

/// Rename `from` to `to`, atomically, failing with `EEXIST` if `to` exists
/// (`renameat2(RENAME_NOREPLACE)`; where the file system lacks it, a hard link, which fails the
/// same way, then the old name removed).
fn rename_new(from: &Path, to: &Path) -> std::io::Result<()> {
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
    };
    let (f, t) = (c(from)?, c(to)?);
    // SAFETY: both are NUL-terminated paths that outlive the call.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EINVAL) | Some(libc::ENOSYS) => {
            std::fs::hard_link(from, to)?;
            std::fs::remove_file(from)
        }
        _ => Err(e),
    }
}

/// The finished ranges listed in `path` (none if it does not exist); a line that does not
/// parse or lies outside the file is ignored (it was cut by a crash, or is not ours).
fn read_ranges(path: &Path, size: u64) -> Result<Vec<(u64, u64)>, TransferError> {
    if !existing(path)? {
        return Ok(Vec::new());
    }
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut open_own(path, OpenOptions::new().read(true))?,
        &mut text,
    )
    .map_err(TransferError::io(path))?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (a, b) = (f.next()?.parse().ok()?, f.next()?.parse().ok()?);
            (a < b && b <= size).then_some((a, b))
        })
        .collect())
}

/// The ranges of `0..size` not covered by `done`, in order.
pub fn missing(done: &[(u64, u64)], size: u64) -> Vec<(u64, u64)> {
    let mut d = done.to_vec();
    d.sort_unstable();
    let mut out = Vec::new();
    let mut at = 0;
    for (a, b) in d {
        if a > at {
            out.push((at, a));
        }
        at = at.max(b);
    }
    if at < size {
        out.push((at, size));
    }
    out
}

/// `ranges` cut into at most `p` pieces of about equal size (for p streams).
pub fn split(ranges: &[(u64, u64)], p: u32) -> Vec<(u64, u64)> {
    let total: u64 = ranges.iter().map(|r| r.1 - r.0).sum();
    if total == 0 {
        return Vec::new();
    }
    let piece = total.div_ceil(p.max(1) as u64);
    let mut out = Vec::new();
    for &(a, b) in ranges {
        let mut s = a;
        while s < b {
            let e = (s + piece).min(b);
            out.push((s, e));
            s = e;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_ranges_are_the_gaps() {
        assert_eq!(missing(&[], 10), vec![(0, 10)]);
        assert_eq!(
            missing(&[(2, 4), (0, 1), (3, 6)], 10),
            vec![(1, 2), (6, 10)]
        );
        assert_eq!(missing(&[(0, 10)], 10), vec![]);
    }

    /// Ranges finished by many streams at once are each listed whole.
    #[test]
    fn concurrent_finishes_list_every_range() {
        let dir = std::env::temp_dir().join(format!("roam-partial-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let (p, _) = Partial::open(&path, 64_000).unwrap();
        let p = std::sync::Arc::new(p);
        let threads: Vec<_> = (0..64u64)
            .map(|i| {
                let p = p.clone();
                std::thread::spawn(move || p.finished(i * 1000, (i + 1) * 1000).unwrap())
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let p = std::sync::Arc::try_unwrap(p).ok().unwrap();
        assert_eq!(p.complete(false).unwrap(), path);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn split_makes_pieces_of_about_equal_size() {
        assert_eq!(split(&[(0, 10)], 3), vec![(0, 4), (4, 8), (8, 10)]);
        assert_eq!(split(&[(0, 3), (5, 8)], 2), vec![(0, 3), (5, 8)]);
        assert!(split(&[], 4).is_empty());
    }
}
