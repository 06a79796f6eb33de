//! What a study runs: its applications ([`App`]) and a plan of applications x scenarios x
//! systems x trials ([`Plan`]), with the seed sets trials draw from.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;

use crate::harness::setup::Need;
use crate::harness::system::System;
use crate::harness::trial::{Metric, Trial};

/// One application of a lab: how to run a trial of it and which of its metrics the
/// report and charts show.
pub struct App {
    /// Name on the command line and in reports.
    pub name: &'static str,
    /// Run one trial.
    pub run: fn(&Trial) -> Result<Vec<Metric>>,
    /// Workload length of a full run.
    pub full: Duration,
    /// Workload length of a `--quick` run.
    pub quick: Duration,
    /// The interactive metric (lower is better) and how reports name it.
    pub interactive: (&'static str, &'static str),
    /// The background metric, how reports name it, and whether higher is better.
    pub background: (&'static str, &'static str, bool),
    /// The interactive event whose every latency a trial records (`events.csv`), and how
    /// the distribution charts name it.
    pub event: (&'static str, &'static str),
    /// What its trials need installed besides `ip` (checked, and installed as root, once
    /// per run).
    pub needs: &'static [Need],
    /// A metric giving the least the interactive metric can be on any network (the file
    /// system's replay cannot be shorter than the recorded build it replays), if there is one.
    pub interactive_floor: Option<&'static str>,
    /// For an application with periodic bursts of CPU (speech recognition every 30 s): trials
    /// of it run side by side start this long divided by `--jobs` apart, so their bursts do
    /// not line up and take CPU from each other. Each trial's own timeline is unchanged.
    pub stagger: Option<Duration>,
}

/// What to run.
pub struct Plan {
    /// Applications (names).
    pub apps: Vec<String>,
    /// Scenarios.
    pub scenarios: Vec<String>,
    /// Systems.
    pub systems: Vec<System>,
    /// Trials per cell.
    pub trials: u32,
    /// The seed of the first trial of every cell; trial k has seed `first_seed + k - 1`. The
    /// development seeds start at 1 ([`DEVELOPMENT_SEEDS`]), the held-out ones at
    /// [`HELD_OUT_SEEDS`].
    pub first_seed: u64,
    /// Reduced workloads.
    pub quick: bool,
    /// Workload length for every application (overrides their defaults).
    pub duration: Option<Duration>,
    /// Trials run at once (each in its own emulator).
    pub jobs: usize,
    /// Output directory.
    pub out: PathBuf,
    /// Keep each trial's emulator logs (per-link CSV bins and a summary) in
    /// `<dir>/<app>-<scenario>-<system>-<trial>/`.
    pub emu_logs: Option<PathBuf>,
    /// Keep the trials already in `out/trials.csv` (measured by the same code with the same
    /// workloads, per `out/run.json`) and run only the missing or failed ones.
    pub resume: bool,
    /// Run nothing: write the report and charts of the trials already in `out` (measured by
    /// the code `out/run.json` names), e.g. after the report's explanations changed.
    pub report_only: bool,
    /// Run only this part of the matrix (`--shard K/N`), for a matrix spread over machines.
    pub shard: Option<Shard>,
}

/// A deterministic part of a matrix, `--shard K/N` (K from 1 to N): of the matrix's trials in
/// its fixed order (trial 1 of every cell first, then trial 2, ...; scenarios, applications and
/// systems in the plan's order), those whose place modulo N is K - 1. The N parts are disjoint
/// and cover the matrix whatever each machine has already run, and each holds trials of every
/// cell and of every trial number, so that a part cut short still measures the whole matrix a
/// little. `roam results merge` joins the parts' directories for `--report-only`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// Which part (1..=n).
    pub k: u32,
    /// Of how many.
    pub n: u32,
}

impl Shard {
    /// `K/N`, 1 <= K <= N; an error says what is wrong.
    pub fn parse(s: &str) -> Result<Shard, String> {
        let (k, n) = s
            .split_once('/')
            .ok_or_else(|| format!("--shard `{s}`: expected K/N, e.g. 2/8"))?;
        let num = |x: &str| {
            x.trim()
                .parse::<u32>()
                .map_err(|_| format!("--shard `{s}`: `{x}` is not a whole number"))
        };
        let (k, n) = (num(k)?, num(n)?);
        if n == 0 || k == 0 || k > n {
            return Err(format!(
                "--shard `{s}`: K must be from 1 to N (N at least 1)"
            ));
        }
        Ok(Shard { k, n })
    }

    /// Whether the trial at `place` in the matrix's order belongs to this part.
    pub fn holds(&self, place: usize) -> bool {
        place % self.n as usize == (self.k - 1) as usize
    }
}

/// The first seed of the trials roam-net was developed and tuned against (every run on
/// record before 2026-11-24 used seeds 1-5).
pub const DEVELOPMENT_SEEDS: u64 = 1;

/// The first of the seeds kept out of development (101-105 for five trials): no run used them
/// while roam-net was built, so figures measured on them cannot have been tuned to them. The
/// README's headline figures are to come from these.
pub const HELD_OUT_SEEDS: u64 = 101;

impl Plan {
    /// How long `app`'s workload runs under this plan.
    pub fn workload(&self, app: &App) -> Duration {
        self.duration
            .unwrap_or(if self.quick { app.quick } else { app.full })
    }
}

impl Plan {
    /// Check the plan against the study's applications `all`: every application known, every
    /// scenario readable, at least one trial and one job. The plan's applications, as indices
    /// into `all`.
    pub fn check(&self, all: &[App]) -> Result<Vec<usize>> {
        let mut app_ix = Vec::new();
        for a in &self.apps {
            match all.iter().position(|x| x.name == a) {
                Some(i) => app_ix.push(i),
                None => anyhow::bail!(
                    "unknown application `{a}` (expected one of: {})",
                    all.iter().map(|x| x.name).collect::<Vec<_>>().join(", ")
                ),
            }
        }
        for s in &self.scenarios {
            crate::harness::sweep::scenario(s, 1)?;
        }
        if self.trials == 0 || self.jobs == 0 {
            anyhow::bail!("--trials and --jobs must be at least 1");
        }
        Ok(app_ix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_are_disjoint_and_cover_the_matrix() {
        let parts: Vec<Shard> = (1..=3)
            .map(|k| Shard::parse(&format!("{k}/3")).unwrap())
            .collect();
        for place in 0..100 {
            assert_eq!(parts.iter().filter(|p| p.holds(place)).count(), 1);
        }
        for bad in ["0/3", "4/3", "1/0", "a/3", "3"] {
            assert!(Shard::parse(bad).unwrap_err().contains("--shard"), "{bad}");
        }
    }
}
