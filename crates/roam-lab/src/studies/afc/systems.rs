//! The systems `roam lab afc` compares: what users have today (kernel TCP with the
//! scenario's fixed receive buffer, and with Linux's autotuning) and roam-net's flow control
//! under each policy, every one over the scenario's single link.

use std::time::Duration;

use anyhow::Result;
use roam_emu::queue::QueueLimit;
use roam_emu::spec::LinkConfig;
use roam_net::proto::session::FlowPolicy;
use roam_trace::scenario::Scenario;

use crate::harness::system::{one_link, SystemUnderTest, Transport};

/// One system of the AFC study.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfcSystem {
    /// Kernel TCP whose receiver sets `SO_RCVBUF` to the scenario's buffer (the thesis's
    /// "default TCP" with buffer `B`).
    TcpFixed,
    /// Kernel TCP with Linux's receive-buffer autotuning (`tcp_rmem`), memory unbounded by
    /// the application.
    TcpAuto,
    /// A roam-net multi-socket with this flow control at both ends, the scenario's buffer as
    /// its window (`Memory::Fixed`).
    Roam(FlowPolicy),
    /// QUIC (quinn) with the scenario's buffer as its connection and stream receive windows
    /// (`quic`).
    Quic,
}

impl AfcSystem {
    /// Every system, in the report's order.
    pub const ALL: [AfcSystem; 7] = [
        AfcSystem::TcpFixed,
        AfcSystem::TcpAuto,
        AfcSystem::Quic,
        AfcSystem::Roam(FlowPolicy::Legacy),
        AfcSystem::Roam(FlowPolicy::Standard),
        AfcSystem::Roam(FlowPolicy::Afc),
        AfcSystem::Roam(FlowPolicy::AfcReceiverOnly),
    ];

    /// Name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            AfcSystem::TcpFixed => "tcp-fixed",
            AfcSystem::TcpAuto => "tcp-auto",
            AfcSystem::Quic => "quinn",
            AfcSystem::Roam(FlowPolicy::Legacy) => "roam-legacy",
            AfcSystem::Roam(FlowPolicy::Standard) => "roam-standard",
            AfcSystem::Roam(FlowPolicy::Afc) => "roam-afc",
            AfcSystem::Roam(FlowPolicy::AfcReceiverOnly) => "roam-afc-rx",
        }
    }

    /// Parse a name.
    pub fn parse(s: &str) -> Option<AfcSystem> {
        AfcSystem::ALL.into_iter().find(|x| x.name() == s)
    }

    /// The sender's flow control, where it differs from the receiver's: the receiver-only
    /// variant runs against a sender that knows nothing of read rates.
    pub fn sender_policy(self) -> Option<FlowPolicy> {
        match self {
            AfcSystem::Roam(FlowPolicy::AfcReceiverOnly) => Some(FlowPolicy::Standard),
            AfcSystem::Roam(p) => Some(p),
            _ => None,
        }
    }
}

impl SystemUnderTest for AfcSystem {
    fn name(&self) -> &str {
        AfcSystem::name(*self)
    }

    fn transport(&self) -> Transport {
        // QUIC runs over UDP, but like TCP it needs nothing of the framework's transports:
        // the trial opens its own endpoints (`quic`).
        match self {
            AfcSystem::Roam(_) => Transport::Roam,
            _ => Transport::Tcp,
        }
    }

    fn links(
        &self,
        scenario: &Scenario,
        _duration: Duration,
        queue: QueueLimit,
    ) -> Result<Vec<LinkConfig>> {
        one_link(scenario, queue, "the AFC study", "afc-s1 .. afc-s5")
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
