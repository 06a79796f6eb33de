//! `roam lab horatio`'s report (`OUT/report.md`): suspend, resume and self-cleaning tables by
//! dirty state or workload and path, the paper's figure beside each cell that has one.

use std::fmt::Write as _;

use super::paper::{paper, paper_resume};
use super::path::Path;
use crate::harness::plan::Plan;
use crate::harness::results::written_by;
use crate::harness::seeds::seeds_line;
use crate::harness::system::System;
use crate::report::compare::cell;
use crate::report::Row;

/// A table of `metric` by application (rows) and system (columns) of `plan`, the paper's figure
/// (`seed`) beside each cell that has one.
fn table(
    s: &mut String,
    title: &str,
    plan: &Plan,
    rows: &[Row],
    sc: &str,
    metric: &str,
    seed: fn(&str, Path) -> Option<f64>,
) {
    let _ = writeln!(
        s,
        "## {title}: ours / the seed's\n\n| dirty state | {} |\n|---|{}",
        plan.systems
            .iter()
            .map(|x| x.name())
            .collect::<Vec<_>>()
            .join(" | "),
        "---:|".repeat(plan.systems.len())
    );
    for app in &plan.apps {
        let cells: Vec<String> = plan
            .systems
            .iter()
            .map(|sys| {
                let c = cell(rows, app, sc, sys.name(), metric).cell();
                match sys.get::<Path>() {
                    Some(&p) => seed(app, p).map_or(c.clone(), |v| format!("{c} / {v}")),
                    None => c,
                }
            })
            .collect();
        let _ = writeln!(s, "| {app} | {} |", cells.join(" | "));
    }
    let _ = writeln!(s);
}

/// The report: suspend, resume and self-cleaning tables with the paper's figures beside them.
/// After its head ([`report_head`]), per scenario the suspend and resume tables of the
/// `suspend` plan ([`suspend_section`]) and the self-cleaning table of the `clean` plan
/// ([`clean_section`]), each where its plan has applications and systems; then the trials'
/// notes.
pub(crate) fn markdown(
    plan: &Plan,
    suspend: &Plan,
    clean: &Plan,
    rows: &[Row],
    notes: &[String],
    version: &str,
) -> String {
    let mut s = String::new();
    report_head(&mut s, plan, rows, version);
    for sc in &plan.scenarios {
        if !suspend.apps.is_empty() && !suspend.systems.is_empty() {
            suspend_section(&mut s, suspend, rows, sc);
        }
        if !clean.apps.is_empty() && !clean.systems.is_empty() {
            clean_section(&mut s, clean, rows, sc);
        }
    }
    if !notes.is_empty() {
        let _ = writeln!(s, "## Notes on trials\n");
        for n in notes {
            let _ = writeln!(s, "- {n}");
        }
    }
    s
}

/// The report's title and first paragraph: the code that measured it (`version`), the trials
/// per cell, the hosts and links, how to read a cell and what is modelled; then the seeds of
/// `rows`.
fn report_head(s: &mut String, plan: &Plan, rows: &[Row], version: &str) {
    let _ = writeln!(
        s,
        "# roam lab horatio: suspend, resume and self-cleaning of a parcel\n\n\
         Measured with roam `{version}`{}. {}{}. Three emulated hosts (client, \
         phone, server) and the real tiers (`roam parcel`'s code, TLS links over roam-net); \
         the links are the `horatio` scenario's (docs/horatio.md). Cells: the mean with its \
         95% confidence interval (Student's t, or a percentile bootstrap marked so where the trials are skewed), then the median; beside it the seed's figure. \
         Energy is **modelled** (roam-budget's huang2012 radio profiles; no USB power model).\n",
        written_by(version),
        crate::report::trials_per_cell(plan.trials, rows),
        if plan.quick {
            ", **quick** (not the seed's matrix)"
        } else {
            ""
        },
    );
    let _ = writeln!(s, "{}\n", seeds_line("horatio", rows));
}

/// Suspend and resume on `sc` ([`table`]), then the headline: the phone over USB against ISR
/// over 1 Mbit/s, per dirty state of the `suspend` plan.
fn suspend_section(s: &mut String, suspend: &Plan, rows: &[Row], sc: &str) {
    table(s, "Suspend (s)", suspend, rows, sc, "suspend_s", paper);
    table(
        s,
        "Resume until the guest can run (s)",
        suspend,
        rows,
        sc,
        "resume_s",
        paper_resume,
    );
    // The headline: the phone against ISR over 1 Mbit/s, per dirty state.
    let _ = writeln!(
        s,
        "\nSuspend to the phone over USB against ISR over 1 Mbit/s (the seed: up to -97%):"
    );
    for app in &suspend.apps {
        let ours = cell(rows, app, sc, "phone-usb", "suspend_s").value();
        let isr = cell(rows, app, sc, "isr-1mbit", "suspend_s").value();
        if ours.is_finite() && isr.is_finite() {
            let _ = writeln!(s, "- {app}: {:+.0}%", (ours / isr - 1.0) * 100.0);
        }
    }
    let _ = writeln!(s);
}

/// Self-cleaning on `sc`: the time of every application and system of the `clean` plan with
/// the paper's figure and the modelled radio energy, what `clean-roam` moved over each network
/// where it ran ([`clean_roam_split`]), and the paper's measured energy.
fn clean_section(s: &mut String, clean: &Plan, rows: &[Row], sc: &str) {
    let _ = writeln!(
        s,
        "## Self-cleaning (s): ours / the seed's; radio energy (J, modelled)\n\n| dirty state | {} |\n|---|{}",
        clean.systems.iter().map(|x| x.name()).collect::<Vec<_>>().join(" | "),
        "---:|".repeat(clean.systems.len())
    );
    for app in &clean.apps {
        let cells: Vec<String> = clean
            .systems
            .iter()
            .map(|sys| {
                let c = cell(rows, app, sc, sys.name(), "clean_s").cell();
                let e = cell(rows, app, sc, sys.name(), "clean_energy_j").value();
                let p = match sys.get::<Path>() {
                    Some(&p) => paper(app, p).map_or(String::new(), |v| format!(" / {v}")),
                    None => String::new(),
                };
                format!("{c}{p}; {e:.0} J")
            })
            .collect();
        let _ = writeln!(s, "| {app} | {} |", cells.join(" | "));
    }
    if clean.systems.contains(&System::new(Path::CleanRoam)) {
        clean_roam_split(s, clean, rows, sc);
    }
    let _ = writeln!(
        s,
        "\nThe seed's energy (N95, measured): self-cleaning 100 MB over WiFi 915.6 J, over 3G 4552.7 J. \
         The seed's workload rows (Table 8) include 4.5 MB of fixed state besides the dirty state; \
         ours upload what the server lacks: the workload's sealed memory and disk chunks.\n"
    );
}

/// What `clean-roam` moved over the WiFi and over the 3G on `sc`, per application of the
/// `clean` plan that has a figure.
fn clean_roam_split(s: &mut String, clean: &Plan, rows: &[Row], sc: &str) {
    let _ = writeln!(
        s,
        "\n`clean-roam` (WiFi in reach 69% of the time, and the 3G; roam-net chooses): mean MB over each"
    );
    for app in &clean.apps {
        let w = cell(rows, app, sc, "clean-roam", "clean_mb_wifi").value();
        let g = cell(rows, app, sc, "clean-roam", "clean_mb_3g").value();
        if w.is_finite() || g.is_finite() {
            let _ = writeln!(s, "- {app}: {w:.1} MB over WiFi, {g:.1} MB over 3G");
        }
    }
}
