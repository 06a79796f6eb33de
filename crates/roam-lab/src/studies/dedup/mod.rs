//! `roam lab dedup`: asymmetric caching (the Sanadhya thesis, chapter IV;
//! ../shared/spec/sanadhya.md §2) on real traffic through roam's relay and proxy, beside what
//! is used today.
//!
//! Every system carries the same reader's fetches (curl through `roam net proxy`'s SOCKS5, to
//! nginx behind `roam net relay`, [`trial`]) over both networks; only what the relay and proxy
//! do to the downstream differs ([`DedupSystem`]):
//!
//! | system | what the relay and proxy do |
//! |---|---|
//! | `none` | carry the bytes as they are |
//! | `endre` | the thesis's baseline: dedup with dd-src's regular cache only (EndRE-style), the phone's cache the same size as asymmetric caching's |
//! | `zstd` | zstd per connection (level 3) |
//! | `zstd-dict` | zstd with the previous response to the same request as a dictionary (RFC 9842's `dcz` idea) |
//! | `ac` | asymmetric caching: regular and feedback caches at dd-src, the phone's flowlets steering feedback |
//! | `ac+zstd` | asymmetric caching, its records compressed with zstd |
//! | `ac-multi` | asymmetric caching with a relay per network (the thesis's multi-homed phone): not run unless named |
//!
//! dd-src has the thesis's ~1 MB ([`nodes::SOURCE_BYTES`]) and dd-dst 256 MB. The corpora
//! (applications): `docs` ([`corpus`]), two point releases of Debian's PostgreSQL manual as
//! static pages, read before and after the site's upgrade; `wiki` ([`wiki`]), the same
//! manual's pages as the articles of a real MediaWiki, read before and after a week of edits;
//! `news` ([`news`]), Precog's browsing: the Precog lab's news site read by its boxes, six
//! hours apart; `mail` ([`mail`]), a technical mailing list's traffic in Dovecot, read over
//! IMAP, whose replies carry what they answer. Scenarios: `walking-campus` (WiFi in reach 69%
//! of the time, so connections move between WiFi and cellular) at 0% and 1% loss
//! (`+loss=1%`).
//!
//! A relay per network (the thesis's multi-homed case): in the other systems one relay per
//! place serves both networks, so its source's caches see every connection; `ac-multi` gives
//! each place a relay for WiFi and one for cellular, each with a dd-src of its own, and the
//! place's proxy sends each new connection to the relay of the network roam would use then
//! (`ProxyConfig::per_network`, `roam net proxy --network-relay`). It is not among the systems
//! run by default: `--systems ac,ac-multi`.

pub mod corpus;
pub mod fetch;
pub mod mail;
pub mod news;
pub mod nodes;
pub mod trial;
pub mod wiki;

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::{bail, Result};

use crate::harness::charts::charts;
use crate::harness::matrix;
use crate::harness::plan::{App, Plan};
use crate::harness::results::{written_by, Measured};
use crate::harness::seeds::seeds_line;
use crate::harness::setup::{Need, CURL, DOVECOT, NGINX};
use crate::harness::study::{report_lines, Defaults, Request, Study};
use crate::harness::system::{System, SystemUnderTest, Transport};
use crate::harness::trial::{Metric, Trial};
use crate::report::compare::{best_baseline, by_seed, cell};
use crate::report::{fmt_num, stats, Row};
use crate::servers::mediawiki;

/// The interactive event every trial records: one page's fetch.
pub const EVENT: &str = "fetch";

/// The scenarios of a full run.
pub const SCENARIOS: [&str; 2] = ["walking-campus", "walking-campus+loss=1%"];

/// What the relay and proxy do to the downstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DedupSystem {
    /// Nothing.
    None,
    /// Dedup with the regular cache only.
    EndRe,
    /// zstd per connection.
    Zstd,
    /// zstd with the previous response as dictionary.
    ZstdDict,
    /// Asymmetric caching.
    Ac,
    /// Asymmetric caching, compressed.
    AcZstd,
    /// Asymmetric caching with a relay per network at each place.
    AcMulti,
}

impl DedupSystem {
    /// Every system, baselines first.
    pub const ALL: [DedupSystem; 6] = [
        DedupSystem::None,
        DedupSystem::EndRe,
        DedupSystem::Zstd,
        DedupSystem::ZstdDict,
        DedupSystem::Ac,
        DedupSystem::AcZstd,
    ];

    /// Systems run only when named (`--systems`).
    pub const EXTRA: [DedupSystem; 1] = [DedupSystem::AcMulti];

    /// Every system: the default ones ([`DedupSystem::ALL`]), then [`DedupSystem::EXTRA`].
    pub fn every() -> impl Iterator<Item = DedupSystem> {
        DedupSystem::ALL.into_iter().chain(DedupSystem::EXTRA)
    }

    /// Name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            DedupSystem::None => "none",
            DedupSystem::EndRe => "endre",
            DedupSystem::Zstd => "zstd",
            DedupSystem::ZstdDict => "zstd-dict",
            DedupSystem::Ac => "ac",
            DedupSystem::AcZstd => "ac+zstd",
            DedupSystem::AcMulti => "ac-multi",
        }
    }

    /// Whether the relay and proxy deduplicate.
    pub fn dedups(self) -> bool {
        matches!(
            self,
            DedupSystem::EndRe | DedupSystem::Ac | DedupSystem::AcZstd | DedupSystem::AcMulti
        )
    }

    /// Whether the phone sends feedback (asymmetric caching).
    pub fn feedback(self) -> bool {
        matches!(
            self,
            DedupSystem::Ac | DedupSystem::AcZstd | DedupSystem::AcMulti
        )
    }

    /// Whether each place has a relay per network (WiFi, cellular), each with its own source.
    pub fn per_network(self) -> bool {
        self == DedupSystem::AcMulti
    }

    /// Whether the downstream is compressed.
    pub fn compresses(self) -> bool {
        matches!(
            self,
            DedupSystem::Zstd | DedupSystem::ZstdDict | DedupSystem::AcZstd
        )
    }

    /// Whether it is a baseline (what asymmetric caching is compared with).
    pub fn baseline(self) -> bool {
        !self.feedback()
    }
}

impl SystemUnderTest for DedupSystem {
    fn name(&self) -> &str {
        DedupSystem::name(*self)
    }

    fn transport(&self) -> Transport {
        Transport::Roam
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The study's applications: one per corpus, each a reader of pages (30 minutes in full).
pub fn apps() -> Vec<App> {
    type RunFn = fn(&Trial) -> Result<Vec<Metric>>;
    let app = |name, run, quick_s, needs: &'static [Need]| App {
        name,
        run,
        full: Duration::from_secs(30 * 60),
        quick: Duration::from_secs(quick_s),
        interactive: ("fetch_ms", "mean page fetch time (ms)"),
        background: ("cell_kB", "cellular bytes, both ways (kB)", false),
        event: (EVENT, "page fetch time (ms)"),
        needs,
        interactive_floor: None,
        stagger: None,
    };
    const WIKI: &[Need] = &[
        NGINX,
        CURL,
        mediawiki::MEDIAWIKI,
        mediawiki::PHP_FPM,
        mediawiki::PHP_CLI,
        mediawiki::PHP_SQLITE,
    ];
    vec![
        app("docs", trial::run_docs as RunFn, 100, &[NGINX, CURL]),
        app("wiki", trial::run_wiki, 150, WIKI),
        app("news", trial::run_news, 100, &[NGINX, CURL]),
        app("mail", trial::run_mail, 100, &[DOVECOT, CURL]),
    ]
}

/// `roam lab dedup`.
pub struct Dedup;

impl Study for Dedup {
    fn name(&self) -> &'static str {
        "dedup"
    }

    fn paper(&self) -> &'static str {
        "Asymmetric caching (Sanadhya, Ultra-mobile computing thesis, ch. IV): last-hop \
         deduplication steered by the phone's feedback, on real traffic beside zstd"
    }

    fn defaults(&self) -> Defaults {
        Defaults {
            scenarios: SCENARIOS.map(String::from).to_vec(),
            quick_scenarios: vec!["walking-campus".into()],
            apps: vec!["docs".into(), "wiki".into(), "news".into(), "mail".into()],
            quick_apps: vec!["docs".into()],
            jobs: 3,
            quick_jobs: Some(3),
            out: "results/dedup",
        }
    }

    fn apps(&self) -> Vec<App> {
        apps()
    }

    fn system(&self, name: &str) -> Result<System> {
        match DedupSystem::every().find(|s| s.name() == name) {
            Some(s) => Ok(System::new(s)),
            None => bail!(
                "unknown system `{name}` for roam lab dedup (expected one of: {})",
                DedupSystem::every()
                    .map(|s| s.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    fn systems(&self, _quick: bool) -> Vec<System> {
        DedupSystem::ALL.into_iter().map(System::new).collect()
    }

    fn paper_figure(&self, _app: &str, _scenario: &str, system: &str) -> Option<String> {
        (system == "ac").then(|| THESIS.to_string())
    }

    fn measure(&self, plan: &Plan, _request: &Request) -> Result<(String, Vec<Row>)> {
        let all = apps();
        if !plan.report_only {
            let runs = |app: &str| plan.apps.iter().any(|a| a == app);
            std::fs::create_dir_all(&plan.out)?;
            let mut text = String::new();
            if runs("docs") || runs("wiki") || runs("mail") {
                // Fetched once, before any trial (trials run side by side).
                let d = corpus::docs()?;
                text.push_str(&format!(
                    "docs: Debian {} {} (before the upgrade) and {} (after), {} pages\n",
                    corpus::PACKAGE,
                    d.old.0,
                    d.new.0,
                    d.pages.len()
                ));
                if runs("wiki") {
                    text.push_str(&format!(
                        "wiki: the {} pages of {} as the articles of MediaWiki {}, a seeded \
                         third edited between the readings\n",
                        d.pages.len(),
                        d.old.0,
                        mediawiki::version()
                    ));
                }
            }
            if runs("mail") {
                text.push_str(&format!(
                    "mail: a mailing list on the manual's pages (its paragraphs as the text, \
                     {} of its pages as attachments) in Dovecot {}, read over IMAP: half the \
                     messages before, the rest after their delivery\n",
                    mail::ATTACHABLE,
                    crate::servers::dovecot::version()
                ));
            }
            if runs("news") {
                text.push_str(&format!(
                    "news: the Precog lab's news site, {} slots (front page, sections, boxes) \
                     read at hour {} and {} hours later\n",
                    news::slots().len(),
                    news::BEFORE,
                    news::HOURS_BETWEEN
                ));
            }
            std::fs::write(plan.out.join("corpus.txt"), text)?;
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

/// The thesis's figures (30 users' traces, ch. IV).
const THESIS: &str = "thesis: 89.7% of the redundancy found, 6.74 bytes saved per byte of \
                      feedback (30 users' traces)";

/// One metric's cell: its mean with interval, or "-" where the system has none.
fn show(rows: &[Row], app: &str, sc: &str, sys: &str, metric: &str) -> String {
    let c = cell(rows, app, sc, sys, metric);
    if c.n == 0 && c.failed == 0 {
        return "-".into();
    }
    c.cell()
}

fn markdown(plan: &Plan, m: &Measured) -> String {
    let rows = &m.rows;
    let mut s = String::new();
    let corpus = std::fs::read_to_string(plan.out.join("corpus.txt")).unwrap_or_default();
    let _ = writeln!(
        s,
        "# roam lab dedup: asymmetric caching on real traffic\n\nMeasured with roam `{}`{}. \
         {}{}. Every system carries the same reader (curl, one connection \
         per page) through roam's relay and proxy over WiFi and cellular; only what they do \
         to the downstream differs. Cells: the mean over trials with its 95% confidence \
         interval, then the median. Cellular bytes count both ways, as a data plan does. \
         Redundancy present: what an unbounded cache of everything read before finds \
         (FastCDC chunks, 256-byte average). Found: bytes dd-src replaced by names, by its \
         regular and its feedback cache, over the redundancy present. {THESIS}.\n\nCorpus: \
         {}\n",
        m.version,
        written_by(&m.version),
        crate::report::trials_per_cell(plan.trials, rows),
        if plan.quick {
            ", **quick** (a short reader: 30 pages before and after)"
        } else {
            ""
        },
        corpus.trim()
    );
    let _ = writeln!(s, "{}\n", seeds_line("dedup", rows));
    for app in &plan.apps {
        let _ = writeln!(
            s,
            "## {app}\n\n![{app} fetch time]({app}-interactive.svg) ![{app} cellular \
             bytes]({app}-background.svg)\n"
        );
        for sc in &plan.scenarios {
            table(&mut s, plan, rows, app, sc);
            versus_best(&mut s, plan, rows, app, sc);
        }
        kept_at_loss(&mut s, plan, rows, app);
    }
    if !m.notes.is_empty() {
        let _ = writeln!(s, "## Unfinished and failed trials\n");
        for n in &m.notes {
            let _ = writeln!(s, "- {n}");
        }
    }
    s
}

fn table(s: &mut String, plan: &Plan, rows: &[Row], app: &str, sc: &str) {
    let _ = writeln!(
        s,
        "### {app} on {sc}\n\n| system | cellular kB | all links down kB | fetch ms | read kB | \
         redundancy present | found | by regular kB | by feedback kB | bytes saved per \
         feedback byte |\n|---|---|---|---|---|---|---|---|---|---|"
    );
    for sys in &plan.systems {
        let n = sys.name();
        let present = {
            let a = by_seed(rows, app, sc, n, "app_kB");
            let o = by_seed(rows, app, sc, n, "oracle_kB");
            let f: Vec<f64> = a
                .iter()
                .zip(&o)
                .filter(|(x, y)| x.0 == y.0 && x.1 > 0.0)
                .map(|(x, y)| y.1 / x.1)
                .collect();
            if f.is_empty() {
                "-".into()
            } else {
                format!("{:.0}%", crate::report::mean(&f) * 100.0)
            }
        };
        let _ = writeln!(
            s,
            "| {n} | {} | {} | {} | {} | {present} | {} | {} | {} | {} |",
            show(rows, app, sc, n, "cell_kB"),
            show(rows, app, sc, n, "down_kB"),
            show(rows, app, sc, n, "fetch_ms"),
            show(rows, app, sc, n, "app_kB"),
            show(rows, app, sc, n, "found"),
            show(rows, app, sc, n, "regular_kB"),
            show(rows, app, sc, n, "feedback_kB"),
            show(rows, app, sc, n, "saved_per_feedback_byte"),
        );
    }
    let _ = writeln!(s);
}

/// The baselines of the plan.
fn baselines(plan: &Plan) -> Vec<&str> {
    baseline_names(plan.systems.iter().map(|s| s.name()))
}

/// `ours`'s cellular bytes against the best of `baselines` on `app` over `sc`: that baseline
/// and the ratio of their means (the baseline's over ours: above 1, `ours` used fewer), with
/// its interval; `None` where either has no finished trial.
pub fn cellular_advantage<'a>(
    rows: &[Row],
    (app, sc): (&str, &str),
    ours: &str,
    baselines: &[&'a str],
) -> Option<(&'a str, stats::RatioOfMeans)> {
    let (best, _) = best_baseline(rows, (app, sc), baselines, "cell_kB", false)?;
    let a = by_seed(rows, app, sc, ours, "cell_kB");
    let b = by_seed(rows, app, sc, best, "cell_kB");
    Some((best, stats::ratio_of_means(&b, &a)?))
}

/// Asymmetric caching's cellular bytes against the best baseline's (the target: at
/// least 1.3x fewer), as the ratio of means with its interval, then per seed.
fn versus_best(s: &mut String, plan: &Plan, rows: &[Row], app: &str, sc: &str) {
    let base = baselines(plan);
    for ours in ["ac", "ac+zstd", "ac-multi"] {
        let Some((best, r)) = cellular_advantage(rows, (app, sc), ours, &base) else {
            continue;
        };
        let iv = r
            .interval
            .map(|(lo, hi)| format!(" [{}-{}x]", fmt_num(lo), fmt_num(hi)))
            .unwrap_or_default();
        let per_seed = stats::paired_ratios(
            &by_seed(rows, app, sc, best, "cell_kB"),
            &by_seed(rows, app, sc, ours, "cell_kB"),
        );
        let ps = if per_seed.len() > 1 {
            let v: Vec<f64> = per_seed.iter().map(|x| x.1).collect();
            format!("; per seed: {}x", fmt_num(stats::geometric_mean(&v)))
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "**{ours} against the best baseline ({best}), cellular bytes**: {}x{iv}{ps} fewer \
             (target: at least 1.3x)\n",
            fmt_num(r.ratio)
        );
    }
}

/// The baselines among `systems`' names.
pub fn baseline_names<'a>(systems: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    systems
        .into_iter()
        .filter(|n| DedupSystem::every().any(|d| d.name() == *n && d.baseline()))
        .collect()
}

/// At 1% loss, how much of what asymmetric caching saves at 0% it keeps (the issue's
/// target: at least 90%): saved = 1 - ac's all-link bytes / none's, over scenarios named
/// `S` and `S+loss=1%`.
fn kept_at_loss(s: &mut String, plan: &Plan, rows: &[Row], app: &str) {
    let saved = |sc: &str| -> Option<f64> {
        let ac = cell(rows, app, sc, "ac", "down_kB").value();
        let none = cell(rows, app, sc, "none", "down_kB").value();
        (ac.is_finite() && none.is_finite() && none > 0.0).then(|| 1.0 - ac / none)
    };
    for sc in &plan.scenarios {
        let lossy = format!("{sc}+loss=1%");
        if !plan.scenarios.contains(&lossy) {
            continue;
        }
        if let (Some(a), Some(b)) = (saved(sc), saved(&lossy)) {
            let _ = writeln!(
                s,
                "**Savings kept at 1% loss** ({sc}): asymmetric caching saves {:.0}% of the \
                 downstream bytes at 0% loss and {:.0}% at 1%: {:.0}% kept (target: at least \
                 90%)\n",
                a * 100.0,
                b * 100.0,
                if a > 0.0 { b / a * 100.0 } else { f64::NAN }
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relay_per_network_is_run_only_when_named() {
        let default: Vec<String> = Dedup
            .systems(true)
            .iter()
            .map(|s| s.name().to_string())
            .collect();
        assert!(!default.iter().any(|n| n == "ac-multi"), "{default:?}");
        let multi = Dedup.system("ac-multi").unwrap();
        let sys = *multi.get::<DedupSystem>().unwrap();
        assert!(sys.per_network() && sys.feedback() && !sys.baseline());
        let err = Dedup.system("ac-many").unwrap_err().to_string();
        assert!(err.contains("ac+zstd, ac-multi"), "{err}");
        assert_eq!(baseline_names(["ac-multi", "zstd"]), ["zstd"]);
    }
}
