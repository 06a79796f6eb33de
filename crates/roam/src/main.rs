//! The `roam` command: one binary, one subcommand per tool.

mod bench;
mod bench_decide;
mod bench_net;
mod bench_prefetch;
mod bench_store;
mod bench_transfer;
mod drive;
mod emu_plot;
mod energy_cmd;
mod lab_cmd;
mod net_proxy;
mod parcel_cmd;
mod progress;
mod transfer_cmd;
mod transfer_put;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use roam_emu::spec::{parse_link, parse_queue, LinkConfig, DEFAULT_QUEUE};
use roam_emu::{EmuConfig, Emulator};
use roam_trace::baseline::derive;
use roam_trace::scenario::Scenario;
use roam_trace::{LinkKind, NamedLink};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "roam",
    version,
    about = "A runtime for applications on several networks at once"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// The trace-driven multi-link network emulator.
    #[command(subcommand)]
    Emu(EmuCmd),
    /// Link traces: statistics, plots, derived baselines.
    #[command(subcommand)]
    Trace(TraceCmd),
    /// Intentional Networking tools.
    #[command(subcommand)]
    Net(NetCmd),
    /// Benchmarks, printing JSON on stdout.
    #[command(subcommand)]
    Bench(BenchCmd),
    /// Emulate a drive (the `vehicular` scenario): traffic over each link, a per-link table and
    /// a plot.
    Drive(drive::DriveArgs),
    /// The lab: the papers' applications against their baselines and MPTCP, with reports.
    #[command(subcommand)]
    Lab(LabCmd),
    /// Radio energy (modelled) and data per link, from an emulator log directory or live from
    /// interfaces' counters; draws power and radio state over time.
    Energy(energy_cmd::EnergyArgs),
    /// Bulk HTTP transfers with chosen concurrency, parallelism and block size (FastHLA's
    /// engine).
    #[command(subcommand)]
    Transfer(TransferCmd),
    /// FastHLA's HLA server: collect devices' transfer logs, learn the best parameters per
    /// network condition, serve them.
    #[command(subcommand)]
    Hla(HlaCmd),
    /// Horatio: a VM's state carried by the phone between borrowed PCs (the phone's and the
    /// server's tiers; init, resume, suspend, self-cleaning, status).
    #[command(subcommand)]
    Parcel(parcel_cmd::ParcelCmd),
}

#[derive(Subcommand)]
enum HlaCmd {
    /// Serve: POST /logs (JSON lines of records), GET /update (clusters' optima and a model).
    Serve(transfer_cmd::ServeArgs),
    /// The server's analysis once, on a file of logs: clusters, optima, each learner's
    /// cross-validated accuracy.
    Train(transfer_cmd::TrainArgs),
}

#[derive(Subcommand)]
enum TransferCmd {
    /// Download URLs (or a list of them) into a directory; resumable, never leaving an
    /// incomplete file under its final name.
    Get(transfer_cmd::GetArgs),
    /// Upload files and directories with HTTP PUT, several at once; a stream that breaks off
    /// or stalls is sent again.
    Put(transfer_put::PutArgs),
}

#[derive(Subcommand)]
enum LabCmd {
    /// Reproduce the Intentional Networking evaluation (three applications, four baselines,
    /// four scenarios) into results/in-paper/.
    InPaper(lab_cmd::InPaperArgs),
    /// Reproduce the IMP thesis's evaluation (e-mail under energy and data budgets; never,
    /// size-limit, WiFi-only, always-prefetch and IMP; driving and walking) into results/imp/.
    Imp(lab_cmd::InPaperArgs),
    /// Reproduce the Meatballs thesis's network-selection evaluation (requests of 1 KB,
    /// responses of 4 KB; cellular-only, WiFi-preferred, adaptive and Meatballs with each
    /// method and cost level; walking and driving) into results/meatballs/.
    Meatballs(lab_cmd::InPaperArgs),
    /// Reproduce FastHLA's evaluation: sweeps of concurrency, parallelism and block size over
    /// emulated WiFi and LTE at 59, 115 and 290 ms, learning from them, and FastHLA against
    /// wget, curl (HTTP/1.1 and HTTP/2) and aria2, into results/fasthla/.
    Fasthla(lab_cmd::FasthlaArgs),
    /// Reproduce Horatio's evaluation: suspend and resume by dirty state to ISR's server over
    /// 1 and 10 Mbit/s, the phone over USB and WiFi, and a fast local card; self-cleaning over
    /// WiFi and 3G; the six workloads; into results/horatio/.
    Horatio(lab_cmd::InPaperArgs),
}

#[derive(Subcommand)]
enum EmuCmd {
    /// Run a command inside emulated links.
    Run(Box<RunArgs>),
    /// Send a command to a running emulator's control socket, e.g. `wifi down`.
    Ctl {
        /// The control socket (`--control` of `roam emu run`, `$ROAM_EMU_CONTROL` inside it).
        socket: PathBuf,
        /// The command: `LINK down`, `LINK up`, `LINK set rate=R,delay=D,loss=P`.
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
    /// Seed for on/off availability and loss.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Queue bound for scenario links (e.g. 100pkt, 64kb).
    #[arg(long)]
    queue: Option<String>,
}

impl LinkArgs {
    /// Resolve to link configurations.
    pub fn resolve(&self) -> Result<Vec<LinkConfig>> {
        let mut out = Vec::new();
        let queue = match &self.queue {
            Some(q) => parse_queue(q).map_err(|e| anyhow::anyhow!("--queue {q}: {e}"))?,
            None => DEFAULT_QUEUE,
        };
        if let Some(name) = &self.scenario {
            let s = roam_emu::scenario_file::scenario(name, self.seed)
                .map_err(|e| anyhow::anyhow!("--scenario {name}: {e}"))?;
            if let Some(b) = &self.baseline {
                let b = roam_emu::baseline_file::baseline(b)
                    .map_err(|e| anyhow::anyhow!("--baseline {b}: {e}"))?;
                let t = derive(&s, &b.spec, Duration::from_secs(3600))?;
                out.push(LinkConfig {
                    name: "link".into(),
                    kind: LinkKind::Other,
                    trace: t.to_link(),
                    queue,
                    jitter: Default::default(),
                    carrier_after: None,
                    seed: self.seed,
                });
            } else {
                for (i, NamedLink { name, kind, trace }) in s.links.into_iter().enumerate() {
                    out.push(LinkConfig {
                        name,
                        kind,
                        trace,
                        queue,
                        jitter: Default::default(),
                        carrier_after: None,
                        seed: self.seed.wrapping_add(i as u64 * 1000),
                    });
                }
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

#[derive(Args)]
struct RunArgs {
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
    /// Scripted link changes: lines of `<time> LINK down|up|set k=v,...`.
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
    /// Capture the packets each link delivers into DIR/<link>.<up|down>.pcap (raw IP, readable
    /// by tcpdump and Wireshark; stamped when they left the link).
    #[arg(long, value_name = "DIR")]
    pcap: Option<PathBuf>,
    /// The client command and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

#[derive(Subcommand)]
enum TraceCmd {
    /// Print a scenario's statistics as the paper's trace table.
    Stats {
        #[command(flatten)]
        links: LinkArgs,
        /// Window to summarise.
        #[arg(long, default_value = "30m", value_parser = parse_dur)]
        duration: Duration,
    },
    /// Draw capacity and availability over time to SVG.
    Plot {
        #[command(flatten)]
        links: LinkArgs,
        /// Window to draw.
        #[arg(long, default_value = "10m", value_parser = parse_dur)]
        duration: Duration,
        /// Output SVG.
        #[arg(short, long, default_value = "trace.svg")]
        output: PathBuf,
    },
    /// Derive a single-link baseline per second and write it as an interval CSV.
    Baseline {
        /// best-latency, best-bandwidth or aggregation, or a baseline file FILE.toml.
        #[arg(long)]
        kind: String,
        #[command(flatten)]
        links: LinkArgs,
        /// Length of the derived trace (it repeats after).
        #[arg(long, default_value = "30m", value_parser = parse_dur)]
        duration: Duration,
        /// Output CSV (`-` for stdout).
        #[arg(short, long, default_value = "-")]
        output: String,
    },
}

#[derive(Subcommand)]
enum BenchCmd {
    /// Emulator fidelity and speed.
    Emu(bench::BenchEmuArgs),
    /// Intentional Networking: loopback cost against TCP, and the crowded hotspot against
    /// Linux MPTCP and TCP over idealized aggregation.
    Net(bench_net::BenchNetArgs),
    /// Informed Mobile Prefetching: decision time per hint, and the energy and data budgets'
    /// controllers over whole simulated periods (no network needed).
    Prefetch(bench_prefetch::BenchPrefetchArgs),
    /// Meatballs: microseconds per decision for each evaluation method, with 2 and 4
    /// strategies and 50 or 500 error samples per predictor (no network needed).
    Decide(bench_decide::BenchDecideArgs),
    /// Horatio: how fast one core seals an image and ingests it into a directory store; with
    /// the emulator, a suspend of 100 MB dirty to the phone over USB and the resume from it.
    Store(bench_store::BenchStoreArgs),
    /// FastHLA: throughput as a fraction of a 100 Mbit/s, 290 ms link against the best of
    /// today's tools, the model's prediction time, and CPU per GB against curl.
    Transfer(bench_transfer::BenchTransferArgs),
}

#[derive(Subcommand)]
enum NetCmd {
    /// Each network's current estimates (RTT, bandwidth) and outstanding background bytes, as
    /// published by the multi-socket processes of this network namespace.
    Estimates {
        /// The shared table (default: $ROAM_NET_SHM or /dev/shm/roam-net-<netns inode>).
        #[arg(long)]
        shm: Option<PathBuf>,
        /// Print again every second until interrupted.
        #[arg(long)]
        watch: bool,
    },
    /// On the device: carry unmodified programs' TCP connections (SOCKS5, or redirected by the
    /// firewall) over multi-sockets to a `roam net relay`, labelled by destination port.
    Proxy(net_proxy::ProxyArgs),
    /// At the server side: open the TCP connections `roam net proxy` asks for (where --allow
    /// permits) and copy their bytes over the multi-sockets.
    Relay(net_proxy::RelayArgs),
}

fn net_estimates(shm: Option<PathBuf>, watch: bool) -> Result<()> {
    use roam_net::runtime::shm::SharedCounts;
    let path = shm.unwrap_or_else(SharedCounts::default_path);
    if !path.exists() {
        bail!(
            "{}: no estimates published (no multi-socket has run in this network namespace)",
            path.display()
        );
    }
    let table =
        SharedCounts::open(path.clone()).with_context(|| format!("opening {}", path.display()))?;
    loop {
        let entries = table.entries();
        println!("| pid | network | RTT (ms) | bandwidth (kbit/s) | background outstanding (bytes) | age (ms) |");
        println!("|---:|---|---:|---:|---:|---:|");
        for e in &entries {
            let rtt = e
                .rtt
                .map_or("-".to_string(), |d| format!("{:.1}", d.as_secs_f64() * 1e3));
            let bw = e
                .bandwidth
                .map_or("-".to_string(), |b| format!("{:.0}", b.as_kbps_f64()));
            println!(
                "| {} | {} | {} | {} | {} | {} |",
                e.pid, e.network, rtt, bw, e.outstanding, e.age_ms
            );
        }
        if entries.is_empty() {
            println!("(no live multi-socket process has published in the last 2 s)");
        }
        if !watch {
            return Ok(());
        }
        std::thread::sleep(Duration::from_secs(1));
        println!();
    }
}

pub(crate) fn parse_dur(s: &str) -> Result<Duration, String> {
    roam_core::parse_duration(s).map_err(|e| e.to_string())
}

fn main() {
    let cli = Cli::parse();
    // Without root, try a user namespace before any thread exists (unshare requires that).
    if matches!(
        cli.cmd,
        Cmd::Emu(EmuCmd::Run(_))
            | Cmd::Bench(BenchCmd::Emu(_) | BenchCmd::Net(_) | BenchCmd::Transfer(_))
            | Cmd::Drive(_)
            | Cmd::Lab(_)
    ) && !roam_emu::sys::is_root()
    {
        if let Err(e) = roam_emu::sys::enter_user_namespace() {
            eprintln!("roam: needs root, or unprivileged user namespaces (unshare failed: {e})");
            std::process::exit(2);
        }
    }
    match real_main(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("roam: {e:#}");
            std::process::exit(2);
        }
    }
}

fn real_main(cli: Cli) -> Result<i32> {
    match cli.cmd {
        Cmd::Emu(EmuCmd::Run(a)) => {
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
            let mut hosts = Vec::new();
            let mut host_cmds = Vec::new();
            for h in &a.hosts {
                match h.split_once('=') {
                    Some((n, c)) => {
                        hosts.push(n.to_string());
                        host_cmds.push((n.to_string(), c.to_string()));
                    }
                    None => hosts.push(h.clone()),
                }
            }
            let mut ends = std::collections::HashMap::new();
            for e in &a.ends {
                let (link, pair) = e
                    .split_once('=')
                    .ok_or_else(|| anyhow::anyhow!("--ends {e:?}: expected LINK=A-B"))?;
                let (x, y) = pair
                    .split_once('-')
                    .ok_or_else(|| anyhow::anyhow!("--ends {e:?}: expected LINK=A-B"))?;
                ends.insert(link.to_string(), (x.to_string(), y.to_string()));
            }
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
        Cmd::Emu(EmuCmd::Ctl { socket, command }) => {
            use std::io::{BufRead, BufReader, Write};
            let mut s = std::os::unix::net::UnixStream::connect(&socket)
                .with_context(|| format!("connecting to {}", socket.display()))?;
            writeln!(s, "{}", command.join(" "))?;
            let mut reply = String::new();
            BufReader::new(&s).read_line(&mut reply)?;
            let reply = reply.trim();
            if reply == "ok" {
                Ok(0)
            } else {
                bail!("{}", reply.trim_start_matches("error: "))
            }
        }
        Cmd::Emu(EmuCmd::Plot { dir, output }) => {
            let fig = emu_plot::figure(&dir)?;
            std::fs::write(&output, fig.to_svg())
                .with_context(|| format!("writing {}", output.display()))?;
            eprintln!("wrote {}", output.display());
            Ok(0)
        }
        Cmd::Trace(TraceCmd::Stats { links, duration }) => {
            let s = links.scenario()?;
            print!(
                "{}",
                roam_trace::stats::scenario_stats(&s, duration).to_markdown()
            );
            Ok(0)
        }
        Cmd::Trace(TraceCmd::Plot {
            links,
            duration,
            output,
        }) => {
            let s = links.scenario()?;
            let fig = roam_trace::plot::scenario_figure(&s, duration);
            std::fs::write(&output, fig.to_svg())
                .with_context(|| format!("writing {}", output.display()))?;
            eprintln!("wrote {}", output.display());
            Ok(0)
        }
        Cmd::Trace(TraceCmd::Baseline {
            kind,
            links,
            duration,
            output,
        }) => {
            let b = roam_emu::baseline_file::baseline(&kind)
                .map_err(|e| anyhow::anyhow!("--kind {kind}: {e}"))?;
            let s = links.scenario()?;
            let t = derive(&s, &b.spec, duration)?;
            if output == "-" {
                print!("{}", t.to_csv());
            } else {
                std::fs::write(&output, t.to_csv()).with_context(|| format!("writing {output}"))?;
                eprintln!("wrote {output}");
            }
            Ok(0)
        }
        Cmd::Bench(BenchCmd::Emu(a)) => bench::emu(&a).map(|_| 0),
        Cmd::Bench(BenchCmd::Net(a)) => bench_net::net(&a).map(|_| 0),
        Cmd::Bench(BenchCmd::Prefetch(a)) => bench_prefetch::prefetch(&a).map(|_| 0),
        Cmd::Bench(BenchCmd::Decide(a)) => bench_decide::decide(&a).map(|_| 0),
        Cmd::Bench(BenchCmd::Store(a)) => bench_store::store(&a).map(|_| 0),
        Cmd::Bench(BenchCmd::Transfer(a)) => bench_transfer::transfer(&a).map(|_| 0),
        Cmd::Net(NetCmd::Estimates { shm, watch }) => net_estimates(shm, watch).map(|_| 0),
        Cmd::Net(NetCmd::Proxy(a)) => net_proxy::proxy(a).map(|_| 0),
        Cmd::Transfer(TransferCmd::Get(a)) => transfer_cmd::get(&a).map(|_| 0),
        Cmd::Transfer(TransferCmd::Put(a)) => transfer_put::put(&a).map(|_| 0),
        Cmd::Parcel(c) => parcel_cmd::run(c).map(|_| 0),
        Cmd::Hla(HlaCmd::Serve(a)) => transfer_cmd::serve(&a).map(|_| 0),
        Cmd::Hla(HlaCmd::Train(a)) => transfer_cmd::train(&a).map(|_| 0),
        Cmd::Net(NetCmd::Relay(a)) => net_proxy::relay(a).map(|_| 0),
        Cmd::Drive(a) => drive::drive(&a).map(|_| 0),
        Cmd::Energy(a) => energy_cmd::energy(&a).map(|_| 0),
        Cmd::Lab(LabCmd::InPaper(a)) => lab_cmd::in_paper(&a).map(|_| 0),
        Cmd::Lab(LabCmd::Imp(a)) => lab_cmd::imp(&a).map(|_| 0),
        Cmd::Lab(LabCmd::Meatballs(a)) => lab_cmd::meatballs(&a).map(|_| 0),
        Cmd::Lab(LabCmd::Fasthla(a)) => lab_cmd::fasthla(&a).map(|_| 0),
        Cmd::Lab(LabCmd::Horatio(a)) => lab_cmd::horatio(&a).map(|_| 0),
    }
}
