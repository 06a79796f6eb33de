//! One trial of `roam lab precog`: one synthetic user's week on one site, day 7 measured.
//!
//! In the emulator's server namespace: nginx serving the site, and two of `roam_net`'s
//! relays, one per network (the thesis's multi-homed case: WiFi and cellular reach the
//! server through different upstream nodes). In the client namespace: a `roam net proxy` per
//! network, each using only its network, and headless Chromium (`roam_precog`'s replayer)
//! whose every request goes through the proxy of the session's network. Every system runs the
//! same browser through the same path; only what happens on WiFi, the browser's cache, and the
//! dedup caches differ ([`PrecogSystem`]).
//!
//! The user's week ([`users::week`]) builds the action trees from hours 1-96 and day 7's
//! cellular hours before the measured pair, without loading pages (the thesis's training).
//! Then, with the site as it stands at each hour ([`news`]: new stories, a reordered front
//! page, URLs that changed):
//! 1. **the WiFi hour**: the system prefetches (Precog replays the top 25% of the trees'
//!    nodes; URL-based prefetch loads the top 25% of the URLs the user's paths reached, as
//!    the crawl saw them), over WiFi only;
//! 2. **the cellular hour**: the user's own actions of that hour, replayed in the same browser
//!    profile over cellular only, counted by the emulator.

use std::collections::{HashMap, HashSet};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use roam_dedup::Source;
use roam_net::proxy::{Proxy, ProxyConfig, Relay};
use roam_net::runtime::{LocalNetwork, Networks};
use roam_precog::browser::replay::{Outcome, ReplayConfig, REUSE_PAGES};
use roam_precog::browser::session::{replay_all, SessionReport};
use roam_precog::browser::BrowserConfig;
use roam_precog::{plan, Forest, PlanConfig, Replay, Rules};

use super::crawl::Crawled;
use super::wiki::WikiSite;
use super::{news, users, Level, PrecogSystem, Site};
use crate::harness::scratch::Scratch;
use crate::harness::service::{lock, point, start, Running};
use crate::harness::trial::{Metric, Trial};
use crate::servers::nginx;
use crate::studies::dedup::nodes;

/// Where nginx listens (the server namespace's loopback: only the relays reach it).
pub const HTTP_PORT: u16 = 8080;
/// The relays (server namespace): WiFi's, cellular's.
const RELAY_PORTS: [u16; 2] = [7600, 7601];
/// The proxies (client namespace): WiFi's, cellular's.
const SOCKS_PORTS: [u16; 2] = [1090, 1091];

/// The site's origin as the browser names it.
pub fn base() -> String {
    format!("http://127.0.0.1:{HTTP_PORT}")
}

/// nginx's server block: HTML revalidated on every use (`no-cache`, as news sites send it),
/// scripts, styles and images cached for a week.
pub fn server_block(root: &Path, port: u16) -> String {
    format!(
        "server {{ listen 127.0.0.1:{port}; root {}; \
         types {{ text/html html; text/css css; application/javascript js; image/jpeg jpg; \
         image/png png; image/gif gif; image/bmp bmp; image/svg+xml svg; }} \
         location / {{ add_header Cache-Control \"no-cache\"; }} \
         location ~ \\.(css|js|jpg|png|gif|bmp|svg)$ {{ add_header Cache-Control \"max-age=604800\"; }} }}",
        root.display()
    )
}

/// The site's files: each hour's tree, and `current` pointing at the one served; or the
/// wiki.
struct Served {
    dir: Scratch,
    /// Whether the news site's pages offer speculation rules.
    speculation: bool,
    /// The wiki, for the `wiki` site.
    wiki: Option<Arc<WikiSite>>,
}

impl Served {
    /// The site's place; the wiki is installed here (its edits drawn with `seed`).
    fn new(site: &Site, speculation: bool, seed: u64) -> Result<Served> {
        let dir = Scratch::new("precog")?;
        let wiki = match site {
            Site::Wiki => Some(Arc::new(WikiSite::install(
                &format!("127.0.0.1:{HTTP_PORT}"),
                seed,
            )?)),
            Site::News | Site::Docs(_) => None,
        };
        Ok(Served {
            dir,
            speculation,
            wiki,
        })
    }

    /// nginx's configuration for the site on [`HTTP_PORT`].
    fn nginx_server(&self) -> String {
        match &self.wiki {
            Some(w) => w.nginx_server(&format!("127.0.0.1:{HTTP_PORT}")),
            None => server_block(&self.dir.join("current"), HTTP_PORT),
        }
    }

    /// Serve `site` as it stands at `hour` from now on.
    fn at(&self, site: &Site, hour: u32, seed: u64) -> Result<()> {
        if let Some(w) = &self.wiki {
            return w.at(hour);
        }
        let tree = match site {
            Site::News => {
                let d = self.dir.join(format!("h{hour}"));
                if !d.exists() {
                    news::write_hour_as(&d, hour, seed, news::Layout::Usual, self.speculation)?;
                }
                d
            }
            Site::Docs(html) => html.clone(),
            Site::Wiki => bail!("the wiki is not a tree of files"),
        };
        point(&self.dir, &tree)
    }
}

/// dd-src of each relay (WiFi's, cellular's), to read their counters.
type Sources = Vec<Arc<Mutex<Source>>>;

/// The relays and proxies: one pair per network, the proxy using only that network.
fn data_path(t: &Trial, sys: PrecogSystem) -> Result<(Vec<Running>, Sources)> {
    let links = t.emu.links();
    let destination = sys.dedups().then(|| nodes::destination(true));
    let mut running = vec![];
    let mut sources = vec![];
    for (i, kind) in [roam_trace::LinkKind::Wifi, roam_trace::LinkKind::Cellular]
        .into_iter()
        .enumerate()
    {
        let link = links
            .iter()
            .find(|l| l.config.kind == kind)
            .ok_or_else(|| anyhow!("the scenario has no {kind:?} link"))?;
        let (mut relay, relay_at, key) = nodes::relay_to(t, RELAY_PORTS[i], HTTP_PORT)?;
        relay.zstd = false;
        let mut proxy = ProxyConfig::new(
            SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, SOCKS_PORTS[i])),
            relay_at,
            Some(key),
        );
        proxy.options =
            crate::harness::channel::roam_options(t.system.clone(), &t.client_links().cellular);
        let kind_of = roam_net::proto::session::NetKind {
            cellular: kind == roam_trace::LinkKind::Cellular,
            ..Default::default()
        };
        proxy.options.networks = Networks::Explicit(vec![LocalNetwork {
            name: link.name.clone(),
            addr: std::net::IpAddr::V4(link.client_addr),
            kind: kind_of,
        }]);
        if let Some(dst) = &destination {
            let source = nodes::source(true)?;
            relay.dedup = Some(source.clone());
            sources.push(source);
            proxy.dedup = Some(dst.clone());
        }
        running.push(start(
            t,
            true,
            move || Relay::bind(relay).context("starting a relay"),
            |r, stop| {
                let _ = r.run_until(stop, |_| {});
            },
        )?);
        running.push(start(
            t,
            false,
            move || Proxy::bind(proxy).context("starting a proxy"),
            |p, stop| {
                let _ = p.run_until(stop, |_| {});
            },
        )?);
    }
    Ok((running, sources))
}

/// Start the traces of the links of `kind` again from their beginning: each hour meets the
/// same stretch of its network's trace whatever the system (a Precog WiFi hour lasts an hour,
/// a baseline's seconds, and the LTE drive has outages: without this, the systems' cellular
/// hours met different parts of it).
fn restart_links(t: &Trial, kind: roam_trace::LinkKind) -> Result<()> {
    for l in t.emu.links().iter().filter(|l| l.config.kind == kind) {
        t.emu
            .command(&roam_emu::Command {
                link: l.name.clone(),
                action: roam_emu::LinkCommand::Restart,
            })
            .map_err(|e| anyhow!("restarting link {}: {e}", l.name))?;
    }
    Ok(())
}

/// Bytes the links of `kind` delivered so far, both ways.
fn link_bytes(t: &Trial, kind: roam_trace::LinkKind) -> u64 {
    let (up, down) = delivered(t, kind);
    up + down
}

/// Bytes the links of `kind` delivered so far: up (from the device), down.
fn delivered(t: &Trial, kind: roam_trace::LinkKind) -> (u64, u64) {
    summed(t, kind, |d| &d.delivered_bytes)
}

/// What the cellular relay's dd-src found, and what deduplication cost there: the phone's
/// messages up (feedback, hints, acknowledgements), and the records' bytes down against what
/// they carried.
fn dedup_metrics(cell: &roam_dedup::source::SourceStats) -> Vec<Metric> {
    let ratio = if cell.bytes_in > 0 {
        cell.bytes_out as f64 / cell.bytes_in as f64
    } else {
        f64::NAN
    };
    [
        (
            "dedup_regular_kB",
            cell.regular_hit_bytes as f64 / 1e3,
            "kB",
        ),
        (
            "dedup_feedback_kB",
            cell.feedback_hit_bytes as f64 / 1e3,
            "kB",
        ),
        ("dedup_upstream_kB", cell.upstream_bytes as f64 / 1e3, "kB"),
        ("dedup_upstream_batches", cell.upstream_batches as f64, ""),
        ("dedup_acks", cell.acks as f64, ""),
        ("dedup_advertisements", cell.advertisements as f64, ""),
        ("dedup_down_over_in", ratio, ""),
    ]
    .into_iter()
    .map(|(name, value, unit)| Metric::new(name, value, unit))
    .collect()
}

/// Packets the links of `kind` delivered so far: up, down.
fn packets(t: &Trial, kind: roam_trace::LinkKind) -> (u64, u64) {
    summed(t, kind, |d| &d.delivered_pkts)
}

/// One counter of each direction, summed over the links of `kind`: up, down.
fn summed(
    t: &Trial,
    kind: roam_trace::LinkKind,
    counter: impl Fn(&roam_emu::DirCounters) -> &std::sync::atomic::AtomicU64,
) -> (u64, u64) {
    t.emu
        .links()
        .iter()
        .filter(|l| l.config.kind == kind)
        .fold((0, 0), |(u, d), l| {
            (
                u + counter(&l.up).load(Ordering::Relaxed),
                d + counter(&l.down).load(Ordering::Relaxed),
            )
        })
}

/// The paths a user took in `hours` (cellular ones), as the forest records them.
fn record(forest: &mut Forest, universe: &[Crawled], hours: &[&users::Hour]) {
    for h in hours.iter().filter(|h| !h.wifi) {
        for &(i, d) in &h.paths {
            let c = &universe[i];
            forest.record(
                &roam_precog::Path {
                    root: format!("{}{}", base(), c.root),
                    actions: c.actions[..d.min(c.actions.len())].to_vec(),
                },
                u64::from(h.hour),
            );
        }
    }
}

/// URL-based prefetch's list: the top `fraction` of the distinct URLs the user's cellular
/// paths reached (the root, then each action's page, as the crawl saw them), by how often.
fn top_urls(universe: &[Crawled], hours: &[&users::Hour], fraction: f64) -> Vec<Replay> {
    let mut count: HashMap<String, u64> = HashMap::new();
    for h in hours.iter().filter(|h| !h.wifi) {
        for &(i, d) in &h.paths {
            let c = &universe[i];
            *count.entry(c.root.clone()).or_default() += 1;
            for p in &c.pages[..d.min(c.pages.len())] {
                *count.entry(p.clone()).or_default() += 1;
            }
        }
    }
    let mut urls: Vec<(String, u64)> = count.into_iter().collect();
    urls.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let k = ((urls.len() as f64 * fraction).ceil() as usize).min(urls.len());
    urls.into_iter()
        .take(k)
        .map(|(u, hits)| Replay {
            site: "127.0.0.1".into(),
            root: format!("{}{u}", base()),
            actions: vec![],
            hits,
        })
        .collect()
}

/// The share of `session`'s action nodes (root and action prefix) present among `known`.
fn share(session: &[Replay], known: &HashSet<(String, Vec<String>)>) -> f64 {
    let (mut n, mut hit) = (0usize, 0usize);
    for r in session {
        for k in 1..=r.actions.len() {
            n += 1;
            let key = (
                r.root.clone(),
                r.actions[..k].iter().map(|a| a.to_string()).collect(),
            );
            hit += usize::from(known.contains(&key));
        }
    }
    if n == 0 {
        f64::NAN
    } else {
        hit as f64 / n as f64
    }
}

fn keys_of(
    paths: impl Iterator<Item = (String, Vec<roam_precog::Action>)>,
) -> HashSet<(String, Vec<String>)> {
    let mut out = HashSet::new();
    for (root, actions) in paths {
        for k in 1..=actions.len() {
            out.insert((
                root.clone(),
                actions[..k].iter().map(|a| a.to_string()).collect(),
            ));
        }
    }
    out
}

/// The shares of the top of the forest the lab weighs beside the thesis's 25%.
pub const FRACTIONS: [u32; 6] = [5, 10, 25, 50, 75, 100];

/// For each of [`FRACTIONS`] (percent) of the forest's nodes, ranked as the lab's plan ranks
/// them: the share of `taken`'s action nodes a replay of that top would have leveraged
/// (`leveraged_top{p}`) and how many pages that replay loads (`pages_top{p}`: each path's
/// root and one page per action, before any byte budget). Worked out from the trees alone,
/// no page loaded, so every trial of every system carries the same figures for its user.
fn fractions(forest: &Forest, rules: &Rules, taken: &[Replay]) -> Vec<Metric> {
    let mut out = vec![];
    for p in FRACTIONS {
        let at = plan(
            forest,
            rules,
            &PlanConfig {
                fraction: f64::from(p) / 100.0,
                ageing: false,
                ..PlanConfig::default()
            },
        );
        let replayed = keys_of(at.paths.iter().map(|r| (r.root.clone(), r.actions.clone())));
        let pages: usize = at.paths.iter().map(|r| r.actions.len() + 1).sum();
        out.push(Metric::new(
            &format!("leveraged_top{p}"),
            share(taken, &replayed),
            "",
        ));
        out.push(Metric::new(&format!("pages_top{p}"), pages as f64, ""));
    }
    out
}

/// `a` with only its positional locators (the thesis's anchored path, the CSS path), when it
/// has any: where the user's hand goes.
fn by_habit(a: &roam_precog::Action) -> roam_precog::Action {
    use roam_precog::Locator;
    let positional: Vec<Locator> = a
        .locators
        .candidates()
        .iter()
        .filter(|l| matches!(l, Locator::Anchored { .. } | Locator::Css { .. }))
        .cloned()
        .collect();
    match roam_precog::Locators::new(positional) {
        Ok(locators) => roam_precog::Action {
            locators,
            event: a.event.clone(),
        },
        Err(_) => a.clone(),
    }
}

/// How long the user's pointer rests on a link before the click (Chrome's `moderate`
/// speculation starts prefetching after 200 ms).
const HOVER: Duration = Duration::from_millis(300);

/// How much a user browses at `level`: `MAX_ACCESS` for a quick or a full run.
pub fn max_access(t: &Trial, level: Level) -> usize {
    level.max_access(t.duration <= Duration::from_secs(200))
}

/// The most paths of the cellular hour loaded in the browser; a longer hour loads a uniform
/// sample of this many ([`users::sample`]) and its bytes are estimated from them. At medium
/// redundancy an hour has 500 paths on average, about 2,750 pages: hours of browsing.
pub const MEASURED_PATHS: usize = 40;

/// Every prefetching system's byte budget for the WiFi hour (the replay stops once it has
/// fetched this much): the same for URL-based prefetch and Precog, so their efficiency is
/// compared at equal cost. The thesis's WiFi hour replayed all its top 25%, which at medium
/// redundancy is thousands of paths.
pub const WIFI_BUDGET: u64 = 24 << 20;

/// Paths the WiFi hour replays side by side, each in a tab of the one browser
/// ([`ReplayConfig::tabs`]): with the browser's cache warm a path fetches little (a story's
/// HTML), so the budget takes thousands of paths, and one tab at a time took hours.
pub const WIFI_TABS: usize = 6;

/// The WiFi hour is an hour: a prefetch still under its byte budget stops starting paths
/// then (the trial's `wifi_s` says how long it ran).
pub const WIFI_HOUR: Duration = Duration::from_secs(3600);

/// Run one trial of `site` at redundancy `level` for `t`'s system, with the universal set
/// `universe`.
pub fn run(t: &Trial, site: &Site, universe: &[Crawled], level: Level) -> Result<Vec<Metric>> {
    let sys = *t
        .system
        .get::<PrecogSystem>()
        .ok_or_else(|| anyhow!("`{}` is not a system of roam lab precog", t.system.name()))?;
    if universe.is_empty() {
        bail!("the crawl found no paths");
    }
    let depths: Vec<usize> = universe.iter().map(|c| c.actions.len()).collect();
    let week = users::week(&depths, max_access(t, level), t.seed);
    let (w, c) = users::measured(&week).ok_or_else(|| {
        anyhow!(
            "day 7 has no cellular hour after a WiFi one for seed {}",
            t.seed
        )
    })?;
    let before: Vec<&users::Hour> = week.iter().filter(|h| h.hour < w).collect();
    let mut forest = Forest::new();
    record(&mut forest, universe, &before);
    let rules = Rules::default();
    // Raw hit counts, as the thesis ranked them (the lab's forests are stamped in hours of
    // the synthetic week, not seconds).
    let precog_plan = plan(
        &forest,
        &rules,
        &PlanConfig {
            ageing: false,
            ..PlanConfig::default()
        },
    );
    let prefetch: Vec<Replay> = match sys {
        PrecogSystem::None | PrecogSystem::HttpCache | PrecogSystem::SpeculationRules => vec![],
        PrecogSystem::UrlPrefetch => top_urls(universe, &before, 0.25),
        PrecogSystem::Precog | PrecogSystem::PrecogDedup => precog_plan.paths.clone(),
    };
    // The user acts by habit, as the thesis's users do: the same place on the page (its
    // positional locators), whatever it holds this hour. A long hour loads a sample.
    let hour = &week[c as usize - 1].paths;
    let loaded = users::sample(hour, MEASURED_PATHS, t.seed);
    let scale = users::scale(hour.len(), loaded.len());
    let cellular: Vec<Replay> = loaded
        .iter()
        .map(|&(i, d)| Replay {
            site: "127.0.0.1".into(),
            root: format!("{}{}", base(), universe[i].root),
            actions: universe[i].actions[..d.min(universe[i].actions.len())]
                .iter()
                .map(by_habit)
                .collect(),
            hits: 0,
        })
        .collect();
    // Action redundancy (the thesis's eqs. 44-45): of the cellular hour's actions, those in
    // the trees (performed on cellular before) and those the prefetch replayed.
    let known = keys_of(forest.reaches().into_iter().map(|r| (r.root, r.actions)));
    let replayed = keys_of(
        precog_plan
            .paths
            .iter()
            .map(|r| (r.root.clone(), r.actions.clone())),
    );
    // Measured on the actions as recorded (their primary locator names the tree's node).
    let taken: Vec<Replay> = week[c as usize - 1]
        .paths
        .iter()
        .map(|&(i, d)| Replay {
            site: "127.0.0.1".into(),
            root: format!("{}{}", base(), universe[i].root),
            actions: universe[i].actions[..d.min(universe[i].actions.len())].to_vec(),
            hits: 0,
        })
        .collect();
    let ideal = share(&taken, &known);
    let observed = share(&taken, &replayed);
    let beyond = fractions(&forest, &rules, &taken);

    let served = Served::new(site, sys == PrecogSystem::SpeculationRules, t.seed)?;
    served.at(site, w, t.seed)?;
    if let Some(wiki) = served.wiki.clone() {
        t.emu
            .spawn_in_server(move || wiki.serve())
            .join()
            .map_err(|_| anyhow!("php-fpm's start panicked"))??
            .context("starting php-fpm")?;
    }
    let nginx_dir = served.dir.join("nginx");
    let block = served.nginx_server();
    let probe = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, HTTP_PORT));
    let mut nginx = t
        .emu
        .spawn_in_server(move || nginx::launch(&nginx_dir, &block, probe))
        .join()
        .map_err(|_| anyhow!("nginx's start panicked"))??
        .context("starting nginx")?;
    let result = data_path(t, sys).and_then(|(running, sources)| {
        let r = sessions(t, sys, site, &served, c, &prefetch, &cellular);
        for x in running {
            x.end();
        }
        r.map(|r| (r, sources))
    });
    let _ = nginx.kill();
    let _ = nginx.wait();
    let (s, sources) = result?;
    let mut m = metrics(t, &s, ideal, observed, precog_plan.chosen, scale);
    m.extend(beyond);
    if let Some(w) = &served.wiki {
        m.push(Metric::new("articles_edited", w.edited() as f64, ""));
    }
    if !sources.is_empty() {
        m.extend(dedup_metrics(&lock(&sources[1]).stats()));
    }
    Ok(m)
}

/// What the two sessions did.
struct Sessions {
    wifi: SessionReport,
    wifi_bytes: u64,
    wifi_secs: f64,
    cell: SessionReport,
    cell_bytes: u64,
    /// Of them, the uplink's.
    cell_up_bytes: u64,
    /// The cellular hour's packets: up, down.
    cell_packets: (u64, u64),
    cell_secs: f64,
}

fn sessions(
    t: &Trial,
    sys: PrecogSystem,
    site: &Site,
    served: &Served,
    cellular_hour: u32,
    prefetch: &[Replay],
    cellular: &[Replay],
) -> Result<Sessions> {
    let profile = served.dir.join("profile");
    let config = |port: u16| ReplayConfig {
        browser: BrowserConfig {
            profile: Some(profile.clone()),
            proxy: Some(format!("socks5://127.0.0.1:{port}")),
            ..BrowserConfig::default()
        },
        cache_disabled: sys == PrecogSystem::None,
        ..ReplayConfig::default()
    };
    let rules = Rules::default();
    // The user's hand rests on what they click for a moment, whatever the system (only the
    // speculation rules' site does anything with it); prefetching replays click at once.
    let (wifi_cfg, cell_cfg) = (
        ReplayConfig {
            max_bytes: Some(WIFI_BUDGET),
            tabs: WIFI_TABS,
            max_time: Some(WIFI_HOUR),
            request_log: t.log_path("wifi-requests.csv"),
            reuse_pages: Some(REUSE_PAGES),
            ..config(SOCKS_PORTS[0])
        },
        ReplayConfig {
            hover: Some(HOVER),
            request_log: t.log_path("cell-requests.csv"),
            ..config(SOCKS_PORTS[1])
        },
    );
    let (prefetch, cellular) = (prefetch.to_vec(), cellular.to_vec());
    let progress = t.progress.clone();
    restart_links(t, roam_trace::LinkKind::Wifi)?;
    let started = Instant::now();
    let wifi_before = link_bytes(t, roam_trace::LinkKind::Wifi);
    let wifi = t.run_client("precog WiFi hour", move || {
        replay_all(&wifi_cfg, &rules, &prefetch, &mut || Ok(()), &mut |_, _| {
            progress(started.elapsed().as_secs())
        })
        .map_err(|e| anyhow!("{e}"))
    })?;
    let wifi_secs = started.elapsed().as_secs_f64();
    let wifi_bytes = link_bytes(t, roam_trace::LinkKind::Wifi) - wifi_before;
    served.at(site, cellular_hour, t.seed)?;
    let progress = t.progress.clone();
    let rules = Rules::default();
    restart_links(t, roam_trace::LinkKind::Cellular)?;
    let cell_started = Instant::now();
    let cell_before = link_bytes(t, roam_trace::LinkKind::Cellular);
    let cell_up_before = delivered(t, roam_trace::LinkKind::Cellular).0;
    let packets_before = packets(t, roam_trace::LinkKind::Cellular);
    let cell = t.run_client("precog cellular hour", move || {
        replay_all(&cell_cfg, &rules, &cellular, &mut || Ok(()), &mut |_, _| {
            progress(started.elapsed().as_secs())
        })
        .map_err(|e| anyhow!("{e}"))
    })?;
    Ok(Sessions {
        wifi,
        wifi_bytes,
        wifi_secs,
        cell_bytes: link_bytes(t, roam_trace::LinkKind::Cellular) - cell_before,
        cell_up_bytes: delivered(t, roam_trace::LinkKind::Cellular).0 - cell_up_before,
        cell_packets: {
            let (up, down) = packets(t, roam_trace::LinkKind::Cellular);
            (up - packets_before.0, down - packets_before.1)
        },
        cell_secs: cell_started.elapsed().as_secs_f64(),
        cell,
    })
}

/// The trial's metrics; the cellular hour's bytes and energy are what its loaded paths took
/// times `scale` (the hour's paths per path loaded).
fn metrics(
    t: &Trial,
    s: &Sessions,
    ideal: f64,
    observed: f64,
    chosen: usize,
    scale: f64,
) -> Vec<Metric> {
    let pages: usize = s.cell.paths.iter().map(|p| p.steps + 1).sum();
    // Page load time: what the user waited, the pointer's rests left out.
    let secs: f64 = s
        .cell
        .paths
        .iter()
        .map(|p| p.took.saturating_sub(p.hovered).as_secs_f64())
        .sum();
    let whole = |r: &SessionReport| {
        r.paths
            .iter()
            .filter(|p| p.outcome == Outcome::Done)
            .count()
    };
    if let Some(why) = &s.wifi.stopped {
        t.note(format!("the WiFi hour stopped: {why}"));
    }
    for p in s
        .cell
        .paths
        .iter()
        .filter(|p| p.outcome != Outcome::Done)
        .take(3)
    {
        t.note(format!(
            "a cellular-hour path stopped: {} after {} steps: {:?}",
            p.root, p.steps, p.outcome
        ));
    }
    t.event_latencies(
        super::EVENT,
        s.cell
            .paths
            .iter()
            .map(|p| p.took.saturating_sub(p.hovered).as_secs_f64() * 1e3 / (p.steps + 1) as f64),
    );
    let energy = |profile: &str, bytes: u64, secs: f64| {
        crate::harness::energy::radio_energy(
            profile,
            bytes,
            secs,
            roam_budget::radio::Direction::Down,
        )
        .unwrap_or(f64::NAN)
    };
    vec![
        Metric::new("cell_kB", s.cell_bytes as f64 * scale / 1e3, "kB"),
        Metric::new("cell_kB_loaded", s.cell_bytes as f64 / 1e3, "kB"),
        Metric::new("cell_up_kB_loaded", s.cell_up_bytes as f64 / 1e3, "kB"),
        Metric::new("cell_up_pkts_loaded", s.cell_packets.0 as f64, ""),
        Metric::new("cell_down_pkts_loaded", s.cell_packets.1 as f64, ""),
        Metric::new("cell_sample", 1.0 / scale, ""),
        Metric::new("wifi_kB", s.wifi_bytes as f64 / 1e3, "kB"),
        Metric::new("wifi_s", s.wifi_secs, "s"),
        Metric::new(
            "page_ms",
            if pages > 0 {
                secs * 1e3 / pages as f64
            } else {
                f64::NAN
            },
            "ms",
        ),
        Metric::new("cell_pages", pages as f64, ""),
        Metric::new("cell_paths_whole", whole(&s.cell) as f64, ""),
        Metric::new("cell_paths", s.cell.paths.len() as f64, ""),
        Metric::new("prefetch_paths", s.wifi.paths.len() as f64, ""),
        Metric::new("prefetch_whole", whole(&s.wifi) as f64, ""),
        Metric::new("nodes_chosen", chosen as f64, ""),
        // What the browser fetched in the cellular hour, by kind (its own count of the
        // loaded sample's bytes on the wire, without the proxies' framing).
        Metric::new(
            "cell_document_kB",
            s.cell.sum(|p| p.by_kind.document) as f64 / 1e3,
            "kB",
        ),
        Metric::new(
            "cell_image_kB",
            s.cell.sum(|p| p.by_kind.image) as f64 / 1e3,
            "kB",
        ),
        Metric::new(
            "cell_code_kB",
            s.cell.sum(|p| p.by_kind.code) as f64 / 1e3,
            "kB",
        ),
        Metric::new(
            "cell_other_kB",
            s.cell.sum(|p| p.by_kind.other) as f64 / 1e3,
            "kB",
        ),
        Metric::new("cell_revalidated", s.cell.sum(|p| p.revalidated) as f64, ""),
        // The WiFi hour: answers of 304 on the network (any resource), and pages answered from the
        // session's own copies (`ReplayConfig::reuse_pages`).
        Metric::new("wifi_revalidated", s.wifi.sum(|p| p.revalidated) as f64, ""),
        Metric::new("wifi_reused", s.wifi.sum(|p| p.reused) as f64, ""),
        Metric::new(
            "speculative_requests",
            s.cell.sum(|p| p.speculative) as f64,
            "",
        ),
        Metric::new("ideal_redundancy", ideal, ""),
        Metric::new("observed_redundancy", observed, ""),
        Metric::new(
            "energy_J",
            energy("huang2012/wifi", s.wifi_bytes, s.wifi_secs)
                + scale * energy("huang2012/lte", s.cell_bytes, s.cell_secs),
            "J",
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use roam_precog::{Action, Event, Locator, Locators};

    fn click(id: &str) -> Action {
        Action {
            locators: Locators::new(vec![Locator::Id { id: id.into() }]).unwrap(),
            event: Event::Click,
        }
    }

    fn path(ids: &[&str]) -> Replay {
        Replay {
            site: "n.example".into(),
            root: "http://n.example/".into(),
            actions: ids.iter().map(|i| click(i)).collect(),
            hits: 0,
        }
    }

    #[test]
    fn a_larger_top_leverages_more_and_loads_more_pages() {
        let mut f = Forest::new();
        for (ids, times) in [
            (&["sports", "s1"][..], 6),
            (&["world", "w1"][..], 3),
            (&["arts"][..], 1),
        ] {
            for _ in 0..times {
                let p = path(ids);
                f.record(
                    &roam_precog::Path {
                        root: p.root,
                        actions: p.actions,
                    },
                    1,
                );
            }
        }
        // The hour's user goes sports -> s1, then arts: three action nodes, all in the trees.
        let taken = [path(&["sports", "s1"]), path(&["arts"])];
        let m: HashMap<String, f64> = fractions(&f, &Rules::default(), &taken)
            .into_iter()
            .map(|m| (m.name, m.value))
            .collect();
        // 6 nodes: root 10, sports 6, s1 6, world 3, w1 3, arts 1. The top 25% (2 nodes):
        // root and sports, one path of 2 pages, one of the hour's three nodes.
        assert_eq!(m["pages_top25"], 2.0);
        assert!((m["leveraged_top25"] - 1.0 / 3.0).abs() < 1e-9, "{m:?}");
        // The whole forest: every node the hour took, three paths of 3, 3 and 2 pages.
        assert_eq!(m["leveraged_top100"], 1.0);
        assert_eq!(m["pages_top100"], 8.0);
        for w in FRACTIONS.windows(2) {
            let (a, b) = (w[0], w[1]);
            assert!(m[&format!("leveraged_top{a}")] <= m[&format!("leveraged_top{b}")]);
            assert!(m[&format!("pages_top{a}")] <= m[&format!("pages_top{b}")]);
        }
    }
}
