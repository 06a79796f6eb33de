//! Accepting: the server's [`Listener`] (a `Hello` starts a multi-socket, a `Join` is routed to
//! the multi-socket it names, which authenticates it) and the client's per-network listeners
//! for connections the server opens. Handshakes in progress are bounded
//! (`Options::max_pending_handshakes`) and timed (`Options::handshake_timeout`); which
//! multi-socket a connection belongs to is decided by `proto::routing`, and a listener holds
//! at most `Options::max_sessions` multi-sockets.

use super::*;
use crate::proto::routing::{self, Route, RouteError, Router};

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

/// The next accepted connection with a permit for its handshake; a connection beyond
/// `max_pending_handshakes` is closed at once.
pub(super) async fn accept_bounded(
    l: &TcpListener,
    pending: &Arc<Semaphore>,
    options: &Options,
) -> (TcpStream, SocketAddr, tokio::sync::OwnedSemaphorePermit) {
    loop {
        let Ok((stream, from)) = l.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        match pending.clone().try_acquire_owned() {
            Ok(permit) => return (stream, from, permit),
            Err(_) if options.log => log_line(&format!(
                "refusing {from}: {} handshakes pending",
                options.max_pending_handshakes
            )),
            Err(_) => {}
        }
    }
}

pub(super) async fn accept_loop(l: TcpListener, options: Options, tx: mpsc::Sender<MultiSocket>) {
    let sessions = Arc::new(Mutex::new(Router::new(
        options.max_sessions,
        |w: &Weak<Shared>| w.strong_count() > 0,
    )));
    let pending = Arc::new(Semaphore::new(options.max_pending_handshakes));
    loop {
        let (stream, from, permit) = accept_bounded(&l, &pending, &options).await;
        let (options, tx, sessions) = (options.clone(), tx.clone(), sessions.clone());
        tokio::spawn(async move {
            let r = handshake(stream, from, &options, &tx, &sessions).await;
            drop(permit);
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

/// Read the first frame of an accepted connection (after its TLS handshake, when configured);
/// both share the handshake timeout.
pub(super) async fn first_frame(
    stream: TcpStream,
    options: &Options,
    tls: Option<&Tls>,
) -> Result<(Accepted, Decoder, Result<Frame, String>), String> {
    let mut dec = Decoder::new(options.config.wire);
    let deadline = tokio::time::Instant::now() + options.handshake_timeout;
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
/// whose session checks the frame; `net` is the peer's network the frame names.
pub(super) fn attach(
    sh: &Arc<Shared>,
    stream: Accepted,
    dec: Decoder,
    first: Frame,
    from: SocketAddr,
    net: NetId,
) -> Result<(), String> {
    let conn = NEXT_CONN.fetch_add(1, Ordering::Relaxed);
    let entry = prepare(stream.tcp(), net, &sh.options).map_err(|e| e.to_string())?;
    let (rd, wr) = stream.split();
    sh.log(format!("connection {conn} accepted from {from}"));
    sh.conns.lock().unwrap().insert(conn, entry.clone());
    {
        let mut s = sh.session();
        s.accept_connection(conn, first, sh.now());
        s.connection_from(conn, from.ip().to_canonical());
        sh.after(&mut s);
    }
    spawn_io(sh.clone(), conn, rd, wr, dec, entry);
    Ok(())
}

pub(super) async fn handshake(
    stream: TcpStream,
    from: SocketAddr,
    options: &Options,
    tx: &mpsc::Sender<MultiSocket>,
    sessions: &Mutex<Router<Weak<Shared>>>,
) -> Result<(), String> {
    let (mut stream, dec, first) = first_frame(stream, options, options.tls.as_ref()).await?;
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
    let (sh, new) = match target {
        Some(sh) => (sh, false),
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
            let sh = Shared::new(session, None, options.clone());
            sessions.lock().unwrap().insert(id, Arc::downgrade(&sh));
            sh.handle.spawn(ticker(Arc::downgrade(&sh)));
            (sh, true)
        }
    };
    attach(&sh, stream, dec, first, from, net)?;
    if new {
        tx.send(MultiSocket { shared: sh })
            .await
            .map_err(|_| "listener dropped".to_string())?;
    }
    Ok(())
}

/// Client: accept the connections the server opens over local network `net` (joins of this
/// multi-socket naming `net` only; the session authenticates them like any join).
pub(super) async fn accept_joins(l: TcpListener, net: NetId, weak: Weak<Shared>, options: Options) {
    let pending = Arc::new(Semaphore::new(options.max_pending_handshakes));
    loop {
        let (stream, from, permit) = accept_bounded(&l, &pending, &options).await;
        let (weak, options) = (weak.clone(), options.clone());
        tokio::spawn(async move {
            let r = async {
                let (mut stream, dec, first) = first_frame(stream, &options, None).await?;
                let first = match first.and_then(|f| match routing::route_peer_join(&f, net) {
                    Ok(()) => Ok(f),
                    Err(e) => Err(e.to_string()),
                }) {
                    Ok(f) => f,
                    Err(e) => return refuse(&mut stream, e).await,
                };
                let sh = weak.upgrade().ok_or("the multi-socket is gone")?;
                attach(&sh, stream, dec, first, from, net)
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
