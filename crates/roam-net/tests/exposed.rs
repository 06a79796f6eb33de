//! A listener exposed to hostile peers, over real TCP on loopback: peers that open connections
//! and stay silent, that hold a connection after the application let go of its multi-socket,
//! that trickle a handshake, from one address or from another. Each test plays the peer with
//! plain TCP sockets speaking the wire format.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use roam_net::proto::wire::{Caps, Decoder, Frame};
use roam_net::proto::{Label, NetKind};
use roam_net::runtime::blocking::{Listener, MultiSocket};
use roam_net::runtime::{LocalNetwork, Networks, Options};

fn options() -> Options {
    Options {
        networks: Networks::Explicit(vec![LocalNetwork {
            name: "lo".into(),
            addr: Ipv4Addr::LOCALHOST.into(),
            kind: NetKind::default(),
        }]),
        ..Options::default()
    }
}

/// A TCP connection to `to` from address `from` (any port).
fn connect_from(from: Ipv4Addr, to: SocketAddr) -> TcpStream {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.bind(&SocketAddr::new(IpAddr::V4(from), 0).into())
        .unwrap();
    s.connect(&to.into()).unwrap();
    s.into()
}

/// The next frame on `t`, or `None` once it is closed (or nothing comes within 5 s).
fn read_frame(t: &mut TcpStream) -> Option<Frame> {
    let mut dec = Decoder::default();
    let mut buf = [0u8; 4096];
    t.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    loop {
        if let Ok(Some(f)) = dec.next_frame() {
            return Some(f);
        }
        match t.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => dec.push(&buf[..n]),
        }
    }
}

fn hello() -> Vec<u8> {
    Frame::Hello {
        key: [9; 32],
        window: 1 << 20,
        caps: Caps::NONE,
        networks: vec![],
    }
    .to_bytes()
}

/// A peer from `from` that says `Hello` and, answered, stays silent with its connection open:
/// the connection, and whether the listener took the multi-socket (`HelloAck`).
fn silent_hello(from: Ipv4Addr, to: SocketAddr) -> (TcpStream, bool) {
    let mut t = connect_from(from, to);
    t.write_all(&hello()).unwrap();
    let acked = matches!(read_frame(&mut t), Some(Frame::HelloAck { .. }));
    (t, acked)
}

/// Whether the listener closed `t` (within 5 s) without a frame other than an `Error`.
fn closed_by_listener(t: &mut TcpStream) -> bool {
    loop {
        match read_frame(t) {
            None => return true,
            Some(Frame::Error { .. }) => {}
            Some(_) => return false,
        }
    }
}

/// Peers that say `Hello` and then stay silent with their connections open, while the
/// application accepts each multi-socket and drops it: the dropped ones end
/// (`Config::release_timeout` after their last progress), so they do not fill the listener's
/// `max_sessions` for good. (Before, a dropped multi-socket lived on in its connection's tasks
/// as long as the peer kept the connection: the third hello here was refused, "2
/// multi-sockets already open", and every later one.)
#[test]
fn multi_sockets_the_application_dropped_do_not_hold_the_listener() {
    let mut server = options();
    server.max_sessions = 2;
    server.config.release_timeout = Duration::from_millis(300);
    let l = Listener::bind("127.0.0.1:0".parse().unwrap(), server).unwrap();
    let addr = l.local_addr();
    let mut held = Vec::new();
    for i in 0..6 {
        let (t, acked) = silent_hello(Ipv4Addr::LOCALHOST, addr);
        assert!(acked, "hello {i} was refused");
        held.push(t); // the peer keeps every connection open
        let ms = l.accept_timeout(Duration::from_secs(5)).unwrap().unwrap();
        drop(ms); // the application is done with it
        std::thread::sleep(Duration::from_millis(600));
    }
}

/// An application that drops its multi-socket without closing it: what it sent is still
/// delivered, and the peer sees the end of the stream (a dropped TCP socket closes too).
/// (Before, the peer waited for ever: nothing closed a dropped multi-socket.)
#[test]
fn a_dropped_multi_socket_finishes_sending_and_says_goodbye() {
    let l = Listener::bind("127.0.0.1:0".parse().unwrap(), options()).unwrap();
    let addr = l.local_addr();
    let client = std::thread::spawn(move || {
        let c = MultiSocket::connect(addr, options()).unwrap();
        c.send(Label::BackgroundLarge, vec![7u8; 1 << 20], None)
            .unwrap();
        // Dropped here, not closed.
    });
    let s = l.accept().unwrap();
    client.join().unwrap();
    let (_, _, data) = s.recv_irob().unwrap().unwrap();
    assert_eq!(data.len(), 1 << 20);
    let end = Instant::now();
    while !s.peer_closed() && end.elapsed() < Duration::from_secs(10) {
        let _ = s.recv_timeout(Duration::from_millis(100));
    }
    assert!(
        s.peer_closed(),
        "no end of stream from the dropped multi-socket"
    );
}

/// One address opens connections and sends nothing, as many as the listener takes handshakes
/// (`max_pending_handshakes`, 64): it holds at most `max_pending_per_source` (8) of them, a
/// ninth is closed at once, and a client from another address still gets in. (Before, the 64
/// silent connections held every place for the handshake timeout, and the client's
/// connections were closed as they came: its connect timed out.)
#[test]
fn one_address_cannot_hold_every_pending_handshake() {
    let mut server = options();
    server.handshake_timeout = Duration::from_secs(30);
    let per_source = server.max_pending_per_source;
    let l = Listener::bind("127.0.0.1:0".parse().unwrap(), server).unwrap();
    let addr = l.local_addr();
    let silent: Vec<TcpStream> = (0..64)
        .map(|_| connect_from(Ipv4Addr::LOCALHOST, addr))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut late = connect_from(Ipv4Addr::LOCALHOST, addr);
    assert!(
        closed_by_listener(&mut late),
        "a connection past {per_source} pending from one address was kept"
    );
    let other = Ipv4Addr::new(127, 0, 0, 2);
    let mut client = options();
    client.networks = Networks::Explicit(vec![LocalNetwork {
        name: "lo".into(),
        addr: other.into(),
        kind: NetKind::default(),
    }]);
    client.connect_timeout = Duration::from_secs(3);
    let c = std::thread::spawn(move || MultiSocket::connect(addr, client));
    let s = l.accept_timeout(Duration::from_secs(5)).unwrap();
    let c = c.join().unwrap();
    assert!(c.is_ok(), "the client from {other} was kept out: {c:?}");
    // Each end knows the other's address: the server, where the multi-socket came from.
    assert_eq!(s.unwrap().peer_addr().map(|a| a.ip()), Some(other.into()));
    assert_eq!(c.unwrap().peer_addr(), Some(addr));
    drop(silent);
}

/// One address opens multi-sockets up to `max_connections_per_source` (here 3): its next
/// connection is closed at once, while another address still gets in. (Before, one address
/// could take every multi-socket of the listener, `max_sessions`: the fourth hello was
/// answered.)
#[test]
fn one_address_cannot_hold_every_connection() {
    let mut server = options();
    server.max_connections_per_source = 3;
    let l = Listener::bind("127.0.0.1:0".parse().unwrap(), server).unwrap();
    let addr = l.local_addr();
    let mut held = Vec::new();
    for i in 0..3 {
        let (t, acked) = silent_hello(Ipv4Addr::LOCALHOST, addr);
        assert!(acked, "hello {i} was refused");
        held.push(t);
    }
    let (mut fourth, acked) = silent_hello(Ipv4Addr::LOCALHOST, addr);
    assert!(!acked, "a fourth connection from one address was answered");
    assert!(closed_by_listener(&mut fourth));
    let (_t, acked) = silent_hello(Ipv4Addr::new(127, 0, 0, 2), addr);
    assert!(acked, "another address was refused");
    // A connection that ends gives its place back.
    drop(held.pop());
    std::thread::sleep(Duration::from_millis(300));
    let (_t, acked) = silent_hello(Ipv4Addr::LOCALHOST, addr);
    assert!(acked, "the place of a closed connection was not given back");
}

/// A peer that trickles its first frame a byte at a time is closed by the handshake's deadline
/// (`handshake_timeout` after it was accepted), however often a byte comes. (This was already
/// a deadline, not a timeout per read; the test keeps it so.)
#[test]
fn a_trickled_handshake_ends_at_its_deadline() {
    let mut server = options();
    server.handshake_timeout = Duration::from_secs(2);
    let l = Listener::bind("127.0.0.1:0".parse().unwrap(), server).unwrap();
    let mut t = connect_from(Ipv4Addr::LOCALHOST, l.local_addr());
    let t0 = Instant::now();
    let mut closed_after = None;
    for b in hello() {
        if t.write_all(&[b]).is_err() {
            closed_after = Some(t0.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
        t.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 64];
        let gone = match t.read(&mut buf) {
            Ok(n) => n == 0,
            Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
        };
        t.set_nonblocking(false).unwrap();
        if gone {
            closed_after = Some(t0.elapsed());
            break;
        }
    }
    let took = closed_after.expect("the trickled handshake was never closed");
    assert!(
        took < Duration::from_secs(4),
        "closed after {took:?}, the deadline is 2 s"
    );
}
