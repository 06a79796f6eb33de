//! Whether each system used every link it could: a trial's per-link metrics
//! (`link_NAME_down_kB`, `link_NAME_up_kB`, `link_NAME_avail_s`, written by every trial) read
//! back, and the trials in which a system never used a link that was up flagged. A comparison
//! against a system that ran on one of two links by accident (Linux MPTCP whose WiFi join was
//! lost in an outage) is not the comparison it claims to be; the report says so from the
//! run's own counters.

use std::collections::BTreeMap;

use crate::harness::results::trial_name;
use crate::report::{fmt_num, Row};

/// A link up at least this long in a trial...
pub const UP_AT_LEAST_S: f64 = 10.0;
/// ...that carried less than this, both ways, was never used.
pub const USED_KB: f64 = 10.0;

/// One link of one trial: (up seconds, kB both ways).
type LinkUse = BTreeMap<String, (f64, f64)>;

/// Per trial (its name), each link's (seconds up, kB carried both ways).
fn link_use(rows: &[Row]) -> BTreeMap<String, LinkUse> {
    let mut out: BTreeMap<String, LinkUse> = BTreeMap::new();
    for r in rows {
        let Some(rest) = r.metric.strip_prefix("link_") else {
            continue;
        };
        let (link, is_avail) = if let Some(l) = rest.strip_suffix("_avail_s") {
            (l, true)
        } else if let Some(l) = rest
            .strip_suffix("_down_kB")
            .or_else(|| rest.strip_suffix("_up_kB"))
        {
            (l, false)
        } else {
            continue;
        };
        let name = trial_name(&r.app, &r.scenario, &r.system, r.trial);
        let e = out
            .entry(name)
            .or_default()
            .entry(link.to_string())
            .or_insert((0.0, 0.0));
        if is_avail {
            e.0 = r.value;
        } else {
            e.1 += r.value;
        }
    }
    out
}

/// Every trial in which a system never used a link that was up at least [`UP_AT_LEAST_S`]
/// (under [`USED_KB`] both ways), one line each: `app/scenario/system#trial: never used
/// `wifi`, up 412 s (0.3 kB)`. Trials without link counters (runs before they were kept) are
/// not judged.
pub fn unused_links(rows: &[Row]) -> Vec<String> {
    unused(&link_use(rows))
}

/// [`unused_links`] of the links' use, trial by trial.
fn unused(uses: &BTreeMap<String, LinkUse>) -> Vec<String> {
    let mut out = Vec::new();
    for (trial, links) in uses {
        for (link, &(up_s, kb)) in links {
            if up_s >= UP_AT_LEAST_S && kb < USED_KB {
                out.push(format!(
                    "{trial}: never used `{link}`, up {} s ({} kB)",
                    fmt_num(up_s),
                    fmt_num(kb)
                ));
            }
        }
    }
    out
}

/// The report's section on links a system never used (empty when none was, or no trial kept
/// its counters).
pub fn section(rows: &[Row]) -> String {
    let uses = link_use(rows);
    let unused = unused(&uses);
    let judged = uses.len();
    if judged == 0 {
        return String::new();
    }
    let mut s = format!(
        "## Links a system never used\n\nFrom each trial's link counters ({judged} trials): a \
         trial in which a system carried under {USED_KB} kB over a link that was up at least \
         {UP_AT_LEAST_S} s. "
    );
    if unused.is_empty() {
        s.push_str("None.\n\n");
    } else {
        s.push_str("Its figures compare that system on fewer links than the others had:\n\n");
        for u in unused {
            s.push_str(&format!("- {u}\n"));
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(system: &str, metric: &str, value: f64) -> Row {
        Row {
            app: "sensing".into(),
            scenario: "vehicular".into(),
            system: system.into(),
            trial: 2,
            seed: 102,
            metric: metric.into(),
            value,
            unit: String::new(),
        }
    }

    #[test]
    fn a_link_up_and_unused_is_flagged() {
        let rows = vec![
            row("mptcp", "link_wifi_down_kB", 0.0),
            row("mptcp", "link_wifi_up_kB", 0.4),
            row("mptcp", "link_wifi_avail_s", 412.0),
            row("mptcp", "link_cell_down_kB", 9000.0),
            row("mptcp", "link_cell_up_kB", 300.0),
            row("mptcp", "link_cell_avail_s", 900.0),
            row("roam", "link_wifi_down_kB", 128.0),
            row("roam", "link_wifi_up_kB", 3.0),
            row("roam", "link_wifi_avail_s", 412.0),
            row("roam", "urgent_ms", 417.0),
        ];
        assert_eq!(
            unused_links(&rows),
            ["sensing/vehicular/mptcp#2: never used `wifi`, up 412 s (0.400 kB)"]
        );
        assert!(section(&rows).contains("- sensing/vehicular/mptcp#2"));
        // A link that was hardly up is not judged; no counters, no section.
        let short = vec![
            row("mptcp", "link_wifi_down_kB", 0.0),
            row("mptcp", "link_wifi_avail_s", 4.0),
        ];
        assert!(unused_links(&short).is_empty());
        assert_eq!(section(&[row("roam", "urgent_ms", 1.0)]), "");
    }
}
