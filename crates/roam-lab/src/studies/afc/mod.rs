//! `roam lab afc`: AFC (the Sanadhya thesis, ch. III: flow control that feeds the application's
//! read rate forward) on real sockets in the emulator, beside what users have today.
//!
//! Each trial is one link at a scenario of the thesis's Table 4 (`afc-s1` .. `afc-s5`: RTT
//! 530 ms, the network's rate changing every round trip) with a server that always has data
//! and a client application that reads at the scenario's rate, ⟨0, 6, 6⟩ or ⟨0, 18, 18⟩ Mbit/s
//! per round trip (`bulk`: paced reads; `bulk-cpu`: a CPU-bound reader whose share of a CPU
//! follows the profile, in a cgroup: `reader`, `cgroup`). The systems (`systems`) are kernel TCP with the scenario's
//! buffer as `SO_RCVBUF` and with Linux's autotuning, and roam-net with each flow control at
//! the same buffer. The report gives each system's goodput as a fraction of the ideal beside
//! the thesis's figures (`paper`), what the receiver held unread, and AFC's advantage as the
//! ratio of means over each baseline.

pub mod bulk;
pub mod cgroup;
pub mod dumbbell;
pub mod paper;
mod quic;
pub mod reader;
pub mod sim;
pub mod systems;

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::Result;

use crate::harness::charts::charts;
use crate::harness::matrix;
use crate::harness::plan::{App, Plan};
use crate::harness::results::written_by;
use crate::harness::seeds::seeds_line;
use crate::harness::study::{report_lines, Defaults, Finished, Request, Study};
use crate::harness::system::System;
use crate::report::compare::{by_seed, cell, values};
use crate::report::stats::ratio_of_means;
use crate::report::{fmt_num, Row};
use paper::table4;
use systems::AfcSystem;

/// The study.
pub struct Afc;

/// The application: a bulk stream read at the scenario's rate, paced.
pub const APP: &str = "bulk";

/// The same stream read by a CPU-bound reader whose CPU share follows the rate.
pub const CPU_APP: &str = "bulk-cpu";

/// The applications that read one stream, each reported per scenario.
const READERS: [&str; 2] = [APP, CPU_APP];

/// The scenarios of a full run, and of a quick one.
const SCENARIOS: [&str; 5] = ["afc-s1", "afc-s2", "afc-s3", "afc-s4", "afc-s5"];
const QUICK_SCENARIOS: [&str; 2] = ["afc-s2", "afc-s5"];

/// The applications.
pub fn apps() -> Vec<App> {
    let dumbbell = App {
        name: "dumbbell",
        run: dumbbell::run,
        full: Duration::from_secs(600),
        // Two halves: ten flows of the system alone, then five AFC flows beside five of it.
        quick: Duration::from_secs(60),
        interactive: ("total_mbps", "all ten flows' goodput (Mbit/s)"),
        background: ("jain_afc", "Jain's index among AFC flows", true),
        event: ("afc_mean_mbps", "AFC flows' mean goodput (Mbit/s)"),
        needs: &[],
        interactive_floor: None,
        stagger: None,
    };
    let mut all = vec![App {
        name: APP,
        run: bulk::run,
        // The thesis's runs are 600 s.
        full: Duration::from_secs(600),
        quick: Duration::from_secs(20),
        interactive: ("peak_unread_kb", "peak unread at the receiver (kB)"),
        background: ("goodput_mbps", "goodput (Mbit/s)", true),
        event: ("goodput_mbps", "goodput (Mbit/s)"),
        needs: &[],
        interactive_floor: None,
        stagger: None,
    }];
    all.push(App {
        name: CPU_APP,
        run: bulk::run_cpu,
        ..all[0]
    });
    all.push(dumbbell);
    all
}

impl Study for Afc {
    fn name(&self) -> &'static str {
        "afc"
    }

    fn paper(&self) -> &'static str {
        "AFC (Sanadhya, ultra-mobile computing thesis, ch. III §3.5): flow control with the \
         application's read rate fed forward, Table 4's five scenarios"
    }

    fn defaults(&self) -> Defaults {
        Defaults {
            scenarios: SCENARIOS.map(String::from).to_vec(),
            quick_scenarios: QUICK_SCENARIOS.map(String::from).to_vec(),
            apps: vec![APP.into()],
            quick_apps: vec![APP.into()],
            // One link of at most 15 Mbit/s each: many at once leave the two cores idle.
            jobs: 12,
            quick_jobs: None,
            out: "results/afc",
        }
    }

    fn apps(&self) -> Vec<App> {
        apps()
    }

    fn system(&self, name: &str) -> Result<System> {
        AfcSystem::parse(name).map(System::new).ok_or_else(|| {
            let names: Vec<&str> = AfcSystem::ALL.iter().map(|s| s.name()).collect();
            anyhow::anyhow!("unknown system `{name}` (expected {})", names.join(", "))
        })
    }

    fn systems(&self, _quick: bool) -> Vec<System> {
        AfcSystem::ALL.into_iter().map(System::new).collect()
    }

    fn paper_figure(&self, _app: &str, scenario: &str, system: &str) -> Option<String> {
        let t = table4(scenario)?;
        match system {
            "tcp-fixed" => Some(t.default_tcp.into()),
            "roam-afc" => Some(t.afc.into()),
            _ => None,
        }
    }

    fn measure(&self, plan: &Plan, _request: &Request) -> Result<(String, Vec<Row>)> {
        let all = apps();
        let m = matrix::measure(plan, &all)?;
        charts(plan, &all, &m)?;
        let md = report(plan, &m.rows, &m.version);
        std::fs::write(plan.out.join("report.md"), &md)?;
        Ok((md, m.rows))
    }

    fn summary(&self, _plan: &Plan, report: &str, _rows: &[Row]) -> String {
        report_lines(report, |l| l.starts_with("### ") || l.starts_with("AFC "))
    }

    fn simulates(&self) -> bool {
        true
    }

    /// `--sim`: the thesis's experiments in ns-3 ([`sim`]) instead of real sockets.
    fn run(&self, request: &Request) -> Result<Finished> {
        if request.sim {
            return sim::run(request);
        }
        crate::harness::study::run_matrix(self, request)
    }
}

/// The report: per scenario, every system's goodput (as a fraction of ideal, with its
/// interval), what its receiver held unread and its sender's waits, the thesis's figure
/// beside it; then AFC's advantage over each baseline as the ratio of means.
fn report(plan: &Plan, rows: &[Row], version: &str) -> String {
    let mut md = String::from("# AFC: flow control with the read rate fed forward\n\n");
    let _ = writeln!(
        md,
        "The Sanadhya thesis's Table 4 on real sockets in the emulator: one link, RTT 530 ms, \
         a server that always has data, a reader at the scenario's rate (`bulk`: every 10 ms \
         what the rate allows, nothing banked). Goodput is what the application read over the \
         run, over the ideal (the smaller of the mean network and read rates). \"Unread\" is \
         the most the receiver held that the application had not read, sampled before each \
         read: TCP's socket queue; roam's undelivered payload plus its connections' kernel \
         queues (like with like since 2026-11-30); QUIC's received datagrams less what was \
         read (approximate). \"Sender held\" is how long the sender was held by the \
         receiver's window, as its stack tells: roam's waits for credit, TCP's \
         `tcpi_rwnd_limited`; quinn tells neither, only the `DATA_BLOCKED` frames it \
         sent. The thesis's numbers are NS2's (600 s); ours are {} s runs.\n",
        plan.duration
            .unwrap_or_else(|| {
                // The run's first application's length (the dumbbell's differs from bulk's).
                let all = apps();
                let app = all
                    .iter()
                    .find(|a| plan.apps.first().is_some_and(|n| n == a.name))
                    .unwrap_or(&all[0]);
                if plan.quick {
                    app.quick
                } else {
                    app.full
                }
            })
            .as_secs()
    );
    let _ = writeln!(md, "{}{}\n", seeds_line("afc", rows), written_by(version));
    let systems: Vec<String> = plan.systems.iter().map(|s| s.name().to_string()).collect();
    if plan.apps.iter().any(|a| a == "dumbbell") {
        md.push_str(&fairness(plan, rows, &systems));
    }
    for app in READERS
        .into_iter()
        .filter(|r| plan.apps.iter().any(|a| a == r))
    {
        md.push_str(&readers(plan, rows, app, &systems));
    }
    md
}

/// The sections of one reading application (`bulk` or `bulk-cpu`): per scenario, each
/// system's row and AFC's advantages.
fn readers(plan: &Plan, rows: &[Row], app: &str, systems: &[String]) -> String {
    let cpu = app == CPU_APP;
    let mut md = String::new();
    if cpu {
        let _ = writeln!(
            md,
            "## The CPU-bound reader (`{CPU_APP}`)\n\nThe reader reads whatever is there and \
             spends a fixed CPU cost on every byte; its thread's share of one CPU (a cgroup's \
             quota) follows the profile, its full speed {}x the profile's peak. \"CPU used of \
             share\" is the reader's CPU time over the share it was granted (below 1: it \
             waited for data, or other load took its share); \"throttled\" is how long its \
             cgroup held it.\n",
            reader::FULL_OVER_PEAK
        );
    }
    for sc in &plan.scenarios {
        let Some(t) = table4(sc.split('+').next().unwrap_or_default()) else {
            continue;
        };
        let shape = bulk::Shape::of(sc, t).ok();
        let _ = writeln!(
            md,
            "### {sc}{}: network {:?} Mbit/s per 530 ms, reads {:?} per {} ms, buffer {} kB, ideal {} Mbit/s\n",
            if cpu { " (CPU-bound reader)" } else { "" },
            roam_trace::scenario::afc_network(t.scenario).unwrap_or(&[]),
            t.read_mbps,
            shape.map_or(530, |s| s.slot.as_millis()),
            shape.map_or(t.buffer, |s| s.buffer) / 1000,
            fmt_num(shape.map_or(t.ideal_mbps, |s| s.ideal_mbps))
        );
        md.push_str(if cpu {
            "| system | fraction of ideal | goodput (Mbit/s) | peak unread (kB) | sender held | CPU used of share | throttled (s) |\n|---|---|---|---|---|---|---|\n"
        } else {
            "| system | fraction of ideal | goodput (Mbit/s) | peak unread (kB) | sender held | thesis |\n|---|---|---|---|---|---|\n"
        });
        for sys in systems {
            let c = |m: &str| cell(rows, app, sc, sys, m).cell();
            let has = |m: &str| !values(rows, app, sc, sys, m).is_empty();
            let waits = match (has("sender_wait_s"), has("sender_waits")) {
                (true, true) => format!("{} s ({} times)", c("sender_wait_s"), c("sender_waits")),
                (true, false) => format!("{} s", c("sender_wait_s")),
                (false, true) => format!("{} frames", c("sender_waits")),
                (false, false) => "-".into(),
            };
            let last = if cpu {
                let used = by_seed(rows, app, sc, sys, "reader_cpu_s");
                let share = by_seed(rows, app, sc, sys, "reader_share_s");
                let of =
                    ratio_of_means(&used, &share).map_or("-".to_string(), |r| fmt_num(r.ratio));
                format!("{of} | {}", c("throttled_s"))
            } else {
                Afc.paper_figure(app, t.scenario, sys).unwrap_or("-".into())
            };
            let _ = writeln!(
                md,
                "| {sys} | {} | {} | {} | {waits} | {last} |",
                c("fraction_of_ideal"),
                c("goodput_mbps"),
                c("peak_unread_kb"),
            );
        }
        md.push('\n');
        md.push_str(&advantages(rows, app, sc, systems));
        md.push('\n');
    }
    md
}

/// The dumbbell (`dumbbell`): per scenario and system, the five AFC flows beside five of the
/// system's (ten AFC flows for `roam-afc`).
fn fairness(plan: &Plan, rows: &[Row], systems: &[String]) -> String {
    let mut md = String::from(
        "### Fairness: ten flows through one bottleneck (the thesis's Fig. 5b, 5c)\n\n\
         Each trial's first half runs ten flows of the system alone, its second five AFC flows \
         beside five of the system (`roam-afc`: ten AFC flows), the bottleneck \
         ⟨2, 4, 4⟩ Mbit/s per 530 ms, reads ⟨0, 6, 6⟩, buffers of 22 KB. The thesis: default \
         flows' mean unchanged by AFC flows; AFC flows' throughputs cluster around their \
         mean.\n\n",
    );
    for sc in &plan.scenarios {
        let _ = writeln!(
            md,
            "{sc}:\n\n| beside AFC | AFC mean (Mbit/s) | others' mean (Mbit/s) | others alone (Mbit/s) | others beside AFC over alone | Jain, AFC flows | Jain, all | all ten (Mbit/s) |\n|---|---|---|---|---|---|---|---|"
        );
        for sys in systems {
            let c = |m: &str| cell(rows, "dumbbell", sc, sys, m).cell();
            let _ = writeln!(
                md,
                "| {sys} | {} | {} | {} | {} | {} | {} | {} |",
                c("afc_mean_mbps"),
                c("other_mean_mbps"),
                c("alone_mean_mbps"),
                c("other_beside_afc_over_alone"),
                c("jain_afc"),
                c("jain_all"),
                c("total_mbps")
            );
        }
        md.push('\n');
    }
    md
}

/// "AFC over X: 2.10x [1.90-2.30x]" for each baseline run in `scenario`, on goodput, and the
/// peak unread of Linux's autotuning over AFC's.
fn advantages(rows: &[Row], app: &str, scenario: &str, systems: &[String]) -> String {
    let afc = "roam-afc";
    if !systems.iter().any(|s| s == afc) {
        return String::new();
    }
    let finished = |v: Vec<(u64, f64)>| -> Vec<(u64, f64)> {
        v.into_iter().filter(|x| x.1.is_finite()).collect()
    };
    let of = |sys: &str, m: &str| finished(by_seed(rows, app, scenario, sys, m));
    let text = |num: &[(u64, f64)], den: &[(u64, f64)]| match ratio_of_means(num, den) {
        Some(r) => match r.interval {
            Some((lo, hi)) => format!("{}x [{}-{}x]", fmt_num(r.ratio), fmt_num(lo), fmt_num(hi)),
            None => format!("{}x", fmt_num(r.ratio)),
        },
        None => "-".into(),
    };
    let mut parts = Vec::new();
    for base in systems.iter().filter(|s| s.as_str() != afc) {
        let (a, b) = (of(afc, "goodput_mbps"), of(base, "goodput_mbps"));
        if !a.is_empty() && !b.is_empty() {
            parts.push(format!("{base} {}", text(&a, &b)));
        }
    }
    let mut out = String::new();
    if !parts.is_empty() {
        let _ = writeln!(
            out,
            "AFC goodput over (ratio of means, 95% interval): {}.",
            parts.join("; ")
        );
    }
    let (auto, mine) = (of("tcp-auto", "peak_unread_kb"), of(afc, "peak_unread_kb"));
    if !auto.is_empty() && !mine.is_empty() {
        let _ = writeln!(
            out,
            "\nAFC peak unread over Linux autotuning's: {} (below 1: AFC held less).",
            text(&mine, &auto)
        );
    }
    out
}
