//! dd-src and dd-dst end to end: whatever the caches hold, whatever happens to the feedback,
//! however the bytes are split, and whatever names collide, the phone delivers exactly the
//! bytes the source was given; and on redundant traffic the feedback finds what the small
//! regular cache cannot.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use roam_dedup::destination::DestinationConfig;
use roam_dedup::source::SourceConfig;
use roam_dedup::wire::Upstream;
use roam_dedup::{Destination, Source};

/// Objects a stream is made of: text-like and noise-like, so flowlets have something to find.
fn object(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let text = seed % 2 == 0;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if text {
                b"etaoin shrdlu "[(x % 14) as usize]
            } else {
                x as u8
            }
        })
        .collect()
}

/// What happens between the two ends.
#[derive(Clone, Debug)]
struct Path {
    /// Sizes of the source's reads (cycled).
    reads: Vec<usize>,
    /// Sizes in which record bytes reach the phone (cycled).
    splits: Vec<usize>,
    /// Every k-th advertisement is lost (0: none).
    lose_every: usize,
    /// Advertisements are delivered in reverse order of a batch this long (1: in order).
    reorder: usize,
    /// Flush after every n reads.
    flush_every: usize,
}

/// Run `streams` (one flow each, one after another) through a source and a destination; the
/// bytes each flow delivered.
fn run(streams: &[Vec<u8>], src: &mut Source, dst: &mut Destination, path: &Path) -> Vec<Vec<u8>> {
    run_via(streams, src, dst, path, &[0], &[])
}

/// [`run`] with the flows through the phone's sources `vias` (cycled), and `requests` going
/// up each flow before its response.
fn run_via(
    streams: &[Vec<u8>],
    src: &mut Source,
    dst: &mut Destination,
    path: &Path,
    vias: &[u32],
    requests: &[Vec<u8>],
) -> Vec<Vec<u8>> {
    let now = Instant::now();
    let mut delivered = Vec::new();
    for (fi, stream) in streams.iter().enumerate() {
        let flow = fi as u64;
        src.open(flow);
        dst.open_via(flow, vias[fi % vias.len()]);
        // The program's requests up the flow, in two parts (their hints go up with the rest).
        if let Some(r) = requests.get(fi) {
            let half = r.len() / 2;
            dst.request(flow, &r[..half]).unwrap();
            dst.request(flow, &r[half..]).unwrap();
        }
        let mut wire = Vec::new();
        let mut out = Vec::new();
        let mut pending: Vec<u8> = Vec::new(); // record bytes not yet given to the phone
        let mut adverts: VecDeque<Vec<u8>> = VecDeque::new();
        let mut sent_ads = 0usize;
        let mut at = 0;
        let mut reads = 0;
        let mut split_i = 0;
        let mut step = |wire: &mut Vec<u8>,
                        pending: &mut Vec<u8>,
                        out: &mut Vec<u8>,
                        adverts: &mut VecDeque<Vec<u8>>,
                        src: &mut Source,
                        dst: &mut Destination,
                        sent_ads: &mut usize| {
            pending.append(wire);
            // Give the phone the bytes in the path's splits.
            loop {
                let n = path.splits[split_i % path.splits.len()]
                    .max(1)
                    .min(pending.len());
                split_i += 1;
                if n == 0 {
                    break;
                }
                let mut buf: Vec<u8> = pending.drain(..n).collect();
                // The phone uses whole records; the rest waits.
                let used = dst.receive(flow, &buf, out).expect("phone");
                buf.drain(..used);
                let mut rest = buf;
                rest.append(pending);
                *pending = rest;
                if used == 0 {
                    // Not a whole record in this split: wait for more bytes, unless all is here.
                    let used = dst.receive(flow, pending, out).expect("phone");
                    pending.drain(..used);
                    break;
                }
            }
            // Upstream: acknowledgements and resends always arrive; advertisements may not,
            // and may be reordered.
            let mut up = Vec::new();
            dst.upstream(flow, &mut up).unwrap();
            let mut i = 0;
            while let Some((m, n)) = Upstream::decode(&up[i..]).unwrap() {
                let bytes = up[i..i + n].to_vec();
                i += n;
                match m {
                    Upstream::Advertise(_) => {
                        *sent_ads += 1;
                        if path.lose_every > 0 && *sent_ads % path.lose_every == 0 {
                            continue;
                        }
                        adverts.push_back(bytes);
                    }
                    _ => {
                        src.handle(flow, &bytes, now, wire).unwrap();
                    }
                }
            }
            if adverts.len() >= path.reorder.max(1) {
                while let Some(a) = adverts.pop_back() {
                    src.handle(flow, &a, now + Duration::from_secs(*sent_ads as u64), wire)
                        .unwrap();
                }
            }
        };
        while at < stream.len() {
            let n = path.reads[reads % path.reads.len()]
                .max(1)
                .min(stream.len() - at);
            src.push(flow, &stream[at..at + n], &mut wire).unwrap();
            at += n;
            reads += 1;
            if path.flush_every > 0 && reads % path.flush_every == 0 {
                src.flush(flow, &mut wire).unwrap();
            }
            step(
                &mut wire,
                &mut pending,
                &mut out,
                &mut adverts,
                src,
                dst,
                &mut sent_ads,
            );
        }
        src.flush(flow, &mut wire).unwrap();
        // Drain: resends may need a few rounds.
        for _ in 0..50 {
            step(
                &mut wire,
                &mut pending,
                &mut out,
                &mut adverts,
                src,
                dst,
                &mut sent_ads,
            );
            if wire.is_empty() && pending.is_empty() {
                break;
            }
        }
        assert!(
            pending.is_empty(),
            "flow {flow}: {} record bytes undelivered",
            pending.len()
        );
        src.close(flow);
        dst.close(flow);
        delivered.push(out);
    }
    delivered
}

/// Streams with redundancy: each a sequence of objects, some shared with earlier streams,
/// some edited; with `http`, each object an HTTP/1 response, and each stream's requests for
/// them (a path per stream, so an object asked for again has moved), as a kept-alive
/// connection carries them.
fn streams(
    plan: &[(u64, usize, bool)],
    n_streams: usize,
    http: bool,
) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let mut out = Vec::new();
    let mut asked = Vec::new();
    for s in 0..n_streams {
        let mut st = Vec::new();
        let mut up = Vec::new();
        for (k, &(seed, len, edit)) in plan.iter().enumerate() {
            if (k + s) % 3 == 0 {
                continue;
            }
            let mut o = object(seed, len);
            if edit && s % 2 == 1 && o.len() > 100 {
                o[50] ^= 0xff;
            }
            if http {
                up.extend(format!("GET /s{s}/{seed}.html HTTP/1.1\r\nHost: h\r\n\r\n").bytes());
                st.extend(
                    format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", o.len()).bytes(),
                );
            }
            st.extend_from_slice(&o);
        }
        out.push(st);
        asked.push(up);
    }
    (out, asked)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn the_phone_delivers_exactly_what_the_source_was_given(
        plan in proptest::collection::vec((0u64..12, 100usize..20_000, any::<bool>()), 1..8),
        n_streams in 1usize..4,
        reads in proptest::collection::vec(1usize..9000, 1..5),
        splits in proptest::collection::vec(1usize..7000, 1..5),
        lose_every in 0usize..4,
        reorder in 1usize..4,
        flush_every in 0usize..4,
        src_cache in 1u64..200_000,
        dst_cache in 1u64..400_000,
        name_bits in prop_oneof![Just(64u32), 6u32..12],
        keep in 0usize..100_000,
        http in any::<bool>(),
        sources in 1usize..3,
    ) {
        let (streams, requests) = streams(&plan, n_streams, http);
        let mut src = Source::new(SourceConfig {
            regular_bytes: src_cache,
            feedback_bytes: src_cache,
            keep_bytes: keep,
            name_bits,
            ..SourceConfig::default()
        }).unwrap();
        let mut dst = Destination::new(DestinationConfig {
            cache_bytes: dst_cache,
            name_bits,
            ..DestinationConfig::default()
        });
        let path = Path { reads, splits, lose_every, reorder, flush_every };
        let got = run_via(&streams, &mut src, &mut dst, &path, &[0, 1][..sources], &requests);
        for (i, (a, b)) in streams.iter().zip(&got).enumerate() {
            prop_assert!(a == b, "stream {} differs: {} bytes in, {} out", i, a.len(), b.len());
        }
    }
}

#[test]
fn feedback_finds_what_the_small_regular_cache_has_forgotten() {
    // A past stream the phone saw (through another source, say), then the same objects in
    // another order through a source that never saw them: only feedback can find them.
    let objects: Vec<Vec<u8>> = (0..40).map(|i| object(i, 30_000)).collect();
    let past: Vec<u8> = objects.concat();
    let present: Vec<u8> = objects.iter().rev().step_by(2).flatten().copied().collect();
    let mut dst = Destination::new(DestinationConfig::default());
    // The past, through a source of its own.
    let mut other = Source::new(SourceConfig::default()).unwrap();
    let path = Path {
        reads: vec![16_384],
        splits: vec![1 << 20],
        lose_every: 0,
        reorder: 1,
        flush_every: 1,
    };
    run(&[past], &mut other, &mut dst, &path);
    let mut src = Source::new(SourceConfig::default()).unwrap();
    let before = dst.stats();
    let got = run_via(
        std::slice::from_ref(&present),
        &mut src,
        &mut dst,
        &path,
        &[1],
        &[],
    );
    assert_eq!(got[0], present);
    let s = src.stats();
    let d = dst.stats();
    let found = (s.regular_hit_bytes + s.feedback_hit_bytes) as f64 / present.len() as f64;
    let fed = (d.feedback_bytes - before.feedback_bytes) as f64;
    eprintln!(
        "present {} B: regular {} B, feedback {} B ({found:.2} found), feedback {fed} B, {:.1} saved per feedback byte",
        present.len(), s.regular_hit_bytes, s.feedback_hit_bytes, s.feedback_hit_bytes as f64 / fed.max(1.0)
    );
    assert!(
        s.feedback_hit_bytes as f64 > 0.5 * present.len() as f64,
        "{s:?}"
    );
    assert!(s.feedback_hit_bytes as f64 > 3.0 * fed, "{s:?} {d:?}");
}

/// Redundant streams through a source and a phone configured by `name_bits` and the phone's
/// cache; the source's statistics after checking every byte arrived.
fn repaired(name_bits: u32, dst_cache: u64) -> roam_dedup::source::SourceStats {
    let plan: Vec<(u64, usize, bool)> = (0..10).map(|i| (i, 20_000, i % 3 == 0)).collect();
    let (streams, _) = streams(&plan, 3, false);
    let mut src = Source::new(SourceConfig {
        name_bits,
        ..SourceConfig::default()
    })
    .unwrap();
    let mut dst = Destination::new(DestinationConfig {
        name_bits,
        cache_bytes: dst_cache,
        ..DestinationConfig::default()
    });
    let path = Path {
        reads: vec![5000, 700, 12_000],
        splits: vec![3000, 100_000],
        lose_every: 3,
        reorder: 2,
        flush_every: 2,
    };
    let got = run(&streams, &mut src, &mut dst, &path);
    assert_eq!(got, streams);
    src.stats()
}

#[test]
fn colliding_names_are_caught_and_the_records_sent_again() {
    // Eight-bit names: chunks collide all the time; every collision fails a checksum.
    let s = repaired(8, 256 << 20);
    assert!(s.resent > 0, "{s:?}");
}

#[test]
fn names_the_phone_evicted_are_asked_for_again() {
    // A phone cache far smaller than the source's: it forgets what the source still names.
    let s = repaired(64, 4_000);
    assert!(s.resent > 0, "{s:?}");
}
