//! A radio's energy, driven by packet events and time (sans-IO: it never reads a clock).
//!
//! The state machine of every profile ([`crate::profile`](mod@crate::profile)): an idle radio that must send or
//! receive first **promotes** (LTE idle to connected, 3G IDLE to DCH), holding the packet
//! until the promotion ends; while packets flow it draws its **active** power plus a share
//! per Mbit/s moved (Huang et al. 2012, Table 4); after the last packet it stays up for its
//! **tail** phases (LTE's continuous reception and DRX tail, 3G's DCH then FACH), each at its
//! power, and then is idle again. A packet during the tail extends it (a new tail starts from
//! that packet) instead of paying a promotion: batching shares a tail, which is why the
//! marginal energy of a transfer depends on when it is sent ([`Radio::marginal_energy`]).
//! A packet below PowerTutor's queue threshold takes an idle 3G radio only to FACH; WiFi under
//! PowerTutor stays low below 15 packets per second.
//!
//! Energy is charged above the idle power: what the network's use adds.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use roam_core::{BitRate, Bytes, Time};

use crate::energy::{Joules, Milliwatts};
use crate::profile::RadioProfile;

/// Which way a packet goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// From the device.
    Up,
    /// To the device.
    Down,
}

/// Where the radio is at an instant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RadioState {
    /// Idle: nothing charged.
    Idle,
    /// Promoting out of idle; packets wait.
    Promotion,
    /// In the tail phase of this name (the first of them while packets flow).
    Tail(String),
}

/// The bytes and packets a PowerTutor WiFi radio counts over the last second.
const RATE_WINDOW: Duration = Duration::from_secs(1);

/// One radio's energy model.
#[derive(Clone, Debug)]
pub struct Radio {
    profile: Arc<RadioProfile>,
    /// Energy is accounted up to here.
    now: Time,
    energy: Joules,
    /// A promotion under way ends here.
    promoting_until: Option<Time>,
    /// The last packet (after any promotion) and the tail phase it left the radio in.
    last_activity: Option<(Time, usize)>,
    /// Packet times over the last [`RATE_WINDOW`] (radios with an active packet rate).
    recent: VecDeque<Time>,
    /// Time spent idle and time accounted in all, for the mix of states a demand fetch meets.
    idle_time: Duration,
    accounted: Duration,
    bytes_up: Bytes,
    bytes_down: Bytes,
}

/// The energy of moving `bytes` over `took` in direction `dir` on an idle radio of
/// `profile`: the marginal energy of the transfer at its average rate, promotion and tail
/// included ([`Radio::marginal_energy`] from idle). What a lab or a replay reports as a
/// session's modelled energy.
pub fn transfer_energy(
    profile: Arc<RadioProfile>,
    bytes: u64,
    took: Duration,
    dir: Direction,
) -> Joules {
    let radio = Radio::new(profile, Time::ZERO);
    let bps = ((bytes as f64 * 8.0 / took.as_secs_f64().max(1e-3)) as u64).max(1);
    radio.marginal_energy(Time::ZERO, Bytes(bytes), dir, BitRate::bps(bps))
}

impl Radio {
    /// A radio of `profile`, idle at `now`.
    pub fn new(profile: Arc<RadioProfile>, now: Time) -> Radio {
        Radio {
            profile,
            now,
            energy: Joules::ZERO,
            promoting_until: None,
            last_activity: None,
            recent: VecDeque::new(),
            idle_time: Duration::ZERO,
            accounted: Duration::ZERO,
            bytes_up: Bytes(0),
            bytes_down: Bytes(0),
        }
    }

    /// Its profile.
    pub fn profile(&self) -> &RadioProfile {
        &self.profile
    }

    /// Energy charged so far (up to the last [`Radio::advance`] or packet).
    pub fn energy(&self) -> Joules {
        self.energy
    }

    /// Bytes sent and received so far.
    pub fn bytes(&self) -> (Bytes, Bytes) {
        (self.bytes_up, self.bytes_down)
    }

    /// The state at the last accounted instant.
    pub fn state(&self) -> RadioState {
        self.state_at(self.now)
    }

    /// The power drawn at the last accounted instant (above idle).
    pub fn power(&self) -> Milliwatts {
        self.power_at(self.now)
    }

    fn state_at(&self, t: Time) -> RadioState {
        if self.promoting_until.is_some_and(|p| t < p) {
            return RadioState::Promotion;
        }
        match self.phase_at(t) {
            Some(i) => RadioState::Tail(self.profile.tail[i].name.clone()),
            None => RadioState::Idle,
        }
    }

    fn power_at(&self, t: Time) -> Milliwatts {
        if self.promoting_until.is_some_and(|p| t < p) {
            return self.profile.promotion.map_or(Milliwatts(0.0), |p| p.0);
        }
        self.phase_at(t)
            .map_or(Milliwatts(0.0), |i| self.profile.tail[i].power)
    }

    /// The tail phase at `t`, if the radio is in its tail.
    fn phase_at(&self, t: Time) -> Option<usize> {
        let (last, entry) = self.last_activity?;
        if t < last {
            return Some(entry);
        }
        let mut since = t.saturating_since(last);
        for (i, p) in self.profile.tail.iter().enumerate().skip(entry) {
            if since < p.duration {
                return Some(i);
            }
            since -= p.duration;
        }
        None
    }

    /// Energy of the tail chain left by the last packet, between `from` and `to` (both at or
    /// after the last packet).
    fn tail_energy(&self, from: Time, to: Time) -> Joules {
        let Some((last, entry)) = self.last_activity else {
            return Joules::ZERO;
        };
        let (mut a, b) = (from.saturating_since(last), to.saturating_since(last));
        let mut start = Duration::ZERO;
        let mut e = Joules::ZERO;
        for p in self.profile.tail.iter().skip(entry) {
            let end = start + p.duration;
            if a < end && b > start {
                let lo = a.max(start);
                let hi = b.min(end);
                e += p.power * (hi - lo);
                a = hi;
            }
            start = end;
        }
        e
    }

    /// Account energy up to `now` (timers run out, tails end). Earlier times are ignored.
    pub fn advance(&mut self, now: Time) {
        if now <= self.now {
            return;
        }
        let from = self.now;
        let mut e = Joules::ZERO;
        if let Some(p) = self.promoting_until {
            let end = p.min(now);
            if end > from {
                e += self
                    .profile
                    .promotion
                    .map_or(Joules::ZERO, |(w, _)| w * end.saturating_since(from));
            }
            if now >= p {
                self.promoting_until = None;
            }
        }
        if let Some((last, _)) = self.last_activity {
            let start = from.max(last);
            if now > start {
                e += self.tail_energy(start, now);
            }
        }
        // Time idle, for the mix of states demand fetches meet.
        let tail_end = self.last_activity.map(|(l, entry)| {
            l + self
                .profile
                .tail
                .iter()
                .skip(entry)
                .map(|p| p.duration)
                .sum()
        });
        let busy_until = tail_end
            .unwrap_or(from)
            .max(self.promoting_until.unwrap_or(from));
        if now > busy_until {
            self.idle_time += now.saturating_since(busy_until.max(from));
        }
        self.accounted += now.saturating_since(from);
        self.energy += e;
        self.now = now;
    }

    /// A packet of `bytes` going `dir` at `now`.
    pub fn on_packet(&mut self, now: Time, bytes: Bytes, dir: Direction) {
        self.advance(now);
        let now = self.now;
        match dir {
            Direction::Up => self.bytes_up.0 += bytes.0,
            Direction::Down => self.bytes_down.0 += bytes.0,
        }
        self.energy += self.per_byte_energy(bytes, dir);
        if let Some(pps) = self.profile.active_pps {
            while self
                .recent
                .front()
                .is_some_and(|&t| now.saturating_since(t) >= RATE_WINDOW)
            {
                self.recent.pop_front();
            }
            self.recent.push_back(now);
            // Below the packet rate that raises it, and not raised: the low state.
            if (self.recent.len() as f64) <= pps && self.phase_at(now).is_none() {
                return;
            }
        }
        self.activate(now, self.entry_phase(bytes, dir));
    }

    /// The tail phase a packet of `bytes` going `dir` leaves the radio in.
    fn entry_phase(&self, bytes: Bytes, dir: Direction) -> usize {
        let small = self.profile.small.as_ref().and_then(|s| {
            let limit = match dir {
                Direction::Up => s.up,
                Direction::Down => s.down,
            };
            (bytes.0 <= limit.0).then_some(s.enters)
        });
        let wanted = small.unwrap_or(0);
        // A radio already higher stays there (data in DCH keeps DCH).
        match self.phase_at(self.now) {
            Some(i) => i.min(wanted),
            None if self.promoting_until.is_some() => 0,
            None => wanted,
        }
    }

    /// Activity at `now` leaving the radio in tail phase `entry`: a promotion if it was idle
    /// (and goes to the top phase), the active power for the gap since the last packet when
    /// packets flow back to back, and a tail starting again.
    fn activate(&mut self, now: Time, entry: usize) {
        if let Some(p) = self.promoting_until {
            // Held until the promotion ends.
            self.last_activity = Some((p, 0));
            return;
        }
        if let Some((last, at)) = self.last_activity {
            let gap = now.saturating_since(last);
            if at == 0 && gap < self.profile.tail[0].duration {
                let extra = self.profile.active.0 - self.profile.tail[0].power.0;
                if extra > 0.0 {
                    self.energy += Milliwatts(extra) * gap;
                }
            }
        }
        let idle = self.phase_at(now).is_none();
        match self.profile.promotion {
            Some((_, d)) if idle && entry == 0 => {
                let until = now + d;
                self.promoting_until = Some(until);
                self.last_activity = Some((until, 0));
            }
            _ => self.last_activity = Some((now, entry)),
        }
    }

    /// The energy of moving `bytes` beyond the active power: `a_u` or `a_d` per Mbit.
    fn per_byte_energy(&self, bytes: Bytes, dir: Direction) -> Joules {
        let per_mbps = match dir {
            Direction::Up => self.profile.up_mw_per_mbps,
            Direction::Down => self.profile.down_mw_per_mbps,
        };
        // mW per Mbit/s times Mbit is mJ.
        Joules(per_mbps * bytes.0 as f64 * 8.0 / 1e6 * 1e-3)
    }

    /// A transfer of `bytes` going `dir` at `throughput`, starting at `now`: the radio active
    /// for its length (after a promotion if idle), then a tail from its end.
    pub fn on_transfer(&mut self, now: Time, bytes: Bytes, dir: Direction, throughput: BitRate) {
        self.advance(now);
        let d = throughput.transmit_time(bytes.0).unwrap_or(Duration::ZERO);
        let packets = (bytes.0 as f64 / 1500.0).ceil().max(1.0);
        let fast_enough = match self.profile.active_pps {
            None => true,
            Some(pps) => packets / d.as_secs_f64().max(1e-9) > pps || packets > pps,
        };
        match dir {
            Direction::Up => self.bytes_up.0 += bytes.0,
            Direction::Down => self.bytes_down.0 += bytes.0,
        }
        self.energy += self.per_byte_energy(bytes, dir);
        if !fast_enough && self.phase_at(self.now).is_none() {
            return;
        }
        let entry = self.entry_phase(bytes, dir);
        self.activate(self.now, entry);
        if d > Duration::ZERO {
            // Active from the start (or the promotion's end) for the transfer's length.
            let (start, at) = self.last_activity.expect("activated");
            let p = if at == 0 {
                self.profile.active
            } else {
                self.profile.tail[at].power
            };
            self.energy += p * d;
            // The tail starts at the transfer's end; `advance` charges only from there.
            self.last_activity = Some((start + d, at));
        }
    }

    /// What sending or receiving `bytes` at `throughput`, starting at `now`, would add to the
    /// energy this radio will have spent once its tail has run out: a promotion and a whole
    /// new tail from an idle radio, or only the transfer and the tail's extension from one
    /// already up (IMP's E_prefetch, IMP thesis §3.3). The radio itself is not changed.
    pub fn marginal_energy(
        &self,
        now: Time,
        bytes: Bytes,
        dir: Direction,
        throughput: BitRate,
    ) -> Joules {
        let mut without = self.clone();
        without.advance(now);
        let mut with = without.clone();
        with.on_transfer(now, bytes, dir, throughput);
        let d = throughput.transmit_time(bytes.0).unwrap_or(Duration::ZERO);
        let promotion = self.profile.promotion.map_or(Duration::ZERO, |p| p.1);
        let horizon =
            now.max(self.now) + promotion + d + self.profile.tail_length() + Duration::from_secs(1);
        without.advance(horizon);
        with.advance(horizon);
        with.energy - without.energy
    }

    /// The average energy of a demand fetch of `bytes` at `throughput` (IMP's E_fetch): the
    /// marginal energy from an idle radio and from one whose tail has just begun, weighted by
    /// the fraction of time this radio has been idle so far (all idle before any history).
    pub fn mean_fetch_energy(&self, bytes: Bytes, dir: Direction, throughput: BitRate) -> Joules {
        let idle_share = if self.accounted.is_zero() {
            1.0
        } else {
            self.idle_time.as_secs_f64() / self.accounted.as_secs_f64()
        };
        let t0 = Time::ZERO;
        let idle = Radio::new(self.profile.clone(), t0);
        let mut up = idle.clone();
        up.on_packet(t0, Bytes(1500), dir);
        let after = t0 + self.profile.promotion.map_or(Duration::ZERO, |p| p.1);
        let from_idle = idle.marginal_energy(after, bytes, dir, throughput);
        let from_tail = up.marginal_energy(after, bytes, dir, throughput);
        Joules(idle_share * from_idle.0 + (1.0 - idle_share) * from_tail.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::profile;
    use proptest::prelude::*;

    fn radio(name: &str) -> Radio {
        Radio::new(Arc::new(profile(name).unwrap()), Time::ZERO)
    }

    fn secs(s: f64) -> Time {
        Time::from_secs_f64(s)
    }

    /// Huang et al.'s test of the model: one isolated packet, promotion and tail.
    #[test]
    fn one_isolated_packet_costs_what_huang_et_al_give() {
        for (name, joules, tolerance) in [
            ("huang2012/lte", 12.76, 0.02),
            ("huang2012/3g", 7.38, 0.02),
            // Quoted to one significant figure (0.04 J): promotion and tail give 0.038 J.
            ("huang2012/wifi", 0.04, 0.05),
        ] {
            let mut r = radio(name);
            r.on_packet(secs(1.0), Bytes(100), Direction::Up);
            assert_eq!(r.state(), RadioState::Promotion, "{name}");
            r.advance(secs(100.0));
            assert_eq!(r.state(), RadioState::Idle, "{name}");
            let e = r.energy().0;
            assert!(
                (e - joules).abs() <= joules * tolerance,
                "{name}: {e} J, want {joules} J within {}%",
                tolerance * 100.0
            );
        }
    }

    #[test]
    fn a_packet_in_the_tail_extends_it_instead_of_paying_a_promotion() {
        let mut r = radio("huang2012/3g");
        r.on_packet(secs(0.0), Bytes(1000), Direction::Down);
        r.on_packet(secs(2.0), Bytes(1000), Direction::Down);
        r.advance(secs(60.0));
        let two = r.energy().0;
        // One promotion, the active power from its end to the second packet, and one tail.
        // (And 2000 bytes down at a_d = 122.12 mW per Mbit/s.)
        let want = 0.6594 * 0.5821
            + (2.0 - 0.5821) * 0.81788
            + 0.8039 * 8.0882
            + 0.6013 * 0.8242
            + 122.12 * 0.016e-3;
        assert!((two - want).abs() < 0.001, "{two} vs {want}");
        // PowerTutor's 3G: a small packet reaches FACH only, a large one DCH.
        let mut small = radio("powertutor-nexus-one/3g-att");
        small.on_packet(secs(0.0), Bytes(100), Direction::Up);
        assert_eq!(small.state(), RadioState::Tail("FACH".into()));
        small.advance(secs(100.0));
        assert!(
            (small.energy().0 - 0.40581 * 12.0).abs() < 1e-6,
            "{}",
            small.energy()
        );
        let mut large = radio("powertutor-nexus-one/3g-att");
        large.on_packet(secs(0.0), Bytes(1000), Direction::Up);
        assert_eq!(large.state(), RadioState::Tail("DCH".into()));
        // WiFi under PowerTutor: a lone packet leaves it low; a burst raises it.
        let mut wifi = radio("powertutor-nexus-one/wifi");
        wifi.on_packet(secs(0.0), Bytes(1500), Direction::Down);
        assert_eq!(wifi.state(), RadioState::Idle);
        for k in 0..20 {
            wifi.on_packet(secs(1.0 + k as f64 * 0.01), Bytes(1500), Direction::Down);
        }
        assert_eq!(wifi.state(), RadioState::Tail("high".into()));
    }

    #[test]
    fn a_transfer_costs_less_at_the_start_of_a_tail_than_from_idle() {
        let r = radio("huang2012/lte");
        let rate = BitRate::mbps(10);
        let cold = r.marginal_energy(secs(1.0), Bytes(100_000), Direction::Down, rate);
        let mut warm = r.clone();
        warm.on_packet(secs(0.0), Bytes(100), Direction::Up);
        let hot = warm.marginal_energy(secs(1.0), Bytes(100_000), Direction::Down, rate);
        assert!(cold.0 > 12.0 && hot.0 < 3.0, "cold {cold}, warm {hot}");
        // The marginal energy does not change the radio.
        assert_eq!(warm.energy(), {
            let mut w = radio("huang2012/lte");
            w.on_packet(secs(0.0), Bytes(100), Direction::Up);
            w.energy()
        });
        // A demand fetch's mean energy follows the mix of states: all idle at first.
        let fresh = r.mean_fetch_energy(Bytes(100_000), Direction::Down, rate);
        assert!((fresh.0 - cold.0).abs() < 1e-9, "{fresh} vs {cold}");
    }

    proptest! {
        /// Energy never decreases, whatever the packets and however time is sampled.
        #[test]
        fn energy_never_decreases(
            events in prop::collection::vec((0u64..30_000, 1u64..70_000, any::<bool>()), 1..60),
            which in 0usize..4,
        ) {
            let name = ["huang2012/lte", "huang2012/3g", "powertutor-nexus-one/3g-att",
                "powertutor-nexus-one/wifi"][which];
            let mut r = radio(name);
            let mut t = 0u64;
            let mut last = Joules::ZERO;
            for (gap, bytes, up) in events {
                t += gap;
                let dir = if up { Direction::Up } else { Direction::Down };
                r.on_packet(Time::from_millis(t), Bytes(bytes), dir);
                prop_assert!(r.energy() >= last);
                last = r.energy();
                r.advance(Time::from_millis(t + gap / 2));
                prop_assert!(r.energy() >= last);
                last = r.energy();
            }
        }

        /// Two transfers sent together never cost more than the same two a tail apart.
        #[test]
        fn batching_never_costs_more(
            a in 1u64..2_000_000, b in 1u64..2_000_000, which in 0usize..4,
        ) {
            let name = ["huang2012/lte", "huang2012/3g", "huang2012/wifi",
                "powertutor-nexus-one/3g-att"][which];
            let rate = BitRate::mbps(2);
            let p = radio(name);
            let apart = p.profile().tail_length() + Duration::from_secs(5);
            let mut batched = p.clone();
            batched.on_transfer(secs(1.0), Bytes(a), Direction::Down, rate);
            batched.on_transfer(secs(1.0), Bytes(b), Direction::Down, rate);
            let mut spread = p.clone();
            spread.on_transfer(secs(1.0), Bytes(a), Direction::Down, rate);
            spread.on_transfer(secs(1.0) + apart, Bytes(b), Direction::Down, rate);
            let end = secs(1.0) + apart * 3;
            batched.advance(end);
            spread.advance(end);
            prop_assert!(batched.energy().0 <= spread.energy().0 + 1e-9,
                "batched {} spread {}", batched.energy(), spread.energy());
        }
    }
}
