//! Trial rows, their summary per cell (mean with a 95% interval, as the papers report: Student's
//! t, or a percentile bootstrap where t does not suit the trials; the median as a second view),
//! and the CSV. The charts are in [`crate::report::chart`].

pub mod chart;
pub mod compare;
pub mod links;
pub mod stats;

use std::fmt::Write as _;

use serde::Serialize;

/// One measured value of one trial: a row of `trials.csv`.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Application.
    pub app: String,
    /// Scenario.
    pub scenario: String,
    /// System.
    pub system: String,
    /// Trial number (from 1).
    pub trial: u32,
    /// Seed of the scenario and workload.
    pub seed: u64,
    /// Metric name.
    pub metric: String,
    /// Value: NaN when the trial failed, [`UNFINISHED`] when the workload did not finish
    /// within the trial's time limit (a lower-is-better time that is known only to exceed it).
    pub value: f64,
    /// Unit.
    pub unit: String,
}

/// CSV text of the rows (header included).
pub fn csv(rows: &[Row]) -> String {
    format!("{CSV_HEADER}\n{}", csv_lines(rows))
}

/// The header line of `trials.csv`.
const CSV_HEADER: &str = "app,scenario,system,trial,seed,metric,value,unit";

/// CSV lines of the rows, without the header (to append to a file that has one).
pub fn csv_lines(rows: &[Row]) -> String {
    let mut s = String::new();
    for r in rows {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{}",
            r.app, r.scenario, r.system, r.trial, r.seed, r.metric, r.value, r.unit
        );
    }
    s
}

/// The rows of a `trials.csv` written by [`csv`]; `what` names the file in errors, which give
/// the line.
pub fn parse_csv(text: &str, what: &str) -> anyhow::Result<Vec<Row>> {
    use anyhow::{bail, Context};
    let mut lines = text.lines().enumerate();
    match lines.next() {
        Some((_, CSV_HEADER)) => {}
        Some((_, h)) => bail!("{what}:1: not a trials.csv header: `{h}`"),
        None => bail!("{what}: empty (no header)"),
    }
    let mut rows = Vec::new();
    for (i, line) in lines {
        let at = || format!("{what}:{}", i + 1);
        let f: Vec<&str> = line.split(',').collect();
        let [app, scenario, system, trial, seed, metric, value, unit] = f[..] else {
            bail!(
                "{}: expected 8 comma-separated fields, found {}",
                at(),
                f.len()
            );
        };
        rows.push(Row {
            app: app.into(),
            scenario: scenario.into(),
            system: system.into(),
            trial: trial
                .parse()
                .with_context(|| format!("{}: trial `{trial}`", at()))?,
            seed: seed
                .parse()
                .with_context(|| format!("{}: seed `{seed}`", at()))?,
            metric: metric.into(),
            value: value
                .parse()
                .with_context(|| format!("{}: value `{value}`", at()))?,
            unit: unit.into(),
        });
    }
    Ok(rows)
}

/// How many trials the cells of `rows` hold, for a report's first paragraph: "5 trial(s) per
/// cell" when each has the `planned` number, else what they hold beside the plan ("2 of 5
/// planned trial(s) per cell", "1-2 of 5 ..."): a report of an unfinished run says so. A cell
/// is an (application, scenario, system); a trial counts once whatever its metrics.
pub fn trials_per_cell(planned: u32, rows: &[Row]) -> String {
    let mut cells: std::collections::BTreeMap<_, std::collections::BTreeSet<u32>> =
        Default::default();
    for r in rows {
        cells
            .entry((&r.app, &r.scenario, &r.system))
            .or_default()
            .insert(r.trial);
    }
    let held = cells.values().map(|t| t.len() as u32);
    match (held.clone().min(), held.max()) {
        (Some(lo), Some(hi)) if lo == hi && hi == planned => format!("{planned} trial(s) per cell"),
        (Some(lo), Some(hi)) if lo == hi => format!("{lo} of {planned} planned trial(s) per cell"),
        (Some(lo), Some(hi)) => format!("{lo}-{hi} of {planned} planned trial(s) per cell"),
        _ => format!("no trials yet of {planned} planned per cell"),
    }
}

/// A time metric whose workload did not finish within the trial's time limit: +infinity, so
/// that it sorts above every finished value (the median stays right while fewer than half of
/// the trials are unfinished) and is never mistaken for a measured number.
pub const UNFINISHED: f64 = f64::INFINITY;

/// Median of the values that are not NaN (unfinished ones sort last); NaN when there are none.
pub fn median(v: &[f64]) -> f64 {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    roam_trace::stats::median(&mut v)
}

/// The mean of a trial's event latencies, or [`UNFINISHED`] if one never completed (or there
/// were none).
pub fn mean_or_unfinished(v: &[f64]) -> f64 {
    if v.is_empty() || v.iter().any(|x| x.is_infinite()) {
        UNFINISHED
    } else {
        mean(v)
    }
}

/// Arithmetic mean (0 when empty, like a count of nothing).
pub fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// Summary of one cell over its trials.
#[derive(Clone, Copy, Debug, Default)]
pub struct Summary {
    /// Trials with a value (finished or [`UNFINISHED`]; failed trials are not counted).
    pub n: usize,
    /// Of those, trials that did not finish within the time limit.
    pub unfinished: usize,
    /// Trials that failed (no value); with `n`, zero when the cell was not run at all.
    pub failed: usize,
    /// Median.
    pub median: f64,
    /// Mean (NaN when a trial is unfinished: its value is only known to exceed a limit).
    pub mean: f64,
    /// Half-width of the 95% confidence interval of the mean (Student's t; NaN with one
    /// trial, or when a trial is unfinished).
    pub ci: f64,
    /// Sample skewness of the values (NaN with fewer than three).
    pub skew: f64,
    /// The 95% percentile bootstrap interval of the mean (see [`stats::bootstrap_mean`]), for
    /// where a t interval does not suit the trials; `None` with one trial or an unfinished one.
    pub boot: Option<(f64, f64)>,
}

/// Above this sample skewness (in magnitude) a t interval over a handful of trials does not
/// suit them: one trial far out makes it symmetric where the data are not (and reach below
/// zero). The cell shows the bootstrap interval instead.
pub const SKEWED: f64 = 1.0;

/// Which interval of the mean a cell shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntervalKind {
    /// Student's t: mean +- t(0.975, n-1) * s / sqrt(n).
    Student,
    /// The percentile bootstrap ([`stats::bootstrap_mean`]), where a t interval would be
    /// skewed or reach below zero.
    Bootstrap,
}

/// A 95% interval of a cell's mean.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interval {
    /// Low end.
    pub lo: f64,
    /// High end.
    pub hi: f64,
    /// How it was computed.
    pub kind: IntervalKind,
}

/// Mean, 95% CI and median over the trials with a value; mean and CI only when all finished.
pub fn summarize(v: &[f64]) -> Summary {
    let f: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan()).collect();
    let n = f.len();
    let unfinished = f.iter().filter(|x| x.is_infinite()).count();
    let failed = v.len() - n;
    if n == 0 || unfinished > 0 {
        return Summary {
            n,
            unfinished,
            failed,
            median: median(&f),
            mean: f64::NAN,
            ci: f64::NAN,
            skew: f64::NAN,
            boot: None,
        };
    }
    let mean = f.iter().sum::<f64>() / n as f64;
    let skew = crate::report::stats::skewness(&f);
    let ci = if n > 1 {
        let var = f.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        crate::report::stats::t_critical(0.95, n - 1) * (var / n as f64).sqrt()
    } else {
        f64::NAN
    };
    Summary {
        n,
        unfinished,
        failed,
        median: median(&f),
        mean,
        ci,
        skew,
        // The bootstrap only where a cell shows it (`Summary::interval`): 10,000 resamples.
        boot: (!t_suits(mean, ci, skew))
            .then(|| stats::bootstrap_mean(&f))
            .flatten(),
    }
}

/// Whether a t interval (half-width `ci` about `mean`) suits trials of skewness `skew`: finite,
/// not skewed beyond [`SKEWED`], not reaching below zero.
fn t_suits(mean: f64, ci: f64, skew: f64) -> bool {
    // NaN (under three trials) is not skewed.
    let skewed = skew.abs() > SKEWED;
    ci.is_finite() && !skewed && mean - ci >= 0.0
}

/// A number with about three significant digits.
pub fn fmt_num(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    let a = x.abs();
    if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

impl Summary {
    /// The value a table or a bar shows: the mean of the trials, as the papers report; the
    /// median where some trial did not finish (the mean is then unknown).
    pub fn value(&self) -> f64 {
        if self.mean.is_finite() {
            self.mean
        } else {
            self.median
        }
    }

    /// The 95% interval of the mean, whenever all trials finished and there is more than one:
    /// Student's t where it suits the data (not skewed beyond [`SKEWED`], not reaching below
    /// zero: no metric here is negative, and an interval that does is the t interval failing,
    /// not a fact), else the percentile bootstrap's. Never dropped.
    pub fn interval(&self) -> Option<Interval> {
        if t_suits(self.mean, self.ci, self.skew) {
            return Some(Interval {
                lo: self.mean - self.ci,
                hi: self.mean + self.ci,
                kind: IntervalKind::Student,
            });
        }
        self.boot.map(|(lo, hi)| Interval {
            lo,
            hi,
            kind: IntervalKind::Bootstrap,
        })
    }

    /// "mean [lo, hi] (median m)", the interval the 95% t interval of the mean; "mean [lo, hi;
    /// bootstrap] (median m)" where a t interval would not suit the data (see `interval`);
    /// "unfinished (k of
    /// n)" when the median trial did not finish, and "median m (k of n unfinished)" when some
    /// other trial did not (the mean is then unknown). Trials that failed are outside all of
    /// it and counted after it: "... [k of n failed]"; "failed" when every one did.
    pub fn cell(&self) -> String {
        if self.n == 0 {
            let what = if self.failed == 0 {
                "not run"
            } else {
                "failed"
            };
            return what.into();
        }
        let shown = self.finished_cell();
        if self.failed == 0 {
            return shown;
        }
        // The mean is over the trials that did not fail: say how many that leaves out.
        format!(
            "{shown} [{} of {} failed]",
            self.failed,
            self.n + self.failed
        )
    }

    /// [`Summary::cell`] of the trials that did not fail.
    fn finished_cell(&self) -> String {
        if self.median.is_infinite() {
            return format!("unfinished ({} of {})", self.unfinished, self.n);
        }
        if let Some(some) = self.some_unfinished() {
            return format!("median {} ({some})", fmt_num(self.median));
        }
        if self.n == 1 {
            return fmt_num(self.mean);
        }
        match self.interval() {
            Some(i) => format!(
                "{} [{}, {}{}] (median {})",
                fmt_num(self.mean),
                fmt_num(i.lo),
                fmt_num(i.hi),
                match i.kind {
                    IntervalKind::Student => "",
                    IntervalKind::Bootstrap => "; bootstrap",
                },
                fmt_num(self.median)
            ),
            None => format!("{} (median {})", fmt_num(self.mean), fmt_num(self.median)),
        }
    }

    /// "k of n unfinished" when some trials did not finish but the median did (the table's
    /// cell and the chart's bar both say it); None otherwise.
    pub fn some_unfinished(&self) -> Option<String> {
        (self.unfinished > 0 && self.median.is_finite())
            .then(|| format!("{} of {} unfinished", self.unfinished, self.n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report's count of trials says what the cells hold, and the plan when they differ.
    #[test]
    fn trials_per_cell_counts_what_the_cells_hold() {
        let row = |system: &str, trial: u32, metric: &str| Row {
            app: "news".into(),
            scenario: "home".into(),
            system: system.into(),
            trial,
            seed: trial as u64,
            metric: metric.into(),
            value: 1.0,
            unit: "kB".into(),
        };
        let mut rows = vec![];
        for t in 1..=2 {
            for m in ["cell_kB", "wifi_kB"] {
                rows.push(row("precog", t, m));
                rows.push(row("url", t, m));
            }
        }
        assert_eq!(trials_per_cell(2, &rows), "2 trial(s) per cell");
        assert_eq!(
            trials_per_cell(5, &rows),
            "2 of 5 planned trial(s) per cell"
        );
        rows.push(row("url", 3, "cell_kB"));
        assert_eq!(
            trials_per_cell(5, &rows),
            "2-3 of 5 planned trial(s) per cell"
        );
        assert_eq!(
            trials_per_cell(5, &[]),
            "no trials yet of 5 planned per cell"
        );
    }

    #[test]
    fn the_csv_reads_back_what_it_wrote_and_names_bad_lines() {
        let row = |metric: &str, value: f64| Row {
            app: "mail".into(),
            scenario: "hotspot".into(),
            system: "roam".into(),
            trial: 2,
            seed: 2,
            metric: metric.into(),
            value,
            unit: "s".into(),
        };
        let rows = [
            row("background_s", 11.5),
            row("error", f64::NAN),
            row("x", UNFINISHED),
        ];
        let back = parse_csv(&csv(&rows), "t.csv").unwrap();
        assert_eq!(csv(&back), csv(&rows));
        assert!(back[1].value.is_nan() && back[2].value == UNFINISHED);
        let e = parse_csv(
            "app,scenario,system,trial,seed,metric,value,unit\nfs,a,b,1,1,m\n",
            "t.csv",
        )
        .unwrap_err();
        assert!(format!("{e:#}").contains("t.csv:2: expected 8"), "{e:#}");
        let e = parse_csv(
            "app,scenario,system,trial,seed,metric,value,unit\nfs,a,b,x,1,m,1,s\n",
            "t.csv",
        )
        .unwrap_err();
        assert!(format!("{e:#}").contains("t.csv:2: trial `x`"), "{e:#}");
        assert!(parse_csv("a,b\n", "t.csv").is_err());
        assert!(parse_csv("", "t.csv").is_err());
    }

    #[test]
    fn statistics() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[f64::NAN]).is_nan());
        let s = summarize(&[10.0, 12.0, 11.0, 9.0, 13.0]);
        assert_eq!(s.n, 5);
        assert!((s.mean - 11.0).abs() < 1e-12);
        // sd = 1.5811, se = 0.7071, t(4) = 2.7764
        assert!(
            (s.ci - 2.7764 * (2.5f64 / 5.0).sqrt()).abs() < 1e-4,
            "{}",
            s.ci
        );
        assert_eq!(s.cell(), "11.0 [9.04, 13.0] (median 11.0)");
        assert_eq!(summarize(&[5.0]).cell(), "5.00");
        assert_eq!(summarize(&[f64::NAN]).cell(), "failed");
        assert_eq!(summarize(&[]).cell(), "not run");
        // One trial far out: no t interval (it would reach below zero) but the bootstrap's,
        // said so.
        let w = summarize(&[0.1, 0.1, 0.1, 0.1, 100.0]);
        assert!(w.mean - w.ci < 0.0 && w.skew > SKEWED, "{w:?}");
        let i = w.interval().unwrap();
        assert_eq!(i.kind, IntervalKind::Bootstrap);
        assert!(i.lo >= 0.1 && i.hi <= 100.0);
        assert!(
            w.cell().starts_with("20.1 [0.100, ")
                && w.cell().ends_with("; bootstrap] (median 0.100)"),
            "{}",
            w.cell()
        );
        assert_eq!(w.value(), w.mean);
        // Unfinished trials count towards the median but not the mean.
        let u = summarize(&[3.0, UNFINISHED, 1.0, f64::NAN]);
        assert_eq!((u.n, u.unfinished, u.median), (3, 1, 3.0));
        assert!(u.ci.is_nan());
        assert_eq!(u.cell(), "median 3.00 (1 of 3 unfinished) [1 of 4 failed]");
        assert_eq!(u.value(), 3.0);
        assert_eq!(
            summarize(&[UNFINISHED, UNFINISHED, 1.0]).cell(),
            "unfinished (2 of 3)"
        );
    }
}
