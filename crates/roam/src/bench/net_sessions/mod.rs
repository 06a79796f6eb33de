//! `roam bench net --sessions N`: roam-net at the scale of a relay, against plain TCP and QUIC
//! (quinn), as JSON on stdout (progress on stderr).
//!
//! # Method
//!
//! Each stack runs in a child process of its own (this binary again, with `--stacks` naming
//! it), so that one stack's memory, descriptors and timers do not reach into the next one's
//! figures; the parent kills a child that overruns `--sessions-deadline` and reports it. In
//! the child, both ends of every session live in the one process:
//!
//! - roam: multi-sockets of the blocking API ([`roam_net::runtime::blocking`]), as the loopback
//!   bench builds them (one loopback network, CUBIC), all accepted by one [`Listener`] whose
//!   limits (`max_sessions`, `max_connections_per_source`, `max_pending_per_source`) are raised
//!   to fit N, as a relay's operator would; each accepted multi-socket gets a task that
//!   receives (`recv`) until it ends. Active sessions send from tasks on the same runtime
//!   (the async handle of the same multi-socket): a thread per session would be the bench's
//!   cost, not roam-net's.
//! - tcp: tokio TCP connections (CUBIC) on a runtime of two workers, like roam-net's; each
//!   accepted connection gets a task that waits for data and only then allocates its read
//!   buffer.
//! - quic: quinn on a runtime of two workers, one server endpoint and one client endpoint (a
//!   UDP socket each) for all connections, a self-signed certificate (rcgen), the default
//!   transport except a 60 s idle timeout with 10 s keep-alives (else idle connections close
//!   after 30 s); each accepted connection gets a task that accepts its streams, each drained
//!   by a task of its own.
//!
//! Sessions are opened by `--open-concurrency` threads (32) that each connect in turn, after a
//! first warm-up session that makes the runtime, the listener and the allocator's arenas part
//! of the baseline. The child then measures:
//!
//! - `idle_kib_per_session`: growth of VmRSS (`/proc/self/status`) from just before the N
//!   sessions were opened to the end of the idle window below (`--idle-settle`, 2 s, after the
//!   last one opened), divided by N; both ends count (`per_session_counts`), they cannot be
//!   told apart in one process. `idle_anon_kib_...` and `idle_shmem_kib_...` split it
//!   (RssAnon, RssShmem: a page of shared memory mapped at several addresses counts once per
//!   mapping). Memory that idle sessions keep taking shows as
//!   `idle_kib_per_session_growth_per_min`, over the idle window: the figure above then
//!   depends on how long the sessions sat idle (and on how long opening them took);
//! - `accept_per_s`: N over the time from the first connect until the server application has
//!   accepted the N-th session (both ends hold it);
//! - `idle_wakeups_per_session_per_s`: the process's context switches (`getrusage`, voluntary
//!   and involuntary, every thread, living or ended) over an idle window of `--idle-seconds`
//!   (5) with all N open, less the same rate with only the warm-up session (floored at 0),
//!   divided by N. Many timers falling due together are served by one wake-up of a worker, so
//!   at large N this understates what each session's timers do; the same measurement with
//!   only 10 sessions open (`..._at_10`) does not. `idle_cpu_us_per_session_per_s` is the CPU
//!   time (user + system) over the same windows, and `idle_tcp_keepalives_per_session_per_s`
//!   the kernel's TCP keepalives sent (TcpExt `TCPKeepAlive`, the whole network namespace);
//! - `aggregate_vs_one`: for each of `--active` (10, 100, 1,000; counts above N skipped), that
//!   many sessions each send bulk data (1 MiB at a time: background-large IROBs, `write_all`,
//!   a unidirectional stream) at once for `--active-seconds` (3) after 1 s of ramp-up, the
//!   receivers counting the bytes they get; the aggregate is divided by one session's rate,
//!   measured the same way before and after the others (their mean; both in
//!   `aggregate_gbit`). All the while the other sessions stay open and idle. Beside it,
//!   `aggregate_vs_one_alone` divides by one session's rate in a process with no other
//!   session (`one_session_alone_gbit`, a second child): when idle sessions starve even one
//!   active session, the first ratio divides by the starved figure. `active_kernel` counts,
//!   per run, the kernel's TCP memory-pressure episodes and UDP datagrams dropped for a full
//!   receive buffer (network namespace wide), which explain a collapse of TCP or QUIC;
//!   `active_cost`, per run, the process's CPU seconds and context switches per GB moved
//!   (`getrusage`: both ends and the idle sessions): what the bytes cost, beside how fast
//!   they went.
//!
//! `targets` states the targets (at most 64 KiB per idle session; with 1,000 active
//! sessions at least 0.8 of one's, against both references; no more than one wake-up per
//! idle session a second, the larger of the two wake-up figures) and whether roam meets each.
//!
//! roam-net's multi-sockets publish to a shared-memory table per network namespace that other
//! roam-net processes read (`roam_net::runtime::shm`): unless `ROAM_NET_SHM` is set, the
//! children get a table of their own (same size, same code), removed afterwards, so that the
//! bench neither disturbs nor is disturbed by the machine's other roam-net processes.
//! `ROAM_NET_SHM` naming a path that cannot be created (e.g. under a missing directory)
//! runs the multi-sockets without the table, to see what it costs.
//!
//! File descriptors: the soft RLIMIT_NOFILE is raised to the hard limit (and the hard limit
//! too when the process may); the descriptors of the first session, counted, tell how many N
//! needs, and when they do not fit the child opens as many as fit and says why (`error`,
//! naming the limit). Any other failure to open a session stops the opening there: the
//! figures are then over the sessions reached (`sessions_reached`), with the reason.
//!
//! # Files
//!
//! This file is the parent: it runs each stack's child and assembles the JSON. The child
//! measures ([`measure`][measure-mod]) one stack's sessions ([`sessions`]) with the process's
//! figures ([`usage`]); [`roam`], [`tcp`] and [`quic`] hold what is specific to each stack,
//! and [`report`] the figures the parent derives from the children's.
//!
//! [`Listener`]: roam_net::runtime::blocking::Listener
//! [measure-mod]: mod@measure

mod measure;
mod quic;
mod report;
mod roam;
mod sessions;
mod tcp;
pub(super) mod usage;

use std::io::{BufRead, BufReader, Read as _};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::ValueEnum;
use serde_json::{json, Map, Value};

use self::measure::{measure, PROBE};
use self::sessions::Sessions;

/// A stack `roam bench net --sessions` measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Stack {
    /// roam-net multi-sockets.
    Roam,
    /// Plain TCP connections.
    Tcp,
    /// QUIC connections (quinn).
    Quic,
}

impl Stack {
    fn name(self) -> &'static str {
        match self {
            Stack::Roam => "roam",
            Stack::Tcp => "tcp",
            Stack::Quic => "quic",
        }
    }
}

/// What `roam bench net --sessions` was asked.
#[derive(Clone)]
pub struct Settings {
    /// N.
    pub sessions: usize,
    /// Counts of concurrently active sessions.
    pub active: Vec<usize>,
    /// Seconds each active run is measured.
    pub active_seconds: u64,
    /// Seconds of each idle window.
    pub idle_seconds: u64,
    /// Seconds the N sessions sit idle before their idle window.
    pub idle_settle: u64,
    /// The stacks, in order.
    pub stacks: Vec<Stack>,
    /// Threads opening sessions at once.
    pub concurrency: usize,
    /// The whole bench's deadline (a child's: its own).
    pub deadline: Duration,
    /// Run the one stack here and print its figures (the parent's child).
    pub child: bool,
}

/// Time kept for each stack after the one running (and its run of one session alone).
const PER_LATER_STACK: Duration = Duration::from_secs(300);

/// Run `roam bench net --sessions`: the parent (one child per stack) or a child.
pub fn run(s: &Settings) -> Result<()> {
    if s.child {
        let [stack] = s.stacks[..] else {
            bail!("--sessions-child runs exactly one stack");
        };
        let v = child(stack, s)?;
        println!("{}", serde_json::to_string(&v)?);
        // Tens of thousands of sockets and tasks: the kernel lets them go faster than drops.
        std::process::exit(0);
    }
    let started = Instant::now();
    let end = started + s.deadline;
    // roam-net's multi-sockets publish to a shared-memory table of their network namespace,
    // which other roam-net processes on this machine read: give the bench's a table of its
    // own, of the same size and code.
    let shm = std::env::var_os("ROAM_NET_SHM").is_none().then(|| {
        PathBuf::from(format!(
            "/dev/shm/roam-bench-sessions-{}",
            std::process::id()
        ))
    });
    let mut out = Map::new();
    out.insert("sessions".into(), json!(s.sessions));
    for (i, &stack) in s.stacks.iter().enumerate() {
        let later = (s.stacks.len() - i - 1) as u32;
        let left = end.saturating_duration_since(Instant::now());
        let budget = left
            .saturating_sub(PER_LATER_STACK * later)
            .max(Duration::from_secs(60));
        eprintln!(
            "{}: {} sessions (deadline {} s)...",
            stack.name(),
            s.sessions,
            budget.as_secs()
        );
        let mut v = run_child(stack, s, budget, shm.as_ref());
        if v.get("aggregate_gbit").is_some() {
            // The reference without the others: one session alone in a process of its own.
            eprintln!("{}: one session alone...", stack.name());
            let alone = Settings {
                sessions: 1,
                active: vec![1],
                idle_seconds: 1,
                idle_settle: 1,
                ..s.clone()
            };
            let a = run_child(stack, &alone, Duration::from_secs(120), shm.as_ref());
            report::add_alone(&mut v, &a);
        }
        if let Some(p) = &shm {
            let _ = std::fs::remove_file(p);
        }
        eprintln!("  {v}");
        match stack {
            Stack::Roam => {
                if let Value::Object(m) = v {
                    for (k, v) in m {
                        if k != "sessions" && k != "stack" {
                            out.insert(k, v);
                        }
                    }
                }
            }
            _ => {
                out.insert(stack.name().into(), v);
            }
        }
    }
    if s.stacks.contains(&Stack::Roam) {
        let targets = report::targets(&Value::Object(out.clone()));
        out.insert("targets".into(), targets);
    }
    out.insert(
        "settings".into(),
        json!({
            "active_seconds": s.active_seconds,
            "idle_seconds": s.idle_seconds,
            "open_concurrency": s.concurrency,
            "probe_sessions": PROBE.min(s.sessions),
            "wall_s": started.elapsed().as_secs_f64(),
        }),
    );
    println!("{}", serde_json::to_string_pretty(&Value::Object(out))?);
    Ok(())
}

/// Run one stack in a child process within `budget` (killed a minute past it): its JSON, or
/// `{"error": ...}` saying why there is none. The child's progress is passed on to stderr.
fn run_child(stack: Stack, s: &Settings, budget: Duration, shm: Option<&PathBuf>) -> Value {
    match child_process(stack, s, budget, shm) {
        Ok(v) => v,
        Err(e) => json!({ "sessions": s.sessions, "error": format!("{e:#}") }),
    }
}

/// Run one stack in a child process: [`run_child`], with the reason when there is no JSON.
fn child_process(
    stack: Stack,
    s: &Settings,
    budget: Duration,
    shm: Option<&PathBuf>,
) -> Result<Value> {
    let exe = std::env::current_exe().context("finding this binary")?;
    let active: Vec<String> = s.active.iter().map(|k| k.to_string()).collect();
    let mut cmd = Command::new(exe);
    cmd.args(["bench", "net", "--sessions-child", "--stacks", stack.name()])
        .arg(format!("--sessions={}", s.sessions))
        .arg(format!("--active={}", active.join(",")))
        .arg(format!("--active-seconds={}", s.active_seconds))
        .arg(format!("--idle-seconds={}", s.idle_seconds))
        .arg(format!("--idle-settle={}", s.idle_settle))
        .arg(format!("--open-concurrency={}", s.concurrency))
        .arg(format!("--sessions-deadline={}", budget.as_secs().max(1)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(p) = shm {
        cmd.env("ROAM_NET_SHM", p);
    }
    let mut child = cmd.spawn().context("starting the child process")?;
    let mut stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut v = String::new();
        let _ = stdout.read_to_string(&mut v);
        v
    });
    let last = Arc::new(Mutex::new(String::new()));
    let last2 = last.clone();
    let err = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("  {line}");
            *last2.lock().unwrap() = line;
        }
    });
    let kill_at = Instant::now() + budget + Duration::from_secs(60);
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if Instant::now() >= kill_at {
            let _ = child.kill();
            let _ = child.wait();
            let _ = err.join();
            bail!(
                "killed: no result within {} s of its deadline; its last progress: {}",
                (budget + Duration::from_secs(60)).as_secs(),
                last.lock().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = err.join();
    let text = out
        .join()
        .map_err(|_| anyhow!("reading the child's output"))?;
    if !status.success() {
        bail!("{status}: {}", last.lock().unwrap());
    }
    serde_json::from_str(&text).with_context(|| format!("the child's output: {text:?}"))
}

/// Measure one stack here (the child).
fn child(stack: Stack, set: &Settings) -> Result<Value> {
    usage::raise_nofile();
    match stack {
        Stack::Roam => measure(
            Sessions::new(|c| roam::Roam::new(set.sessions, c))?,
            "roam",
            set,
        ),
        Stack::Tcp => measure(Sessions::new(tcp::Tcp::new)?, "tcp", set),
        Stack::Quic => measure(Sessions::new(quic::Quic::new)?, "quic", set),
    }
    .map(|mut v| {
        v["stack"] = json!(stack.name());
        v
    })
}
