//! Active probes in the session: when a connection is probed, how idle probes back off, and
//! how connections over one path take turns at them (`Conn::next_idle_probe`,
//! `Session::take_probe_turns`).

use super::tests::{hotspot, probes, whole_irob};
use super::*;
use crate::proto::wire::Frame;
use roam_core::BitRate;
use std::time::Duration;

/// A connection is probed only when idle in both directions: one that keeps receiving the
/// peer's data is busy (the lab's sensing server, which only receives, probed its 3G link
/// every 10 s with 16 KiB and starved the upload's ACKs).
#[test]
fn a_connection_receiving_data_is_not_probed() {
    let mut s = hotspot([Some(600_000), Some(2_000_000)]);
    let t = s.config.probe_interval;
    // Data arrives on connection 1 only, every second.
    for i in 0..10u64 {
        s.handle_frame(1, sample(i), Time::from_millis(i * 1000 + 500));
    }
    let now = Time::ZERO + t + Duration::from_millis(100);
    assert!(!probes(&mut s, 1, now), "a receiving connection was probed");
    assert!(probes(&mut s, 2, now), "an idle connection was not probed");
}

/// A connection over a path the device's other multi-sockets measured (`recall_path`) starts
/// from their estimates and probes as a multi-socket open all along would: not at once, but
/// once idle for the probe interval since they were measured; never on an idle cellular
/// network. Without them it probes at once: a network that just appeared.
#[test]
fn a_recalled_path_is_not_probed_at_once() {
    let now = Time::from_millis(60_000);
    let interval = Config::default().probe_interval;
    let mut fresh = one_network(now, NetKind::default());
    assert!(
        probes(&mut fresh, 1, now),
        "a new network is probed at once"
    );

    let mut s = one_network(now, NetKind::default());
    let rtt = Some(Duration::from_millis(30));
    s.recall_path(
        1,
        rtt,
        BitRate::bps(5_000_000),
        now.saturating_sub(Duration::from_secs(2)),
    );
    assert_eq!(
        s.estimates(),
        vec![(
            1,
            Some(Duration::from_millis(30)),
            Some(BitRate::bps(5_000_000))
        )]
    );
    assert!(!probes(&mut s, 1, now));
    assert!(!probes(
        &mut s,
        1,
        now + (interval - Duration::from_millis(1))
    ));
    assert!(probes(&mut s, 1, now + interval), "idle for the interval");

    let cellular = NetKind {
        cellular: true,
        ..NetKind::default()
    };
    let mut cell = one_network(now, cellular);
    cell.recall_path(
        1,
        rtt,
        BitRate::bps(1_000_000),
        now.saturating_sub(interval * 3),
    );
    assert!(!probes(&mut cell, 1, now + interval * 2), "idle cellular");
}

/// The times at which `conn` sends a probe pair from `from` to `until`, following the
/// session's own timer and echoing each probe at once, as a peer on a fast path would.
fn probe_times(s: &mut Session, conn: ConnId, from: Time, until: Time) -> Vec<Time> {
    let mut times = vec![];
    let mut now = from;
    while now <= until {
        s.handle_timeout(now);
        if send_probes(s, conn, now) {
            times.push(now);
        }
        let Some(next) = s.poll_timeout() else { break };
        now = next.max(now + Duration::from_millis(1));
    }
    times
}

/// Whether `conn` sends a probe at `now` (echoed at once, as a peer on a fast path would).
fn send_probes(s: &mut Session, conn: ConnId, now: Time) -> bool {
    let mut probed = false;
    while let Some(t) = s.poll_transmit(conn, now, 0) {
        let mut dec = super::super::Decoder::default();
        dec.push(&t.head);
        dec.push(&t.data);
        while let Ok(Some(f)) = dec.next_frame() {
            if let Frame::Probe { id, padding } = f {
                probed = true;
                let probe_size = padding as u64 + super::super::wire::HEADER_LEN as u64;
                s.handle_frame(conn, Frame::ProbeReply { id, probe_size }, now);
            }
        }
    }
    probed
}

/// A small background IROB whole in one chunk: data for the idle-probe tests.
fn sample(irob: IrobId) -> Frame {
    whole_irob(irob, Label::BackgroundLarge, Bytes::from_static(b"sample"))
}

/// A client session with one established connection (id 1) over a network of `kind`, opened
/// at `at`.
fn one_network(at: Time, kind: NetKind) -> Session {
    let mut s = Session::client(Config::default(), 1);
    s.network_up(1, [10, 0, 1, 2].into(), kind, at);
    s.conns
        .insert(1, Box::new(Conn::new(1, ConnState::Established, at)));
    s.established = true;
    while s.poll_event().is_some() {}
    s
}

/// Seconds from `start` of each of `times`.
fn secs_from(start: Time, times: &[Time]) -> Vec<u64> {
    times
        .iter()
        .map(|t| t.saturating_since(start).as_secs())
        .collect()
}

/// Idle probes back off (`Conn::next_idle_probe`): a WiFi connection idle for an hour is
/// probed when it opens, 10, 20, 40, 80, 160 and 320 s after, then every 5 minutes (16 idle
/// pairs, where a fixed 10 s sent 360); the session's timer wakes for each probe, not before.
#[test]
fn idle_probes_back_off() {
    let start = Time::from_millis(60_000);
    let mut s = one_network(start, NetKind::default());
    let times = probe_times(&mut s, 1, start, start + Duration::from_secs(3600));
    let mut want = vec![0, 10, 20, 40, 80, 160, 320];
    want.extend((1..=10).map(|i| 320 + 300 * i));
    assert_eq!(secs_from(start, &times), want);
}

/// Data between idle probes does not shorten the next gap: a connection that carries a
/// request every half minute (a browser's, through `roam net proxy`) is probed 8 times in 20
/// minutes after the first, not twice after each request (80) as when data restarted the
/// backoff; and never less than 10 s after data.
#[test]
fn data_between_idle_probes_does_not_restart_their_backoff() {
    let start = Time::from_millis(60_000);
    let mut s = one_network(start, NetKind::default());
    let mut times = vec![];
    let mut from = start;
    for i in 0..40u64 {
        let data = start + Duration::from_secs(5 + 30 * i);
        times.extend(probe_times(
            &mut s,
            1,
            from,
            data.saturating_sub(Duration::from_millis(1)),
        ));
        s.handle_frame(1, sample(i), data);
        from = data;
    }
    assert_eq!(
        secs_from(start, &times),
        [0, 15, 25, 45, 85, 165, 325, 625, 925]
    );
}

/// A connection whose idle probes take turns on its path (`take_probe_turns`) does not send
/// one that falls due until the driver grants it; the driver learns it is due, and the gap
/// it would leave. Put off by another's probe (`path_probed`), it waits for the path's next
/// turn and backs off from that gap. A grant from before data moved the probe later is spent.
#[test]
fn an_idle_probe_taking_turns_waits_for_its_grant() {
    let start = Time::from_millis(60_000);
    let mut s = one_network(start, NetKind::default());
    s.take_probe_turns(1);
    assert!(send_probes(&mut s, 1, start), "a new network: at once");
    let due = start + Duration::from_secs(10);
    assert_eq!(
        s.idle_probe_due(1, due.saturating_sub(Duration::from_millis(1))),
        None
    );
    assert_eq!(s.idle_probe_due(1, due), Some(Duration::from_secs(10)));
    assert!(!send_probes(&mut s, 1, due), "not granted");
    s.grant_idle_probe(1, due);
    assert_eq!(s.idle_probe_due(1, due), None, "granted: not asked again");
    assert!(send_probes(&mut s, 1, due));

    // Due at 20 s; another multi-socket probed the path at 15 s, leaving 40 s.
    let other = start + Duration::from_secs(15);
    assert_eq!(
        s.idle_probe_due(1, start + Duration::from_secs(20)),
        Some(Duration::from_secs(20))
    );
    assert!(!s.path_put_off(1));
    s.path_probed(1, other, Duration::from_secs(40));
    assert!(s.path_put_off(1), "its estimates are older than the path's");
    assert_eq!(s.poll_timeout(), Some(other + Duration::from_secs(40)));
    let due = other + Duration::from_secs(40);
    assert_eq!(
        s.idle_probe_due(1, due),
        Some(Duration::from_secs(80)),
        "its own backoff goes on from the path's gap"
    );
    s.grant_idle_probe(1, due);
    s.handle_frame(1, sample(1), due);
    let later = due + Duration::from_secs(10);
    assert!(
        !send_probes(&mut s, 1, later),
        "the grant was spent by data"
    );
    assert_eq!(s.idle_probe_due(1, later), Some(Duration::from_secs(80)));
}

/// A dozen connections over one path, opened a second apart (the browser behind
/// `roam net proxy`), each of its own multi-socket, whose idle probes take turns (the driver
/// holds the path's last probe and its gap, as `runtime::PathMemory::probe_turn` does): over
/// an hour idle they probe the path as one connection alone would (`idle_probes_back_off`),
/// 16 idle pairs between them where backing off each alone sent 192.
#[test]
fn connections_taking_turns_probe_a_path_as_one_would() {
    let start = Time::from_millis(60_000);
    let end = start + Duration::from_secs(3600);
    let opened: Vec<Time> = (0..12).map(|i| start + Duration::from_secs(i)).collect();
    let mut sessions: Vec<Session> = opened
        .iter()
        .map(|&at| {
            let mut s = one_network(at, NetKind::default());
            s.take_probe_turns(1);
            s
        })
        .collect();
    let mut turn: Option<(Time, Duration)> = None;
    let mut idle = vec![];
    let mut now = start;
    while now <= end {
        for (s, &at) in sessions
            .iter_mut()
            .zip(&opened)
            .filter(|(_, &at)| at <= now)
        {
            if let Some(gap) = s.idle_probe_due(1, now) {
                // `PathMemory::probe_turn`'s rule (its own tests: `runtime::paths`).
                match turn {
                    Some((last, g)) if now < last + g => s.path_probed(1, last, g),
                    _ => {
                        let least = turn.map_or(Duration::ZERO, |t| t.1);
                        turn = Some((now, gap.max(least)));
                        s.grant_idle_probe(1, now);
                    }
                }
            }
            s.handle_timeout(now);
            if send_probes(s, 1, now) && now > at {
                idle.push(now);
            }
        }
        let next = sessions
            .iter()
            .zip(&opened)
            .filter_map(|(s, &at)| {
                if at <= now {
                    s.poll_timeout()
                } else {
                    Some(at)
                }
            })
            .min();
        let Some(next) = next else { break };
        now = next.max(now + Duration::from_millis(1));
    }
    let mut want = vec![10, 20, 40, 80, 160, 320];
    want.extend((1..=10).map(|i| 320 + 300 * i));
    assert_eq!(secs_from(start, &idle), want);
}
