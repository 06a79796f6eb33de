//! Carrying a TCP connection's bytes over a multi-socket and back (closed when idle), bounding
//! how many connections are carried at once ([`Slots`], [`PerSource`]), and reading under a
//! deadline ([`recv_line`], [`Deadlined`]).

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::Error;
use crate::proto::Label;
use crate::runtime::blocking::MultiSocket;
/// Bytes read from a TCP connection at a time (each read becomes one IROB).
const READ_CHUNK: usize = 64 * 1024;

/// At most `max` of something at once: a slot is held while its guard ([`Slot`]) lives.
#[derive(Clone)]
pub(super) struct Slots {
    used: Arc<AtomicUsize>,
    max: usize,
}

/// One of [`Slots`], given back when dropped.
pub(super) struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Slots {
    pub(super) fn new(max: usize) -> Slots {
        Slots {
            used: Arc::new(AtomicUsize::new(0)),
            max,
        }
    }

    /// The limit.
    pub(super) fn max(&self) -> usize {
        self.max
    }

    /// A slot, or `None` if all `max` are held.
    pub(super) fn take(&self) -> Option<Slot> {
        let mut n = self.used.load(Ordering::SeqCst);
        loop {
            if n >= self.max {
                return None;
            }
            match self
                .used
                .compare_exchange(n, n + 1, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return Some(Slot(self.used.clone())),
                Err(now) => n = now,
            }
        }
    }
}

/// At most `max` connections at once from one source: an IPv4 address, or an IPv6 /64 (what one
/// host of an IPv6 network has to choose from). A slot is held while its guard lives.
#[derive(Clone)]
pub(super) struct PerSource {
    used: Arc<Mutex<HashMap<IpAddr, usize>>>,
    max: usize,
}

/// One of [`PerSource`]'s slots, given back when dropped.
pub(super) struct SourceSlot {
    used: Arc<Mutex<HashMap<IpAddr, usize>>>,
    source: IpAddr,
}

impl Drop for SourceSlot {
    fn drop(&mut self) {
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = used.get_mut(&self.source) {
            *n -= 1;
            if *n == 0 {
                used.remove(&self.source);
            }
        }
    }
}

impl PerSource {
    pub(super) fn new(max: usize) -> PerSource {
        PerSource {
            used: Arc::default(),
            max,
        }
    }

    /// The limit.
    pub(super) fn max(&self) -> usize {
        self.max
    }

    /// The source `ip` counts as: its IPv4 address (an IPv4-mapped one too), or its /64.
    fn source(ip: IpAddr) -> IpAddr {
        match super::allow::canonical(ip) {
            IpAddr::V6(v6) => IpAddr::V6((u128::from(v6) & !(u64::MAX as u128)).into()),
            v4 => v4,
        }
    }

    /// A slot for a connection from `ip`, or `None` if its source holds `max` already.
    pub(super) fn take(&self, ip: IpAddr) -> Option<SourceSlot> {
        let source = Self::source(ip);
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        let n = used.entry(source).or_insert(0);
        if *n >= self.max {
            return None;
        }
        *n += 1;
        Some(SourceSlot {
            used: self.used.clone(),
            source,
        })
    }
}

/// When bytes last moved either way on a carried connection.
struct Activity {
    start: Instant,
    /// Milliseconds from `start`.
    last: AtomicU64,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            start: Instant::now(),
            last: AtomicU64::new(0),
        }
    }

    fn touch(&self) {
        let now = self.start.elapsed().as_millis() as u64;
        self.last.fetch_max(now, Ordering::Relaxed);
    }

    fn idle_for(&self) -> Duration {
        let last = Duration::from_millis(self.last.load(Ordering::Relaxed));
        self.start.elapsed().saturating_sub(last)
    }
}

/// How often an idle connection is looked at: a quarter of the timeout, from 10 ms to 1 s.
fn tick(idle: Duration) -> Duration {
    (idle / 4).clamp(Duration::from_millis(10), Duration::from_secs(1))
}

/// Copy a TCP stream into the multi-socket as IROBs of `label` until end of stream, then close
/// the multi-socket's sending side (its `Goodbye` tells the peer). Gives up without closing
/// when `stop` is set or the connection has been idle for `idle` (the caller aborts then).
fn tcp_to_ms(
    mut tcp: TcpStream,
    ms: &MultiSocket,
    label: Label,
    activity: &Activity,
    stop: &AtomicBool,
    idle: Duration,
) {
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        match tcp.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                activity.touch();
                if ms.send(label, buf[..n].to_vec(), None).is_err() {
                    return;
                }
                activity.touch();
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                if activity.idle_for() >= idle {
                    return;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    ms.close(Duration::from_secs(60));
}

/// How the multi-socket-to-TCP direction ended.
#[derive(PartialEq, Eq)]
enum Down {
    /// The peer closed its side; the stream's write side is shut down.
    Closed,
    /// The multi-socket failed or the stream could not be written.
    Broken,
    /// Nothing moved either way for the idle timeout.
    Idle,
}

/// Copy what the multi-socket delivers into a TCP stream until the peer has closed its side
/// (then shut down the stream's write side), something broke, or the connection idled.
fn ms_to_tcp(ms: &MultiSocket, mut tcp: &TcpStream, activity: &Activity, idle: Duration) -> Down {
    loop {
        match ms.recv_timeout(tick(idle)) {
            Ok(Some(d)) => {
                activity.touch();
                // The stream's write timeout is `idle`: a reader that stops reading idles too.
                if let Err(e) = tcp.write_all(&d.data) {
                    return match e.kind() {
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Down::Idle,
                        _ => Down::Broken,
                    };
                }
                activity.touch();
            }
            Ok(None) if ms.peer_closed() => {
                let _ = tcp.shutdown(Shutdown::Write);
                return Down::Closed;
            }
            Ok(None) => {
                if activity.idle_for() >= idle {
                    return Down::Idle;
                }
            }
            Err(_) => return Down::Broken,
        }
    }
}

/// Carry `tcp` over `ms` both ways, sending as `label`, until both sides have closed, or until
/// nothing has moved either way for `idle`: then both are reset and [`Error::Idle`] returned.
pub(super) fn pump(
    ms: MultiSocket,
    tcp: TcpStream,
    label: Label,
    idle: Duration,
) -> Result<(), Error> {
    let activity = Arc::new(Activity::new());
    let stop = Arc::new(AtomicBool::new(false));
    // The socket's timeouts, shared by both handles: reads wake up to look at the idle time,
    // writes give up after it.
    tcp.set_read_timeout(Some(tick(idle)))?;
    tcp.set_write_timeout(Some(idle))?;
    let up = tcp.try_clone()?;
    let t = {
        let (ms, activity, stop) = (ms.clone(), activity.clone(), stop.clone());
        std::thread::spawn(move || tcp_to_ms(up, &ms, label, &activity, &stop, idle))
    };
    let mut down = ms_to_tcp(&ms, &tcp, &activity, idle);
    // The other direction may go on (a program still sending after its peer closed): watch it.
    while down == Down::Closed && !t.is_finished() {
        if activity.idle_for() >= idle {
            down = Down::Idle;
        } else {
            std::thread::sleep(tick(idle));
        }
    }
    if down != Down::Closed {
        stop.store(true, Ordering::SeqCst);
        ms.abort(if down == Down::Idle {
            "idle connection closed"
        } else {
            "the connection ended"
        });
        let _ = tcp.shutdown(Shutdown::Both);
    }
    let _ = t.join();
    match down {
        Down::Idle => Err(Error::Idle { after: idle }),
        _ => Ok(()),
    }
}

/// The next IROB, whole, of at most `max` bytes, as text (the relay's challenge, the request,
/// the answer), by `deadline`: a peer that sends it a byte at a time gets no longer.
pub(super) fn recv_line(
    ms: &MultiSocket,
    max: usize,
    deadline: Instant,
    what: &'static str,
    after: Duration,
) -> Result<String, Error> {
    let mut line = Vec::new();
    let mut irob = None;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Error::Timeout { what, after });
        }
        let Some(d) = ms.recv_timeout(left)? else {
            if ms.peer_closed() {
                return Err(Error::ClosedEarly);
            }
            continue;
        };
        // One IROB: another one's bytes before its end are not part of the line.
        if *irob.get_or_insert(d.irob) != d.irob {
            return Err(Error::NotARequest {
                line: String::from_utf8_lossy(&line).into_owned(),
            });
        }
        line.extend_from_slice(&d.data);
        if line.len() > max {
            return Err(Error::RequestTooLong { max });
        }
        if d.end {
            return String::from_utf8(line).map_err(|_| Error::RequestNotText);
        }
    }
}

/// A TCP stream whose reads and writes all end by one deadline (a program's SOCKS5
/// negotiation): each call waits only for what is left, then fails with `TimedOut`.
pub(super) struct Deadlined<'a> {
    pub(super) stream: &'a TcpStream,
    pub(super) deadline: Instant,
}

impl Deadlined<'_> {
    fn left(&self) -> io::Result<Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        Ok(left)
    }

    /// `WouldBlock` (what a socket timeout gives on Linux) as `TimedOut`.
    fn timed_out(e: io::Error) -> io::Error {
        if e.kind() == io::ErrorKind::WouldBlock {
            io::ErrorKind::TimedOut.into()
        } else {
            e
        }
    }
}

impl Read for Deadlined<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.set_read_timeout(Some(self.left()?))?;
        self.stream.read(buf).map_err(Self::timed_out)
    }
}

impl Write for Deadlined<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.set_write_timeout(Some(self.left()?))?;
        self.stream.write(buf).map_err(Self::timed_out)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_bounded_and_given_back() {
        let s = Slots::new(2);
        let a = s.take().unwrap();
        let _b = s.take().unwrap();
        assert!(s.take().is_none());
        drop(a);
        assert!(s.clone().take().is_some());
    }

    #[test]
    fn per_source_slots_count_ipv4_hosts_and_ipv6_64s() {
        let s = PerSource::new(2);
        let ip = |t: &str| t.parse::<IpAddr>().unwrap();
        let a = s.take(ip("10.0.0.1")).unwrap();
        let _b = s.take(ip("::ffff:10.0.0.1")).unwrap();
        assert!(s.take(ip("10.0.0.1")).is_none());
        assert!(s.take(ip("10.0.0.2")).is_some());
        drop(a);
        assert!(s.take(ip("10.0.0.1")).is_some());
        let _c = s.take(ip("2001:db8::1")).unwrap();
        let _d = s.take(ip("2001:db8::ffff:2")).unwrap();
        assert!(s.take(ip("2001:db8::3")).is_none(), "one /64 is one source");
        assert!(s.take(ip("2001:db8:0:1::1")).is_some());
    }
}
