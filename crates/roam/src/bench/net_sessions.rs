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
//!   receive buffer (network namespace wide), which explain a collapse of TCP or QUIC.
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

use std::io::{BufRead, BufReader, Read as _};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use clap::ValueEnum;
use roam_net::proto::Label;
use roam_net::runtime::blocking::{Listener, MultiSocket};
use serde_json::{json, Map, Value};

use super::net::{lo, roam_options, CC};

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

/// The targets of issue 48 ("at the scale of a relay"), reported, not tuned toward.
const TARGET_KIB: f64 = 64.0;
const TARGET_AGGREGATE_1000: f64 = 0.8;
const TARGET_WAKEUPS: f64 = 1.0;

/// Sessions open when the small idle window is measured.
const PROBE: usize = 10;
/// Bytes per send of an active session.
const CHUNK: usize = 1 << 20;
/// Ramp-up of an active run before its bytes count.
const RAMP: Duration = Duration::from_secs(1);
/// Descriptors kept free beyond what the sessions need.
const FD_MARGIN: u64 = 64;
/// Time kept for each stack after the one running (and its run of one session alone).
const PER_LATER_STACK: Duration = Duration::from_secs(300);
/// Time the phases after the opening need, besides the active runs: three idle windows and
/// the pauses around them.
const AFTER_OPENING: Duration = Duration::from_secs(30);

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
            add_alone(&mut v, &a);
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
        let targets = targets(&Value::Object(out.clone()));
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

/// Add to a stack's figures `v` one session's rate alone (`alone`: the figures of a run with
/// one session) and the aggregates as ratios to it.
fn add_alone(v: &mut Value, alone: &Value) {
    let runs = [
        &alone["aggregate_gbit"]["1"],
        &alone["one_session_gbit_after"],
    ];
    let runs: Vec<f64> = runs.iter().filter_map(|r| r.as_f64()).collect();
    if runs.is_empty() {
        v["one_session_alone_error"] = alone["error"].clone();
        return;
    }
    let one = runs.iter().sum::<f64>() / runs.len() as f64;
    let ratios: Map<String, Value> = v["aggregate_vs_one"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.keys())
        .map(|k| {
            let r = v["aggregate_gbit"][k].as_f64().map(|g| g / one);
            (k.clone(), json!(r.filter(|r| r.is_finite())))
        })
        .collect();
    v["one_session_alone_gbit"] = json!(one);
    v["aggregate_vs_one_alone"] = Value::Object(ratios);
}

/// The targets and whether roam meets them (`null`: not measured). The aggregate
/// counts as met only against both references, one session among the idle ones and one
/// alone: idle sessions that starve even one active session would otherwise pass by
/// dividing by the starved figure.
fn targets(roam: &Value) -> Value {
    let f = |v: &Value| v.as_f64();
    let kib = f(&roam["idle_kib_per_session"]);
    let agg = match (
        f(&roam["aggregate_vs_one"]["1000"]),
        f(&roam["aggregate_vs_one_alone"]["1000"]),
    ) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let wake = match (
        f(&roam["idle_wakeups_per_session_per_s"]),
        f(&roam["idle_wakeups_per_session_per_s_at_10"]),
    ) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    json!({
        "idle_kib_per_session_at_most": TARGET_KIB,
        "aggregate_vs_one_1000_at_least": TARGET_AGGREGATE_1000,
        "idle_wakeups_per_session_per_s_at_most": TARGET_WAKEUPS,
        "roam_met": {
            "idle_kib_per_session": kib.map(|k| k <= TARGET_KIB),
            "aggregate_vs_one_1000": agg.map(|a| a >= TARGET_AGGREGATE_1000),
            "idle_wakeups_per_session_per_s": wake.map(|w| w <= TARGET_WAKEUPS),
        },
    })
}

/// Run one stack in a child process within `budget` (killed a minute past it): its JSON, or
/// `{"error": ...}` saying why there is none. The child's progress is passed on to stderr.
fn run_child(stack: Stack, s: &Settings, budget: Duration, shm: Option<&PathBuf>) -> Value {
    match child_process(stack, s, budget, shm) {
        Ok(v) => v,
        Err(e) => json!({ "sessions": s.sessions, "error": format!("{e:#}") }),
    }
}

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

// ----- measuring, in the child ------------------------------------------------------------------

/// One stack's sessions: the client ends held here, the server ends held by their receiving
/// tasks.
trait Sessions {
    /// A client end.
    type Client: Send + 'static;
    /// Open one session (blocking; called from several threads at once).
    fn connector(&self) -> Arc<dyn Fn() -> Result<Self::Client, String> + Send + Sync>;
    /// Keep opened client ends.
    fn add(&mut self, c: Vec<Self::Client>);
    /// Client ends held.
    fn len(&self) -> usize;
    /// Sessions the server application has accepted.
    fn accepted(&self) -> usize;
    /// Why the server could not accept, if it could not.
    fn server_error(&self) -> Option<String>;
    /// Bytes the receivers got so far.
    fn received(&self) -> u64;
    /// Start sending bulk data on the first `k` sessions until `stop`.
    fn start(&mut self, k: usize, stop: &Arc<AtomicBool>);
    /// Wait (up to `timeout`) for the senders to stop.
    fn finish(&mut self, timeout: Duration) -> Result<(), String>;
}

/// The process's resources now.
#[derive(Clone, Copy, Debug, Default)]
struct Usage {
    rss_kib: u64,
    anon_kib: u64,
    shmem_kib: u64,
    threads: u64,
    /// Context switches of every thread, ended ones included.
    switches: u64,
    cpu_us: u64,
    /// TCP keepalives the network namespace sent.
    keepalives: u64,
}

fn usage() -> Usage {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |k: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Usage {
        rss_kib: field("VmRSS:"),
        anon_kib: field("RssAnon:"),
        shmem_kib: field("RssShmem:"),
        threads: field("Threads:"),
        switches: (ru.ru_nvcsw + ru.ru_nivcsw) as u64,
        cpu_us: us(ru.ru_utime) + us(ru.ru_stime),
        keepalives: tcp_keepalives(),
    }
}

/// TcpExt `TCPKeepAlive` of `/proc/net/netstat` (0 when unreadable).
fn tcp_keepalives() -> u64 {
    proc_net("/proc/net/netstat", "TcpExt:", "TCPKeepAlive")
}

/// Counter `name` of the `prefix` table of `/proc/net/netstat` or `/proc/net/snmp` (a line of
/// names, then a line of values; 0 when unreadable).
fn proc_net(file: &str, prefix: &str, name: &str) -> u64 {
    let t = std::fs::read_to_string(file).unwrap_or_default();
    let mut table = t.lines().filter(|l| l.starts_with(prefix));
    let (Some(names), Some(values)) = (table.next(), table.next()) else {
        return 0;
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == name)
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

/// Open file descriptors.
fn fd_count() -> u64 {
    // Less the one reading the directory.
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64 - 1)
}

/// Rates over an idle window.
#[derive(Clone, Copy, Debug, Default)]
struct Rates {
    switches: f64,
    cpu_us: f64,
    keepalives: f64,
    /// RSS growth, KiB a second.
    rss_kib: f64,
}

impl Rates {
    /// Per session, net of `base` (floored at 0).
    fn per_session(&self, base: &Rates, n: usize) -> Rates {
        let n = n.max(1) as f64;
        Rates {
            switches: ((self.switches - base.switches) / n).max(0.0),
            cpu_us: ((self.cpu_us - base.cpu_us) / n).max(0.0),
            keepalives: ((self.keepalives - base.keepalives) / n).max(0.0),
            rss_kib: (self.rss_kib - base.rss_kib) / n,
        }
    }
}

/// Sleep `secs` idle and return the rates over it.
fn idle_window(tag: &str, what: &str, secs: u64) -> Rates {
    eprintln!("[{tag}] idle {secs} s with {what}...");
    let (a, t) = (usage(), Instant::now());
    std::thread::sleep(Duration::from_secs(secs));
    let (b, dt) = (usage(), t.elapsed().as_secs_f64());
    Rates {
        switches: (b.switches - a.switches) as f64 / dt,
        cpu_us: (b.cpu_us - a.cpu_us) as f64 / dt,
        keepalives: b.keepalives.saturating_sub(a.keepalives) as f64 / dt,
        rss_kib: (b.rss_kib as f64 - a.rss_kib as f64) / dt,
    }
}

/// Raise the soft RLIMIT_NOFILE to the hard limit.
fn raise_nofile() {
    // SAFETY: getrlimit/setrlimit on a local struct.
    unsafe {
        let mut l: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < l.rlim_max {
            l.rlim_cur = l.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
}

/// (soft, hard) RLIMIT_NOFILE.
fn nofile() -> (u64, u64) {
    // SAFETY: getrlimit on a local struct.
    unsafe {
        let mut l: libc::rlimit = std::mem::zeroed();
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut l);
        (l.rlim_cur as u64, l.rlim_max as u64)
    }
}

/// How many of `want` sessions fit in the descriptors, given `per` descriptors a session and
/// `open` open now; raises the limits as far as the process may. With fewer than `want`, why.
fn fitting(want: usize, per: u64, open: u64) -> (usize, Option<String>) {
    let need = open + per * want as u64 + FD_MARGIN;
    if need > nofile().0 {
        // Raising the hard limit needs CAP_SYS_RESOURCE: tried, and fine if refused.
        let l = libc::rlimit {
            rlim_cur: need as libc::rlim_t,
            rlim_max: need.max(nofile().1) as libc::rlim_t,
        };
        // SAFETY: setrlimit reads a local struct.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &l) };
    }
    let (soft, hard) = nofile();
    if need <= soft {
        return (want, None);
    }
    let fit = (soft.saturating_sub(open + FD_MARGIN) / per.max(1)) as usize;
    let why = format!(
        "{want} sessions need about {need} file descriptors ({per} per session, counted on the \
         first one), but RLIMIT_NOFILE is {soft} (hard limit {hard}, which this process may \
         not raise): opened {fit}; raise the hard limit (e.g. `ulimit -Hn {need}` as root) \
         to open them all"
    );
    (fit, Some(why))
}

/// Open `count` more sessions from `concurrency` threads, until `deadline`; returns once the
/// server application has accepted every one opened (up to 10 s later). `Err`: why fewer
/// were opened (those that were are kept).
fn open_many<S: Sessions>(
    s: &mut S,
    count: usize,
    concurrency: usize,
    deadline: Instant,
    tag: &str,
) -> Result<(), String> {
    if count == 0 {
        return Ok(());
    }
    let accepted_before = s.accepted();
    let connect = s.connector();
    let next = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(Mutex::new(Vec::with_capacity(count)));
    let error: Arc<Mutex<Option<String>>> = Arc::default();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let mut threads = Vec::new();
    for _ in 0..concurrency.clamp(1, count) {
        let (connect, next, halt) = (connect.clone(), next.clone(), stop.clone());
        let (opened, why, done) = (opened.clone(), error.clone(), done_tx.clone());
        let t = std::thread::Builder::new()
            .name("bench-open".into())
            .stack_size(1 << 20)
            .spawn(move || {
                while !halt.load(Ordering::Relaxed) && next.fetch_add(1, Ordering::Relaxed) < count
                {
                    match connect() {
                        Ok(c) => opened.lock().unwrap().push(c),
                        Err(e) => {
                            why.lock().unwrap().get_or_insert(e);
                            halt.store(true, Ordering::Relaxed);
                        }
                    }
                }
                let _ = done.send(());
            });
        match t {
            Ok(t) => threads.push(t),
            Err(e) => {
                stop.store(true, Ordering::Relaxed);
                error
                    .lock()
                    .unwrap()
                    .get_or_insert(format!("starting a thread to open sessions: {e}"));
                break;
            }
        }
    }
    drop(done_tx);
    let (t0, mut shown) = (Instant::now(), Instant::now());
    let mut finished = 0;
    while finished < threads.len() {
        match done_rx.recv_timeout(Duration::from_millis(200)) {
            Ok(()) => finished += 1,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if Instant::now() >= deadline && !stop.swap(true, Ordering::Relaxed) {
            error.lock().unwrap().get_or_insert(format!(
                "opening stopped at the deadline (--sessions-deadline), after {:.0} s",
                t0.elapsed().as_secs_f64()
            ));
        }
        if shown.elapsed() >= Duration::from_secs(2) {
            shown = Instant::now();
            let n = opened.lock().unwrap().len();
            eprintln!(
                "[{tag}] opened {n} of {count} ({:.0}/s), the server accepted {}",
                n as f64 / t0.elapsed().as_secs_f64(),
                s.accepted() - accepted_before
            );
        }
    }
    for t in threads {
        let _ = t.join();
    }
    let opened = std::mem::take(&mut *opened.lock().unwrap());
    let n = opened.len();
    s.add(opened);
    let mut error = error.lock().unwrap().take();
    let until = Instant::now() + Duration::from_secs(10);
    while s.accepted() < accepted_before + n && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(1));
    }
    if s.accepted() < accepted_before + n {
        error.get_or_insert(format!(
            "{n} sessions connected but the server accepted {} of them within 10 s{}",
            s.accepted() - accepted_before,
            s.server_error()
                .map_or(String::new(), |e| format!(" (the server: {e})"))
        ));
    }
    error.map_or(Ok(()), Err)
}

/// What one active run measured.
struct Run {
    /// Bytes per second the `k` sessions moved in all (see the module doc).
    bps: f64,
    /// Why the senders did not all stop cleanly when told (the rate stands).
    error: Option<String>,
    /// Kernel counters over the measured window: TCP memory pressure entered (TcpExt
    /// `TCPMemoryPressures`), UDP datagrams dropped for a full receive buffer (Udp
    /// `RcvbufErrors`); both for the whole network namespace.
    tcp_memory_pressures: u64,
    udp_rcvbuf_errors: u64,
}

/// Run `k` sessions' senders and measure them; senders still sending 20 s after being told
/// to stop are aborted (and reported).
fn throughput<S: Sessions>(s: &mut S, k: usize, secs: u64, tag: &str) -> Run {
    let stop = Arc::new(AtomicBool::new(false));
    s.start(k, &stop);
    std::thread::sleep(RAMP);
    let kernel = || {
        (
            proc_net("/proc/net/netstat", "TcpExt:", "TCPMemoryPressures"),
            proc_net("/proc/net/snmp", "Udp:", "RcvbufErrors"),
        )
    };
    let (b0, t0, k0) = (s.received(), Instant::now(), kernel());
    std::thread::sleep(Duration::from_secs(secs));
    let (b1, dt, k1) = (s.received(), t0.elapsed().as_secs_f64(), kernel());
    stop.store(true, Ordering::Relaxed);
    let error = s.finish(Duration::from_secs(20)).err();
    // Let what the senders left in flight arrive before the next run counts.
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let b = s.received();
        std::thread::sleep(Duration::from_millis(300));
        if s.received() == b || Instant::now() >= until {
            break;
        }
    }
    let run = Run {
        bps: (b1 - b0) as f64 / dt,
        error,
        tcp_memory_pressures: k1.0.saturating_sub(k0.0),
        udp_rcvbuf_errors: k1.1.saturating_sub(k0.1),
    };
    eprintln!(
        "[{tag}] {k} active: {:.3} Gbit/s (TCP memory pressure {}, UDP receive-buffer drops {}){}",
        run.bps * 8e-9,
        run.tcp_memory_pressures,
        run.udp_rcvbuf_errors,
        run.error
            .as_ref()
            .map_or(String::new(), |e| format!("; {e}"))
    );
    run
}

/// Measure one stack here.
fn child(stack: Stack, set: &Settings) -> Result<Value> {
    raise_nofile();
    match stack {
        Stack::Roam => measure(RoamSessions::new(set.sessions)?, "roam", set),
        Stack::Tcp => measure(TcpSessions::new()?, "tcp", set),
        Stack::Quic => measure(QuicSessions::new()?, "quic", set),
    }
    .map(|mut v| {
        v["stack"] = json!(stack.name());
        v
    })
}

/// Measure `s`, with no session open yet (see the module doc).
fn measure<S: Sessions>(mut s: S, tag: &str, set: &Settings) -> Result<Value> {
    let started = Instant::now();
    let deadline = started + set.deadline;
    let actives: Vec<usize> = set
        .active
        .iter()
        .copied()
        .filter(|&k| k >= 1 && k <= set.sessions)
        .collect();
    // What must be left when the opening stops: the idle windows and the active runs, each
    // of which may take its ramp-up, its window, 20 s for the senders to stop and 30 s for
    // the last bytes to arrive.
    let reserve = AFTER_OPENING
        + Duration::from_secs(3 * set.idle_seconds + set.idle_settle)
        + Duration::from_secs(set.active_seconds + 51) * (actives.len() as u32 + 2);
    let open_deadline = deadline
        .checked_sub(reserve)
        .unwrap_or(started)
        .max(started + Duration::from_secs(10));
    let mut errors = Vec::new();

    let fds_before = fd_count();
    open_many(&mut s, 1, 1, open_deadline, tag)
        .map_err(|e| anyhow!("the first session did not open: {e}"))?;
    std::thread::sleep(Duration::from_secs(1));
    let fds_per_session = fd_count().saturating_sub(fds_before);
    let (target, why) = fitting(set.sessions, fds_per_session, fd_count());
    if let Some(why) = why {
        eprintln!("[{tag}] {why}");
        errors.push(why);
    }
    let base = idle_window(tag, "the warm-up session only", set.idle_seconds);
    let (before, fds_at_start) = (usage(), fd_count());

    let probe = target.min(PROBE);
    let t = Instant::now();
    let mut r = open_many(&mut s, probe, set.concurrency, open_deadline, tag);
    let mut opening = t.elapsed();
    let probed = s.len() - 1;
    std::thread::sleep(Duration::from_secs(1));
    let at_probe = idle_window(tag, &format!("{probed} sessions"), set.idle_seconds);
    if r.is_ok() && target > probed {
        eprintln!("[{tag}] opening {} sessions...", target - probed);
        let t = Instant::now();
        r = open_many(&mut s, target - probed, set.concurrency, open_deadline, tag);
        opening += t.elapsed();
    }
    if let Err(e) = r {
        eprintln!("[{tag}] stopped opening: {e}");
        errors.push(e);
    }
    let n = s.len() - 1;
    if n == 0 {
        bail!("no session opened: {}", errors.join("; "));
    }
    let accept_per_s = n as f64 / opening.as_secs_f64();
    eprintln!("[{tag}] {n} sessions open, {accept_per_s:.0}/s");
    if set.idle_settle > 2 {
        eprintln!("[{tag}] letting them sit idle {} s...", set.idle_settle);
    }
    std::thread::sleep(Duration::from_secs(set.idle_settle));
    let at_n = idle_window(tag, &format!("{n} sessions"), set.idle_seconds);
    let idle = usage();
    let fds_idle = fd_count();
    let per = |a: u64, b: u64| (b as f64 - a as f64) / n as f64;
    let wake_n = at_n.per_session(&base, n);
    let wake_probe = at_probe.per_session(&base, probed);
    eprintln!(
        "[{tag}] idle: {:.1} KiB, {:.2} wake-ups/s ({:.2} at {probed}), {:.1} us CPU/s a session",
        per(before.rss_kib, idle.rss_kib),
        wake_n.switches,
        wake_probe.switches,
        wake_n.cpu_us
    );

    let mut kernel = Map::new();
    let mut run = |s: &mut S, k: usize, key: String| -> f64 {
        let r = throughput(s, k, set.active_seconds, tag);
        if let Some(e) = r.error {
            errors.push(format!("{k} active sessions: {e}"));
        }
        kernel.insert(
            key,
            json!({
                "tcp_memory_pressures": r.tcp_memory_pressures,
                "udp_rcvbuf_errors": r.udp_rcvbuf_errors,
            }),
        );
        r.bps
    };
    let one = run(&mut s, 1, "1".into());
    let aggregate: Vec<(usize, Option<f64>)> = actives
        .iter()
        .map(|&k| (k, (k <= n).then(|| run(&mut s, k, k.to_string()))))
        .collect();
    let one_after = run(&mut s, 1, "1_after".into());
    let reference = (one + one_after) / 2.0;
    let mut gbit = Map::new();
    let mut ratios = Map::new();
    gbit.insert("1".into(), json!(one * 8e-9));
    for (k, b) in aggregate {
        gbit.insert(k.to_string(), json!(b.map(|b| b * 8e-9)));
        let ratio = b.map(|b| b / reference).filter(|r| r.is_finite());
        ratios.insert(k.to_string(), json!(ratio));
    }
    let mut v = json!({
        "sessions": set.sessions,
        "sessions_reached": n,
        "per_session_counts": "both ends (client and server in one process)",
        "idle_kib_per_session": per(before.rss_kib, idle.rss_kib),
        "idle_anon_kib_per_session": per(before.anon_kib, idle.anon_kib),
        "idle_kib_per_session_growth_per_min": wake_n.rss_kib * 60.0,
        "idle_settle_s": set.idle_settle,
        "idle_shmem_kib_per_session": per(before.shmem_kib, idle.shmem_kib),
        "accept_per_s": accept_per_s,
        "aggregate_vs_one": ratios,
        "aggregate_gbit": gbit,
        "one_session_gbit_after": one_after * 8e-9,
        "active_kernel": kernel,
        "idle_wakeups_per_session_per_s": wake_n.switches,
        "idle_wakeups_per_session_per_s_at_10": wake_probe.switches,
        "idle_cpu_us_per_session_per_s": wake_n.cpu_us,
        "idle_cpu_us_per_session_per_s_at_10": wake_probe.cpu_us,
        "idle_tcp_keepalives_per_session_per_s": wake_n.keepalives,
        "idle_process_cpu_percent": at_n.cpu_us / 1e4,
        "threads_per_session": per(before.threads, idle.threads),
        "fds_per_session": per(fds_at_start, fds_idle),
        "rss_mib": { "before": before.rss_kib as f64 / 1024.0, "idle": idle.rss_kib as f64 / 1024.0 },
        "probe_sessions": probed,
        "seconds": started.elapsed().as_secs_f64(),
    });
    if !errors.is_empty() {
        v["error"] = json!(errors.join("; "));
    }
    Ok(v)
}

// ----- roam -------------------------------------------------------------------------------------

struct RoamSessions {
    addr: SocketAddr,
    clients: Vec<MultiSocket>,
    accepted: Arc<AtomicUsize>,
    got: Arc<AtomicU64>,
    server_error: Arc<Mutex<Option<String>>>,
    senders: Vec<tokio::task::JoinHandle<Result<(), String>>>,
}

impl RoamSessions {
    fn new(n: usize) -> Result<RoamSessions> {
        let mut server = roam_options(lo());
        // A relay's operator sizes its listener for its clients: every session here comes
        // from 127.0.0.1, and the bench opens them `--open-concurrency` at a time.
        server.max_sessions = n + 64;
        server.max_connections_per_source = 2 * n + 64;
        server.max_pending_per_source = server.max_pending_handshakes;
        let l = Listener::bind((Ipv4Addr::LOCALHOST, 0).into(), server)?;
        let addr = l.local_addr();
        let accepted = Arc::new(AtomicUsize::new(0));
        let got = Arc::new(AtomicU64::new(0));
        let server_error: Arc<Mutex<Option<String>>> = Arc::default();
        let (acc, got2, err) = (accepted.clone(), got.clone(), server_error.clone());
        let rt = roam_net::runtime::blocking::runtime();
        std::thread::Builder::new()
            .name("bench-accept".into())
            .spawn(move || loop {
                match l.accept() {
                    Ok(ms) => {
                        let (ms, got) = (ms.as_async().clone(), got2.clone());
                        rt.spawn(async move {
                            while let Ok(Some(d)) = ms.recv().await {
                                got.fetch_add(d.data.len() as u64, Ordering::Relaxed);
                            }
                        });
                        acc.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        *err.lock().unwrap() = Some(e.to_string());
                        return;
                    }
                }
            })?;
        Ok(RoamSessions {
            addr,
            clients: Vec::new(),
            accepted,
            got,
            server_error,
            senders: Vec::new(),
        })
    }
}

impl Sessions for RoamSessions {
    type Client = MultiSocket;

    fn connector(&self) -> Arc<dyn Fn() -> Result<MultiSocket, String> + Send + Sync> {
        let addr = self.addr;
        Arc::new(move || MultiSocket::connect(addr, roam_options(lo())).map_err(|e| e.to_string()))
    }

    fn add(&mut self, c: Vec<MultiSocket>) {
        self.clients.extend(c);
    }

    fn len(&self) -> usize {
        self.clients.len()
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::Relaxed)
    }

    fn server_error(&self) -> Option<String> {
        self.server_error.lock().unwrap().clone()
    }

    fn received(&self) -> u64 {
        self.got.load(Ordering::Relaxed)
    }

    fn start(&mut self, k: usize, stop: &Arc<AtomicBool>) {
        let rt = roam_net::runtime::blocking::runtime();
        let chunk = Bytes::from(vec![0x5au8; CHUNK]);
        for c in &self.clients[..k] {
            let (ms, stop, chunk) = (c.as_async().clone(), stop.clone(), chunk.clone());
            self.senders.push(rt.spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    ms.send(Label::BackgroundLarge, chunk.clone(), None)
                        .await
                        .map_err(|e| e.to_string())?;
                }
                Ok(())
            }));
        }
    }

    fn finish(&mut self, timeout: Duration) -> Result<(), String> {
        let rt = roam_net::runtime::blocking::runtime();
        join_senders(&rt, std::mem::take(&mut self.senders), timeout).map(|_| ())
    }
}

/// Wait for sender tasks (up to `timeout` in all): the first error, if any.
fn join_senders<T>(
    rt: &tokio::runtime::Handle,
    senders: Vec<tokio::task::JoinHandle<Result<T, String>>>,
    timeout: Duration,
) -> Result<Vec<T>, String> {
    rt.block_on(async move {
        let until = tokio::time::Instant::now() + timeout;
        let mut out = Vec::new();
        let mut first_error = None;
        let n = senders.len();
        for mut h in senders {
            match tokio::time::timeout_at(until, &mut h).await {
                Ok(Ok(Ok(t))) => out.push(t),
                Ok(Ok(Err(e))) => {
                    first_error.get_or_insert(e);
                }
                Ok(Err(e)) => {
                    first_error.get_or_insert(format!("a sender panicked: {e}"));
                }
                Err(_) => {
                    h.abort();
                    first_error.get_or_insert(format!(
                        "senders still sending {} s after being told to stop (of {n}), aborted",
                        timeout.as_secs()
                    ));
                }
            }
        }
        first_error.map_or(Ok(out), Err)
    })
}

// ----- tcp --------------------------------------------------------------------------------------

/// A tokio runtime of two workers, like roam-net's.
fn two_workers() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

struct TcpSessions {
    rt: tokio::runtime::Runtime,
    addr: SocketAddr,
    clients: Vec<tokio::net::TcpStream>,
    accepted: Arc<AtomicUsize>,
    got: Arc<AtomicU64>,
    server_error: Arc<Mutex<Option<String>>>,
    senders: Vec<tokio::task::JoinHandle<Result<tokio::net::TcpStream, String>>>,
}

/// Receive until the end of the stream, counting; the read buffer is allocated once data
/// first comes, so an idle connection holds none.
async fn drain_tcp(s: tokio::net::TcpStream, got: Arc<AtomicU64>) {
    let mut buf = Vec::new();
    loop {
        if s.readable().await.is_err() {
            return;
        }
        if buf.is_empty() {
            buf = vec![0u8; 256 << 10];
        }
        match s.try_read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                got.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => return,
        }
    }
}

impl TcpSessions {
    fn new() -> Result<TcpSessions> {
        let rt = two_workers()?;
        let l = rt.block_on(tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))?;
        let addr = l.local_addr()?;
        let accepted = Arc::new(AtomicUsize::new(0));
        let got = Arc::new(AtomicU64::new(0));
        let server_error: Arc<Mutex<Option<String>>> = Arc::default();
        let (acc, got2, err) = (accepted.clone(), got.clone(), server_error.clone());
        rt.spawn(async move {
            loop {
                match l.accept().await {
                    Ok((s, _)) => {
                        let _ = socket2::SockRef::from(&s).set_tcp_congestion(CC.as_bytes());
                        tokio::spawn(drain_tcp(s, got2.clone()));
                        acc.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        *err.lock().unwrap() = Some(e.to_string());
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        });
        Ok(TcpSessions {
            rt,
            addr,
            clients: Vec::new(),
            accepted,
            got,
            server_error,
            senders: Vec::new(),
        })
    }
}

impl Sessions for TcpSessions {
    type Client = tokio::net::TcpStream;

    fn connector(&self) -> Arc<dyn Fn() -> Result<tokio::net::TcpStream, String> + Send + Sync> {
        let (addr, rt) = (self.addr, self.rt.handle().clone());
        Arc::new(move || {
            let s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(10))
                .map_err(|e| format!("connecting: {e}"))?;
            socket2::SockRef::from(&s)
                .set_tcp_congestion(CC.as_bytes())
                .map_err(|e| e.to_string())?;
            s.set_nonblocking(true).map_err(|e| e.to_string())?;
            let _rt = rt.enter();
            tokio::net::TcpStream::from_std(s).map_err(|e| e.to_string())
        })
    }

    fn add(&mut self, c: Vec<tokio::net::TcpStream>) {
        self.clients.extend(c);
    }

    fn len(&self) -> usize {
        self.clients.len() + self.senders.len()
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::Relaxed)
    }

    fn server_error(&self) -> Option<String> {
        self.server_error.lock().unwrap().clone()
    }

    fn received(&self) -> u64 {
        self.got.load(Ordering::Relaxed)
    }

    fn start(&mut self, k: usize, stop: &Arc<AtomicBool>) {
        let chunk = Bytes::from(vec![0x5au8; CHUNK]);
        for mut c in self.clients.drain(..k) {
            let (stop, chunk) = (stop.clone(), chunk.clone());
            self.senders.push(self.rt.spawn(async move {
                use tokio::io::AsyncWriteExt;
                while !stop.load(Ordering::Relaxed) {
                    c.write_all(&chunk).await.map_err(|e| e.to_string())?;
                }
                Ok(c)
            }));
        }
    }

    fn finish(&mut self, timeout: Duration) -> Result<(), String> {
        let back = join_senders(self.rt.handle(), std::mem::take(&mut self.senders), timeout)?;
        self.clients.extend(back);
        Ok(())
    }
}

// ----- quic -------------------------------------------------------------------------------------

/// The server's name in its self-signed certificate.
const QUIC_NAME: &str = "sessions.roam.bench";

struct QuicSessions {
    rt: tokio::runtime::Runtime,
    addr: SocketAddr,
    /// The client endpoint (one UDP socket for every connection).
    endpoint: quinn::Endpoint,
    /// The server's endpoint, kept open.
    _server: quinn::Endpoint,
    clients: Vec<quinn::Connection>,
    accepted: Arc<AtomicUsize>,
    got: Arc<AtomicU64>,
    server_error: Arc<Mutex<Option<String>>>,
    senders: Vec<tokio::task::JoinHandle<Result<(), String>>>,
}

/// The transport both ends use: quinn's defaults, but idle connections kept (a 60 s idle
/// timeout and keep-alives every 10 s, where the default closes them after 30 s).
fn quic_transport() -> Result<Arc<quinn::TransportConfig>> {
    let mut t = quinn::TransportConfig::default();
    t.max_idle_timeout(Some(quinn::IdleTimeout::try_from(Duration::from_secs(60))?));
    t.keep_alive_interval(Some(Duration::from_secs(10)));
    Ok(Arc::new(t))
}

/// Receive a stream to its end, counting.
async fn drain_quic(mut r: quinn::RecvStream, got: Arc<AtomicU64>) {
    while let Ok(Some(c)) = r.read_chunk(usize::MAX, true).await {
        got.fetch_add(c.bytes.len() as u64, Ordering::Relaxed);
    }
}

impl QuicSessions {
    fn new() -> Result<QuicSessions> {
        use quinn::rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer};
        let rt = two_workers()?;
        let cert = rcgen::generate_simple_self_signed(vec![QUIC_NAME.into()])?;
        let der = CertificateDer::from(cert.cert);
        let key = PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der());
        let mut server = quinn::ServerConfig::with_single_cert(vec![der.clone()], key.into())?;
        server.transport_config(quic_transport()?);
        let mut roots = quinn::rustls::RootCertStore::empty();
        roots.add(der)?;
        let mut client = quinn::ClientConfig::with_root_certificates(Arc::new(roots))?;
        client.transport_config(quic_transport()?);
        let (server_ep, endpoint) = rt.block_on(async {
            let s = quinn::Endpoint::server(server, (Ipv4Addr::LOCALHOST, 0).into())?;
            let mut c = quinn::Endpoint::client((Ipv4Addr::LOCALHOST, 0).into())?;
            c.set_default_client_config(client);
            anyhow::Ok((s, c))
        })?;
        let addr = server_ep.local_addr()?;
        let accepted = Arc::new(AtomicUsize::new(0));
        let got = Arc::new(AtomicU64::new(0));
        let server_error: Arc<Mutex<Option<String>>> = Arc::default();
        let (acc, got2, err, ep) = (
            accepted.clone(),
            got.clone(),
            server_error.clone(),
            server_ep.clone(),
        );
        rt.spawn(async move {
            while let Some(incoming) = ep.accept().await {
                let (acc, got, err) = (acc.clone(), got2.clone(), err.clone());
                tokio::spawn(async move {
                    let conn = match incoming.await {
                        Ok(c) => c,
                        Err(e) => {
                            *err.lock().unwrap() = Some(e.to_string());
                            return;
                        }
                    };
                    acc.fetch_add(1, Ordering::Relaxed);
                    while let Ok(r) = conn.accept_uni().await {
                        tokio::spawn(drain_quic(r, got.clone()));
                    }
                });
            }
        });
        Ok(QuicSessions {
            rt,
            addr,
            endpoint,
            _server: server_ep,
            clients: Vec::new(),
            accepted,
            got,
            server_error,
            senders: Vec::new(),
        })
    }
}

impl Sessions for QuicSessions {
    type Client = quinn::Connection;

    fn connector(&self) -> Arc<dyn Fn() -> Result<quinn::Connection, String> + Send + Sync> {
        let (addr, rt, ep) = (self.addr, self.rt.handle().clone(), self.endpoint.clone());
        Arc::new(move || {
            rt.block_on(async {
                let connecting = ep.connect(addr, QUIC_NAME).map_err(|e| e.to_string())?;
                match tokio::time::timeout(Duration::from_secs(10), connecting).await {
                    Ok(r) => r.map_err(|e| e.to_string()),
                    Err(_) => Err("no QUIC handshake within 10 s".to_string()),
                }
            })
        })
    }

    fn add(&mut self, c: Vec<quinn::Connection>) {
        self.clients.extend(c);
    }

    fn len(&self) -> usize {
        self.clients.len()
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::Relaxed)
    }

    fn server_error(&self) -> Option<String> {
        self.server_error.lock().unwrap().clone()
    }

    fn received(&self) -> u64 {
        self.got.load(Ordering::Relaxed)
    }

    fn start(&mut self, k: usize, stop: &Arc<AtomicBool>) {
        let chunk = Bytes::from(vec![0x5au8; CHUNK]);
        for c in &self.clients[..k] {
            let (c, stop, chunk) = (c.clone(), stop.clone(), chunk.clone());
            self.senders.push(self.rt.spawn(async move {
                let mut s = c.open_uni().await.map_err(|e| e.to_string())?;
                while !stop.load(Ordering::Relaxed) {
                    s.write_chunk(chunk.clone())
                        .await
                        .map_err(|e| e.to_string())?;
                }
                s.finish().map_err(|e| e.to_string())
            }));
        }
    }

    fn finish(&mut self, timeout: Duration) -> Result<(), String> {
        join_senders(self.rt.handle(), std::mem::take(&mut self.senders), timeout).map(|_| ())
    }
}
