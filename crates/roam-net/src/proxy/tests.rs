//! Attacks on a relay and a proxy on loopback (issue 43): each test plays the attacker and
//! checks the attack gets nothing, or no longer than its limit.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use super::compress::{Dictionaries, DictionaryConfig};
use super::*;
use crate::proto::{Deps, Label, NetKind};
use crate::runtime::blocking::MultiSocket;
use crate::runtime::{LocalNetwork, Networks, Options, Tls};

/// Multi-socket options of a client on loopback.
fn lo() -> Options {
    Options {
        networks: Networks::Explicit(vec![LocalNetwork {
            name: "lo".into(),
            addr: Ipv4Addr::LOCALHOST.into(),
            kind: NetKind::default(),
        }]),
        connect_timeout: Duration::from_secs(3),
        ..Options::default()
    }
}

fn key() -> Key {
    Key::from_bytes([7; 32])
}

fn rules(allow: &[&str]) -> Vec<Allow> {
    allow.iter().map(|s| s.parse().unwrap()).collect()
}

/// A relay on loopback, running; what it reports comes through `events`.
struct Running {
    addr: SocketAddr,
    events: mpsc::Receiver<String>,
}

impl Running {
    /// The first report within `within` that contains `text`.
    fn reported(&self, text: &str, within: Duration) -> Option<String> {
        let end = Instant::now() + within;
        while let Ok(e) = self
            .events
            .recv_timeout(end.saturating_duration_since(Instant::now()))
        {
            if e.contains(text) {
                return Some(e);
            }
        }
        None
    }
}

fn relay_with(allow: &[&str], f: impl FnOnce(&mut RelayConfig)) -> Running {
    let mut c = RelayConfig::new("127.0.0.1:0".parse().unwrap(), rules(allow), key());
    f(&mut c);
    let relay = Relay::bind(c).unwrap();
    let addr = relay.local_addr();
    let (tx, events) = mpsc::channel();
    let tx = Mutex::new(tx);
    std::thread::spawn(move || {
        relay.run(move |e| {
            let _ = tx.lock().unwrap().send(e.to_string());
        })
    });
    Running { addr, events }
}

/// A SOCKS5 proxy on loopback to `relay`, running.
fn proxy_with(relay: SocketAddr, f: impl FnOnce(&mut ProxyConfig)) -> SocketAddr {
    let mut c = ProxyConfig::new("127.0.0.1:0".parse().unwrap(), relay, Some(key()));
    c.options = lo();
    f(&mut c);
    let p = Proxy::bind(c).unwrap();
    let addr = p.local_addr().unwrap();
    std::thread::spawn(move || p.run(|_| {}));
    addr
}

/// A TCP server on loopback that echoes, counting the connections it accepted; each
/// accepted stream also goes to the receiver.
fn target() -> (SocketAddr, Arc<AtomicUsize>, mpsc::Receiver<TcpStream>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let n = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel();
    let count = n.clone();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            count.fetch_add(1, Ordering::SeqCst);
            let _ = tx.send(s.try_clone().unwrap());
            std::thread::spawn(move || {
                let mut s = s;
                let mut buf = [0u8; 4096];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 || s.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    (addr, n, rx)
}

/// Wait (up to 2 s) until the target has accepted `n` connections, and check it has no more.
fn wait_for(accepted: &AtomicUsize, n: usize) {
    let end = Instant::now() + Duration::from_secs(2);
    while accepted.load(Ordering::SeqCst) < n && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(accepted.load(Ordering::SeqCst), n);
}

/// A SOCKS5 `CONNECT` through `proxy` to the address in SOCKS5's form (`ATYP ADDR PORT`): the
/// stream and the proxy's reply code (`None` if it closed without one).
fn socks(proxy: SocketAddr, dest: &[u8]) -> (TcpStream, Option<u8>) {
    let mut s = TcpStream::connect(proxy).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    s.write_all(&[5, 1, 0]).unwrap();
    let mut m = [0u8; 2];
    s.read_exact(&mut m).unwrap();
    assert_eq!(m, [5, 0]);
    let mut req = vec![5, 1, 0];
    req.extend_from_slice(dest);
    s.write_all(&req).unwrap();
    let mut r = [0u8; 10];
    let code = s.read_exact(&mut r).ok().map(|_| r[1]);
    (s, code)
}

fn v4(a: SocketAddr) -> Vec<u8> {
    let SocketAddr::V4(a) = a else { panic!() };
    let mut v = vec![1];
    v.extend_from_slice(&a.ip().octets());
    v.extend_from_slice(&a.port().to_be_bytes());
    v
}

fn mapped(a: SocketAddr) -> Vec<u8> {
    let SocketAddr::V4(a) = a else { panic!() };
    let mut v = vec![4];
    v.extend_from_slice(&a.ip().to_ipv6_mapped().octets());
    v.extend_from_slice(&a.port().to_be_bytes());
    v
}

fn name(host: &str, port: u16) -> Vec<u8> {
    let mut v = vec![3, host.len() as u8];
    v.extend_from_slice(host.as_bytes());
    v.extend_from_slice(&port.to_be_bytes());
    v
}

/// The relay's next line that is not its challenge, within `within` (`None`: none came).
fn answer(ms: &MultiSocket, within: Duration) -> Option<String> {
    let end = Instant::now() + within;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        let d = ms.recv_timeout(left).ok()??;
        let line = String::from_utf8_lossy(&d.data).into_owned();
        if !line.starts_with("roam-relay 2 challenge") {
            return Some(line);
        }
    }
}

/// The relay's challenge.
fn challenge(ms: &MultiSocket) -> [u8; 32] {
    let d = ms.recv_timeout(Duration::from_secs(5)).unwrap().unwrap();
    let line = String::from_utf8(d.data.to_vec()).unwrap();
    auth::unhex(line.strip_prefix("roam-relay 2 challenge ").unwrap()).unwrap()
}

/// Finding 1. A stranger who reaches the relay's port asks for a target --allow permits: in
/// today's protocol, without a proof, with a proof under another key, and replaying a request
/// recorded from a proxy that has the key. It gets no `ok`, and the target is never connected
/// to. (Before: the first attempt was answered `ok` and connected.)
#[test]
fn a_stranger_without_the_key_gets_nothing_from_the_relay() {
    let (t, accepted, _) = target();
    let r = relay_with(&[&t.ip().to_string()], |_| {});
    let ask = |line: String| {
        let ms = MultiSocket::connect(r.addr, lo()).unwrap();
        ms.send(Label::ForegroundSmall, line.into_bytes(), None)
            .unwrap();
        answer(&ms, Duration::from_secs(5))
    };
    let a = ask(format!("roam-relay 1 {t} foreground-small"));
    assert!(!a.as_deref().unwrap_or("").starts_with("ok"), "{a:?}");
    let nonce = auth::hex(&[1; 32]);
    let a = ask(format!("roam-relay 2 {t} fg-small {nonce} -"));
    assert!(!a.as_deref().unwrap_or("").starts_with("ok"), "{a:?}");
    // A proof under another key, and a replayed one: each needs this multi-socket's challenge.
    let other = Key::from_bytes([8; 32]);
    let ms = MultiSocket::connect(r.addr, lo()).unwrap();
    let c = challenge(&ms);
    let forged = auth::hex(&other.request_proof(&c, &[1; 32], &t.to_string(), "fg-small"));
    ms.send(
        Label::ForegroundSmall,
        format!("roam-relay 2 {t} fg-small {nonce} {forged}").into_bytes(),
        None,
    )
    .unwrap();
    let a = answer(&ms, Duration::from_secs(5));
    assert!(!a.as_deref().unwrap_or("").starts_with("ok"), "{a:?}");
    assert!(r
        .reported("did not prove", Duration::from_secs(5))
        .is_some());
    // A legitimate request, recorded, then replayed on another multi-socket.
    let ms = MultiSocket::connect(r.addr, lo()).unwrap();
    let c = challenge(&ms);
    let proof = auth::hex(&key().request_proof(&c, &[1; 32], &t.to_string(), "fg-small"));
    let recorded = format!("roam-relay 2 {t} fg-small {nonce} {proof}");
    ms.send(Label::ForegroundSmall, recorded.clone().into_bytes(), None)
        .unwrap();
    let a = answer(&ms, Duration::from_secs(5)).unwrap();
    assert!(a.starts_with("ok "), "the legitimate request: {a}");
    wait_for(&accepted, 1);
    let a = ask(recorded);
    assert!(
        !a.as_deref().unwrap_or("").starts_with("ok"),
        "replayed: {a:?}"
    );
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "only the legitimate request reached the target"
    );
}

/// Finding 1. A relay without a key does not start unless told to serve anyone; a proxy that
/// has a key does not trust a relay that cannot prove it (an impostor); the proxy's key file
/// check is in `auth`. (Before: the relay started without any key.)
#[test]
fn a_relay_without_a_key_refuses_to_start_and_an_impostor_is_not_trusted() {
    let mut c = RelayConfig::new("127.0.0.1:0".parse().unwrap(), rules(&["127.0.0.1"]), key());
    c.key = None;
    assert!(matches!(Relay::bind(c.clone()), Err(Error::NoKey)));
    let e = Relay::bind(c).err().unwrap().to_string();
    assert!(e.contains("--insecure-no-auth"), "{e}");
    let (t, accepted, _) = target();
    let open = relay_with(&[&t.ip().to_string()], |c| {
        c.key = None;
        c.insecure_no_auth = true;
    });
    // A proxy with a key: the relay cannot prove it, so the program's connection is refused.
    let p = proxy_with(open.addr, |_| {});
    let (_, code) = socks(p, &v4(t));
    assert_ne!(code, Some(0));
    // A proxy without one, to the relay that serves anyone: carried.
    let p = proxy_with(open.addr, |c| c.key = None);
    let (mut s, code) = socks(p, &v4(t));
    assert_eq!(code, Some(0));
    s.write_all(b"hi").unwrap();
    let mut b = [0u8; 2];
    s.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"hi");
    wait_for(&accepted, 2);
}

/// Finding 1. With TLS at both ends (the relay's certificate checked by the proxy) a program's
/// connection is carried; a proxy without TLS gets nothing from the TLS relay.
#[test]
fn tls_carries_a_connection_and_a_plain_proxy_gets_nothing() {
    let c = rcgen::generate_simple_self_signed(vec!["relay.test".to_string()]).unwrap();
    let (cert, pkey) = (c.cert.pem(), c.signing_key.serialize_pem());
    let (t, accepted, _) = target();
    let r = relay_with(&[&t.ip().to_string()], |c| {
        c.options.tls = Some(Tls::server(cert.as_bytes(), pkey.as_bytes()).unwrap());
    });
    let p = proxy_with(r.addr, |c| {
        c.options.tls = Some(Tls::client(cert.as_bytes(), "relay.test").unwrap());
    });
    let (mut s, code) = socks(p, &v4(t));
    assert_eq!(code, Some(0));
    s.write_all(b"over tls").unwrap();
    let mut b = [0u8; 8];
    s.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"over tls");
    let plain = proxy_with(r.addr, |_| {});
    let (_, code) = socks(plain, &v4(t));
    assert_ne!(code, Some(0));
    wait_for(&accepted, 1);
}

/// Finding 2, as reported: under `--allow 0.0.0.0/0` (and `::/0`), a program asks the proxy
/// for a server listening only on the relay host's 127.0.0.1: by address, as an IPv4-mapped
/// IPv6 address, and by name. Each is refused and the server never sees a connection; a rule
/// that names the address lets it through. (Before: the first was connected.)
#[test]
fn the_relay_hosts_own_services_are_out_of_reach_of_a_wide_rule() {
    let (secret, accepted, _) = target();
    let r = relay_with(&["0.0.0.0/0", "::/0"], |_| {});
    let p = proxy_with(r.addr, |_| {});
    for dest in [v4(secret), mapped(secret), name("localhost", secret.port())] {
        let (_, code) = socks(p, &dest);
        assert_ne!(code, Some(0), "{dest:?} was connected");
    }
    assert!(r
        .reported("is not allowed", Duration::from_secs(5))
        .is_some());
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(accepted.load(Ordering::SeqCst), 0);
    // Named explicitly: carried, to its IPv4 address.
    let named = relay_with(&[&format!("127.0.0.1:{}", secret.port())], |_| {});
    let p = proxy_with(named.addr, |_| {});
    let (_, code) = socks(p, &mapped(secret));
    assert_eq!(code, Some(0));
    wait_for(&accepted, 1);
}

/// Finding 3. A stranger sends its request a byte at a time, each byte well within any
/// per-read timeout: the relay gives up at its request deadline. (Before: each byte restarted
/// a 10 s timeout, so the multi-socket and its slot were held for as long as bytes came.)
#[test]
fn a_request_sent_a_byte_at_a_time_meets_the_relays_deadline() {
    let r = relay_with(&["192.0.2.1"], |c| {
        c.request_timeout = Duration::from_secs(1);
    });
    let ms = MultiSocket::connect(r.addr, lo()).unwrap();
    let irob = ms
        .begin_irob(Label::ForegroundSmall, Deps::List(vec![]), None)
        .unwrap();
    let start = Instant::now();
    let mut cut = None;
    while start.elapsed() < Duration::from_secs(5) {
        if ms.irob_send(irob, &b"r"[..]).is_err() || ms.peer_closed() {
            cut = Some(start.elapsed());
            break;
        }
        if let Some(e) = r.reported("", Duration::from_millis(200)) {
            assert!(e.contains("took longer than 1s"), "{e}");
            cut = Some(start.elapsed());
            break;
        }
    }
    let cut = cut.expect("the relay still waited after 5 s of a byte every 200 ms");
    assert!(cut < Duration::from_secs(3), "cut after {cut:?}");
}

/// Finding 3. A program opens a connection through proxy and relay and then sends nothing, as
/// does the target: the relay closes it after its idle timeout, at both ends. A connection
/// with traffic stays open past it.
/// (Before: it stayed open for as long as both ends did.)
#[test]
fn a_silent_relayed_connection_is_closed_when_idle() {
    let (t, _, streams) = target();
    let r = relay_with(&[&t.to_string()], |c| {
        c.idle_timeout = Duration::from_secs(1);
    });
    let p = proxy_with(r.addr, |_| {});
    // Busy: a round trip every 300 ms for 2.5 s, past the idle timeout.
    let (mut busy, code) = socks(p, &v4(t));
    assert_eq!(code, Some(0));
    let _ = streams.recv_timeout(Duration::from_secs(5)).unwrap();
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(2500) {
        busy.write_all(b"x").unwrap();
        let mut b = [0u8; 1];
        busy.read_exact(&mut b)
            .expect("a busy connection stays open");
        std::thread::sleep(Duration::from_millis(300));
    }
    // Silent.
    let (mut program, code) = socks(p, &v4(t));
    assert_eq!(code, Some(0));
    let mut at_target = streams.recv_timeout(Duration::from_secs(5)).unwrap();
    let start = Instant::now();
    at_target
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut b = [0u8; 1];
    let r1 = at_target.read(&mut b);
    assert!(
        matches!(r1, Ok(0)) || matches!(&r1, Err(e) if e.kind() != std::io::ErrorKind::WouldBlock),
        "the target's end is still open after {:?}: {r1:?}",
        start.elapsed()
    );
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
    program
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let r2 = program.read(&mut b);
    assert!(
        matches!(r2, Ok(0)) || matches!(&r2, Err(e) if e.kind() != std::io::ErrorKind::WouldBlock),
        "the program's end is still open: {r2:?}"
    );
}

/// Finding 3. A program sends its SOCKS5 greeting a byte at a time (255 methods), each byte
/// well within any per-read timeout: the proxy closes it at its handshake deadline. (Before:
/// each byte restarted a 10 s timeout.)
#[test]
fn a_socks_negotiation_a_byte_at_a_time_meets_the_proxys_deadline() {
    let p = proxy_with("127.0.0.1:9".parse().unwrap(), |c| {
        c.handshake_timeout = Duration::from_secs(1);
    });
    let mut s = TcpStream::connect(p).unwrap();
    s.write_all(&[5, 255]).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let start = Instant::now();
    let mut closed = None;
    while start.elapsed() < Duration::from_secs(5) {
        if s.write_all(&[0]).is_err() {
            closed = Some(start.elapsed());
            break;
        }
        let mut b = [0u8; 2];
        match s.read(&mut b) {
            Ok(0) => {
                closed = Some(start.elapsed());
                break;
            }
            Ok(_) => panic!("the proxy answered a greeting not yet whole"),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => {
                closed = Some(start.elapsed());
                break;
            }
        }
    }
    let closed = closed.expect("still negotiating after 5 s of a byte every 200 ms");
    assert!(closed < Duration::from_secs(3), "closed after {closed:?}");
}

/// Finding 3. One source opens connections and holds them: past its share it is turned away at
/// once, while another source is still served. (Before: one source could take every slot.)
#[test]
fn one_source_cannot_take_every_slot_of_the_proxy() {
    let p = proxy_with("127.0.0.1:9".parse().unwrap(), |c| {
        c.max_per_source = 2;
        c.max_connections = 10;
    });
    let open = |from: [u8; 4]| {
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        s.bind(&SocketAddr::from((from, 0)).into()).unwrap();
        s.connect(&p.into()).unwrap();
        let s: TcpStream = s.into();
        s.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        s
    };
    let still_open = |s: &mut TcpStream| {
        let mut b = [0u8; 1];
        matches!(s.read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
    };
    let mut held = vec![open([127, 0, 0, 1]), open([127, 0, 0, 1])];
    let mut third = open([127, 0, 0, 1]);
    assert!(
        !still_open(&mut third),
        "a third connection from one source"
    );
    let mut other = open([127, 0, 0, 2]);
    assert!(still_open(&mut other), "another source is turned away");
    for s in &mut held {
        assert!(still_open(s));
    }
}

/// A TCP server on loopback that runs `each` on every connection, in a thread of its own.
fn listening(each: impl Fn(std::net::TcpStream) + Clone + Send + 'static) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let each = each.clone();
            std::thread::spawn(move || each(s));
        }
    });
    addr
}

/// A TCP server on loopback that sends `body` to every connection and closes it.
fn serving(body: Vec<u8>) -> SocketAddr {
    let body = Arc::new(body);
    listening(move |mut s| {
        let _ = s.write_all(&body);
    })
}

/// A target that answers each connection's request (its bytes up to a blank line) with
/// `body`, then closes.
fn answering(body: Vec<u8>) -> SocketAddr {
    let body = Arc::new(body);
    listening(move |mut s| {
        let mut req = Vec::new();
        let mut b = [0u8; 512];
        while !req.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read(&mut b) {
                Ok(0) | Err(_) => return,
                Ok(n) => req.extend_from_slice(&b[..n]),
            }
        }
        let _ = s.write_all(&body);
    })
}

/// Ask `dest` through `proxy` with `request`, and read to the end.
fn fetch_asking(proxy: SocketAddr, dest: SocketAddr, request: &[u8]) -> Vec<u8> {
    let (mut s, code) = socks(proxy, &v4(dest));
    assert_eq!(code, Some(0));
    s.write_all(request).unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    got
}

/// A relay with dedup on loopback whose dd-src is its own, and that dd-src (to read what it
/// found).
fn relay_and_source() -> (Running, Arc<Mutex<roam_dedup::Source>>) {
    let src = Arc::new(Mutex::new(
        roam_dedup::Source::new(roam_dedup::source::SourceConfig::default()).unwrap(),
    ));
    let inner = src.clone();
    let relay = relay_with(&["127.0.0.0/8"], move |c| {
        c.options = lo();
        c.dedup = Some(inner);
    });
    (relay, src)
}

/// A relay with dedup on loopback, and a phone's cache for proxies to it.
fn dedup_ends() -> (Running, Arc<Mutex<roam_dedup::Destination>>) {
    let source = roam_dedup::Source::new(roam_dedup::source::SourceConfig::default()).unwrap();
    let relay = relay_with(&["127.0.0.0/8"], |c| {
        c.options = lo();
        c.dedup = Some(Arc::new(Mutex::new(source)));
    });
    let dst = Arc::new(Mutex::new(roam_dedup::Destination::new(
        roam_dedup::destination::DestinationConfig::default(),
    )));
    (relay, dst)
}

/// Everything `proxy` delivers of one connection to `dest`.
fn fetch(proxy: SocketAddr, dest: SocketAddr) -> Vec<u8> {
    let (mut s, code) = socks(proxy, &v4(dest));
    assert_eq!(code, Some(0));
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    got
}

#[test]
fn dedup_carries_bytes_exactly_and_the_second_fetch_costs_less() {
    // Text-like bytes, 200 kB: the relay's regular cache holds them after the first fetch.
    let body: Vec<u8> = (0..200_000u32)
        .map(|i| {
            b"the quick brown fox jumps over a lazy dog "[(i * 7 % 42) as usize] ^ (i / 997) as u8
        })
        .collect();
    let target = serving(body.clone());
    let (relay, dst) = dedup_ends();
    let proxy = proxy_with(relay.addr, |c| c.dedup = Some(dst.clone()));
    assert!(fetch(proxy, target) == body, "first fetch differs");
    let first = relay
        .reported("dedup:", Duration::from_secs(5))
        .expect("a dedup report");
    assert!(fetch(proxy, target) == body, "second fetch differs");
    let second = relay
        .reported("dedup:", Duration::from_secs(5))
        .expect("a dedup report");
    let wire = |report: &str| -> u64 {
        let w: Vec<&str> = report.split_whitespace().collect();
        let at = w.iter().position(|x| *x == "on").unwrap();
        w[at - 1].parse().unwrap()
    };
    assert!(wire(&first) > 190_000, "{first}");
    assert!(wire(&second) < 40_000, "{second}");
}

/// A response shorter than the phone's `ack_every`, whose chunks the relay names the second
/// time: the phone holds its acknowledgement back, so the relay must ask for it at the end,
/// or the relay waits to settle until the connection idles (10 minutes) and the program
/// never sees the end.
#[test]
fn dedup_a_small_named_response_ends_at_once() {
    small_named_response_ends_at_once(false);
}

/// [`dedup_a_small_named_response_ends_at_once`] with the records compressed (`ac+zstd`): the
/// request to acknowledge goes through the compressed stream too.
#[test]
fn dedup_a_small_named_response_ends_at_once_through_zstd() {
    small_named_response_ends_at_once(true);
}

fn small_named_response_ends_at_once(zstd: bool) {
    let body = text(3_000);
    let target = serving(body.clone());
    let source = roam_dedup::Source::new(roam_dedup::source::SourceConfig::default()).unwrap();
    let relay = relay_with(&["127.0.0.0/8"], |c| {
        c.options = lo();
        c.dedup = Some(Arc::new(Mutex::new(source)));
        c.zstd = zstd;
    });
    let dst = Arc::new(Mutex::new(roam_dedup::Destination::new(
        roam_dedup::destination::DestinationConfig::default(),
    )));
    let proxy = proxy_with(relay.addr, |c| {
        c.dedup = Some(dst.clone());
        if zstd {
            c.compress = Compression::Zstd;
        }
    });
    for fetch_no in 0..2 {
        let (mut s, code) = socks(proxy, &v4(target));
        assert_eq!(code, Some(0));
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got)
            .unwrap_or_else(|e| panic!("fetch {fetch_no}: no end after {} bytes: {e}", got.len()));
        assert!(got == body, "fetch {fetch_no} differs");
    }
    let d = dst.lock().unwrap().stats();
    assert!(d.named_bytes > 0, "the second fetch named nothing: {d:?}");
}

#[test]
fn dedup_passes_tls_through_and_a_port_can_be_left_plain() {
    let mut body = vec![0x16, 0x03, 0x03, 0x10, 0x00];
    body.extend((0..50_000u32).map(|i| (i * 31) as u8));
    let target = serving(body.clone());
    let (relay, dst) = dedup_ends();
    let proxy = proxy_with(relay.addr, |c| c.dedup = Some(dst.clone()));
    assert!(fetch(proxy, target) == body);
    let r = relay
        .reported("dedup:", Duration::from_secs(5))
        .expect("a dedup report");
    assert!(
        r.contains(&format!("; {} passed through", body.len())),
        "{r}"
    );
    // The same port left plain: no dedup report at all.
    let plain = proxy_with(relay.addr, |c| {
        c.dedup = Some(dst.clone());
        c.no_dedup_ports = vec![target.port()];
    });
    assert!(fetch(plain, target) == body);
    assert!(relay
        .reported("dedup:", Duration::from_millis(500))
        .is_none());
}

/// Fetch `body` through a relay with dedup twice: the first time through a proxy whose cache
/// keeps it, the second through one with an empty cache (a phone that lost its cache) and
/// `compress`: the relay names chunks the second phone never saw, so every such record comes
/// back as a request to resend and goes down again as a repair. The second phone's bytes.
fn fetch_with_repairs(compress: Compression, body: &[u8]) -> (Vec<u8>, u64) {
    let target = serving(body.to_vec());
    let source = roam_dedup::Source::new(roam_dedup::source::SourceConfig::default()).unwrap();
    let relay = relay_with(&["127.0.0.0/8"], |c| {
        c.options = lo();
        c.dedup = Some(Arc::new(Mutex::new(source)));
        c.zstd = true;
        c.dictionaries = Some(Arc::new(Mutex::new(Dictionaries::new(
            DictionaryConfig::default(),
        ))));
    });
    let new_cache = || {
        Arc::new(Mutex::new(roam_dedup::Destination::new(
            roam_dedup::destination::DestinationConfig::default(),
        )))
    };
    let first = proxy_with(relay.addr, |c| c.dedup = Some(new_cache()));
    assert!(fetch(first, target) == body, "first fetch differs");
    let lost = new_cache();
    let second = proxy_with(relay.addr, |c| {
        c.dedup = Some(lost.clone());
        c.compress = compress;
    });
    let got = fetch(second, target);
    let asked = lost.lock().unwrap().stats().unknown_names;
    (got, asked)
}

/// Text-like bytes the relay's regular cache holds after one fetch.
fn text(len: u32) -> Vec<u8> {
    (0..len)
        .map(|i| {
            b"the quick brown fox jumps over a lazy dog "[(i * 7 % 42) as usize] ^ (i / 997) as u8
        })
        .collect()
}

#[test]
fn dedup_repairs_reach_a_phone_that_lost_its_cache() {
    let body = text(100_000);
    let (got, asked) = fetch_with_repairs(Compression::Off, &body);
    assert!(asked > 0, "no record was asked for again");
    assert!(got == body, "{} bytes of {} arrived", got.len(), body.len());
}

#[test]
fn dedup_repairs_reach_a_phone_that_lost_its_cache_through_zstd() {
    let body = text(100_000);
    let (got, asked) = fetch_with_repairs(Compression::Zstd, &body);
    assert!(asked > 0, "no record was asked for again");
    assert!(got == body, "{} bytes of {} arrived", got.len(), body.len());
}

#[test]
fn dedup_repairs_reach_a_phone_that_lost_its_cache_through_zstd_dict() {
    // The target speaks first: the phone's feedback goes up before the program's bytes.
    let body = text(100_000);
    let dicts = Arc::new(Mutex::new(Dictionaries::new(DictionaryConfig::default())));
    let (got, asked) = fetch_with_repairs(Compression::ZstdDict(dicts), &body);
    assert!(asked > 0, "no record was asked for again");
    assert!(got == body, "{} bytes of {} arrived", got.len(), body.len());
}

/// Text-like bytes without repeats at the scale of chunks: words drawn by `seed`.
fn prose(len: usize, seed: u64) -> Vec<u8> {
    const WORDS: [&str; 16] = [
        "the", "phone", "relay", "network", "cache", "moves", "between", "places", "and", "keeps",
        "what", "it", "read", "before", "upstream", "node",
    ];
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(WORDS[(x % 16) as usize].as_bytes());
        out.push(if x.is_multiple_of(11) { b'\n' } else { b' ' });
    }
    out.truncate(len);
    out
}

/// A local network for the relay choice (its address is loopback's: the multi-sockets use
/// their own, `lo()`).
fn network(name: &str, cellular: bool) -> LocalNetwork {
    LocalNetwork {
        name: name.into(),
        addr: Ipv4Addr::LOCALHOST.into(),
        kind: NetKind {
            cellular,
            ..NetKind::default()
        },
    }
}

/// Issue 46: the thesis's multi-homed phone. WiFi and cellular pass different relays, each
/// with a dd-src of its own, and the phone's one cache serves both. A connection opened while
/// WiFi is up goes to WiFi's relay (W); once only cellular is up a new one goes to cellular's
/// (C), while the connection opened before stays with W. Content first fetched through W is
/// then found at C, which never saw it, through the phone's feedback. The default relay is
/// nowhere: a connection sent there fails.
#[test]
fn new_connections_go_to_the_relay_of_the_preferred_network_and_feedback_follows() {
    let first = prose(300_000, 46);
    // Similar content: a new beginning, then what was fetched before.
    let mut second = prose(4_000, 47);
    second.extend_from_slice(&first);
    let (t1, t2) = (serving(first.clone()), serving(second.clone()));
    let (echo, _, _) = target();
    let ((w, src_w), (c, src_c)) = (relay_and_source(), relay_and_source());
    let dst = Arc::new(Mutex::new(roam_dedup::Destination::new(
        roam_dedup::destination::DestinationConfig::default(),
    )));
    let up = Arc::new(Mutex::new(vec![
        network("wifi", false),
        network("cell", true),
    ]));
    let seen = up.clone();
    let proxy = proxy_with("127.0.0.1:9".parse().unwrap(), |p| {
        p.per_network = vec![
            NetworkRelay::new(NetworkMatch::Cellular, c.addr, Some(key())),
            NetworkRelay::new(NetworkMatch::NonCellular, w.addr, Some(key())),
        ];
        p.networks_now = Some(NetworksNow::new(move || seen.lock().unwrap().clone()));
        p.dedup = Some(dst.clone());
    });
    let stats = |s: &Arc<Mutex<roam_dedup::Source>>| s.lock().unwrap().stats();

    // On WiFi: to W.
    assert!(fetch(proxy, t1) == first, "the first fetch differs");
    let (at_w, at_c) = (stats(&src_w), stats(&src_c));
    assert_eq!(at_w.bytes_in, first.len() as u64, "W: {at_w:?}");
    assert_eq!(at_c.bytes_in, 0, "C: {at_c:?}");
    let (mut held, code) = socks(proxy, &v4(echo));
    assert_eq!(code, Some(0));
    held.write_all(b"on wifi").unwrap();
    let mut b = [0u8; 7];
    held.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"on wifi");

    // WiFi leaves: the connection opened on it stays with W ...
    *up.lock().unwrap() = vec![network("cell", true)];
    held.write_all(b"on cell").unwrap();
    held.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"on cell");
    let before = stats(&src_w).bytes_in;
    assert_eq!(
        before,
        at_w.bytes_in + 14,
        "W did not carry the held connection"
    );
    // ... and a new one goes to C, which finds what the phone fetched through W by its
    // feedback.
    assert!(fetch(proxy, t2) == second, "the second fetch differs");
    let (at_w, at_c) = (stats(&src_w), stats(&src_c));
    assert_eq!(at_w.bytes_in, before, "W: {at_w:?}");
    assert_eq!(at_c.bytes_in, second.len() as u64, "C: {at_c:?}");
    assert!(at_c.feedback_names > 0, "no feedback reached C: {at_c:?}");
    assert!(
        at_c.feedback_hit_bytes > 0,
        "C found nothing by feedback: {at_c:?}"
    );
    assert_eq!(
        at_c.regular_hit_bytes, 0,
        "C's own cache had seen it: {at_c:?}"
    );
    drop(held);
}

/// A long page the phone read through relay A, read again through relay B, which never saw
/// it: all B finds it finds by the phone's feedback. The phone's advertisements run at most
/// `max_lead` names past δ ([`roam_dedup::destination::select::SelectConfig::max_lead`]).
/// What B's source did, and the page's length.
/// A page of `len` bytes read through relay A, then through relay B, which never saw it, by
/// one phone whose advertisements may run `max_lead` names past δ and whose hints at a
/// request ([`roam_dedup::destination::hint`]) hold `hint_names`: what B's source found.
fn read_again_through_another_relay(
    len: usize,
    max_lead: usize,
    hint_names: usize,
) -> (roam_dedup::source::SourceStats, usize) {
    let page = prose(len, 461);
    let target = answering(page.clone());
    let ((a, _), (b, src_b)) = (relay_and_source(), relay_and_source());
    let mut cfg = roam_dedup::destination::DestinationConfig::default();
    cfg.select.max_lead = max_lead;
    cfg.select.hint_names = hint_names;
    let dst = Arc::new(Mutex::new(roam_dedup::Destination::new(cfg)));
    let via_a = proxy_with(a.addr, |p| p.dedup = Some(dst.clone()));
    let via_b = proxy_with(b.addr, |p| p.dedup = Some(dst.clone()));
    let ask = |cookie: u8| {
        let mut r = b"GET /page HTTP/1.1\r\nHost: target\r\nCookie: ".to_vec();
        r.extend_from_slice(&[b'0' + cookie, b'\r', b'\n', b'\r', b'\n']);
        r
    };
    assert!(
        fetch_asking(via_a, target, &ask(1)) == page,
        "the first fetch differs"
    );
    assert!(
        fetch_asking(via_b, target, &ask(2)) == page,
        "the second fetch differs"
    );
    let at_b = src_b.lock().unwrap().stats();
    eprintln!(
        "max_lead {max_lead}, hint_names {hint_names}: B found {} of {} bytes by feedback, {} names advertised",
        at_b.feedback_hit_bytes,
        page.len(),
        at_b.feedback_names
    );
    assert_eq!(at_b.regular_hit_bytes, 0, "B had seen it: {at_b:?}");
    (at_b, page.len())
}

/// Issue 46: feedback can only replace what the source has not yet encoded. The relay paced
/// its source on the multi-socket's unacknowledged bytes alone, which run behind the phone
/// (they count what its multi-socket received, not what dd-dst has rebuilt) and shrink as
/// records turn to names: B's source ran far ahead of the phone's advertisements and found a
/// tenth of the page or less (4-10% in three runs). Paced also on what the phone has
/// acknowledged of the stream ([`Codec::ahead`]), it finds most of it.
#[test]
fn a_page_read_again_through_a_relay_that_never_saw_it_is_found_by_feedback() {
    let max_lead = roam_dedup::destination::select::SelectConfig::default().max_lead;
    // Without hints at the request, which would name the page before it is sent.
    let (at_b, len) = read_again_through_another_relay(400_000, max_lead, 0);
    found_by_feedback_at_least(&at_b, len, 0.6);
}

/// Assert that `at` found at least `share` of a page of `len` bytes by feedback.
fn found_by_feedback_at_least(at: &roam_dedup::source::SourceStats, len: usize, share: f64) {
    let found = at.feedback_hit_bytes as f64 / len as f64;
    assert!(
        found >= share,
        "B found {:.0}% of the page by feedback: {at:?}",
        found * 100.0
    );
}

/// Issue 46: the thesis's δ (§4.3.4: the phone advertises from δ + 1 names past its last
/// match, δ being what the source will have encoded when the advertisement reaches it).
/// Here the advertisements may run only 24 names past δ, fewer than the relay's lead (24 KiB
/// on loopback, about 80 names): a phone whose δ is 0, as in the data path before, names only
/// chunks the source has already sent, and B finds almost nothing by feedback.
#[test]
fn the_phone_advertises_past_what_the_relay_has_already_encoded() {
    let (at_b, len) = read_again_through_another_relay(400_000, 24, 0);
    found_by_feedback_at_least(&at_b, len, 0.5);
}

/// Issue 46, beyond the thesis: a page of 20 kB, shorter than the relay's lead, is encoded
/// whole before its first segment reaches the phone, so the thesis's advertisements, made as
/// it arrives, cannot reach it in time. The phone's hint at the request
/// ([`roam_dedup::destination::hint`]) names it before the target has answered.
#[test]
fn a_short_page_asked_for_again_is_found_by_the_hint_at_its_request() {
    let hints = roam_dedup::destination::select::SelectConfig::default();
    let (with, len) = read_again_through_another_relay(20_000, hints.max_lead, hints.hint_names);
    found_by_feedback_at_least(&with, len, 0.8);
    let (without, _) = read_again_through_another_relay(20_000, hints.max_lead, 0);
    assert!(
        without.feedback_hit_bytes < with.feedback_hit_bytes / 2,
        "without hints B found as much: {without:?}"
    );
}
