//! The sender's queue: IROBs the application begins, appends to and ends, kept until the peer
//! acknowledges them. Each label has a FIFO of sendable IROBs (`Session::sendable`); the
//! window (`Config::window`, the peer's announced receive window) bounds the bytes sent of
//! unacknowledged IROBs.

use std::collections::BTreeMap;

use bytes::Bytes;
use roam_core::Time;

use super::*;
use crate::proto::label::Label;
use crate::proto::ranges::RangeSet;
use crate::proto::wire::Deps;

#[derive(Debug)]
pub(super) struct OutIrob {
    pub(super) label: Label,
    pub(super) deps: Deps,
    pub(super) segments: BTreeMap<u64, Bytes>,
    pub(super) len: u64,
    pub(super) ended: bool,
    pub(super) pending: RangeSet,
    pub(super) need_first: bool,
    pub(super) need_end: bool,
    /// (connection, start, end, carried first, carried end)
    pub(super) inflight: Vec<(ConnId, u64, u64, bool, bool)>,
    pub(super) pinned: Option<ConnId>,
    pub(super) started: bool,
    /// The end of the highest byte range handed to a connection: bytes below it were sent (and
    /// count against the peer's window until the IROB is acknowledged), bytes at or above it
    /// are new.
    pub(super) sent_hi: u64,
    /// When a chunk of it was last handed to a connection (or it was last asked about).
    pub(super) last_sent: Time,
    /// Already sent again over a second network (`Session::hedge_late_foreground`).
    pub(super) hedged: bool,
    /// Placed by Meatballs ([`Config::redundancy`]): where and when, what was predicted.
    pub(super) selected: Option<super::selection::Selected>,
}

impl OutIrob {
    pub(super) fn has_work(&self) -> bool {
        !self.pending.is_empty() || self.need_first || (self.need_end && self.ended)
    }

    /// Every byte and the end have been handed to connections: only an acknowledgement is
    /// awaited.
    pub(super) fn sent_whole(&self) -> bool {
        self.started && self.ended && !self.has_work()
    }

    /// Mark every byte, the first chunk and the end to be sent again (a hedge, or a small
    /// foreground IROB lost with its connection); the caller makes it sendable. Returns how
    /// many bytes became unsent (for `Session::unsent`).
    #[must_use]
    pub(super) fn send_whole_again(&mut self) -> u64 {
        let added = self.len - self.pending.len();
        self.pending = RangeSet::new();
        self.pending.insert(0, self.len);
        self.need_first = true;
        self.need_end = true;
        added
    }

    /// The bytes `[start, end)` (one slice when a single segment covers them).
    pub(super) fn slice(&self, start: u64, end: u64) -> Bytes {
        let (&s0, seg) = self
            .segments
            .range(..=start)
            .next_back()
            .expect("range within data");
        let off = (start - s0) as usize;
        if (end - s0) as usize <= seg.len() {
            return seg.slice(off..(end - s0) as usize);
        }
        let mut out = Vec::with_capacity((end - start) as usize);
        for (&s, seg) in self.segments.range(s0..end) {
            let a = start.max(s) - s;
            let b = (end - s).min(seg.len() as u64);
            out.extend_from_slice(&seg[a as usize..b as usize]);
        }
        Bytes::from(out)
    }
}

impl Session {
    /// Begin an IROB. With a thunk, a label that cannot be sent now returns
    /// [`SendError::Deferred`] and the thunk fires (via [`Event::ThunkReady`]) when it can.
    pub fn begin_irob(
        &mut self,
        label: Label,
        deps: Deps,
        thunk: Option<ThunkId>,
        now: Time,
    ) -> Result<IrobId, SendError> {
        if let Some(f) = &self.failed {
            return Err(SendError::Failed(f.clone()));
        }
        if self.closing {
            return Err(SendError::Closing);
        }
        let id = self.next_irob;
        if let Deps::List(list) = &deps {
            if list.len() > self.config.max_deps {
                return Err(SendError::TooManyDeps(list.len(), self.config.max_deps));
            }
            if let Some(&bad) = list.iter().find(|&&d| d >= id) {
                return Err(SendError::BadDependency { irob: id, dep: bad });
            }
        }
        if !self.can_send(label) {
            return Err(match thunk {
                Some(t) => {
                    self.deferred[label.rank()].push(t);
                    SendError::Deferred(label)
                }
                None => SendError::WouldBlock(label),
            });
        }
        self.next_irob += 1;
        let deps = match deps {
            Deps::List(mut l) => {
                l.sort_unstable();
                l.dedup();
                Deps::List(l)
            }
            d => d,
        };
        self.out.insert(
            id,
            OutIrob {
                label,
                deps,
                segments: BTreeMap::new(),
                len: 0,
                ended: false,
                pending: RangeSet::new(),
                need_first: true,
                need_end: true,
                inflight: Vec::new(),
                pinned: None,
                started: false,
                sent_hi: 0,
                last_sent: now,
                hedged: false,
                selected: None,
            },
        );
        self.sendable[label.rank()].insert(id);
        if label.is_foreground() {
            self.last_foreground = Some(now);
        }
        self.maybe_open(now);
        Ok(id)
    }

    /// Append bytes to an open IROB. Sending starts before `end_irob`.
    pub fn irob_send(&mut self, id: IrobId, data: Bytes) -> Result<(), SendError> {
        if let Some(f) = &self.failed {
            return Err(SendError::Failed(f.clone()));
        }
        let max = self.config.max_irob_size;
        let irob = self
            .out
            .get_mut(&id)
            .filter(|o| !o.ended)
            .ok_or(SendError::NotOpen(id))?;
        if irob.len + data.len() as u64 > max {
            return Err(SendError::TooLarge(id, max));
        }
        if data.is_empty() {
            return Ok(());
        }
        let start = irob.len;
        irob.len += data.len() as u64;
        irob.pending.insert(start, irob.len);
        self.unsent[irob.label.rank()] += irob.len - start;
        irob.segments.insert(start, data);
        self.buffered += irob.len - start;
        self.sendable[irob.label.rank()].insert(id);
        Ok(())
    }

    /// End an IROB: no more bytes will be added.
    pub fn end_irob(&mut self, id: IrobId) -> Result<(), SendError> {
        let irob = self
            .out
            .get_mut(&id)
            .filter(|o| !o.ended)
            .ok_or(SendError::NotOpen(id))?;
        irob.ended = true;
        self.sendable[irob.label.rank()].insert(id);
        Ok(())
    }

    /// `send`: one IROB depending on every earlier IROB ("TCP with labels").
    pub fn send(
        &mut self,
        label: Label,
        data: Bytes,
        thunk: Option<ThunkId>,
        now: Time,
    ) -> Result<IrobId, SendError> {
        if data.len() as u64 > self.config.max_irob_size {
            return Err(SendError::TooLarge(
                self.next_irob,
                self.config.max_irob_size,
            ));
        }
        let id = self.begin_irob(label, Deps::AllEarlier, thunk, now)?;
        self.irob_send(id, data)?;
        self.end_irob(id)?;
        Ok(id)
    }
}
