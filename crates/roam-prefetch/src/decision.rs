//! IMP's decision (IMP thesis §3.3; ../shared/spec/informed-prefetching.md), sans-IO: given the
//! outstanding hints, what each network offers now, its radio, and the prices of energy and
//! data, which hints to prefetch now.
//!
//! Per available network and candidate batch (the first k outstanding hints, k = 1..N, in
//! order: classes of higher accuracy first, hint order within a class):
//! - demand-fetch time `T_fetch = S / BW + L` with long-run per-network-type averages, merged
//!   by WiFi availability: `T_wifi * Avail + T_cell * (1 - Avail)`;
//! - energy: `E_prefetch` is the radio's marginal energy of moving the batch now at the
//!   network's current bandwidth (a promotion and a new tail, or the extension of one);
//!   `E_fetch` the mean energy of a demand fetch, from each radio's mix of states, merged by
//!   availability; net energy `E_prefetch - Accuracy * E_fetch`;
//! - data: `D_fetch = S * (1 - Avail)` (what a demand fetch would take from the metered
//!   network), `D_prefetch` = S on a metered network, 0 otherwise; net data
//!   `D_prefetch - Accuracy * D_fetch`;
//! - benefit `T_fetch * Accuracy - (c_energy * netE + c_data * netD)`, summed over the batch.
//!
//! The best batch on any network with a positive benefit starts, on every network where that
//! batch's benefit is positive (Intentional Networking stripes it across them). With both
//! prices zero every benefit is positive: IMP behaves as always-prefetch.

use std::time::Duration;

use roam_budget::{Direction, Joules, Radio};
use roam_core::{BitRate, Bytes, Time};

use crate::accuracy::{Accuracy, Class};

/// What a network offers now, as the decision sees it.
pub struct NetworkState<'a> {
    /// Its name.
    pub name: &'a str,
    /// WiFi (else cellular).
    pub wifi: bool,
    /// Whether its bytes count against the data budget.
    pub metered: bool,
    /// Current bandwidth estimate (zero: none yet).
    pub bandwidth: BitRate,
    /// Current latency (one-way, or half the RTT) estimate.
    pub latency: Duration,
    /// Its radio's energy model, as traffic has driven it so far.
    pub radio: &'a Radio,
}

/// The prices the budgets' controllers set: seconds of fetch time one joule, one byte is worth.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Prices {
    /// Per joule (0.2: 5 J are worth a second).
    pub energy: f64,
    /// Per byte of metered data.
    pub data: f64,
}

/// One outstanding hint as the decision sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// The hint's id.
    pub id: u64,
    /// Its class.
    pub class: Class,
    /// Its size, if the application gave one.
    pub size: Option<Bytes>,
}

/// What a fetch is assumed to see before any network has a bandwidth estimate.
pub const NOMINAL_BANDWIDTH: BitRate = BitRate::mbps(1);
/// The latency assumed before any estimate.
pub const NOMINAL_LATENCY: Duration = Duration::from_millis(100);

/// Long-run averages per network type and how often WiFi is there.
#[derive(Clone, Debug, Default)]
pub struct LongRun {
    wifi: Mean2,
    cell: Mean2,
    wifi_seen: Duration,
    observed: Duration,
    last: Option<Time>,
}

#[derive(Clone, Debug, Default)]
struct Mean2 {
    n: u64,
    bps: f64,
    latency_s: f64,
}

impl Mean2 {
    fn add(&mut self, bw: BitRate, latency: Duration) {
        self.n += 1;
        let k = self.n as f64;
        self.bps += (bw.as_bps() as f64 - self.bps) / k;
        self.latency_s += (latency.as_secs_f64() - self.latency_s) / k;
    }

    /// Seconds to fetch `bytes` at the long-run averages (`None` before any observation).
    fn fetch_time(&self, bytes: f64) -> Option<f64> {
        (self.n > 0 && self.bps > 0.0).then(|| bytes * 8.0 / self.bps + self.latency_s)
    }
}

impl LongRun {
    /// Record what the networks offer at `now` (called at each decision).
    pub fn observe(&mut self, now: Time, networks: &[NetworkState]) {
        let since = self
            .last
            .map_or(Duration::ZERO, |l| now.saturating_since(l));
        self.last = Some(now);
        self.observed += since;
        if networks.iter().any(|n| n.wifi) {
            self.wifi_seen += since;
        }
        for n in networks {
            if n.bandwidth.as_bps() == 0 {
                continue;
            }
            let m = if n.wifi {
                &mut self.wifi
            } else {
                &mut self.cell
            };
            m.add(n.bandwidth, n.latency);
        }
    }

    /// The fraction of time WiFi was available (one half before any history, whatever the
    /// networks now: a first guess, not a certainty).
    pub fn wifi_availability(&self) -> f64 {
        if self.observed.is_zero() {
            return 0.5;
        }
        self.wifi_seen.as_secs_f64() / self.observed.as_secs_f64()
    }

    /// `T_fetch` of `bytes`: each type's long-run fetch time merged by WiFi availability (a
    /// type never seen takes the other's; before any estimate, a nominal [`NOMINAL_BANDWIDTH`]
    /// and [`NOMINAL_LATENCY`], so a fetch is never thought free).
    pub fn fetch_time(&self, bytes: f64) -> f64 {
        let a = self.wifi_availability();
        match (self.wifi.fetch_time(bytes), self.cell.fetch_time(bytes)) {
            (Some(w), Some(c)) => w * a + c * (1.0 - a),
            (Some(x), None) | (None, Some(x)) => x,
            (None, None) => {
                bytes * 8.0 / NOMINAL_BANDWIDTH.as_bps() as f64 + NOMINAL_LATENCY.as_secs_f64()
            }
        }
    }

    /// The long-run bandwidth of a network type, if seen.
    fn bandwidth(&self, wifi: bool) -> Option<BitRate> {
        let m = if wifi { &self.wifi } else { &self.cell };
        (m.n > 0).then(|| BitRate(m.bps.round() as u64))
    }
}

/// What the decision found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Decision {
    /// The hints to prefetch now, in order.
    pub start: Vec<u64>,
    /// The networks on which that batch pays.
    pub on: Vec<String>,
    /// The batch's benefit (seconds) on the best network.
    pub benefit: f64,
}

/// Decide which of `candidates` (in hint order) to prefetch now.
///
/// `default_size` stands for a hint without a size (the application's average item size).
pub fn decide(
    now: Time,
    candidates: &[Candidate],
    networks: &[NetworkState],
    accuracy: &Accuracy,
    long_run: &LongRun,
    prices: Prices,
    default_size: Bytes,
) -> Decision {
    if candidates.is_empty() || networks.is_empty() {
        return Decision::default();
    }
    // Classes of higher accuracy first; hint order within a class (a stable sort).
    let mut order: Vec<&Candidate> = candidates.iter().collect();
    order.sort_by(|a, b| accuracy.of(b.class).total_cmp(&accuracy.of(a.class)));
    let avail = long_run.wifi_availability();
    // Per candidate: its size, accuracy, and the batch-independent terms.
    struct Item {
        id: u64,
        size: f64,
        gain: f64,
        e_fetch: f64,
        d_fetch: f64,
    }
    let cell_metered = networks.iter().any(|n| !n.wifi && n.metered);
    let wifi_radio = networks.iter().find(|n| n.wifi).map(|n| n.radio);
    let cell_radio = networks.iter().find(|n| !n.wifi).map(|n| n.radio);
    let items: Vec<Item> = order
        .iter()
        .map(|c| {
            let size = c.size.unwrap_or(default_size).0 as f64;
            let acc = accuracy.of(c.class);
            let e_of = |radio: Option<&Radio>, wifi: bool| -> Option<f64> {
                let r = radio?;
                let bw = long_run.bandwidth(wifi).unwrap_or(NOMINAL_BANDWIDTH);
                Some(
                    r.mean_fetch_energy(Bytes(size as u64), Direction::Down, bw)
                        .0,
                )
            };
            let e_fetch = match (e_of(wifi_radio, true), e_of(cell_radio, false)) {
                (Some(w), Some(c)) => w * avail + c * (1.0 - avail),
                (Some(x), None) | (None, Some(x)) => x,
                (None, None) => 0.0,
            };
            let d_fetch = if cell_metered {
                size * (1.0 - avail)
            } else {
                0.0
            };
            Item {
                id: c.id,
                size,
                gain: long_run.fetch_time(size) * acc,
                e_fetch: acc * e_fetch,
                d_fetch: acc * d_fetch,
            }
        })
        .collect();
    let mut best: Option<(f64, usize)> = None;
    let mut per_net: Vec<Vec<f64>> = Vec::with_capacity(networks.len());
    for n in networks {
        let mut benefits = Vec::with_capacity(items.len());
        let (mut bytes, mut gain, mut e_fetch, mut d_fetch) = (0.0, 0.0, 0.0, 0.0);
        for (k, it) in items.iter().enumerate() {
            bytes += it.size;
            gain += it.gain;
            e_fetch += it.e_fetch;
            d_fetch += it.d_fetch;
            let e_prefetch = prefetch_energy(n, now, bytes);
            let d_prefetch = if n.metered { bytes } else { 0.0 };
            let benefit = gain
                - (prices.energy * (e_prefetch - e_fetch) + prices.data * (d_prefetch - d_fetch));
            benefits.push(benefit);
            if benefit > 0.0 && best.is_none_or(|(b, _)| benefit > b) {
                best = Some((benefit, k + 1));
            }
        }
        per_net.push(benefits);
    }
    let Some((benefit, k)) = best else {
        return Decision::default();
    };
    Decision {
        start: items[..k].iter().map(|i| i.id).collect(),
        on: networks
            .iter()
            .zip(&per_net)
            .filter(|(_, b)| b[k - 1] > 0.0)
            .map(|(n, _)| n.name.to_string())
            .collect(),
        benefit,
    }
}

/// The radio's marginal energy of moving `bytes` over `n` from `now`, at its current bandwidth.
fn prefetch_energy(n: &NetworkState, now: Time, bytes: f64) -> f64 {
    let bw = if n.bandwidth.as_bps() > 0 {
        n.bandwidth
    } else {
        NOMINAL_BANDWIDTH
    };
    let e: Joules = n
        .radio
        .marginal_energy(now, Bytes(bytes as u64), Direction::Down, bw);
    e.0
}
