//! A tier on the network: [`serve`] answers a [`TierService`]'s requests on a roam-net
//! listener, one thread per link, until its [`ServeHandle`] is stopped or dropped. Every link
//! must present the access secret first; at most [`MAX_LINKS`] are served at once, and one idle
//! for [`LINK_IDLE`] is closed.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use roam_net::runtime::blocking::{Listener, MultiSocket};
use roam_net::runtime::Tls;

use super::net::{link_options, recv_message, LINK_IDLE, MAX_LINKS};
use super::service::TierService;
use super::wire::{decode, encode, Reply, Request};
use crate::error::StoreError;

/// A running tier server; stops (and stops accepting) when dropped or [`ServeHandle::stop`]ped.
pub struct ServeHandle {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    links: Arc<Links>,
}

/// A link being served: its multi-socket and its thread.
type Link = (MultiSocket, JoinHandle<()>);

/// The links being served: each one's multi-socket (to end it) and thread (to wait for it).
#[derive(Default)]
struct Links {
    live: Mutex<HashMap<u64, Link>>,
    next: AtomicUsize,
}

impl ServeHandle {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stop accepting, end the links being served (a request being answered is finished
    /// first: its thread is waited for) and wait for every thread: afterwards nothing of the
    /// server holds its [`TierService`] (or the tier directory's lock).
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // No link is added once the accept loop has ended.
        let live: Vec<_> = self.links.live.lock().unwrap().drain().collect();
        for (_, (ms, _)) in &live {
            ms.abort("the tier is stopping");
        }
        for (_, (_, t)) in live {
            let _ = t.join();
        }
    }
}

impl Drop for ServeHandle {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Serve `service` on `addr` (TLS when `tls` is set): each link must authenticate first, then
/// gets one answer per request; at most [`MAX_LINKS`] at once, each closed after
/// [`LINK_IDLE`] without a request.
pub fn serve(
    service: Arc<TierService>,
    addr: SocketAddr,
    tls: Option<Tls>,
) -> Result<ServeHandle, StoreError> {
    serve_idle(service, addr, tls, LINK_IDLE)
}

/// As [`serve`], closing links idle for `idle`.
pub fn serve_idle(
    service: Arc<TierService>,
    addr: SocketAddr,
    tls: Option<Tls>,
    idle: Duration,
) -> Result<ServeHandle, StoreError> {
    let listener = Listener::bind(addr, link_options(tls)).map_err(|error| StoreError::Listen {
        addr,
        error: Box::new(error),
    })?;
    let addr = listener.local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let links = Arc::new(Links::default());
    let (st, all) = (stop.clone(), links.clone());
    let thread = std::thread::spawn(move || accept_loop(&listener, &service, &st, &all, idle));
    Ok(ServeHandle {
        addr,
        stop,
        thread: Some(thread),
        links,
    })
}

/// Accept links until `stop`, each served on a thread of its own (one over [`MAX_LINKS`] is
/// closed at once).
fn accept_loop(
    listener: &Listener,
    service: &Arc<TierService>,
    stop: &Arc<AtomicBool>,
    all: &Links,
    idle: Duration,
) {
    while !stop.load(Ordering::SeqCst) {
        let ms = match listener.accept_timeout(Duration::from_millis(200)) {
            Ok(Some(ms)) => ms,
            Ok(None) => continue,
            Err(_) => continue,
        };
        let mut live = all.live.lock().unwrap();
        // Links that ended let their entries go.
        live.retain(|_, (_, t)| !t.is_finished());
        if live.len() >= MAX_LINKS {
            drop(live);
            ms.abort("too many links");
            continue;
        }
        let id = all.next.fetch_add(1, Ordering::SeqCst) as u64;
        let (service, stop, link) = (service.clone(), stop.clone(), ms.clone());
        let t = std::thread::spawn(move || {
            serve_link(&service, &link, &stop, idle);
            link.close(Duration::from_secs(5));
        });
        live.insert(id, (ms, t));
    }
}

fn now() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// Answer one link's requests in order until it ends, idles or fails to authenticate.
fn serve_link(service: &Arc<TierService>, ms: &MultiSocket, stop: &AtomicBool, idle: Duration) {
    let mut authenticated = false;
    while !stop.load(Ordering::SeqCst) {
        let (msg, label) = match recv_message(ms, idle, "client") {
            Ok(Some(m)) => m,
            Ok(None) | Err(_) => return,
        };
        let (reply, payload) = match decode::<Request>(&msg) {
            Err(e) => (Reply::Error(format!("malformed request: {e}")), Vec::new()),
            Ok((Request::Auth { secret }, _)) => {
                if service.secret_ok(&secret) {
                    authenticated = true;
                    (Reply::Ok, Vec::new())
                } else {
                    let _ = ms.send(
                        label,
                        encode(&Reply::Error("wrong access secret".into()), b""),
                        None,
                    );
                    return;
                }
            }
            Ok(_) if !authenticated => {
                let _ = ms.send(
                    label,
                    encode(&Reply::Error("authenticate first".into()), b""),
                    None,
                );
                return;
            }
            Ok((req, payload)) => service.handle(req, payload, now()),
        };
        if ms.send(label, encode(&reply, &payload), None).is_err() {
            return;
        }
    }
}
