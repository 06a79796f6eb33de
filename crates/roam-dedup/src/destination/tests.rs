//! Tests of dd-dst ([`super::Destination`]): rebuilding, δ per flow, hints at requests and
//! moved keys, and the feedback credit.

use super::*;

/// Found by fuzzing: a record naming a chunk the phone lacks, twice, once made the second
/// reference copy bytes the first never added.
#[test]
fn a_record_naming_an_unknown_chunk_twice_is_asked_for_again() {
    let mut body = Vec::new();
    wire::put_name(&mut body, Name(7), 300);
    wire::put_name(&mut body, Name(7), 300);
    let mut rec = Vec::new();
    wire::put_record(&mut rec, wire::Kind::First, 0, 1, &body);
    let mut d = Destination::new(DestinationConfig::default());
    d.open(1);
    let mut out = Vec::new();
    assert_eq!(d.receive(1, &rec, &mut out).unwrap(), rec.len());
    assert!(out.is_empty());
    let mut up = Vec::new();
    d.upstream(1, &mut up).unwrap();
    let (m, _) = Upstream::decode(&up).unwrap().unwrap();
    assert!(matches!(m, Upstream::Resend { seq: 0, .. }), "{m:?}");
}

/// The first names `flow` advertises after the start of `stream` (`len` bytes) arrives
/// through a source that never saw it (every chunk a literal).
fn first_advertised(d: &mut Destination, flow: FlowId, stream: &[u8], len: usize) -> Vec<Name> {
    use crate::source::{Source, SourceConfig};
    let mut src = Source::new(SourceConfig::default()).unwrap();
    src.open(flow);
    let mut wire = Vec::new();
    src.push(flow, &stream[..len], &mut wire).unwrap();
    src.flush(flow, &mut wire).unwrap();
    let mut out = Vec::new();
    assert_eq!(d.receive(flow, &wire, &mut out).unwrap(), wire.len());
    assert!(out == stream[..len]);
    let mut up = Vec::new();
    d.upstream(flow, &mut up).unwrap();
    let mut at = 0;
    while let Some((m, n)) = Upstream::decode(&up[at..]).unwrap() {
        at += n;
        if let Upstream::Advertise(names) = m {
            return names;
        }
    }
    Vec::new()
}

/// A destination that read `past` (flow 1, through source 0), and where each of the
/// past's names sits in it (every chunk longer than a reference).
fn with_past(past: &[u8]) -> (Destination, HashMap<Name, usize>) {
    with_past_as(past, DestinationConfig::default())
}

/// [`with_past`] with `cfg`.
fn with_past_as(past: &[u8], cfg: DestinationConfig) -> (Destination, HashMap<Name, usize>) {
    let mut d = Destination::new(cfg);
    let mut src = crate::source::Source::new(crate::source::SourceConfig::default()).unwrap();
    src.open(1);
    d.open_via(1, 0);
    let mut wire = Vec::new();
    src.push(1, past, &mut wire).unwrap();
    src.flush(1, &mut wire).unwrap();
    let mut out = Vec::new();
    d.receive(1, &wire, &mut out).unwrap();
    assert!(out == past);
    d.close(1);
    let mut cuts = Vec::new();
    crate::source::SourceConfig::default()
        .chunking
        .cuts(past, &mut cuts);
    let mut at = HashMap::new();
    let mut prev = 0;
    for c in cuts {
        let chunk = &past[prev..c];
        prev = c;
        if chunk.len() > 2 * Name::LEN {
            let i = at.len();
            at.entry(Name::of(chunk)).or_insert(i);
        }
    }
    (d, at)
}

/// Issue 46: δ is per flow. A phone reads the start of a past stream again; the first
/// advertisement starts right after the last match (δ = 0), or 40 names further on when
/// the flow's δ is 40. Another flow of the same destination keeps the destination's δ,
/// and the destination's δ ([`Destination::set_rates`]) moves only the flows without
/// their own.
#[test]
fn each_flow_advertises_from_its_own_delta_past_the_last_match() {
    let past = crate::testdata::text(200_000, 46);
    let start = |at: &HashMap<Name, usize>, names: &[Name]| -> usize {
        let first = names.iter().filter_map(|n| at.get(n).copied()).min();
        first.expect("an advertisement of the past")
    };
    // Without δ.
    let (mut d, at) = with_past(&past);
    d.open_via(2, 1);
    let plain = start(&at, &first_advertised(&mut d, 2, &past, 6_000));
    // With δ = 40 for flow 2; flow 3 (through another source, reading the same) without.
    let (mut d, at) = with_past(&past);
    d.open_via(2, 1);
    d.open_via(3, 2);
    d.set_flow_delta(2, 40);
    assert_eq!(
        (d.delta(2), d.delta(3), d.delta(4)),
        (Some(40), Some(0), None)
    );
    let ahead = start(&at, &first_advertised(&mut d, 2, &past, 6_000));
    assert_eq!(ahead, plain + 40);
    let other = start(&at, &first_advertised(&mut d, 3, &past, 6_000));
    assert_eq!(other, plain);
    d.set_rates(1e6, 1e6, 0.01, 250.0); // 1 MB/s for 10.7 ms: 43 names
    assert_eq!((d.delta(2), d.delta(3)), (Some(40), Some(43)));
}

/// A phone that read a stream reads it again, 4 KiB at a time, through a source that never
/// saw it, under `budget`; its feedback reaches the source if `heard`. What the phone and
/// the source did.
fn read_again(
    len: usize,
    budget: Option<budget::FeedbackBudget>,
    heard: bool,
) -> (DestinationStats, crate::source::SourceStats) {
    read_again_times(len, 1, budget, heard)
}

/// [`read_again`], the stream read `times` times over in one flow.
fn read_again_times(
    len: usize,
    times: usize,
    budget: Option<budget::FeedbackBudget>,
    heard: bool,
) -> (DestinationStats, crate::source::SourceStats) {
    let past = crate::testdata::text(len, 47);
    let again = past.repeat(times);
    let cfg = DestinationConfig {
        budget,
        ..Default::default()
    };
    let (mut d, _) = with_past_as(&past, cfg);
    let mut src = crate::source::Source::new(crate::source::SourceConfig::default()).unwrap();
    src.open(2);
    d.open_via(2, 1);
    let (mut wire, mut out, mut up) = (Vec::new(), Vec::new(), Vec::new());
    let now = std::time::Instant::now();
    for piece in again.chunks(4096) {
        src.push(2, piece, &mut wire).unwrap();
        let used = d.receive(2, &wire, &mut out).unwrap();
        wire.drain(..used);
        d.upstream(2, &mut up).unwrap();
        if heard {
            let used = src.handle(2, &up, now, &mut wire).unwrap();
            up.drain(..used);
        } else {
            up.clear();
        }
    }
    src.flush(2, &mut wire).unwrap();
    let used = d.receive(2, &wire, &mut out).unwrap();
    assert_eq!(used, wire.len());
    assert!(out == again, "the stream out is the stream in");
    (d.stats(), src.stats())
}

/// Feedback that finds nothing (the source never hears it) stops costing once its credit
/// is spent: at most the start, the share of what was delivered and one message. The
/// thesis's phone (no budget) goes on advertising.
#[test]
fn feedback_that_finds_nothing_stops_at_its_credit() {
    let b = budget::FeedbackBudget::default();
    let (governed, _) = read_again(2_000_000, Some(b), false);
    let bound = b.start as f64 + b.share * 2_000_000.0 + 1500.0;
    assert!(
        (governed.feedback_bytes as f64) < bound,
        "{} bytes of feedback, bound {bound}: {governed:?}",
        governed.feedback_bytes
    );
    assert!(governed.feedback_withheld > 0, "{governed:?}");
    assert_eq!(governed.feedback_found_bytes, 0);
    let (thesis, _) = read_again(2_000_000, None, false);
    assert!(
        thesis.feedback_bytes as f64 > 2.0 * bound,
        "the thesis's phone advertises on: {thesis:?}"
    );
}

/// A stream read twice over through a source that never hears the phone: the source's
/// regular cache finds the second time, whose names the phone had advertised, but they came
/// first as literals, so they are not feedback's and earn no credit.
#[test]
fn a_repeat_the_regular_cache_finds_is_not_feedback() {
    let (d, src) = read_again_times(200_000, 2, None, false);
    assert!(src.regular_hit_bytes > 100_000, "{src:?}");
    assert!(d.feedback_names > 0, "{d:?}");
    assert_eq!(d.feedback_found_bytes, 0, "{d:?}");
}

/// Feedback that pays is not held back: reading a past stream again finds as much of it
/// with the credit as without, though the credit starts at a few names and no share of
/// the traffic tops it up (what feedback finds pays for the rest), and the phone's count
/// of what its feedback found is the source's.
#[test]
fn feedback_that_pays_is_not_held_back() {
    let b = budget::FeedbackBudget {
        start: 256,
        share: 0.0,
        ..Default::default()
    };
    let (governed, at_src) = read_again(200_000, Some(b), true);
    let (thesis, _) = read_again(200_000, None, true);
    assert!(
        governed.feedback_found_bytes > 100_000,
        "found {} of 200000: {governed:?}",
        governed.feedback_found_bytes
    );
    assert!(
        governed.feedback_found_bytes as f64 >= 0.95 * thesis.feedback_found_bytes as f64,
        "{governed:?} against {thesis:?}"
    );
    assert_eq!(governed.feedback_found_bytes, at_src.feedback_hit_bytes);
}

/// A destination hinting at most `hint_names` names a request.
fn hinting(hint_names: usize) -> Destination {
    Destination::new(DestinationConfig {
        select: SelectConfig {
            hint_names,
            ..Default::default()
        },
        ..Default::default()
    })
}

/// A source with 1 MiB for each cache.
fn source() -> crate::source::Source {
    crate::source::Source::new(crate::source::SourceConfig {
        regular_bytes: 1 << 20,
        feedback_bytes: 1 << 20,
        ..Default::default()
    })
    .unwrap()
}

/// One exchange on `flow`: the request (and what it hints) up to `src`, the response
/// `resp` down through it, delivered whole.
fn exchange(
    d: &mut Destination,
    src: &mut crate::source::Source,
    flow: FlowId,
    req: &str,
    resp: &[u8],
) {
    d.request(flow, req.as_bytes()).unwrap();
    let mut up = Vec::new();
    d.upstream(flow, &mut up).unwrap();
    let mut back = Vec::new();
    assert_eq!(
        src.handle(flow, &up, std::time::Instant::now(), &mut back)
            .unwrap(),
        up.len()
    );
    let mut wire = Vec::new();
    src.push(flow, resp, &mut wire).unwrap();
    src.flush(flow, &mut wire).unwrap();
    let mut out = Vec::new();
    assert_eq!(d.receive(flow, &wire, &mut out).unwrap(), wire.len());
    assert!(out == resp, "the stream out is the stream in");
}

/// Beyond the thesis ([`hint`]): a page asked for again, edited since, through a source
/// that never saw it. The names of its last response go up at the request, before any of
/// the new one, and the source finds most of it by feedback; another request, or hints
/// turned off, advertise nothing.
#[test]
fn a_request_asked_again_advertises_its_last_response_before_any_of_it_arrives() {
    use crate::source::Source;
    let page = crate::testdata::text(60_000, 7);
    let mut edited = page.clone();
    edited.splice(
        30_000..30_000,
        b"an edit in the middle of the page".iter().copied(),
    );
    let ask =
        |cookie: &str| format!("GET /a.html HTTP/1.1\r\nHost: docs\r\nCookie: {cookie}\r\n\r\n");
    let fetch = |d: &mut Destination, src: &mut Source, flow: FlowId, req: &str, body: &[u8]| {
        src.open(flow);
        let hinted = d.stats().hint_names;
        exchange(d, src, flow, req, body);
        d.close(flow);
        d.stats().hint_names - hinted
    };
    for hint_names in [744, 0] {
        let mut d = hinting(hint_names);
        d.open_via(1, 0);
        assert_eq!(fetch(&mut d, &mut source(), 1, &ask("1"), &page), 0);
        // Another page's request: nothing to hint.
        d.open_via(2, 1);
        let mut other = source();
        let other_page = crate::testdata::text(20_000, 8);
        let req = "GET /b.html HTTP/1.1\r\nHost: docs\r\n\r\n";
        assert_eq!(fetch(&mut d, &mut other, 2, req, &other_page), 0);
        // The same request again, through a source that never saw the page.
        d.open_via(3, 2);
        let mut fresh = source();
        let hinted = fetch(&mut d, &mut fresh, 3, &ask("2"), &edited);
        let found = fresh.stats().feedback_hit_bytes as f64 / edited.len() as f64;
        if hint_names == 0 {
            assert_eq!(hinted, 0);
        } else {
            assert!(hinted > 100, "{hinted} names hinted");
            assert!(found > 0.8, "found by feedback: {found:.3}");
        }
    }
}

/// Beyond the thesis ([`exchange`]): a story prefetched on one network as the second page
/// of a kept-alive connection, asked for on the other network under the URL of the next
/// hour, also as a connection's second page. Its request goes up with the names of the
/// response its moved key stands for, and the other network's source, which never saw
/// the story, finds most of it by feedback; with hints off it finds nothing.
#[test]
fn a_story_whose_url_moved_is_found_on_a_kept_alive_connection() {
    let story = crate::testdata::text(12_000, 11);
    let http = |body: &[u8]| {
        let mut r = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        r.extend_from_slice(body);
        r
    };
    let get = |path: &str| format!("GET {path} HTTP/1.1\r\nHost: news\r\n\r\n");
    for hint_names in [744, 0] {
        let mut d = hinting(hint_names);
        // On WiFi, at hour 97.
        let mut wifi = source();
        d.open_via(1, 0);
        wifi.open(1);
        let front = crate::testdata::text(3_000, 12);
        exchange(&mut d, &mut wifi, 1, &get("/world/"), &http(&front));
        exchange(
            &mut d,
            &mut wifi,
            1,
            &get("/world/h97/1234-storm.html"),
            &http(&story),
        );
        d.close(1);
        // On cellular, at hour 98, from another section's page: the story moved.
        let mut cell = source();
        d.open_via(2, 1);
        cell.open(2);
        let sports = crate::testdata::text(3_000, 13);
        exchange(&mut d, &mut cell, 2, &get("/sports/"), &http(&sports));
        let before = cell.stats().feedback_hit_bytes;
        exchange(
            &mut d,
            &mut cell,
            2,
            &get("/world/h98/1234-storm.html"),
            &http(&story),
        );
        let found = (cell.stats().feedback_hit_bytes - before) as f64 / story.len() as f64;
        if hint_names == 0 {
            assert_eq!(d.stats().moved_hints, 0);
            assert!(found < 0.1, "found by feedback without hints: {found:.3}");
        } else {
            assert_eq!(d.stats().moved_hints, 1);
            assert!(found > 0.8, "found by feedback: {found:.3}");
        }
    }
}

/// The messages in `up`.
fn messages(up: &[u8]) -> Vec<Upstream> {
    let mut at = 0;
    let mut all = vec![];
    while let Some((m, n)) = Upstream::decode(&up[at..]).unwrap() {
        at += n;
        all.push(m);
    }
    all
}

/// A small response's acknowledgement waits for the phone's next message up (here the
/// program's next request); a stream past `ack_every` is acknowledged at once; the stream's
/// end asks for one at once, and once acknowledged the source is settled.
#[test]
fn an_acknowledgement_waits_for_a_message_up_unless_due() {
    use crate::source::{Source, SourceConfig};
    let cfg = DestinationConfig {
        feedback: false,
        ..DestinationConfig::default()
    };
    let mut d = Destination::new(cfg.clone());
    let mut src = Source::new(SourceConfig::default()).unwrap();
    let page = crate::testdata::text(3_000, 21);
    src.open(1);
    d.open(1);
    // The page twice: the second time the regular cache names it, so the source keeps it.
    let (mut wire, mut out, mut up) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..2 {
        src.push(1, &page, &mut wire).unwrap();
        src.flush(1, &mut wire).unwrap();
    }
    d.receive(1, &wire, &mut out).unwrap();
    assert!(out.len() == 2 * page.len());
    assert!(src.unacknowledged(1) > 0);
    d.upstream(1, &mut up).unwrap();
    assert!(up.is_empty(), "6 kB delivered: nothing due");
    d.upstream_all(1, &mut up).unwrap();
    assert!(matches!(messages(&up)[..], [Upstream::Ack(_)]), "it rides");
    src.handle(1, &up, std::time::Instant::now(), &mut Vec::new())
        .unwrap();
    assert_eq!(src.unacknowledged(1), 0);

    // Past ack_every: due at once.
    let big = crate::testdata::text(cfg.ack_every + 1_000, 22);
    wire.clear();
    up.clear();
    src.push(1, &big, &mut wire).unwrap();
    src.flush(1, &mut wire).unwrap();
    d.receive(1, &wire, &mut out).unwrap();
    d.upstream(1, &mut up).unwrap();
    assert!(matches!(messages(&up)[..], [Upstream::Ack(_)]));

    // A small repeat, then the end: the end asks for the acknowledgement.
    wire.clear();
    up.clear();
    src.push(1, &page, &mut wire).unwrap();
    src.flush(1, &mut wire).unwrap();
    d.receive(1, &wire, &mut out).unwrap();
    d.upstream(1, &mut up).unwrap();
    assert!(up.is_empty());
    assert!(src.unacknowledged(1) > 0);
    wire.clear();
    src.end(1, &mut wire).unwrap();
    assert!(!wire.is_empty());
    let before = out.len();
    assert_eq!(d.receive(1, &wire, &mut out).unwrap(), wire.len());
    assert_eq!(out.len(), before, "an end stands for no bytes");
    d.upstream(1, &mut up).unwrap();
    assert!(matches!(messages(&up)[..], [Upstream::Ack(_)]));
    src.handle(1, &up, std::time::Instant::now(), &mut Vec::new())
        .unwrap();
    assert_eq!(src.unacknowledged(1), 0);
    // Nothing kept: no second end.
    wire.clear();
    src.end(1, &mut wire).unwrap();
    assert!(wire.is_empty());
}
