//! Starting the links: per link and direction, a [`LinkQueue`] built from the link's trace, the
//! files it logs to, and a [`Forwarder`] thread that moves packets between the link's two TUN
//! devices through it.
//!
//! Each link runs as two independent threads, `up` (A to B: reads A's device, writes B's) and
//! `down` (the reverse), so a busy direction never delays the other, and each direction keeps
//! its own queue, counters and logs. A thread sleeps until a packet arrives, a packet is due,
//! a log row is due, or its mailbox's eventfd is rung (a command, or the stop at shutdown).

use super::config::{io_err, EmuConfig, EmuError};
use super::dispatch::Mailbox;
use super::hosts::{client_addr, peer_addr};
use crate::forward::{Carrier, DirCounters, Forwarder, PacketLog, LOG_HEADER};
use crate::pcap::PcapWriter;
use crate::queue::LinkQueue;
use crate::spec::LinkConfig;
use crate::sys::EventFd;
use roam_core::Clock;
use roam_trace::capacity::Capacity;
use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::net::Ipv4Addr;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::channel;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

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

/// What every forwarder shares: the emulator's clock (time zero is when forwarding began) and
/// its wall-clock time, the stop flag, and where the outputs go.
pub(super) struct Shared<'a> {
    pub(super) clock: Clock,
    /// The wall-clock time of the emulator's time zero (for packet captures' stamps).
    pub(super) started_unix: Duration,
    pub(super) stop: &'a Arc<AtomicBool>,
    pub(super) cfg: &'a EmuConfig,
    /// Where links' carrier changes go (`(link, on)`), when something follows them.
    pub(super) carrier_events: Option<std::sync::mpsc::Sender<(usize, bool)>>,
}

/// The forwarding threads started, and how to reach them.
#[derive(Default)]
pub(super) struct Forwarders {
    pub(super) threads: Vec<JoinHandle<()>>,
    /// Every thread's eventfd, rung at shutdown so that each sees the stop flag at once.
    pub(super) wakes: Vec<Arc<EventFd>>,
    /// Each link's two mailboxes (`up`, `down`), for commands ([`super::dispatch`]).
    pub(super) mailboxes: HashMap<String, Vec<Mailbox>>,
}

/// Create the log and capture directories ([`EmuConfig::log_dir`], [`EmuConfig::pcap_dir`]),
/// so that each forwarder can create its files there.
pub(super) fn create_output_dirs(cfg: &EmuConfig) -> Result<(), EmuError> {
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
    Ok(())
}

/// Start both directions of every link of `shared.cfg`, given each link's TUN descriptors
/// `(A's, B's)` in link order; the handles come back in the same order.
pub(super) fn start_links(
    shared: &Shared,
    tuns: Vec<(OwnedFd, OwnedFd)>,
) -> Result<(Vec<LinkHandle>, Forwarders), EmuError> {
    let mut fwd = Forwarders::default();
    let mut links = Vec::with_capacity(tuns.len());
    for (i, (l, tuns)) in shared.cfg.links.iter().zip(tuns).enumerate() {
        links.push(start_link(shared, i, l, tuns, &mut fwd)?);
    }
    Ok((links, fwd))
}

/// One direction of a link, as a forwarder sees it.
struct Direction {
    /// `up` or `down`, as in thread and file names.
    name: &'static str,
    /// The device packets arrive from.
    ingress: Arc<OwnedFd>,
    /// The device packets leave by.
    egress: Arc<OwnedFd>,
    counters: Arc<DirCounters>,
    capacity: Capacity,
    /// The seed of this direction's loss and jitter: the link's own for `up`, scrambled for
    /// `down`, so the two directions lose different packets.
    seed: u64,
}

/// Start link `i` (`l`) over its devices `(a, b)`: its `up` forwarder (A to B), then its
/// `down` forwarder (B to A).
fn start_link(
    shared: &Shared,
    i: usize,
    l: &LinkConfig,
    (a, b): (OwnedFd, OwnedFd),
    fwd: &mut Forwarders,
) -> Result<LinkHandle, EmuError> {
    let (a, b) = (Arc::new(a), Arc::new(b));
    let up = Arc::new(DirCounters::default());
    let down = Arc::new(DirCounters::default());
    for dir in [
        Direction {
            name: "up",
            ingress: a.clone(),
            egress: b.clone(),
            counters: up.clone(),
            capacity: l.trace.up.clone(),
            seed: l.seed,
        },
        Direction {
            name: "down",
            ingress: b.clone(),
            egress: a.clone(),
            counters: down.clone(),
            capacity: l.trace.down.clone(),
            seed: l.seed ^ 0x9e37_79b9_7f4a_7c15,
        },
    ] {
        start_direction(shared, (i, l), dir, fwd)?;
    }
    Ok(LinkHandle {
        name: l.name.clone(),
        client_addr: client_addr(i),
        peer_addr: peer_addr(i),
        up,
        down,
        config: l.clone(),
    })
}

/// Start one direction of link `i` (`l`): build its queue, give it a mailbox, open its logs,
/// and spawn its forwarding thread (`roam-emu <link> <dir>`).
fn start_direction(
    shared: &Shared,
    (i, l): (usize, &LinkConfig),
    dir: Direction,
    fwd: &mut Forwarders,
) -> Result<(), EmuError> {
    let cfg = shared.cfg;
    let mut queue = LinkQueue::new(
        dir.capacity.clone(),
        l.trace.delay.clone(),
        l.trace.availability.clone(),
        l.trace.loss,
        l.queue,
        dir.seed,
    );
    queue.set_bin_width(cfg.log_interval.unwrap_or(Duration::from_millis(100)));
    queue.set_jitter(l.jitter);
    let (tx, rx) = channel();
    let wake = Arc::new(EventFd::new().map_err(io_err("creating an eventfd"))?);
    fwd.mailboxes
        .entry(l.name.clone())
        .or_default()
        .push(Mailbox {
            tx,
            wake: wake.clone(),
        });
    fwd.wakes.push(wake.clone());
    let log = match &cfg.log_dir {
        Some(d) => Some(create_csv_log(d, &l.name, dir.name)?),
        None => None,
    };
    let packet_log = match &cfg.log_dir {
        Some(d) if cfg.packet_log => {
            queue.record_packet_events();
            Some(create_packet_log(d, &l.name, dir.name)?)
        }
        _ => None,
    };
    let pcap = match &cfg.pcap_dir {
        Some(d) => Some(create_pcap(d, &l.name, dir.name)?),
        None => None,
    };
    let forwarder = Forwarder {
        queue,
        ingress: dir.ingress,
        egress: dir.egress,
        rx,
        wake,
        stop: shared.stop.clone(),
        counters: dir.counters,
        log,
        capacity: dir.capacity,
        clock: shared.clock,
        packet_log,
        pcap,
        started_unix: shared.started_unix,
        // Only the client's side of the link has a carrier to lose: the `up` direction's
        // ingress is A's device.
        carrier: (dir.name == "up")
            .then_some(l.carrier_after)
            .flatten()
            .map(|after| Carrier::new(after, i, shared.carrier_events.clone())),
    };
    fwd.threads.push(
        std::thread::Builder::new()
            .name(format!("roam-emu {} {}", l.name, dir.name))
            .spawn(move || forwarder.run())
            .map_err(io_err("starting a forwarding thread"))?,
    );
    Ok(())
}

/// `<dir>/<link>.<up|down>.csv`, the binned log, with its header ([`LOG_HEADER`]) written.
fn create_csv_log(d: &Path, link: &str, dir: &str) -> Result<BufWriter<std::fs::File>, EmuError> {
    let path = d.join(format!("{link}.{dir}.csv"));
    let f = std::fs::File::create(&path).map_err(io_err(format!("creating {}", path.display())))?;
    let mut w = BufWriter::new(f);
    let _ = writeln!(w, "{LOG_HEADER}");
    Ok(w)
}

/// `<dir>/<link>.<up|down>.mm.log`, the per-packet log in Mahimahi's format.
fn create_packet_log(d: &Path, link: &str, dir: &str) -> Result<PacketLog, EmuError> {
    let path = d.join(format!("{link}.{dir}.mm.log"));
    PacketLog::create(&path, link, dir).map_err(io_err(format!("creating {}", path.display())))
}

/// `<dir>/<link>.<up|down>.pcap`, the capture of what this direction delivers.
fn create_pcap(d: &Path, link: &str, dir: &str) -> Result<PcapWriter, EmuError> {
    let path = d.join(format!("{link}.{dir}.pcap"));
    PcapWriter::create(&path).map_err(io_err(format!("creating {}", path.display())))
}
