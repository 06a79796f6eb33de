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
use roam_emu::traffic::{bulk_download, bulk_server, echo_server, median_ms, rtt_probe};
use roam_emu::{EmuConfig, Emulator};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
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

/// Run the drive.
pub fn drive(a: &DriveArgs) -> Result<()> {
    let scenario = roam_emu::scenario_file::scenario(&a.scenario, a.seed)
        .map_err(|e| anyhow::anyhow!("--scenario {}: {e}", a.scenario))?;
    let queue = parse_queue(&a.queue).map_err(|e| anyhow::anyhow!("--queue {}: {e}", a.queue))?;
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let emu = Emulator::start(EmuConfig {
        links: roam_emu::scenario::links(&scenario, queue, a.seed),
        log_dir: Some(a.out.join("emu-log")),
        ..Default::default()
    })?;
    let bulk = bulk_server(&emu, 5000, false)?;
    let echo = echo_server(&emu, 5001)?;
    let clock = emu.clock();
    let start = clock.now();
    let until = start + a.duration;
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
    let mut jobs = Vec::new();
    for l in emu.links() {
        let addr = l.client_addr;
        let b = emu.spawn_in_client(move || {
            bulk_download(clock, addr, 5000, false, until, Duration::from_secs(3))
        });
        let r = emu.spawn_in_client(move || {
            rtt_probe(
                clock,
                addr,
                5001,
                64,
                Duration::from_millis(500),
                until,
                Duration::from_secs(3),
            )
        });
        jobs.push((l.name.clone(), b, r));
    }
    // Progress while driving: the drive's seconds, and what each link delivered.
    let delivered: Vec<_> = emu
        .links()
        .iter()
        .map(|l| (l.name.clone(), l.down.clone()))
        .collect();
    let bar = Progress::builder(Unit::Count("s"))
        .label("driving")
        .total(a.duration.as_secs())
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
    let mut results = Vec::new();
    for (name, b, r) in jobs {
        let bulk_res = b
            .join()
            .map_err(|_| anyhow::anyhow!("download thread panicked"))??;
        let rtts = r
            .join()
            .map_err(|_| anyhow::anyhow!("probe thread panicked"))??;
        let link = scenario.links.iter().find(|l| l.name == name).unwrap();
        let end = Time::ZERO + a.duration;
        let avail = link.trace.availability.fraction_true(Time::ZERO, end);
        let secs = a.duration.as_secs_f64();
        let total = bulk_res.total() as f64 * 8.0 / 1e3;
        let cap = link
            .trace
            .down
            .bytes_between(Time::ZERO, end)
            .map(|c| c as f64 * 8.0 / 1e3 / secs)
            .unwrap_or(f64::NAN);
        let per_bin = bulk_res.bin.as_secs_f64();
        results.push(LinkResult {
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
            connections: bulk_res.connections,
            timeline: bulk_res
                .timeline
                .iter()
                .map(|(t, b)| (t.as_secs_f64(), *b as f64 * 8.0 / per_bin / 1e6))
                .collect(),
            rtts: rtts
                .iter()
                .map(|(t, d)| (t.as_secs_f64(), d.as_secs_f64() * 1e3))
                .collect(),
            name,
        });
    }
    bulk.stop();
    echo.stop();
    drop(emu);

    let mut table = format!(
        "drive: scenario `{}`, {:.0} s, seed {}, queue {}\n\n| link | available | capacity while available (kbit/s, trace) | download throughput (kbit/s) | while available (kbit/s) | RTT under load, median (ms) | RTT samples | TCP connections |\n|---|---:|---:|---:|---:|---:|---:|---:|\n",
        a.scenario,
        a.duration.as_secs_f64(),
        a.seed,
        a.queue
    );
    for r in &results {
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
    print!("{table}");
    std::fs::write(a.out.join("drive.md"), &table)?;
    let fig = Figure {
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
                let secs = link.trace.per_second(a.duration);
                let bands = link
                    .trace
                    .availability
                    .true_intervals(Time::ZERO, Time::ZERO + a.duration)
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
            })
            .collect(),
    };
    let svg = a.out.join("drive.svg");
    std::fs::write(&svg, fig.to_svg())?;
    eprintln!(
        "wrote {}, {} and {}",
        a.out.join("drive.md").display(),
        svg.display(),
        a.out.join("emu-log").display()
    );
    Ok(())
}
