//! Traffic generators and probes that run inside the emulator's namespaces: the workloads of
//! `roam bench emu`, `roam drive` and the end-to-end tests.
//!
//! Each probe has a server half (run in the server namespace, listening on [`SERVER_ADDR`]) and
//! a client half (run in the client namespace, its socket bound to one link's address so policy
//! routing sends it through that link). Time stamps come from the emulator's [`Clock`], so a
//! probe's timeline lines up with the emulator's logs.

use crate::emulator::{Emulator, SERVER_ADDR};
use roam_core::{Clock, Time};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// IPPROTO_MPTCP.
pub const IPPROTO_MPTCP: i32 = 262;

fn sa(ip: Ipv4Addr, port: u16) -> SockAddr {
    SockAddr::from(SocketAddr::V4(SocketAddrV4::new(ip, port)))
}

/// A TCP (or MPTCP) listener on `SERVER_ADDR:port`; call from inside the server namespace.
pub fn listen(port: u16, mptcp: bool) -> io::Result<TcpListener> {
    let proto = if mptcp {
        Some(Protocol::from(IPPROTO_MPTCP))
    } else {
        None
    };
    let s = Socket::new(Domain::IPV4, Type::STREAM, proto)?;
    s.set_reuse_address(true)?;
    s.bind(&sa(SERVER_ADDR, port))?;
    s.listen(64)?;
    Ok(s.into())
}

/// Connect to `SERVER_ADDR:port` from `local` (a link's address); call from inside the client
/// namespace.
pub fn connect_from(
    local: Ipv4Addr,
    port: u16,
    mptcp: bool,
    timeout: Duration,
) -> io::Result<TcpStream> {
    let proto = if mptcp {
        Some(Protocol::from(IPPROTO_MPTCP))
    } else {
        None
    };
    let s = Socket::new(Domain::IPV4, Type::STREAM, proto)?;
    s.bind(&sa(local, 0))?;
    s.connect_timeout(&sa(SERVER_ADDR, port), timeout)?;
    s.set_tcp_nodelay(true)?;
    Ok(s.into())
}

/// Whether a socket error only means a timeout expired (the operation may be retried).
fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// A server that runs until its stop flag is set.
pub struct Server {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<io::Result<io::Result<()>>>>,
}

impl Server {
    /// Stop accepting and join.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn serve(
    emu: &Emulator,
    port: u16,
    mptcp: bool,
    per_conn: impl Fn(TcpStream, Arc<AtomicBool>) + Send + Sync + 'static,
) -> io::Result<Server> {
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let st = stop.clone();
    let per_conn = Arc::new(per_conn);
    let h = emu.spawn_in_server(move || -> io::Result<()> {
        let l = match listen(port, mptcp) {
            Ok(l) => {
                let _ = ready_tx.send(Ok(()));
                l
            }
            Err(e) => {
                let _ = ready_tx.send(Err(e));
                return Ok(());
            }
        };
        l.set_nonblocking(true)?;
        while !st.load(Ordering::Relaxed) {
            match l.accept() {
                Ok((c, _)) => {
                    c.set_nonblocking(false)?;
                    let _ = c.set_nodelay(true);
                    let f = per_conn.clone();
                    let st2 = st.clone();
                    std::thread::spawn(move || f(c, st2));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(2))
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    });
    ready_rx
        .recv()
        .map_err(|_| io::Error::other("server thread ended before listening"))??;
    Ok(Server {
        stop,
        handle: Some(h),
    })
}

/// A bulk-download server: every connection receives data as fast as TCP allows.
pub fn bulk_server(emu: &Emulator, port: u16, mptcp: bool) -> io::Result<Server> {
    bulk_server_with(emu, port, mptcp, None)
}

/// Set a socket's TCP congestion control (e.g. `cubic`).
pub fn set_congestion_control(s: &TcpStream, name: &str) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: setsockopt reads name.len() bytes from name.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr() as *const libc::c_void,
            name.len() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// [`bulk_server`] whose connections use congestion control `cc` (the host default if `None`).
pub fn bulk_server_with(
    emu: &Emulator,
    port: u16,
    mptcp: bool,
    cc: Option<&'static str>,
) -> io::Result<Server> {
    serve(emu, port, mptcp, move |mut c, stop| {
        if let Some(cc) = cc {
            if let Err(e) = set_congestion_control(&c, cc) {
                eprintln!("warning: cannot set congestion control {cc}: {e}");
            }
        }
        let buf = vec![0x5au8; 64 * 1024];
        let _ = c.set_write_timeout(Some(Duration::from_millis(200)));
        while !stop.load(Ordering::Relaxed) {
            match c.write(&buf) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if timed_out(&e) => {}
                Err(_) => break,
            }
        }
    })
}

/// An echo server: every request of up to 64 KiB is answered with the same bytes.
pub fn echo_server(emu: &Emulator, port: u16) -> io::Result<Server> {
    serve(emu, port, false, |mut c, stop| {
        let mut buf = vec![0u8; 65536];
        let _ = c.set_read_timeout(Some(Duration::from_millis(200)));
        while !stop.load(Ordering::Relaxed) {
            match c.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if c.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                Err(e) if timed_out(&e) => {}
                Err(_) => break,
            }
        }
    })
}

/// What a bulk download measured.
#[derive(Clone, Debug, Default)]
pub struct BulkResult {
    /// Application bytes received, per bin: (bin start, bytes).
    pub timeline: Vec<(Time, u64)>,
    /// Bin width.
    pub bin: Duration,
    /// Connections made (more than one when outages broke them).
    pub connections: u32,
}

impl BulkResult {
    /// Application bytes received in `[t0, t1)`.
    pub fn bytes_between(&self, t0: Time, t1: Time) -> u64 {
        self.timeline
            .iter()
            .filter(|(t, _)| *t >= t0 && *t < t1)
            .map(|(_, b)| b)
            .sum()
    }
    /// Total application bytes.
    pub fn total(&self) -> u64 {
        self.timeline.iter().map(|(_, b)| b).sum()
    }
}

/// Download from a [`bulk_server`] through the link with client address `local` until `until`
/// (emulator time), reconnecting when the connection breaks or stalls for `stall` (an outage).
pub fn bulk_download(
    clock: Clock,
    local: Ipv4Addr,
    port: u16,
    mptcp: bool,
    until: Time,
    stall: Duration,
) -> BulkResult {
    let bin = Duration::from_millis(100);
    let nbins = (until.as_nanos() / bin.as_nanos() as u64 + 1) as usize;
    let mut bins = vec![0u64; nbins];
    let mut buf = vec![0u8; 256 * 1024];
    let mut connections = 0;
    'outer: while clock.now() < until {
        let left = until - clock.now();
        let s = match connect_from(local, port, mptcp, left.min(Duration::from_secs(2))) {
            Ok(s) => s,
            Err(_) => {
                std::thread::sleep(Duration::from_millis(100).min(until - clock.now()));
                continue;
            }
        };
        connections += 1;
        let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
        let mut s = s;
        let mut last_data = Instant::now();
        loop {
            let now = clock.now();
            if now >= until {
                break 'outer;
            }
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let i = (clock.now().as_nanos() / bin.as_nanos() as u64) as usize;
                    if let Some(b) = bins.get_mut(i) {
                        *b += n as u64;
                    }
                    last_data = Instant::now();
                }
                Err(e) if timed_out(&e) => {
                    if last_data.elapsed() > stall {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
    }
    BulkResult {
        timeline: bins
            .into_iter()
            .enumerate()
            .map(|(i, b)| (Time(i as u64 * bin.as_nanos() as u64), b))
            .collect(),
        bin,
        connections,
    }
}

/// Round-trip samples from request/response exchanges with an [`echo_server`]: `count`
/// exchanges of `size` bytes, one every `interval`, through the link with address `local`.
/// Exchanges that get no answer within `timeout` are skipped (and the connection remade).
/// Returns (send time, RTT) pairs.
pub fn rtt_probe(
    clock: Clock,
    local: Ipv4Addr,
    port: u16,
    size: usize,
    interval: Duration,
    until: Time,
    timeout: Duration,
) -> Vec<(Time, Duration)> {
    let mut out = Vec::new();
    let req = vec![0xa5u8; size];
    let mut resp = vec![0u8; size];
    let mut conn: Option<TcpStream> = None;
    let mut next = clock.now();
    while clock.now() < until {
        let now = clock.now();
        if next > now {
            std::thread::sleep(next - now);
        }
        next = clock.now() + interval;
        if conn.is_none() {
            conn = connect_from(local, port, false, timeout).ok();
            if let Some(c) = &conn {
                let _ = c.set_read_timeout(Some(timeout));
            }
        }
        let Some(c) = conn.as_mut() else { continue };
        let t0 = Instant::now();
        let sent_at = clock.now();
        let ok = c.write_all(&req).is_ok() && c.read_exact(&mut resp).is_ok();
        if ok {
            out.push((sent_at, t0.elapsed()));
        } else {
            conn = None;
        }
    }
    out
}

/// Send UDP datagrams of `payload` bytes from the server namespace to a client that says hello
/// on `port`, paced at `rate_bps` (IP-level bits per second), until `until`.
pub fn udp_flood_server(
    emu: &Emulator,
    port: u16,
    payload: usize,
    rate_bps: f64,
    until: Time,
) -> io::Result<JoinHandle<io::Result<io::Result<()>>>> {
    let clock = emu.clock();
    Ok(emu.spawn_in_server(move || -> io::Result<()> {
        let s = UdpSocket::bind(SocketAddrV4::new(SERVER_ADDR, port))?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut hello = [0u8; 16];
        let (_, peer) = s.recv_from(&mut hello)?;
        let buf = vec![0u8; payload];
        let gap = (payload + 28) as f64 * 8.0 / rate_bps;
        let start = Instant::now();
        let mut sent = 0u64;
        while clock.now() < until {
            let due = start + Duration::from_secs_f64(sent as f64 * gap);
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            let _ = s.send_to(&buf, peer);
            sent += 1;
        }
        Ok(())
    }))
}

/// Receive a [`udp_flood_server`]'s datagrams through the link with address `local`; returns
/// (arrival time, IP-level bytes) per datagram.
pub fn udp_flood_client(
    clock: Clock,
    local: Ipv4Addr,
    port: u16,
    until: Time,
) -> io::Result<Vec<(Time, u32)>> {
    let s = UdpSocket::bind(SocketAddrV4::new(local, 0))?;
    s.connect(SocketAddrV4::new(SERVER_ADDR, port))?;
    s.set_read_timeout(Some(Duration::from_millis(100)))?;
    let mut out = Vec::with_capacity(1 << 16);
    let mut buf = vec![0u8; 65536];
    let mut got_any = false;
    while clock.now() < until {
        if !got_any {
            let _ = s.send(b"hello");
        }
        match s.recv(&mut buf) {
            Ok(n) => {
                got_any = true;
                out.push((clock.now(), n as u32 + 28));
            }
            Err(e) if timed_out(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// Median of durations, in ms.
pub fn median_ms(v: &[Duration]) -> f64 {
    let mut ms: Vec<f64> = v.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    roam_trace::stats::median(&mut ms)
}
