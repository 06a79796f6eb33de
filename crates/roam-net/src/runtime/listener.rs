//! Accepting: the server's [`Listener`] (a `Hello` starts a multi-socket, a `Join` is routed to
//! the multi-socket it names, which authenticates it) and the client's per-network listeners
//! for connections the server opens. Handshakes in progress are bounded, in all
//! (`Options::max_pending_handshakes`) and per source address
//! (`Options::max_pending_per_source`), and must be done by one deadline
//! (`Options::handshake_timeout` after the connection was accepted, whatever trickles in
//! meanwhile); a source address holds at most `Options::max_connections_per_source`
//! connections. Which multi-socket a connection belongs to is decided by `proto::routing`, and
//! a listener holds at most `Options::max_sessions` multi-sockets.

use super::*;
use crate::proto::routing::{self, Route, RouteError, Router};

/// A listener's count of connections and pending handshakes per source address.
#[derive(Debug, Default)]
pub(super) struct SourceTable {
    /// Per address: (handshakes pending, connections open).
    counts: Mutex<HashMap<IpAddr, (usize, usize)>>,
}

/// One accepted connection's place in its listener's [`SourceTable`]: counted as a pending
/// handshake until [`SourceSlot::handshake_done`], and as a connection until dropped (it lives
/// with the connection's reader).
#[derive(Debug)]
pub(super) struct SourceSlot {
    table: Arc<SourceTable>,
    addr: IpAddr,
    pending: bool,
}

impl SourceTable {
    /// A slot for a connection accepted from `addr`, or why it is refused.
    fn admit(self: &Arc<Self>, addr: IpAddr, options: &Options) -> Result<SourceSlot, String> {
        let mut counts = self.counts.lock().unwrap();
        let (pending, conns) = counts.entry(addr).or_default();
        if *pending >= options.max_pending_per_source {
            return Err(format!(
                "{pending} handshakes from {addr} pending (max_pending_per_source)"
            ));
        }
        if *conns >= options.max_connections_per_source {
            return Err(format!(
                "{conns} connections from {addr} open (max_connections_per_source)"
            ));
        }
        *pending += 1;
        *conns += 1;
        Ok(SourceSlot {
            table: self.clone(),
            addr,
            pending: true,
        })
    }
}

impl SourceSlot {
    /// The connection's handshake is over (it belongs to a multi-socket now).
    pub(super) fn handshake_done(&mut self) {
        if std::mem::take(&mut self.pending) {
            if let Some(c) = self.table.counts.lock().unwrap().get_mut(&self.addr) {
                c.0 -= 1;
            }
        }
    }
}

impl Drop for SourceSlot {
    fn drop(&mut self) {
        let mut counts = self.table.counts.lock().unwrap();
        if let Some(c) = counts.get_mut(&self.addr) {
            if self.pending {
                c.0 -= 1;
            }
            c.1 -= 1;
            if *c == (0, 0) {
                counts.remove(&self.addr);
            }
        }
    }
}

/// Accepts multi-sockets. A `Hello` starts a new multi-socket; a `Join` is routed to the
/// multi-socket it names, which authenticates it.
pub struct Listener {
    pub(super) local: SocketAddr,
    pub(super) accepted: tokio::sync::Mutex<mpsc::Receiver<MultiSocket>>,
    /// The accept loop: it owns the listening socket. Dropping the listener stops it, so the
    /// port is free again and no connection is taken for a multi-socket nobody will accept
    /// (multi-sockets already accepted keep their connections, but take no new joins).
    task: tokio::task::AbortHandle,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Listener {
    /// Listen on `addr`.
    pub async fn bind(addr: SocketAddr, options: Options) -> Result<Listener, Error> {
        options.config.validate()?;
        let l = TcpListener::bind(addr)
            .await
            .map_err(io_err(format!("listening on {addr}")))?;
        let local = l.local_addr().map_err(io_err("local address"))?;
        let (tx, rx) = mpsc::channel(64);
        let task = tokio::spawn(accept_loop(l, options, tx)).abort_handle();
        Ok(Listener {
            local,
            accepted: tokio::sync::Mutex::new(rx),
            task,
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The next new multi-socket.
    pub async fn accept(&self) -> Result<MultiSocket, Error> {
        self.accepted
            .lock()
            .await
            .recv()
            .await
            .ok_or(Error::ListenerStopped)
    }
}

/// An accepted connection on its way to a multi-socket: the stream, where it came from, when
/// its handshake must be done, its permit among the listener's pending handshakes and its
/// place among its source address's.
pub(super) struct Arrival {
    stream: TcpStream,
    from: SocketAddr,
    deadline: tokio::time::Instant,
    permit: tokio::sync::OwnedSemaphorePermit,
    slot: SourceSlot,
}

/// The next accepted connection admitted for its handshake; one beyond
/// `max_pending_handshakes`, or beyond its source address's `max_pending_per_source` or
/// `max_connections_per_source`, is closed at once.
pub(super) async fn accept_bounded(
    l: &TcpListener,
    pending: &Arc<Semaphore>,
    sources: &Arc<SourceTable>,
    options: &Options,
) -> Arrival {
    loop {
        let Ok((stream, from)) = l.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let deadline = tokio::time::Instant::now() + options.handshake_timeout;
        let admitted = sources
            .admit(from.ip().to_canonical(), options)
            .and_then(|slot| match pending.clone().try_acquire_owned() {
                Ok(permit) => Ok((slot, permit)),
                Err(_) => Err(format!(
                    "{} handshakes pending (max_pending_handshakes)",
                    options.max_pending_handshakes
                )),
            });
        match admitted {
            Ok((slot, permit)) => {
                return Arrival {
                    stream,
                    from,
                    deadline,
                    permit,
                    slot,
                }
            }
            Err(why) if options.log => log_line(&format!("refusing {from}: {why}")),
            Err(_) => {}
        }
    }
}

pub(super) async fn accept_loop(l: TcpListener, options: Options, tx: mpsc::Sender<MultiSocket>) {
    let sessions = Arc::new(Mutex::new(Router::new(
        options.max_sessions,
        |w: &Weak<Shared>| w.upgrade().is_some_and(|sh| !sh.is_over()),
    )));
    let pending = Arc::new(Semaphore::new(options.max_pending_handshakes));
    let sources = Arc::new(SourceTable::default());
    loop {
        let a = accept_bounded(&l, &pending, &sources, &options).await;
        let (options, tx, sessions) = (options.clone(), tx.clone(), sessions.clone());
        tokio::spawn(async move {
            let from = a.from;
            let r = handshake(a, &options, &tx, &sessions).await;
            if let Err(e) = r {
                if options.log {
                    log_line(&format!("connection from {from} refused: {e}"));
                }
            }
        });
    }
}

/// Send an `Error` frame with `reason` and give the reason back as the handshake's error.
pub(super) async fn refuse(stream: &mut Accepted, reason: String) -> Result<(), String> {
    let frame = Frame::Error {
        reason: reason.clone(),
        fatal: false,
    }
    .to_bytes();
    if stream.write_all(&frame).await.is_ok() {
        let _ = stream.flush().await;
    }
    Err(reason)
}

/// Read the first frame of an accepted connection (after its TLS handshake, when configured),
/// both by `deadline` (`Options::handshake_timeout` after the connection was accepted): a
/// deadline, not a timeout per read, so a peer trickling a byte at a time holds the
/// handshake's place no longer than one that sends nothing.
pub(super) async fn first_frame(
    stream: TcpStream,
    deadline: tokio::time::Instant,
    options: &Options,
    tls: Option<&Tls>,
) -> Result<(Accepted, Decoder, Result<Frame, String>), String> {
    let mut dec = Decoder::new(options.config.wire);
    let mut stream = tokio::time::timeout_at(deadline, Accepted::accept(stream, tls))
        .await
        .map_err(|_| format!("no TLS handshake within {:?}", options.handshake_timeout))?
        .map_err(|e| format!("TLS handshake: {e}"))?;
    let first = tokio::time::timeout_at(deadline, async {
        loop {
            match dec.next_frame() {
                Ok(Some(f)) => return Ok(f),
                Ok(None) => {}
                Err(e) => return Err(format!("malformed first frame: {e}")),
            }
            dec.buffer_mut().reserve(4096);
            match stream.read_buf(dec.buffer_mut()).await {
                Ok(0) => return Err("closed before its first frame".to_string()),
                Ok(_) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
    })
    .await
    .map_err(|_| format!("no first frame within {:?}", options.handshake_timeout))?;
    Ok((stream, dec, first))
}

/// Hand an accepted connection and its first frame (`Hello` or `Join`) to multi-socket `sh`,
/// whose session checks the frame; `net` is the peer's network the frame names. The
/// connection keeps its source address's `slot` while it lives.
pub(super) fn attach(
    sh: &Arc<Shared>,
    stream: Accepted,
    dec: Decoder,
    first: Frame,
    (from, net): (SocketAddr, NetId),
    mut slot: SourceSlot,
) -> Result<(), String> {
    let conn = NEXT_CONN.fetch_add(1, Ordering::Relaxed);
    let entry = prepare(stream.tcp(), net, sh).map_err(|e| e.to_string())?;
    let (rd, wr) = stream.split();
    sh.log(format!("connection {conn} accepted from {from}"));
    sh.conns.lock().unwrap().insert(conn, entry.clone());
    {
        let mut s = sh.session();
        s.accept_connection(conn, first, sh.now());
        s.connection_from(conn, from.ip().to_canonical());
        sh.recall_path(&mut s, conn, entry.path);
        sh.after(&mut s);
    }
    slot.handshake_done();
    spawn_io(sh.clone(), conn, rd, wr, dec, entry, Some(slot));
    Ok(())
}

pub(super) async fn handshake(
    a: Arrival,
    options: &Options,
    tx: &mpsc::Sender<MultiSocket>,
    sessions: &Mutex<Router<Weak<Shared>>>,
) -> Result<(), String> {
    let Arrival {
        stream,
        from,
        deadline,
        permit,
        slot,
    } = a;
    let (mut stream, dec, first) =
        first_frame(stream, deadline, options, options.tls.as_ref()).await?;
    let first = match first {
        Ok(f) => f,
        Err(e) => return refuse(&mut stream, e).await,
    };
    // The multi-socket a join names (`None` for a hello), and the client's network.
    let routed = routing::route(&first).and_then(|r| match r {
        Route::Start { net } => sessions.lock().unwrap().reserve().map(|()| (None, net)),
        Route::Join { session, net } => {
            let found = sessions.lock().unwrap().lookup(session)?;
            let sh = found.upgrade().ok_or(RouteError::UnknownSession(session))?;
            Ok((Some(sh), net))
        }
    });
    let (target, net) = match routed {
        Ok(r) => r,
        Err(e) => return refuse(&mut stream, e.to_string()).await,
    };
    let (sh, app) = match target {
        Some(sh) => (sh, None),
        None => {
            let id = sessions.lock().unwrap().fresh_id(seed);
            let mut config = options.config.clone();
            config.trace |= options.log;
            if options.tls.is_some() {
                // Opening a connection would make the server a TLS client without the
                // client's trust roots: a server with TLS leaves opening to the client.
                config.peer_open_delay = None;
            }
            let session = Session::server(config, seed(), id);
            let sh = Shared::new(session, Ends::Origin(from), options.clone());
            sessions.lock().unwrap().insert(id, Arc::downgrade(&sh));
            sh.handle.spawn(ticker(Arc::downgrade(&sh)));
            // The application's handle from the start: a multi-socket that never reaches the
            // application (the listener was dropped) is released like one it dropped.
            let app = MultiSocket::held(sh.clone());
            (sh, Some(app))
        }
    };
    attach(&sh, stream, dec, first, (from, net), slot)?;
    // The handshake's place is held until the application's accept queue takes the new
    // multi-socket: an application slow to accept holds up new handshakes, not its memory.
    let _permit = permit;
    if let Some(app) = app {
        tx.send(app)
            .await
            .map_err(|_| "listener dropped".to_string())?;
    }
    Ok(())
}

/// Client: accept the connections the server opens over local network `net` (joins of this
/// multi-socket naming `net` only; the session authenticates them like any join).
pub(super) async fn accept_joins(l: TcpListener, net: NetId, weak: Weak<Shared>, options: Options) {
    let pending = Arc::new(Semaphore::new(options.max_pending_handshakes));
    let sources = Arc::new(SourceTable::default());
    loop {
        let Arrival {
            stream,
            from,
            deadline,
            permit,
            slot,
        } = accept_bounded(&l, &pending, &sources, &options).await;
        let (weak, options) = (weak.clone(), options.clone());
        tokio::spawn(async move {
            let r = async {
                let (mut stream, dec, first) =
                    first_frame(stream, deadline, &options, None).await?;
                let first = match first.and_then(|f| match routing::route_peer_join(&f, net) {
                    Ok(()) => Ok(f),
                    Err(e) => Err(e.to_string()),
                }) {
                    Ok(f) => f,
                    Err(e) => return refuse(&mut stream, e).await,
                };
                let sh = weak.upgrade().ok_or("the multi-socket is gone")?;
                attach(&sh, stream, dec, first, (from, net), slot)
            }
            .await;
            drop(permit);
            if let Err(e) = r {
                if options.log {
                    log_line(&format!("connection from {from} refused: {e}"));
                }
            }
        });
    }
}

impl Shared {
    /// Client: listen on local network `net`'s address for connections the server opens and
    /// announce the port (replacing an earlier listener of the network); with `None`, stop.
    pub(super) fn listen_on(
        self: &Arc<Self>,
        s: &mut Session,
        net: NetId,
        local: Option<&LocalNetwork>,
    ) {
        if let Some(old) = self.listeners.lock().unwrap().remove(&net) {
            old.abort();
        }
        s.accepting_on(net, 0);
        let Some(local) = local else { return };
        if !self.options.accept_from_peer || self.options.tls.is_some() {
            return;
        }
        let bound = (|| {
            let sock = new_socket(local.addr)?;
            let _ = sys::bind_to_device(sock.as_raw_fd(), &local.name);
            sock.bind(SocketAddr::new(local.addr, 0))?;
            sock.listen(16)
        })();
        match bound.and_then(|l| Ok((l.local_addr()?.port(), l))) {
            Ok((port, l)) => {
                s.accepting_on(net, port);
                let task = self.handle.spawn(accept_joins(
                    l,
                    net,
                    Arc::downgrade(self),
                    self.options.clone(),
                ));
                self.listeners
                    .lock()
                    .unwrap()
                    .insert(net, task.abort_handle());
            }
            Err(e) => self.log(format!(
                "not accepting connections over {} ({}): {e}",
                local.name, local.addr
            )),
        }
    }
}
