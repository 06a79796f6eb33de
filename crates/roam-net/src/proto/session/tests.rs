use super::*;
use crate::proto::wire::{Deps, Frame, HaveEntry};
use roam_core::BitRate;
use std::time::Duration;

/// A client session with two established connections, as on the crowded hotspot: conn 1 on
/// WiFi (20 ms, 0.6 Mbit/s), conn 2 on 3G (400 ms, 2 Mbit/s). `bw` gives each bandwidth
/// estimate, if any. Both were just probed (no probe frames queue ahead of the data).
pub(super) fn hotspot(bw: [Option<u64>; 2]) -> Session {
    let now = Time::ZERO;
    let mut s = Session::client(Config::default(), 1);
    for (net, rtt, bw) in [(1, 20, bw[0]), (2, 400, bw[1])] {
        s.network_up(net, [10, 0, net as u8, 2].into(), NetKind::default(), now);
        let n = s.networks.get_mut(&net).unwrap();
        n.estimate.rtt_sample(Duration::from_millis(rtt));
        if let Some(b) = bw {
            n.estimate.bandwidth_sample(BitRate::bps(b));
        }
        let mut c = Conn::new(net, ConnState::Established, now);
        c.last_probe = Some(now);
        s.conns.insert(net as ConnId, Box::new(c));
    }
    s.established = true;
    while s.poll_event().is_some() {}
    s
}

fn queue_small_irobs(s: &mut Session, n: usize, len: usize) {
    for _ in 0..n {
        let id = s
            .begin_irob(Label::ForegroundSmall, Deps::List(vec![]), None, Time::ZERO)
            .unwrap();
        s.irob_send(id, Bytes::from(vec![7u8; len])).unwrap();
        s.end_irob(id).unwrap();
    }
}

/// Poll both connections in turn (as their writers would) until neither has data to send;
/// how many data frames each took.
fn drain(s: &mut Session) -> [usize; 2] {
    let mut took = [0, 0];
    loop {
        let mut any = false;
        for conn in [1, 2] {
            // The next data frame (control frames and probes aside).
            while let Some(t) = s.poll_transmit(conn, Time::ZERO, 0) {
                if !t.data.is_empty() {
                    took[conn as usize - 1] += 1;
                    any = true;
                    break;
                }
            }
        }
        if !any {
            return took;
        }
    }
}

#[test]
fn a_lone_small_irob_takes_the_lowest_latency_network() {
    let mut s = hotspot([Some(600_000), Some(2_000_000)]);
    queue_small_irobs(&mut s, 1, 4096);
    assert_eq!(drain(&mut s), [1, 0]);
}

#[test]
fn a_burst_of_small_irobs_spills_over_to_the_network_that_delivers_it_sooner() {
    // 32 blocks of 4 KB: on the WiFi alone the last would arrive after 10 + 32 x 55 ms
    // (one way); 3G delivers a block 200 + 16 ms after it is queued, so the tail goes there.
    for reported in [false, true] {
        let mut s = hotspot([Some(600_000), Some(2_000_000)]);
        if reported {
            s.kernel_queue(1, kq(0, 0));
            s.kernel_queue(2, kq(0, 0));
        }
        queue_small_irobs(&mut s, 32, 4096);
        let [wifi, cell] = drain(&mut s);
        assert_eq!(wifi + cell, 32);
        // Equal arrival: 10 + 55 k = 200 + 16 (32 - k), k about 9.9.
        assert!((8..=12).contains(&wifi), "wifi {wifi}, cell {cell}");
    }
}

fn kq(in_flight: u64, unsent: u64) -> KernelQueue {
    KernelQueue {
        in_flight,
        unsent,
        timed_out: false,
    }
}

#[test]
fn bytes_in_flight_within_the_pipe_do_not_delay_a_small_irob() {
    // 3G (2 Mbit/s, 400 ms: a 100 KB pipe) busy with background data in flight: a block
    // written now still arrives 200 + 16 ms later, so the burst splits as on an idle 3G.
    // The same bytes not yet sent are all ahead: 400 ms more on 3G, more on the WiFi.
    // Equal arrival: 10 + 55 k = 600 + 16 (32 - k), k about 15.5.
    for (cell, on_wifi) in [(kq(100_000, 0), 8..=12), (kq(0, 100_000), 14..=17)] {
        let mut s = hotspot([Some(600_000), Some(2_000_000)]);
        s.kernel_queue(1, kq(0, 0));
        s.kernel_queue(2, cell);
        queue_small_irobs(&mut s, 32, 4096);
        let [wifi, _] = drain(&mut s);
        assert!(on_wifi.contains(&wifi), "{cell:?}: wifi {wifi}");
    }
}

#[test]
fn a_network_without_a_bandwidth_estimate_counts_only_while_its_queue_is_empty() {
    let mut s = hotspot([Some(600_000), None]);
    s.kernel_queue(1, kq(0, 0));
    s.kernel_queue(2, kq(0, 0));
    // 3G empty: counted by its one-way delay, so it takes a block past 200 ms.
    queue_small_irobs(&mut s, 32, 4096);
    let [wifi, cell] = drain(&mut s);
    assert!(cell > 0 && wifi >= 7, "wifi {wifi}, cell {cell}");
    // 3G holding 256 KB of unknown duration: everything stays on the WiFi.
    let mut s = hotspot([Some(600_000), None]);
    s.kernel_queue(1, kq(0, 0));
    s.kernel_queue(2, kq(256 * 1024, 0));
    queue_small_irobs(&mut s, 32, 4096);
    assert_eq!(drain(&mut s), [32, 0]);
}

#[test]
fn an_unmeasured_network_takes_little_background_data_beyond_an_unqueued_window() {
    let s = hotspot([Some(600_000), None]);
    let now = Time::ZERO;
    let window = |slow_start, queue_built| {
        Some(KernelWindow {
            cwnd: 64 * 1024,
            slow_start,
            queue_built,
        })
    };
    // 3G has no bandwidth estimate: a modest cap, or TCP's window while no queue has built
    // (in slow start, or after HyStart ended it without a loss).
    assert_eq!(s.background_cap(2, now, None), UNMEASURED_CAP);
    assert_eq!(s.background_cap(2, now, window(true, false)), 64 * 1024);
    assert_eq!(s.background_cap(2, now, window(false, false)), 64 * 1024);
    assert_eq!(s.background_cap(2, now, window(true, true)), UNMEASURED_CAP);
    assert_eq!(
        s.background_cap(2, now, window(false, true)),
        UNMEASURED_CAP
    );
    // Measured WiFi (0.6 Mbit/s, 20 ms; no foreground yet: a 1 s budget): its pipe, or the
    // window while the kernel still probes.
    assert_eq!(s.background_cap(1, now, None), 76_500);
    assert_eq!(s.background_cap(1, now, window(false, false)), 76_500);
    assert_eq!(s.background_cap(1, now, window(true, true)), 76_500);
    let big = Some(KernelWindow {
        cwnd: 1 << 20,
        slow_start: true,
        queue_built: false,
    });
    assert_eq!(s.background_cap(1, now, big), 1 << 20);
}

#[test]
fn an_unsaturated_throughput_sample_only_raises_an_estimate() {
    let mut s = hotspot([None, None]);
    // A trickle of small requests: 2 kbit/s, path not saturated. Not an estimate.
    s.estimate_sample(1, None, Some(BitRate::bps(2_000)), PathLoad::Light);
    assert_eq!(s.networks[&1].estimate.bandwidth(), None);
    // Saturated: it is the bandwidth.
    s.estimate_sample(1, None, Some(BitRate::bps(500_000)), PathLoad::Saturated);
    let bw = |s: &Session| s.networks[&1].estimate.bandwidth().unwrap().as_bps();
    assert_eq!(bw(&s), 500_000);
    // A lower bound above it raises it; one below does not lower it.
    s.estimate_sample(1, None, Some(BitRate::bps(100_000)), PathLoad::Light);
    s.estimate_sample(1, None, Some(BitRate::bps(100_000)), PathLoad::Backlogged);
    assert_eq!(bw(&s), 500_000);
    s.estimate_sample(1, None, Some(BitRate::bps(900_000)), PathLoad::Light);
    assert!(bw(&s) > 500_000);
    // A sender that kept its socket full without building a queue (loopback, or our own
    // cap) gives a first estimate.
    s.estimate_sample(
        2,
        None,
        Some(BitRate::bps(40_000_000)),
        PathLoad::Backlogged,
    );
    assert_eq!(
        s.networks[&2].estimate.bandwidth(),
        Some(BitRate::bps(40_000_000))
    );
}

/// Per-label policy: with only a metered network, the labels whose policy keeps them off
/// metered networks cannot be sent (and are deferred), the others can; a label's own backlog
/// bound applies to it alone.
#[test]
fn each_label_follows_its_own_policy() {
    let mut s = hotspot([Some(600_000), Some(2_000_000)]);
    for n in s.networks.values_mut() {
        n.kind.metered = true;
    }
    s.config.policy_mut(Label::BackgroundLarge).metered = false;
    s.config.policy_mut(Label::ForegroundLarge).metered = false;
    assert!(s.can_send(Label::ForegroundSmall));
    assert!(s.can_send(Label::BackgroundSmall));
    assert!(!s.can_send(Label::BackgroundLarge));
    assert!(!s.can_send(Label::ForegroundLarge));
    assert_eq!(
        s.begin_irob(
            Label::BackgroundLarge,
            Deps::List(vec![]),
            Some(9),
            Time::ZERO
        ),
        Err(SendError::Deferred(Label::BackgroundLarge))
    );
    // A tiny bound on background-small: its 100 KB backlog defers the next one, while
    // foreground-small's default bound still takes more.
    s.config.policy_mut(Label::BackgroundSmall).backlog_bound = Duration::from_nanos(1);
    let id = s
        .begin_irob(Label::BackgroundSmall, Deps::List(vec![]), None, Time::ZERO)
        .unwrap();
    s.irob_send(id, Bytes::from(vec![0u8; 100_000])).unwrap();
    assert!(!s.can_send(Label::BackgroundSmall));
    assert!(s.can_send(Label::ForegroundSmall));
}

/// A writer held back by the cap sleeps a quarter of the anticipatory budget (the pipe stays
/// full meanwhile), not a fixed 2 ms; on an unmeasured network, 5 ms.
#[test]
fn a_capped_writer_sleeps_a_quarter_of_the_budget() {
    let mut s = hotspot([Some(600_000), None]);
    let now = Time::ZERO + Duration::from_secs(100);
    // No foreground seen yet: the budget is 1 s, the wait its most, 100 ms.
    assert_eq!(s.background_recheck(1, now), Duration::from_millis(100));
    s.last_foreground = Some(now);
    assert_eq!(s.background_recheck(1, now), Duration::from_micros(12_500));
    assert_eq!(s.background_recheck(2, now), Duration::from_millis(5));
}

/// TCP_INFO readings become throughput samples over at least `THROUGHPUT_INTERVAL`, at the
/// lighter of the path's loads at the interval's ends; a socket held back by this side's cap
/// counts as backlogged, so a capped network gets a first estimate.
#[test]
fn tcp_info_readings_become_throughput_samples() {
    let mut s = hotspot([None, None]);
    let at = |ms| Time::ZERO + Duration::from_millis(ms);
    let read = |acked, load, held_by_cap| TcpSample {
        min_rtt: Some(Duration::from_millis(15)),
        srtt: None,
        bytes_acked: acked,
        load,
        held_by_cap,
    };
    let bw = |s: &Session, net| s.networks[&net].estimate.bandwidth().map(|b| b.as_bps());
    s.tcp_sample(1, at(0), read(0, PathLoad::Saturated, false));
    // 100 ms later: too short an interval for a throughput.
    s.tcp_sample(1, at(100), read(10_000, PathLoad::Saturated, false));
    assert_eq!(bw(&s, 1), None);
    // 250 ms after the start, saturated throughout: 50 KB in 250 ms is 1.6 Mbit/s.
    s.tcp_sample(1, at(250), read(50_000, PathLoad::Saturated, false));
    assert_eq!(bw(&s, 1), Some(1_600_000));
    // The RTT came with every reading (the filter moves from the hotspot's 20 ms toward 15).
    assert!(s.networks[&1].estimate.rtt().unwrap() < Duration::from_millis(20));
    // Light at the start of the next interval: the interval is light, a lower bound that
    // does not lower the estimate.
    s.tcp_sample(2, at(0), read(0, PathLoad::Light, false));
    s.tcp_sample(2, at(300), read(30_000, PathLoad::Light, false));
    assert_eq!(bw(&s, 2), None, "a light interval gives no first estimate");
    // Held back by the cap: backlogged, which gives a first estimate.
    s.tcp_sample(2, at(600), read(60_000, PathLoad::Light, true));
    assert_eq!(bw(&s, 2), None, "the interval began light");
    s.tcp_sample(2, at(900), read(90_000, PathLoad::Light, true));
    assert_eq!(bw(&s, 2), Some(800_000));
}

/// The resend requests the connections would send at `now` (control frames of both).
fn questions(s: &mut Session, now: Time) -> Vec<Vec<IrobId>> {
    s.handle_timeout(now);
    let mut asked = Vec::new();
    for conn in [1, 2] {
        while let Some(t) = s.poll_transmit(conn, now, 0) {
            let mut dec = super::super::Decoder::default();
            dec.push(&t.head);
            dec.push(&t.data);
            if let Ok(Some(Frame::ResendRequest { irobs })) = dec.next_frame() {
                asked.push(irobs);
            }
        }
    }
    asked
}

/// The peer's acknowledgement went out on a connection that broke before the peer
/// noticed: this side sees no break, so it asks after `ack_timeout`, and asks again if
/// that question goes unanswered as long.
#[test]
fn a_lost_acknowledgement_is_asked_about_after_the_ack_timeout() {
    let mut s = hotspot([Some(600_000), Some(2_000_000)]);
    s.config.policy_mut(Label::ForegroundSmall).hedge = false; // a hedge would resend it long before

    queue_small_irobs(&mut s, 1, 100);
    assert_eq!(drain(&mut s).iter().sum::<usize>(), 1);
    let t = s.config.ack_timeout;
    let at = Time::ZERO + t;
    assert_eq!(
        s.poll_timeout(),
        Some(at.min(Time::ZERO + s.config.probe_interval))
    );
    assert!(questions(&mut s, Time::ZERO + (t - Duration::from_millis(1))).is_empty());
    assert_eq!(questions(&mut s, at), vec![vec![0]]);
    assert!(questions(&mut s, at + (t - Duration::from_millis(1))).is_empty());
    assert_eq!(questions(&mut s, at + t), vec![vec![0]]);
    // The answer: the peer has it all. Nothing more is asked.
    s.on_have(
        HaveEntry {
            irob: 0,
            complete: true,
            first: true,
            end: Some(100),
            ranges: vec![(0, 100)],
        },
        Time::ZERO,
    );
    assert_eq!(s.unacknowledged(), 0);
    assert!(questions(&mut s, at + t * 3).is_empty());
}

/// Whether `conn` would send an active probe at `now`.
pub(super) fn probes(s: &mut Session, conn: ConnId, now: Time) -> bool {
    while let Some(t) = s.poll_transmit(conn, now, 0) {
        let mut dec = super::super::Decoder::default();
        dec.push(&t.head);
        dec.push(&t.data);
        if let Ok(Some(Frame::Probe { .. })) = dec.next_frame() {
            return true;
        }
    }
    false
}

/// Every frame `conn` would send at `now` with `room` bytes of background room.
fn frames_on(s: &mut Session, conn: ConnId, now: Time, room: u64) -> Vec<Frame> {
    let mut frames = Vec::new();
    while let Some(t) = s.poll_transmit(conn, now, room) {
        let mut dec = super::super::Decoder::default();
        dec.push(&t.head);
        dec.push(&t.data);
        while let Ok(Some(f)) = dec.next_frame() {
            frames.push(f);
        }
    }
    frames
}

/// The IROBs of the data frames `conn` would send at `now`.
pub(super) fn data_on(s: &mut Session, conn: ConnId, now: Time) -> Vec<IrobId> {
    frames_on(s, conn, now, u64::MAX)
        .into_iter()
        .filter_map(|f| match f {
            Frame::Data(c) => Some(c.irob),
            _ => None,
        })
        .collect()
}

/// Every connection of a client carries an `Estimate` once a second, the idle one too (a
/// frame in flight there is what lets its kernel report a network that vanished), even
/// when the busy connection's writer always asks first.
#[test]
fn every_connection_carries_an_estimate_each_second() {
    let mut s = hotspot([Some(600_000), Some(2_000_000)]);
    let mut estimates = [0, 0];
    for step in 0..=15 {
        let now = Time::from_millis(200 * step);
        for conn in [2, 1] {
            estimates[conn as usize - 1] += frames_on(&mut s, conn, now, 0)
                .iter()
                .filter(|f| matches!(f, Frame::Estimate { .. }))
                .count();
        }
    }
    // At 0, 1, 2 and 3 s on each.
    assert_eq!(estimates, [4, 4]);
}

/// A small foreground IROB unacknowledged past the hedge delay is sent once more over the
/// other network (the WiFi it went on may have vanished without a break yet); a large one
/// and background ones are not, and neither is anything with hedging off.
#[test]
fn a_late_small_foreground_irob_is_sent_again_over_the_other_network() {
    for hedge in [true, false] {
        let mut s = hotspot([Some(600_000), Some(2_000_000)]);
        s.config.policy_mut(Label::ForegroundSmall).hedge = hedge;
        queue_small_irobs(&mut s, 1, 100);
        for label in [Label::BackgroundSmall, Label::ForegroundLarge] {
            let id = s
                .begin_irob(label, Deps::List(vec![]), None, Time::ZERO)
                .unwrap();
            s.irob_send(id, Bytes::from(vec![7u8; 100])).unwrap();
            s.end_irob(id).unwrap();
        }
        let mut first = data_on(&mut s, 1, Time::ZERO);
        first.extend(data_on(&mut s, 2, Time::ZERO));
        first.sort();
        assert_eq!(first, vec![0, 1, 2]);
        // WiFi's 20 ms there, up to the largest RTT (3G's 400 ms) back, plus 100 ms.
        let due = Time::from_millis(520);
        if hedge {
            assert_eq!(s.poll_timeout(), Some(due), "the hedge's timer");
        }
        let early = Time::from_millis(519);
        s.handle_timeout(early);
        assert!(data_on(&mut s, 2, early).is_empty());
        s.handle_timeout(due);
        let again = data_on(&mut s, 2, due);
        assert_eq!(again, if hedge { vec![0] } else { vec![] });
        assert_eq!(s.hedges_sent(), u64::from(hedge));
        // Once only.
        let later = due + Duration::from_secs(1);
        s.handle_timeout(later);
        assert!(data_on(&mut s, 1, later).is_empty());
        assert!(data_on(&mut s, 2, later).is_empty());
        assert_eq!(s.hedges_sent(), u64::from(hedge), "counted once");
        s.on_ack(0, Time::ZERO);
        assert_eq!(s.unacknowledged(), 200, "bytes of the other two");
    }
}

/// After a hedge, new small foreground IROBs avoid the connection the late one went on
/// (a WiFi that vanished stalls silently) until something arrives on it, or for
/// `SUSPECT_FOR`.
#[test]
fn a_connection_that_needed_a_hedge_is_avoided_until_heard_from() {
    let mut s = hotspot([Some(600_000), Some(2_000_000)]);
    assert_eq!(send_one(&mut s, Time::ZERO), "wifi");
    let due = Time::from_millis(520);
    s.handle_timeout(due);
    assert_eq!(data_on(&mut s, 2, due), vec![0], "the hedge");
    assert_eq!(send_one(&mut s, due), "cell", "the WiFi is suspect");
    // Something arrives on the WiFi: it is alive.
    let heard = due + Duration::from_millis(100);
    s.handle_frame(1, Frame::Ack { acks: vec![] }, heard);
    assert_eq!(send_one(&mut s, heard), "wifi");
    // Suspect again after another late one, then trusted again once SUSPECT_FOR passes.
    let due2 = heard + Duration::from_millis(520);
    s.handle_timeout(due2);
    let _ = data_on(&mut s, 2, due2);
    assert_eq!(send_one(&mut s, due2), "cell");
    // (That IROB's own hedge, back over the WiFi, is due in 520 ms: acknowledge it.)
    s.on_ack(3, Time::ZERO);
    let after = due2 + SUSPECT_FOR;
    assert_eq!(send_one(&mut s, after), "wifi");
}

/// Which network a new small foreground IROB sent at `now` went over.
fn send_one(s: &mut Session, now: Time) -> &'static str {
    queue_small_irobs(s, 1, 100);
    let (wifi, cell) = (data_on(s, 1, now), data_on(s, 2, now));
    match (wifi.len(), cell.len()) {
        (1, 0) => "wifi",
        (0, 1) => "cell",
        other => panic!("{other:?}"),
    }
}

/// The lab's vehicular sensing story: the WiFi vanishes silently with an urgent message in
/// it, which is hedged over 3G; the next one goes over 3G, which delivers it but whose
/// acknowledgement is late. It is not hedged into the WiFi, silent longer than the 3G,
/// until the WiFi's suspicion lapses, so the 3G does not become suspect and the third
/// message goes over it too.
#[test]
fn a_late_irob_is_not_hedged_into_a_connection_silent_longer() {
    let mut s = hotspot([Some(600_000), Some(2_000_000)]);
    assert_eq!(send_one(&mut s, Time::ZERO), "wifi");
    let due = Time::from_millis(520);
    s.handle_timeout(due);
    assert_eq!(data_on(&mut s, 2, due), vec![0], "the hedge");
    let heard = Time::from_millis(600);
    s.handle_frame(2, Frame::Ack { acks: vec![0] }, heard);
    assert_eq!(send_one(&mut s, heard), "cell", "the WiFi is suspect");
    // Its hedge would be due after 400 + 400 + 100 ms; the only other connection is the
    // suspect WiFi, silent since before the 3G was last heard: not until it lapses.
    let lapse = due + SUSPECT_FOR;
    assert_eq!(
        s.poll_timeout(),
        Some(lapse),
        "the hedge waits for the WiFi"
    );
    let late = heard + Duration::from_millis(900);
    s.handle_timeout(late);
    assert!(data_on(&mut s, 1, late).is_empty(), "hedged into the WiFi");
    assert_eq!(s.hedges_sent(), 1);
    assert_eq!(send_one(&mut s, late), "cell", "the 3G was made suspect");
    // Once the WiFi's suspicion lapses both are hedged there after all.
    s.handle_timeout(lapse);
    assert_eq!(data_on(&mut s, 1, lapse), vec![1, 2]);
    assert_eq!(s.hedges_sent(), 3);
}

/// Of two suspect connections, a new small foreground IROB takes the one heard from more
/// recently.
#[test]
fn of_two_suspects_the_one_heard_from_last_is_preferred() {
    let mut s = hotspot([Some(600_000), Some(2_000_000)]);
    let now = Time::from_millis(3000);
    for (conn, heard) in [(1, 500), (2, 2500)] {
        let c = s.conns.get_mut(&conn).unwrap();
        c.suspect_since = Some(Time::from_millis(2900));
        c.heard = Time::from_millis(heard);
    }
    assert_eq!(send_one(&mut s, now), "cell");
    s.on_ack(0, Time::ZERO);
    s.conns.get_mut(&1).unwrap().heard = Time::from_millis(2600);
    assert_eq!(send_one(&mut s, now), "wifi");
}

/// A connection whose kernel reports a retransmission timeout for data in flight is
/// avoided by new small foreground IROBs until a report says otherwise.
#[test]
fn a_connection_in_retransmission_timeout_is_avoided() {
    let mut s = hotspot([Some(600_000), Some(2_000_000)]);
    let stalled = KernelQueue {
        in_flight: 88,
        unsent: 0,
        timed_out: true,
    };
    s.kernel_queue(1, stalled);
    assert_eq!(send_one(&mut s, Time::ZERO), "cell");
    // Nor is a late one hedged into it, while the kernel says so.
    assert_eq!(s.poll_timeout(), Some(Time::ZERO + s.config.probe_interval));
    let late = Time::from_millis(900);
    s.handle_timeout(late);
    assert!(
        data_on(&mut s, 1, late).is_empty(),
        "hedged into the stalled WiFi"
    );
    s.on_ack(0, Time::ZERO);
    s.kernel_queue(1, kq(0, 0));
    assert_eq!(send_one(&mut s, Time::ZERO), "wifi");
}

/// A small foreground IROB in flight only on a connection that breaks is sent again at
/// once over another, without asking the peer what it has (a round trip); a background
/// one in flight there is asked about as before.
#[test]
fn a_small_foreground_irob_on_a_broken_connection_is_sent_again_at_once() {
    let mut s = hotspot([Some(600_000), Some(2_000_000)]);
    assert_eq!(send_one(&mut s, Time::ZERO), "wifi");
    let id = s
        .begin_irob(Label::BackgroundSmall, Deps::List(vec![]), None, Time::ZERO)
        .unwrap();
    s.irob_send(id, Bytes::from(vec![7u8; 100])).unwrap();
    s.end_irob(id).unwrap();
    let mut bg = data_on(&mut s, 1, Time::ZERO);
    bg.extend(data_on(&mut s, 2, Time::ZERO));
    assert_eq!(bg, vec![1]);
    let broke = Time::from_millis(100);
    s.connection_closed(1, broke);
    s.handle_timeout(broke);
    assert_eq!(
        data_on(&mut s, 2, broke),
        vec![0],
        "the urgent one, at once"
    );
    assert!(s.doubt.contains(&1), "the background one is asked about");
    assert!(!s.doubt.contains(&0));
}

/// An IROB of `label` whole in one chunk, depending on nothing, as the peer sends it.
pub(super) fn whole_irob(irob: IrobId, label: Label, data: Bytes) -> Frame {
    Frame::Data(super::super::wire::Chunk {
        irob,
        label,
        offset: 0,
        deps: Some(Deps::List(vec![])),
        end: true,
        acks: vec![],
        data,
    })
}

/// What one poll of connection `conn` at `now` sends: the IROBs acknowledged by `Ack` frames
/// and those acknowledged by data chunks.
fn acks_sent(s: &mut Session, conn: ConnId, now: Time) -> (Vec<IrobId>, Vec<IrobId>) {
    let (mut alone, mut riding) = (Vec::new(), Vec::new());
    while let Some(t) = s.poll_transmit(conn, now, u64::MAX) {
        let mut dec = super::super::Decoder::default();
        dec.push(&t.head);
        dec.push(&t.data);
        while let Ok(Some(f)) = dec.next_frame() {
            match f {
                Frame::Ack { acks } => alone.extend(acks),
                Frame::Data(c) => riding.extend(c.acks),
                _ => {}
            }
        }
    }
    (alone, riding)
}

/// Issue 48: acknowledgements are coalesced. One ride on the next data chunk to the peer (a
/// request's in its answer); without data they go out alone once the oldest has waited
/// `Config::ack_delay` (a deadline `poll_timeout` reports), or at once when they acknowledge
/// `ACK_BYTES` of payload.
#[test]
fn acknowledgements_ride_on_data_or_wait_for_the_ack_delay() {
    let mut s = hotspot([Some(600_000), Some(2_000_000)]);
    let chunk = |irob, len| whole_irob(irob, Label::ForegroundSmall, Bytes::from(vec![1u8; len]));
    let t0 = Time::ZERO + Duration::from_secs(1);
    let delay = s.config.ack_delay;
    // A request, and its answer a moment later: the acknowledgement rides on the answer.
    s.handle_frame(1, chunk(0, 100), t0);
    assert_eq!(
        acks_sent(&mut s, 1, t0),
        (vec![], vec![]),
        "sent before due"
    );
    assert_eq!(s.ack_deadline(), Some(t0 + delay));
    assert!(s.poll_timeout().is_some_and(|t| t <= t0 + delay));
    let now = t0 + delay / 2;
    s.send(
        Label::ForegroundSmall,
        Bytes::from_static(b"answer"),
        None,
        now,
    )
    .unwrap();
    assert_eq!(acks_sent(&mut s, 1, now), (vec![], vec![0]));
    assert_eq!(s.ack_deadline(), None);
    // No answer: alone once due.
    s.handle_frame(1, chunk(1, 100), t0 + delay);
    s.handle_frame(1, chunk(2, 100), t0 + delay * 3 / 2);
    assert_eq!(acks_sent(&mut s, 1, t0 + delay * 3 / 2), (vec![], vec![]));
    assert_eq!(acks_sent(&mut s, 1, t0 + delay * 2), (vec![1, 2], vec![]));
    // A bulk chunk's acknowledgement goes at once: the sender's window.
    s.handle_frame(1, chunk(3, ACK_BYTES as usize), t0 + delay * 3);
    assert_eq!(acks_sent(&mut s, 1, t0 + delay * 3), (vec![3], vec![]));
}

/// The receiver delivers the first copy of a hedged IROB and ignores the second, but
/// acknowledges it again (the first acknowledgement may have gone out on a dead network).
#[test]
fn a_second_copy_is_not_delivered_but_acknowledged_again() {
    let mut s = hotspot([Some(600_000), Some(2_000_000)]);
    let chunk = || whole_irob(0, Label::ForegroundSmall, Bytes::from_static(b"brake"));
    // Polled when the coalesced acknowledgements are due (`Config::ack_delay`).
    let acks = |s: &mut Session, conn| {
        let at = s.ack_deadline().unwrap_or(Time::ZERO);
        let alone = acks_sent(s, conn, at).0;
        alone.iter().filter(|&&a| a == 0).count()
    };
    s.handle_frame(1, chunk(), Time::ZERO);
    assert_eq!(acks(&mut s, 1), 1);
    let d = s.recv(Time::ZERO).expect("the first copy is delivered");
    assert_eq!((d.irob, &d.data[..], d.end), (0, &b"brake"[..], true));
    assert_eq!(s.duplicate_bytes(), 0);
    s.handle_frame(2, chunk(), Time::ZERO);
    assert!(
        s.recv(Time::ZERO).is_none(),
        "the second copy was delivered"
    );
    assert_eq!(acks(&mut s, 2), 1);
    assert_eq!(s.duplicate_bytes(), 5, "the second copy's bytes");
    // A resend overlapping bytes already held counts only the overlap.
    let part = |data: &'static [u8], end| {
        Frame::Data(super::super::wire::Chunk {
            irob: 1,
            label: Label::BackgroundLarge,
            offset: 0,
            deps: Some(Deps::List(vec![])),
            end,
            acks: vec![],
            data: Bytes::from_static(data),
        })
    };
    s.handle_frame(1, part(b"abc", false), Time::ZERO);
    s.handle_frame(2, part(b"abcdef", true), Time::ZERO);
    assert_eq!(s.duplicate_bytes(), 5 + 3);
}

/// Estimates and probes `conn` sends, polled every 200 ms over `[from, to]`.
fn chatter(s: &mut Session, conn: ConnId, from: Time, to: Time) -> (usize, usize) {
    let (mut estimates, mut probes) = (0, 0);
    let mut now = from;
    while now <= to {
        for f in frames_on(s, conn, now, 0) {
            match f {
                Frame::Estimate { .. } => estimates += 1,
                Frame::Probe { .. } => probes += 1,
                _ => {}
            }
        }
        now = now + Duration::from_millis(200);
    }
    (estimates, probes)
}

/// An idle cellular connection carries nothing of roam-net's own: no estimate each second, no
/// probe each 10 s (each would cost the radio a promotion and a tail, `NetKind::cellular`),
/// while the WiFi one beside it keeps both. A change of the client's networks still goes out
/// over it at once, and so do estimates while data flows over it.
#[test]
fn an_idle_cellular_connection_stays_quiet() {
    let mut s = hotspot([Some(600_000), Some(2_000_000)]);
    s.networks.get_mut(&2).unwrap().kind.cellular = true;
    let minute = Time::from_millis(60_000);
    // The WiFi: an estimate a second; a probe (two frames) once idle for 10 s, and no other
    // while it goes unanswered.
    assert_eq!(chatter(&mut s, 1, Time::ZERO, minute), (61, 2), "WiFi");
    // Only the estimate of the connection's first second (it had just opened).
    assert_eq!(chatter(&mut s, 2, Time::ZERO, minute), (1, 0), "3G");

    // The WiFi goes: the server hears of it over the 3G, once.
    s.network_down(1, minute);
    let later = minute + Duration::from_secs(10);
    assert_eq!(chatter(&mut s, 2, minute, later), (1, 0));

    // Data flows over the 3G: estimates ride with it.
    queue_small_irobs(&mut s, 1, 100);
    let frames = frames_on(&mut s, 2, later, 0);
    assert!(frames.iter().any(|f| matches!(f, Frame::Data(_))));
    assert!(frames.iter().any(|f| matches!(f, Frame::Estimate { .. })));
}

/// The server learns from the client's announcement which of its networks are cellular and
/// does not probe those while idle.
#[test]
fn a_server_does_not_probe_a_cellular_network_while_idle() {
    let now = Time::ZERO;
    let mut s = Session::server(Config::default(), 1, 7);
    for net in [1, 2] {
        let mut c = Conn::new(net, ConnState::Established, now);
        c.last_probe = Some(now);
        s.conns.insert(net as ConnId, Box::new(c));
    }
    s.established = true;
    let info = |net: NetId, flags| NetInfo {
        net,
        addr: [10, 0, net as u8, 2].into(),
        rtt_us: 0,
        flags,
        bandwidth_bps: 0,
        port: 0,
    };
    s.absorb_netinfos(
        &[info(1, NET_USABLE), info(2, NET_USABLE | NET_CELLULAR)],
        now,
    );
    assert!(!s.connection_is_cellular(1));
    assert!(s.connection_is_cellular(2));
    let t = now + s.config.probe_interval + Duration::from_millis(100);
    assert!(probes(&mut s, 1, t), "the WiFi connection was not probed");
    assert!(!probes(&mut s, 2, t), "the idle 3G connection was probed");
}
