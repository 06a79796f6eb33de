//! `roam lab meatballs`: the Meatballs thesis's network-selection evaluation (seed 000 §4.4.2)
//! on the emulator: the request/response workload ([`crate::meatballs_net`]) over roam-net with
//! each network-selection rule ([`crate::selection::Selection`]): cellular-only,
//! WiFi-preferred, adaptive non-redundant, and Meatballs with each evaluation method at each
//! cost level, on the walk (WiFi in reach 69% of the time) and the drive. The report gives per
//! scenario each rule's mean wait, energy (modelled) and 3G data, and per cost level the total
//! weighted cost of each baseline beside Meatballs deciding at that level, with the thesis's
//! figures. The speech-recognition half of the thesis's evaluation is not here yet.

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::Result;

use crate::matrix::{self, seeds_line, App, Plan, VERSION};
use crate::meatballs_net::{self, cost_metric};
use crate::outcome::cell;
use crate::report::Row;
use crate::selection::{Level, MethodName, Selection};
use crate::system::System;

/// The scenarios of the thesis's evaluation: the walk and the drive.
pub const SCENARIOS: [&str; 2] = ["walking-campus", "vehicular"];

/// The application's name.
pub const APP: &str = "requests";

/// Every rule as a lab system.
pub fn systems() -> Vec<System> {
    Selection::all().into_iter().map(System::Select).collect()
}

/// The systems of a quick run: the baselines and Meatballs at the low cost level.
pub fn quick_systems() -> Vec<System> {
    systems()
        .into_iter()
        .filter(|s| match s {
            System::Select(sel) => sel.level().is_none_or(|l| l == Level::Low),
            _ => false,
        })
        .collect()
}

/// The application.
pub fn apps() -> Vec<App> {
    vec![App {
        name: APP,
        run: meatballs_net::run,
        full: Duration::from_secs(20 * 60),
        quick: Duration::from_secs(150),
        interactive: ("response_ms", "mean wait for a response (ms)"),
        background: ("energy_J", "energy, modelled (J)", false),
        event: (meatballs_net::EVENT, "wait for a response (ms)"),
        needs: &[],
        interactive_floor: None,
    }]
}

/// What the thesis reports at a cost level on a scenario (../shared/spec/meatballs.md).
fn thesis(level: Level, scenario: &str) -> &'static str {
    match (scenario, level) {
        ("vehicular", _) => "driving: cellular-only is best, and Meatballs chooses it",
        (_, Level::None) => {
            "walking: Meatballs 24% less waiting than cellular-only, over 2x better than \
             WiFi-preferred and adaptive"
        }
        (_, Level::Low) => "walking: Meatballs 21% better than cellular-only, 44% than the others",
        (_, Level::Mid | Level::High) => "walking: Meatballs equal to WiFi-preferred",
    }
}

/// Run the plan (or read its directory), write the report and charts; the report's text and
/// every trial's rows.
pub fn meatballs(plan: &Plan) -> Result<(String, Vec<Row>)> {
    let all = apps();
    let m = matrix::measure(plan, &all)?;
    let md = markdown(plan, &m.rows, &m.notes, &m.version);
    std::fs::write(plan.out.join("report.md"), &md)?;
    matrix::charts(plan, &all, &m)?;
    Ok((md, m.rows))
}

fn markdown(plan: &Plan, rows: &[Row], notes: &[String], version: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# roam lab meatballs: network selection under predictor uncertainty, reproduced\n\n\
         Measured with roam `{version}`{}. {} trial(s) per cell{}. Every rule runs over roam \
         (Intentional Networking) with the same application; only the network selection \
         differs. Cells: the mean over trials with its 95% confidence interval (Student's t; \
         none where skewed), then the median. Energy is **modelled** (PowerTutor's Nexus One \
         radios, AT&T 3G timers, driven by the client's interface counters); data is the 3G's \
         bytes. The weighted cost of a trial at a cost level is its total wait plus its energy \
         and data at that level's prices (low: 100 J or 100 KB per second, mid: 10, high: 1); \
         the baselines decide the same at every level, Meatballs decides at its own.\n",
        if version == VERSION {
            String::new()
        } else {
            format!(" (report written by roam `{VERSION}`)")
        },
        plan.trials,
        if plan.quick {
            ", **quick** (short runs: not comparable with the thesis's 20-minute runs)"
        } else {
            ""
        },
    );
    let _ = writeln!(s, "{}\n", seeds_line(rows));
    let _ = writeln!(
        s,
        "`walking-campus` is constructed to the thesis's statistics (WiFi in reach 69% of the \
         time; its trace is not available): docs/traces.md. Its 3G is the Verizon EV-DO \
         driving trace, faster than the thesis's walk (137/737 kbps down, median/max).\n\n\
         ![waits]({APP}-interactive.svg) ![energy]({APP}-background.svg)\n"
    );
    let present: Vec<Selection> = plan
        .systems
        .iter()
        .filter_map(|x| match x {
            System::Select(sel) => Some(*sel),
            _ => None,
        })
        .collect();
    for sc in &plan.scenarios {
        let _ = writeln!(
            s,
            "## `{sc}`\n\n| rule | mean wait (ms) | energy (J, modelled) | 3G data (kB) | requests |\n|---|---:|---:|---:|---:|"
        );
        for sel in &present {
            let n = sel.name();
            let _ = writeln!(
                s,
                "| {n} | {} | {} | {} | {} |",
                cell(rows, APP, sc, n, "response_ms").cell(),
                cell(rows, APP, sc, n, "energy_J").cell(),
                cell(rows, APP, sc, n, "data_kB").cell(),
                cell(rows, APP, sc, n, "requests").cell(),
            );
        }
        for level in Level::ALL {
            let deciders: Vec<Selection> = present
                .iter()
                .copied()
                .filter(|x| x.level().is_none_or(|l| l == level))
                .collect();
            if !deciders.iter().any(|x| x.level().is_some()) {
                continue;
            }
            let metric = cost_metric(level);
            let _ = writeln!(
                s,
                "\n### `{sc}`, cost level {}: total weighted cost (s)\n\n| rule | weighted cost (s) |\n|---|---:|",
                level.cost_level().name()
            );
            for sel in &deciders {
                let _ = writeln!(
                    s,
                    "| {} | {} |",
                    sel.name(),
                    cell(rows, APP, sc, sel.name(), metric).cell()
                );
            }
            let best_baseline = deciders
                .iter()
                .filter(|x| x.level().is_none())
                .map(|x| (x.name(), cell(rows, APP, sc, x.name(), metric).value()))
                .filter(|x| x.1.is_finite())
                .min_by(|a, b| a.1.total_cmp(&b.1));
            let mut line = String::new();
            for m in MethodName::ALL {
                let name = Selection::Meatballs(m, level).name();
                let v = cell(rows, APP, sc, name, metric).value();
                if let (Some((b, bv)), true) = (best_baseline, v.is_finite()) {
                    let _ = write!(
                        line,
                        "{name} {:+.0}% against the best baseline ({b}); ",
                        (v / bv - 1.0) * 100.0
                    );
                }
            }
            let _ = writeln!(s, "\n{line}thesis: {}.", thesis(level, sc));
        }
        let _ = writeln!(s);
    }
    if !notes.is_empty() {
        let _ = writeln!(s, "## Unfinished and failed trials\n");
        for n in notes {
            let _ = writeln!(s, "- {n}");
        }
    }
    s
}
