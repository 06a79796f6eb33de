//! What a hostile peer can make a session hold, measured: a counting allocator (the global
//! allocator of this test binary) counts the bytes each test thread holds, and each test plays
//! a peer against a session and checks what it holds against the limit meant to bound it.
//! Every test here failed before its bound existed (the figures are in each test's comment).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::Bytes;
use roam_core::Time;
use roam_net::proto::session::{Config, Event, Session, DEP_OVERHEAD, PIECE_OVERHEAD};
use roam_net::proto::wire::{Caps, Chunk, Decoder, Deps, Frame};
use roam_net::proto::{Failure, Label};

/// The system allocator, counting the bytes held per thread (allocated on the thread minus
/// freed on it; the sessions here live and die on their test's thread).
struct Counting;

thread_local! {
    static HELD: Cell<isize> = const { Cell::new(0) };
}

fn count(delta: isize) {
    // `try_with`: nothing is counted while the thread's locals are being torn down.
    let _ = HELD.try_with(|h| h.set(h.get() + delta));
}

// SAFETY: every call is forwarded to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        // SAFETY: as the caller promises.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize));
        // SAFETY: as the caller promises.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        // SAFETY: as the caller promises.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size as isize - layout.size() as isize);
        // SAFETY: as the caller promises.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Bytes this thread holds now.
fn held() -> isize {
    HELD.with(|h| h.get())
}

fn hello() -> Frame {
    Frame::Hello {
        key: [1; 32],
        window: 1 << 20,
        caps: Caps::NONE,
        networks: vec![],
    }
}

fn server(config: Config) -> Session {
    let mut s = Session::server(config, 1, 7);
    s.accept_connection(1, hello(), Time::ZERO);
    while s.poll_transmit(1, Time::ZERO, 1 << 20).is_some() {}
    while s.poll_event().is_some() {}
    s
}

/// Frame `f` as the peer's bytes arrive: encoded and decoded (so that payloads are held as
/// a real connection's would be).
fn from_the_wire(f: &Frame) -> Frame {
    let mut d = Decoder::default();
    d.push(&f.to_bytes());
    d.next_frame().unwrap().unwrap()
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

/// The session failed on its receive limit, having held (`most` bytes at most, of `what`) less
/// than twice the limit.
fn failed_within_the_limit(s: &Session, config: &Config, most: isize, what: &str) {
    eprintln!(
        "{what}: {most} bytes held at most, limit {}",
        config.receive_limit
    );
    assert!(
        matches!(s.failure(), Some(Failure::ReceiveLimit { .. })),
        "{:?}",
        s.failure()
    );
    let limit = config.receive_limit as isize;
    assert!(most < 2 * limit, "{most} bytes held, receive limit {limit}");
}

/// Whether the session closed connection 1.
fn closed(s: &mut Session) -> bool {
    let mut closed = false;
    while let Some(e) = s.poll_event() {
        closed |= matches!(e, Event::CloseConnection { conn: 1, .. });
    }
    closed
}

/// A peer sends one IROB as 10,000 one-byte pieces with gaps, then asks about it 4096 times a
/// `ResendRequest`, a hundred times, and never reads: the answer is one small entry,
/// whatever the number of questions. (Before, each request queued 4096 entries of 32 ranges,
/// 2.2 MB; the queue was bounded at 8192 frames, about 6 GB: here 100 requests held 234 MB.)
#[test]
fn questions_repeated_without_reading_hold_one_answer() {
    let mut s = server(Config::default());
    for k in 0..10_000u64 {
        s.handle_frame(1, one_byte(0, 2 * k + 1, None, false), Time::ZERO);
    }
    let before = held();
    let ask = Frame::ResendRequest {
        irobs: vec![0; 4096],
    };
    for _ in 0..100 {
        s.handle_frame(1, ask.clone(), Time::ZERO);
    }
    let grown = held() - before;
    eprintln!("100 requests of 4096 questions about one IROB: {grown} bytes held");
    assert!(grown < 64 << 10, "{grown} bytes held for unread answers");
    // One answer, with one entry.
    let mut d = Decoder::default();
    while let Some(t) = s.poll_transmit(1, Time::ZERO, 1 << 20) {
        d.push(&t.head);
        d.push(&t.data);
    }
    let mut entries = 0;
    while let Some(f) = d.next_frame().unwrap() {
        if let Frame::Have { entries: e } = f {
            entries += e.len();
        }
    }
    assert_eq!(entries, 1);
}

/// A peer asks about 4096 different IROBs a request and never reads the answers: the session
/// holds at most `Config::max_control_bytes` for them and closes the connection. (Before, the
/// queue took up to 8192 frames whatever their size: here 2000 requests held 459 MB.)
#[test]
fn questions_about_many_irobs_are_bounded_in_bytes() {
    let config = Config::default();
    let mut s = server(config.clone());
    let before = held();
    let mut most = 0;
    let mut requests = 0;
    for r in 0..2000u64 {
        let ask = Frame::ResendRequest {
            irobs: (r * 4096..(r + 1) * 4096).collect(),
        };
        s.handle_frame(1, ask, Time::ZERO);
        most = most.max(held() - before);
        requests += 1;
        if closed(&mut s) {
            break;
        }
    }
    eprintln!(
        "questions about many IROBs: closed after {requests} requests, {most} bytes held at most"
    );
    assert!(requests < 2000, "still open after {requests} requests");
    assert!(
        most < 2 * config.max_control_bytes as isize,
        "{most} bytes held for unread answers (limit {})",
        config.max_control_bytes
    );
}

/// Limits small enough to reach in a test: a 64 KiB window, IROBs of up to 1 MiB.
fn small_config() -> Config {
    let mut c = Config {
        window: 64 << 10,
        max_irob_size: 1 << 20,
        max_pending_irobs: 1024,
        ..Config::default()
    };
    c.receive_limit = c.min_receive_limit();
    c
}

/// A peer sends one IROB as one-byte pieces with a gap after each: what the session holds,
/// bookkeeping included, stays within a small multiple of the receive limit, which fails the
/// peer. (Before, the limit counted payload only: 200,000 pieces held 27.5 MB, twenty times
/// the 1.3 MiB limit, without failing; at the default limit, 80 million pieces would have held
/// about 11 GB.)
#[test]
fn one_byte_pieces_count_their_bookkeeping() {
    let config = small_config();
    let mut s = server(config.clone());
    let before = held();
    let mut most = 0;
    for k in 0..200_000u64 {
        let f = from_the_wire(&one_byte(0, 2 * k + 1, None, false));
        s.handle_frame(1, f, Time::ZERO);
        most = most.max(held() - before);
        if s.failure().is_some() {
            break;
        }
    }
    failed_within_the_limit(&s, &config, most, "one-byte pieces");
}

/// What one stored piece really costs, against what the limit counts for it
/// ([`PIECE_OVERHEAD`]): a piece's bookkeeping and a one-byte payload, decoded from the wire.
#[test]
fn a_piece_costs_what_the_limit_counts() {
    let mut s = server(small_config());
    let n = 5000u64;
    let before = held();
    for k in 0..n {
        s.handle_frame(
            1,
            from_the_wire(&one_byte(0, 2 * k + 1, None, false)),
            Time::ZERO,
        );
    }
    let per_piece = (held() - before) as u64 / n;
    eprintln!("one-byte piece: {per_piece} bytes held, {PIECE_OVERHEAD} + 1 counted");
    assert!(s.failure().is_none());
    assert!(
        per_piece <= PIECE_OVERHEAD + 1,
        "a piece holds {per_piece} bytes, the limit counts {}",
        PIECE_OVERHEAD + 1
    );
}

/// A peer sends IROBs with sparse ids (1, 3, 5, ...; 0 never comes), each complete and
/// independent, and the application reads them all: the records of acknowledged and
/// delivered ids stay bounded (`IROB_SPAN` above their low-water marks) and the peer is
/// failed once it runs that far ahead. (Before, both sets grew with every IROB: 400,000 held
/// 15.7 MB and counting.)
#[test]
fn sparse_irob_ids_do_not_grow_the_records_of_done_ids() {
    let mut s = server(Config::default());
    let before = held();
    let mut most = 0;
    for k in 0..400_000u64 {
        let f = one_byte(2 * k + 1, 0, Some(Deps::List(vec![])), true);
        s.handle_frame(1, f, Time::ZERO);
        while s.recv(Time::ZERO).is_some() {}
        while s.poll_transmit(1, Time::ZERO, 1 << 20).is_some() {}
        most = most.max(held() - before);
        let (acked, delivered) = s.done_ids_above();
        assert!(
            acked as u64 <= roam_net::proto::session::IROB_SPAN
                && delivered as u64 <= roam_net::proto::session::IROB_SPAN,
            "{acked} acknowledged and {delivered} delivered ids above the marks"
        );
    }
    eprintln!("sparse ids: {most} bytes held at most");
    assert!(
        matches!(s.failure(), Some(Failure::IrobTooFar { .. })),
        "{:?}",
        s.failure()
    );
    assert!(most < 4 << 20, "{most} bytes held");
}

/// What a dependency really costs, against what the limit counts for it
/// ([`DEP_OVERHEAD`]): IROBs each naming 1024 dependencies that never come, distinct ones
/// (each its own entry in both indexes of waiting IROBs) and shared ones.
#[test]
fn a_dependency_costs_what_the_limit_counts() {
    for distinct in [true, false] {
        let mut s = server(Config::default());
        let n = 60u64;
        let before = held();
        for i in 0..n {
            let id = 1024 * (n + 1) + i;
            let first = if distinct { 1024 * i } else { 0 };
            let deps = Deps::List((first..first + 1024).collect());
            s.handle_frame(
                1,
                from_the_wire(&one_byte(id, 0, Some(deps), true)),
                Time::ZERO,
            );
        }
        assert!(s.failure().is_none(), "{:?}", s.failure());
        let per_dep = (held() - before) as u64 / (1024 * n);
        eprintln!(
            "distinct {distinct}: a dependency holds {per_dep} bytes, {DEP_OVERHEAD} counted"
        );
        assert!(
            per_dep <= DEP_OVERHEAD,
            "a dependency holds {per_dep} bytes, the limit counts {DEP_OVERHEAD}"
        );
    }
}

/// A peer sends IROBs that each name 1024 dependencies it never sends: they count toward the
/// receive limit, which fails the peer. (Before, nothing counted them: 1024 IROBs held 9.3 MB,
/// seven times the 1.3 MiB limit, without failing, and at the default limits 65,536 IROBs would hold
/// 512 MiB.)
#[test]
fn dependencies_count_toward_the_receive_limit() {
    let config = small_config();
    let mut s = server(config.clone());
    let before = held();
    let mut most = 0;
    for i in 0..1024u64 {
        let deps = Deps::List((0..1024).collect());
        s.handle_frame(
            1,
            from_the_wire(&one_byte(1024 + i, 0, Some(deps), true)),
            Time::ZERO,
        );
        most = most.max(held() - before);
        if s.failure().is_some() {
            break;
        }
    }
    failed_within_the_limit(&s, &config, most, "dependencies");
}
