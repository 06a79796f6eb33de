//! `roam drive`: the main job for now. Emulates a drive (the `vehicular` scenario: a measured 3G
//! trace plus WiFi that comes and goes as Cabernet measured), runs a bulk download and a
//! request/response RTT probe over each link, and prints a per-link table (throughput, RTT under
//! load, availability) and writes a plot.

use anyhow::{Context, Result};
use clap::Args;
use roam_core::plot::{Figure, Panel, Series};
use roam_core::progress::{Progress, Unit};
use roam_core::Time;
use roam_emu::spec::parse_queue;
use roam_emu::traffic::{
    bulk_download, bulk_server, echo_server, median_ms, rtt_probe, BulkResult,
};
use roam_emu::{EmuConfig, Emulator};
use roam_trace::link::NamedLink;
use roam_trace::scenario::Scenario;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::Duration;

/// Options of `roam drive`.
#[derive(Args, Debug)]
pub struct DriveArgs {
    /// Scenario to drive through (a name, or a scenario file FILE.toml).
    #[arg(long, default_value = "vehicular")]
    scenario: String,
    /// How long to drive.
    #[arg(long, default_value = "60s", value_parser = crate::parse_dur)]
    duration: Duration,
    /// Seed for WiFi availability.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Drop-tail queue per link and direction.
    #[arg(long, default_value = "100pkt")]
    queue: String,
    /// Output directory (table, plot, emulator logs).
    #[arg(long, default_value = "results/drive")]
    out: PathBuf,
}

struct LinkResult {
    name: String,
    available_pct: f64,
    throughput_kbps: f64,
    throughput_avail_kbps: f64,
    /// Mean downlink capacity of the trace over the drive (not scaled by availability).
    capacity_kbps: f64,
    rtt_ms: Option<f64>,
    rtt_samples: usize,
    connections: u32,
    timeline: Vec<(f64, f64)>,
    rtts: Vec<(f64, f64)>,
}

/// Run the drive: the emulator with the scenario's links, a bulk server and an echo server
/// behind them; a download and an RTT probe over every link until the drive ends (with a
/// progress bar meanwhile); then the per-link table (printed, and `drive.md`) and the plot
/// (`drive.svg`) in the output directory.
pub fn drive(a: &DriveArgs) -> Result<()> {
    let scenario = roam_emu::scenario_file::scenario(&a.scenario, a.seed)
        .map_err(|e| anyhow::anyhow!("--scenario {}: {e}", a.scenario))?;
    let emu = start_emulator(a, &scenario)?;
    let bulk = bulk_server(&emu, BULK_PORT, false)?;
    let echo = echo_server(&emu, ECHO_PORT)?;
    let start = emu.clock().now();
    let until = start + a.duration;
    announce(a, &emu);
    let jobs = start_measurements(&emu, until);
    wait_for_the_drive(&emu, start, until, a.duration);
    let results = collect_results(jobs, &scenario, a.duration)?;
    bulk.stop();
    echo.stop();
    drop(emu);

    let table = table(a, &results);
    print!("{table}");
    std::fs::write(a.out.join("drive.md"), &table)?;
    let svg = a.out.join("drive.svg");
    std::fs::write(&svg, figure(a, &scenario, &results).to_svg())?;
    eprintln!(
        "wrote {}, {} and {}",
        a.out.join("drive.md").display(),
        svg.display(),
        a.out.join("emu-log").display()
    );
    Ok(())
}

/// The server port of the bulk download.
const BULK_PORT: u16 = 5000;
/// The server port of the RTT probe's echo server.
const ECHO_PORT: u16 = 5001;

/// The emulator: one link per link of the scenario (the first seeded with `--seed`, the next
/// with the seed after, and so on), each with the `--queue` drop-tail queue, logging into the
/// output directory (created here).
fn start_emulator(a: &DriveArgs, scenario: &Scenario) -> Result<Emulator> {
    let queue = parse_queue(&a.queue).map_err(|e| anyhow::anyhow!("--queue {}: {e}", a.queue))?;
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    Ok(Emulator::start(EmuConfig {
        links: roam_emu::scenario::links(scenario, queue, a.seed),
        log_dir: Some(a.out.join("emu-log")),
        ..Default::default()
    })?)
}

/// Say what is about to be driven, on stderr (stdout is for the table).
fn announce(a: &DriveArgs, emu: &Emulator) {
    eprintln!(
        "roam drive: {} for {:.0} s over {} (seed {})",
        a.scenario,
        a.duration.as_secs_f64(),
        emu.links()
            .iter()
            .map(|l| l.name.as_str())
            .collect::<Vec<_>>()
            .join(" + "),
        a.seed
    );
}

/// The two measurements running over one link, each on a thread in the client namespace.
struct LinkJobs {
    /// The link.
    name: String,
    /// A bulk download for the whole drive: the throughput the link gave.
    download: JoinHandle<std::io::Result<BulkResult>>,
    /// A 64-byte request/response every 500 ms over a connection of its own: the RTT a small
    /// interactive exchange sees while the download fills the link's queue.
    probe: JoinHandle<std::io::Result<Vec<(Time, Duration)>>>,
}

/// Start the download and the probe over every link, both running until `until`. The
/// download reconnects when its connection breaks or stalls for 3 s (an outage); the probe
/// skips an exchange unanswered within 3 s and remakes its connection. So a link that comes
/// back after an outage is measured again.
fn start_measurements(emu: &Emulator, until: Time) -> Vec<LinkJobs> {
    let clock = emu.clock();
    let mut jobs = Vec::new();
    for l in emu.links() {
        let addr = l.client_addr;
        let download = emu.spawn_in_client(move || {
            bulk_download(clock, addr, BULK_PORT, false, until, Duration::from_secs(3))
        });
        let probe = emu.spawn_in_client(move || {
            rtt_probe(
                clock,
                addr,
                ECHO_PORT,
                64,
                Duration::from_millis(500),
                until,
                Duration::from_secs(3),
            )
        });
        jobs.push(LinkJobs {
            name: l.name.clone(),
            download,
            probe,
        });
    }
    jobs
}

/// Wait until the drive ends, showing progress meanwhile: the drive's seconds, and the bytes
/// each link delivered (read from the emulator's counters), so a stalled link shows at once.
fn wait_for_the_drive(emu: &Emulator, start: Time, until: Time, duration: Duration) {
    let clock = emu.clock();
    let delivered: Vec<_> = emu
        .links()
        .iter()
        .map(|l| (l.name.clone(), l.down.clone()))
        .collect();
    let bar = Progress::builder(Unit::Count("s"))
        .label("driving")
        .total(duration.as_secs())
        .poll(move |p| {
            p.set_position(clock.now().saturating_since(start).as_secs());
            let parts: Vec<String> = delivered
                .iter()
                .map(|(name, down)| {
                    let b = down.delivered_bytes.load(Ordering::Relaxed);
                    format!("{name} {:.0} KB", b as f64 / 1e3)
                })
                .collect();
            p.set_message(format!("delivered: {}", parts.join(", ")));
        })
        .start();
    while clock.now() < until {
        std::thread::sleep(Duration::from_secs(1).min(until - clock.now()));
    }
    bar.finish();
}

/// Wait for every link's measurements to finish (they stop at the drive's end) and sum each
/// up ([`link_result`]), in the emulator's link order.
fn collect_results(
    jobs: Vec<LinkJobs>,
    scenario: &Scenario,
    duration: Duration,
) -> Result<Vec<LinkResult>> {
    let mut results = Vec::new();
    for job in jobs {
        let bulk = job
            .download
            .join()
            .map_err(|_| anyhow::anyhow!("download thread panicked"))??;
        let rtts = job
            .probe
            .join()
            .map_err(|_| anyhow::anyhow!("probe thread panicked"))??;
        let link = scenario.links.iter().find(|l| l.name == job.name).unwrap();
        results.push(link_result(job.name, &bulk, &rtts, link, duration));
    }
    Ok(results)
}

/// One link's row and plot data. Throughput is given over the whole drive and over the time
/// the link was available (what it gave while it could give anything); the capacity is the
/// trace's mean over the drive, so the two can be compared. Throughput over time is in
/// Mbit/s per 100 ms bin, RTTs in milliseconds.
fn link_result(
    name: String,
    bulk: &BulkResult,
    rtts: &[(Time, Duration)],
    link: &NamedLink,
    duration: Duration,
) -> LinkResult {
    let end = Time::ZERO + duration;
    let avail = link.trace.availability.fraction_true(Time::ZERO, end);
    let secs = duration.as_secs_f64();
    let total = bulk.total() as f64 * 8.0 / 1e3;
    let cap = link
        .trace
        .down
        .bytes_between(Time::ZERO, end)
        .map(|c| c as f64 * 8.0 / 1e3 / secs)
        .unwrap_or(f64::NAN);
    let per_bin = bulk.bin.as_secs_f64();
    LinkResult {
        available_pct: avail * 100.0,
        throughput_kbps: total / secs,
        throughput_avail_kbps: if avail > 0.0 {
            total / (secs * avail)
        } else {
            0.0
        },
        capacity_kbps: cap,
        rtt_ms: (!rtts.is_empty())
            .then(|| median_ms(&rtts.iter().map(|x| x.1).collect::<Vec<_>>())),
        rtt_samples: rtts.len(),
        connections: bulk.connections,
        timeline: bulk
            .timeline
            .iter()
            .map(|(t, b)| (t.as_secs_f64(), *b as f64 * 8.0 / per_bin / 1e6))
            .collect(),
        rtts: rtts
            .iter()
            .map(|(t, d)| (t.as_secs_f64(), d.as_secs_f64() * 1e3))
            .collect(),
        name,
    }
}

/// The per-link table (markdown), under a line naming the drive's conditions.
fn table(a: &DriveArgs, results: &[LinkResult]) -> String {
    let mut table = format!(
        "drive: scenario `{}`, {:.0} s, seed {}, queue {}\n\n| link | available | capacity while available (kbit/s, trace) | download throughput (kbit/s) | while available (kbit/s) | RTT under load, median (ms) | RTT samples | TCP connections |\n|---|---:|---:|---:|---:|---:|---:|---:|\n",
        a.scenario,
        a.duration.as_secs_f64(),
        a.seed,
        a.queue
    );
    for r in results {
        table += &format!(
            "| {} | {:.1}% | {:.0} | {:.0} | {:.0} | {} | {} | {} |\n",
            r.name,
            r.available_pct,
            r.capacity_kbps,
            r.throughput_kbps,
            r.throughput_avail_kbps,
            r.rtt_ms.map_or("-".into(), |v| format!("{v:.0}")),
            r.rtt_samples,
            r.connections
        );
    }
    table
}

/// The plot: two panels per link ([`link_panels`]), over the drive's time.
fn figure(a: &DriveArgs, scenario: &Scenario, results: &[LinkResult]) -> Figure {
    Figure {
        title: format!(
            "roam drive: {} ({:.0} s, seed {})",
            a.scenario,
            a.duration.as_secs_f64(),
            a.seed
        ),
        x_label: "time (s)".into(),
        panels: results
            .iter()
            .flat_map(|r| {
                let link = scenario.links.iter().find(|l| l.name == r.name).unwrap();
                link_panels(r, link, a.duration)
            })
            .collect(),
    }
}

/// A link's two panels, both shaded where the link was available: the download's throughput
/// (per 100 ms) against the trace's capacity (per second, zero while unavailable), and the
/// probe's RTTs. Side by side they show whether the download used what the link offered and
/// what that cost a small exchange.
fn link_panels(r: &LinkResult, link: &NamedLink, duration: Duration) -> [Panel; 2] {
    let secs = link.trace.per_second(duration);
    let bands = link
        .trace
        .availability
        .true_intervals(Time::ZERO, Time::ZERO + duration)
        .into_iter()
        .map(|(x, y)| (x.as_secs_f64(), y.as_secs_f64()))
        .collect::<Vec<_>>();
    [
        Panel {
            title: format!("{}: download throughput vs capacity", r.name),
            y_label: "Mbit/s".into(),
            series: vec![
                Series {
                    name: "measured (100 ms)".into(),
                    points: r.timeline.clone(),
                },
                Series {
                    name: "capacity (1 s)".into(),
                    points: secs
                        .iter()
                        .map(|s| (s.t_s as f64, s.down_kbps * s.available / 1e3))
                        .collect(),
                },
            ],
            bands: bands.clone(),
            band_label: Some("available".into()),
        },
        Panel {
            title: format!("{}: request/response RTT under load", r.name),
            y_label: "ms".into(),
            series: vec![Series {
                name: "RTT".into(),
                points: r.rtts.clone(),
            }],
            bands,
            band_label: Some("available".into()),
        },
    ]
}
