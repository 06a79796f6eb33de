//! The report's section on concurrent applications (the paper's §7.2.4): vehicular sensing as
//! one process and as two (urgent and bulk apart, [`super::sensing_2proc`]), cell beside cell
//! for every system and scenario, and the paper's findings checked against this run: roam's
//! two-process figures within the noise of its one-process figures (the 95% bootstrap interval
//! of the ratio of their means holds 1), roam with two processes comparable to or better than
//! the idealised strategies, and what coordinating through shared memory cost.

use std::fmt::Write as _;

use crate::harness::plan::Plan;
use crate::harness::system::Builtin;
use crate::report::compare::{self, cell};
use crate::report::stats::{ratio_of_means, RatioOfMeans};
use crate::report::{fmt_num, mean, Row};

const ONE: &str = "sensing";
const TWO: &str = "sensing-2proc";
/// The metrics compared: (name, what, higher is better).
const METRICS: [(&str, &str, bool); 2] = [
    ("urgent_mean_ms", "urgent latency (ms)", false),
    ("bulk_kBps", "bulk (KB/s)", true),
];

/// `(seed, value)` of a cell's trials that finished.
fn by_seed(rows: &[Row], app: &str, sc: &str, sys: &str, metric: &str) -> Vec<(u64, f64)> {
    let mut v = compare::by_seed(rows, app, sc, sys, metric);
    v.retain(|x| x.1.is_finite());
    v
}

/// "1.04 [0.91-1.18]": a ratio of means with its interval.
fn ratio_text(r: &Option<RatioOfMeans>) -> String {
    match r {
        Some(RatioOfMeans {
            ratio,
            interval: Some((lo, hi)),
            ..
        }) => format!("{} [{}-{}]", fmt_num(*ratio), fmt_num(*lo), fmt_num(*hi)),
        Some(r) => fmt_num(r.ratio),
        None => "-".into(),
    }
}

/// Two figures this close (relative) are the same for the paper's finding, even where the
/// trials agree so well that the interval of their ratio misses 1 (the bulk throughput: 29.1
/// KB/s in every trial of both versions).
const SAME: f64 = 0.01;

/// Whether a ratio's interval holds 1 or lies within [`SAME`] of it (within the noise), or
/// `None` without an interval.
fn holds_one(r: &Option<RatioOfMeans>) -> Option<bool> {
    r.and_then(|r| r.interval)
        .map(|(lo, hi)| (lo <= 1.0 && 1.0 <= hi) || (lo >= 1.0 - SAME && hi <= 1.0 + SAME))
}

/// The section, when the run has both versions of sensing; empty otherwise.
pub fn section(plan: &Plan, rows: &[Row]) -> String {
    let has = |app: &str| rows.iter().any(|r| r.app == app);
    if !has(ONE) || !has(TWO) {
        return String::new();
    }
    let mut s = String::from(
        "## Concurrent applications: sensing as one process and as two\n\nThe paper's §7.2.4: \
         the urgent messages and the bulk data sent by two processes, each with its own \
         multi-socket (roam) or connection. Each cell is the mean over trials; \"2 / 1\" is the \
         ratio of the two versions' means with its 95% bootstrap interval (seeds paired).\n\n\
         | scenario | system | urgent latency (ms), 1 / 2 processes | 2 / 1 | bulk (KB/s), 1 / 2 \
         processes | 2 / 1 |\n|---|---|---|---|---|---|\n",
    );
    let mut checks = Vec::new();
    for sc in &plan.scenarios {
        for sys in &plan.systems {
            let name = sys.name();
            let mut line = format!("| `{sc}` | {name} |");
            for (metric, _, _) in METRICS {
                let (a, b) = (
                    cell(rows, ONE, sc, name, metric),
                    cell(rows, TWO, sc, name, metric),
                );
                let r = ratio_of_means(
                    &by_seed(rows, TWO, sc, name, metric),
                    &by_seed(rows, ONE, sc, name, metric),
                );
                let _ = write!(line, " {} / {} | {} |", a.cell(), b.cell(), ratio_text(&r));
                if *sys == Builtin::Roam {
                    checks.push(within_noise(sc, metric, &r));
                }
            }
            s.push_str(&line);
            s.push('\n');
        }
        if plan.systems.iter().any(|x| *x == Builtin::Roam) {
            checks.extend(against_idealised(rows, sc));
        }
    }
    s.push_str("\nThe paper's findings, checked:\n\n");
    for c in checks.into_iter().flatten() {
        let _ = writeln!(s, "- {c}");
    }
    s.push_str(&coordination(plan, rows));
    s
}

/// roam's two-process figure against its one-process figure on `metric` in `sc`.
fn within_noise(sc: &str, metric: &str, r: &Option<RatioOfMeans>) -> Option<String> {
    let verdict = match holds_one(r) {
        Some(true) => "within the noise (the interval holds 1 or lies within 1% of it): **met**",
        Some(false) => "outside the noise: **missed**",
        None => return None,
    };
    Some(format!(
        "`{sc}`, {metric}: roam with two processes over one, {} — {verdict}",
        ratio_text(r)
    ))
}

/// roam with two processes against each idealised strategy with two processes on the urgent
/// latency: comparable (the interval of their ratio of means holds 1) or better.
fn against_idealised(rows: &[Row], sc: &str) -> Vec<Option<String>> {
    super::PAPER_BASELINES
        .into_iter()
        .map(|b| {
            let (metric, _, _) = METRICS[0];
            let r = ratio_of_means(
                &by_seed(rows, TWO, sc, b.name(), metric),
                &by_seed(rows, TWO, sc, Builtin::Roam.name(), metric),
            )?;
            let verdict = match (r.ratio >= 1.0, holds_one(&Some(r))) {
                (true, _) => "better: **met**",
                (false, Some(true)) => {
                    "comparable (the interval holds 1 or lies within 1% of it): **met**"
                }
                _ => "worse: **missed**",
            };
            Some(format!(
                "`{sc}`: urgent latency, {} over roam with two processes each, {} — {verdict}",
                b.name(),
                ratio_text(&Some(r))
            ))
        })
        .collect()
}

/// What coordinating through shared memory cost roam's two processes: operations on the table
/// per second and the time one took, mean over every two-process roam trial.
fn coordination(plan: &Plan, rows: &[Row]) -> String {
    let vals = |metric: &str| -> Vec<f64> {
        rows.iter()
            .filter(|r| r.app == TWO && r.system == Builtin::Roam.name() && r.metric == metric)
            .filter(|r| r.value.is_finite() && plan.scenarios.contains(&r.scenario))
            .map(|r| r.value)
            .collect()
    };
    let (ops, us) = (
        vals("coordination_ops_per_s"),
        vals("coordination_us_per_op"),
    );
    if ops.is_empty() {
        return String::new();
    }
    format!(
        "\nCoordination's cost (roam, {} two-process trials): {} operations a second on the \
         shared table (both processes' publishes and reads), {} µs each on average: {} ms of \
         CPU a second.\n\n",
        ops.len(),
        fmt_num(mean(&ops)),
        fmt_num(mean(&us)),
        fmt_num(mean(&ops) * mean(&us) / 1e3)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::results::tests::mail_plan;
    use crate::harness::system::System;

    fn row(app: &str, system: &str, seed: u64, metric: &str, value: f64) -> Row {
        Row {
            app: app.into(),
            scenario: "hotspot".into(),
            system: system.into(),
            trial: seed as u32,
            seed,
            metric: metric.into(),
            value,
            unit: String::new(),
        }
    }

    /// Both versions side by side, roam's two-process figures checked against its one-process
    /// ones and against the idealised strategies, and the coordination's cost from the run.
    #[test]
    fn two_processes_beside_one() {
        let mut plan = mail_plan(std::path::Path::new("/nonexistent"), 3, false);
        plan.scenarios = vec!["hotspot".into()];
        plan.systems = vec![
            System::new(Builtin::Roam),
            System::new(Builtin::Aggregation),
        ];
        let mut rows = Vec::new();
        for seed in 1..=3 {
            let jitter = seed as f64;
            for app in [ONE, TWO] {
                rows.push(row(app, "roam", seed, "urgent_mean_ms", 30.0 + jitter));
                rows.push(row(app, "roam", seed, "bulk_kBps", 28.0 + jitter / 10.0));
                rows.push(row(
                    app,
                    "aggregation",
                    seed,
                    "urgent_mean_ms",
                    40.0 + jitter,
                ));
                rows.push(row(app, "aggregation", seed, "bulk_kBps", 28.0));
            }
            rows.push(row(TWO, "roam", seed, "coordination_ops_per_s", 100.0));
            rows.push(row(TWO, "roam", seed, "coordination_us_per_op", 2.0));
        }
        let s = section(&plan, &rows);
        assert!(s.contains("| `hotspot` | roam | 32.0"), "{s}");
        assert!(
            s.contains("urgent_mean_ms: roam with two processes over one, 1.00 [1.00-1.00] — within the noise"),
            "{s}"
        );
        assert!(
            s.contains("aggregation over roam with two processes each, 1.31"),
            "{s}"
        );
        assert!(s.contains("100 operations a second"), "{s}");
        // Without the two-process version, no section.
        let one: Vec<Row> = rows.into_iter().filter(|r| r.app == ONE).collect();
        assert_eq!(section(&plan, &one), "");
    }
}
