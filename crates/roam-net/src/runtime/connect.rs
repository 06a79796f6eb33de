//! Opening connections: a client over each local network (bound to its address and device,
//! restarting SYNs during an outage), the server to the address a client's network was seen
//! at; the socket options every connection gets.

use super::*;

/// TCP_NOTSENT_LOWAT on every connection: at most this many bytes wait unsent in the kernel.
pub const NOTSENT_LOWAT: u32 = 128 * 1024;

/// A fresh connection attempt over a network starts this often while earlier ones wait.
pub const SYN_RESTART: Duration = Duration::from_millis(500);

/// Most connection attempts in flight over one network (10 s of restarts).
pub(super) const MAX_ATTEMPTS: usize = 20;

/// Connect to `peer` from `addr` over interface `dev`. TCP retransmits an unanswered SYN after
/// 1 s, then (Linux >= 6.7, `tcp_syn_linear_timeouts`) each second four times, then with
/// exponential back-off; so an attempt started during an outage notices the network's
/// return up to a second late, and several seconds late once it is a few seconds old. Instead
/// a fresh attempt (a fresh SYN) starts every [`SYN_RESTART`] and the first to connect wins:
/// a network coming back is found within about half a second plus one round trip (the
/// vehicular drives' WiFi sessions last a few seconds).
pub(super) async fn connect_on(addr: IpAddr, dev: &str, peer: SocketAddr) -> io::Result<TcpStream> {
    let attempt = |dev: String| async move {
        let sock = new_socket(addr)?;
        let _ = sys::bind_to_device(sock.as_raw_fd(), &dev);
        sock.bind(SocketAddr::new(addr, 0))?;
        sock.connect(peer).await
    };
    let mut attempts = tokio::task::JoinSet::new();
    attempts.spawn(attempt(dev.to_string()));
    let mut last_err = None;
    loop {
        tokio::select! {
            done = attempts.join_next() => match done {
                Some(Ok(Ok(stream))) => return Ok(stream),
                Some(Ok(Err(e))) => {
                    last_err = Some(e);
                    if attempts.is_empty() {
                        // Refused or unreachable at once: report it rather than spin.
                        return Err(last_err.take().unwrap());
                    }
                }
                Some(Err(e)) => return Err(io::Error::other(e)),
                None => return Err(last_err.unwrap_or_else(|| io::Error::other("no attempt"))),
            },
            _ = tokio::time::sleep(SYN_RESTART), if attempts.len() < MAX_ATTEMPTS => {
                attempts.spawn(attempt(dev.to_string()));
            }
        }
    }
}

/// A TCP socket of `addr`'s family.
pub(super) fn new_socket(addr: IpAddr) -> io::Result<TcpSocket> {
    match addr {
        IpAddr::V4(_) => TcpSocket::new_v4(),
        IpAddr::V6(_) => TcpSocket::new_v6(),
    }
}

/// How long a connection over a cellular network stays idle before the kernel sends a TCP
/// keepalive (other connections: a quarter of the user timeout, at least a second). Each
/// keepalive on an idle 3G or LTE radio costs a promotion and a tail, 7-13 J on Huang et al.'s
/// models ([`crate::proto::session::NetKind::cellular`]); one every ten minutes keeps a
/// carrier's NAT binding (their TCP timeouts are mostly longer) at about 1% of a phone's idle
/// budget, where one a second kept the radio awake for good. A binding lost in between shows
/// when data is next sent: the user timeout breaks the connection and the client reopens it.
pub const CELLULAR_KEEPALIVE: Duration = Duration::from_secs(600);

/// Set a connection's TCP keepalives: idle for a quarter of the user timeout (at least a
/// second) then probes at that pace, or on a cellular network idle for
/// [`CELLULAR_KEEPALIVE`] first.
pub(super) fn set_keepalive(fd: i32, options: &Options, cellular: bool) -> io::Result<()> {
    // SAFETY: the caller's fd is a live socket of ours for the duration of the call.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    let sock = socket2::SockRef::from(&fd);
    let probe = (options.user_timeout / 4).max(Duration::from_secs(1));
    let idle = if cellular { CELLULAR_KEEPALIVE } else { probe };
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(idle)
        .with_interval(probe)
        .with_retries(3);
    sock.set_tcp_keepalive(&keepalive)
}

/// Socket options of a new connection over network `net` of multi-socket `sh`; its
/// bookkeeping entry.
pub(super) fn prepare(stream: &TcpStream, net: NetId, sh: &Shared) -> io::Result<ConnEntry> {
    let options = &sh.options;
    stream.set_nodelay(true)?;
    let sock = socket2::SockRef::from(stream);
    if let Some(cc) = &options.congestion_control {
        sock.set_tcp_congestion(cc.as_bytes())?;
    }
    let user_timeout = options.user_timeout;
    sock.set_tcp_user_timeout(Some(user_timeout))?;
    let fd = stream.as_raw_fd();
    set_keepalive(fd, options, false)?;
    sys::set_notsent_lowat(fd, NOTSENT_LOWAT)?;
    Ok(ConnEntry {
        wake: Arc::new(Notify::new()),
        closing: Arc::new(AtomicBool::new(false)),
        capped: Arc::new(AtomicBool::new(false)),
        cellular: Arc::new(AtomicBool::new(false)),
        out: Arc::default(),
        fd,
        net,
        network: net_key(sh, net).map(Arc::from),
        path: match (stream.local_addr(), stream.peer_addr()) {
            (Ok(l), Ok(p)) => Some((l.ip().to_canonical(), p.ip().to_canonical())),
            _ => None,
        },
    })
}

impl Shared {
    /// Open a connection over network `net`: the client over its local network to the peer
    /// it connected to; the server to the client's address and listening port on the client's
    /// network `net` (plain TCP: the server opens none when it has TLS, see `accept_loop`).
    pub(super) async fn open(self: Arc<Self>, net: NetId) {
        let target = match self.peer {
            Some(peer) => self
                .networks
                .lock()
                .unwrap()
                .get(&net)
                .cloned()
                .map(|l| (peer, Some(l))),
            None => self
                .session()
                .peer_address(net)
                .map(|(a, port)| (SocketAddr::new(a, port), None)),
        };
        let Some((peer, local)) = target else {
            let mut s = self.session();
            s.open_failed(net, self.now());
            self.after(&mut s);
            return;
        };
        let over = local
            .as_ref()
            .map_or(format!("to the peer's network {net}"), |l| {
                format!("over {} ({})", l.name, l.addr)
            });
        let result = async {
            let stream = tokio::time::timeout(self.options.connect_timeout, async {
                match &local {
                    Some(l) => connect_on(l.addr, &l.name, peer).await,
                    None => TcpStream::connect(peer).await,
                }
            })
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))??;
            let entry = prepare(&stream, net, &self)?;
            let tls = local.as_ref().and(self.options.tls.as_ref());
            let (rd, wr) =
                tokio::time::timeout(self.options.connect_timeout, tls::client(stream, tls))
                    .await
                    .map_err(|_| {
                        io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out")
                    })??;
            Ok::<_, io::Error>((rd, wr, entry))
        }
        .await;
        match result {
            Ok((rd, wr, entry)) => {
                let conn = NEXT_CONN.fetch_add(1, Ordering::Relaxed);
                self.log(format!("connection {conn} {over} to {peer}"));
                self.conns.lock().unwrap().insert(conn, entry.clone());
                {
                    let mut s = self.session();
                    s.add_connection(conn, net, self.now());
                    self.recall_path(&mut s, conn, entry.path);
                    self.after(&mut s);
                }
                let dec = Decoder::new(self.options.config.wire);
                spawn_io(self.clone(), conn, rd, wr, dec, entry, None);
            }
            Err(e) => {
                let msg = format!("connect {over} failed: {e}");
                self.log(format!("{msg} (peer {peer})"));
                *self.last_open_error.lock().unwrap() = Some(msg);
                let mut s = self.session();
                s.open_failed(net, self.now());
                self.after(&mut s);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roam_emu::{Command, LinkCommand, SERVER_ADDR};
    use std::time::Instant;

    /// A network in an outage is joined promptly when it returns: a fresh SYN leaves every
    /// half second, where TCP alone backs off exponentially after a few retransmissions.
    #[test]
    fn connection_attempts_restart_during_an_outage() {
        let Some(emu) = roam_emu::testing::emulator_or_skip(&["wifi=rate=20mbit,delay=10ms"])
        else {
            return;
        };
        let server = emu.spawn_in_server(|| std::net::TcpListener::bind((SERVER_ADDR, 7400)));
        let listener = server.join().unwrap().unwrap().unwrap();
        let link = |action| {
            emu.command(&Command {
                link: "wifi".into(),
                action,
            })
            .unwrap()
        };
        link(LinkCommand::Down);
        let addr = emu.links()[0].client_addr;
        let client = emu.spawn_in_client(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let t0 = Instant::now();
            let r = rt.block_on(connect_on(
                addr.into(),
                "wifi",
                SocketAddr::from((SERVER_ADDR, 7400)),
            ));
            r.map(|_| t0.elapsed())
        });
        // Back at 6.1 s: one attempt retransmits its SYN on whole seconds here (7 s next); restarts
        // add the half seconds (6.5 s).
        std::thread::sleep(Duration::from_millis(6100));
        link(LinkCommand::Up);
        let took = client.join().unwrap().unwrap().unwrap();
        drop(listener);
        assert!(
            took < Duration::from_millis(6800),
            "connected {took:?} after the first attempt (the link returned at 6.1 s)"
        );
    }
}
