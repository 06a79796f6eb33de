//! [`Sender`]: how many new bytes this side may send (the sending half of flow control).
//!
//! New bytes (payload sent for the first time; resends are not new) go while the bytes sent
//! so far stay within the peer's limit, plus, with AFC, its read rate times the round trip:
//! `W_fc = B_adv + AR * RTT` (Sanadhya thesis ch. III, Algorithm 4), only when the round trip
//! is known, and never more than the feed-forward the peer allowed. The congestion allowance
//! is kernel TCP's, beneath: roam writes into the socket and TCP sends within its window, so
//! `min(cwnd, W_fc)` holds without roam reading cwnd.
//!
//! **Burst control** (§3.4.3): when a credit opens a blocked sender's allowance by more than
//! `pacing_threshold` bytes, the allowance is released over the next round trip (at the
//! allowance over the RTT, after a first `pacing_threshold` bytes at once), not all at once: a sender that waited on a slow reader would otherwise hand the kernel a
//! whole window in one write, which leaves as a line-rate burst into the bottleneck's queue.
//!
//! **What the thesis's overflow handling becomes over TCP.** The thesis's receiver drops data
//! beyond its buffer (and acknowledges it), and its sender probes a zero window and, on
//! reopening, rewinds `snd_nxt` and ignores duplicate ACKs older than `ts_recover`. Over TCP none
//! of that has a counterpart: TCP has delivered the bytes, so dropping them would only waste
//! the link and force a resend; a feed-forward overshoot is held and counted, within the bound
//! the receiver enforces (`Receiver::bound`). Credits are reliable (TCP) and sent on every read
//! that matters, so no zero-window probe is needed; the one loss, a credit on a connection that
//! breaks, is sent again on another (`Session::connection_closed`). Flow control never causes
//! loss here, so there is no congestion signal to suppress.

use std::time::Duration;

use roam_core::Time;

/// Credit as the sender sees it, with what was sent against it and how long it waited.
#[derive(Clone, Debug, Default)]
pub struct Sender {
    /// The peer grants credit (both sides announced it); otherwise no limit applies here.
    honoured: bool,
    /// The peer's read rate is added (both sides announced it).
    feed_forward: bool,
    limit: u64,
    /// The peer's read rate, bytes a second.
    rate: u64,
    /// The most the peer allows for the rate.
    cap: u64,
    /// Payload bytes sent for the first time, in all.
    sent: u64,
    blocked_since: Option<Time>,
    pacing: Option<Pacing>,
}

/// A pacing episode after a large opening: `rate` bytes a second until `until`, starting with
/// `tokens` bytes.
#[derive(Clone, Copy, Debug)]
struct Pacing {
    rate: f64,
    tokens: f64,
    last: Time,
    until: Time,
}

impl Pacing {
    fn tokens(&self, now: Time) -> f64 {
        self.tokens + self.rate * now.saturating_since(self.last).as_secs_f64()
    }
}

/// What the sender did with a credit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CreditTaken {
    /// Taken as it came.
    Taken,
    /// Its limit was below one already taken (credit never shrinks): ignored.
    Stale,
}

impl Sender {
    /// A sender bound by the peer's credit (`credit`), adding its read rate (`feed_forward`).
    pub fn new(credit: bool, feed_forward: bool) -> Sender {
        Sender {
            honoured: credit,
            feed_forward: credit && feed_forward,
            ..Sender::default()
        }
    }

    /// A credit arrived at `now`: `limit`, with the peer's read rate (already clamped) and
    /// feed-forward cap. `rtt` and `threshold` decide whether the opening is paced. Returns
    /// how long the sender had been blocked, if this credit unblocked it.
    #[allow(clippy::too_many_arguments)]
    pub fn on_credit(
        &mut self,
        limit: u64,
        rate: u64,
        cap: u64,
        proactive: bool,
        rtt: Option<Duration>,
        threshold: u64,
        now: Time,
    ) -> (CreditTaken, Option<Duration>) {
        if limit < self.limit {
            return (CreditTaken::Stale, None);
        }
        let before = self.allowance(rtt);
        // A credit that repeats the limit and is not proactive may be an older one overtaken
        // on another connection: its rate is not newer than the one held.
        let newer = limit > self.limit || proactive || self.limit == 0;
        self.limit = limit;
        if self.feed_forward && newer {
            self.rate = rate;
            self.cap = cap;
        }
        let after = self.allowance(rtt);
        let mut waited = None;
        if after > 0 {
            if let Some(since) = self.blocked_since.take() {
                waited = Some(now.saturating_since(since));
                if let Some(rtt) = rtt.filter(|r| !r.is_zero()) {
                    if after.saturating_sub(before) > threshold {
                        self.pacing = Some(Pacing {
                            rate: after as f64 / rtt.as_secs_f64(),
                            tokens: threshold as f64,
                            last: now,
                            until: now + rtt,
                        });
                    }
                }
            }
        }
        (CreditTaken::Taken, waited)
    }

    /// The feed-forward now: the peer's read rate times `rtt`, within its cap (0 without a
    /// round trip, or without AFC).
    fn ahead(&self, rtt: Option<Duration>) -> u64 {
        match rtt {
            Some(rtt) if self.feed_forward && !rtt.is_zero() => {
                ((self.rate as f64 * rtt.as_secs_f64()) as u64).min(self.cap)
            }
            _ => 0,
        }
    }

    /// New bytes the credit allows: `limit + AR * RTT - sent`.
    pub fn allowance(&self, rtt: Option<Duration>) -> u64 {
        self.limit
            .saturating_add(self.ahead(rtt))
            .saturating_sub(self.sent)
    }

    /// New bytes that may go now: the allowance, within the pacer's tokens while it paces;
    /// `u64::MAX` when the peer grants no credit.
    pub fn room(&mut self, rtt: Option<Duration>, now: Time) -> u64 {
        if !self.honoured {
            return u64::MAX;
        }
        let allowance = self.allowance(rtt);
        if let Some(p) = self.pacing {
            if now >= p.until {
                self.pacing = None;
            } else {
                return allowance.min(p.tokens(now) as u64);
            }
        }
        allowance
    }

    /// `bytes` new bytes went out at `now`.
    pub fn on_sent(&mut self, bytes: u64, now: Time) {
        self.sent = self.sent.saturating_add(bytes);
        if let Some(p) = &mut self.pacing {
            p.tokens = (p.tokens(now) - bytes as f64).max(0.0);
            p.last = now;
        }
    }

    /// New bytes waited at `now` for credit (the allowance is spent). Returns whether this
    /// starts a wait.
    pub fn on_blocked(&mut self, rtt: Option<Duration>, now: Time) -> bool {
        if self.allowance(rtt) > 0 || self.blocked_since.is_some() {
            return false;
        }
        self.blocked_since = Some(now);
        self.pacing = None;
        true
    }

    /// When the pacer will allow `want` bytes it does not allow now, while it paces (`None`
    /// when the tokens are there already: the pacer holds nothing back then).
    pub fn next_release(&self, want: u64) -> Option<Time> {
        let p = self.pacing?;
        let short = want as f64 - p.tokens;
        if short <= 0.0 {
            return None;
        }
        if p.rate <= 0.0 {
            return Some(p.until);
        }
        let at = p.last + Duration::from_secs_f64(short / p.rate);
        Some(at.min(p.until))
    }

    /// At a timeout: end a pacing episode whose round trip is over, and bring the tokens up
    /// to `now`, so that [`Sender::next_release`] is never in the past while the pacer holds
    /// nothing back (a writer blocked for another reason would otherwise be woken at once,
    /// again and again).
    pub fn expire_pacing(&mut self, now: Time) {
        match &mut self.pacing {
            Some(p) if now >= p.until => self.pacing = None,
            Some(p) => {
                p.tokens = p.tokens(now);
                p.last = now;
            }
            None => {}
        }
    }

    /// Payload bytes sent for the first time, in all.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// The peer's read rate, bytes a second (0 without AFC).
    pub fn peer_rate(&self) -> u64 {
        self.rate
    }
}
