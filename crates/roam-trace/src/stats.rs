//! A scenario's statistics in the form of the Intentional Networking paper's trace description
//! (the Intentional Networking paper, section 7.1): median and maximum downlink and uplink bandwidth, the fraction of
//! time each network is available, and the median and longest availability session.

use crate::link::{LinkKind, NamedLink};
use crate::scenario::Scenario;
use roam_core::Time;
use std::time::Duration;

/// Statistics of one link over a window.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkStats {
    /// Link name.
    pub name: String,
    /// Link kind.
    pub kind: LinkKind,
    /// Median downlink capacity over the seconds the link was available, kbit/s.
    pub down_median_kbps: f64,
    /// Maximum per-second downlink capacity, kbit/s.
    pub down_max_kbps: f64,
    /// Median uplink capacity over the seconds the link was available, kbit/s.
    pub up_median_kbps: f64,
    /// Maximum per-second uplink capacity, kbit/s.
    pub up_max_kbps: f64,
    /// Median round-trip propagation time, ms.
    pub rtt_median_ms: f64,
    /// Percentage of the window the link was available.
    pub available_pct: f64,
    /// Number of availability sessions.
    pub sessions: usize,
    /// Median session length, s.
    pub session_median_s: f64,
    /// Longest session, s.
    pub session_longest_s: f64,
}

/// Statistics of a scenario over a window.
#[derive(Clone, Debug, PartialEq)]
pub struct ScenarioStats {
    /// Scenario name.
    pub name: String,
    /// Window length.
    pub duration: Duration,
    /// Per-link statistics.
    pub links: Vec<LinkStats>,
}

/// Median of a slice (NaN-free), 0 when empty.
pub fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Compute one link's statistics over `[0, duration)`.
pub fn link_stats(link: &NamedLink, duration: Duration) -> LinkStats {
    let secs = link.trace.per_second(duration);
    let avail: Vec<_> = secs.iter().filter(|s| s.available > 0.0).collect();
    let mut down: Vec<f64> = avail.iter().map(|s| s.down_kbps).collect();
    let mut up: Vec<f64> = avail.iter().map(|s| s.up_kbps).collect();
    let mut rtt: Vec<f64> = secs.iter().map(|s| s.rtt_ms).collect();
    let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    let end = Time::ZERO + duration;
    let sessions = link.trace.availability.true_intervals(Time::ZERO, end);
    let mut lens: Vec<f64> = sessions
        .iter()
        .map(|(a, b)| (*b - *a).as_secs_f64())
        .collect();
    LinkStats {
        name: link.name.clone(),
        kind: link.kind,
        down_max_kbps: max(&down),
        up_max_kbps: max(&up),
        down_median_kbps: median(&mut down),
        up_median_kbps: median(&mut up),
        rtt_median_ms: median(&mut rtt),
        available_pct: 100.0 * link.trace.availability.fraction_true(Time::ZERO, end),
        sessions: lens.len(),
        session_longest_s: max(&lens),
        session_median_s: median(&mut lens),
    }
}

/// Compute a scenario's statistics over `[0, duration)`.
pub fn scenario_stats(s: &Scenario, duration: Duration) -> ScenarioStats {
    ScenarioStats {
        name: s.name.clone(),
        duration,
        links: s.links.iter().map(|l| link_stats(l, duration)).collect(),
    }
}

impl ScenarioStats {
    /// A markdown table, one row per link.
    pub fn to_markdown(&self) -> String {
        let mut out = format!(
            "scenario `{}`, {:.0} min\n\n| link | kind | down median (kbps) | down max (kbps) | up median (kbps) | up max (kbps) | RTT (ms) | available | sessions | session median (s) | longest (s) |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
            self.name,
            self.duration.as_secs_f64() / 60.0
        );
        for l in &self.links {
            out.push_str(&format!(
                "| {} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.1}% | {} | {:.1} | {:.1} |\n",
                l.name,
                match l.kind {
                    LinkKind::Wifi => "WiFi",
                    LinkKind::Cellular => "cellular",
                    LinkKind::Other => "-",
                },
                l.down_median_kbps,
                l.down_max_kbps,
                l.up_median_kbps,
                l.up_max_kbps,
                l.rtt_median_ms,
                l.available_pct,
                l.sessions,
                l.session_median_s,
                l.session_longest_s
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hotspot_stats() {
        let s = Scenario::by_name("hotspot", 1).unwrap();
        let st = scenario_stats(&s, Duration::from_secs(60));
        assert_eq!(st.links[0].down_median_kbps, 600.0);
        assert_eq!(st.links[1].rtt_median_ms, 400.0);
        assert_eq!(st.links[0].available_pct, 100.0);
        assert_eq!(st.links[0].sessions, 1);
        assert_eq!(st.links[0].session_longest_s, 60.0);
        let md = st.to_markdown();
        assert!(md.contains("| wifi | WiFi | 600 | 600 |"), "{md}");
    }

    #[test]
    fn medians() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&mut []), 0.0);
    }
}
