//! `roam results`: results directories. `index` writes docs/results/README.md from the kept
//! runs' own files (`roam_lab::harness::index`), so that the record of which code and command
//! measured each cannot go stale; `merge` joins the parts of a sharded run.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Subcommand;

/// `roam results ...`.
#[derive(Subcommand, Debug)]
pub enum ResultsCmd {
    /// Write DIR/README.md (default docs/results) from every kept run's run.json, trials.csv
    /// and about.md, and the headline rows' sources (DIR/headline-sources.txt, checked).
    Index {
        /// The kept runs' directory.
        #[arg(default_value = "docs/results")]
        dir: PathBuf,
        /// Write nothing: fail if DIR/README.md is not what it would be.
        #[arg(long)]
        check: bool,
    },
    /// Join the results directories of one run's parts (`roam lab ... --shard K/N`, one
    /// directory each) into OUT, for `roam lab ... --report-only --out OUT`. Refused if the
    /// parts were measured by other code or workloads, or share a trial.
    Merge {
        /// The new directory.
        out: PathBuf,
        /// The parts' directories.
        #[arg(required = true)]
        parts: Vec<PathBuf>,
    },
}

/// Run `roam results ...`.
pub fn run(cmd: ResultsCmd) -> Result<()> {
    match cmd {
        ResultsCmd::Index { dir, check } => {
            let text = roam_lab::harness::index::index(&dir)?;
            let path = dir.join("README.md");
            if check {
                let kept = std::fs::read_to_string(&path).unwrap_or_default();
                if kept != text {
                    bail!(
                        "{} is stale: run `roam results index {}`",
                        path.display(),
                        dir.display()
                    );
                }
                eprintln!("{} is current", path.display());
            } else {
                std::fs::write(&path, text)
                    .with_context(|| format!("writing {}", path.display()))?;
                eprintln!("wrote {}", path.display());
            }
            Ok(())
        }
        ResultsCmd::Merge { out, parts } => {
            let n = roam_lab::harness::results::merge(&out, &parts)?;
            eprintln!("{n} trials of {} part(s) in {}", parts.len(), out.display());
            Ok(())
        }
    }
}
