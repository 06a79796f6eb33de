//! `roam lab in-paper`: reproduce the Intentional Networking evaluation (see `roam_lab`).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use roam_lab::studies::in_paper::{self, Plan, SCENARIOS};
use roam_lab::harness::system::System;
use roam_prefetch::Strategy;

/// Arguments of `roam lab in-paper`.
#[derive(Args, Debug, Clone)]
pub struct InPaperArgs {
    /// Reduced matrix for CI and a first look (a few minutes): short workloads, one trial,
    /// every system at once unless given explicitly (in-paper: the `vehicular` scenario only;
    /// each lab's docs say which cells).
    #[arg(long)]
    quick: bool,
    /// Applications, comma-separated (the lab's own; an unknown name is refused with the
    /// list).
    #[arg(long, value_delimiter = ',')]
    apps: Option<Vec<String>>,
    /// Scenarios, comma-separated (in-paper and imp: hotspot, intermittent, vehicular,
    /// vehicular-umts, or a scenario file FILE.toml), each optionally with changed parameters:
    /// `hotspot+queue=20pkt+rtt=100ms+rate=0.5`.
    #[arg(long, value_delimiter = ',')]
    scenarios: Option<Vec<String>>,
    /// Run every scenario at every value of a parameter: `queue=20pkt,100pkt,1000pkt`,
    /// `rtt=0ms,100ms,300ms` (added round-trip time), `rate=0.5,1,2` (capacity factor).
    /// Repeat for every combination of several.
    #[arg(long)]
    sweep: Vec<String>,
    /// Systems, comma-separated (the lab's own, refused with the list when unknown; in-paper:
    /// roam, mptcp, aggregation, best-latency, best-bandwidth).
    #[arg(long, value_delimiter = ',')]
    systems: Option<Vec<String>>,
    /// Trials per cell (default 5; 1 with --quick).
    #[arg(long)]
    trials: Option<u32>,
    /// Which seeds the trials use: `development` (1, 2, ...: the seeds roam-net was developed
    /// against) or `held-out` (101, 102, ...: never used while developing it; the headline
    /// figures come from these), or the first seed as a number.
    #[arg(long, default_value = "development", value_parser = parse_seeds)]
    seeds: u64,
    /// Workload length for every application, e.g. `90s` (default: the paper's; short with
    /// --quick).
    #[arg(long, value_parser = crate::parse_dur)]
    duration: Option<Duration>,
    /// Trials run at once, each in its own emulator (default 1; with --quick, one per
    /// system). More than one shares the CPU between emulators.
    #[arg(long)]
    jobs: Option<usize>,
    /// Output directory (default: results/LAB, e.g. results/in-paper).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Keep every trial's emulator logs (per-link traffic in 100 ms bins, CSV, and a
    /// summary.json) under this directory, one subdirectory per trial.
    #[arg(long)]
    emu_logs: Option<PathBuf>,
    /// Keep the trials already in OUT/trials.csv and run only the missing or failed ones (a
    /// long run interrupted, or one built up over several invocations). Refused unless
    /// OUT/run.json shows the same code and workload lengths.
    #[arg(long)]
    resume: bool,
    /// Run nothing: rewrite OUT/report.md and the charts from OUT/trials.csv (the report names
    /// the code that measured them, from OUT/run.json). Give the same --apps, --scenarios and
    /// --systems as the run.
    #[arg(long, conflicts_with = "resume")]
    report_only: bool,
}

/// `--seeds`: a set's name, or the first seed.
fn parse_seeds(s: &str) -> Result<u64, String> {
    match s {
        "development" => Ok(in_paper::DEVELOPMENT_SEEDS),
        "held-out" => Ok(in_paper::HELD_OUT_SEEDS),
        n => n.parse::<u64>().ok().filter(|&n| n >= 1).ok_or_else(|| {
            format!("`{n}`: expected `development`, `held-out` or a first seed of 1 or more")
        }),
    }
}

/// What a lab's defaults are: its scenarios and applications, the quick run's, and where it
/// writes.
struct Defaults {
    scenarios: Vec<String>,
    /// The quick run's scenarios (default: `vehicular`).
    quick_scenarios: Option<Vec<String>>,
    apps: Vec<String>,
    quick_apps: Option<Vec<String>>,
    out: &'static str,
}

/// The plan the arguments give, with `systems` and the lab's `defaults`.
fn plan(a: &InPaperArgs, systems: Vec<System>, d: Defaults) -> Result<Plan> {
    let scenarios = a.scenarios.clone().unwrap_or_else(|| {
        if a.quick {
            d.quick_scenarios
                .clone()
                .unwrap_or_else(|| vec!["vehicular".into()])
        } else {
            d.scenarios.clone()
        }
    });
    let apps = match (a.apps.clone(), a.quick, d.quick_apps) {
        (Some(given), _, _) => given,
        (None, true, Some(q)) => q,
        (None, _, _) => d.apps,
    };
    Ok(Plan {
        apps,
        scenarios: roam_lab::harness::sweep::expand(&scenarios, &a.sweep)?,
        jobs: a.jobs.unwrap_or(if a.quick { systems.len() } else { 1 }),
        systems,
        trials: a.trials.unwrap_or(if a.quick { 1 } else { 5 }),
        first_seed: a.seeds,
        quick: a.quick,
        duration: a.duration,
        out: a.out.clone().unwrap_or_else(|| PathBuf::from(d.out)),
        emu_logs: a.emu_logs.clone(),
        resume: a.resume,
        report_only: a.report_only,
    })
}

/// Where the report is, and the exit status: failed trials make the run fail.
fn finish(plan: &Plan, rows: &[roam_lab::report::Row]) -> Result<()> {
    println!(
        "Full report: {}/report.md (every trial: trials.csv; charts: *.svg)",
        plan.out.display()
    );
    let failed = rows.iter().filter(|r| r.metric == "error").count();
    if failed > 0 && !plan.report_only {
        anyhow::bail!("{failed} trial(s) failed (listed at the end of the report)");
    }
    Ok(())
}

/// `roam lab imp`: the IMP thesis's evaluation; the same flags, `--systems` naming strategies
/// (never, size-limit, wifi-only, always, imp).
pub fn imp(a: &InPaperArgs) -> Result<()> {
    let systems = match &a.systems {
        Some(v) => v
            .iter()
            .map(|s| {
                Strategy::parse(s.trim())
                    .map(System::Prefetch)
                    .map_err(anyhow::Error::msg)
            })
            .collect::<Result<Vec<_>>>()?,
        None => roam_lab::studies::imp::systems(),
    };
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let plan = plan(
        a,
        systems,
        Defaults {
            scenarios: names(&roam_lab::studies::imp::SCENARIOS),
            apps: roam_lab::studies::imp::apps()
                .iter()
                .map(|x| x.name.to_string())
                .collect(),
            quick_apps: Some(names(&["mail-energy"])),
            quick_scenarios: None,
            out: "results/imp",
        },
    )?;
    let (md, rows) = roam_lab::studies::imp::imp(&plan)?;
    // The tables, without the chart lines.
    for l in md
        .lines()
        .filter(|l| l.starts_with('|') || l.starts_with("### "))
    {
        println!("{l}");
    }
    finish(&plan, &rows)
}

/// `roam lab meatballs`: the Meatballs thesis's evaluation; the same flags, `--systems` naming
/// rules (cellular-only, wifi-preferred, local-only, remote-preferred, adaptive,
/// meatballs-METHOD-LEVEL). Each application runs as a plan of its own (its rules and
/// scenarios differ), into OUT/APP when there are several; speech trials run one at a time
/// unless `--jobs` says otherwise, since their CPU shares stand for a phone and a server.
pub fn meatballs(a: &InPaperArgs) -> Result<()> {
    use roam_lab::studies::meatballs::{self, APP, LOAD_SCENARIO, SPEECH_APPS};
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let apps = match (&a.apps, a.quick) {
        (Some(given), _) => given.clone(),
        (None, true) => names(&[APP]),
        (None, false) => names(&[APP, SPEECH_APPS[0], SPEECH_APPS[1]]),
    };
    let base = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("results/meatballs"));
    let mut all_rows = Vec::new();
    let mut last = None;
    for app in &apps {
        let systems = match &a.systems {
            Some(v) => v
                .iter()
                .map(|s| {
                    roam_lab::studies::meatballs::selection::Selection::parse(s.trim())
                        .map(System::Select)
                        .map_err(anyhow::Error::msg)
                })
                .collect::<Result<Vec<_>>>()?,
            None if a.quick && app == APP => meatballs::quick_systems(),
            None => meatballs::systems_for(app),
        };
        let speech = SPEECH_APPS.contains(&app.as_str());
        let (scenarios, quick_scenarios) = if app == SPEECH_APPS[1] {
            (names(&[LOAD_SCENARIO]), names(&[LOAD_SCENARIO]))
        } else {
            (names(&meatballs::SCENARIOS), names(&["walking-campus"]))
        };
        let mut args = a.clone();
        if apps.len() > 1 {
            args.out = Some(base.join(app));
        }
        if speech && args.jobs.is_none() {
            args.jobs = Some(1);
        }
        let plan = plan(
            &args,
            systems,
            Defaults {
                scenarios,
                quick_scenarios: Some(quick_scenarios),
                apps: vec![app.clone()],
                quick_apps: None,
                out: "results/meatballs",
            },
        )?;
        let (md, rows) = meatballs::meatballs(&plan)?;
        for l in md
            .lines()
            .filter(|l| l.starts_with('|') || l.starts_with("### ") || l.starts_with("#### "))
        {
            println!("{l}");
        }
        if apps.len() > 1 {
            println!(
                "Full report: {}/report.md (every trial: trials.csv; charts: *.svg)",
                plan.out.display()
            );
        }
        all_rows.extend(rows);
        last = Some(plan);
    }
    match last {
        Some(plan) => finish(&plan, &all_rows),
        None => anyhow::bail!("no application to run"),
    }
}

/// Arguments of `roam lab fasthla`: those of `roam lab in-paper`, and where the sweep's trials
/// may come from.
#[derive(clap::Args, Debug)]
pub struct FasthlaArgs {
    #[command(flatten)]
    pub common: InPaperArgs,
    /// Learn from the sweep trials of another run's sweep directory (`OUT/sweep` of an earlier
    /// run, whose `run.json` names the code that measured them, as the report does) instead of
    /// running the sweep: a comparison with changed lab code reuses a sweep that took hours.
    /// With `--report-only`, the sweep such a run learnt from.
    #[arg(long, value_name = "DIR")]
    pub sweep_from: Option<std::path::PathBuf>,
}

/// `roam lab fasthla`: sweeps, learning, and FastHLA against today's tools; `--systems`
/// names the compared ones (fasthla, wget, curl, nghttp, nghttp-16m, aria2, or a sweep point
/// fixed-ccN-pN-bsNk), `--apps` the datasets (html, image, video, mixed). With --quick: html
/// and image, small, on one network, a 4-point sweep.
pub fn fasthla(f: &FasthlaArgs) -> Result<()> {
    use roam_lab::studies::fasthla::bulk::Tool;
    let a = &f.common;
    use roam_lab::studies::fasthla;
    let systems = match &a.systems {
        Some(v) => v
            .iter()
            .map(|s| {
                Tool::parse(s.trim()).map(System::Transfer).ok_or_else(|| {
                    anyhow::anyhow!(
                        "unknown system `{s}` (expected fasthla, wget, curl, nghttp, nghttp-16m, aria2 \
                         or fixed-ccN-pN-bsNk)"
                    )
                })
            })
            .collect::<Result<Vec<_>>>()?,
        None => fasthla::systems(),
    };
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut plan = plan(
        a,
        systems,
        Defaults {
            scenarios: names(&fasthla::SCENARIOS),
            quick_scenarios: Some(names(&[fasthla::QUICK_SCENARIO])),
            apps: names(&["html", "image", "video", "mixed"]),
            quick_apps: Some(names(&["html", "image"])),
            out: "results/fasthla",
        },
    )?;
    if a.jobs.is_none() {
        // Bulk transfers fill their link: a few at once share the two cores fairly.
        plan.jobs = if a.quick { 4 } else { 2 };
    }
    let (md, rows) = fasthla::fasthla(&plan, f.sweep_from.as_deref())?;
    for l in md
        .lines()
        .filter(|l| l.starts_with("### ") || l.starts_with("FastHLA "))
    {
        println!("{l}");
    }
    finish(&plan, &rows)
}

/// Run it; print the report's headline table.
pub fn in_paper(a: &InPaperArgs) -> Result<()> {
    let systems = match &a.systems {
        Some(v) => v
            .iter()
            .map(|s| System::parse(s.trim()))
            .collect::<Result<Vec<_>>>()?,
        None => System::ALL.to_vec(),
    };
    let plan = plan(
        a,
        systems,
        Defaults {
            scenarios: SCENARIOS.iter().map(|s| s.to_string()).collect(),
            apps: in_paper::apps().iter().map(|x| x.name.to_string()).collect(),
            quick_apps: None,
            quick_scenarios: None,
            out: "results/in-paper",
        },
    )?;
    let (_, rows) = in_paper::in_paper(&plan)?;
    for s in &plan.scenarios {
        println!("{}", in_paper::headline(&rows, s));
    }
    finish(&plan, &rows)
}

/// `roam lab horatio`: Horatio's evaluation; the same flags, `--systems` naming paths
/// (isr-1mbit, isr-10mbit, phone-wifi, phone-usb, sd-usb; clean-wifi, clean-3g) and `--apps`
/// dirty states (dirty-1mb ... dirty-500mb), workloads (email, word, photo, shop, podcast,
/// video) and self-cleaning amounts (clean-1mb, clean-10mb, clean-100mb).
pub fn horatio(a: &InPaperArgs) -> Result<()> {
    use roam_lab::studies::horatio::{self, Path, CLEAN_APPS, DIRTY_APPS, WORKLOADS};
    let paths = match &a.systems {
        Some(v) => v
            .iter()
            .map(|s| {
                Path::parse(s.trim()).ok_or_else(|| {
                    anyhow::anyhow!(
                        "unknown system `{s}` (expected isr-1mbit, isr-10mbit, phone-wifi, phone-usb, \
                         sd-usb, clean-wifi, clean-3g or clean-roam)"
                    )
                })
            })
            .collect::<Result<Vec<_>>>()?,
        None if a.quick => vec![Path::Isr10, Path::PhoneUsb, Path::CleanWifi],
        None => Path::SUSPEND.into_iter().chain(Path::CLEAN).collect(),
    };
    let all_apps: Vec<String> = DIRTY_APPS
        .iter()
        .copied()
        .chain(WORKLOADS.iter().map(|w| w.0))
        .chain(CLEAN_APPS)
        .map(str::to_string)
        .collect();
    let mut plan = plan(
        a,
        Vec::new(),
        Defaults {
            scenarios: vec!["horatio".into()],
            quick_scenarios: Some(vec!["horatio".into()]),
            apps: all_apps,
            quick_apps: Some(vec![
                "dirty-1mb".into(),
                "dirty-10mb".into(),
                "clean-1mb".into(),
            ]),
            out: "results/horatio",
        },
    )?;
    let (clean_apps, apps): (Vec<String>, Vec<String>) = plan
        .apps
        .iter()
        .cloned()
        .partition(|x| x.starts_with("clean-"));
    let (clean_paths, paths): (Vec<Path>, Vec<Path>) =
        paths.into_iter().partition(|p| Path::CLEAN.contains(p));
    plan.apps = apps;
    plan.systems = paths.into_iter().map(System::Parcel).collect();
    let clean_systems: Vec<System> = clean_paths.into_iter().map(System::Parcel).collect();
    if a.jobs.is_none() {
        // Each trial's transfer fills its link and its tiers seal and check chunks: one at a
        // time, so that trials do not take CPU from each other.
        plan.jobs = 1;
    }
    let (md, rows) = horatio::horatio(&plan, &clean_apps, &clean_systems)?;
    for l in md
        .lines()
        .filter(|l| l.starts_with("## ") || l.starts_with("- "))
    {
        println!("{l}");
    }
    finish(&plan, &rows)
}
