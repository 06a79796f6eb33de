//! The systems under test: how an application reaches its server in a trial.
//!
//! A system is a trait object ([`SystemUnderTest`], held as a [`System`]): the framework asks
//! it for its name, its transport (multi-sockets, MPTCP or plain TCP), the emulated links it
//! runs over and any extra hosts, and lets it configure roam's multi-sockets. The framework's
//! own systems are the Intentional Networking paper's (§5: [`Builtin`]) and baseline files
//! ([`BaselineFile`]); a study adds its own by implementing the trait (IMP's prefetching
//! strategies, Meatballs' selection rules, FastHLA's transfer tools, Horatio's paths), and an
//! application that needs to know which of its study's systems it runs under asks
//! [`System::get`].
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

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use roam_emu::baseline_file::{self, NamedBaseline};
use roam_emu::queue::QueueLimit;
use roam_emu::spec::LinkConfig;
use roam_net::proto::session::FlowPolicy;
use roam_trace::baseline::{derive, Baseline, BaselineSpec};
use roam_trace::link::LinkKind;
use roam_trace::scenario::Scenario;

/// How an application's connections reach its server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// roam's multi-sockets over every link the system runs over.
    Roam,
    /// One Linux MPTCP connection with a subflow on each link.
    Mptcp,
    /// One plain TCP connection.
    Tcp,
}

/// Extra hosts and link ends of a trial's emulator, for systems whose links do not all join
/// the client to the server (Horatio's phone between them): the hosts' names, and each
/// link's two ends by link name.
pub type Topology = (Vec<String>, HashMap<String, (String, String)>);

/// A system under test: what the framework needs to know to run a trial of an application
/// over it. Implement it for a study's own systems; the framework's are [`Builtin`] and
/// [`BaselineFile`].
pub trait SystemUnderTest: fmt::Debug + Send + Sync + 'static {
    /// Name on the command line, in the CSV and in reports (unique within a study).
    fn name(&self) -> &str;

    /// How the application's connections reach the server.
    fn transport(&self) -> Transport;

    /// The emulated links the system runs over for `duration` of `scenario`, each with the
    /// drop-tail bound `queue`. By default the scenario's own links, of which there must be
    /// at least two ([`scenario_links`]).
    fn links(
        &self,
        scenario: &Scenario,
        duration: Duration,
        queue: QueueLimit,
    ) -> Result<Vec<LinkConfig>> {
        let _ = duration;
        both_links(scenario, queue)
    }

    /// Extra hosts and link ends of the emulator (none by default: every link joins the
    /// client to the server).
    fn topology(&self) -> Topology {
        Topology::default()
    }

    /// Configure a multi-socket of this system (roam transports only): e.g. a network
    /// selection rule's policies. Nothing by default.
    fn configure(&self, config: &mut roam_net::proto::session::Config) {
        let _ = config;
    }

    /// This system as [`Any`], so that [`System::get`] can find a study's own type.
    fn as_any(&self) -> &dyn Any;
}

/// A system under test, shared: cheap to clone, compared and hashed by name.
#[derive(Clone)]
pub struct System(Arc<dyn SystemUnderTest>);

impl System {
    /// Wrap a system.
    pub fn new(s: impl SystemUnderTest) -> System {
        System(Arc::new(s))
    }

    /// Its name ([`SystemUnderTest::name`]).
    pub fn name(&self) -> &str {
        self.0.name()
    }

    /// The system as its own type, if it is a `T` (a study asking which of its systems a
    /// trial runs under).
    pub fn get<T: SystemUnderTest>(&self) -> Option<&T> {
        self.0.as_any().downcast_ref::<T>()
    }

    /// How the application reaches its server.
    pub fn transport(&self) -> Transport {
        self.0.transport()
    }

    /// Whether the application uses roam's multi-sockets (else one TCP or MPTCP connection).
    pub fn is_roam(&self) -> bool {
        self.transport() == Transport::Roam
    }

    /// Whether the single connection is MPTCP.
    pub fn is_mptcp(&self) -> bool {
        self.transport() == Transport::Mptcp
    }

    /// The emulated links ([`SystemUnderTest::links`]).
    pub fn links(
        &self,
        scenario: &Scenario,
        duration: Duration,
        queue: QueueLimit,
    ) -> Result<Vec<LinkConfig>> {
        self.0.links(scenario, duration, queue)
    }

    /// Extra hosts and ends ([`SystemUnderTest::topology`]).
    pub fn topology(&self) -> Topology {
        self.0.topology()
    }

    /// Configure a multi-socket ([`SystemUnderTest::configure`]).
    pub fn configure(&self, config: &mut roam_net::proto::session::Config) {
        self.0.configure(config)
    }
}

impl fmt::Debug for System {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl PartialEq for System {
    fn eq(&self, other: &System) -> bool {
        self.name() == other.name()
    }
}

impl Eq for System {}

impl Hash for System {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.name().hash(state)
    }
}

impl PartialEq<Builtin> for System {
    fn eq(&self, other: &Builtin) -> bool {
        self.get::<Builtin>() == Some(other)
    }
}

impl From<Builtin> for System {
    fn from(b: Builtin) -> System {
        System::new(b)
    }
}

/// The Intentional Networking paper's systems (§5): roam, Linux MPTCP, and the three
/// one-link oracle baselines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Builtin {
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

impl Builtin {
    /// Every one, in report order.
    pub const ALL: [Builtin; 5] = [
        Builtin::Roam,
        Builtin::Mptcp,
        Builtin::Aggregation,
        Builtin::BestLatency,
        Builtin::BestBandwidth,
    ];

    /// Name used on the command line, in the CSV and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Builtin::Roam => "roam",
            Builtin::Mptcp => "mptcp",
            Builtin::BestLatency => "best-latency",
            Builtin::BestBandwidth => "best-bandwidth",
            Builtin::Aggregation => "aggregation",
        }
    }

    /// Every one, as systems, in report order.
    pub fn all() -> Vec<System> {
        Builtin::ALL.into_iter().map(System::from).collect()
    }

    /// The one-link baseline this is, if it is one.
    fn baseline(self) -> Option<Baseline> {
        match self {
            Builtin::BestLatency => Some(Baseline::BestLatency),
            Builtin::BestBandwidth => Some(Baseline::BestBandwidth),
            Builtin::Aggregation => Some(Baseline::Aggregation),
            Builtin::Roam | Builtin::Mptcp => None,
        }
    }
}

impl SystemUnderTest for Builtin {
    fn name(&self) -> &str {
        Builtin::name(*self)
    }

    fn transport(&self) -> Transport {
        match self {
            Builtin::Roam => Transport::Roam,
            Builtin::Mptcp => Transport::Mptcp,
            _ => Transport::Tcp,
        }
    }

    fn links(
        &self,
        scenario: &Scenario,
        duration: Duration,
        queue: QueueLimit,
    ) -> Result<Vec<LinkConfig>> {
        match self.baseline() {
            Some(b) => derived_link(scenario, &BaselineSpec::paper(b), duration, queue),
            None => both_links(scenario, queue),
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Plain TCP over the link a baseline file derives (`roam_emu::baseline_file`).
#[derive(Debug)]
pub struct BaselineFile(pub NamedBaseline);

impl SystemUnderTest for BaselineFile {
    fn name(&self) -> &str {
        &self.0.name
    }

    fn transport(&self) -> Transport {
        Transport::Tcp
    }

    fn links(
        &self,
        scenario: &Scenario,
        duration: Duration,
        queue: QueueLimit,
    ) -> Result<Vec<LinkConfig>> {
        derived_link(scenario, &self.0.spec, duration, queue)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// roam with a flow control other than its default (`roam-legacy`, `roam-standard`,
/// `roam-afc-receiver-only`; `roam-afc` is the default's name): for A/B runs of a change to
/// flow control in any study whose systems are the paper's (not in any default matrix).
#[derive(Debug, Clone, Copy)]
pub struct RoamFlow(pub FlowPolicy);

impl RoamFlow {
    /// `roam-` and the policy's name.
    pub fn name(self) -> &'static str {
        match self.0 {
            FlowPolicy::Legacy => "roam-legacy",
            FlowPolicy::Standard => "roam-standard",
            FlowPolicy::Afc => "roam-afc",
            FlowPolicy::AfcReceiverOnly => "roam-afc-receiver-only",
        }
    }

    /// Parse a name.
    pub fn parse(s: &str) -> Option<RoamFlow> {
        FlowPolicy::ALL
            .into_iter()
            .map(RoamFlow)
            .find(|r| r.name() == s)
    }
}

impl SystemUnderTest for RoamFlow {
    fn name(&self) -> &str {
        RoamFlow::name(*self)
    }

    fn transport(&self) -> Transport {
        Transport::Roam
    }

    fn configure(&self, config: &mut roam_net::proto::session::Config) {
        config.flow.policy = self.0;
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Parse the name of one of the paper's systems, or load a baseline file (a name ending in
/// `.toml`), or name roam with another flow control ([`RoamFlow`]).
pub fn parse(s: &str) -> Result<System> {
    if let Some(r) = RoamFlow::parse(s) {
        return Ok(System::new(r));
    }
    if baseline_file::is_file(s) {
        let b = baseline_file::load(std::path::Path::new(s)).map_err(|e| anyhow!("{e}"))?;
        if Builtin::ALL.iter().any(|x| x.name() == b.name) {
            bail!(
                "{s}: the baseline is named `{}`, as a built-in system is; give it a \
                 `name` of its own",
                b.name
            );
        }
        return Ok(System::new(BaselineFile(b)));
    }
    Builtin::ALL
        .into_iter()
        .find(|x| x.name() == s)
        .map(System::from)
        .ok_or_else(|| {
            anyhow!(
                "unknown system `{s}` (expected one of: {}, roam-legacy and the like, or a \
                 baseline file FILE.toml)",
                Builtin::ALL.map(Builtin::name).join(", ")
            )
        })
}

/// Drop-tail bound of every emulated link in the lab (per direction), in packets, unless a
/// sweep changes it ([`crate::harness::sweep`]).
pub const QUEUE_PACKETS: usize = 100;
/// [`QUEUE_PACKETS`] as the emulator's bound.
pub const QUEUE: QueueLimit = QueueLimit::Packets(QUEUE_PACKETS);

/// The one link a one-link baseline `spec` derives from `scenario`, for `duration`.
fn derived_link(
    scenario: &Scenario,
    spec: &BaselineSpec,
    duration: Duration,
    queue: QueueLimit,
) -> Result<Vec<LinkConfig>> {
    // Derived for longer than the run, so that draining after it stays on the baseline.
    let t = derive(scenario, spec, duration + Duration::from_secs(300))?;
    Ok(vec![LinkConfig {
        name: "link".into(),
        kind: LinkKind::Other,
        trace: t.to_link(),
        queue,
        jitter: Default::default(),
        carrier_after: None,
        seed: 1,
    }])
}

/// The scenario's links for a system that runs over several ([`scenario_links`]): an error if
/// it has fewer than two.
fn both_links(scenario: &Scenario, queue: QueueLimit) -> Result<Vec<LinkConfig>> {
    if scenario.links.len() < 2 {
        bail!("scenario {} has fewer than two links", scenario.name);
    }
    Ok(scenario_links(scenario, queue))
}

/// How long a WiFi outage lasts before the client's kernel is told (the interface loses its
/// carrier, and MPTCP's endpoint for it is withdrawn until it returns): a phone notices lost
/// beacons and disassociates within a second or two. Cellular fading stays silent: a phone's
/// modem keeps its bearer through it.
pub const WIFI_CARRIER_AFTER: Duration = Duration::from_secs(2);

/// Every link of `scenario` as the lab runs it ([`roam_emu::scenario::links`]): drop-tail
/// bound `queue`, no jitter, link i seeded with `1 + i` in every trial (the trial's seed is
/// the scenario's: its WiFi sessions and the workload). A WiFi link's outages take its
/// carrier down after [`WIFI_CARRIER_AFTER`], as a device sees them (and the emulator then
/// plays the phone's connection manager for MPTCP); other links' outages are silent drops.
pub fn scenario_links(scenario: &Scenario, queue: QueueLimit) -> Vec<LinkConfig> {
    let mut links = roam_emu::scenario::links(scenario, queue, 1);
    for l in &mut links {
        if l.kind == LinkKind::Wifi {
            l.carrier_after = Some(WIFI_CARRIER_AFTER);
        }
    }
    links
}

/// [`scenario_links`] of a scenario that must have exactly one link, for systems that run over
/// one (a bulk transfer, AFC's flows); otherwise an error naming the scenario and `which`
/// scenarios the study means.
pub fn one_link(
    scenario: &Scenario,
    queue: QueueLimit,
    what: &str,
    which: &str,
) -> Result<Vec<LinkConfig>> {
    if scenario.links.len() != 1 {
        bail!(
            "scenario {} has {} links; {what} runs over one ({which})",
            scenario.name,
            scenario.links.len()
        );
    }
    Ok(scenario_links(scenario, queue))
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
        let sys = parse(&late).unwrap();
        assert_eq!(sys.name(), "late");
        assert!(!sys.is_roam() && !sys.is_mptcp());
        let sc = Scenario::by_name("intermittent", 3).unwrap();
        let d = Duration::from_secs(120);
        let ours = sys.links(&sc, d, QUEUE).unwrap();
        let paper = System::from(Builtin::BestLatency)
            .links(&sc, d, QUEUE)
            .unwrap();
        assert_eq!((ours.len(), paper.len()), (1, 1));
        assert_ne!(ours[0].trace, paper[0].trace);
        // A file may not take a built-in system's name.
        let clash = file("x.toml", "name = \"aggregation\"\nrule = \"aggregation\"\n");
        let e = parse(&clash).unwrap_err().to_string();
        assert!(e.contains("`aggregation`, as a built-in system is"), "{e}");
        assert!(parse("fastest")
            .unwrap_err()
            .to_string()
            .contains("or a baseline file"));
        std::fs::remove_dir_all(dir).ok();
    }
}
