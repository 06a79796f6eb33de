//! `roam hla`: FastHLA's HLA server (`serve`; what it takes, refuses and bounds is
//! `roam_transfer::server`'s), a line for its token file (`token`), and its analysis run once
//! on a file of logs (`train`).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use roam_transfer::model::{accuracy, training_set, Kind};
use roam_transfer::server::store::StoreLimits;
use roam_transfer::server::{self, tokens, Config, HlaServer, Limits};

/// `roam hla ...`.
#[derive(Subcommand)]
pub enum HlaCmd {
    /// Serve: POST /logs (JSON lines of records, with a device token), GET /update (clusters'
    /// optima and a model).
    ///
    /// Uploads (POST /logs) need a device token listed in the --tokens file (`TOKEN NAME` a
    /// line, `#` comments; `roam hla token NAME` makes a line), sent as `Authorization: Bearer
    /// TOKEN`. The file is read again whenever it changes (looked at on every upload): removing
    /// a line revokes that token at the next upload, no restart or signal needed; a file that
    /// no longer parses refuses every upload until fixed. Without --tokens no upload is taken.
    /// GET /update is open to anyone unless --update-needs-token.
    ///
    /// Every record uploaded is checked (400 naming the line and field); each device has an
    /// hourly quota (429 past it); the logs kept are bounded, and past the bounds the device
    /// holding the most loses its oldest, so one device cannot evict the others' logs. Learning
    /// runs in the background, bounded whatever was uploaded; the update is served meanwhile.
    ///
    /// Fixed limits: 10 s for a TLS handshake and for a request's headers, 20 s for a request's
    /// body (408 past it), 60 s for a connection; at most one learning every 30 s once there is
    /// a model; GET /update waits at most 2 s for a learning under way.
    Serve(ServeArgs),
    /// A new line for the token file: a random token and the device's name.
    Token(TokenArgs),
    /// The server's analysis once, on a file of logs: clusters, optima, each learner's
    /// cross-validated accuracy.
    Train(TrainArgs),
}

/// Run `roam hla ...`.
pub fn run(cmd: HlaCmd) -> Result<()> {
    match cmd {
        HlaCmd::Serve(a) => serve(&a),
        HlaCmd::Token(a) => token(&a),
        HlaCmd::Train(a) => train(&a),
    }
}

/// Arguments of `roam hla serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8790")]
    listen: String,
    /// Directory the logs are kept in (logs.jsonl), read back at start (a partial last line is
    /// cut off, invalid records skipped, each with a warning).
    #[arg(long)]
    state: Option<PathBuf>,
    /// The model served: `network` or `svm`.
    #[arg(long, default_value = "network")]
    model: String,
    /// The device tokens: `TOKEN NAME` a line (keep it private: chmod 600). Without it the
    /// server takes no upload.
    #[arg(long, value_name = "FILE")]
    tokens: Option<PathBuf>,
    /// GET /update needs a device token too.
    #[arg(long, requires = "tokens")]
    update_needs_token: bool,
    /// Serve HTTPS with this certificate chain (PEM), with --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key (PEM: PKCS#8, PKCS#1 or SEC1) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Connections served at once (more are closed at once).
    #[arg(long, value_name = "N", default_value_t = Limits::default().max_connections)]
    max_connections: usize,
    /// Connections from one source (an IPv4 address, an IPv6 /64) at once.
    #[arg(long, value_name = "N", default_value_t = Limits::default().max_per_source)]
    max_per_source: usize,
    /// Bytes of one upload (413 past it).
    #[arg(long, value_name = "BYTES", default_value_t = Limits::default().max_body)]
    max_body: usize,
    /// Records kept (past it, the device holding the most loses its oldest).
    #[arg(long, value_name = "N", default_value_t = Limits::default().store.max_logs)]
    max_logs: usize,
    /// Bytes of records kept (as lines of logs.jsonl; past it, the device holding the most
    /// bytes loses its oldest).
    #[arg(long, value_name = "BYTES", default_value_t = Limits::default().store.max_bytes)]
    max_log_bytes: u64,
    /// Records one device may upload an hour (429 past it).
    #[arg(long, value_name = "N", default_value_t = Limits::default().quota_records)]
    quota_records: u64,
    /// Bytes one device may upload an hour (429 past it).
    #[arg(long, value_name = "BYTES", default_value_t = Limits::default().quota_bytes)]
    quota_bytes: u64,
}

fn kind(name: &str) -> Result<Kind> {
    Kind::ALL
        .into_iter()
        .find(|k| k.name() == name)
        .with_context(|| format!("unknown model `{name}` (expected network, svm or knn)"))
}

/// The server's configuration from the options, checked.
fn config(a: &ServeArgs) -> Result<Config> {
    for (flag, v) in [
        ("--max-connections", a.max_connections as u64),
        ("--max-per-source", a.max_per_source as u64),
        ("--max-body", a.max_body as u64),
        ("--max-logs", a.max_logs as u64),
        ("--max-log-bytes", a.max_log_bytes),
        ("--quota-records", a.quota_records),
        ("--quota-bytes", a.quota_bytes),
    ] {
        if v == 0 {
            bail!("{flag} must be at least 1");
        }
    }
    let limits = Limits {
        max_connections: a.max_connections,
        max_per_source: a.max_per_source,
        max_body: a.max_body,
        store: StoreLimits {
            max_logs: a.max_logs,
            max_bytes: a.max_log_bytes,
        },
        quota_records: a.quota_records,
        quota_bytes: a.quota_bytes,
        ..Limits::default()
    };
    Ok(Config {
        kind: kind(&a.model)?,
        state: a.state.clone(),
        tokens: a.tokens.clone(),
        update_needs_token: a.update_needs_token,
        limits,
    })
}

/// `roam hla serve`: until interrupted.
fn serve(a: &ServeArgs) -> Result<()> {
    let tls = match (&a.tls_cert, &a.tls_key) {
        (Some(c), Some(k)) => Some(server::Tls::from_pem_files(c, k)?),
        _ => None,
    };
    let (server, warnings) = HlaServer::open(config(a)?)?;
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    let uploads = match server.devices() {
        Some(n) => format!("POST /logs with a token ({n} device(s))"),
        None => "no uploads (no --tokens)".into(),
    };
    eprintln!(
        "HLA server on {}://{} ({} log(s) held): {uploads}, GET /update{}",
        if tls.is_some() { "https" } else { "http" },
        a.listen,
        server.len(),
        if a.update_needs_token {
            " with a token"
        } else {
            ""
        }
    );
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let l = tokio::net::TcpListener::bind(&a.listen)
            .await
            .with_context(|| format!("listening on {}", a.listen))?;
        server.serve(l, tls).await;
        Ok(())
    })
}

/// Arguments of `roam hla token`.
#[derive(Args, Debug)]
pub struct TokenArgs {
    /// The device's name (the rest of the token file's line).
    name: String,
    /// Write the token to this new file (mode 0600: the device's `--hla-token-file`) instead
    /// of showing it on stderr.
    #[arg(long, value_name = "FILE")]
    token_out: Option<PathBuf>,
}

/// `roam hla token NAME`: a new token of 256 random bits, for the device (into `--token-out`,
/// or shown once on stderr), and its token file line, `sha256:DIGEST NAME` (on stdout: `roam
/// hla token NAME --token-out NAME.token >> tokens`): the server's file never holds the token.
fn token(a: &TokenArgs) -> Result<()> {
    let name = a.name.trim();
    if name.is_empty() || name.contains('\n') || name.chars().count() > tokens::MAX_NAME {
        bail!(
            "a device name is 1 to {} characters on one line",
            tokens::MAX_NAME
        );
    }
    let hex = roam_store::tier::wire::hex;
    let token = hex(&super::random_32()?);
    match &a.token_out {
        Some(path) => super::write_private(path, token.as_bytes())?,
        None => eprintln!("the device's token (give it to `{name}`; it is kept nowhere): {token}"),
    }
    println!(
        "{}{} {name}",
        tokens::HASHED,
        hex(&tokens::digest(token.as_bytes()))
    );
    Ok(())
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
