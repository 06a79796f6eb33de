//! The running emulator: two network namespaces joined by one TUN pair per link, and a user-space
//! forwarder per link and direction that applies the link's [`LinkQueue`].
//!
//! ```text
//!   client namespace                 roam (this process)                server namespace
//!   app --> dev `wifi` (TUN) --fd--> [up queue: loss, queue, capacity, delay] --fd--> dev `wifi`
//!       <--                  <------ [down queue]                       <------       (TUN) <-- server
//! ```
//!
//! Addressing (link i counts from 1): the client's address on link i is `10.77.i.2/24`, the
//! server side of the link `10.77.i.1/24`, and the server answers on `10.77.0.1` (its loopback).
//! The client's default route uses the first link; policy routing (`from 10.77.i.2 lookup
//! 100+i`) sends a socket bound to a link's address through that link, and SO_BINDTODEVICE on the
//! device name works as well. Every link's address is also an MPTCP subflow endpoint, so an
//! MPTCP socket uses all links.

use crate::control::{Command, LinkCommand, ScheduledCommand};
use crate::queue::{BinStats, LinkQueue, PacketEvent};
use crate::spec::{env_name, LinkConfig};
use crate::sys::{self, EventFd};
use roam_core::{Clock, Time};
use roam_trace::capacity::Capacity;
use roam_trace::pdo::MTU_BYTES;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The server's address, reachable over every link.
pub const SERVER_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);

/// Errors starting or running the emulator.
#[derive(Debug, thiserror::Error)]
pub enum EmuError {
    /// Missing privileges or kernel support; a one-line reason.
    #[error("{0}")]
    Privilege(String),
    /// The configuration is unusable.
    #[error("{0}")]
    Config(String),
    /// A system operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
}

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> EmuError {
    let what = what.into();
    move |source| EmuError::Io { what, source }
}

/// Emulator settings.
#[derive(Clone, Debug, Default)]
pub struct EmuConfig {
    /// The links, in routing-preference order.
    pub links: Vec<LinkConfig>,
    /// Where to write per-link, per-direction logs (`<link>.<up|down>.csv`, `summary.json`).
    pub log_dir: Option<PathBuf>,
    /// Width of a log row (default 100 ms).
    pub log_interval: Option<Duration>,
    /// With `log_dir`, also write per-packet logs in Mahimahi's `mm-link --log` format,
    /// `<link>.<up|down>.mm.log`, which Mahimahi's `mm-throughput-graph` and
    /// `mm-delay-graph` read.
    pub packet_log: bool,
    /// Where to write packet captures of what each link delivers
    /// (`<link>.<up|down>.pcap`, see [`crate::pcap`]).
    pub pcap_dir: Option<PathBuf>,
    /// Scripted link changes.
    pub events: Vec<ScheduledCommand>,
    /// Where to listen for control commands.
    pub control_socket: Option<PathBuf>,
}

/// Live counters of one direction of one link (updated every log interval and at shutdown).
#[derive(Debug, Default)]
pub struct DirCounters {
    /// Bytes that arrived at the link.
    pub arrived_bytes: AtomicU64,
    /// Bytes that left the queue.
    pub delivered_bytes: AtomicU64,
    /// Packets that left the queue.
    pub delivered_pkts: AtomicU64,
    /// Drops: queue full.
    pub drops_queue: AtomicU64,
    /// Drops: random loss.
    pub drops_loss: AtomicU64,
    /// Drops: link unavailable.
    pub drops_outage: AtomicU64,
    /// Packets forwarded (the emulator's lateness is counted over these).
    pub forwarded_pkts: AtomicU64,
    /// Sum over forwarded packets of how late the forwarder wrote each (ns after it was due).
    pub late_sum_ns: AtomicU64,
    /// The latest a packet was forwarded (ns after it was due).
    pub late_max_ns: AtomicU64,
    /// Packets forwarded more than [`LATE`] after they were due.
    pub late_pkts: AtomicU64,
}

/// A packet forwarded later than this after it was due counts as late in `summary.json`: a
/// run with many has a forwarder that could not keep up (a loaded machine), and its timings
/// are the emulator's as much as the network's.
pub const LATE: Duration = Duration::from_millis(1);

impl DirCounters {
    fn add(&self, b: &BinStats) {
        self.arrived_bytes
            .fetch_add(b.arrived_bytes, Ordering::Relaxed);
        self.delivered_bytes
            .fetch_add(b.delivered_bytes, Ordering::Relaxed);
        self.delivered_pkts
            .fetch_add(b.delivered_pkts, Ordering::Relaxed);
        self.drops_queue.fetch_add(b.drops_queue, Ordering::Relaxed);
        self.drops_loss.fetch_add(b.drops_loss, Ordering::Relaxed);
        self.drops_outage
            .fetch_add(b.drops_outage, Ordering::Relaxed);
    }
    /// Count one packet forwarded `late` after it was due.
    fn forwarded(&self, late: Duration) {
        let ns = late.as_nanos() as u64;
        self.forwarded_pkts.fetch_add(1, Ordering::Relaxed);
        self.late_sum_ns.fetch_add(ns, Ordering::Relaxed);
        self.late_max_ns.fetch_max(ns, Ordering::Relaxed);
        if late > LATE {
            self.late_pkts.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A plain snapshot.
    pub fn snapshot(&self) -> serde_json::Value {
        let pkts = self.forwarded_pkts.load(Ordering::Relaxed);
        let mean_ms = if pkts > 0 {
            self.late_sum_ns.load(Ordering::Relaxed) as f64 / pkts as f64 / 1e6
        } else {
            0.0
        };
        serde_json::json!({
            "arrived_bytes": self.arrived_bytes.load(Ordering::Relaxed),
            "delivered_bytes": self.delivered_bytes.load(Ordering::Relaxed),
            "delivered_pkts": self.delivered_pkts.load(Ordering::Relaxed),
            "drops_queue": self.drops_queue.load(Ordering::Relaxed),
            "drops_loss": self.drops_loss.load(Ordering::Relaxed),
            "drops_outage": self.drops_outage.load(Ordering::Relaxed),
            "forwarding_lateness": {
                "packets": pkts,
                "mean_ms": mean_ms,
                "max_ms": self.late_max_ns.load(Ordering::Relaxed) as f64 / 1e6,
                "late_packets": self.late_pkts.load(Ordering::Relaxed),
                "late_threshold_ms": LATE.as_secs_f64() * 1e3,
            },
        })
    }
}

/// One link as the running emulator exposes it.
pub struct LinkHandle {
    /// Name (also the device name in both namespaces).
    pub name: String,
    /// The client's address on this link.
    pub client_addr: Ipv4Addr,
    /// The server side's address on this link.
    pub peer_addr: Ipv4Addr,
    /// Client-to-server counters.
    pub up: Arc<DirCounters>,
    /// Server-to-client counters.
    pub down: Arc<DirCounters>,
    /// The link's configuration.
    pub config: LinkConfig,
}

struct Mailbox {
    tx: Sender<LinkCommand>,
    wake: Arc<EventFd>,
}

/// Routes commands to the forwarding threads of each link.
#[derive(Clone)]
struct Dispatcher {
    clock: Clock,
    links: Arc<HashMap<String, Vec<Mailbox>>>,
}

impl Dispatcher {
    fn send(&self, c: &Command) -> Result<(), String> {
        let boxes = self.links.get(&c.link).ok_or_else(|| {
            let mut names: Vec<&String> = self.links.keys().collect();
            names.sort();
            format!("no link `{}` (links: {names:?})", c.link)
        })?;
        for b in boxes {
            let _ = b.tx.send(c.action.clone());
            b.wake.notify();
        }
        Ok(())
    }
}

/// A running emulator. Dropping it stops the forwarders and removes its namespaces.
pub struct Emulator {
    clock: Clock,
    client_ns: OwnedFd,
    server_ns: OwnedFd,
    links: Vec<LinkHandle>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    wakes: Vec<Arc<EventFd>>,
    dispatcher: Dispatcher,
    log_dir: Option<PathBuf>,
    control_socket: Option<PathBuf>,
    stopped: bool,
    warnings: Arc<Mutex<Vec<String>>>,
}

fn client_addr(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 77, i as u8 + 1, 2)
}
fn peer_addr(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 77, i as u8 + 1, 1)
}

fn run_ip(ns: &OwnedFd, script: &str, what: &str) -> Result<(), EmuError> {
    let raw = ns.as_raw_fd();
    let mut cmd = std::process::Command::new("ip");
    cmd.args(["-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: the closure only calls setns, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || sys::enter_netns(raw));
    }
    let mut child = cmd.spawn().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            EmuError::Privilege(
                "roam emu needs the `ip` command (Debian package iproute2: apt-get install iproute2)"
                    .into(),
            )
        } else {
            EmuError::Io {
                what: "running ip".into(),
                source: e,
            }
        }
    })?;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .map_err(io_err("writing to ip"))?;
    let out = child.wait_with_output().map_err(io_err("waiting for ip"))?;
    if !out.status.success() {
        return Err(EmuError::Config(format!(
            "configuring {what} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

fn write_sysctl(path: &str, value: &str) {
    // Best effort: a kernel without IPv6 has no such file, and that is fine.
    let _ = std::fs::write(path, value);
}

impl Emulator {
    /// Create the namespaces, devices and forwarders, and start the clock.
    pub fn start(cfg: EmuConfig) -> Result<Emulator, EmuError> {
        if cfg.links.is_empty() {
            return Err(EmuError::Config(
                "no links: give at least one --link NAME=SPEC or a --scenario".into(),
            ));
        }
        if cfg.links.len() > 200 {
            return Err(EmuError::Config("at most 200 links".into()));
        }
        let mut seen = std::collections::HashSet::new();
        for l in &cfg.links {
            if !seen.insert(l.name.clone()) {
                return Err(EmuError::Config(format!("link `{}` given twice", l.name)));
            }
        }
        sys::check_privileges().map_err(EmuError::Privilege)?;
        let client_ns = sys::new_netns().map_err(io_err("creating the client namespace"))?;
        let server_ns = sys::new_netns().map_err(io_err("creating the server namespace"))?;
        let names: Vec<String> = cfg.links.iter().map(|l| l.name.clone()).collect();
        let make_tuns = |names: &[String]| -> Result<Vec<OwnedFd>, EmuError> {
            write_sysctl("/proc/sys/net/ipv6/conf/all/disable_ipv6", "1");
            write_sysctl("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1");
            // Each experiment starts from a clean TCP state: no cached ssthresh/RTT per route.
            write_sysctl("/proc/sys/net/ipv4/tcp_no_metrics_save", "1");
            names
                .iter()
                .map(|n| sys::create_tun(n).map_err(io_err(format!("creating TUN device {n}"))))
                .collect()
        };
        let client_tuns = sys::in_netns(&client_ns, || make_tuns(&names))
            .map_err(io_err("entering the client namespace"))??;
        let server_tuns = sys::in_netns(&server_ns, || make_tuns(&names))
            .map_err(io_err("entering the server namespace"))??;

        let mut cscript = String::from("link set lo up\n");
        let mut sscript = format!("link set lo up\naddr add {SERVER_ADDR}/32 dev lo\n");
        for (i, n) in names.iter().enumerate() {
            let (c, p) = (client_addr(i), peer_addr(i));
            let table = 100 + i;
            cscript += &format!(
                "link set dev {n} up\naddr add {c}/24 dev {n}\nroute add default dev {n} metric {}\nroute add default dev {n} table {table}\nrule add from {c} lookup {table} pref {}\n",
                100 + i,
                1000 + i
            );
            sscript += &format!("link set dev {n} up\naddr add {p}/24 dev {n}\n");
        }
        run_ip(&client_ns, &cscript, "the client namespace")?;
        run_ip(&server_ns, &sscript, "the server namespace")?;
        let mut warnings = Vec::new();
        let mut mptcp_c = String::from("mptcp limits set subflows 8 add_addr_accepted 8\n");
        for (i, n) in names.iter().enumerate() {
            mptcp_c += &format!("mptcp endpoint add {} dev {n} subflow\n", client_addr(i));
        }
        let mptcp_s = "mptcp limits set subflows 8 add_addr_accepted 8\n";
        if let Err(e) = run_ip(&client_ns, &mptcp_c, "MPTCP endpoints")
            .and_then(|_| run_ip(&server_ns, mptcp_s, "MPTCP limits"))
        {
            warnings.push(format!("MPTCP is not available here ({e})"));
        }

        let clock = Clock::start();
        let started_unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let stop = Arc::new(AtomicBool::new(false));
        let bin = cfg.log_interval.unwrap_or(Duration::from_millis(100));
        if let Some(d) = &cfg.log_dir {
            std::fs::create_dir_all(d)
                .map_err(io_err(format!("creating log directory {}", d.display())))?;
        }
        if let Some(d) = &cfg.pcap_dir {
            std::fs::create_dir_all(d).map_err(io_err(format!(
                "creating capture directory {}",
                d.display()
            )))?;
        }
        let mut threads = Vec::new();
        let mut wakes = Vec::new();
        let mut mailboxes: HashMap<String, Vec<Mailbox>> = HashMap::new();
        let mut links = Vec::new();
        for (i, (l, (ct, st))) in cfg
            .links
            .iter()
            .zip(client_tuns.into_iter().zip(server_tuns))
            .enumerate()
        {
            let ct = Arc::new(ct);
            let st = Arc::new(st);
            let up = Arc::new(DirCounters::default());
            let down = Arc::new(DirCounters::default());
            for (dir, ingress, egress, counters, cap, seed) in [
                (
                    "up",
                    ct.clone(),
                    st.clone(),
                    up.clone(),
                    l.trace.up.clone(),
                    l.seed,
                ),
                (
                    "down",
                    st.clone(),
                    ct.clone(),
                    down.clone(),
                    l.trace.down.clone(),
                    l.seed ^ 0x9e37_79b9_7f4a_7c15,
                ),
            ] {
                let mut queue = LinkQueue::new(
                    cap.clone(),
                    l.trace.delay.clone(),
                    l.trace.availability.clone(),
                    l.trace.loss,
                    l.queue,
                    seed,
                );
                queue.set_bin_width(bin);
                queue.set_jitter(l.jitter);
                let (tx, rx) = channel();
                let wake = Arc::new(EventFd::new().map_err(io_err("creating an eventfd"))?);
                mailboxes.entry(l.name.clone()).or_default().push(Mailbox {
                    tx,
                    wake: wake.clone(),
                });
                wakes.push(wake.clone());
                let log = match &cfg.log_dir {
                    Some(d) => {
                        let path = d.join(format!("{}.{dir}.csv", l.name));
                        let f = std::fs::File::create(&path)
                            .map_err(io_err(format!("creating {}", path.display())))?;
                        let mut w = BufWriter::new(f);
                        let _ = writeln!(w, "{LOG_HEADER}");
                        Some(w)
                    }
                    None => None,
                };
                let packet_log = match &cfg.log_dir {
                    Some(d) if cfg.packet_log => {
                        let name = format!("{}.{dir}.mm.log", l.name);
                        let path = d.join(&name);
                        let f = std::fs::File::create(&path)
                            .map_err(io_err(format!("creating {}", path.display())))?;
                        let mut w = BufWriter::new(f);
                        let _ = writeln!(
                            w,
                            "# mahimahi mm-link ({} {dir}) [roam emu] > {name}\n# init timestamp: 0\n# base timestamp: 0",
                            l.name
                        );
                        queue.record_packet_events();
                        Some(PacketLog {
                            out: w,
                            pending: Vec::new(),
                            carry: 0,
                        })
                    }
                    _ => None,
                };
                let pcap = match &cfg.pcap_dir {
                    Some(d) => {
                        let path = d.join(format!("{}.{dir}.pcap", l.name));
                        Some(
                            crate::pcap::PcapWriter::create(&path)
                                .map_err(io_err(format!("creating {}", path.display())))?,
                        )
                    }
                    None => None,
                };
                let fwd = Forwarder {
                    queue,
                    ingress,
                    egress,
                    rx,
                    wake,
                    stop: stop.clone(),
                    counters,
                    log,
                    capacity: cap,
                    clock,
                    packet_log,
                    pcap,
                    started_unix,
                    carrier: (dir == "up")
                        .then_some(l.carrier_after)
                        .flatten()
                        .map(|after| Carrier {
                            after,
                            down_since: None,
                            off: false,
                        }),
                };
                threads.push(
                    std::thread::Builder::new()
                        .name(format!("roam-emu {} {dir}", l.name))
                        .spawn(move || fwd.run())
                        .map_err(io_err("starting a forwarding thread"))?,
                );
            }
            links.push(LinkHandle {
                name: l.name.clone(),
                client_addr: client_addr(i),
                peer_addr: peer_addr(i),
                up,
                down,
                config: l.clone(),
            });
        }
        let dispatcher = Dispatcher {
            clock,
            links: Arc::new(mailboxes),
        };
        let warnings = Arc::new(Mutex::new(warnings));
        if !cfg.events.is_empty() {
            let d = dispatcher.clone();
            let stop = stop.clone();
            let events = cfg.events.clone();
            let warn = warnings.clone();
            threads.push(std::thread::spawn(move || {
                run_events(d, events, stop, warn)
            }));
        }
        if let Some(path) = &cfg.control_socket {
            let _ = std::fs::remove_file(path);
            let listener = UnixListener::bind(path)
                .map_err(io_err(format!("binding control socket {}", path.display())))?;
            listener
                .set_nonblocking(true)
                .map_err(io_err("control socket"))?;
            let d = dispatcher.clone();
            let stop = stop.clone();
            threads.push(std::thread::spawn(move || run_control(listener, d, stop)));
        }
        Ok(Emulator {
            clock,
            client_ns,
            server_ns,
            links,
            stop,
            threads,
            wakes,
            dispatcher,
            log_dir: cfg.log_dir.clone(),
            control_socket: cfg.control_socket.clone(),
            stopped: false,
            warnings,
        })
    }

    /// The emulator's clock; time zero is when it started forwarding.
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// The links.
    pub fn links(&self) -> &[LinkHandle] {
        &self.links
    }

    /// A link by name.
    pub fn link(&self, name: &str) -> Option<&LinkHandle> {
        self.links.iter().find(|l| l.name == name)
    }

    /// The client namespace.
    pub fn client_ns(&self) -> &OwnedFd {
        &self.client_ns
    }

    /// The server namespace.
    pub fn server_ns(&self) -> &OwnedFd {
        &self.server_ns
    }

    /// Warnings gathered so far (e.g. MPTCP unavailable, an event for an unknown link).
    pub fn warnings(&self) -> Vec<String> {
        self.warnings.lock().unwrap().clone()
    }

    /// Apply a command now.
    pub fn command(&self, c: &Command) -> Result<(), String> {
        self.dispatcher.send(c)
    }

    /// Environment for commands run in the client (`server == false`) or server namespace.
    pub fn env(&self, server: bool) -> Vec<(String, String)> {
        let mut v = vec![
            ("ROAM_SERVER_ADDR".to_string(), SERVER_ADDR.to_string()),
            (
                "ROAM_LINKS".to_string(),
                self.links
                    .iter()
                    .map(|l| l.name.clone())
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            (
                "ROAM_NAMESPACE".to_string(),
                if server { "server" } else { "client" }.to_string(),
            ),
        ];
        for l in &self.links {
            let n = env_name(&l.name);
            v.push((format!("ROAM_LINK_{n}_ADDR"), l.client_addr.to_string()));
            v.push((format!("ROAM_LINK_{n}_PEER"), l.peer_addr.to_string()));
            v.push((format!("ROAM_LINK_{n}_DEV"), l.name.clone()));
        }
        if let Some(p) = &self.control_socket {
            v.push(("ROAM_EMU_CONTROL".into(), p.display().to_string()));
        }
        v
    }

    /// Run `f` on a new thread inside the client namespace.
    pub fn spawn_in_client<R: Send + 'static>(
        &self,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> JoinHandle<std::io::Result<R>> {
        spawn_in(&self.client_ns, f)
    }

    /// Run `f` on a new thread inside the server namespace.
    pub fn spawn_in_server<R: Send + 'static>(
        &self,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> JoinHandle<std::io::Result<R>> {
        spawn_in(&self.server_ns, f)
    }

    /// Stop forwarding, flush logs and write `summary.json`. Idempotent.
    pub fn shutdown(&mut self) -> Result<(), EmuError> {
        if self.stopped {
            return Ok(());
        }
        self.stopped = true;
        self.stop.store(true, Ordering::SeqCst);
        for w in &self.wakes {
            w.notify();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        if let Some(p) = &self.control_socket {
            let _ = std::fs::remove_file(p);
        }
        if let Some(d) = &self.log_dir {
            let elapsed = self.clock.now().as_secs_f64();
            // The wall-clock time of the emulator's time zero, so that samples taken outside
            // it (`scripts/ss-sample.sh`) line up with the per-link logs.
            let unix_now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(f64::NAN, |d| d.as_secs_f64());
            let (mut pkts, mut late) = (0u64, 0u64);
            for l in &self.links {
                for d in [&l.up, &l.down] {
                    pkts += d.forwarded_pkts.load(Ordering::Relaxed);
                    late += d.late_pkts.load(Ordering::Relaxed);
                }
            }
            // Read where the client's sockets live: congestion control and MPTCP settings are
            // per network namespace.
            let client = spawn_in(&self.client_ns, run_metadata)
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
                "links": self.links.iter().map(|l| serde_json::json!({
                    "name": l.name,
                    "client_addr": l.client_addr.to_string(),
                    "up": l.up.snapshot(),
                    "down": l.down.snapshot(),
                })).collect::<Vec<_>>(),
            });
            let path = d.join("summary.json");
            std::fs::write(
                &path,
                serde_json::to_string_pretty(&summary).unwrap() + "\n",
            )
            .map_err(io_err(format!("writing {}", path.display())))?;
        }
        Ok(())
    }
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

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

fn spawn_in<R: Send + 'static>(
    ns: &OwnedFd,
    f: impl FnOnce() -> R + Send + 'static,
) -> JoinHandle<std::io::Result<R>> {
    let ns = ns.try_clone();
    std::thread::spawn(move || {
        let ns = ns?;
        sys::enter_netns(ns.as_raw_fd())?;
        Ok(f())
    })
}

/// Columns of a per-direction log.
pub const LOG_HEADER: &str = "t_s,arrived_bytes,delivered_bytes,delivered_pkts,throughput_mbit,capacity_mbit,queue_delay_avg_ms,queue_delay_max_ms,drops_queue,drops_loss,drops_outage,available";

struct Forwarder {
    queue: LinkQueue,
    ingress: Arc<OwnedFd>,
    egress: Arc<OwnedFd>,
    rx: Receiver<LinkCommand>,
    wake: Arc<EventFd>,
    stop: Arc<AtomicBool>,
    counters: Arc<DirCounters>,
    log: Option<BufWriter<std::fs::File>>,
    capacity: Capacity,
    clock: Clock,
    /// The per-packet log (`EmuConfig::packet_log`) and the events not yet written (those
    /// past the last complete bin, whose delivery opportunities are not written yet).
    packet_log: Option<PacketLog>,
    /// The capture of what this direction delivers (`EmuConfig::pcap_dir`).
    pcap: Option<crate::pcap::PcapWriter>,
    /// The wall-clock time of the emulator's time zero (for the capture's stamps).
    started_unix: Duration,
    /// For the client-to-server direction of a link with `carrier=`: the client's interface
    /// (this direction's ingress) loses its carrier once an outage has lasted this long.
    carrier: Option<Carrier>,
}

/// A per-packet log being written (`Forwarder::write_packet_log`).
struct PacketLog {
    out: BufWriter<std::fs::File>,
    /// Events past the last bin written.
    pending: Vec<PacketEvent>,
    /// Capacity bytes short of a whole delivery opportunity, carried into the next bin.
    carry: u64,
}

/// The client interface's carrier, following the link's outages (`LinkConfig::carrier_after`).
struct Carrier {
    after: Duration,
    /// When the current outage began.
    down_since: Option<Time>,
    off: bool,
}

impl Forwarder {
    /// Follow the link's availability with the client interface's carrier (checked at least
    /// once a log interval, so within 100 ms by default).
    fn follow_carrier(&mut self, now: Time) {
        let Some(c) = self.carrier.as_mut() else {
            return;
        };
        let fd = self.ingress.as_raw_fd();
        if self.queue.available_at(now) {
            c.down_since = None;
            if c.off && sys::set_carrier(fd, true).is_ok() {
                c.off = false;
            }
        } else {
            let since = *c.down_since.get_or_insert(now);
            if !c.off
                && now.saturating_since(since) >= c.after
                && sys::set_carrier(fd, false).is_ok()
            {
                c.off = true;
            }
        }
    }

    fn run(mut self) {
        sys::precise_timers();
        let mut buf = vec![0u8; 65536];
        let inf = self.ingress.as_raw_fd();
        let outf = self.egress.as_raw_fd();
        let bin = self.queue.bin_width();
        let mut next_flush = Time::ZERO + bin;
        while !self.stop.load(Ordering::Relaxed) {
            let now = self.clock.now();
            self.queue.advance(now);
            self.follow_carrier(now);
            while let Some((due, p)) = self.queue.pop_ready_due(now) {
                let _ = sys::write_packet(outf, &p);
                let sent = self.clock.now();
                self.counters.forwarded(sent.saturating_since(due));
                if let Some(w) = self.pcap.as_mut() {
                    let at = self.started_unix + sent.saturating_since(Time::ZERO);
                    if w.write(at, &p).is_err() {
                        self.pcap = None; // a full disk ends the capture, not the run
                    }
                }
            }
            if now >= next_flush {
                let bins = self.queue.take_complete_bins();
                self.flush(bins);
                next_flush = now + bin;
            }
            let deadline = self
                .queue
                .next_deadline()
                .unwrap_or(Time::MAX)
                .min(next_flush);
            let now = self.clock.now();
            let timeout = if deadline <= now {
                Some(Duration::ZERO)
            } else {
                Some(deadline - now)
            };
            let ready = match sys::wait_readable(&[inf, self.wake.raw()], timeout) {
                Ok(r) => r,
                Err(_) => break,
            };
            if ready[1] {
                self.wake.drain();
                while let Ok(cmd) = self.rx.try_recv() {
                    self.apply(cmd);
                }
            }
            if ready[0] {
                for _ in 0..256 {
                    match sys::read_packet(inf, &mut buf) {
                        Ok(Some(n)) if n > 0 => {
                            let t = self.clock.now();
                            self.queue.receive(t, buf[..n].to_vec());
                        }
                        _ => break,
                    }
                }
            }
        }
        self.queue.advance(self.clock.now());
        let bins = self.queue.take_all_bins();
        self.flush(bins);
        if let Some(w) = self.log.as_mut() {
            let _ = w.flush();
        }
        if let Some(w) = self.pcap.as_mut() {
            let _ = w.flush();
        }
        if let Some(log) = self.packet_log.as_mut() {
            let _ = log.out.flush();
        }
    }

    fn apply(&mut self, cmd: LinkCommand) {
        let now = self.clock.now();
        match cmd {
            LinkCommand::Down => self.queue.set_forced_down(now, true),
            LinkCommand::Up => self.queue.set_forced_down(now, false),
            LinkCommand::Set {
                capacity,
                delay,
                loss,
            } => {
                if let Some(c) = capacity {
                    self.capacity = c.clone();
                    self.queue.set_capacity(now, c);
                }
                if let Some(d) = delay {
                    self.queue
                        .set_delay(now, roam_trace::Piecewise::constant(d));
                }
                if let Some(l) = loss {
                    self.queue.set_loss(now, l);
                }
            }
        }
    }

    /// Write the per-packet log up to the end of `bins`: the packets' arrivals (`+ bytes`),
    /// departures (`- bytes delay_ms`) and drops (`d 1 bytes`), and the bins' delivery
    /// opportunities (`# 1500`), in time order, times in ms since the emulator started.
    /// Opportunities are the link's capacity over each bin in 1500-byte units, spread evenly
    /// within it (exact for rate links; for a Mahimahi trace, its opportunities within 100 ms).
    fn write_packet_log(&mut self, bins: &[(Time, BinStats)]) {
        let Some(log) = self.packet_log.as_mut() else {
            return;
        };
        log.pending.extend(self.queue.take_packet_events());
        let Some(&(last, _)) = bins.last() else {
            return;
        };
        let width = self.queue.bin_width();
        let end = last + width;
        let ms = |t: Time| t.as_nanos() / 1_000_000;
        let mut lines: Vec<(Time, String)> = Vec::new();
        for &(t, _) in bins {
            let bytes = self.capacity.bytes_between(t, t + width).unwrap_or(0) + log.carry;
            let n = bytes / MTU_BYTES;
            log.carry = bytes % MTU_BYTES;
            for k in 0..n {
                let at = t + width.mul_f64(k as f64 / n as f64);
                lines.push((at, format!("{} # {MTU_BYTES}", ms(at))));
            }
        }
        let later = log
            .pending
            .iter()
            .position(|e| e.at() >= end)
            .unwrap_or(log.pending.len());
        for e in log.pending.drain(..later) {
            let line = match e {
                PacketEvent::Arrival { at, bytes } => format!("{} + {bytes}", ms(at)),
                PacketEvent::Departure { at, bytes, queued } => {
                    format!("{} - {bytes} {}", ms(at), queued.as_millis())
                }
                PacketEvent::Drop { at, bytes } => format!("{} d 1 {bytes}", ms(at)),
            };
            lines.push((e.at(), line));
        }
        lines.sort_by_key(|l| l.0);
        for (_, l) in lines {
            let _ = writeln!(log.out, "{l}");
        }
    }

    fn flush(&mut self, bins: Vec<(Time, BinStats)>) {
        self.write_packet_log(&bins);
        let width = self.queue.bin_width();
        for (t, b) in bins {
            self.counters.add(&b);
            if let Some(w) = self.log.as_mut() {
                let secs = width.as_secs_f64();
                let cap = self
                    .capacity
                    .bytes_between(t, t + width)
                    .map(|c| format!("{:.4}", c as f64 * 8.0 / secs / 1e6))
                    .unwrap_or_else(|| "inf".into());
                let avg = if b.delivered_pkts > 0 {
                    b.qdelay_sum_ns as f64 / b.delivered_pkts as f64 / 1e6
                } else {
                    0.0
                };
                let _ = writeln!(
                    w,
                    "{:.3},{},{},{},{:.4},{},{:.3},{:.3},{},{},{},{}",
                    t.as_secs_f64(),
                    b.arrived_bytes,
                    b.delivered_bytes,
                    b.delivered_pkts,
                    b.delivered_bytes as f64 * 8.0 / secs / 1e6,
                    cap,
                    avg,
                    b.qdelay_max_ns as f64 / 1e6,
                    b.drops_queue,
                    b.drops_loss,
                    b.drops_outage,
                    u8::from(self.queue.available_at(t))
                );
            }
        }
    }
}

fn run_events(
    d: Dispatcher,
    events: Vec<ScheduledCommand>,
    stop: Arc<AtomicBool>,
    warnings: Arc<Mutex<Vec<String>>>,
) {
    for e in events {
        let at = Time::ZERO + e.at;
        loop {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            let now = d.clock.now();
            if now >= at {
                break;
            }
            std::thread::sleep((at - now).min(Duration::from_millis(20)));
        }
        if let Err(msg) = d.send(&e.command) {
            warnings
                .lock()
                .unwrap()
                .push(format!("event at {:?}: {msg}", e.at));
        }
    }
}

fn run_control(listener: UnixListener, d: Dispatcher, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                let d = d.clone();
                std::thread::spawn(move || {
                    let _ = stream.set_nonblocking(false);
                    let mut out = match stream.try_clone() {
                        Ok(s) => s,
                        Err(_) => return,
                    };
                    for line in BufReader::new(stream).lines() {
                        let Ok(line) = line else { break };
                        let words: Vec<&str> = line.split_whitespace().collect();
                        if words.is_empty() {
                            continue;
                        }
                        let reply = crate::control::parse_command(&words)
                            .and_then(|c| d.send(&c))
                            .map(|_| "ok".to_string())
                            .unwrap_or_else(|e| format!("error: {e}"));
                        if writeln!(out, "{reply}").is_err() {
                            break;
                        }
                    }
                });
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}
