//! Deferral (paper §3.3): a send whose label no appropriate network can carry now, or whose
//! label already has more than its policy's `backlog_bound` of unsent data queued, is refused; with
//! a thunk, the thunk fires (an [`Event::ThunkReady`]) once the label can be sent, so the
//! application re-decides what to send with what it knows then.

use std::collections::BTreeSet;

use roam_core::Time;

use super::*;
use crate::proto::label::Label;
use crate::proto::wire::Frame;

impl Session {
    /// Whether `label` may be sent over network `net` under the deferral policy (and its
    /// [`NetworkChoice`]).
    pub(super) fn appropriate(&self, label: Label, net: &Network) -> bool {
        let policy = self.config.policy(label);
        (!net.kind.metered || policy.metered)
            && (policy.networks != NetworkChoice::CellularOnly || net.kind.cellular)
    }

    /// The networks with an established connection.
    pub(super) fn established_networks(&self) -> BTreeSet<NetId> {
        self.conns
            .values()
            .filter(|c| c.state == ConnState::Established)
            .map(|c| c.net)
            .collect()
    }

    pub(super) fn usable_networks(&self, label: Label) -> Vec<NetId> {
        let established = self.established_networks();
        self.networks
            .iter()
            .filter(|(id, n)| established.contains(id) && self.appropriate(label, n))
            .map(|(&id, _)| id)
            .collect()
    }

    /// Bytes of `label` not yet handed to a connection (kept as a count: summing the sendable
    /// IROBs on every send made a burst of small sends quadratic).
    pub(super) fn backlog(&self, label: Label) -> u64 {
        self.unsent[label.rank()]
    }

    /// Whether a send with `label` would be accepted now (the deferral policy's test).
    pub fn can_send(&self, label: Label) -> bool {
        if self.failed.is_some() || self.closing {
            return true; // the call will report the closure
        }
        if self.buffered >= self.config.max_send_buffer {
            return false;
        }
        if !self.established {
            return true; // queue until the first handshake completes
        }
        let nets = self.usable_networks(label);
        if nets.is_empty() {
            return false;
        }
        let bw: f64 = nets
            .iter()
            .map(|n| {
                self.networks[n]
                    .estimate
                    .bandwidth()
                    .map_or(1e6, |b| b.as_bps() as f64)
            })
            .sum();
        let bound =
            ((bw / 8.0) * self.config.policy(label).backlog_bound.as_secs_f64()).max(64.0 * 1024.0);
        (self.backlog(label) as f64) <= bound
    }

    /// Cancel a deferred thunk (e.g. a newer periodic update made it obsolete). Returns whether
    /// it was still pending.
    pub fn cancel_thunk(&mut self, thunk: ThunkId) -> bool {
        for l in &mut self.deferred {
            if let Some(i) = l.iter().position(|&t| t == thunk) {
                l.remove(i);
                return true;
            }
        }
        false
    }

    pub(super) fn check_thunks(&mut self, now: Time) {
        if let Some(since) = self.all_down_since {
            if self.failed.is_none() && now.saturating_since(since) >= self.config.failure_timeout {
                self.fail(Failure::NoNetwork(self.config.failure_timeout));
            }
        }
        for label in Label::ALL {
            if !self.deferred[label.rank()].is_empty() && self.can_send(label) {
                for t in std::mem::take(&mut self.deferred[label.rank()]) {
                    self.events.push_back(Event::ThunkReady(t));
                }
            }
        }
        // Ask about IROBs in doubt over any established connection.
        let ask: Vec<IrobId> = self
            .doubt
            .iter()
            .filter(|id| !self.requested.contains_key(id))
            .copied()
            .collect();
        if !ask.is_empty() {
            if let Some((&cid, _)) = self
                .conns
                .iter()
                .find(|(_, c)| c.state == ConnState::Established)
            {
                for chunk in ask.chunks(self.config.wire.max_list) {
                    self.conns
                        .get_mut(&cid)
                        .unwrap()
                        .control
                        .push(Frame::ResendRequest {
                            irobs: chunk.to_vec(),
                        });
                }
                for id in ask {
                    self.requested.insert(id, (cid, now));
                }
            }
        }
    }
}
