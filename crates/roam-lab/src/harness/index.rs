//! The index of kept runs (`roam results index`): `docs/results/README.md` written from the
//! runs themselves, so that it cannot go stale. For each directory of the results directory:
//! what it was for (its `about.md`, by hand, or the first paragraph of its README.md), which
//! code measured it, its seeds and trials, and every invocation with its command line and date
//! (from each `run.json` below it and the `trials.csv` beside it); then, for each row of
//! `headline.md`, the kept run it comes from (`headline-sources.txt`, by hand, checked here) and
//! the code that measured that run. A test keeps the committed README equal to what this writes.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::harness::results::{read_stamp, read_trials, FAILURES_LOG};

/// The first line of the written file.
const TITLE: &str = "# Measured runs, kept";

/// What one kept directory holds, gathered from its run stamps and trials.
#[derive(Default)]
struct Kept {
    /// Codes that measured its trials (`run.json`'s `version`).
    versions: BTreeSet<String>,
    seeds: BTreeSet<u64>,
    /// Trials (distinct app, scenario, system, trial in every `trials.csv`).
    trials: usize,
    /// Of those, failed ones.
    failed: usize,
    /// Failed attempts `--resume` ran again (`failures.log` lines).
    superseded: usize,
    quick: bool,
    /// Invocations recorded: (the part's path within the directory, command, date, version).
    invocations: Vec<(String, String, String, String)>,
    /// How many `run.json` files it has.
    stamps: usize,
}

/// Every `run.json` below `dir` (the directory itself included), in path order.
fn stamps_below(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    if dir.join("run.json").is_file() {
        found.push(dir.to_path_buf());
    }
    for p in entries.into_iter().filter(|p| p.is_dir()) {
        found.extend(stamps_below(&p)?);
    }
    Ok(found)
}

/// Gather `dir`'s runs.
fn gather(dir: &Path) -> Result<Kept> {
    let mut k = Kept::default();
    for part in stamps_below(dir)? {
        let stamp = read_stamp(&part, "roam results index")?;
        k.stamps += 1;
        k.versions.insert(stamp.version.clone());
        k.quick |= stamp.quick;
        let rel = part
            .strip_prefix(dir)
            .unwrap_or(&part)
            .display()
            .to_string();
        for i in &stamp.invocations {
            k.invocations.push((
                rel.clone(),
                i.command.clone(),
                i.started.clone(),
                i.version.clone(),
            ));
        }
        if part.join("trials.csv").is_file() {
            let rows = read_trials(&part, "roam results index")?;
            let mut trials = BTreeSet::new();
            let mut failed = BTreeSet::new();
            for r in &rows {
                k.seeds.insert(r.seed);
                let key = (r.app.clone(), r.scenario.clone(), r.system.clone(), r.trial);
                if r.metric == "error" {
                    failed.insert(key.clone());
                }
                trials.insert(key);
            }
            k.trials += trials.len();
            k.failed += failed.len();
        }
        if let Ok(t) = std::fs::read_to_string(part.join(FAILURES_LOG)) {
            k.superseded += t.lines().count();
        }
    }
    Ok(k)
}

/// What the directory was for: its `about.md`, else the first paragraph of its README.md
/// after the title; one line, for a table cell.
fn about(dir: &Path) -> String {
    let text = std::fs::read_to_string(dir.join("about.md"))
        .or_else(|_| std::fs::read_to_string(dir.join("README.md")))
        .unwrap_or_default();
    let paragraphs: Vec<String> = text
        .split("\n\n")
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty() && !p.starts_with('#'))
        .collect();
    let joined = if dir.join("about.md").is_file() {
        paragraphs
            .iter()
            .map(|p| match p.ends_with(['.', ')', '!', '?']) {
                true => p.clone(),
                false => format!("{p}."),
            })
            .collect::<Vec<_>>()
            .join(" ")
    } else {
        paragraphs.into_iter().next().unwrap_or_default()
    };
    if joined.is_empty() {
        "(no about.md)".into()
    } else {
        // Links are relative to the run's directory: make them relative to this file's.
        let name = dir
            .file_name()
            .map_or(String::new(), |n| n.to_string_lossy().into_owned());
        cell(&relink(&joined, &name))
    }
}

/// Markdown links in `text` (relative to directory `name`) made relative to its parent.
fn relink(text: &str, name: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        out.push_str(&rest[..at + 2]);
        rest = &rest[at + 2..];
        let target_end = rest.find(')').unwrap_or(rest.len());
        let target = &rest[..target_end];
        if target.starts_with("http") || target.starts_with('#') || target.starts_with('/') {
            out.push_str(target);
        } else if let Some(up) = target.strip_prefix("../") {
            out.push_str(up);
        } else {
            let _ = write!(out, "{name}/{target}");
        }
        rest = &rest[target_end..];
    }
    out.push_str(rest);
    out
}

/// `text` fit for one table cell: on one line, with no bare `|`.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace(" | ", " / ")
}

/// "101-105", "1, 3" or "-".
fn seeds_text(seeds: &BTreeSet<u64>) -> String {
    match (seeds.first(), seeds.last()) {
        (None, _) | (_, None) => "-".into(),
        (Some(lo), Some(hi)) if lo == hi => lo.to_string(),
        (Some(lo), Some(hi)) if (hi - lo + 1) as usize == seeds.len() => format!("{lo}-{hi}"),
        _ => seeds
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    }
}

fn measured_by(k: &Kept) -> String {
    if k.stamps == 0 {
        return "not recorded (no run.json)".into();
    }
    let v: Vec<String> = k.versions.iter().map(|v| format!("`{v}`")).collect();
    v.join(", ")
}

fn trials_text(k: &Kept) -> String {
    if k.stamps == 0 {
        return "-".into();
    }
    let mut t = k.trials.to_string();
    if k.quick {
        t.push_str(" (quick)");
    }
    if k.failed > 0 {
        let _ = write!(t, "; {} failed", k.failed);
    }
    if k.superseded > 0 {
        let _ = write!(t, "; {} earlier failed attempts kept", k.superseded);
    }
    t
}

fn invocations_text(k: &Kept) -> String {
    if k.invocations.is_empty() {
        return if k.stamps == 0 {
            "-".into()
        } else {
            "not recorded in run.json (see about.md)".into()
        };
    }
    k.invocations
        .iter()
        .map(|(part, command, date, version)| {
            let at = if part.is_empty() {
                String::new()
            } else {
                format!("{part}: ")
            };
            format!("{at}`{}` ({date}, `{version}`)", cell(command))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The kept directories of `root`, in name order.
fn directories(root: &Path) -> Result<Vec<PathBuf>> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .with_context(|| format!("reading {}", root.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    Ok(dirs)
}

/// The headline rows' sources (`headline-sources.txt`), each checked: its directory is among
/// the `kept` runs (gathered once, by name) and `headline.md` has a row beginning so.
fn headline_sources(root: &Path, kept: &BTreeMap<String, Kept>) -> Result<String> {
    let sources = std::fs::read_to_string(root.join("headline-sources.txt"))
        .with_context(|| format!("reading {}", root.join("headline-sources.txt").display()))?;
    let headline = std::fs::read_to_string(root.join("headline.md"))
        .with_context(|| format!("reading {}", root.join("headline.md").display()))?;
    let mut s = String::from(
        "| headline row ([headline.md](headline.md)) | kept run | measured by |\n|---|---|---|\n",
    );
    for (i, line) in sources.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let at = || format!("headline-sources.txt:{}", i + 1);
        let Some((dir, row)) = line.split_once('\t') else {
            bail!(
                "{}: expected DIRECTORY, a tab, and how the row begins",
                at()
            );
        };
        let Some(k) = kept.get(dir) else {
            bail!("{}: no kept run `{dir}`", at());
        };
        if !headline.lines().any(|l| l.starts_with(&format!("| {row}"))) {
            bail!("{}: headline.md has no row beginning `{row}`", at());
        }
        let _ = writeln!(s, "| {row} | [`{dir}/`]({dir}/) | {} |", measured_by(k));
    }
    Ok(s)
}

/// The index of `root` (docs/results): the text of its README.md.
pub fn index(root: &Path) -> Result<String> {
    let head = std::fs::read_to_string(root.join("index-head.md"))
        .with_context(|| format!("reading {}", root.join("index-head.md").display()))?;
    let mut s = format!(
        "{TITLE}\n\n<!-- Written by `roam results index`: edit a run's about.md, index-head.md or \
         headline-sources.txt, not this file. -->\n\n{}\n\n## The runs\n\n| directory | what | \
         measured by | seeds | trials | invocations |\n|---|---|---|---|---|---|\n",
        head.trim()
    );
    let mut kept = BTreeMap::new();
    for dir in directories(root)? {
        let k = gather(&dir)?;
        let name = dir
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let _ = writeln!(
            s,
            "| [`{name}/`]({name}/) | {} | {} | {} | {} | {} |",
            about(&dir),
            measured_by(&k),
            seeds_text(&k.seeds),
            trials_text(&k),
            invocations_text(&k)
        );
        kept.insert(name, k);
    }
    let _ = write!(
        s,
        "\n## Where the headline rows come from\n\n{}",
        headline_sources(root, &kept)?
    );
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed docs/results/README.md is what `roam results index` writes from the kept
    /// runs: it cannot go stale.
    #[test]
    fn the_kept_index_is_current() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/results");
        let written = index(&root).unwrap();
        let kept = std::fs::read_to_string(root.join("README.md")).unwrap();
        assert!(
            written == kept,
            "docs/results/README.md is stale: run `roam results index docs/results`"
        );
    }

    #[test]
    fn links_follow_the_text_out_of_its_directory() {
        assert_eq!(
            relink("see [a](../notebook.md) and [b](report.md) [c](#x)", "run"),
            "see [a](notebook.md) and [b](run/report.md) [c](#x)"
        );
        assert_eq!(seeds_text(&[101, 102, 103].into()), "101-103");
        assert_eq!(seeds_text(&[1, 3].into()), "1, 3");
    }
}
