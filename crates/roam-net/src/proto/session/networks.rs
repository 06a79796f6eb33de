//! Networks: the client's local networks as its scout reports them, and on the server the
//! client's networks as its `Hello` and `Estimate` frames announce them (at most
//! `Config::max_networks`). Each network carries the estimates the placement policy uses
//! (`estimate::NetworkEstimate`: passive TCP_INFO samples, active probes, the peer's reports).
//!
//! Reconnection: the client (re)opens a connection over every usable network after
//! `Config::reconnect_backoff`; the server opens one over a client network only to the address
//! an authenticated connection of the client over it came from, once per announcement.

use std::collections::BTreeSet;
use std::time::Duration;

use roam_core::{BitRate, Time};

use super::*;
use crate::proto::wire::NetInfo;

/// Flag bit of [`NetInfo::flags`]: the network is metered.
pub const NET_METERED: u32 = 1;

/// Flag bit of [`NetInfo::flags`]: the network is usable.
pub const NET_USABLE: u32 = 2;

/// Flag bit of [`NetInfo::flags`]: the network is cellular, so neither peer sends on it while
/// it is idle (see [`NetKind::cellular`]).
pub const NET_CELLULAR: u32 = 4;

/// What using a network costs besides time: the two facts about a network that the peers
/// exchange and that change how roam-net uses it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetKind {
    /// Data over it is metered: the deferral policy keeps background off it when a label's
    /// [`LabelPolicy::metered`] is false.
    pub metered: bool,
    /// It is a cellular radio. A packet on an idle 3G or LTE radio pays a promotion and a
    /// tail of several seconds at high power (7.4 J and 12.8 J for one isolated packet on
    /// Huang et al.'s models, against 0.04 J on WiFi; docs/budgets.md), so on a cellular
    /// network neither peer sends anything of its own while the connection is idle: no
    /// periodic `Estimate` (the client sends one only while data flows or when its networks
    /// changed), no idle active probes, and TCP keepalives only every
    /// [`CELLULAR_KEEPALIVE`](crate::runtime::CELLULAR_KEEPALIVE). The price is slower
    /// detection of a cellular network that vanished while idle: the next data sent over it
    /// finds out (the kernel's retransmission timeout, then the user timeout; a small
    /// foreground IROB is hedged onto another network meanwhile).
    pub cellular: bool,
}

impl NetKind {
    fn flags(self) -> u32 {
        (self.metered as u32 * NET_METERED) | (self.cellular as u32 * NET_CELLULAR)
    }

    fn from_flags(flags: u32) -> NetKind {
        NetKind {
            metered: flags & NET_METERED != 0,
            cellular: flags & NET_CELLULAR != 0,
        }
    }
}

/// How loaded a connection's path was over a throughput sample's interval, which decides what
/// the throughput says about the network's bandwidth ([`Session::tcp_sample`]). Ordered from
/// lightest to heaviest: an interval is only as loaded as its lighter end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PathLoad {
    /// The socket ran dry: a trickle of small messages says little of the path; a lower bound
    /// that only raises an existing estimate (probes give the first).
    Light,
    /// The socket held data throughout but no queue built (the sender, or a cap, limited the
    /// rate): a lower bound, which raises the estimate or becomes the first one.
    Backlogged,
    /// A queue had built on the path and the socket held data throughout: the throughput is
    /// the bandwidth.
    Saturated,
}

/// Shortest interval a passive throughput sample spans ([`Session::tcp_sample`]).
pub const THROUGHPUT_INTERVAL: Duration = Duration::from_millis(250);

/// One reading of a connection's TCP_INFO (and send queue), as the driver hands it to
/// [`Session::tcp_sample`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpSample {
    /// The connection's minimum RTT (`tcpi_min_rtt`).
    pub min_rtt: Option<Duration>,
    /// The connection's smoothed RTT (`tcpi_rtt`): the round trip flow control plans for.
    pub srtt: Option<Duration>,
    /// Bytes the peer has acknowledged over the connection's life (`tcpi_bytes_acked`).
    pub bytes_acked: u64,
    /// How loaded the path is now (the driver's reading of the socket's queue and RTT).
    pub load: PathLoad,
    /// The writer's last pass found the anticipatory cap reached: the socket was held back by
    /// this side, not by the path.
    pub held_by_cap: bool,
}

/// A network as this session knows it.
#[derive(Debug, Clone)]
pub(super) struct Network {
    /// Its address (client: the local one; server: as the client announced it). Unspecified
    /// until known.
    pub(super) addr: IpAddr,
    pub(super) kind: NetKind,
    pub(super) up: bool,
    pub(super) estimate: NetworkEstimate,
    pub(super) retry_at: Time,
    pub(super) opening: bool,
    /// Client: the port of our listener on this network's address (advertised). Server: the
    /// client's port there, where we may open a connection. 0 = none.
    pub(super) port: u16,
    /// Server: the address an authenticated connection of the client over this network came
    /// from. The server opens connections only there, never to an address merely announced
    /// (a `Hello` or `Estimate` could otherwise point the server at any host and port).
    pub(super) seen_addr: Option<IpAddr>,
    /// Server: one connection attempt is allowed; spent by the attempt, given again when the
    /// client announces the network anew (usable again, another port) or a connection over
    /// it is established. At most one attempt per announcement, however often it is repeated.
    pub(super) may_open: bool,
}

impl Default for Network {
    fn default() -> Self {
        Network {
            addr: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            kind: NetKind::default(),
            up: false,
            estimate: NetworkEstimate::default(),
            retry_at: Time::ZERO,
            opening: false,
            port: 0,
            seen_addr: None,
            may_open: false,
        }
    }
}

impl Session {
    /// A local network is up (client side; from the scout).
    pub fn network_up(&mut self, net: NetId, addr: IpAddr, kind: NetKind, now: Time) {
        let n = self.networks.entry(net).or_default();
        let again = !n.up;
        n.addr = addr;
        n.kind = kind;
        n.up = true;
        if again {
            self.selector_network_up(net, now);
        }
        let n = self.networks.get_mut(&net).expect("inserted above");
        n.retry_at = now;
        self.maybe_open(now);
        self.check_thunks(now);
    }

    /// The client accepts connections from the server on local network `net` at `port` (a
    /// listener on the network's address); 0 = no longer. Announced with the network's
    /// estimates, so the server may open a connection there (paper §4.2: either peer may).
    pub fn accepting_on(&mut self, net: NetId, port: u16) {
        if let Some(n) = self.networks.get_mut(&net) {
            n.port = port;
        }
    }

    /// Where to open a connection over the peer's network `net` (after an
    /// [`Event::OpenConnection`] on the server): the address the client's connections over it
    /// came from, and the port it announced there.
    pub fn peer_address(&self, net: NetId) -> Option<(IpAddr, u16)> {
        let n = self.networks.get(&net).filter(|n| n.port != 0)?;
        n.seen_addr.map(|a| (a, n.port))
    }

    /// The driver's record of where accepted connection `conn` came from (call it right after
    /// [`Session::accept_connection`]). Once the connection is authenticated (it carried the
    /// `Hello`, or its join proof checked out) the address becomes its network's
    /// `peer_address`.
    pub fn connection_from(&mut self, conn: ConnId, addr: IpAddr) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        c.peer_addr = Some(addr);
        if c.state == ConnState::Established {
            let net = c.net;
            self.network_seen(net, addr);
        }
    }

    /// Connection `conn` (just added or accepted) runs over a path another multi-socket of
    /// this device measured: `rtt` and `bandwidth` as they were at `measured` (the driver's
    /// path memory, `runtime::paths`; the paper's scout measures a network when it appears,
    /// not each time a library opens a connection over it). The estimates fill in what the
    /// network has not measured itself, and the connection probes as it would have had this
    /// multi-socket been open since `measured`: after the idle-probe interval, never on an idle
    /// cellular network, instead of at once.
    pub fn recall_path(
        &mut self,
        conn: ConnId,
        rtt: Option<Duration>,
        bandwidth: BitRate,
        measured: Time,
    ) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        c.last_probe = Some(c.last_probe.map_or(measured, |t| t.max(measured)));
        let net = c.net;
        if let Some(n) = self.networks.get_mut(&net) {
            n.estimate.adopt(rtt, Some(bandwidth));
        }
    }

    /// Connection `conn`'s idle probes take turns with the device's other multi-sockets over
    /// the same path (the driver's path memory, `runtime::paths`): one path, one backoff.
    /// Each multi-socket's connections back off on their own (`Conn::next_idle_probe`), so a
    /// dozen a browser keeps open through `roam net proxy` probed one WiFi path a dozen times
    /// as often as one would: 4.6 MB of Precog's 14 MB hour on WiFi
    /// (docs/results/precog-news-8ca4d5d-partial). Once this is called, an idle probe that
    /// falls due waits: [`Session::idle_probe_due`] tells the driver, which either grants it
    /// ([`Session::grant_idle_probe`]) or puts it off until the path's next turn
    /// ([`Session::path_probed`]). The first probe of a network that just appeared does not
    /// wait.
    pub fn take_probe_turns(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.probe_turns = true;
        }
    }

    /// If connection `conn` takes turns and an idle probe of it is due at `now` and not yet
    /// granted, the gap that probe would leave before the next (what the driver records as
    /// the path's).
    pub fn idle_probe_due(&self, conn: ConnId, now: Time) -> Option<Duration> {
        let c = self.conns.get(&conn)?;
        let interval = self.config.probe_interval;
        let due = c.probe_turns
            && c.state == ConnState::Established
            && c.idle_probe_falls_due(now, interval, self.is_cellular(c.net))
            && !c.may_probe(interval);
        due.then(|| c.gap_after_probe(interval, self.config.max_probe_interval))
    }

    /// The driver grants connection `conn` the idle probe due at `now`: it goes out with the
    /// connection's next transmit.
    pub fn grant_idle_probe(&mut self, conn: ConnId, now: Time) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.probe_granted = Some(now);
        }
    }

    /// Another multi-socket of this device probed connection `conn`'s path at `at`, leaving
    /// `gap` before the next: this connection's next idle probe is due no sooner, and its own
    /// backoff goes on from that gap. (Its estimates stay its own: passive samples of its
    /// transfers refresh them, and multi-sockets opened later start from the path memory.)
    pub fn path_probed(&mut self, conn: ConnId, at: Time, gap: Duration) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.last_probe = Some(c.last_probe.map_or(at, |t| t.max(at)));
            c.probe_gap = c.probe_gap.max(gap);
            c.probe_granted = None;
            c.put_off = true;
        }
    }

    /// Whether connection `conn`'s idle probes have been put off by another multi-socket's
    /// ([`Session::path_probed`]) since it last probed: its estimates of the path are then
    /// older than the path memory's, and the driver does not write them back.
    pub fn path_put_off(&self, conn: ConnId) -> bool {
        self.conns.get(&conn).is_some_and(|c| c.put_off)
    }

    pub(super) fn network_seen(&mut self, net: NetId, addr: IpAddr) {
        if let Some(n) = self.networks.get_mut(&net) {
            n.seen_addr = Some(addr);
            n.may_open = true;
        }
    }

    /// A local network went away: its connection is treated as broken.
    pub fn network_down(&mut self, net: NetId, now: Time) {
        if let Some(n) = self.networks.get_mut(&net) {
            n.up = false;
        }
        self.selector_network_down(net, now);
        let dead: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.net == net)
            .map(|(&id, _)| id)
            .collect();
        for c in dead {
            self.events.push_back(Event::CloseConnection {
                conn: c,
                reason: "network down".into(),
            });
            self.connection_closed(c, now);
        }
    }

    /// Active probe pairs sent so far (`PROBE_SIZES`: one small and one large probe each).
    pub fn probes_sent(&self) -> u64 {
        self.next_probe_id / PROBE_SIZES.len() as u64
    }

    /// Current estimates per network: (net, round-trip time, bandwidth).
    pub fn estimates(&self) -> Vec<(NetId, Option<Duration>, Option<BitRate>)> {
        self.networks
            .iter()
            .map(|(&id, n)| (id, n.estimate.rtt(), n.estimate.bandwidth()))
            .collect()
    }

    pub(super) fn netinfos(&self) -> Vec<NetInfo> {
        self.networks
            .iter()
            .map(|(&net, n)| NetInfo {
                net,
                addr: n.addr,
                rtt_us: n
                    .estimate
                    .rtt()
                    .map_or(0, |d| d.as_micros().min(u32::MAX as u128) as u32),
                flags: n.kind.flags() | (n.up as u32 * NET_USABLE),
                bandwidth_bps: n.estimate.bandwidth().map_or(0, |b| b.as_bps()),
                port: n.port,
            })
            .collect()
    }

    pub(super) fn absorb_netinfos(&mut self, infos: &[NetInfo], now: Time) {
        if self.role == Role::Client {
            return; // the client measures its own networks; the server's view is not needed
        }
        for i in infos {
            if !self.networks.contains_key(&i.net)
                && self.networks.len() >= self.config.max_networks
            {
                continue;
            }
            let connected = self.conns.values().any(|c| c.net == i.net);
            let n = self.networks.entry(i.net).or_default();
            let up = i.flags & NET_USABLE != 0 || connected;
            if (up && !n.up) || i.port != n.port {
                n.may_open = true; // announced anew
            }
            let (again, gone) = (up && !n.up, !up && n.up);
            if let (true, false, false, Some(d)) =
                (up, n.up, connected, self.config.peer_open_delay)
            {
                // Newly usable and unconnected: the client's turn first (see `peer_open_delay`).
                n.retry_at = n.retry_at.max(now + d);
            }
            n.addr = i.addr;
            n.port = i.port;
            n.kind = NetKind::from_flags(i.flags);
            n.up = up;
            n.estimate.adopt(
                (i.rtt_us > 0).then(|| Duration::from_micros(i.rtt_us as u64)),
                (i.bandwidth_bps > 0).then_some(BitRate::bps(i.bandwidth_bps)),
            );
            if again {
                self.selector_network_up(i.net, now);
            } else if gone {
                self.selector_network_down(i.net, now);
            }
        }
    }

    /// The driver read connection `conn`'s TCP_INFO at `now` (every 100 ms or so). The minimum
    /// RTT feeds the network's RTT estimate at once. The acknowledged-bytes counter gives a
    /// throughput over intervals of at least [`THROUGHPUT_INTERVAL`], with the path's load over
    /// the interval: the lighter of its loads at the two ends. Saturated, the throughput is the
    /// bandwidth; otherwise a lower bound (see [`PathLoad`]). (Taking a raised smoothed RTT
    /// alone for saturation once turned a trickle of small requests into a 2 kbit/s WiFi
    /// estimate; the kernel's per-round-trip delivery-rate samples are noisy upwards, and a
    /// filter accepting larger application-limited samples would ratchet on that noise.)
    ///
    /// A socket held back by this side's own anticipatory cap ([`TcpSample::held_by_cap`])
    /// counts as at least backlogged even when the path drained it between the writer's
    /// passes (loopback): otherwise a network whose cap limits every transfer would never get
    /// a first estimate, and its cap would stay at [`UNMEASURED_CAP`].
    pub fn tcp_sample(&mut self, conn: ConnId, now: Time, sample: TcpSample) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if sample.srtt.is_some() {
            c.srtt = sample.srtt;
        }
        let load_now = match sample.load {
            PathLoad::Light if sample.held_by_cap => PathLoad::Backlogged,
            l => l,
        };
        let from = c
            .throughput_from
            .get_or_insert((now, sample.bytes_acked, load_now));
        let dt = now.saturating_since(from.0);
        let mut rate = None;
        let mut load = PathLoad::Light;
        if dt >= THROUGHPUT_INTERVAL {
            let bytes = sample.bytes_acked.saturating_sub(from.1);
            load = from.2.min(load_now);
            *from = (now, sample.bytes_acked, load_now);
            if bytes > 0 {
                rate = Some(BitRate::bps((bytes as f64 * 8.0 / dt.as_secs_f64()) as u64));
            }
        }
        self.estimate_sample(conn, sample.min_rtt, rate, load);
    }

    /// A passive sample of connection `conn`'s network: minimum RTT, and throughput over the
    /// last interval with how loaded the path was meanwhile (see [`PathLoad`]).
    pub(super) fn estimate_sample(
        &mut self,
        conn: ConnId,
        min_rtt: Option<Duration>,
        throughput: Option<BitRate>,
        load: PathLoad,
    ) {
        let Some(c) = self.conns.get(&conn) else {
            return;
        };
        let Some(n) = self.networks.get_mut(&c.net) else {
            return;
        };
        if let Some(r) = min_rtt {
            n.estimate.rtt_sample(r);
        }
        if let Some(rate) = throughput {
            let current = n.estimate.bandwidth().map(|b| b.as_bps());
            let take = match load {
                PathLoad::Saturated => true,
                PathLoad::Backlogged => current.is_none_or(|c| rate.as_bps() > c),
                PathLoad::Light => current.is_some_and(|c| rate.as_bps() > c),
            };
            if take {
                n.estimate.bandwidth_sample(rate);
            }
        }
    }

    /// The driver read connection `conn`'s send queue in the kernel (bytes in flight and bytes
    /// not yet sent). Foreground IROBs are placed by what they would queue behind (see
    /// `Session::best_connection`).
    pub fn kernel_queue(&mut self, conn: ConnId, q: KernelQueue) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.kernel_queue = Some(q);
        }
    }

    /// The driver could not open a connection over `net` (after an `OpenConnection`).
    pub fn open_failed(&mut self, net: NetId, now: Time) {
        let wait = self.retry_wait();
        if let Some(n) = self.networks.get_mut(&net) {
            n.opening = false;
            n.retry_at = now + wait;
        }
        self.update_down_since(now);
    }

    /// How long a network waits before this side (re)opens a connection over it.
    pub(super) fn retry_wait(&self) -> Duration {
        match self.role {
            Role::Client => self.config.reconnect_backoff,
            Role::Server => self
                .config
                .peer_open_delay
                .unwrap_or(self.config.reconnect_backoff),
        }
    }

    /// Networks this side should open a connection over (once their `retry_at` has come).
    /// The client: every usable network, also during the first handshake (the first
    /// connection to come up carries the hello, the others wait for it and then join, so a
    /// network in an outage or merely slow never holds the session up). The server: a client
    /// network that is usable and accepts connections, while the session is established and
    /// has data to send.
    pub(super) fn unconnected(&self) -> Vec<(NetId, Time)> {
        if self.failed.is_some() || self.is_finished() {
            return Vec::new();
        }
        let server_may = self.role == Role::Server
            && self.config.peer_open_delay.is_some()
            && self.secret.is_some()
            && !self.out.is_empty();
        if self.role != Role::Client && !server_may {
            return Vec::new();
        }
        let have_conn: BTreeSet<NetId> = self.conns.values().map(|c| c.net).collect();
        self.networks
            .iter()
            .filter(|(id, n)| {
                n.up && !n.opening
                    && !have_conn.contains(id)
                    && (self.role == Role::Client
                        || (n.port != 0 && n.may_open && n.seen_addr.is_some()))
            })
            .map(|(&id, n)| (id, n.retry_at))
            .collect()
    }

    pub(super) fn maybe_open(&mut self, now: Time) {
        let want: Vec<NetId> = self
            .unconnected()
            .into_iter()
            .filter(|&(_, at)| at <= now)
            .map(|(id, _)| id)
            .collect();
        for net in want {
            if self.conns.len() >= self.config.max_connections {
                break;
            }
            let n = self.networks.get_mut(&net).unwrap();
            n.opening = true;
            n.may_open = false;
            self.events.push_back(Event::OpenConnection { net });
        }
    }
}
