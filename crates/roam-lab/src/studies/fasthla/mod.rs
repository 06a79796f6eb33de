//! `roam lab fasthla`: FastHLA's evaluation (the FastHLA paper, ../shared/spec/fasthla.md) on the
//! emulator, in three steps, every trial a real nginx and a real client ([`crate::studies::fasthla::bulk`]):
//!
//! 1. **Sweeps** (`OUT/sweep/`): each dataset on each network with FastHLA's engine at fixed
//!    concurrency, parallelism and block size ([`sweep_grid`]), on the development seeds: the
//!    logs FastHLA learns from.
//! 2. **Learning** (`OUT/update.json`): the HLA server's analysis of those logs (outliers,
//!    clusters, spline surfaces, the parameters of most throughput per joule, a network model),
//!    and each learner's cross-validated accuracy.
//! 3. **Comparison** (`OUT/compare/`): FastHLA with what it learnt against wget and curl
//!    (HTTP/1.1), nghttp (HTTP/2) and aria2 with their usual settings, on the plan's seeds (held-out
//!    for the headline figures), `--trials` each.
//!
//! Networks: `wifi-bulk` (100 Mbit/s) and `lte-bulk` (the AT&T LTE driving trace), both with
//! 0.01% loss, at the paper's server RTTs of 59, 115 and 290 ms (`+rtt=`). Energy is modelled
//! (see [`crate::studies::fasthla::bulk`]).

pub mod bulk;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use roam_transfer::hla::Record;
use roam_transfer::model::{accuracy, training_set, Kind};
use roam_transfer::{server, Params, Protocol};

use crate::harness::charts::charts;
use crate::harness::matrix;
use crate::harness::plan::DEVELOPMENT_SEEDS;
use crate::harness::plan::{App, Plan};
use crate::harness::results::note_parts;
use crate::harness::results::read_run;
use crate::harness::results::written_by;
use crate::harness::results::NoteParts;
use crate::harness::seeds::seeds_line;
use crate::harness::study::{report_lines, Defaults, Request, Study};
use crate::harness::system::System;
use crate::report::compare::cell;
use crate::report::Row;
use bulk::{Dataset, Tool};

/// The networks: each bulk scenario at the paper's three server RTTs.
pub const SCENARIOS: [&str; 6] = [
    "wifi-bulk+rtt=59ms",
    "wifi-bulk+rtt=115ms",
    "wifi-bulk+rtt=290ms",
    "lte-bulk+rtt=59ms",
    "lte-bulk+rtt=115ms",
    "lte-bulk+rtt=290ms",
];

/// The quick run's network.
pub const QUICK_SCENARIO: &str = "wifi-bulk+rtt=115ms";

/// A trial of at most this long a workload moves the small datasets ([`Dataset::sizes`]).
const QUICK_WORKLOAD: Duration = Duration::from_secs(180);

/// An application's trial.
type RunFn = fn(&crate::harness::trial::Trial) -> Result<Vec<crate::harness::trial::Metric>>;

fn run_dataset(
    t: &crate::harness::trial::Trial,
    d: Dataset,
) -> Result<Vec<crate::harness::trial::Metric>> {
    bulk::run(t, d, t.duration <= QUICK_WORKLOAD)
}

/// The applications: one per dataset.
pub fn apps() -> Vec<App> {
    fn html(t: &crate::harness::trial::Trial) -> Result<Vec<crate::harness::trial::Metric>> {
        run_dataset(t, Dataset::Html)
    }
    fn image(t: &crate::harness::trial::Trial) -> Result<Vec<crate::harness::trial::Metric>> {
        run_dataset(t, Dataset::Image)
    }
    fn video(t: &crate::harness::trial::Trial) -> Result<Vec<crate::harness::trial::Metric>> {
        run_dataset(t, Dataset::Video)
    }
    fn mixed(t: &crate::harness::trial::Trial) -> Result<Vec<crate::harness::trial::Metric>> {
        run_dataset(t, Dataset::Mixed)
    }
    let runs: [RunFn; 4] = [html, image, video, mixed];
    Dataset::ALL
        .iter()
        .zip(runs)
        .map(|(d, run)| App {
            name: d.name(),
            run,
            full: Duration::from_secs(900),
            quick: Duration::from_secs(120),
            interactive: ("seconds", "transfer time (s)"),
            background: (
                "energy_j_per_100mb",
                "energy per 100 MB, modelled (J)",
                false,
            ),
            event: ("seconds", "transfer time (s)"),
            needs: &[
                crate::harness::setup::NGINX,
                crate::harness::setup::WGET,
                crate::harness::setup::CURL,
                crate::harness::setup::NGHTTP,
                crate::harness::setup::ARIA2,
            ],
            interactive_floor: None,
            stagger: None,
        })
        .collect()
}

/// The sweep's parameter points: every concurrency and parallelism at 64 KiB reads, the block
/// sizes at a few of them (the seed varied bs apart from the cc × p surface), and HTTP/2 (all
/// streams on one connection; beyond the seed) at a few concurrencies and parallelisms.
pub fn sweep_grid(quick: bool) -> Vec<Params> {
    let mut v = Vec::new();
    let (ccs, ps): (&[u32], &[u32]) = if quick {
        (&[1, 8], &[1, 2])
    } else {
        (&[1, 2, 4, 8, 16, 32], &[1, 2, 4, 8])
    };
    for &cc in ccs {
        for &p in ps {
            v.push(Params {
                cc,
                p,
                bs: 64 * 1024,
                ..Params::default()
            });
        }
    }
    if !quick {
        for bs in [1024, 8 * 1024] {
            for cc in [1, 8, 32] {
                v.push(Params {
                    cc,
                    p: 1,
                    bs,
                    ..Params::default()
                });
            }
        }
    }
    // Streams of one connection are cheap where connections are not: HTTP/2 goes on to 128
    // at once (nginx's default limit of concurrent streams; browsers open about as many).
    let (ccs, ps): (&[u32], &[u32]) = if quick {
        (&[32], &[1])
    } else {
        (&[1, 8, 32, 128], &[1, 4])
    };
    for &cc in ccs {
        for &p in ps {
            v.push(Params {
                cc,
                p,
                bs: 64 * 1024,
                protocol: Protocol::Http2,
            });
        }
    }
    v
}

/// The systems compared: FastHLA and the tools of today.
pub fn systems() -> Vec<System> {
    [Tool::FastHla]
        .into_iter()
        .chain(Tool::BASELINES)
        .map(System::new)
        .collect()
}

/// The sweep's trials as the HLA server's records. The network's bandwidth in each record's
/// condition is the scenario's, as [`bulk::condition_on`] defines it now (rows record the one
/// of the binary that ran them, which may have used another window); a scenario that cannot
/// be built keeps the rows' own.
pub fn records(rows: &[Row]) -> Vec<Record> {
    use std::collections::BTreeMap;
    let mut by: BTreeMap<(&str, &str, &str, u32), BTreeMap<&str, f64>> = BTreeMap::new();
    for r in rows {
        by.entry((&r.app, &r.scenario, &r.system, r.trial))
            .or_default()
            .insert(&r.metric, r.value);
    }
    // Each scenario built once (the LTE trace is a third of a million lines).
    let mut bandwidths: BTreeMap<&str, Option<f64>> = BTreeMap::new();
    for (_, scenario, _, _) in by.keys() {
        bandwidths.entry(scenario).or_insert_with(|| {
            let (sc, _) = crate::harness::sweep::scenario(scenario, 1).ok()?;
            Some(bulk::condition_on(&sc.links.first()?.trace, 0.0).bandwidth_mbps)
        });
    }
    by.into_iter()
        .filter_map(|((_, scenario, system, _), m)| {
            let Some(Tool::Fixed(params)) = Tool::parse(system) else {
                return None;
            };
            let get = |k: &str| m.get(k).copied();
            let bandwidth = bandwidths[scenario].or(get("bandwidth_mbps"))?;
            Some(Record {
                rtt_ms: get("rtt_ms")?,
                bandwidth_mbps: bandwidth,
                mean_file_bytes: get("mean_file_bytes")?,
                params,
                throughput_mbps: get("throughput_mbps").unwrap_or(f64::NAN),
                energy_j_per_100mb: get("energy_j_per_100mb").unwrap_or(f64::NAN),
                ok: !m.contains_key("error") && get("throughput_mbps").is_some_and(f64::is_finite),
                context: Default::default(),
            })
        })
        .collect()
}

/// The paper's figure for a dataset, for the report.
fn paper_figure_of(app: &str) -> &'static str {
    match app {
        "html" => "cc 1 -> 16: 2.6 -> 42 Mbit/s (16.7x), -70% energy; 10x throughput and 5x less energy than HTTP/2",
        "image" => "cc 1 -> 16: 5.6 -> 48 Mbit/s (8.5x), -68% energy; 2x throughput than HTTP/2",
        "video" => "cc 1 -> 16: 13 -> 61 Mbit/s (4.5x), -38% energy; parallelism 3.1x, -45%; 4x throughput and 2x less energy than HTTP/2",
        _ => "4x throughput than HTTP/2",
    }
}

/// `roam lab fasthla`: sweeps, learning, and FastHLA against today's tools. With `--quick`:
/// html and image, small, on one network, a 4-point sweep.
pub struct FastHla;

impl Study for FastHla {
    fn name(&self) -> &'static str {
        "fasthla"
    }

    fn paper(&self) -> &'static str {
        "FastHLA (Arifuzzaman and Arslan): tuned concurrency, parallelism and block size from \
         historical logs, against wget, curl, nghttp and aria2"
    }

    fn defaults(&self) -> Defaults {
        Defaults {
            scenarios: SCENARIOS.map(String::from).to_vec(),
            quick_scenarios: vec![QUICK_SCENARIO.into()],
            apps: ["html", "image", "video", "mixed"]
                .map(String::from)
                .to_vec(),
            quick_apps: ["html", "image"].map(String::from).to_vec(),
            // Bulk transfers fill their link: a few at once share the two cores fairly.
            jobs: 2,
            quick_jobs: Some(4),
            out: "results/fasthla",
        }
    }

    fn apps(&self) -> Vec<App> {
        apps()
    }

    fn system(&self, name: &str) -> Result<System> {
        Tool::parse(name).map(System::new).ok_or_else(|| {
            anyhow::anyhow!(
                "unknown system `{name}` (expected fasthla, wget, curl, nghttp, nghttp-16m, \
                 aria2 or fixed-ccN-pN-bsNk)"
            )
        })
    }

    fn systems(&self, _quick: bool) -> Vec<System> {
        systems()
    }

    fn paper_figure(&self, app: &str, _scenario: &str, _system: &str) -> Option<String> {
        Some(paper_figure_of(app).to_string())
    }

    fn learns_from_sweeps(&self) -> bool {
        true
    }

    fn measure(&self, plan: &Plan, request: &Request) -> Result<(String, Vec<Row>)> {
        fasthla(plan, request.sweep_from.as_deref())
    }

    fn summary(&self, _plan: &Plan, report: &str, _rows: &[Row]) -> String {
        report_lines(report, |l| {
            l.starts_with("### ") || l.starts_with("FastHLA ")
        })
    }
}

/// Run the three steps (or read them back with `--report-only`); the report and the
/// comparison's rows. With `sweep_from`, the sweep is not run: its trials are another run's
/// (`DIR/trials.csv`, measured by the code its `run.json` names, which the report says), those
/// of the plan's datasets and networks.
pub fn fasthla(plan: &Plan, sweep_from: Option<&std::path::Path>) -> Result<(String, Vec<Row>)> {
    let all = apps();
    std::fs::create_dir_all(&plan.out)
        .with_context(|| format!("creating {}", plan.out.display()))?;
    let sweep = Plan {
        apps: plan.apps.clone(),
        scenarios: plan.scenarios.clone(),
        systems: sweep_grid(plan.quick)
            .into_iter()
            .map(|p| System::new(Tool::Fixed(p)))
            .collect(),
        trials: 1,
        first_seed: DEVELOPMENT_SEEDS,
        quick: plan.quick,
        duration: plan.duration,
        jobs: plan.jobs,
        out: plan.out.join("sweep"),
        emu_logs: None,
        resume: plan.resume,
        report_only: plan.report_only,
        shard: plan.shard,
    };
    let (sweep_rows, sweep_source) = match sweep_from {
        None if plan.report_only && !sweep.out.exists() => bail!(
            "--report-only: {} has no sweep/: a run that learnt from another run's sweep \
             (--sweep-from) needs the same --sweep-from DIR to be read back",
            plan.out.display()
        ),
        None => {
            eprintln!("1/3 sweeps: {} parameter points", sweep.systems.len());
            (matrix::measure(&sweep, &all)?.rows, "`sweep/`".to_string())
        }
        Some(dir) => {
            let (by, rows) = read_run(dir, "--sweep-from")?;
            let rows: Vec<Row> = rows
                .into_iter()
                .filter(|r| plan.apps.contains(&r.app) && plan.scenarios.contains(&r.scenario))
                .collect();
            let have: std::collections::HashSet<(&str, &str, &str)> = rows
                .iter()
                .map(|r| (r.app.as_str(), r.scenario.as_str(), r.system.as_str()))
                .collect();
            let lacking = plan
                .apps
                .iter()
                .flat_map(|a| plan.scenarios.iter().map(move |sc| (a, sc)))
                .flat_map(|(a, sc)| sweep.systems.iter().map(move |p| (a, sc, p.name())))
                .filter(|(a, sc, p)| !have.contains(&(a.as_str(), sc.as_str(), p)))
                .count();
            eprintln!(
                "1/3 sweeps: {} trial(s) from {} ({by}){}",
                have.len(),
                dir.display(),
                if lacking > 0 {
                    format!("; {lacking} of the plan's sweep points are not there")
                } else {
                    String::new()
                }
            );
            (rows, format!("{} ({by})", dir.display()))
        }
    };
    let recs = records(&sweep_rows);
    let update = server::learn(&recs, Kind::Network)?;
    std::fs::write(
        plan.out.join("update.json"),
        serde_json::to_string(&update)?,
    )?;
    let (kept, dropped) = roam_transfer::hla::clean(&recs);
    let set = training_set(&kept, roam_transfer::hla::CLUSTER_DISTANCE);
    let acc: Vec<(Kind, Option<f64>)> = Kind::ALL
        .into_iter()
        .map(|k| (k, accuracy(k, &set, 5, 1)))
        .collect();
    eprintln!(
        "2/3 learnt from {} sweep trial(s) ({dropped} outliers): {} cluster(s)",
        recs.len(),
        update.table.entries.len()
    );
    bulk::set_learnt(update.clone());
    let compare = Plan {
        out: plan.out.join("compare"),
        apps: plan.apps.clone(),
        scenarios: plan.scenarios.clone(),
        systems: plan.systems.clone(),
        emu_logs: plan.emu_logs.clone(),
        ..*plan
    };
    eprintln!("3/3 comparison");
    let m = matrix::measure(&compare, &all)?;
    charts(&compare, &all, &m)?;
    let md = markdown(
        plan,
        &m.rows,
        &sweep_rows,
        &sweep_source,
        &m.notes,
        &m.version,
        &acc,
        &update,
    );
    std::fs::write(plan.out.join("report.md"), &md)?;
    Ok((md, m.rows))
}

/// The comparison's report: what measured it and how ([`report_head`]), what FastHLA learnt
/// ([`learnt_line`]), the table at a glance (full runs, [`at_a_glance`]), then per dataset its
/// charts and per network its section ([`network_section`]), and the trials' other notes.
#[allow(clippy::too_many_arguments)]
fn markdown(
    plan: &Plan,
    rows: &[Row],
    sweep: &[Row],
    sweep_source: &str,
    notes: &[String],
    version: &str,
    acc: &[(Kind, Option<f64>)],
    update: &roam_transfer::broker::Update,
) -> String {
    let mut s = String::new();
    report_head(&mut s, plan, rows, version);
    learnt_line(&mut s, sweep, sweep_source, acc, update);
    if !plan.quick {
        s.push_str(&at_a_glance(plan, rows));
    }
    let (choices, notes) = split_choices(notes);
    for app in &plan.apps {
        let _ = writeln!(
            s,
            "## {app}\n\n![time](compare/{app}-interactive.svg) ![energy](compare/{app}-background.svg)\n\nThe seed: {}.\n",
            paper_figure_of(app)
        );
        for sc in &plan.scenarios {
            network_section(&mut s, plan, rows, sweep, &choices, app, sc);
        }
    }
    if !notes.is_empty() {
        let _ = writeln!(s, "## Notes on trials\n");
        for n in &notes {
            let _ = writeln!(s, "- {n}");
        }
    }
    s
}

/// The report's title and first paragraphs: the code that measured it (`version`), the
/// trials per cell, how to read a cell and what is modelled, and the seeds of `rows`.
fn report_head(s: &mut String, plan: &Plan, rows: &[Row], version: &str) {
    let _ = writeln!(
        s,
        "# roam lab fasthla: bulk transfers with tuned concurrency, parallelism and block size\n\n\
         Measured with roam `{version}`{}. {}{}. Every system fetches the same \
         files from the same nginx over the same emulated link; only the client differs. Cells: \
         the mean with its 95% confidence interval (Student's t, or a percentile bootstrap marked so where the trials are skewed), then the median. Energy per \
         100 MB is **modelled** (roam-budget's huang2012 WiFi and LTE radio profiles driven by \
         the bytes and the transfer time; the CPU not counted).\n",
        written_by(version),
        crate::report::trials_per_cell(plan.trials, rows),
        if plan.quick {
            ", **quick** (small datasets, one network: not comparable with the seed)"
        } else {
            ""
        },
    );
    let _ = writeln!(s, "{}\n", seeds_line("fasthla", rows));
}

/// What FastHLA learnt from: the `sweep` (from `sweep_source`), the clusters of the `update`,
/// and each learner's cross-validated accuracy (`acc`) beside the paper's.
fn learnt_line(
    s: &mut String,
    sweep: &[Row],
    sweep_source: &str,
    acc: &[(Kind, Option<f64>)],
    update: &roam_transfer::broker::Update,
) {
    let _ = writeln!(
        s,
        "FastHLA learnt from {} sweep trial(s) on the development seeds ({sweep_source}): {} \
         cluster(s) of conditions. Cross-validated accuracy (5 folds) of the learners on the \
         optimiser's choices: {} (the seed: network 94%, SVM 92%, nearest neighbours 86%).\n",
        records(sweep).len(),
        update.table.entries.len(),
        acc.iter()
            .map(|(k, a)| match a {
                Some(a) => format!("{} {:.0}%", k.name(), a * 100.0),
                None => format!("{} (too few samples)", k.name()),
            })
            .collect::<Vec<_>>()
            .join(", ")
    );
}

/// `app` on network `sc`: every system's cells, FastHLA against the baselines
/// ([`fasthla_against`]), its choices over the trials (from `choices`), and the sweep there
/// ([`sweep_reads`]).
fn network_section(
    s: &mut String,
    plan: &Plan,
    rows: &[Row],
    sweep: &[Row],
    choices: &Choices,
    app: &str,
    sc: &str,
) {
    let _ = writeln!(
        s,
        "### {app} on `{sc}`\n\n| system | throughput (Mbit/s) | energy per 100 MB (J, modelled) | time (s) |\n|---|---:|---:|---:|"
    );
    for sys in &plan.systems {
        let n = sys.name();
        let _ = writeln!(
            s,
            "| {n} | {} | {} | {} |",
            cell(rows, app, sc, n, "throughput_mbps").cell(),
            cell(rows, app, sc, n, "energy_j_per_100mb").cell(),
            cell(rows, app, sc, n, "seconds").cell()
        );
    }
    fasthla_against(s, rows, app, sc);
    if let Some(c) = choices.get(&(app.to_string(), sc.to_string())) {
        let _ = writeln!(s, "\nFastHLA's choice (trials): {}.", tally(c));
    }
    sweep_reads(s, plan, sweep, app, sc);
}

/// FastHLA's throughput over the best baseline's on `app` over `sc`, and its throughput and
/// energy against HTTP/2's (nghttp with its own windows and with 16 MiB ones); nothing where
/// FastHLA or every baseline has no finished trial.
fn fasthla_against(s: &mut String, rows: &[Row], app: &str, sc: &str) {
    let fast = cell(rows, app, sc, "fasthla", "throughput_mbps").value();
    let fast_e = cell(rows, app, sc, "fasthla", "energy_j_per_100mb").value();
    let best = best_baseline(rows, app, sc);
    let h2 = cell(rows, app, sc, "nghttp", "throughput_mbps").value();
    let h2_e = cell(rows, app, sc, "nghttp", "energy_j_per_100mb").value();
    let wide = cell(rows, app, sc, "nghttp-16m", "throughput_mbps").value();
    let wide_e = cell(rows, app, sc, "nghttp-16m", "energy_j_per_100mb").value();
    if let (true, Some((b, bv))) = (fast.is_finite(), best) {
        // Against a baseline that did not finish there is no ratio to give.
        let vs = |t: f64, e: f64| {
            if t.is_finite() && e.is_finite() {
                format!(
                    "{:.2}x the throughput, {:.2}x less energy",
                    fast / t,
                    e / fast_e
                )
            } else {
                "it did not finish".to_string()
            }
        };
        let _ = writeln!(
            s,
            "\nFastHLA {:.2}x the best baseline's throughput ({b}); against HTTP/2 \
             (nghttp's own 64 KiB windows): {}; with 16 MiB windows: {}.",
            fast / bv,
            vs(h2, h2_e),
            vs(wide, wide_e),
        );
    }
}

/// The sweep's surface at 64 KiB on `app` over `sc`: its charts ([`sweep_charts`]) and a
/// table of throughput and energy by concurrency (rows, HTTP/2's apart) and parallelism
/// (columns), "-" where the grid has no such point.
fn sweep_reads(s: &mut String, plan: &Plan, sweep: &[Row], app: &str, sc: &str) {
    // The sweep's surface at 64 KiB: throughput by concurrency and parallelism.
    let grid: Vec<Params> = sweep_grid(plan.quick)
        .into_iter()
        .filter(|p| p.bs == 64 * 1024)
        .collect();
    let mut ps: Vec<u32> = grid.iter().map(|p| p.p).collect();
    ps.sort_unstable();
    ps.dedup();
    let figs = sweep_charts(plan, sweep, app, sc, &grid);
    let _ = writeln!(
        s,
        "\n{figs}\n\nThe sweep at 64 KiB reads: throughput (Mbit/s) / energy per 100 MB (J) by concurrency (rows; HTTP/2: every stream on one connection) and parallelism (columns).\n\n| cc | {} |\n|---|{}",
        ps.iter().map(|p| format!("p {p}")).collect::<Vec<_>>().join(" | "),
        "---:|".repeat(ps.len())
    );
    let mut rows: Vec<(Protocol, u32)> = grid.iter().map(|p| (p.protocol, p.cc)).collect();
    rows.sort_unstable();
    rows.dedup();
    for (protocol, cc) in rows {
        let cells: Vec<String> = ps
            .iter()
            .map(|&p| {
                let point = Params {
                    cc,
                    p,
                    bs: 64 * 1024,
                    protocol,
                };
                if !grid.contains(&point) {
                    return "-".to_string();
                }
                let name = Tool::Fixed(point).name();
                let t = cell(sweep, app, sc, name, "throughput_mbps").value();
                let e = cell(sweep, app, sc, name, "energy_j_per_100mb").value();
                format!("{t:.1} / {e:.0}")
            })
            .collect();
        let h2 = if protocol == Protocol::Http2 {
            " HTTP/2"
        } else {
            ""
        };
        let _ = writeln!(s, "| {cc}{h2} | {} |", cells.join(" | "));
    }
    let _ = writeln!(s);
}

/// FastHLA's choices by (dataset, network): each trial's as one string.
type Choices = HashMap<(String, String), Vec<String>>;

/// FastHLA's choices (`bulk::CHOSE` notes) per dataset and network, each trial's as one
/// string, and the other notes (a FastHLA trial's other words kept under its name).
fn split_choices(notes: &[String]) -> (Choices, Vec<String>) {
    let mut choices = Choices::new();
    let mut rest = Vec::new();
    for n in notes {
        let Some(NoteParts {
            app,
            scenario: sc,
            name,
            text,
            ..
        }) = note_parts(n)
        else {
            rest.push(n.clone());
            continue;
        };
        let (chose, said): (Vec<&str>, Vec<&str>) =
            text.split("; ").partition(|t| t.starts_with(bulk::CHOSE));
        if !chose.is_empty() {
            let chose: Vec<&str> = chose
                .iter()
                .map(|c| c.trim_start_matches(bulk::CHOSE))
                .collect();
            choices
                .entry((app.to_string(), sc.to_string()))
                .or_default()
                .push(chose.join("; "));
        }
        if !said.is_empty() {
            rest.push(format!("{name}: {}", said.join("; ")));
        }
    }
    (choices, rest)
}

/// Distinct values with how many times each came, the most frequent first: `a (3); b (2)`.
fn tally(v: &[String]) -> String {
    let mut counts: Vec<(&String, usize)> = Vec::new();
    for x in v {
        match counts.iter_mut().find(|(y, _)| *y == x) {
            Some((_, k)) => *k += 1,
            None => counts.push((x, 1)),
        }
    }
    counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    counts
        .iter()
        .map(|(x, k)| format!("{x} ({k})"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The baseline with the highest mean throughput on `app` over `sc` and that throughput (none
/// if no baseline finished there).
fn best_baseline(rows: &[Row], app: &str, sc: &str) -> Option<(&'static str, f64)> {
    Tool::BASELINES
        .iter()
        .map(|t| {
            (
                t.name(),
                cell(rows, app, sc, t.name(), "throughput_mbps").value(),
            )
        })
        .filter(|x| x.1.is_finite())
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// One table of every dataset on every network: FastHLA's mean throughput over the best
/// baseline's, and over HTTP/2's (nghttp with its own windows, the paper's comparison).
fn at_a_glance(plan: &Plan, rows: &[Row]) -> String {
    let mut s = String::from(
        "## At a glance\n\nFastHLA's mean throughput over the best baseline's (named) and over \
         HTTP/2's (nghttp with its own 64 KiB windows; the seed: up to 10x); \"-\" where \
         FastHLA or every baseline has no finished trial.\n\n| dataset |",
    );
    for sc in &plan.scenarios {
        let _ = write!(s, " `{sc}` |");
    }
    let _ = write!(s, "\n|---|{}\n", "---|".repeat(plan.scenarios.len()));
    for app in &plan.apps {
        let _ = write!(s, "| {app} |");
        for sc in &plan.scenarios {
            let fast = cell(rows, app, sc, "fasthla", "throughput_mbps").value();
            let h2 = cell(rows, app, sc, "nghttp", "throughput_mbps").value();
            let text = match best_baseline(rows, app, sc) {
                Some((b, bv)) if fast.is_finite() => {
                    let over_h2 = if h2.is_finite() {
                        format!("; {:.1}x HTTP/2", fast / h2)
                    } else {
                        String::new()
                    };
                    format!("{:.2}x {b}{over_h2}", fast / bv)
                }
                _ => "-".to_string(),
            };
            let _ = write!(s, " {text} |");
        }
        s.push('\n');
    }
    s.push('\n');
    s
}

/// The sweep's throughput and energy against concurrency (groups) and parallelism (series;
/// HTTP/2's points a series of their own), the paper's figure shapes, as two SVG charts in the
/// plan's directory; the markdown that shows them (empty if they could not be written).
fn sweep_charts(plan: &Plan, sweep: &[Row], app: &str, sc: &str, grid: &[Params]) -> String {
    let mut points = grid.to_vec();
    points.sort_by_key(|p| (p.cc, p.protocol, p.p));
    let stem: String = format!("sweep-{app}-{sc}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut md = Vec::new();
    for (metric, label, file) in [
        ("throughput_mbps", "throughput (Mbit/s)", "throughput"),
        (
            "energy_j_per_100mb",
            "energy per 100 MB, modelled (J)",
            "energy",
        ),
    ] {
        let mut bars = Vec::new();
        for point in &points {
            let name = Tool::Fixed(*point).name();
            let v = cell(sweep, app, sc, name, metric).value();
            if v.is_finite() {
                let h2 = if point.protocol == Protocol::Http2 {
                    " HTTP/2"
                } else {
                    ""
                };
                bars.push(crate::report::chart::Bar {
                    group: format!("cc {}", point.cc),
                    series: format!("p {}{h2}", point.p),
                    value: v,
                    whisker: None,
                    note: String::new(),
                    points: Vec::new(),
                });
            }
        }
        if bars.is_empty() {
            continue;
        }
        let title = format!("{app} on {sc}: the sweep at 64 KiB reads\none trial per point");
        let path = plan.out.join(format!("{stem}-{file}.svg"));
        if std::fs::write(&path, crate::report::chart::bar_chart(&title, label, &bars)).is_ok() {
            md.push(format!("![{file}]({stem}-{file}.svg)"));
        }
    }
    md.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sweep trial's metrics: pages over a 100 Mbit/s, 59 ms network at 40 Mbit/s.
    const SWEEP_POINT: [(&str, f64); 5] = [
        ("rtt_ms", 59.0),
        ("bandwidth_mbps", 100.0),
        ("mean_file_bytes", 112e3),
        ("throughput_mbps", 40.0),
        ("energy_j_per_100mb", 12.0),
    ];

    #[test]
    fn the_glance_table_gives_fasthla_over_the_best_baseline_per_dataset_and_network() {
        let row = |app: &str, sc: &str, system: &str, value: f64| Row {
            app: app.into(),
            scenario: sc.into(),
            system: system.into(),
            trial: 1,
            seed: 101,
            metric: "throughput_mbps".into(),
            value,
            unit: "Mbit/s".into(),
        };
        let (a, b) = ("wifi-bulk+rtt=59ms", "lte-bulk+rtt=290ms");
        let rows = vec![
            row("html", a, "fasthla", 30.0),
            row("html", a, "wget", 10.0),
            row("html", a, "aria2", 20.0),
            row("html", a, "nghttp", 3.0),
            row("html", b, "fasthla", f64::NAN), // every FastHLA trial failed
            row("html", b, "wget", 2.0),
        ];
        let plan = Plan {
            apps: vec!["html".into()],
            scenarios: vec![a.into(), b.into()],
            systems: systems(),
            trials: 1,
            first_seed: crate::harness::plan::HELD_OUT_SEEDS,
            quick: false,
            duration: None,
            jobs: 1,
            out: std::env::temp_dir(),
            emu_logs: None,
            resume: false,
            report_only: false,
            shard: None,
        };
        let t = at_a_glance(&plan, &rows);
        assert!(
            t.contains("| html | 1.50x aria2; 10.0x HTTP/2 | - |"),
            "{t}"
        );
    }

    /// A comparison that learnt from another run's sweep is read back with that sweep named
    /// again; without it, `--report-only` says what is missing instead of failing on a path.
    #[test]
    fn a_report_reads_back_a_comparison_that_learnt_from_another_sweep() {
        let dir = std::env::temp_dir().join(format!("roam-fasthla-from-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (old, out) = (dir.join("old/sweep"), dir.join("new"));
        let sc = "wifi-bulk+rtt=59ms";
        let row = |system: &str, seed: u64, metric: &str, value: f64| Row {
            app: "html".into(),
            scenario: sc.into(),
            system: system.into(),
            trial: 1,
            seed,
            metric: metric.into(),
            value,
            unit: String::new(),
        };
        let point = Tool::Fixed(Params {
            cc: 8,
            ..Params::default()
        });
        let sweep: Vec<Row> = SWEEP_POINT
            .iter()
            .map(|(m, v)| row(point.name(), 1, m, *v))
            .collect();
        let stamp = |d: &std::path::Path, version: &str, rows: &[Row]| {
            std::fs::create_dir_all(d).unwrap();
            let json = format!(
                r#"{{"version":"{version}","quick":false,"first_seed":1,"workload_ms":{{}}}}"#
            );
            std::fs::write(d.join("run.json"), json).unwrap();
            std::fs::write(d.join("trials.csv"), crate::report::csv(rows)).unwrap();
        };
        stamp(&old, "old-sweep-code", &sweep);
        let compared = [
            row("fasthla", 101, "throughput_mbps", 41.0),
            row("wget", 101, "throughput_mbps", 20.0),
        ];
        stamp(&out.join("compare"), "new-lab-code", &compared);
        let plan = Plan {
            apps: vec!["html".into()],
            scenarios: vec![sc.into()],
            systems: vec![System::new(Tool::FastHla), System::new(Tool::Wget)],
            trials: 1,
            first_seed: crate::harness::plan::HELD_OUT_SEEDS,
            quick: false,
            duration: None,
            jobs: 1,
            out: out.clone(),
            emu_logs: None,
            resume: false,
            report_only: true,
            shard: None,
        };
        let e = fasthla(&plan, None).unwrap_err().to_string();
        assert!(e.contains("--sweep-from"), "{e}");
        let (md, rows) = fasthla(&plan, Some(&old)).unwrap();
        assert_eq!(rows.len(), 2);
        assert!(
            md.contains("old-sweep-code"),
            "the sweep's code is named: {md}"
        );
        assert!(md.contains("1 sweep trial(s)"), "{md}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// FastHLA's choices leave the notes for their cell's section, counted over its trials;
    /// what else a trial said stays a note.
    #[test]
    fn choices_are_gathered_per_dataset_and_network() {
        let sc = "lte-bulk+rtt=290ms";
        let p = |cc: u32| Params {
            cc,
            ..Params::default()
        };
        let notes: Vec<String> = vec![
            format!("image/{sc}/fasthla#1: {}", bulk::choice_note(p(32), 40)),
            format!(
                "image/{sc}/fasthla#2: no h2c offered; {}",
                bulk::choice_note(p(32), 40)
            ),
            format!("image/{sc}/fasthla#3: {}", bulk::choice_note(p(8), 40)),
            format!("image/{sc}/nghttp#1: failed: 17 of 40"),
        ];
        let (choices, rest) = split_choices(&notes);
        let c = &choices[&("image".to_string(), sc.to_string())];
        assert_eq!(
            tally(c),
            "cc 32 p 1 bs 64 KiB HTTP/1.1 for 40 file(s) (2); \
             cc 8 p 1 bs 64 KiB HTTP/1.1 for 40 file(s) (1)"
        );
        assert_eq!(
            rest,
            vec![
                format!("image/{sc}/fasthla#2: no h2c offered"),
                format!("image/{sc}/nghttp#1: failed: 17 of 40"),
            ]
        );
    }

    #[test]
    fn sweep_rows_become_records() {
        let row = |system: &str, metric: &str, value: f64| Row {
            app: "html".into(),
            scenario: "wifi-bulk+rtt=59ms".into(),
            system: system.into(),
            trial: 1,
            seed: 1,
            metric: metric.into(),
            value,
            unit: String::new(),
        };
        let p = Params {
            cc: 8,
            p: 2,
            bs: 65536,
            ..Params::default()
        };
        let name = Tool::Fixed(p).name();
        let mut rows: Vec<Row> = SWEEP_POINT.iter().map(|(m, v)| row(name, m, *v)).collect();
        rows.push(row("curl", "throughput_mbps", 5.0));
        let r = records(&rows);
        assert_eq!(r.len(), 1);
        assert_eq!(
            (r[0].params, r[0].throughput_mbps, r[0].ok),
            (p, 40.0, true)
        );
        assert_eq!(r[0].bandwidth_mbps, 100.0);
        // The bandwidth is the scenario's over the condition's window, not the row's: the LTE
        // trace's first 120 s, not the 600 s a row from an earlier binary recorded.
        let lte: Vec<Row> = rows
            .iter()
            .map(|r| Row {
                scenario: "lte-bulk+rtt=59ms".into(),
                value: if r.metric == "bandwidth_mbps" {
                    5.42
                } else {
                    r.value
                },
                ..r.clone()
            })
            .collect();
        let b = records(&lte)[0].bandwidth_mbps;
        assert!((7.0..7.8).contains(&b), "{b}");
        assert_eq!(sweep_grid(true).len(), 5);
        for p in sweep_grid(false) {
            assert!(p.validate().is_ok());
            // The name a trial is stored under gives back its parameters, HTTP version and all.
            assert_eq!(Tool::parse(Tool::Fixed(p).name()), Some(Tool::Fixed(p)));
        }
        assert!(sweep_grid(true)
            .iter()
            .any(|p| p.protocol == Protocol::Http2));
    }
}
