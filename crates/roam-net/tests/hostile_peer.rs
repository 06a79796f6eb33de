//! A hostile or broken peer: random bytes and random well-formed frames fed to a session never
//! panic it (the stable-toolchain companion of `fuzz/`).

use bytes::Bytes;
use proptest::prelude::*;
use roam_core::Time;
use roam_net::proto::session::{Config, Session};
use roam_net::proto::wire::{Caps, Chunk, Decoder, Deps, Frame, HaveEntry, NetInfo};
use roam_net::proto::Label;
use roam_net::proto::NetKind;

fn frame() -> impl Strategy<Value = Frame> {
    let label = (0u8..4).prop_map(|l| Label::from_wire(l).unwrap());
    let deps = prop_oneof![
        Just(None),
        Just(Some(Deps::AllEarlier)),
        proptest::collection::vec(0u64..40, 0..4).prop_map(|v| Some(Deps::List(v))),
    ];
    // Mostly one label per IROB (a label change closes the connection, which ends the run).
    let chunk = (
        0u64..40,
        label,
        any::<u8>(),
        0u64..5000,
        deps,
        any::<bool>(),
        proptest::collection::vec(0u64..40, 0..3),
        0usize..3000,
    )
        .prop_map(|(irob, random_label, coin, offset, deps, end, acks, len)| {
            let label = if coin < 250 {
                Label::from_wire((irob % 4) as u8).unwrap()
            } else {
                random_label
            };
            // Dependencies must be lower than the IROB to pass the decoder; keep some that are not
            // to exercise the session's own checks when frames are handed over directly.
            Frame::Data(Chunk {
                irob,
                label,
                offset,
                deps,
                end,
                acks,
                data: Bytes::from(vec![7u8; len]),
            })
        });
    prop_oneof![
        40 => chunk,
        5 => proptest::collection::vec(0u64..40, 0..5).prop_map(|acks| Frame::Ack { acks }),
        5 => proptest::collection::vec(0u64..40, 0..5).prop_map(|irobs| Frame::ResendRequest { irobs }),
        5 => (0u64..40, any::<bool>(), any::<bool>(), proptest::option::of(0u64..5000), proptest::collection::vec((0u64..5000, 1u64..100), 0..3))
            .prop_map(|(irob, complete, first, end, r)| Frame::Have { entries: vec![HaveEntry { irob, complete, first, end, ranges: r.into_iter().map(|(s, l)| (s, s + l)).collect() }] }),
        1 => Just(Frame::Estimate { networks: vec![NetInfo { net: 1, addr: [1, 2, 3, 4].into(), rtt_us: 5, flags: 3, bandwidth_bps: 9, port: 7 }] }),
        1 => (0u64..5, 0u32..100).prop_map(|(id, padding)| Frame::Probe { id, padding }),
        1 => (0u64..5, 0u64..100).prop_map(|(id, probe_size)| Frame::ProbeReply { id, probe_size }),
        1 => (0u64..40).prop_map(|irobs| Frame::Goodbye { irobs }),
        2 => (any::<u64>(), any::<u64>(), any::<u32>(), any::<bool>()).prop_map(|(limit, rate, feed_forward_kib, proactive)| Frame::Credit { limit, rate, feed_forward_kib, proactive }),
        // Rare: these close the connection.
        1 => prop_oneof![Just(Frame::JoinOk), Just(Frame::Error { reason: "x".into(), fatal: false }), Just(Frame::Error { reason: "y".into(), fatal: true })],
    ]
}

fn hello() -> Frame {
    hello_with(Caps::NONE)
}

/// A `Hello` announcing `caps`.
fn hello_with(caps: Caps) -> Frame {
    Frame::Hello {
        key: [1; 32],
        window: 1 << 20,
        caps,
        networks: vec![],
    }
}

fn drive(s: &mut Session, t: u64) {
    while s.recv(Time::from_millis(t)).is_some() {}
    while s.poll_transmit(1, Time::from_millis(t), 1 << 20).is_some() {}
    while s.poll_event().is_some() {}
    s.handle_timeout(Time::from_millis(t));
    if let Err(e) = s.check_invariants() {
        panic!("{e}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]
    #[test]
    fn random_frames_never_panic_a_session(frames in proptest::collection::vec(frame(), 0..40), caps in 0u32..4) {
        let mut s = Session::server(Config { max_irob_size: 4096, ..Config::default() }, 1, 7);
        s.accept_connection(1, hello_with(Caps(caps)), Time::ZERO);
        for (i, f) in frames.into_iter().enumerate() {
            s.handle_frame(1, f, Time::from_millis(i as u64));
            drive(&mut s, i as u64);
        }
    }

    /// Valid frames at and near the decoder's limits (the longest lists, offsets at the IROB
    /// size limit, the most `Have` ranges, the largest probes), each encoded and decoded as a
    /// peer's would be: the session never panics, everything it sends decodes at the peer,
    /// what it buffers for a peer stays within its receive limit, and its connections within
    /// their bounds. (Random bytes, which this replaced, almost never decoded to a frame.)
    #[test]
    fn frames_near_the_limits_keep_the_session_within_its_bounds(
        frames in proptest::collection::vec(frame_near_limits(), 1..24)
    ) {
        let config = near_limits_config();
        let mut s = Session::server(config.clone(), 1, 7);
        s.accept_connection(1, hello(), Time::ZERO);
        for (i, f) in frames.into_iter().enumerate() {
            let t = Time::from_millis(10 * i as u64);
            let mut d = Decoder::new(config.wire);
            d.push(&f.to_bytes());
            let decoded = d.next_frame();
            prop_assert_eq!(decoded.as_ref().ok().and_then(|f| f.as_ref()), Some(&f));
            s.handle_frame(1, f, t);
            if i % 3 == 0 {
                while s.recv(t).is_some() {}
            }
            s.handle_timeout(t);
            while s.poll_event().is_some() {}
            let mut sent = Decoder::new(config.wire);
            while let Some(x) = s.poll_transmit(1, t, 1 << 20) {
                sent.push(&x.head);
                sent.push(&x.data);
            }
            // Everything sent decodes at the peer (an error here fails the case).
            while sent.next_frame().map_err(|e| TestCaseError::fail(e.to_string()))?.is_some() {}
            if s.failure().is_none() {
                let held = s.receive_buffered() - s.receive_backlog();
                prop_assert!(held <= config.receive_limit, "{} bytes held", held);
            }
            prop_assert!(s.connection_count() <= config.max_connections + config.max_half_open);
            prop_assert_eq!(s.check_invariants(), Ok(()));
        }
    }
}

/// Limits small enough for a few frames to reach them.
fn near_limits_config() -> Config {
    let mut c = Config {
        window: 16 << 10,
        max_irob_size: 64 << 10,
        max_pending_irobs: 32,
        ..Config::default()
    };
    c.receive_limit = c.min_receive_limit();
    c
}

/// A valid frame near the limits of [`near_limits_config`] and the default decoder.
fn frame_near_limits() -> impl Strategy<Value = Frame> {
    let wire = near_limits_config().wire;
    let max_irob = near_limits_config().max_irob_size;
    let list = move |n: u64| {
        prop_oneof![Just(0usize), Just(wire.max_list - 1), Just(wire.max_list)]
            .prop_map(move |len| (0..len as u64).map(|i| i % n).collect::<Vec<u64>>())
    };
    let chunk = (
        1u64..48,
        0u8..4,
        prop_oneof![0u64..16, (max_irob - 4096)..(max_irob + 16)],
        prop_oneof![Just(0usize), Just(1usize), Just(4096usize)],
        prop_oneof![Just(0usize), Just(wire.max_deps)],
        any::<bool>(),
        list(48),
    )
        .prop_map(move |(irob, label, offset, len, deps, end, acks)| {
            Frame::Data(Chunk {
                irob,
                label: Label::from_wire(label).unwrap(),
                offset,
                deps: Some(Deps::List((0..deps as u64).map(|d| d % irob).collect())),
                end,
                acks,
                data: Bytes::from(vec![7u8; len]),
            })
        });
    let have = (0u64..48, 0usize..2000).prop_map(|(irob, n)| Frame::Have {
        entries: vec![HaveEntry {
            irob,
            complete: false,
            first: true,
            end: Some(1 << 20),
            ranges: (0..n as u64).map(|k| (2 * k, 2 * k + 1)).collect(),
        }],
    });
    let net = |i: u64| NetInfo {
        net: i as u32,
        addr: [10, 0, (i % 256) as u8, 2].into(),
        rtt_us: 1000,
        flags: 3,
        bandwidth_bps: 1_000_000,
        port: 4000,
    };
    prop_oneof![
        8 => chunk,
        2 => list(48).prop_map(|acks| Frame::Ack { acks }),
        2 => list(48).prop_map(|irobs| Frame::ResendRequest { irobs }),
        2 => have,
        1 => list(u64::MAX).prop_map(move |n| Frame::Estimate { networks: n.into_iter().map(net).collect() }),
        1 => prop_oneof![Just(0u32), Just((wire.max_body - 64) as u32)].prop_map(|padding| Frame::Probe { id: 1, padding }),
        1 => (0u64..64).prop_map(|irobs| Frame::Goodbye { irobs }),
    ]
}

// ----- a hostile peer's limits: each of these fails on a session without the bound ---------

fn server() -> Session {
    let mut s = Session::server(Config::default(), 1, 7);
    s.accept_connection(1, hello(), Time::ZERO);
    while s.poll_transmit(1, Time::ZERO, 1 << 20).is_some() {}
    s
}

/// Every frame the session has for connection 1 now, decoded as the peer decodes them.
fn sent_frames(s: &mut Session, t: Time) -> (Vec<Frame>, usize) {
    let mut d = Decoder::default();
    let mut bytes = 0;
    while let Some(x) = s.poll_transmit(1, t, 1 << 20) {
        bytes += x.len();
        d.push(&x.head);
        d.push(&x.data);
    }
    let mut frames = Vec::new();
    while let Some(f) = d.next_frame().expect("every frame decodes at the peer") {
        frames.push(f);
    }
    (frames, bytes)
}

/// The sum of `per_frame` over `frames` (ids acknowledged, entries answered, ...).
fn count(frames: &[Frame], per_frame: impl Fn(&Frame) -> usize) -> usize {
    frames.iter().map(per_frame).sum()
}

/// Give the server data to send (it opens connections only then).
fn queue_data(s: &mut Session) {
    let data = Bytes::from_static(b"data");
    s.send(Label::BackgroundLarge, data, None, Time::ZERO)
        .unwrap();
}

fn one_byte(irob: u64, offset: u64, deps: Option<Deps>, end: bool) -> Frame {
    Frame::Data(Chunk {
        irob,
        label: Label::BackgroundSmall,
        offset,
        deps,
        end,
        acks: vec![],
        data: Bytes::from_static(b"x"),
    })
}

/// 5000 IROBs completed at once are acknowledged in frames the peer can decode (the decoder
/// takes at most 4096 ids a list): one list of 5000 closed the connection of an honest peer.
#[test]
fn acknowledgements_are_split_at_the_list_limit() {
    let mut s = server();
    for i in 0..5000 {
        s.handle_frame(
            1,
            one_byte(i, 0, Some(Deps::List(vec![])), true),
            Time::ZERO,
        );
    }
    // Those past the first frame's list wait for the acknowledgement delay.
    let due = Time::ZERO + Config::default().ack_delay;
    let (frames, _) = sent_frames(&mut s, due);
    assert_eq!(count(&frames, acks_in), 5000);
}

/// `ResendRequest`s about IROBs a peer sent as 10,000 one-byte pieces with gaps: the answers
/// stay small and decode (an entry named up to 4096 ranges: 4096 x 64 KiB = 256 MiB in one
/// frame, far past the peer decoder's 1 MiB), and a question repeated before the answer went
/// out is answered once (4096 copies of one question were 4096 entries, 2.2 MB).
#[test]
fn a_resend_request_does_not_amplify() {
    let mut s = server();
    for irob in 0..3 {
        for k in 0..10_000u64 {
            s.handle_frame(1, one_byte(irob, 2 * k + 1, None, false), Time::ZERO);
        }
    }
    for irobs in [vec![0; 4096], vec![1, 2, 1, 0]] {
        s.handle_frame(1, Frame::ResendRequest { irobs }, Time::ZERO);
    }
    let (frames, bytes) = sent_frames(&mut s, Time::ZERO);
    let mut answered: Vec<u64> = frames
        .iter()
        .flat_map(|f| match f {
            Frame::Have { entries } => entries.iter().map(|e| e.irob).collect(),
            _ => vec![],
        })
        .collect();
    answered.sort();
    assert_eq!(
        answered,
        vec![0, 1, 2],
        "every IROB asked about is answered, once"
    );
    assert!(
        bytes < 64 << 10,
        "{bytes} bytes answered 32 KiB of questions"
    );
}

/// Questions about more IROBs than one frame can answer (8192, in two requests) are answered
/// in frames the peer can decode: at most the decoder's list limit a frame.
#[test]
fn answers_are_split_at_the_list_limit() {
    let mut s = server();
    for r in 0..2u64 {
        let irobs = (r * 4096..(r + 1) * 4096).collect();
        s.handle_frame(1, Frame::ResendRequest { irobs }, Time::ZERO);
    }
    let (frames, _) = sent_frames(&mut s, Time::ZERO);
    let entries = count(&frames, |f| match f {
        Frame::Have { entries } => entries.len(),
        _ => 0,
    });
    assert_eq!(entries, 8192);
}

/// A peer asking and never reading the answers loses its connection once they hold
/// `Config::max_control_bytes`, instead of growing the queue of answers without bound.
#[test]
fn unread_answers_are_bounded() {
    let mut s = server();
    let mut probes = 0u64;
    let closed = loop {
        s.handle_frame(
            1,
            Frame::Probe {
                id: probes,
                padding: 0,
            },
            Time::ZERO,
        );
        probes += 1;
        let mut closed = false;
        while let Some(e) = s.poll_event() {
            closed |= matches!(
                e,
                roam_net::proto::session::Event::CloseConnection { conn: 1, .. }
            );
        }
        if closed || probes > 10_000_000 {
            break closed;
        }
    };
    assert!(closed, "the flooding connection was not closed");
    let reply = std::mem::size_of::<Frame>() as u64;
    assert!(
        probes * reply <= 2 * Config::default().max_control_bytes as u64,
        "{probes} probes answered before the connection was closed"
    );
    let (frames, _) = sent_frames(&mut s, Time::ZERO);
    assert!(frames.len() < 10, "{} frames still queued", frames.len());
}

/// 65,535 IROBs that all depend on one the peer has not sent yet, then that one: each
/// arrival costs O(log n), and the last acknowledges and releases them all at once. (The
/// receiver rescanned every complete, unacknowledged IROB on every completion, and every held
/// IROB on every check for a delivery: billions of steps, minutes here, under the session's
/// lock.)
#[test]
fn irobs_waiting_for_one_dependency_do_not_cost_quadratic_time() {
    let mut s = server();
    let n = 65_535u64;
    let t0 = std::time::Instant::now();
    for id in 1..=n {
        s.handle_frame(
            1,
            one_byte(id, 0, Some(Deps::List(vec![0])), true),
            Time::ZERO,
        );
        assert!(!s.has_delivery()); // as the driver asks after every frame
        while s.poll_transmit(1, Time::ZERO, 1 << 20).is_some() {}
    }
    s.handle_frame(
        1,
        one_byte(0, 0, Some(Deps::List(vec![])), true),
        Time::ZERO,
    );
    let (frames, _) = sent_frames(&mut s, Time::ZERO);
    assert_eq!(count(&frames, acks_in), n as usize + 1, "all acknowledged");
    let mut delivered = 0;
    while let Some(d) = s.recv(Time::ZERO) {
        delivered += d.end as u64;
    }
    let took = t0.elapsed();
    assert_eq!(delivered, n + 1);
    assert_eq!(s.check_invariants(), Ok(()));
    // Linear work is well under a second even unoptimised; the quadratic scans took minutes.
    assert!(
        took < std::time::Duration::from_secs(20),
        "{took:?} for {n} IROBs"
    );
}

/// One IROB sent as 200,000 one-byte pieces with a gap after each: each piece costs
/// O(log n). (Walking every held range for every new piece took minutes here.)
#[test]
fn one_byte_pieces_with_gaps_do_not_cost_quadratic_time() {
    let mut s = server();
    for k in 0..200_000u64 {
        s.handle_frame(1, one_byte(0, 2 * k + 1, None, false), Time::ZERO);
    }
    assert_eq!(s.receive_buffered(), 200_000);
}

/// An `Estimate` naming thousands of usable networks, each with a port: the server keeps at
/// most `max_networks` of them, so it opens at most that many connections.
#[test]
fn a_peer_cannot_announce_thousands_of_networks() {
    let mut s = server();
    queue_data(&mut s);
    let networks = (0..4000)
        .map(|i| NetInfo {
            net: 100 + i,
            addr: [10, 0, (i >> 8) as u8, i as u8].into(),
            rtt_us: 0,
            flags: 2,
            bandwidth_bps: 0,
            port: 9,
        })
        .collect();
    s.handle_frame(1, Frame::Estimate { networks }, Time::ZERO);
    let mut opens = 0;
    for t in 0..20 {
        s.handle_timeout(Time::from_millis(1000 * t));
        while let Some(e) = s.poll_event() {
            if let roam_net::proto::session::Event::OpenConnection { net } = e {
                opens += 1;
                s.open_failed(net, Time::from_millis(1000 * t));
            }
        }
    }
    assert!(
        opens <= 20 * Config::default().max_networks,
        "{opens} connection attempts"
    );
    assert!(
        s.estimates().len() <= Config::default().max_networks,
        "{} networks kept",
        s.estimates().len()
    );
}

/// Networks a `Hello` announces with an address and port: the server never connects to an
/// address it has not seen the client use (a peer could point it at any host), and over the
/// network it has seen, it makes one attempt per announcement however often the attempt fails.
#[test]
fn the_server_opens_connections_only_where_the_client_was_seen() {
    let usable = |net, addr, port| NetInfo {
        net,
        addr,
        rtt_us: 0,
        flags: 2,
        bandwidth_bps: 0,
        port,
    };
    let mut s = Session::server(Config::default(), 1, 7);
    let hello = Frame::Hello {
        key: [1; 32],
        window: 1 << 20,
        caps: Caps::NONE,
        networks: vec![
            usable(1, [192, 0, 2, 1].into(), 9),
            usable(2, [198, 51, 100, 7].into(), 25),
        ],
    };
    s.accept_connection(1, hello, Time::ZERO);
    s.connection_from(1, [10, 77, 1, 2].into());
    queue_data(&mut s);
    s.connection_closed(1, Time::from_millis(100));
    let mut attempts = Vec::new();
    for t in 1..60 {
        let now = Time::from_millis(500 * t);
        s.handle_timeout(now);
        while let Some(e) = s.poll_event() {
            if let roam_net::proto::session::Event::OpenConnection { net } = e {
                attempts.push((net, s.peer_address(net)));
                s.open_failed(net, now);
            }
        }
    }
    assert_eq!(
        attempts,
        vec![(1, Some(([10, 77, 1, 2].into(), 9)))],
        "one attempt, to the address the client's connection came from"
    );
}

/// Someone who knows the session id (it travels in clear without TLS) joins and never proves
/// the key: the half-open join is closed after the handshake timeout, freeing its slot.
#[test]
fn a_half_open_join_times_out() {
    let mut s = server();
    let join = Frame::Join {
        session: 7,
        nonce: [3; 16],
        net: 1,
    };
    s.accept_connection(2, join, Time::ZERO);
    assert_eq!(s.connection_count(), 2, "the join was challenged");
    while s.poll_event().is_some() {}
    let timeout = Config::default().handshake_timeout;
    assert!(s.poll_timeout().is_some_and(|t| t <= Time::ZERO + timeout));
    s.handle_timeout(Time::ZERO + timeout);
    let mut closed = false;
    while let Some(e) = s.poll_event() {
        closed |= matches!(
            e,
            roam_net::proto::session::Event::CloseConnection { conn: 2, .. }
        );
    }
    assert!(closed, "the half-open join still holds its slot");
    while s.poll_transmit(2, Time::ZERO + timeout, 0).is_some() {}
    s.forget_connection(2, Time::ZERO + timeout);
    assert_eq!(s.connection_count(), 1);
}

/// The frames `s` has for connection `conn` now, as the peer decodes them.
fn frames_for(s: &mut Session, conn: u64, t: Time) -> Vec<Frame> {
    let mut d = Decoder::default();
    while let Some(x) = s.poll_transmit(conn, t, 1 << 20) {
        d.push(&x.head);
        d.push(&x.data);
    }
    let mut frames = Vec::new();
    while let Some(f) = d.next_frame().expect("every frame decodes at the peer") {
        frames.push(f);
    }
    frames
}

/// Move frames both ways over the connection `conn` (the same id on both sides) until
/// neither side has more.
fn pump(client: &mut Session, server: &mut Session, conn: u64, t: Time) {
    loop {
        let up = frames_for(client, conn, t);
        let down = frames_for(server, conn, t);
        if up.is_empty() && down.is_empty() {
            return;
        }
        for f in up {
            server.handle_frame(conn, f, t);
        }
        for f in down {
            client.handle_frame(conn, f, t);
        }
    }
}

/// The client's connection over `net` as its driver would open it: the first frame it sends.
fn open_over(client: &mut Session, net: u32, t: Time) -> Frame {
    client.network_up(net, [10, 0, net as u8, 2].into(), NetKind::default(), t);
    while let Some(e) = client.poll_event() {
        if let roam_net::proto::session::Event::OpenConnection { net: n } = e {
            client.add_connection(n as u64, n, t);
        }
    }
    frames_for(client, net as u64, t).remove(0)
}

/// Twenty joins that never prove the key (someone who read the session id off the wire) take
/// no connection slot: the honest client's join over its second network still gets in. With
/// the challenged joins counted against `max_connections` (16), it was refused.
#[test]
fn joins_that_never_prove_the_key_cannot_keep_an_honest_join_out() {
    let t = Time::ZERO;
    let mut client = Session::client(Config::default(), 2);
    let hello = open_over(&mut client, 1, t);
    let mut server = Session::server(Config::default(), 1, 7);
    server.accept_connection(1, hello, t);
    pump(&mut client, &mut server, 1, t);
    assert!(client.is_established());
    for i in 0..20 {
        let join = Frame::Join {
            session: server.session_id(),
            nonce: [i as u8; 16],
            net: 1,
        };
        server.accept_connection(100 + i, join, t);
    }
    let held = server.connection_count() - 1;
    assert!(
        held <= Config::default().max_half_open,
        "{held} unproven joins held"
    );
    let join = open_over(&mut client, 2, t);
    assert!(matches!(join, Frame::Join { .. }));
    server.accept_connection(2, join, t);
    pump(&mut client, &mut server, 2, t);
    assert!(
        server.established_connections().contains(&(2, 2)),
        "the honest join was kept out: {:?}",
        std::iter::from_fn(|| server.poll_event()).collect::<Vec<_>>()
    );
}

/// An honest sender stays within `window + max_irob_size` of unacknowledged bytes at the
/// receiver, however many IROBs it keeps open and growing: the window counts bytes sent, not
/// IROBs started. (Counting IROBs started, eight open IROBs each grown to 200 KiB after
/// their first byte put 1.6 MB past a 64 KiB window, and the receiver, whose limit is now
/// window + max_irob_size, failed the multi-socket.)
#[test]
fn an_honest_sender_stays_within_the_receive_limit() {
    let t = Time::ZERO;
    // The clock stands still here: acknowledgements go out without coalescing.
    let mut config = Config {
        window: 64 << 10,
        max_irob_size: 256 << 10,
        ack_delay: std::time::Duration::ZERO,
        ..Config::default()
    };
    config.receive_limit = config.min_receive_limit();
    let mut client = Session::client(config.clone(), 2);
    let hello = open_over(&mut client, 1, t);
    let mut server = Session::server(config.clone(), 1, 7);
    server.accept_connection(1, hello, t);
    pump(&mut client, &mut server, 1, t);
    let ids: Vec<u64> = (0..8)
        .map(|_| {
            let id = client
                .begin_irob(Label::BackgroundLarge, Deps::List(vec![]), None, t)
                .unwrap();
            client.irob_send(id, Bytes::from_static(b"x")).unwrap();
            id
        })
        .collect();
    pump(&mut client, &mut server, 1, t);
    let mut most = 0;
    let mut step = |client: &mut Session, server: &mut Session| {
        pump(client, server, 1, t);
        most = most.max(server.receive_buffered() - server.receive_backlog());
        assert!(server.failure().is_none(), "{:?}", server.failure());
    };
    for &id in &ids {
        client
            .irob_send(id, Bytes::from(vec![1u8; 200 << 10]))
            .unwrap();
        step(&mut client, &mut server);
    }
    let mut got = 0;
    for &id in &ids {
        client.end_irob(id).unwrap();
        step(&mut client, &mut server);
        while let Some(d) = server.recv(Time::ZERO) {
            got += d.data.len();
        }
        step(&mut client, &mut server);
    }
    for _ in 0..10 {
        step(&mut client, &mut server);
        while let Some(d) = server.recv(Time::ZERO) {
            got += d.data.len();
        }
    }
    assert_eq!(got, 8 * (1 + (200 << 10)), "everything was delivered");
    assert!(
        most <= config.receive_limit,
        "{most} unacknowledged bytes held"
    );
    assert!(most > config.window, "the oldest IROB went past the window");
}

/// A peer that sends IROB after IROB and never reads the acknowledgements: once
/// `MAX_PENDING_ACKS` wait unsent, the session tells the driver to stop reading (the pending
/// list grew with every IROB before); the first frames written let it read again.
#[test]
fn unsent_acknowledgements_pause_reading() {
    use roam_net::proto::session::MAX_PENDING_ACKS;
    let mut s = server();
    let mut irob = 0;
    while !s.receive_paused() {
        assert!(
            irob <= MAX_PENDING_ACKS as u64,
            "still reading with {irob} acknowledgements unsent"
        );
        s.handle_frame(
            1,
            one_byte(irob, 0, Some(Deps::List(vec![])), true),
            Time::ZERO,
        );
        while s.recv(Time::ZERO).is_some() {}
        irob += 1;
    }
    assert_eq!(irob, MAX_PENDING_ACKS as u64);
    let (frames, _) = sent_frames(&mut s, Time::ZERO);
    assert_eq!(count(&frames, acks_in), MAX_PENDING_ACKS);
    assert!(!s.receive_paused());
}

/// The acknowledgements a frame carries.
fn acks_in(f: &Frame) -> usize {
    match f {
        Frame::Ack { acks } => acks.len(),
        Frame::Data(c) => c.acks.len(),
        _ => 0,
    }
}

/// A session's outgoing frames on connection 1 at `t`, decoded.
fn outgoing(s: &mut Session, t: Time) -> Vec<Frame> {
    let mut dec = Decoder::default();
    while let Some(tx) = s.poll_transmit(1, t, 1 << 20) {
        dec.push(&tx.head);
        dec.push(&tx.data);
    }
    let mut out = vec![];
    while let Ok(Some(f)) = dec.next_frame() {
        out.push(f);
    }
    out
}

/// A complete IROB `id` of `len` bytes that depends on nothing.
fn whole(id: u64, len: usize) -> Frame {
    Frame::Data(Chunk {
        irob: id,
        label: Label::BackgroundSmall,
        offset: 0,
        deps: Some(Deps::List(vec![])),
        end: true,
        acks: vec![],
        data: Bytes::from(vec![1u8; len]),
    })
}

#[test]
fn credits_a_peer_did_not_negotiate_or_cannot_mean_are_counted_and_ignored() {
    let credit = |limit, rate| Frame::Credit {
        limit,
        rate,
        feed_forward_kib: u32::MAX,
        proactive: false,
    };
    // A peer from before credit: its Credit frames are ignored, and none is sent to it.
    let mut s = Session::server(Config::default(), 1, 7);
    s.accept_connection(1, hello(), Time::ZERO);
    assert!(!outgoing(&mut s, Time::ZERO)
        .iter()
        .any(|f| matches!(f, Frame::Credit { .. })));
    s.handle_frame(1, credit(5, 7), Time::ZERO);
    let st = s.flow_stats();
    assert!(!st.credit);
    assert_eq!(st.unnegotiated, 1);
    assert!(s.failure().is_none());

    // A peer with credit but no read rate: a rate it sends is refused; a lower limit is stale.
    let mut s = Session::server(Config::default(), 1, 7);
    s.accept_connection(1, hello_with(Caps::CREDIT), Time::ZERO);
    assert!(outgoing(&mut s, Time::ZERO)
        .iter()
        .any(|f| matches!(f, Frame::Credit { rate: 0, .. })));
    s.handle_frame(1, credit(1 << 20, 99), Time::ZERO);
    s.handle_frame(1, credit(1 << 10, 0), Time::ZERO);
    let st = s.flow_stats();
    assert_eq!((st.rates_refused, st.stale, st.credits_received), (1, 1, 1));
    assert_eq!(st.peer_read_rate, 0);

    // With the read rate negotiated, an absurd rate is clamped (and counted).
    let mut s = Session::server(Config::default(), 1, 7);
    s.accept_connection(1, hello_with(Caps::CREDIT | Caps::READ_RATE), Time::ZERO);
    s.handle_frame(1, credit(1 << 20, u64::MAX), Time::ZERO);
    let st = s.flow_stats();
    assert_eq!(st.rates_refused, 1);
    assert_eq!(st.peer_read_rate, Config::default().flow.max_peer_rate);
    assert!(s.failure().is_none());
}

#[test]
fn a_peer_that_sends_beyond_its_credit_fails_the_multi_socket() {
    // The server grants its first window (256 KiB by default) and nobody reads: complete
    // IROBs are acknowledged and readable, so they use the credit up.
    let mut s = Session::server(Config::default(), 1, 7);
    s.accept_connection(1, hello_with(Caps::CREDIT), Time::ZERO);
    let window = match outgoing(&mut s, Time::ZERO)
        .into_iter()
        .find_map(|f| match f {
            Frame::Credit { limit, .. } => Some(limit),
            _ => None,
        }) {
        Some(l) => l,
        None => panic!("no first credit"),
    };
    let mut sent = 0;
    for id in 0.. {
        s.handle_frame(1, whole(id, 4096), Time::from_millis(id));
        sent += 4096;
        if s.failure().is_some() {
            break;
        }
        assert!(
            sent <= window,
            "{sent} bytes beyond a credit of {window} accepted"
        );
    }
    let e = s.failure().unwrap().to_string();
    assert!(e.contains("beyond the") && e.contains("credit"), "{e}");
    assert_eq!(sent, window + 4096);
    // A legacy peer may send the same: its bound is the driver's pause, not a failure.
    let mut legacy = Session::server(Config::default(), 1, 7);
    legacy.accept_connection(1, hello(), Time::ZERO);
    for id in 0..(window / 4096 + 10) {
        legacy.handle_frame(1, whole(id, 4096), Time::from_millis(id));
    }
    assert!(legacy.failure().is_none());
    assert!(legacy.receive_paused() || legacy.receive_backlog() <= Config::default().window);
}

#[test]
fn one_byte_irobs_within_a_large_credit_pause_reading_before_the_pending_limit() {
    // Credit counts bytes: 16 MiB of it would let a peer (honest, but with a slow reader)
    // send far more one-byte IROBs than the receiver holds unfinished. The driver stops
    // reading at half the pending limit instead of the session failing at it.
    let mut config = Config::default();
    config.flow.memory = roam_net::proto::session::Memory::Fixed(16 << 20);
    let mut s = Session::server(config.clone(), 1, 7);
    s.accept_connection(1, hello_with(Caps::CREDIT), Time::ZERO);
    let mut sent = 0u64;
    while !s.receive_paused() {
        s.handle_frame(1, whole(sent, 1), Time::ZERO);
        sent += 1;
        assert!(s.failure().is_none(), "{:?} after {sent}", s.failure());
        assert!(sent <= config.max_pending_irobs as u64, "never paused");
    }
    assert!(sent <= config.max_pending_irobs as u64 / 2 + 1, "{sent}");
}
