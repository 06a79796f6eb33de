//! Flow control: explicit credit, with AFC's feed-forward of the application's read rate.
//!
//! On a phone the rate at which an application reads its socket swings with CPU contention,
//! and then the receive window, not the network, limits throughput. Window-based flow control
//! (TCP's, QUIC's) is an integral controller: the sender learns of a read only when the window
//! it reopened reaches it, and under a fluctuating read rate its error never decays (Sanadhya
//! thesis ch. III, eq. 24-28). AFC (§3.4) adds the read rate as a feed-forward term: the
//! receiver measures it ([`rate`]) and tells the sender, which keeps `B_adv + AR * RTT` in
//! flight, and the error decays as `e^(-t/RTT)` (eq. 34).
//!
//! Here both run over the multi-socket's TCP connections. Each side announces [`Caps`] in its
//! `Hello`/`HelloAck`; with [`Caps::CREDIT`] on both, the receiver grants credit in `Credit`
//! frames ([`receiver`]) and the sender stays within it ([`sender`]); with
//! [`Caps::READ_RATE`] on both too, the credit carries the read rate. A peer without them gets
//! what every version-3 peer did (`FlowPolicy::Legacy`): the fixed window of unacknowledged
//! bytes, and a driver that stops reading its sockets while the application has a window
//! unread, so that kernel TCP's window is the flow control.
//!
//! Bad input: a `Credit` from a peer that did not negotiate it, a limit below one already
//! given, a rate beyond `max_peer_rate` (clamped) or sent without `READ_RATE` are counted in
//! [`FlowStats`] and otherwise ignored; a peer that sends beyond its credit fails the
//! multi-socket ([`Failure::CreditExceeded`]).

mod rate;
mod receiver;
mod sender;
#[cfg(test)]
mod tests;

use std::time::Duration;

use roam_core::Time;

pub use rate::{ReadRate, MIN_RATE};
pub use receiver::{Exceeded, Grant, PathView, Receiver, RxMode, MIN_AUTOTUNE_RTT};
pub use sender::{CreditTaken, Sender};

use super::*;
use crate::proto::wire::Caps;

/// The longest round trip flow control plans for: a longer smoothed RTT (a path in deep
/// trouble, or a peer delaying its acknowledgements) is taken as this, so that neither the
/// feed-forward nor a pacing episode stretches further.
pub const MAX_FLOW_RTT: Duration = Duration::from_secs(2);

/// Which flow control a multi-socket offers (the peer must offer it too, or both fall back to
/// what they share).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FlowPolicy {
    /// No credit: the window of unacknowledged bytes and the driver's pause, as every peer
    /// before credit did.
    Legacy,
    /// Credit granted as the application reads (TCP's and QUIC's window updates).
    Standard,
    /// Standard, and the read rate fed forward: the receiver sends it, the sender adds
    /// `AR * RTT` (AFC, Sanadhya thesis ch. III). A peer that offers only `Standard` gets
    /// standard credit.
    #[default]
    Afc,
    /// As a receiver, AFC's feed-forward folded into the credit itself (`AR * RTT` added to
    /// the limit), so that a sender without AFC benefits; as a sender, standard. Beyond the
    /// thesis.
    AfcReceiverOnly,
}

impl FlowPolicy {
    /// Every policy, in the order of [`FlowPolicy::name`]'s list.
    pub const ALL: [FlowPolicy; 4] = [
        FlowPolicy::Legacy,
        FlowPolicy::Standard,
        FlowPolicy::Afc,
        FlowPolicy::AfcReceiverOnly,
    ];

    /// Its name on command lines and in results: `legacy`, `standard`, `afc`,
    /// `afc-receiver-only`.
    pub fn name(self) -> &'static str {
        match self {
            FlowPolicy::Legacy => "legacy",
            FlowPolicy::Standard => "standard",
            FlowPolicy::Afc => "afc",
            FlowPolicy::AfcReceiverOnly => "afc-receiver-only",
        }
    }

    /// What this side announces for the policy.
    pub fn caps(self) -> Caps {
        match self {
            FlowPolicy::Legacy => Caps::NONE,
            FlowPolicy::Standard | FlowPolicy::AfcReceiverOnly => Caps::CREDIT,
            FlowPolicy::Afc => Caps::CREDIT | Caps::READ_RATE,
        }
    }
}

impl std::str::FromStr for FlowPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<FlowPolicy, String> {
        FlowPolicy::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = FlowPolicy::ALL.iter().map(|p| p.name()).collect();
                format!("unknown flow control `{s}` (one of: {})", names.join(", "))
            })
    }
}

/// How much the receiver lets the peer send ahead of the application.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Memory {
    /// A fixed window (the thesis's buffer `B`).
    Fixed(u64),
    /// A window starting at `initial` that grows by quiche's autotuning rule up to `max`
    /// (`receiver`).
    Auto {
        /// The first window.
        initial: u64,
        /// The largest.
        max: u64,
    },
}

/// The flow-control tunables of a multi-socket ([`Config::flow`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowConfig {
    /// Which flow control to offer. Default: AFC.
    pub policy: FlowPolicy,
    /// The receive window. Default: autotuned from 256 KiB to 16 MiB.
    pub memory: Memory,
    /// The read rate's history weight (the thesis's `h`). Default 0.5.
    pub history: f64,
    /// A read rate above this factor of the one last announced sends a credit at once.
    /// Default 1.25 (the thesis gives no value).
    pub upper: f64,
    /// A read rate below this factor of the one last announced sends a credit at once.
    /// Default 0.8.
    pub lower: f64,
    /// Reads and arrivals closer than this are merged into one rate sample (`rate`; zero is
    /// the thesis exactly). Default 20 ms: a paced reader's tick or a scheduler's quantum; a
    /// sample over less is dominated by where reads happen to fall between arrivals (in
    /// `roam lab afc` with 1 ms, a 16 KiB read followed 1 ms later by an arrival sampled as
    /// 16 MB/s, and AFC's feed-forward and memory tripled).
    pub min_sample_interval: Duration,
    /// The most the sender may add to the limit for the read rate (bytes): also what the
    /// receiver may have to hold beyond the window. Default 16 MiB.
    pub max_feed_forward: u64,
    /// A peer's read rate above this (bytes a second) is clamped to it. Default 100 Gbit/s.
    pub max_peer_rate: u64,
    /// A credit that opens a waiting sender's allowance by more than this is paced over a
    /// round trip (`sender`). Default 1 MiB.
    pub pacing_threshold: u64,
}

impl Default for FlowConfig {
    fn default() -> Self {
        FlowConfig {
            policy: FlowPolicy::Afc,
            memory: Memory::Auto {
                initial: 256 << 10,
                max: 16 << 20,
            },
            history: 0.5,
            upper: 1.25,
            lower: 0.8,
            min_sample_interval: Duration::from_millis(20),
            max_feed_forward: 16 << 20,
            max_peer_rate: 100_000_000_000 / 8,
            pacing_threshold: 1 << 20,
        }
    }
}

impl FlowConfig {
    /// The figures that contradict each other or cannot work, named: a zero window, factors
    /// that are not numbers or the wrong way round, a history weight outside [0, 1).
    pub fn check(&self) -> Result<(), String> {
        if let Memory::Fixed(0) | Memory::Auto { max: 0, .. } | Memory::Auto { initial: 0, .. } =
            self.memory
        {
            return Err("flow.memory: a window must be at least one byte".into());
        }
        if !(self.upper.is_finite() && self.lower.is_finite() && self.lower <= self.upper) {
            return Err(format!(
                "flow.lower {} and flow.upper {}: finite, lower at most upper",
                self.lower, self.upper
            ));
        }
        if !(0.0..1.0).contains(&self.history) {
            return Err(format!("flow.history {}: in [0, 1)", self.history));
        }
        Ok(())
    }
}

/// What flow control did over a multi-socket's life ([`Session::flow_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FlowStats {
    /// Both sides announced credit.
    pub credit: bool,
    /// Both sides announced the read rate.
    pub read_rate: bool,
    /// Credits sent.
    pub credits_sent: u64,
    /// Of them, sent because the read rate moved.
    pub proactive_sent: u64,
    /// Credits received and taken.
    pub credits_received: u64,
    /// Credits from a peer that had not negotiated credit (ignored).
    pub unnegotiated: u64,
    /// Credits whose limit was below one already taken (ignored).
    pub stale: u64,
    /// Read rates beyond `max_peer_rate` (clamped), or sent without `READ_RATE` (ignored).
    pub rates_refused: u64,
    /// Times new bytes waited for credit.
    pub blocked: u64,
    /// How long they waited, in all (finished waits).
    pub blocked_time: Duration,
    /// The receive window now.
    pub window: u64,
    /// The application's smoothed read rate, bytes a second.
    pub read_rate_now: f64,
    /// The peer's read rate as last announced, bytes a second.
    pub peer_read_rate: u64,
    /// The most acknowledged bytes the application had not read (what credit bounds).
    pub peak_unread: u64,
    /// Payload bytes this side sent for the first time, in all (what the peer's credit
    /// counts).
    pub sent_new: u64,
}

/// A multi-socket's flow control: what was negotiated, both halves and the counters.
#[derive(Clone, Debug)]
pub(super) struct Flow {
    pub(super) config: FlowConfig,
    pub(super) rx: Option<Receiver>,
    pub(super) tx: Sender,
    /// The connection the last credit went out on: if it breaks, the credit goes again.
    pub(super) sent_on: Option<ConnId>,
    pub(super) stats: FlowStats,
}

impl Flow {
    pub(super) fn new(config: FlowConfig) -> Flow {
        Flow {
            config,
            rx: None,
            tx: Sender::default(),
            sent_on: None,
            stats: FlowStats::default(),
        }
    }

    /// Both sides' announcements are known: fix what applies for the session's life.
    fn negotiate(&mut self, peer: Caps) -> Option<RxMode> {
        let both = self.config.policy.caps().common(peer);
        self.stats.credit = both.contains(Caps::CREDIT);
        self.stats.read_rate = self.stats.credit && both.contains(Caps::READ_RATE);
        if !self.stats.credit {
            return None;
        }
        self.tx = Sender::new(true, self.stats.read_rate);
        let mode = match self.config.policy {
            FlowPolicy::Afc if self.stats.read_rate => RxMode::Afc,
            FlowPolicy::AfcReceiverOnly => RxMode::Fold,
            _ => RxMode::Standard,
        };
        self.rx = Some(Receiver::new(mode, &self.config));
        Some(mode)
    }
}

impl Session {
    /// What this side announces in its `Hello` or `HelloAck`.
    pub(super) fn flow_caps(&self) -> Caps {
        self.flow.config.policy.caps()
    }

    /// The handshake is done and the peer announced `peer`: negotiate, and with credit
    /// queue the first grant.
    pub(super) fn flow_negotiated(&mut self, peer: Caps) {
        if self.flow.negotiate(peer).is_some() {
            let (unacked, path) = (self.unacked_held(), self.flow_path());
            if let Some(rx) = &mut self.flow.rx {
                rx.open(unacked, path);
            }
        }
    }

    /// Whether credit replaces the driver's pause (both sides announced it).
    pub(super) fn credit_on(&self) -> bool {
        self.flow.stats.credit
    }

    /// Bytes held that the application cannot take now, which credit counts as taken
    /// (`receiver`): those of IROBs this side has not acknowledged (they wait for bytes or
    /// dependencies), and, while the application is in the middle of a foreground IROB
    /// whose next bytes have not arrived, everything held behind it (up to the receive limit).
    /// Without the second, background IROBs acknowledged while a foreground stream waited for
    /// its writer could use the credit up and leave none for the stream's rest: nothing could
    /// be read, so no credit would come (`proto_sim`'s `small_credit_never_deadlocks` found it).
    fn unacked_held(&self) -> u64 {
        let unacked = self.in_buffered - self.acked_buffered;
        let behind = if self.current.is_some() && !self.has_delivery() {
            // Together with the unacknowledged bytes, within the receive limit: what a peer can
            // make this side hold stays the receive limit plus a window and the feed-forward.
            self.acked_buffered
                .min(self.config.receive_limit.saturating_sub(unacked))
        } else {
            0
        };
        unacked + behind
    }

    /// The round trip flow control plans for, and the networks' bandwidth-delay product: the
    /// longest smoothed RTT this side's kernel measured on an established connection
    /// (TCP_INFO; never a peer's announced estimate, which a peer could make hours long),
    /// at most [`MAX_FLOW_RTT`], and the sum over those connections of the network's
    /// estimated bandwidth times that RTT (a network with two connections counted once).
    pub(super) fn flow_path(&self) -> PathView {
        let mut view = PathView::default();
        let mut seen: Vec<NetId> = Vec::new();
        for c in self.conns.values() {
            let Some(r) = c.srtt.filter(|_| c.state == ConnState::Established) else {
                continue;
            };
            let r = r.min(MAX_FLOW_RTT);
            view.rtt = Some(view.rtt.map_or(r, |v: Duration| v.max(r)));
            if !seen.contains(&c.net) {
                seen.push(c.net);
                let bw = self
                    .networks
                    .get(&c.net)
                    .and_then(|n| n.estimate.bandwidth());
                if let Some(bw) = bw {
                    view.bdp += (bw.as_bps() as f64 / 8.0 * r.as_secs_f64()) as u64;
                }
            }
        }
        view
    }

    /// `bytes` new payload bytes arrived: count them against the credit granted, and grant
    /// more if due. A peer beyond its credit fails the multi-socket.
    pub(super) fn flow_arrival(&mut self, bytes: u64, now: Time) {
        let unread = self.acked_buffered;
        self.flow.stats.peak_unread = self.flow.stats.peak_unread.max(unread);
        if self.flow.rx.is_none() {
            return;
        }
        let (unacked, path) = (self.unacked_held(), self.flow_path());
        let Some(rx) = &mut self.flow.rx else {
            return;
        };
        if let Err(e) = rx.on_arrival(bytes, unread, unacked, path, now) {
            self.fail(Failure::CreditExceeded {
                received: e.received,
                bound: e.bound,
            });
        }
    }

    /// The application read `bytes`: grant more credit if due.
    pub(super) fn flow_read(&mut self, bytes: u64, now: Time) {
        if self.flow.rx.is_none() {
            return;
        }
        let (unacked, path) = (self.unacked_held(), self.flow_path());
        if let Some(rx) = &mut self.flow.rx {
            rx.on_read(bytes, unacked, path, now);
        }
    }

    /// What the application can take changed without a read or an arrival: grant more
    /// credit if what it cannot take used it up.
    pub(super) fn flow_recheck(&mut self, now: Time) {
        if self.flow.rx.is_none() {
            return;
        }
        let (unacked, path) = (self.unacked_held(), self.flow_path());
        if let Some(rx) = &mut self.flow.rx {
            rx.recheck(unacked, path, now);
        }
    }

    /// A `Credit` frame arrived.
    pub(super) fn on_credit(
        &mut self,
        limit: u64,
        rate: u64,
        kib: u32,
        proactive: bool,
        now: Time,
    ) {
        if !self.credit_on() {
            self.flow.stats.unnegotiated += 1;
            return;
        }
        let mut rate = rate;
        if rate > 0 && !self.flow.stats.read_rate {
            self.flow.stats.rates_refused += 1;
            rate = 0;
        } else if rate > self.flow.config.max_peer_rate {
            self.flow.stats.rates_refused += 1;
            rate = self.flow.config.max_peer_rate;
        }
        let cap = u64::from(kib) << 10;
        let rtt = self.flow_path().rtt;
        let threshold = self.flow.config.pacing_threshold;
        let (taken, waited) = self
            .flow
            .tx
            .on_credit(limit, rate, cap, proactive, rtt, threshold, now);
        match taken {
            CreditTaken::Stale => self.flow.stats.stale += 1,
            CreditTaken::Taken => self.flow.stats.credits_received += 1,
        }
        if let Some(w) = waited {
            self.flow.stats.blocked_time += w;
        }
    }

    /// The credit to send on `conn` now, if one is due.
    pub(super) fn next_credit(&mut self, conn: ConnId) -> Option<Frame> {
        let g = self.flow.rx.as_mut()?.take()?;
        self.flow.sent_on = Some(conn);
        self.flow.stats.credits_sent += 1;
        if g.proactive {
            self.flow.stats.proactive_sent += 1;
        }
        Some(Frame::Credit {
            limit: g.limit,
            rate: g.rate,
            feed_forward_kib: u32::try_from(g.feed_forward >> 10).unwrap_or(u32::MAX),
            proactive: g.proactive,
        })
    }

    /// Connection `conn` broke: a credit that went out on it may be lost with it.
    pub(super) fn flow_conn_lost(&mut self, conn: ConnId) {
        if self.flow.sent_on == Some(conn) {
            self.flow.sent_on = None;
            if let Some(rx) = &mut self.flow.rx {
                rx.again();
            }
        }
    }

    /// New bytes this side may send now by the peer's credit (`u64::MAX` without credit).
    pub(super) fn credit_room(&mut self, now: Time) -> u64 {
        if !self.credit_on() {
            return u64::MAX;
        }
        let rtt = self.flow_path().rtt;
        self.flow.tx.room(rtt, now)
    }

    /// New bytes waited for credit at `now`.
    pub(super) fn credit_blocked(&mut self, now: Time) {
        let rtt = self.flow_path().rtt;
        if self.flow.tx.on_blocked(rtt, now) {
            self.flow.stats.blocked += 1;
        }
    }

    /// When the pacer releases the next chunk, if it paces new bytes that wait.
    pub(super) fn pacing_deadline(&self) -> Option<Time> {
        if self.unsent.iter().all(|&u| u == 0) {
            return None;
        }
        self.flow.tx.next_release(self.config.chunk_size as u64)
    }

    /// A pacing episode that has run its course ends (its deadline is then never in the
    /// past: a driver would otherwise be woken at once, again and again).
    pub(super) fn pacing_timeout(&mut self, now: Time) {
        self.flow.tx.expire_pacing(now);
    }

    /// Whether a credit waits to be sent (a driver wakes its writers for it).
    pub fn credit_pending(&self) -> bool {
        self.flow.rx.as_ref().is_some_and(Receiver::is_pending)
    }

    /// What flow control did so far.
    pub fn flow_stats(&self) -> FlowStats {
        let mut s = self.flow.stats;
        if let Some(rx) = &self.flow.rx {
            s.window = rx.window();
            s.read_rate_now = rx.read_rate();
        }
        s.peer_read_rate = self.flow.tx.peer_rate();
        s.sent_new = self.flow.tx.sent();
        s
    }
}
