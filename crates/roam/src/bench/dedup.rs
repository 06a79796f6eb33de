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
//! reversed), one in twenty gone. It is not the lab's corpus (`roam lab dedup`, not built), so
//! `cellular_bytes_vs_best_baseline` is null.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use roam_dedup::chunk::Chunking;
use roam_dedup::destination::DestinationConfig;
use roam_dedup::name::NameSet;
use roam_dedup::source::SourceConfig;
use roam_dedup::{Destination, Name, Source};
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

/// Bytes of `stream`'s chunks whose names appeared before (in `seen` or earlier in it).
fn oracle(stream: &[u8], seen: &mut NameSet) -> u64 {
    let mut cuts = Vec::new();
    let mut found = 0;
    for part in stream.chunks(1 << 20) {
        Chunking::default().cuts(part, &mut cuts);
        let mut prev = 0;
        for &c in &cuts {
            let chunk = &part[prev..c];
            prev = c;
            if chunk.len() > 2 * Name::LEN && !seen.insert(Name::of(chunk)) {
                found += chunk.len() as u64;
            }
        }
    }
    found
}

/// `stream` through `src` to `dst` as one flow, `read` bytes at a time, the phone's messages
/// back to the source between reads; the time spent in each end.
fn carry(
    stream: &[u8],
    src: &mut Source,
    dst: &mut Destination,
    via: u32,
    read: usize,
) -> Result<(Duration, Duration)> {
    let (mut t_src, mut t_dst) = (Duration::ZERO, Duration::ZERO);
    let mut wire = Vec::new();
    let mut out = Vec::new();
    let mut up = Vec::new();
    src.open(1);
    dst.open_via(1, via);
    let mut delivered = 0usize;
    let mut pending = Vec::new();
    let chunks: Vec<&[u8]> = stream.chunks(read.max(1)).collect();
    for (i, part) in chunks.iter().enumerate() {
        let t = Instant::now();
        src.push(1, part, &mut wire)?;
        if i + 1 == chunks.len() {
            src.flush(1, &mut wire)?;
        }
        t_src += t.elapsed();
        pending.append(&mut wire);
        let t = Instant::now();
        let used = dst.receive(1, &pending, &mut out)?;
        pending.drain(..used);
        dst.upstream(1, &mut up)?;
        t_dst += t.elapsed();
        let t = Instant::now();
        let n = src.handle(1, &up, Instant::now(), &mut wire)?;
        up.drain(..n);
        t_src += t.elapsed();
        if i % 64 == 0 {
            eprint!(
                "\rbench dedup: {} of {} MB",
                delivered >> 20,
                stream.len() >> 20
            );
        }
        delivered = out.len();
    }
    // Resends, if any.
    for _ in 0..10 {
        pending.append(&mut wire);
        let used = dst.receive(1, &pending, &mut out)?;
        pending.drain(..used);
        dst.upstream(1, &mut up)?;
        let n = src.handle(1, &up, Instant::now(), &mut wire)?;
        up.drain(..n);
    }
    eprintln!();
    if out != stream {
        bail!(
            "the phone delivered {} bytes that differ from the {} sent",
            out.len(),
            stream.len()
        );
    }
    src.close(1);
    dst.close(1);
    Ok((t_src, t_dst))
}

/// Run `roam bench dedup`.
pub fn dedup(a: &BenchDedupArgs) -> Result<()> {
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
    let mut seen = NameSet::default();
    oracle(&past, &mut seen);
    let oracle_bytes = oracle(&present, &mut seen);

    let mut dst = Destination::new(DestinationConfig::default());
    let mut other = Source::new(SourceConfig::default())?;
    carry(&past, &mut other, &mut dst, 0, a.read)?;
    let before = dst.stats();
    // The benchmark runs faster than any link: the feedback rate's bound (against hostile
    // phones) would bind on time, not on the phone; lift it here.
    let mut src = Source::new(SourceConfig {
        feedback_names_per_s: u32::MAX,
        ..SourceConfig::default()
    })?;
    let (t_src, t_dst) = carry(&present, &mut src, &mut dst, 1, a.read)?;
    let s = src.stats();
    let d = dst.stats();
    let feedback_bytes = d.feedback_bytes - before.feedback_bytes;
    let mb = present.len() as f64 / 1e6;
    let ratio = |x: u64, y: u64| {
        if y == 0 {
            None
        } else {
            Some(x as f64 / y as f64)
        }
    };
    let out = json!({
        "chunk_gb_s": chunk_gb_s,
        "rabin_gb_s": rabin_gb_s,
        "src_mb_s": mb / t_src.as_secs_f64(),
        "dst_mb_s": mb / t_dst.as_secs_f64(),
        "found_fraction": ratio(s.regular_hit_bytes + s.feedback_hit_bytes, oracle_bytes),
        "found_by_regular": ratio(s.regular_hit_bytes, oracle_bytes),
        "found_by_feedback": ratio(s.feedback_hit_bytes, oracle_bytes),
        "bytes_per_feedback_byte": ratio(s.feedback_hit_bytes, feedback_bytes),
        "oracle_redundancy": ratio(oracle_bytes, present.len() as u64),
        "wire_over_present": ratio(s.bytes_out, present.len() as u64),
        "feedback_bytes": feedback_bytes,
        "resent_records": s.resent,
        "feedback_dropped": s.feedback_dropped,
        "unknown_names": d.unknown_names - before.unknown_names,
        "checksum_failures": d.checksum_failures - before.checksum_failures,
        "cellular_bytes_vs_best_baseline": null,
        "corpus": format!(
            "{} files under {} ({} MB): past in name order through another source; present the next version: 1 in 5 edited, 1 in 10 new, 1 in 20 gone (synthetic churn on real text)",
            files.len(),
            a.corpus.display(),
            past.len() >> 20
        ),
        "targets": {
            "chunk_gb_s": ">= 1", "src_mb_s": ">= 500", "found_fraction": ">= 0.9",
            "bytes_per_feedback_byte": ">= 6.7",
            "cellular_bytes_vs_best_baseline": ">= 1.3 (needs roam lab dedup: not built)"
        }
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
