//! `roam transfer get`: download URLs or a list of them with given concurrency, parallelism
//! and block size (FastHLA's engine, `roam-transfer`), with a progress line and an optional
//! log of one JSON record per file.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use roam_transfer::{Engine, FileSpec, Params, Protocol};

/// Arguments of `roam transfer get`.
#[derive(Args, Debug)]
pub struct GetArgs {
    /// URLs (http://) to download.
    urls: Vec<String>,
    /// A file of URLs, one a line (blank lines and `#` comments skipped).
    #[arg(long)]
    list: Option<PathBuf>,
    /// Directory the files are saved in (created if missing).
    #[arg(long, default_value = ".")]
    out: PathBuf,
    /// Concurrency: files in flight at once.
    #[arg(long, default_value_t = Params::default().cc)]
    cc: u32,
    /// Parallelism: range streams per file.
    #[arg(long, default_value_t = Params::default().p)]
    p: u32,
    /// Block size in bytes: how much is read from a connection at a time (e.g. 65536).
    #[arg(long, default_value_t = Params::default().bs)]
    bs: usize,
    /// HTTP/2 (cleartext, prior knowledge) instead of HTTP/1.1.
    #[arg(long)]
    http2: bool,
    /// Append one JSON record per file to this file.
    #[arg(long)]
    log: Option<PathBuf>,
}

/// Run it: 0 when every file arrived, an error naming the failed ones otherwise.
pub fn get(a: &GetArgs) -> Result<()> {
    let mut urls = a.urls.clone();
    if let Some(l) = &a.list {
        let text =
            std::fs::read_to_string(l).with_context(|| format!("reading {}", l.display()))?;
        urls.extend(
            text.lines()
                .map(str::trim)
                .filter(|x| !x.is_empty() && !x.starts_with('#'))
                .map(String::from),
        );
    }
    if urls.is_empty() {
        bail!("nothing to download: give URLs or --list FILE");
    }
    let specs = urls
        .iter()
        .map(|u| FileSpec::from_url(u))
        .collect::<Result<Vec<_>, _>>()?;
    let params = Params {
        cc: a.cc,
        p: a.p,
        bs: a.bs,
    };
    let protocol = if a.http2 {
        Protocol::Http2
    } else {
        Protocol::Http1
    };
    let rt = tokio::runtime::Runtime::new()?;
    let report = rt.block_on(async {
        let engine = Arc::new(Engine::new(params, protocol)?);
        let received = engine.received.clone();
        let ticker = tokio::spawn(async move {
            let mut last = 0;
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let now = received.load(Ordering::Relaxed);
                eprint!(
                    "\r{:.1} MB received, {:.1} Mbit/s   ",
                    now as f64 / 1e6,
                    (now - last) as f64 * 8.0 / 1e6
                );
                last = now;
            }
        });
        let r = engine.run(&specs, &a.out).await;
        ticker.abort();
        eprintln!();
        r
    })?;
    if let Some(path) = &a.log {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        for l in &report.files {
            writeln!(f, "{}", serde_json::to_string(l)?)?;
        }
    }
    eprintln!(
        "{} file(s), {:.1} MB in {:.1} s: {:.1} Mbit/s",
        report.files.len(),
        report.bytes as f64 / 1e6,
        report.seconds,
        report.mbps()
    );
    let failed = report.failures();
    if !failed.is_empty() {
        for f in &failed {
            eprintln!("{}", f.outcome);
        }
        bail!("{} of {} file(s) failed", failed.len(), report.files.len());
    }
    Ok(())
}
