//! `roam lab in-paper`: the Intentional Networking evaluation (its three applications, four
//! scenarios, the paper's baselines and MPTCP), run by the shared framework
//! ([`crate::harness::matrix`]) into `results/in-paper/`, with a report that puts every cell beside the
//! paper's claims.

pub mod claims;
pub mod fs;
pub mod mail;
mod oracle;
pub mod paper;
mod processes;
pub mod sensing;
pub mod sensing_2proc;

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::Result;
use roam_trace::stats::scenario_stats;

use crate::harness::charts::charts;
use crate::harness::charts::{cdf_file, event_curves};
use crate::harness::matrix;
use crate::harness::plan::{App, Plan};
use crate::harness::results::{note_failed, note_system, TRIALS_LOG};
use crate::harness::seeds::seeds_line;
use crate::harness::setup::DOVECOT;
use crate::harness::study::{Defaults, Request, Study};
use crate::harness::sweep;
use crate::harness::system::{self, Builtin, System};
use crate::harness::trial::{Metric, Trial};
use crate::report::compare::{advantage_text, best_baseline, cell};
use crate::report::Row;
use claims::expected_outcome;

/// Every application, in report order.
pub fn apps() -> Vec<App> {
    let build = fs::build_trace().map_or(Duration::from_secs(600), |t| t.length());
    vec![
        App {
            name: "fs",
            run: fs::run,
            full: build + Duration::from_secs(1),
            quick: Duration::from_secs(6),
            interactive: ("interactive_s", "interactive time, replayed build (s)"),
            background: ("writeback_s", "write-back done (s)", false),
            event: (fs::EVENT, "demand fetch round trip (ms)"),
            needs: &[],
            interactive_floor: Some("span_s"),
            stagger: None,
        },
        App {
            name: "mail",
            run: mail::run,
            // Time limits: the workload ends when every message is fetched.
            full: Duration::from_secs(600),
            quick: Duration::from_secs(180),
            interactive: ("ondemand_ms", "on-demand fetch delay, mean of 5 (ms)"),
            background: ("background_s", "all messages fetched (s)", false),
            event: (mail::EVENT, "wait for an opened message (ms)"),
            needs: &[DOVECOT],
            interactive_floor: None,
            stagger: None,
        },
        sensing_app("sensing", sensing::run),
        // The paper's §7.2.4: the same application as two processes, urgent and bulk.
        sensing_app("sensing-2proc", sensing_2proc::run),
    ]
}

/// Vehicular sensing as application `name` (one process, or two: `run` says), its workload
/// and metrics the same.
fn sensing_app(name: &'static str, run: fn(&Trial) -> Result<Vec<Metric>>) -> App {
    App {
        name,
        run,
        full: Duration::from_secs(15 * 60),
        quick: Duration::from_secs(60),
        // The paper reports "the average response time for urgent events" (§7.2.3).
        interactive: ("urgent_mean_ms", "urgent latency, one way, mean (ms)"),
        background: ("bulk_kBps", "bulk throughput (KB/s)", true),
        event: (sensing::EVENT, "urgent message latency, one way (ms)"),
        needs: &[],
        interactive_floor: None,
        stagger: None,
    }
}

/// The scenarios of the paper's evaluation, in report order.
pub const SCENARIOS: [&str; 4] = ["hotspot", "intermittent", "vehicular", "vehicular-umts"];

/// Run the plan (or, with `report_only`, read its directory); write the report and the
/// charts; return the report's text and every trial's rows.
pub fn in_paper(plan: &Plan) -> Result<(String, Vec<Row>)> {
    let all = apps();
    let m = matrix::measure(plan, &all)?;
    let md = markdown(
        plan, &all, &m.app_ix, &m.rows, &m.events, &m.notes, &m.version,
    );
    std::fs::write(plan.out.join("report.md"), &md)?;
    charts(plan, &all, &m)?;
    Ok((md, m.rows))
}

/// The report: how it was measured ([`report_head`]), the scenarios ([`scenarios_section`]),
/// each application's cells per scenario ([`app_section`]), the paper's claims checked
/// ([`claims_section`]) and what unfinished and failed trials said ([`notes_section`]).
fn markdown(
    plan: &Plan,
    all: &[App],
    app_ix: &[usize],
    rows: &[Row],
    events: &[Row],
    notes: &[String],
    measured: &str,
) -> String {
    let mut s = String::new();
    report_head(&mut s, plan, rows, measured);
    scenarios_section(&mut s, plan, all, app_ix);
    for &a in app_ix {
        app_section(&mut s, plan, &all[a], rows, events);
    }
    claims_section(&mut s, plan, all, app_ix, rows);
    s.push_str(&processes::section(plan, rows));
    let names: Vec<&str> = app_ix.iter().map(|&a| all[a].name).collect();
    s.push_str(&oracle::section(plan, &names, rows));
    s.push_str(&crate::report::links::section(rows));
    notes_section(&mut s, notes);
    s
}

/// The report's title and first paragraphs: the code that measured it (`measured`), the
/// trials per cell and the links, how to read a cell and what "unfinished" means, and the
/// seeds of `rows`.
fn report_head(s: &mut String, plan: &Plan, rows: &[Row], measured: &str) {
    let _ = writeln!(
        s,
        "# roam lab: the Intentional Networking evaluation, reproduced\n"
    );
    let _ = writeln!(
        s,
        "Measured with roam `{measured}`{}. {}{}; emulated links with {}-packet drop-tail queues (unless a scenario's `+queue=` says otherwise); CUBIC \
         everywhere. Cells: the mean over trials, as the paper reports, with the 95% confidence \
         interval of the mean in brackets (Student's t; a percentile bootstrap, said so, where \
         the trials are skewed, |skewness| > 1, or the t interval would reach below zero), \
         then the median. roam's advantage over a system is first the ratio of the two means, \
         as the paper's \"X times\" compares means, with its 95% bootstrap interval; then, \
         since trials of every system share their seeds, the geometric mean of the per-seed \
         ratios with their range. Every trial is in `trials.csv`. The \
         paper's column quotes the paper (its numbers are ratios against its baselines). \
         `unfinished`: the workload did not finish within the trial's time limit (mail: every \
         body within the workload length; file system: a demand read unanswered for 120 s, a \
         replay longer than 60 times the recorded span it replays (at least 5 minutes), or \
         write-back not done within 60 s or as long again as the replay); such a trial counts towards \
         the median as slower than every finished one; a cell with one shows the median, and its seed \
         pairs with no other.\n",
        crate::harness::results::written_by(measured),
        crate::report::trials_per_cell(plan.trials, rows),
        if plan.quick {
            ", **quick** (short workloads: not comparable with the paper's full runs)"
        } else {
            ""
        },
        crate::harness::system::QUEUE_PACKETS,
    );
    let _ = writeln!(s, "{}\n", seeds_line("in-paper", rows));
}

/// The scenarios: the paper's vehicular traces, then ours (seed 1) over the longest workload
/// of the applications reported (`app_ix` into `all`).
fn scenarios_section(s: &mut String, plan: &Plan, all: &[App], app_ix: &[usize]) {
    let _ = writeln!(
        s,
        "## Scenarios\n\nThe paper's vehicular traces:\n\n{}",
        paper::TRACE_TABLE
    );
    let longest = app_ix
        .iter()
        .map(|&a| plan.workload(&all[a]))
        .max()
        .unwrap_or(Duration::from_secs(60));
    for sc in &plan.scenarios {
        if let Ok((scn, _)) = sweep::scenario(sc, 1) {
            let _ = writeln!(
                s,
                "Ours (seed 1): {}",
                scenario_stats(&scn, longest).to_markdown()
            );
        }
    }
}

/// An application's section: its charts, then per scenario a table of every system's cells
/// with roam's advantage over it and the paper's figure ([`system_row`]), and the chart of
/// every event where there are events.
fn app_section(s: &mut String, plan: &Plan, app: &App, rows: &[Row], events: &[Row]) {
    let _ = writeln!(s, "## {}\n", app.name);
    let _ = writeln!(
        s,
        "![{0} interactive]({0}-interactive.svg) ![{0} background]({0}-background.svg)\n",
        app.name
    );
    for sc in &plan.scenarios {
        let _ = writeln!(s, "### {} on `{sc}`\n", app.name);
        let _ = writeln!(
            s,
            "| system | {} | {} | roam vs this: interactive | background (+: roam better) | paper |\n|---|---:|---:|---|---|---|",
            app.interactive.1, app.background.1
        );
        for sys in &plan.systems {
            system_row(s, app, sc, sys, rows);
        }
        s.push('\n');
        if !event_curves(plan, app, sc, events).is_empty() {
            let _ = writeln!(
                s,
                "Every event of every trial ({}): ![{} on {sc}, events]({})\n",
                app.event.1,
                app.name,
                cdf_file(app, sc)
            );
        }
    }
}

/// System `sys`'s row of `app`'s table on `sc`: its interactive and background cells, roam's
/// advantage over it in each (empty for roam itself), and the paper's figure.
fn system_row(s: &mut String, app: &App, sc: &str, sys: &System, rows: &[Row]) {
    let i = cell(rows, app.name, sc, sys.name(), app.interactive.0);
    let b = cell(rows, app.name, sc, sys.name(), app.background.0);
    let (ri, rb) = if *sys == Builtin::Roam {
        ("".to_string(), "".to_string())
    } else {
        let key = (app.name, sc, sys.name());
        (
            advantage_text(rows, key, app.interactive.0, false, false),
            advantage_text(rows, key, app.background.0, app.background.2, true),
        )
    };
    let _ = writeln!(
        s,
        "| {} | {} | {} | {ri} | {rb} | {} |",
        sys.name(),
        i.cell(),
        b.cell(),
        paper::claim_text(app.name, sc, sys.name())
    );
}

/// The paper's claims, checked: what it leads one to expect of each application (`app_ix`
/// into `all`) on each scenario, against what was measured ([`expected_outcome`]).
fn claims_section(s: &mut String, plan: &Plan, all: &[App], app_ix: &[usize], rows: &[Row]) {
    let _ = writeln!(
        s,
        "## The paper's claims, checked\n\nChecked, not tuned: every claim the paper makes \
         about a cell measured here (against idealized aggregation and the two migration \
         strategies; the bound is the lower end of a range the paper gives, or the cost it \
         reports), and roam's interactive metric better than MPTCP's. Each is roam's \
         advantage as the ratio of the means, the paper's statistic, with its 95% bootstrap \
         interval (the ratio of the medians where a trial did not finish). Under a miss, a \
         link to where docs/results/notebook.md traced earlier runs' misses of that cell, \
         where it did: a pointer, not a diagnosis of this run.\n\n| application | \
         scenario | outcome |\n|---|---|---|"
    );
    for &a in app_ix {
        for sc in &plan.scenarios {
            if let Some(o) = expected_outcome(rows, &all[a], sc) {
                let _ = writeln!(s, "| {} | `{sc}` | {o} |", all[a].name);
            }
        }
    }
    s.push('\n');
}

/// What each trial that did not finish (or failed) said, if any did; under an MPTCP trial
/// that ran and did not finish, a link to the MPTCP stalls traced in earlier runs
/// ([`MPTCP_STALLS`]: a pointer, not a diagnosis of this run).
fn notes_section(s: &mut String, notes: &[String]) {
    if notes.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "## Unfinished and failed trials\n\nWhat each trial that did not finish (or \
         failed) said about it (also in `{TRIALS_LOG}`).\n"
    );
    for n in notes {
        let _ = writeln!(s, "- {n}");
    }
    // The stall explains an MPTCP trial that ran and did not finish, not one that failed.
    if notes
        .iter()
        .any(|n| note_system(n) == Some(Builtin::Mptcp.name()) && !note_failed(n))
    {
        let _ = writeln!(s, "\n{MPTCP_STALLS}");
    }
}

/// `roam lab in-paper`: the Intentional Networking evaluation.
pub struct InPaper;

impl Study for InPaper {
    fn name(&self) -> &'static str {
        "in-paper"
    }

    fn paper(&self) -> &'static str {
        "Intentional Networking (Higgins et al., MobiCom 2010) §7: file system, e-mail and \
         vehicular sensing on the hotspot, intermittent and vehicular traces"
    }

    fn defaults(&self) -> Defaults {
        let names = apps()
            .iter()
            .map(|a| a.name.to_string())
            .collect::<Vec<_>>();
        Defaults {
            scenarios: SCENARIOS.map(String::from).to_vec(),
            quick_scenarios: vec!["vehicular".into()],
            apps: names.clone(),
            quick_apps: names,
            jobs: 1,
            quick_jobs: None,
            out: "results/in-paper",
        }
    }

    fn apps(&self) -> Vec<App> {
        apps()
    }

    fn system(&self, name: &str) -> Result<System> {
        system::parse(name)
    }

    fn systems(&self, _quick: bool) -> Vec<System> {
        Builtin::all()
    }

    fn paper_figure(&self, app: &str, scenario: &str, system: &str) -> Option<String> {
        Some(paper::claim_text(app, scenario, system)).filter(|t| !t.is_empty())
    }

    fn measure(&self, plan: &Plan, _request: &Request) -> Result<(String, Vec<Row>)> {
        in_paper(plan)
    }

    /// The headline table of every scenario.
    fn summary(&self, plan: &Plan, _report: &str, rows: &[Row]) -> String {
        plan.scenarios
            .iter()
            .map(|s| format!("{}\n", headline(rows, s)))
            .collect()
    }
}

/// What the report says under unfinished MPTCP trials: where earlier runs' MPTCP stalls were
/// traced (with `ss -tinM` samples of both ends). A link: whether this run's stalled the same
/// way, its own notes and per-link bytes say.
const MPTCP_STALLS: &str = "MPTCP stalls traced in earlier runs: docs/results/notebook.md, \
     \"Linux MPTCP after a long WiFi absence\".";

/// The baselines the paper compared roam with: idealized aggregation and the two migration
/// strategies (MPTCP is ours).
pub(crate) const PAPER_BASELINES: [Builtin; 3] = [
    Builtin::Aggregation,
    Builtin::BestLatency,
    Builtin::BestBandwidth,
];

/// The table a newcomer should see first: interactive latency and background throughput of
/// roam, MPTCP and the best of the paper's baselines (the best mean of the interactive metric:
/// [`best_baseline`]), for each application on `scenario`.
pub fn headline(rows: &[Row], scenario: &str) -> String {
    let all = apps();
    let mut s = String::new();
    for app in all.iter().filter(|a| rows.iter().any(|r| r.app == a.name)) {
        let _ = writeln!(
            s,
            "{} on `{scenario}`:\n\n| system | {} | {} |\n|---|---:|---:|",
            app.name, app.interactive.1, app.background.1
        );
        let best = best_baseline(
            rows,
            (app.name, scenario),
            &PAPER_BASELINES.map(|b| b.name()),
            app.interactive.0,
            false,
        )
        .and_then(|(name, _)| PAPER_BASELINES.into_iter().find(|b| b.name() == name));
        let ran = |sys: &Builtin| {
            rows.iter()
                .any(|r| r.app == app.name && r.scenario == scenario && r.system == sys.name())
        };
        for sys in [Some(Builtin::Roam), Some(Builtin::Mptcp), best]
            .into_iter()
            .flatten()
            .filter(ran)
        {
            let i = cell(rows, app.name, scenario, sys.name(), app.interactive.0);
            let b = cell(rows, app.name, scenario, sys.name(), app.background.0);
            let name = if Some(sys) == best {
                format!("{} (best baseline)", sys.name())
            } else {
                sys.name().to_string()
            };
            let _ = writeln!(s, "| {name} | {} | {} |", i.cell(), b.cell());
        }
        if let Some(o) = expected_outcome(rows, app, scenario) {
            let _ = writeln!(s, "\nExpected from the paper: {o}");
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::results::read_notes;
    use crate::harness::results::tests::mail_plan;
    use crate::harness::results::VERSION;
    use claims::test_rows::rows;

    /// The notes a report shows are those of the trials it reports: a resumed run drops the
    /// notes of the trials it runs again.
    #[test]
    fn notes_are_kept_only_for_the_trials_reported() {
        let dir = std::env::temp_dir().join(format!("roam-lab-notes-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let kept = rows(&[("roam", 300.0, f64::INFINITY)]);
        assert!(read_notes(&dir, &kept).unwrap().is_empty(), "no log yet");
        std::fs::write(
            dir.join(TRIALS_LOG),
            "mail/hotspot/roam#1: background: 40 of 100 bodies in the cache at the end\n\
             mail/hotspot/roam#2: failed: the proxy's reader failed\n\
             mail/hotspot/roam#10: another trial\n",
        )
        .unwrap();
        let notes = read_notes(&dir, &kept).unwrap();
        assert_eq!(
            notes,
            vec!["mail/hotspot/roam#1: background: 40 of 100 bodies in the cache at the end"]
        );
        let plan = mail_plan(&dir, 1, false);
        let all = apps();
        let ix = vec![all.iter().position(|a| a.name == "mail").unwrap()];
        let md = markdown(&plan, &all, &ix, &kept, &[], &notes, VERSION);
        let section = md.split("## Unfinished and failed trials").nth(1).unwrap();
        assert!(
            section.contains("- mail/hotspot/roam#1: background: 40 of 100"),
            "{md}"
        );
        assert!(
            !md.contains(MPTCP_STALLS),
            "no MPTCP trial is unfinished: {md}"
        );
        let mptcp_note = vec!["mail/hotspot/mptcp#1: background: 3 of 100 bodies".to_string()];
        let md = markdown(&plan, &all, &ix, &kept, &[], &mptcp_note, VERSION);
        assert!(md.contains(MPTCP_STALLS), "{md}");
        let mptcp_failed = vec!["mail/hotspot/mptcp#1: failed: no route to host".to_string()];
        let md = markdown(&plan, &all, &ix, &kept, &[], &mptcp_failed, VERSION);
        assert!(
            !md.contains(MPTCP_STALLS),
            "a failed trial did not stall: {md}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
