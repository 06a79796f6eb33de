//! How far each system is from the limit: an oracle lower bound on each interactive metric,
//! computed from the same traces the trials ran on (scenario and seed), and every system's
//! ratio to it. The oracle knows the future and sends each foreground message alone on the
//! link that would deliver it first, queued behind nothing: no scheduler can do better, so a
//! ratio near 1 leaves nothing to win and a large one says where a paper's ratio could still be
//! reached.
//!
//! - **Sensing** (`urgent_mean_ms`): each urgent message of the seed's schedule
//!   ([`super::sensing::urgent_schedule`], the same for every system) is 512 bytes plus its
//!   framing and TCP/IP headers, sent at its time on whichever link delivers it first: the
//!   first moment the link is up, its capacity from then until the bytes fit (only while it
//!   stays up), plus the one-way delay.
//! - **File system** (`interactive_s`): the replay cannot take less than the recorded build it
//!   replays (`span_s`, measured in every trial): a bound that ignores the network entirely.
//! - **Mail** (`ondemand_ms`): no useful bound. The opens are prefetched in the background,
//!   and an oracle that knows which messages the user will open fetches those first: every
//!   open is then served from the cache, a bound of about zero. (Sending each open alone on
//!   the best link is not a bound here: a system whose prefetch came first beats it.) The
//!   report says so.

use std::fmt::Write as _;
use std::time::Duration;

use roam_core::Time;
use roam_trace::link::LinkTrace;

use crate::harness::plan::Plan;
use crate::harness::sweep;
use crate::report::{fmt_num, mean, Row};

/// Bytes on the wire of one urgent message: 512 of payload, the lab's 5-byte framing (or
/// roam's IROB header, larger by a few tens of bytes: the oracle takes the smaller), 40 of
/// TCP/IP headers.
const URGENT_WIRE_BYTES: u64 = 512 + 5 + 40;
/// How far ahead of a message the oracle looks for a link to carry it.
const HORIZON: Duration = Duration::from_secs(600);

/// When `bytes` sent at `t` over `link`'s client-to-server direction would arrive, alone on
/// it: the first moment it is up, then its capacity while it stays up until the bytes fit,
/// plus the one-way delay then. `None` if it cannot within [`HORIZON`].
pub fn one_way(link: &LinkTrace, t: Time, bytes: u64) -> Option<Duration> {
    let mut left = bytes;
    for (a, b) in link.availability.true_intervals(t, t + HORIZON) {
        let Some(cap) = link.up.bytes_between(a, b) else {
            // Unlimited capacity: the bytes leave at once.
            return Some(a.saturating_since(t) + *link.delay.value_at(a));
        };
        if cap < left {
            left -= cap;
            continue;
        }
        // The bytes fit in [a, b): the first end that carries them, to the millisecond.
        let (mut lo, mut hi) = (0u64, (b.saturating_since(a)).as_millis() as u64);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let end = a + Duration::from_millis(mid);
            if link.up.bytes_between(a, end).unwrap_or(u64::MAX) >= left {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        let end = a + Duration::from_millis(lo);
        return Some(end.saturating_since(t) + *link.delay.value_at(end));
    }
    None
}

/// The oracle's mean urgent latency (ms) on scenario `sc` with `seed` over `duration`: each
/// message on the link that delivers it first. `None` if the scenario cannot be read or a
/// message could not be delivered.
pub fn sensing_mean_ms(sc: &str, seed: u64, duration: Duration) -> Option<f64> {
    let (scenario, _) = sweep::scenario(sc, seed).ok()?;
    let times = super::sensing::urgent_schedule(duration, seed);
    let mut each = Vec::new();
    for s in times {
        let t = Time::ZERO + Duration::from_secs_f64(s);
        let best = scenario
            .links
            .iter()
            .filter_map(|l| one_way(&l.trace, t, URGENT_WIRE_BYTES))
            .min()?;
        each.push(best.as_secs_f64() * 1e3);
    }
    Some(mean(&each))
}

/// A bound per (scenario, seed).
type Bound<'a> = Box<dyn Fn(&str, u64) -> Option<f64> + 'a>;

/// Mean of `metric` over `system`'s finished trials of `app` on `sc` with `seed`.
fn value(
    rows: &[Row],
    (app, sc, system): (&str, &str, &str),
    seed: u64,
    metric: &str,
) -> Option<f64> {
    let v: Vec<f64> = rows
        .iter()
        .filter(|r| r.app == app && r.scenario == sc && r.system == system && r.seed == seed)
        .filter(|r| r.metric == metric && r.value.is_finite())
        .map(|r| r.value)
        .collect();
    (!v.is_empty()).then(|| mean(&v))
}

/// The report's section: per application and scenario, the oracle's bound (mean over the
/// seeds) and every system's mean over it (the ratio of means over the seeds both have).
pub fn section(plan: &Plan, apps: &[&str], rows: &[Row]) -> String {
    let mut s = String::from(
        "## How far from the limit\n\nAn oracle lower bound on each interactive metric from the \
         same traces (scenario and seed): each foreground message alone on the link that would \
         deliver it first, queued behind nothing (sensing); the recorded build the replay \
         cannot beat (file system). Each cell: the system's mean over the oracle's, over the \
         seeds both have (1 = nothing left to win).\n\n",
    );
    let seeds: std::collections::BTreeSet<u64> = rows.iter().map(|r| r.seed).collect();
    let mut any = false;
    for &app in apps {
        let (metric, bound): (&str, Bound) = match app {
            "sensing" | "sensing-2proc" => {
                let d = plan.duration.unwrap_or(if plan.quick {
                    Duration::from_secs(60)
                } else {
                    Duration::from_secs(15 * 60)
                });
                (
                    "urgent_mean_ms",
                    Box::new(move |sc, seed| sensing_mean_ms(sc, seed, d)),
                )
            }
            "fs" => (
                "interactive_s",
                Box::new(|sc, seed| value(rows, ("fs", sc, "roam"), seed, "span_s")),
            ),
            _ => {
                let _ = writeln!(
                    s,
                    "- {app}: no useful bound: an oracle prefetcher fetches the messages the user \
                     will open first, and every open is then served from the cache (about 0 ms)."
                );
                continue;
            }
        };
        if !rows.iter().any(|r| r.app == app) {
            continue;
        }
        any = true;
        let _ = write!(s, "\n{app} (`{metric}`):\n\n| scenario | oracle |");
        for sys in &plan.systems {
            let _ = write!(s, " {} |", sys.name());
        }
        let _ = write!(s, "\n|---|---:|{}\n", "---:|".repeat(plan.systems.len()));
        for sc in &plan.scenarios {
            let oracle: Vec<(u64, f64)> = seeds
                .iter()
                .filter_map(|&seed| bound(sc, seed).map(|b| (seed, b)))
                .collect();
            if oracle.is_empty() {
                continue;
            }
            let o_mean = mean(&oracle.iter().map(|x| x.1).collect::<Vec<_>>());
            let _ = write!(s, "| `{sc}` | {} |", fmt_num(o_mean));
            for sys in &plan.systems {
                let pairs: Vec<(f64, f64)> = oracle
                    .iter()
                    .filter_map(|&(seed, b)| {
                        value(rows, (app, sc, sys.name()), seed, metric).map(|v| (v, b))
                    })
                    .collect();
                let text = if pairs.is_empty() {
                    "-".to_string()
                } else {
                    let v = mean(&pairs.iter().map(|p| p.0).collect::<Vec<_>>());
                    let b = mean(&pairs.iter().map(|p| p.1).collect::<Vec<_>>());
                    format!("{}x", fmt_num(v / b))
                };
                let _ = write!(s, " {text} |");
            }
            s.push('\n');
        }
    }
    if any {
        s.push('\n');
        s
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roam_core::BitRate;

    /// A message alone on a link: its transmission at the link's rate, plus the delay; a link
    /// that is down waits until it is up.
    #[test]
    fn the_oracle_waits_for_the_link_and_its_bytes() {
        let link = LinkTrace::constant(BitRate(1_000_000), Duration::from_millis(20));
        // 1250 bytes at 1 Mbit/s: 10 ms, plus 20 ms.
        let d = one_way(&link, Time::ZERO, 1250).unwrap();
        assert!((d.as_secs_f64() * 1e3 - 30.0).abs() < 1.5, "{d:?}");
        let mut off = link.clone();
        off.availability = roam_trace::piecewise::Piecewise::new(
            vec![
                (Time::ZERO, false),
                (Time::ZERO + Duration::from_secs(2), true),
            ],
            None,
        )
        .unwrap();
        let d = one_way(&off, Time::ZERO + Duration::from_millis(500), 1250).unwrap();
        assert!((d.as_secs_f64() * 1e3 - 1530.0).abs() < 1.5, "{d:?}");
        assert!(sensing_mean_ms("hotspot", 1, Duration::from_secs(60)).is_some_and(|m| m > 0.0));
    }
}
