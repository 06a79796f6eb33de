//! Named multi-link scenarios.
//!
//! From the Intentional Networking paper (the Intentional Networking paper, Table 3; spec/intentional-networking.md):
//! - `hotspot` (crowded hotspot): `wifi` 0.6 Mbit/s, 20 ms RTT, always on; `cell` (3G) 2.0 Mbit/s,
//!   400 ms RTT, always on.
//! - `intermittent`: `cell` (wide area) 0.3 Mbit/s, 400 ms RTT, always on; `wifi` 3.0 Mbit/s,
//!   60 ms RTT, on/off from the Cabernet CDFs.
//!
//! The paper's vehicular traces are not available, so roam builds equivalents from measured
//! traces (Decision, recorded in docs/traces.md):
//! - `vehicular`: `cell` = Verizon EV-DO driving trace (closest to the paper's Sprint 3G) with
//!   400 ms RTT as in Table 3; `wifi` = 3.0 Mbit/s, 60 ms RTT, on/off from Cabernet.
//! - `vehicular-umts`: the same with the T-Mobile UMTS driving trace as `cell`.
//!
//!
//! From the IMP thesis (IMP thesis §3.5), whose walking trace is not available either:
//! - `walking`: `cell` = the Verizon EV-DO trace with 400 ms RTT; `wifi` = 3.0 Mbit/s, 60 ms
//!   RTT, in reach 18% of the time in sessions of median 56 s and at most 99 s
//!   ([`onoff::walking`]). The thesis's walking 3G (AT&T) had a median / maximum downlink of
//!   695 / 1300 kbit/s and uplink of 216 / 358; the EV-DO trace has 402 / 3012 down and
//!   960 / 1776 up (docs/traces.md).
//!
//! For bulk transfers (FastHLA, the FastHLA paper: one network at a time, the server's distance given
//! as an added RTT, `wifi-bulk+rtt=290ms`):
//! - `wifi-bulk`: one `wifi` link, 100 Mbit/s each way, no delay of its own, 0.01% loss;
//! - `lte-bulk`: one `cell` link, the AT&T LTE driving trace (Mahimahi's), no delay of its own,
//!   0.01% loss.
//!
//! For AFC (the Sanadhya thesis, ch. III, Table 4: one link, RTT 530 ms, the network's rate
//! changing every round trip in a repeating pattern ⟨x, y, y⟩ Mbit/s):
//! - `afc-s1`: 2 Mbit/s; `afc-s2`: 15; `afc-s3`: ⟨2, 4, 4⟩; `afc-s4`: ⟨3, 6, 6⟩; `afc-s5`:
//!   ⟨3, 15, 15⟩. One `link`, 265 ms each way, the uplink (acknowledgements, credit) at 100
//!   Mbit/s. The application's read rates, the other half of each scenario, are the lab's
//!   (`roam lab afc`).
//!
//! For Precog (the Sanadhya thesis, ch. V: each hour on WiFi or on cellular; `roam lab
//! precog` uses one network at a time):
//! - `home-and-away`: `wifi` 20 Mbit/s each way, 20 ms RTT, always on (home); `cell` the AT&T
//!   LTE driving trace (Mahimahi's) with an 80 ms RTT.
//!
//! On/off availability is seeded: the same seed gives the same drive.

use crate::capacity::Capacity;
use crate::error::TraceError;
use crate::link::{LinkKind, LinkTrace, NamedLink};
use crate::onoff;
use crate::pdo::PdoTrace;
use crate::piecewise::Piecewise;
use roam_core::{BitRate, Time};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Names accepted by [`Scenario::by_name`].
pub const SCENARIOS: [&str; 15] = [
    "hotspot",
    "intermittent",
    "vehicular",
    "vehicular-umts",
    "walking",
    "walking-campus",
    "wifi-bulk",
    "lte-bulk",
    "horatio",
    "afc-s1",
    "afc-s2",
    "afc-s3",
    "afc-s4",
    "afc-s5",
    "home-and-away",
];

/// The round trip of the AFC scenarios (the thesis's 530 ms), also the length of each slot of
/// their rate patterns.
pub const AFC_RTT: Duration = Duration::from_millis(530);

/// The downlink pattern of AFC scenario `name` (`afc-s1` .. `afc-s5`), Mbit/s per slot of one
/// round trip, repeating (the Sanadhya thesis, Table 4).
pub fn afc_network(name: &str) -> Option<&'static [u64]> {
    Some(match name {
        "afc-s1" => &[2],
        "afc-s2" => &[15],
        "afc-s3" => &[2, 4, 4],
        "afc-s4" => &[3, 6, 6],
        "afc-s5" => &[3, 15, 15],
        _ => return None,
    })
}

/// One link whose downlink follows `mbps`, one slot of [`AFC_RTT`] each, repeating.
fn afc_link(mbps: &[u64]) -> NamedLink {
    let points = mbps
        .iter()
        .enumerate()
        .map(|(i, &m)| (Time::ZERO + AFC_RTT * i as u32, BitRate::kbps(m * 1000)))
        .collect();
    let period = AFC_RTT * mbps.len() as u32;
    // The patterns are the constants above: breakpoints from 0, increasing, within the period.
    let down = Piecewise::new(points, Some(period)).expect("a well-formed AFC pattern");
    NamedLink {
        name: "link".into(),
        kind: LinkKind::Other,
        trace: LinkTrace {
            down: Capacity::Rate(down),
            ..LinkTrace::constant(BitRate::kbps(100_000), AFC_RTT / 2)
        },
    }
}

/// Random loss on the bulk-transfer scenarios' links ("a little loss").
pub const BULK_LOSS: f64 = 1e-4;

/// A set of named links that together model a place or a drive.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// Scenario name.
    pub name: String,
    /// Its links, in routing-preference order (the first carries the default route).
    pub links: Vec<NamedLink>,
}

impl Scenario {
    /// Build a named scenario with the given seed for its random parts.
    pub fn by_name(name: &str, seed: u64) -> Result<Scenario, TraceError> {
        let ms = Duration::from_millis;
        let wifi_with = |availability: Piecewise<bool>| NamedLink {
            name: "wifi".into(),
            kind: LinkKind::Wifi,
            trace: LinkTrace {
                availability,
                ..LinkTrace::constant(BitRate::kbps(3000), ms(30))
            },
        };
        let wifi_onoff = |rate_kbps: u64, rtt_ms: u64| NamedLink {
            name: "wifi".into(),
            kind: LinkKind::Wifi,
            trace: LinkTrace {
                availability: onoff::cabernet(seed),
                ..LinkTrace::constant(BitRate::kbps(rate_kbps), ms(rtt_ms / 2))
            },
        };
        let cell_const = |rate_kbps: u64, rtt_ms: u64| NamedLink {
            name: "cell".into(),
            kind: LinkKind::Cellular,
            trace: LinkTrace::constant(BitRate::kbps(rate_kbps), ms(rtt_ms / 2)),
        };
        let cell_trace = |base: &str| -> Result<NamedLink, TraceError> {
            let down = PdoTrace::load(&find_trace(&format!("cellular/{base}.down"))?)?;
            let up = PdoTrace::load(&find_trace(&format!("cellular/{base}.up"))?)?;
            Ok(NamedLink {
                name: "cell".into(),
                kind: LinkKind::Cellular,
                trace: LinkTrace {
                    down: Capacity::Opportunities(Arc::new(down)),
                    up: Capacity::Opportunities(Arc::new(up)),
                    delay: Piecewise::constant(ms(200)),
                    loss: 0.0,
                    availability: Piecewise::constant(true),
                },
            })
        };
        let links = match name {
            "hotspot" => vec![
                NamedLink {
                    name: "wifi".into(),
                    kind: LinkKind::Wifi,
                    trace: LinkTrace::constant(BitRate::kbps(600), ms(10)),
                },
                cell_const(2000, 400),
            ],
            "intermittent" => vec![wifi_onoff(3000, 60), cell_const(300, 400)],
            "vehicular" => vec![wifi_onoff(3000, 60), cell_trace("Verizon-EVDO-driving")?],
            "vehicular-umts" => vec![wifi_onoff(3000, 60), cell_trace("TMobile-UMTS-driving")?],
            "walking" => vec![
                wifi_with(onoff::walking(seed)),
                cell_trace("Verizon-EVDO-driving")?,
            ],
            "walking-campus" => vec![
                wifi_with(onoff::walking_campus(seed)),
                cell_trace("Verizon-EVDO-driving")?,
            ],
            "wifi-bulk" => vec![NamedLink {
                name: "wifi".into(),
                kind: LinkKind::Wifi,
                trace: LinkTrace {
                    loss: BULK_LOSS,
                    ..LinkTrace::constant(BitRate::kbps(100_000), Duration::ZERO)
                },
            }],
            "lte-bulk" => {
                let mut l = cell_trace("ATT-LTE-driving")?;
                l.trace.delay = Piecewise::constant(Duration::ZERO);
                l.trace.loss = BULK_LOSS;
                vec![l]
            }
            // Horatio's evaluation (the Horatio paper): the links a parcel's state can take between
            // the client (the borrowed PC), the phone and the server. Which two hosts each
            // joins is the lab's (`roam lab horatio`); the emulator runs only those a trial
            // uses. The phone's USB 1.1 link at its nominal 12 Mbit/s; the phone's WiFi to the
            // client at half that (the paper's WiFi suspends took about twice its USB ones);
            // a card reader on USB 2.0 (480 Mbit/s); the WAN at 1 or 10 Mbit/s with a 20 ms
            // round trip; the phone's uplinks to the server: WiFi behind the same 1 Mbit/s
            // WAN, or a measured 3G trace (Verizon EV-DO); and the same WiFi as a walking phone
            // meets it (`pwifi-onoff`: in reach 69% of the time, the Meatballs walk's sessions
            // and gaps), for self-cleaning over whatever network the phone has.
            "home-and-away" => {
                let mut cell = cell_trace("ATT-LTE-driving")?;
                cell.trace.delay = Piecewise::constant(ms(40));
                vec![
                    NamedLink {
                        name: "wifi".into(),
                        kind: LinkKind::Wifi,
                        trace: LinkTrace::constant(BitRate::kbps(20_000), ms(10)),
                    },
                    cell,
                ]
            }
            "horatio" => {
                let fixed = |name: &str, kind, kbps: u64, one_way_ms: u64| NamedLink {
                    name: name.into(),
                    kind,
                    trace: LinkTrace::constant(BitRate::kbps(kbps), ms(one_way_ms)),
                };
                let mut cell = cell_trace("Verizon-EVDO-driving")?;
                cell.trace.delay = Piecewise::constant(ms(100));
                vec![
                    fixed("usb", LinkKind::Other, 12_000, 1),
                    fixed("lwifi", LinkKind::Wifi, 6_000, 2),
                    fixed("sd", LinkKind::Other, 480_000, 0),
                    fixed("wan1", LinkKind::Other, 1_000, 10),
                    fixed("wan10", LinkKind::Other, 10_000, 10),
                    fixed("pwifi", LinkKind::Wifi, 1_000, 10),
                    NamedLink {
                        name: "pwifi-onoff".into(),
                        kind: LinkKind::Wifi,
                        trace: LinkTrace {
                            availability: onoff::walking_campus(seed),
                            ..LinkTrace::constant(BitRate::kbps(1_000), ms(10))
                        },
                    },
                    cell,
                ]
            }
            afc if afc_network(afc).is_some() => {
                afc_network(afc).map(afc_link).into_iter().collect()
            }
            other => {
                return Err(TraceError::Unknown {
                    what: "scenario",
                    name: other.into(),
                    expected: SCENARIOS.join(", "),
                })
            }
        };
        Ok(Scenario {
            name: name.into(),
            links,
        })
    }
}

/// Directories searched for measured traces, in order: `$ROAM_TRACES`, `../shared/traces` from
/// the current directory, and `../shared/traces` beside the source checkout.
pub fn trace_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = std::env::var_os("ROAM_TRACES") {
        dirs.push(PathBuf::from(d));
    }
    dirs.push(PathBuf::from("../shared/traces"));
    dirs.push(PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/traces"
    )));
    dirs
}

/// Find a measured trace by its name relative to the traces directory.
pub fn find_trace(rel: &str) -> Result<PathBuf, TraceError> {
    let dirs = trace_dirs();
    for d in &dirs {
        let p = d.join(rel);
        if p.is_file() {
            return Ok(p);
        }
    }
    Err(TraceError::NotFound {
        name: rel.into(),
        searched: dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use roam_core::Time;

    #[test]
    fn the_afc_scenarios_follow_table_4_per_round_trip() {
        let s = Scenario::by_name("afc-s5", 1).unwrap();
        assert_eq!(s.links.len(), 1);
        let down = &s.links[0].trace.down;
        let slot = |i: u64| Time::from_millis(530 * i + 100);
        let at = |i| down.mean_rate(slot(i), slot(i) + Duration::from_millis(10));
        assert_eq!(at(0), Some(BitRate::kbps(3000)));
        assert_eq!(at(1), Some(BitRate::kbps(15_000)));
        assert_eq!(at(2), Some(BitRate::kbps(15_000)));
        assert_eq!(at(3), Some(BitRate::kbps(3000)), "the pattern repeats");
        for n in ["afc-s1", "afc-s2", "afc-s3", "afc-s4"] {
            assert!(Scenario::by_name(n, 1).is_ok(), "{n}");
        }
    }

    #[test]
    fn table3_scenarios() {
        let h = Scenario::by_name("hotspot", 1).unwrap();
        assert_eq!(h.links.len(), 2);
        assert_eq!(
            h.links[0]
                .trace
                .down
                .mean_rate(Time::ZERO, Time::from_millis(1000)),
            Some(BitRate::kbps(600))
        );
        assert_eq!(
            *h.links[1].trace.delay.value_at(Time::ZERO),
            Duration::from_millis(200)
        );
        let i = Scenario::by_name("intermittent", 1).unwrap();
        assert!(i.links[0].trace.availability.points().len() > 10);
        let e = Scenario::by_name("beach", 1).unwrap_err();
        assert!(e.to_string().contains("unknown scenario `beach`"));
    }

    /// The walking scenario's WiFi matches the IMP thesis's statistics: in reach about 18% of
    /// the time, sessions of median 56 s and at most 99 s (over several seeds' six hours); the
    /// Meatballs walk's: 69%, median 41 s, at most 5 min.
    #[test]
    fn walking_meets_wifi_as_the_imp_thesis_describes() {
        let cases = [
            ("walking", (0.15, 0.21), (48.0, 64.0), 99.0),
            ("walking-campus", (0.64, 0.74), (35.0, 47.0), 300.0),
        ];
        for (name, (lo, hi), (mlo, mhi), max) in cases {
            let (frac, median, longest) = wifi_stats(name);
            assert!(
                (lo..hi).contains(&frac),
                "{name}: WiFi in reach {frac:.3} of the time"
            );
            assert!(
                (mlo..mhi).contains(&median),
                "{name}: median session {median:.1} s"
            );
            assert!(longest <= max + 1e-6, "{name}: {longest}");
        }
    }

    /// Over five seeds' six hours of scenario `name`: the fraction of time WiFi is in reach,
    /// the median session, and the longest session not cut by the horizon.
    fn wifi_stats(name: &str) -> (f64, f64, f64) {
        let (mut on, mut total, mut sessions) = (0.0, 0.0, Vec::new());
        for seed in 1..=5 {
            let w = Scenario::by_name(name, seed).unwrap();
            assert_eq!(w.links[1].name, "cell");
            let a = &w.links[0].trace.availability;
            let end = Time::ZERO + Duration::from_secs(6 * 3600);
            on += a.fraction_true(Time::ZERO, end) * 6.0 * 3600.0;
            total += 6.0 * 3600.0;
            sessions.extend(
                a.true_intervals(Time::ZERO, end)
                    .iter()
                    .map(|(s, e)| e.saturating_since(*s).as_secs_f64()),
            );
        }
        sessions.sort_by(f64::total_cmp);
        (
            on / total,
            sessions[sessions.len() / 2],
            sessions[sessions.len() - 2],
        )
    }
}
