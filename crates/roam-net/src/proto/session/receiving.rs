//! The receiver: chunks from every connection are reassembled per IROB; an IROB is delivered
//! only after its dependencies, one at a time, higher labels first (only foreground IROBs are
//! streamed before they are complete). An IROB is acknowledged once it is complete and its
//! dependencies are acknowledged, so the peer's window bounds what it can make this side
//! buffer; beyond the receive limit the peer is failed.
//!
//! The receive limit counts memory, not only payload: each stored piece of an IROB costs
//! [`PIECE_OVERHEAD`] and each dependency [`DEP_OVERHEAD`] besides its bytes (64 million
//! one-byte pieces with gaps between them hold about 6 GB of bookkeeping for 64 MiB of
//! payload). Small contiguous pieces are merged ([`MERGE_BELOW`]) so that an honest sender's
//! small chunks cost little. Which IROBs wait for which is kept incrementally (`waiting`).

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use roam_core::Time;

use super::waiting::IROB_SPAN;
use super::*;
use crate::proto::label::Label;
use crate::proto::ranges::RangeSet;
use crate::proto::wire::{Chunk, Deps};

/// Most acknowledgements queued unsent before the driver stops reading
/// ([`Session::receive_paused`]).
pub const MAX_PENDING_ACKS: usize = 1 << 16;

/// Bytes of bookkeeping counted per stored piece of an IROB, beside its payload: its entry in
/// the IROB's map of pieces (offset and a `Bytes` handle, in a B-tree node), in its set of
/// held ranges, and the shared header of a payload copied out of the receive buffer. Measured
/// with a counting allocator (`tests/memory.rs`, `a_piece_costs_what_the_limit_counts`): 137
/// bytes requested for a one-byte piece decoded from the wire; the rest covers the
/// allocator's rounding of small blocks (to 32 bytes in glibc).
pub const PIECE_OVERHEAD: u64 = 192;

/// Bytes of bookkeeping counted per dependency an IROB names: the id in its list and its
/// entries in the two indexes of IROBs waiting for acknowledgement and for delivery
/// (`waiting::DepWait`). Measured with a counting allocator (`tests/memory.rs`,
/// `a_dependency_costs_what_the_limit_counts`): 77 bytes for a dependency that never comes.
pub const DEP_OVERHEAD: u64 = 96;

/// Contiguous pieces of an IROB whose lengths add up to at most this are merged into one (a
/// copy of at most this many bytes), so that an honest sender's small chunks (a slow link's
/// writer hands out about a kilobyte at a time) cost one piece's bookkeeping per couple of
/// kilobytes. Pieces with gaps between them cannot be merged: those are counted.
pub const MERGE_BELOW: usize = 4096;

#[derive(Debug)]
pub(super) struct InIrob {
    pub(super) label: Label,
    pub(super) deps: Option<Deps>,
    pub(super) segments: BTreeMap<u64, Bytes>,
    pub(super) have: RangeSet,
    pub(super) end: Option<u64>,
    pub(super) delivered: u64,
    pub(super) complete: bool,
    pub(super) acked: bool,
    /// Every dependency has been delivered (`Session::delivery_wait`).
    pub(super) deps_delivered: bool,
}

impl InIrob {
    /// Its bookkeeping, as the receive limit counts it.
    pub(super) fn bookkeeping(&self) -> u64 {
        self.segments.len() as u64 * PIECE_OVERHEAD + self.deps.as_ref().map_or(0, deps_cost)
    }

    /// Whether the application may take bytes of it once its dependencies are delivered:
    /// complete, or a foreground IROB whose first bytes have arrived (streamed).
    fn takeable(&self) -> bool {
        self.complete || (self.label.is_foreground() && self.have.prefix() > 0)
    }
}

/// The bookkeeping counted for a dependency list.
pub(super) fn deps_cost(d: &Deps) -> u64 {
    match d {
        Deps::AllEarlier => 0,
        Deps::List(l) => l.len() as u64 * DEP_OVERHEAD,
    }
}

/// Store `data` at offset `at` among `segments` (the range is not held yet), merging it with
/// contiguous neighbours while their lengths add up to at most [`MERGE_BELOW`]. Returns the
/// change in the number of pieces (+1, 0 or -1).
fn store_piece(segments: &mut BTreeMap<u64, Bytes>, mut at: u64, mut data: Bytes) -> i64 {
    let mut delta = 1;
    if data.len() < MERGE_BELOW {
        let before = segments.range(..at).next_back().map(|(&s, b)| (s, b.len()));
        if let Some((s, len)) = before {
            if s + len as u64 == at && len + data.len() <= MERGE_BELOW {
                let prev = segments.remove(&s).unwrap_or_default();
                data = concat(&prev, &data);
                at = s;
                delta -= 1;
            }
        }
        let next_at = at + data.len() as u64;
        if let Some(next) = segments.get(&next_at) {
            if data.len() + next.len() <= MERGE_BELOW {
                let next = segments.remove(&next_at).unwrap_or_default();
                data = concat(&data, &next);
                delta -= 1;
            }
        }
    }
    segments.insert(at, data);
    delta
}

fn concat(a: &[u8], b: &[u8]) -> Bytes {
    let mut m = BytesMut::with_capacity(a.len() + b.len());
    m.extend_from_slice(a);
    m.extend_from_slice(b);
    m.freeze()
}

impl Session {
    pub(super) fn on_chunk(&mut self, ch: Chunk, now: Time) -> Result<(), String> {
        self.arrivals += 1;
        self.ack_bytes += ch.data.len() as u64;
        if self.acked.contains(ch.irob) && !self.incoming.contains_key(&ch.irob) {
            // A resend of something already delivered (a hedge, or a resend after a break):
            // ignore it, but acknowledge its end again, as the first acknowledgement may be
            // on a connection that is gone.
            self.duplicate_bytes += ch.data.len() as u64;
            if ch.end {
                self.acks.insert(ch.irob);
            }
            return Ok(());
        }
        if ch.label.is_foreground() {
            self.last_foreground = Some(now);
        }
        if let Some(total) = self.peer_irobs {
            if ch.irob >= total {
                return Err(format!(
                    "IROB {} after the peer's goodbye ({} IROBs)",
                    ch.irob, total
                ));
            }
        }
        let end_off = ch.offset.saturating_add(ch.data.len() as u64);
        if end_off > self.config.max_irob_size {
            self.fail(Failure::IrobTooLarge {
                irob: ch.irob,
                limit: self.config.max_irob_size,
            });
            return Ok(());
        }
        if ch.irob >= self.acked.below.saturating_add(IROB_SPAN) {
            self.fail(Failure::IrobTooFar {
                irob: ch.irob,
                lowest_unacknowledged: self.acked.below,
                span: IROB_SPAN,
            });
            return Ok(());
        }
        if !self.incoming.contains_key(&ch.irob) {
            if self.incoming.len() >= self.config.max_pending_irobs {
                self.fail(Failure::TooManyPending(self.config.max_pending_irobs));
                return Ok(());
            }
            self.incoming.insert(
                ch.irob,
                InIrob {
                    label: ch.label,
                    deps: None,
                    segments: BTreeMap::new(),
                    have: RangeSet::new(),
                    end: None,
                    delivered: 0,
                    complete: false,
                    acked: false,
                    deps_delivered: false,
                },
            );
        }
        let id = ch.irob;
        let irob = self.incoming.get_mut(&id).unwrap();
        if irob.label != ch.label {
            return Err(format!(
                "IROB {} changed label from {} to {}",
                id, irob.label, ch.label
            ));
        }
        if ch.end {
            if let Some(e) = irob.end.filter(|&e| e != end_off) {
                return Err(format!("IROB {} ends at {} and at {}", id, e, end_off));
            }
        }
        let held_end = irob.have.last().map_or(0, |(_, e)| e).max(end_off);
        if irob
            .end
            .or(ch.end.then_some(end_off))
            .is_some_and(|e| held_end > e)
        {
            return Err(format!("IROB {} has bytes beyond its end", id));
        }
        if ch.end {
            irob.end = Some(end_off);
        }
        // The dependency list of the first chunk that carries one (a resend carries the same).
        let mut new_deps = None;
        if irob.deps.is_none() {
            if let Some(d) = ch.deps {
                self.in_book += deps_cost(&d);
                irob.deps = Some(d.clone());
                new_deps = Some(d);
            }
        }
        // Store only the bytes not already held (resends may overlap).
        let mut added = 0;
        let mut pieces = 0i64;
        for (s, e) in irob.have.gaps(ch.offset.max(irob.delivered), end_off) {
            let part = ch
                .data
                .slice((s - ch.offset) as usize..(e - ch.offset) as usize);
            pieces += store_piece(&mut irob.segments, s, part);
            irob.have.insert(s, e);
            added += e - s;
        }
        self.in_book = (self.in_book as i64 + pieces * PIECE_OVERHEAD as i64) as u64;
        self.in_buffered += added;
        self.duplicate_bytes += ch.data.len() as u64 - added;
        let became_complete = !irob.complete
            && irob.deps.is_some()
            && irob.end.is_some_and(|e| irob.have.contains(0, e));
        if let Some(d) = new_deps {
            if self.delivery_wait.wait(id, &d, &self.delivered) {
                self.incoming.get_mut(&id).unwrap().deps_delivered = true;
            }
        }
        if became_complete {
            let i = self.incoming.get_mut(&id).unwrap();
            i.complete = true;
            let deps = i.deps.clone().unwrap_or(Deps::AllEarlier);
            if self.ack_wait.wait(id, &deps, &self.acked) {
                self.acknowledge(id);
            }
        }
        self.update_ready(id);
        if added > 0 {
            self.flow_arrival(added, now);
        }
        let held = self.receive_held();
        if held > self.receive_limit() {
            self.fail(Failure::ReceiveLimit {
                held,
                limit: self.receive_limit(),
            });
        }
        Ok(())
    }

    /// Unacknowledged bytes held for the peer, as the receive limit counts them: payload and
    /// bookkeeping ([`PIECE_OVERHEAD`], [`DEP_OVERHEAD`]).
    pub(super) fn receive_held(&self) -> u64 {
        (self.in_buffered - self.acked_buffered) + (self.in_book - self.acked_book)
    }

    /// Most unacknowledged bytes a peer may make this side buffer (`Config::receive_limit`).
    pub(super) fn receive_limit(&self) -> u64 {
        self.config.receive_limit
    }

    /// Acknowledge complete IROB `id`, whose dependencies are acknowledged, and every IROB
    /// that was waiting only for it (and so on). Each IROB is touched once, when it is
    /// acknowledged, and once per dependency naming it: acknowledging only IROBs that are (or
    /// will be, once the application reads) deliverable keeps the peer's window a bound on
    /// what it can make us buffer.
    pub(super) fn acknowledge(&mut self, id: IrobId) {
        let mut work = vec![id];
        while let Some(id) = work.pop() {
            let Some(i) = self.incoming.get_mut(&id) else {
                continue;
            };
            if i.acked {
                continue;
            }
            i.acked = true;
            self.acked_buffered += i.have.len() - i.delivered.min(i.have.len());
            self.acked_book += i.bookkeeping();
            self.acked.insert(id);
            self.acks.insert(id);
            self.ack_wait.done(id, &self.acked, &mut work);
        }
    }

    /// Put IROB `id` among the IROBs the application may take now if it is one.
    fn update_ready(&mut self, id: IrobId) {
        if let Some(i) = self.incoming.get(&id) {
            if i.deps_delivered && i.takeable() {
                self.ready[i.label.rank()].insert(id);
            }
        }
    }

    /// Whether every dependency of IROB `id` (`deps`) has been delivered (checked the slow way,
    /// for `check_invariants`).
    pub(super) fn deps_delivered(&self, id: IrobId, deps: &Deps) -> bool {
        match deps {
            Deps::AllEarlier => self.delivered.below >= id,
            Deps::List(l) => l.iter().all(|&d| self.delivered.contains(d)),
        }
    }

    /// The next delivery for the application, if any IROB is ready; `now` times the read for
    /// flow control (the read rate, `flow`).
    pub fn recv(&mut self, now: Time) -> Option<Delivery> {
        let id = match self.current {
            Some(id) => id,
            None => Label::ALL
                .iter()
                .find_map(|l| self.ready[l.rank()].first().copied())?,
        };
        let i = self.incoming.get_mut(&id)?;
        let next = i.segments.first_key_value().map(|(&s, b)| (s, b.clone()));
        let (offset, data) = match next {
            Some((s, seg)) if s == i.delivered => {
                i.segments.remove(&s);
                self.in_book -= PIECE_OVERHEAD;
                if i.acked {
                    self.acked_book -= PIECE_OVERHEAD;
                }
                (s, seg)
            }
            _ if i.end == Some(i.delivered) => (i.delivered, Bytes::new()),
            _ => {
                self.current = Some(id);
                // Streaming a foreground IROB whose next bytes have not arrived: what is held
                // behind it is now credited (`flow`).
                self.flow_recheck(now);
                return None;
            }
        };
        let n = data.len() as u64;
        i.delivered += n;
        self.in_buffered -= n;
        if i.acked {
            self.acked_buffered -= n;
        }
        let end = i.end == Some(i.delivered);
        let label = i.label;
        self.flow_read(n, now);
        if end {
            let i = self.incoming.remove(&id).unwrap();
            let book = i.bookkeeping();
            self.in_book -= book;
            if i.acked {
                self.acked_book -= book;
            }
            self.ready[label.rank()].remove(&id);
            self.delivered.insert(id);
            self.current = None;
            let mut freed = Vec::new();
            self.delivery_wait.done(id, &self.delivered, &mut freed);
            for w in freed {
                if let Some(i) = self.incoming.get_mut(&w) {
                    i.deps_delivered = true;
                }
                self.update_ready(w);
            }
        } else {
            self.current = Some(id);
        }
        Some(Delivery {
            irob: id,
            label,
            offset,
            data,
            end,
        })
    }

    /// Whether [`Session::recv`] would return a delivery now.
    pub fn has_delivery(&self) -> bool {
        if let Some(id) = self.current {
            let Some(i) = self.incoming.get(&id) else {
                return false;
            };
            return i
                .segments
                .first_key_value()
                .is_some_and(|(&s, _)| s == i.delivered)
                || i.end == Some(i.delivered);
        }
        self.ready.iter().any(|r| !r.is_empty())
    }

    /// Counts the events that can make [`Session::recv`] return something it could not before
    /// (a data chunk or the peer's goodbye arriving, the session failing). A driver wakes a
    /// waiting receiver only when it changed, not on every change of the session. (A delivery
    /// can also free IROBs that depended on it; the thread that called `recv` looks again.)
    pub fn arrivals(&self) -> u64 {
        self.arrivals
    }

    /// Whether the peer said goodbye and every IROB it sent has been delivered.
    pub fn peer_finished(&self) -> bool {
        self.peer_irobs
            .is_some_and(|n| self.delivered.below >= n && self.incoming.is_empty())
    }

    /// Bytes received and held for the application (all IROBs).
    pub fn receive_buffered(&self) -> u64 {
        self.in_buffered
    }

    /// Bytes of bookkeeping the receiver counts for what it holds (all IROBs; see
    /// [`PIECE_OVERHEAD`] and [`DEP_OVERHEAD`]).
    pub fn receive_bookkeeping(&self) -> u64 {
        self.in_book
    }

    /// Whether the driver should stop reading from the network for now: without credit
    /// (`flow`), the application has more than a window of acknowledged bytes unread
    /// (payload and bookkeeping; back-pressure that cannot deadlock: they are deliverable once
    /// it reads; with credit the peer is told of the payload instead, and only the
    /// bookkeeping counts here, or half the pending IROBs' limit held), or more than
    /// [`MAX_PENDING_ACKS`] acknowledgements wait to be sent (the peer is not reading them,
    /// and every IROB it sends would add one more), or [`IROB_SPAN`] IROBs were delivered
    /// above one the application has not taken (it reads other labels first; once nothing
    /// new arrives it takes that one, which is acknowledged and so deliverable).
    pub fn receive_paused(&self) -> bool {
        let unread_past_bound = if self.credit_on() {
            // Credit counts payload; the bookkeeping of acknowledged IROBs (a piece each, and
            // their dependency lists) is bounded here, as without credit: a peer's one-byte
            // IROBs naming 1024 dependencies each would otherwise hold 8 KiB a byte. And
            // credit counts bytes, not IROBs: one-byte IROBs within a credit of 64 KiB would
            // reach the pending limit (and fail the multi-socket) before the credit ran out,
            // so acknowledged IROBs (a piece each, at least) pause reading at half of it.
            // Only acknowledged IROBs count: they are deliverable, so the pause cannot
            // deadlock, as one counting IROBs still waiting for bytes could.
            let half_pending = (self.config.max_pending_irobs as u64 / 2) * PIECE_OVERHEAD;
            self.acked_book > self.config.window || self.acked_book >= half_pending
        } else {
            self.acked_buffered + self.acked_book > self.config.window
        };
        unread_past_bound
            || self.acks.len() >= MAX_PENDING_ACKS
            || self.delivered.above.len() as u64 >= IROB_SPAN
    }

    /// Bytes of acknowledged IROBs the application has not read yet. A driver stops reading
    /// from its sockets while this exceeds the window (back-pressure that cannot deadlock:
    /// these bytes are deliverable once the application reads).
    pub fn receive_backlog(&self) -> u64 {
        self.acked_buffered
    }

    /// How many ids the receiver keeps above its low-water marks of acknowledged and of
    /// delivered IROBs (each below [`IROB_SPAN`]; for tests).
    pub fn done_ids_above(&self) -> (usize, usize) {
        (self.acked.above.len(), self.delivered.above.len())
    }

    /// The receiver's checks for [`Session::check_invariants`]: the bookkeeping counts, which
    /// IROBs are acknowledged, wait, or are ready.
    pub(super) fn check_receiver(&self) -> Result<(), String> {
        let (mut book, mut acked_book) = (0, 0);
        for (&id, i) in &self.incoming {
            book += i.bookkeeping();
            if i.acked {
                acked_book += i.bookkeeping();
            }
            if let Some(d) = &i.deps {
                let delivered = self.deps_delivered(id, d);
                if delivered != i.deps_delivered {
                    return Err(format!(
                        "IROB {id}: dependencies delivered {delivered}, recorded {}",
                        i.deps_delivered
                    ));
                }
                let deps_acked = match d {
                    Deps::AllEarlier => self.acked.below >= id,
                    Deps::List(l) => l.iter().all(|&x| self.acked.contains(x)),
                };
                if i.complete && deps_acked != i.acked {
                    return Err(format!(
                        "IROB {id}: complete, dependencies acknowledged {deps_acked}, itself {}",
                        i.acked
                    ));
                }
                if i.complete && !i.acked && !self.ack_wait.is_waiting(id) {
                    return Err(format!("IROB {id} is complete but waits for nothing"));
                }
            }
            let ready = i.deps_delivered && i.takeable();
            if ready != self.ready[i.label.rank()].contains(&id) {
                return Err(format!("IROB {id}: takeable {ready}, not so recorded"));
            }
        }
        if self
            .ready
            .iter()
            .flatten()
            .any(|id| !self.incoming.contains_key(id))
        {
            return Err("a ready IROB is not held".into());
        }
        for (what, kept, actual) in [
            ("bookkeeping held", self.in_book, book),
            ("acknowledged bookkeeping held", self.acked_book, acked_book),
        ] {
            if kept != actual {
                return Err(format!("{what}: counted {kept}, actually {actual}"));
            }
        }
        Ok(())
    }
}
