//! `summary.json`, written into the log directory at shutdown: how long the run lasted and when
//! it began, each link's totals per direction, how late the forwarders were, and what else the
//! figures depend on (kernel, TCP and MPTCP settings, load).
//!
//! A run's numbers are only comparable with another's under the same conditions, so the
//! conditions are written beside them: a loaded machine shows as late packets
//! ([`crate::forward::LATE`]) and a high load average, a different congestion control as a
//! different `tcp_congestion_control`.

use super::config::{io_err, EmuError};
use super::hosts::spawn_in;
use super::links::LinkHandle;
use roam_core::Clock;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::atomic::Ordering;

/// Write `<dir>/summary.json` for a run on `clock` over `links`, reading the client's TCP and
/// MPTCP settings inside `client_ns` (they are per network namespace).
pub(super) fn write_summary(
    dir: &Path,
    clock: Clock,
    links: &[LinkHandle],
    client_ns: &OwnedFd,
) -> Result<(), EmuError> {
    let elapsed = clock.now().as_secs_f64();
    // The wall-clock time of the emulator's time zero, so that samples taken outside
    // it (`scripts/ss-sample.sh`) line up with the per-link logs.
    let unix_now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(f64::NAN, |d| d.as_secs_f64());
    let (mut pkts, mut late) = (0u64, 0u64);
    for l in links {
        for d in [&l.up, &l.down] {
            pkts += d.forwarded_pkts.load(Ordering::Relaxed);
            late += d.late_pkts.load(Ordering::Relaxed);
        }
    }
    // Read where the client's sockets live: congestion control and MPTCP settings are
    // per network namespace.
    let client = spawn_in(client_ns, run_metadata)
        .join()
        .ok()
        .and_then(|r| r.ok())
        .unwrap_or(serde_json::Value::Null);
    let summary = serde_json::json!({
        "duration_s": elapsed,
        "started_unix_s": unix_now - elapsed,
        "late_packets_fraction": if pkts > 0 { late as f64 / pkts as f64 } else { 0.0 },
        "host": run_metadata(),
        "client_namespace": client,
        "links": links.iter().map(|l| serde_json::json!({
            "name": l.name,
            "client_addr": l.client_addr.to_string(),
            "up": l.up.snapshot(),
            "down": l.down.snapshot(),
        })).collect::<Vec<_>>(),
    });
    let path = dir.join("summary.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&summary).unwrap() + "\n",
    )
    .map_err(io_err(format!("writing {}", path.display())))
}

/// What a run's figures depend on besides the links: the kernel, TCP's congestion control and
/// buffers, MPTCP's settings (in the calling thread's network namespace) and the host's load
/// average, for `summary.json`. Files that cannot be read are left out.
fn run_metadata() -> serde_json::Value {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
    };
    let mut m = serde_json::Map::new();
    for (key, path) in [
        ("kernel", "/proc/sys/kernel/osrelease"),
        (
            "tcp_congestion_control",
            "/proc/sys/net/ipv4/tcp_congestion_control",
        ),
        ("tcp_rmem", "/proc/sys/net/ipv4/tcp_rmem"),
        ("tcp_wmem", "/proc/sys/net/ipv4/tcp_wmem"),
        (
            "tcp_slow_start_after_idle",
            "/proc/sys/net/ipv4/tcp_slow_start_after_idle",
        ),
        ("mptcp_enabled", "/proc/sys/net/mptcp/enabled"),
        ("mptcp_path_manager", "/proc/sys/net/mptcp/path_manager"),
        ("mptcp_scheduler", "/proc/sys/net/mptcp/scheduler"),
        ("loadavg", "/proc/loadavg"),
    ] {
        if let Some(v) = read(path) {
            m.insert(key.into(), serde_json::Value::String(v));
        }
    }
    serde_json::Value::Object(m)
}
