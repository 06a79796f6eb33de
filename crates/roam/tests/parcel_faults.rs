//! Horatio's faults with real processes (issue 27, item 9): the `roam parcel serve` tiers and
//! the `roam parcel` client killed with SIGKILL mid-suspend, mid-self-clean and between the
//! two phases of a handoff's commit, and the server killed mid-upload. Afterwards there is
//! exactly one owner, no committed data is lost, and the interrupted transfer resumes, sending
//! only what is missing. Everything runs on loopback; no privileges needed.
//!
//! A kill lands "in the middle" by watching the victim's effects on disk (blob files appearing,
//! a control-state file written) and killing at once; every blob is written with a sync, so an
//! upload of the test parcel lasts far longer than the watcher's 1 ms poll. A test fails, rather
//! than passing vacuously, when the command it meant to interrupt finished first.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const CHUNK: usize = 128 * 1024;
/// Chunks in the test parcel's disk image (80 MB of random bytes, which do not compress).
const CHUNKS: usize = 640;

fn roam() -> Command {
    Command::new(env!("CARGO_BIN_EXE_roam"))
}

/// A running `roam parcel serve`.
struct Tier {
    child: Child,
    addr: String,
    dir: PathBuf,
}

impl Drop for Tier {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Tier {
    fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    fn cert(&self) -> PathBuf {
        self.dir.join("tls/cert.pem")
    }
}

/// Start a tier on `listen` and wait until it says where it listens.
fn serve(tier: &str, dir: &Path, listen: &str, secret: &Path, server: Option<&Tier>) -> Tier {
    let mut cmd = roam();
    cmd.args(["parcel", "serve", "--tier", tier, "--listen", listen])
        .arg("--dir")
        .arg(dir)
        .arg("--secret-file")
        .arg(secret);
    if let Some(s) = server {
        cmd.args(["--server", &s.addr])
            .arg("--server-cert")
            .arg(s.cert());
    }
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines() {
            let Ok(line) = line else { break };
            if let Some(rest) = line.split(" listening on ").nth(1) {
                let _ = tx.send(rest.split_whitespace().next().unwrap_or("").to_string());
            }
        }
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("the {tier} tier did not start on {listen}"));
    Tier {
        child,
        addr,
        dir: dir.to_path_buf(),
    }
}

/// The three tiers' directories, the user's secret, the server and the phone.
struct Lab {
    root: PathBuf,
    secret: PathBuf,
    server: Tier,
    phone: Tier,
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = self.phone.child.kill();
        let _ = self.server.child.kill();
        let _ = self.phone.child.wait();
        let _ = self.server.child.wait();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// `n` chunks of bytes from a xorshift generator seeded with `seed` (they do not compress).
fn random_image(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut v = Vec::with_capacity(n * CHUNK);
    while v.len() < n * CHUNK {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v
}

fn ok(o: &Output, what: &str) -> String {
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{what} failed: {out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// A fresh directory for test `tag` with the user's secret made in it.
fn fresh_root(tag: &str) -> (PathBuf, PathBuf) {
    let root = std::env::temp_dir().join(format!("roam-faults-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let secret = root.join("secret");
    ok(
        &roam()
            .args(["parcel", "secret", "--out"])
            .arg(&secret)
            .output()
            .unwrap(),
        "secret",
    );
    (root, secret)
}

impl Lab {
    /// Tiers started, a parcel `p` created from a random disk image and checked out into
    /// client `c1`, whose disk is then rewritten whole (every chunk dirty). Returns the lab
    /// and the new disk's bytes.
    fn checked_out(tag: &str) -> (Lab, Vec<u8>) {
        let (root, secret) = fresh_root(tag);
        let server = serve("server", &root.join("server"), "127.0.0.1:0", &secret, None);
        let phone = serve(
            "phone",
            &root.join("phone"),
            "127.0.0.1:0",
            &secret,
            Some(&server),
        );
        let lab = Lab {
            root,
            secret,
            server,
            phone,
        };
        let first = lab.root.join("first.img");
        std::fs::write(&first, random_image(CHUNKS, 1)).unwrap();
        let mut init = lab.client("init", "c0", false);
        init.arg("--disk").arg(&first);
        ok(&init.output().unwrap(), "init");
        ok(
            &lab.client("resume", "c1", true).output().unwrap(),
            "resume",
        );
        let dirty = random_image(CHUNKS, 2);
        std::fs::write(lab.disk("c1"), &dirty).unwrap();
        (lab, dirty)
    }

    /// `roam parcel OP p` on client `client`, reaching the server and (if `phone`) the phone.
    fn client(&self, op: &str, client: &str, phone: bool) -> Command {
        let mut c = roam();
        c.args(["parcel", op, "p", "--server", &self.server.addr])
            .arg("--server-cert")
            .arg(self.server.cert())
            .arg("--secret-file")
            .arg(&self.secret)
            .arg("--dir")
            .arg(self.root.join(client));
        if phone {
            c.args(["--phone", &self.phone.addr])
                .arg("--phone-cert")
                .arg(self.phone.cert());
        }
        c
    }

    fn disk(&self, client: &str) -> PathBuf {
        self.root.join(client).join("p/disk.img")
    }

    /// `roam parcel status`'s owner line, e.g. "owner: Client (a handoff is prepared)".
    fn owner(&self) -> String {
        let out = ok(
            &self.client("status", "c9", false).output().unwrap(),
            "status",
        );
        out.lines()
            .find_map(|l| l.trim().strip_prefix("owner: "))
            .unwrap_or_else(|| panic!("no owner in {out}"))
            .to_string()
    }

    fn restart_phone(&mut self) {
        let addr = self.phone.addr.clone();
        self.phone = serve(
            "phone",
            &self.root.join("phone"),
            &addr,
            &self.secret,
            Some(&self.server),
        );
    }

    fn restart_server(&mut self) {
        let addr = self.server.addr.clone();
        self.server = serve(
            "server",
            &self.root.join("server"),
            &addr,
            &self.secret,
            None,
        );
    }

    /// Check the parcel out into a fresh client and compare its disk with `want`.
    fn resume_matches(&self, client: &str, phone: bool, want: &[u8]) {
        ok(
            &self.client("resume", client, phone).output().unwrap(),
            "resume",
        );
        let got = std::fs::read(self.disk(client)).unwrap();
        assert!(
            got == want,
            "the resumed disk differs from the suspended one"
        );
    }
}

/// Files in a tier's store whose names `keep` accepts.
fn store_files(tier_dir: &Path, keep: fn(&str) -> bool) -> usize {
    let Ok(fan) = std::fs::read_dir(tier_dir.join("blobs")) else {
        return 0;
    };
    fan.flatten()
        .filter_map(|d| std::fs::read_dir(d.path()).ok())
        .flat_map(|files| files.flatten())
        .filter(|f| keep(&f.file_name().to_string_lossy()))
        .count()
}

/// Blob files in a tier's store (temporary files excluded).
fn blobs(tier_dir: &Path) -> usize {
    store_files(tier_dir, |n| !n.starts_with('.'))
}

/// Temporary files left in a tier's store.
fn temporaries(tier_dir: &Path) -> usize {
    store_files(tier_dir, |n| n.ends_with(".tmp"))
}

/// Poll every millisecond until `now()` holds, then run `kill`. Panics if `cmd` (the command
/// being interrupted) ended first: the test would prove nothing.
fn kill_when(cmd: &mut Child, what: &str, now: impl Fn() -> bool, kill: impl FnOnce()) {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        if now() {
            kill();
            return;
        }
        if let Some(status) = cmd.try_wait().unwrap() {
            panic!("{what}: the command ended ({status}) before the moment to kill came");
        }
        assert!(Instant::now() < deadline, "{what}: the moment never came");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn to_phone(mut suspend: Command) -> Command {
    suspend.args(["--to", "phone"]);
    suspend
}

/// Run `cmd` in the background with its output captured.
fn spawn(mut cmd: Command) -> Child {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// How many chunks `text` says were sent or uploaded: the number before " chunks" after
/// `key` (`"suspended"`: "... in 1.2 s: 17 chunks ..."; `"done: "`: "done: 17 chunks ...").
fn chunks_after(text: &str, key: &str) -> usize {
    let rest = text
        .split(key)
        .nth(1)
        .unwrap_or_else(|| panic!("no `{key}` in {text}"));
    let before = rest
        .split(" chunks")
        .next()
        .unwrap_or_else(|| panic!("no chunk count in {text}"));
    before
        .rsplit(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no chunk count in {text}"))
}

#[test]
fn phone_killed_mid_suspend_then_the_suspend_resumes() {
    let (mut lab, dirty) = Lab::checked_out("suspend");
    let mut suspend = spawn(to_phone(lab.client("suspend", "c1", true)));
    let phone_dir = lab.phone.dir.clone();
    kill_when(
        &mut suspend,
        "suspend to the phone",
        || blobs(&phone_dir) >= CHUNKS / 8,
        || lab.phone.kill(),
    );
    let o = suspend.wait_with_output().unwrap();
    assert!(
        !o.status.success(),
        "the suspend cannot succeed without the phone"
    );
    assert!(!o.stderr.is_empty(), "the failed suspend says why");
    // Nothing moved: the client still owns the parcel and keeps its images.
    assert_eq!(lab.owner(), "Client");
    assert!(std::fs::read(lab.disk("c1")).unwrap() == dirty);
    let held = blobs(&phone_dir);
    assert!(
        held < CHUNKS,
        "{held} chunks reached the phone: it was killed too late"
    );

    lab.restart_phone();
    assert_eq!(temporaries(&phone_dir), 0, "the restarted phone swept them");
    let out = ok(
        &to_phone(lab.client("suspend", "c1", true))
            .output()
            .unwrap(),
        "the suspend again",
    );
    let sent = chunks_after(&out, "suspended");
    assert!(
        sent <= CHUNKS - held && sent > 0,
        "sent {sent} chunks, the phone already held {held} of {CHUNKS}: {out}"
    );
    assert_eq!(lab.owner(), "Phone");
    assert!(
        !lab.disk("c1").exists(),
        "the client's copy goes after the handoff"
    );
    lab.resume_matches("c2", true, &dirty);
}

#[test]
fn client_killed_between_the_commit_phases_of_a_suspend() {
    let (lab, dirty) = Lab::checked_out("client2pc");
    let mut suspend = spawn(to_phone(lab.client("suspend", "c1", true)));
    // The phone's control state is written after the prepare and before the commit (the
    // phone validates every dirty chunk in between).
    let control = lab.phone.dir.join("control/p.json");
    kill_when(
        &mut suspend,
        "suspend to the phone",
        || control.exists(),
        || (),
    );
    suspend.kill().unwrap();
    suspend.wait().unwrap();
    assert_eq!(
        lab.owner(),
        "Client (a handoff is prepared)",
        "killed after the commit: the test proves nothing"
    );
    assert!(std::fs::read(lab.disk("c1")).unwrap() == dirty);

    // The owner's next suspend replaces its uncommitted prepare at once.
    let t = Instant::now();
    ok(
        &to_phone(lab.client("suspend", "c1", true))
            .output()
            .unwrap(),
        "the suspend again",
    );
    assert!(
        t.elapsed() < Duration::from_secs(240),
        "the second suspend waited for the prepared handoff to expire"
    );
    assert_eq!(lab.owner(), "Phone");
    lab.resume_matches("c2", true, &dirty);
}

/// The lab with the parcel suspended to the phone (which owns it, the server not yet holding
/// its dirty chunks); the dirty disk's bytes.
fn suspended(tag: &str) -> (Lab, Vec<u8>) {
    let (lab, dirty) = Lab::checked_out(tag);
    ok(
        &to_phone(lab.client("suspend", "c1", true))
            .output()
            .unwrap(),
        "suspend",
    );
    assert_eq!(lab.owner(), "Phone");
    (lab, dirty)
}

/// Start a self-clean and kill the phone (or, with `server`, the server) once an eighth of
/// the chunks reached the server; the clean must fail. Returns how many had arrived.
fn clean_killed_mid_upload(lab: &mut Lab, server: bool) -> usize {
    let server_dir = lab.server.dir.clone();
    let before = blobs(&server_dir);
    let mut clean = spawn(lab.client("clean", "c1", true));
    kill_when(
        &mut clean,
        "self-cleaning",
        || blobs(&server_dir) >= before + CHUNKS / 8,
        || {
            if server {
                lab.server.kill()
            } else {
                lab.phone.kill()
            }
        },
    );
    // roam-net hides a lost connection for up to 30 s before the clean fails.
    let o = clean.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success(),
        "the clean succeeded with a tier killed"
    );
    assert!(err.contains("fail") || err.contains("error"), "{err}");
    let uploaded = blobs(&server_dir) - before;
    assert!(uploaded < CHUNKS, "killed too late: {uploaded} uploaded");
    uploaded
}

/// The clean run again (both tiers up) uploads only what the server lacks, after which the
/// server owns the parcel and a resume from the server alone gives back `dirty`.
fn clean_resumes(lab: &mut Lab, uploaded: usize, dirty: &[u8]) {
    let out = ok(&lab.client("clean", "c1", true).output().unwrap(), "clean");
    let sent = chunks_after(&out, "done: ");
    if uploaded == CHUNKS {
        assert_eq!(sent, 0, "all were uploaded: {out}");
    } else {
        assert!(
            sent <= CHUNKS - uploaded && sent > 0,
            "uploaded {sent}; {uploaded} of {CHUNKS} were at the server already: {out}"
        );
    }
    assert_eq!(lab.owner(), "Server");
    lab.phone.kill();
    lab.resume_matches("c2", false, dirty);
}

#[test]
fn phone_killed_mid_self_clean_then_the_clean_resumes() {
    let (mut lab, dirty) = suspended("clean");
    let uploaded = clean_killed_mid_upload(&mut lab, false);
    assert_eq!(lab.owner(), "Phone");
    lab.restart_phone();
    clean_resumes(&mut lab, uploaded, &dirty);
}

#[test]
fn server_killed_mid_upload_then_the_clean_resumes() {
    let (mut lab, dirty) = suspended("server");
    let uploaded = clean_killed_mid_upload(&mut lab, true);
    lab.restart_server();
    let server_dir = lab.server.dir.clone();
    assert_eq!(
        temporaries(&server_dir),
        0,
        "the restarted server swept them"
    );
    assert_eq!(lab.owner(), "Phone", "the phone kept the parcel");
    clean_resumes(&mut lab, uploaded, &dirty);
}

#[test]
fn phone_killed_between_the_commit_phases_of_self_cleaning() {
    let (mut lab, dirty) = suspended("phone2pc");
    let mut clean = spawn(lab.client("clean", "c1", true));
    // The server keeps the incoming control state from the prepare until the commit, and
    // checks every chunk of the version in between.
    let incoming = lab.server.dir.join("incoming/p.json");
    kill_when(
        &mut clean,
        "self-cleaning",
        || incoming.exists(),
        || lab.phone.kill(),
    );
    let o = clean.wait_with_output().unwrap();
    assert!(!o.status.success());
    assert_eq!(
        lab.owner(),
        "Phone (a handoff is prepared)",
        "killed after the commit: the test proves nothing"
    );

    lab.restart_phone();
    clean_resumes(&mut lab, CHUNKS, &dirty);
}

#[test]
fn a_second_tier_on_one_directory_is_refused() {
    let (root, secret) = fresh_root("lock");
    let _first = serve("server", &root.join("s"), "127.0.0.1:0", &secret, None);
    let o = roam()
        .args([
            "parcel",
            "serve",
            "--tier",
            "server",
            "--listen",
            "127.0.0.1:0",
        ])
        .arg("--dir")
        .arg(root.join("s"))
        .arg("--secret-file")
        .arg(&secret)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&root);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("another tier is serving this directory"),
        "{err}"
    );
}

#[test]
fn a_resume_cut_off_from_the_server_borrows_the_parcel_from_the_phone() {
    let (mut lab, _) = suspended("offline");
    ok(&lab.client("hoard", "c1", true).output().unwrap(), "hoard");
    lab.server.kill();
    // The server is out of reach: the resume falls back to the phone, which lends the parcel.
    let o = lab.client("resume", "c2", true).output().unwrap();
    let out = ok(&o, "resume cut off from the server");
    assert!(out.contains("lent by the phone"), "{out}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("disconnected resume"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let work = random_image(CHUNKS, 3);
    std::fs::write(lab.disk("c2"), &work).unwrap();
    let out = ok(
        &to_phone(lab.client("suspend", "c2", true))
            .output()
            .unwrap(),
        "suspend back to the phone",
    );
    assert!(out.contains("given back to the phone"), "{out}");
    // In reach again: the phone self-cleans the session's state to the server.
    lab.restart_server();
    clean_resumes(&mut lab, 0, &work);
}
