//! The `roam` command: one binary, one subcommand per tool. This file holds the arguments'
//! top level and the dispatch; each command group lives in [`cmd`] (the benchmarks in
//! [`bench`]) and calls the libraries, so that what the lab measures is what users run.

mod bench;
mod cmd;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use std::time::Duration;

use bench::BenchCmd;
use cmd::emu::EmuCmd;
use cmd::hla::HlaCmd;
use cmd::net::NetCmd;
use cmd::trace::TraceCmd;
use cmd::transfer::TransferCmd;

#[derive(Parser)]
#[command(
    name = "roam",
    version,
    about = "A runtime for applications on several networks at once"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// The trace-driven multi-link network emulator.
    #[command(subcommand)]
    Emu(EmuCmd),
    /// Link traces: statistics, plots, derived baselines.
    #[command(subcommand)]
    Trace(TraceCmd),
    /// Intentional Networking tools.
    #[command(subcommand)]
    Net(NetCmd),
    /// Benchmarks, printing JSON on stdout.
    #[command(subcommand)]
    Bench(BenchCmd),
    /// Emulate a drive (the `vehicular` scenario): traffic over each link, a per-link table and
    /// a plot.
    Drive(cmd::drive::DriveArgs),
    /// The lab: a paper's evaluation (`roam lab STUDY`), its applications against its
    /// baselines and today's alternatives, with a report beside the paper's figures.
    Lab(cmd::lab::LabArgs),
    /// One process of a lab application that runs as several (the lab starts it in a trial's
    /// namespace; sensing-2proc's halves): SPEC is JSON, the answer JSON on stdout.
    #[command(hide = true)]
    LabProcess {
        /// What to run.
        spec: String,
    },
    /// Results directories: `merge` the parts of a sharded lab run; `index` the kept runs
    /// (docs/results/README.md, written from their files).
    #[command(subcommand)]
    Results(cmd::results::ResultsCmd),
    /// Radio energy (modelled) and data per link, from an emulator log directory or live from
    /// interfaces' counters; draws power and radio state over time.
    Energy(cmd::energy::EnergyArgs),
    /// Bulk HTTP transfers with chosen concurrency, parallelism and block size (FastHLA's
    /// engine).
    #[command(subcommand)]
    Transfer(TransferCmd),
    /// FastHLA's HLA server: collect devices' transfer logs, learn the best parameters per
    /// network condition, serve them.
    #[command(subcommand)]
    Hla(HlaCmd),
    /// Horatio: a VM's state carried by the phone between borrowed PCs (the phone's and the
    /// server's tiers; init, resume, suspend, self-cleaning, status).
    #[command(subcommand)]
    Parcel(cmd::parcel::ParcelCmd),
    /// Asymmetric caching: `analyze` captures for redundancy and what it finds of it.
    #[command(subcommand)]
    Dedup(cmd::dedup::DedupCmd),
    /// Precog: record your actions in Chromium, replay the likely ones on WiFi so what you
    /// will open on cellular is already cached (`browse`, `status`, `replay`, `forget`, `rule`).
    #[command(subcommand)]
    Precog(cmd::precog::PrecogCmd),
}

impl Cmd {
    /// Whether it runs the emulator, which needs root or a user namespace (entered before any
    /// thread exists).
    fn needs_namespaces(&self) -> bool {
        match self {
            Cmd::Emu(c) => c.needs_namespaces(),
            Cmd::Bench(c) => c.needs_namespaces(),
            Cmd::Drive(_) | Cmd::Lab(_) => true,
            _ => false,
        }
    }

    /// Whether it starts processes of its own that a signal must stop with it (a lab's
    /// browsers, clients and servers; [`roam_emu::run::stop_descendants_on_signal`]).
    /// `roam emu` stops its own ([`roam_emu::run::run`]).
    fn stops_what_it_started(&self) -> bool {
        matches!(self, Cmd::Lab(_) | Cmd::Drive(_) | Cmd::Bench(_))
    }
}

/// A duration argument: `20ms`, `3s`, `30m` ([`roam_core::parse_duration`]).
pub(crate) fn parse_dur(s: &str) -> Result<Duration, String> {
    roam_core::parse_duration(s).map_err(|e| e.to_string())
}

fn main() {
    let cli = Cli::parse();
    // Without root, try a user namespace before any thread exists (unshare requires that).
    if cli.cmd.needs_namespaces() && !roam_emu::sys::is_root() {
        if let Err(e) = roam_emu::sys::enter_user_namespace() {
            eprintln!("roam: needs root, or unprivileged user namespaces (unshare failed: {e})");
            std::process::exit(2);
        }
    }
    match real_main(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("roam: {e:#}");
            std::process::exit(2);
        }
    }
}

/// Run the command: its exit status, or the error to report.
fn real_main(cli: Cli) -> Result<i32> {
    if cli.cmd.stops_what_it_started() {
        roam_emu::run::stop_descendants_on_signal().context("installing the signal handlers")?;
    }
    match cli.cmd {
        Cmd::Emu(c) => cmd::emu::run(c),
        Cmd::Trace(c) => cmd::trace::run(c).map(|_| 0),
        Cmd::Net(c) => cmd::net::run(c).map(|_| 0),
        Cmd::Bench(c) => bench::run(c).map(|_| 0),
        Cmd::Drive(a) => cmd::drive::drive(&a).map(|_| 0),
        Cmd::Energy(a) => cmd::energy::energy(&a).map(|_| 0),
        Cmd::Transfer(c) => cmd::transfer::run(c).map(|_| 0),
        Cmd::Hla(c) => cmd::hla::run(c).map(|_| 0),
        Cmd::Parcel(c) => cmd::parcel::run(c).map(|_| 0),
        Cmd::Dedup(c) => cmd::dedup::run(c).map(|_| 0),
        Cmd::Precog(c) => cmd::precog::run(c).map(|_| 0),
        Cmd::Lab(a) => cmd::lab::run(&a).map(|_| 0),
        Cmd::Results(c) => cmd::results::run(c).map(|_| 0),
        Cmd::LabProcess { spec } => {
            roam_lab::studies::in_paper::sensing_2proc::half(&spec).map(|_| 0)
        }
    }
}
