//! `roam lab meatballs`: the Meatballs thesis's network-selection evaluation (Meatballs thesis §4.4.2)
//! on the emulator: the request/response workload ([`crate::studies::meatballs::net`]) over roam-net with
//! each network-selection rule ([`crate::studies::meatballs::selection::Selection`]): cellular-only,
//! WiFi-preferred, adaptive non-redundant, and Meatballs with each evaluation method at each
//! cost level, on the walk (WiFi in reach 69% of the time) and the drive. The report gives per
//! scenario each rule's mean wait, energy (modelled) and 3G data, and per cost level the total
//! weighted cost of each baseline beside Meatballs deciding at that level, with the thesis's
//! figures. The speech half (Meatballs thesis §4.5.5.2): the recogniser application
//! ([`crate::studies::meatballs::speech`]) with local-only, remote-only, remote-preferred, adaptive and
//! Meatballs, on the walk (`speech`) and with a loaded server and WiFi always there (`speech-load`).

pub mod net;
pub mod selection;
pub mod speech;

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::Result;

use crate::harness::charts::charts;
use crate::harness::matrix;
use crate::harness::plan::{App, Plan};
use crate::harness::seeds::seeds_line;
use crate::harness::study::{plan_with, report_lines, Defaults, Finished, Request, Study};
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
            .map(System::new)
            .collect()
    } else {
        systems()
    }
}

/// Every rule as a lab system.
pub fn systems() -> Vec<System> {
    Selection::all().into_iter().map(System::new).collect()
}

/// The systems of a quick run: the baselines and Meatballs at the low cost level.
pub fn quick_systems() -> Vec<System> {
    systems()
        .into_iter()
        .filter(|s| {
            s.get::<Selection>()
                .is_some_and(|sel| sel.level().is_none_or(|l| l == CostLevel::Low))
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
/// (../shared/spec/meatballs.md; Meatballs thesis §4.5.5).
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

/// `roam lab meatballs`: the Meatballs thesis's evaluation. Each application runs as a plan
/// of its own (its rules and scenarios differ), into OUT/APP when there are several; speech
/// trials run one at a time unless `--jobs` says otherwise, since their CPU shares stand for a
/// phone and a server.
pub struct Meatballs;

impl Study for Meatballs {
    fn name(&self) -> &'static str {
        "meatballs"
    }

    fn paper(&self) -> &'static str {
        "Meatballs (Higgins, thesis ch. 4, §4.4.2 and §4.5.5.2): network selection and speech \
         recognition with redundant strategies"
    }

    fn defaults(&self) -> Defaults {
        Defaults {
            scenarios: SCENARIOS.map(String::from).to_vec(),
            quick_scenarios: vec!["walking-campus".into()],
            apps: [APP, SPEECH_APPS[0], SPEECH_APPS[1]]
                .map(String::from)
                .to_vec(),
            quick_apps: vec![APP.into()],
            jobs: 1,
            quick_jobs: None,
            out: "results/meatballs",
        }
    }

    fn apps(&self) -> Vec<App> {
        apps()
    }

    fn system(&self, name: &str) -> Result<System> {
        Selection::parse(name)
            .map(System::new)
            .map_err(anyhow::Error::msg)
    }

    fn systems(&self, quick: bool) -> Vec<System> {
        if quick {
            quick_systems()
        } else {
            systems()
        }
    }

    fn paper_figure(&self, app: &str, scenario: &str, system: &str) -> Option<String> {
        let level = Selection::parse(system)
            .ok()?
            .level()
            .unwrap_or(CostLevel::None);
        Some(thesis(app, level, scenario).to_string())
    }

    fn measure(&self, plan: &Plan, _request: &Request) -> Result<(String, Vec<Row>)> {
        meatballs(plan)
    }

    fn summary(&self, _plan: &Plan, report: &str, _rows: &[Row]) -> String {
        report_lines(report, |l| {
            l.starts_with('|') || l.starts_with("### ") || l.starts_with("#### ")
        })
    }

    fn run(&self, request: &Request) -> Result<Finished> {
        let d = self.defaults();
        let apps =
            request
                .apps
                .clone()
                .unwrap_or(if request.quick { d.quick_apps } else { d.apps });
        let base = request.out.clone().unwrap_or_else(|| d.out.into());
        let (mut rows, mut summary, mut out) = (Vec::new(), String::new(), base.clone());
        let mut report = String::new();
        for app in &apps {
            let systems = match &request.systems {
                Some(names) => names
                    .iter()
                    .map(|s| self.system(s.trim()))
                    .collect::<Result<Vec<_>>>()?,
                None if request.quick && app == APP => quick_systems(),
                None => systems_for(app),
            };
            let scenarios = if app == SPEECH_APPS[1] {
                vec![LOAD_SCENARIO.to_string()]
            } else if request.quick {
                vec!["walking-campus".into()]
            } else {
                SCENARIOS.map(String::from).to_vec()
            };
            let mut r = request.clone();
            r.apps = Some(vec![app.clone()]);
            r.scenarios = r.scenarios.or(Some(scenarios));
            if apps.len() > 1 {
                r.out = Some(base.join(app));
            }
            if SPEECH_APPS.contains(&app.as_str()) && r.jobs.is_none() {
                r.jobs = Some(1);
            }
            let plan = plan_with(self, &r, systems)?;
            let (md, app_rows) = self.measure(&plan, &r)?;
            summary.push_str(&self.summary(&plan, &md, &app_rows));
            if apps.len() > 1 {
                summary.push_str(&format!(
                    "Full report: {}/report.md (every trial: trials.csv; charts: *.svg)\n",
                    plan.out.display()
                ));
            }
            rows.extend(app_rows);
            (report, out) = (md, plan.out);
        }
        if apps.is_empty() {
            anyhow::bail!("no application to run");
        }
        Ok(Finished {
            out,
            report,
            rows,
            summary,
        })
    }
}

/// Run the plan (or read its directory), write the report and charts; the report's text and
/// every trial's rows.
pub fn meatballs(plan: &Plan) -> Result<(String, Vec<Row>)> {
    let all = apps();
    let m = matrix::measure(plan, &all)?;
    let md = markdown(plan, &m.rows, &m.notes, &m.version);
    std::fs::write(plan.out.join("report.md"), &md)?;
    charts(plan, &all, &m)?;
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

/// The report: how it was measured ([`report_head`]), then per application its charts and
/// per scenario every rule's cells ([`rules_table`]) and, at each cost level where a
/// Meatballs rule decides, the weighted costs against the thesis ([`cost_level_table`]); then
/// what unfinished and failed trials said.
fn markdown(plan: &Plan, rows: &[Row], notes: &[String], version: &str) -> String {
    let mut s = String::new();
    report_head(&mut s, plan, rows, version);
    let present: Vec<Selection> = plan
        .systems
        .iter()
        .filter_map(|x| x.get::<Selection>().copied())
        .collect();
    for app in &plan.apps {
        let app = app.as_str();
        let _ = writeln!(
            s,
            "## {app}\n\n![waits]({app}-interactive.svg) ![energy]({app}-background.svg)\n"
        );
        for sc in &plan.scenarios {
            rules_table(&mut s, rows, &present, app, sc);
            for level in CostLevel::ALL {
                cost_level_table(&mut s, rows, &present, app, sc, level);
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

/// The report's title and first paragraphs: the code that measured it (`version`), the
/// trials per cell, how to read a cell, what is modelled and what a weighted cost is, the
/// seeds of `rows`, and where `walking-campus` comes from.
fn report_head(s: &mut String, plan: &Plan, rows: &[Row], version: &str) {
    let _ = writeln!(
        s,
        "# roam lab meatballs: decisions under predictor uncertainty, reproduced\n\n\
         Measured with roam `{version}`{}. {}{}. Every rule runs the same \
         application over roam (Intentional Networking); only the decision differs. Cells: the \
         mean over trials with its 95% confidence interval (Student's t, or a percentile bootstrap marked so where the trials are skewed), \
         then the median. Energy is **modelled** (PowerTutor's Nexus One radios, AT&T 3G \
         timers, driven by the client's interface counters; for speech also the phone's CPU at \
         a reconstructed {} W while it recognises); data is the 3G's bytes. The weighted cost \
         of a trial at a cost level is its total wait plus its energy and data at that level's \
         prices (low: 100 J or 100 KB per second, mid: 10, high: 1); the baselines decide the \
         same at every level, Meatballs decides at its own.\n",
        crate::harness::results::written_by(version),
        crate::report::trials_per_cell(plan.trials, rows),
        if plan.quick {
            ", **quick** (short runs: not comparable with the thesis's 20-minute runs)"
        } else {
            ""
        },
        crate::studies::meatballs::speech::PHONE_CPU_W,
    );
    let _ = writeln!(s, "{}\n", seeds_line("meatballs", rows));
    let _ = writeln!(
        s,
        "`walking-campus` is constructed to the thesis's statistics (WiFi in reach 69% of the \
         time; its trace is not available): docs/traces.md. Its 3G is the Verizon EV-DO \
         driving trace, faster than the thesis's walk (137/737 kbps down, median/max).\n"
    );
}

/// `app` on `sc`: a row of the application's columns ([`columns`]) for every rule `present`.
fn rules_table(s: &mut String, rows: &[Row], present: &[Selection], app: &str, sc: &str) {
    let cols = columns(app);
    let _ = writeln!(
        s,
        "### {app} on `{sc}`\n\n| rule | {} |\n|---|{}",
        cols.iter().map(|c| c.1).collect::<Vec<_>>().join(" | "),
        "---:|".repeat(cols.len())
    );
    for sel in present {
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
}

/// `app` on `sc` at cost `level`: the total weighted cost of every baseline and of the
/// Meatballs rules deciding at that level, then each Meatballs method against the best
/// baseline, beside the thesis's finding. Nothing if no Meatballs rule at that level is
/// `present`.
fn cost_level_table(
    s: &mut String,
    rows: &[Row],
    present: &[Selection],
    app: &str,
    sc: &str,
    level: CostLevel,
) {
    let deciders: Vec<Selection> = present
        .iter()
        .copied()
        .filter(|x| x.level().is_none_or(|l| l == level))
        .collect();
    if !deciders.iter().any(|x| x.level().is_some()) {
        return;
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
