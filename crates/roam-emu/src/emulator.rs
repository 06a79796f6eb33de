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
//!
//! **More hosts** ([`EmuConfig::hosts`], [`EmuConfig::ends`]): besides the client and the
//! server, named hosts (a phone, a second client) each get a namespace and an address of their
//! own on loopback, `10.78.k.1` for the k-th ([`Emulator::host_addr`]); a link may join any two
//! hosts (`client`, `server` or a named one; by default the client and the server). On a link
//! between A and B, A takes `10.77.i.2` and B `10.77.i.1`, and each routes the other's own
//! address over it (the first such link by metric); A's default route goes over its links to
//! the server only, so a client with a USB link to the phone still reaches the server over
//! its WAN. Policy routing by source address works on every A side as on the client.
//! The client's default route uses the first link; policy routing (`from 10.77.i.2 lookup
//! 100+i`) sends a socket bound to a link's address through that link, and SO_BINDTODEVICE on the
//! device name works as well. Every link's address is also an MPTCP subflow endpoint, so an
//! MPTCP socket uses all links.

use crate::control::{Command, LinkCommand, ScheduledCommand};
use crate::forward::{Carrier, Forwarder, PacketLog};
pub use crate::forward::{DirCounters, LATE, LOG_HEADER};
use crate::queue::LinkQueue;
use crate::spec::{env_name, LinkConfig};
use crate::sys::{self, EventFd};
use roam_core::{Clock, Time};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Sender};
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
    /// Hosts besides `client` and `server` (each a namespace; names of 1-15 letters or
    /// digits).
    pub hosts: Vec<String>,
    /// The two hosts a link joins, by link name: (A, B), where A takes the client's side of
    /// the link (the `up` direction runs from A to B). Links not named join the client (A) and
    /// the server (B).
    pub ends: HashMap<String, (String, String)>,
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
    /// The named hosts' namespaces, in `EmuConfig::hosts` order.
    hosts: Vec<(String, OwnedFd)>,
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

/// The own address of the `k`-th named host (from 0).
fn host_addr(k: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 78, k as u8 + 1, 1)
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
        if cfg.hosts.len() > 50 {
            return Err(EmuError::Config(
                "at most 50 hosts besides client and server".into(),
            ));
        }
        let mut host_names = std::collections::HashSet::from(["client", "server"]);
        for h in &cfg.hosts {
            let ok = !h.is_empty() && h.len() <= 15 && h.bytes().all(|b| b.is_ascii_alphanumeric());
            if !ok {
                return Err(EmuError::Config(format!(
                    "host name `{h}`: 1-15 letters or digits"
                )));
            }
            if !host_names.insert(h.as_str()) {
                return Err(EmuError::Config(format!("host `{h}` given twice")));
            }
        }
        let mut ends = Vec::with_capacity(cfg.links.len());
        for l in &cfg.links {
            let (a, b) = cfg
                .ends
                .get(&l.name)
                .cloned()
                .unwrap_or_else(|| ("client".into(), "server".into()));
            for h in [&a, &b] {
                if !host_names.contains(h.as_str()) {
                    return Err(EmuError::Config(format!(
                        "link `{}` joins unknown host `{h}` (hosts: client, server{})",
                        l.name,
                        cfg.hosts
                            .iter()
                            .map(|h| format!(", {h}"))
                            .collect::<String>()
                    )));
                }
            }
            if a == b {
                return Err(EmuError::Config(format!(
                    "link `{}` joins host `{a}` to itself",
                    l.name
                )));
            }
            ends.push((a, b));
        }
        for name in cfg.ends.keys() {
            if !seen.contains(name) {
                return Err(EmuError::Config(format!(
                    "ends given for unknown link `{name}`"
                )));
            }
        }
        sys::check_privileges().map_err(EmuError::Privilege)?;
        let client_ns = sys::new_netns().map_err(io_err("creating the client namespace"))?;
        let server_ns = sys::new_netns().map_err(io_err("creating the server namespace"))?;
        let mut hosts = Vec::new();
        for h in &cfg.hosts {
            let ns = sys::new_netns().map_err(io_err(format!("creating host {h}'s namespace")))?;
            hosts.push((h.clone(), ns));
        }
        let ns_of = |h: &str| -> &OwnedFd {
            match h {
                "client" => &client_ns,
                "server" => &server_ns,
                _ => &hosts.iter().find(|(n, _)| n == h).expect("validated").1,
            }
        };
        let own_addr = |h: &str| -> Option<Ipv4Addr> {
            match h {
                "client" => None,
                "server" => Some(SERVER_ADDR),
                _ => cfg.hosts.iter().position(|n| n == h).map(host_addr),
            }
        };
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
        // Each link's TUN device on its A side and on its B side.
        let mut a_tuns = Vec::with_capacity(names.len());
        let mut b_tuns = Vec::with_capacity(names.len());
        for (n, (a, b)) in names.iter().zip(&ends) {
            let one = std::slice::from_ref(n);
            let mut t = sys::in_netns(ns_of(a), || make_tuns(one))
                .map_err(io_err(format!("entering host {a}'s namespace")))??;
            a_tuns.push(t.remove(0));
            let mut t = sys::in_netns(ns_of(b), || make_tuns(one))
                .map_err(io_err(format!("entering host {b}'s namespace")))??;
            b_tuns.push(t.remove(0));
        }

        let mut scripts: HashMap<String, String> = HashMap::new();
        for h in ["client", "server"]
            .into_iter()
            .chain(cfg.hosts.iter().map(|h| h.as_str()))
        {
            let mut sc = String::from("link set lo up\n");
            if let Some(a) = own_addr(h) {
                sc += &format!("addr add {a}/32 dev lo\n");
            }
            scripts.insert(h.to_string(), sc);
        }
        for (i, (n, (a, b))) in names.iter().zip(&ends).enumerate() {
            let (c, p) = (client_addr(i), peer_addr(i));
            let table = 100 + i;
            let sa = scripts.get_mut(a).expect("every host has a script");
            *sa += &format!(
                "link set dev {n} up\naddr add {c}/24 dev {n}\nroute add default dev {n} table {table}\nrule add from {c} lookup {table} pref {}\n",
                1000 + i
            );
            if b == "server" {
                *sa += &format!("route add default dev {n} metric {}\n", 100 + i);
            }
            if let Some(ob) = own_addr(b) {
                *sa += &format!("route append {ob}/32 dev {n} metric {}\n", 100 + i);
            }
            let sb = scripts.get_mut(b).expect("every host has a script");
            *sb += &format!("link set dev {n} up\naddr add {p}/24 dev {n}\n");
            if let Some(oa) = own_addr(a) {
                *sb += &format!("route append {oa}/32 dev {n} metric {}\n", 100 + i);
            }
        }
        for (h, sc) in &scripts {
            run_ip(ns_of(h), sc, &format!("host {h}'s namespace"))?;
        }
        let mut warnings = Vec::new();
        let mut mptcp_c = String::from("mptcp limits set subflows 8 add_addr_accepted 8\n");
        for (i, (n, (a, _))) in names.iter().zip(&ends).enumerate() {
            if a == "client" {
                mptcp_c += &format!("mptcp endpoint add {} dev {n} subflow\n", client_addr(i));
            }
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
            .zip(a_tuns.into_iter().zip(b_tuns))
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
                        let path = d.join(format!("{}.{dir}.mm.log", l.name));
                        queue.record_packet_events();
                        Some(
                            PacketLog::create(&path, &l.name, dir)
                                .map_err(io_err(format!("creating {}", path.display())))?,
                        )
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
                        .map(Carrier::new),
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
            hosts,
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

    /// Every namespace: the client's, the server's, the named hosts'.
    pub fn namespaces(&self) -> Vec<&OwnedFd> {
        let mut v = vec![&self.client_ns, &self.server_ns];
        v.extend(self.hosts.iter().map(|(_, ns)| ns));
        v
    }

    /// Host `name`'s namespace (`client`, `server` or one of [`EmuConfig::hosts`]).
    pub fn host_ns(&self, name: &str) -> Option<&OwnedFd> {
        match name {
            "client" => Some(&self.client_ns),
            "server" => Some(&self.server_ns),
            _ => self.hosts.iter().find(|(n, _)| n == name).map(|(_, ns)| ns),
        }
    }

    /// Host `name`'s own address, reachable over every link that joins it to another host
    /// (the server's is [`SERVER_ADDR`]; the client has none).
    pub fn host_addr(&self, name: &str) -> Option<Ipv4Addr> {
        match name {
            "server" => Some(SERVER_ADDR),
            _ => self
                .hosts
                .iter()
                .position(|(n, _)| n == name)
                .map(host_addr),
        }
    }

    /// Run `f` on a new thread inside host `name`'s namespace (`None`: no such host).
    pub fn spawn_in_host<R: Send + 'static>(
        &self,
        name: &str,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> Option<JoinHandle<std::io::Result<R>>> {
        self.host_ns(name).map(|ns| spawn_in(ns, f))
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
        for (k, (h, _)) in self.hosts.iter().enumerate() {
            v.push((
                format!("ROAM_HOST_{}_ADDR", env_name(h)),
                host_addr(k).to_string(),
            ));
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
