//! Horatio's paths: where a parcel's state goes on suspend (the phone over USB or WiFi, a fast
//! local card, ISR's server over a slow WAN) or how the phone self-cleans, each a system under
//! test with the links it runs over and the hosts they join ([`topology`]).

use std::time::Duration;

use anyhow::{anyhow, Result};
use roam_emu::queue::QueueLimit;
use roam_emu::spec::LinkConfig;
use roam_trace::scenario::Scenario;

use crate::harness::system::{SystemUnderTest, Topology, Transport};

/// Where a parcel goes, and over which links (the lab's systems).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Path {
    /// ISR: suspend to (and resume from) the server over a 1 Mbit/s WAN.
    Isr1,
    /// ISR over a 10 Mbit/s WAN.
    Isr10,
    /// Horatio: the phone over USB.
    PhoneUsb,
    /// Horatio: the phone over its WiFi.
    PhoneWifi,
    /// A fast local card (a USB 2.0 reader) in the phone's place.
    SdUsb,
    /// Self-cleaning from the phone over WiFi.
    CleanWifi,
    /// Self-cleaning from the phone over 3G.
    Clean3g,
    /// Self-cleaning over roam-net with both of the phone's networks: WiFi as a walking phone
    /// meets it (in reach 69% of the time) and the 3G.
    CleanRoam,
}

/// A Horatio path is a system under test: plain TCP over the path's own links (some of them
/// ending at the phone between the client and the server: [`topology`]).
impl SystemUnderTest for Path {
    fn name(&self) -> &str {
        Path::name(*self)
    }

    fn transport(&self) -> Transport {
        Transport::Tcp
    }

    fn links(
        &self,
        scenario: &Scenario,
        _duration: Duration,
        queue: QueueLimit,
    ) -> Result<Vec<LinkConfig>> {
        Path::links(*self)
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
                            self.name()
                        )
                    })?;
                // Outages stay silent here (no carrier): Horatio's links are the phone's and
                // the server's, and its results were measured so.
                Ok(roam_emu::scenario::link(l, queue, 1))
            })
            .collect()
    }

    fn topology(&self) -> Topology {
        topology(*self)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl Path {
    /// The suspend and resume systems, in report order.
    pub const SUSPEND: [Path; 5] = [
        Path::Isr1,
        Path::Isr10,
        Path::PhoneWifi,
        Path::PhoneUsb,
        Path::SdUsb,
    ];
    /// The self-cleaning systems.
    pub const CLEAN: [Path; 3] = [Path::CleanWifi, Path::Clean3g, Path::CleanRoam];

    /// Name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Path::Isr1 => "isr-1mbit",
            Path::Isr10 => "isr-10mbit",
            Path::PhoneUsb => "phone-usb",
            Path::PhoneWifi => "phone-wifi",
            Path::SdUsb => "sd-usb",
            Path::CleanWifi => "clean-wifi",
            Path::Clean3g => "clean-3g",
            Path::CleanRoam => "clean-roam",
        }
    }

    /// Parse a name.
    pub fn parse(s: &str) -> Option<Path> {
        Path::SUSPEND
            .into_iter()
            .chain(Path::CLEAN)
            .find(|p| p.name() == s)
    }

    /// The `horatio` scenario's links this path uses, with the two hosts each joins (the
    /// first takes the link's client side).
    pub fn links(self) -> Vec<(&'static str, &'static str, &'static str)> {
        let wan1 = ("wan1", "client", "server");
        match self {
            Path::Isr1 => vec![wan1],
            Path::Isr10 => vec![("wan10", "client", "server")],
            Path::PhoneUsb => vec![wan1, ("usb", "client", "phone")],
            Path::PhoneWifi => vec![wan1, ("lwifi", "client", "phone")],
            Path::SdUsb => vec![wan1, ("sd", "client", "phone")],
            Path::CleanWifi => vec![
                wan1,
                ("usb", "client", "phone"),
                ("pwifi", "phone", "server"),
            ],
            Path::Clean3g => vec![
                wan1,
                ("usb", "client", "phone"),
                ("cell", "phone", "server"),
            ],
            Path::CleanRoam => vec![
                wan1,
                ("usb", "client", "phone"),
                ("pwifi-onoff", "phone", "server"),
                ("cell", "phone", "server"),
            ],
        }
    }

    /// Whether the parcel is suspended to the phone (else to the server).
    pub(super) fn to_phone(self) -> bool {
        !matches!(self, Path::Isr1 | Path::Isr10)
    }
}

/// The hosts and link ends of a Horatio system.
pub fn topology(path: Path) -> Topology {
    let links = path.links();
    let hosts = if links.iter().any(|(_, a, b)| *a == "phone" || *b == "phone") {
        vec!["phone".to_string()]
    } else {
        Vec::new()
    };
    let ends = links
        .into_iter()
        .map(|(n, a, b)| (n.to_string(), (a.to_string(), b.to_string())))
        .collect();
    (hosts, ends)
}
