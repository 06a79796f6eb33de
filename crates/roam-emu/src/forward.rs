//! One direction of one emulated link at work: a thread that moves packets between the two
//! TUN devices through its sans-IO [`LinkQueue`], and writes what it saw (binned CSV logs,
//! per-packet logs in Mahimahi's format, packet captures, its own lateness).

use crate::control::LinkCommand;
use crate::queue::{BinStats, LinkQueue, PacketEvent};
use crate::sys::{self, EventFd};
use roam_core::{Clock, Time};
use roam_trace::capacity::Capacity;
use roam_trace::pdo::MTU_BYTES;
use std::io::{BufWriter, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::Duration;

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

/// Columns of a per-direction log.
pub const LOG_HEADER: &str = "t_s,arrived_bytes,delivered_bytes,delivered_pkts,throughput_mbit,capacity_mbit,queue_delay_avg_ms,queue_delay_max_ms,drops_queue,drops_loss,drops_outage,available";

pub(crate) struct Forwarder {
    pub(crate) queue: LinkQueue,
    pub(crate) ingress: Arc<OwnedFd>,
    pub(crate) egress: Arc<OwnedFd>,
    pub(crate) rx: Receiver<LinkCommand>,
    pub(crate) wake: Arc<EventFd>,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) counters: Arc<DirCounters>,
    pub(crate) log: Option<BufWriter<std::fs::File>>,
    pub(crate) capacity: Capacity,
    pub(crate) clock: Clock,
    /// The per-packet log (`EmuConfig::packet_log`) and the events not yet written (those
    /// past the last complete bin, whose delivery opportunities are not written yet).
    pub(crate) packet_log: Option<PacketLog>,
    /// The capture of what this direction delivers (`EmuConfig::pcap_dir`).
    pub(crate) pcap: Option<crate::pcap::PcapWriter>,
    /// The wall-clock time of the emulator's time zero (for the capture's stamps).
    pub(crate) started_unix: Duration,
    /// For the client-to-server direction of a link with `carrier=`: the client's interface
    /// (this direction's ingress) loses its carrier once an outage has lasted this long.
    pub(crate) carrier: Option<Carrier>,
}

/// A per-packet log being written (`Forwarder::write_packet_log`).
pub(crate) struct PacketLog {
    out: BufWriter<std::fs::File>,
    /// Events past the last bin written.
    pending: Vec<PacketEvent>,
    /// Capacity bytes short of a whole delivery opportunity, carried into the next bin.
    carry: u64,
}

/// The client interface's carrier, following the link's outages (`LinkConfig::carrier_after`).
pub(crate) struct Carrier {
    after: Duration,
    /// When the current outage began.
    down_since: Option<Time>,
    off: bool,
    /// The link's index, and where each change of the carrier is told (the emulator's MPTCP
    /// endpoint manager, `netconf::follow_carrier_endpoints`), if anywhere.
    link: usize,
    events: Option<Sender<(usize, bool)>>,
}

impl PacketLog {
    /// Create the log at `path` for one direction (`dir`) of link `link`, header written.
    pub(crate) fn create(path: &Path, link: &str, dir: &str) -> std::io::Result<PacketLog> {
        let mut out = BufWriter::new(std::fs::File::create(path)?);
        let name = path.file_name().map_or("".into(), |n| n.to_string_lossy());
        writeln!(
            out,
            "# mahimahi mm-link ({link} {dir}) [roam emu] > {name}\n# init timestamp: 0\n# base timestamp: 0"
        )?;
        Ok(PacketLog {
            out,
            pending: Vec::new(),
            carry: 0,
        })
    }
}

impl Carrier {
    /// Link `link`'s carrier, which goes down once an outage has lasted `after`; each change
    /// is sent to `events` (`(link, on)`), if given.
    pub(crate) fn new(
        after: Duration,
        link: usize,
        events: Option<Sender<(usize, bool)>>,
    ) -> Carrier {
        Carrier {
            after,
            down_since: None,
            off: false,
            link,
            events,
        }
    }

    /// The carrier went `on` or off: tell whoever follows it (nothing slow runs here, on the
    /// forwarding thread).
    fn changed(&self, on: bool) {
        if let Some(tx) = &self.events {
            let _ = tx.send((self.link, on));
        }
    }
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
                c.changed(true);
            }
        } else {
            let since = *c.down_since.get_or_insert(now);
            if !c.off
                && now.saturating_since(since) >= c.after
                && sys::set_carrier(fd, false).is_ok()
            {
                c.off = true;
                c.changed(false);
            }
        }
    }

    pub(crate) fn run(mut self) {
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
            LinkCommand::Restart => {
                self.queue.restart(now);
                self.capacity = self.queue.capacity().clone();
            }
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
