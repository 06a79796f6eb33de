//! A connection's write side ([`Out`]), shared by its writer task and the threads that change
//! the session: a send writes its frames from the caller's thread when it can (issue 48, item
//! 1: at most one hand-off per direction).
//!
//! Before, every send handed its frames to the connection's writer task: the application's
//! thread changed the session, woke the writer (a futex, often a sleeping runtime worker), and
//! the writer took the session's lock again to ask for the frames. Now a thread about to
//! change the session first tries to take the write sides no writer is using
//! ([`Shared::sending`]; `try_lock`, never a wait). Holding them, it changes the session and,
//! still under the session's lock, takes each held connection's frames as its writer would
//! ([`Shared::take_batch`]); once the lock is let go it writes them without blocking
//! ([`Held::write`]). The writer of a held connection is not woken. What the kernel does not
//! take at once stays in [`Out::pending`] and the writer is woken to finish it: so a send never
//! waits for the network, and the writer is needed only when a socket is full, when the
//! anticipatory cap holds background data back, when a batch did not take everything, when a
//! write failed, or when the session has ended (the writer closes the connection). A
//! connection's reader writes what received frames make sendable the same way.
//!
//! Frames are taken and written under the same hold of the write side, by the writer as by a
//! sender, so two parties never interleave their frames on one connection.
//!
//! Lock order (module `runtime`): a write side is taken before the session and only with
//! `try_lock` from a thread that changes the session; the writer task waits for its own, then
//! takes the session.

use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use tokio::io::AsyncWrite;
use tokio::sync::OwnedMutexGuard;

use super::*;

/// A connection's write half and what a write from outside its writer left unwritten.
pub(super) struct Out {
    pub(super) wr: ConnWrite,
    /// The rest of frames already taken from the session that a direct write could not finish:
    /// whoever holds the write side next writes them first.
    pub(super) pending: Vec<Bytes>,
    /// A direct write's flush did not finish (TLS records still buffered).
    pub(super) unflushed: bool,
}

impl Out {
    pub(super) fn new(wr: ConnWrite) -> Out {
        Out {
            wr,
            pending: Vec::new(),
            unflushed: false,
        }
    }

    /// Whether a direct write left something for the writer.
    pub(super) fn has_leftover(&self) -> bool {
        !self.pending.is_empty() || self.unflushed
    }

    /// Write `parts` as far as the kernel takes them now, without waiting, then flush; what is
    /// left goes to `pending`. Returns whether everything went out.
    fn write_now(&mut self, parts: Vec<Bytes>) -> io::Result<bool> {
        let mut cx = Context::from_waker(Waker::noop());
        let mut parts = Parts::new(parts);
        while !parts.is_empty() {
            let slices = parts.slices();
            match Pin::new(&mut self.wr).poll_write_vectored(&mut cx, &slices) {
                Poll::Ready(Ok(0)) => return Err(connection_closed()),
                Poll::Ready(Ok(n)) => parts.advance(n),
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => break,
            }
        }
        self.pending = parts.rest();
        self.unflushed = !self.pending.is_empty()
            || match Pin::new(&mut self.wr).poll_flush(&mut cx) {
                Poll::Ready(r) => {
                    r?;
                    false
                }
                Poll::Pending => true,
            };
        Ok(!self.has_leftover())
    }
}

pub(super) fn connection_closed() -> io::Error {
    io::Error::new(io::ErrorKind::WriteZero, "connection closed")
}

/// Byte strings being written in order: the ones not yet fully written, from `i`.
pub(super) struct Parts {
    parts: Vec<Bytes>,
    i: usize,
}

impl Parts {
    pub(super) fn new(parts: Vec<Bytes>) -> Parts {
        Parts { parts, i: 0 }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.i >= self.parts.len()
    }

    /// The next parts, as many as one vectored write takes.
    pub(super) fn slices(&self) -> Vec<io::IoSlice<'_>> {
        self.parts[self.i..]
            .iter()
            .take(64)
            .map(|b| io::IoSlice::new(b))
            .collect()
    }

    /// `n` more bytes were written.
    pub(super) fn advance(&mut self, mut n: usize) {
        while n > 0 && self.i < self.parts.len() {
            let p = &mut self.parts[self.i];
            if n >= p.len() {
                n -= p.len();
                self.i += 1;
            } else {
                *p = p.slice(n..);
                n = 0;
            }
        }
    }

    /// What is left.
    pub(super) fn rest(mut self) -> Vec<Bytes> {
        self.parts.split_off(self.i.min(self.parts.len()))
    }
}

/// Who wrote a multi-socket's batches of frames so far ([`super::MultiSocket::write_counts`]):
/// what the direct path (module `out`) saves is the writer's hand-offs.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct WriteCounts {
    /// Batches written whole from the thread that changed the session.
    pub from_caller: u64,
    /// Batches its writer tasks wrote, or finished for a direct write the kernel did not take
    /// whole.
    pub from_writer: u64,
}

/// [`WriteCounts`] as they are counted.
#[derive(Debug, Default)]
pub(super) struct Counts {
    pub(super) from_caller: AtomicU64,
    pub(super) from_writer: AtomicU64,
}

impl Counts {
    pub(super) fn get(&self) -> WriteCounts {
        WriteCounts {
            from_caller: self.from_caller.load(Ordering::Relaxed),
            from_writer: self.from_writer.load(Ordering::Relaxed),
        }
    }
}

/// Frames taken from the session for one connection in one pass ([`Shared::take_batch`]).
#[derive(Default)]
pub(super) struct Batch {
    pub(super) parts: Vec<Bytes>,
    /// The session may have more for the connection now: the batch is full, or the
    /// anticipatory cap held background data back (the writer then paces its rechecks).
    pub(super) more: bool,
    /// How long the writer may sleep unless woken (while the cap holds data back, until it
    /// should have drained: `Session::background_recheck`).
    pub(super) pause: Duration,
}

/// A write side held by a thread that changes the session ([`Shared::sending`]), with what
/// the kernel held before the session's lock was taken and the frames taken under it.
pub(super) struct Held {
    pub(super) conn: ConnId,
    entry: ConnEntry,
    out: OwnedMutexGuard<Option<Out>>,
    kernel: KernelState,
    batch: Batch,
}

impl Shared {
    /// The session, locked, with the write sides of the connections no writer is using held,
    /// so that what the change makes sendable on them is written from this thread once the
    /// lock is let go (module doc). For the application's sends and the readers' passes;
    /// [`Shared::session`] for the rest.
    pub(super) fn sending(&self) -> Locked<'_> {
        if !self.options.writes_from_caller {
            return self.session();
        }
        let entries: Vec<(ConnId, ConnEntry)> = self
            .conns
            .lock()
            .unwrap()
            .iter()
            .map(|(&c, e)| (c, e.clone()))
            .collect();
        let mut held = Vec::with_capacity(entries.len());
        for (conn, entry) in entries {
            if entry.closing.load(Ordering::Relaxed) {
                continue;
            }
            let Ok(out) = entry.out.clone().try_lock_owned() else {
                continue; // its writer is writing
            };
            if out.as_ref().is_none_or(Out::has_leftover) {
                continue; // not started or shut down, or the writer has bytes to finish first
            }
            let kernel = self.kernel_state(entry.fd, entry.network.as_deref());
            held.push(Held {
                conn,
                entry,
                out,
                kernel,
                batch: Batch::default(),
            });
        }
        let mut s = self.session();
        s.held = held;
        s
    }

    /// Connection `conn`'s next frames, up to [`conn_io::WRITE_BATCH`] bytes, with the
    /// background data the anticipatory cap allows given what the kernel holds (`kernel`).
    /// `capped` records whether the cap was reached (the ticker reports it).
    pub(super) fn take_batch(
        &self,
        s: &mut Session,
        conn: ConnId,
        kernel: &KernelState,
        capped: &AtomicBool,
        now: Time,
    ) -> Batch {
        let mut b = Batch {
            pause: ticker::IDLE_TICK,
            ..Batch::default()
        };
        let mut room = self.background_room(s, conn, kernel, now);
        let mut total = 0;
        loop {
            if total >= conn_io::WRITE_BATCH {
                b.more = true;
                break;
            }
            let Some(t) = s.poll_transmit(conn, now, room) else {
                if room == 0 {
                    b.pause = s.background_recheck(conn, now);
                    b.more = true;
                }
                break;
            };
            room = room.saturating_sub(t.background);
            total += t.len();
            b.parts.push(Bytes::from(t.head));
            if !t.data.is_empty() {
                b.parts.push(t.data);
            }
        }
        capped.store(room == 0, Ordering::Relaxed);
        b
    }

    /// Under the session's lock, after a change (`after`): take the held connections' frames
    /// (their writers are woken only for what is left: [`Held::write`]).
    pub(super) fn take_held_batches(&self, s: &mut Locked<'_>) {
        let mut held = std::mem::take(&mut s.held);
        let now = self.now();
        // A finished session's writers close its connections.
        let finished = s.is_finished();
        for h in &mut held {
            let b = self.take_batch(s, h.conn, &h.kernel, &h.entry.capped, now);
            h.batch.parts.extend(b.parts);
            h.batch.more |= b.more || finished;
        }
        s.held = held;
    }
}

impl Held {
    /// Write the frames taken, without waiting (the session's lock let go); wake the writer
    /// for what is left, or when the session may have more than the batch took.
    pub(super) fn write(mut self, sh: &Shared) {
        let parts = std::mem::take(&mut self.batch.parts);
        let out = self.out.as_mut().expect("held only once started");
        let wake = if parts.is_empty() {
            self.batch.more
        } else {
            match out.write_now(parts) {
                Ok(done) => {
                    if done {
                        sh.writes.from_caller.fetch_add(1, Ordering::Relaxed);
                    }
                    !done || self.batch.more
                }
                Err(e) => {
                    sh.log(format!("connection {}: write failed: {e}", self.conn));
                    self.entry.closing.store(true, Ordering::SeqCst);
                    true
                }
            }
        };
        drop(self.out);
        if wake {
            self.entry.wake.notify_one();
        }
    }
}
