//! `roam bench dedup`: asymmetric caching's speed and what it finds (JSON on stdout).
//!
//! - `chunk_gb_s`, `rabin_gb_s`: FastCDC's and the thesis's Rabin chunking over the corpus,
//!   one core (target: at least 1 GB/s);
//! - `src_mb_s`: dd-src over the present stream, chunking, naming and both caches, one core
//!   (target: at least 500 MB/s); `dst_mb_s`: dd-dst rebuilding it and learning from it;
//! - `found_fraction`: the bytes dd-src replaced by names over the bytes an oracle with an
//!   unbounded cache would (target: at least 0.9), split by cache; `bytes_per_feedback_byte`:
//!   bytes the feedback cache replaced per byte of advertisement (target: at least 6.7).
//!
//! **The corpus** is real text with synthetic churn: the files under `/usr/share/doc` that
//! are not compressed (`--corpus DIR` for another), up to `--megabytes`. The phone saw the
//! *past*, every file in name order, through one source (its other network); the *present*,
//! a new version of it, comes through a second source that never saw it: the same order,
//! every fifth file edited (a line inserted in its middle), one in ten new (a file's bytes
//! reversed), one in twenty gone. It is not the lab's corpus: `cellular_bytes_vs_best_baseline`
//! comes from a `roam lab dedup` run named with `--lab DIR` (null without one): `ac+zstd`'s
//! cellular bytes against the best baseline's on the run's first corpus (a number, as issue
//! 46 gives it), with which corpus and system, and `ac`'s and `ac+zstd`'s on every corpus, in
//! `cellular_lab` ([`lab_figures`]).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use roam_dedup::analyze::{analyze, Setup, Stream};
use roam_dedup::chunk::Chunking;
use serde_json::json;

/// Arguments of `roam bench dedup`.
#[derive(Args, Debug)]
pub struct BenchDedupArgs {
    /// A directory of files to build the corpus from (default: /usr/share/doc).
    #[arg(long, default_value = "/usr/share/doc")]
    corpus: PathBuf,
    /// The most megabytes of files to read.
    #[arg(long, default_value_t = 40)]
    megabytes: u64,
    /// Bytes dd-src reads at a time (the feedback comes back between reads).
    #[arg(long, default_value_t = 16384)]
    read: usize,
    /// A `roam lab dedup` results directory: `cellular_bytes_vs_best_baseline` is asymmetric
    /// caching's cellular bytes there against the best baseline's (ratio of means, its
    /// first scenario); without it the field is null.
    #[arg(long, value_name = "DIR")]
    lab: Option<PathBuf>,
}

/// Asymmetric caching's advantage in cellular bytes in the lab run at `dir` ([`lab_figures`]).
fn lab_advantage(dir: &std::path::Path) -> Result<serde_json::Value> {
    let path = dir.join("trials.csv");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("--lab: reading {}", path.display()))?;
    let rows = roam_lab::report::parse_csv(&text, &path.display().to_string())?;
    let mut v = lab_figures(&rows).ok_or_else(|| {
        anyhow::anyhow!(
            "--lab {}: no finished trials of ac or ac+zstd and a baseline on any corpus",
            dir.display()
        )
    })?;
    v["run"] = json!(dir.display().to_string());
    Ok(v)
}

/// From a `roam lab dedup` run's rows: per corpus (on its first scenario), `ac`'s and
/// `ac+zstd`'s cellular bytes against the best baseline's (the ratio of means, its interval,
/// which baseline); and the one figure, `ratio`: on the first corpus with a figure,
/// `ac+zstd`'s (asymmetric caching as deployed, with compression), else `ac`'s. `None`
/// without any such pair.
fn lab_figures(rows: &[roam_lab::report::Row]) -> Option<serde_json::Value> {
    use roam_lab::studies::dedup::{baseline_names, cellular_advantage};
    let mut systems: Vec<&str> = rows.iter().map(|r| r.system.as_str()).collect();
    systems.sort();
    systems.dedup();
    let base = baseline_names(systems);
    let mut apps: Vec<&str> = Vec::new();
    for r in rows {
        if !apps.contains(&r.app.as_str()) {
            apps.push(&r.app);
        }
    }
    let mut corpora = serde_json::Map::new();
    let mut headline: Option<(f64, &str, &str)> = None;
    for app in apps {
        let sc = rows.iter().find(|r| r.app == app)?.scenario.as_str();
        let mut per = serde_json::Map::new();
        for ours in ["ac+zstd", "ac"] {
            let Some((best, r)) = cellular_advantage(rows, (app, sc), ours, &base) else {
                continue;
            };
            per.insert(
                ours.into(),
                json!({"ratio": r.ratio, "interval": r.interval, "baseline": best}),
            );
            if headline.is_none() {
                headline = Some((r.ratio, app, ours));
            }
        }
        if !per.is_empty() {
            per.insert("scenario".into(), json!(sc));
            corpora.insert(app.into(), serde_json::Value::Object(per));
        }
    }
    let (ratio, app, ours) = headline?;
    Some(json!({"ratio": ratio, "corpus": app, "system": ours, "by_corpus": corpora}))
}

/// Every regular file under `dir` (not compressed), in name order, up to `limit` bytes.
fn files(dir: &std::path::Path, limit: u64) -> Result<Vec<(String, Vec<u8>)>> {
    let mut paths = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() {
                stack.push(p);
            } else if t.is_file()
                && !matches!(p.extension().and_then(|x| x.to_str()), Some("gz" | "xz"))
            {
                paths.push(p);
            }
        }
    }
    paths.sort();
    let mut out = Vec::new();
    let mut total = 0u64;
    for p in paths {
        if total >= limit {
            break;
        }
        let Ok(bytes) = std::fs::read(&p) else {
            continue;
        };
        if bytes.is_empty() || bytes.len() > 4 << 20 {
            continue;
        }
        total += bytes.len() as u64;
        out.push((p.display().to_string(), bytes));
    }
    if out.is_empty() {
        bail!("--corpus {}: no readable files", dir.display());
    }
    Ok(out)
}

/// The present, a new version of the past: the files in the same order, every fifth edited
/// (a line inserted in its middle), one in ten replaced by a new file (its bytes reversed),
/// one in twenty gone.
fn present(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (k, (_, f)) in files.iter().enumerate() {
        if k % 20 == 19 {
            continue;
        } else if k % 10 == 9 {
            out.extend(f.iter().rev());
        } else if k % 5 == 0 {
            let mid = f.len() / 2;
            out.extend_from_slice(&f[..mid]);
            out.extend_from_slice(format!("\nedited in version {k}\n").as_bytes());
            out.extend_from_slice(&f[mid..]);
        } else {
            out.extend_from_slice(f);
        }
    }
    out
}

/// GB/s of `chunking` over `data`.
fn chunk_speed(chunking: Chunking, data: &[u8]) -> f64 {
    let mut cuts = Vec::new();
    let start = Instant::now();
    let mut n = 0;
    for part in data.chunks(1 << 20) {
        chunking.cuts(part, &mut cuts);
        n += cuts.len();
    }
    std::hint::black_box(n);
    data.len() as f64 / start.elapsed().as_secs_f64() / 1e9
}

/// Run `roam bench dedup`.
pub fn dedup(a: &BenchDedupArgs) -> Result<()> {
    // The lab's figure first: a wrong directory is said before a minute of measuring.
    let lab = match &a.lab {
        Some(d) => lab_advantage(d)?,
        None => serde_json::Value::Null,
    };
    let files = files(&a.corpus, a.megabytes << 20)
        .with_context(|| format!("reading the corpus under {}", a.corpus.display()))?;
    let past: Vec<u8> = files.iter().flat_map(|f| f.1.iter().copied()).collect();
    let present = present(&files);
    eprintln!(
        "bench dedup: {} files, past {} MB, present {} MB",
        files.len(),
        past.len() >> 20,
        present.len() >> 20
    );
    let chunk_gb_s = chunk_speed(Chunking::default(), &present);
    let rabin_gb_s = chunk_speed(Chunking::RABIN, &present);
    let setup = Setup {
        read: a.read,
        ..Setup::default()
    };
    eprintln!("bench dedup: the past through one source, the present through another");
    let past_mb = past.len() >> 20;
    let r = analyze(
        &[Stream {
            port: 0,
            bytes: past,
        }],
        &[Stream {
            port: 0,
            bytes: present,
        }],
        &setup,
    )?;
    let mb = r.total.bytes as f64 / 1e6;
    let ratio = |x: u64, y: u64| {
        if y == 0 {
            None
        } else {
            Some(x as f64 / y as f64)
        }
    };
    let t = r.total;
    let out = json!({
        "chunk_gb_s": chunk_gb_s,
        "rabin_gb_s": rabin_gb_s,
        "src_mb_s": mb / r.source_time.as_secs_f64(),
        "dst_mb_s": mb / r.destination_time.as_secs_f64(),
        "found_fraction": r.found(),
        "found_by_regular": ratio(t.regular, t.oracle),
        "found_by_feedback": ratio(t.feedback, t.oracle),
        "bytes_per_feedback_byte": r.per_feedback_byte(),
        "oracle_redundancy": ratio(t.oracle, t.bytes),
        "wire_over_present": ratio(r.wire_bytes, t.bytes),
        "feedback_bytes": r.feedback_bytes,
        "resent_records": r.resent,
        "cellular_bytes_vs_best_baseline": lab.get("ratio").cloned().unwrap_or(serde_json::Value::Null),
        "cellular_lab": lab,
        "corpus": format!(
            "{} files under {} ({} MB): past in name order through another source; present the next version: 1 in 5 edited, 1 in 10 new, 1 in 20 gone (synthetic churn on real text)",
            files.len(),
            a.corpus.display(),
            past_mb
        ),
        "targets": {
            "chunk_gb_s": ">= 1", "src_mb_s": ">= 500", "found_fraction": ">= 0.9",
            "bytes_per_feedback_byte": ">= 6.7",
            "cellular_bytes_vs_best_baseline": ">= 1.3 (from a roam lab dedup run: --lab DIR)"
        }
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use roam_lab::report::Row;

    fn row(app: &str, system: &str, seed: u64, kb: f64) -> Row {
        Row {
            app: app.into(),
            scenario: "walking-campus".into(),
            system: system.into(),
            trial: seed as u32,
            seed,
            metric: "cell_kB".into(),
            value: kb,
            unit: "kB".into(),
        }
    }

    #[test]
    fn the_lab_figure_is_ac_with_zstd_on_the_first_corpus_with_every_corpus_beside_it() {
        let mut rows = vec![];
        for seed in 1..=3 {
            rows.extend([
                row("docs", "none", seed, 1000.0),
                row("docs", "zstd", seed, 400.0),
                row("docs", "ac", seed, 500.0),
                row("docs", "ac+zstd", seed, 320.0),
                row("wiki", "zstd", seed, 300.0),
                row("wiki", "ac", seed, 600.0),
            ]);
        }
        let v = lab_figures(&rows).unwrap();
        assert_eq!(v["corpus"], "docs");
        assert_eq!(v["system"], "ac+zstd");
        assert!((v["ratio"].as_f64().unwrap() - 1.25).abs() < 1e-9, "{v}");
        assert_eq!(v["by_corpus"]["docs"]["ac+zstd"]["baseline"], "zstd");
        assert!((v["by_corpus"]["docs"]["ac"]["ratio"].as_f64().unwrap() - 0.8).abs() < 1e-9);
        assert!((v["by_corpus"]["wiki"]["ac"]["ratio"].as_f64().unwrap() - 0.5).abs() < 1e-9);
        assert!(v["by_corpus"]["wiki"].get("ac+zstd").is_none());
        // Nothing of ours, or no baseline: no figure.
        let only_base: Vec<Row> = rows
            .iter()
            .filter(|r| r.system == "zstd")
            .cloned()
            .collect();
        assert!(lab_figures(&only_base).is_none());
    }
}
