//! `roam results`: the kept runs. `index` writes docs/results/README.md from the runs' own
//! files (`roam_lab::harness::index`), so that the record of which code and command measured
//! each kept run cannot go stale.

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
    }
}
