//! Vehicular sensing split into two processes (the Intentional Networking paper's §7.2.4;
//! thesis §2.5.2.4, Figure 2.4): one process sends only the urgent messages, the other only
//! the summaries and raw samples, each over its own multi-socket (roam) or its own connection
//! (every other system), on the same links, with the same workload and metrics as
//! single-process sensing ([`super::sensing`]). With roam the two multi-sockets coordinate
//! through the device's shared table (`roam_net::runtime::shm`): the urgent process's
//! foreground traffic shrinks the bulk process's anticipatory budget, and the background
//! bytes both hold count against one cap.
//!
//! The two processes are real: the `roam` binary started twice in the client's namespace
//! (`roam lab-process`, [`half`]), each told its half ([`HalfSpec`]) and the trial's clock
//! (the monotonic clock is the machine's, so send times in either process and arrival times in
//! the server line up), each printing what it sent ([`HalfDone`]) with what coordinating cost
//! it. The server side has one listener per process.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::sensing::{self, Arrival, Received, Uploaded, PORT};
use crate::harness::channel::Conn;
use crate::harness::system;
use crate::harness::trial::{ClientLinks, Metric, Trial};

/// What one of the two client processes is told.
#[derive(Serialize, Deserialize, Debug)]
pub struct HalfSpec {
    /// Sends the urgent messages (true) or the bulk data (false).
    pub urgent: bool,
    /// The system's name.
    pub system: String,
    /// The server's port for this process.
    pub port: u16,
    /// The client's address on each link.
    pub addrs: Vec<std::net::Ipv4Addr>,
    /// The cellular links' names.
    pub cellular: Vec<String>,
    /// The trial's epoch on the monotonic clock (ns), which send times count from.
    pub epoch_mono_ns: u64,
    /// The workload's length (ms).
    pub duration_ms: u64,
    /// The trial's seed (the urgent messages' schedule).
    pub seed: u64,
}

/// What one client process did.
#[derive(Serialize, Deserialize, Debug, Default)]
pub struct HalfDone {
    sent: Uploaded,
    /// Operations on the shared table in this process, and their total time (ns).
    coordination_ops: u64,
    coordination_ns: u64,
}

/// The monotonic clock now, ns (the clock `Instant` reads on Linux, the same in every
/// process of the machine).
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes a timespec through a valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `epoch` on the monotonic clock (ns).
fn to_monotonic(epoch: Instant) -> u64 {
    monotonic_ns().saturating_sub(epoch.elapsed().as_nanos() as u64)
}

/// The `Instant` of `epoch_mono_ns` in this process.
fn from_monotonic(epoch_mono_ns: u64) -> Instant {
    let ago = Duration::from_nanos(monotonic_ns().saturating_sub(epoch_mono_ns));
    Instant::now().checked_sub(ago).unwrap_or_else(Instant::now)
}

/// `roam lab-process SPEC`: one of the two client processes (it runs in the client's
/// namespace, where its parent started it): connect, drive its half, print what it sent as one
/// line of JSON, then keep the connection open (messages may still be in flight) until the
/// parent closes this process's stdin.
pub fn half(spec: &str) -> Result<()> {
    use std::io::{Read, Write};
    let spec: HalfSpec = serde_json::from_str(spec).context("lab-process: the spec")?;
    let system = system::parse(&spec.system)?;
    let links = ClientLinks {
        addrs: spec.addrs.clone(),
        cellular: spec.cellular.clone(),
    };
    let epoch = from_monotonic(spec.epoch_mono_ns);
    let duration = Duration::from_millis(spec.duration_ms);
    let conn = Conn::connect(system, &links, spec.port)?;
    let urgent_at = if spec.urgent {
        sensing::urgent_schedule(duration, spec.seed)
    } else {
        Vec::new()
    };
    let sent = sensing::drive(&conn, epoch, (urgent_at, !spec.urgent), duration, &|_| {})?;
    let c = roam_net::runtime::shm::coordination();
    let done = HalfDone {
        sent,
        coordination_ops: c.ops,
        coordination_ns: c.total.as_nanos() as u64,
    };
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", serde_json::to_string(&done)?)?;
    out.flush()?;
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    conn.abort();
    Ok(())
}

/// The program that runs a lab process (`roam lab-process`): `$ROAM_LAB_PROCESS`, or this
/// program (the `roam` binary).
fn roam_binary() -> Result<PathBuf> {
    match std::env::var_os("ROAM_LAB_PROCESS") {
        Some(p) => Ok(PathBuf::from(p)),
        None => std::env::current_exe().context("finding the roam binary"),
    }
}

/// A client process started: the process, and its answer once it has driven.
struct Half {
    what: &'static str,
    child: Child,
}

/// Start one client process in the client's namespace (a process started from a thread
/// there is born there).
fn start_half(t: &Trial, spec: &HalfSpec) -> Result<Half> {
    let bin = roam_binary()?;
    let json = serde_json::to_string(spec)?;
    let child = t.run_client("sensing-2proc", move || {
        Command::new(&bin)
            .args(["lab-process", &json])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {} lab-process", bin.display()))
    })?;
    Ok(Half {
        what: if spec.urgent { "urgent" } else { "bulk" },
        child,
    })
}

/// Each process's answer (its first line on stdout), the progress bar following the clock
/// meanwhile (the processes cannot reach it).
fn answers(t: &Trial, halves: &mut [Half], duration: Duration) -> Result<Vec<HalfDone>> {
    let (tx, rx) = std::sync::mpsc::channel();
    for (k, h) in halves.iter_mut().enumerate() {
        let stdout = h.child.stdout.take().expect("piped");
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut line = String::new();
            let r = BufReader::new(stdout).read_line(&mut line).map(|_| line);
            let _ = tx.send((k, r));
        });
    }
    drop(tx);
    let started = Instant::now();
    let mut done: Vec<Option<HalfDone>> = halves.iter().map(|_| None).collect();
    while done.iter().any(Option::is_none) {
        match rx.recv_timeout(Duration::from_millis(500)) {
            Ok((k, r)) => {
                let what = halves[k].what;
                let line = r.with_context(|| format!("reading the {what} process's answer"))?;
                match serde_json::from_str(&line) {
                    Ok(d) => done[k] = Some(d),
                    Err(_) => {
                        let mut err = String::new();
                        if let Some(mut e) = halves[k].child.stderr.take() {
                            let _ = std::io::Read::read_to_string(&mut e, &mut err);
                        }
                        let last: Vec<&str> = err.lines().rev().take(3).collect();
                        bail!("the {what} process failed: {}", last.join(" | "));
                    }
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                (t.progress)(started.elapsed().min(duration).as_secs());
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    done.into_iter()
        .zip(halves.iter())
        .map(|(d, h)| d.ok_or_else(|| anyhow!("the {} process gave no answer", h.what)))
        .collect()
}

/// Let the processes end (their stdin closed) and wait for them; kill one that does not.
fn end(halves: Vec<Half>) {
    for mut h in halves {
        drop(h.child.stdin.take());
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = h.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = h.child.kill();
        let _ = h.child.wait();
    }
}

/// Run one trial: two server sides (one port per process), the two client processes at once,
/// then what the server received, as single-process sensing reports it, with what
/// coordinating cost (`coordination_ops_per_s`, `coordination_us_per_op`).
pub fn run(t: &Trial) -> Result<Vec<Metric>> {
    let duration = t.duration;
    let epoch = t.emu.clock().epoch();
    let arrivals: Arc<Mutex<Vec<Arrival>>> = Arc::default();
    let mut servers = Vec::new();
    for port in [PORT, PORT + 1] {
        let arr = arrivals.clone();
        servers.push(t.start_server(
            "sensing-2proc",
            port,
            || Ok(()),
            move |(), c: Arc<Conn>| sensing::serve(c, epoch, arr),
        )?);
    }
    let links = t.client_links();
    let spec = |urgent: bool, port: u16| HalfSpec {
        urgent,
        system: t.system.name().to_string(),
        port,
        addrs: links.addrs.clone(),
        cellular: links.cellular.clone(),
        epoch_mono_ns: to_monotonic(epoch),
        duration_ms: duration.as_millis() as u64,
        seed: t.seed,
    };
    let mut halves = Vec::new();
    let mut answered = Err(anyhow!("no process started"));
    for (urgent, port) in [(true, PORT), (false, PORT + 1)] {
        match start_half(t, &spec(urgent, port)) {
            Ok(h) => halves.push(h),
            Err(e) => {
                answered = Err(e);
                break;
            }
        }
    }
    if halves.len() == 2 {
        answered = answers(t, &mut halves, duration);
    }
    let [urgent, bulk] = match answered.map(<[HalfDone; 2]>::try_from) {
        Ok(Ok(both)) => both,
        other => {
            end(halves);
            for s in servers {
                let _ = s.finish(None);
            }
            return Err(match other {
                Err(e) => e,
                Ok(_) => anyhow!("two processes, not two answers"),
            });
        }
    };
    sensing::await_urgent(&arrivals, urgent.sent.urgent_sent);
    end(halves);
    let mut recovery = Vec::new();
    for s in servers {
        recovery.extend(s.finish(None).0);
    }
    let a = arrivals.lock().unwrap();
    let got = Received::of(&a, duration);
    t.keep_log("sensing-urgent.csv", || sensing::urgent_csv(&a))?;
    let sent = Uploaded {
        raw_generated: bulk.sent.raw_generated,
        raw_dropped: bulk.sent.raw_dropped,
        urgent_sent: urgent.sent.urgent_sent,
    };
    let lost = sent.urgent_sent as usize - got.urgent.len().min(sent.urgent_sent as usize);
    let never = std::iter::repeat_n(crate::report::UNFINISHED, lost);
    t.event_latencies(sensing::EVENT, got.urgent.iter().copied().chain(never));
    let ops = urgent.coordination_ops + bulk.coordination_ops;
    let ns = urgent.coordination_ns + bulk.coordination_ns;
    let mut m = sensing::metrics(&got, &sent, lost, duration, merge_recovery(recovery));
    m.push(Metric::new(
        "coordination_ops_per_s",
        ops as f64 / duration.as_secs_f64(),
        "ops/s",
    ));
    m.push(Metric::new(
        "coordination_us_per_op",
        if ops == 0 {
            0.0
        } else {
            ns as f64 / ops as f64 / 1e3
        },
        "us",
    ));
    Ok(m)
}

/// The two connections' recovery metrics added up, metric by metric.
fn merge_recovery(all: Vec<Metric>) -> Vec<Metric> {
    let mut out: Vec<Metric> = Vec::new();
    for m in all {
        match out.iter_mut().find(|o| o.name == m.name) {
            Some(o) => o.value += m.value,
            None => out.push(m),
        }
    }
    out
}
