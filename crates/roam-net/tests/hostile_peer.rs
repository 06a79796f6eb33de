//! A hostile or broken peer: random bytes and random well-formed frames fed to a session never
//! panic it (the stable-toolchain companion of `fuzz/`).

use bytes::Bytes;
use proptest::prelude::*;
use roam_core::Time;
use roam_net::proto::session::{Config, Session};
use roam_net::proto::wire::{Chunk, Decoder, Deps, Frame, HaveEntry, NetInfo};
use roam_net::proto::Label;

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
        1 => Just(Frame::Estimate { networks: vec![NetInfo { net: 1, addr: [1, 2, 3, 4], rtt_us: 5, flags: 3, bandwidth_bps: 9, port: 7 }] }),
        1 => (0u64..5, 0u32..100).prop_map(|(id, padding)| Frame::Probe { id, padding }),
        1 => (0u64..5, 0u64..100).prop_map(|(id, probe_size)| Frame::ProbeReply { id, probe_size }),
        1 => (0u64..40).prop_map(|irobs| Frame::Goodbye { irobs }),
        // Rare: these close the connection.
        1 => prop_oneof![Just(Frame::JoinOk), Just(Frame::Error { reason: "x".into(), fatal: false }), Just(Frame::Error { reason: "y".into(), fatal: true })],
    ]
}

fn hello() -> Frame {
    Frame::Hello {
        key: [1; 32],
        window: 1 << 20,
        networks: vec![],
    }
}

fn drive(s: &mut Session, t: u64) {
    while s.recv().is_some() {}
    while s.poll_transmit(1, Time::from_millis(t), 1 << 20).is_some() {}
    while s.poll_event().is_some() {}
    s.handle_timeout(Time::from_millis(t));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]
    #[test]
    fn random_frames_never_panic_a_session(frames in proptest::collection::vec(frame(), 0..40)) {
        let mut s = Session::server(Config { max_irob_size: 4096, ..Config::default() }, 1, 7);
        s.accept_connection(1, hello(), Time::ZERO);
        for (i, f) in frames.into_iter().enumerate() {
            s.handle_frame(1, f, Time::from_millis(i as u64));
            drive(&mut s, i as u64);
        }
    }

    #[test]
    fn random_bytes_through_the_decoder_never_panic_a_session(bytes in proptest::collection::vec(any::<u8>(), 0..2000)) {
        let mut s = Session::server(Config::default(), 1, 7);
        s.accept_connection(1, hello(), Time::ZERO);
        let mut d = Decoder::default();
        d.push(&bytes);
        let mut t = 0;
        while let Ok(Some(f)) = d.next_frame() {
            t += 1;
            s.handle_frame(1, f, Time::from_millis(t));
            drive(&mut s, t);
        }
    }
}
