//! A file being downloaded: its bytes go to `NAME.part` at their offsets, and every byte range
//! finished is appended to `NAME.part.ranges` (one `start end` line each, synced) once its bytes
//! are synced. A transfer interrupted anywhere resumes with the ranges not yet listed; the file
//! gets its name only once every byte is listed, so a file under its final name is complete.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::TransferError;

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

impl Partial {
    /// Open (or resume) the download of `size` bytes to `path`; the ranges already finished.
    pub fn open(path: &Path, size: u64) -> Result<(Partial, Vec<(u64, u64)>), TransferError> {
        let part = with_suffix(path, ".part");
        let ranges = with_suffix(path, ".part.ranges");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&part)
            .map_err(TransferError::io(&part))?;
        let have = file.metadata().map_err(TransferError::io(&part))?.len();
        let done = if have == size {
            read_ranges(&ranges, size)?
        } else {
            // Another size (the file changed on the server, or a fresh start): start over.
            file.set_len(size).map_err(TransferError::io(&part))?;
            let _ = std::fs::remove_file(&ranges);
            Vec::new()
        };
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
        ))
    }

    /// Whether a download of `path` has begun (its `.part` file exists).
    pub fn started(path: &Path) -> bool {
        with_suffix(path, ".part").exists()
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
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.ranges)
            .map_err(TransferError::io(&self.ranges))?;
        // One write of the whole line.
        f.write_all(format!("{start} {end}\n").as_bytes())
            .map_err(TransferError::io(&self.ranges))?;
        f.sync_data().map_err(TransferError::io(&self.ranges))
    }

    /// Every byte is listed: give the file its name.
    pub fn complete(self) -> Result<PathBuf, TransferError> {
        let done = read_ranges(&self.ranges, self.size)?;
        let covered = missing(&done, self.size).is_empty();
        if !covered && self.size > 0 {
            return Err(TransferError::Network {
                url: self.path.display().to_string(),
                why: "not every byte range finished".into(),
            });
        }
        std::fs::rename(&self.part, &self.path).map_err(TransferError::io(&self.path))?;
        let _ = std::fs::remove_file(&self.ranges);
        Ok(self.path)
    }
}

/// The finished ranges listed in `path` (none if it does not exist); a line that does not
/// parse or lies outside the file is ignored (it was cut by a crash, or is not ours).
fn read_ranges(path: &Path, size: u64) -> Result<Vec<(u64, u64)>, TransferError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(TransferError::Io {
                path: path.to_path_buf(),
                source: e,
            })
        }
    };
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
        assert_eq!(p.complete().unwrap(), path);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn split_makes_pieces_of_about_equal_size() {
        assert_eq!(split(&[(0, 10)], 3), vec![(0, 4), (4, 8), (8, 10)]);
        assert_eq!(split(&[(0, 3), (5, 8)], 2), vec![(0, 3), (5, 8)]);
        assert!(split(&[], 4).is_empty());
    }
}
