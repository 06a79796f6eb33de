//! `roam net proxy` and `roam net relay` carry unmodified programs through the emulator: curl
//! (and `roam transfer get --socks5`) through the SOCKS5 proxy, plain and over TLS, and iperf3
//! through the transparent proxy (its connections redirected by the firewall in the client
//! namespace), all to servers in the server namespace reached only through the relay, for
//! proxies that prove the relay's key; a proxy without it, and requests for the relay host's
//! own loopback services, get nothing. Needs root (namespaces), curl, iperf3, iptables and
//! python3; `./scripts/test` installs them as root, and the test skips with a one-line reason
//! where any is missing. The commands' refusals (no key, a key others can read) and help need
//! none of them.

use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
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

/// Write `text` to a new file only its owner may read.
fn private(path: &std::path::Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// Run `roam ARGS` here (no namespace) to completion, killed after 10 s: (success, standard
/// error and output).
fn run_roam(args: &[&str]) -> (bool, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_roam"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            return (false, format!("roam {args:?} still running after 10 s"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout),
    )
}

fn temp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("roam-net-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A relay without a key does not start (and says how to run one without, explicitly); nor
/// does a proxy. (Before: the relay started and served whoever reached its port.)
#[test]
fn a_relay_without_a_key_refuses_to_start() {
    let (ok, out) = run_roam(&[
        "net",
        "relay",
        "--listen",
        "127.0.0.1:0",
        "--allow",
        "192.0.2.1",
    ]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("--key-file") && out.contains("--insecure-no-auth"),
        "{out}"
    );
    let (ok, out) = run_roam(&[
        "net",
        "proxy",
        "--listen",
        "127.0.0.1:0",
        "--relay",
        "127.0.0.1:9",
    ]);
    assert!(!ok && out.contains("--key-file"), "{out}");
}

/// Key files, and the relay's TLS private key, that others may read are refused, as OpenSSH
/// refuses such a private key; `roam net key` makes one only its owner reads.
#[test]
fn a_key_file_others_can_read_is_refused() {
    let d = temp("keys");
    let key = d.join("key");
    let (ok, out) = run_roam(&["net", "key", "--out", &key.display().to_string()]);
    assert!(ok, "{out}");
    let mode = std::fs::metadata(&key).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let k = key.display().to_string();
    for args in [
        vec![
            "net",
            "relay",
            "--listen",
            "127.0.0.1:0",
            "--allow",
            "192.0.2.1",
            "--key-file",
            &k,
        ],
        vec![
            "net",
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--relay",
            "127.0.0.1:9",
            "--key-file",
            &k,
        ],
    ] {
        let (ok, out) = run_roam(&args);
        assert!(!ok && out.contains("too open"), "{args:?}: {out}");
    }
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let c = rcgen::generate_simple_self_signed(vec!["relay.test".to_string()]).unwrap();
    let (cert, tls_key) = (d.join("cert.pem"), d.join("tls-key.pem"));
    std::fs::write(&cert, c.cert.pem()).unwrap();
    std::fs::write(&tls_key, c.signing_key.serialize_pem()).unwrap();
    std::fs::set_permissions(&tls_key, std::fs::Permissions::from_mode(0o640)).unwrap();
    let (ok, out) = run_roam(&[
        "net",
        "relay",
        "--listen",
        "127.0.0.1:0",
        "--allow",
        "192.0.2.1",
        "--key-file",
        &k,
        "--tls-cert",
        &cert.display().to_string(),
        "--tls-key",
        &tls_key.display().to_string(),
    ]);
    assert!(!ok && out.contains("too open"), "{out}");
    let _ = std::fs::remove_dir_all(&d);
}

/// The new flags and every limit are in the commands' help, with their defaults.
#[test]
fn the_help_documents_the_flags_and_limits() {
    let (ok, relay) = run_roam(&["net", "relay", "--help"]);
    assert!(ok, "{relay}");
    for f in [
        "--key-file",
        "--insecure-no-auth",
        "--tls-cert",
        "--tls-key",
        "--request-timeout",
        "--idle-timeout",
        "--max-connections",
        "[default: 10s]",
        "[default: 10m]",
        "[default: 256]",
        "refuses to start unless --insecure-no-auth",
        "Limits",
        "512 bytes",
    ] {
        assert!(relay.contains(f), "relay --help lacks {f}:\n{relay}");
    }
    let (ok, proxy) = run_roam(&["net", "proxy", "--help"]);
    assert!(ok, "{proxy}");
    for f in [
        "--key-file",
        "--tls-ca",
        "--tls-name",
        "--handshake-timeout",
        "--request-timeout",
        "--idle-timeout",
        "--max-per-source",
        "[default: 128]",
        "Limits",
    ] {
        assert!(proxy.contains(f), "proxy --help lacks {f}:\n{proxy}");
    }
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
    // The key both ends share, and the TLS relay's certificate (for its address).
    let key = dir.join("key");
    let _ = std::fs::remove_file(&key);
    let (ok, out) = run_roam(&["net", "key", "--out", &key.display().to_string()]);
    assert!(ok, "{out}");
    let cert = rcgen::generate_simple_self_signed(vec![server.clone()]).unwrap();
    let (cert_pem, key_pem) = (dir.join("cert.pem"), dir.join("tls-key.pem"));
    std::fs::write(&cert_pem, cert.cert.pem()).unwrap();
    private(&key_pem, &cert.signing_key.serialize_pem());
    let path = |p: &std::path::Path| p.display().to_string();

    // The server side: the relays (one under the wide rules of the report, one over TLS), a
    // web server and an iperf3 server, all on 10.77.0.1, and a web server only its own
    // programs should reach, on 127.0.0.1.
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
            s("0.0.0.0/0"),
            s("--allow"),
            s("::/0"),
            s("--key-file"),
            path(&key),
        ],
        &log("relay.log"),
    );
    let _tls_relay = start(
        &emu,
        true,
        vec![
            roam.clone(),
            s("net"),
            s("relay"),
            s("--listen"),
            format!("{server}:7501"),
            s("--allow"),
            format!("{server}/32"),
            s("--key-file"),
            path(&key),
            s("--tls-cert"),
            path(&cert_pem),
            s("--tls-key"),
            path(&key_pem),
        ],
        &log("tls-relay.log"),
    );
    let _local_web = start(
        &emu,
        true,
        vec![
            s("python3"),
            s("-m"),
            s("http.server"),
            s("8081"),
            s("--bind"),
            s("127.0.0.1"),
            s("--directory"),
            dir.display().to_string(),
        ],
        &log("local-web.log"),
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
    for port in [7500, 7501, 8080, 5201] {
        wait_listening(&emu, true, SocketAddr::new(SERVER_ADDR.into(), port));
    }
    wait_listening(&emu, true, SocketAddr::from(([127, 0, 0, 1], 8081)));

    // The device: a SOCKS5 proxy and a transparent one with the key, one over TLS, and one
    // without the key.
    let proxy = |args: &[&str], name: &str| {
        let mut v = vec![roam.clone(), s("net"), s("proxy")];
        v.extend(args.iter().map(|a| a.to_string()));
        start(&emu, false, v, &log(name))
    };
    let (relay, tls_relay, key) = (
        format!("{server}:7500"),
        format!("{server}:7501"),
        path(&key),
    );
    let _socks = proxy(
        &[
            "--relay",
            &relay,
            "--key-file",
            &key,
            "--listen",
            "127.0.0.1:1080",
        ],
        "proxy.log",
    );
    let _transparent = proxy(
        &[
            "--relay",
            &relay,
            "--key-file",
            &key,
            "--listen",
            "127.0.0.1:1081",
            "--transparent",
            "--label",
            "5201=background-large",
        ],
        "transparent.log",
    );
    let _tls = proxy(
        &[
            "--relay",
            &tls_relay,
            "--key-file",
            &key,
            "--tls-ca",
            &path(&cert_pem),
            "--listen",
            "127.0.0.1:1082",
        ],
        "tls-proxy.log",
    );
    let _keyless = proxy(
        &[
            "--relay",
            &relay,
            "--insecure-no-auth",
            "--listen",
            "127.0.0.1:1083",
        ],
        "keyless-proxy.log",
    );
    for port in [1080, 1081, 1082, 1083] {
        wait_listening(&emu, false, SocketAddr::from(([127, 0, 0, 1], port)));
    }
    let logs = || {
        [
            "relay.log",
            "tls-relay.log",
            "proxy.log",
            "transparent.log",
            "tls-proxy.log",
            "keyless-proxy.log",
        ]
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

    // curl, through SOCKS5, plain and over TLS.
    let got = log("got");
    // `--socks5` resolves names here and asks for addresses; `--socks5-hostname` asks for names.
    let curl_with = |how: &str, socks: &str, url: &str| {
        let _ = std::fs::remove_file(&got);
        run_in_client(
            &emu,
            vec![
                s("curl"),
                s("-sS"),
                s("--max-time"),
                s("30"),
                s(how),
                s(socks),
                s("-o"),
                got.display().to_string(),
                s(url),
            ],
        )
    };
    let curl = |socks: &str, url: &str| curl_with("--socks5", socks, url);
    for socks in ["127.0.0.1:1080", "127.0.0.1:1082"] {
        let (ok, out) = curl(socks, &format!("http://{server}:8080/file"));
        assert!(ok, "curl through {socks} failed: {out}\n{}", logs());
        assert!(
            std::fs::read(&got).unwrap() == file,
            "curl's copy differs\n{}",
            logs()
        );
    }

    // The attacks: without the key; the relay host's loopback service under `--allow
    // 0.0.0.0/0 --allow ::/0`, by address, IPv4-mapped and by name. None gets a byte, and the
    // local server sees no request.
    let (ok, out) = curl("127.0.0.1:1083", &format!("http://{server}:8080/file"));
    assert!(!ok, "a proxy without the key got through: {out}");
    for (how, url) in [
        ("--socks5", "http://127.0.0.1:8081/file"),
        ("--socks5", "http://[::ffff:127.0.0.1]:8081/file"),
        ("--socks5-hostname", "http://localhost:8081/file"),
    ] {
        let (ok, out) = curl_with(how, "127.0.0.1:1080", url);
        assert!(!ok, "{url} was fetched through the relay: {out}");
    }
    let local = std::fs::read_to_string(log("local-web.log")).unwrap_or_default();
    assert!(
        !local.contains("GET"),
        "the local server was reached: {local}"
    );
    let relayed = std::fs::read_to_string(log("relay.log")).unwrap_or_default();
    assert!(
        relayed.contains("did not prove") && relayed.contains("is not allowed"),
        "{relayed}"
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
