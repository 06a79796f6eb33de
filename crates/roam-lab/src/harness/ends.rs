//! The two ends of a lab application in one trial, written once for every application (and
//! every later lab): the server side runs in the emulator's server namespace and serves one
//! connection; the client side runs in the client namespace and is joined by the caller.
//!
//! [`Trial::start_server`] does what every application's server needs: its own set-up (say,
//! starting Dovecot), a listener for the system under test ([`Server`]), the signal that it
//! is ready (or why it is not), one accepted connection that gives up once the trial is over
//! (the client may never connect), and the connection kept so [`ServerSide::finish`] can
//! count what recovery cost on both ends ([`recovery_metrics`]) and then stop both.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};

use crate::harness::channel::{recovery_metrics, Conn, Server};
use crate::harness::trial::{Metric, Trial};

/// How long a server side may take to start (Dovecot's start is the slowest, about a second).
const START_WAIT: Duration = Duration::from_secs(30);
/// How often a server side waiting for its client looks whether the trial is over.
const ACCEPT_POLL: Duration = Duration::from_millis(200);

/// A running server side ([`Trial::start_server`]).
pub struct ServerSide {
    name: &'static str,
    thread: JoinHandle<std::io::Result<Result<()>>>,
    /// The accepted connection, once there is one.
    conn: Arc<Mutex<Option<Arc<Conn>>>>,
    /// Set when the trial is over: a server still waiting for its client gives up.
    over: Arc<AtomicBool>,
}

impl Trial {
    /// Start an application's server side in the server namespace: `setup` first (its state
    /// goes to `serve`), then a listener on `port` for this trial's system; once a client
    /// connects, `serve` runs on the connection. Returns when the server side is listening,
    /// or with the reason it could not start (`name` says which application's).
    pub fn start_server<S: 'static>(
        &self,
        name: &'static str,
        port: u16,
        setup: impl FnOnce() -> Result<S> + Send + 'static,
        serve: impl FnOnce(S, Arc<Conn>) -> Result<()> + Send + 'static,
    ) -> Result<ServerSide> {
        let (ready_tx, ready_rx) = mpsc::channel::<std::result::Result<(), String>>();
        let conn: Arc<Mutex<Option<Arc<Conn>>>> = Arc::default();
        let over = Arc::new(AtomicBool::new(false));
        let (slot, ended) = (conn.clone(), over.clone());
        let system = self.system.clone();
        let thread = self.emu.spawn_in_server(move || -> Result<()> {
            let started = setup().and_then(|s| Ok((s, Server::bind(system, port)?)));
            let (state, listener) = match started {
                Ok(x) => x,
                Err(e) => {
                    ready_tx.send(Err(format!("{e:#}"))).ok();
                    return Err(e);
                }
            };
            ready_tx.send(Ok(())).ok();
            loop {
                if ended.load(Ordering::SeqCst) {
                    return Ok(());
                }
                if let Some(c) = listener.accept_timeout(ACCEPT_POLL)? {
                    let c = Arc::new(c);
                    *slot.lock().unwrap() = Some(c.clone());
                    // Over before the connection was kept: nobody else will stop it.
                    if ended.load(Ordering::SeqCst) {
                        c.abort();
                        return Ok(());
                    }
                    return serve(state, c);
                }
            }
        });
        let side = ServerSide {
            name,
            thread,
            conn,
            over,
        };
        match ready_rx.recv_timeout(START_WAIT) {
            Ok(Ok(())) => Ok(side),
            Ok(Err(why)) => {
                side.over.store(true, Ordering::SeqCst);
                let _ = side.thread.join();
                bail!("the {name} server side did not start: {why}")
            }
            Err(_) => {
                side.over.store(true, Ordering::SeqCst);
                bail!(
                    "the {name} server side did not start within {} s",
                    START_WAIT.as_secs()
                )
            }
        }
    }

    /// Run `client` in the client namespace and wait for it (`name` says which
    /// application's, should it panic).
    pub fn run_client<R: Send + 'static>(
        &self,
        name: &str,
        client: impl FnOnce() -> Result<R> + Send + 'static,
    ) -> Result<R> {
        self.emu
            .spawn_in_client(client)
            .join()
            .map_err(|_| anyhow!("the {name} client panicked"))?
            .map_err(|e| anyhow!("the {name} client could not enter its namespace: {e}"))?
    }
}

impl ServerSide {
    /// [`ServerSide::finish`] with the client's outcome `out` (what it measured, and its end of
    /// the connection): what it measured and the recovery metrics, or the client's error with
    /// the server side's beside it.
    pub fn finish_client<R>(self, out: Result<(R, Arc<Conn>)>) -> Result<(R, Vec<Metric>)> {
        let (recovery, served) = self.finish(out.as_ref().ok().map(|o| &*o.1));
        match out {
            Ok((r, _)) => Ok((r, recovery)),
            Err(e) => match served {
                Err(se) => bail!("{e:#}; server side: {se:#}"),
                Ok(()) => Err(e),
            },
        }
    }

    /// The trial is over: count what roam's recovery cost on both ends (`client_end`, if the
    /// client got as far as a connection, and the server's), stop both connections and wait
    /// for the server side. Its outcome comes back beside the metrics: an error there often
    /// explains a client's failure best.
    pub fn finish(self, client_end: Option<&Conn>) -> (Vec<Metric>, Result<()>) {
        self.over.store(true, Ordering::SeqCst);
        let server_end = self.conn.lock().unwrap().take();
        let recovery = recovery_metrics(client_end.into_iter().chain(server_end.as_deref()));
        if let Some(c) = client_end {
            c.abort();
        }
        if let Some(c) = server_end {
            c.abort();
        }
        let name = self.name;
        let served = match self.thread.join() {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => Err(anyhow!(
                "the {name} server side could not enter its namespace: {e}"
            )),
            Err(_) => Err(anyhow!("the {name} server side panicked")),
        };
        (recovery, served)
    }
}
