//! How roam compares with each system, cell by cell: the trials of a cell; roam's advantage
//! as the ratio of the two systems' means with its bootstrap interval (the papers' "X times",
//! the headline), and as the geometric mean of per-seed ratios with their range (trials of every
//! system share their seeds: the second view); and which baseline is the best (one rule for
//! every report and the README: the best mean).

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

/// `(seed, value)` of every trial of one cell's metric.
pub(crate) fn by_seed(
    rows: &[Row],
    app: &str,
    scenario: &str,
    system: &str,
    metric: &str,
) -> Vec<(u64, f64)> {
    rows.iter()
        .filter(|r| {
            r.app == app && r.scenario == scenario && r.system == system && r.metric == metric
        })
        .map(|r| (r.seed, r.value))
        .collect()
}

/// roam's advantage over `system` on `metric` as the ratio of the means (above 1: roam
/// better; `other / roam` for a lower-is-better metric, `roam / other` for a higher-is-better
/// one), with its 95% bootstrap interval. `None` when a trial of either failed to finish or
/// either has none: a mean is then unknown.
pub fn advantage_of_means(
    rows: &[Row],
    app: &str,
    scenario: &str,
    system: &str,
    metric: &str,
    higher_better: bool,
) -> Option<stats::RatioOfMeans> {
    let roam = by_seed(rows, app, scenario, Builtin::Roam.name(), metric);
    let other = by_seed(rows, app, scenario, system, metric);
    let finished = |v: &[(u64, f64)]| -> Vec<(u64, f64)> {
        v.iter().copied().filter(|x| !x.1.is_nan()).collect()
    };
    let (roam, other) = (finished(&roam), finished(&other));
    if higher_better {
        stats::ratio_of_means(&roam, &other)
    } else {
        stats::ratio_of_means(&other, &roam)
    }
}

/// "2.65x faster [1.90-3.41x]": roam's advantage on a lower-is-better metric as the ratio of
/// means, and its interval.
pub(crate) fn speedup_of_means(r: &stats::RatioOfMeans) -> String {
    let (word, x, iv) = if r.ratio >= 1.0 {
        ("faster", r.ratio, r.interval)
    } else {
        (
            "slower",
            1.0 / r.ratio,
            r.interval.map(|(lo, hi)| (1.0 / hi, 1.0 / lo)),
        )
    };
    match iv {
        Some((lo, hi)) => format!("{}x {word} [{}-{}x]", fmt_num(x), fmt_num(lo), fmt_num(hi)),
        None => format!("{}x {word}", fmt_num(x)),
    }
}

/// "+5% [-2% to +9%]": roam's advantage as the ratio of means, as a relative gain (positive:
/// roam better), and its interval.
pub(crate) fn gain_of_means(r: &stats::RatioOfMeans) -> String {
    let pct = |r: f64| format!("{:+.0}%", (r - 1.0) * 100.0);
    match r.interval {
        Some((lo, hi)) => format!("{} [{} to {}]", pct(r.ratio), pct(lo), pct(hi)),
        None => pct(r.ratio),
    }
}

/// roam's advantage over `system` on `metric` as a report shows it: the ratio of means with
/// its interval, then "per seed:" the geometric mean of per-seed ratios with their range; the
/// per-seed view alone where a mean is unknown (an unfinished trial); "-" where neither is
/// known. `percent`: as relative gains rather than speed-ups.
pub fn advantage_text(
    rows: &[Row],
    (app, scenario, system): (&str, &str, &str),
    metric: &str,
    higher_better: bool,
    percent: bool,
) -> String {
    let of_means = advantage_of_means(rows, app, scenario, system, metric, higher_better);
    let adv = advantages(rows, app, scenario, system, metric, higher_better);
    let per_seed = if percent { gains(&adv) } else { speedups(&adv) };
    match of_means {
        Some(r) => {
            let head = if percent {
                gain_of_means(&r)
            } else {
                speedup_of_means(&r)
            };
            if adv.len() < 2 {
                head
            } else {
                format!("{head} (per seed: {per_seed})")
            }
        }
        None if per_seed == "-" => per_seed,
        None => format!("per seed: {per_seed} (a mean is unknown: a trial did not finish)"),
    }
}

/// The best of `baselines` on `app`'s `metric` over `scenario`: the best mean
/// ([`Summary::value`]: the median where a trial did not finish), one rule for every report
/// and the README. `None` when none has a result.
pub fn best_baseline<'a>(
    rows: &[Row],
    (app, scenario): (&str, &str),
    baselines: &[&'a str],
    metric: &str,
    higher_better: bool,
) -> Option<(&'a str, Summary)> {
    baselines
        .iter()
        .map(|b| (*b, cell(rows, app, scenario, b, metric)))
        .filter(|(_, c)| c.value().is_finite())
        .max_by(|a, b| {
            let o = a.1.value().total_cmp(&b.1.value());
            if higher_better {
                o
            } else {
                o.reverse()
            }
        })
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
    let (roam, other) = (
        by_seed(rows, app, scenario, Builtin::Roam.name(), metric),
        by_seed(rows, app, scenario, system, metric),
    );
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
        // A mean is unknown (seed 3 unfinished): the per-seed view alone, said so.
        let key = ("mail", "hotspot", "aggregation");
        assert_eq!(
            advantage_text(&rows, key, "open_ms", false, false),
            "per seed: 2.00x faster (1.00-4.00x, 2 seeds) (a mean is unknown: a trial did not finish)"
        );
    }

    /// The headline is the ratio of means (the papers' statistic), the per-seed geometric
    /// mean second; the best baseline is the best mean.
    #[test]
    fn the_ratio_of_means_leads() {
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
            row("roam", 1, 10.0),
            row("roam", 2, 10.0),
            row("aggregation", 1, 60.0),
            row("aggregation", 2, 20.0),
            row("best-latency", 1, 30.0),
            row("best-latency", 2, 30.0),
        ];
        let r =
            advantage_of_means(&rows, "mail", "hotspot", "aggregation", "open_ms", false).unwrap();
        assert!((r.ratio - 4.0).abs() < 1e-12);
        let text = advantage_text(
            &rows,
            ("mail", "hotspot", "aggregation"),
            "open_ms",
            false,
            false,
        );
        assert!(
            text.starts_with("4.00x faster [2.00-6.00x] (per seed: 3.46x faster"),
            "{text}"
        );
        // The best baseline by mean, not median: aggregation's median is lower (10 against
        // 20) but one far trial makes its mean 40 against 20.
        let three = vec![
            row("aggregation", 1, 10.0),
            row("aggregation", 2, 10.0),
            row("aggregation", 3, 100.0),
            row("best-latency", 1, 20.0),
            row("best-latency", 2, 20.0),
            row("best-latency", 3, 20.0),
        ];
        let pair = ["aggregation", "best-latency"];
        let best = best_baseline(&three, ("mail", "hotspot"), &pair, "open_ms", false);
        assert_eq!(best.map(|b| b.0), Some("best-latency"));
        let best = best_baseline(&three, ("mail", "hotspot"), &pair, "open_ms", true);
        assert_eq!(best.map(|b| b.0), Some("aggregation"));
    }
}
