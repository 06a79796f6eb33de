//! The wire format's tests: round trips, limits, and frames near them.

use super::*;
use proptest::prelude::*;

/// `missing` counts what the front frame still lacks once its header is in, and nothing
/// for a header the decoder will refuse.
#[test]
fn missing_counts_the_rest_of_the_front_frame() {
    let frame = Frame::Ack {
        acks: vec![1, 2, 3],
    }
    .to_bytes();
    let mut d = Decoder::default();
    assert_eq!(d.missing(), None);
    d.push(&frame[..HEADER_LEN - 1]);
    assert_eq!(d.missing(), None);
    d.push(&frame[HEADER_LEN - 1..HEADER_LEN + 1]);
    assert_eq!(d.missing(), Some(frame.len() - HEADER_LEN - 1));
    d.push(&frame[HEADER_LEN + 1..]);
    d.push(&frame);
    assert_eq!(d.missing(), Some(0));
    let mut huge = frame.to_vec();
    huge[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
    let mut d = Decoder::default();
    d.push(&huge);
    assert_eq!(d.missing(), None);
    assert!(d.next_frame().is_err());
}

/// A small payload decoded from a large receive buffer is a copy (it does not keep the
/// buffer alive); a bulk one is a slice of the buffer.
#[test]
fn small_payloads_are_copied_out_of_the_receive_buffer() {
    let chunk = |len: usize| {
        Frame::Data(Chunk {
            irob: 1,
            label: Label::BackgroundLarge,
            offset: 0,
            deps: Some(Deps::AllEarlier),
            end: false,
            acks: vec![],
            data: Bytes::from(vec![5u8; len]),
        })
        .to_bytes()
    };
    let mut d = Decoder::default();
    d.buffer_mut().reserve(2 << 20);
    d.push(&chunk(1));
    d.push(&chunk(COPY_BELOW));
    let buf = d.buffer_mut().as_ptr_range();
    let inside = |b: &Bytes| buf.contains(&b.as_ptr());
    let Some(Frame::Data(small)) = d.next_frame().unwrap() else {
        panic!("a data frame")
    };
    let Some(Frame::Data(bulk)) = d.next_frame().unwrap() else {
        panic!("a data frame")
    };
    assert_eq!((small.data.len(), bulk.data.len()), (1, COPY_BELOW));
    assert!(!inside(&small.data), "the one-byte payload pins the buffer");
    assert!(inside(&bulk.data), "the bulk payload was copied");
}

fn samples() -> Vec<Frame> {
    let net = NetInfo {
        net: 2,
        addr: IpAddr::V4(std::net::Ipv4Addr::new(10, 77, 1, 2)),
        rtt_us: 20_000,
        flags: 3,
        bandwidth_bps: 600_000,
        port: 40_123,
    };
    let net6 = NetInfo {
        net: 3,
        addr: "2001:db8::7".parse().unwrap(),
        ..net
    };
    vec![
        Frame::Hello {
            key: [7; 32],
            window: 1 << 24,
            caps: Caps::CREDIT | Caps::READ_RATE,
            networks: vec![net, net6],
        },
        Frame::HelloAck {
            session: 99,
            key: [8; 32],
            window: 5,
            caps: Caps::NONE,
            networks: vec![],
        },
        Frame::Join {
            session: 99,
            nonce: [1; 16],
            net: 3,
        },
        Frame::JoinChallenge {
            nonce: [2; 16],
            mac: [3; 32],
        },
        Frame::JoinProof { mac: [4; 32] },
        Frame::JoinOk,
        Frame::Data(Chunk {
            irob: 5,
            label: Label::BackgroundLarge,
            offset: 0,
            deps: Some(Deps::List(vec![1, 3])),
            end: true,
            acks: vec![4, 9],
            data: Bytes::from_static(b"hello"),
        }),
        Frame::Data(Chunk {
            irob: 6,
            label: Label::ForegroundSmall,
            offset: 10,
            deps: Some(Deps::AllEarlier),
            end: false,
            acks: vec![],
            data: Bytes::new(),
        }),
        Frame::Ack {
            acks: vec![1, 2, 3],
        },
        Frame::ResendRequest { irobs: vec![4] },
        Frame::Have {
            entries: vec![HaveEntry {
                irob: 4,
                complete: false,
                first: true,
                end: Some(9),
                ranges: vec![(0, 3), (5, 9)],
            }],
        },
        Frame::Estimate {
            networks: vec![net, net],
        },
        Frame::Probe {
            id: 3,
            padding: 100,
        },
        Frame::ProbeReply {
            id: 3,
            probe_size: 132,
        },
        Frame::Goodbye { irobs: 12 },
        Frame::Error {
            reason: "limit".into(),
            fatal: true,
        },
        Frame::Error {
            reason: "malformed".into(),
            fatal: false,
        },
        Frame::Credit {
            limit: 1 << 40,
            rate: 750_000,
            feed_forward_kib: 16 << 10,
            proactive: true,
        },
        Frame::Credit {
            limit: 0,
            rate: 0,
            feed_forward_kib: 0,
            proactive: false,
        },
    ]
}

#[test]
fn a_hello_of_a_peer_without_capabilities_announces_none() {
    // A version-3 peer from before capabilities wrote 0 in `d`; one from after this side
    // may set bits this side does not know, which are dropped.
    for (d, want) in [(0u32, Caps::NONE), (0xffff_fff1, Caps::CREDIT)] {
        let mut hello = Frame::Hello {
            key: [1; 32],
            window: 1 << 20,
            caps: Caps::NONE,
            networks: vec![],
        }
        .to_bytes();
        hello[28..32].copy_from_slice(&d.to_be_bytes());
        let mut dec = Decoder::default();
        dec.push(&hello);
        match dec.next_frame() {
            Ok(Some(Frame::Hello { caps, .. })) => assert_eq!(caps, want, "d = {d:#x}"),
            other => panic!("{other:?}"),
        }
    }
    assert!(Caps::KNOWN.contains(Caps::CREDIT | Caps::READ_RATE));
    assert_eq!(Caps::CREDIT.common(Caps::KNOWN), Caps::CREDIT);
}

#[test]
fn a_credit_with_a_body_is_malformed() {
    let mut bytes = Frame::Credit {
        limit: 1,
        rate: 2,
        feed_forward_kib: 3,
        proactive: false,
    }
    .to_bytes();
    bytes[4..8].copy_from_slice(&1u32.to_be_bytes());
    bytes.push(0);
    let mut d = Decoder::default();
    d.push(&bytes);
    assert!(matches!(
        d.next_frame(),
        Err(WireError::Malformed {
            kind: Kind::Credit,
            ..
        })
    ));
}

#[test]
fn every_kind_round_trips_with_a_32_byte_header() {
    let mut dec = Decoder::default();
    for f in samples() {
        let bytes = f.to_bytes();
        assert_eq!(bytes[0], VERSION);
        let body = u32::from_be_bytes(bytes[4..8].try_into().unwrap()) as usize;
        assert_eq!(bytes.len(), HEADER_LEN + body, "{f:?}");
        // Byte by byte: frames are only produced once complete.
        for (i, b) in bytes.iter().enumerate() {
            assert_eq!(dec.next_frame().unwrap(), None, "early frame at byte {i}");
            dec.push(&[*b]);
        }
        assert_eq!(dec.next_frame().unwrap(), Some(f));
    }
}

#[test]
fn malformed_frames_are_named() {
    let mut bad = Frame::Ack { acks: vec![1] }.to_bytes();
    bad[0] = 2; // a version-2 peer (NetInfo with an IPv4 address only)
    let mut d = Decoder::default();
    d.push(&bad);
    assert_eq!(
        d.next_frame().unwrap_err().to_string(),
        "unsupported protocol version 2 (this side speaks 3)"
    );

    let mut huge = Frame::JoinOk.to_bytes();
    huge[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
    let mut d = Decoder::default();
    d.push(&huge);
    assert!(matches!(d.next_frame(), Err(WireError::TooLong { .. })));

    let data = Frame::Data(Chunk {
        irob: 2,
        label: Label::ForegroundSmall,
        offset: 0,
        deps: Some(Deps::List(vec![5])),
        end: true,
        acks: vec![],
        data: Bytes::new(),
    })
    .to_bytes();
    let mut d = Decoder::default();
    d.push(&data);
    assert!(d
        .next_frame()
        .unwrap_err()
        .to_string()
        .contains("depends on IROB 5, which is not lower"));

    let mut lab = data.clone();
    lab[2] = 7;
    let mut d = Decoder::default();
    d.push(&lab);
    assert_eq!(d.next_frame(), Err(WireError::Label(7)));
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512), valid_prefix in any::<bool>()) {
        let mut d = Decoder::default();
        if valid_prefix {
            // A valid version and kind make the decoder go deeper into the body checks.
            let mut b = bytes.clone();
            if b.len() >= 2 { b[0] = VERSION; b[1] = (b[1] % 16) + 1; }
            if b.len() >= 8 { let n = (b.len().saturating_sub(32)) as u32; b[4..8].copy_from_slice(&n.to_be_bytes()); }
            d.push(&b);
        } else {
            d.push(&bytes);
        }
        for _ in 0..4 {
            match d.next_frame() { Ok(Some(_)) => continue, _ => break }
        }
    }
}
