//! `roam bench hostile`: every server roam ships, soaked in hostile clients while honest ones
//! keep working (issue 43's soak), as JSON on stdout (progress on stderr).
//!
//! Four servers run at once, each a process of its own on loopback ([`servers`]): an
//! application's roam-net listener (`net`), `roam net relay` (`relay`), `roam hla serve`
//! (`hla`) and a Horatio server tier (`tier`), each started as a user would (default limits,
//! a key, tokens, a secret). First honest clients alone (`--unloaded-seconds`) give each
//! server's unloaded latency; then, for `--seconds`, every attack of [`attacks`] runs against
//! its server from a source address of its own while the honest clients go on. Reported per
//! server: its peak resident set (VmHWM over the whole run), the fraction of honest requests
//! served in the soak, the median latency in the soak over the unloaded median, the attacks'
//! connections and how many the server cut, and the first errors honest clients saw. Targets
//! (issue 43): peak RSS under 256 MiB a server, every honest request served, latency within 2x.

mod attacks;
mod servers;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use clap::Args;
use serde_json::{json, Value};

use attacks::{Attack, Ctx};
use servers::Server;

/// Options of `roam bench hostile`.
#[derive(Args, Debug)]
pub struct BenchHostileArgs {
    /// Seconds of the soak: every attack against its server, honest clients alongside.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    seconds: u64,
    /// Seconds of honest requests alone before it (the unloaded latency).
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u64).range(1..))]
    unloaded_seconds: u64,
    /// Only these servers (comma-separated: net, relay, hla, tier).
    #[arg(long, default_value = "net,relay,hla,tier")]
    servers: String,
    /// Where the servers' files and logs go (default: a new directory in the temp dir,
    /// removed at the end).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Run the `net` server (a roam-net echo listener) on this address; the soak starts
    /// this binary so.
    #[arg(long, hide = true)]
    serve_echo: Option<SocketAddr>,
}

/// An honest client's request every this often (when the last was answered sooner).
const HONEST_EVERY: Duration = Duration::from_millis(250);
/// Targets, from issue 43.
const MAX_RSS_MIB: f64 = 256.0;
const MAX_LATENCY_RATIO: f64 = 2.0;

/// One honest request's outcome: its latency in seconds, or why it was not served.
type Outcome = Result<f64, String>;

/// Run `roam bench hostile`.
pub fn hostile(a: &BenchHostileArgs) -> Result<()> {
    if let Some(addr) = a.serve_echo {
        return servers::serve_echo(addr);
    }
    let names: Vec<&'static str> = a
        .servers
        .split(',')
        .map(|n| match n.trim() {
            "net" => Ok("net"),
            "relay" => Ok("relay"),
            "hla" => Ok("hla"),
            "tier" => Ok("tier"),
            other => bail!("--servers: no server `{other}` (net, relay, hla, tier)"),
        })
        .collect::<Result<_>>()?;
    let (dir, temporary) = match &a.dir {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!("roam-bench-hostile-{}", std::process::id())),
            true,
        ),
    };
    let _ = std::fs::remove_dir_all(&dir);
    let result = soak(a, &names, &dir);
    if temporary && result.is_ok() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    println!("{}", serde_json::to_string_pretty(&result?)?);
    Ok(())
}

fn soak(a: &BenchHostileArgs, names: &[&'static str], dir: &std::path::Path) -> Result<Value> {
    let mut running = Vec::new();
    for name in names {
        eprintln!("starting the {name} server");
        running.push(servers::start(name, &dir.join(name))?);
    }
    raise_fd_limit();
    eprintln!("honest clients alone for {} s", a.unloaded_seconds);
    let (running, unloaded) = honest_phase(running, Duration::from_secs(a.unloaded_seconds));
    eprintln!("the soak: {} s", a.seconds);
    let stop = Arc::new(AtomicBool::new(false));
    let mut attacking = Vec::new();
    let mut source = 2u8;
    for s in &running {
        for (name, run) in plan(s.name) {
            let ctx = Arc::new(Ctx {
                target: s.process.addr,
                from: Ipv4Addr::new(127, 0, 0, source),
                stop: stop.clone(),
                opened: AtomicU64::new(0),
                cut: AtomicU64::new(0),
                tls: s.tls.clone(),
                token: s.token.clone(),
            });
            source += 1;
            let c = ctx.clone();
            attacking.push((s.name, name, ctx, std::thread::spawn(move || run(&c))));
        }
    }
    let (mut running, loaded) = honest_phase(running, Duration::from_secs(a.seconds));
    stop.store(true, Ordering::SeqCst);
    let mut report = serde_json::Map::new();
    for (k, s) in running.iter_mut().enumerate() {
        let rss = s.process.peak_rss_mib();
        report.insert(s.name.into(), server_json(rss, &unloaded[k], &loaded[k]));
    }
    for (server, name, ctx, t) in attacking {
        let _ = t.join();
        report[server]["attacks"][name] = json!({
            "from": ctx.from.to_string(),
            "opened": ctx.opened.load(Ordering::Relaxed),
            "cut_by_server": ctx.cut.load(Ordering::Relaxed),
        });
    }
    Ok(json!({
        "seconds": a.seconds,
        "unloaded_seconds": a.unloaded_seconds,
        "honest_every_ms": HONEST_EVERY.as_millis() as u64,
        "targets": {
            "peak_rss_mib_below": MAX_RSS_MIB,
            "honest_served_fraction": 1.0,
            "latency_vs_unloaded_at_most": MAX_LATENCY_RATIO,
        },
        "servers": report,
    }))
}

/// The attacks on server `name`: the relay is a roam-net listener with a request of its own,
/// so it gets both sets.
fn plan(name: &str) -> Vec<Attack> {
    match name {
        "net" => attacks::ON_ROAM_NET.to_vec(),
        "relay" => [&attacks::ON_ROAM_NET[..], &attacks::ON_RELAY[..]].concat(),
        "hla" => attacks::ON_HLA.to_vec(),
        _ => attacks::ON_TIER.to_vec(),
    }
}

/// Every server's honest client, each on a thread, a request every [`HONEST_EVERY`] for
/// `length`; the servers back and each one's outcomes.
fn honest_phase(running: Vec<Server>, length: Duration) -> (Vec<Server>, Vec<Vec<Outcome>>) {
    let end = Instant::now() + length;
    let threads: Vec<_> = running
        .into_iter()
        .map(|mut s| {
            std::thread::spawn(move || {
                let mut out = Vec::new();
                let mut next = Instant::now();
                while Instant::now() < end {
                    std::thread::sleep(next.saturating_duration_since(Instant::now()));
                    next += HONEST_EVERY;
                    let t0 = Instant::now();
                    out.push(
                        s.request()
                            .map(|()| t0.elapsed().as_secs_f64())
                            .map_err(|e| format!("{e:#}")),
                    );
                    next = next.max(Instant::now());
                }
                eprintln!(
                    "{}: {} of {} honest requests served",
                    s.name,
                    out.iter().filter(|o| o.is_ok()).count(),
                    out.len()
                );
                (s, out)
            })
        })
        .collect();
    threads
        .into_iter()
        .map(|t| t.join().expect("an honest client panicked"))
        .unzip()
}

/// The `q` quantile of `sorted` (the nearest rank), `None` when empty.
pub(super) fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    (!sorted.is_empty()).then(|| sorted[((sorted.len() - 1) as f64 * q).round() as usize])
}

/// A phase's honest requests: counts and latency quantiles (ms).
fn phase_json(outcomes: &[Outcome]) -> (Value, Option<f64>) {
    let mut ok: Vec<f64> = outcomes.iter().filter_map(|o| o.clone().ok()).collect();
    ok.sort_by(f64::total_cmp);
    let median = quantile(&ok, 0.5);
    let ms = |v: Option<f64>| v.map(|x| (x * 1e5).round() / 100.0);
    let v = json!({
        "requests": outcomes.len(),
        "served": ok.len(),
        "median_ms": ms(median),
        "p95_ms": ms(quantile(&ok, 0.95)),
        "max_ms": ms(ok.last().copied()),
    });
    (v, median)
}

fn server_json(rss: Result<f64>, unloaded: &[Outcome], loaded: &[Outcome]) -> Value {
    let (u, u_median) = phase_json(unloaded);
    let (l, l_median) = phase_json(loaded);
    let served = loaded.iter().filter(|o| o.is_ok()).count();
    let fraction = served as f64 / loaded.len().max(1) as f64;
    let ratio = match (l_median, u_median) {
        (Some(l), Some(u)) if u > 0.0 => Some(l / u),
        _ => None,
    };
    let mut errors: Vec<&String> = Vec::new();
    for e in unloaded
        .iter()
        .chain(loaded)
        .filter_map(|o| o.as_ref().err())
    {
        if !errors.contains(&e) && errors.len() < 5 {
            errors.push(e);
        }
    }
    let rss_v = rss.as_ref().ok().copied();
    json!({
        "peak_rss_mib": rss_v.map(|r| (r * 10.0).round() / 10.0),
        "honest_served_fraction": fraction,
        "latency_vs_unloaded": ratio.map(|r| (r * 100.0).round() / 100.0),
        "targets_met": {
            "rss": rss_v.is_some_and(|r| r < MAX_RSS_MIB),
            "served": served == loaded.len() && !loaded.is_empty(),
            "latency": ratio.is_some_and(|r| r <= MAX_LATENCY_RATIO),
        },
        "server_error": rss.err().map(|e| format!("{e:#}")),
        "honest": { "unloaded": u, "soak": l, "first_errors": errors },
        "attacks": {},
    })
}

/// This process holds hundreds of hostile connections at once: raise its open-file limit to
/// the hard limit (after the servers started: they keep the limit they were given).
fn raise_fd_limit() {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid pointer to a local rlimit.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}
