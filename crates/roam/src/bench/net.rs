//! `roam bench net`: Intentional Networking's cost and benefit, as JSON on stdout (progress on
//! stderr).
//!
//! - `loopback_throughput_ratio_vs_tcp`: one multi-socket (background-large IROBs of 1 MiB,
//!   each depending on all earlier ones) against one plain TCP connection, both over loopback:
//!   the median of `--loopback-runs` ratios (5), each of a TCP run and a multi-socket run
//!   back to back, interleaved so that the machine's drift hits both alike (`loopback_runs`,
//!   `loopback_ratios`; `loopback.roam_tls_gbit` adds the multi-socket with TLS). `--flow`
//!   names the multi-sockets' flow control (AFC by default); with several, each runs in every
//!   pair and `loopback_by_flow` gives each one's ratios (the first is the headline);
//!   `loopback_cpu`: what each run cost the process, both ends together (`getrusage`): CPU
//!   seconds and context switches per GB moved, and the median of the pairs' CPU ratios
//!   (`cpu_per_gb_vs_tcp`): what the bytes cost, beside how fast they went (issue 48 asks for
//!   CPU per GB within 1.2x of TCP's); both move with the machine's other load, the
//!   voluntary switches alone (`..._voluntary_switches_per_gb`: the hand-offs) much less;
//! - `small_message_rate_ratio_vs_tcp`: 64-byte foreground-small messages per second against
//!   64-byte messages on a TCP_NODELAY connection, both batching alike: the multi-socket's
//!   writer coalesces the frames queued since its last pass into one system call, so the TCP
//!   sender buffers its messages and writes each hundred at once (`tcp_unbatched_msgs_per_s`:
//!   one write a message, for reference);
//! - `round_trip_us`: a 64-byte request answered by a 64-byte response, one at a time, TCP's
//!   and the multi-socket's (median and 90th percentile, `--round-trips` each): what the
//!   hand-offs between threads cost a request (issue 48, item 1), counted as context switches
//!   per round trip (`voluntary_switches_per_round_trip`, the hand-offs alone, can be read
//!   on a loaded machine); `roam_sender_writes`: who
//!   wrote the multi-socket senders' batches, the sending thread or a writer task
//!   (`--writer-only` turns the first off, to measure what it buys);
//! - `hotspot`: the crowded-hotspot scenario (wifi 0.6 Mbit/s 20 ms RTT, cell 2.0 Mbit/s 400 ms RTT,
//!   100-packet queues) for `roam` (multi-socket over both links), `mptcp` (Linux MPTCP, default
//!   scheduler, subflows on both links) and `tcp_aggregation` (plain TCP over the one link that
//!   has the summed bandwidth and the lower latency each second). A background bulk download
//!   runs for the whole loaded phase while a 1 KB foreground request / 1 KB response is issued
//!   every 2 s. Reported: median foreground latency without and with the download, and the
//!   download's goodput as a fraction of the two links' summed capacity. The baselines carry
//!   foreground requests on their own connection (the most favourable choice for them).
//!
//! Every TCP sender uses CUBIC, Linux's default (this machine's default is BBR; see
//! docs/emulator.md).

use roam_net::proto::NetKind;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use clap::Args;
use roam_emu::traffic::{
    bulk_download, bulk_server_with, connect_from, listen, set_congestion_control,
};
use roam_emu::{EmuConfig, Emulator, LinkConfig, SERVER_ADDR};
use roam_lab::harness::system::{Builtin, System};
use roam_net::proto::session::FlowPolicy;
use roam_net::proto::{Deps, Label};
use roam_net::runtime::blocking::{Listener, MultiSocket};
use roam_net::runtime::{LocalNetwork, Networks, Options, Tls, WriteCounts};
use roam_trace::scenario::Scenario;
use serde_json::json;

use super::net_sessions::usage::{Cost, Cpu};
use super::net_sessions::{self, Stack};

mod round_trips;
use round_trips::{roam_round_trips, tcp_round_trips};

pub(super) const CC: &str = "cubic";
const REQ: usize = 1024;

/// Options of `roam bench net`.
#[derive(Args, Debug)]
pub struct BenchNetArgs {
    /// Seconds of the loaded phase (a foreground request every 2 s meanwhile).
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Foreground requests in the unloaded phase (one per second).
    #[arg(long, default_value_t = 10)]
    unloaded_requests: u32,
    /// Seconds per loopback measurement.
    #[arg(long, default_value_t = 3)]
    loopback_seconds: u64,
    /// Interleaved TCP / multi-socket pairs of loopback throughput runs (the ratio reported is
    /// their median).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    loopback_runs: u32,
    /// Only these systems on the hotspot (comma-separated: roam, mptcp, tcp_aggregation; `none`
    /// for the loopback measurements only).
    #[arg(long, default_value = "roam,mptcp,tcp_aggregation")]
    systems: String,
    /// Flow control of the loopback multi-sockets, both ends (comma-separated, each run in
    /// every interleaved pair: legacy, standard, afc, afc-receiver-only); the first gives
    /// `loopback_throughput_ratio_vs_tcp`.
    #[arg(long, default_value = "afc", value_delimiter = ',')]
    flow: Vec<FlowPolicy>,
    /// Round trips of a 64-byte request and a 64-byte response, one at a time, over loopback:
    /// TCP's and the multi-socket's (foreground small), their median and 90th percentile.
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u32).range(10..))]
    round_trips: u32,
    /// The loopback multi-sockets hand every send to their connections' writer tasks, as before
    /// issue 48's direct writes (`Options::writes_from_caller` off): what those buy.
    #[arg(long)]
    writer_only: bool,
    /// Instead of all the above: at the scale of a relay. Open this many idle sessions (both
    /// ends in one process) of roam-net multi-sockets, plain TCP and QUIC (quinn), each stack
    /// in a child process, and report memory, accept rate and wake-ups per idle session and
    /// the aggregate throughput of `--active` sessions against one's (method and keys: docs/intentional-networking.md).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub(super) sessions: Option<u32>,
    /// With --sessions: how many sessions send at once in each aggregate run (comma-separated;
    /// counts above --sessions are skipped).
    #[arg(long, default_value = "10,100,1000", value_delimiter = ',')]
    active: Vec<u32>,
    /// With --sessions: seconds each aggregate run is measured (after 1 s of ramp-up).
    #[arg(long, default_value_t = 3)]
    active_seconds: u64,
    /// With --sessions: seconds of each idle window (wake-ups, CPU).
    #[arg(long, default_value_t = 5)]
    idle_seconds: u64,
    /// With --sessions: seconds the N sessions sit idle before the idle window (memory that
    /// idle sessions keep taking shows only after a while).
    #[arg(long, default_value_t = 2)]
    idle_settle: u64,
    /// With --sessions: the stacks, in order (comma-separated: roam, tcp, quic).
    #[arg(long, default_value = "roam,tcp,quic", value_delimiter = ',')]
    stacks: Vec<Stack>,
    /// With --sessions: threads opening sessions at once.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=1024))]
    open_concurrency: u32,
    /// With --sessions: seconds the whole run may take; a stack that overruns its share is
    /// stopped and reported.
    #[arg(long, default_value_t = 1800)]
    sessions_deadline: u64,
    /// Internal: measure the one stack of --stacks in this process (the parent's child).
    #[arg(long, hide = true)]
    sessions_child: bool,
}

pub(super) fn roam_options(networks: Networks) -> Options {
    Options {
        networks,
        congestion_control: Some(CC.into()),
        ..Options::default()
    }
}

pub(super) fn lo() -> Networks {
    Networks::Explicit(vec![LocalNetwork {
        name: "lo".into(),
        addr: Ipv4Addr::LOCALHOST.into(),
        kind: NetKind::default(),
    }])
}

// ----- loopback ---------------------------------------------------------------------------------

fn tcp_pair() -> Result<(TcpStream, TcpStream)> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    let c = TcpStream::connect(l.local_addr()?)?;
    let (s, _) = l.accept()?;
    c.set_nodelay(true)?;
    set_congestion_control(&c, CC).ok();
    Ok((c, s))
}

/// Read until end of stream: (bytes, seconds from the first byte to the end).
fn drain(s: &mut TcpStream) -> (u64, f64) {
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    let mut first = None;
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        first.get_or_insert_with(Instant::now);
        total += n as u64;
    }
    (total, first.map_or(0.0, |f| f.elapsed().as_secs_f64()))
}

/// One loopback bulk run: what the receiver saw, and what it cost the process (both ends run
/// in it, so its CPU time and context switches are both sides' together; issue 48 asks for CPU
/// per GB within 1.2x of TCP's).
#[derive(Clone, Copy, Debug)]
struct Bulk {
    /// Bytes a second: the total over the span from first to last byte.
    bytes_per_s: f64,
    /// CPU time and context switches per GB moved.
    cost: Cost,
    /// A multi-socket sender's batches: written by the sending thread, or by its writer task
    /// (a hand-off; `roam_net::runtime::WriteCounts`).
    writes: Option<WriteCounts>,
}

/// Run `transfer` (returning the bytes received and the receiver's span in seconds), counting
/// the process's CPU time and context switches across it.
fn counted(transfer: impl FnOnce() -> Result<(u64, f64)>) -> Result<Bulk> {
    let before = net_sessions::usage::cpu();
    let (total, span) = transfer()?;
    let after = net_sessions::usage::cpu();
    if total == 0 || span <= 0.0 {
        bail!("the receiver got nothing");
    }
    Ok(Bulk {
        bytes_per_s: total as f64 / span,
        cost: after.cost_since(&before, total),
        writes: None,
    })
}

/// One TCP connection's bulk transfer for `secs` seconds.
fn tcp_throughput(secs: u64) -> Result<Bulk> {
    counted(|| {
        let (mut c, mut s) = tcp_pair()?;
        let rx = std::thread::spawn(move || drain(&mut s));
        let buf = vec![0x5au8; 1 << 20];
        let end = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < end {
            c.write_all(&buf)?;
        }
        drop(c);
        rx.join().map_err(|_| anyhow!("receiver panicked"))
    })
}

/// How the loopback multi-sockets are set up: their flow control (both ends) and whether a
/// send may write from the sending thread (`--writer-only` turns it off).
#[derive(Clone, Copy, Debug)]
struct Setup {
    flow: FlowPolicy,
    writes_from_caller: bool,
}

/// A connected pair over loopback; with `tls`, every connection is TLS under a fresh
/// self-signed certificate.
fn roam_pair(tls: bool, setup: Setup) -> Result<(MultiSocket, MultiSocket, Listener)> {
    let (mut server, mut client) = (roam_options(lo()), roam_options(lo()));
    for o in [&mut server, &mut client] {
        o.config.flow.policy = setup.flow;
        o.writes_from_caller = setup.writes_from_caller;
    }
    if tls {
        let c = rcgen::generate_simple_self_signed(vec!["roam.bench".to_string()])?;
        let (cert, key) = (c.cert.pem(), c.signing_key.serialize_pem());
        server.tls = Some(Tls::server(cert.as_bytes(), key.as_bytes())?);
        client.tls = Some(Tls::client(cert.as_bytes(), "roam.bench")?);
    }
    let l = Listener::bind("127.0.0.1:0".parse().unwrap(), server)?;
    let addr = l.local_addr();
    let t = std::thread::spawn(move || MultiSocket::connect(addr, client));
    let s = l.accept()?;
    let c = t.join().map_err(|_| anyhow!("connect panicked"))??;
    Ok((c, s, l))
}

/// One multi-socket's bulk transfer for `secs` seconds (the pair's set-up counted too).
fn roam_throughput(secs: u64, tls: bool, setup: Setup) -> Result<Bulk> {
    let mut writes = None;
    let mut bulk = counted(|| {
        let (c, s, _l) = roam_pair(tls, setup)?;
        let rx = std::thread::spawn(move || {
            let mut total = 0u64;
            let mut first = None;
            while let Ok(Some(d)) = s.recv() {
                first.get_or_insert_with(Instant::now);
                total += d.data.len() as u64;
            }
            (total, first.map_or(0.0, |f| f.elapsed().as_secs_f64()))
        });
        let buf = Bytes::from(vec![0x5au8; 1 << 20]);
        let end = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < end {
            c.send(Label::BackgroundLarge, buf.clone(), None)?;
        }
        c.close(Duration::from_secs(30));
        writes = Some(c.write_counts());
        rx.join().map_err(|_| anyhow!("receiver panicked"))
    })?;
    bulk.writes = writes;
    Ok(bulk)
}

/// 64-byte messages per second over a TCP_NODELAY connection; `batched`: written a hundred at
/// a time through a buffer (as the multi-socket's writer coalesces its frames), else one
/// system call each.
fn tcp_message_rate(secs: u64, batched: bool) -> Result<f64> {
    let (c, mut s) = tcp_pair()?;
    let rx = std::thread::spawn(move || {
        let (bytes, span) = drain(&mut s);
        (bytes / 64, span)
    });
    let msg = [7u8; 64];
    let mut c = std::io::BufWriter::with_capacity(if batched { 100 * 64 } else { 0 }, c);
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        for _ in 0..100 {
            c.write_all(&msg)?;
        }
        c.flush()?;
    }
    let c = c.into_inner().map_err(|e| e.into_error())?;
    drop(c);
    let (n, span) = rx.join().map_err(|_| anyhow!("receiver panicked"))?;
    Ok(n as f64 / span)
}

/// Who wrote the multi-socket senders' batches (issue 48, item 1: the sending thread itself,
/// or its writer task after a hand-off): summed over the headline flow control's bulk runs,
/// and in the small-message run.
fn sender_writes(runs: &[(Bulk, Vec<Bulk>)], messages: WriteCounts) -> serde_json::Value {
    let (mut caller, mut writer) = (0, 0);
    for w in runs.iter().filter_map(|r| r.1[0].writes) {
        caller += w.from_caller;
        writer += w.from_writer;
    }
    json!({
        "bulk": { "from_caller": caller, "from_writer": writer },
        "small_messages": { "from_caller": messages.from_caller, "from_writer": messages.from_writer },
    })
}

fn roam_message_rate(secs: u64, setup: Setup) -> Result<(f64, WriteCounts)> {
    let (c, s, _l) = roam_pair(false, setup)?;
    let rx = std::thread::spawn(move || {
        let mut n = 0u64;
        let mut first = None;
        while let Ok(Some(d)) = s.recv() {
            first.get_or_insert_with(Instant::now);
            if d.end {
                n += 1;
            }
        }
        (n, first.map_or(0.0, |f| f.elapsed().as_secs_f64()))
    });
    let msg = Bytes::from_static(&[7u8; 64]);
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        for _ in 0..100 {
            c.send(Label::ForegroundSmall, msg.clone(), None)?;
        }
    }
    c.close(Duration::from_secs(30));
    let writes = c.write_counts();
    let (n, span) = rx.join().map_err(|_| anyhow!("receiver panicked"))?;
    Ok((n as f64 / span, writes))
}

// ----- hotspot ----------------------------------------------------------------------------------

/// What one system measured on the hotspot.
struct Hotspot {
    unloaded: Vec<Duration>,
    loaded: Vec<Duration>,
    bg_bytes: u64,
    window: Duration,
}

fn median_ms(v: &[Duration]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut v = v.to_vec();
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e3
}

/// The hotspot's links for `system` (roam-lab's definition: 100-packet queues; the baselines
/// on one derived link).
fn hotspot_links(scenario: &Scenario, system: Builtin) -> Result<Vec<LinkConfig>> {
    System::from(system).links(
        scenario,
        Duration::from_secs(3300),
        roam_lab::harness::system::QUEUE,
    )
}

/// A 1 KB request / 1 KB response server over TCP or MPTCP, in the server namespace.
fn request_server(
    emu: &Emulator,
    port: u16,
    mptcp: bool,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<std::io::Result<()>> {
    let (tx, rx) = mpsc::channel();
    let h = emu.spawn_in_server(move || {
        let l = match listen(port, mptcp) {
            Ok(l) => l,
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        };
        let _ = tx.send(Ok(()));
        l.set_nonblocking(true).ok();
        while !stop.load(Ordering::Relaxed) {
            match l.accept() {
                Ok((mut c, _)) => {
                    c.set_nonblocking(false).ok();
                    set_congestion_control(&c, CC).ok();
                    c.set_nodelay(true).ok();
                    let stop = stop.clone();
                    std::thread::spawn(move || {
                        let mut buf = [0u8; REQ];
                        c.set_read_timeout(Some(Duration::from_millis(200))).ok();
                        while !stop.load(Ordering::Relaxed) {
                            match c.read_exact(&mut buf) {
                                Ok(()) => {
                                    if c.write_all(&buf).is_err() {
                                        break;
                                    }
                                }
                                Err(e)
                                    if matches!(
                                        e.kind(),
                                        std::io::ErrorKind::WouldBlock
                                            | std::io::ErrorKind::TimedOut
                                    ) => {}
                                Err(_) => break,
                            }
                        }
                    });
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    });
    let _ = rx.recv_timeout(Duration::from_secs(5));
    h
}

/// Baseline systems: plain TCP (or MPTCP) bulk download plus a separate request connection.
fn hotspot_baseline(scenario: &Scenario, mptcp: bool, args: &BenchNetArgs) -> Result<Hotspot> {
    let links = hotspot_links(
        scenario,
        if mptcp {
            Builtin::Mptcp
        } else {
            Builtin::Aggregation
        },
    )?;
    let emu = Emulator::start(EmuConfig {
        links,
        ..Default::default()
    })?;
    let stop = Arc::new(AtomicBool::new(false));
    let bulk = bulk_server_with(&emu, 5200, mptcp, Some(CC))?;
    let reqs = request_server(&emu, 5201, mptcp, stop.clone());
    let local = emu.links()[0].client_addr;
    let clock = emu.clock();
    let (seconds, unloaded_n) = (args.seconds, args.unloaded_requests);
    let client = emu.spawn_in_client(move || -> Result<Hotspot> {
        let mut c = connect_from(local, 5201, mptcp, Duration::from_secs(10))?;
        set_congestion_control(&c, CC).ok();
        let ask = |c: &mut TcpStream| -> Result<Duration> {
            let t0 = Instant::now();
            c.write_all(&[1u8; REQ])?;
            let mut buf = [0u8; REQ];
            c.read_exact(&mut buf)?;
            Ok(t0.elapsed())
        };
        let mut unloaded = Vec::new();
        for _ in 0..unloaded_n {
            unloaded.push(ask(&mut c)?);
            std::thread::sleep(Duration::from_secs(1));
        }
        let warm = Duration::from_secs(5);
        let start = clock.now();
        let until = start + warm + Duration::from_secs(seconds);
        let dl = std::thread::spawn(move || {
            bulk_download(clock, local, 5200, mptcp, until, Duration::from_secs(30))
        });
        std::thread::sleep(warm);
        let mut loaded = Vec::new();
        let t_end = Instant::now() + Duration::from_secs(seconds);
        while Instant::now() + Duration::from_secs(2) <= t_end {
            let t = Instant::now();
            loaded.push(ask(&mut c)?);
            eprint!(
                "\r  {} requests loaded, last {:.0} ms   ",
                loaded.len(),
                loaded.last().unwrap().as_secs_f64() * 1e3
            );
            std::thread::sleep(Duration::from_secs(2).saturating_sub(t.elapsed()));
        }
        eprintln!();
        let r = dl.join().map_err(|_| anyhow!("download panicked"))?;
        let bg = r.bytes_between(start + warm, until);
        Ok(Hotspot {
            unloaded,
            loaded,
            bg_bytes: bg,
            window: Duration::from_secs(seconds),
        })
    });
    let r = client.join().map_err(|_| anyhow!("client panicked"))?;
    stop.store(true, Ordering::Relaxed);
    bulk.stop();
    let _ = reqs.join();
    r?
}

/// roam: one multi-socket carries the bulk download (background large) and the requests
/// (foreground small) over both links.
///
/// The server ([`start_roam_server`]) answers the client's requests and, once asked, sends
/// background IROBs without end; the client ([`roam_client`]) measures requests without and
/// then with that download running. A server error is only a warning: the client's
/// measurements stand without it.
fn hotspot_roam(scenario: &Scenario, args: &BenchNetArgs) -> Result<Hotspot> {
    let links = hotspot_links(scenario, Builtin::Roam)?;
    let emu = Emulator::start(EmuConfig {
        links,
        ..Default::default()
    })?;
    let server = start_roam_server(&emu)?;
    let (seconds, unloaded_n) = (args.seconds, args.unloaded_requests);
    let client = emu.spawn_in_client(move || roam_client(seconds, unloaded_n));
    let r = client.join().map_err(|_| anyhow!("client panicked"))??;
    let s = server.join().map_err(|_| anyhow!("server panicked"))?;
    if let Err(e) = s.map_err(anyhow::Error::from).and_then(|x| x) {
        eprintln!("warning: roam server: {e}");
    }
    r
}

/// The roam server's address (in the server namespace).
fn roam_server_addr() -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(SERVER_ADDR, 5300))
}

// What the roam client asks of the server: the first byte of each foreground IROB it sends.
/// A 1 KB request, answered with itself.
const ASK_REPLY: u8 = b'R';
/// Start the background download (no reply).
const ASK_BULK: u8 = b'B';
/// The measurements are over: stop serving.
const ASK_QUIT: u8 = b'Q';

/// Start the roam server in the server namespace, and wait (up to 10 s) until it listens, so
/// that the client's first connection attempt finds it. The server accepts one multi-socket
/// and serves it ([`serve_roam`]).
fn start_roam_server(
    emu: &Emulator,
) -> Result<std::thread::JoinHandle<std::io::Result<Result<()>>>> {
    let (ready_tx, ready_rx) = mpsc::channel();
    let server = emu.spawn_in_server(move || -> Result<()> {
        let l = Listener::bind(roam_server_addr(), roam_options(Networks::Auto))?;
        ready_tx.send(()).ok();
        let ms = l.accept()?;
        serve_roam(&ms)
    });
    ready_rx
        .recv_timeout(Duration::from_secs(10))
        .context("the roam server did not start")?;
    Ok(server)
}

/// Serve the client's requests, one foreground IROB each, until it says it is done (or the
/// multi-socket ends): the first [`ASK_BULK`] starts the background download
/// ([`spawn_bulk_sender`]); anything else (a request, a repeated [`ASK_BULK`]) is sent back
/// as a foreground IROB. The download is stopped and waited for before returning.
fn serve_roam(ms: &MultiSocket) -> Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut bulk = None;
    while let Some((_, _, req)) = ms.recv_irob()? {
        match req.first() {
            Some(&ASK_BULK) if bulk.is_none() => {
                bulk = Some(spawn_bulk_sender(ms.clone(), stop.clone()));
            }
            Some(&ASK_QUIT) => {
                if std::env::var_os("ROAM_BENCH_DEBUG").is_some() {
                    eprintln!("server estimates: {:?}", ms.estimates());
                }
                break;
            }
            _ => send_foreground(ms, req)?,
        }
    }
    stop.store(true, Ordering::Relaxed);
    if let Some(b) = bulk {
        let _ = b.join();
    }
    Ok(())
}

/// The background download: independent background-large IROBs of 64 KiB, one after
/// another, until `stop` is set or the multi-socket refuses one. Independent (no
/// dependencies), so that a foreground reply is never held behind them.
fn spawn_bulk_sender(ms: MultiSocket, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let chunk = Bytes::from(vec![0x5au8; 64 * 1024]);
        while !stop.load(Ordering::Relaxed) {
            let Ok(id) = ms.begin_irob(Label::BackgroundLarge, Deps::List(vec![]), None) else {
                break;
            };
            if ms.irob_send(id, chunk.clone()).is_err() || ms.end_irob(id).is_err() {
                break;
            }
        }
    })
}

/// Send `data` as one foreground-small IROB of its own, depending on nothing.
fn send_foreground(ms: &MultiSocket, data: impl Into<Bytes>) -> Result<()> {
    let id = ms.begin_irob(Label::ForegroundSmall, Deps::List(vec![]), None)?;
    ms.irob_send(id, data)?;
    ms.end_irob(id)?;
    Ok(())
}

/// The roam client, in the client namespace: `unloaded_n` requests a second apart on the idle
/// links (after 2 s for the first probes and estimates), then the background download, and
/// after 5 s for it to ramp up, `seconds` of requests every 2 s beside it
/// ([`roam_loaded_phase`]). Last, it tells the server it is done and closes.
fn roam_client(seconds: u64, unloaded_n: u32) -> Result<Hotspot> {
    let ms = MultiSocket::connect(roam_server_addr(), roam_options(Networks::Auto))?;
    let (replies, rx) = receive_replies(&ms);
    std::thread::sleep(Duration::from_secs(2)); // probes and first estimates
    let mut unloaded = Vec::new();
    for _ in 0..unloaded_n {
        unloaded.push(ask(&ms, &replies.at, ASK_REPLY)?);
        std::thread::sleep(Duration::from_secs(1));
    }
    // Start the bulk download (a small foreground message that gets no reply).
    send_foreground(&ms, Bytes::from_static(&[ASK_BULK]))?;
    std::thread::sleep(Duration::from_secs(5));
    let (loaded, window) = roam_loaded_phase(&ms, &replies, seconds)?;
    send_foreground(&ms, Bytes::from_static(&[ASK_QUIT]))?;
    ms.close(Duration::from_secs(10));
    drop(rx);
    Ok(Hotspot {
        unloaded,
        loaded,
        bg_bytes: replies.bg_bytes.load(Ordering::Relaxed),
        window,
    })
}

/// What the client's receiving thread hands over.
struct Replies {
    /// When each reply to a request ended.
    at: mpsc::Receiver<Instant>,
    /// Background bytes received while `counting`.
    bg_bytes: Arc<AtomicU64>,
    /// Whether the loaded phase's window is open.
    counting: Arc<AtomicBool>,
}

/// The client's one receiving thread. Replies and the download arrive on the same
/// multi-socket, so one thread reads everything and sorts it: the end of a foreground reply
/// is timestamped as it arrives and handed to the request waiting for it, and background
/// bytes are counted while the loaded phase's window is open.
fn receive_replies(ms: &MultiSocket) -> (Replies, std::thread::JoinHandle<()>) {
    let (reply_tx, reply_rx) = mpsc::channel::<Instant>();
    let bg = Arc::new(AtomicU64::new(0));
    let counting = Arc::new(AtomicBool::new(false));
    let (rms, bg2, counting2) = (ms.clone(), bg.clone(), counting.clone());
    let rx = std::thread::spawn(move || {
        while let Ok(Some(d)) = rms.recv() {
            if d.label == Label::ForegroundSmall {
                if d.end {
                    let _ = reply_tx.send(Instant::now());
                }
            } else if counting2.load(Ordering::Relaxed) {
                bg2.fetch_add(d.data.len() as u64, Ordering::Relaxed);
            }
        }
    });
    let replies = Replies {
        at: reply_rx,
        bg_bytes: bg,
        counting,
    };
    (replies, rx)
}

/// One request (1 KB, first byte `tag`) and its latency: from before it is sent until the
/// receiving thread saw its reply end. A reply that takes over 60 s fails the run.
fn ask(ms: &MultiSocket, replies: &mpsc::Receiver<Instant>, tag: u8) -> Result<Duration> {
    let t0 = Instant::now();
    let mut req = vec![1u8; REQ];
    req[0] = tag;
    send_foreground(ms, req)?;
    let at = replies
        .recv_timeout(Duration::from_secs(60))
        .context("no reply within 60 s")?;
    Ok(at - t0)
}

/// The loaded phase: a request every 2 s for `seconds` (the last one starting at least 2 s
/// before the end), with background bytes counted over the whole window. Returns the
/// requests' latencies and the window's length, over which the goodput is computed.
fn roam_loaded_phase(
    ms: &MultiSocket,
    replies: &Replies,
    seconds: u64,
) -> Result<(Vec<Duration>, Duration)> {
    replies.counting.store(true, Ordering::Relaxed);
    let t_start = Instant::now();
    let t_end = t_start + Duration::from_secs(seconds);
    let mut loaded = Vec::new();
    while Instant::now() + Duration::from_secs(2) <= t_end {
        let t = Instant::now();
        loaded.push(ask(ms, &replies.at, ASK_REPLY)?);
        eprint!(
            "\r  {} requests loaded, last {:.0} ms   ",
            loaded.len(),
            loaded.last().unwrap().as_secs_f64() * 1e3
        );
        std::thread::sleep(Duration::from_secs(2).saturating_sub(t.elapsed()));
    }
    std::thread::sleep(t_end.saturating_duration_since(Instant::now()));
    replies.counting.store(false, Ordering::Relaxed);
    let window = t_start.elapsed();
    eprintln!();
    Ok((loaded, window))
}

/// Summed downlink capacity of the scenario's links over `[0, d)`, bytes.
fn capacity_bytes(scenario: &Scenario, d: Duration) -> f64 {
    let secs = d.as_secs().max(1);
    scenario
        .links
        .iter()
        .map(|l| {
            l.trace
                .per_second(Duration::from_secs(secs))
                .iter()
                .map(|s| s.down_kbps * 1000.0 / 8.0 * s.available)
                .sum::<f64>()
        })
        .sum::<f64>()
        * d.as_secs_f64()
        / secs as f64
}

/// Run the benchmark and print JSON.
pub fn net(a: &BenchNetArgs) -> Result<()> {
    if let Some(n) = a.sessions {
        return net_sessions::run(&net_sessions::Settings {
            sessions: n as usize,
            active: a.active.iter().map(|&k| k as usize).collect(),
            active_seconds: a.active_seconds,
            idle_seconds: a.idle_seconds,
            idle_settle: a.idle_settle,
            stacks: a.stacks.clone(),
            concurrency: a.open_concurrency as usize,
            deadline: Duration::from_secs(a.sessions_deadline),
            child: a.sessions_child,
        });
    }
    let systems: Vec<&str> = a
        .systems
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty() && *s != "none")
        .collect();
    for s in &systems {
        if !["roam", "mptcp", "tcp_aggregation"].contains(s) {
            bail!("--systems: unknown system `{s}` (roam, mptcp, tcp_aggregation)");
        }
    }
    eprintln!(
        "loopback throughput: {} interleaved pairs of runs, {} s each...",
        a.loopback_runs, a.loopback_seconds
    );
    let flow = a.flow.first().copied().unwrap_or_default();
    let setup = |flow| Setup {
        flow,
        writes_from_caller: !a.writer_only,
    };
    // Per run: TCP's transfer, then each flow control's.
    let mut runs: Vec<(Bulk, Vec<Bulk>)> = Vec::new();
    for i in 0..a.loopback_runs {
        let tcp = tcp_throughput(a.loopback_seconds)?;
        let mut roam = Vec::new();
        for &p in &a.flow {
            let r = roam_throughput(a.loopback_seconds, false, setup(p))?;
            eprintln!(
                "  run {}: tcp {:.2} Gbit/s ({:.2} CPU s/GB, {:.0} switches/GB), roam ({}) \
                 {:.2} Gbit/s ({:.2} CPU s/GB, {:.0} switches/GB), ratio {:.3}",
                i + 1,
                tcp.bytes_per_s * 8e-9,
                tcp.cost.cpu_s_per_gb,
                tcp.cost.switches_per_gb,
                p.name(),
                r.bytes_per_s * 8e-9,
                r.cost.cpu_s_per_gb,
                r.cost.switches_per_gb,
                r.bytes_per_s / tcp.bytes_per_s
            );
            roam.push(r);
        }
        runs.push((tcp, roam));
    }
    let median = |mut v: Vec<f64>| roam_trace::stats::median(&mut v);
    let ratios_of = |k: usize| -> Vec<f64> {
        runs.iter()
            .map(|(t, r)| r[k].bytes_per_s / t.bytes_per_s)
            .collect()
    };
    let ratios = ratios_of(0);
    let ratio = median(ratios.clone());
    let tcp_of = |f: fn(&Bulk) -> f64| median(runs.iter().map(|r| f(&r.0)).collect());
    let roam_of = |f: fn(&Bulk) -> f64| median(runs.iter().map(|r| f(&r.1[0])).collect());
    let tcp_bps = tcp_of(|b| b.bytes_per_s);
    let roam_bps = roam_of(|b| b.bytes_per_s);
    let cpu_ratios: Vec<f64> = runs
        .iter()
        .map(|(t, r)| r[0].cost.cpu_s_per_gb / t.cost.cpu_s_per_gb)
        .collect();
    let cpu = json!({
        "cpu_per_gb_vs_tcp": median(cpu_ratios.clone()),
        "cpu_ratios": cpu_ratios,
        "tcp_cpu_s_per_gb": tcp_of(|b| b.cost.cpu_s_per_gb),
        "roam_cpu_s_per_gb": roam_of(|b| b.cost.cpu_s_per_gb),
        "tcp_switches_per_gb": tcp_of(|b| b.cost.switches_per_gb),
        "roam_switches_per_gb": roam_of(|b| b.cost.switches_per_gb),
        "tcp_voluntary_switches_per_gb": tcp_of(|b| b.cost.voluntary_per_gb),
        "roam_voluntary_switches_per_gb": roam_of(|b| b.cost.voluntary_per_gb),
    });
    let by_flow: serde_json::Map<String, serde_json::Value> = a
        .flow
        .iter()
        .enumerate()
        .map(|(k, p)| {
            let v = json!({
                "ratio_vs_tcp": median(ratios_of(k)),
                "ratios": ratios_of(k),
                "gbit": median(runs.iter().map(|r| r.1[k].bytes_per_s).collect()) * 8e-9,
                "cpu_s_per_gb": median(runs.iter().map(|r| r.1[k].cost.cpu_s_per_gb).collect()),
                "switches_per_gb": median(runs.iter().map(|r| r.1[k].cost.switches_per_gb).collect()),
            });
            (p.name().to_string(), v)
        })
        .collect();
    let roam_tls_bps = roam_throughput(a.loopback_seconds, true, setup(flow))?.bytes_per_s;
    eprintln!(
        "  median ratio {ratio:.3}; roam over TLS {:.2} Gbit/s",
        roam_tls_bps * 8e-9
    );
    eprintln!("small messages ({} s each)...", a.loopback_seconds);
    let tcp_rate = tcp_message_rate(a.loopback_seconds, true)?;
    let tcp_unbatched = tcp_message_rate(a.loopback_seconds, false)?;
    let (roam_rate, message_writes) = roam_message_rate(a.loopback_seconds, setup(flow))?;
    eprintln!("  tcp {tcp_rate:.0}/s ({tcp_unbatched:.0}/s unbatched), roam {roam_rate:.0}/s");
    eprintln!(
        "request and response ({} round trips each)...",
        a.round_trips
    );
    let tcp_rt = tcp_round_trips(a.round_trips)?;
    let roam_rt = roam_round_trips(a.round_trips, setup(flow))?;
    let round_trip = json!({
        "tcp": tcp_rt.json(),
        "roam": roam_rt.json(),
        "median_vs_tcp": roam_rt.median_us / tcp_rt.median_us,
    });
    eprintln!("  {round_trip}");

    let scenario = Scenario::by_name("hotspot", 1)?;
    let mut hotspot = serde_json::Map::new();
    for sys in systems {
        eprintln!(
            "hotspot, {sys}: {} unloaded requests, then {} s with a background download...",
            a.unloaded_requests, a.seconds
        );
        let r = match sys {
            "roam" => hotspot_roam(&scenario, a),
            "mptcp" => hotspot_baseline(&scenario, true, a),
            _ => hotspot_baseline(&scenario, false, a),
        };
        match r {
            Ok(h) => {
                let cap = capacity_bytes(&scenario, h.window);
                let v = json!({
                    "fg_ms_unloaded": median_ms(&h.unloaded),
                    "fg_ms_loaded": median_ms(&h.loaded),
                    "bg_goodput_fraction": h.bg_bytes as f64 / cap,
                    "fg_requests_loaded": h.loaded.len(),
                    "bg_bytes": h.bg_bytes,
                    "window_s": h.window.as_secs_f64(),
                });
                eprintln!("  {v}");
                hotspot.insert(sys.to_string(), v);
            }
            Err(e) => {
                eprintln!("  {sys} failed: {e:#}");
                hotspot.insert(sys.to_string(), json!({ "error": format!("{e:#}") }));
            }
        }
    }
    let out = json!({
        "loopback_throughput_ratio_vs_tcp": ratio,
        "loopback_runs": a.loopback_runs,
        "loopback_ratios": ratios,
        "loopback_flow": flow.name(),
        "loopback_by_flow": by_flow,
        "loopback_cpu": cpu,
        "roam_sender_writes": sender_writes(&runs, message_writes),
        "small_message_rate_ratio_vs_tcp": roam_rate / tcp_rate,
        "round_trip_us": round_trip,
        "writes_from_caller": !a.writer_only,
        "loopback": { "tcp_gbit": tcp_bps * 8e-9, "roam_gbit": roam_bps * 8e-9, "roam_tls_gbit": roam_tls_bps * 8e-9, "tcp_msgs_per_s": tcp_rate, "tcp_unbatched_msgs_per_s": tcp_unbatched, "roam_msgs_per_s": roam_rate },
        "hotspot": hotspot,
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
