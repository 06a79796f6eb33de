//! The five ways an application reaches its server in the lab (the paper's §5 baselines, plus
//! what a user would pick today).
//!
//! - `roam`: the application uses Intentional Networking over the two real emulated links;
//! - `mptcp`: the unmodified application over Linux MPTCP (kernel, default scheduler), with a
//!   subflow on each of the two links;
//! - `best-latency`, `best-bandwidth`, `aggregation`: the unmodified application over plain TCP
//!   on ONE emulated link rebuilt each second from the two networks (oracle migration to the
//!   lower-RTT network, to the higher-bandwidth network, or the idealized sum of bandwidths at
//!   the minimum latency), as in the paper;
//! - a baseline file (`--systems roam,FILE.toml`, `roam_emu::baseline_file`): the
//!   unmodified application over one link derived by the file's rule, how often it chooses,
//!   and whether it sees ahead.

use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use roam_emu::baseline_file::{self, NamedBaseline};
use roam_emu::queue::QueueLimit;
use roam_emu::spec::LinkConfig;
use roam_prefetch::Strategy;
use roam_trace::baseline::{derive, Baseline, BaselineSpec};
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
    /// roam with a prefetching strategy (`roam lab imp`: IMP or one of the thesis's
    /// baselines, every one over Intentional Networking).
    Prefetch(Strategy),
    /// roam with a network-selection rule (`roam lab meatballs`: Meatballs or one of the
    /// thesis's baselines, every one over Intentional Networking).
    Select(crate::studies::meatballs::selection::Selection),
    /// A bulk-transfer tool over the scenario's one link (`roam lab fasthla`).
    Transfer(crate::studies::fasthla::bulk::Tool),
    /// A Horatio path: where a parcel is suspended to, or how the phone self-cleans (`roam
    /// lab horatio`).
    Parcel(crate::studies::horatio::Path),
    /// Plain TCP over the link a baseline file derives. It is loaded once, when the command
    /// line names it, and lives as long as the process.
    File(&'static NamedBaseline),
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
            System::File(b) => &b.name,
            System::Prefetch(s) => s.name(),
            System::Select(s) => s.name(),
            System::Transfer(t) => t.name(),
            System::Parcel(p) => p.name(),
            System::Roam => "roam",
            System::Mptcp => "mptcp",
            System::BestLatency => "best-latency",
            System::BestBandwidth => "best-bandwidth",
            System::Aggregation => "aggregation",
        }
    }

    /// Parse a name, or load a baseline file (a name ending in `.toml`).
    pub fn parse(s: &str) -> Result<System> {
        if baseline_file::is_file(s) {
            let b = baseline_file::load(std::path::Path::new(s)).map_err(|e| anyhow!("{e}"))?;
            if System::ALL.iter().any(|x| x.name() == b.name) {
                bail!(
                    "{s}: the baseline is named `{}`, as a built-in system is; give it a \
                     `name` of its own",
                    b.name
                );
            }
            return Ok(System::File(Box::leak(Box::new(b))));
        }
        System::ALL
            .into_iter()
            .find(|x| x.name() == s)
            .ok_or_else(|| {
                anyhow!(
                    "unknown system `{s}` (expected one of: {}, or a baseline file FILE.toml)",
                    System::ALL.map(System::name).join(", ")
                )
            })
    }

    /// The one-link baseline this system runs on, if it is one.
    pub fn baseline(self) -> Option<BaselineSpec> {
        match self {
            System::BestLatency => Some(BaselineSpec::paper(Baseline::BestLatency)),
            System::BestBandwidth => Some(BaselineSpec::paper(Baseline::BestBandwidth)),
            System::Aggregation => Some(BaselineSpec::paper(Baseline::Aggregation)),
            System::File(b) => Some(b.spec.clone()),
            System::Roam
            | System::Mptcp
            | System::Prefetch(_)
            | System::Select(_)
            | System::Transfer(_)
            | System::Parcel(_) => None,
        }
    }

    /// Whether the application uses roam's multi-sockets (else one TCP or MPTCP connection).
    pub fn is_roam(self) -> bool {
        matches!(self, System::Roam | System::Prefetch(_) | System::Select(_))
    }

    /// The prefetching strategy, if this is roam with one.
    pub fn strategy(self) -> Option<Strategy> {
        match self {
            System::Prefetch(s) => Some(s),
            _ => None,
        }
    }

    /// Whether the single connection is MPTCP.
    pub fn is_mptcp(self) -> bool {
        self == System::Mptcp
    }
}

/// Drop-tail bound of every emulated link in the lab (per direction), in packets, unless a
/// sweep changes it ([`crate::harness::sweep`]).
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
        let t = derive(scenario, &b, duration + Duration::from_secs(300))?;
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
    if let System::Parcel(path) = system {
        return path
            .links()
            .into_iter()
            .map(|(name, _, _)| {
                let l = scenario
                    .links
                    .iter()
                    .find(|l| l.name == name)
                    .ok_or_else(|| {
                        anyhow!(
                            "scenario {} has no link `{name}` ({} runs on the `horatio` scenario)",
                            scenario.name,
                            path.name()
                        )
                    })?;
                Ok(link_config(l, queue, 1))
            })
            .collect();
    }
    let one = matches!(system, System::Transfer(_));
    if scenario.links.len() < 2 && !one {
        bail!("scenario {} has fewer than two links", scenario.name);
    }
    if one && scenario.links.len() != 1 {
        bail!(
            "scenario {} has {} links; a bulk transfer runs over one (wifi-bulk, lte-bulk)",
            scenario.name,
            scenario.links.len()
        );
    }
    Ok(scenario
        .links
        .iter()
        .enumerate()
        .map(|(i, l)| link_config(l, queue, 1 + i as u64))
        .collect())
}

/// A scenario's link as the emulator runs it: drop-tail bound `queue`, no jitter, outages
/// silent, `seed` for its random parts.
fn link_config(l: &roam_trace::link::NamedLink, queue: QueueLimit, seed: u64) -> LinkConfig {
    LinkConfig {
        name: l.name.clone(),
        kind: l.kind,
        trace: l.trace.clone(),
        queue,
        jitter: Default::default(),
        carrier_after: None,
        seed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_baseline_file_is_a_system_over_the_link_it_derives() {
        let dir = std::env::temp_dir().join(format!("roam-system-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = |name: &str, text: &str| {
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            p.to_str().unwrap().to_string()
        };
        let late = file(
            "late.toml",
            "rule = \"best-latency\"\ndecide_every = \"10s\"\noracle = false\n",
        );
        let sys = System::parse(&late).unwrap();
        assert_eq!(sys.name(), "late");
        assert!(!sys.is_roam() && !sys.is_mptcp());
        let sc = Scenario::by_name("intermittent", 3).unwrap();
        let d = Duration::from_secs(120);
        let ours = links(&sc, sys, d, QUEUE).unwrap();
        let paper = links(&sc, System::BestLatency, d, QUEUE).unwrap();
        assert_eq!((ours.len(), paper.len()), (1, 1));
        assert_ne!(ours[0].trace, paper[0].trace);
        // A file may not take a built-in system's name.
        let clash = file("x.toml", "name = \"aggregation\"\nrule = \"aggregation\"\n");
        let e = System::parse(&clash).unwrap_err().to_string();
        assert!(e.contains("`aggregation`, as a built-in system is"), "{e}");
        assert!(System::parse("fastest")
            .unwrap_err()
            .to_string()
            .contains("or a baseline file"));
        std::fs::remove_dir_all(dir).ok();
    }
}
