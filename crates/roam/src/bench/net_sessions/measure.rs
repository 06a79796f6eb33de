//! The measuring loop of the child, written once for every stack: open the sessions, measure
//! them idle, then run `--active` of them at once (see the parent module's doc for what each
//! figure means).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use serde_json::{json, Map, Value};

use super::sessions::{Sessions, Transport};
use super::usage::{fd_count, fitting, idle_window, proc_net, usage};
use super::Settings;

/// Sessions open when the small idle window is measured.
pub(super) const PROBE: usize = 10;
/// Ramp-up of an active run before its bytes count.
const RAMP: Duration = Duration::from_secs(1);
/// Time the phases after the opening need, besides the active runs: three idle windows and
/// the pauses around them.
const AFTER_OPENING: Duration = Duration::from_secs(30);

/// Measure `s`, with no session open yet (see the parent module's doc).
pub(super) fn measure<T: Transport>(
    mut s: Sessions<T>,
    tag: &str,
    set: &Settings,
) -> Result<Value> {
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
    let mut cost = Map::new();
    let mut run = |s: &mut Sessions<T>, k: usize, key: String| -> f64 {
        let r = throughput(s, k, set.active_seconds, tag);
        if let Some(e) = r.error {
            errors.push(format!("{k} active sessions: {e}"));
        }
        kernel.insert(
            key.clone(),
            json!({
                "tcp_memory_pressures": r.tcp_memory_pressures,
                "udp_rcvbuf_errors": r.udp_rcvbuf_errors,
            }),
        );
        cost.insert(
            key,
            json!({ "cpu_s_per_gb": r.cost.cpu_s_per_gb, "switches_per_gb": r.cost.switches_per_gb }),
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
        "active_cost": cost,
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

/// Open `count` more sessions from `concurrency` threads, until `deadline`; returns once the
/// server application has accepted every one opened (up to 10 s later). `Err`: why fewer
/// were opened (those that were are kept).
fn open_many<T: Transport>(
    s: &mut Sessions<T>,
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
    /// Bytes per second the `k` sessions moved in all (see the parent module's doc).
    bps: f64,
    /// What the window's bytes cost the process (every thread: both ends, idle sessions
    /// too): what the aggregate costs, beside how fast it went.
    cost: super::usage::Cost,
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
fn throughput<T: Transport>(s: &mut Sessions<T>, k: usize, secs: u64, tag: &str) -> Run {
    let stop = Arc::new(AtomicBool::new(false));
    s.start(k, &stop);
    std::thread::sleep(RAMP);
    let kernel = || {
        (
            proc_net("/proc/net/netstat", "TcpExt:", "TCPMemoryPressures"),
            proc_net("/proc/net/snmp", "Udp:", "RcvbufErrors"),
        )
    };
    let (b0, t0, k0, c0) = (s.received(), Instant::now(), kernel(), super::usage::cpu());
    std::thread::sleep(Duration::from_secs(secs));
    let (b1, dt, k1, c1) = (
        s.received(),
        t0.elapsed().as_secs_f64(),
        kernel(),
        super::usage::cpu(),
    );
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
        cost: c1.cost_since(&c0, b1 - b0),
        error,
        tcp_memory_pressures: k1.0.saturating_sub(k0.0),
        udp_rcvbuf_errors: k1.1.saturating_sub(k0.1),
    };
    eprintln!(
        "[{tag}] {k} active: {:.3} Gbit/s, {:.2} CPU s/GB, {:.0} switches/GB (TCP memory \
         pressure {}, UDP receive-buffer drops {}){}",
        run.bps * 8e-9,
        run.cost.cpu_s_per_gb,
        run.cost.switches_per_gb,
        run.tcp_memory_pressures,
        run.udp_rcvbuf_errors,
        run.error
            .as_ref()
            .map_or(String::new(), |e| format!("; {e}"))
    );
    run
}
