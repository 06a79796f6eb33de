//! [`Receiver`]: which credit this side grants, and when (the receiving half of flow control).
//!
//! **What credit counts.** The peer may have sent `limit` payload bytes for the first time, in
//! all. This side grants `limit = credited + window`, where `credited` is the bytes its
//! application has read plus the bytes it holds that the application cannot take now: those of
//! IROBs it has not acknowledged yet, which cannot be delivered until more of them arrives (or
//! their dependencies do), and while the application waits in the middle of a foreground IROB
//! for its next bytes, everything held behind that IROB (`Session::unacked_held`). The receive
//! limit bounds both (`Config::receive_limit`), and crediting them is what keeps a background
//! IROB larger than the window, delivered only when complete, or a foreground stream whose
//! writer is slow, from deadlocking. So credit bounds exactly the bytes the application could read and has not:
//! what the driver's pause bounded before (`Session::receive_paused`), now told to the sender
//! instead of imposed on kernel TCP beneath it.
//!
//! **When.** As QUIC stacks do: a new limit once an eighth of the window has been taken since
//! the last (quinn's threshold, [`UPDATE_EVERY`]; quiche's is half), after a read or an
//! arrival. With [`Memory::Auto`] the window grows by quiche's rule (`flowcontrol.rs`,
//! `autotune_window`): half a window taken within two round trips doubles it, up to the
//! maximum; it also never stays below the path's estimated bandwidth-delay product
//! (the thesis's `min(network rate, application rate) * RTT` with the application's rate not
//! yet known). Linux's equivalent is `tcp_rcv_space_adjust` (twice the bytes copied per round
//! trip, capped by `tcp_rmem[2]`); quinn keeps windows fixed.
//!
//! **AFC** (Sanadhya thesis ch. III §3.4): the read rate ([`ReadRate`]) goes with every credit,
//! with the most the sender may add for it (`max_feed_forward`), and a credit goes out
//! proactively when the rate moves beyond `upper` or `lower` times the rate last announced
//! (the spec's separate factors: the thesis's printed condition, `smooth > f * last || smooth <
//! f * last`, holds whenever the rate changes at all). The receiver-only variant folds
//! `AR * RTT` into the limit itself, so a sender that knows nothing of read rates benefits.

use std::time::Duration;

use roam_core::Time;

use super::rate::ReadRate;
use super::{FlowConfig, Memory};

/// A round trip shorter than this (or not known yet) is taken as this long by the window's
/// autotuning: a runtime's credit loop includes two thread wake-ups that TCP's RTT does not
/// see, and with a loopback's microseconds the doubling rule would refuse windows a transfer
/// outruns.
pub const MIN_AUTOTUNE_RTT: Duration = Duration::from_millis(1);

/// A new limit goes out once the application has taken an eighth of the window since the
/// last (quinn's rule; quiche waits for half): the sender hears of a read within about an
/// eighth of a window, as TCP's acknowledgements tell it of every segment read.
pub const UPDATE_EVERY: u64 = 8;

/// How the receiver grants credit, once both sides announced credit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxMode {
    /// Window updates as the application reads (TCP, QUIC).
    Standard,
    /// Standard, with the read rate carried to the sender and proactive updates (AFC).
    Afc,
    /// The feed-forward folded into the limit (AFC for a sender that lacks it).
    Fold,
}

/// One credit to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    /// Payload bytes the peer may have sent for the first time, in all.
    pub limit: u64,
    /// The read rate, bytes a second (0 = none).
    pub rate: u64,
    /// The most the peer may add to `limit` for the rate, in bytes.
    pub feed_forward: u64,
    /// Sent because the read rate moved.
    pub proactive: bool,
}

/// A peer sent more than its credit allowed: `received` payload bytes against a `bound` of
/// the limit plus the feed-forward granted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exceeded {
    /// Payload bytes received for the first time, in all.
    pub received: u64,
    /// The most the credit allowed.
    pub bound: u64,
}

/// What the receiver knows of the path when it decides (from the session's estimates).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathView {
    /// The round trip flow control plans for (the longest smoothed RTT of the established
    /// connections, as this side's kernel measured it).
    pub rtt: Option<Duration>,
    /// The estimated bandwidth-delay product of the networks, bytes.
    pub bdp: u64,
}

/// The receiving half's state.
#[derive(Clone, Debug)]
pub struct Receiver {
    mode: RxMode,
    memory: Memory,
    upper: f64,
    lower: f64,
    max_feed_forward: u64,
    window: u64,
    /// The highest limit granted (sent or about to be).
    limit: u64,
    /// The feed-forward allowed with it.
    feed_forward: u64,
    rate: ReadRate,
    /// The rate the last credit announced, bytes a second.
    rate_sent: f64,
    /// When the window was last considered for growth, and what was credited then.
    tuned: Option<(Time, u64)>,
    pending: Option<Grant>,
    /// Payload bytes received for the first time, in all.
    received: u64,
    /// Bytes the application has read, in all.
    consumed: u64,
}

impl Receiver {
    /// A receiver granting in `mode` with `config`'s memory and factors.
    pub fn new(mode: RxMode, config: &FlowConfig) -> Receiver {
        let window = match config.memory {
            Memory::Fixed(b) => b,
            Memory::Auto { initial, max } => initial.min(max),
        }
        .max(1);
        Receiver {
            mode,
            memory: config.memory,
            upper: config.upper,
            lower: config.lower,
            max_feed_forward: config.max_feed_forward,
            window,
            limit: 0,
            feed_forward: 0,
            rate: ReadRate::new(config.history, config.min_sample_interval),
            rate_sent: 0.0,
            tuned: None,
            pending: None,
            received: 0,
            consumed: 0,
        }
    }

    /// The first credit, at the handshake: a window's worth.
    pub fn open(&mut self, unacked: u64, path: PathView) {
        self.grant(unacked, path, false);
    }

    /// `bytes` new payload bytes arrived at `now`; the application could read `unread` bytes
    /// now, and this side holds `unacked` bytes of IROBs it has not acknowledged. Refused,
    /// with what was received and the bound, when the peer sent beyond the credit it had.
    pub fn on_arrival(
        &mut self,
        bytes: u64,
        unread: u64,
        unacked: u64,
        path: PathView,
        now: Time,
    ) -> Result<(), Exceeded> {
        self.received = self.received.saturating_add(bytes);
        if self.received > self.bound() {
            return Err(Exceeded {
                received: self.received,
                bound: self.bound(),
            });
        }
        let sampled = self.rate.on_arrival(unread, now);
        self.decide(sampled, unacked, path, now);
        Ok(())
    }

    /// The application read `bytes` at `now`.
    pub fn on_read(&mut self, bytes: u64, unacked: u64, path: PathView, now: Time) {
        self.consumed = self.consumed.saturating_add(bytes);
        let sampled = self.rate.on_read(bytes, now);
        self.decide(sampled, unacked, path, now);
    }

    /// Nothing was read and nothing arrived, but what the application cannot take changed
    /// (`unacked`): a new credit if the open credit is low.
    pub fn recheck(&mut self, unacked: u64, path: PathView, now: Time) {
        self.decide(false, unacked, path, now);
    }

    /// A new credit when the rate moved (AFC), or when the open credit runs low.
    fn decide(&mut self, sampled: bool, unacked: u64, path: PathView, now: Time) {
        if sampled && self.mode != RxMode::Standard && self.rate_moved() {
            self.grant(unacked, path, true);
        }
        let credited = self.consumed.saturating_add(unacked);
        let open = self.limit.saturating_sub(credited);
        if open < self.window - self.window / UPDATE_EVERY || open == 0 {
            self.autotune(credited, path, now);
            self.grant(unacked, path, false);
        }
    }

    /// Whether the read rate is beyond `upper` or `lower` times the rate last announced.
    fn rate_moved(&self) -> bool {
        let r = self.rate.bytes_per_sec();
        if self.rate_sent == 0.0 {
            return r > 0.0;
        }
        r > self.upper * self.rate_sent || r < self.lower * self.rate_sent
    }

    /// quiche's autotuning (half a window taken within two round trips doubles the window;
    /// quiche updates at each half window, and so decides there) and the bandwidth-delay
    /// floor; fixed memory stays as it is.
    fn autotune(&mut self, credited: u64, path: PathView, now: Time) {
        let Memory::Auto { max, .. } = self.memory else {
            return;
        };
        match self.tuned {
            None => self.tuned = Some((now, credited)),
            Some((at, from)) if credited.saturating_sub(from) >= self.window / 2 => {
                // No round trip known yet (no TCP_INFO sample, no estimate): the floor.
                let rtt = path.rtt.unwrap_or_default().max(MIN_AUTOTUNE_RTT);
                if now.saturating_since(at) < 2 * rtt {
                    self.window = self.window.saturating_mul(2).min(max);
                }
                self.tuned = Some((now, credited));
            }
            Some(_) => {}
        }
        self.window = self.window.max(path.bdp.min(max));
    }

    /// Queue a credit of `credited + window` (and, folding, the feed-forward), replacing one
    /// not sent yet. Limits never go down.
    fn grant(&mut self, unacked: u64, path: PathView, proactive: bool) {
        let rate = self.rate.bytes_per_sec();
        let ahead = match path.rtt {
            Some(rtt) if self.mode == RxMode::Fold => {
                ((rate * rtt.as_secs_f64()) as u64).min(self.max_feed_forward)
            }
            _ => 0,
        };
        let limit = self
            .consumed
            .saturating_add(unacked)
            .saturating_add(self.window)
            .saturating_add(ahead);
        self.limit = self.limit.max(limit);
        let (rate_out, feed_forward) = match self.mode {
            RxMode::Afc => (rate as u64, self.max_feed_forward),
            RxMode::Standard | RxMode::Fold => (0, 0),
        };
        self.feed_forward = self.feed_forward.max(feed_forward);
        if self.mode != RxMode::Standard {
            self.rate_sent = rate;
        }
        let proactive = proactive || self.pending.is_some_and(|p| p.proactive);
        self.pending = Some(Grant {
            limit: self.limit,
            rate: rate_out,
            feed_forward,
            proactive,
        });
    }

    /// The credit to send, if one is due.
    pub fn take(&mut self) -> Option<Grant> {
        self.pending.take()
    }

    /// Whether a credit waits to be sent.
    pub fn is_pending(&self) -> bool {
        self.pending.is_some()
    }

    /// The credit last granted, to send again (its connection broke).
    pub fn again(&mut self) {
        if self.pending.is_none() && self.limit > 0 {
            self.pending = Some(Grant {
                limit: self.limit,
                rate: if self.mode == RxMode::Afc {
                    self.rate_sent as u64
                } else {
                    0
                },
                feed_forward: if self.mode == RxMode::Afc {
                    self.feed_forward
                } else {
                    0
                },
                proactive: false,
            });
        }
    }

    /// The most payload an honest peer can have sent: the limit plus the feed-forward granted.
    pub fn bound(&self) -> u64 {
        self.limit.saturating_add(self.feed_forward)
    }

    /// Payload bytes received for the first time, in all.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// The receive window now.
    pub fn window(&self) -> u64 {
        self.window
    }

    /// The smoothed read rate, bytes a second.
    pub fn read_rate(&self) -> f64 {
        self.rate.bytes_per_sec()
    }
}
