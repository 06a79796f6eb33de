//! `roam precog`: rules, status, forget, refusal of a corrupt state, and (where Debian's
//! Chromium is installed) browse and replay against pages `python3 -m http.server` serves on
//! loopback.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use roam_precog::{Action, Event, Forest, Locator, Locators, State};

fn roam(state: &Path, args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_roam"));
    c.arg("precog")
        .arg(args[0])
        .arg("--state")
        .arg(state)
        .args(&args[1..]);
    c.output().expect("roam runs")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("roam-precog-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

struct Server(Child, u16);
impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A site on loopback: `/index.html` links to `/sports.html`.
fn serve(root: &Path) -> Server {
    std::fs::write(
        root.join("index.html"),
        "<html><body><a id=\"sports\" href=\"/sports.html\">Sports</a></body></html>",
    )
    .unwrap();
    std::fs::write(root.join("sports.html"), "<html><body>scores</body></html>").unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("python3")
        .args([
            "-m",
            "http.server",
            "--bind",
            "127.0.0.1",
            &port.to_string(),
        ])
        .current_dir(root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 runs");
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Server(child, port)
}

fn chromium() -> bool {
    let ok = Path::new("/usr/bin/chromium").is_file();
    if !ok {
        eprintln!("skipped: /usr/bin/chromium is not installed (apt-get install chromium)");
    }
    ok
}

#[test]
fn rules_status_forget_and_a_corrupt_state() {
    let d = dir("rules");
    let o = roam(&d, &["status"]);
    assert!(
        o.status.success() && text(&o).contains("nothing recorded yet"),
        "{}",
        text(&o)
    );
    // Trees as `browse` would have left them.
    let mut f = Forest::new();
    let click = Action {
        locators: Locators::new(vec![Locator::Id {
            id: "sports".into(),
        }])
        .unwrap(),
        event: Event::Click,
    };
    for root in ["http://news.example/", "http://bank.example/"] {
        f.record(
            &roam_precog::Path {
                root: root.into(),
                actions: vec![click.clone()],
            },
            1,
        );
    }
    State::new(&d).save_forest(&f).unwrap();
    let o = roam(&d, &["rule", "bank.example", "--replay", "off"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("replay off"), "{}", text(&o));
    let o = roam(&d, &["rule", "bank.example/x", "--record", "off"]);
    assert!(
        !o.status.success() && text(&o).contains("a domain such as"),
        "{}",
        text(&o)
    );
    let o = roam(
        &d,
        &[
            "rule",
            "news.example",
            "--sign-in",
            "http://elsewhere.example/login",
        ],
    );
    assert!(
        !o.status.success() && text(&o).contains("not a URL on"),
        "{}",
        text(&o)
    );
    let o = roam(&d, &["status", "--json", "--fraction", "1"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let replay = v["replay"].as_array().unwrap();
    assert_eq!(replay.len(), 1, "bank.example's replay is off: {v}");
    assert_eq!(replay[0]["root"], "http://news.example/");
    let o = roam(&d, &["forget", "news.example"]);
    assert!(text(&o).contains("forgot 2 nodes"), "{}", text(&o));
    // A window needs a display; without one, browse says so before starting anything.
    let o = Command::new(env!("CARGO_BIN_EXE_roam"))
        .args(["precog", "browse", "--state"])
        .arg(&d)
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .output()
        .unwrap();
    assert!(
        !o.status.success() && text(&o).contains("--headless"),
        "{}",
        text(&o)
    );
    std::fs::write(d.join("forest.json"), b"{\"version\":1,\"forest\":[1,2]}").unwrap();
    let o = roam(&d, &["status"]);
    assert!(
        !o.status.success() && text(&o).contains("forest.json"),
        "{}",
        text(&o)
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn browse_records_and_replay_fetches() {
    if !chromium() {
        return;
    }
    let d = dir("browse");
    let site = dir("site");
    let s = serve(&site);
    let url = format!("http://127.0.0.1:{}/index.html", s.1);
    // No one clicks in a headless browse: it records the page opened, a root-only path.
    let o = roam(&d, &["browse", "--headless", "--url", &url, "--for", "4s"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("1 paths recorded"), "{}", text(&o));
    // Replay is for WiFi: refused at once without it, waited for with --when wifi.
    let conditions = d.join("conditions.json");
    let set = |wifi: bool| {
        let c = serde_json::json!({"wifi": wifi, "battery": 0.9, "charging": false,
            "load": 0.0, "disk_free": 1u64 << 40});
        std::fs::write(&conditions, c.to_string()).unwrap();
    };
    let c = conditions.to_str().unwrap();
    set(false);
    let o = roam(&d, &["replay", "--conditions", c]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("not on WiFi"), "{}", text(&o));
    let o = roam(
        &d,
        &[
            "replay",
            "--when",
            "wifi",
            "--wait",
            "1s",
            "--conditions",
            c,
        ],
    );
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("gave up after") && text(&o).contains("not on WiFi"),
        "{}",
        text(&o)
    );
    set(true);
    let o = roam(
        &d,
        &[
            "replay",
            "--json",
            "--step-timeout",
            "10s",
            "--reuse-pages",
            "0s",
            "--when",
            "wifi",
            "--conditions",
            c,
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(v["done"], 1, "{v}");
    // What it fetched counts against the day's allowance, kept across replays.
    let o = roam(&d, &["status", "--json"]);
    let st: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(st["allowance"]["spent_today_bytes"], v["bytes"], "{st}");
    assert!(st["allowance"]["bytes_per_day"].is_null(), "{st}");
    // An allowance already spent today refuses the next replay.
    let o = roam(
        &d,
        &["replay", "--mb-per-day", "0.000001", "--conditions", c],
    );
    if v["bytes"].as_u64().unwrap() > 0 {
        assert!(!o.status.success(), "{}", text(&o));
        assert!(text(&o).contains("allowance is spent"), "{}", text(&o));
    }
    let o = roam(&d, &["status", "--json"]);
    let st: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(st["allowance"]["bytes_per_day"], 1, "{st}");
    let o = roam(&d, &["replay", "--mb-per-day=-1", "--conditions", c]);
    assert!(
        text(&o).contains("--mb-per-day: a number of at least 0"),
        "{}",
        text(&o)
    );
    // The profile's cache already held the page from the browse: fetched again, or cached.
    assert!(
        v["bytes"].as_u64().unwrap() > 0 || v["cached"].as_u64().unwrap() > 0,
        "{v}"
    );
    drop(s);
    std::fs::remove_dir_all(&d).unwrap();
    std::fs::remove_dir_all(&site).unwrap();
}

/// The processes whose environment holds `mark` (inherited from the lab below), by command
/// name, `name` if not empty.
fn marked(mark: &str, name: &str) -> Vec<(i32, String)> {
    let mut out = vec![];
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if !env.split(|b| *b == 0).any(|v| v == mark.as_bytes()) {
            continue;
        }
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if name.is_empty() || comm.trim() == name {
            out.push((pid, comm.trim().to_string()));
        }
    }
    out
}

/// `roam lab precog` stopped by SIGTERM while its browser runs stops that browser, and every
/// other process it started, before it ends (a killed run once left 33 Chromium processes
/// replaying in a namespace nobody would clean).
#[test]
fn a_stopped_lab_leaves_no_browser_running() {
    if !chromium() || !roam_emu::testing::privileged_or_skip() {
        return;
    }
    let d = dir("lab-stopped");
    let mark = format!("ROAM_TEST_MARK=lab-stopped-{}", std::process::id());
    let (k, v) = mark.split_once('=').unwrap();
    let mut lab = Command::new(env!("CARGO_BIN_EXE_roam"))
        .args([
            "lab",
            "precog",
            "--quick",
            "--apps",
            "news",
            "--systems",
            "precog",
        ])
        .arg("--out")
        .arg(d.join("lab"))
        .env(k, v)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    while marked(&mark, "chromium").is_empty() {
        assert!(
            lab.try_wait().unwrap().is_none(),
            "the lab ended before it started a browser"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "no browser within 300 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(lab.id() as i32, libc::SIGTERM) };
    let status = lab.wait().unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{status:?}");
    let left = marked(&mark, "");
    assert!(
        left.is_empty(),
        "still running after the lab ended: {left:?}"
    );
    let _ = std::fs::remove_dir_all(&d);
}
