//! Labelled messages between a lab application's client and server, over roam or over one
//! ordinary connection.
//!
//! The applications are written once against [`Conn`]. Over roam each message is one IROB
//! carrying its label and dependencies, so the multi-socket schedules it as the paper says.
//! Over plain TCP or MPTCP (the "unmodified application"), messages are framed on one
//! connection in the order they were sent: labels travel (so a server can answer with the
//! request's label) but change nothing, as for an application that never heard of them.
//!
//! A plain connection's sends go through a FIFO drained by a writer thread, so that an
//! application can see how long it has been unable to send ([`Conn::stalled_for`]), the
//! paper's "select on a full socket buffer" (its sensing baseline drops data after 1 s).

use std::collections::VecDeque;
use std::io::{self, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use roam_emu::traffic::{connect_from, listen, set_congestion_control};
use roam_emu::SERVER_ADDR;
use roam_net::proto::NetKind;
use roam_net::runtime::blocking::{Listener as RoamListener, MultiSocket};
use roam_net::runtime::{Error as RoamError, Networks, Options, Thunk, ThunkHandle};
use roam_net::{Deps, IrobId, Label};

use crate::harness::system::System;
use crate::harness::trial::{ClientLinks, Metric};

/// Largest message a plain connection accepts from its peer.
pub const MAX_MSG: usize = 64 << 20;
/// Congestion control of every lab connection (Linux's default; this machine defaults to BBR).
pub const CC: &str = "cubic";

/// The congestion control each kind of lab connection actually used in this process, read
/// back from every plain socket after setting it (`roam`: set by roam-net on every connection,
/// which fails the connection if it cannot be set). A run writes it into `run.json`.
static CC_USED: Mutex<
    std::collections::BTreeMap<&'static str, std::collections::BTreeSet<String>>,
> = Mutex::new(std::collections::BTreeMap::new());

/// What [`CC_USED`] holds: per kind of connection (`tcp`, `mptcp`, `roam`), the congestion
/// controls its sockets used.
pub fn congestion_used() -> std::collections::BTreeMap<String, Vec<String>> {
    CC_USED
        .lock()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.to_string(), v.iter().cloned().collect()))
        .collect()
}

fn note_congestion(kind: &'static str, cc: &str) {
    CC_USED
        .lock()
        .unwrap()
        .entry(kind)
        .or_default()
        .insert(cc.to_string());
}

/// Set [`CC`] on `stream` and check that the socket uses it: an error if either fails (a
/// comparison run with the kernel's default instead is not the comparison it claims to be).
fn use_cubic(stream: &TcpStream) -> Result<()> {
    set_congestion_control(stream, CC)
        .with_context(|| format!("setting {CC} on a lab connection"))?;
    let sock = socket2::SockRef::from(stream);
    let used = sock
        .tcp_congestion()
        .context("reading a lab connection's congestion control back")?;
    let used = String::from_utf8_lossy(&used)
        .trim_end_matches('\0')
        .to_string();
    if used != CC {
        bail!("a lab connection uses {used}, not {CC}");
    }
    let mptcp = sock
        .protocol()
        .ok()
        .flatten()
        .is_some_and(|p| i32::from(p) == roam_emu::traffic::IPPROTO_MPTCP);
    note_congestion(if mptcp { "mptcp" } else { "tcp" }, &used);
    Ok(())
}

/// One received message.
#[derive(Debug, Clone)]
pub struct Msg {
    /// The label it was sent with.
    pub label: Label,
    /// Its bytes.
    pub data: Vec<u8>,
}

/// The outcome of a send.
#[derive(Debug)]
pub enum Sent {
    /// Accepted; the id (roam's IROB id, or the plain connection's sequence number) can be
    /// named as a dependency by later sends.
    Id(IrobId),
    /// roam deferred it: the thunk runs when the label can be sent (cancellable).
    Deferred(ThunkHandle),
}

struct Queue {
    items: VecDeque<(Instant, Vec<u8>)>,
    /// Enqueue time of the message being written, while a write is in progress.
    writing: Option<Instant>,
    closed: bool,
    error: Option<String>,
}

/// One ordinary connection with framed, labelled messages.
pub struct Plain {
    read: Mutex<BufReader<TcpStream>>,
    stream: TcpStream,
    queue: Arc<(Mutex<Queue>, Condvar)>,
    next: AtomicU64,
}

/// A lab connection.
pub enum Conn {
    /// Intentional Networking.
    Roam(MultiSocket),
    /// One TCP or MPTCP connection.
    Plain(Plain),
}

/// Options of a lab multi-socket of `system`; `cellular` names the client's cellular
/// interfaces.
pub(crate) fn roam_options(system: System, cellular: &[String]) -> Options {
    let kind = NetKind {
        cellular: true,
        ..NetKind::default()
    };
    let mut o = Options {
        networks: Networks::Auto,
        congestion_control: Some(CC.into()),
        kinds: cellular.iter().map(|n| (n.clone(), kind)).collect(),
        ..Options::default()
    };
    system.configure(&mut o.config);
    o
}

impl Plain {
    fn new(stream: TcpStream) -> Result<Plain> {
        stream.set_nodelay(true)?;
        use_cubic(&stream)?;
        let queue = Arc::new((
            Mutex::new(Queue {
                items: VecDeque::new(),
                writing: None,
                closed: false,
                error: None,
            }),
            Condvar::new(),
        ));
        let (q, mut w) = (queue.clone(), stream.try_clone()?);
        // The writer thread ends when the queue is closed and empty, or the socket fails.
        std::thread::spawn(move || loop {
            let (lock, cv) = &*q;
            let mut g = lock.lock().unwrap();
            while g.items.is_empty() && !g.closed {
                g = cv.wait(g).unwrap();
            }
            let Some((at, data)) = g.items.pop_front() else {
                return;
            };
            g.writing = Some(at);
            drop(g);
            let r = w.write_all(&data);
            let mut g = lock.lock().unwrap();
            g.writing = None;
            if let Err(e) = r {
                g.error = Some(e.to_string());
                g.items.clear();
                return;
            }
            cv.notify_all();
        });
        Ok(Plain {
            read: Mutex::new(BufReader::with_capacity(256 * 1024, stream.try_clone()?)),
            stream,
            queue,
            next: AtomicU64::new(1),
        })
    }
}

/// How long a plain (TCP or MPTCP) client keeps trying to connect.
const CONNECT_WAIT: Duration = Duration::from_secs(20);
/// One MPTCP connection attempt over one link, before trying the next (a dropped SYN is
/// retransmitted after 1 s, so an attempt sees a link that comes back within a second).
const MPTCP_ATTEMPT: Duration = Duration::from_millis(1500);

/// A plain TCP or MPTCP connection to the lab server on `port`, from the client namespace
/// whose links have the addresses `locals` (in the emulator's order).
///
/// TCP over a one-link baseline connects from its only link. MPTCP's first subflow goes over
/// whichever link answers, trying each in turn until `CONNECT_WAIT` (20 s), as a phone's default
/// route follows the interface that is up: bound to the WiFi alone, a trial that starts during
/// a WiFi outage (the vehicular drives, the intermittent scenario) failed to connect at all.
/// MPTCP adds the other link's subflow once connected.
pub fn connect_plain(system: System, locals: &[Ipv4Addr], port: u16) -> Result<TcpStream> {
    let Some(&first) = locals.first() else {
        bail!("the emulator has no links");
    };
    if !system.is_mptcp() || locals.len() == 1 {
        return connect_from(first, port, system.is_mptcp(), CONNECT_WAIT)
            .with_context(|| format!("connecting to {SERVER_ADDR}:{port} from {first}"));
    }
    let deadline = Instant::now() + CONNECT_WAIT;
    // The last failure over each link, for the error.
    let mut last = std::collections::BTreeMap::new();
    for &local in locals.iter().cycle() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match connect_from(local, port, true, MPTCP_ATTEMPT.min(left)) {
            Ok(s) => return Ok(s),
            Err(e) => last.insert(local, e.to_string()),
        };
    }
    let why: Vec<String> = last.iter().map(|(l, e)| format!("from {l}: {e}")).collect();
    bail!(
        "connecting to {SERVER_ADDR}:{port} over MPTCP: no link answered within {} s ({})",
        CONNECT_WAIT.as_secs(),
        why.join("; ")
    )
}

impl Conn {
    /// Connect from the client namespace (its side of the links: `locals`) to the lab server
    /// on `port`.
    pub fn connect(system: System, locals: &ClientLinks, port: u16) -> Result<Conn> {
        if system.is_roam() {
            let peer = SocketAddr::V4(SocketAddrV4::new(SERVER_ADDR, port));
            let options = roam_options(system, &locals.cellular);
            let ms = MultiSocket::connect(peer, options)?;
            note_congestion("roam", CC);
            return Ok(Conn::Roam(ms));
        }
        Ok(Conn::Plain(Plain::new(connect_plain(
            system,
            &locals.addrs,
            port,
        )?)?))
    }

    /// Send `data` labelled `label`, after the messages named in `deps` (roam); `thunk` makes
    /// roam defer instead of waiting when the label cannot be sent now. Plain connections
    /// queue everything in order.
    pub fn send(
        &self,
        label: Label,
        deps: &[IrobId],
        data: Vec<u8>,
        thunk: Option<Thunk>,
    ) -> Result<Sent> {
        match self {
            Conn::Roam(ms) => {
                let id = match ms.begin_irob(label, Deps::List(deps.to_vec()), thunk) {
                    Ok(id) => id,
                    Err(RoamError::Deferred(h)) => return Ok(Sent::Deferred(h)),
                    Err(e) => return Err(e.into()),
                };
                ms.irob_send(id, data)?;
                ms.end_irob(id)?;
                Ok(Sent::Id(id))
            }
            Conn::Plain(p) => {
                let mut frame = Vec::with_capacity(5 + data.len());
                frame.extend_from_slice(&(data.len() as u32).to_le_bytes());
                frame.push(label.to_wire());
                frame.extend_from_slice(&data);
                let (lock, cv) = &*p.queue;
                let mut g = lock.lock().unwrap();
                if let Some(e) = &g.error {
                    bail!("connection failed: {e}");
                }
                g.items.push_back((Instant::now(), frame));
                cv.notify_all();
                Ok(Sent::Id(p.next.fetch_add(1, Ordering::Relaxed)))
            }
        }
    }

    /// How long the oldest unsent message has waited (plain connections; zero when the queue
    /// is empty, and always zero over roam, whose deferral is by thunks).
    pub fn stalled_for(&self) -> Duration {
        match self {
            Conn::Roam(_) => Duration::ZERO,
            Conn::Plain(p) => {
                let g = p.queue.0.lock().unwrap();
                g.writing
                    .or_else(|| g.items.front().map(|x| x.0))
                    .map_or(Duration::ZERO, |t| t.elapsed())
            }
        }
    }

    /// Small foreground messages roam sent a second time over the other network (its hedge
    /// against a network that vanished); zero for a plain connection, which never does.
    pub fn hedges_sent(&self) -> u64 {
        match self {
            Conn::Roam(ms) => ms.hedges_sent(),
            Conn::Plain(_) => 0,
        }
    }

    /// Payload bytes that reached this end twice (hedges, resends after a break); zero for a
    /// plain connection, where TCP hides its own retransmissions.
    pub fn duplicate_bytes(&self) -> u64 {
        match self {
            Conn::Roam(ms) => ms.duplicate_bytes(),
            Conn::Plain(_) => 0,
        }
    }

    /// The next message, `None` at the end of the stream.
    pub fn recv(&self) -> Result<Option<Msg>> {
        match self {
            Conn::Roam(ms) => Ok(ms.recv_irob()?.map(|(_, label, data)| Msg { label, data })),
            Conn::Plain(p) => {
                let mut r = p.read.lock().unwrap();
                let mut head = [0u8; 5];
                match r.read_exact(&mut head) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
                    Err(e) => return Err(e.into()),
                }
                let len = u32::from_le_bytes(head[..4].try_into().unwrap()) as usize;
                if len > MAX_MSG {
                    bail!("peer sent a {len}-byte message (limit {MAX_MSG})");
                }
                let label = Label::from_wire(head[4])
                    .ok_or_else(|| anyhow!("peer sent unknown label byte {}", head[4]))?;
                let mut data = vec![0u8; len];
                r.read_exact(&mut data)
                    .context("connection ended inside a message")?;
                Ok(Some(Msg { label, data }))
            }
        }
    }
}

impl Conn {
    /// Stop at once: a blocked [`Conn::recv`] returns (used when a trial's time is up).
    pub fn abort(&self) {
        match self {
            Conn::Roam(ms) => ms.abort("the trial is over"),
            Conn::Plain(p) => {
                let _ = p.stream.shutdown(std::net::Shutdown::Both);
                let (lock, cv) = &*p.queue;
                let mut g = lock.lock().unwrap();
                g.closed = true;
                g.items.clear();
                cv.notify_all();
            }
        }
    }
}

/// What roam's recovery cost in a trial, from the given ends (none unless an end is a roam
/// multi-socket): `hedges`, small foreground messages sent a second time over the other
/// network because the first copy went unacknowledged too long (see
/// `roam_net::proto::session::LabelPolicy::hedge`), and `duplicate_kB`, payload that arrived twice (hedges, and
/// resends after a connection broke of bytes it had delivered after all).
pub fn recovery_metrics<'a>(ends: impl IntoIterator<Item = &'a Conn>) -> Vec<Metric> {
    let roam: Vec<&Conn> = ends
        .into_iter()
        .filter(|c| matches!(c, Conn::Roam(_)))
        .collect();
    if roam.is_empty() {
        return Vec::new();
    }
    let hedges: u64 = roam.iter().map(|c| c.hedges_sent()).sum();
    let dup: u64 = roam.iter().map(|c| c.duplicate_bytes()).sum();
    vec![
        Metric::new("hedges", hedges as f64, "msgs"),
        Metric::new("duplicate_kB", dup as f64 / 1e3, "kB"),
    ]
}

/// Messages (label, bytes) for a [`background_sender`].
pub type Outbox = std::sync::mpsc::Sender<(Label, Vec<u8>)>;

/// A thread that sends the messages given to it on `conn`, in order, each as soon as roam
/// takes it: a server hands it replies that may have to wait for room (roam's backlog bound),
/// so they never hold up a foreground reply. It ends when the sender is dropped or a send
/// fails.
pub fn background_sender(conn: Arc<Conn>) -> (Outbox, std::thread::JoinHandle<Result<()>>) {
    let (tx, rx) = std::sync::mpsc::channel::<(Label, Vec<u8>)>();
    let t = std::thread::spawn(move || -> Result<()> {
        for (label, m) in rx {
            conn.send(label, &[], m, None)?;
        }
        Ok(())
    });
    (tx, t)
}

/// Sends of messages composed when they can go (the file system's prefetch replies, mail's
/// prefetch responses), written once for every system: [`Readiness::send`] either hands the
/// message to the connection or, when the connection cannot take it now, waits until it can,
/// so the caller composes the message again (it may have changed meanwhile) and retries.
///
/// Over roam "can go" is roam's thunk: the label's backlog is under its bound. Over a plain
/// connection it is the socket taking the previous message: nothing queued, no write blocked
/// on a full send buffer, as an application that composes on the socket's writability (select
/// or poll) sees it. The application logic is the same; only the transport decides when.
pub struct Readiness {
    tx: std::sync::mpsc::Sender<()>,
    rx: std::sync::mpsc::Receiver<()>,
}

impl Default for Readiness {
    fn default() -> Readiness {
        let (tx, rx) = std::sync::mpsc::channel();
        Readiness { tx, rx }
    }
}

/// How long [`Readiness::send`] waits for a connection that cannot take a message before
/// letting the caller compose it again.
pub const READY_WAIT: Duration = Duration::from_secs(1);

impl Readiness {
    /// Send `data` labelled `label` if the connection can take it now: true when it did;
    /// false when it could not, after waiting until it can (roam's thunk fired, or the plain
    /// connection's socket took what it had) or [`READY_WAIT`] passed.
    pub fn send(&self, conn: &Conn, label: Label, data: Vec<u8>) -> Result<bool> {
        if let Conn::Plain(p) = conn {
            // A failed or closed connection is not busy: the send below reports it.
            let busy = |q: &Queue| {
                q.error.is_none() && !q.closed && (q.writing.is_some() || !q.items.is_empty())
            };
            let (lock, cv) = &*p.queue;
            let g = lock.lock().unwrap();
            if busy(&g) {
                // The writer thread notifies after every write.
                let _ = cv.wait_timeout_while(g, READY_WAIT, |q| busy(q)).unwrap();
                return Ok(false);
            }
            drop(g);
            conn.send(label, &[], data, None)?;
            return Ok(true);
        }
        let tx = self.tx.clone();
        let thunk = Thunk::new(move || {
            let _ = tx.send(());
        });
        match conn.send(label, &[], data, Some(thunk))? {
            Sent::Id(_) => Ok(true),
            Sent::Deferred(h) => {
                if self.rx.recv_timeout(READY_WAIT).is_err() {
                    h.cancel();
                }
                Ok(false)
            }
        }
    }
}

/// The server side of a lab application.
pub enum Server {
    /// roam listener.
    Roam(RoamListener),
    /// TCP or MPTCP listener.
    Plain(TcpListener),
}

impl Server {
    /// Listen on the server namespace's address; call from inside it.
    pub fn bind(system: System, port: u16) -> Result<Server> {
        if system.is_roam() {
            let addr = SocketAddr::V4(SocketAddrV4::new(SERVER_ADDR, port));
            return Ok(Server::Roam(RoamListener::bind(
                addr,
                roam_options(system, &[]),
            )?));
        }
        Ok(Server::Plain(
            listen(port, system.is_mptcp())
                .with_context(|| format!("listening on {SERVER_ADDR}:{port}"))?,
        ))
    }

    /// The next client, or `None` if none came within `wait` (so a server can give up once its
    /// trial is over: the client may have failed to connect).
    pub fn accept_timeout(&self, wait: Duration) -> Result<Option<Conn>> {
        match self {
            Server::Roam(l) => Ok(l.accept_timeout(wait)?.map(Conn::Roam)),
            Server::Plain(l) => {
                l.set_nonblocking(true)?;
                let deadline = Instant::now() + wait;
                loop {
                    match l.accept() {
                        Ok((s, _)) => {
                            s.set_nonblocking(false)?;
                            return Ok(Some(Conn::Plain(Plain::new(s)?)));
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            if Instant::now() >= deadline {
                                return Ok(None);
                            }
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
            }
        }
    }

    /// The next client.
    pub fn accept(&self) -> Result<Conn> {
        match self {
            Server::Roam(l) => Ok(Conn::Roam(l.accept()?)),
            Server::Plain(l) => {
                let (s, _) = l.accept()?;
                Ok(Conn::Plain(Plain::new(s)?))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plain connection over loopback whose peer does not read until told.
    fn stalled_pair() -> Result<(Conn, TcpStream)> {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let client = TcpStream::connect(l.local_addr()?)?;
        let (peer, _) = l.accept()?;
        Ok((Conn::Plain(Plain::new(client)?), peer))
    }

    #[test]
    fn over_a_plain_connection_a_message_is_composed_only_when_the_socket_took_the_last(
    ) -> Result<()> {
        let (conn, mut peer) = stalled_pair()?;
        let ready = Readiness::default();
        let chunk = vec![7u8; 256 * 1024];
        // The peer reads nothing: the socket buffers fill, the writer blocks, and readiness
        // says no instead of queueing without end.
        // (A "no" may also come while the writer thread has yet to pick up the last message;
        // a stalled one leaves it waiting for the whole wait.)
        let mut taken = 0;
        loop {
            if ready.send(&conn, Label::BackgroundLarge, chunk.clone())? {
                taken += 1;
                assert!(
                    taken < 400,
                    "100 MB taken by a connection whose peer reads nothing"
                );
            } else if conn.stalled_for() >= READY_WAIT / 2 {
                break;
            }
        }
        // Once the peer drains what was taken, the connection takes messages again.
        let want = taken * (5 + chunk.len());
        let reader = std::thread::spawn(move || {
            let mut buf = vec![0u8; want];
            peer.read_exact(&mut buf).map(|_| peer)
        });
        let mut tries = 0;
        while !ready.send(&conn, Label::BackgroundLarge, chunk.clone())? {
            tries += 1;
            assert!(tries < 30, "the connection never became ready again");
        }
        reader.join().unwrap()?;
        Ok(())
    }
}
