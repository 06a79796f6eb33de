//! How roam compares with each system, cell by cell: the trials of a cell, and roam's
//! advantage as the geometric mean of per-seed ratios (trials of every system share their
//! seeds).

use crate::harness::system::Builtin;
use crate::report::stats;
use crate::report::{fmt_num, summarize, Row, Summary};

/// One metric of one cell, trial by trial.
pub fn values(rows: &[Row], app: &str, scenario: &str, system: &str, metric: &str) -> Vec<f64> {
    rows.iter()
        .filter(|r| {
            r.app == app && r.scenario == scenario && r.system == system && r.metric == metric
        })
        .map(|r| r.value)
        .collect()
}

/// Summary of one metric of one cell. A failed trial leaves one `error` row and none of its
/// metrics: it counts as failed in every metric of its cell (else a cell whose every trial
/// failed would read "not run").
pub fn cell(rows: &[Row], app: &str, scenario: &str, system: &str, metric: &str) -> Summary {
    let mut v = values(rows, app, scenario, system, metric);
    if metric != "error" {
        let of_cell: Vec<&Row> = rows
            .iter()
            .filter(|r| r.app == app && r.scenario == scenario && r.system == system)
            .collect();
        let has = |trial: u32| {
            of_cell
                .iter()
                .any(|r| r.trial == trial && r.metric == metric)
        };
        let failed = of_cell
            .iter()
            .filter(|r| r.metric == "error" && !has(r.trial))
            .count();
        v.extend(std::iter::repeat_n(f64::NAN, failed));
    }
    summarize(&v)
}

/// roam's advantage over `system` on `metric`, seed by seed (trials of every system share
/// their seeds): `other / roam` for a lower-is-better metric, `roam / other` for a
/// higher-is-better one, so above 1 is roam better. Seeds where either did not finish or failed
/// are left out.
pub fn advantages(
    rows: &[Row],
    app: &str,
    scenario: &str,
    system: &str,
    metric: &str,
    higher_better: bool,
) -> Vec<f64> {
    let by_seed = |sys: &str| -> Vec<(u64, f64)> {
        rows.iter()
            .filter(|r| {
                r.app == app && r.scenario == scenario && r.system == sys && r.metric == metric
            })
            .map(|r| (r.seed, r.value))
            .collect()
    };
    let (roam, other) = (by_seed(Builtin::Roam.name()), by_seed(system));
    let pairs = if higher_better {
        stats::paired_ratios(&roam, &other)
    } else {
        stats::paired_ratios(&other, &roam)
    };
    pairs.into_iter().map(|(_, r)| r).collect()
}

/// "3.1x faster (2.0-4.5x, 5 seeds)": the geometric mean of per-seed advantages of a
/// lower-is-better metric, their range, and how many seeds paired.
pub(crate) fn speedups(adv: &[f64]) -> String {
    let g = stats::geometric_mean(adv);
    if !g.is_finite() {
        return "-".into();
    }
    let head = if g >= 1.0 {
        format!("{}x faster", fmt_num(g))
    } else {
        format!("{}x slower", fmt_num(1.0 / g))
    };
    if adv.len() < 2 {
        return head;
    }
    let (lo, hi) = min_max(adv);
    format!(
        "{head} ({}-{}x, {} seeds)",
        fmt_num(lo),
        fmt_num(hi),
        adv.len()
    )
}

/// "+5% (-2% to +9%)": the geometric mean of per-seed advantages as roam's relative gain
/// (positive: roam better), and the range over seeds.
pub(crate) fn gains(adv: &[f64]) -> String {
    let g = stats::geometric_mean(adv);
    if !g.is_finite() {
        return "-".into();
    }
    let pct = |r: f64| format!("{:+.0}%", (r - 1.0) * 100.0);
    if adv.len() < 2 {
        return pct(g);
    }
    let (lo, hi) = min_max(adv);
    format!("{} ({} to {})", pct(g), pct(lo), pct(hi))
}

fn min_max(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        })
}

/// "roam 3.1x faster" for a lower-is-better metric.
pub(crate) fn speedup(other: f64, roam: f64) -> String {
    if !(other.is_finite() && roam.is_finite()) || roam <= 0.0 {
        return "-".into();
    }
    let r = other / roam;
    if r >= 1.0 {
        format!("{}x faster", fmt_num(r))
    } else {
        format!("{}x slower", fmt_num(1.0 / r))
    }
}

/// Relative difference of roam's value, "+5%" meaning roam is 5% better.
pub(crate) fn better_by(other: f64, roam: f64, higher_better: bool) -> String {
    if !(other.is_finite() && roam.is_finite()) || other == 0.0 {
        return "-".into();
    }
    format!("{:+.0}%", gain(other, roam, higher_better) * 100.0)
}

/// roam's relative advantage over `other` (0.05: 5% better; negative: worse).
fn gain(other: f64, roam: f64, higher_better: bool) -> f64 {
    if higher_better {
        roam / other - 1.0
    } else {
        other / roam - 1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report;

    /// A cell whose trials failed reads "failed", not "not run"; one failed trial beside
    /// finished ones is counted among the cell's trials.
    #[test]
    fn failed_trials_count_in_every_metric_of_their_cell() {
        let row = |trial: u32, metric: &str, value: f64| Row {
            app: "image".into(),
            scenario: "s".into(),
            system: "nghttp".into(),
            trial,
            seed: trial as u64,
            metric: metric.into(),
            value,
            unit: String::new(),
        };
        let rows = vec![row(1, "error", f64::NAN), row(2, "error", f64::NAN)];
        assert_eq!(
            cell(&rows, "image", "s", "nghttp", "throughput_mbps").cell(),
            "failed"
        );
        assert_eq!(
            cell(&rows, "image", "s", "curl", "throughput_mbps").cell(),
            "not run"
        );
        let rows = vec![row(1, "error", f64::NAN), row(2, "throughput_mbps", 4.0)];
        let c = cell(&rows, "image", "s", "nghttp", "throughput_mbps");
        assert_eq!((c.n, c.failed), (1, 1));
        // The mean of the one that finished says it leaves the other out.
        assert_eq!(c.cell(), "4.00 [1 of 2 failed]");
    }

    /// roam's advantage pairs trials by seed: the geometric mean of the per-seed ratios, with
    /// their range, where the ratio of the medians would pair a fast seed with a slow one.
    #[test]
    fn advantages_pair_trials_by_seed() {
        let row = |system: &str, seed: u64, value: f64| Row {
            app: "mail".into(),
            scenario: "hotspot".into(),
            system: system.into(),
            trial: seed as u32,
            seed,
            metric: "open_ms".into(),
            value,
            unit: "ms".into(),
        };
        let rows = vec![
            row("roam", 1, 100.0),
            row("roam", 2, 1000.0),
            row("roam", 3, 50.0),
            row("aggregation", 1, 400.0),
            row("aggregation", 2, 1000.0),
            row("aggregation", 3, report::UNFINISHED),
        ];
        let adv = advantages(&rows, "mail", "hotspot", "aggregation", "open_ms", false);
        assert_eq!(
            adv,
            [4.0, 1.0],
            "seed 3 did not finish on aggregation: no pair"
        );
        assert_eq!(speedups(&adv), "2.00x faster (1.00-4.00x, 2 seeds)");
        let up = advantages(&rows, "mail", "hotspot", "aggregation", "open_ms", true);
        assert_eq!(gains(&up), "-50% (-75% to +0%)");
    }
}
