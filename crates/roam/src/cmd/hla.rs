//! `roam hla`: FastHLA's HLA server (`serve`), and its analysis run once on a file of logs
//! (`train`).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use roam_transfer::model::{accuracy, training_set, Kind};
use roam_transfer::server;

/// `roam hla ...`.
#[derive(Subcommand)]
pub enum HlaCmd {
    /// Serve: POST /logs (JSON lines of records), GET /update (clusters' optima and a model).
    Serve(ServeArgs),
    /// The server's analysis once, on a file of logs: clusters, optima, each learner's
    /// cross-validated accuracy.
    Train(TrainArgs),
}

/// Run `roam hla ...`.
pub fn run(cmd: HlaCmd) -> Result<()> {
    match cmd {
        HlaCmd::Serve(a) => serve(&a),
        HlaCmd::Train(a) => train(&a),
    }
}

/// Arguments of `roam hla serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8790")]
    listen: String,
    /// Directory the logs are kept in (logs.jsonl), read back at start.
    #[arg(long)]
    state: Option<PathBuf>,
    /// The model served: `network` or `svm`.
    #[arg(long, default_value = "network")]
    model: String,
}

fn kind(name: &str) -> Result<Kind> {
    Kind::ALL
        .into_iter()
        .find(|k| k.name() == name)
        .with_context(|| format!("unknown model `{name}` (expected network, svm or knn)"))
}

/// `roam hla serve`: until interrupted.
fn serve(a: &ServeArgs) -> Result<()> {
    let state = server::HlaState::new(kind(&a.model)?, a.state.as_deref())?;
    eprintln!(
        "HLA server on http://{} ({} log(s) held): POST /logs, GET /update",
        a.listen,
        state.len()
    );
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let l = tokio::net::TcpListener::bind(&a.listen)
            .await
            .with_context(|| format!("listening on {}", a.listen))?;
        server::serve(l, Arc::new(std::sync::Mutex::new(state))).await;
        Ok(())
    })
}

/// Arguments of `roam hla train`.
#[derive(Args, Debug)]
pub struct TrainArgs {
    /// Logs: JSON lines of records (what `POST /logs` takes; `logs.jsonl` of a server's state).
    #[arg(long)]
    logs: PathBuf,
    /// Write the update (clusters' optima and the model) here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// The model in the update: `network` or `svm`.
    #[arg(long, default_value = "network")]
    model: String,
}

/// `roam hla train`: the server's analysis once, with each learner's cross-validated accuracy
/// (the paper's comparison), as JSON on stdout.
fn train(a: &TrainArgs) -> Result<()> {
    let text = std::fs::read(&a.logs).with_context(|| format!("reading {}", a.logs.display()))?;
    let records =
        server::parse_lines(&text).map_err(|e| anyhow::anyhow!("{}: {e}", a.logs.display()))?;
    let (kept, dropped) = roam_transfer::hla::clean(&records);
    let update = server::learn(&records, kind(&a.model)?)?;
    let set = training_set(&kept, roam_transfer::hla::CLUSTER_DISTANCE);
    let mut acc = serde_json::Map::new();
    for k in Kind::ALL {
        acc.insert(k.name().into(), serde_json::json!(accuracy(k, &set, 5, 1)));
    }
    if let Some(out) = &a.out {
        std::fs::write(out, serde_json::to_string(&update)?)
            .with_context(|| format!("writing {}", out.display()))?;
    }
    println!(
        "{}",
        serde_json::to_string_pretty(&serde_json::json!({
            "records": records.len(),
            "dropped_as_outliers": dropped,
            "clusters": update.table.entries.iter().map(|(c, o)| serde_json::json!({
                "rtt_ms": 10f64.powf(c[0]),
                "bandwidth_mbps": 10f64.powf(c[1]),
                "mean_file_bytes": 10f64.powf(c[2]),
                "params": o.params,
                "throughput_mbps": o.throughput_mbps,
                "energy_j_per_100mb": o.energy_j_per_100mb,
            })).collect::<Vec<_>>(),
            "accuracy_5_fold": acc,
        }))?
    );
    Ok(())
}
