//! Servers a trial runs on threads of the emulator's namespaces (a relay, a proxy): started
//! only once they have bound ([`start`]), stopped by a flag ([`Running::end`]); and a
//! served tree swapped under a running web server ([`point`]).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::trial::Trial;

/// A server running on a namespace's thread until [`Running::end`].
pub struct Running {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<std::io::Result<()>>,
}

impl Running {
    /// Set its stop flag and wait for its thread.
    pub fn end(self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.thread.join();
    }
}

/// Start `serve` (after `bind`, whose error comes back) on a thread of the server namespace
/// (`server`) or the client's; returns once `bind` succeeded (at most 30 s).
pub fn start<B: Send + 'static>(
    t: &Trial,
    server: bool,
    bind: impl FnOnce() -> Result<B> + Send + 'static,
    serve: impl FnOnce(B, &AtomicBool) + Send + 'static,
) -> Result<Running> {
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let flag = stop.clone();
    let body = move || match bind() {
        Ok(b) => {
            tx.send(Ok(())).ok();
            serve(b, &flag);
        }
        Err(e) => {
            tx.send(Err(e)).ok();
        }
    };
    let thread = if server {
        t.emu.spawn_in_server(body)
    } else {
        t.emu.spawn_in_client(body)
    };
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(Ok(())) => Ok(Running { stop, thread }),
        Ok(Err(e)) => Err(e),
        Err(_) => bail!("did not start within 30 s"),
    }
}

/// Lock `m`, whether or not a thread panicked holding it (counters stay readable).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Point `dir/current` at `tree` from now on: a new link renamed over the old, so a web
/// server rooted at `dir/current` serves one tree or the other, never a mix.
pub fn point(dir: &Path, tree: &Path) -> Result<()> {
    let tmp = dir.join("current.new");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(tree, &tmp).with_context(|| format!("linking {}", tmp.display()))?;
    std::fs::rename(&tmp, dir.join("current"))
        .with_context(|| format!("renaming {}", tmp.display()))?;
    Ok(())
}
