//! `roam transfer get`: download URLs or a list of them with given concurrency, parallelism
//! and block size (FastHLA's engine, `roam-transfer`), or with `--auto` the parameters FastHLA's
//! broker chooses per cluster of file sizes; a progress line, an optional log of one JSON record
//! per file, and the broker's log of the transfer (uploaded to an HLA server with `--hla`).
//! `roam hla serve` and `roam hla train`: the HLA server, and its analysis run once on a file.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use roam_transfer::broker::{modelled_energy_per_100mb, Broker, Choice, Source};
use roam_transfer::engine::Connector;
use roam_transfer::hla::{LogContext, Record};
use roam_transfer::model::{accuracy, training_set, Condition, Kind};
use roam_transfer::{mixed, server, Engine, FileSpec, Params, Protocol, Report};

use crate::progress;

/// Arguments of `roam transfer get`.
#[derive(Args, Debug)]
pub struct GetArgs {
    /// URLs (http:// or https://) to download; a URL ending in `/` is a directory, whose
    /// listing (an HTML index, or nginx's JSON one) gives its files, one level deep.
    urls: Vec<String>,
    /// A file of URLs, one a line, each optionally followed by the file's size in bytes (`URL
    /// SIZE`: with sizes, --auto's survey asks only its first wave); blank lines and `#`
    /// comments skipped.
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
    /// HTTP/2 on the URLs given (for http://, cleartext with prior knowledge; for https://,
    /// by ALPN), instead of HTTP/1.1 (with --auto too: the broker's choice of version is then
    /// overridden). Without it, --auto may still choose HTTP/2 where the server offers it
    /// (`Alt-Svc: h2c=":PORT"`, or h2 in its ALPN answer).
    #[arg(long)]
    http2: bool,
    #[command(flatten)]
    reach: Reach,
    /// A stream that has finished its range takes the back half of a slower stream's
    /// remainder of the same file when both halves would be at least this many bytes (as
    /// aria2 splits its largest unfinished segment for an idle connection).
    #[arg(long, value_name = "BYTES", default_value_t = roam_transfer::MIN_STEAL_PIECE)]
    min_steal: u64,
    /// Never take over part of another stream's range (each file's `--p` ranges are cut once).
    #[arg(long, conflicts_with = "min_steal")]
    no_steal: bool,
    /// Append one JSON record per file to this file.
    #[arg(long)]
    log: Option<PathBuf>,
    /// Let FastHLA's broker choose concurrency, parallelism, block size and HTTP version per
    /// cluster of file sizes (from its cache of the HLA server's optima, else its model, else
    /// the defaults), instead of --cc, --p and --bs.
    #[arg(long)]
    auto: bool,
    /// The broker's state (cache, model, logs not yet uploaded); default
    /// $XDG_STATE_HOME/roam/transfer-broker.json (or ~/.local/state/...).
    #[arg(long)]
    state: Option<PathBuf>,
    /// HLA server (http://host:port, `roam hla serve`) to upload this device's logs to and
    /// fetch updates from.
    #[arg(long)]
    hla: Option<String>,
    /// The network's bandwidth in Mbit/s, part of the condition the broker looks up (default:
    /// the fastest transfer the broker has seen, a lower bound, else 10).
    #[arg(long)]
    bandwidth: Option<f64>,
    /// Radio profile the logs' energy is modelled with (`roam-budget`: huang2012/wifi,
    /// huang2012/lte, ...).
    #[arg(long, default_value = "huang2012/wifi")]
    radio: String,
    /// The most channels (concurrency x parallelism, summed over the size clusters) --auto may
    /// open.
    #[arg(long, default_value_t = 64)]
    max_channels: u32,
}

/// Where the broker's state lives by default.
fn default_state() -> Result<PathBuf> {
    let base = match std::env::var_os("XDG_STATE_HOME") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(
            std::env::var_os("HOME")
                .context("neither XDG_STATE_HOME nor HOME is set: give --state")?,
        )
        .join(".local/state"),
    };
    Ok(base.join("roam/transfer-broker.json"))
}

/// How servers are reached (`roam transfer get` and `put`).
#[derive(Args, Debug)]
pub(crate) struct Reach {
    /// Reach the servers through this SOCKS5 proxy: `roam net proxy` (with `--label
    /// PORT=background-large` for the servers' port) carries every connection over a roam-net
    /// multi-socket, so the transfer uses every network the device has.
    #[arg(long, value_name = "ADDR:PORT")]
    socks5: Option<std::net::SocketAddr>,
    /// Also trust the certificate authorities in this PEM file for https:// servers (a
    /// private server's own authority, or its self-signed certificate); the system's
    /// (/etc/ssl/certs) are always trusted.
    #[arg(long, value_name = "FILE")]
    ca: Option<PathBuf>,
}

impl Reach {
    /// The engine's connector these options describe.
    pub(crate) fn connector(&self) -> Result<Connector> {
        let c = Connector::new(self.socks5);
        Ok(match &self.ca {
            Some(ca) => c.with_ca_file(ca)?,
            None => c,
        })
    }
}

/// Run it: 0 when every file arrived, an error naming the failed ones otherwise.
pub fn get(a: &GetArgs) -> Result<()> {
    let protocol = if a.http2 {
        Protocol::Http2
    } else {
        Protocol::Http1
    };
    let rt = tokio::runtime::Runtime::new()?;
    let mut specs = Vec::new();
    for u in &a.urls {
        if !u.ends_with('/') {
            specs.push(FileSpec::from_url(u)?);
            continue;
        }
        // A directory: the files its listing links to.
        let listing = rt.block_on(async {
            let params = Params {
                protocol,
                ..Params::default()
            };
            let e = Engine::with_connector(params, a.reach.connector()?)?;
            Ok::<_, anyhow::Error>(e.listing(u).await?)
        })?;
        let others = match listing.skipped {
            0 => String::new(),
            n => format!("; {n} other link(s) not followed (subdirectories, parents, sort links)"),
        };
        eprintln!("{u}: {} file(s) listed{others}", listing.files.len());
        specs.extend(listing.files);
    }
    if let Some(l) = &a.list {
        let text =
            std::fs::read_to_string(l).with_context(|| format!("reading {}", l.display()))?;
        specs.extend(parse_list(&text).with_context(|| format!("in {}", l.display()))?);
    }
    if specs.is_empty() {
        bail!("nothing to download: give URLs or --list FILE");
    }
    // Before the survey and the plan: size clusters run at once, each its own engine.
    roam_transfer::distinct_names(&specs)?;
    if let Some(b) = a.bandwidth {
        if !(b.is_finite() && b > 0.0) {
            bail!("--bandwidth {b}: expected a positive number of Mbit/s");
        }
    }
    if a.max_channels == 0 {
        bail!("--max-channels must be at least 1");
    }
    let fixed = Params {
        cc: a.cc,
        p: a.p,
        bs: a.bs,
        protocol,
    };
    fixed.validate()?;
    // Check the radio profile before moving any byte.
    modelled_energy_per_100mb(&a.radio, 1, Duration::from_secs(1))?;
    let with_broker = a.auto || a.hla.is_some() || a.state.is_some();
    let state = match &a.state {
        Some(p) => p.clone(),
        None => default_state()?,
    };
    let mut broker = if with_broker {
        Broker::load(&state)?
    } else {
        Broker::default()
    };
    let cpu0 = self_cpu();
    let runs = rt.block_on(async {
        if let (true, Some(url), false) = (a.auto, &a.hla, broker.has_update()) {
            match server::fetch_update(url).await {
                Ok(u) => broker.apply(u),
                Err(e) => eprintln!("no update from the HLA server (defaults until there is): {e}"),
            }
        }
        // The plan: one group with the given parameters, or the broker's per size cluster.
        let mut groups: Vec<(Vec<FileSpec>, Choice, Condition)> = Vec::new();
        let survey_params = Params {
            cc: roam_transfer::SURVEY_CC,
            protocol,
            ..Params::default()
        };
        let min_steal = if a.no_steal { u64::MAX } else { a.min_steal.max(1) };
        let connector = a.reach.connector()?;
        // The survey's connections, open and warm, carry the transfer after it.
        let probe = if with_broker {
            Some(Engine::with_connector(survey_params, connector.clone())?.with_min_steal(min_steal))
        } else {
            None
        };
        let survey = match &probe {
            Some(e) => {
                let sv = Arc::new(e.sharing(survey_params)?).survey(&specs).await?;
                sv.apply(&mut specs);
                Some(sv)
            }
            None => None,
        };
        let bandwidth = a.bandwidth.or(broker.fastest_mbps()).unwrap_or(10.0);
        let condition = |mean: f64, rtt_ms: f64| Condition {
            rtt_ms,
            bandwidth_mbps: bandwidth,
            mean_file_bytes: mean,
        };
        match &survey {
            Some(sv) if a.auto => {
                let choose =
                    |mean: f64, _n: usize| broker.choose(&condition(mean, sv.rtt_ms)).params;
                for c in mixed::plan(&sv.sizes, choose, a.max_channels) {
                    let cond = condition(c.mean_size, sv.rtt_ms);
                    let mut choice = broker.choose(&cond);
                    choice.params = c.params; // as scaled to the channel limit
                    let (version, note) = sv.version(c.params.protocol, &c.files, a.http2);
                    choice.params.protocol = version;
                    if let Some(n) = note {
                        eprintln!("{n}");
                    }
                    eprintln!(
                        "{} file(s) of {:.0} KB on average: cc {} p {} bs {} {} ({})",
                        c.files.len(),
                        c.mean_size / 1e3,
                        c.params.cc,
                        c.params.p,
                        c.params.bs,
                        version.name(),
                        match choice.source {
                            Source::Cache => "the cache",
                            Source::Model => "the model",
                            Source::Default => {
                                "defaults: nothing learnt yet (no HLA server update, or its logs all dropped as failed or faster than --bandwidth)"
                            }
                        }
                    );
                    groups.push((
                        c.files.iter().map(|&i| specs[i].clone()).collect(),
                        choice,
                        cond,
                    ));
                }
            }
            _ => {
                let (mean, rtt) = survey.as_ref().map_or((0.0, 0.0), |sv| {
                    (
                        sv.sizes.iter().sum::<u64>() as f64 / sv.sizes.len().max(1) as f64,
                        sv.rtt_ms,
                    )
                });
                let choice = Choice {
                    params: fixed,
                    source: Source::Default,
                    expected_mbps: None,
                };
                groups.push((specs.clone(), choice, condition(mean, rtt)));
            }
        }
        let engines = groups
            .iter()
            .map(|g| match &probe {
                Some(e) => e.sharing(g.1.params).map(Arc::new),
                None => Engine::with_connector(g.1.params, connector.clone())
                    .map(|e| Arc::new(e.with_min_steal(min_steal))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let counters = progress::Counters::of(engines.iter().map(|e| e.as_ref()));
        let ticker = progress::spawn(counters, specs.len() as u64, "received");
        let runs = futures_join(engines.iter().zip(&groups).map(|(e, g)| {
            let (e, files, out) = (e.clone(), g.0.clone(), a.out.clone());
            async move { e.run(&files, &out).await }
        }))
        .await;
        ticker.finish();
        let mut out = Vec::new();
        for (r, g) in runs.into_iter().zip(groups) {
            out.push((r?, g.1, g.2));
        }
        Ok::<_, anyhow::Error>(out)
    })?;
    // The groups ran at once: each record carries the whole transfer's CPU.
    let cpu_s = self_cpu() - cpu0;
    let mut files = Vec::new();
    let (mut bytes, mut seconds) = (0u64, 0f64);
    let mut ask = false;
    for (report, choice, cond) in &runs {
        bytes += report.bytes;
        seconds = seconds.max(report.seconds);
        files.extend(report.files.iter().cloned());
        if with_broker && report.bytes > 0 {
            let record = record_of(report, choice, cond, &a.radio, cpu_s)?;
            ask |= broker.ran(choice, record);
        }
    }
    let whole = Report {
        files,
        bytes,
        seconds,
    };
    if let Some(path) = &a.log {
        append_log(path, &whole)?;
    }
    let unranged = whole
        .files
        .iter()
        .filter(|f| f.outcome == "ok" && f.params.p > 1 && f.streams == 1)
        .count();
    if unranged > 0 {
        eprintln!(
            "{unranged} file(s) came in one stream each: the server does not serve ranges, so \
             parallelism did not apply to them"
        );
    }
    let retried: u32 = whole.files.iter().map(|f| f.retries).sum();
    if retried > 0 {
        eprintln!(
            "{retried} request(s) sent again (a stream that broke off or fell silent, a request \
             left unanswered)"
        );
    }
    let stolen: u32 = whole.files.iter().map(|f| f.steals).sum();
    if stolen > 0 {
        eprintln!(
            "{stolen} range(s) taken over by a stream that had finished its own from a slower one"
        );
    }
    eprintln!(
        "{} file(s), {:.1} MB in {:.1} s: {:.1} Mbit/s",
        whole.files.len(),
        whole.bytes as f64 / 1e6,
        whole.seconds,
        whole.mbps()
    );
    if with_broker {
        if let Some(url) = &a.hla {
            rt.block_on(async {
                let pending: Vec<Record> = broker.pending().cloned().collect();
                match server::upload(url, &pending).await {
                    Ok(n) => broker.uploaded(n),
                    Err(e) => eprintln!("logs kept for later, not uploaded: {e}"),
                }
                if ask {
                    match server::fetch_update(url).await {
                        Ok(u) => broker.apply(u),
                        Err(e) => eprintln!("no update from the HLA server: {e}"),
                    }
                }
            });
        }
        if let Some(dir) = state.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        broker.save(&state)?;
    }
    failures(&whole)
}

/// One JSON record per file of `report` appended to `path`.
pub(crate) fn append_log(path: &std::path::Path, report: &Report) -> Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    for l in &report.files {
        writeln!(f, "{}", serde_json::to_string(l)?)?;
    }
    Ok(())
}

/// Each failed file's error printed, and an error counting them; `Ok` if none failed.
pub(crate) fn failures(report: &Report) -> Result<()> {
    let failed = report.failures();
    if !failed.is_empty() {
        for f in &failed {
            eprintln!("{}", f.outcome);
        }
        bail!("{} of {} file(s) failed", failed.len(), report.files.len());
    }
    Ok(())
}

/// Await every future, in order.
async fn futures_join<F>(fs: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = fs.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.expect("a transfer task panicked"));
    }
    out
}

/// The broker's log of one group's transfer: its condition, parameters, throughput and
/// modelled energy.
fn record_of(
    report: &Report,
    choice: &Choice,
    c: &Condition,
    radio: &str,
    cpu_s: f64,
) -> Result<Record> {
    let wall = Duration::from_secs_f64(report.seconds.max(1e-3));
    Ok(Record {
        rtt_ms: c.rtt_ms,
        bandwidth_mbps: c.bandwidth_mbps,
        mean_file_bytes: c.mean_file_bytes,
        params: choice.params,
        throughput_mbps: report.mbps(),
        energy_j_per_100mb: modelled_energy_per_100mb(radio, report.bytes, wall)?,
        ok: report.failures().is_empty(),
        context: LogContext {
            files: Some(report.files.len() as u64),
            cpu_s: Some(cpu_s),
            tcp_rmem_max: LogContext::tcp_rmem_max(),
        },
    })
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
pub fn serve(a: &ServeArgs) -> Result<()> {
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
/// (the seed's comparison), as JSON on stdout.
pub fn train(a: &TrainArgs) -> Result<()> {
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

/// CPU seconds of this process so far (user and system, every thread).
pub(crate) fn self_cpu() -> f64 {
    cpu_of(libc::RUSAGE_SELF)
}

pub(crate) fn cpu_of(who: libc::c_int) -> f64 {
    // SAFETY: getrusage writes into the struct we own.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(who, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// The lines of a `--list` file: `URL` or `URL SIZE`; a bad line is an error naming it.
pub fn parse_list(text: &str) -> Result<Vec<FileSpec>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.split_whitespace();
        let url = words.next().unwrap_or_default();
        let mut spec = FileSpec::from_url(url).with_context(|| format!("line {}", i + 1))?;
        if let Some(size) = words.next() {
            spec.listed_size = Some(size.parse().map_err(|_| {
                anyhow::anyhow!(
                    "line {}: size `{size}` is not a number of bytes (expected URL [SIZE])",
                    i + 1
                )
            })?);
        }
        if let Some(extra) = words.next() {
            bail!(
                "line {}: `{extra}` after the URL and size (expected URL [SIZE])",
                i + 1
            );
        }
        out.push(spec);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_lines_give_urls_and_sizes_and_bad_ones_are_named() {
        let l = parse_list("# a dataset\nhttp://h/a.bin 1000\n\n  http://h/b.bin\n").unwrap();
        assert_eq!(l.len(), 2);
        assert_eq!(
            (l[0].name.as_str(), l[0].listed_size),
            ("a.bin", Some(1000))
        );
        assert_eq!(l[1].listed_size, None);
        let e = |t: &str| format!("{:#}", parse_list(t).unwrap_err());
        assert!(
            e("http://h/a.bin 1x").contains("line 1: size `1x`"),
            "{}",
            e("http://h/a.bin 1x")
        );
        assert!(e("http://h/a 1 2").contains("`2` after"));
        assert!(e("\nftp://h/a").contains("line 2"));
    }
}
