//! Meatballs' network selection in the session (`selection`, `Config::redundancy`).

use super::tests::{data_on, hotspot};
use super::*;
use crate::proto::wire::Deps;
use roam_decide::{CostLevel, Method, Prices};
use std::time::Duration;

/// The crowded hotspot with Meatballs on (3G cellular and metered).
fn meatballs(method: Method, prices: Prices) -> Session {
    let mut s = hotspot([Some(600_000), Some(2_000_000)]);
    s.config.redundancy = Some(Redundancy::new(method, prices));
    s.networks.get_mut(&2).unwrap().kind = NetKind {
        metered: true,
        cellular: true,
    };
    s
}

/// Send one 100-byte small foreground IROB at `now`: its id and the connections its data went
/// on (after the session's timers at `now`, which send a redundant copy).
fn send(s: &mut Session, now: Time) -> (IrobId, Vec<ConnId>) {
    let id = s
        .begin_irob(Label::ForegroundSmall, Deps::List(vec![]), None, now)
        .unwrap();
    s.irob_send(id, Bytes::from(vec![1u8; 100])).unwrap();
    s.end_irob(id).unwrap();
    let mut on = Vec::new();
    for _ in 0..2 {
        for conn in [1, 2] {
            if data_on(s, conn, now).contains(&id) {
                on.push(conn);
            }
        }
        s.handle_timeout(now);
    }
    (id, on)
}

/// A WiFi that answers in its usual 21 ms four times in five and 100 times slower the fifth
/// (a hotspot that fades): once that record exists, Meatballs sends small foreground IROBs on
/// both networks at once, for free; at the high cost level (the 3G's 7.4 J are worth 7.4 s),
/// on the WiFi alone.
#[test]
fn an_unreliable_wifi_gets_a_copy_over_cellular_when_that_is_cheap() {
    for (prices, both) in [
        (Prices::FREE, true),
        (Prices::level(CostLevel::High), false),
    ] {
        let mut s = meatballs(Method::Empirical, prices);
        let mut t = Time::ZERO;
        for i in 0..30 {
            let (id, on) = send(&mut s, t);
            if i == 0 {
                assert_eq!(on, vec![1], "with no record, the faster network alone");
            }
            let took = if i % 5 == 4 { 2.1 } else { 0.021 };
            s.on_ack(id, t + Duration::from_secs_f64(took));
            t = t + Duration::from_secs(10);
        }
        let (_, on) = send(&mut s, t);
        let want = if both { vec![1, 2] } else { vec![1] };
        assert_eq!(on, want, "{prices:?}");
    }
}

/// With an accurate record the IROB goes on the WiFi alone, and is not copied at twice its
/// expected time (every sample says it should have arrived; as long again, 43 ms, is still
/// cheaper than the 3G's 7.4 J at the mid cost level, 0.74 s); left unacknowledged for 5 s,
/// the re-evaluation sends it over the 3G too.
#[test]
fn a_missing_acknowledgement_is_reevaluated_into_a_copy() {
    let mut s = meatballs(Method::Empirical, Prices::level(CostLevel::Mid));
    let mut t = Time::ZERO;
    for _ in 0..20 {
        let (id, on) = send(&mut s, t);
        assert_eq!(on, vec![1]);
        let predicted = s.out[&id].selected.unwrap().predicted;
        s.on_ack(id, t + Duration::from_secs_f64(predicted));
        t = t + Duration::from_secs(10);
    }
    let (id, on) = send(&mut s, t);
    assert_eq!(on, vec![1]);
    let due = s.out[&id].selected.unwrap().next;
    assert!(due > t && due < t + Duration::from_millis(100), "{due:?}");
    s.handle_timeout(due);
    assert!(
        data_on(&mut s, 2, due).is_empty(),
        "copied at twice the expected time"
    );
    let late = t + Duration::from_secs(5);
    s.handle_timeout(late);
    assert_eq!(data_on(&mut s, 2, late), vec![id]);
}

/// Off by default: no IROB is placed by Meatballs.
#[test]
fn selection_is_off_by_default() {
    let mut s = hotspot([Some(600_000), Some(2_000_000)]);
    assert!(s.config.redundancy.is_none());
    let (id, on) = send(&mut s, Time::ZERO);
    assert_eq!(on, vec![1]);
    assert!(s.out[&id].selected.is_none());
}

/// Meatballs' baselines as label policies: WiFi-preferred keeps a small foreground IROB on
/// the WiFi even when the placement model would take the 3G (the WiFi's kernel holds a queue
/// of background data here), cellular-only puts it on the 3G.
#[test]
fn network_choices_override_the_placement_model() {
    for (choice, want) in [
        (NetworkChoice::Any, 2),
        (NetworkChoice::PreferNonCellular, 1),
        (NetworkChoice::CellularOnly, 2),
    ] {
        let mut s = hotspot([Some(600_000), Some(2_000_000)]);
        s.networks.get_mut(&2).unwrap().kind.cellular = true;
        s.config.policy_mut(Label::ForegroundSmall).networks = choice;
        s.config.policy_mut(Label::ForegroundSmall).hedge = false;
        // Two seconds of data queued in the WiFi's kernel.
        s.kernel_queue(
            1,
            KernelQueue {
                unsent: 150_000,
                ..KernelQueue::default()
            },
        );
        let (_, on) = send(&mut s, Time::ZERO);
        assert_eq!(on, vec![want], "{choice:?}");
    }
}

/// The IROB of the first data frame of the next transmission on `conn` (256 KiB of room).
fn next_data_on(s: &mut Session, conn: ConnId) -> Option<IrobId> {
    let t = s.poll_transmit(conn, Time::ZERO, 256 * 1024)?;
    let mut dec = super::super::Decoder::default();
    dec.push(&t.head);
    dec.push(&t.data);
    while let Ok(Some(f)) = dec.next_frame() {
        if let Frame::Data(c) = f {
            return Some(c.irob);
        }
    }
    None
}

/// WiFi-preferred for a background label (Horatio's self-cleaning): its data goes on the
/// WiFi alone while the WiFi has a connection, and on the 3G once it has none; with `Any`, on
/// both at once.
#[test]
fn background_data_keeps_to_the_wifi_when_told() {
    for (choice, want) in [
        (NetworkChoice::Any, vec![1, 2]),
        (NetworkChoice::PreferNonCellular, vec![1]),
    ] {
        let mut s = hotspot([Some(600_000), Some(2_000_000)]);
        s.networks.get_mut(&2).unwrap().kind.cellular = true;
        s.config.policy_mut(Label::BackgroundLarge).networks = choice;
        let id = s
            .begin_irob(Label::BackgroundLarge, Deps::List(vec![]), None, Time::ZERO)
            .unwrap();
        s.irob_send(id, Bytes::from(vec![1u8; 4 << 20])).unwrap();
        s.end_irob(id).unwrap();
        // Each connection asks once for what its kernel has room for.
        let on: Vec<ConnId> = [1, 2]
            .into_iter()
            .filter(|&c| next_data_on(&mut s, c) == Some(id))
            .collect();
        assert_eq!(on, want, "{choice:?}");
        if choice == NetworkChoice::PreferNonCellular {
            // The WiFi goes: the rest takes the 3G.
            s.network_down(1, Time::ZERO);
            assert_eq!(next_data_on(&mut s, 2), Some(id));
        }
    }
}

/// WiFi dwell time: a WiFi whose associations were mostly a second or two, just associated
/// again, is predicted slower than its model time (it may go before a transfer is done, and
/// then the transfer waits for re-evaluation and the 3G), and the more so the shorter its
/// sessions; one associated for a minute is trusted more (these sessions' tail is long: the
/// Weibull's shape is below 1, its hazard falls with age).
#[test]
fn a_newly_associated_wifi_with_short_sessions_is_trusted_less() {
    let wifi_time = |sessions: &[f64], associated_for: u64| {
        let mut s = meatballs(Method::Empirical, Prices::FREE);
        let t = Time::ZERO + Duration::from_secs(1000);
        let addr = s.networks[&1].addr.to_string();
        let sel = s
            .selector
            .get_or_insert_with(|| selection::Selector::new(&s.config.redundancy.unwrap()));
        for &d in sessions {
            sel.dwell.record(&addr, d).unwrap();
        }
        let since = Time::ZERO + Duration::from_secs(1000 - associated_for);
        sel.associated.insert(1, (since, addr));
        let (id, _) = send(&mut s, t);
        s.out[&id].selected.unwrap().predicted
    };
    let none = wifi_time(&[], 0);
    let sessions = [0.5, 1.0, 2.0, 1.5, 30.0, 90.0];
    let short = wifi_time(&sessions, 0);
    let long = wifi_time(&sessions.map(|x| x * 10.0), 0);
    let lasted = wifi_time(&sessions, 60);
    assert!(short > long && long > none, "{short} {long} {none}");
    assert!(lasted < short, "{lasted} {short}");
}

/// The sessions come from the networks' up and down events.
#[test]
fn associations_are_recorded_as_dwell_sessions() {
    let mut s = meatballs(Method::Empirical, Prices::FREE);
    let addr = s.networks[&1].addr;
    let mut t = Time::ZERO;
    for d in [5u64, 9, 30] {
        s.network_down(1, t);
        s.network_up(1, addr, NetKind::default(), t);
        t = t + Duration::from_secs(d);
    }
    s.network_down(1, t);
    let sel = s.selector.as_ref().unwrap();
    let (w, own) = sel.dwell.model(&addr.to_string()).unwrap();
    assert!(own, "three sessions at one access point");
    assert!(w.scale > 5.0 && w.scale < 30.0, "{w:?}");
    assert!(sel.associated.is_empty());
    // The 3G's comings and goings are not WiFi sessions.
    s.network_up(2, s.networks[&2].addr, s.networks[&2].kind, t);
    assert!(!s.selector.as_ref().unwrap().associated.contains_key(&2));
}
