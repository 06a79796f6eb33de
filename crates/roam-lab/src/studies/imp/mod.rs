//! `roam lab imp`: the IMP thesis's evaluation (IMP thesis §3.5) on the emulator, run by the
//! shared framework ([`crate::harness::matrix`]): the e-mail application ([`crate::studies::imp::mail`]) and the
//! news reader under the thesis's budgets, every strategy over roam (never, size-limit, WiFi-only, always, IMP),
//! on the driving (`vehicular`) and `walking` scenarios. The report gives each strategy's mean
//! fetch time, energy (modelled) and 3G data against the budget, IMP's fetch time against
//! always-prefetch's, and the thesis's figures beside them.
//!
//! The news reader ([`crate::studies::imp::news`]: nginx, five feeds, one class per feed) runs under
//! its budgets (450 J; 5 MB) likewise.

pub mod client;
pub mod mail;
pub mod news;

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::Result;

use crate::harness::charts::charts;
use crate::harness::charts::{cdf_file, event_curves};
use crate::harness::matrix;
use crate::harness::plan::{App, Plan};
use crate::harness::results::Measured;
use crate::harness::seeds::seeds_line;
use crate::harness::setup::{Need, DOVECOT, NGINX};
use crate::harness::study::{report_lines, Defaults, Request, Study};
use crate::harness::system::{System, SystemUnderTest, Transport};
use crate::report::compare::{cell, values};
use crate::report::Row;
use roam_prefetch::Strategy;

/// The scenarios of the thesis's evaluation: driving and walking.
pub const SCENARIOS: [&str; 2] = ["vehicular", "walking"];

/// A prefetching strategy is a system under test: roam's multi-sockets over both links,
/// prefetching as the strategy decides (IMP thesis §3.5 and its baselines).
impl SystemUnderTest for Strategy {
    fn name(&self) -> &str {
        Strategy::name(*self)
    }

    fn transport(&self) -> Transport {
        Transport::Roam
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// Every strategy as a lab system.
pub fn systems() -> Vec<System> {
    Strategy::ALL.into_iter().map(System::new).collect()
}

/// How an application runs one trial.
type RunTrial = fn(&crate::harness::trial::Trial) -> Result<Vec<crate::harness::trial::Metric>>;

/// The applications: the e-mail application under each of its budget conditions, and the
/// news reader under each of its.
pub fn apps() -> Vec<App> {
    let app = |name: &'static str, run: RunTrial, needs: &'static [Need]| App {
        name,
        run,
        full: Duration::from_secs(20 * 60),
        quick: Duration::from_secs(150),
        interactive: ("fetch_ms", "mean fetch time (ms)"),
        background: ("energy_J", "energy, modelled (J)", false),
        event: (mail::EVENT, "wait for an item read (ms)"),
        needs,
        interactive_floor: None,
        stagger: None,
    };
    vec![
        app(mail::CONDITIONS[0].0, mail::run_energy, &[DOVECOT]),
        app(mail::CONDITIONS[1].0, mail::run_data, &[DOVECOT]),
        app(mail::CONDITIONS[2].0, mail::run_both, &[DOVECOT]),
        app(news::CONDITIONS[0].0, news::run_energy, &[NGINX]),
        app(news::CONDITIONS[1].0, news::run_data, &[NGINX]),
    ]
}

/// What the thesis reports for an application on a scenario (../shared/spec/informed-prefetching.md).
fn thesis(app: &str, scenario: &str) -> &'static str {
    match (app, scenario) {
        ("mail-energy", "vehicular") => {
            "300 J met in every trial; within 300 ms of always-prefetch; 2-8x faster than the \
             other strategies; 21-43% less energy (never-prefetch used the most)"
        }
        ("mail-data", "vehicular") => "2 MB: within 410 ms of always-prefetch",
        ("mail-both", "vehicular") => {
            "325 J + 2 MB: within 240 ms of always-prefetch; 9-38% less energy, 3x less data"
        }
        ("news-energy", "vehicular") => {
            "450 J: 29-58% faster than never, size-limit and WiFi-only (always-prefetch broke \
             the budget)"
        }
        ("news-data", "vehicular") => "5 MB: 47-68% faster, 45-62% less data",
        ("news-energy" | "news-data", "walking") => "2-6x faster",
        (_, "walking") => "within 40-150 ms of always-prefetch; 4-6x faster than the others",
        _ => "not in the thesis",
    }
}

/// `roam lab imp`: the IMP thesis's evaluation.
pub struct Imp;

impl Study for Imp {
    fn name(&self) -> &'static str {
        "imp"
    }

    fn paper(&self) -> &'static str {
        "Informed Mobile Prefetching (Higgins et al., MobiSys 2012; IMP thesis §3.5): e-mail \
         and news under energy and data budgets, driving and walking"
    }

    fn defaults(&self) -> Defaults {
        Defaults {
            scenarios: SCENARIOS.map(String::from).to_vec(),
            quick_scenarios: vec!["vehicular".into()],
            apps: apps().iter().map(|a| a.name.to_string()).collect(),
            quick_apps: vec!["mail-energy".into()],
            jobs: 1,
            quick_jobs: None,
            out: "results/imp",
        }
    }

    fn apps(&self) -> Vec<App> {
        apps()
    }

    fn system(&self, name: &str) -> Result<System> {
        Strategy::parse(name)
            .map(System::new)
            .map_err(anyhow::Error::msg)
    }

    fn systems(&self, _quick: bool) -> Vec<System> {
        systems()
    }

    fn paper_figure(&self, app: &str, scenario: &str, _system: &str) -> Option<String> {
        Some(thesis(app, scenario).to_string())
    }

    fn measure(&self, plan: &Plan, _request: &Request) -> Result<(String, Vec<Row>)> {
        imp(plan)
    }

    /// The report's tables, without the charts.
    fn summary(&self, _plan: &Plan, report: &str, _rows: &[Row]) -> String {
        report_lines(report, |l| l.starts_with('|') || l.starts_with("### "))
    }
}

/// Run the plan (or read its directory), write the report and charts; the report's text and
/// every trial's rows.
pub fn imp(plan: &Plan) -> Result<(String, Vec<Row>)> {
    let all = apps();
    let m = matrix::measure(plan, &all)?;
    let md = markdown(plan, &all, &m);
    std::fs::write(plan.out.join("report.md"), &md)?;
    charts(plan, &all, &m)?;
    Ok((md, m.rows))
}

/// The budget a trial ran under, from its rows (NaN: none).
fn budget(rows: &[Row], app: &str, metric: &str) -> f64 {
    rows.iter()
        .find(|r| r.app == app && r.metric == metric && r.value.is_finite())
        .map_or(f64::NAN, |r| r.value)
}

/// Trials of a cell over a budget.
fn over(rows: &[Row], app: &str, sc: &str, sys: &str, metric: &str, limit: f64) -> usize {
    if !limit.is_finite() {
        return 0;
    }
    values(rows, app, sc, sys, metric)
        .iter()
        .filter(|v| v.is_finite() && **v > limit)
        .count()
}

/// The report: how it was measured ([`report_head`]), then per application its budget and
/// charts, and per scenario every strategy's cells ([`strategies_table`]) with IMP against
/// always-prefetch ([`imp_against_always`]) and the chart of every read; then what
/// unfinished and failed trials said.
fn markdown(plan: &Plan, all: &[App], m: &Measured) -> String {
    let rows = &m.rows;
    let mut s = String::new();
    report_head(&mut s, plan, m);
    for &a in &m.app_ix {
        let app = &all[a];
        let e_budget = budget(rows, app.name, "energy_budget_J");
        let d_budget = budget(rows, app.name, "data_budget_kB");
        let _ = writeln!(
            s,
            "## {}: budget {}\n\n![{0} fetch time]({0}-interactive.svg) ![{0} energy]({0}-background.svg)\n",
            app.name,
            match (e_budget.is_finite(), d_budget.is_finite()) {
                (true, true) => format!("{e_budget} J and {d_budget} kB"),
                (true, false) => format!("{e_budget} J"),
                (false, true) => format!("{d_budget} kB of 3G data"),
                (false, false) => "none".into(),
            }
        );
        for sc in &plan.scenarios {
            strategies_table(&mut s, plan, rows, app, sc, (e_budget, d_budget));
            imp_against_always(&mut s, plan, rows, app, sc, (e_budget, d_budget));
            if !event_curves(plan, app, sc, &m.events).is_empty() {
                let _ = writeln!(
                    s,
                    "Every read of every trial: ![{} on {sc}, reads]({})\n",
                    app.name,
                    cdf_file(app, sc)
                );
            }
        }
    }
    if !m.notes.is_empty() {
        let _ = writeln!(s, "## Unfinished and failed trials\n");
        for n in &m.notes {
            let _ = writeln!(s, "- {n}");
        }
    }
    s
}

/// The report's title and first paragraphs: the code that measured it, the trials per cell,
/// how to read a cell and what is modelled, the seeds, and where `walking` comes from.
fn report_head(s: &mut String, plan: &Plan, m: &Measured) {
    let _ = writeln!(
        s,
        "# roam lab imp: Informed Mobile Prefetching, reproduced\n\nMeasured with roam `{}`{}. \
         {} trial(s) per cell{}. Every strategy runs over roam (Intentional Networking); only \
         the prefetching decision differs. Cells: the mean over trials with its 95% \
         confidence interval (Student's t, or a percentile bootstrap marked so where the trials are skewed), then the median. Energy is \
         **modelled** (PowerTutor's Nexus One radios, AT&T 3G timers, driven by the client's \
         interface counters), not measured; data is the 3G's bytes. Every trial is in \
         `trials.csv`.\n",
        m.version,
        crate::harness::results::written_by(&m.version),
        plan.trials,
        if plan.quick {
            ", **quick** (short runs: not comparable with the thesis's 20-minute runs)"
        } else {
            ""
        },
    );
    let _ = writeln!(s, "{}\n", seeds_line("imp", &m.rows));
    let _ = writeln!(
        s,
        "The `walking` scenario is constructed to the thesis's statistics (its trace is not \
         available): docs/traces.md compares them.\n"
    );
}

/// `app` on `sc`: every strategy's fetch time, energy and data, and how many of its trials
/// went over the application's energy or data budget (the last argument; NaN: none).
fn strategies_table(
    s: &mut String,
    plan: &Plan,
    rows: &[Row],
    app: &App,
    sc: &str,
    (e_budget, d_budget): (f64, f64),
) {
    let _ = writeln!(
        s,
        "### {} on `{sc}`\n\n| strategy | mean fetch time (ms) | energy (J, modelled) | 3G data (kB) | trials over budget |\n|---|---:|---:|---:|---:|",
        app.name
    );
    for sys in &plan.systems {
        let n = sys.name();
        let e_over = over(rows, app.name, sc, n, "energy_J", e_budget);
        let d_over = over(rows, app.name, sc, n, "data_kB", d_budget);
        let _ = writeln!(
            s,
            "| {n} | {} | {} | {} | {} |",
            cell(rows, app.name, sc, n, "fetch_ms").cell(),
            cell(rows, app.name, sc, n, "energy_J").cell(),
            cell(rows, app.name, sc, n, "data_kB").cell(),
            e_over.max(d_over)
        );
    }
}

/// IMP against always-prefetch on `app` over `sc`: the difference of their mean fetch times
/// and their trials over the energy and data budgets (the last argument; NaN: none), beside
/// the thesis; first, if every strategy went over the energy budget, why (roam's own traffic
/// on the 3G).
fn imp_against_always(
    s: &mut String,
    plan: &Plan,
    rows: &[Row],
    app: &App,
    sc: &str,
    (e_budget, d_budget): (f64, f64),
) {
    let imp_name = Strategy::Imp.name();
    let always = Strategy::Always.name();
    let f = |sys: &str| cell(rows, app.name, sc, sys, "fetch_ms").value();
    let always_over = over(rows, app.name, sc, always, "energy_J", e_budget)
        + over(rows, app.name, sc, always, "data_kB", d_budget);
    let imp_over = over(rows, app.name, sc, imp_name, "energy_J", e_budget)
        + over(rows, app.name, sc, imp_name, "data_kB", d_budget);
    let gap = f(imp_name) - f(always);
    let least = plan
        .systems
        .iter()
        .map(|sys| cell(rows, app.name, sc, sys.name(), "energy_J").value())
        .filter(|v| v.is_finite())
        .fold(f64::INFINITY, f64::min);
    if e_budget.is_finite() && least > e_budget {
        let _ = writeln!(
            s,
            "\nEvery strategy used more energy than the budget ({e_budget} J), the \
             least {least:.0} J: roam's own traffic on the 3G (an `Estimate` frame on \
             each connection every second) keeps the radio in DCH whatever is \
             prefetched (docs/budgets.md, \"What roam's own traffic costs\")."
        );
    }
    let _ = writeln!(
        s,
        "\nIMP's mean fetch time minus always-prefetch's: {} (thesis: within 300 ms \
         where always-prefetch stayed within the budget; our aim 100 ms). Trials over \
         budget: IMP {imp_over}, always-prefetch {always_over}. Thesis: {}.\n",
        if gap.is_finite() {
            format!("{gap:.1} ms")
        } else {
            "not measured".into()
        },
        thesis(app.name, sc)
    );
}
