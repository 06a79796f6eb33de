//! `run::spawn_lasting`: a child started by a short-lived thread outlives that thread, runs in
//! its namespace, and dies with the process that started it, even one killed with SIGKILL.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::MetadataExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use roam_emu::run::spawn_lasting;

/// Set in the helper process that `a_lasting_child_dies_with_the_process` starts.
const HELPER: &str = "ROAM_SPAWN_LASTING_HELPER";

/// Whether process `pid` has ended (gone, or a zombie waiting for its parent).
fn ended(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // The state follows the command's closing parenthesis.
        Ok(s) => s
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

fn wait_ended(pid: u32, within: Duration) -> bool {
    let end = Instant::now() + within;
    while Instant::now() < end {
        if ended(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    ended(pid)
}

#[test]
fn a_lasting_child_outlives_the_thread_that_started_it_in_that_threads_namespace() {
    if !roam_emu::testing::privileged_or_skip() {
        return;
    }
    let (mut child, ns) = std::thread::spawn(|| {
        // SAFETY: unshare only changes this thread's network namespace.
        assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0, "unshare");
        let ns = std::fs::metadata("/proc/thread-self/ns/net").unwrap().ino();
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        (spawn_lasting(cmd).unwrap(), ns)
    })
    .join()
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the child died with the thread that started it"
    );
    let child_ns = std::fs::metadata(format!("/proc/{}/ns/net", child.id()))
        .unwrap()
        .ino();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        child_ns, ns,
        "the child runs in the starting thread's namespace"
    );
}

#[test]
fn a_lasting_child_dies_with_the_process() {
    let me = std::env::current_exe().unwrap();
    let mut helper = Command::new(me)
        .args([
            "--exact",
            "helper_starts_a_lasting_child_and_waits",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HELPER, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(helper.stdout.take().unwrap()).lines();
    let pid: u32 = loop {
        let line = lines
            .next()
            .expect("the helper ended without naming its child")
            .unwrap();
        // The harness may have started the line ("test NAME ... ").
        if let Some((_, p)) = line.rsplit_once("child ") {
            break p.trim().parse().unwrap();
        }
    };
    assert!(
        !ended(pid),
        "the child is running before the helper is killed"
    );
    helper.kill().unwrap(); // SIGKILL: no destructor or handler of the helper runs
    helper.wait().unwrap();
    assert!(
        wait_ended(pid, Duration::from_secs(5)),
        "the child outlived the process that started it"
    );
}

/// Run only by `a_lasting_child_dies_with_the_process`, in a process of its own.
#[test]
#[ignore = "a helper process of a_lasting_child_dies_with_the_process"]
fn helper_starts_a_lasting_child_and_waits() {
    if std::env::var_os(HELPER).is_none() {
        return;
    }
    let mut child = std::thread::spawn(|| {
        let mut cmd = Command::new("sleep");
        cmd.arg("60");
        spawn_lasting(cmd).unwrap()
    })
    .join()
    .unwrap();
    println!("child {}", child.id());
    // Killed long before the child ends.
    let _ = child.wait();
}
