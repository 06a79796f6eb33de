//! Thunks (paper §3.3): the application's callbacks for deferred sends, the handles that
//! cancel them, and the per-multi-socket thread that runs them.

use super::*;

/// A callback run when a deferred send can proceed. Its captured values are its argument: they
/// belong to the thunk from the moment the send is deferred, and are dropped if it is cancelled.
pub struct Thunk(Box<dyn FnOnce() + Send + 'static>);

impl Thunk {
    /// Wrap a callback.
    pub fn new(f: impl FnOnce() + Send + 'static) -> Thunk {
        Thunk(Box::new(f))
    }
}

impl std::fmt::Debug for Thunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Thunk(..)")
    }
}

/// A pending thunk; [`ThunkHandle::cancel`] drops it without running it.
#[derive(Debug, Clone)]
pub struct ThunkHandle {
    pub(super) shared: Weak<Shared>,
    pub(super) id: u64,
}

impl ThunkHandle {
    /// Cancel the thunk (e.g. a newer periodic update made the deferred one obsolete). Returns
    /// whether it had not run yet.
    pub fn cancel(&self) -> bool {
        let Some(sh) = self.shared.upgrade() else {
            return false;
        };
        let f = sh.thunks.lock().unwrap().remove(&self.id);
        sh.session().cancel_thunk(self.id);
        f.is_some()
    }

    /// Whether the thunk is still waiting (neither run nor cancelled).
    pub fn is_pending(&self) -> bool {
        self.shared
            .upgrade()
            .is_some_and(|sh| sh.thunks.lock().unwrap().contains_key(&self.id))
    }

    /// The thunk's id (as the C ABI reports it).
    pub fn id(&self) -> u64 {
        self.id
    }
}

/// Runs a multi-socket's fired thunks, in the order they fired, on a thread of its own (started
/// with the first thunk to fire, ended when the multi-socket is dropped). A thunk is the
/// application's code: one that blocks holds up only its own multi-socket's later thunks, and
/// one that panics is caught (and logged) so the thunks after it still run. With one thread
/// for the whole process, a single blocking thunk stopped every multi-socket's thunks, and a
/// panicking one ended the thread and silently dropped every thunk after it.
pub(super) struct ThunkRunner {
    pub(super) tx: OnceLock<Option<std::sync::mpsc::Sender<Thunk>>>,
}

impl ThunkRunner {
    pub(super) fn new() -> ThunkRunner {
        ThunkRunner {
            tx: OnceLock::new(),
        }
    }

    pub(super) fn run(&self, t: Thunk, log: bool) {
        let tx = self.tx.get_or_init(|| {
            let (tx, rx) = std::sync::mpsc::channel::<Thunk>();
            std::thread::Builder::new()
                .name("roam-thunks".into())
                .spawn(move || {
                    for t in rx {
                        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(t.0));
                        if r.is_err() && log {
                            log_line("a thunk panicked; the next ones still run");
                        }
                    }
                })
                .ok()
                .map(|_| tx)
        });
        match tx {
            Some(tx) => {
                let _ = tx.send(t);
            }
            // No thread could be started: run it here rather than lose it.
            None => {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(t.0));
            }
        }
    }
}

#[cfg(test)]
mod thunk_tests {
    use super::*;
    use std::sync::mpsc::channel;

    /// One multi-socket's thunk that blocks and another's that panics: the second multi-socket's
    /// later thunks still run, and so do the first's once its blocked thunk returns. (With one
    /// thread for every multi-socket, the blocked thunk held up all of them.)
    #[test]
    fn a_blocking_or_panicking_thunk_stops_no_other_multi_socket() {
        let (a, b) = (ThunkRunner::new(), ThunkRunner::new());
        let (release_tx, release_rx) = channel::<()>();
        let (ran_tx, ran_rx) = channel::<&'static str>();
        a.run(
            Thunk::new(move || {
                let _ = release_rx.recv();
            }),
            false,
        );
        let t = ran_tx.clone();
        a.run(
            Thunk::new(move || t.send("a after the blocked one").unwrap()),
            false,
        );
        b.run(Thunk::new(|| panic!("an application bug")), false);
        let t = ran_tx.clone();
        b.run(
            Thunk::new(move || t.send("b after the panic").unwrap()),
            false,
        );
        assert_eq!(
            ran_rx.recv_timeout(Duration::from_secs(10)),
            Ok("b after the panic")
        );
        assert!(
            ran_rx.try_recv().is_err(),
            "a's second thunk ran before the first returned"
        );
        release_tx.send(()).unwrap();
        assert_eq!(
            ran_rx.recv_timeout(Duration::from_secs(10)),
            Ok("a after the blocked one")
        );
    }
}
