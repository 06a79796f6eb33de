//! `roam lab horatio`'s report (`OUT/report.md`): suspend, resume and self-cleaning tables by
//! dirty state or workload and path, the seed's figure beside each cell that has one.

use std::fmt::Write as _;

use crate::harness::matrix::{self, Plan};
use crate::harness::system::System;
use crate::report::compare::cell;
use crate::report::Row;
use crate::studies::horatio::{paper, paper_resume, Path};

/// A table of `metric` by application (rows) and system (columns) of `plan`, the seed's figure
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
                match sys {
                    System::Parcel(p) => seed(app, *p).map_or(c.clone(), |v| format!("{c} / {v}")),
                    _ => c,
                }
            })
            .collect();
        let _ = writeln!(s, "| {app} | {} |", cells.join(" | "));
    }
    let _ = writeln!(s);
}

/// The report: suspend, resume and self-cleaning tables with the seed's figures beside them.
pub(crate) fn markdown(
    plan: &Plan,
    suspend: &Plan,
    clean: &Plan,
    rows: &[Row],
    notes: &[String],
    version: &str,
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# roam lab horatio: suspend, resume and self-cleaning of a parcel\n\n\
         Measured with roam `{version}`{}. {} trial(s) per cell{}. Three emulated hosts (client, \
         phone, server) and the real tiers (`roam parcel`'s code, TLS links over roam-net); \
         the links are the `horatio` scenario's (docs/horatio.md). Cells: the mean with its \
         95% confidence interval (Student's t), then the median; beside it the seed's figure. \
         Energy is **modelled** (roam-budget's huang2012 radio profiles; no USB power model).\n",
        matrix::written_by(version),
        plan.trials,
        if plan.quick {
            ", **quick** (not the seed's matrix)"
        } else {
            ""
        },
    );
    let _ = writeln!(s, "{}\n", matrix::seeds_line(rows));
    for sc in &plan.scenarios {
        if !suspend.apps.is_empty() && !suspend.systems.is_empty() {
            table(&mut s, "Suspend (s)", suspend, rows, sc, "suspend_s", paper);
            table(
                &mut s,
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
        if !clean.apps.is_empty() && !clean.systems.is_empty() {
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
                        let p = match sys {
                            System::Parcel(p) => {
                                paper(app, *p).map_or(String::new(), |v| format!(" / {v}"))
                            }
                            _ => String::new(),
                        };
                        format!("{c}{p}; {e:.0} J")
                    })
                    .collect();
                let _ = writeln!(s, "| {app} | {} |", cells.join(" | "));
            }
            if clean.systems.contains(&System::Parcel(Path::CleanRoam)) {
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
            let _ = writeln!(
                s,
                "\nThe seed's energy (N95, measured): self-cleaning 100 MB over WiFi 915.6 J, over 3G 4552.7 J. \
                 The seed's workload rows (Table 8) include 4.5 MB of fixed state besides the dirty state; \
                 ours upload what the server lacks: the workload's sealed memory and disk chunks.\n"
            );
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
