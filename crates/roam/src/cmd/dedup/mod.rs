//! `roam dedup analyze`: the Sanadhya thesis's trace analysis (§4.5.2) on anyone's captures:
//! how much of the traffic servers sent is redundant, and how much asymmetric caching finds of
//! it, by the regular cache and by the phone's feedback, per application port
//! (`roam_dedup::analyze`).

mod pcap;

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use roam_dedup::analyze::{analyze, split, Analysis, Setup, Stream};
use serde_json::json;

/// `roam dedup ...`.
#[derive(Subcommand)]
pub enum DedupCmd {
    /// Redundancy in captures and what asymmetric caching finds of it: TCP streams
    /// reassembled from pcap or pcapng files, the phone's cache filled from the past, the
    /// present through a source that never saw it.
    Analyze(AnalyzeArgs),
}

/// Arguments of `roam dedup analyze`.
#[derive(Args, Debug)]
pub struct AnalyzeArgs {
    /// Captures (pcap or pcapng: tcpdump's, Wireshark's, the emulator's `--pcap` output).
    /// Without --past, their streams in order are split as the thesis split a user's trace:
    /// the first half of the bytes is the past, the rest the present.
    #[arg(required = true, value_name = "PCAP")]
    pcaps: Vec<PathBuf>,
    /// Captures of what the phone saw before (then every stream of PCAP is the present).
    #[arg(long, value_name = "PCAP")]
    past: Vec<PathBuf>,
    /// dd-src's caches, kB of content (regular and feedback, half each; the thesis: 1 MB).
    #[arg(long, value_name = "KB", default_value_t = 1024)]
    src_cache_kb: u64,
    /// dd-dst's cache, MB (the thesis: 150-250 MB).
    #[arg(long, value_name = "MB", default_value_t = 256)]
    dst_cache_mb: u64,
    /// The downlink's rate over the uplink's, which sets how far ahead feedback starts
    /// (the thesis's δ); default: none.
    #[arg(long, value_name = "RATIO")]
    ratio: Option<f64>,
    /// Leave out present streams shorter than this, bytes (the thesis: 5 KB).
    #[arg(long, value_name = "BYTES", default_value_t = 5000)]
    min_stream: usize,
    /// Run once per value of one parameter: `src-kb=256,512,1024,2048`, `dst-mb=16,64,256`
    /// or `ratio=1,2,3,4,5` (the thesis's sensitivity studies).
    #[arg(long, value_name = "PARAM=V1,V2,...")]
    sweep: Option<String>,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
}

/// Run `roam dedup ...`.
pub fn run(cmd: DedupCmd) -> Result<()> {
    match cmd {
        DedupCmd::Analyze(a) => analyze_cmd(&a),
    }
}

fn read(paths: &[PathBuf]) -> Result<Vec<Stream>> {
    let mut caps = pcap::Captures::default();
    for p in paths {
        caps.read(p)?;
    }
    eprintln!(
        "roam dedup analyze: {} TCP packets read, {} other packets skipped",
        caps.packets, caps.skipped
    );
    Ok(caps.streams())
}

/// The sweep's parameter and values.
fn sweep(s: &str) -> Result<(String, Vec<f64>)> {
    let (k, v) = s
        .split_once('=')
        .with_context(|| format!("--sweep {s}: expected PARAM=V1,V2,..."))?;
    if !matches!(k, "src-kb" | "dst-mb" | "ratio") {
        bail!("--sweep {s}: unknown parameter `{k}` (expected src-kb, dst-mb or ratio)");
    }
    let vals = v
        .split(',')
        .map(|x| {
            x.trim()
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x > 0.0)
                .with_context(|| format!("--sweep {s}: `{x}` is not a positive number"))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((k.to_string(), vals))
}

fn analyze_cmd(a: &AnalyzeArgs) -> Result<()> {
    // Arguments first: a bad --sweep is said before the captures are read.
    let points: Vec<(String, f64)> = match &a.sweep {
        Some(s) => {
            let (k, vals) = sweep(s)?;
            vals.into_iter().map(|v| (k.clone(), v)).collect()
        }
        None => vec![(String::new(), 0.0)],
    };
    let (past, present) = if a.past.is_empty() {
        split(read(&a.pcaps)?, a.min_stream)
    } else {
        let present: Vec<Stream> = read(&a.pcaps)?
            .into_iter()
            .filter(|s| s.bytes.len() >= a.min_stream)
            .collect();
        (read(&a.past)?, present)
    };
    if present.is_empty() {
        bail!(
            "no present stream of at least {} bytes in the captures (TCP with payload from a \
             server)",
            a.min_stream
        );
    }
    let mut results = Vec::new();
    for (k, v) in &points {
        let (mut src_kb, mut dst_mb, mut ratio) =
            (a.src_cache_kb as f64, a.dst_cache_mb as f64, a.ratio);
        match k.as_str() {
            "src-kb" => src_kb = *v,
            "dst-mb" => dst_mb = *v,
            "ratio" => ratio = Some(*v),
            _ => {}
        }
        let mut setup = Setup::default();
        let half = (src_kb * 1024.0 / 2.0) as u64;
        setup.source.regular_bytes = half;
        setup.source.feedback_bytes = half;
        setup.destination.cache_bytes = (dst_mb * 1048576.0) as u64;
        setup.down_over_up = ratio;
        let r = analyze(&past, &present, &setup)?;
        results.push((src_kb, dst_mb, ratio, r));
    }
    if a.json {
        let out: Vec<_> = results
            .iter()
            .map(|(s, d, ratio, r)| {
                json!({
                    "src_cache_kb": s, "dst_cache_mb": d, "down_over_up": ratio,
                    "past_streams": past.len(), "present_streams": present.len(),
                    "present_bytes": r.total.bytes, "redundant_bytes": r.total.oracle,
                    "found_regular_bytes": r.total.regular, "found_feedback_bytes": r.total.feedback,
                    "found_fraction": r.found(), "feedback_bytes": r.feedback_bytes,
                    "bytes_per_feedback_byte": r.per_feedback_byte(),
                    "by_port": r.by_port.iter().map(|(p, x)| json!({
                        "port": p, "bytes": x.bytes, "redundant": x.oracle,
                        "regular": x.regular, "feedback": x.feedback,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!(
        "past: {} streams, {} bytes; present: {} streams of at least {} bytes, {} bytes",
        past.len(),
        past.iter().map(|s| s.bytes.len()).sum::<usize>(),
        present.len(),
        a.min_stream,
        results[0].3.total.bytes
    );
    println!(
        "\n| dd-src kB | dd-dst MB | down/up | redundant | found | by regular | by feedback | saved per feedback byte |\n|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for (s, d, ratio, r) in &results {
        println!(
            "| {s:.0} | {d:.0} | {} | {} | {} | {} | {} | {} |",
            ratio.map_or("-".into(), |x| format!("{x}")),
            pct(r.total.oracle, r.total.bytes),
            r.found()
                .map_or("-".into(), |x| format!("{:.1}%", 100.0 * x)),
            pct(r.total.regular, r.total.oracle),
            pct(r.total.feedback, r.total.oracle),
            r.per_feedback_byte()
                .map_or("-".into(), |x| format!("{x:.2}")),
        );
    }
    by_port(&results[0].3);
    Ok(())
}

fn pct(a: u64, b: u64) -> String {
    if b == 0 {
        "-".into()
    } else {
        format!("{:.1}%", 100.0 * a as f64 / b as f64)
    }
}

/// The first configuration's result per server port, largest first.
fn by_port(r: &Analysis) {
    let mut ports: Vec<_> = r.by_port.iter().collect();
    ports.sort_by_key(|(_, x)| std::cmp::Reverse(x.bytes));
    println!("\n| server port | present bytes | redundant | found |\n|---:|---:|---:|---:|");
    for (p, x) in ports.into_iter().take(10) {
        println!(
            "| {p} | {} | {} | {} |",
            x.bytes,
            pct(x.oracle, x.bytes),
            pct(x.regular + x.feedback, x.oracle)
        );
    }
}
