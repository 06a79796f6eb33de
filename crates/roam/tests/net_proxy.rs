//! `roam net proxy` and `roam net relay` carry unmodified programs through the emulator: curl
//! (and `roam transfer get --socks5`) through the SOCKS5 proxy, and iperf3 through the transparent proxy (its connections
//! redirected by the firewall in the client namespace), both to servers in the server
//! namespace reached only through the relay. Needs root (namespaces), curl, iperf3, iptables
//! and python3; `./scripts/test` installs them as root, and the test skips with a one-line
//! reason where any is missing.

use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use roam_emu::{Emulator, SERVER_ADDR};

/// A child process killed when the test ends, however it ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn missing_tools() -> Vec<&'static str> {
    ["curl", "iperf3", "iptables", "python3"]
        .into_iter()
        .filter(|t| {
            !Command::new("sh")
                .args(["-c", &format!("command -v {t}")])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .collect()
}

/// Start `args` in the server (`server`) or client namespace; its standard error goes to `log`.
fn start(emu: &Emulator, server: bool, args: Vec<String>, log: &std::path::Path) -> Killed {
    let err = std::fs::File::create(log).unwrap();
    let run = move || {
        Command::new(&args[0])
            .args(&args[1..])
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .unwrap()
    };
    let child = if server {
        emu.spawn_in_server(run)
    } else {
        emu.spawn_in_client(run)
    };
    Killed(child.join().unwrap().unwrap())
}

/// Run `args` to completion in the client namespace: (success, standard output).
fn run_in_client(emu: &Emulator, args: Vec<String>) -> (bool, String) {
    emu.spawn_in_client(move || {
        let out = Command::new(&args[0]).args(&args[1..]).output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    })
    .join()
    .unwrap()
    .unwrap()
}

/// Wait until something listens at `addr` in namespace `server` (or the client's).
fn wait_listening(emu: &Emulator, server: bool, addr: SocketAddr) {
    let probe = move || {
        let end = Instant::now() + Duration::from_secs(15);
        while Instant::now() < end {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    };
    let up = if server {
        emu.spawn_in_server(probe)
    } else {
        emu.spawn_in_client(probe)
    };
    assert!(up.join().unwrap().unwrap(), "nothing listens at {addr}");
}

fn s(x: &str) -> String {
    x.to_string()
}

#[test]
fn curl_and_iperf3_run_unmodified_through_the_proxy_and_the_relay() {
    let missing = missing_tools();
    if !missing.is_empty() {
        eprintln!("skipped: {} not installed", missing.join(", "));
        return;
    }
    let Some(emu) = roam_emu::testing::emulator_or_skip(&[
        "wifi=rate=20mbit,delay=10ms,queue=200pkt",
        "cell=rate=5mbit,delay=40ms,queue=200pkt",
    ]) else {
        return;
    };
    let roam = env!("CARGO_BIN_EXE_roam").to_string();
    let dir = std::env::temp_dir().join(format!("roam-net-proxy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(dir.join("file"), &file).unwrap();
    let log = |n: &str| dir.join(n);
    let server = SERVER_ADDR.to_string();

    // The server side: the relay, a web server and an iperf3 server, all on 10.77.0.1.
    let _relay = start(
        &emu,
        true,
        vec![
            roam.clone(),
            s("net"),
            s("relay"),
            s("--listen"),
            format!("{server}:7500"),
            s("--allow"),
            format!("{server}/32"),
        ],
        &log("relay.log"),
    );
    let _web = start(
        &emu,
        true,
        vec![
            s("python3"),
            s("-m"),
            s("http.server"),
            s("8080"),
            s("--bind"),
            server.clone(),
            s("--directory"),
            dir.display().to_string(),
        ],
        &log("web.log"),
    );
    let _iperf = start(
        &emu,
        true,
        vec![
            s("iperf3"),
            s("-s"),
            s("-B"),
            server.clone(),
            s("-p"),
            s("5201"),
        ],
        &log("iperf3-server.log"),
    );
    for port in [7500, 8080, 5201] {
        wait_listening(&emu, true, SocketAddr::new(SERVER_ADDR.into(), port));
    }

    // The device: a SOCKS5 proxy and a transparent one.
    let proxy = |args: &[&str], name: &str| {
        let mut v = vec![
            roam.clone(),
            s("net"),
            s("proxy"),
            s("--relay"),
            format!("{server}:7500"),
        ];
        v.extend(args.iter().map(|a| a.to_string()));
        start(&emu, false, v, &log(name))
    };
    let _socks = proxy(&["--listen", "127.0.0.1:1080"], "proxy.log");
    let _transparent = proxy(
        &[
            "--listen",
            "127.0.0.1:1081",
            "--transparent",
            "--label",
            "5201=background-large",
        ],
        "transparent.log",
    );
    for port in [1080, 1081] {
        wait_listening(&emu, false, SocketAddr::from(([127, 0, 0, 1], port)));
    }
    let logs = || {
        ["relay.log", "proxy.log", "transparent.log"]
            .iter()
            .map(|n| {
                format!(
                    "{n}: {}",
                    std::fs::read_to_string(log(n)).unwrap_or_default()
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };

    // curl, through SOCKS5.
    let got = log("got");
    let (ok, out) = run_in_client(
        &emu,
        vec![
            s("curl"),
            s("-sS"),
            s("--max-time"),
            s("30"),
            s("--socks5"),
            s("127.0.0.1:1080"),
            s("-o"),
            got.display().to_string(),
            format!("http://{server}:8080/file"),
        ],
    );
    assert!(ok, "curl failed: {out}\n{}", logs());
    assert!(
        std::fs::read(&got).unwrap() == file,
        "curl's copy differs\n{}",
        logs()
    );

    // roam's own transfer engine through the same proxy (`roam transfer get --socks5`): the
    // bulk download over the multi-socket, resumable files and all. python's server serves no
    // ranges, so the file comes in one stream (and the engine says so).
    let transfer = |socks: &str, into: &std::path::Path| {
        let mut args = vec![
            roam.clone(),
            s("transfer"),
            s("get"),
            s("--socks5"),
            s(socks),
        ];
        args.extend([s("--p"), s("2"), s("--out"), into.display().to_string()]);
        args.push(format!("http://{server}:8080/file"));
        run_in_client(&emu, args)
    };
    let into = dir.join("transfer");
    let (ok, out) = transfer("127.0.0.1:1080", &into);
    assert!(ok, "roam transfer failed: {out}\n{}", logs());
    assert!(
        std::fs::read(into.join("file")).unwrap() == file,
        "the transfer's copy differs\n{}",
        logs()
    );
    // The option is honoured: with no proxy there, the transfer fails and says why.
    let (ok, out) = transfer("127.0.0.1:1", &dir.join("nowhere"));
    assert!(!ok && out.contains("SOCKS5"), "{out}");

    // iperf3, its connections redirected to the transparent proxy by the firewall.
    let (ok, out) = run_in_client(
        &emu,
        vec![
            s("iptables"),
            s("-t"),
            s("nat"),
            s("-A"),
            s("OUTPUT"),
            s("-p"),
            s("tcp"),
            s("-d"),
            server.clone(),
            s("--dport"),
            s("5201"),
            s("-j"),
            s("REDIRECT"),
            s("--to-ports"),
            s("1081"),
        ],
    );
    if !ok {
        eprintln!("skipped: the transparent proxy (iptables cannot redirect here: {out})");
        return;
    }
    let (ok, out) = run_in_client(
        &emu,
        vec![
            s("iperf3"),
            s("-c"),
            server.clone(),
            s("-p"),
            s("5201"),
            s("-t"),
            s("3"),
            s("-J"),
        ],
    );
    assert!(ok, "iperf3 failed: {out}\n{}", logs());
    let report: serde_json::Value = serde_json::from_str(&out).expect("iperf3's JSON report");
    let bps = report["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0);
    eprintln!(
        "iperf3 through the transparent proxy: {:.1} Mbit/s",
        bps / 1e6
    );
    assert!(bps > 1e6, "iperf3 received {bps} bit/s\n{}", logs());
    let _ = std::fs::remove_dir_all(&dir);
}
