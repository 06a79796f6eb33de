//! The five ways an application reaches its server in the lab (the paper's §5 baselines, plus
//! what a user would pick today).
//!
//! - `roam`: the application uses Intentional Networking over the two real emulated links;
//! - `mptcp`: the unmodified application over Linux MPTCP (kernel, default scheduler), with a
//!   subflow on each of the two links;
//! - `best-latency`, `best-bandwidth`, `aggregation`: the unmodified application over plain TCP
//!   on ONE emulated link rebuilt each second from the two networks (oracle migration to the
//!   lower-RTT network, to the higher-bandwidth network, or the idealized sum of bandwidths at
//!   the minimum latency), as in the paper.

use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use roam_emu::queue::QueueLimit;
use roam_emu::spec::LinkConfig;
use roam_trace::baseline::{derive_baseline, Baseline};
use roam_trace::link::LinkKind;
use roam_trace::scenario::Scenario;

/// How the application reaches its server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum System {
    /// Intentional Networking over both links.
    Roam,
    /// Linux MPTCP over both links.
    Mptcp,
    /// Plain TCP over the oracle best-latency migration link.
    BestLatency,
    /// Plain TCP over the oracle best-bandwidth migration link.
    BestBandwidth,
    /// Plain TCP over the idealized-aggregation link.
    Aggregation,
}

impl System {
    /// Every system, in report order.
    pub const ALL: [System; 5] = [
        System::Roam,
        System::Mptcp,
        System::Aggregation,
        System::BestLatency,
        System::BestBandwidth,
    ];

    /// Name used on the command line, in the CSV and in reports.
    pub fn name(self) -> &'static str {
        match self {
            System::Roam => "roam",
            System::Mptcp => "mptcp",
            System::BestLatency => "best-latency",
            System::BestBandwidth => "best-bandwidth",
            System::Aggregation => "aggregation",
        }
    }

    /// Parse a name.
    pub fn parse(s: &str) -> Result<System> {
        System::ALL
            .into_iter()
            .find(|x| x.name() == s)
            .ok_or_else(|| {
                anyhow!(
                    "unknown system `{s}` (expected one of: {})",
                    System::ALL.map(System::name).join(", ")
                )
            })
    }

    /// The one-link baseline this system runs on, if it is one.
    pub fn baseline(self) -> Option<Baseline> {
        match self {
            System::BestLatency => Some(Baseline::BestLatency),
            System::BestBandwidth => Some(Baseline::BestBandwidth),
            System::Aggregation => Some(Baseline::Aggregation),
            System::Roam | System::Mptcp => None,
        }
    }

    /// Whether the application uses roam's multi-sockets (else one TCP or MPTCP connection).
    pub fn is_roam(self) -> bool {
        self == System::Roam
    }

    /// Whether the single connection is MPTCP.
    pub fn is_mptcp(self) -> bool {
        self == System::Mptcp
    }
}

/// Drop-tail bound of every emulated link in the lab (per direction), in packets, unless a
/// sweep changes it ([`crate::variant`]).
pub const QUEUE_PACKETS: usize = 100;
/// [`QUEUE_PACKETS`] as the emulator's bound.
pub const QUEUE: QueueLimit = QueueLimit::Packets(QUEUE_PACKETS);

/// The emulated links a system runs over for `duration` of `scenario`, each with the
/// drop-tail bound `queue`.
pub fn links(
    scenario: &Scenario,
    system: System,
    duration: Duration,
    queue: QueueLimit,
) -> Result<Vec<LinkConfig>> {
    if let Some(b) = system.baseline() {
        // Derived for longer than the run, so that draining after it stays on the baseline.
        let t = derive_baseline(scenario, b, duration + Duration::from_secs(300))?;
        return Ok(vec![LinkConfig {
            name: "link".into(),
            kind: LinkKind::Other,
            trace: t.to_link(),
            queue,
            jitter: Default::default(),
            carrier_after: None,
            seed: 1,
        }]);
    }
    if scenario.links.len() < 2 {
        bail!("scenario {} has fewer than two links", scenario.name);
    }
    Ok(scenario
        .links
        .iter()
        .enumerate()
        .map(|(i, l)| LinkConfig {
            name: l.name.clone(),
            kind: l.kind,
            trace: l.trace.clone(),
            queue,
            jitter: Default::default(),
            carrier_after: None,
            seed: 1 + i as u64,
        })
        .collect())
}
