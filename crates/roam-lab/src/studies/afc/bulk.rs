//! One trial of `roam lab afc`: a server that always has data to send, and a client
//! application that reads it at the scenario's read rate (the Sanadhya thesis's set-up, ch. III
//! §3.5, on real sockets in the emulator), paced (`bulk`) or CPU-bound in a cgroup whose share
//! follows the profile (`bulk-cpu`); the reader is [`super::reader`].
//!
//! **Metrics**: goodput (bytes the application read over the run) as a fraction of the ideal,
//! the smaller of the scenario's mean network and read rates; the peak of what the receiver
//! held unread, sampled before each read (`peak_unread_kb`; TCP: the socket's receive queue,
//! `FIONREAD`; roam: the payload its session holds undelivered, complete IROBs or not, plus
//! its connections' kernel receive queues, `MultiSocket::receive_held`: like with like since
//! 2026-11-30; before, roam's figure was the acknowledged bytes alone, kept as
//! `peak_acked_unread_kb`); how often and how long the sender was held by
//! the receiver's window, as far as each stack tells ([`Stalls`]); for roam, the credits sent;
//! for the CPU-bound reader, the CPU it used, the share it was granted and how long its cgroup
//! was throttled.

use std::net::{SocketAddr, SocketAddrV4, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use roam_emu::SERVER_ADDR;
use roam_net::proto::session::{FlowPolicy, FlowStats, Memory};
use roam_net::proto::Label;
use roam_net::runtime::blocking::{Listener, MultiSocket};
use roam_net::runtime::{Error as NetError, Networks, Options};

use super::paper::{table4, Table4};
use super::reader::{read, Read, Reading};
use super::systems::AfcSystem;
use crate::harness::channel::CC;
use crate::harness::trial::{Metric, Trial};

/// The port the trial's server listens on.
pub(super) const PORT: u16 = 7300;

/// How long a client waits for its connection.
pub(super) const CONNECT_WAIT: Duration = Duration::from_secs(20);

/// Bytes per send of the roam server: one IROB, streamed (foreground-large).
const IROB: usize = 64 << 10;

/// Run one trial of `bulk`: the paced reader.
pub fn run(t: &Trial) -> Result<Vec<Metric>> {
    trial(t, Reading::Paced)
}

/// Run one trial of `bulk-cpu`: the CPU-bound reader.
pub fn run_cpu(t: &Trial) -> Result<Vec<Metric>> {
    trial(t, Reading::Cpu)
}

fn trial(t: &Trial, reading: Reading) -> Result<Vec<Metric>> {
    let Some(&system) = t.system.get::<AfcSystem>() else {
        bail!(
            "the AFC study runs its own systems, not `{}`",
            t.system.name()
        );
    };
    let base = t.scenario.name.split('+').next().unwrap_or_default();
    let Some(table) = table4(base) else {
        bail!(
            "scenario `{}` is not one of the AFC study's (afc-s1 .. afc-s5)",
            t.scenario.name
        );
    };
    let shape = Shape::of(&t.scenario.name, table)?;
    let flow = Flow {
        port: PORT,
        buffer: shape.buffer,
        duration: t.duration,
        slot: shape.slot,
        reading,
    };
    let Flowed { read, stalls } = one_flow(t, system, table, flow)?;
    let goodput = read.goodput_mbps();
    let mut m = vec![
        Metric::new("goodput_mbps", goodput, "Mbit/s"),
        Metric::new("fraction_of_ideal", goodput / shape.ideal_mbps, ""),
        Metric::new("peak_unread_kb", read.peak_unread as f64 / 1e3, "kB"),
        Metric::new("buffer_kb", shape.buffer as f64 / 1e3, "kB"),
    ];
    if let Some(cpu) = read.cpu {
        m.extend([
            Metric::new("reader_cpu_s", cpu.used_s, "s"),
            Metric::new("reader_share_s", cpu.granted_s, "s"),
            Metric::new("throttled_s", cpu.throttled_s, "s"),
        ]);
    }
    if let Some(n) = stalls.waits {
        m.push(Metric::new("sender_waits", n as f64, ""));
    }
    if let Some(d) = stalls.wait {
        m.push(Metric::new("sender_wait_s", d.as_secs_f64(), "s"));
    }
    if let Some(rx) = read.flow {
        m.extend([
            Metric::new("peak_acked_unread_kb", rx.peak_unread as f64 / 1e3, "kB"),
            Metric::new("credits", rx.credits_sent as f64, ""),
            Metric::new("proactive_credits", rx.proactive_sent as f64, ""),
            Metric::new("read_rate_negotiated", rx.read_rate as u8 as f64, ""),
        ]);
        if !rx.credit && system != AfcSystem::Roam(FlowPolicy::Legacy) {
            t.note(format!("{}: credit was not negotiated", system.name()));
        }
    }
    Ok(m)
}

/// Where one flow of a trial listens, and the receive buffer it is given.
#[derive(Clone, Copy, Debug)]
pub(super) struct Flow {
    /// The server's port.
    pub(super) port: u16,
    /// The receive buffer (`SO_RCVBUF`, roam's window, QUIC's windows), bytes.
    pub(super) buffer: u64,
    /// How long its reader reads.
    pub(super) duration: Duration,
    /// How long each slot of its read profile lasts: one round trip.
    pub(super) slot: Duration,
    /// How its application reads.
    pub(super) reading: Reading,
}

/// A scenario's read slot, buffer and ideal: Table 4's; where the scenario's name changes
/// the network (`+rtt=` adds to the round trip, `+rate=` scales the rates; see
/// `harness::sweep`), the thesis's rules applied to the changed network, as its sensitivity
/// studies do (§3.5.4): a slot of one round trip, a buffer of `min(mean network rate, mean
/// read rate) * RTT`, an ideal of `min(mean network rate, mean read rate)`. (The network's own
/// pattern keeps its slots of 530 ms: the emulator's trace does not stretch with `+rtt=`.)
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Shape {
    pub(super) slot: Duration,
    pub(super) buffer: u64,
    pub(super) ideal_mbps: f64,
}

impl Shape {
    pub(super) fn of(scenario: &str, table: &Table4) -> Result<Shape> {
        let rtt = roam_trace::scenario::AFC_RTT;
        let (_, v) = crate::harness::sweep::parse(scenario)?;
        if v.extra_rtt.is_zero() && v.rate == 1.0 {
            return Ok(Shape {
                slot: rtt,
                buffer: table.buffer,
                ideal_mbps: table.ideal_mbps,
            });
        }
        let mean = |p: &[f64]| p.iter().sum::<f64>() / p.len().max(1) as f64;
        let net: Vec<f64> = roam_trace::scenario::afc_network(table.scenario)
            .unwrap_or(&[])
            .iter()
            .map(|&m| m as f64 * v.rate)
            .collect();
        let ideal = mean(&net).min(mean(table.read_mbps));
        let slot = rtt + v.extra_rtt;
        Ok(Shape {
            slot,
            buffer: (ideal * 1e6 / 8.0 * slot.as_secs_f64()).round().max(1448.0) as u64,
            ideal_mbps: ideal,
        })
    }
}

/// How often and how long a flow's sender was held by the receiver's window ("sender
/// stalls"), as far as its stack tells; `None` where it does not.
///
/// - roam: the waits for credit and their time (`FlowStats::blocked`, `blocked_time`); none
///   for `roam-legacy`, which has no credit (kernel TCP's window beneath it holds it, uncounted);
/// - kernel TCP: the time the sender was limited by the receive window (`tcpi_rwnd_limited`,
///   read from the server's socket when the trial ends); the kernel does not count the waits;
/// - quinn: the `DATA_BLOCKED` and `STREAM_DATA_BLOCKED` frames it sent (RFC 9000 §4.1: a
///   sender sends one when flow control holds it back): frames, not waits (one wait can
///   send both kinds, and a lost frame is sent again), and no time.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Stalls {
    pub(super) waits: Option<u64>,
    pub(super) wait: Option<Duration>,
}

/// What one flow measured: its reader's figures (for roam, with the receiver's flow
/// statistics) and its sender's stalls.
pub(super) struct Flowed {
    pub(super) read: Read,
    pub(super) stalls: Stalls,
}

/// One flow of `system`.
pub(super) fn one_flow(
    t: &Trial,
    system: AfcSystem,
    table: &'static Table4,
    flow: Flow,
) -> Result<Flowed> {
    Ok(match system {
        AfcSystem::TcpFixed | AfcSystem::TcpAuto => {
            let (read, wait) = tcp(t, system, table, flow)?;
            Flowed {
                read,
                stalls: Stalls { waits: None, wait },
            }
        }
        AfcSystem::Quic => {
            let (read, waits) = super::quic::run(t, table, flow)?;
            Flowed {
                read,
                stalls: Stalls {
                    waits: Some(waits),
                    wait: None,
                },
            }
        }
        AfcSystem::Roam(policy) => {
            let (read, s) = roam(t, system, policy, table, flow)?;
            // Without credit (legacy) nothing in roam holds the sender: kernel TCP's window
            // beneath it does, uncounted.
            let stalls = match policy {
                FlowPolicy::Legacy => Stalls::default(),
                _ => Stalls {
                    waits: Some(s.blocked),
                    wait: Some(s.blocked_time),
                },
            };
            Flowed { read, stalls }
        }
    })
}

/// Kernel TCP: a server that always has data to send ([`tcp_server`]), and a reader whose
/// socket has the scenario's buffer (`tcp-fixed`) or Linux's autotuning (`tcp-auto`). Returns
/// what the reader measured and how long the server was limited by the receive window.
fn tcp(
    t: &Trial,
    system: AfcSystem,
    table: &'static Table4,
    flow: Flow,
) -> Result<(Read, Option<Duration>)> {
    let over = Arc::new(AtomicBool::new(false));
    let server = tcp_server(t, flow.port, over.clone())?;
    let local = t.emu.links()[0].client_addr;
    let fixed = (system == AfcSystem::TcpFixed).then_some(flow.buffer);
    let port = flow.port;
    let duration = flow.duration;
    let read = t
        .emu
        .spawn_in_client(move || -> Result<Read> {
            let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
            if let Some(b) = fixed {
                // Linux doubles it for its bookkeeping and advertises about half: a window of
                // about B.
                s.set_recv_buffer_size(b as usize)?;
            }
            s.bind(&SocketAddrV4::new(local, 0).into())?;
            s.connect_timeout(&SocketAddrV4::new(SERVER_ADDR, port).into(), CONNECT_WAIT)
                .with_context(|| format!("connecting to {SERVER_ADDR}:{port}"))?;
            let mut stream: TcpStream = s.into();
            stream.set_nonblocking(true)?;
            let fd = stream.as_raw_fd();
            let mut buf = vec![0u8; 256 << 10];
            read(
                flow.reading,
                table,
                flow.slot,
                duration,
                |want| {
                    use std::io::Read as _;
                    let mut got = 0u64;
                    while got < want {
                        let n = (want - got).min(buf.len() as u64) as usize;
                        match stream.read(&mut buf[..n]) {
                            Ok(0) => bail!("the server closed the connection"),
                            Ok(n) => got += n as u64,
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                            Err(e) => return Err(e.into()),
                        }
                    }
                    Ok(got)
                },
                || roam_net::runtime::sys::inq(fd).unwrap_or(0),
            )
        })
        .join()
        .map_err(|_| anyhow!("the reader panicked"))?
        .context("entering the client namespace");
    over.store(true, Ordering::SeqCst);
    let held = server
        .join()
        .map_err(|_| anyhow!("the TCP server panicked"))?
        .context("entering the server namespace")?;
    Ok((read??, held?))
}

/// The kernel TCP flows' server, in the server's namespace: one connection, written to as
/// fast as TCP takes it (blocks of 64 KiB, the lab's congestion control) until `over`; then
/// the time its sending was limited by the receiver's window (`tcpi_rwnd_limited`; `None` on
/// kernels without it).
fn tcp_server(
    t: &Trial,
    port: u16,
    over: Arc<AtomicBool>,
) -> Result<std::thread::JoinHandle<std::io::Result<Result<Option<Duration>>>>> {
    use std::io::Write as _;
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let server = t.emu.spawn_in_server(move || -> Result<Option<Duration>> {
        let l = match roam_emu::traffic::listen(port, false) {
            Ok(l) => {
                ready_tx.send(Ok(())).ok();
                l
            }
            Err(e) => {
                ready_tx.send(Err(e.to_string())).ok();
                return Err(e.into());
            }
        };
        l.set_nonblocking(true)?;
        let deadline = std::time::Instant::now() + CONNECT_WAIT;
        let mut c = loop {
            match l.accept() {
                Ok((c, _)) => break c,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if std::time::Instant::now() >= deadline || over.load(Ordering::SeqCst) {
                        bail!("no client within {} s", CONNECT_WAIT.as_secs());
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(e) => return Err(e.into()),
            }
        };
        c.set_nonblocking(false)?;
        roam_emu::traffic::set_congestion_control(&c, CC)
            .with_context(|| format!("setting congestion control {CC}"))?;
        c.set_write_timeout(Some(Duration::from_millis(200)))?;
        let block = vec![0x5au8; 64 * 1024];
        while !over.load(Ordering::SeqCst) {
            match c.write(&block) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => break, // the reader went away
            }
        }
        Ok(roam_net::runtime::sys::tcp_info(c.as_raw_fd())
            .ok()
            .and_then(|i| i.rwnd_limited))
    });
    started(&ready_rx, "the TCP server")?;
    Ok(server)
}

/// Wait for a server thread's word that it listens (or why it does not); `what` names it.
pub(super) fn started(
    ready: &std::sync::mpsc::Receiver<std::result::Result<(), String>>,
    what: &str,
) -> Result<()> {
    match ready.recv_timeout(CONNECT_WAIT) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => bail!("{what} did not start: {e}"),
        Err(_) => bail!("{what} did not start within {} s", CONNECT_WAIT.as_secs()),
    }
}

/// A multi-socket's options with `policy` and the scenario's buffer as its window: credit's
/// (`Memory::Fixed`), or without credit the window of acknowledged unread bytes past which
/// the driver stops reading (kernel TCP's autotuned buffers then hold the rest, which the
/// report cannot see).
fn options(policy: FlowPolicy, buffer: u64) -> Options {
    let mut o = Options {
        networks: Networks::Auto,
        congestion_control: Some(CC.into()),
        ..Options::default()
    };
    o.config.flow.policy = policy;
    o.config.flow.memory = Memory::Fixed(buffer);
    if policy == FlowPolicy::Legacy {
        o.config.window = buffer;
    }
    // Deliveries of at most 16 KiB: the reader's ticks take 7.5 kB (6 Mbit/s) to 22.5 kB
    // each, and a delivery much larger than a tick's allowance reads as a burst, which the
    // read rate's samples would see as a rate several times the profile's (with 64 KiB, AFC's
    // feed-forward, and what the receiver held, doubled).
    o.config.chunk_size = 16 << 10;
    o
}

/// roam-net: a server streaming IROBs with the system's sender policy, and the reader with
/// its receiver policy. Returns what the reader measured and the sender's flow statistics.
fn roam(
    t: &Trial,
    system: AfcSystem,
    policy: FlowPolicy,
    table: &'static Table4,
    flow: Flow,
) -> Result<(Read, FlowStats)> {
    let sender_policy = system.sender_policy().unwrap_or(policy);
    let over = Arc::new(AtomicBool::new(false));
    let stop = over.clone();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let addr = SocketAddr::V4(SocketAddrV4::new(SERVER_ADDR, flow.port));
    let buffer = flow.buffer;
    let server = t.emu.spawn_in_server(move || -> Result<FlowStats> {
        let l = Listener::bind(addr, options(sender_policy, buffer));
        let l = match l {
            Ok(l) => {
                ready_tx.send(Ok(())).ok();
                l
            }
            Err(e) => {
                ready_tx.send(Err(e.to_string())).ok();
                return Err(e.into());
            }
        };
        let Some(ms) = l.accept_timeout(CONNECT_WAIT)? else {
            bail!("no client within {} s", CONNECT_WAIT.as_secs());
        };
        let block = Bytes::from(vec![0x5au8; IROB]);
        while !stop.load(Ordering::SeqCst) {
            match ms.try_send(Label::ForegroundLarge, block.clone()) {
                Ok(_) => {}
                Err(NetError::Send(_)) => std::thread::sleep(Duration::from_millis(2)),
                Err(_) => break, // the client went away
            }
        }
        let stats = ms.flow_stats();
        ms.abort("the trial is over");
        Ok(stats)
    });
    started(&ready_rx, "the roam server")?;
    let duration = flow.duration;
    let read = t
        .emu
        .spawn_in_client(move || -> Result<Read> {
            let ms = MultiSocket::connect(addr, options(policy, buffer))?;
            let mut r = read(
                flow.reading,
                table,
                flow.slot,
                duration,
                |want| {
                    let mut got = 0u64;
                    while got < want {
                        match ms.try_recv()? {
                            Some(d) => got += d.data.len() as u64,
                            None => break,
                        }
                    }
                    Ok(got)
                },
                || ms.receive_held().total(),
            )?;
            r.flow = Some(ms.flow_stats());
            Ok(r)
        })
        .join()
        .map_err(|_| anyhow!("the reader panicked"))?
        .context("entering the client namespace");
    over.store(true, Ordering::SeqCst);
    let sent = server
        .join()
        .map_err(|_| anyhow!("the roam server panicked"))?
        .context("entering the server namespace")?;
    let read = read??;
    Ok((read, sent?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_round_trip_moves_the_slot_and_the_buffer_by_the_thesiss_rule() {
        let s2 = table4("afc-s2").unwrap();
        let plain = Shape::of("afc-s2", s2).unwrap();
        assert_eq!(plain.slot, Duration::from_millis(530));
        assert_eq!(plain.buffer, s2.buffer);
        let longer = Shape::of("afc-s2+rtt=470ms", s2).unwrap();
        assert_eq!(longer.slot, Duration::from_secs(1));
        // min(15, 4) Mbit/s x 1 s.
        assert_eq!(longer.buffer, 500_000);
        assert_eq!(longer.ideal_mbps, 4.0);
        // Half the network's rate: S3's <2, 4, 4> becomes <1, 2, 2>, below the reads' 4.
        let s3 = table4("afc-s3").unwrap();
        let slower = Shape::of("afc-s3+rate=0.5", s3).unwrap();
        assert!((slower.ideal_mbps - 5.0 / 3.0).abs() < 1e-9);
        assert!(Shape::of("afc-s2+bogus=1", s2).is_err());
    }
}
