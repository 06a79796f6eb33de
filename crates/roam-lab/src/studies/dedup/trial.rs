//! One trial of `roam lab dedup`: a reader of the PostgreSQL manual, as static pages (`docs`)
//! or as a MediaWiki's articles (`wiki`), of Precog's news site (`news`, [`super::news`]), or
//! of a mailing list's mail (`mail`, [`super::mail`]), through the real data path.
//!
//! In the emulator's server namespace: nginx serving the manual's older version (`wiki`: php-fpm
//! running MediaWiki behind nginx; `mail`: Dovecot and no nginx; [`Site`] says what differs),
//! and two of `roam_net`'s [`Relay`]s (dd-src for the systems that deduplicate, the zstd compressor
//! for those that compress), each with caches of its own: the upstream nodes of two places
//! (`ac-multi`: two per place, WiFi's and cellular's, each with a dd-src of its own).
//! In the client namespace: a `roam_net` [`Proxy`] for each place (the SOCKS5 proxy, dd-dst,
//! the decompressor; `ac-multi`'s sends each new connection to the relay of the network roam
//! would use then), sharing one phone's cache, and curl fetching pages through them, one
//! connection each. The proxies' multi-sockets use both networks (WiFi and cellular), as roam
//! places foreground traffic; when the scenario's WiFi leaves, connections move to cellular.
//!
//! **The phone moves** between the phases: before the upgrade the reader reads through the
//! first relay, after it through the second, which has seen none of what the phone holds (the
//! node change of the thesis's motivation, ch. IV). The phone's cache goes with it; for
//! `zstd-dict` the previous responses stay available at the second relay too (both relays
//! share them), as they would at an origin server speaking RFC 9842, giving that baseline its
//! best case.
//!
//! The reader's week: **before the upgrade** they read [`Workload::pages`] pages drawn from
//! the manual; then the site is upgraded to the newer version (its root swapped under
//! nginx; the wiki instead gets a week's edits, [`wiki::edits`]); **after** they read as
//! many again, half of them pages they read before (the sections one keeps coming back to)
//! and half new ones. Between pages they think for an
//! exponential time ([`Workload::think`]). The same seed draws the same pages and pauses for
//! every system.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use roam_dedup::name::NameSet;
use roam_dedup::source::SourceConfig;
use roam_dedup::{Destination, Source};
use roam_net::proxy::compress::{Dictionaries, DictionaryConfig};
use roam_net::proxy::{
    Compression, NetworkMatch, NetworkRelay, Proxy, ProxyConfig, Relay, RelayConfig,
};

use super::corpus::{self, Docs};
use super::fetch::fetch;
use super::{mail, nodes, wiki, DedupSystem};
use crate::harness::scratch::Scratch;
use crate::harness::service::{lock, point, start};
use crate::harness::trial::{Metric, Trial};
use crate::servers::{mediawiki, nginx};

/// Where the relays listen (server namespace): before the move, and after (`ac-multi`: the
/// WiFi's relays).
const RELAY_PORTS: [u16; 2] = [7500, 7501];
/// Where `ac-multi`'s cellular relays listen: before the move, and after.
const CELL_RELAY_PORTS: [u16; 2] = [7510, 7511];
/// Where nginx listens (the server namespace's loopback: only the relay reaches it).
pub(super) const HTTP_PORT: u16 = 8080;
/// Where the proxies listen (the client namespace's loopback): before the move, and after.
const SOCKS_PORTS: [u16; 2] = [1080, 1081];
/// Previous responses kept as zstd dictionaries at each end.
pub const DICTIONARY_BYTES: usize = 64 << 20;

/// How much a reader reads.
#[derive(Clone, Copy, Debug)]
pub struct Workload {
    /// Pages read before the upgrade, and as many after.
    pub pages: usize,
    /// Mean pause between two pages.
    pub think: Duration,
}

impl Workload {
    /// A reader's pause before a page: exponential with mean [`Workload::think`], at most ten
    /// times it.
    pub fn pause(&self, rng: &mut ChaCha8Rng) -> Duration {
        let u: f64 = rng.gen_range(f64::EPSILON..1.0);
        self.think.mul_f64(-u.ln()).min(self.think * 10)
    }

    /// A full run's reader, or a quick one's (for a trial of `duration`: the quick trials
    /// are the ones under 10 minutes; the full ones last 30).
    pub fn for_duration(duration: Duration) -> Workload {
        if duration < Duration::from_secs(10 * 60) {
            Workload {
                pages: 30,
                think: Duration::from_millis(300),
            }
        } else {
            Workload {
                pages: 150,
                think: Duration::from_secs(2),
            }
        }
    }
}

/// The pages of each phase (drawn from `pages`), and the pause before each, for `seed`.
pub fn reading(pages: &[String], w: Workload, seed: u64) -> Vec<(bool, String, Duration)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xded0);
    let n = w.pages.min(pages.len());
    let mut pool = pages.to_vec();
    pool.shuffle(&mut rng);
    let before: Vec<String> = pool[..n].to_vec();
    let mut after: Vec<String> = before.choose_multiple(&mut rng, n / 2).cloned().collect();
    after.extend(pool[n..].iter().take(n - n / 2).cloned());
    after.shuffle(&mut rng);
    let mut out = Vec::new();
    for p in before {
        let d = w.pause(&mut rng);
        out.push((false, p, d));
    }
    for p in after {
        let d = w.pause(&mut rng);
        out.push((true, p, d));
    }
    out
}

/// What the reader reads: a site served in the server namespace (by nginx, unless it brings a
/// server of its own), how a page is asked for and checked, and what changes between the two
/// readings.
pub(super) trait Site: Send + Sync + 'static {
    /// nginx's `server` block (listening on `127.0.0.1:HTTP_PORT`) and state directory;
    /// `None`: the site serves itself.
    fn nginx(&self) -> Option<(String, PathBuf)>;
    /// The request path of `page` on the web server.
    fn path(&self, page: &str) -> String {
        page.to_string()
    }
    /// The URL curl fetches `page` by (through the SOCKS proxy).
    fn url(&self, page: &str) -> String {
        format!("http://127.0.0.1:{HTTP_PORT}/{}", self.path(page))
    }
    /// The port of the server namespace's loopback the relays carry connections to.
    fn target_port(&self) -> u16 {
        HTTP_PORT
    }
    /// Between the readings: the upgrade, or the week's edits.
    fn change(&self) -> Result<()>;
    /// `body` is what the site serves for `page` now, byte for byte (the wiki: but for what
    /// MediaWiki computes per request, [`mediawiki::masked`]); else the trial fails: whatever a
    /// system does on the way, the reader must get the page as served.
    fn check(&self, page: &str, body: &[u8]) -> Result<()>;
}

/// The manual as static files: a root whose `current` link is swapped from one version to the
/// other.
struct DocsSite {
    dir: Scratch,
    old: PathBuf,
    new: PathBuf,
    upgraded: std::sync::atomic::AtomicBool,
}

impl DocsSite {
    fn new(docs: &Docs) -> Result<DocsSite> {
        let dir = Scratch::new("dedup-docs")?;
        point(&dir, &docs.old.1)?;
        Ok(DocsSite {
            dir,
            old: docs.old.1.clone(),
            new: docs.new.1.clone(),
            upgraded: false.into(),
        })
    }
}

/// nginx's `server` block for static files under `dir/current` (the link a site swaps).
pub(super) fn static_server(dir: &std::path::Path) -> String {
    format!(
        "server {{ listen 127.0.0.1:{HTTP_PORT}; root {}/current; }}",
        dir.display()
    )
}

impl Site for DocsSite {
    fn nginx(&self) -> Option<(String, PathBuf)> {
        Some((static_server(&self.dir), self.dir.join("nginx")))
    }

    fn change(&self) -> Result<()> {
        point(&self.dir, &self.new)?;
        self.upgraded.store(true, Ordering::Relaxed);
        Ok(())
    }

    fn check(&self, page: &str, body: &[u8]) -> Result<()> {
        let served = if self.upgraded.load(Ordering::Relaxed) {
            &self.new
        } else {
            &self.old
        };
        served_as_is(&served.join(page), body)
    }
}

/// `body` is `file`'s bytes exactly; else an error naming the file and both sizes.
pub(super) fn served_as_is(file: &std::path::Path, body: &[u8]) -> Result<()> {
    let want = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    if body != want {
        bail!(
            "{} arrived altered: {} bytes, {} served",
            file.display(),
            body.len(),
            want.len()
        );
    }
    Ok(())
}

/// The wiki: MediaWiki with the manual's pages as articles, edited between the readings
/// ([`wiki`](super::wiki)).
struct WikiSite {
    wiki: Mutex<mediawiki::Wiki>,
    edits: Vec<(String, String)>,
    /// Last: removed after everything that uses it.
    dir: Scratch,
}

impl WikiSite {
    /// Install the wiki with `articles`; `seed` draws the week's edits.
    fn new(articles: &[(String, String)], seed: u64) -> Result<WikiSite> {
        let dir = Scratch::new("dedup-wiki")?;
        let wiki = mediawiki::Wiki::install(
            &dir.join("wiki"),
            &format!("127.0.0.1:{HTTP_PORT}"),
            articles,
        )?;
        Ok(WikiSite {
            wiki: Mutex::new(wiki),
            edits: wiki::edits(articles, seed, wiki::WEEK_EDITS_ONE_IN),
            dir,
        })
    }
}

impl Site for WikiSite {
    fn nginx(&self) -> Option<(String, PathBuf)> {
        Some((
            lock(&self.wiki).nginx_server(&format!("127.0.0.1:{HTTP_PORT}")),
            self.dir.join("nginx"),
        ))
    }

    fn path(&self, page: &str) -> String {
        mediawiki::page_path(&wiki::title(page))
    }

    fn change(&self) -> Result<()> {
        lock(&self.wiki).import(&self.edits, "an editor's week")
    }

    fn check(&self, page: &str, body: &[u8]) -> Result<()> {
        // The same page fetched directly (nginx's Unix socket: no emulated link on the way),
        // compared with what MediaWiki computes per request blanked.
        let socket = lock(&self.wiki).direct_socket();
        let url = format!("http://127.0.0.1:{HTTP_PORT}/{}", self.path(page));
        let out = Command::new("curl")
            .args(["-sS", "--max-time", "60", "--unix-socket"])
            .arg(&socket)
            .arg(&url)
            .stdin(Stdio::null())
            .output()
            .context("running curl")?;
        if !out.status.success() {
            bail!(
                "fetching {url} directly: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        if mediawiki::masked(body) != mediawiki::masked(&out.stdout) {
            bail!(
                "{url} arrived altered: {} bytes, {} served directly",
                body.len(),
                out.stdout.len()
            );
        }
        Ok(())
    }
}

/// What the relays and the proxies of a system hold, kept to read their counters.
struct Ends {
    sources: Vec<Arc<Mutex<Source>>>,
    /// Of those, the cellular relays' (`ac-multi`).
    cellular: Vec<Arc<Mutex<Source>>>,
    destination: Option<Arc<Mutex<Destination>>>,
}

/// One place's upstream nodes and the phone's proxy there: one relay, or (`ac-multi`) one
/// per network, the first the WiFi's.
struct Place {
    relays: Vec<RelayConfig>,
    proxy: ProxyConfig,
}

/// The relay and proxy configurations of `sys`, one [`Place`] per place.
fn configs(t: &Trial, sys: DedupSystem, target_port: u16) -> Result<(Vec<Place>, Ends)> {
    let (dedup, feedback) = (sys.dedups(), sys.feedback());
    // One phone: one cache, one store of dictionaries.
    let destination = dedup.then(|| nodes::destination(feedback));
    let dicts = || {
        Arc::new(Mutex::new(Dictionaries::new(DictionaryConfig {
            bytes: DICTIONARY_BYTES,
        })))
    };
    let (relay_dicts, phone_dicts) = (dicts(), dicts());
    let mut places = Vec::new();
    let (mut sources, mut cellular) = (Vec::new(), Vec::new());
    for (place, socks_port) in SOCKS_PORTS.into_iter().enumerate() {
        // The place's relays: WiFi's (or the only one) first.
        let ports: &[u16] = if sys.per_network() {
            &[RELAY_PORTS[place], CELL_RELAY_PORTS[place]]
        } else {
            &[RELAY_PORTS[place]]
        };
        let mut relays = Vec::new();
        let mut upstream = Vec::new();
        for &port in ports {
            let (mut relay, relay_at, key) = nodes::relay_to(t, port, target_port)?;
            if dedup {
                // Each relay's dd-src has the thesis's memory of its own.
                let source = nodes::source(feedback)?;
                relay.dedup = Some(source.clone());
                if port == CELL_RELAY_PORTS[place] {
                    cellular.push(source.clone());
                }
                sources.push(source);
            }
            if sys == DedupSystem::ZstdDict {
                relay.dictionaries = Some(relay_dicts.clone());
            }
            relays.push(relay);
            upstream.push((relay_at, key));
        }
        let (default_at, default_key) = upstream[0].clone();
        let mut proxy = ProxyConfig::new(
            SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, socks_port)),
            default_at,
            Some(default_key),
        );
        proxy.options =
            crate::harness::channel::roam_options(t.system.clone(), &t.client_links().cellular);
        if let [(wifi_at, wifi_key), (cell_at, cell_key)] = &upstream[..] {
            // A new connection goes to the relay of the network roam would use then: WiFi's
            // while WiFi is up (its carrier goes 2 s into an outage), else cellular's.
            proxy.per_network = vec![
                NetworkRelay::new(NetworkMatch::NonCellular, *wifi_at, Some(wifi_key.clone())),
                NetworkRelay::new(NetworkMatch::Cellular, *cell_at, Some(cell_key.clone())),
            ];
        }
        if dedup {
            proxy.dedup = destination.clone();
        }
        if sys == DedupSystem::ZstdDict {
            proxy.compress = Compression::ZstdDict(phone_dicts.clone());
        } else if sys.compresses() {
            proxy.compress = Compression::Zstd;
        }
        places.push(Place { relays, proxy });
    }
    Ok((
        places,
        Ends {
            sources,
            cellular,
            destination,
        },
    ))
}

/// What the reader saw.
struct Read {
    /// Each page's response as the server sent it ([`Fetched::wire`]), in order, and its
    /// fetch time; `after`: read after the upgrade.
    responses: Vec<(bool, Vec<u8>, Duration)>,
    failures: Vec<String>,
    unfinished: bool,
}

/// Run the `docs` reader of `t` under its system.
pub fn run_docs(t: &Trial) -> Result<Vec<Metric>> {
    let docs = corpus::docs()?;
    let site = Arc::new(DocsSite::new(&docs)?);
    run_site(t, site, reading(&docs.pages, workload(t), t.seed))
}

/// The reader of `t`: a quick run's or a full one's.
fn workload(t: &Trial) -> Workload {
    Workload::for_duration(t.duration)
}

/// Run the `wiki` reader of `t` under its system.
pub fn run_wiki(t: &Trial) -> Result<Vec<Metric>> {
    let docs = corpus::docs()?;
    let articles = wiki::articles(&docs)?;
    let site = Arc::new(WikiSite::new(&articles, t.seed)?);
    let pages: Vec<String> = docs.pages.clone();
    let fpm_site = site.clone();
    let fpm = t
        .emu
        .spawn_in_server(move || lock(&fpm_site.wiki).serve())
        .join()
        .map_err(|_| anyhow!("php-fpm's start panicked"))??
        .context("starting php-fpm")?;
    let r = run_site(t, site.clone(), reading(&pages, workload(t), t.seed));
    // php-fpm stops before the site's directory goes (with the last `site`).
    drop(fpm);
    drop(site);
    r
}

/// Run the `news` reader of `t` under its system.
pub fn run_news(t: &Trial) -> Result<Vec<Metric>> {
    let site = Arc::new(super::news::NewsSite::new(t.seed)?);
    run_site(t, site, reading(&super::news::slots(), workload(t), t.seed))
}

/// Run the `mail` reader of `t` under its system: the list's mail ([`mail`]) in Dovecot.
pub fn run_mail(t: &Trial) -> Result<Vec<Metric>> {
    let docs = corpus::docs()?;
    let articles = wiki::articles(&docs)?;
    let files = mail::manual_pages(&docs.old.1, &docs.pages, mail::ATTACHABLE)?;
    let w = workload(t);
    let mailbox = mail::mailbox(&articles, &files, t.seed, w.pages)?;
    let plan = mail::reading(&mailbox, w, t.seed);
    let site = Arc::new(mail::MailSite::new(mailbox));
    let serving = site.clone();
    t.emu
        .spawn_in_server(move || serving.serve())
        .join()
        .map_err(|_| anyhow!("Dovecot's start panicked"))??
        .context("starting Dovecot")?;
    run_site(t, site, plan)
}

/// Run a reader of `site` under `t`'s system, reading `plan` ([`reading`]): nginx in the
/// server namespace (unless the site serves itself), the system's relays and proxies, the
/// reading, the metrics.
fn run_site(
    t: &Trial,
    site: Arc<dyn Site>,
    plan: Vec<(bool, String, Duration)>,
) -> Result<Vec<Metric>> {
    let sys = *t
        .system
        .get::<DedupSystem>()
        .ok_or_else(|| anyhow!("`{}` is not a system of roam lab dedup", t.system.name()))?;
    let mut nginx = match site.nginx() {
        Some((servers, nginx_dir)) => {
            let probe = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, HTTP_PORT));
            let child = t
                .emu
                .spawn_in_server(move || nginx::launch(&nginx_dir, &servers, probe))
                .join()
                .map_err(|_| anyhow!("nginx's start panicked"))??
                .context("starting nginx")?;
            Some(child)
        }
        None => None,
    };
    let (places, ends) = configs(t, sys, site.target_port())?;
    // What the relays and proxies say went wrong with a connection (the trial's notes).
    let errors: Arc<Mutex<Vec<String>>> = Arc::default();
    let noted = |who: &'static str| {
        let errors = errors.clone();
        move |e: roam_net::proxy::Event| {
            if let roam_net::proxy::Event::Failed { .. } = e {
                lock(&errors).push(format!("{who}: {e}"));
            }
        }
    };
    let mut running = Vec::new();
    // Every place's relays, then its proxy.
    let started = places.into_iter().try_for_each(|place| {
        for relay_cfg in place.relays {
            let on_relay = noted("relay");
            running.push(start(
                t,
                true,
                move || Relay::bind(relay_cfg).context("starting a relay"),
                move |r, stop| {
                    let _ = r.run_until(stop, on_relay);
                },
            )?);
        }
        let (proxy_cfg, on_proxy) = (place.proxy, noted("proxy"));
        running.push(start(
            t,
            false,
            move || Proxy::bind(proxy_cfg).context("starting a proxy"),
            move |p, stop| {
                let _ = p.run_until(stop, on_proxy);
            },
        )?);
        Ok::<(), anyhow::Error>(())
    });
    let read = started.and_then(|()| read_pages(t, site.clone(), plan));
    for r in running {
        r.end();
    }
    if let Some(n) = nginx.as_mut() {
        let _ = n.kill();
        let _ = n.wait();
    }
    // The site's directory goes only now that nginx no longer serves it.
    drop(site);
    for e in lock(&errors).iter().take(3) {
        t.note(format!("a carried connection failed at the {e}"));
    }
    let read = read?;
    Ok(metrics(t, &read, &ends))
}

/// Read `plan`'s pages in the client namespace, changing the site between the phases.
fn read_pages(t: &Trial, site: Arc<dyn Site>, plan: Vec<(bool, String, Duration)>) -> Result<Read> {
    let mut limit = t.duration;
    let progress = t.progress.clone();
    t.run_client("dedup reader", move || {
        let started = Instant::now();
        let mut read = Read {
            responses: Vec::new(),
            failures: Vec::new(),
            unfinished: false,
        };
        let mut changed = false;
        for (after, page, pause) in plan {
            if after && !changed {
                // The change (the wiki's imports take seconds) is not the reader's time.
                let began = Instant::now();
                site.change()?;
                limit += began.elapsed();
                changed = true;
            }
            std::thread::sleep(pause);
            if started.elapsed() > limit {
                read.unfinished = true;
                break;
            }
            let (r, took) = fetch(&site.url(&page), Some(SOCKS_PORTS[usize::from(after)]));
            match r {
                Ok(f) => {
                    site.check(&page, f.body())
                        .with_context(|| format!("page `{page}`"))?;
                    read.responses.push((after, f.wire, took));
                }
                Err(e) => read.failures.push(format!("{e:#}")),
            }
            progress(started.elapsed().as_secs());
        }
        Ok(read)
    })
}

/// The trial's metrics.
fn metrics(t: &Trial, read: &Read, ends: &Ends) -> Vec<Metric> {
    use std::sync::atomic::Ordering::Relaxed;
    let mut m = Vec::new();
    let n = read.responses.len();
    if read.unfinished {
        t.note(format!(
            "the reader read {n} pages before the trial's {} s were up",
            t.duration.as_secs()
        ));
    }
    for f in read.failures.iter().take(3) {
        t.note(format!("a fetch failed: {f}"));
    }
    let ms: Vec<f64> = read
        .responses
        .iter()
        .map(|r| r.2.as_secs_f64() * 1e3)
        .collect();
    t.event_latencies(super::EVENT, ms.iter().copied());
    let mean = |v: &[f64]| {
        if v.is_empty() {
            f64::NAN
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let after: Vec<f64> = read
        .responses
        .iter()
        .filter(|r| r.0)
        .map(|r| r.2.as_secs_f64() * 1e3)
        .collect();
    m.push(Metric::new("fetch_ms", mean(&ms), "ms"));
    m.push(Metric::new("fetch_after_ms", mean(&after), "ms"));
    m.push(Metric::new("pages", n as f64, ""));
    m.push(Metric::new(
        "failed_fetches",
        read.failures.len() as f64,
        "",
    ));
    // The redundancy present: what an unbounded cache of everything read before would find.
    let chunking = SourceConfig::default().chunking;
    let mut seen = NameSet::default();
    let (mut bytes, mut oracle) = (0u64, 0u64);
    for (_, r, _) in &read.responses {
        bytes += r.len() as u64;
        oracle += roam_dedup::analyze::oracle(chunking, r, &mut seen);
    }
    m.push(Metric::new("app_kB", bytes as f64 / 1e3, "kB"));
    m.push(Metric::new("oracle_kB", oracle as f64 / 1e3, "kB"));
    let (mut down, mut cell) = (0u64, 0u64);
    for l in t.emu.links() {
        let d = l.down.delivered_bytes.load(Relaxed);
        down += d;
        if l.config.kind == roam_trace::LinkKind::Cellular {
            cell += d + l.up.delivered_bytes.load(Relaxed);
        }
    }
    m.push(Metric::new("down_kB", down as f64 / 1e3, "kB"));
    m.push(Metric::new("cell_kB", cell as f64 / 1e3, "kB"));
    if !ends.sources.is_empty() {
        let mut s = roam_dedup::source::SourceStats::default();
        for src in &ends.sources {
            let x = lock(src).stats();
            s.regular_hit_bytes += x.regular_hit_bytes;
            s.feedback_hit_bytes += x.feedback_hit_bytes;
            s.passthrough_bytes += x.passthrough_bytes;
        }
        let found = s.regular_hit_bytes + s.feedback_hit_bytes;
        m.push(Metric::new(
            "regular_kB",
            s.regular_hit_bytes as f64 / 1e3,
            "kB",
        ));
        m.push(Metric::new(
            "feedback_kB",
            s.feedback_hit_bytes as f64 / 1e3,
            "kB",
        ));
        m.push(Metric::new(
            "found",
            if oracle > 0 {
                found as f64 / oracle as f64
            } else {
                f64::NAN
            },
            "",
        ));
        m.push(Metric::new(
            "passthrough_kB",
            s.passthrough_bytes as f64 / 1e3,
            "kB",
        ));
        if !ends.cellular.is_empty() {
            // `ac-multi`: what went through the cellular relays, and what they found.
            let (mut read, mut found) = (0, 0);
            for src in &ends.cellular {
                let x = lock(src).stats();
                read += x.bytes_in;
                found += x.regular_hit_bytes + x.feedback_hit_bytes;
            }
            m.push(Metric::new("cell_relay_kB", read as f64 / 1e3, "kB"));
            m.push(Metric::new("cell_relay_found_kB", found as f64 / 1e3, "kB"));
        }
        if let Some(dst) = &ends.destination {
            let d = lock(dst).stats();
            m.push(Metric::new(
                "feedback_sent_kB",
                d.feedback_bytes as f64 / 1e3,
                "kB",
            ));
            if d.feedback_bytes > 0 {
                m.push(Metric::new(
                    "saved_per_feedback_byte",
                    s.feedback_hit_bytes as f64 / d.feedback_bytes as f64,
                    "",
                ));
            }
            // Of the names advertised, those sent at a request, before its response
            // (roam_dedup::destination::hint: beyond the thesis).
            m.push(Metric::new("feedback_names", d.feedback_names as f64, ""));
            m.push(Metric::new("hint_names", d.hint_names as f64, ""));
            m.push(Metric::new(
                "checksum_failures",
                d.checksum_failures as f64,
                "",
            ));
        }
    }
    m
}
