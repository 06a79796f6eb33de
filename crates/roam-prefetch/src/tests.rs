//! The decision on the situations the thesis describes.

use std::sync::Arc;
use std::time::Duration;

use roam_budget::{profile, Direction, Radio};
use roam_core::{BitRate, Bytes, Time};

use crate::*;

fn radio(name: &str) -> Radio {
    Radio::new(Arc::new(profile(name).unwrap()), Time::ZERO)
}

fn hints(n: u64, size: u64, class: Class) -> Vec<Candidate> {
    (0..n)
        .map(|i| Candidate {
            id: i,
            class,
            size: Some(Bytes(size)),
        })
        .collect()
}

/// A phone with a 3G radio and, if `wifi`, a WiFi one; the long run having seen both.
struct Phone {
    cell: Radio,
    wifi: Radio,
    long_run: LongRun,
}

impl Phone {
    fn new() -> Phone {
        let mut p = Phone {
            cell: radio("huang2012/3g"),
            wifi: radio("huang2012/wifi"),
            long_run: LongRun::default(),
        };
        // A history with WiFi present half the time.
        let mut long_run = LongRun::default();
        for s in 0..100 {
            long_run.observe(Time::from_millis(s * 1000), &p.networks(s % 2 == 0));
        }
        p.long_run = long_run;
        p
    }

    fn networks(&self, wifi: bool) -> Vec<NetworkState<'_>> {
        let mut v = vec![NetworkState {
            name: "cell",
            wifi: false,
            metered: true,
            bandwidth: BitRate::kbps(700),
            latency: Duration::from_millis(200),
            radio: &self.cell,
        }];
        if wifi {
            v.push(NetworkState {
                name: "wifi",
                wifi: true,
                metered: false,
                bandwidth: BitRate::mbps(5),
                latency: Duration::from_millis(20),
                radio: &self.wifi,
            });
        }
        v
    }
}

fn decide_now(p: &Phone, wifi: bool, c: &[Candidate], acc: &Accuracy, prices: Prices) -> Decision {
    decide(
        Time::from_millis(200_000),
        c,
        &p.networks(wifi),
        acc,
        &p.long_run,
        prices,
        Bytes(50_000),
    )
}

#[test]
fn with_no_constraint_imp_prefetches_everything() {
    let p = Phone::new();
    let c = hints(30, 40_000, DEFAULT_CLASS);
    let d = decide_now(&p, false, &c, &Accuracy::new(), Prices::default());
    assert_eq!(d.start, (0..30).collect::<Vec<_>>());
    assert_eq!(d.on, vec!["cell"]);
}

#[test]
fn an_expensive_radio_waits_for_wifi_or_for_a_batch_that_pays_for_its_tail() {
    let p = Phone::new();
    let acc = Accuracy::new(); // one half
                               // Energy dear: 7 J of 3G promotion and tail cost 3.5 s at 0.5 s/J.
    let prices = Prices {
        energy: 0.5,
        data: 0.0,
    };
    let one = hints(1, 10_000, DEFAULT_CLASS);
    assert!(decide_now(&p, false, &one, &acc, prices).start.is_empty());
    // On WiFi the same hint pays.
    let d = decide_now(&p, true, &one, &acc, prices);
    assert_eq!(
        (d.start.clone(), d.on.clone()),
        (vec![0], vec!["wifi".to_string()])
    );
    // Forty of them share one tail: a batch pays where one did not.
    let many = hints(40, 10_000, DEFAULT_CLASS);
    let d = decide_now(&p, false, &many, &acc, prices);
    assert!(d.start.len() > 1, "{d:?}");
    // A radio already in its tail makes even one pay: no new promotion, no new tail.
    let mut warm = Phone::new();
    warm.cell
        .on_packet(Time::from_millis(199_000), Bytes(1000), Direction::Down);
    assert_eq!(decide_now(&warm, false, &one, &acc, prices).start, vec![0]);
}

#[test]
fn dear_data_keeps_prefetches_off_the_metered_network() {
    let p = Phone::new();
    let prices = Prices {
        energy: 0.0,
        data: 1e-3, // a kilobyte is worth a second
    };
    let c = hints(5, 100_000, DEFAULT_CLASS);
    assert!(decide_now(&p, false, &c, &Accuracy::new(), prices)
        .start
        .is_empty());
    let d = decide_now(&p, true, &c, &Accuracy::new(), prices);
    assert_eq!(d.on, vec!["wifi"]);
    assert_eq!(d.start.len(), 5);
}

#[test]
fn classes_that_are_right_more_often_go_first() {
    let p = Phone::new();
    let mut acc = Accuracy::new();
    for _ in 0..9 {
        acc.consumed(2);
        acc.wrong(1);
    }
    let mut c = hints(3, 20_000, 1);
    c.extend(
        hints(3, 20_000, 2)
            .into_iter()
            .map(|h| Candidate { id: h.id + 10, ..h }),
    );
    let d = decide_now(&p, true, &c, &acc, Prices::default());
    assert_eq!(d.start, vec![10, 11, 12, 0, 1, 2]);
    // A price at which only the accurate class pays.
    let prices = Prices {
        energy: 0.0,
        data: 2e-5,
    };
    let d = decide_now(&p, false, &c, &acc, prices);
    assert_eq!(d.start, vec![10, 11, 12], "{d:?}");
}
