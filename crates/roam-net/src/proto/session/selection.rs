//! Redundant network selection with Meatballs (Meatballs thesis §4.4.2; `roam-decide`): an option
//! ([`Config::redundancy`], off by default) under which each small foreground IROB goes over
//! WiFi, over cellular, or over both at once, whichever has the least expected weighted cost
//! given how wrong the networks' time estimates have been.
//!
//! Each network has one predictor: the time from handing a small foreground IROB to its
//! connection until its acknowledgement. Its prediction at each decision is the placement
//! model's (half the RTT out, the bytes queued ahead and the IROB over the bandwidth, half the
//! RTT back; 2 s without estimates); its measurement, when the acknowledgement comes, is the
//! time it took (with a copy on another network, the first acknowledgement: a bound on the
//! first network's time). Their ratio is the error sample, so a WiFi that vanishes or stalls
//! now and then shows as a long tail of the WiFi's distribution. Strategies: one per network
//! (time: the predictor; energy: [`TransferEnergy`] by the network's kind; data: the IROB's
//! bytes on a metered network) and every pair of networks, the receiver keeping the first copy
//! (`Session::on_chunk` delivers an IROB once and acknowledges every copy).
//!
//! Re-evaluation: a single-network IROB unacknowledged after twice its expected time is
//! evaluated again as a strategy already running that long (only the part of the
//! distributions that agrees with it counts), then every 200 ms; when adding another network
//! pays, it is sent there too (the hedge path, `Session::hedge_late_foreground`). A network
//! that comes up again (another access point) starts a new error record, as the thesis reset
//! the WiFi's distributions per access point.
//!
//! WiFi dwell time (Meatballs thesis §4.4.2): each association of a non-cellular network, from its
//! coming up to its going down, is a session of the [`DwellTime`] predictor, keyed by the
//! network's address (a new access point usually gives a new one). Once sessions are known, a
//! WiFi's time is the chance it stays associated for the transfer (the Weibull's conditional
//! survival given how long it has lasted) times its model time, plus the chance it goes times
//! what recovering costs: the wait until re-evaluation notices (twice the time) and the best
//! other network's time. A newly associated WiFi whose sessions have been short is thus
//! trusted less than one that has lasted.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use roam_core::Time;
use roam_decide::models::DwellTime;
use roam_decide::{
    EvaluatorId, Meatballs, Method, Outcome, PredictorId, Prices, Reevaluation, Running, StrategyId,
};

use super::*;

/// Energy of one small transfer by network kind, in joules: modelled, not measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TransferEnergy {
    /// Over WiFi.
    pub wifi_j: f64,
    /// Over a cellular network ([`NetKind::cellular`]).
    pub cellular_j: f64,
}

impl Default for TransferEnergy {
    /// One isolated packet's promotion and tail on Huang et al.'s 2012 models
    /// (power-models.md): 0.04 J on WiFi, 7.38 J on 3G. With requests tens of seconds apart
    /// (the thesis's workload) most transfers find the radio idle; one that finds it awake
    /// costs less, which this constant does not see.
    fn default() -> TransferEnergy {
        TransferEnergy {
            wifi_j: 0.04,
            cellular_j: 7.38,
        }
    }
}

/// Meatballs' network selection for small foreground IROBs ([`Config::redundancy`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Redundancy {
    /// How predictor error is accounted for.
    pub method: Method,
    /// What a joule and a byte of metered data are worth in seconds.
    pub prices: Prices,
    /// Energy of a transfer per network kind.
    pub energy: TransferEnergy,
}

impl Redundancy {
    /// Meatballs with `method` at `prices`, the default transfer energies.
    pub fn new(method: Method, prices: Prices) -> Redundancy {
        Redundancy {
            method,
            prices,
            energy: TransferEnergy::default(),
        }
    }
}

/// Time the model assumes for a network without RTT or bandwidth estimates.
const UNKNOWN_TIME: Duration = Duration::from_secs(2);

/// The state of a selection: a Meatballs instance over the networks with an established
/// connection.
pub(super) struct Selector {
    mb: Meatballs,
    /// Each network's predictor (kept across evaluators: its error record is the network's).
    predictors: BTreeMap<NetId, PredictorId>,
    /// The networks and connections the evaluator was built for, with their strategies.
    built: Vec<(NetId, ConnId, StrategyId)>,
    /// Pair strategies: (strategy, indices in `built`).
    pairs: Vec<(StrategyId, [usize; 2])>,
    evaluator: Option<EvaluatorId>,
    /// The IROB length the strategies' data cost counts (set before each decision).
    len: Arc<AtomicU64>,
    /// How long non-cellular networks stay associated.
    pub(super) dwell: DwellTime,
    /// The non-cellular networks' current associations: since when, and the access point's key.
    pub(super) associated: BTreeMap<NetId, (Time, String)>,
}

/// Sessions an access point needs before it is predicted from its own.
const DWELL_MIN_SESSIONS: usize = 3;

/// A small foreground IROB placed by the selector.
#[derive(Clone, Copy, Debug)]
pub(super) struct Selected {
    /// The network it went over first.
    pub(super) net: NetId,
    /// When it was placed.
    pub(super) at: Time,
    /// The predicted time until its acknowledgement over `net`.
    pub(super) predicted: f64,
    /// When to send it over another network as well, or evaluate that again.
    pub(super) next: Time,
    /// The decision was redundant from the start: copy at `next` without asking again.
    pub(super) redundant: bool,
}

impl Selector {
    pub(super) fn new(r: &Redundancy) -> Selector {
        Selector {
            mb: Meatballs::new(r.prices),
            predictors: BTreeMap::new(),
            built: Vec::new(),
            pairs: Vec::new(),
            evaluator: None,
            len: Arc::new(AtomicU64::new(0)),
            dwell: DwellTime::new(DWELL_MIN_SESSIONS),
            associated: BTreeMap::new(),
        }
    }

    /// A network's time `t` given that it may go away before the transfer is done: `t` if it
    /// stays, else the re-evaluation's wait and then `other` (the best other network's time).
    fn dwell_adjusted(&self, net: NetId, t: f64, other: f64, now: Time) -> f64 {
        let Some((since, ap)) = self.associated.get(&net) else {
            return t;
        };
        let Some((w, _)) = self.dwell.model(ap) else {
            return t;
        };
        let p = w.p_stays(now.saturating_since(*since).as_secs_f64(), t);
        if !p.is_finite() {
            return t;
        }
        p * t + (1.0 - p) * (Reevaluation::default().factor * t + other)
    }
}

impl Session {
    /// The connection per network a small foreground IROB may use: established, appropriate
    /// for the label, not suspect; the lowest id per network.
    fn selectable(&self, label: Label, now: Time) -> Vec<(NetId, ConnId)> {
        let mut per: BTreeMap<NetId, ConnId> = BTreeMap::new();
        for (&id, c) in &self.conns {
            if c.state != ConnState::Established || c.suspect(now) {
                continue;
            }
            if self
                .networks
                .get(&c.net)
                .is_some_and(|n| !self.appropriate(label, n))
            {
                continue;
            }
            per.entry(c.net).or_insert(id);
        }
        per.into_iter().collect()
    }

    /// The placement model's time from handing `len` bytes to connection `conn` until their
    /// acknowledgement, in seconds.
    fn modelled_time(&self, conn: ConnId, len: u64) -> f64 {
        let Some(c) = self.conns.get(&conn) else {
            return UNKNOWN_TIME.as_secs_f64();
        };
        let est = self
            .networks
            .get(&c.net)
            .map(|n| (n.estimate.rtt(), n.estimate.bandwidth()));
        match est {
            Some((Some(rtt), Some(bw))) if bw.as_bps() > 0 => {
                let q = c.kernel_queue.unwrap_or(KernelQueue {
                    unsent: c.fg_unacked,
                    ..KernelQueue::default()
                });
                let pipe = bw.bytes_per_sec() * rtt.as_secs_f64();
                rtt.as_secs_f64() + (q.ahead(pipe as u64) + len) as f64 / bw.bytes_per_sec()
            }
            Some((Some(rtt), _)) => rtt.as_secs_f64(),
            _ => UNKNOWN_TIME.as_secs_f64(),
        }
    }

    /// Rebuild the evaluator when the selectable networks changed.
    fn selector_build(&mut self, nets: &[(NetId, ConnId)]) {
        let Some(r) = self.config.redundancy else {
            return;
        };
        let kinds: Vec<NetKind> = nets
            .iter()
            .map(|(n, _)| self.networks.get(n).map_or(NetKind::default(), |n| n.kind))
            .collect();
        let sel = self.selector.get_or_insert_with(|| Selector::new(&r));
        let same = sel.evaluator.is_some()
            && sel.built.len() == nets.len()
            && sel
                .built
                .iter()
                .zip(nets)
                .all(|(b, n)| b.0 == n.0 && b.1 == n.1);
        if same {
            return;
        }
        // The strategies follow the networks present; the predictors keep their records.
        sel.mb.clear_strategies();
        let mut built = Vec::new();
        for (&(net, conn), kind) in nets.iter().zip(&kinds) {
            let p = match sel.predictors.get(&net) {
                Some(&p) => p,
                None => {
                    let p = sel
                        .mb
                        .create_predictor(format!("network {net} ack time (s)"));
                    sel.predictors.insert(net, p);
                    p
                }
            };
            let energy = if kind.cellular {
                r.energy.cellular_j
            } else {
                r.energy.wifi_j
            };
            let metered = kind.metered;
            let len = sel.len.clone();
            let s = sel
                .mb
                .make_strategy(format!("network {net}"), &[p], move |v| {
                    let bytes = if metered {
                        f64::from_bits(len.load(Ordering::Relaxed))
                    } else {
                        0.0
                    };
                    Outcome::new(v[p], energy, bytes)
                })
                .expect("its predictor exists");
            built.push((net, conn, s));
        }
        let mut pairs = Vec::new();
        let mut all: Vec<StrategyId> = built.iter().map(|b| b.2).collect();
        for a in 0..built.len() {
            for b in a + 1..built.len() {
                let s = sel
                    .mb
                    .make_redundant_strategy(
                        format!("networks {} and {}", built[a].0, built[b].0),
                        &[built[a].2, built[b].2],
                    )
                    .expect("two distinct single strategies");
                pairs.push((s, [a, b]));
                all.push(s);
            }
        }
        sel.evaluator = sel.mb.register_strategies(&all, r.method).ok();
        sel.built = built;
        sel.pairs = pairs;
    }

    /// Place small foreground IROB `id` by Meatballs: pin it to the chosen network's
    /// connection and, for a redundant choice, have it copied to the other at once. `None`
    /// (placement as without the option) with fewer than two selectable networks.
    pub(super) fn select_network(&mut self, id: IrobId, now: Time) -> Option<ConnId> {
        let r = self.config.redundancy?;
        let (label, len) = self.out.get(&id).map(|o| (o.label, o.len))?;
        let nets = self.selectable(label, now);
        if nets.len() < 2 {
            return None;
        }
        self.selector_build(&nets);
        let modelled: Vec<f64> = nets
            .iter()
            .map(|&(_, c)| self.modelled_time(c, len))
            .collect();
        let sel = self.selector.as_mut()?;
        let times: Vec<f64> = nets
            .iter()
            .enumerate()
            .map(|(i, &(net, _))| {
                let other = (0..nets.len())
                    .filter(|&j| j != i)
                    .map(|j| modelled[j])
                    .fold(f64::INFINITY, f64::min);
                sel.dwell_adjusted(net, modelled[i], other, now)
            })
            .collect();
        sel.mb.set_prices(r.prices);
        sel.len.store((len as f64).to_bits(), Ordering::Relaxed);
        for (&(net, _), &t) in nets.iter().zip(&times) {
            let p = sel.predictors[&net];
            sel.mb.set_prediction(p, t).ok()?;
        }
        let choice = sel.mb.choose(sel.evaluator?).ok()?;
        let (first, redundant) = match sel.built.iter().position(|b| b.2 == choice.strategy) {
            Some(i) => (i, false),
            None => {
                let (_, [a, b]) = *sel.pairs.iter().find(|p| p.0 == choice.strategy)?;
                // The faster-looking network first, the copy on the other.
                (if times[a] <= times[b] { a } else { b }, true)
            }
        };
        let (net, conn, _) = sel.built[first];
        let expected = choice.expected.time.0;
        let next = if redundant {
            now
        } else {
            Reevaluation::default().next(now, roam_decide::Seconds(expected), now)
        };
        if self.config.trace {
            let how = if redundant {
                "on two networks"
            } else {
                "on one network"
            };
            self.events.push_back(Event::Trace(format!(
                "meatballs: irob {id} ({len} B) {how}, first network {net}, expected {expected:.3} s"
            )));
        }
        let o = self.out.get_mut(&id)?;
        o.pinned = Some(conn);
        o.selected = Some(Selected {
            net,
            at: now,
            predicted: times[first],
            next,
            redundant,
        });
        Some(conn)
    }

    /// A selected IROB is due for its copy or a re-evaluation (`Session::hedges`): whether to
    /// send it over another network now. If not, the next re-evaluation is 200 ms later.
    pub(super) fn reevaluate_selected(&mut self, id: IrobId, now: Time) -> bool {
        let Some(s) = self.out.get(&id).and_then(|o| o.selected) else {
            return true;
        };
        if s.redundant {
            return true;
        }
        let copy = (|| {
            let sel = self.selector.as_ref()?;
            let strategy = sel.built.iter().find(|b| b.0 == s.net)?.2;
            let running = Running {
                strategy,
                elapsed: now.saturating_since(s.at).as_secs_f64(),
            };
            let c = sel.mb.reevaluate(sel.evaluator?, running).ok()?;
            Some(c.strategy != strategy)
        })()
        .unwrap_or(true);
        if !copy {
            let every = Reevaluation::default().every;
            if let Some(sel) = self.out.get_mut(&id).and_then(|o| o.selected.as_mut()) {
                sel.next = now + every;
            }
        }
        copy
    }

    /// A selected IROB was acknowledged `now`: the time it took is a measurement of its first
    /// network's predictor.
    pub(super) fn selected_acknowledged(&mut self, s: Selected, now: Time) {
        let Some(sel) = self.selector.as_mut() else {
            return;
        };
        let Some(&p) = sel.predictors.get(&s.net) else {
            return;
        };
        let took = now.saturating_since(s.at).as_secs_f64();
        // The prediction this IROB was placed with, then the measurement against it.
        if sel.mb.set_prediction(p, s.predicted).is_ok() {
            let _ = sel.mb.add_measurement(p, took, s.predicted);
        }
    }

    /// Network `net` came up again (another access point, perhaps): its error record starts
    /// afresh, and a non-cellular network's association begins.
    pub(super) fn selector_network_up(&mut self, net: NetId, now: Time) {
        let Some(r) = self.config.redundancy else {
            return;
        };
        let (cellular, ap) = self.networks.get(&net).map_or((false, String::new()), |n| {
            (n.kind.cellular, n.addr.to_string())
        });
        let sel = self.selector.get_or_insert_with(|| Selector::new(&r));
        if let Some(&p) = sel.predictors.get(&net) {
            let _ = sel.mb.reset_errors(p);
        }
        if !cellular {
            sel.associated.insert(net, (now, ap));
        }
    }

    /// Network `net` went away: a non-cellular network's association ended, one more session
    /// of its access point's dwell time.
    pub(super) fn selector_network_down(&mut self, net: NetId, now: Time) {
        let Some(sel) = self.selector.as_mut() else {
            return;
        };
        if let Some((since, ap)) = sel.associated.remove(&net) {
            let _ = sel
                .dwell
                .record(&ap, now.saturating_since(since).as_secs_f64());
        }
    }
}
