//! `roam emu`: run a command inside emulated links (`run`), steer a running emulator (`ctl`),
//! plot its logs (`plot`); and the link options (`--link`, `--scenario`, ...) that `roam trace`
//! takes too.

mod plot;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use roam_emu::spec::{parse_link, parse_queue, LinkConfig, DEFAULT_QUEUE};
use roam_emu::{EmuConfig, Emulator};
use roam_trace::baseline::derive;
use roam_trace::scenario::Scenario;
use roam_trace::{LinkKind, NamedLink};

use crate::parse_dur;

/// `roam emu ...`.
#[derive(Subcommand)]
pub enum EmuCmd {
    /// Run a command inside emulated links.
    Run(Box<RunArgs>),
    /// Send a command to a running emulator's control socket, e.g. `wifi down`.
    Ctl {
        /// The control socket (`--control` of `roam emu run`, `$ROAM_EMU_CONTROL` inside it).
        socket: PathBuf,
        /// The command: `LINK down`, `LINK up`, `LINK restart` (its trace from the beginning again), `LINK set rate=R,delay=D,loss=P`.
        #[arg(required = true, num_args = 1..)]
        command: Vec<String>,
    },
    /// Plot an emulator log directory (throughput, capacity, queueing delay per link) to SVG.
    Plot {
        /// The log directory written by `roam emu run`.
        dir: PathBuf,
        /// Output SVG.
        #[arg(short, long, default_value = "emu.svg")]
        output: PathBuf,
    },
}

/// Which links to emulate.
#[derive(Args, Clone, Debug)]
pub struct LinkArgs {
    /// A link: NAME=SPEC, SPEC = comma-separated key=value: rate=10mbit | down=FILE,up=FILE |
    /// trace=FILE.csv; delay=20ms; loss=0.01; queue=100pkt|64kb; onoff=cabernet|FILE; seed=N.
    #[arg(long = "link", value_name = "NAME=SPEC")]
    links: Vec<String>,
    /// A named scenario (hotspot, intermittent, vehicular, vehicular-umts) or a scenario file
    /// (FILE.toml: links in the --link syntax; docs/emulator.md).
    #[arg(long)]
    scenario: Option<String>,
    /// With --scenario: emulate one link (named `link`) derived from the scenario:
    /// best-latency, best-bandwidth or aggregation (the paper's oracles, choosing every
    /// second), or a baseline file FILE.toml (docs/emulator.md).
    #[arg(long, requires = "scenario")]
    baseline: Option<String>,
    /// Seed for on/off availability and loss (a scenario's link i draws its loss from
    /// SEED + i, a --link's i from SEED + 100 + i, unless it fixes seed=).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Queue bound for scenario links (e.g. 100pkt, 64kb).
    #[arg(long)]
    queue: Option<String>,
}

impl LinkArgs {
    /// Resolve to link configurations: the scenario's (or the baseline derived from it), then
    /// the `--link`s.
    pub fn resolve(&self) -> Result<Vec<LinkConfig>> {
        let mut out = Vec::new();
        let queue = match &self.queue {
            Some(q) => parse_queue(q).map_err(|e| anyhow!("--queue {q}: {e}"))?,
            None => DEFAULT_QUEUE,
        };
        if let Some(name) = &self.scenario {
            let s = roam_emu::scenario_file::scenario(name, self.seed)
                .map_err(|e| anyhow!("--scenario {name}: {e}"))?;
            if let Some(b) = &self.baseline {
                let b = roam_emu::baseline_file::baseline(b)
                    .map_err(|e| anyhow!("--baseline {b}: {e}"))?;
                let t = derive(&s, &b.spec, Duration::from_secs(3600))?;
                let one = NamedLink {
                    name: "link".into(),
                    kind: LinkKind::Other,
                    trace: t.to_link(),
                };
                out.push(roam_emu::scenario::link(&one, queue, self.seed));
            } else {
                out.extend(roam_emu::scenario::links(&s, queue, self.seed));
            }
        }
        for (i, l) in self.links.iter().enumerate() {
            out.push(parse_link(l, self.seed.wrapping_add(100 + i as u64))?);
        }
        if out.is_empty() {
            bail!("no links: give --link NAME=SPEC (e.g. --link wifi=rate=10mbit,delay=10ms) or --scenario NAME");
        }
        Ok(out)
    }

    /// As a scenario (for statistics and plots).
    pub fn scenario(&self) -> Result<Scenario> {
        let links = self.resolve()?;
        Ok(Scenario {
            name: self.scenario.clone().unwrap_or_else(|| "links".into()),
            links: links
                .into_iter()
                .map(|l| NamedLink {
                    name: l.name,
                    kind: l.kind,
                    trace: l.trace,
                })
                .collect(),
        })
    }
}

/// Options of `roam emu run`.
#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    links: LinkArgs,
    /// Shell command to run in the server namespace (started first, stopped at the end).
    #[arg(long)]
    server: Option<String>,
    /// How long to wait for the server to open a listening socket.
    #[arg(long, default_value = "3s", value_parser = parse_dur)]
    server_wait: Duration,
    /// A host besides client and server, in a namespace of its own: `NAME`, or `NAME=COMMAND`
    /// to run a shell command there (started before the server, stopped with it; its address
    /// is in `$ROAM_HOST_<NAME>_ADDR`). Repeatable.
    #[arg(long = "host", value_name = "NAME[=COMMAND]")]
    hosts: Vec<String>,
    /// Which two hosts a link joins, `LINK=A-B` (A takes the client's side); links not named
    /// join the client and the server. Example: `--host phone --link usb=12mbit --ends
    /// usb=client-phone`. Repeatable.
    #[arg(long = "ends", value_name = "LINK=A-B")]
    ends: Vec<String>,
    /// Scripted link changes: lines of `<time> LINK down|up|restart|set k=v,...`.
    #[arg(long)]
    events: Option<PathBuf>,
    /// Listen for link commands on this Unix socket (see `roam emu ctl`).
    #[arg(long)]
    control: Option<PathBuf>,
    /// Directory for per-link, per-direction logs.
    #[arg(long, default_value = "roam-emu-log")]
    log_dir: PathBuf,
    /// Do not write logs.
    #[arg(long)]
    no_log: bool,
    /// Width of a log row.
    #[arg(long, default_value = "100ms", value_parser = parse_dur)]
    log_interval: Duration,
    /// Also log every packet in Mahimahi's `mm-link --log` format, LOG_DIR/<link>.<up|down>.mm.log
    /// (arrivals, departures with their queueing delay, drops, delivery opportunities), which
    /// Mahimahi's mm-throughput-graph and mm-delay-graph read.
    #[arg(long, conflicts_with = "no_log")]
    packet_log: bool,
    /// Make this the default TCP congestion control in every namespace (e.g. `cubic`; the
    /// namespaces otherwise inherit the host's). A name the kernel lacks is an error.
    #[arg(long, value_name = "NAME")]
    congestion_control: Option<String>,
    /// Capture the packets each link delivers into DIR/<link>.<up|down>.pcap (raw IP, readable
    /// by tcpdump and Wireshark; stamped when they left the link).
    #[arg(long, value_name = "DIR")]
    pcap: Option<PathBuf>,
    /// The client command and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

impl EmuCmd {
    /// Whether it runs the emulator (which needs root or a user namespace).
    pub fn needs_namespaces(&self) -> bool {
        matches!(self, EmuCmd::Run(_))
    }
}

/// Run `roam emu ...`: the client command's exit status for `run`, 0 otherwise.
pub fn run(cmd: EmuCmd) -> Result<i32> {
    match cmd {
        EmuCmd::Run(a) => emu_run(&a),
        EmuCmd::Ctl { socket, command } => ctl(&socket, &command).map(|_| 0),
        EmuCmd::Plot { dir, output } => {
            let fig = plot::figure(&dir)?;
            std::fs::write(&output, fig.to_svg())
                .with_context(|| format!("writing {}", output.display()))?;
            eprintln!("wrote {}", output.display());
            Ok(0)
        }
    }
}

/// `roam emu run`: the emulator around the client command; its exit status.
fn emu_run(a: &RunArgs) -> Result<i32> {
    let links = a.links.resolve()?;
    let events = match &a.events {
        Some(p) => roam_emu::control::load_events(p).map_err(anyhow::Error::msg)?,
        None => Vec::new(),
    };
    for e in &events {
        if !links.iter().any(|l| l.name == e.command.link) {
            bail!(
                "--events: no link `{}` (links: {})",
                e.command.link,
                links
                    .iter()
                    .map(|l| l.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    let (hosts, host_cmds) = hosts(&a.hosts);
    let ends = ends(&a.ends)?;
    let emu = Emulator::start(EmuConfig {
        links,
        log_dir: (!a.no_log).then(|| a.log_dir.clone()),
        log_interval: Some(a.log_interval),
        packet_log: a.packet_log,
        pcap_dir: a.pcap.clone(),
        events,
        control_socket: a.control.clone(),
        hosts,
        ends,
        congestion_control: a.congestion_control.clone(),
    })?;
    let code = roam_emu::run::run(
        emu,
        &roam_emu::run::RunSpec {
            server: a.server.clone(),
            client: a.command.clone(),
            server_wait: if a.server.is_some() || !host_cmds.is_empty() {
                a.server_wait
            } else {
                Duration::ZERO
            },
            hosts: host_cmds,
        },
    )?;
    Ok(code)
}

/// `--host NAME[=COMMAND]`s: the hosts' names, and the commands of those that have one.
fn hosts(args: &[String]) -> (Vec<String>, Vec<(String, String)>) {
    let mut hosts = Vec::new();
    let mut cmds = Vec::new();
    for h in args {
        match h.split_once('=') {
            Some((n, c)) => {
                hosts.push(n.to_string());
                cmds.push((n.to_string(), c.to_string()));
            }
            None => hosts.push(h.clone()),
        }
    }
    (hosts, cmds)
}

/// `--ends LINK=A-B`s: each link's two hosts.
fn ends(args: &[String]) -> Result<HashMap<String, (String, String)>> {
    let mut ends = HashMap::new();
    for e in args {
        let (link, pair) = e
            .split_once('=')
            .ok_or_else(|| anyhow!("--ends {e:?}: expected LINK=A-B"))?;
        let (x, y) = pair
            .split_once('-')
            .ok_or_else(|| anyhow!("--ends {e:?}: expected LINK=A-B"))?;
        ends.insert(link.to_string(), (x.to_string(), y.to_string()));
    }
    Ok(ends)
}

/// `roam emu ctl`: one command to a running emulator's control socket; its error if it
/// answers one.
fn ctl(socket: &std::path::Path, command: &[String]) -> Result<()> {
    use std::io::{BufRead, BufReader, Write};
    let mut s = std::os::unix::net::UnixStream::connect(socket)
        .with_context(|| format!("connecting to {}", socket.display()))?;
    writeln!(s, "{}", command.join(" "))?;
    let mut reply = String::new();
    BufReader::new(&s).read_line(&mut reply)?;
    let reply = reply.trim();
    if reply == "ok" {
        Ok(())
    } else {
        bail!("{}", reply.trim_start_matches("error: "))
    }
}
