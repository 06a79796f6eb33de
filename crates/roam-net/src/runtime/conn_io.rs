//! A connection's two tasks: the reader decodes frames into the session (stopping while the
//! application has a window's worth unread) and writes what they make sendable when it can
//! (`out`), keeping the deadline of acknowledgements not due yet; the writer asks the session
//! for frames and writes them in batches, handing background data to the kernel only within
//! the anticipatory cap.

use super::out::{connection_closed, Out, Parts};
use super::*;
use bytes::BufMut;
use std::time::Instant;

/// Largest batch of frames one writer pass takes from the session (written with as few
/// system calls as the kernel allows). Each pass also reads TCP_INFO and SIOCOUTQ for the
/// anticipatory cap and takes the session's lock, so passes of 256 KiB (one chunk) held bulk
/// transfers on loopback to 0.55 of a TCP connection's throughput; with 1 MiB, 0.70 (`roam
/// bench net --systems none`, median of 5 interleaved runs each). Background data in a batch
/// is still bounded by the cap, so a slow network's batches stay small.
pub(super) const WRITE_BATCH: usize = 1024 * 1024;

/// Start connection `conn`'s reader and writer. `slot` (an accepted connection's place among
/// its source address's connections) lives as long as the reader.
pub(super) fn spawn_io(
    sh: Arc<Shared>,
    conn: ConnId,
    rd: ConnRead,
    wr: ConnWrite,
    dec: Decoder,
    entry: ConnEntry,
    slot: Option<SourceSlot>,
) {
    let h = sh.handle.clone();
    let reader = h.spawn(reader(
        sh.clone(),
        conn,
        rd,
        dec,
        entry.closing.clone(),
        slot,
    ));
    h.spawn(writer(sh, conn, wr, entry, reader.abort_handle()));
}

pub(super) async fn reader(
    sh: Arc<Shared>,
    conn: ConnId,
    mut rd: ConnRead,
    mut dec: Decoder,
    closing: Arc<AtomicBool>,
    slot: Option<SourceSlot>,
) {
    let _slot = slot;
    let mut spare = Spares::for_window(sh.options.config.window);
    // The decoder's first buffer is small ([`make_room`]), and since when it has been read
    // into ([`reuse_small`]).
    let mut small = true;
    let mut small_since = Instant::now();
    loop {
        // Frames already buffered (the listener may have read past the first frame); what
        // they make sendable (answers, due acknowledgements) is written from here when the
        // connections' writers are idle (`out`). Acknowledgements not due yet wait for data
        // to ride on, or for their deadline, which this reader keeps (`Config::ack_delay`);
        // due ones went out in this pass or are its writers' (woken by `after`).
        let ack_at = {
            let mut s = sh.sending();
            let now = sh.now();
            loop {
                match dec.next_frame() {
                    Ok(Some(f)) => s.handle_frame(conn, f, now),
                    Ok(None) => break,
                    Err(e) => {
                        sh.log(format!("connection {conn}: malformed frame: {e}"));
                        s.malformed(conn, e.to_string(), now);
                        sh.after(&mut s);
                        return;
                    }
                }
            }
            sh.after(&mut s);
            s.ack_deadline()
        };
        let now = sh.now();
        let acks_until = ack_at
            .filter(|&t| t > now)
            .map(|t| tokio::time::Instant::now() + t.saturating_since(now));
        if closing.load(Ordering::SeqCst) {
            hand_over_acks(&sh);
            return;
        }
        // Back-pressure: stop reading while the application has a window's worth unread, or
        // the peer does not read our acknowledgements (`Session::receive_paused`).
        let mut acks_due = false;
        loop {
            let n = sh.changed.notified();
            tokio::pin!(n);
            n.as_mut().enable();
            let go_on = {
                let s = sh.session();
                !s.receive_paused() || s.failure().is_some()
            };
            if go_on {
                break;
            }
            match acks_until {
                Some(t) => tokio::select! {
                    _ = n => {}
                    _ = tokio::time::sleep_until(t) => {
                        acks_due = true;
                        break;
                    }
                },
                None => n.await,
            }
        }
        if acks_due {
            continue;
        }
        let missing = dec.missing();
        let buf = dec.buffer_mut();
        if small && small_since.elapsed() >= SPARE_IDLE && reuse_small(buf, missing) {
            small_since = Instant::now();
        }
        make_room(buf, &mut spare, missing, &mut small);
        let limit = read_limit(buf.capacity() - buf.len(), missing);
        let watch_idle = spare.len() > IDLE_SPARES || !small;
        let mut into = buf.limit(limit);
        let read = rd.read_buf(&mut into);
        let idle_until = watch_idle.then(|| tokio::time::Instant::now() + SPARE_IDLE);
        let until = match (idle_until, acks_until) {
            (Some(i), Some(a)) => Some(i.min(a)),
            (i, a) => i.or(a),
        };
        let read = if let Some(until) = until {
            // `read_buf` is cancel-safe: on timeout nothing was read.
            match tokio::time::timeout_at(until, read).await {
                Ok(r) => r,
                Err(_) if idle_until.is_none_or(|i| until < i) => continue, // acknowledgements due
                Err(_) => {
                    spare.trim(IDLE_SPARES);
                    let buf = dec.buffer_mut();
                    if buf.is_empty() {
                        // Nothing of a frame held: start again small ([`IDLE_BUFFER`]).
                        *buf = BytesMut::with_capacity(IDLE_BUFFER);
                        small = true;
                        small_since = Instant::now();
                        spare.trim(0);
                    }
                    continue;
                }
            }
        } else {
            read.await
        };
        match read {
            Ok(0) | Err(_) => {
                if !closing.load(Ordering::SeqCst) {
                    sh.log(format!("connection {conn} broke"));
                }
                let mut s = sh.session();
                s.connection_closed(conn, sh.now());
                sh.after(&mut s);
                drop(s);
                hand_over_acks(&sh);
                closing.store(true, Ordering::SeqCst);
                if let Some(c) = sh.conns.lock().unwrap().get(&conn) {
                    c.wake.notify_one();
                }
                return;
            }
            Ok(_) => {}
        }
    }
}

/// A reader that ends lets go of the deadline of the acknowledgements it queued
/// (`Config::ack_delay`): a timer acts on the session then, waking the writers of the
/// connections left, which send them.
fn hand_over_acks(sh: &Arc<Shared>) {
    let Some(at) = sh.session().ack_deadline() else {
        return;
    };
    let wait = at.saturating_since(sh.now());
    let weak = Arc::downgrade(sh);
    sh.handle.spawn(async move {
        tokio::time::sleep(wait).await;
        if let Some(sh) = weak.upgrade() {
            let mut s = sh.session();
            sh.after(&mut s);
        }
    });
}

/// The largest frame the receive buffers are cut for: a full chunk of the default size
/// (`Config::chunk_size`, 256 KiB) with its header and some piggybacked acknowledgements.
/// Larger frames are received all the same, with a copy where one straddles two buffers.
pub(super) const LARGE_FRAME: usize = 256 * 1024 + 8 * 1024;

/// A receive buffer holds this much besides a partial frame carried over: four large frames,
/// about 1 MiB.
pub(super) const BUFFER: usize = 4 * LARGE_FRAME;
const _: () = assert!(
    BUFFER <= 5 * crate::proto::wire::COPY_BELOW,
    "a payload held must not pin a receive buffer many times its size (wire::COPY_BELOW)"
);

/// How much the next read may take, given the buffer's spare capacity `room` and what the
/// partial frame at its front still lacks (`missing`, `Decoder::missing`): the rest of that
/// frame and as many large frames more as leave room for one further large frame. Frames are
/// at most that large, so the frame a read ends inside fits in the buffer, the read after it
/// ends at its boundary, and `make_room` moves on to the next buffer without copying a partial
/// frame into it. (Reading all the room there was cut a chunk in two at the end of each
/// buffer: 3% of the CPU of a loopback bulk transfer went to copying it.)
pub(super) fn read_limit(room: usize, missing: Option<usize>) -> usize {
    let m = missing.unwrap_or(0);
    if m > room {
        return room; // cannot end in this buffer (a frame larger than LARGE_FRAME)
    }
    match (room - m) / LARGE_FRAME {
        k if k >= 2 => m + (k - 1) * LARGE_FRAME,
        _ if m > 0 => m,
        _ => room,
    }
}

/// Filled receive buffers a reader keeps for reuse ([`make_room`]). The data chunks decoded
/// from a buffer are slices of it, held until the application takes them, and a reader may
/// run up to the receive window ahead of the application; so it keeps as many buffers as the
/// window can pin (`window / BUFFER + 2`; 18 at the default 16 MiB), not more. With only four,
/// a bulk receiver that lagged a few MiB behind got a fresh buffer for nearly every read: a
/// page fault per 4 KiB written, 6% of the CPU and a sixth of the throughput on loopback
/// (`roam bench net`). This adds no peak memory (the unread data already pins as many
/// buffers while it waits) and holds it only while data flows: once reads have been idle for
/// [`SPARE_IDLE`] the reader keeps [`IDLE_SPARES`].
#[derive(Debug, Default)]
pub(super) struct Spares {
    /// Oldest first.
    ring: VecDeque<BytesMut>,
    max: usize,
    /// Buffers allocated because no spare was free.
    allocated: u64,
}

/// Reads idle this long let the spare buffers go ([`Spares`]).
pub(super) const SPARE_IDLE: Duration = Duration::from_secs(1);

/// Spare buffers a reader keeps while its reads are idle.
pub(super) const IDLE_SPARES: usize = 1;

/// An idle reader's buffer. A reader whose reads have been idle [`SPARE_IDLE`] with nothing
/// of a frame in its buffer lets the buffer and its spares go and starts again from one this
/// small; reads fill it until it is full or a frame does not fit ([`make_room`]), and only then
/// does the reader move to a full [`BUFFER`]. Without this, an idle connection's probes
/// (`Config::probe_interval`) walked through its 1 MiB buffer and left every page they touched
/// resident: 92 KiB per idle session on opening, 1.2 MiB after minutes (`roam bench net
/// --sessions`, issue 48). The cost: a burst after an idle second starts in a fresh buffer
/// (a page fault per 4 KiB it fills), and the first read's bytes, at most this many, are
/// copied once into the full buffer. The decoder's first buffer is as large, so that
/// [`reuse_small`] treats both alike.
pub(super) const IDLE_BUFFER: usize = crate::proto::wire::FIRST_BUFFER;

/// A full small buffer ([`IDLE_BUFFER`]) that took at least [`SPARE_IDLE`] to fill, reused in
/// place when nothing decoded from it is still held (its frames handled, its data read): what
/// is left of a partial frame moves to its front. Returns whether it was reused.
///
/// An idle connection still receives: the peer's probes, estimates and their echoes (with
/// the defaults a 12 KiB probe every 10 s, `Config::probe_interval`, so somewhat over 1 KiB a
/// second). Without this its small buffer filled every dozen seconds or so and the reader
/// moved to a full [`BUFFER`] for the next few hundred bytes, let it go a second later and
/// started a fresh small one: a megabyte allocated and freed per idle connection every few
/// seconds, whose touched pages glibc's allocator kept resident (236 KiB per idle session
/// after three minutes, still growing, against 72.5 with this: `roam bench net --sessions 200
/// --stacks roam --idle-settle 180`, docs/results/bench-net-sessions-349929d). A bulk transfer fills the small buffer within one read and so never
/// takes this path: it moves to a full buffer at once, as before.
pub(super) fn reuse_small(buf: &mut BytesMut, missing: Option<usize>) -> bool {
    let need = missing.filter(|&m| m > 0).unwrap_or(1);
    if buf.capacity() - buf.len() >= need || buf.len() + need > IDLE_BUFFER {
        return false;
    }
    buf.try_reclaim(IDLE_BUFFER - buf.len())
}

impl Spares {
    /// Spares for a receive window of `window` bytes.
    pub(super) fn for_window(window: u64) -> Spares {
        let per = BUFFER as u64;
        Spares {
            ring: VecDeque::new(),
            max: (window.div_ceil(per) + 2).min(1024) as usize,
            allocated: 0,
        }
    }

    /// The most recently filled spare buffer whose chunks have all been consumed, with room
    /// for `want` bytes (the most recent is likeliest still in the CPU's cache).
    fn take(&mut self, want: usize) -> Option<BytesMut> {
        let ring = &mut self.ring;
        let i = (0..ring.len()).rev().find(|&i| ring[i].try_reclaim(want))?;
        ring.remove(i)
    }

    /// Keep a filled buffer for reuse, letting the oldest go past the limit.
    fn keep(&mut self, mut old: BytesMut) {
        old.clear();
        if self.ring.len() >= self.max {
            self.ring.pop_front();
        }
        self.ring.push_back(old);
    }

    /// Let all but the newest `n` go.
    pub(super) fn trim(&mut self, n: usize) {
        while self.ring.len() > n {
            self.ring.pop_front();
        }
    }

    /// How many are kept.
    pub(super) fn len(&self) -> usize {
        self.ring.len()
    }
}

/// Make room in a connection's receive buffer for a read (never leaving it without room). The
/// buffer cannot simply be reused while the application holds chunks of it, and a fresh
/// buffer for every read costs a page fault per 4 KiB written into it; instead the reader
/// moves on to a spare buffer whose chunks have all been consumed ([`Spares`]), allocating
/// only when none is free. It moves on at a frame boundary once two large frames no longer
/// fit (see `read_limit`), or when the partial frame at the front (`missing` bytes short) does
/// not fit, copying what has arrived of it. Returns how many bytes it carried over (copied, at
/// most).
///
/// `small` says that `buf` is a small buffer (an idle reader's, [`IDLE_BUFFER`], or the
/// decoder's first): it is read into while it has room, and once it is left it is not kept
/// as a spare; `make_room` clears it when it moves to a full buffer.
pub(super) fn make_room(
    buf: &mut BytesMut,
    spare: &mut Spares,
    missing: Option<usize>,
    small: &mut bool,
) -> usize {
    let room = buf.capacity() - buf.len();
    let enough = match missing {
        Some(m) if m > 0 => m <= room,
        _ => room >= 2 * LARGE_FRAME || (*small && room > 0),
    };
    if enough {
        return 0;
    }
    let carried = buf.len();
    if !*small && buf.try_reclaim(BUFFER) {
        return carried;
    }
    let want = BUFFER + buf.len();
    let mut next = spare.take(want).unwrap_or_else(|| {
        spare.allocated += 1;
        BytesMut::with_capacity(want)
    });
    next.extend_from_slice(buf);
    let old = std::mem::replace(buf, next);
    if !std::mem::replace(small, false) {
        spare.keep(old);
    }
    carried
}

/// A connection's writer: it takes the connection's write side ([`Out`]), finishes what a
/// direct write left (`out`), then asks the session for frames and writes them, until there
/// is nothing to write; then it lets the write side go and waits to be woken. Once the
/// connection is closing, what it writes gets `Options::user_timeout` to go out (a peer that
/// does not read cannot hold it), and when the writer ends, the reader gets as long again to
/// see the peer's end before it is stopped: a reader waits on the socket, and a peer that
/// keeps a connection open and silent would otherwise keep it, and the multi-socket, for
/// ever.
pub(super) async fn writer(
    sh: Arc<Shared>,
    conn: ConnId,
    wr: ConnWrite,
    entry: ConnEntry,
    reader: tokio::task::AbortHandle,
) {
    let ConnEntry {
        wake,
        closing,
        capped,
        out: side,
        fd,
        network,
        ..
    } = entry;
    *side.lock().await = Some(Out::new(wr));
    let grace = sh.options.user_timeout;
    loop {
        let mut held = side.lock().await;
        let out = held.as_mut().expect("set above");
        if out.has_leftover() {
            let parts = std::mem::take(&mut out.pending);
            out.unflushed = false;
            if let Err(e) = write_unless_stuck(&mut out.wr, parts, &wake, &closing, grace).await {
                sh.log(format!("connection {conn}: write failed: {e}"));
                closing.store(true, Ordering::SeqCst);
            }
            sh.writes.from_writer.fetch_add(1, Ordering::Relaxed);
        }
        // How long to sleep unless woken: while the anticipatory cap holds background data
        // back, until enough of it should have drained; otherwise a second, a safety net only
        // (a change that may give it something to write wakes it, `Shared::after`, or writes
        // itself, `out`; an idle session's writer should not wake more often).
        let (batch, finished) = {
            let kernel = sh.kernel_state(fd, network.as_deref());
            let mut s = sh.session();
            let b = sh.take_batch(&mut s, conn, &kernel, &capped, sh.now());
            if !b.parts.is_empty() {
                sh.after(&mut s);
            }
            (b, s.is_finished())
        };
        if !batch.parts.is_empty() {
            if let Err(e) =
                write_unless_stuck(&mut out.wr, batch.parts, &wake, &closing, grace).await
            {
                sh.log(format!("connection {conn}: write failed: {e}"));
                closing.store(true, Ordering::SeqCst);
            }
            sh.writes.from_writer.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        if closing.load(Ordering::SeqCst) || finished {
            // No send takes this side again (`Shared::sending` skips an empty one).
            if let Some(mut out) = held.take() {
                let _ = tokio::time::timeout(grace, out.wr.shutdown()).await;
            }
            drop(held);
            {
                let mut s = sh.session();
                s.forget_connection(conn, sh.now());
                sh.conns.lock().unwrap().remove(&conn);
                sh.after(&mut s);
            }
            drop(sh);
            tokio::spawn(async move {
                tokio::time::sleep(grace).await;
                reader.abort();
            });
            return;
        }
        drop(held);
        tokio::select! {
            _ = wake.notified() => {}
            _ = tokio::time::sleep(batch.pause) => {}
        }
    }
}

/// [`write_all`], unless the connection is closing (`closing`, announced on `wake`) and the
/// write has not finished within `grace` of that.
async fn write_unless_stuck(
    wr: &mut ConnWrite,
    parts: Vec<Bytes>,
    wake: &Notify,
    closing: &AtomicBool,
    grace: Duration,
) -> io::Result<()> {
    let write = write_all(wr, parts);
    tokio::pin!(write);
    loop {
        if closing.load(Ordering::SeqCst) {
            return tokio::time::timeout(grace, write)
                .await
                .unwrap_or_else(|_| {
                    Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "closing, and the peer does not read",
                    ))
                });
        }
        tokio::select! {
            r = &mut write => return r,
            _ = wake.notified() => {}
        }
    }
}

/// Write `parts` in order, then flush: under TLS a write that meets a full socket may leave
/// records buffered in the TLS session and still report its bytes as written, and nothing
/// would send them before the next batch (a 128 KB reply over a 10 Mbit/s link waited 10 s
/// for the acknowledgement timeout's probe to push it out). On plain TCP the flush is free.
pub(super) async fn write_all(wr: &mut ConnWrite, parts: Vec<Bytes>) -> io::Result<()> {
    let mut parts = Parts::new(parts);
    while !parts.is_empty() {
        let n = wr.write_vectored(&parts.slices()).await?;
        if n == 0 {
            return Err(connection_closed());
        }
        parts.advance(n);
    }
    wr.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::wire::{Chunk, Frame};
    use crate::proto::{Deps, Label};

    /// Fill `buf` to within `tail` bytes of its capacity and split off all but a partial
    /// frame of `tail` bytes (as the decoder does); the chunk is returned.
    fn fill(buf: &mut BytesMut, tail: usize) -> Bytes {
        let n = buf.capacity() - buf.len();
        buf.extend_from_slice(&vec![9u8; n - 10]);
        buf.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10][..10.min(tail)]);
        let keep = tail.min(10);
        buf.split_to(buf.len() - keep).freeze()
    }

    #[test]
    fn receive_buffers_are_reused_once_their_chunks_are_consumed() {
        let mut spare = Spares::for_window(16 << 20);
        let mut buf = BytesMut::with_capacity(64 * 1024); // as the decoder starts
        let _ = fill(&mut buf, 10);
        assert_eq!(make_room(&mut buf, &mut spare, Some(BUFFER), &mut true), 10);
        let first = buf.as_ptr();
        assert!(buf.capacity() >= BUFFER);
        let chunk1 = fill(&mut buf, 10);
        // The chunk is still held: a second buffer, with the partial frame carried over.
        make_room(&mut buf, &mut spare, Some(LARGE_FRAME), &mut false);
        assert_ne!(buf.as_ptr(), first);
        assert_eq!(&buf[..], &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        drop(chunk1);
        let _chunk2 = fill(&mut buf, 10);
        // The first buffer's chunk was consumed: its memory is used again.
        make_room(&mut buf, &mut spare, Some(LARGE_FRAME), &mut false);
        assert_eq!(buf.as_ptr(), first);
        assert_eq!(&buf[..], &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        assert!(buf.capacity() - buf.len() >= LARGE_FRAME);
    }

    /// A reader running ahead of the application by several buffers (up to the receive
    /// window) still reuses buffers once it has as many as that lag pins: no fresh buffer
    /// (a page fault per 4 KiB) per read. Trimmed, the spares go.
    #[test]
    fn a_lagging_application_does_not_cost_a_fresh_buffer_per_read() {
        let mut spare = Spares::for_window(16 << 20);
        let mut buf = BytesMut::with_capacity(BUFFER);
        let mut held = VecDeque::new();
        let mut warm = 0;
        for i in 0..200 {
            held.push_back(fill(&mut buf, 10));
            if held.len() > 10 {
                held.pop_front(); // the application lags ten buffers (10 MiB) behind
            }
            make_room(&mut buf, &mut spare, Some(LARGE_FRAME), &mut false);
            if i == 20 {
                warm = spare.allocated;
            }
        }
        let fresh_after_warmup = spare.allocated - warm;
        assert_eq!(
            fresh_after_warmup, 0,
            "fresh buffers while the lag held still"
        );
        assert!(spare.len() <= 18, "{} spares", spare.len());
        spare.trim(IDLE_SPARES);
        assert_eq!(spare.len(), IDLE_SPARES);
    }

    /// A bulk stream of full chunks (with acknowledgements piggybacked, so frames vary in
    /// size), read with `read_limit` and `make_room` as the reader does, from a kernel that
    /// always has more to give: no partial frame is ever copied into the next buffer, and no
    /// buffer is used for less than three frames.
    #[test]
    fn reads_end_receive_buffers_at_frame_boundaries() {
        let mut stream = Vec::new();
        let mut frames = 0;
        for i in 0..200u64 {
            let acks = (0..(i * 7919) % 300).collect();
            let f = Frame::Data(Chunk {
                irob: i,
                label: Label::BackgroundLarge,
                offset: 0,
                deps: Some(Deps::AllEarlier),
                end: true,
                acks,
                data: Bytes::from(vec![i as u8; 256 * 1024]),
            });
            stream.extend_from_slice(&f.to_bytes());
            frames += 1;
        }
        let mut dec = Decoder::default();
        let mut spare = Spares::for_window(16 << 20);
        let (mut at, mut copied, mut buffers, mut decoded) = (0, 0, 0, 0);
        let mut held = Vec::new();
        while at < stream.len() {
            let missing = dec.missing();
            let buf = dec.buffer_mut();
            let before = buf.as_ptr();
            copied += make_room(buf, &mut spare, missing, &mut false);
            if buf.as_ptr() != before {
                buffers += 1;
            }
            let limit = read_limit(buf.capacity() - buf.len(), missing);
            assert!(
                limit > 0,
                "a read of nothing would look like the end of the stream"
            );
            let n = limit.min(stream.len() - at);
            buf.put_slice(&stream[at..at + n]);
            at += n;
            while let Some(f) = dec.next_frame().unwrap() {
                let Frame::Data(c) = f else {
                    panic!("a data frame")
                };
                assert!(c.data.iter().all(|&b| b == c.irob as u8));
                decoded += 1;
                held.push(c.data); // the application has not read them yet
                if held.len() > 8 {
                    held.remove(0);
                }
            }
        }
        assert_eq!(decoded, frames);
        assert_eq!(copied, 0, "partial frames copied between receive buffers");
        assert!(
            buffers <= frames / 3 + 1,
            "{buffers} buffers for {frames} frames"
        );
    }

    /// Issue 48: an idle reader's small buffer is read into while it has room; when a frame
    /// does not fit, the reader moves to a full buffer (copying what arrived of the frame),
    /// and the small one is not kept as a spare.
    #[test]
    fn a_small_buffer_is_read_into_until_a_frame_does_not_fit() {
        let mut spare = Spares::for_window(16 << 20);
        let mut buf = BytesMut::with_capacity(IDLE_BUFFER);
        let mut small = true;
        // Probes and their echoes fit: no move.
        assert_eq!(make_room(&mut buf, &mut spare, None, &mut small), 0);
        assert!(small && buf.capacity() == IDLE_BUFFER);
        let probes = IDLE_BUFFER - 4 * 1024;
        buf.put_slice(&vec![7; probes]);
        let _probes = buf.split_to(probes).freeze();
        // 4 KiB of room left: still read into, and a frame's first 4 KiB arrive.
        assert_eq!(make_room(&mut buf, &mut spare, None, &mut small), 0);
        buf.put_slice(&[8; 4 * 1024]);
        // The frame lacks 8 KiB more: a full buffer, those 4 KiB carried over.
        assert_eq!(
            make_room(&mut buf, &mut spare, Some(8 * 1024), &mut small),
            4 * 1024
        );
        assert!(!small && buf.capacity() >= BUFFER);
        assert_eq!(spare.len(), 0, "the small buffer was kept as a spare");
    }

    /// Issue 48: a full small buffer is reused in place once what was decoded from it is gone,
    /// keeping the partial frame at its end; not while a chunk of it is still held, nor for a
    /// frame larger than a small buffer, nor while it has room.
    #[test]
    fn a_full_small_buffer_is_reused_in_place_once_its_frames_are_gone() {
        let mut buf = BytesMut::with_capacity(IDLE_BUFFER);
        let start = buf.as_ptr();
        buf.put_slice(&[1; 100]);
        assert!(!reuse_small(&mut buf, None), "it still has room");
        buf.put_slice(&vec![2; IDLE_BUFFER - 100 - 10]);
        let held = buf.split_to(IDLE_BUFFER - 10).freeze();
        // 10 bytes of a frame that lacks 20 more; room for 0.
        buf.put_slice(&[3; 10]);
        assert!(!reuse_small(&mut buf, Some(20)), "a chunk of it is held");
        drop(held);
        assert!(
            !reuse_small(&mut buf, Some(IDLE_BUFFER)),
            "the frame cannot fit"
        );
        assert!(reuse_small(&mut buf, Some(20)));
        assert_eq!((buf.as_ptr(), &buf[..]), (start, &[3u8; 10][..]));
        assert_eq!(buf.capacity(), IDLE_BUFFER);
        let mut spare = Spares::for_window(16 << 20);
        let mut small = true;
        assert_eq!(make_room(&mut buf, &mut spare, Some(20), &mut small), 0);
        assert!(small && spare.allocated == 0);
    }
}
