//! The tokio driver: runs a [`Session`] over real TCP connections, one per (local network, peer
//! address), each bound to its network's address (and device, when permitted).
//!
//! Per connection a reader task decodes frames into the session and a writer task asks the session
//! for the next frames; an application's send writes its frames itself when the connection's writer
//! is idle (`out`). Both apply anticipatory scheduling: background data is handed to the kernel
//! only while the socket's unacknowledged bytes (SIOCOUTQ) stay below the session's
//! [`Session::background_cap`] (minus what other processes on this device hold on the same network,
//! from shared memory: `Shared::take_batch`); TCP_NOTSENT_LOWAT keeps the kernel's unsent queue
//! short so that foreground data is not stuck behind it. A timer task samples TCP_INFO (passive
//! estimates), fires session timers and publishes estimates.
//!
//! The parts: [`Options`] (`options`), [`Error`] (`error`), [`MultiSocket`] (`socket`, the
//! async API), [`Listener`] (`listener`, accepting and routing connections), `connect`
//! (opening connections), `conn_io` (a connection's reader and writer tasks), `out` (a
//! connection's write side, which a send writes to from its own thread), `ticker` (the
//! timer task), [`Thunk`] (`thunk`), [`PathMemory`] (`paths`, estimates shared between
//! multi-sockets), `locked` (the session's lock, held, and the wake-ups made once it is let
//! go); the shared state of one multi-socket (`Shared`) is here.
//!
//! The sockets are created by the runtime's threads, so they live in the network namespace of
//! the thread that built the runtime; [`blocking`] keeps one runtime per namespace.
//!
//! # Lock order
//! A multi-socket's state is behind several mutexes in `Shared`. The order is fixed:
//!
//! 1. the C ABI's per-socket entry (`capi`), when the call comes through it;
//! 2. connections' write sides (`out`): a writer task waits for its own; a thread about to
//!    change the session only tries them (`Shared::sending`), so it never waits while
//!    holding one;
//! 3. the session (`Shared::session`);
//! 4. at most one of the leaf locks: `networks`, `conns`, `thunks`, `listeners`,
//!    `last_open_error`, the shared-memory table's own.
//!
//! A lock may be taken while holding only locks above it; a leaf lock is never held while
//! taking another lock. So a task that needs the session and a leaf (the ticker reading a
//! network's name, the scout adding a network) takes the session first. The scout once took
//! the networks' lock and then the session's while the timer task did the opposite: a network
//! event during traffic could hang the multi-socket (`lock_order_tests`).
//!
//! The session's lock is held for bookkeeping, not across the data path's system calls: the
//! writer and the ticker read the kernel's counters before taking it, reads and writes happen
//! outside it, and the tasks and threads a change wakes are woken once it is let go
//! (`locked`; 3,674 -> 2,802 context switches per GB on loopback, issue 48).

pub mod blocking;
pub mod paths;
pub mod scout;
pub mod shm;
pub mod sys;
pub mod tls;

mod conn_io;
mod connect;
mod error;
mod listener;
mod locked;
mod options;
mod out;
mod socket;
mod thunk;
mod ticker;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use roam_core::{BitRate, Clock, Time};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{mpsc, Notify, Semaphore};

use crate::proto::session::{
    Config, ConfigError, ConnId, Delivery, Event, IrobId, NetId, NetKind, SendError, Session,
};
use crate::proto::{Decoder, Deps, Failure, Frame, KernelQueue, Label, TcpSample};
pub use tls::Tls;
use tls::{Accepted, ConnRead, ConnWrite};

use conn_io::spawn_io;
use connect::{new_socket, prepare, set_keepalive};
pub use connect::{CELLULAR_KEEPALIVE, NOTSENT_LOWAT, SYN_RESTART};
use error::io_err;
pub use error::{ConnectError, Error};
pub use listener::Listener;
use listener::SourceSlot;
use locked::Locked;
pub use options::{LocalNetwork, Networks, Options};
pub use out::WriteCounts;
pub use paths::{PathMemory, ProbeTurn};
pub use socket::{MultiSocket, NetworkView, ReceiveHeld};
use thunk::ThunkRunner;
pub use thunk::{Thunk, ThunkHandle};
use ticker::ticker;

/// Bit of `Shared::blocked`: a sender waits for room in the send buffer.
const BUFFER_BIT: u8 = 1 << 4;

#[derive(Clone)]
struct ConnEntry {
    wake: Arc<Notify>,
    closing: Arc<AtomicBool>,
    /// The writer's last pass found the anticipatory cap reached (background room 0).
    capped: Arc<AtomicBool>,
    /// Its keepalives are at the cellular pace ([`CELLULAR_KEEPALIVE`]; the ticker sets them
    /// once the session knows the connection's network).
    cellular: Arc<AtomicBool>,
    /// Its write side, once its writer has started (`out`).
    out: Arc<tokio::sync::Mutex<Option<out::Out>>>,
    fd: i32,
    net: NetId,
    /// Its network's shared-memory key (`net_key`), looked up once: the writer and every
    /// send read the other processes' counts under it (`Shared::kernel_state`).
    network: Option<Arc<str>>,
    /// Its path: (local address, peer address), the key of [`PathMemory`].
    path: Option<(IpAddr, IpAddr)>,
}

pub(crate) struct Shared {
    session: Mutex<Session>,
    clock: Clock,
    handle: tokio::runtime::Handle,
    /// Any change of the session (waiters re-check their condition).
    changed: Notify,
    /// Something arrived that `recv` may return (see `Session::arrivals`): receivers wait on
    /// this alone, so a sender's progress does not wake them.
    readable: Notify,
    /// What a blocked sender waits for has come (see `blocked`), or sends are over (closed,
    /// failed). Blocked senders wait on this alone, so that they do not wake (and take the
    /// session's lock) for every frame moved meanwhile: that spinning took a sixth of the CPU
    /// on loopback in `roam bench net`.
    space: Notify,
    /// What blocked senders wait for: bit `1 << rank` for a label that cannot be sent
    /// (`Session::can_send`), [`BUFFER_BIT`] for room in the send buffer. Both count only
    /// once the buffer is below three quarters of `max_send_buffer`, so that a sender wakes
    /// per several IROBs, not per acknowledgement.
    blocked: AtomicU8,
    /// `Session::arrivals` when receivers were last woken.
    arrivals_seen: AtomicU64,
    /// The session has ended (failed or finished): a listener's table counts it gone at once,
    /// though its tasks may still be letting go of its connections.
    over: AtomicBool,
    conns: Mutex<BTreeMap<ConnId, ConnEntry>>,
    thunks: Mutex<HashMap<u64, Thunk>>,
    next_thunk: AtomicU64,
    /// Where fired thunks run.
    thunk_runner: ThunkRunner,
    /// Client: the server's address (where connections are opened to).
    peer: Option<SocketAddr>,
    /// Server: the address the multi-socket's first connection (its `Hello`) came from.
    origin: Option<SocketAddr>,
    networks: Mutex<BTreeMap<NetId, LocalNetwork>>,
    options: Options,
    shm: Option<shm::SharedCounts>,
    /// Why the latest connection attempt failed (reported when `connect` gives up).
    last_open_error: Mutex<Option<String>>,
    /// Client: the listener per local network for connections the server opens.
    listeners: Mutex<HashMap<NetId, tokio::task::AbortHandle>>,
    /// The timer task's idle state ([`ticker::Ticker`]).
    ticker: Arc<ticker::Ticker>,
    /// Who wrote the batches of frames (`out`).
    writes: out::Counts,
}

impl Drop for Shared {
    fn drop(&mut self) {
        for l in self.listeners.get_mut().unwrap().values() {
            l.abort();
        }
    }
}

/// Who is at the other end of a new multi-socket.
enum Ends {
    /// Client: the server it connects to.
    Peer(SocketAddr),
    /// Server: where the first connection (the `Hello`) came from.
    Origin(SocketAddr),
}

/// The application's hold on a multi-socket, shared by its handles ([`MultiSocket`] clones):
/// when the last one goes, the session is released ([`Session::release`]). Without this a
/// multi-socket the application dropped lived as long as its peer kept a connection open (its
/// reader and writer tasks hold it), and a listener's slots filled with them.
struct AppHold(Arc<Shared>);

impl Drop for AppHold {
    fn drop(&mut self) {
        let sh = &self.0;
        let mut s = sh.session();
        s.release(sh.now());
        sh.after(&mut s);
    }
}

static NEXT_CONN: AtomicU64 = AtomicU64::new(1);

fn seed() -> u64 {
    let mut b = [0u8; 8];
    getrandom::getrandom(&mut b).expect("the OS random source works");
    u64::from_ne_bytes(b)
}

/// A connection's socket as the kernel reports it, and what other processes hold on its
/// network (`Shared::kernel_state`).
struct KernelState {
    info: Option<sys::TcpInfo>,
    outq: u64,
    others: u64,
}

/// A socket's send queue from its SIOCOUTQ `outq` and TCP_INFO, as the session takes it.
fn kernel_queue(info: Option<&sys::TcpInfo>, outq: u64) -> KernelQueue {
    let unsent = info.map_or(0, |i| i.notsent).min(outq);
    KernelQueue {
        in_flight: outq - unsent,
        unsent,
        timed_out: info.is_some_and(|i| i.timeouts > 0) && outq > unsent,
    }
}

/// A line of the `ROAM_NET_LOG` log on stderr, stamped with the wall clock (seconds within the
/// minute, to the millisecond) so that the lines of both peers and of several multi-sockets
/// interleave in time order.
fn log_line(msg: &str) {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    eprintln!(
        "roam-net {:06.3}: {msg}",
        (t.as_millis() % 60_000) as f64 / 1e3
    );
}

fn net_key(sh: &Shared, net: NetId) -> Option<String> {
    sh.networks
        .lock()
        .unwrap()
        .get(&net)
        .map(|n| n.name.clone())
}

impl Shared {
    fn new(session: Session, ends: Ends, options: Options) -> Arc<Shared> {
        let (peer, origin) = match ends {
            Ends::Peer(a) => (Some(a), None),
            Ends::Origin(a) => (None, Some(a)),
        };
        Arc::new(Shared {
            session: Mutex::new(session),
            clock: Clock::start(),
            handle: tokio::runtime::Handle::current(),
            changed: Notify::new(),
            readable: Notify::new(),
            space: Notify::new(),
            blocked: AtomicU8::new(0),
            arrivals_seen: AtomicU64::new(0),
            over: AtomicBool::new(false),
            conns: Mutex::new(BTreeMap::new()),
            thunks: Mutex::new(HashMap::new()),
            next_thunk: AtomicU64::new(1),
            thunk_runner: ThunkRunner::new(),
            peer,
            origin,
            networks: Mutex::new(BTreeMap::new()),
            shm: shm::SharedCounts::open_default().ok(),
            options,
            last_open_error: Mutex::new(None),
            listeners: Mutex::new(HashMap::new()),
            ticker: Arc::default(),
            writes: out::Counts::default(),
        })
    }

    /// The session, locked; what [`Shared::after`] decides to wake is woken once the lock is
    /// let go (`locked`).
    fn session(&self) -> Locked<'_> {
        Locked::new(self, self.session.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Keep thunk `t` until the session fires or drops it; its id.
    fn add_thunk(&self, t: Thunk) -> u64 {
        let id = self.next_thunk.fetch_add(1, Ordering::Relaxed);
        self.thunks.lock().unwrap().insert(id, t);
        id
    }

    fn now(&self) -> Time {
        self.clock.now()
    }

    /// Local network `local`'s kind: as [`Options::kinds`] names it, else as the scout found.
    fn kind_of(&self, local: &LocalNetwork) -> NetKind {
        self.options
            .kinds
            .iter()
            .find(|(name, _)| *name == local.name)
            .map_or(local.kind, |&(_, kind)| kind)
    }

    fn log(&self, msg: impl AsRef<str>) {
        if self.options.log {
            log_line(msg.as_ref());
        }
    }

    /// Take the frames of the write sides this thread holds (`out`), act on the session's
    /// events, then decide which writers and application waiters to wake (woken once the lock
    /// is let go: `locked`).
    fn after(self: &Arc<Self>, s: &mut Locked<'_>) {
        // First, so that what taking them changes (a label's backlog, trace events) is seen
        // below.
        if !s.held.is_empty() {
            self.take_held_batches(s);
        }
        if !s.is_quiet() && self.ticker.busy() {
            s.wakes.ticker = true;
        }
        while let Some(ev) = s.poll_event() {
            match ev {
                Event::OpenConnection { net } => {
                    let sh = self.clone();
                    self.handle.spawn(async move { sh.open(net).await });
                }
                Event::CloseConnection { conn, reason } => {
                    self.log(format!("closing connection {conn}: {reason}"));
                    if let Some(c) = self.conns.lock().unwrap().get(&conn) {
                        c.closing.store(true, Ordering::SeqCst);
                        c.wake.notify_one();
                    }
                }
                Event::ThunkReady(id) => {
                    if let Some(t) = self.thunks.lock().unwrap().remove(&id) {
                        self.thunk_runner.run(t, self.options.log);
                    }
                }
                Event::Established => self.log("established"),
                Event::Failed(r) => self.log(format!("failed: {r}")),
                Event::Trace(line) => self.log(line),
            }
        }
        s.wakes.writers = true;
        // A waiting receiver is woken once something arrived that it can take: a chunk of a
        // background IROB that is not complete yet wakes nobody (on a loopback bulk transfer,
        // three wake-ups in four found nothing).
        let arrivals = s.arrivals();
        if self.arrivals_seen.load(Ordering::Relaxed) != arrivals
            && (s.has_delivery() || s.peer_finished() || s.failure().is_some())
        {
            self.arrivals_seen.store(arrivals, Ordering::Relaxed);
            s.wakes.readable = true;
        }
        let blocked = self.blocked.load(Ordering::SeqCst);
        if blocked != 0 {
            let room = self.buffer_room(s);
            let open = s.is_closing()
                || s.failure().is_some()
                || (room && blocked & BUFFER_BIT != 0)
                || Label::ALL
                    .iter()
                    .any(|l| blocked & (1 << l.rank()) != 0 && self.ready_to_send(s, *l));
            if open {
                self.blocked.store(0, Ordering::SeqCst);
                s.wakes.space = true;
            }
        }
        if s.failure().is_some() || s.is_finished() {
            self.over.store(true, Ordering::Relaxed);
        }
        s.wakes.changed = true;
    }

    /// Whether the session has ended (failed or finished).
    fn is_over(&self) -> bool {
        self.over.load(Ordering::Relaxed)
    }

    /// After the application took delivery `d`: the receive side changed, which a reader paused for
    /// back-pressure waits for (`changed`). Once an IROB has been delivered whole its events are
    /// acted on (`after`), and writers are woken when that finished the session or when the read
    /// made a credit due (`flow`); otherwise a delivery creates nothing to send. (Waking them per
    /// chunk had the receiver's writer take the lock and read TCP_INFO four times per MiB of a bulk
    /// transfer for nothing; a credit is due once per eighth of a window read.)
    fn after_recv(self: &Arc<Self>, s: &mut Locked<'_>, d: &Delivery) {
        let credit = s.credit_pending();
        if d.end || credit {
            self.after(s);
            // Only a credit or the session's end gives a writer something to do: waking them
            // per message delivered cost a request-and-answer exchange a runtime worker woken
            // from the application's thread on each side (issue 48).
            s.wakes.writers = credit || s.is_finished();
        } else {
            s.wakes.changed = true;
        }
    }

    /// The send buffer is under three quarters full: a blocked sender is woken (and a
    /// multi-socket reported writable) only then, so that it wakes per several IROBs, not per
    /// acknowledgement.
    fn buffer_room(&self, s: &Session) -> bool {
        let max = self.options.config.max_send_buffer;
        s.unacknowledged() < max - max / 4
    }

    /// A send with `label` would be accepted and the buffer has room (see `buffer_room`): what
    /// `MultiSocket::writable` reports and what a blocked sender of `label` is woken for.
    fn ready_to_send(&self, s: &Session, label: Label) -> bool {
        s.can_send(label) && self.buffer_room(s)
    }

    /// What the kernel holds of connection `fd` and what other processes on this device hold
    /// on the same network: read before the writer takes the session's lock, so that two
    /// system calls are not made under it (the reader and the application wait for it).
    fn kernel_state(&self, fd: i32, network: Option<&str>) -> KernelState {
        KernelState {
            info: sys::tcp_info(fd).ok(),
            outq: sys::outq(fd).unwrap_or(0),
            others: self.shm.as_ref().map_or(0, |m| m.others(network)),
        }
    }

    /// Background bytes connection `conn` may still take (anticipatory scheduling), given
    /// what the kernel holds (`kernel_state`).
    fn background_room(&self, s: &mut Session, conn: ConnId, k: &KernelState, now: Time) -> u64 {
        let cap = s.background_cap(conn, now, k.info.as_ref().map(|i| i.window()));
        s.kernel_queue(conn, kernel_queue(k.info.as_ref(), k.outq));
        cap.saturating_sub(k.outq + k.others)
    }
}
