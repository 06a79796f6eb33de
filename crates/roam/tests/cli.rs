//! End-to-end tests of the `roam` binary. Tests that need the emulator skip with a one-line
//! reason when this machine cannot create namespaces and TUN devices (they run in CI as root).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn roam() -> Command {
    Command::new(env!("CARGO_BIN_EXE_roam"))
}

/// A scratch directory for one test, removed when the test ends (pass or fail).
struct TempDir(PathBuf);

impl std::ops::Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tmpdir(tag: &str) -> TempDir {
    let d = std::env::temp_dir().join(format!("roam-cli-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    TempDir(d)
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `roam trace stats --link LINK`, run to completion.
fn trace_stats(link: String) -> std::process::Output {
    roam()
        .args(["trace", "stats", "--link"])
        .arg(link)
        .output()
        .unwrap()
}

fn emu_available() -> bool {
    roam_emu::testing::privileged_or_skip()
}

#[test]
fn malformed_trace_names_file_line_and_expectation() {
    let d = tmpdir("badtrace");
    let f = d.join("bad.down");
    std::fs::write(&f, "1\n2\n2.5\n").unwrap();
    let o = trace_stats(format!("cell=down={},up=1mbit", f.display()));
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err.contains(&format!(
            "{}:3: expected a non-negative integer millisecond timestamp, found `2.5`",
            f.display()
        )),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn malformed_cdf_and_schedule_and_csv() {
    let d = tmpdir("badcdf");
    let on = d.join("on.cdf");
    let off = d.join("off.cdf");
    std::fs::write(&on, "1 0.1\n2 0.5\n3 1.7\n").unwrap();
    std::fs::write(&off, "1 0.5\n2 1\n").unwrap();
    let o = trace_stats(format!(
        "wifi=rate=1mbit,onoff={}:{}",
        on.display(),
        off.display()
    ));
    let (_, err) = text(&o);
    assert!(
        err.contains(&format!(
            "{}:3: cumulative probability 1.7 is outside [0, 1]",
            on.display()
        )),
        "{err}"
    );

    let sched = d.join("sched");
    std::fs::write(&sched, "1 off\n2 sideways\n").unwrap();
    let o = trace_stats(format!("wifi=rate=1mbit,onoff={}", sched.display()));
    assert!(text(&o).1.contains(&format!(
        "{}:2: expected `on` or `off`, found `sideways`",
        sched.display()
    )));

    let csv = d.join("t.csv");
    std::fs::write(
        &csv,
        "t_ms,down_kbps,up_kbps,rtt_ms,available\n0,100,100,20,1\n1000,100,x,20,1\n",
    )
    .unwrap();
    let o = trace_stats(format!("l=trace={}", csv.display()));
    assert!(text(&o).1.contains(&format!(
        "{}:3: expected a non-negative number for up_kbps, found `x`",
        csv.display()
    )));
}

#[test]
fn malformed_spec_and_events() {
    let o = roam()
        .args(["emu", "run", "--link", "wifi=rate=fast", "--", "true"])
        .output()
        .unwrap();
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err.contains("--link wifi=rate=fast: `fast` is not a rate (expected"),
        "{err}"
    );
    let d = tmpdir("badevents");
    let ev = d.join("events");
    std::fs::write(&ev, "1 wifi down\nlater wifi up\n").unwrap();
    let o = roam()
        .args(["emu", "run", "--link", "wifi=rate=1mbit", "--events"])
        .arg(&ev)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert!(
        text(&o)
            .1
            .contains(&format!("{}:2: `later` is not a duration", ev.display())),
        "{:?}",
        text(&o)
    );
    let o = roam()
        .args(["emu", "run", "--scenario", "beach", "--", "true"])
        .output()
        .unwrap();
    assert!(text(&o).1.contains("unknown scenario `beach`"));
}

#[test]
fn trace_stats_plot_and_baseline() {
    let o = roam()
        .args([
            "trace",
            "stats",
            "--scenario",
            "hotspot",
            "--duration",
            "60s",
        ])
        .output()
        .unwrap();
    let (out, _) = text(&o);
    assert!(o.status.success());
    assert!(out.contains("| wifi | WiFi | 600 | 600 |"), "{out}");
    assert!(out.contains("| cell | cellular | 2000 | 2000 |"), "{out}");
    let d = tmpdir("plot");
    let svg = d.join("t.svg");
    let o = roam()
        .args([
            "trace",
            "plot",
            "--scenario",
            "intermittent",
            "--duration",
            "5m",
            "-o",
        ])
        .arg(&svg)
        .output()
        .unwrap();
    assert!(o.status.success(), "{:?}", text(&o));
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.contains("<svg") && s.contains("available"));
    let o = roam()
        .args([
            "trace",
            "baseline",
            "--kind",
            "aggregation",
            "--scenario",
            "hotspot",
            "--duration",
            "3s",
        ])
        .output()
        .unwrap();
    let (out, _) = text(&o);
    assert_eq!(
        out,
        "t_ms,down_kbps,up_kbps,rtt_ms,available\n0,2600.0,2600.0,20.0,1\n1000,2600.0,2600.0,20.0,1\n2000,2600.0,2600.0,20.0,1\n"
    );
}

/// Without root, `roam emu run` and `roam lab in-paper` stop at once with one line saying why
/// (the lab before running any trial, rather than failing every trial with the same reason).
#[test]
fn without_privileges_one_line_reason() {
    if !roam_emu::sys::is_root() {
        eprintln!("skipped: needs root to drop to an unprivileged user");
        return;
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("skipped: setpriv (util-linux) not installed");
        return;
    }
    let d = tmpdir("unprivileged");
    // Writable by the unprivileged user, so only the missing privileges can stop the lab.
    std::fs::set_permissions(&*d, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let lab_out = d.join("lab");
    let emu: &[&str] = &[
        "emu",
        "run",
        "--no-log",
        "--link",
        "a=rate=1mbit",
        "--",
        "true",
    ];
    let lab_out_arg = lab_out.to_str().unwrap();
    let lab: &[&str] = &[
        "lab",
        "in-paper",
        "--apps",
        "sensing",
        "--scenarios",
        "hotspot",
        "--systems",
        "aggregation",
        "--duration",
        "1s",
        "--out",
        lab_out_arg,
    ];
    for args in [emu, lab] {
        let o = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_roam"))
            .args(args)
            .current_dir(std::env::temp_dir())
            .output()
            .unwrap();
        let (_, err) = text(&o);
        if o.status.success() {
            // The kernel allows unprivileged user namespaces with TUN: the other valid outcome.
            return;
        }
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains("root"), "{args:?}: {err}");
    }
    assert!(
        !lab_out.exists(),
        "the lab ran nothing, so it wrote nothing"
    );
}

#[test]
fn exit_status_environment_and_routing() {
    if !emu_available() {
        return;
    }
    let d = tmpdir("env");
    let o = roam()
        .args(["emu", "run", "--no-log", "--link", "wifi=rate=10mbit", "--link", "cell-2=rate=1mbit"])
        .args(["--", "sh", "-c"])
        .arg("echo $ROAM_SERVER_ADDR $ROAM_LINK_WIFI_ADDR $ROAM_LINK_CELL_2_ADDR $ROAM_LINK_CELL_2_DEV; ip route get 10.77.0.1 from $ROAM_LINK_CELL_2_ADDR; exit 7")
        .current_dir(&*d)
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(7), "{out} {err}");
    assert!(
        out.contains("10.77.0.1 10.77.1.2 10.77.2.2 cell-2"),
        "{out}"
    );
    assert!(
        out.contains("dev cell-2"),
        "a socket bound to a link's address leaves through it: {out}"
    );
    let o = roam()
        .args([
            "emu",
            "run",
            "--no-log",
            "--link",
            "a=rate=1mbit",
            "--",
            "/nonexistent/prog",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(127));
}

/// Runs `roam emu run` with a client that records its namespace and leaves a background
/// process behind; `end` decides how the run ends. Afterwards nothing may remain in the
/// namespace.
fn assert_no_leak(tag: &str, client_tail: &str, interrupt: Option<libc::c_int>) -> Option<i32> {
    let d = tmpdir(tag);
    let nsfile = d.join("ns");
    let script = format!(
        "readlink /proc/self/ns/net > {ns}.tmp && mv {ns}.tmp {ns}; sleep 300 & sleep 300 & {client_tail}",
        ns = nsfile.display()
    );
    let mut child = roam()
        .args([
            "emu",
            "run",
            "--no-log",
            "--link",
            "a=rate=1mbit",
            "--server",
            "sleep 300",
        ])
        .args(["--server-wait", "100ms", "--", "sh", "-c"])
        .arg(&script)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !nsfile.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "client never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    if let Some(sig) = interrupt {
        std::thread::sleep(Duration::from_millis(200));
        unsafe { libc::kill(child.id() as i32, sig) };
    }
    let status = child.wait().unwrap();
    let ns = std::fs::read_to_string(&nsfile).unwrap().trim().to_string();
    let mut left = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let p = e.path().join("ns/net");
        if let Ok(l) = std::fs::read_link(&p) {
            if l.to_string_lossy() == ns {
                left.push(e.file_name().to_string_lossy().into_owned());
            }
        }
    }
    assert!(left.is_empty(), "{tag}: processes left in {ns}: {left:?}");
    status.code()
}

#[test]
fn nothing_leaks_on_normal_exit_crash_and_signals() {
    if !emu_available() {
        return;
    }
    assert_eq!(assert_no_leak("normal", "exit 3", None), Some(3));
    // The client crashes: its status is 128 + SIGSEGV.
    assert_eq!(
        assert_no_leak("crash", "kill -SEGV $$", None),
        Some(128 + 11)
    );
    // Ctrl-C / SIGTERM to roam itself.
    let code = assert_no_leak("sigint", "wait", Some(libc::SIGINT));
    assert!(code.is_some(), "roam exits with a status after SIGINT");
    assert_no_leak("sigterm", "wait", Some(libc::SIGTERM));
}

/// `--packet-log` writes Mahimahi's `mm-link --log` format: every arrival, departure (with
/// its queueing delay) and drop, and the link's delivery opportunities, in time order.
#[test]
fn packet_log_is_in_mahimahi_format() {
    if !emu_available() {
        return;
    }
    let d = tmpdir("mmlog");
    let logs = d.join("logs");
    let o = roam()
        .args(["emu", "run", "--packet-log", "--log-dir"])
        .arg(&logs)
        .args([
            "--link",
            "a=rate=1mbit,queue=5pkt",
            "--",
            "python3",
            "-c",
            "import socket,time\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\nfor i in range(10):\n    s.sendto(b'x'*1000,('10.77.0.1',9))\ntime.sleep(0.5)",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{:?}", text(&o));
    let log = std::fs::read_to_string(logs.join("a.up.mm.log")).unwrap();
    assert!(log.lines().any(|l| l == "# base timestamp: 0"), "{log}");
    let rows: Vec<Vec<&str>> = log
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split(' ').collect())
        .collect();
    let times: Vec<u64> = rows.iter().map(|r| r[0].parse().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "time order");
    let kind = |k: &str| {
        rows.iter()
            .filter(|r| r[1] == k)
            .cloned()
            .collect::<Vec<_>>()
    };
    // Ten 1028-byte IP packets: five fit the queue, five are dropped.
    assert_eq!(kind("+").len(), 10, "{log}");
    assert_eq!(kind("d").len(), 5, "{log}");
    let departures = kind("-");
    assert_eq!(departures.len(), 5, "{log}");
    // At 1 Mbit/s each takes 8.2 ms: the queueing delays grow by about that much.
    let delays: Vec<u64> = departures.iter().map(|r| r[3].parse().unwrap()).collect();
    assert!(delays.windows(2).all(|w| w[1] >= w[0] + 7), "{delays:?}");
    // Opportunities: 1 Mbit/s is 83 a second of 1500 bytes.
    let opps = kind("#").len() as f64;
    let span = *times.last().unwrap() as f64 / 1e3;
    assert!(
        (opps / span - 83.3).abs() < 10.0,
        "{opps} opportunities in {span} s"
    );
}

/// `--pcap DIR` captures what each link delivers: a pcap file per link and direction whose
/// records are the client's UDP datagrams to the server, whole, stamped in order and within the
/// run's wall-clock span.
#[test]
fn pcap_captures_what_a_link_delivers() {
    if !emu_available() {
        return;
    }
    let d = tmpdir("pcap");
    let caps = d.join("caps");
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let o = roam()
        .args(["emu", "run", "--no-log", "--link", "a=rate=10mbit,delay=5ms", "--pcap"])
        .arg(&caps)
        .args([
            "--",
            "python3",
            "-c",
            "import socket,time\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\nfor i in range(20):\n    s.sendto(bytes([i])*300,('10.77.0.1',9))\n    time.sleep(0.005)",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{:?}", text(&o));
    let after = before + 60.0;
    let b = std::fs::read(caps.join("a.up.pcap")).unwrap();
    assert!(caps.join("a.down.pcap").exists());
    assert_eq!(&b[..4], &0xa1b2_c3d4u32.to_le_bytes(), "pcap magic");
    assert_eq!(
        u32::from_le_bytes(b[20..24].try_into().unwrap()),
        101,
        "raw IP"
    );
    let (mut at, mut udp, mut last) = (24, 0, 0.0);
    while at + 16 <= b.len() {
        let u = |o: usize| u32::from_le_bytes(b[at + o..at + o + 4].try_into().unwrap());
        let t = u(0) as f64 + u(4) as f64 / 1e6;
        let (incl, orig) = (u(8) as usize, u(12) as usize);
        assert_eq!(incl, orig, "whole packets");
        assert!(t >= before && t <= after && t >= last, "stamp {t}");
        last = t;
        let p = &b[at + 16..at + 16 + incl];
        // IPv4, UDP to 10.77.0.1:9 with a 300-byte payload.
        if p[0] >> 4 == 4 && p[9] == 17 && p[16..20] == [10, 77, 0, 1] && p.len() == 20 + 8 + 300 {
            assert_eq!(u16::from_be_bytes([p[22], p[23]]), 9);
            udp += 1;
        }
        at += 16 + incl;
    }
    assert_eq!(at, b.len(), "records fill the file");
    assert_eq!(udp, 20, "every datagram captured once");
}

#[test]
fn events_and_control_socket_cut_a_link() {
    if !emu_available() {
        return;
    }
    let d = tmpdir("events");
    let ev = d.join("events");
    std::fs::write(&ev, "0.4 a down\n").unwrap();
    let sock = d.join("ctl.sock");
    let log = d.join("log");
    // The client pings the server with UDP every 10 ms for 1.5 s; the events file cuts the
    // link at 0.4 s and the client restores it at 1 s through the control socket. (The
    // margins allow for Python starting slowly on a loaded machine.)
    let bin = env!("CARGO_BIN_EXE_roam");
    let script = format!(
        "python3 -c 'import socket,time\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\nt=time.time()\nwhile time.time()-t<1.5:\n    s.sendto(b\"x\"*100,(\"10.77.0.1\",9))\n    time.sleep(0.01)' & sleep 1; {bin} emu ctl $ROAM_EMU_CONTROL a up; wait"
    );
    let o = roam()
        .args([
            "emu",
            "run",
            "--link",
            "a=rate=10mbit",
            "--log-interval",
            "100ms",
            "--events",
        ])
        .arg(&ev)
        .arg("--control")
        .arg(&sock)
        .arg("--log-dir")
        .arg(&log)
        .args(["--", "sh", "-c"])
        .arg(&script)
        .output()
        .unwrap();
    assert!(o.status.success(), "{:?}", text(&o));
    let csv = std::fs::read_to_string(log.join("a.up.csv")).unwrap();
    let rows: Vec<Vec<f64>> = csv
        .lines()
        .skip(1)
        .map(|l| {
            l.split(',')
                .map(|v| v.parse().unwrap_or(f64::NAN))
                .collect()
        })
        .collect();
    // Rows: t_s, ..., [2] delivered_bytes, ..., [10] drops_outage; one for every 100 ms bin.
    let at = |t: f64| {
        rows.iter()
            .find(|r| (r[0] - t).abs() < 1e-6)
            .unwrap_or_else(|| panic!("no row for {t} s in {csv}"))
            .clone()
    };
    let (before, after): (Vec<_>, Vec<_>) = rows.iter().partition(|r| r[0] < 0.35);
    assert!(
        before.iter().any(|r| r[2] > 0.0) && before.iter().all(|r| r[10] == 0.0),
        "delivers before the cut: {before:?}"
    );
    assert!(
        at(0.6)[2] == 0.0 && at(0.6)[10] > 0.0,
        "drops during the cut: {:?}",
        at(0.6)
    );
    let restored: Vec<_> = after.iter().filter(|r| r[0] >= 1.15).collect();
    assert!(
        restored.iter().any(|r| r[2] > 0.0) && restored.iter().all(|r| r[10] == 0.0),
        "delivers after the restore: {restored:?}"
    );
    assert!(!sock.exists(), "control socket removed at exit");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(log.join("summary.json")).unwrap()).unwrap();
    let up = &summary["links"][0]["up"]["forwarding_lateness"];
    assert!(
        up["packets"].as_u64().unwrap() > 0 && up["max_ms"].as_f64().unwrap() >= 0.0,
        "the emulator's own lateness is recorded: {up}"
    );
    assert!(summary["late_packets_fraction"].as_f64().is_some());
    assert!(
        summary["host"]["kernel"].is_string()
            && summary["client_namespace"]["tcp_congestion_control"].is_string(),
        "run metadata: {summary}"
    );
    let started = summary["started_unix_s"].as_f64().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        started > now - 60.0 && started < now - 1.0,
        "time zero is when the run started (at least the 1.2 s it ran before now): {started} vs {now}"
    );
    let plot = d.join("emu.svg");
    let o = roam()
        .args(["emu", "plot"])
        .arg(&log)
        .arg("-o")
        .arg(&plot)
        .output()
        .unwrap();
    assert!(
        o.status.success()
            && std::fs::read_to_string(plot)
                .unwrap()
                .contains("a: throughput")
    );
}

/// `roam lab in-paper --resume` keeps the trials already measured, runs only the missing
/// ones, and refuses to add trials measured with other workload lengths.
#[test]
fn lab_resume_runs_only_the_missing_trials() {
    if !emu_available() {
        return;
    }
    let d = tmpdir("resume");
    let out = d.join("lab");
    // `roam lab in-paper` for sensing on the hotspot over aggregation, with `args`.
    let lab = |args: &[&str]| {
        roam()
            .args([
                "lab",
                "in-paper",
                "--apps",
                "sensing",
                "--scenarios",
                "hotspot",
            ])
            .args(["--systems", "aggregation", "--out"])
            .arg(&out)
            .args(args)
            .output()
            .unwrap()
    };
    let run = |trials: &str, duration: &str, resume: bool| {
        let mut args = vec!["--trials", trials, "--duration", duration];
        if resume {
            args.push("--resume");
        }
        lab(&args)
    };
    let rows_of = |file: &str, n: u32| -> Vec<String> {
        std::fs::read_to_string(out.join(file))
            .unwrap()
            .lines()
            .filter(|l| l.split(',').nth(3) == Some(&n.to_string()))
            .map(String::from)
            .collect()
    };
    let trial_rows = |n: u32| rows_of("trials.csv", n);
    let o = run("1", "3s", false);
    assert!(o.status.success(), "{:?}", text(&o));
    let first = trial_rows(1);
    assert!(!first.is_empty());
    // Every urgent message's latency, beside the trial's metrics.
    let first_events = rows_of("events.csv", 1);
    assert!(!first_events.is_empty());
    assert!(
        first_events.iter().all(|l| l.contains(",urgent_ms,")),
        "{first_events:?}"
    );
    let o = run("2", "3s", true);
    let (_, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("1 trial(s) kept, 1 to run"), "{err}");
    assert_eq!(trial_rows(1), first, "the kept trial is not measured again");
    assert_eq!(rows_of("events.csv", 1), first_events);
    assert!(!trial_rows(2).is_empty());
    assert!(!rows_of("events.csv", 2).is_empty());
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("2 trial(s) per cell"), "{report}");
    // The events' distribution, drawn and linked.
    assert!(report.contains("(sensing-hotspot-events.svg)"), "{report}");
    let cdf = std::fs::read_to_string(out.join("sensing-hotspot-events.svg")).unwrap();
    assert!(cdf.contains(">aggregation ("), "{cdf}");
    // Other workload lengths: refused, and nothing is lost.
    let o = run("3", "4s", true);
    let (_, err) = text(&o);
    assert!(!o.status.success());
    assert!(
        err.contains("sensing 3s") && err.contains("sensing 4s") && err.contains("--resume"),
        "{err}"
    );
    assert_eq!(trial_rows(1), first);
    // The report again from the trials, running nothing.
    std::fs::remove_file(out.join("report.md")).unwrap();
    std::fs::remove_file(out.join("sensing-hotspot-events.svg")).unwrap();
    let o = lab(&["--trials", "2", "--report-only"]);
    assert!(o.status.success(), "{:?}", text(&o));
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("Measured with roam `"), "{report}");
    assert!(out.join("sensing-hotspot-events.svg").exists());
    assert_eq!(trial_rows(1), first);
}

/// A sweep or scenario variant that cannot be run is refused before any trial, naming what is
/// wrong.
#[test]
fn lab_refuses_a_bad_sweep_naming_it() {
    let d = tmpdir("bad-sweep");
    for (args, want) in [
        (
            &["--sweep", "delay=1ms,2ms"][..],
            "unknown parameter `delay`",
        ),
        (&["--sweep", "rate=2,fast"][..], "`fast` is not a factor"),
        (
            &["--scenarios", "hotspot+queue=lots"][..],
            "hotspot+queue=lots",
        ),
    ] {
        let o = roam()
            .args(["lab", "in-paper", "--apps", "sensing", "--out"])
            .arg(d.join("lab"))
            .args(args)
            .output()
            .unwrap();
        let (_, err) = text(&o);
        assert!(!o.status.success(), "{args:?}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

/// A baseline file stands wherever a baseline name does; a bad one is refused naming it.
#[test]
fn trace_baseline_takes_a_baseline_file() {
    let d = tmpdir("baseline-file");
    let f = d.join("slow.toml");
    std::fs::write(&f, "rule = \"best-latency\"\ndecide_every = \"2s\"\n").unwrap();
    let derive = |kind: &str| {
        roam()
            .args(["trace", "baseline", "--kind", kind, "--scenario", "hotspot"])
            .args(["--duration", "4s"])
            .output()
            .unwrap()
    };
    let o = derive(f.to_str().unwrap());
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    // The hotspot never changes: the same link as the paper's every-second oracle.
    assert_eq!(out, text(&derive("best-latency")).0);
    std::fs::write(&f, "rule = \"nearest\"\n").unwrap();
    let o = derive(f.to_str().unwrap());
    let (_, err) = text(&o);
    assert!(!o.status.success());
    assert!(err.contains("slow.toml: rule: unknown baseline"), "{err}");
}

/// `roam energy` on an emulator log directory: one isolated packet on a 3G link costs what
/// Huang et al. give for one (7.38 J, modelled), a WiFi link is not metered, and a malformed
/// log is refused naming the file and line.
#[test]
fn energy_from_an_emulator_log_directory() {
    let d = tmpdir("energy");
    let header = "t_s,arrived_bytes,delivered_bytes,delivered_pkts,throughput_mbit,capacity_mbit,queue_delay_avg_ms,queue_delay_max_ms,drops_queue,drops_loss,drops_outage,available\n";
    let quiet = |n: usize| -> String {
        (0..n)
            .map(|i| format!("{:.3},0,0,0,0,1,0,0,0,0,0,1\n", i as f64 / 10.0))
            .collect()
    };
    std::fs::write(
        d.join("summary.json"),
        r#"{"duration_s": 30.0, "links": [{"name": "wifi"}, {"name": "cell"}]}"#,
    )
    .unwrap();
    for l in ["wifi", "cell"] {
        std::fs::write(
            d.join(format!("{l}.down.csv")),
            format!("{header}{}", quiet(300)),
        )
        .unwrap();
    }
    // One 100-byte packet up the 3G at 1 s; 20 KB down the WiFi at 2 s.
    let mut up = quiet(300);
    up = up.replacen("1.000,0,0,0,", "1.000,100,100,1,", 1);
    std::fs::write(d.join("cell.up.csv"), format!("{header}{up}")).unwrap();
    let wifi_up = quiet(300).replacen("2.000,0,0,0,", "2.000,20000,20000,14,", 1);
    std::fs::write(d.join("wifi.up.csv"), format!("{header}{wifi_up}")).unwrap();
    let svg = d.join("e.svg");
    let o = roam()
        .args(["energy"])
        .arg(&*d)
        .arg("-o")
        .arg(&svg)
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let cell = out.lines().find(|l| l.starts_with("| cell |")).unwrap();
    assert!(
        cell.contains("| huang2012/3g | yes | 100 B | 0 B | 7.38 J |"),
        "{out}"
    );
    let wifi = out.lines().find(|l| l.starts_with("| wifi |")).unwrap();
    assert!(wifi.contains("| no | 20000 B |"), "{out}");
    assert!(out.contains("modelled"), "{out}");
    assert!(
        out.contains("Metered data (a data plan's count): 100 B"),
        "{out}"
    );
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
    // A profile given for a link, and a bad one.
    let o = roam()
        .args(["energy", "--radio", "cell=huang2012/lte"])
        .arg(&*d)
        .arg("-o")
        .arg(&svg)
        .output()
        .unwrap();
    let (out, _) = text(&o);
    assert!(
        out.contains("| huang2012/lte | yes | 100 B | 0 B | 12.7"),
        "{out}"
    );
    let o = roam()
        .args(["energy", "--radio", "cell=huang2012/lte9"])
        .arg(&*d)
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(text(&o).1.contains("no radio `lte9`"), "{:?}", text(&o));
    std::fs::write(
        d.join("cell.up.csv"),
        format!("{header}0.000,1,x,1,0,1,0,0,0,0,0,1\n"),
    )
    .unwrap();
    let o = roam().args(["energy"]).arg(&*d).output().unwrap();
    assert!(!o.status.success());
    assert!(
        text(&o).1.contains("cell.up.csv:2: bad delivered_bytes"),
        "{:?}",
        text(&o)
    );
}

/// `roam energy --live` samples an interface's counters: traffic on loopback raises its
/// (modelled) radio, and the run ends with the table.
#[test]
fn energy_live_from_interface_counters() {
    let d = tmpdir("energy-live");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let sink = std::thread::spawn(move || {
        let (mut c, _) = listener.accept().unwrap();
        let mut buf = vec![0u8; 1 << 16];
        while std::io::Read::read(&mut c, &mut buf).unwrap_or(0) > 0 {}
    });
    let feeder = std::thread::spawn(move || {
        use std::io::Write;
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        for _ in 0..40 {
            s.write_all(&[1u8; 50_000]).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
    });
    let o = roam()
        .args([
            "energy",
            "--live",
            "lo",
            "--radio",
            "lo=huang2012/lte",
            "--for",
            "1500ms",
        ])
        .arg("-o")
        .arg(d.join("live.svg"))
        .output()
        .unwrap();
    feeder.join().unwrap();
    sink.join().unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let lo = out.lines().find(|l| l.starts_with("| lo |")).unwrap();
    // At least a promotion and part of a tail: well over a joule.
    let joules: f64 = lo
        .split('|')
        .nth(6)
        .unwrap()
        .trim()
        .trim_end_matches(" J")
        .parse()
        .unwrap();
    assert!(joules > 1.0, "{out}");
    assert!(out.contains("s  lo: "), "{out}");
}

/// `roam bench prefetch` prints its JSON without privileges or a network.
#[test]
fn bench_prefetch_prints_its_json() {
    let o = roam()
        .args(["bench", "prefetch", "--decisions", "20", "--hints", "10"])
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["decision_us"].as_f64().unwrap() > 0.0, "{out}");
    for k in ["energy", "data"] {
        assert_eq!(v["budget_overshoot"][k].as_f64(), Some(0.0), "{out}");
        assert!(
            v["budget_used_fraction"][k].as_f64().unwrap() > 0.5,
            "{out}"
        );
    }
}

/// `roam bench net`'s loopback part, short: the costs issue 48 asks for are reported for TCP
/// and the multi-socket, bulk and round trips, the voluntary context switches (the hand-offs,
/// readable on a loaded machine) among all of them.
#[test]
fn bench_net_loopback_reports_its_costs() {
    let out = roam()
        .args([
            "bench",
            "net",
            "--systems",
            "none",
            "--loopback-runs",
            "1",
            "--loopback-seconds",
            "1",
            "--round-trips",
            "200",
        ])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let num = |x: &serde_json::Value| x.as_f64().filter(|x| x.is_finite() && *x >= 0.0);
    let cpu = &v["loopback_cpu"];
    for side in ["tcp", "roam"] {
        let all = num(&cpu[format!("{side}_switches_per_gb")]);
        let voluntary = num(&cpu[format!("{side}_voluntary_switches_per_gb")]);
        assert!(all.is_some() && voluntary <= all, "{side}: {cpu}");
        let rt = &v["round_trip_us"][side];
        let all = num(&rt["switches_per_round_trip"]);
        let voluntary = num(&rt["voluntary_switches_per_round_trip"]);
        assert!(all.is_some() && voluntary <= all, "{side}: {rt}");
        assert!(num(&rt["median"]) > Some(0.0), "{side}: {rt}");
    }
}

/// `roam bench net --sessions` at a tiny scale: every stack (roam-net, TCP, QUIC) opens all
/// its sessions and reports every figure issue 48 asks for, and the active counts above N
/// are skipped. (The issue's targets are the benchmark's to report, not this test's.)
#[test]
fn bench_net_sessions_reports_every_stack() {
    let out = roam()
        .args([
            "bench",
            "net",
            "--sessions",
            "20",
            "--active",
            "10,100",
            "--active-seconds",
            "1",
            "--idle-seconds",
            "1",
            "--sessions-deadline",
            "300",
        ])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["sessions"].as_u64(), Some(20), "{stdout}");
    for (name, s) in [("roam", &v), ("tcp", &v["tcp"]), ("quic", &v["quic"])] {
        assert!(s.get("error").is_none(), "{name}: {s}\n{stderr}");
        assert_eq!(s["sessions_reached"].as_u64(), Some(20), "{name}: {s}");
        for k in [
            "idle_kib_per_session",
            "accept_per_s",
            "idle_wakeups_per_session_per_s",
            "idle_wakeups_per_session_per_s_at_10",
            "idle_cpu_us_per_session_per_s",
        ] {
            assert!(
                s[k].as_f64().is_some_and(|x| x.is_finite() && x >= 0.0),
                "{name}: {k}: {s}"
            );
        }
        assert!(s["accept_per_s"].as_f64() > Some(0.0), "{name}: {s}");
        let agg = s["aggregate_vs_one"].as_object().unwrap();
        assert!(
            agg.get("10").and_then(|r| r.as_f64()) > Some(0.0),
            "{name}: {s}"
        );
        assert!(!agg.contains_key("100"), "{name}: 100 > N was run: {s}");
        assert!(s["aggregate_gbit"]["1"].as_f64() > Some(0.0), "{name}: {s}");
    }
    assert!(v["targets"]["roam_met"].is_object(), "{stdout}");
}

/// `roam bench hostile` runs whole in a short soak: every server starts, answers honest
/// clients while attacked, and each attack reaches its server; the JSON has every figure
/// issue 43 asks for. (The targets are the benchmark's to report, not this test's: a short
/// soak on a shared machine says nothing about them.)
#[test]
fn the_hostile_soak_reports_every_server() {
    let out = roam()
        .args([
            "bench",
            "hostile",
            "--seconds",
            "4",
            "--unloaded-seconds",
            "2",
        ])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    for server in ["net", "relay", "hla", "tier"] {
        let s = &v["servers"][server];
        assert!(
            s["peak_rss_mib"].as_f64().is_some_and(|r| r > 0.0),
            "{server}: {s}"
        );
        assert!(
            s["honest_served_fraction"].as_f64().is_some(),
            "{server}: {s}"
        );
        assert!(s["latency_vs_unloaded"].as_f64().is_some(), "{server}: {s}");
        assert!(
            s["honest"]["soak"]["served"].as_u64() > Some(0),
            "{server}: {s}"
        );
        let attacks = s["attacks"].as_object().unwrap();
        assert!(attacks.len() >= 5, "{server}: {s}");
        for (name, a) in attacks {
            assert!(
                a["opened"].as_u64() > Some(0),
                "{server}: {name} never connected: {s}"
            );
        }
    }
}
