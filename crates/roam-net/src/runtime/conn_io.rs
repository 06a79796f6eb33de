//! A connection's two tasks: the reader decodes frames into the session (stopping while the
//! application has a window's worth unread), the writer asks the session for frames and writes
//! them in batches, handing background data to the kernel only within the anticipatory cap.

use super::*;

/// Largest batch of frames one writer pass takes from the session (written with as few
/// system calls as the kernel allows). Each pass also reads TCP_INFO and SIOCOUTQ for the
/// anticipatory cap and takes the session's lock, so passes of 256 KiB (one chunk) held bulk
/// transfers on loopback to 0.55 of a TCP connection's throughput; with 1 MiB, 0.70 (`roam
/// bench net --systems none`, median of 5 interleaved runs each). Background data in a batch
/// is still bounded by the cap, so a slow network's batches stay small.
pub(super) const WRITE_BATCH: usize = 1024 * 1024;

pub(super) fn spawn_io(
    sh: Arc<Shared>,
    conn: ConnId,
    rd: ConnRead,
    wr: ConnWrite,
    dec: Decoder,
    entry: ConnEntry,
) {
    let h = sh.handle.clone();
    h.spawn(reader(sh.clone(), conn, rd, dec, entry.closing.clone()));
    h.spawn(writer(sh, conn, wr, entry));
}

pub(super) async fn reader(
    sh: Arc<Shared>,
    conn: ConnId,
    mut rd: ConnRead,
    mut dec: Decoder,
    closing: Arc<AtomicBool>,
) {
    let mut spare = VecDeque::new();
    loop {
        // Frames already buffered (the listener may have read past the first frame).
        {
            let mut s = sh.session();
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
        }
        if closing.load(Ordering::SeqCst) {
            return;
        }
        // Back-pressure: stop reading while the application has a window's worth unread, or
        // the peer does not read our acknowledgements (`Session::receive_paused`).
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
            n.await;
        }
        make_room(dec.buffer_mut(), &mut spare);
        match rd.read_buf(dec.buffer_mut()).await {
            Ok(0) | Err(_) => {
                if !closing.load(Ordering::SeqCst) {
                    sh.log(format!("connection {conn} broke"));
                }
                let mut s = sh.session();
                s.connection_closed(conn, sh.now());
                sh.after(&mut s);
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

/// A read asks the kernel for up to this much.
pub(super) const READ_SIZE: usize = 1 << 20;
const _: () = assert!(
    READ_SIZE <= 4 * crate::proto::wire::COPY_BELOW,
    "a payload held must not pin a receive buffer many times its size (wire::COPY_BELOW)"
);

/// Filled receive buffers a reader keeps for reuse.
pub(super) const SPARE_BUFFERS: usize = 4;

/// Make room in a connection's receive buffer for a read. The data chunks decoded from it are
/// slices of the buffer, held until the application takes them, so the buffer cannot simply
/// be reused. A fresh buffer for every read costs a page fault per 4 KiB written into it (a
/// tenth of the CPU on loopback in `roam bench net`); instead the reader keeps the last few
/// buffers it filled and moves on to the first whose chunks have all been consumed (copying
/// the partial frame at the end of the current one), allocating only when none is free.
pub(super) fn make_room(buf: &mut BytesMut, spare: &mut VecDeque<BytesMut>) {
    if buf.capacity() - buf.len() >= READ_SIZE / 8 || buf.try_reclaim(READ_SIZE) {
        return;
    }
    let mut next = None;
    for _ in 0..spare.len() {
        let mut b = spare.pop_front().expect("counted");
        if b.try_reclaim(READ_SIZE / 2 + buf.len()) {
            next = Some(b);
            break;
        }
        spare.push_back(b);
    }
    let mut next = next.unwrap_or_else(|| BytesMut::with_capacity(READ_SIZE + buf.len()));
    next.extend_from_slice(buf);
    let mut old = std::mem::replace(buf, next);
    old.clear();
    if spare.len() >= SPARE_BUFFERS {
        spare.pop_front();
    }
    spare.push_back(old);
}

pub(super) async fn writer(sh: Arc<Shared>, conn: ConnId, mut wr: ConnWrite, entry: ConnEntry) {
    let ConnEntry {
        wake,
        closing,
        capped,
        fd,
        net,
    } = entry;
    // The shared-memory key of the connection's network, looked up once (hot path below).
    let network = net_key(&sh, net);
    loop {
        let mut parts: Vec<Bytes> = Vec::new();
        let mut total = 0;
        // How long to sleep unless woken: while the anticipatory cap holds background data
        // back, until enough of it should have drained (`Session::background_recheck`).
        let mut pause = Duration::from_millis(200);
        let finished;
        {
            let mut s = sh.session();
            let now = sh.now();
            let mut room = sh.background_room(&mut s, conn, fd, network.as_deref(), now);
            while total < WRITE_BATCH {
                let Some(t) = s.poll_transmit(conn, now, room) else {
                    if room == 0 {
                        pause = s.background_recheck(conn, now);
                    }
                    break;
                };
                room = room.saturating_sub(t.background);
                total += t.len();
                parts.push(Bytes::from(t.head));
                if !t.data.is_empty() {
                    parts.push(t.data);
                }
            }
            capped.store(room == 0, Ordering::Relaxed);
            finished = s.is_finished();
            if !parts.is_empty() {
                sh.after(&mut s);
            }
        }
        if !parts.is_empty() {
            if let Err(e) = write_all(&mut wr, parts).await {
                sh.log(format!("connection {conn}: write failed: {e}"));
                closing.store(true, Ordering::SeqCst);
            }
            continue;
        }
        if closing.load(Ordering::SeqCst) || finished {
            let _ = wr.shutdown().await;
            let mut s = sh.session();
            s.forget_connection(conn, sh.now());
            sh.conns.lock().unwrap().remove(&conn);
            sh.after(&mut s);
            return;
        }
        tokio::select! {
            _ = wake.notified() => {}
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

pub(super) async fn write_all(wr: &mut ConnWrite, mut parts: Vec<Bytes>) -> io::Result<()> {
    let mut i = 0;
    while i < parts.len() {
        let slices: Vec<io::IoSlice<'_>> = parts[i..]
            .iter()
            .take(64)
            .map(|b| io::IoSlice::new(b))
            .collect();
        let mut n = wr.write_vectored(&slices).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "connection closed",
            ));
        }
        while n > 0 && i < parts.len() {
            if n >= parts[i].len() {
                n -= parts[i].len();
                i += 1;
            } else {
                let rest = parts[i].slice(n..);
                parts[i] = rest;
                n = 0;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut spare = VecDeque::new();
        let mut buf = BytesMut::with_capacity(64 * 1024); // as the decoder starts
        let _ = fill(&mut buf, 10);
        make_room(&mut buf, &mut spare);
        let first = buf.as_ptr();
        assert!(buf.capacity() >= READ_SIZE);
        let chunk1 = fill(&mut buf, 10);
        // The chunk is still held: a second buffer, with the partial frame carried over.
        make_room(&mut buf, &mut spare);
        assert_ne!(buf.as_ptr(), first);
        assert_eq!(&buf[..], &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        drop(chunk1);
        let _chunk2 = fill(&mut buf, 10);
        // The first buffer's chunk was consumed: its memory is used again.
        make_room(&mut buf, &mut spare);
        assert_eq!(buf.as_ptr(), first);
        assert_eq!(&buf[..], &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        assert!(buf.capacity() - buf.len() >= READ_SIZE / 2);
    }
}
