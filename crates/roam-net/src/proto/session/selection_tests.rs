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
