//! A tier on the network: [`serve`] answers a [`TierService`]'s requests on a roam-net
//! listener, one thread per link, until its [`ServeHandle`] is stopped or dropped.
//!
//! A link goes through two pools ([`Limits`], the table in [`super::net`]): accepted, it waits
//! in the pool of links not yet authenticated ([`Limits::max_pending`], at most
//! [`Limits::max_pending_per_source`] from one source address; when either is full, the oldest
//! link of the source holding most of the pool is closed to make room, so silent peers cannot
//! keep a newcomer out, and a flood from one source only closes its own links) and must present the access secret within [`Limits::auth_deadline`] in at most
//! [`MAX_AUTH_MESSAGE`] bytes; a wrong secret, another request, too many bytes or the
//! deadline close it and give its slot back. Authenticated, it takes a slot among
//! [`Limits::max_links`] (if none is free it is told so and closed) and is answered a request
//! at a time: each must arrive whole within [`Limits::message_deadline`] of its first byte,
//! and a link with no request for [`Limits::idle`] is closed. A link's thread, its slot and
//! its multi-socket are let go as soon as it ends.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use roam_net::proto::Label;
use roam_net::runtime::blocking::{Listener, MultiSocket};
use roam_net::runtime::Tls;

use super::net::{link_options, recv_message, send_message, Deadlines, Limits, MAX_AUTH_MESSAGE};
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

/// How many links are in each pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkCounts {
    /// Accepted, not yet authenticated.
    pub pending: usize,
    /// Authenticated.
    pub authenticated: usize,
}

/// The links being served: each one's multi-socket (to end it) and thread (to wait for it),
/// those not yet authenticated (oldest first), and how many are authenticated.
#[derive(Default)]
struct Links {
    live: Mutex<HashMap<u64, Link>>,
    pending: Mutex<VecDeque<Pending>>,
    authenticated: Mutex<usize>,
    next: AtomicU64,
}

/// A link in the pool of those not yet authenticated: its id, its peer's source address (an
/// IPv6 /64 counting as one, as the relay and the HLA server count them) and its multi-socket.
struct Pending {
    id: u64,
    source: Option<IpAddr>,
    ms: MultiSocket,
}

/// The source a peer's links are counted under: its IPv4 address, or its IPv6 address's /64
/// (one host's addresses).
fn source_of(addr: Option<SocketAddr>) -> Option<IpAddr> {
    addr.map(|a| match a.ip() {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
        v4 => v4,
    })
}

impl Links {
    fn pending(&self) -> std::sync::MutexGuard<'_, VecDeque<Pending>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn authenticated(&self) -> std::sync::MutexGuard<'_, usize> {
        self.authenticated.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Link `id` leaves the pool of links not yet authenticated (if it is still there).
    fn unpend(&self, id: u64) {
        self.pending().retain(|p| p.id != id);
    }

    /// Put link `id` from `source` in the pool of links not yet authenticated, making room
    /// first: its source's oldest pending link goes if the source has
    /// [`Limits::max_pending_per_source`] there already, and while the pool is full the oldest
    /// link of the source holding most of it goes. A flood from one source thus only ever
    /// closes its own links, and a newcomer from elsewhere keeps its place.
    fn pend(&self, id: u64, source: Option<IpAddr>, ms: MultiSocket, limits: &Limits) {
        let mut pending = self.pending();
        let of = |pending: &VecDeque<Pending>, src: Option<IpAddr>| {
            pending.iter().filter(|p| p.source == src).count()
        };
        if of(&pending, source) >= limits.max_pending_per_source.max(1) {
            close_oldest(&mut pending, source, "from its source");
        }
        while pending.len() >= limits.max_pending.max(1) {
            let mut largest = pending[0].source;
            for p in pending.iter() {
                if of(&pending, p.source) > of(&pending, largest) {
                    largest = p.source;
                }
            }
            close_oldest(&mut pending, largest, "");
        }
        pending.push_back(Pending { id, source, ms });
    }
}

/// Close the oldest pending link from `source` (`whence` says which pool was full).
fn close_oldest(pending: &mut VecDeque<Pending>, source: Option<IpAddr>, whence: &str) {
    if let Some(k) = pending.iter().position(|p| p.source == source) {
        let oldest = pending.remove(k).expect("a position found");
        let space = if whence.is_empty() { "" } else { " " };
        oldest.ms.abort(&format!(
            "too many links waiting to authenticate{space}{whence}: the oldest is closed"
        ));
    }
}

impl ServeHandle {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// How many links it serves now, in each pool.
    pub fn links(&self) -> LinkCounts {
        LinkCounts {
            pending: self.links.pending().len(),
            authenticated: *self.links.authenticated(),
        }
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

/// Serve `service` on `addr` (TLS when `tls` is set) under the default [`Limits`]: each link
/// must authenticate first, then gets one answer per request.
pub fn serve(
    service: Arc<TierService>,
    addr: SocketAddr,
    tls: Option<Tls>,
) -> Result<ServeHandle, StoreError> {
    serve_with(service, addr, tls, Limits::default())
}

/// As [`serve`], closing links idle for `idle` (the other limits their defaults).
pub fn serve_idle(
    service: Arc<TierService>,
    addr: SocketAddr,
    tls: Option<Tls>,
    idle: Duration,
) -> Result<ServeHandle, StoreError> {
    let limits = Limits {
        idle,
        ..Limits::default()
    };
    serve_with(service, addr, tls, limits)
}

/// As [`serve`], under `limits`.
pub fn serve_with(
    service: Arc<TierService>,
    addr: SocketAddr,
    tls: Option<Tls>,
    limits: Limits,
) -> Result<ServeHandle, StoreError> {
    let mut options = link_options(tls);
    // roam-net keeps no more multi-sockets than the tier can take, with room for those it
    // has closed and not yet let go.
    options.max_sessions = 2 * (limits.max_links + limits.max_pending) + 8;
    let listener = Listener::bind(addr, options).map_err(|error| StoreError::Listen {
        addr,
        error: Box::new(error),
    })?;
    let addr = listener.local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let links = Arc::new(Links::default());
    let (st, all) = (stop.clone(), links.clone());
    let thread = std::thread::spawn(move || accept_loop(&listener, &service, &st, &all, &limits));
    Ok(ServeHandle {
        addr,
        stop,
        thread: Some(thread),
        links,
    })
}

/// Accept links until `stop`, each served on a thread of its own, entering the pool of links
/// not yet authenticated (`Links::pend`: full pools close their oldest links).
fn accept_loop(
    listener: &Listener,
    service: &Arc<TierService>,
    stop: &Arc<AtomicBool>,
    all: &Arc<Links>,
    limits: &Limits,
) {
    while !stop.load(Ordering::SeqCst) {
        let ms = match listener.accept_timeout(Duration::from_millis(200)) {
            Ok(Some(ms)) => ms,
            Ok(None) => continue,
            Err(_) => continue,
        };
        let accepted = Instant::now();
        let id = all.next.fetch_add(1, Ordering::SeqCst);
        all.pend(id, source_of(ms.peer_addr()), ms.clone(), limits);
        let mut live = all.live.lock().unwrap();
        let (service, stop, link, links, limits) = (
            service.clone(),
            stop.clone(),
            ms.clone(),
            all.clone(),
            limits.clone(),
        );
        let t = std::thread::spawn(move || {
            serve_link(&service, &link, &stop, &links, &limits, (id, accepted));
            // Nothing of the link holds the service once its thread is out of the map.
            drop(service);
            link.close(Duration::from_secs(5));
            links.live.lock().unwrap().remove(&id);
        });
        live.insert(id, (ms, t));
    }
}

fn now() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// Tell the peer `why` (within `until`) and give up the link.
fn refuse(ms: &MultiSocket, label: Label, why: &str, until: Instant) {
    let _ = send_message(
        ms,
        label,
        &encode(&Reply::Error(why.into()), b""),
        until,
        "client",
    );
}

/// Serve link `id` (accepted at `accepted`): authenticate it (in the pending pool), take an
/// authenticated slot, then answer its requests in order until it ends, idles or breaks a
/// limit. Its slot is given back however it ends.
fn serve_link(
    service: &Arc<TierService>,
    ms: &MultiSocket,
    stop: &AtomicBool,
    links: &Links,
    limits: &Limits,
    (id, accepted): (u64, Instant),
) {
    let authenticated = authenticate(service, ms, limits, accepted);
    links.unpend(id);
    let admitted = {
        let mut n = links.authenticated();
        let free = *n < limits.max_links;
        if authenticated.is_some() && free {
            *n += 1;
        }
        free
    };
    let Some(label) = authenticated else { return };
    let until = Instant::now() + limits.message_deadline;
    if !admitted {
        let why = format!(
            "the tier serves {} links already (its most); try again later",
            limits.max_links
        );
        refuse(ms, label, &why, until);
        return;
    }
    if send_message(ms, label, &encode(&Reply::Ok, b""), until, "client").is_ok() {
        answer(service, ms, stop, limits);
    }
    *links.authenticated() -= 1;
}

/// The first message, within the authentication deadline and [`MAX_AUTH_MESSAGE`] bytes: the
/// label it came with if it is an `Auth` with the access secret (the peer is told otherwise
/// why not, and `None`).
fn authenticate(
    service: &TierService,
    ms: &MultiSocket,
    limits: &Limits,
    accepted: Instant,
) -> Option<Label> {
    let by = accepted + limits.auth_deadline;
    let d = Deadlines {
        first: limits.auth_deadline,
        whole: limits.auth_deadline,
        by: Some((by, limits.auth_deadline)),
        max: MAX_AUTH_MESSAGE,
    };
    let (msg, label) = match recv_message(ms, d, "client") {
        Ok(Some(m)) => m,
        Ok(None) => return None,
        Err(e) => {
            ms.abort(&e.to_string());
            return None;
        }
    };
    // The refusal has the rest of the deadline, and a moment, to go.
    let until = by.max(Instant::now()) + Duration::from_secs(1);
    match decode::<Request>(&msg) {
        Ok((Request::Auth { secret }, _)) if service.secret_ok(&secret) => Some(label),
        Ok((Request::Auth { .. }, _)) => {
            refuse(ms, label, "wrong access secret", until);
            None
        }
        Ok(_) => {
            refuse(ms, label, "authenticate first", until);
            None
        }
        Err(e) => {
            refuse(ms, label, &format!("malformed request: {e}"), until);
            None
        }
    }
}

/// Answer an authenticated link's requests in order until it ends, idles, breaks a deadline
/// or the tier stops.
fn answer(service: &Arc<TierService>, ms: &MultiSocket, stop: &AtomicBool, limits: &Limits) {
    while !stop.load(Ordering::SeqCst) {
        let (msg, label) = match recv_message(ms, Deadlines::message(limits), "client") {
            Ok(Some(m)) => m,
            Ok(None) => return,
            Err(e) => {
                ms.abort(&e.to_string());
                return;
            }
        };
        let (reply, payload) = match decode::<Request>(&msg) {
            Err(e) => (Reply::Error(format!("malformed request: {e}")), Vec::new()),
            Ok((req, payload)) => service.handle(req, payload, now()),
        };
        drop(msg);
        let until = Instant::now() + limits.message_deadline;
        if let Err(e) = send_message(ms, label, &encode(&reply, &payload), until, "client") {
            ms.abort(&e.to_string());
            return;
        }
    }
}
