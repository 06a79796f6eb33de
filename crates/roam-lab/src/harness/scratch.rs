//! A trial's scratch directory: fresh, its own (trials of several applications run at once,
//! `--jobs`), and removed with everything in it when dropped, so a failed trial leaves nothing
//! behind (a site's tree, a 152 MB video, a server's run directory).

use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result};

/// A fresh, empty directory under the system's temporary directory, named
/// `roam-lab-WHAT-PID-N`; removed, with its contents, when dropped.
pub struct Scratch(PathBuf);

impl Scratch {
    /// Create the directory for `what` (a short name that says whose it is).
    pub fn new(what: &str) -> Result<Scratch> {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "roam-lab-{what}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Scratch(dir))
    }
}

impl Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_is_fresh_and_gone_when_dropped() {
        let a = Scratch::new("scratch-test").unwrap();
        let b = Scratch::new("scratch-test").unwrap();
        assert_ne!(a.to_path_buf(), b.to_path_buf());
        std::fs::write(a.join("f"), b"x").unwrap();
        let kept = a.to_path_buf();
        drop(a);
        assert!(!kept.exists());
        assert!(b.is_dir());
    }
}
