//! The report of `roam lab afc --sim`: per experiment a table (every system's cell with its
//! 95% interval, AFC over the baseline as the ratio of means) and a chart, the thesis's result
//! beside it.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;

use super::experiments::Experiment;
use crate::harness::results::written_by;
use crate::report::chart::{bar_chart, Bar};
use crate::report::compare::{by_seed, cell, values};
use crate::report::stats::ratio_of_means;
use crate::report::{fmt_num, Row};

/// Write `OUT/report.md` and one chart per experiment (`OUT/EXPERIMENT.svg`); the report's
/// text.
pub fn write(
    out: &Path,
    chosen: &[&Experiment],
    rows: &[Row],
    measured: &str,
    simulated_s: u64,
) -> Result<String> {
    let mut md = String::from("# AFC at packet level: the thesis's experiments in ns-3\n\n");
    let trials = rows.iter().map(|r| r.trial).max().unwrap_or(0);
    let _ = writeln!(
        md,
        "The Sanadhya thesis's AFC evaluation (ch. III §3.5, NS2) reproduced in ns-3 3.37 \
         (`sim/ns3-afc/afc-sim.cc`): AFC is the thesis's Algorithms 1-4 as a variant of \
         ns-3's TCP; `tcp` is ns-3's TCP with the window update Linux sends after a read \
         (ns-3.37 sends none); `ns3` is ns-3.37 unchanged, shown once to measure that \
         defect. SACK, timestamps, NewReno, segments of 1448 bytes, h = 0.5, proactive \
         factors 1.25 and 0.8, the reader taking what its rate allows every 1 ms. {simulated_s} \
         simulated seconds per run, up to {trials} trials a point (each trial's seed moves \
         where the readers start in their profiles). Cells: mean [95% interval] (median). \
         Roam `{measured}`{}.\n",
        written_by(measured)
    );
    md.push_str(&headline(rows));
    for e in chosen {
        let _ = writeln!(md, "## {} (`{}`)\n", e.title, e.name);
        let _ = writeln!(md, "The thesis: {}.\n", e.thesis);
        if e.dumbbell {
            md.push_str(&dumbbell_table(e, rows));
        } else {
            md.push_str(&link_table(e, rows));
        }
        let svg = chart(e, rows);
        std::fs::write(out.join(format!("{}.svg", e.name)), svg)?;
        let _ = writeln!(md, "\n![{}]({}.svg)\n", e.title, e.name);
    }
    let failed = rows.iter().filter(|r| r.metric == "error").count();
    if failed > 0 {
        let _ = writeln!(
            md,
            "## Failed runs\n\n{failed} run(s) failed; their messages are in failures.log.\n"
        );
    }
    std::fs::write(out.join("report.md"), &md)?;
    Ok(md)
}

/// What the terminal shows: the headline paragraph.
pub fn summary(md: &str) -> String {
    md.lines()
        .filter(|l| l.starts_with("AFC ") || l.starts_with("- "))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// "1.43x [1.38-1.49x]": AFC's mean over `base`'s for `metric`.
fn ratio(rows: &[Row], app: &str, point: &str, base: &str, metric: &str) -> String {
    let of = |sys: &str| -> Vec<(u64, f64)> {
        by_seed(rows, app, point, sys, metric)
            .into_iter()
            .filter(|x| x.1.is_finite())
            .collect()
    };
    match ratio_of_means(&of("afc"), &of(base)) {
        Some(r) => match r.interval {
            Some((lo, hi)) => format!("{}x [{}-{}x]", fmt_num(r.ratio), fmt_num(lo), fmt_num(hi)),
            None => format!("{}x", fmt_num(r.ratio)),
        },
        None => "-".into(),
    }
}

/// Table 4 in a few lines: AFC's and the baseline's fraction of ideal per scenario.
fn headline(rows: &[Row]) -> String {
    let mut points: Vec<&str> = rows
        .iter()
        .filter(|r| r.app == "table4" && r.metric == "fraction_of_ideal")
        .map(|r| r.scenario.as_str())
        .collect();
    points.sort_unstable();
    points.dedup();
    if points.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "AFC in ns-3, Table 4 (fraction of ideal, mean of the trials; the thesis: AFC up to \
         0.85, default TCP at most 0.60):\n\n",
    );
    for p in points {
        let v = |sys: &str| cell(rows, "table4", p, sys, "fraction_of_ideal").value();
        let _ = writeln!(
            s,
            "- {p}: AFC {}, tcp {}, ns3 {}; AFC over tcp {}",
            fmt_num(v("afc")),
            fmt_num(v("tcp")),
            fmt_num(v("ns3")),
            ratio(rows, "table4", p, "tcp", "goodput_mbps")
        );
    }
    s.push('\n');
    s
}

/// One link: per point every system's fraction of ideal, AFC over tcp, and what AFC's
/// receiver held and did.
fn link_table(e: &Experiment, rows: &[Row]) -> String {
    let mut md = format!("| {} | ideal (Mbit/s) |", e.axis);
    for s in e.systems {
        let _ = write!(md, " {s}: fraction of ideal |");
    }
    md.push_str(" AFC over tcp (goodput) | AFC peak held (kB) | AFC proactive ACKs | AFC zero-window events | tcp window updates |\n|---|---|");
    md.push_str(&"---|".repeat(e.systems.len() + 5));
    md.push('\n');
    for p in &e.points {
        let c = |sys: &str, m: &str| cell(rows, e.name, &p.label, sys, m).cell();
        let _ = write!(md, "| {} | {} |", p.label, fmt_num(p.ideal_mbps));
        for s in e.systems {
            let _ = write!(md, " {} |", c(s, "fraction_of_ideal"));
        }
        let _ = writeln!(
            md,
            " {} | {} | {} | {} | {} |",
            ratio(rows, e.name, &p.label, "tcp", "goodput_mbps"),
            c("afc", "peak_held_kb"),
            c("afc", "proactive_acks"),
            c("afc", "zero_window_events"),
            c("tcp", "window_updates"),
        );
    }
    md
}

/// The dumbbell: per point the default flows' and the AFC flows' mean shares, Jain's index.
fn dumbbell_table(e: &Experiment, rows: &[Row]) -> String {
    let mut md = format!(
        "| {} | default flows' mean (Mbit/s) | AFC flows' mean (Mbit/s) | Jain, AFC flows | Jain, all | all flows (Mbit/s) |\n|---|---|---|---|---|---|\n",
        e.axis
    );
    for p in &e.points {
        let c = |m: &str| cell(rows, e.name, &p.label, "mix", m).cell();
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} |",
            p.label,
            c("default_mean_mbps"),
            c("afc_mean_mbps"),
            c("jain_afc"),
            c("jain_all"),
            c("total_mbps")
        );
    }
    md
}

/// The experiment's chart: bars per point, one per system (the dumbbell: default and AFC
/// flows' means), the trials as dots, the interval as whiskers.
fn chart(e: &Experiment, rows: &[Row]) -> String {
    let series: Vec<(&str, &str, &str)> = if e.dumbbell {
        vec![
            ("default flows", "mix", "default_mean_mbps"),
            ("AFC flows", "mix", "afc_mean_mbps"),
        ]
    } else {
        e.systems
            .iter()
            .map(|s| (*s, *s, "fraction_of_ideal"))
            .collect()
    };
    let mut bars = Vec::new();
    for p in &e.points {
        for (name, sys, metric) in &series {
            let c = cell(rows, e.name, &p.label, sys, metric);
            if c.n == 0 {
                continue;
            }
            bars.push(Bar {
                group: p.label.clone(),
                series: (*name).into(),
                value: c.value(),
                whisker: c.interval().map(|i| (i.lo, i.hi)),
                note: String::new(),
                points: values(rows, e.name, &p.label, sys, metric)
                    .into_iter()
                    .filter(|v| v.is_finite())
                    .collect(),
            });
        }
    }
    let y = if e.dumbbell {
        "mean goodput per flow (Mbit/s)"
    } else {
        "goodput / ideal"
    };
    bar_chart(
        &format!(
            "{}\nns-3; bars: mean, dots: trials, whiskers: 95% interval",
            e.title
        ),
        y,
        &bars,
    )
}
