//! `roam lab precog`: prefetching by the user's actions (the Sanadhya thesis, chapter V;
//! ../shared/spec/sanadhya.md §3) in a real browser on real sites, beside today's prefetching.
//!
//! Every system runs the same headless Chromium (`roam_precog`'s replayer) over the same
//! data path (`roam net proxy` and `roam net relay`, one pair per network, [`trial`]) for the
//! same synthetic user ([`users`]); what differs is what happens on WiFi and which caches
//! there are ([`PrecogSystem`]):
//!
//! | system | on WiFi | on cellular |
//! |---|---|---|
//! | `none` | nothing | the browser with its HTTP cache off |
//! | `http-cache` | nothing | the browser's HTTP cache (what the session itself fetched) |
//! | `url-prefetch` | loads the top 25% of the URLs the user's paths reached | the cache |
//! | `speculation-rules` | nothing | the cache, and the site's speculation rules (`moderate`: a link the pointer rests on is prefetched; only `news` offers them) |
//! | `precog` | replays the top 25% of the action trees' nodes | the cache |
//! | `precog+dedup` | as `precog`, through asymmetric caching's relays and proxies | the cache, and the phone's dedup cache |
//!
//! Sites ([`Site`]): `news`, which changes every hour on a schedule ([`news`]), `docs`,
//! Debian's PostgreSQL manual (static), and `wiki`, Debian's MediaWiki with the manual as its
//! articles, edited between the hours ([`wiki`]). The universal set of paths comes from the thesis's
//! crawler ([`crawl`]), run once per lab run. The scenario `home-and-away`: WiFi at 20 Mbit/s
//! and an LTE drive.
//!
//! Each site runs at the thesis's three redundancy levels ([`Level`]): `news` at medium
//! (`MAX_ACCESS` 1000), `news-high` (100) and `news-low` (5000).

pub mod crawl;
pub mod news;
pub mod trial;
pub mod users;
pub mod wiki;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};

use crate::harness::charts::charts;
use crate::harness::matrix;
use crate::harness::plan::{App, Plan};
use crate::harness::results::{written_by, Measured};
use crate::harness::scratch::Scratch;
use crate::harness::seeds::seeds_line;
use crate::harness::setup::{Need, NGINX};
use crate::harness::study::{report_lines, Defaults, Request, Study};
use crate::harness::system::{System, SystemUnderTest, Transport};
use crate::harness::trial::{Metric, Trial};
use crate::report::compare::{by_seed, cell};
use crate::report::{fmt_num, stats, Row};
use crate::servers::{mediawiki, nginx};
use crawl::Crawled;

/// The interactive event every trial records: one page of the cellular hour.
pub const EVENT: &str = "page";

/// Chromium, the browser every system runs.
pub const CHROMIUM: Need = Need {
    package: "chromium",
    paths: &["/usr/bin/chromium"],
    what: "Precog's browser",
};

/// What happens on WiFi and which caches there are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrecogSystem {
    /// No prefetch, no HTTP cache.
    None,
    /// The browser's HTTP cache alone.
    HttpCache,
    /// URL-based prefetch.
    UrlPrefetch,
    /// The site's speculation rules, as Chrome runs them today.
    SpeculationRules,
    /// Precog with the browser cache.
    Precog,
    /// Precog with the browser cache and the dedup cache.
    PrecogDedup,
}

impl PrecogSystem {
    /// Every system, baselines first.
    pub const ALL: [PrecogSystem; 6] = [
        PrecogSystem::None,
        PrecogSystem::HttpCache,
        PrecogSystem::UrlPrefetch,
        PrecogSystem::SpeculationRules,
        PrecogSystem::Precog,
        PrecogSystem::PrecogDedup,
    ];

    /// Name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            PrecogSystem::None => "none",
            PrecogSystem::HttpCache => "http-cache",
            PrecogSystem::UrlPrefetch => "url-prefetch",
            PrecogSystem::SpeculationRules => "speculation-rules",
            PrecogSystem::Precog => "precog",
            PrecogSystem::PrecogDedup => "precog+dedup",
        }
    }

    /// Whether the data path deduplicates (asymmetric caching).
    pub fn dedups(self) -> bool {
        self == PrecogSystem::PrecogDedup
    }
}

impl SystemUnderTest for PrecogSystem {
    fn name(&self) -> &str {
        PrecogSystem::name(*self)
    }
    fn transport(&self) -> Transport {
        Transport::Roam
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// A site of the lab.
#[derive(Clone, Debug)]
pub enum Site {
    /// The news site, written per hour.
    News,
    /// A static documentation tree (its HTML directory).
    Docs(PathBuf),
    /// The MediaWiki, installed per trial ([`wiki::WikiSite`]).
    Wiki,
}

impl Site {
    fn named(app: &str) -> Result<Site> {
        Ok(match app {
            "news" => Site::News,
            "docs" => Site::Docs(super::dedup::corpus::docs()?.new.1),
            "wiki" => Site::Wiki,
            other => bail!("unknown site `{other}`"),
        })
    }

    /// The links a user (and the crawler) clicks, as a CSS selector: every link, but on the
    /// wiki those of the article and of the sidebar's navigation. MediaWiki's account, talk,
    /// history and tool links lead to forms and special pages, which a reader rarely opens;
    /// followed uniformly they were most of a walk's clicks (a first crawl: the 15 pages
    /// most reached were all such pages but the main page and one article).
    pub fn links(&self) -> &'static str {
        match self {
            Site::News | Site::Docs(_) => "a[href]",
            Site::Wiki => wiki::LINKS,
        }
    }

    /// The page every path starts from (site-relative).
    pub fn root(&self) -> &'static str {
        match self {
            Site::News | Site::Docs(_) => "/index.html",
            Site::Wiki => wiki::ROOT,
        }
    }
}

/// Each site's universal set, crawled once per run ([`crawl_once`]).
static UNIVERSES: Mutex<Option<HashMap<String, Arc<Vec<Crawled>>>>> = Mutex::new(None);

fn universe(app: &str) -> Result<Arc<Vec<Crawled>>> {
    UNIVERSES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .and_then(|m| m.get(app).cloned())
        .ok_or_else(|| anyhow!("no universal set for {app}: the crawl runs before the trials"))
}

/// The thesis's three redundancy levels (ch. V, Fig. 20): the most paths a user takes in an
/// hour (`MAX_ACCESS`). The more a user browses, the wider the variety of their paths
/// ([`users`]) and the lower the redundancy between their hours.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Level {
    /// The suffix of the application's name (`news-high`); the medium level has none.
    pub suffix: &'static str,
    /// `MAX_ACCESS` of a full run.
    pub max_access: usize,
}

/// High redundancy: `MAX_ACCESS` 100.
pub const HIGH: Level = Level {
    suffix: "-high",
    max_access: 100,
};
/// Medium redundancy, `MAX_ACCESS` 1000: the level of the targets.
pub const MEDIUM: Level = Level {
    suffix: "",
    max_access: 1000,
};
/// Low redundancy: `MAX_ACCESS` 5000.
pub const LOW: Level = Level {
    suffix: "-low",
    max_access: 5000,
};

impl Level {
    /// `MAX_ACCESS` for a quick run (one three-hundredth, at least 1: 1, 3 and 16) or a full
    /// one.
    pub fn max_access(self, quick: bool) -> usize {
        if quick {
            (self.max_access / 300).max(1)
        } else {
            self.max_access
        }
    }
}

/// The site an application browses: its name without the level's suffix.
pub fn site_of(app: &str) -> &str {
    app.strip_suffix(HIGH.suffix)
        .or_else(|| app.strip_suffix(LOW.suffix))
        .unwrap_or(app)
}

/// The redundancy level of an application.
pub fn level_of(app: &str) -> Level {
    [HIGH, LOW]
        .into_iter()
        .find(|l| app.ends_with(l.suffix))
        .unwrap_or(MEDIUM)
}

fn run_at(t: &Trial, site: &str, level: Level) -> Result<Vec<Metric>> {
    trial::run(t, &Site::named(site)?, &universe(site)?, level)
}

/// One run function per application (the harness's applications are plain functions).
macro_rules! runs {
    ($($f:ident => $site:literal, $level:expr;)*) => {
        $(fn $f(t: &Trial) -> Result<Vec<Metric>> {
            run_at(t, $site, $level)
        })*
    };
}

runs! {
    run_news => "news", MEDIUM;
    run_news_high => "news", HIGH;
    run_news_low => "news", LOW;
    run_docs => "docs", MEDIUM;
    run_docs_high => "docs", HIGH;
    run_docs_low => "docs", LOW;
    run_wiki => "wiki", MEDIUM;
    run_wiki_high => "wiki", HIGH;
    run_wiki_low => "wiki", LOW;
}

/// The study's applications: each site at each redundancy level (`news` is the news site at
/// medium redundancy, `news-high` and `news-low` the others).
pub fn apps() -> Vec<App> {
    type RunFn = fn(&Trial) -> Result<Vec<Metric>>;
    let app = |name, run: RunFn, needs| App {
        name,
        run,
        full: Duration::from_secs(20 * 60),
        quick: Duration::from_secs(90),
        interactive: ("page_ms", "mean page load on cellular (ms)"),
        background: ("cell_kB", "cellular bytes, both ways (kB)", false),
        event: (EVENT, "page load on cellular (ms)"),
        needs,
        interactive_floor: None,
        stagger: None,
    };
    const SITE: &[Need] = &[NGINX, CHROMIUM];
    const WIKI: &[Need] = &[
        NGINX,
        CHROMIUM,
        mediawiki::MEDIAWIKI,
        mediawiki::PHP_FPM,
        mediawiki::PHP_CLI,
        mediawiki::PHP_SQLITE,
    ];
    vec![
        app("news", run_news, SITE),
        app("news-high", run_news_high, SITE),
        app("news-low", run_news_low, SITE),
        app("docs", run_docs, SITE),
        app("docs-high", run_docs_high, SITE),
        app("docs-low", run_docs_low, SITE),
        app("wiki", run_wiki, WIKI),
        app("wiki-high", run_wiki_high, WIKI),
        app("wiki-low", run_wiki_low, WIKI),
    ]
}

/// The crawl's size: walks and most pages loaded, quick or full. A full crawl holds the pool of
/// a user at the lowest redundancy ([`users::POOL_PER_ACCESS`] x [`LOW`]'s `MAX_ACCESS`); the
/// thesis kept over 470,000 paths of 14 sites. A walk ends early at a page beyond the most
/// loaded.
fn crawl_size(quick: bool) -> (usize, usize) {
    if quick {
        (40, 120)
    } else {
        (50_000, 1500)
    }
}

/// Crawl each site of `plan` once (or read the crawl a previous run of this directory kept).
fn crawl_once(plan: &Plan) -> Result<()> {
    let mut all = HashMap::new();
    for app in &plan.apps {
        let app = site_of(app);
        if all.contains_key(app) {
            continue;
        }
        let kept = plan.out.join(format!("universe-{app}.json"));
        let paths: Vec<Crawled> = match std::fs::read(&kept) {
            Ok(b) => serde_json::from_slice(&b).with_context(|| format!("{}", kept.display()))?,
            Err(_) => {
                let (n, max_pages) = crawl_size(plan.quick);
                eprintln!(
                    "roam lab precog: crawling {app} ({n} walks of depth {})",
                    crawl::DEPTH
                );
                let p = crawl_site(&Site::named(app)?, n, max_pages)?;
                std::fs::create_dir_all(&plan.out)?;
                std::fs::write(&kept, serde_json::to_vec(&p)?)?;
                p
            }
        };
        all.insert(app.to_string(), Arc::new(paths));
    }
    *UNIVERSES.lock().unwrap_or_else(|p| p.into_inner()) = Some(all);
    Ok(())
}

/// Serve `site` (the news site as of hour 96, the eve of day 7; the wiki as installed) on the
/// host's loopback and crawl it.
fn crawl_site(site: &Site, n: usize, max_pages: usize) -> Result<Vec<Crawled>> {
    let dir = Scratch::new("precog-crawl")?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let at = format!("127.0.0.1:{port}");
    let probe = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut wiki = None;
    let block = match site {
        Site::News => {
            news::write_hour(&dir.join("site"), users::TRAIN, 1)?;
            trial::server_block(&dir.join("site"), port)
        }
        Site::Docs(html) => trial::server_block(html, port),
        Site::Wiki => {
            let w = wiki::WikiSite::install(&at, 1)?;
            w.serve()?;
            let block = w.nginx_server(&at);
            wiki = Some(w);
            block
        }
    };
    let mut server = nginx::launch(&dir.join("nginx"), &block, probe)?;
    let r = crawl::walks(
        &format!("http://{at}"),
        site.root(),
        site.links(),
        n,
        max_pages,
        1,
    );
    let _ = server.kill();
    let _ = server.wait();
    drop(wiki);
    r
}

/// `roam lab precog`.
pub struct PrecogLab;

impl Study for PrecogLab {
    fn name(&self) -> &'static str {
        "precog"
    }

    fn paper(&self) -> &'static str {
        "Precog (Sanadhya, Ultra-mobile computing thesis, ch. V): prefetching by the user's \
         recorded actions, replayed in a real browser on WiFi, beside URL-based prefetch"
    }

    fn defaults(&self) -> Defaults {
        Defaults {
            scenarios: vec!["home-and-away".into()],
            quick_scenarios: vec!["home-and-away".into()],
            apps: vec!["news".into(), "docs".into(), "wiki".into()],
            quick_apps: vec!["news".into()],
            jobs: 2,
            quick_jobs: Some(2),
            out: "results/precog",
        }
    }

    fn apps(&self) -> Vec<App> {
        apps()
    }

    fn system(&self, name: &str) -> Result<System> {
        match PrecogSystem::ALL.into_iter().find(|s| s.name() == name) {
            Some(s) => Ok(System::new(s)),
            None => bail!(
                "unknown system `{name}` for roam lab precog (expected one of: {})",
                PrecogSystem::ALL.map(|s| s.name()).join(", ")
            ),
        }
    }

    fn systems(&self, _quick: bool) -> Vec<System> {
        PrecogSystem::ALL.into_iter().map(System::new).collect()
    }

    fn paper_figure(&self, _app: &str, _scenario: &str, system: &str) -> Option<String> {
        match system {
            "precog" => Some(THESIS_BROWSER.into()),
            "precog+dedup" => Some(THESIS_DEDUP.into()),
            _ => None,
        }
    }

    fn measure(&self, plan: &Plan, _request: &Request) -> Result<(String, Vec<Row>)> {
        let all = apps();
        if !plan.report_only {
            crawl_once(plan)?;
        }
        let m = matrix::measure(plan, &all)?;
        let md = markdown(plan, &m);
        std::fs::write(plan.out.join("report.md"), &md)?;
        charts(plan, &all, &m)?;
        Ok((md, m.rows))
    }

    fn summary(&self, _plan: &Plan, report: &str, _rows: &[Row]) -> String {
        report_lines(report, |l| {
            l.starts_with('|') || l.starts_with("### ") || l.starts_with("**")
        })
    }
}

const THESIS_BROWSER: &str = "thesis: 23% of cellular bytes saved, 9% prefetch efficiency";
const THESIS_DEDUP: &str = "thesis: 47% of cellular bytes saved, 26% prefetch efficiency";

/// The system the savings are counted against: the browser with its own HTTP cache and no
/// prefetching. The thesis's "total cellular bytes" were what a browser downloaded in the
/// cellular session (its own cache at work), and its savings the part of them prefetched.
pub const REFERENCE: &str = "http-cache";

/// Cellular bytes saved against [`REFERENCE`] (1 - the ratio of means) with its interval.
pub fn saved(rows: &[Row], app: &str, sc: &str, sys: &str) -> Option<(f64, Option<(f64, f64)>)> {
    let r = stats::ratio_of_means(
        &by_seed(rows, app, sc, sys, "cell_kB"),
        &by_seed(rows, app, sc, REFERENCE, "cell_kB"),
    )?;
    Some((
        1.0 - r.ratio,
        r.interval.map(|(lo, hi)| (1.0 - hi, 1.0 - lo)),
    ))
}

/// Prefetch efficiency: cellular bytes saved against [`REFERENCE`] per byte the WiFi link
/// carried, both ways (the thesis's eqs. 42-43, measured rather than matched between
/// captures), from the means. Defined only for systems that prefetch on WiFi.
pub fn efficiency(rows: &[Row], app: &str, sc: &str, sys: &str) -> Option<f64> {
    efficiency_per(rows, app, sc, sys, "wifi_kB")
}

/// [`efficiency`] per byte of the WiFi metric `wifi` (`wifi_kB`, both ways; the harness's
/// `link_wifi_down_kB`, the bytes prefetched: the replay's requests left out. The WiFi link
/// carries only the WiFi hour, and `home-and-away` names it `wifi`).
fn efficiency_per(rows: &[Row], app: &str, sc: &str, sys: &str, wifi: &str) -> Option<f64> {
    if !matches!(sys, "url-prefetch" | "precog" | "precog+dedup") {
        return None;
    }
    let base = cell(rows, app, sc, REFERENCE, "cell_kB").value();
    let ours = cell(rows, app, sc, sys, "cell_kB").value();
    let wifi = cell(rows, app, sc, sys, wifi).value();
    (base.is_finite() && ours.is_finite() && wifi > 0.0).then(|| (base - ours) / wifi)
}

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

fn markdown(plan: &Plan, m: &Measured) -> String {
    let rows = &m.rows;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# roam lab precog: prefetching by the user's actions\n\nMeasured with roam `{}`{}. \
         {}{}. Every system runs the same headless Chromium over the same \
         relays and proxies (one pair per network) for the same synthetic user; day 7's WiFi \
         hour prefetches, the cellular hour after it replays the user's own actions. Cells: \
         the mean over trials with its 95% confidence interval, then the median. Cellular \
         bytes count both ways, measured by the emulator during the cellular hour. Saved: \
         against `http-cache` (the browser's own cache, no prefetching: the thesis's total \
         cellular bytes), 1 - the ratio of means; `none` (no cache at all) is shown for \
         scale. Efficiency: those bytes saved per byte fetched on WiFi (measured, where the \
         thesis matched two captures). Energy is modelled (huang2012 WiFi and LTE radios). \
         Redundancy levels (the thesis's MAX_ACCESS, the most paths a session takes): a site's \
         name alone is medium (1000), `-high` 100, `-low` 5000. A cellular hour of more than \
         {} paths loads a uniform sample of that many and its bytes are estimated from it \
         (scaled by the hour's paths per path loaded; `cell_sample` is the share loaded); \
         every prefetching system's WiFi hour stops at the same byte budget ({} MB).\n",
        m.version,
        written_by(&m.version),
        crate::report::trials_per_cell(plan.trials, rows),
        if plan.quick {
            ", **quick** (a 40-walk crawl, MAX_ACCESS a three-hundredth of the level's)"
        } else {
            ""
        },
        trial::MEASURED_PATHS,
        trial::WIFI_BUDGET >> 20,
    );
    let _ = writeln!(s, "{}\n", seeds_line("precog", rows));
    for app in &plan.apps {
        let _ = writeln!(
            s,
            "## {app}\n\n{} at {} redundancy: MAX_ACCESS {}.\n",
            site_of(app),
            match level_of(app).suffix {
                "" => "medium",
                x => &x[1..],
            },
            level_of(app).max_access(plan.quick)
        );
        let _ = writeln!(s, "![{app} page load]({app}-interactive.svg) ![{app} cellular bytes]({app}-background.svg)\n");
        for sc in &plan.scenarios {
            let _ = writeln!(
                s,
                "### {app} on {sc}\n\n| system | cellular kB | saved | WiFi kB | efficiency | page ms | energy J (modelled) | cellular paths whole | prefetch paths whole | ideal / observed action redundancy | thesis |\n|---|---|---|---|---|---|---|---|---|---|---|"
            );
            for sys in &plan.systems {
                let n = sys.name();
                let show = |metric: &str| {
                    let c = cell(rows, app, sc, n, metric);
                    if c.n == 0 && c.failed == 0 {
                        "-".into()
                    } else {
                        c.cell()
                    }
                };
                let sv = match saved(rows, app, sc, n) {
                    _ if n == "none" => "-".into(),
                    Some((x, Some((lo, hi)))) if n != REFERENCE => {
                        format!("{} [{}, {}]", pct(x), pct(lo), pct(hi))
                    }
                    Some((x, None)) if n != REFERENCE => pct(x),
                    _ => "-".into(),
                };
                let eff = efficiency(rows, app, sc, n).map_or("-".into(), pct);
                let v = |metric: &str| cell(rows, app, sc, n, metric).value();
                let whole = |a: &str, b: &str| format!("{}/{}", fmt_num(v(a)), fmt_num(v(b)));
                let red = if n.starts_with("precog") {
                    format!(
                        "{} / {}",
                        pct(v("ideal_redundancy")),
                        pct(v("observed_redundancy"))
                    )
                } else {
                    "-".into()
                };
                let thesis = match n {
                    "precog" => "23% saved, 9% efficiency",
                    "precog+dedup" => "47% saved, 26% efficiency",
                    _ => "",
                };
                let _ = writeln!(
                    s,
                    "| {n} | {} | {sv} | {} | {eff} | {} | {} | {} | {} | {red} | {thesis} |",
                    show("cell_kB"),
                    show("wifi_kB"),
                    show("page_ms"),
                    show("energy_J"),
                    whole("cell_paths_whole", "cell_paths"),
                    whole("prefetch_whole", "prefetch_paths"),
                );
            }
            let _ = writeln!(s);
            versus_url(&mut s, rows, app, sc);
            wifi_pages(&mut s, rows, app, sc);
            by_kind(&mut s, plan, rows, app, sc);
            beyond_a_quarter(&mut s, plan, rows, app, sc);
        }
    }
    if !m.notes.is_empty() {
        let _ = writeln!(s, "## Unfinished and failed trials\n");
        for n in &m.notes {
            let _ = writeln!(s, "- {n}");
        }
    }
    s
}

/// What each system's browser fetched in the cellular hour, by kind: where the bytes a
/// prefetch did not save went.
fn by_kind(s: &mut String, plan: &Plan, rows: &[Row], app: &str, sc: &str) {
    let systems: Vec<&str> = plan
        .systems
        .iter()
        .map(|x| x.name())
        .filter(|n| cell(rows, app, sc, n, "cell_document_kB").n > 0)
        .collect();
    if systems.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "**What the cellular hour fetched** ({app} on {sc}; the browser's own count of the \
         loaded sample's bytes, means over trials; beside them the bytes the emulator counted on \
         the cellular link for the same sample, both ways, with the proxies' framing and the packets' \
         headers)\n\n\
         | system | pages kB | images kB | scripts and styles kB | other kB | revalidated (304) \
         | cellular link kB |\n|---|---|---|---|---|---|---|"
    );
    for n in systems {
        let v = |metric: &str| fmt_num(cell(rows, app, sc, n, metric).value());
        let _ = writeln!(
            s,
            "| {n} | {} | {} | {} | {} | {} | {} |",
            v("cell_document_kB"),
            v("cell_image_kB"),
            v("cell_code_kB"),
            v("cell_other_kB"),
            v("cell_revalidated"),
            v("cell_kB_loaded")
        );
    }
    let _ = writeln!(s);
}

/// "Beyond the top 25%": how much of the cellular hour's action redundancy a replay of each
/// top share of the trees would leverage, and at how many pages, from the trials' users
/// (the trees alone: the same for every system, so one system's trials are read).
fn beyond_a_quarter(s: &mut String, plan: &Plan, rows: &[Row], app: &str, sc: &str) {
    let Some(sys) = plan
        .systems
        .iter()
        .map(|x| x.name())
        .find(|n| cell(rows, app, sc, n, "leveraged_top25").n > 0)
    else {
        return;
    };
    let v = |metric: String| cell(rows, app, sc, sys, &metric).value();
    let _ = writeln!(
        s,
        "**Beyond the top 25%** ({app} on {sc}; the trees of the trials' users, no page loaded; \
         pages: each chosen path's root and one per action, before the WiFi budget)\n\n\
         | top of the trees | action redundancy leveraged | pages a replay loads |\n|---|---|---|"
    );
    for p in trial::FRACTIONS {
        let _ = writeln!(
            s,
            "| {p}% | {} | {} |",
            pct(v(format!("leveraged_top{p}"))),
            fmt_num(v(format!("pages_top{p}")))
        );
    }
    let (all, pages) = (v("leveraged_top100".into()), v("pages_top100".into()));
    let knee = trial::FRACTIONS
        .iter()
        .find(|p| v(format!("leveraged_top{p}")) >= 0.9 * all);
    if let (Some(knee), true) = (knee, all > 0.0 && pages > 0.0) {
        let _ = writeln!(
            s,
            "
The top {knee}% reaches nine tenths of what the whole forest leverages ({}), with {} of its {} pages.",
            pct(all),
            pct(v(format!("pages_top{knee}")) / pages),
            fmt_num(pages),
        );
    }
    let _ = writeln!(s);
}

/// Cellular bytes saved per WiFi byte, Precog with the dedup cache against URL-based prefetch
/// (the target: at least 2x).
pub fn saved_per_wifi_vs_url(rows: &[Row], app: &str, sc: &str) -> Option<f64> {
    let ours = efficiency(rows, app, sc, "precog+dedup")?;
    let url = efficiency(rows, app, sc, "url-prefetch")?;
    (url > 0.0).then(|| ours / url)
}

fn versus_url(s: &mut String, rows: &[Row], app: &str, sc: &str) {
    match saved_per_wifi_vs_url(rows, app, sc) {
        Some(x) => {
            let _ = writeln!(s, "**precog+dedup against url-prefetch, cellular bytes saved per WiFi byte**: {}x (target: at least 2x)\n", fmt_num(x));
        }
        None => {
            let _ = writeln!(s, "**precog+dedup against url-prefetch, cellular bytes saved per WiFi byte**: not defined (URL-based prefetch saved nothing, or a side has no finished trial)\n");
        }
    }
    // The same per byte prefetched (WiFi downstream): a replay's requests go up, and most of
    // a warm replay's are revalidations.
    let per_down = |sys| efficiency_per(rows, app, sc, sys, "link_wifi_down_kB");
    if let (Some(ours), Some(url)) = (per_down("precog+dedup"), per_down("url-prefetch")) {
        if url > 0.0 {
            let _ = writeln!(s, "Counted per byte prefetched (WiFi downstream only): precog+dedup {}, url-prefetch {}: {}x\n", fmt_num(ours), fmt_num(url), fmt_num(ours / url));
        }
    }
}

/// Where the WiFi hour's loads went, for each Precog system that counted them: revalidations
/// on the network (`304`, of any resource), and pages answered from the session's own copies
/// (the replayer's `reuse_pages`).
fn wifi_pages(s: &mut String, rows: &[Row], app: &str, sc: &str) {
    for sys in ["precog", "precog+dedup"] {
        let v = |metric: &str| cell(rows, app, sc, sys, metric);
        let (reval, reused) = (v("wifi_revalidated"), v("wifi_reused"));
        if reused.n == 0 {
            continue;
        }
        let _ = writeln!(
            s,
            "WiFi hour, {sys} (means over trials): {} answers of `304 Not Modified` on WiFi \
             (revalidations of any kind), {} pages answered from the replay's own copies.\n",
            fmt_num(reval.value()),
            fmt_num(reused.value())
        );
    }
}

/// Whether `p` is a crawl this lab kept (for `roam results`).
pub fn is_universe(p: &Path) -> bool {
    p.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("universe-") && n.ends_with(".json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_site_runs_at_the_three_levels_and_names_say_which() {
        let names: Vec<&str> = apps().iter().map(|a| a.name).collect();
        for site in ["news", "docs", "wiki"] {
            for (suffix, level) in [("-high", HIGH), ("", MEDIUM), ("-low", LOW)] {
                let app = format!("{site}{suffix}");
                assert!(names.contains(&app.as_str()), "{app} missing");
                assert_eq!(site_of(&app), site);
                assert_eq!(level_of(&app), level);
            }
        }
        assert_eq!(
            [HIGH, MEDIUM, LOW].map(|l| l.max_access(false)),
            [100, 1000, 5000]
        );
        assert_eq!([HIGH, MEDIUM, LOW].map(|l| l.max_access(true)), [1, 3, 16]);
        // A full crawl holds a low-redundancy user's whole pool.
        assert!(crawl_size(false).0 >= users::POOL_PER_ACCESS * LOW.max_access);
    }

    /// Efficiency per WiFi byte both ways, and per byte prefetched where the trials counted
    /// the WiFi link's downlink (the harness's `link_wifi_down_kB`).
    #[test]
    fn efficiency_is_per_wifi_byte_and_per_byte_prefetched_when_counted() {
        let row = |sys: &str, metric: &str, value: f64| Row {
            app: "news".into(),
            scenario: "home-and-away".into(),
            system: sys.into(),
            trial: 1,
            seed: 1,
            metric: metric.into(),
            value,
            unit: String::new(),
        };
        let mut rows = vec![
            row("http-cache", "cell_kB", 1000.0),
            row("url-prefetch", "cell_kB", 600.0),
            row("url-prefetch", "wifi_kB", 100.0),
            row("precog+dedup", "cell_kB", 400.0),
            row("precog+dedup", "wifi_kB", 1200.0),
        ];
        let eff = |rows: &[Row], sys| efficiency(rows, "news", "home-and-away", sys);
        assert_eq!(eff(&rows, "url-prefetch"), Some(4.0));
        assert_eq!(eff(&rows, "precog+dedup"), Some(0.5));
        assert_eq!(eff(&rows, "http-cache"), None);
        let mut s = String::new();
        versus_url(&mut s, &rows, "news", "home-and-away");
        assert!(s.contains("0.125x"), "{s}");
        assert!(!s.contains("prefetched"), "{s}");
        rows.push(row("url-prefetch", "link_wifi_down_kB", 80.0));
        rows.push(row("precog+dedup", "link_wifi_down_kB", 300.0));
        let mut s = String::new();
        versus_url(&mut s, &rows, "news", "home-and-away");
        // 600/300 = 2 against 400/80 = 5.
        assert!(s.contains("Counted per byte prefetched"), "{s}");
        assert!(s.contains(": 0.400x"), "{s}");
    }
}
