//! Running commands inside the emulator: the client command in the client namespace, an
//! optional server command in the server namespace, and cleanup on every exit path.
//!
//! Cleanup does not rely on process groups alone: after the client exits (normally, by crash, or
//! because roam got SIGINT/SIGTERM/SIGHUP), every process still inside either namespace is found
//! through `/proc/*/ns/net` and terminated (SIGTERM, then SIGKILL after a grace period). roam
//! makes itself a child subreaper so orphaned grandchildren are reaped, and the namespaces are
//! anonymous, so they vanish with their last process and descriptor. If roam itself is killed
//! with SIGKILL, its direct children get SIGKILL too (PR_SET_PDEATHSIG).

use crate::emulator::{EmuError, Emulator};
use crate::sys;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, OnceLock};
use std::time::{Duration, Instant};

/// What to run.
#[derive(Clone, Debug, Default)]
pub struct RunSpec {
    /// Shell command for the server namespace (run with `sh -c`).
    pub server: Option<String>,
    /// Client program and arguments.
    pub client: Vec<String>,
    /// How long to wait for the server (and each host command) to open a listening socket
    /// before starting the client.
    pub server_wait: Duration,
    /// Shell commands for named hosts (host, command), started before the server and stopped
    /// with it.
    pub hosts: Vec<(String, String)>,
}

fn spawn_in(cmd: &mut Command, ns: i32, own_group: bool) -> std::io::Result<Child> {
    // SAFETY: only async-signal-safe calls (setns, prctl, setpgid) run between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            sys::enter_netns(ns)?;
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            );
            if own_group {
                libc::setpgid(0, 0);
            }
            Ok(())
        });
    }
    cmd.spawn()
}

/// Start `cmd` in the calling thread's network namespace as a child that dies with this
/// process, however it dies (SIGKILL included), and not before.
///
/// The kernel sends PR_SET_PDEATHSIG's signal when the *thread* that forked the child exits,
/// not the process: a server started by a trial's short-lived thread with it set would be
/// killed at once, and one started without it outlived a killed lab (nginx and Dovecot stayed
/// up after `roam lab` got SIGTERM). So every such child is forked by one thread that lives as
/// long as the process, in the caller's namespace (entered between fork and exec).
pub fn spawn_lasting(mut cmd: Command) -> std::io::Result<Child> {
    let ns: OwnedFd = std::fs::File::open("/proc/thread-self/ns/net")?.into();
    let (reply, answer) = mpsc::channel();
    let gone = || std::io::Error::other("the process spawner thread is gone");
    spawner()
        .send(SpawnRequest {
            run: Box::new(move || spawn_in(&mut cmd, ns.as_raw_fd(), false)),
            reply,
        })
        .map_err(|_| gone())?;
    answer.recv().map_err(|_| gone())?
}

/// A spawn for [`spawn_lasting`]'s thread to run, and where its answer goes.
struct SpawnRequest {
    run: Box<dyn FnOnce() -> std::io::Result<Child> + Send>,
    reply: mpsc::Sender<std::io::Result<Child>>,
}

/// The thread that forks [`spawn_lasting`]'s children. It moves to the process's first
/// namespace (`/proc/self` is the main thread's) so that it does not hold a trial's namespace
/// alive after the trial.
fn spawner() -> &'static mpsc::Sender<SpawnRequest> {
    static SPAWNER: OnceLock<mpsc::Sender<SpawnRequest>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        let main_ns = std::fs::File::open("/proc/self/ns/net").map(OwnedFd::from);
        let started = std::thread::Builder::new()
            .name("roam-spawner".into())
            .spawn(move || {
                if let Ok(ns) = main_ns {
                    let _ = sys::enter_netns(ns.as_raw_fd());
                }
                for r in rx {
                    let _ = r.reply.send((r.run)());
                }
            });
        // Without the thread every request's answer is "the spawner thread is gone".
        drop(started);
        tx
    })
}

fn has_listener(pid: u32) -> bool {
    for f in ["tcp", "tcp6"] {
        if let Ok(t) = std::fs::read_to_string(format!("/proc/{pid}/net/{f}")) {
            if t.lines()
                .skip(1)
                .any(|l| l.split_whitespace().nth(3) == Some("0A"))
            {
                return true;
            }
        }
    }
    for f in ["udp", "udp6"] {
        if let Ok(t) = std::fs::read_to_string(format!("/proc/{pid}/net/{f}")) {
            if t.lines().count() > 1 {
                return true;
            }
        }
    }
    false
}

fn exit_code(s: std::process::ExitStatus) -> i32 {
    s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0))
}

/// Terminate every process in the emulator's namespaces ([`terminate`]); returns how many
/// there were.
pub fn kill_namespace_processes(emu: &Emulator) -> usize {
    let inos: Vec<u64> = emu
        .namespaces()
        .iter()
        .filter_map(|ns| sys::ns_inode(ns).ok())
        .collect();
    terminate(|| inos.iter().flat_map(|i| sys::pids_in_netns(*i)).collect())
}

/// Set once a signal has begun stopping this process ([`stop_descendants_on_signal`]).
static STOPPING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether a signal is stopping this process: what is under way is being stopped, and
/// nothing it ends with should be recorded as a result.
pub fn stopping() -> bool {
    STOPPING.load(Ordering::SeqCst)
}

/// Make SIGINT, SIGTERM and SIGHUP stop every process this one started, then end it (exit
/// status 128 + the signal), for commands such as `roam lab` whose children are not all
/// started through [`spawn_lasting`] or [`run`]: a browser launched by a library, a trial's
/// client tools. Without it such children outlive a stopped lab and go on using the CPU inside
/// namespaces nobody will clean (a killed Precog run left 33 Chromium processes running).
///
/// SIGHUP is left alone where it was ignored (`nohup`). On a signal, [`stopping`] turns true,
/// this process becomes a child subreaper (so orphans of what it stops stay its descendants),
/// and [`stop_descendants`] runs. SIGKILL of this process itself cannot be caught;
/// [`spawn_lasting`]'s children die with it all the same.
pub fn stop_descendants_on_signal() -> std::io::Result<()> {
    let mut sigs = vec![libc::SIGINT, libc::SIGTERM];
    if !ignored(libc::SIGHUP) {
        sigs.push(libc::SIGHUP);
    }
    let mut signals = signal_hook::iterator::Signals::new(&sigs)?;
    std::thread::Builder::new()
        .name("roam-signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                STOPPING.store(true, Ordering::SeqCst);
                // SAFETY: PR_SET_CHILD_SUBREAPER takes an integer argument.
                unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) };
                let n = stop_descendants();
                eprintln!("roam: signal {sig}: stopped {n} process(es) it had started");
                std::process::exit(128 + sig);
            }
        })?;
    Ok(())
}

/// Whether `sig` is ignored (as `nohup` leaves SIGHUP).
fn ignored(sig: libc::c_int) -> bool {
    // SAFETY: sigaction with a null new action only reads the current one into `old`.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
    }
}

/// Every descendant of this process [`terminate`]d; returns how many there were.
pub fn stop_descendants() -> usize {
    let me = std::process::id() as i32;
    terminate(|| sys::descendants(me))
}

/// SIGTERM to every process `find` names, SIGKILL to those left after two seconds, and
/// SIGTERM to any that appear meanwhile (a thread of this process may start one while it
/// stops), until `find` names none or five seconds have passed, reaping this process's
/// children as they end; returns how many there were.
fn terminate(find: impl Fn() -> Vec<i32>) -> usize {
    let mut stopped: std::collections::HashSet<i32> = find().into_iter().collect();
    for &p in &stopped {
        sys::kill(p, libc::SIGTERM);
    }
    let start = Instant::now();
    loop {
        reap_orphans();
        let left = find();
        if left.is_empty() {
            break;
        }
        let waited = start.elapsed();
        if waited > Duration::from_secs(5) {
            break;
        }
        for &p in &left {
            if waited > Duration::from_secs(2) {
                sys::kill(p, libc::SIGKILL);
            } else if stopped.insert(p) {
                // Started since the last look.
                sys::kill(p, libc::SIGTERM);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    stopped.len()
}

fn reap_orphans() {
    loop {
        let mut status = 0;
        // SAFETY: waitpid with WNOHANG on any child.
        let r = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if r <= 0 {
            break;
        }
    }
}

/// Run the server (if any) and the client inside `emu`; return the client's exit status.
/// Processes left in the namespaces are terminated and the emulator is shut down on every path.
pub fn run(mut emu: Emulator, spec: &RunSpec) -> Result<i32, EmuError> {
    let signal = Arc::new(AtomicUsize::new(0));
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        signal_hook::flag::register_usize(sig, signal.clone(), sig as usize).map_err(|e| {
            EmuError::Io {
                what: "installing signal handlers".into(),
                source: e,
            }
        })?;
    }
    // SAFETY: PR_SET_CHILD_SUBREAPER takes an integer argument.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) };
    let result = run_inner(&emu, spec, &signal);
    kill_namespace_processes(&emu);
    reap_orphans();
    let shut = emu.shutdown();
    for w in emu.warnings() {
        eprintln!("roam emu: warning: {w}");
    }
    let code = result?;
    shut?;
    Ok(code)
}

/// The run itself, between setting up and cleaning up ([`run`]): start the background
/// commands, run the client to its end, stop the background commands. Returns the client's
/// exit status (130 when a signal came while waiting for a background command, 127 or 126
/// when the client could not be started, as a shell would).
///
/// On an early return, background commands are left running: [`run`] terminates everything
/// left in the namespaces whichever way this returns.
fn run_inner(emu: &Emulator, spec: &RunSpec, signal: &AtomicUsize) -> Result<i32, EmuError> {
    let Some(started) = start_background(emu, spec, signal)? else {
        return Ok(130);
    };
    let (prog, args) = spec
        .client
        .split_first()
        .ok_or_else(|| EmuError::Config("no client command given after --".into()))?;
    let mut cmd = Command::new(prog);
    cmd.args(args).envs(emu.env(false));
    let client = match spawn_in(&mut cmd, emu.client_ns().as_raw_fd(), false) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("roam emu: cannot run `{prog}`: {e}");
            return Ok(if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            });
        }
    };
    let code = wait_client(client, signal)?;
    stop_background(started);
    Ok(code)
}

/// Start the named hosts' commands, then the server's, each with `sh -c` in its namespace and
/// its own process group, waiting after each (up to [`RunSpec::server_wait`]) until it listens
/// on a socket, so the client does not connect before anyone answers. Returns what was
/// started, labelled for messages, or `None` if a signal came while waiting.
fn start_background(
    emu: &Emulator,
    spec: &RunSpec,
    signal: &AtomicUsize,
) -> Result<Option<Vec<(String, Child)>>, EmuError> {
    let mut started: Vec<(String, Child)> = Vec::new();
    let mut commands: Vec<(String, &OwnedFd, &String)> = Vec::new();
    for (h, c) in &spec.hosts {
        let ns = emu
            .host_ns(h)
            .ok_or_else(|| EmuError::Config(format!("a command for unknown host `{h}`")))?;
        commands.push((format!("host {h}"), ns, c));
    }
    if let Some(s) = &spec.server {
        commands.push(("server".into(), emu.server_ns(), s));
    }
    for (who, ns, s) in commands {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(s).envs(emu.env(true));
        let child = spawn_in(&mut cmd, ns.as_raw_fd(), true).map_err(|e| EmuError::Io {
            what: format!("starting {who} `{s}`"),
            source: e,
        })?;
        started.push((who, child));
        let (who, child) = started.last_mut().expect("just pushed");
        let deadline = Instant::now() + spec.server_wait;
        if !wait_for_listener(child, deadline, signal, &format!("{who} `{s}`")) {
            return Ok(None);
        }
    }
    Ok(Some(started))
}

/// Wait until `child` (`what`, for the warning) listens on a socket, exits, or `deadline`
/// passes; polled every 10 ms. Returns false if a signal came meanwhile.
fn wait_for_listener(
    child: &mut Child,
    deadline: Instant,
    signal: &AtomicUsize,
    what: &str,
) -> bool {
    let pid = child.id();
    while Instant::now() < deadline && !has_listener(pid) {
        if let Ok(Some(st)) = child.try_wait() {
            eprintln!(
                "roam emu: warning: {what} exited early with status {}",
                exit_code(st)
            );
            break;
        }
        if signal.load(Ordering::Relaxed) != 0 {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// Wait for the client to exit and return its exit status. A signal roam receives meanwhile
/// is passed on to the client, which gets 3 s to exit before it is killed.
fn wait_client(mut client: Child, signal: &AtomicUsize) -> Result<i32, EmuError> {
    let mut kill_at: Option<Instant> = None;
    loop {
        match client.try_wait() {
            Ok(Some(st)) => return Ok(exit_code(st)),
            Ok(None) => {}
            Err(e) => {
                return Err(EmuError::Io {
                    what: "waiting for the client".into(),
                    source: e,
                })
            }
        }
        let sig = signal.swap(0, Ordering::Relaxed);
        if sig != 0 && kill_at.is_none() {
            sys::kill(client.id() as i32, sig as i32);
            kill_at = Some(Instant::now() + Duration::from_secs(3));
        }
        if kill_at.is_some_and(|t| Instant::now() > t) {
            let _ = client.kill();
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Stop the background commands, last started first: SIGTERM to each one's process group,
/// up to 2 s to exit, then SIGKILL.
fn stop_background(started: Vec<(String, Child)>) {
    for (_, mut s) in started.into_iter().rev() {
        // SAFETY: signalling the command's process group.
        unsafe { libc::kill(-(s.id() as i32), libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = s.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = s.kill();
        let _ = s.wait();
    }
}
