//! The receiver: chunks from every connection are reassembled per IROB; an IROB is delivered
//! only after its dependencies, one at a time, higher labels first (only foreground IROBs are
//! streamed before they are complete). An IROB is acknowledged once it is complete and its
//! dependencies are acknowledged, so the peer's window bounds what it can make this side
//! buffer; beyond the receive limit the peer is failed.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use roam_core::Time;

use super::*;

/// Most acknowledgements queued unsent before the driver stops reading
/// ([`Session::receive_paused`]).
pub const MAX_PENDING_ACKS: usize = 1 << 16;
use crate::proto::label::Label;
use crate::proto::ranges::RangeSet;
use crate::proto::wire::{Chunk, Deps};

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
}

/// Ids below a watermark plus a set above it: a compact record of "done" IROBs.
#[derive(Debug, Default, Clone)]
pub(super) struct IdSet {
    pub(super) below: u64,
    pub(super) above: BTreeSet<u64>,
}

impl IdSet {
    pub(super) fn contains(&self, id: u64) -> bool {
        id < self.below || self.above.contains(&id)
    }
    pub(super) fn insert(&mut self, id: u64) {
        if id < self.below {
            return;
        }
        self.above.insert(id);
        while self.above.remove(&self.below) {
            self.below += 1;
        }
    }
}

impl Session {
    pub(super) fn on_chunk(&mut self, ch: Chunk, now: Time) -> Result<(), String> {
        self.arrivals += 1;
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
        let end_off = ch.offset + ch.data.len() as u64;
        if end_off > self.config.max_irob_size {
            self.fail(Failure::IrobTooLarge {
                irob: ch.irob,
                limit: self.config.max_irob_size,
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
                },
            );
            self.by_label[ch.label.rank()].insert(ch.irob);
        }
        let irob = self.incoming.get_mut(&ch.irob).unwrap();
        if irob.label != ch.label {
            return Err(format!(
                "IROB {} changed label from {} to {}",
                ch.irob, irob.label, ch.label
            ));
        }
        if let Some(d) = ch.deps {
            irob.deps = Some(d);
        }
        if ch.end {
            if let Some(e) = irob.end.filter(|&e| e != end_off) {
                return Err(format!("IROB {} ends at {} and at {}", ch.irob, e, end_off));
            }
            irob.end = Some(end_off);
        }
        let held_end = irob.have.last().map_or(0, |(_, e)| e).max(end_off);
        if irob.end.is_some_and(|e| held_end > e) {
            return Err(format!("IROB {} has bytes beyond its end", ch.irob));
        }
        // Store only the bytes not already held (resends may overlap).
        let mut added = 0;
        for (s, e) in irob.have.gaps(ch.offset.max(irob.delivered), end_off) {
            let part = ch
                .data
                .slice((s - ch.offset) as usize..(e - ch.offset) as usize);
            irob.segments.insert(s, part);
            irob.have.insert(s, e);
            added += e - s;
        }
        self.in_buffered += added;
        self.duplicate_bytes += ch.data.len() as u64 - added;
        let became_complete = !irob.complete
            && irob.deps.is_some()
            && irob.end.is_some_and(|e| irob.have.contains(0, e));
        if became_complete {
            irob.complete = true;
            self.unacked_complete.insert(ch.irob);
            self.try_ack();
        }
        let unacked = self.in_buffered - self.acked_buffered;
        if unacked > self.receive_limit() {
            self.fail(Failure::ReceiveLimit {
                held: unacked,
                limit: self.receive_limit(),
            });
        }
        Ok(())
    }

    /// Most unacknowledged bytes a peer may make this side buffer (`Config::receive_limit`).
    pub(super) fn receive_limit(&self) -> u64 {
        self.config.receive_limit
    }

    /// Acknowledge every complete IROB whose dependencies are acknowledged. Ids of dependencies
    /// are lower, so one ascending pass settles chains. Acknowledging only IROBs that are (or
    /// will be, once the application reads) deliverable keeps the peer's window a bound on
    /// what it can make us buffer.
    pub(super) fn try_ack(&mut self) {
        let ids: Vec<IrobId> = self.unacked_complete.iter().copied().collect();
        for id in ids {
            let i = &self.incoming[&id];
            let ok = match i.deps.as_ref().unwrap() {
                Deps::AllEarlier => self.acked.below >= id,
                Deps::List(l) => l.iter().all(|&d| self.acked.contains(d)),
            };
            if ok {
                let i = self.incoming.get_mut(&id).unwrap();
                i.acked = true;
                self.acked_buffered += i.have.len() - i.delivered.min(i.have.len());
                self.unacked_complete.remove(&id);
                self.acked.insert(id);
                self.acks.insert(id);
            }
        }
    }

    pub(super) fn deps_delivered(&self, id: IrobId, deps: &Deps) -> bool {
        match deps {
            Deps::AllEarlier => self.delivered.below >= id,
            Deps::List(l) => l.iter().all(|&d| self.delivered.contains(d)),
        }
    }

    /// The next delivery for the application, if any IROB is ready.
    pub fn recv(&mut self) -> Option<Delivery> {
        let id = match self.current {
            Some(id) => id,
            None => {
                let mut pick = None;
                'labels: for label in Label::ALL {
                    for &id in &self.by_label[label.rank()] {
                        let i = &self.incoming[&id];
                        let Some(deps) = &i.deps else { continue };
                        let ready = i.complete || (label.is_foreground() && i.have.prefix() > 0);
                        if ready && self.deps_delivered(id, deps) {
                            pick = Some(id);
                            break 'labels;
                        }
                    }
                }
                pick?
            }
        };
        let i = self.incoming.get_mut(&id).unwrap();
        let next = i.segments.first_key_value().map(|(&s, b)| (s, b.clone()));
        let (offset, data) = match next {
            Some((s, seg)) if s == i.delivered => {
                i.segments.remove(&s);
                (s, seg)
            }
            _ if i.end == Some(i.delivered) => (i.delivered, Bytes::new()),
            _ => {
                self.current = Some(id);
                return None; // streaming a foreground IROB whose next bytes have not arrived
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
        if end {
            self.incoming.remove(&id);
            self.by_label[label.rank()].remove(&id);
            self.delivered.insert(id);
            self.current = None;
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
            let i = &self.incoming[&id];
            return i
                .segments
                .first_key_value()
                .is_some_and(|(&s, _)| s == i.delivered)
                || i.end == Some(i.delivered);
        }
        Label::ALL.iter().any(|l| {
            self.by_label[l.rank()].iter().any(|id| {
                let i = &self.incoming[id];
                i.deps.as_ref().is_some_and(|d| {
                    (i.complete || (l.is_foreground() && i.have.prefix() > 0))
                        && self.deps_delivered(*id, d)
                })
            })
        })
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

    /// Whether the driver should stop reading from the network for now: the application has
    /// more than a window of acknowledged bytes unread (back-pressure that cannot deadlock:
    /// they are deliverable once it reads), or more than [`MAX_PENDING_ACKS`]
    /// acknowledgements wait to be sent (the peer is not reading them, and every IROB it sends
    /// would add one more).
    pub fn receive_paused(&self) -> bool {
        self.acked_buffered > self.config.window || self.acks.len() >= MAX_PENDING_ACKS
    }

    /// Bytes of acknowledged IROBs the application has not read yet. A driver stops reading
    /// from its sockets while this exceeds the window (back-pressure that cannot deadlock:
    /// these bytes are deliverable once the application reads).
    pub fn receive_backlog(&self) -> u64 {
        self.acked_buffered
    }
}
