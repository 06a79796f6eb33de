//! `roam trace`: a scenario's (or links') statistics as the paper's trace table, plots of
//! capacity and availability, and single-link baselines derived per second.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use clap::Subcommand;
use roam_trace::baseline::derive;

use super::emu::LinkArgs;
use crate::parse_dur;

/// `roam trace ...`.
#[derive(Subcommand)]
pub enum TraceCmd {
    /// Print a scenario's statistics as the paper's trace table.
    Stats {
        #[command(flatten)]
        links: LinkArgs,
        /// Window to summarise.
        #[arg(long, default_value = "30m", value_parser = parse_dur)]
        duration: Duration,
    },
    /// Draw capacity and availability over time to SVG.
    Plot {
        #[command(flatten)]
        links: LinkArgs,
        /// Window to draw.
        #[arg(long, default_value = "10m", value_parser = parse_dur)]
        duration: Duration,
        /// Output SVG.
        #[arg(short, long, default_value = "trace.svg")]
        output: PathBuf,
    },
    /// Derive a single-link baseline per second and write it as an interval CSV.
    Baseline {
        /// best-latency, best-bandwidth or aggregation, or a baseline file FILE.toml.
        #[arg(long)]
        kind: String,
        #[command(flatten)]
        links: LinkArgs,
        /// Length of the derived trace (it repeats after).
        #[arg(long, default_value = "30m", value_parser = parse_dur)]
        duration: Duration,
        /// Output CSV (`-` for stdout).
        #[arg(short, long, default_value = "-")]
        output: String,
    },
}

/// Run `roam trace ...`.
pub fn run(cmd: TraceCmd) -> Result<()> {
    match cmd {
        TraceCmd::Stats { links, duration } => {
            let s = links.scenario()?;
            print!(
                "{}",
                roam_trace::stats::scenario_stats(&s, duration).to_markdown()
            );
        }
        TraceCmd::Plot {
            links,
            duration,
            output,
        } => {
            let s = links.scenario()?;
            let fig = roam_trace::plot::scenario_figure(&s, duration);
            std::fs::write(&output, fig.to_svg())
                .with_context(|| format!("writing {}", output.display()))?;
            eprintln!("wrote {}", output.display());
        }
        TraceCmd::Baseline {
            kind,
            links,
            duration,
            output,
        } => {
            let b = roam_emu::baseline_file::baseline(&kind)
                .map_err(|e| anyhow!("--kind {kind}: {e}"))?;
            let s = links.scenario()?;
            let t = derive(&s, &b.spec, duration)?;
            if output == "-" {
                print!("{}", t.to_csv());
            } else {
                std::fs::write(&output, t.to_csv()).with_context(|| format!("writing {output}"))?;
                eprintln!("wrote {output}");
            }
        }
    }
    Ok(())
}
