//! One direction of an emulated link, as a sans-IO state machine.
//!
//! A packet handed to [`LinkQueue::receive`] goes through, in order:
//! 1. **availability**: while the link is unavailable (a scheduled outage or a scripted `down`)
//!    the packet is silently dropped, as a car leaving WiFi range loses it; an outage also drops
//!    whatever is queued;
//! 2. **loss**: dropped with the configured probability (seeded);
//! 3. **drop-tail queue**: dropped if the queue is full (packets or bytes);
//! 4. **capacity**: leaves the queue according to the link's [`Capacity`]:
//!    - Mahimahi delivery opportunities: each opportunity carries up to 1500 bytes, packed
//!      byte-wise from the head of the queue (a packet may span opportunities, several small
//!      packets may share one); opportunities that find the queue empty are wasted, and a packet
//!      can only use opportunities strictly after it arrived (Mahimahi's `LinkQueue`);
//!    - a rate: the packet occupies the link for its serialisation time, FIFO;
//!    - unlimited: it leaves at once;
//! 5. **delay**: it is released one-way-delay after it left the queue (FIFO, so a delay that
//!    shrinks over time never reorders packets), plus, with [`Jitter`], a uniformly drawn
//!    extra delay per packet: packets stay in order unless the jitter allows reordering.
//!
//! The driver calls [`LinkQueue::advance`] with the current time, takes released packets from
//! [`LinkQueue::pop_ready`], and sleeps until [`LinkQueue::next_deadline`].

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use roam_core::Time;
use roam_trace::capacity::Capacity;
use roam_trace::pdo::{OppCursor, MTU_BYTES};
use roam_trace::Piecewise;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Drop-tail queue bound. It counts every packet the link holds, the one at its head (being
/// sent, or waiting for a delivery opportunity) included, as Mahimahi's drop-tail queue does:
/// a 100-packet queue holds 100 packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueLimit {
    /// At most this many packets held.
    Packets(usize),
    /// At most this many bytes held.
    Bytes(u64),
    /// No bound.
    Unlimited,
}

/// Why a packet was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// The drop-tail queue was full.
    Queue,
    /// Random loss.
    Loss,
    /// The link was unavailable.
    Outage,
}

/// Per-packet delay variation: each packet's one-way delay is raised by an amount drawn
/// uniformly from zero to `max` (seeded with the link). Without `reorder` a packet is never
/// released before the one ahead of it, as behind a FIFO link; with it each is released at
/// its own time, so packets overtake each other (netem's jitter, which reorders).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Jitter {
    /// The largest extra delay.
    pub max: Duration,
    /// Whether packets may overtake each other.
    pub reorder: bool,
}

/// What happened to one packet, for per-packet logs in Mahimahi's `mm-link --log` terms
/// (recorded only after [`LinkQueue::record_packet_events`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketEvent {
    /// A packet of `bytes` arrived at the link.
    Arrival {
        /// When.
        at: Time,
        /// Its size.
        bytes: u64,
    },
    /// A packet left the queue after waiting `queued` in it.
    Departure {
        /// When.
        at: Time,
        /// Its size.
        bytes: u64,
        /// Arrival to departure.
        queued: Duration,
    },
    /// A packet was dropped: the queue was full, random loss, or an outage.
    Drop {
        /// When.
        at: Time,
        /// Its size.
        bytes: u64,
    },
}

impl PacketEvent {
    /// When it happened.
    pub fn at(&self) -> Time {
        match *self {
            PacketEvent::Arrival { at, .. }
            | PacketEvent::Departure { at, .. }
            | PacketEvent::Drop { at, .. } => at,
        }
    }
}

/// Counters for one time bin of one direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BinStats {
    /// Bytes that arrived at the link.
    pub arrived_bytes: u64,
    /// Bytes that left the queue (delivered to the delay line) in this bin.
    pub delivered_bytes: u64,
    /// Packets that left the queue in this bin.
    pub delivered_pkts: u64,
    /// Sum of the queueing delays (arrival to departure) of those packets, ns.
    pub qdelay_sum_ns: u64,
    /// Largest queueing delay among them, ns.
    pub qdelay_max_ns: u64,
    /// Packets dropped because the queue was full.
    pub drops_queue: u64,
    /// Packets dropped by random loss.
    pub drops_loss: u64,
    /// Packets dropped because the link was unavailable.
    pub drops_outage: u64,
}

struct Queued {
    pkt: Vec<u8>,
    arrived: Time,
}

/// One direction of one link.
pub struct LinkQueue {
    /// The link's own trace, as given: what [`LinkQueue::restart`] starts again.
    trace: (Capacity, Piecewise<Duration>, Piecewise<bool>),
    capacity: Capacity,
    delay: Piecewise<Duration>,
    availability: Piecewise<bool>,
    forced_down: bool,
    loss: f64,
    rng: ChaCha8Rng,
    limit: QueueLimit,
    queue: VecDeque<Queued>,
    queue_bytes: u64,
    /// Everything up to this time has been processed.
    clock: Time,
    /// Opportunities model: the next unused opportunity and bytes of the head still to send.
    opp: Option<OppCursor>,
    head_left: u64,
    /// Rate models: when the head of the queue finishes.
    head_finish: Option<Time>,
    delay_line: VecDeque<(Time, Vec<u8>)>,
    last_release: Time,
    jitter: Jitter,
    /// Per-packet events, when asked for (`record_packet_events`).
    packet_events: Option<Vec<PacketEvent>>,
    bin_width: Duration,
    bins: BTreeMap<u64, BinStats>,
    /// The first bin not yet taken: bins are handed out without gaps from here on.
    next_bin: u64,
}

impl LinkQueue {
    /// A queue with the given behaviour; `seed` drives random loss.
    pub fn new(
        capacity: Capacity,
        delay: Piecewise<Duration>,
        availability: Piecewise<bool>,
        loss: f64,
        limit: QueueLimit,
        seed: u64,
    ) -> LinkQueue {
        LinkQueue {
            trace: (capacity.clone(), delay.clone(), availability.clone()),
            capacity,
            delay,
            availability,
            forced_down: false,
            loss,
            rng: ChaCha8Rng::seed_from_u64(seed),
            limit,
            queue: VecDeque::new(),
            queue_bytes: 0,
            clock: Time::ZERO,
            opp: None,
            head_left: 0,
            head_finish: None,
            delay_line: VecDeque::new(),
            last_release: Time::ZERO,
            jitter: Jitter::default(),
            packet_events: None,
            bin_width: Duration::from_millis(100),
            bins: BTreeMap::new(),
            next_bin: 0,
        }
    }

    /// Record every packet's arrival, departure and drop from now on (for `mm-link --log`
    /// style logs); take them with [`take_packet_events`](Self::take_packet_events).
    pub fn record_packet_events(&mut self) {
        self.packet_events.get_or_insert_with(Vec::new);
    }

    /// The packet events recorded since the last call, in time order.
    pub fn take_packet_events(&mut self) -> Vec<PacketEvent> {
        self.packet_events
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    fn packet_event(&mut self, e: PacketEvent) {
        if let Some(v) = self.packet_events.as_mut() {
            v.push(e);
        }
    }

    /// Vary each packet's delay (default: none).
    pub fn set_jitter(&mut self, jitter: Jitter) {
        self.jitter = jitter;
    }

    /// Set the width of statistics bins (default 100 ms).
    pub fn set_bin_width(&mut self, w: Duration) {
        self.bin_width = w.max(Duration::from_millis(1));
    }

    /// Whether the link is usable at `t` (schedule and scripted state).
    pub fn available_at(&self, t: Time) -> bool {
        !self.forced_down && *self.availability.value_at(t)
    }

    /// Packets waiting in the queue (including one partly sent).
    pub fn queued_packets(&self) -> usize {
        self.queue.len()
    }

    /// Bytes waiting in the queue.
    pub fn queued_bytes(&self) -> u64 {
        self.queue_bytes
    }

    fn bin(&mut self, t: Time) -> &mut BinStats {
        let idx = t.as_nanos() / self.bin_width.as_nanos() as u64;
        self.bins.entry(idx).or_default()
    }

    fn record_drop(&mut self, t: Time, why: DropReason) {
        let b = self.bin(t);
        match why {
            DropReason::Queue => b.drops_queue += 1,
            DropReason::Loss => b.drops_loss += 1,
            DropReason::Outage => b.drops_outage += 1,
        }
    }

    /// A packet arrives at `now`. Returns the reason if it was dropped.
    pub fn receive(&mut self, now: Time, pkt: Vec<u8>) -> Option<DropReason> {
        self.advance(now);
        let now = self.clock;
        self.bin(now).arrived_bytes += pkt.len() as u64;
        let bytes = pkt.len() as u64;
        self.packet_event(PacketEvent::Arrival { at: now, bytes });
        let why = if !self.available_at(now) {
            Some(DropReason::Outage)
        } else if self.loss > 0.0 && self.rng.gen::<f64>() < self.loss {
            Some(DropReason::Loss)
        } else {
            match self.limit {
                QueueLimit::Packets(n) if self.queue.len() >= n => Some(DropReason::Queue),
                QueueLimit::Bytes(b) if self.queue_bytes + pkt.len() as u64 > b => {
                    Some(DropReason::Queue)
                }
                _ => None,
            }
        };
        if let Some(w) = why {
            self.record_drop(now, w);
            self.packet_event(PacketEvent::Drop { at: now, bytes });
            return Some(w);
        }
        let len = pkt.len() as u64;
        self.queue.push_back(Queued { pkt, arrived: now });
        self.queue_bytes += len;
        if self.queue.len() == 1 {
            self.start_head(now);
        }
        None
    }

    /// Begin serving the head of the queue at `t`.
    fn start_head(&mut self, t: Time) {
        let len = self.queue.front().map_or(0, |q| q.pkt.len() as u64);
        match &self.capacity {
            Capacity::Opportunities(p) => {
                if self.opp.is_none() {
                    self.opp = Some(p.first_after(t));
                }
                self.head_left = len;
            }
            Capacity::Unlimited => self.head_finish = Some(t),
            Capacity::Rate(r) => self.head_finish = Some(finish_time(r, t, len)),
        }
    }

    fn next_service(&self) -> Option<Time> {
        if self.queue.is_empty() {
            return None;
        }
        match &self.capacity {
            Capacity::Opportunities(p) => self.opp.map(|c| p.time_of(c)),
            _ => self.head_finish,
        }
    }

    /// Process everything that happens up to `now`.
    pub fn advance(&mut self, now: Time) {
        if now < self.clock {
            return;
        }
        loop {
            let service = self.next_service().filter(|t| *t <= now);
            let change = if self.queue.is_empty() {
                None
            } else {
                self.availability
                    .next_change_after(self.clock)
                    .filter(|t| *t <= now)
            };
            // The earlier of the two; a departure at the same instant as an availability
            // change goes first.
            let next = match (service, change) {
                (Some(s), Some(c)) if c < s => Some((c, false)),
                (Some(s), _) => Some((s, true)),
                (None, c) => c.map(|c| (c, false)),
            };
            let Some((t, departure)) = next else { break };
            if departure {
                self.clock = self.clock.max(t);
                self.serve(t);
            } else {
                self.clock = t;
                if !self.available_at(t) {
                    self.drop_queue(t);
                }
            }
        }
        self.clock = now;
        if self.queue.is_empty() {
            self.opp = None;
            self.head_finish = None;
        }
    }

    fn serve(&mut self, t: Time) {
        match &self.capacity {
            Capacity::Opportunities(p) => {
                let p = p.clone();
                let mut budget = MTU_BYTES;
                while budget > 0 && !self.queue.is_empty() {
                    let take = budget.min(self.head_left);
                    self.head_left -= take;
                    budget -= take;
                    if self.head_left == 0 {
                        self.depart(t);
                        if let Some(q) = self.queue.front() {
                            self.head_left = q.pkt.len() as u64;
                        }
                    }
                }
                self.opp = if self.queue.is_empty() {
                    None
                } else {
                    self.opp.map(|c| p.advance(c))
                };
            }
            _ => {
                self.depart(t);
                self.head_finish = None;
                if !self.queue.is_empty() {
                    self.start_head(t);
                }
            }
        }
    }

    fn depart(&mut self, t: Time) {
        let q = self.queue.pop_front().expect("depart with a packet queued");
        let len = q.pkt.len() as u64;
        self.queue_bytes -= len;
        let qdelay = (t - q.arrived).as_nanos() as u64;
        let b = self.bin(t);
        b.delivered_bytes += len;
        b.delivered_pkts += 1;
        b.qdelay_sum_ns += qdelay;
        b.qdelay_max_ns = b.qdelay_max_ns.max(qdelay);
        self.packet_event(PacketEvent::Departure {
            at: t,
            bytes: len,
            queued: Duration::from_nanos(qdelay),
        });
        let mut delay = *self.delay.value_at(t);
        if self.jitter.max > Duration::ZERO {
            delay += self.jitter.max.mul_f64(self.rng.gen::<f64>());
        }
        let release = t + delay;
        if self.jitter.reorder {
            // Released at its own time: the delay line stays sorted by release time.
            let at = self.delay_line.partition_point(|(r, _)| *r <= release);
            self.delay_line.insert(at, (release, q.pkt));
        } else {
            let release = release.max(self.last_release);
            self.last_release = release;
            self.delay_line.push_back((release, q.pkt));
        }
    }

    fn drop_queue(&mut self, t: Time) {
        let n = self.queue.len() as u64;
        if self.packet_events.is_some() {
            for q in std::mem::take(&mut self.queue) {
                let bytes = q.pkt.len() as u64;
                self.packet_event(PacketEvent::Drop { at: t, bytes });
            }
        }
        self.queue.clear();
        self.queue_bytes = 0;
        self.opp = None;
        self.head_left = 0;
        self.head_finish = None;
        if n > 0 {
            self.bin(t).drops_outage += n;
        }
    }

    /// The next packet whose delay has elapsed by `now`.
    pub fn pop_ready(&mut self, now: Time) -> Option<Vec<u8>> {
        self.pop_ready_due(now).map(|(_, p)| p)
    }

    /// As [`pop_ready`](Self::pop_ready), with the time the packet was due: the driver's
    /// `now` minus that is how late it forwards the packet (the emulator's own lateness).
    pub fn pop_ready_due(&mut self, now: Time) -> Option<(Time, Vec<u8>)> {
        match self.delay_line.front() {
            Some((r, _)) if *r <= now => self.delay_line.pop_front(),
            _ => None,
        }
    }

    /// When the driver must call [`advance`](Self::advance) again, absent new packets.
    pub fn next_deadline(&self) -> Option<Time> {
        let release = self.delay_line.front().map(|(r, _)| *r);
        let service = self.next_service();
        let change = if self.queue.is_empty() {
            None
        } else {
            self.availability.next_change_after(self.clock)
        };
        [release, service, change].into_iter().flatten().min()
    }

    /// Scripted outage (`down`) or its end (`up`), at `now`.
    pub fn set_forced_down(&mut self, now: Time, down: bool) {
        self.advance(now);
        self.forced_down = down;
        if down {
            self.drop_queue(now);
        }
    }

    /// Replace the capacity from `now` on; the packet being sent restarts under the new capacity.
    pub fn set_capacity(&mut self, now: Time, capacity: Capacity) {
        self.advance(now);
        self.capacity = capacity;
        self.opp = None;
        self.head_finish = None;
        if !self.queue.is_empty() {
            self.start_head(now);
        }
    }

    /// Start the link's own trace (capacity, delay, availability) again from its beginning at
    /// `now`: from then on the link behaves as it did from time zero. What was queued stays
    /// queued unless the trace begins in an outage; loss and a scripted outage stay as they
    /// are.
    pub fn restart(&mut self, now: Time) {
        self.advance(now);
        let (capacity, delay, availability) = &self.trace;
        self.delay = delay.starting_at(now);
        self.availability = availability.starting_at(now);
        let capacity = capacity.starting_at(now);
        self.set_capacity(now, capacity);
        if !self.available_at(now) {
            // The trace begins in an outage: what was queued is lost, as at any outage's start.
            self.drop_queue(now);
        }
    }

    /// The capacity now in force.
    pub fn capacity(&self) -> &Capacity {
        &self.capacity
    }

    /// Replace the one-way delay from `now` on.
    pub fn set_delay(&mut self, now: Time, delay: Piecewise<Duration>) {
        self.advance(now);
        self.delay = delay;
    }

    /// Replace the loss rate from `now` on.
    pub fn set_loss(&mut self, now: Time, loss: f64) {
        self.advance(now);
        self.loss = loss;
    }

    /// Statistics bins that are complete as of the processed time, in time order, with their
    /// start times. Every bin is handed out, those in which nothing happened as zeros, so a
    /// log is a time series without gaps.
    pub fn take_complete_bins(&mut self) -> Vec<(Time, BinStats)> {
        let current = self.clock.as_nanos() / self.bin_width.as_nanos() as u64;
        self.take_bins_before(current)
    }

    /// All remaining statistics bins (at shutdown): through the current one, and through the
    /// last that counted anything.
    pub fn take_all_bins(&mut self) -> Vec<(Time, BinStats)> {
        let current = self.clock.as_nanos() / self.bin_width.as_nanos() as u64;
        let last = self.bins.last_key_value().map_or(0, |(&i, _)| i);
        self.take_bins_before(current.max(last) + 1)
    }

    fn take_bins_before(&mut self, end: u64) -> Vec<(Time, BinStats)> {
        let w = self.bin_width.as_nanos() as u64;
        let out = (self.next_bin..end)
            .map(|i| (Time(i * w), self.bins.remove(&i).unwrap_or_default()))
            .collect();
        self.next_bin = self.next_bin.max(end);
        out
    }

    /// The width of statistics bins.
    pub fn bin_width(&self) -> Duration {
        self.bin_width
    }
}

/// When a packet of `bytes` starting at `start` finishes under a piecewise rate.
fn finish_time(rate: &Piecewise<roam_core::BitRate>, start: Time, bytes: u64) -> Time {
    let mut bits_left = bytes as f64 * 8.0;
    let mut t = start;
    loop {
        let r = rate.value_at(t).as_bps() as f64;
        let end = rate.next_change_after(t);
        if r > 0.0 {
            let need = Duration::from_secs_f64(bits_left / r);
            match end {
                Some(e) if t + need > e => bits_left -= r * (e - t).as_secs_f64(),
                _ => return t + need,
            }
        }
        match end {
            Some(e) => t = e,
            None => return Time::MAX,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roam_core::BitRate;
    use roam_trace::PdoTrace;
    use std::sync::Arc;

    fn ms(v: u64) -> Time {
        Time::from_millis(v)
    }

    fn constant(rate: BitRate, delay_ms: u64) -> LinkQueue {
        LinkQueue::new(
            Capacity::constant(rate),
            Piecewise::constant(Duration::from_millis(delay_ms)),
            Piecewise::constant(true),
            0.0,
            QueueLimit::Unlimited,
            1,
        )
    }

    /// Run the queue like a driver would, returning (release time, packet) pairs.
    fn drain(q: &mut LinkQueue, until: Time) -> Vec<(Time, Vec<u8>)> {
        let mut out = Vec::new();
        while let Some(t) = q.next_deadline() {
            if t > until {
                break;
            }
            q.advance(t);
            while let Some(p) = q.pop_ready(t) {
                out.push((t, p));
            }
        }
        out
    }

    #[test]
    fn rate_serialises_and_delays() {
        // 12 Mbit/s: a 1500-byte packet takes 1 ms; 10 ms delay.
        let mut q = constant(BitRate::mbps(12), 10);
        q.receive(ms(0), vec![0; 1500]);
        q.receive(ms(0), vec![1; 1500]);
        let out = drain(&mut q, ms(100));
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].0, ms(11));
        assert_eq!(out[1].0, ms(12));
        assert_eq!(out[1].1[0], 1);
    }

    /// An unlimited, delay-free, always-up queue delivering at these opportunities (ms).
    fn opportunity_queue(ms: Vec<u64>) -> LinkQueue {
        let p = Arc::new(PdoTrace::from_millis(ms, "t").unwrap());
        LinkQueue::new(
            Capacity::Opportunities(p),
            Piecewise::constant(Duration::ZERO),
            Piecewise::constant(true),
            0.0,
            QueueLimit::Unlimited,
            1,
        )
    }

    #[test]
    fn opportunities_pack_bytes_and_waste_idle_ones() {
        let mut q = opportunity_queue(vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        // Arrives at 2.5 ms: opportunities at 1 and 2 ms are wasted.
        q.receive(Time::from_nanos(2_500_000), vec![0; 1000]);
        q.receive(Time::from_nanos(2_500_000), vec![1; 1000]);
        q.receive(Time::from_nanos(2_500_000), vec![2; 100]);
        let out = drain(&mut q, ms(20));
        // 3 ms: first packet (1000) + 500 of the second; 4 ms: rest of second + the 100-byte one.
        assert_eq!(
            out.iter().map(|o| o.0).collect::<Vec<_>>(),
            vec![ms(3), ms(4), ms(4)]
        );
    }

    #[test]
    fn a_restarted_link_follows_its_trace_from_the_beginning_again() {
        // Opportunities at 5, 10 and 100 ms, every 100 ms.
        let mut q = opportunity_queue(vec![5, 10, 100]);
        q.receive(ms(40), vec![0; 10]);
        assert_eq!(drain(&mut q, ms(150))[0].0, ms(100), "without a restart");
        q.set_capacity(ms(150), Capacity::constant(BitRate::kbps(8)));
        // Started again at 237 ms, the trace's 5 and 10 ms fall at 242 and 247: the
        // capacity set at 150 ms is gone.
        q.restart(ms(237));
        q.receive(ms(240), vec![1; 10]);
        q.receive(ms(240), vec![2; 10]);
        let out = drain(&mut q, ms(400));
        assert_eq!(
            out.iter().map(|o| (o.0, o.1[0])).collect::<Vec<_>>(),
            vec![(ms(242), 1), (ms(242), 2)]
        );
    }

    #[test]
    fn a_link_restarted_into_its_trace_s_first_outage_drops_what_it_queued() {
        // Out of reach for its first 10 ms of every 100; 8 kbit/s, so packets wait.
        let mut q = LinkQueue::new(
            Capacity::constant(BitRate::kbps(8)),
            Piecewise::constant(Duration::ZERO),
            Piecewise::new(
                vec![(ms(0), false), (ms(10), true)],
                Some(Duration::from_millis(100)),
            )
            .unwrap(),
            0.0,
            QueueLimit::Unlimited,
            1,
        );
        q.receive(ms(50), vec![0; 1000]);
        q.restart(ms(60));
        assert_eq!(q.queued_packets(), 0);
        assert!(!q.available_at(ms(65)) && q.available_at(ms(70)));
    }

    #[test]
    fn opportunity_at_arrival_time_is_not_used() {
        let mut q = opportunity_queue(vec![5, 10]);
        q.receive(ms(5), vec![0; 10]);
        let out = drain(&mut q, ms(20));
        assert_eq!(out[0].0, ms(10));
    }

    #[test]
    fn drop_tail_and_loss() {
        let mut q = LinkQueue::new(
            Capacity::constant(BitRate::kbps(8)),
            Piecewise::constant(Duration::ZERO),
            Piecewise::constant(true),
            0.0,
            QueueLimit::Packets(2),
            1,
        );
        // Two packets fit, the one being sent counted (as Mahimahi counts); the third is
        // dropped, and once the first has left there is room for one more.
        for i in 0..2 {
            assert_eq!(q.receive(ms(0), vec![i; 100]), None);
        }
        assert_eq!(q.receive(ms(0), vec![9; 100]), Some(DropReason::Queue));
        assert_eq!(
            drain(&mut q, ms(101)).len(),
            1,
            "100 B at 8 kbit/s take 100 ms"
        );
        assert_eq!(q.receive(ms(101), vec![3; 100]), None);
        assert_eq!(q.receive(ms(101), vec![9; 100]), Some(DropReason::Queue));
        let mut lossy = LinkQueue::new(
            Capacity::Unlimited,
            Piecewise::constant(Duration::ZERO),
            Piecewise::constant(true),
            0.25,
            QueueLimit::Unlimited,
            42,
        );
        let lost = (0..10_000)
            .filter(|i| lossy.receive(Time(*i), vec![0; 10]).is_some())
            .count();
        assert!((2300..2700).contains(&lost), "{lost}");
    }

    /// Jitter spreads each packet's delay over [delay, delay + max]; without reordering the
    /// packets leave in order, with it some overtake others, and none is lost either way.
    #[test]
    fn jitter_spreads_delays_and_reorders_only_when_allowed() {
        let run = |reorder: bool| {
            let mut q = LinkQueue::new(
                Capacity::Unlimited,
                Piecewise::constant(Duration::from_millis(20)),
                Piecewise::constant(true),
                0.0,
                QueueLimit::Unlimited,
                3,
            );
            q.set_jitter(Jitter {
                max: Duration::from_millis(10),
                reorder,
            });
            for i in 0..200u32 {
                q.receive(Time(i as u64 * 1_000_000), i.to_be_bytes().to_vec());
            }
            drain(&mut q, Time::MAX)
                .into_iter()
                .map(|(t, p)| (t, u32::from_be_bytes(p[..4].try_into().unwrap())))
                .collect::<Vec<_>>()
        };
        let fifo = run(false);
        assert_eq!(fifo.len(), 200);
        assert!(fifo.windows(2).all(|w| w[0].1 < w[1].1), "in order");
        let reordered = run(true);
        assert_eq!(reordered.len(), 200);
        let late = reordered.windows(2).filter(|w| w[0].1 > w[1].1).count();
        assert!(
            late > 20,
            "{late} overtakings with 10 ms of jitter at 1 ms spacing"
        );
        for (t, i) in &reordered {
            let sent = Time(*i as u64 * 1_000_000);
            let d = t.saturating_since(sent);
            let (lo, hi) = (Duration::from_millis(20), Duration::from_millis(30));
            assert!(d >= lo && d <= hi, "{i}: {d:?}");
        }
    }

    /// Recorded packet events account for every packet: each arrival departs or is dropped.
    #[test]
    fn packet_events_account_for_every_packet() {
        let mut q = LinkQueue::new(
            Capacity::constant(BitRate::kbps(800)), // 1000 B = 10 ms
            Piecewise::constant(Duration::ZERO),
            Piecewise::constant(true),
            0.0,
            QueueLimit::Packets(2),
            1,
        );
        q.record_packet_events();
        for _ in 0..3 {
            q.receive(ms(0), vec![0; 1000]);
        }
        drain(&mut q, ms(100));
        let ev = q.take_packet_events();
        let count = |f: fn(&PacketEvent) -> bool| ev.iter().filter(|e| f(e)).count();
        assert_eq!(count(|e| matches!(e, PacketEvent::Arrival { .. })), 3);
        assert_eq!(count(|e| matches!(e, PacketEvent::Drop { .. })), 1);
        let departures: Vec<_> = ev
            .iter()
            .filter_map(|e| match e {
                PacketEvent::Departure { at, queued, .. } => Some((*at, *queued)),
                _ => None,
            })
            .collect();
        assert_eq!(
            departures,
            [
                (ms(10), Duration::from_millis(10)),
                (ms(20), Duration::from_millis(20))
            ]
        );
        assert!(ev.windows(2).all(|w| w[0].at() <= w[1].at()));
        assert!(q.take_packet_events().is_empty());
    }

    /// Bins in which nothing happened are handed out as zeros: a log has a row for every bin.
    #[test]
    fn bins_come_without_gaps() {
        let mut q = LinkQueue::new(
            Capacity::constant(BitRate::mbps(10)),
            Piecewise::constant(Duration::ZERO),
            Piecewise::constant(true),
            0.0,
            QueueLimit::Unlimited,
            1,
        );
        q.receive(ms(250), vec![0; 100]);
        q.advance(ms(320));
        let first = q.take_complete_bins();
        let starts: Vec<Time> = first.iter().map(|b| b.0).collect();
        assert_eq!(starts, [ms(0), ms(100), ms(200)]);
        assert_eq!(first[0].1, BinStats::default());
        assert_eq!(first[2].1.arrived_bytes, 100);
        q.receive(ms(650), vec![0; 10]);
        let rest = q.take_all_bins();
        let starts: Vec<Time> = rest.iter().map(|b| b.0).collect();
        assert_eq!(starts, [ms(300), ms(400), ms(500), ms(600)]);
        assert_eq!(rest[3].1.arrived_bytes, 10);
    }

    #[test]
    fn outage_drops_arrivals_and_queue() {
        let avail =
            Piecewise::new(vec![(ms(0), true), (ms(5), false), (ms(10), true)], None).unwrap();
        let mut q = LinkQueue::new(
            Capacity::constant(BitRate::kbps(800)), // 1500 B = 15 ms
            Piecewise::constant(Duration::ZERO),
            avail,
            0.0,
            QueueLimit::Unlimited,
            1,
        );
        assert_eq!(q.receive(ms(0), vec![0; 1500]), None);
        assert_eq!(q.receive(ms(6), vec![0; 10]), Some(DropReason::Outage));
        assert!(drain(&mut q, ms(100)).is_empty());
        let bins = q.take_all_bins();
        let outage: u64 = bins.iter().map(|b| b.1.drops_outage).sum();
        assert_eq!(outage, 2);
        assert_eq!(q.receive(ms(11), vec![0; 10]), None);
        assert_eq!(drain(&mut q, ms(100)).len(), 1);
    }

    #[test]
    fn scripted_down_and_rate_change() {
        let mut q = constant(BitRate::mbps(12), 0);
        q.set_forced_down(ms(0), true);
        assert_eq!(q.receive(ms(1), vec![0; 10]), Some(DropReason::Outage));
        q.set_forced_down(ms(2), false);
        q.set_capacity(ms(2), Capacity::constant(BitRate::mbps(6)));
        q.receive(ms(2), vec![0; 1500]);
        assert_eq!(drain(&mut q, ms(100))[0].0, ms(4));
    }

    #[test]
    fn piecewise_rate_finish_spans_segments() {
        let r = Piecewise::new(
            vec![
                (ms(0), BitRate::mbps(12)),
                (ms(1), BitRate(0)),
                (ms(5), BitRate::mbps(12)),
            ],
            None,
        )
        .unwrap();
        // 3000 B: 1500 in [0,1), nothing until 5, 1500 in [5,6).
        assert_eq!(finish_time(&r, ms(0), 3000), ms(6));
    }

    #[test]
    fn shrinking_delay_never_reorders() {
        let delay = Piecewise::new(
            vec![
                (ms(0), Duration::from_millis(50)),
                (ms(1), Duration::from_millis(1)),
            ],
            None,
        )
        .unwrap();
        let mut q = LinkQueue::new(
            Capacity::Unlimited,
            delay,
            Piecewise::constant(true),
            0.0,
            QueueLimit::Unlimited,
            1,
        );
        q.receive(ms(0), vec![0]);
        q.receive(ms(2), vec![1]);
        let out = drain(&mut q, ms(100));
        assert_eq!(out[0].1, vec![0]);
        assert_eq!(out[1].1, vec![1]);
        assert!(out[1].0 >= out[0].0);
    }

    proptest::proptest! {
        /// Whatever arrives is delivered in order or counted as dropped; never more than the
        /// capacity allows.
        #[test]
        fn conservation(arrivals in proptest::collection::vec((0u64..50_000_000, 40usize..1500), 1..200),
                        rate_kbps in 100u64..50_000, qlimit in 1usize..50) {
            let mut arrivals = arrivals;
            arrivals.sort();
            let mut q = LinkQueue::new(
                Capacity::constant(BitRate::kbps(rate_kbps)),
                Piecewise::constant(Duration::from_millis(3)),
                Piecewise::constant(true),
                0.0,
                QueueLimit::Packets(qlimit),
                7,
            );
            let mut accepted = Vec::new();
            let mut out = Vec::new();
            for (i, (t, len)) in arrivals.iter().enumerate() {
                out.extend(drain(&mut q, Time(*t)));
                let mut pkt = vec![0u8; *len];
                pkt[..4].copy_from_slice(&(i as u32).to_be_bytes());
                if q.receive(Time(*t), pkt).is_none() {
                    accepted.push(i as u32);
                }
            }
            out.extend(drain(&mut q, Time::MAX));
            let ids: Vec<u32> = out.iter().map(|(_, p)| u32::from_be_bytes(p[..4].try_into().unwrap())).collect();
            proptest::prop_assert_eq!(ids, accepted);
            let bins = q.take_all_bins();
            let drops: u64 = bins.iter().map(|b| b.1.drops_queue).sum();
            proptest::prop_assert_eq!(drops as usize + out.len(), arrivals.len());
            // Capacity: bytes out by time T never exceed rate * T plus one packet.
            let mut bytes = 0u64;
            for (t, p) in &out {
                bytes += p.len() as u64;
                let sent_by = t.as_nanos().saturating_sub(3_000_000);
                let cap = BitRate::kbps(rate_kbps).bytes_in(Duration::from_nanos(sent_by)) + 1500;
                proptest::prop_assert!(bytes <= cap + 1500, "{} > {}", bytes, cap);
            }
        }
    }
}
