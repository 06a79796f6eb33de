//! One stack's sessions as the measuring sees them: what each stack provides ([`Transport`]:
//! opening a session, sending on it), and what all of them share ([`Sessions`]: the client
//! ends held, the server's counters, the sender tasks of an active run).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use bytes::Bytes;
use tokio::runtime::Handle;
use tokio::task::JoinHandle;

/// Bytes per send of an active session.
const CHUNK: usize = 1 << 20;

/// Opens one session (blocking; called from several threads at once).
pub(super) type Connector<C> = Arc<dyn Fn() -> Result<C, String> + Send + Sync>;

/// A sender task of an active run: the client end it took, for a stack whose sending needs
/// it whole (`None` when it only borrowed a handle), or why it stopped.
pub(super) type Sender<C> = JoinHandle<Result<Option<C>, String>>;

/// What is specific to one stack; its server side, set up by its constructor, reports to the
/// [`Counters`] it is given.
pub(super) trait Transport {
    /// A client end.
    type Client: Send + 'static;
    /// The runtime the sender tasks run on.
    fn runtime(&self) -> Handle;
    /// Open sessions to this stack's server.
    fn connector(&self) -> Connector<Self::Client>;
    /// Start a task on each of the first `k` of `clients` that sends `chunk` over and over
    /// until `stop`; a task that needs the client end whole takes it out of `clients`.
    fn start(
        &self,
        clients: &mut Vec<Self::Client>,
        k: usize,
        chunk: &Bytes,
        stop: &Arc<AtomicBool>,
    ) -> Vec<Sender<Self::Client>>;
}

/// What a stack's server application counts: sessions accepted, bytes received, and why it
/// could not accept. One allocation, shared by the server's tasks.
#[derive(Clone, Default)]
pub(super) struct Counters(Arc<CountersInner>);

#[derive(Default)]
struct CountersInner {
    accepted: AtomicUsize,
    received: AtomicU64,
    error: Mutex<Option<String>>,
}

impl Counters {
    /// The server application accepted a session.
    pub(super) fn accept(&self) {
        self.0.accepted.fetch_add(1, Ordering::Relaxed);
    }

    /// A receiver got `n` bytes.
    pub(super) fn receive(&self, n: u64) {
        self.0.received.fetch_add(n, Ordering::Relaxed);
    }

    /// The server could not accept, because of `e`.
    pub(super) fn fail(&self, e: String) {
        *self.0.error.lock().unwrap() = Some(e);
    }
}

/// One stack's sessions: the client ends held here, the server ends held by their receiving
/// tasks.
pub(super) struct Sessions<T: Transport> {
    transport: T,
    counters: Counters,
    clients: Vec<T::Client>,
    senders: Vec<Sender<T::Client>>,
}

impl<T: Transport> Sessions<T> {
    /// Set up a stack (`new`, given the counters its server reports to), with no session yet.
    pub(super) fn new(new: impl FnOnce(&Counters) -> Result<T>) -> Result<Sessions<T>> {
        let counters = Counters::default();
        Ok(Sessions {
            transport: new(&counters)?,
            counters,
            clients: Vec::new(),
            senders: Vec::new(),
        })
    }

    /// Open one session (blocking; called from several threads at once).
    pub(super) fn connector(&self) -> Connector<T::Client> {
        self.transport.connector()
    }

    /// Keep opened client ends.
    pub(super) fn add(&mut self, c: Vec<T::Client>) {
        self.clients.extend(c);
    }

    /// Client ends held (between active runs).
    pub(super) fn len(&self) -> usize {
        self.clients.len()
    }

    /// Sessions the server application has accepted.
    pub(super) fn accepted(&self) -> usize {
        self.counters.0.accepted.load(Ordering::Relaxed)
    }

    /// Why the server could not accept, if it could not.
    pub(super) fn server_error(&self) -> Option<String> {
        self.counters.0.error.lock().unwrap().clone()
    }

    /// Bytes the receivers got so far.
    pub(super) fn received(&self) -> u64 {
        self.counters.0.received.load(Ordering::Relaxed)
    }

    /// Start sending bulk data on the first `k` sessions until `stop`.
    pub(super) fn start(&mut self, k: usize, stop: &Arc<AtomicBool>) {
        let chunk = Bytes::from(vec![0x5au8; CHUNK]);
        let senders = self.transport.start(&mut self.clients, k, &chunk, stop);
        self.senders.extend(senders);
    }

    /// Wait (up to `timeout` in all) for the senders to stop, and take back the client ends
    /// they took: the first error, if any (the client ends are then dropped).
    pub(super) fn finish(&mut self, timeout: Duration) -> Result<(), String> {
        let senders = std::mem::take(&mut self.senders);
        let n = senders.len();
        let back = self.transport.runtime().block_on(async move {
            let until = tokio::time::Instant::now() + timeout;
            let mut out = Vec::new();
            let mut first_error = None;
            for mut h in senders {
                match tokio::time::timeout_at(until, &mut h).await {
                    Ok(Ok(Ok(c))) => out.extend(c),
                    Ok(Ok(Err(e))) => {
                        first_error.get_or_insert(e);
                    }
                    Ok(Err(e)) => {
                        first_error.get_or_insert(format!("a sender panicked: {e}"));
                    }
                    Err(_) => {
                        h.abort();
                        first_error.get_or_insert(format!(
                            "senders still sending {} s after being told to stop (of {n}), aborted",
                            timeout.as_secs()
                        ));
                    }
                }
            }
            first_error.map_or(Ok(out), Err)
        })?;
        self.clients.extend(back);
        Ok(())
    }
}

/// A tokio runtime of two workers, like roam-net's.
pub(super) fn two_workers() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}
