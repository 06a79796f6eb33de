//! Carrying a TCP connection's bytes over a multi-socket and back (closed when idle), bounding
//! how many connections are carried at once ([`Slots`], [`PerSource`]), and reading under a
//! deadline ([`recv_line`], [`Deadlined`]).

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::Error;
use crate::proto::Label;
use crate::runtime::blocking::MultiSocket;
use crate::runtime::NetworkView;
/// Bytes read from a TCP connection at a time (each read becomes one IROB).
const READ_CHUNK: usize = 64 * 1024;
/// Most bytes read from the stream at once for a paced codec ([`Codec::paced`]): what it
/// makes of one read is made at once, so a smaller read lets the peer's feedback reach it
/// sooner.
const PACED_READ_CHUNK: usize = 8 * 1024;

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

/// What a carried connection does to its bytes between the TCP stream and the multi-socket:
/// nothing ([`Plain`]), or one end of asymmetric caching (`super::dedup`).
pub(super) trait Codec: Send + Sync {
    /// Bytes read from the TCP stream (`more`: the read filled the buffer, so the stream may
    /// have more at once; an empty `data` with `more` false: the stream paused): the IROBs to
    /// send.
    fn outgoing(&self, data: &[u8], more: bool, send: &mut Vec<Vec<u8>>) -> Result<(), Error>;
    /// One delivery's bytes from the multi-socket (`start`: the first of an IROB; a
    /// connection's IROBs arrive one after another, each depending on all before it): what to
    /// write to the TCP stream (shared, not copied, where they pass as they are), and IROBs
    /// to send back.
    fn incoming(
        &self,
        start: bool,
        data: Bytes,
        write: &mut Vec<Bytes>,
        back: &mut Vec<Vec<u8>>,
    ) -> Result<(), Error>;
    /// A paced codec's pacing waits on its own count ([`Codec::ahead`]): IROBs asking the
    /// peer to acknowledge now (asymmetric caching's source: its phone otherwise holds small
    /// acknowledgements back for its next message up).
    fn waiting(&self, _send: &mut Vec<Vec<u8>>) -> Result<(), Error> {
        Ok(())
    }
    /// The TCP stream ended (its last bytes went through `outgoing`): the last IROBs to send
    /// before the sending side closes (asymmetric caching's source: a request that the phone
    /// acknowledge at once, so that the codec settles).
    fn ended(&self, _send: &mut Vec<Vec<u8>>) -> Result<(), Error> {
        Ok(())
    }
    /// The connection ended (either way).
    fn close(&self) {}
    /// Whether what `outgoing` makes must be made just in time: no further than [`lead`]
    /// ahead of what the peer has acknowledged (asymmetric caching's source, whose feedback
    /// can only replace bytes it has not yet encoded).
    fn paced(&self) -> bool {
        false
    }
    /// For a paced codec, the bytes of the stream `outgoing` has made that the peer has not
    /// yet acknowledged through its own messages (asymmetric caching's source: its records'
    /// bytes as they stand for the stream). [`pace`] holds these within the lead as it does
    /// the multi-socket's unacknowledged bytes: a record of names is far shorter than what it
    /// stands for, and a source paced on the wire alone would run ahead of the phone by many
    /// times its lead wherever it finds what the phone holds, past where the phone's
    /// advertisements reach.
    fn ahead(&self) -> u64 {
        0
    }
    /// The IROBs `incoming` gave to send back, made ready for the wire (compressed into the
    /// same stream as what `outgoing` makes, say). Called just before they are sent; when the
    /// codec is [`Codec::ordered`], with the connection's send lock held ([`Sending`]), so
    /// what this makes reaches the peer in the order it was made among what `outgoing` makes.
    fn prepare_back(&self, _back: &mut Vec<Vec<u8>>) -> Result<(), Error> {
        Ok(())
    }
    /// Whether what `outgoing` makes and what `prepare_back` makes are one sequence whose
    /// order the peer depends on (one compressed stream fed from both directions' threads, a
    /// header that must come before anything else): each is then made and sent under the
    /// connection's send lock, so the order they were made in is the order they are sent in,
    /// and the multi-socket delivers a connection's IROBs in the order they were sent (each
    /// depends on all before it, whatever its label).
    fn ordered(&self) -> bool {
        false
    }
    /// Whether the peer can no longer need anything sent back (asymmetric caching's source:
    /// every record a repair might be asked for has been acknowledged). The sending side of
    /// the multi-socket is closed at the stream's end only once it is (or the peer closed,
    /// or the connection idled): after the close no IROB can be sent, repairs included.
    fn settled(&self) -> bool {
        true
    }
}

/// What the two directions of a carried connection share about sending on its multi-socket.
///
/// Two threads send on one multi-socket: `tcp_to_ms` what the codec makes of the stream,
/// `ms_to_tcp` what it gives back (dedup's feedback, the source's repairs). The multi-socket
/// numbers IROBs in the order `send` is called, not in the order a codec made them, so a
/// codec whose output is one ordered sequence ([`Codec::ordered`]) has each batch made and
/// sent under `lock`. Its cost: `ms_to_tcp`, when it has something to send back, waits while
/// a batch of the stream is sent (which may wait for room in the multi-socket's buffer), as it
/// would wait for that room for its own send when the buffer is full; only ordered codecs pay
/// it.
#[derive(Default)]
struct Sending {
    /// Held, for an ordered codec, while its IROBs are made and sent, either way.
    lock: Mutex<()>,
    /// `ms_to_tcp` is between handing a delivery to the codec and having sent what it gave
    /// back: a repair made then is not yet sent ([`settle`]).
    answering: AtomicBool,
}

impl Sending {
    /// The lock, if `codec`'s output must keep its order.
    fn ordered(&self, codec: &dyn Codec) -> Option<std::sync::MutexGuard<'_, ()>> {
        codec.ordered().then(|| lock(&self.lock))
    }
}

/// The least a paced codec may run ahead of the peer's acknowledgements.
const MIN_LEAD: u64 = 16 << 10;
/// How often a paced sender looks whether the peer has caught up.
const PACE_POLL: Duration = Duration::from_millis(2);

/// How far a paced codec may run ahead of the peer's acknowledgements on `ms`: [`lead_of`]
/// its networks' estimates.
fn lead(ms: &MultiSocket) -> u64 {
    lead_of(&ms.estimates())
}

/// How far a paced codec may run ahead of the peer's acknowledgements over networks
/// estimated as `estimates`: twice the sum of their bandwidth-delay products (enough to keep
/// every network busy), at least [`MIN_LEAD`].
fn lead_of(estimates: &[NetworkView]) -> u64 {
    let bdp: f64 = estimates
        .iter()
        .filter_map(|n| Some(n.bandwidth?.bytes_per_sec() * n.rtt?.as_secs_f64()))
        .sum();
    ((2.0 * bdp) as u64).max(MIN_LEAD)
}

/// The most stream bytes a paced codec has made beyond what the peer has acknowledged, over
/// networks estimated as `estimates`: its lead ([`lead_of`]), which it looks at before each
/// read, and one read ([`PACED_READ_CHUNK`]). Asymmetric caching's phone starts its
/// advertisements that far ahead (the thesis's δ, `super::dedup`): whatever it names nearer
/// has been encoded by the time the advertisement arrives.
pub(super) fn held(estimates: &[NetworkView]) -> u64 {
    lead_of(estimates) + PACED_READ_CHUNK as u64
}

/// Wait until what `ms` has not had acknowledged, and what `codec` has made that the peer
/// has not acknowledged ([`Codec::ahead`]), are both within [`lead`], `stop` is set, or
/// `idle` has passed (a dead session's next send reports it). When the codec's own count
/// holds it back, `ask` is called once: the peer acknowledges on request
/// ([`Codec::waiting`]); false from it ends the wait (the codec or the multi-socket failed).
fn pace(
    ms: &MultiSocket,
    codec: &dyn Codec,
    stop: &AtomicBool,
    idle: Duration,
    ask: &mut dyn FnMut() -> bool,
) {
    // The lead is looked at again each time: the estimates grow as the connection starts.
    let end = Instant::now() + idle;
    let mut asked = false;
    while !stop.load(Ordering::SeqCst) && Instant::now() < end {
        let lead = lead(ms);
        let ahead = codec.ahead() > lead;
        if ms.unacknowledged() <= lead && !ahead {
            return;
        }
        if ahead && !asked {
            asked = true;
            if !ask() {
                return;
            }
        }
        std::thread::sleep(PACE_POLL);
    }
}

/// `m`'s guard, even if a thread panicked holding it (what it guards stays usable: counters,
/// caches whose every step leaves them whole).
pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Bytes as they are.
pub(super) struct Plain;

impl Codec for Plain {
    fn outgoing(&self, data: &[u8], _more: bool, send: &mut Vec<Vec<u8>>) -> Result<(), Error> {
        if !data.is_empty() {
            send.push(data.to_vec());
        }
        Ok(())
    }

    fn incoming(
        &self,
        _start: bool,
        data: Bytes,
        write: &mut Vec<Bytes>,
        _back: &mut Vec<Vec<u8>>,
    ) -> Result<(), Error> {
        write.push(data);
        Ok(())
    }
}

/// Send `irobs` as `label`; false if the multi-socket failed.
fn send_all(ms: &MultiSocket, label: Label, irobs: &mut Vec<Vec<u8>>) -> bool {
    irobs.drain(..).all(|b| ms.send(label, b, None).is_ok())
}

/// What `codec` makes of `data` from the stream, sent as `label` (made and sent under the send
/// lock when the codec is ordered); false if the codec or the multi-socket failed.
fn forward(
    ms: &MultiSocket,
    label: Label,
    codec: &dyn Codec,
    sending: &Sending,
    data: &[u8],
    more: bool,
    send: &mut Vec<Vec<u8>>,
) -> bool {
    let _order = sending.ordered(codec);
    codec.outgoing(data, more, send).is_ok() && send_all(ms, label, send)
}

/// What `codec` sends at the stream's end ([`Codec::ended`]), as [`forward`] sends; false if
/// the codec or the multi-socket failed.
fn end(
    ms: &MultiSocket,
    label: Label,
    codec: &dyn Codec,
    sending: &Sending,
    send: &mut Vec<Vec<u8>>,
) -> bool {
    let _order = sending.ordered(codec);
    codec.ended(send).is_ok() && send_all(ms, label, send)
}

/// Wait until nothing more can need sending back, `stop` is set or the connection has idled;
/// whether the sending side may close now.
///
/// Nothing more can need sending back once the codec is settled or the peer has closed (it
/// asks for nothing more) and, looked at after, `ms_to_tcp` is not `answering`: from the
/// moment either held, nothing new asks for a repair (the stream has ended, so nothing new is
/// kept), and whatever `ms_to_tcp` was answering then has been sent once it no longer is.
fn settle(
    ms: &MultiSocket,
    codec: &dyn Codec,
    sending: &Sending,
    activity: &Activity,
    stop: &AtomicBool,
    idle: Duration,
) -> bool {
    loop {
        let done = ms.peer_closed() || codec.settled();
        if done && !sending.answering.load(Ordering::SeqCst) {
            return true;
        }
        if stop.load(Ordering::SeqCst) || activity.idle_for() >= idle {
            return false;
        }
        std::thread::sleep(PACE_POLL);
    }
}

/// Copy a TCP stream into the multi-socket as IROBs of `label` (through `codec`) until end of
/// stream, then, once the codec is settled ([`settle`]), close the multi-socket's sending side
/// (its `Goodbye` tells the peer). Gives up without closing when `stop` is set, the codec
/// fails, or the connection has been idle for `idle` (the caller aborts then).
#[allow(clippy::too_many_arguments)]
fn tcp_to_ms(
    mut tcp: TcpStream,
    ms: &MultiSocket,
    label: Label,
    codec: &dyn Codec,
    sending: &Sending,
    activity: &Activity,
    stop: &AtomicBool,
    idle: Duration,
) {
    let mut buf = vec![
        0u8;
        if codec.paced() {
            PACED_READ_CHUNK
        } else {
            READ_CHUNK
        }
    ];
    let mut send = Vec::new();
    let mut paused = true;
    loop {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        match tcp.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                activity.touch();
                paused = n < buf.len();
                if !forward(ms, label, codec, sending, &buf[..n], !paused, &mut send) {
                    return;
                }
                activity.touch();
                if codec.paced() {
                    pace(ms, codec, stop, idle, &mut || {
                        let _order = sending.ordered(codec);
                        codec.waiting(&mut send).is_ok() && send_all(ms, label, &mut send)
                    });
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                if !paused {
                    paused = true;
                    if !forward(ms, label, codec, sending, &[], false, &mut send) {
                        return;
                    }
                }
                if activity.idle_for() >= idle {
                    return;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    if !forward(ms, label, codec, sending, &[], false, &mut send)
        || !end(ms, label, codec, sending, &mut send)
        || !settle(ms, codec, sending, activity, stop, idle)
    {
        return;
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
fn ms_to_tcp(
    ms: &MultiSocket,
    mut tcp: &TcpStream,
    codec: &dyn Codec,
    sending: &Sending,
    activity: &Activity,
    idle: Duration,
) -> Down {
    let (mut write, mut back) = (Vec::new(), Vec::new());
    loop {
        match ms.recv_timeout(tick(idle)) {
            Ok(Some(d)) => {
                activity.touch();
                write.clear();
                sending.answering.store(true, Ordering::SeqCst);
                let answered = codec
                    .incoming(d.offset == 0, d.data, &mut write, &mut back)
                    .is_ok()
                    && (back.is_empty() || {
                        let _order = sending.ordered(codec);
                        codec.prepare_back(&mut back).is_ok()
                            && send_all(ms, Label::ForegroundSmall, &mut back)
                    });
                sending.answering.store(false, Ordering::SeqCst);
                if !answered {
                    return Down::Broken;
                }
                // The stream's write timeout is `idle`: a reader that stops reading idles too.
                if let Err(e) = write.iter().try_for_each(|b| tcp.write_all(b)) {
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

/// Carry `tcp` over `ms` both ways through `codec`, sending as `label` (what the codec sends
/// back, such as dedup's feedback, as foreground-small), until both sides have closed, or
/// until nothing has moved either way for `idle`: then both are reset and [`Error::Idle`]
/// returned.
pub(super) fn pump(
    ms: MultiSocket,
    tcp: TcpStream,
    label: Label,
    idle: Duration,
    codec: Arc<dyn Codec>,
) -> Result<(), Error> {
    let activity = Arc::new(Activity::new());
    let stop = Arc::new(AtomicBool::new(false));
    let sending = Arc::new(Sending::default());
    // The socket's timeouts, shared by both handles: reads wake up to look at the idle time,
    // writes give up after it.
    tcp.set_read_timeout(Some(tick(idle)))?;
    tcp.set_write_timeout(Some(idle))?;
    let up = tcp.try_clone()?;
    let t = {
        let (ms, activity, stop, codec, sending) = (
            ms.clone(),
            activity.clone(),
            stop.clone(),
            codec.clone(),
            sending.clone(),
        );
        std::thread::spawn(move || {
            tcp_to_ms(up, &ms, label, &*codec, &sending, &activity, &stop, idle)
        })
    };
    let mut down = ms_to_tcp(&ms, &tcp, &*codec, &sending, &activity, idle);
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
    codec.close();
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
