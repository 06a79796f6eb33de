//! `roam bench emu`: the emulator's fidelity and speed, as JSON on stdout (progress on stderr).
//!
//! - `constant`: TCP (CUBIC) goodput through constant 1, 10, 100 Mbit/s links, as a fraction of
//!   the configured rate (which counts IP bytes, so TCP/IP headers cap it near 1448/1500 = 0.965);
//! - `trace`: IP bytes delivered through a cellular trace saturated by a paced UDP flood, as a
//!   fraction of the trace's capacity over the same window;
//! - `rtt`: median request/response RTT through links configured for 20 ms and 400 ms RTT;
//! - `idle_added_ms`: median round trip through an unlimited, zero-delay link minus the same
//!   exchange over loopback (the emulator's own added latency, both directions);
//! - `max_forward_gbit`: IP-level rate the forwarder sustains through an unlimited link with four
//!   parallel TCP downloads.

use anyhow::{anyhow, Result};
use clap::Args;
use roam_core::Time;
use roam_emu::spec::parse_link;
use roam_emu::traffic::{
    bulk_download, bulk_server_with, echo_server, median_ms, rtt_probe, udp_flood_client,
    udp_flood_server,
};
use roam_emu::{EmuConfig, Emulator, SERVER_ADDR};
use roam_trace::scenario::find_trace;
use roam_trace::PdoTrace;
use serde_json::json;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Options of `roam bench emu`.
#[derive(Args, Debug)]
pub struct BenchEmuArgs {
    /// Seconds per goodput measurement (after a warm-up of a fifth of it, at least 2 s).
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// The cellular trace to saturate (relative to the traces directory, or a path).
    #[arg(long, default_value = "cellular/Verizon-LTE-short.down")]
    trace: String,
}

/// The congestion control the bulk senders use: Linux's default, CUBIC. (This machine's
/// default is BBR, whose ProbeRTT phase idles the link for 200 ms every 10 s and whose pacing
/// gain cycles below 1: that measures BBR, not the emulator.)
const CONGESTION_CONTROL: &str = "cubic";

fn start(spec: &str) -> Result<Emulator> {
    let l = parse_link(spec, 1)?;
    let emu = Emulator::start(EmuConfig {
        links: vec![l],
        ..Default::default()
    })?;
    Ok(emu)
}

fn join<T>(h: std::thread::JoinHandle<std::io::Result<T>>) -> Result<T> {
    Ok(h.join().map_err(|_| anyhow!("worker thread panicked"))??)
}

fn goodput(rate_mbit: u64, secs: u64) -> Result<f64> {
    let emu = start(&format!("l=rate={rate_mbit}mbit,delay=5ms"))?;
    let srv = bulk_server_with(&emu, 5000, false, Some(CONGESTION_CONTROL))?;
    let clock = emu.clock();
    let warm = (secs / 5).max(2);
    let t0 = clock.now() + Duration::from_secs(warm);
    let until = t0 + Duration::from_secs(secs);
    let addr = emu.links()[0].client_addr;
    let r = join(emu.spawn_in_client(move || {
        bulk_download(clock, addr, 5000, false, until, Duration::from_secs(5))
    }))?;
    srv.stop();
    let bytes = r.bytes_between(t0, until) as f64;
    Ok(bytes * 8.0 / secs as f64 / (rate_mbit as f64 * 1e6))
}

fn trace_fraction(trace: &str, secs: u64) -> Result<(String, f64, f64)> {
    let path = if std::path::Path::new(trace).is_file() {
        std::path::PathBuf::from(trace)
    } else {
        find_trace(trace)?
    };
    let pdo = PdoTrace::load(&path)?;
    // Pace the flood above the trace's busiest second so the queue never runs dry.
    let peak = (0..pdo.period().as_secs().max(1))
        .map(|s| {
            pdo.bytes_between(
                Time::from_millis(s * 1000),
                Time::from_millis(s * 1000 + 1000),
            )
        })
        .max()
        .unwrap_or(0) as f64
        * 8.0;
    let emu = start(&format!(
        "l=down={},up=10mbit,queue=2000pkt",
        path.display()
    ))?;
    let clock = emu.clock();
    let total = Duration::from_secs(secs + 3);
    let until = clock.now() + total;
    let srv = udp_flood_server(&emu, 6000, 1472, peak * 1.3 + 1e6, until)?;
    let addr = emu.links()[0].client_addr;
    let got = join(emu.spawn_in_client(move || udp_flood_client(clock, addr, 6000, until)))??;
    let _ = srv.join();
    let first = got
        .first()
        .map(|x| x.0)
        .ok_or_else(|| anyhow!("no datagram arrived"))?;
    let t0 = first + Duration::from_secs(2);
    let t1 = t0 + Duration::from_secs(secs.saturating_sub(1).max(1));
    let delivered: u64 = got
        .iter()
        .filter(|(t, _)| *t >= t0 && *t < t1)
        .map(|x| x.1 as u64)
        .sum();
    let cap = pdo.bytes_between(t0, t1);
    Ok((
        path.display().to_string(),
        delivered as f64 / cap as f64,
        peak / 1e6,
    ))
}

fn rtt(spec: &str, interval: Duration, count: u32) -> Result<f64> {
    let emu = start(spec)?;
    let srv = echo_server(&emu, 5001)?;
    let clock = emu.clock();
    let addr = emu.links()[0].client_addr;
    let until = clock.now() + interval * count;
    let s = join(emu.spawn_in_client(move || {
        rtt_probe(
            clock,
            addr,
            5001,
            64,
            interval,
            until,
            Duration::from_secs(5),
        )
    }))?;
    srv.stop();
    // Drop the first exchange, the first use of a fresh connection (a warm-up).
    let v: Vec<Duration> = s.iter().skip(1).map(|x| x.1).collect();
    if v.is_empty() {
        return Err(anyhow!("no RTT samples through {spec}"));
    }
    Ok(median_ms(&v))
}

fn loopback_rtt(count: u32) -> Result<f64> {
    // Both ends inside the server namespace: the kernel's loopback path, no emulator.
    let emu = start("l=rate=unlimited")?;
    let srv = echo_server(&emu, 5002)?;
    let clock = emu.clock();
    let until = clock.now() + Duration::from_millis(5) * count;
    let s = join(emu.spawn_in_server(move || {
        rtt_probe(
            clock,
            SERVER_ADDR,
            5002,
            64,
            Duration::from_millis(5),
            until,
            Duration::from_secs(5),
        )
    }))?;
    srv.stop();
    Ok(median_ms(
        &s.iter().skip(1).map(|x| x.1).collect::<Vec<_>>(),
    ))
}

fn max_forward(secs: u64) -> Result<f64> {
    let emu = start("l=rate=unlimited,queue=unlimited")?;
    let srv = bulk_server_with(&emu, 5000, false, Some(CONGESTION_CONTROL))?;
    let clock = emu.clock();
    let addr = emu.links()[0].client_addr;
    let until = clock.now() + Duration::from_secs(secs + 1);
    let hs: Vec<_> = (0..4)
        .map(|_| {
            emu.spawn_in_client(move || {
                bulk_download(clock, addr, 5000, false, until, Duration::from_secs(5))
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(1));
    let c = &emu.links()[0].down;
    let b0 = c.delivered_bytes.load(Ordering::Relaxed);
    let t0 = clock.now();
    std::thread::sleep(Duration::from_secs(secs) - Duration::from_millis(200));
    let b1 = c.delivered_bytes.load(Ordering::Relaxed);
    let t1 = clock.now();
    for h in hs {
        join(h)?;
    }
    srv.stop();
    Ok((b1 - b0) as f64 * 8.0 / (t1 - t0).as_secs_f64() / 1e9)
}

/// Run the benchmark and print JSON.
pub fn emu(a: &BenchEmuArgs) -> Result<()> {
    let mut constant = Vec::new();
    for rate in [1u64, 10, 100] {
        eprintln!("bench emu: TCP goodput through {rate} Mbit/s ...");
        let secs = if rate == 1 { a.seconds * 2 } else { a.seconds };
        let f = goodput(rate, secs)?;
        eprintln!("  goodput fraction {f:.4}");
        constant.push(json!({"rate_mbit": rate, "goodput_fraction": f}));
    }
    eprintln!("bench emu: saturating {} ...", a.trace);
    let (file, frac, peak) = trace_fraction(&a.trace, a.seconds)?;
    eprintln!("  delivered fraction {frac:.4} (flood paced above the {peak:.1} Mbit/s peak)");
    let mut rtts = Vec::new();
    for (ms, interval) in [(20u64, 50u64), (400, 450)] {
        eprintln!("bench emu: RTT through a {ms} ms link ...");
        let m = rtt(
            &format!("l=rate=100mbit,delay={}us", ms * 500),
            Duration::from_millis(interval),
            if ms > 100 { 25 } else { 100 },
        )?;
        eprintln!("  median {m:.3} ms");
        rtts.push(json!({"configured_ms": ms, "measured_ms": m}));
    }
    eprintln!("bench emu: idle added latency ...");
    let through = rtt("l=rate=unlimited", Duration::from_millis(5), 400)?;
    let lo = loopback_rtt(400)?;
    let added = through - lo;
    eprintln!("  {through:.3} ms through the emulator, {lo:.3} ms over loopback: +{added:.3} ms");
    eprintln!("bench emu: maximum forwarding rate ...");
    let fwd = max_forward(5)?;
    eprintln!("  {fwd:.3} Gbit/s");
    let out = json!({
        "constant": constant,
        "trace": {"file": file, "delivered_fraction": frac},
        "rtt": rtts,
        "idle_added_ms": added,
        "max_forward_gbit": fwd,
        "notes": {
            "idle_added_ms": "round trip (both directions) through an unlimited zero-delay link, minus loopback",
            "rtt_through_ms": through,
            "loopback_rtt_ms": lo,
        }
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
