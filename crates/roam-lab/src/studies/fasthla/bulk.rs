//! Bulk transfers for `roam lab fasthla` (the FastHLA paper): a dataset served by a real nginx from
//! Debian in the emulator's server namespace (HTTP/1.1 on one port, HTTP/2 with prior
//! knowledge on another), fetched across one emulated link by a tool in the client namespace:
//! FastHLA's engine with fixed parameters (the sweeps) or with the parameters FastHLA learnt
//! from them, and the tools users run today with their usual settings (wget and curl over
//! HTTP/1.1, nghttp over HTTP/2, aria2). Every tool fetches the same files into a fresh
//! directory (nghttp discards them: it checks each response's status, and the trial that the
//! link carried every byte); a trial checks that every byte arrived.
//!
//! HTTP/2 is nghttp's, not curl's: Debian's curl 7.88 fails on its second request over a
//! reused cleartext HTTP/2 connection to nginx 1.22 ("Error in the HTTP2 framing layer", with
//! and without `-Z`), so it cannot move a dataset.
//!
//! Measured: wall time from the tool's start to its exit, and the bytes the link carried down
//! (the emulator's counters), hence throughput. Energy per 100 MB is **modelled**: `roam-budget`'s
//! radio profile for the link's kind (`huang2012/wifi` or `huang2012/lte`) driven by the bytes
//! and the wall time (promotion, the transfer at its mean rate, the tail), as the device's
//! broker models its own transfers; the CPU is not counted.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use roam_transfer::broker::{modelled_energy_per_100mb, Broker, Update};
use roam_transfer::model::Condition;
use roam_transfer::session::{self, Network, Options, Outcome, Session, Tuning};
use roam_transfer::{FileSpec, Params, Protocol};

use crate::harness::scratch::Scratch;
use crate::harness::system::{one_link, SystemUnderTest, Transport};
use crate::harness::trial::{Metric, Trial};
use roam_emu::queue::QueueLimit;
use roam_emu::spec::LinkConfig;
use roam_trace::scenario::Scenario;

/// nginx's HTTP/1.1 port in the server namespace.
pub const HTTP1_PORT: u16 = 8080;
/// nginx's HTTP/2 (cleartext, prior knowledge) port.
pub const HTTP2_PORT: u16 = 8081;

/// How a dataset is fetched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tool {
    /// FastHLA: the parameters learnt from the sweeps, per size cluster.
    FastHla,
    /// FastHLA's engine with fixed parameters (a sweep point), over HTTP/1.1 or HTTP/2 as they
    /// say.
    Fixed(Params),
    /// `wget -i`: one file after another on one connection.
    Wget,
    /// `curl` with every URL: one after another on one connection, HTTP/1.1.
    Curl,
    /// `nghttp` with every URL: every request a stream of one HTTP/2 connection (prior
    /// knowledge), as many at once as the server allows, with nghttp's own flow-control
    /// windows (64 KiB per stream and per connection: at most 64 KiB a round trip).
    Nghttp,
    /// The same with 16 MiB windows (`-w 24 -W 24`), as browsers open theirs: HTTP/2 without
    /// the small windows' limit.
    NghttpWide,
    /// `aria2c -i` with its defaults: 5 files at once, one connection each.
    Aria2,
}

/// A transfer tool is a system under test: the unmodified tool (or FastHLA's engine) over
/// plain TCP on the scenario's one link.
impl SystemUnderTest for Tool {
    fn name(&self) -> &str {
        Tool::name(*self)
    }

    fn transport(&self) -> Transport {
        Transport::Tcp
    }

    fn links(
        &self,
        scenario: &Scenario,
        _duration: Duration,
        queue: QueueLimit,
    ) -> Result<Vec<LinkConfig>> {
        one_link(scenario, queue, "a bulk transfer", "wifi-bulk, lte-bulk")
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl Tool {
    /// The tools users run today, compared with FastHLA.
    pub const BASELINES: [Tool; 5] = [
        Tool::Wget,
        Tool::Curl,
        Tool::Nghttp,
        Tool::NghttpWide,
        Tool::Aria2,
    ];

    /// Name on the command line and in reports (`fixed-cc8-p2-bs64k` for a sweep point).
    pub fn name(self) -> &'static str {
        match self {
            Tool::FastHla => "fasthla",
            Tool::Wget => "wget",
            Tool::Curl => "curl",
            Tool::Nghttp => "nghttp",
            Tool::NghttpWide => "nghttp-16m",
            Tool::Aria2 => "aria2",
            Tool::Fixed(p) => {
                static NAMES: OnceLock<Mutex<HashMap<Params, &'static str>>> = OnceLock::new();
                let mut m = NAMES.get_or_init(Default::default).lock().unwrap();
                m.entry(p).or_insert_with(|| {
                    let h2 = if p.protocol == Protocol::Http2 {
                        "-h2"
                    } else {
                        ""
                    };
                    Box::leak(
                        format!("fixed-cc{}-p{}-bs{}k{h2}", p.cc, p.p, p.bs / 1024)
                            .into_boxed_str(),
                    )
                })
            }
        }
    }

    /// Parse a name.
    pub fn parse(s: &str) -> Option<Tool> {
        if let Some(rest) = s.strip_prefix("fixed-cc") {
            let (cc, rest) = rest.split_once("-p")?;
            let (p, bs) = rest.split_once("-bs")?;
            let (bs, protocol) = match bs.strip_suffix("-h2") {
                Some(bs) => (bs, Protocol::Http2),
                None => (bs, Protocol::Http1),
            };
            let params = Params {
                cc: cc.parse().ok()?,
                p: p.parse().ok()?,
                bs: bs.strip_suffix('k')?.parse::<usize>().ok()? * 1024,
                protocol,
            };
            return params.validate().is_ok().then_some(Tool::Fixed(params));
        }
        [Tool::FastHla]
            .into_iter()
            .chain(Tool::BASELINES)
            .find(|t| t.name() == s)
    }

    /// The program it needs installed (FastHLA is roam itself).
    pub fn needs(self) -> Option<crate::harness::setup::Need> {
        match self {
            Tool::Wget => Some(crate::harness::setup::WGET),
            Tool::Curl => Some(crate::harness::setup::CURL),
            Tool::Nghttp | Tool::NghttpWide => Some(crate::harness::setup::NGHTTP),
            Tool::Aria2 => Some(crate::harness::setup::ARIA2),
            Tool::FastHla | Tool::Fixed(_) => None,
        }
    }
}

/// The paper's datasets (sizes from the paper; how many files is ours).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dataset {
    /// Web pages of 56-155 KB (mean 112 KB).
    Html,
    /// Images of 2-3.2 MB (mean 2.7 MB).
    Image,
    /// One video of 152 MB.
    Video,
    /// Half the pages, half the images and a video of a third the size.
    Mixed,
}

impl Dataset {
    /// Every dataset, in the paper's order.
    pub const ALL: [Dataset; 4] = [
        Dataset::Html,
        Dataset::Image,
        Dataset::Video,
        Dataset::Mixed,
    ];

    /// Its name (the lab's application).
    pub fn name(self) -> &'static str {
        match self {
            Dataset::Html => "html",
            Dataset::Image => "image",
            Dataset::Video => "video",
            Dataset::Mixed => "mixed",
        }
    }

    /// File sizes for `seed`: whole (100 pages, 40 images, 152 MB) or, `quick`, small (20
    /// pages, 4 images, a 20 MB video).
    pub fn sizes(self, seed: u64, quick: bool) -> Vec<u64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xb01c);
        let pages = |n: usize, rng: &mut ChaCha8Rng| -> Vec<u64> {
            (0..n).map(|_| rng.gen_range(56_000..=155_000)).collect()
        };
        let images = |n: usize, rng: &mut ChaCha8Rng| -> Vec<u64> {
            (0..n)
                .map(|_| rng.gen_range(2_000_000..=3_200_000))
                .collect()
        };
        let video = if quick { 20_000_000 } else { 152_000_000 };
        let (np, ni) = if quick { (20, 4) } else { (100, 40) };
        match self {
            Dataset::Html => pages(np, &mut rng),
            Dataset::Image => images(ni, &mut rng),
            Dataset::Video => vec![video],
            Dataset::Mixed => {
                let mut v = pages(np / 2, &mut rng);
                v.extend(images(ni / 2, &mut rng));
                v.push(video / 3);
                v
            }
        }
    }
}

/// What FastHLA learnt from the sweeps, set by the lab before the comparison runs.
static LEARNT: OnceLock<Mutex<Option<Update>>> = OnceLock::new();

/// Give FastHLA's trials the update learnt from the sweeps.
pub fn set_learnt(u: Update) {
    *LEARNT.get_or_init(Default::default).lock().unwrap() = Some(u);
}

fn learnt() -> Option<Update> {
    LEARNT.get()?.lock().unwrap().clone()
}

/// The stretch of a link's trace whose mean capacity is the network's bandwidth in a
/// transfer's condition. Every trial starts at the trace's beginning, and the datasets take
/// 17-190 s over the LTE trace: the condition is the capacity of the stretch the transfers
/// run through, as a device's estimator would report it. (Over 600 s, the window first used,
/// the LTE trace averages 5.4 Mbit/s against 7.4 over its first 120 s and 7.7 over the first
/// 170, so every LTE video transfer, at about 7.2, ran "faster than the bandwidth" and the
/// HLA server dropped it as impossible: 287 of the 456 LTE sweep records.)
pub const CONDITION_WINDOW: Duration = Duration::from_secs(120);

/// How a FastHLA trial's note starts where it says what the broker chose for a group of
/// files ([`choice_note`]); the report gathers these per dataset and network.
pub const CHOSE: &str = "FastHLA chose ";

/// The note of FastHLA's choice for `files` files: `FastHLA chose cc 8 p 1 bs 64 KiB HTTP/1.1
/// for 40 file(s)`.
pub fn choice_note(p: Params, files: usize) -> String {
    let version = match p.protocol {
        Protocol::Http1 => "HTTP/1.1",
        Protocol::Http2 => "HTTP/2",
    };
    format!(
        "{CHOSE}cc {} p {} bs {} KiB {version} for {files} file(s)",
        p.cc,
        p.p,
        p.bs / 1024
    )
}

/// The condition a network is in, as the device knows it: the link's RTT (the added one; the
/// bulk scenarios' links have no delay of their own) and its mean capacity down over
/// [`CONDITION_WINDOW`].
pub fn condition_on(link: &roam_trace::LinkTrace, mean_file_bytes: f64) -> Condition {
    let zero = roam_core::Time::ZERO;
    Condition {
        rtt_ms: 2.0 * link.delay.value_at(zero).as_secs_f64() * 1e3,
        bandwidth_mbps: link
            .down
            .mean_rate(zero, zero + CONDITION_WINDOW)
            .map_or(0.0, |r| r.as_bps() as f64 / 1e6),
        mean_file_bytes,
    }
}

/// The condition a trial's network is in ([`condition_on`] its one link).
pub fn condition_of(t: &Trial, mean_file_bytes: f64) -> Condition {
    condition_on(&t.emu.links()[0].config.trace, mean_file_bytes)
}

/// nginx serving `dir` on both ports in the server namespace; stopped when dropped.
struct Server {
    child: std::process::Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_nginx(dir: &Path, addr: std::net::Ipv4Addr) -> Result<Server> {
    let d = dir.display();
    let servers = format!(
        "sendfile on;\n  keepalive_requests 100000;\n  \
         server {{ listen {addr}:{HTTP1_PORT}; root {d}/www; \
         add_header Alt-Svc 'h2c=\":{HTTP2_PORT}\"' always; }}\n  \
         server {{ listen {addr}:{HTTP2_PORT} http2; root {d}/www; }}"
    );
    let child = crate::servers::nginx::launch(dir, &servers, (addr, HTTP1_PORT).into())?;
    Ok(Server { child })
}

/// Run `cmd` to its end, or kill it after `limit`: its output.
fn output_within(cmd: &mut Command, limit: Duration, what: &str) -> Result<std::process::Output> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // A tool still moving a dataset does not outlive a killed lab.
    let mut child = roam_emu::run::spawn_lasting(std::mem::replace(cmd, Command::new("true")))
        .with_context(|| format!("running {what}"))?;
    let deadline = Instant::now() + limit;
    loop {
        if child.try_wait()?.is_some() {
            return Ok(child.wait_with_output()?);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("{what} did not finish within {} s", limit.as_secs());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Run one trial: `dataset` fetched with the trial's tool.
pub fn run(t: &Trial, dataset: Dataset, quick: bool) -> Result<Vec<Metric>> {
    let Some(&tool) = t.system.get::<Tool>() else {
        bail!(
            "a bulk transfer runs with a transfer tool, not `{}`",
            t.system.name()
        );
    };
    let sizes = dataset.sizes(t.seed, quick);
    let site = Scratch::new("bulk-site")?;
    let www = site.join("www");
    std::fs::create_dir_all(&www).with_context(|| format!("creating {}", www.display()))?;
    let names: Vec<String> = (0..sizes.len())
        .map(|i| format!("{}-{i:03}.bin", dataset.name()))
        .collect();
    for (n, &s) in names.iter().zip(&sizes) {
        // The content does not matter to HTTP or TCP (nothing is compressed): sparse files.
        let f = std::fs::File::create(www.join(n))?;
        f.set_len(s)?;
    }
    let link = &t.emu.links()[0];
    let addr = link.peer_addr;
    let (dir, a) = (site.to_path_buf(), addr);
    let server = t
        .emu
        .spawn_in_server(move || start_nginx(&dir, a))
        .join()
        .map_err(|_| anyhow!("the nginx starter panicked"))?
        .context("entering the server namespace")??;
    let out = Scratch::new("bulk-out")?;
    // nghttp can check no file (it saves none); FastHLA's engine over HTTP/2 saves them.
    let h2 = matches!(tool, Tool::Nghttp | Tool::NghttpWide);
    let port = match tool {
        Tool::Fixed(p) if p.protocol == Protocol::Http2 => HTTP2_PORT,
        _ if h2 => HTTP2_PORT,
        _ => HTTP1_PORT,
    };
    let urls: Vec<String> = names
        .iter()
        .map(|n| format!("http://{addr}:{port}/{n}"))
        .collect();
    let mean = sizes.iter().sum::<u64>() as f64 / sizes.len() as f64;
    let cond = condition_of(t, mean);
    let down0 = link.down.delivered_bytes.load(Ordering::Relaxed);
    let (o, u, listing) = (out.to_path_buf(), urls.clone(), sizes.clone());
    let update = learnt();
    let limit = t.duration;
    let started = Instant::now();
    let result = t
        .emu
        .spawn_in_client(move || fetch(tool, &u, &listing, &o, cond, update, limit))
        .join()
        .map_err(|_| anyhow!("the transfer panicked"))?
        .context("entering the client namespace")?;
    let wall = started.elapsed();
    let carried = link.down.delivered_bytes.load(Ordering::Relaxed) - down0;
    drop(server);
    let note = result?;
    let total: u64 = sizes.iter().sum();
    if h2 && carried < total {
        bail!(
            "{}: the link carried {carried} of the dataset's {total} bytes",
            tool.name()
        );
    }
    // Every byte of every file, under its name.
    for (n, &s) in names.iter().zip(&sizes).filter(|_| !h2) {
        let got = std::fs::metadata(out.join(n)).map(|m| m.len()).unwrap_or(0);
        if got != s {
            bail!("{}: {n} has {got} of its {s} bytes", tool.name());
        }
    }
    drop((out, site));
    if let Some(n) = note {
        t.note(n);
    }
    let radio = match link.config.kind {
        roam_trace::LinkKind::Cellular => "huang2012/lte",
        _ => "huang2012/wifi",
    };
    let energy = modelled_energy_per_100mb(radio, total, wall)?;
    Ok(vec![
        Metric::new(
            "throughput_mbps",
            total as f64 * 8.0 / 1e6 / wall.as_secs_f64(),
            "Mbit/s",
        ),
        Metric::new("seconds", wall.as_secs_f64(), "s"),
        Metric::new("energy_j_per_100mb", energy, "J"),
        Metric::new("carried_mb", carried as f64 / 1e6, "MB"),
        Metric::new("rtt_ms", cond.rtt_ms, "ms"),
        Metric::new("bandwidth_mbps", cond.bandwidth_mbps, "Mbit/s"),
        Metric::new("mean_file_bytes", mean, "B"),
    ])
}

/// Fetch `urls` into `out` with `tool` (inside the client namespace), within `limit`; a note
/// to keep, if any. FastHLA is given the dataset's listing (`sizes`: each file's size, as a
/// `--list` file of `URL SIZE` lines gives them); the other tools have no use for it.
///
/// wget, curl and aria2 take the URLs from a list file ([`fetch_listed`]), nghttp on its
/// command line ([`fetch_nghttp`]); a sweep point runs FastHLA's session with its fixed
/// parameters ([`run_session`]), FastHLA with what it learnt ([`fetch_fasthla`]).
fn fetch(
    tool: Tool,
    urls: &[String],
    sizes: &[u64],
    out: &Path,
    cond: Condition,
    update: Option<Update>,
    limit: Duration,
) -> Result<Option<String>> {
    let list = out.join("urls.txt");
    match tool {
        Tool::Wget => fetch_listed(
            tool,
            &list,
            urls.join("\n"),
            Command::new("wget")
                .args(["-q", "-P"])
                .arg(out)
                .arg("-i")
                .arg(&list),
            limit,
        ),
        Tool::Curl => {
            let mut cfg = String::new();
            for u in urls {
                cfg.push_str(&format!("url = \"{u}\"\n"));
            }
            fetch_listed(
                tool,
                &list,
                cfg,
                Command::new("curl")
                    .args(["-s", "-S", "--fail", "--remote-name-all", "--output-dir"])
                    .arg(out)
                    .arg("-K")
                    .arg(&list),
                limit,
            )
        }
        Tool::Nghttp | Tool::NghttpWide => fetch_nghttp(tool, urls, limit),
        Tool::Aria2 => fetch_listed(
            tool,
            &list,
            urls.join("\n"),
            Command::new("aria2c")
                .args(["-q", "--allow-overwrite=true", "-d"])
                .arg(out)
                .arg("-i")
                .arg(&list),
            limit,
        ),
        Tool::Fixed(p) => {
            run_session(specs_of(urls)?, &Tuning::Fixed(p), false, cond, out, limit).map(|_| None)
        }
        Tool::FastHla => fetch_fasthla(urls, sizes, out, cond, update, limit),
    }
}

/// Run `tool`'s command `cmd` to its end within `limit`; its failure, with its standard
/// error, is an error.
fn run_tool(tool: Tool, cmd: &mut Command, limit: Duration) -> Result<()> {
    let o = output_within(cmd, limit, tool.name())?;
    if !o.status.success() {
        bail!(
            "{} failed ({}): {}",
            tool.name(),
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
    Ok(())
}

/// Fetch with a tool that reads its URLs from a file: write `contents` (the URLs, in the
/// tool's format) to `list`, run `cmd` ([`run_tool`]), and remove the list (it is not part of
/// the dataset the trial checks).
fn fetch_listed(
    tool: Tool,
    list: &Path,
    contents: String,
    cmd: &mut Command,
    limit: Duration,
) -> Result<Option<String>> {
    std::fs::write(list, contents)?;
    run_tool(tool, cmd, limit)?;
    std::fs::remove_file(list)?;
    Ok(None)
}

/// Fetch with nghttp (`tool`: with its default or its wide windows), which saves no file: it
/// succeeds when every response was 200, by its statistics.
fn fetch_nghttp(tool: Tool, urls: &[String], limit: Duration) -> Result<Option<String>> {
    let mut c = Command::new("nghttp");
    c.args(["-n", "-s"]);
    if tool == Tool::NghttpWide {
        c.args(["-w", "24", "-W", "24"]);
    }
    let o = output_within(c.args(urls), limit, tool.name())?;
    // Its statistics: one line per request, the status in the fifth column.
    let ok = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| l.split_whitespace().nth(4) == Some("200"))
        .count();
    if !o.status.success() || ok != urls.len() {
        bail!(
            "nghttp ({}): {ok} of {} responses were 200: {}",
            o.status,
            urls.len(),
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
    Ok(None)
}

/// Fetch with FastHLA as `roam transfer get --auto` runs it: its client session
/// ([`roam_transfer::session`]) with what it learnt (`update`; the defaults and a note
/// without), the files' sizes as their listing gives them, in the network's `cond`, with at most
/// [`session::MAX_CHANNELS`] channels ([`run_session`]). Its choices come back as the note: per
/// group, why a version was not taken if it was not, and what was chosen ([`choice_note`]).
fn fetch_fasthla(
    urls: &[String],
    sizes: &[u64],
    out: &Path,
    cond: Condition,
    update: Option<Update>,
    limit: Duration,
) -> Result<Option<String>> {
    let mut broker = Broker::default();
    let mut notes = Vec::new();
    match update {
        Some(u) => broker.apply(u),
        None => notes.push("FastHLA had nothing learnt: the defaults".to_string()),
    }
    let mut specs = specs_of(urls)?;
    for (f, &size) in specs.iter_mut().zip(sizes) {
        f.listed_size = Some(size);
    }
    let tuning = Tuning::Broker {
        broker: &broker,
        max_channels: session::MAX_CHANNELS,
    };
    let outcome = run_session(specs, &tuning, true, cond, out, limit)?;
    for run in &outcome.groups {
        let g = &run.group;
        notes.extend(g.note.map(String::from));
        notes.push(choice_note(g.choice.params, g.files.len()));
    }
    Ok((!notes.is_empty()).then(|| notes.join("; ")))
}

/// FastHLA's client session ([`Session`]) of `specs` into `out` on a runtime of its own, with
/// `tuning`'s parameters in the network's `cond` (the link's round trip and capacity, not the
/// survey's measure), surveying first if `surveyed` (a broker's always does), each phase
/// within `limit`; the first file that failed is the error.
fn run_session(
    specs: Vec<FileSpec>,
    tuning: &Tuning,
    surveyed: bool,
    cond: Condition,
    out: &Path,
    limit: Duration,
) -> Result<Outcome> {
    let options = Options {
        survey: surveyed,
        time_limit: Some(limit),
        ..Options::default()
    };
    let network = Network {
        rtt_ms: Some(cond.rtt_ms),
        bandwidth_mbps: cond.bandwidth_mbps,
    };
    let session = Session::new(specs, options)?;
    let rt = tokio::runtime::Runtime::new()?;
    let outcome = rt.block_on(session.run(tuning, network, out, &mut ()))?;
    for run in &outcome.groups {
        if let Some(f) = run.report.failures().first() {
            bail!("{}: {}", f.url, f.outcome);
        }
    }
    Ok(outcome)
}

fn specs_of(urls: &[String]) -> Result<Vec<FileSpec>> {
    Ok(urls
        .iter()
        .map(|u| FileSpec::from_url(u))
        .collect::<Result<Vec<_>, _>>()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_parse_back() {
        for t in [Tool::FastHla]
            .into_iter()
            .chain(Tool::BASELINES)
            .chain([Tool::Fixed(Params {
                cc: 8,
                p: 2,
                bs: 16384,
                ..Params::default()
            })])
        {
            assert_eq!(Tool::parse(t.name()), Some(t), "{}", t.name());
        }
        assert_eq!(Tool::parse("fixed-cc0-p1-bs64k"), None);
        assert_eq!(Tool::parse("scp"), None);
    }

    #[test]
    fn a_tool_that_hangs_is_killed_at_its_limit() {
        let e = output_within(
            Command::new("sleep").arg("5"),
            Duration::from_millis(100),
            "sleep",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("did not finish within"), "{e}");
        let o = output_within(
            Command::new("sh").args(["-c", "echo hi; exit 3"]),
            Duration::from_secs(10),
            "sh",
        )
        .unwrap();
        assert_eq!(
            (o.status.code(), o.stdout.as_slice()),
            (Some(3), &b"hi\n"[..])
        );
    }

    #[test]
    fn datasets_have_the_seeds_sizes() {
        let html = Dataset::Html.sizes(1, false);
        assert_eq!(html.len(), 100);
        assert!(html.iter().all(|s| (56_000..=155_000).contains(s)));
        let img = Dataset::Image.sizes(1, true);
        assert!(img.iter().all(|s| (2_000_000..=3_200_000).contains(s)));
        assert_eq!(Dataset::Video.sizes(1, false), vec![152_000_000]);
        assert_eq!(Dataset::Html.sizes(3, false), Dataset::Html.sizes(3, false));
    }
}
