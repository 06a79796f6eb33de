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
use crate::report::compare::{best_baseline, cell, values};
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
        app(mail::CONDITIONS[0].name, mail::run_energy, &[DOVECOT]),
        app(mail::CONDITIONS[1].name, mail::run_data, &[DOVECOT]),
        app(mail::CONDITIONS[2].name, mail::run_both, &[DOVECOT]),
        app(news::CONDITIONS[0].name, news::run_energy, &[NGINX]),
        app(news::CONDITIONS[1].name, news::run_data, &[NGINX]),
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
        ("mail-energy", "walking") => {
            "150 J: within 40-150 ms of always-prefetch, 4-6x faster than the others; 30-65% \
             less energy than the simple strategies"
        }
        ("mail-data", "walking") => {
            "2 MB (only WiFi-only also met it): within 40-150 ms of always-prefetch"
        }
        ("mail-both", "walking") => "no walking budget for both in the thesis",
        ("news-energy", "walking") => {
            "200 J (always-prefetch met it and was 7-10% faster than IMP): 25-35% faster than \
             never, size-limit and WiFi-only"
        }
        ("news-data", "walking") => "4 MB: 2-6x faster; 17-53% less data",
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

/// The budget `app`'s trials on `sc` ran under, from their rows (NaN: none).
fn budget(rows: &[Row], app: &str, sc: &str, metric: &str) -> f64 {
    rows.iter()
        .find(|r| r.app == app && r.scenario == sc && r.metric == metric && r.value.is_finite())
        .map_or(f64::NAN, |r| r.value)
}

/// "50 J and 400 kB", "50 J", "400 kB of 3G data" or "none".
fn budget_text((e, d): (f64, f64)) -> String {
    match (e.is_finite(), d.is_finite()) {
        (true, true) => format!("{e} J and {d} kB"),
        (true, false) => format!("{e} J"),
        (false, true) => format!("{d} kB of 3G data"),
        (false, false) => "none".into(),
    }
}

/// Trials of `sys` on `app` over `sc` over either budget.
fn over_either(rows: &[Row], app: &str, sc: &str, sys: &str, (e, d): (f64, f64)) -> usize {
    over(rows, app, sc, sys, "energy_J", e).max(over(rows, app, sc, sys, "data_kB", d))
}

/// The simple strategies (every one but IMP) run in this plan.
fn simple(plan: &Plan) -> Vec<&str> {
    plan.systems
        .iter()
        .map(|s| s.name())
        .filter(|n| *n != Strategy::Imp.name())
        .collect()
}

/// Whether the budget binds on `app` over `sc`, from the run: "does not bind" when every
/// simple strategy stayed within it in every trial; "does not bind IMP" when always-prefetch
/// (what IMP does unconstrained) did; else below every simple strategy that went over, as the
/// thesis set its budgets.
fn binding(plan: &Plan, rows: &[Row], app: &str, sc: &str, b: (f64, f64)) -> String {
    if !b.0.is_finite() && !b.1.is_finite() {
        return "no budget".into();
    }
    let over: Vec<(&str, usize, usize)> = simple(plan)
        .into_iter()
        .map(|sys| {
            let n = values(rows, app, sc, sys, "fetch_ms").len();
            (sys, over_either(rows, app, sc, sys, b), n)
        })
        .filter(|x| x.2 > 0)
        .collect();
    let list = |v: &[(&str, usize, usize)]| {
        v.iter()
            .map(|(s, k, n)| format!("{s} {k}/{n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if over.iter().all(|x| x.1 == 0) {
        "**the budget does not bind**: every simple strategy stayed within it".into()
    } else if over
        .iter()
        .any(|x| x.0 == Strategy::Always.name() && x.1 == 0)
    {
        format!(
            "**the budget does not bind IMP**: always-prefetch (what IMP does unconstrained) \
             stayed within it; trials over: {}",
            list(&over)
        )
    } else {
        format!(
            "the budget binds: trials over it, {} (the thesis set its budgets below most \
             simple strategies)",
            list(&over)
        )
    }
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
        let _ = writeln!(
            s,
            "## {0}\n\n![{0} fetch time]({0}-interactive.svg) ![{0} energy]({0}-background.svg)\n",
            app.name
        );
        for sc in &plan.scenarios {
            let b = (
                budget(rows, app.name, sc, "energy_budget_J"),
                budget(rows, app.name, sc, "data_budget_kB"),
            );
            strategies_table(&mut s, plan, rows, app, sc, b);
            imp_against_best_within(&mut s, plan, rows, app, sc, b);
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
         {}{}. Every strategy runs over roam (Intentional Networking); only \
         the prefetching decision differs. Cells: the mean over trials with its 95% \
         confidence interval (Student's t, or a percentile bootstrap marked so where the trials are skewed), then the median. Energy is \
         **modelled** (PowerTutor's Nexus One radios, AT&T 3G timers, driven by the client's \
         interface counters), not measured; data is the 3G's bytes. Every trial is in \
         `trials.csv`.\n",
        m.version,
        crate::harness::results::written_by(&m.version),
        crate::report::trials_per_cell(plan.trials, &m.rows),
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
        "### {} on `{sc}`: budget {}\n\n{}.\n\n| strategy | mean fetch time (ms) | energy (J, modelled) | 3G data (kB) | trials over budget |\n|---|---:|---:|---:|---:|",
        app.name,
        budget_text((e_budget, d_budget)),
        binding(plan, rows, app.name, sc, (e_budget, d_budget))
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

/// IMP against the best simple strategy that stayed within the budget in every trial (the
/// thesis's comparison: "all heuristic-based prefetching strategies ... that also meet the
/// budgetary constraints"), by mean fetch time ([`best_baseline`]'s rule), and against
/// always-prefetch (the bound on what prefetching can do), with both's trials over budget and
/// the thesis's figure.
fn imp_against_best_within(
    s: &mut String,
    plan: &Plan,
    rows: &[Row],
    app: &App,
    sc: &str,
    b: (f64, f64),
) {
    let imp_name = Strategy::Imp.name();
    let always = Strategy::Always.name();
    let f = |sys: &str| cell(rows, app.name, sc, sys, "fetch_ms").value();
    let within: Vec<&str> = simple(plan)
        .into_iter()
        .filter(|sys| {
            !values(rows, app.name, sc, sys, "fetch_ms").is_empty()
                && over_either(rows, app.name, sc, sys, b) == 0
        })
        .collect();
    let best = best_baseline(rows, (app.name, sc), &within, "fetch_ms", false);
    let imp_over = over_either(rows, app.name, sc, imp_name, b);
    let n = values(rows, app.name, sc, imp_name, "fetch_ms").len();
    let vs_best = match best {
        Some((name, c)) => format!(
            "the best simple strategy within the budget in every trial is {name} ({} ms); \
             IMP's mean fetch time minus its: {}",
            crate::report::fmt_num(c.value()),
            gap_text(f(imp_name) - c.value())
        ),
        None => "no simple strategy stayed within the budget in every trial".into(),
    };
    let _ = writeln!(
        s,
        "\nIMP over budget in {imp_over} of {n} trials; {vs_best}. IMP minus always-prefetch \
         (what prefetching can at best do): {}. Thesis: {}.\n",
        gap_text(f(imp_name) - f(always)),
        thesis(app.name, sc)
    );
}

fn gap_text(gap: f64) -> String {
    if gap.is_finite() {
        format!("{gap:.1} ms")
    } else {
        "not measured".into()
    }
}
