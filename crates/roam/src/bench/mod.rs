//! `roam bench`: benchmarks, printing JSON on stdout (progress on stderr), one file per
//! component.

mod afc;
mod decide;
mod dedup;
mod emu;
mod hostile;
mod net;
mod net_sessions;
mod precog;
mod prefetch;
mod store;
mod transfer;

use anyhow::Result;
use clap::Subcommand;

/// `roam bench ...`.
#[derive(Subcommand)]
pub enum BenchCmd {
    /// Emulator fidelity and speed.
    Emu(emu::BenchEmuArgs),
    /// AFC: goodput as a fraction of ideal in the thesis's five scenarios against standard
    /// credit, fixed-buffer TCP and Linux autotuning (and its memory), in the emulator.
    Afc(afc::BenchAfcArgs),
    /// Asymmetric caching: chunking, dd-src and dd-dst speed, and the share of an oracle's
    /// redundancy found (by each cache) on real files with synthetic churn (no network
    /// needed).
    Dedup(dedup::BenchDedupArgs),
    /// Intentional Networking: loopback cost against TCP, and the crowded hotspot against
    /// Linux MPTCP and TCP over idealized aggregation; with `--sessions N`, N idle sessions
    /// against TCP and QUIC instead (memory, accept rate, wake-ups, aggregate throughput).
    Net(net::BenchNetArgs),
    /// Precog: recorded actions that still resolve after a site's layout changed (roam's
    /// locators against the thesis's), seconds per replayed action, and a lab run's bytes.
    Precog(precog::BenchPrecogArgs),
    /// Informed Mobile Prefetching: decision time per hint, and the energy and data budgets'
    /// controllers over whole simulated periods (no network needed).
    Prefetch(prefetch::BenchPrefetchArgs),
    /// Meatballs: microseconds per decision for each evaluation method, with 2 and 4
    /// strategies and 50 or 500 error samples per predictor (no network needed).
    Decide(decide::BenchDecideArgs),
    /// Horatio: how fast one core seals an image and ingests it into a directory store; with
    /// the emulator, a suspend of 100 MB dirty to the phone over USB and the resume from it.
    Store(store::BenchStoreArgs),
    /// Every server roam ships (a roam-net listener, the relay, the HLA server, a Horatio
    /// tier) soaked in hostile clients for a minute while honest ones keep working: each
    /// server's peak RSS, honest requests served and their latency against an unloaded run.
    Hostile(hostile::BenchHostileArgs),
    /// FastHLA: throughput as a fraction of a 100 Mbit/s, 290 ms link against the best of
    /// today's tools, the model's prediction time, and CPU per GB against curl.
    Transfer(transfer::BenchTransferArgs),
}

impl BenchCmd {
    /// Whether it runs the emulator (which needs root or a user namespace).
    pub fn needs_namespaces(&self) -> bool {
        match self {
            // `--sessions` runs on this machine's loopback only.
            BenchCmd::Net(a) => a.sessions.is_none(),
            _ => matches!(
                self,
                BenchCmd::Emu(_) | BenchCmd::Transfer(_) | BenchCmd::Afc(_)
            ),
        }
    }
}

/// Run `roam bench ...`.
pub fn run(cmd: BenchCmd) -> Result<()> {
    match cmd {
        BenchCmd::Emu(a) => emu::emu(&a),
        BenchCmd::Afc(a) => afc::afc(&a),
        BenchCmd::Net(a) => net::net(&a),
        BenchCmd::Prefetch(a) => prefetch::prefetch(&a),
        BenchCmd::Precog(a) => precog::precog(&a),
        BenchCmd::Decide(a) => decide::decide(&a),
        BenchCmd::Dedup(a) => dedup::dedup(&a),
        BenchCmd::Store(a) => store::store(&a),
        BenchCmd::Transfer(a) => transfer::transfer(&a),
        BenchCmd::Hostile(a) => hostile::hostile(&a),
    }
}
