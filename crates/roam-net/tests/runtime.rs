//! The runtime over real TCP on loopback: labels, dependencies, thunks, limits, malformed and
//! forged connections.

use roam_net::proto::NetKind;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use roam_core::BitRate;
use roam_net::proto::wire::{Decoder, Frame};
use roam_net::proto::{Deps, Failure, Label};
use roam_net::runtime::blocking::{Listener, MultiSocket};
use roam_net::runtime::{Error, LocalNetwork, Networks, Options, PathMemory, Thunk};

fn lo_options() -> Options {
    Options {
        networks: Networks::Explicit(vec![LocalNetwork {
            name: "lo".into(),
            addr: Ipv4Addr::LOCALHOST.into(),
            kind: NetKind::default(),
        }]),
        ..Options::default()
    }
}

fn pair(client: Options, server: Options) -> (MultiSocket, MultiSocket, Listener) {
    let l = Listener::bind("127.0.0.1:0".parse().unwrap(), server).unwrap();
    let addr = l.local_addr();
    let t = std::thread::spawn(move || MultiSocket::connect(addr, client).unwrap());
    let s = l.accept().unwrap();
    (t.join().unwrap(), s, l)
}

#[test]
fn labels_dependencies_and_atomic_irobs_round_trip() {
    let (c, s, _l) = pair(lo_options(), lo_options());
    let a = c
        .begin_irob(Label::BackgroundLarge, Deps::List(vec![]), None)
        .unwrap();
    c.irob_send(a, vec![1u8; 300_000]).unwrap();
    let b = c
        .begin_irob(Label::ForegroundSmall, Deps::List(vec![a]), None)
        .unwrap();
    c.irob_send(b, &b"after a"[..]).unwrap();
    c.end_irob(b).unwrap();
    c.irob_send(a, vec![2u8; 1000]).unwrap();
    c.end_irob(a).unwrap();
    let d = c
        .send(Label::ForegroundSmall, &b"tcp with labels"[..], None)
        .unwrap();
    assert!(a < b && b < d, "ids increase: {a} {b} {d}");
    // A dependency on a later id is refused with a clear error.
    let e = c
        .begin_irob(Label::ForegroundSmall, Deps::List(vec![d + 5]), None)
        .unwrap_err();
    assert!(e.to_string().contains("must name lower ids"), "{e}");

    let (ia, la, da) = s.recv_irob().unwrap().unwrap();
    assert_eq!((ia, la, da.len()), (a, Label::BackgroundLarge, 301_000));
    assert!(da[..300_000].iter().all(|&x| x == 1) && da[300_000..].iter().all(|&x| x == 2));
    let (ib, lb, db) = s.recv_irob().unwrap().unwrap();
    assert_eq!(
        (ib, lb, db.as_slice()),
        (b, Label::ForegroundSmall, &b"after a"[..])
    );
    let (id, _, dd) = s.recv_irob().unwrap().unwrap();
    assert_eq!((id, dd.as_slice()), (d, &b"tcp with labels"[..]));

    // And back, then close: the peer sees the end of the stream.
    s.send(Label::ForegroundLarge, vec![9u8; 5000], None)
        .unwrap();
    let (_, l, x) = c.recv_irob().unwrap().unwrap();
    assert_eq!((l, x.len()), (Label::ForegroundLarge, 5000));
    assert!(c.close(Duration::from_secs(5)));
    assert!(s.close(Duration::from_secs(5)));
    assert!(s.recv().unwrap().is_none());
    assert!(c.recv_timeout(Duration::from_secs(5)).unwrap().is_none());
}

#[test]
fn thunks_defer_fire_once_and_cancel() {
    // Background is not allowed on the (metered) only network: a send with a thunk is deferred.
    let mut opts = lo_options();
    opts.networks = Networks::Explicit(vec![LocalNetwork {
        name: "lo".into(),
        addr: Ipv4Addr::LOCALHOST.into(),
        kind: NetKind {
            metered: true,
            ..NetKind::default()
        },
    }]);
    for l in [Label::BackgroundSmall, Label::BackgroundLarge] {
        opts.config.policy_mut(l).metered = false;
    }
    let (c, s, _l) = pair(opts, lo_options());
    let dropped = Arc::new(AtomicUsize::new(0));
    struct Arg(Arc<AtomicUsize>);
    impl Drop for Arg {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let arg = Arg(dropped.clone());
    let r = c.send(
        Label::BackgroundLarge,
        vec![0u8; 10],
        Some(Thunk::new(move || drop(arg))),
    );
    let Err(Error::Deferred(h)) = r else {
        panic!("expected deferred, got {r:?}")
    };
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        0,
        "the thunk owns its argument until it runs or is cancelled"
    );
    assert!(h.cancel());
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        1,
        "cancelling drops the argument"
    );
    assert!(!h.cancel());
    // Foreground still goes.
    c.send(Label::ForegroundSmall, &b"x"[..], None).unwrap();
    assert_eq!(s.recv_irob().unwrap().unwrap().2, b"x");

    // Backlog bound: a tiny bound defers the next background send until the backlog drains.
    let mut opts = lo_options();
    opts.config.policy_mut(Label::BackgroundLarge).backlog_bound = Duration::from_nanos(1);
    let (c, s, _l) = pair(opts, lo_options());
    let fired = Arc::new(AtomicUsize::new(0));
    let mut deferred = 0;
    for _ in 0..50 {
        let f = fired.clone();
        match c.send(
            Label::BackgroundLarge,
            vec![7u8; 200_000],
            Some(Thunk::new(move || {
                f.fetch_add(1, Ordering::SeqCst);
            })),
        ) {
            Ok(_) => {}
            Err(Error::Deferred(_)) => deferred += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(
        deferred > 0,
        "a 64 KB backlog floor must defer some of 50 x 200 KB"
    );
    let mut got = 0;
    while got < 50 - deferred {
        s.recv_irob().unwrap().unwrap();
        got += 1;
    }
    for _ in 0..200 {
        if fired.load(Ordering::SeqCst) == deferred {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        fired.load(Ordering::SeqCst),
        deferred,
        "each deferred thunk fires once when the backlog clears"
    );
}

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

#[test]
fn malformed_and_forged_connections_do_not_disturb_the_session() {
    let (c, s, l) = pair(lo_options(), lo_options());
    let addr: SocketAddr = l.local_addr();
    // Garbage as a first frame: refused with an error frame, connection closed.
    let mut g = TcpStream::connect(addr).unwrap();
    g.write_all(&[0xde; 64]).unwrap();
    match read_frame(&mut g) {
        Some(Frame::Error { reason, .. }) => assert!(reason.contains("version"), "{reason}"),
        other => panic!("expected an error frame, got {other:?}"),
    }
    // A join with a wrong proof: challenged, then refused.
    let mut j = TcpStream::connect(addr).unwrap();
    j.write_all(
        &Frame::Join {
            session: s.session_id(),
            nonce: [3; 16],
            net: 9,
        }
        .to_bytes(),
    )
    .unwrap();
    assert!(matches!(
        read_frame(&mut j),
        Some(Frame::JoinChallenge { .. })
    ));
    j.write_all(&Frame::JoinProof { mac: [0; 32] }.to_bytes())
        .unwrap();
    match read_frame(&mut j) {
        Some(Frame::Error { reason, .. }) => assert!(reason.contains("join refused"), "{reason}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    // A join naming an unknown session.
    let mut u = TcpStream::connect(addr).unwrap();
    u.write_all(
        &Frame::Join {
            session: s.session_id() ^ 1,
            nonce: [3; 16],
            net: 9,
        }
        .to_bytes(),
    )
    .unwrap();
    assert!(matches!(read_frame(&mut u), Some(Frame::Error { .. })));
    // The session is undisturbed.
    c.send(Label::ForegroundSmall, &b"still here"[..], None)
        .unwrap();
    assert_eq!(s.recv_irob().unwrap().unwrap().2, b"still here");
    assert_eq!(s.connections().len(), 1);
}

#[test]
fn pending_handshakes_are_bounded() {
    let mut opts = lo_options();
    opts.max_pending_handshakes = 2;
    opts.handshake_timeout = Duration::from_secs(30);
    let l = Listener::bind("127.0.0.1:0".parse().unwrap(), opts).unwrap();
    let addr = l.local_addr();
    // Two silent connections hold the two handshake slots; a third is closed at once.
    let _a = TcpStream::connect(addr).unwrap();
    let _b = TcpStream::connect(addr).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 8];
    assert!(
        matches!(c.read(&mut buf), Ok(0) | Err(_)),
        "third pending handshake should be dropped"
    );
}

#[test]
fn abort_wakes_a_blocked_receiver() {
    let (_c, s, _l) = pair(lo_options(), lo_options());
    let s2 = s.clone();
    let blocked = std::thread::spawn(move || s2.recv_irob());
    std::thread::sleep(Duration::from_millis(100));
    s.abort("test over");
    let r = blocked.join().unwrap();
    assert!(
        matches!(r, Err(Error::Failed(Failure::Aborted(ref m))) if m == "test over"),
        "{r:?}"
    );
}

/// An abort reaches the peer at once (a fatal `Error` frame), not after its connections have
/// stayed down for `failure_timeout` (30 s), and names the reason.
#[test]
fn the_peer_of_an_abort_fails_at_once() {
    let (c, s, _l) = pair(lo_options(), lo_options());
    let c2 = c.clone();
    let blocked = std::thread::spawn(move || {
        let t = Instant::now();
        (c2.recv_irob(), t.elapsed())
    });
    std::thread::sleep(Duration::from_millis(100));
    s.abort("server shutting down");
    let (r, took) = blocked.join().unwrap();
    assert!(
        matches!(r, Err(Error::Failed(Failure::PeerFailed(ref m))) if m.contains("server shutting down")),
        "{r:?}"
    );
    assert!(
        took < Duration::from_secs(5),
        "the client failed after {took:?}"
    );
}

/// Non-blocking sends: with the peer not reading, `try_send` says the label would block (its
/// backlog passed the deferral bound) and `try_irob_send` that the send buffer is full, at once
/// instead of waiting; `sendable` wakes once the peer reads.
#[test]
fn non_blocking_sends_say_would_block_and_sendable_wakes_when_they_can() {
    use roam_net::SendError;
    let small = |o: Options| Options {
        config: {
            let mut c = roam_net::proto::Config {
                max_send_buffer: 256 << 10,
                window: 64 << 10,
                ..o.config
            };
            c.receive_limit = c.min_receive_limit();
            c
        },
        ..o
    };
    let (c, s, _l) = pair(small(lo_options()), small(lo_options()));
    let open = c
        .begin_irob(Label::BackgroundLarge, Deps::List(vec![]), None)
        .unwrap();
    c.irob_send(open, vec![1u8; 1]).unwrap();
    // The server does not read: its backlog passes its window, it stops reading, and the
    // client's buffer fills.
    let chunk = vec![5u8; 32 << 10];
    let mut sent = 0;
    let full = loop {
        match c.try_send(Label::BackgroundLarge, chunk.clone()) {
            Ok(_) => sent += chunk.len(),
            Err(Error::Send(SendError::WouldBlock(l))) => break l,
            Err(e) => panic!("{e}"),
        }
        assert!(sent < 64 << 20, "{sent} bytes taken without blocking");
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(full, Label::BackgroundLarge);
    assert!(!c.writable(Label::BackgroundLarge));
    // The label is blocked (its backlog is over the bound); appending to the open IROB goes
    // on until the send buffer itself is full.
    loop {
        match c.try_irob_send(open, vec![1u8; 32 << 10]) {
            Ok(()) => sent += 32 << 10,
            Err(Error::Send(SendError::BufferFull)) => break,
            Err(e) => panic!("{e}"),
        }
        assert!(sent < 64 << 20, "{sent} bytes taken without blocking");
    }
    c.end_irob(open).unwrap();
    sent += 1;
    // The server reads everything: `sendable` returns and the next try_send is taken.
    let reader = std::thread::spawn(move || {
        let mut got = 0;
        while got < sent {
            match s.recv_timeout(Duration::from_secs(10)) {
                Ok(Some(d)) => got += d.data.len(),
                other => panic!("{other:?} after {got} of {sent}"),
            }
        }
        s
    });
    let rt = roam_net::runtime::blocking::runtime();
    let waited = rt.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(20),
            c.as_async().sendable(Label::BackgroundLarge),
        )
        .await
    });
    assert!(waited.is_ok(), "sendable did not wake");
    assert!(c.try_send(Label::BackgroundLarge, chunk).is_ok());
    let _s = reader.join().unwrap();
}

/// IPv6: a multi-socket to an IPv6 listener over the IPv6 loopback, and a dual-stack listener
/// (`[::]`) taking an IPv4 client and an IPv6 one; each echoes an IROB both ways, and the
/// server opens its own connections to where the client's came from (here: it joins back
/// over the client's network, of the client's family). Skips where the host has no IPv6
/// loopback.
#[test]
fn ipv6_and_dual_stack_listeners_carry_multi_sockets() {
    if std::net::TcpListener::bind("[::1]:0").is_err() {
        eprintln!("skipped: no IPv6 loopback here");
        return;
    }
    let v6 = || Options {
        networks: Networks::Auto,
        ..Options::default()
    };
    let echo = |c: &MultiSocket, s: &MultiSocket| {
        c.send(Label::ForegroundSmall, &b"ping"[..], None).unwrap();
        assert_eq!(s.recv_irob().unwrap().unwrap().2, b"ping");
        s.send(Label::BackgroundLarge, vec![6u8; 100_000], None)
            .unwrap();
        assert_eq!(c.recv_irob().unwrap().unwrap().2, vec![6u8; 100_000]);
    };
    let connect = |l: &Listener, to: SocketAddr, o: Options| {
        let t = std::thread::spawn(move || MultiSocket::connect(to, o).unwrap());
        let s = l.accept().unwrap();
        (t.join().unwrap(), s)
    };
    // IPv6 only.
    let l = Listener::bind("[::1]:0".parse().unwrap(), Options::default()).unwrap();
    let (c, s) = connect(&l, l.local_addr(), v6());
    echo(&c, &s);
    let nets = c.estimates();
    assert!(
        nets.iter().all(|n| n.name == "lo"),
        "the client uses the IPv6 loopback: {nets:?}"
    );
    // Dual stack: one listener, an IPv4 client and an IPv6 one.
    let l = Listener::bind("[::]:0".parse().unwrap(), Options::default()).unwrap();
    let port = l.local_addr().port();
    let (c4, s4) = connect(&l, SocketAddr::from(([127, 0, 0, 1], port)), lo_options());
    echo(&c4, &s4);
    let (c6, s6) = connect(&l, SocketAddr::from((Ipv6Addr::LOCALHOST, port)), v6());
    echo(&c6, &s6);
    assert_ne!(c4.session_id(), c6.session_id());
}

/// A dropped listener stops listening: its port can be bound again at once, and a client
/// connecting to it is refused instead of being handshaken into a multi-socket nobody accepts.
#[test]
fn a_dropped_listener_frees_its_port() {
    let l = Listener::bind("127.0.0.1:0".parse().unwrap(), lo_options()).unwrap();
    let addr = l.local_addr();
    drop(l);
    let deadline = Instant::now() + Duration::from_secs(5);
    let again = loop {
        match Listener::bind(addr, lo_options()) {
            Ok(l) => break l,
            Err(e) if Instant::now() > deadline => panic!("{addr} still bound: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    drop(again);
    std::thread::sleep(Duration::from_millis(100));
    let mut o = lo_options();
    o.connect_timeout = Duration::from_secs(1);
    assert!(MultiSocket::connect(addr, o).is_err());
}

/// Credit over real sockets: a reader slower than the sender holds the sender back with credit
/// (it waits, and the receiver never holds much more than its window unread), AFC's read rate
/// reaches the sender, and every byte arrives.
#[test]
fn credit_holds_a_fast_sender_to_a_slow_reader() {
    use roam_net::proto::session::{FlowPolicy, Memory};
    let small = || {
        let mut o = lo_options();
        o.config.flow.policy = FlowPolicy::Afc;
        o.config.flow.memory = Memory::Fixed(64 << 10);
        o.config.flow.max_feed_forward = 64 << 10;
        o
    };
    let (c, s, _l) = pair(small(), small());
    let total = 8 << 20;
    let sender = std::thread::spawn(move || {
        for _ in 0..total / (256 << 10) {
            c.send(Label::BackgroundLarge, vec![9u8; 256 << 10], None)
                .unwrap();
        }
        c.close(Duration::from_secs(30));
        c
    });
    // About 16 MiB/s: 64 KiB every 4 ms.
    let mut got = 0;
    while let Some(d) = s.recv().unwrap() {
        assert!(d.data.iter().all(|&b| b == 9));
        got += d.data.len();
        std::thread::sleep(Duration::from_micros(250 * d.data.len() as u64 / 4096));
    }
    let c = sender.join().unwrap();
    assert_eq!(got, total);
    let (rx, tx) = (s.flow_stats(), c.flow_stats());
    assert!(rx.credit && rx.read_rate, "{rx:?}");
    assert!(rx.credits_sent > 10, "{rx:?}");
    assert!(tx.blocked > 0, "the sender never waited for credit: {tx:?}");
    assert!(tx.peer_read_rate > 0, "{tx:?}");
    // Unread, acknowledged: the window and the feed-forward, plus an IROB in flight.
    assert!(rx.peak_unread <= (128 << 10) + (256 << 10), "{rx:?}");
}

/// A multi-socket given a path memory that knows its path starts from what it holds (a
/// bandwidth estimate of 1 Mbit/s on loopback, which nothing else would give it: on loopback
/// the probes' fit finds no bandwidth), and writes its estimates back. (That it then sends no
/// probe at once is `session::probe_tests::a_recalled_path_is_not_probed_at_once`.)
#[test]
fn a_multi_socket_starts_from_the_path_memory() {
    let lo = std::net::IpAddr::from(Ipv4Addr::LOCALHOST);
    let memory = Arc::new(PathMemory::new());
    let remembered = BitRate::mbps(1);
    memory.remember(
        (lo, lo),
        Some(Duration::from_millis(1)),
        Some(remembered),
        Instant::now(),
    );
    let client = Options {
        paths: Some(memory.clone()),
        ..lo_options()
    };
    let (c, s, _l) = pair(client, lo_options());
    std::thread::sleep(Duration::from_secs(1));
    let bw = |m: &MultiSocket| m.estimates().first().and_then(|v| v.bandwidth);
    assert_eq!(bw(&c), Some(remembered), "{:?}", c.estimates());
    let r = memory.recall((lo, lo), Instant::now()).unwrap();
    assert_eq!(r.bandwidth, remembered);
    assert!(
        r.age >= Duration::from_secs(1),
        "written back unchanged, so it ages"
    );
    drop((c, s));
}

/// Two multi-sockets over one path that share a path memory take turns at its idle probes
/// (`PathMemory::probe_turn`, one backoff per path): idle side by side for 3 s, they send
/// between them about as many idle probes as a third alone does, not twice as many.
#[test]
fn multi_sockets_sharing_a_path_memory_take_turns_at_idle_probes() {
    let memory = Arc::new(PathMemory::new());
    let quick = |paths: Option<Arc<PathMemory>>| {
        let mut o = lo_options();
        o.config.probe_interval = Duration::from_millis(200);
        o.config.max_probe_interval = Duration::from_millis(800);
        o.paths = paths;
        o
    };
    let (a, _a, _la) = pair(quick(Some(memory.clone())), lo_options());
    let (b, _b, _lb) = pair(quick(Some(memory.clone())), lo_options());
    let (alone, _c, _lc) = pair(quick(None), lo_options());
    std::thread::sleep(Duration::from_secs(3));
    // Each probes its network once when it appears (unless it recalled the path), then only
    // when idle: at 0.2, 0.4, 0.8, 1.6 and 2.4 s alone.
    let idle = |m: &MultiSocket| m.probes_sent().saturating_sub(1);
    let (shared, alone) = (idle(&a) + idle(&b), idle(&alone));
    assert!(alone >= 2, "the lone multi-socket sent {alone} idle probes");
    // One probe a turn, and the turns follow one backoff: at most one more than alone (the
    // two backoffs' phases differ), where without turns they send about twice as many.
    assert!(
        (1..=alone + 1).contains(&shared),
        "sharing a path memory, the two sent {shared} idle probes; alone, one sent {alone}"
    );
}

/// Issue 48, item 1: a send writes its frames from the caller's thread when the connection's
/// writer is idle (`runtime::out`): spaced small sends are written by the sender, not handed
/// to the writer task, and arrive whole and in order. A large send the kernel cannot take at
/// once is finished by the writer, every byte in its place.
#[test]
fn sends_write_from_the_callers_thread_when_the_writer_is_idle() {
    let (c, s, _l) = pair(lo_options(), lo_options());
    // The handshake's probes and estimates go out first.
    std::thread::sleep(Duration::from_millis(300));
    let before = c.write_counts();
    for i in 0..50u32 {
        c.send(Label::ForegroundSmall, i.to_be_bytes().to_vec(), None)
            .unwrap();
        let (_, _, d) = s.recv_irob().unwrap().unwrap();
        assert_eq!(d, i.to_be_bytes());
        // The peer's acknowledgement arrives and its writer pass ends.
        std::thread::sleep(Duration::from_millis(5));
    }
    let direct = c.write_counts().from_caller - before.from_caller;
    assert!(direct >= 45, "{direct} of 50 sends written by the sender");

    let before = c.write_counts();
    let big: Vec<u8> = (0..8 << 20).map(|i: u32| (i % 251) as u8).collect();
    c.send(Label::ForegroundLarge, big.clone(), None).unwrap();
    std::thread::sleep(Duration::from_millis(200)); // the receiver lags: the socket fills
    let (_, _, d) = s.recv_irob().unwrap().unwrap();
    assert!(d == big, "the large send arrived changed");
    assert!(
        c.write_counts().from_writer > before.from_writer,
        "the writer finished nothing: {:?}",
        c.write_counts()
    );
}
