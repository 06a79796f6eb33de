//! `roam bench transfer`: FastHLA (JSON on stdout).
//!
//! - `link_fraction`: on a 100 Mbit/s link with 290 ms RTT (`wifi-bulk+rtt=290ms`), for the
//!   paper's HTML, IMAGE and VIDEO-small datasets, FastHLA's throughput and the best fixed
//!   baseline's (wget, curl, nghttp with its own and with 16 MiB windows, aria2) as fractions of
//!   the link rate. It is `roam lab fasthla` on that one network, one trial each (development
//!   seed 1), written to `--out` (default `target/bench-transfer`): the sweep FastHLA learns
//!   from is kept there, so a second run only measures again (`--resume` is implied).
//! - `predict_us`: the model's prediction time, microseconds (a network trained on the
//!   sweep's records where there are any, else on a synthetic set).
//! - `cpu_s_per_gb`: CPU seconds per GB moved on loopback from an nginx in this namespace into
//!   a file, by FastHLA's engine (cc 1, p 1, 64 KiB: this process's time) and by curl (its
//!   time as a child).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use roam_lab::harness::plan::Plan;
use roam_lab::studies::fasthla;
use roam_lab::studies::fasthla::bulk::Tool;
use roam_transfer::model::{Condition, Kind, Model};
use roam_transfer::{Engine, FileSpec, Params};
use serde_json::json;

use crate::cmd::transfer::{cpu_of, self_cpu};

/// Arguments of `roam bench transfer`.
#[derive(Args, Debug)]
pub struct BenchTransferArgs {
    /// Where the lab's trials are kept (the sweep is reused by the next run).
    #[arg(long, default_value = "target/bench-transfer")]
    out: PathBuf,
    /// Trials run at once.
    #[arg(long, default_value_t = 2)]
    jobs: usize,
    /// Size of the loopback file for the CPU measurement, in MiB.
    #[arg(long, default_value_t = 1024)]
    cpu_mib: u64,
    /// Skip the link measurement (only the prediction time and the CPU per GB).
    #[arg(long)]
    no_link: bool,
}

/// The link's rate, Mbit/s (`wifi-bulk`).
const LINK_MBPS: f64 = 100.0;

/// Run it and print the JSON.
pub fn transfer(a: &BenchTransferArgs) -> Result<()> {
    let mut out = serde_json::Map::new();
    let mut records = Vec::new();
    if !a.no_link {
        let plan = Plan {
            apps: vec!["html".into(), "image".into(), "video".into()],
            scenarios: vec!["wifi-bulk+rtt=290ms".into()],
            systems: fasthla::systems(),
            trials: 1,
            first_seed: roam_lab::harness::plan::DEVELOPMENT_SEEDS,
            quick: false,
            duration: None,
            jobs: a.jobs.max(1),
            out: a.out.clone(),
            emu_logs: None,
            resume: a.out.join("compare/run.json").exists(),
            report_only: false,
            shard: None,
        };
        let (_, rows) = fasthla::fasthla(&plan, None)?;
        let sweep = std::fs::read_to_string(a.out.join("sweep/trials.csv")).unwrap_or_default();
        records = fasthla::records(&roam_lab::report::parse_csv(&sweep, "the sweep")?);
        let mbps = |app: &str, sys: &str| {
            rows.iter()
                .filter(|r| r.app == app && r.system == sys && r.metric == "throughput_mbps")
                .map(|r| r.value)
                .find(|v| v.is_finite())
        };
        let mut lf = serde_json::Map::new();
        for (key, app) in [("html", "html"), ("image", "image"), ("video", "video")] {
            let best = Tool::BASELINES
                .iter()
                .filter_map(|t| mbps(app, t.name()).map(|v| (t.name(), v)))
                .max_by(|x, y| x.1.total_cmp(&y.1));
            lf.insert(
                key.into(),
                json!({
                    "fasthla": mbps(app, Tool::FastHla.name()).map(|v| v / LINK_MBPS),
                    "best_baseline": best.map(|b| b.1 / LINK_MBPS),
                    "best_baseline_name": best.map(|b| b.0),
                }),
            );
        }
        out.insert("link_fraction".into(), lf.into());
    }
    out.insert("predict_us".into(), json!(predict_us(&records)?));
    out.insert("cpu_s_per_gb".into(), cpu_per_gb(a.cpu_mib)?);
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

/// Microseconds per prediction of a network model.
fn predict_us(records: &[roam_transfer::hla::Record]) -> Result<f64> {
    let mut set = roam_transfer::model::training_set(records, roam_transfer::hla::CLUSTER_DISTANCE);
    if set.len() < 10 {
        set = (0..300)
            .map(|i| {
                let rtt = [59.0, 115.0, 290.0][i % 3];
                let size = [112e3, 2.7e6, 152e6][(i / 3) % 3];
                let cc = if size < 1e6 { 16 } else { 4 };
                (
                    Condition {
                        rtt_ms: rtt * (1.0 + (i % 7) as f64 * 0.01),
                        bandwidth_mbps: 100.0,
                        mean_file_bytes: size,
                    },
                    Params {
                        cc,
                        p: if rtt > 200.0 { 4 } else { 1 },
                        bs: 65536,
                        ..Params::default()
                    },
                )
            })
            .collect();
    }
    let m = Model::train(Kind::Network, &set, 1)?;
    let n = 200_000;
    let t0 = Instant::now();
    let mut acc = 0u64;
    for i in 0..n {
        let c = Condition {
            rtt_ms: 50.0 + (i % 300) as f64,
            bandwidth_mbps: 100.0,
            mean_file_bytes: 1e5 * (1 + i % 100) as f64,
        };
        acc = acc.wrapping_add(std::hint::black_box(m.predict(&c)).cc as u64);
    }
    std::hint::black_box(acc);
    Ok(t0.elapsed().as_secs_f64() * 1e6 / n as f64)
}

/// The engine's and curl's CPU per GB on loopback.
fn cpu_per_gb(mib: u64) -> Result<serde_json::Value> {
    let dir = std::env::temp_dir().join(format!("roam-bench-transfer-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("www"))?;
    let size = mib.max(1) << 20;
    std::fs::File::create(dir.join("www/big.bin"))?.set_len(size)?;
    let port = 18_600 + (std::process::id() % 1000) as u16;
    let servers = format!(
        "sendfile on;\n  server {{ listen 127.0.0.1:{port}; root {}/www; }}",
        dir.display()
    );
    let mut nginx = roam_lab::servers::nginx::launch(&dir, &servers, ([127, 0, 0, 1], port).into())
        .context("starting nginx for the loopback measurement")?;
    let url = format!("http://127.0.0.1:{port}/big.bin");
    let result = (|| -> Result<serde_json::Value> {
        let fetched = dir.join("fetched");
        let before = self_cpu();
        let rt = tokio::runtime::Runtime::new()?;
        let r = rt.block_on(async {
            let e = Arc::new(Engine::new(Params::default())?);
            e.run(&[FileSpec::from_url(&url)?], &fetched).await
        })?;
        let roam_s = self_cpu() - before;
        if !r.failures().is_empty() || r.bytes != size {
            bail!("the engine fetched {} of {size} bytes", r.bytes);
        }
        let before = cpu_of(libc::RUSAGE_CHILDREN);
        // Into a file, as the engine writes one.
        let st = std::process::Command::new("curl")
            .args(["-s", "-S", "--fail", "-o"])
            .arg(dir.join("curl.bin"))
            .arg(&url)
            .status()
            .context("running curl")?;
        if !st.success() {
            bail!("curl failed: {st}");
        }
        let curl_s = cpu_of(libc::RUSAGE_CHILDREN) - before;
        let gb = size as f64 / 1e9;
        Ok(json!({"roam": roam_s / gb, "curl": curl_s / gb}))
    })();
    let _ = nginx.kill();
    let _ = nginx.wait();
    let _ = std::fs::remove_dir_all(&dir);
    result
}
