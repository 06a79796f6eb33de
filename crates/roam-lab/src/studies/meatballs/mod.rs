//! `roam lab meatballs`: the Meatballs thesis's network-selection evaluation (seed 000 §4.4.2)
//! on the emulator: the request/response workload ([`crate::studies::meatballs::net`]) over roam-net with
//! each network-selection rule ([`crate::studies::meatballs::selection::Selection`]): cellular-only,
//! WiFi-preferred, adaptive non-redundant, and Meatballs with each evaluation method at each
//! cost level, on the walk (WiFi in reach 69% of the time) and the drive. The report gives per
//! scenario each rule's mean wait, energy (modelled) and 3G data, and per cost level the total
//! weighted cost of each baseline beside Meatballs deciding at that level, with the thesis's
//! figures. The speech half (seed 000 §4.5.5.2): the recogniser application
//! ([`crate::studies::meatballs::speech`]) with local-only, remote-only, remote-preferred, adaptive and
//! Meatballs, on the walk (`speech`) and with a loaded server and WiFi always there (`speech-load`).

pub mod net;
pub mod selection;
pub mod speech;

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::Result;

use crate::harness::matrix::{self, seeds_line, App, Plan};
use crate::harness::system::System;
use crate::report::compare::cell;
use crate::report::Row;
use crate::studies::meatballs::selection::Selection;
use net::cost_metric;
use roam_decide::{CostLevel, Method};

/// The scenarios of the thesis's evaluation: the walk and the drive.
pub const SCENARIOS: [&str; 2] = ["walking-campus", "vehicular"];

/// The network-selection application's name.
pub const APP: &str = "requests";
/// The speech applications' names: on the walk; with other clients loading the server.
pub const SPEECH_APPS: [&str; 2] = ["speech", "speech-load"];

/// The scenario of the loaded-server experiment: WiFi always there (the hotspot's links).
pub const LOAD_SCENARIO: &str = "hotspot";

/// The rules an application runs under.
pub fn systems_for(app: &str) -> Vec<System> {
    if SPEECH_APPS.contains(&app) {
        Selection::speech_all()
            .into_iter()
            .map(System::Select)
            .collect()
    } else {
        systems()
    }
}

/// Every rule as a lab system.
pub fn systems() -> Vec<System> {
    Selection::all().into_iter().map(System::Select).collect()
}

/// The systems of a quick run: the baselines and Meatballs at the low cost level.
pub fn quick_systems() -> Vec<System> {
    systems()
        .into_iter()
        .filter(|s| match s {
            System::Select(sel) => sel.level().is_none_or(|l| l == CostLevel::Low),
            _ => false,
        })
        .collect()
}

fn speech(t: &crate::harness::trial::Trial) -> Result<Vec<crate::harness::trial::Metric>> {
    crate::studies::meatballs::speech::run(t, false)
}

fn speech_load(t: &crate::harness::trial::Trial) -> Result<Vec<crate::harness::trial::Metric>> {
    crate::studies::meatballs::speech::run(t, true)
}

/// The applications: network selection (20 minutes), and speech recognition without and with
/// server load (20 utterances every 30 s: 10 minutes).
pub fn apps() -> Vec<App> {
    let speech_app =
        |name,
         run: fn(&crate::harness::trial::Trial) -> Result<Vec<crate::harness::trial::Metric>>,
         full| App {
            name,
            run,
            full,
            quick: Duration::from_secs(150),
            interactive: ("recognition_ms", "mean recognition delay (ms)"),
            background: ("energy_J", "energy, modelled (J)", false),
            event: (
                crate::studies::meatballs::speech::EVENT,
                "recognition delay (ms)",
            ),
            needs: &[],
            interactive_floor: None,
            stagger: Some(crate::studies::meatballs::speech::EVERY),
        };
    vec![
        App {
            name: APP,
            run: net::run,
            full: Duration::from_secs(20 * 60),
            quick: Duration::from_secs(150),
            interactive: ("response_ms", "mean wait for a response (ms)"),
            background: ("energy_J", "energy, modelled (J)", false),
            event: (net::EVENT, "wait for a response (ms)"),
            needs: &[],
            interactive_floor: None,
            stagger: None,
        },
        speech_app(SPEECH_APPS[0], speech, Duration::from_secs(10 * 60)),
        speech_app(SPEECH_APPS[1], speech_load, Duration::from_secs(10 * 60)),
    ]
}

/// What the thesis reports for an application at a cost level on a scenario
/// (../shared/spec/meatballs.md; seed 000 §4.5.5).
fn thesis(app: &str, level: CostLevel, scenario: &str) -> &'static str {
    match (app, scenario, level) {
        ("speech", "vehicular", _) => {
            "driving: local recognition dominates, and Meatballs chooses it"
        }
        ("speech", _, CostLevel::None) => {
            "walking: redundancy 23-35% better than remote-preferred and adaptive, over 2x \
             better than local-only (Bayesian: equal to remote-preferred within error)"
        }
        ("speech", _, CostLevel::High) => {
            "walking: remote-preferred is best, and Meatballs chooses it"
        }
        ("speech", _, _) => "walking: redundancy still pays at the mid level",
        ("speech-load", _, CostLevel::None) => {
            "server load: Meatballs 23% better than local-only and remote-only"
        }
        ("speech-load", _, _) => {
            "server load: similar benefit at low and mid cost; at high cost remote is best \
             (Meatballs sometimes over-hedges)"
        }
        (_, "vehicular", _) => "driving: cellular-only is best, and Meatballs chooses it",
        (_, _, CostLevel::None) => {
            "walking: Meatballs 24% less waiting than cellular-only, over 2x better than \
             WiFi-preferred and adaptive"
        }
        (_, _, CostLevel::Low) => {
            "walking: Meatballs 21% better than cellular-only, 44% than the others"
        }
        (_, _, CostLevel::Mid | CostLevel::High) => "walking: Meatballs equal to WiFi-preferred",
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

/// The columns of an application's table: (metric, heading).
fn columns(app: &str) -> Vec<(&'static str, &'static str)> {
    if SPEECH_APPS.contains(&app) {
        vec![
            ("recognition_ms", "mean delay (ms)"),
            ("energy_J", "energy (J, modelled)"),
            ("cpu_J", "of it the phone's CPU (J)"),
            ("local", "local"),
            ("remote", "remote"),
            ("both", "both"),
            ("phone_cpu_got", "phone's CPU got (of its share)"),
            ("server_cpu_got", "server's CPU got (of its share)"),
        ]
    } else {
        vec![
            ("response_ms", "mean wait (ms)"),
            ("energy_J", "energy (J, modelled)"),
            ("data_kB", "3G data (kB)"),
            ("requests", "requests"),
        ]
    }
}

fn markdown(plan: &Plan, rows: &[Row], notes: &[String], version: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# roam lab meatballs: decisions under predictor uncertainty, reproduced\n\n\
         Measured with roam `{version}`{}. {} trial(s) per cell{}. Every rule runs the same \
         application over roam (Intentional Networking); only the decision differs. Cells: the \
         mean over trials with its 95% confidence interval (Student's t; none where skewed), \
         then the median. Energy is **modelled** (PowerTutor's Nexus One radios, AT&T 3G \
         timers, driven by the client's interface counters; for speech also the phone's CPU at \
         a reconstructed {} W while it recognises); data is the 3G's bytes. The weighted cost \
         of a trial at a cost level is its total wait plus its energy and data at that level's \
         prices (low: 100 J or 100 KB per second, mid: 10, high: 1); the baselines decide the \
         same at every level, Meatballs decides at its own.\n",
        crate::harness::matrix::written_by(version),
        plan.trials,
        if plan.quick {
            ", **quick** (short runs: not comparable with the thesis's 20-minute runs)"
        } else {
            ""
        },
        crate::studies::meatballs::speech::PHONE_CPU_W,
    );
    let _ = writeln!(s, "{}\n", seeds_line(rows));
    let _ = writeln!(
        s,
        "`walking-campus` is constructed to the thesis's statistics (WiFi in reach 69% of the \
         time; its trace is not available): docs/traces.md. Its 3G is the Verizon EV-DO \
         driving trace, faster than the thesis's walk (137/737 kbps down, median/max).\n"
    );
    let present: Vec<Selection> = plan
        .systems
        .iter()
        .filter_map(|x| match x {
            System::Select(sel) => Some(*sel),
            _ => None,
        })
        .collect();
    for app in &plan.apps {
        let app = app.as_str();
        let cols = columns(app);
        let _ = writeln!(
            s,
            "## {app}\n\n![waits]({app}-interactive.svg) ![energy]({app}-background.svg)\n"
        );
        for sc in &plan.scenarios {
            let _ = writeln!(
                s,
                "### {app} on `{sc}`\n\n| rule | {} |\n|---|{}",
                cols.iter().map(|c| c.1).collect::<Vec<_>>().join(" | "),
                "---:|".repeat(cols.len())
            );
            for sel in &present {
                let n = sel.name();
                // A recognizer that never ran has no CPU figure: "-", not "failed".
                let ran = cell(rows, app, sc, n, cols[0].0).n > 0;
                let cells: Vec<String> = cols
                    .iter()
                    .map(|c| match cell(rows, app, sc, n, c.0) {
                        x if x.n == 0 && ran && c.0.ends_with("_cpu_got") => "-".to_string(),
                        x => x.cell(),
                    })
                    .collect();
                let _ = writeln!(s, "| {n} | {} |", cells.join(" | "));
            }
            for level in CostLevel::ALL {
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
                    "\n#### {app} on `{sc}`, cost level {}: total weighted cost (s)\n\n| rule | weighted cost (s) |\n|---|---:|",
                    level.name()
                );
                for sel in &deciders {
                    let _ = writeln!(
                        s,
                        "| {} | {} |",
                        sel.name(),
                        cell(rows, app, sc, sel.name(), metric).cell()
                    );
                }
                let best_baseline = deciders
                    .iter()
                    .filter(|x| x.level().is_none())
                    .map(|x| (x.name(), cell(rows, app, sc, x.name(), metric).value()))
                    .filter(|x| x.1.is_finite())
                    .min_by(|a, b| a.1.total_cmp(&b.1));
                let mut line = String::new();
                for m in Method::ALL {
                    let name = Selection::Meatballs(m, level).name();
                    let v = cell(rows, app, sc, name, metric).value();
                    if let (Some((b, bv)), true) = (best_baseline, v.is_finite()) {
                        let _ = write!(
                            line,
                            "{name} {:+.0}% against the best baseline ({b}); ",
                            (v / bv - 1.0) * 100.0
                        );
                    }
                }
                let _ = writeln!(s, "\n{line}thesis: {}.", thesis(app, level, sc));
            }
            let _ = writeln!(s);
        }
    }
    if !notes.is_empty() {
        let _ = writeln!(s, "## Unfinished and failed trials\n");
        for n in notes {
            let _ = writeln!(s, "- {n}");
        }
    }
    s
}
