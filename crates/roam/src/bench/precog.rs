//! `roam bench precog`: how well recorded actions survive a redesign, how long a replayed
//! action takes, and (from a `roam lab precog` run) the lab's byte figures.
//!
//! The locator test: the lab's news site as of hour 96 is crawled ([`crawl::walks`], the
//! recorder's own locators); then the same hour is served with its layout changed (a banner
//! above the content, a new first link in the navigation bar, a sponsored box second in every
//! list: `news::Layout::Changed`). Each crawled action is looked for on its page of the
//! changed site without being performed; it **still resolves** if the element found links
//! where the crawled one did. Measured for roam's candidates and for the thesis's locator
//! alone (the id, else the anchored path), on the same actions.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use roam_lab::servers::nginx;
use roam_lab::studies::precog::{
    crawl, efficiency, news, saved, saved_per_wifi_vs_url, trial, users,
};
use roam_precog::browser::replay::{run_step, Outcome, ReplayConfig};
use roam_precog::browser::session::replay_all;
use roam_precog::browser::{launch, BrowserConfig};
use roam_precog::{Action, Locator, Locators, Replay, Rules};
use serde_json::json;

/// Arguments of `roam bench precog`.
#[derive(Args, Debug)]
pub struct BenchPrecogArgs {
    /// Crawl walks whose actions are tested after the layout change.
    #[arg(long, default_value_t = 60)]
    walks: usize,
    /// Paths replayed to time a replayed action.
    #[arg(long, default_value_t = 20)]
    replays: usize,
    /// A `roam lab precog` results directory: `cellular_bytes_saved` and
    /// `prefetch_efficiency` are precog+dedup's there (its news site), and
    /// `saved_per_wifi_byte_vs_url_prefetch` against url-prefetch; without it they are null.
    #[arg(long, value_name = "DIR")]
    lab: Option<PathBuf>,
}

/// A site served by nginx on the host's loopback until dropped.
struct Served {
    base: String,
    child: std::process::Child,
    dir: PathBuf,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn serve(layout: news::Layout, name: &str) -> Result<Served> {
    let dir = std::env::temp_dir().join(format!("roam-bench-precog-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    news::write_hour_as(&dir.join("site"), users::TRAIN, 1, layout, false)?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let probe = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let child = nginx::launch(
        &dir.join("nginx"),
        &trial::server_block(&dir.join("site"), port),
        probe,
    )?;
    Ok(Served {
        base: format!("http://127.0.0.1:{port}"),
        child,
        dir,
    })
}

/// The thesis's locator alone: the id if there is one, else the anchored path.
fn thesis_only(a: &Action) -> Option<Action> {
    let l = a
        .locators
        .candidates()
        .iter()
        .find(|l| matches!(l, Locator::Id { .. } | Locator::Anchored { .. }))?
        .clone();
    Some(Action {
        locators: Locators::new(vec![l]).ok()?,
        event: a.event.clone(),
    })
}

/// Of the crawled actions, the share that resolve on the changed site to the element they
/// named: (roam's candidates, the thesis's locator, actions tested).
fn layout_change(walks: &[crawl::Crawled], changed: &Served) -> Result<(f64, f64, usize)> {
    let mut seen = std::collections::HashSet::new();
    let mut tests: Vec<(String, Action, String)> = vec![];
    for w in walks {
        for (k, a) in w.actions.iter().enumerate() {
            let page = if k == 0 {
                w.root.clone()
            } else {
                w.pages[k - 1].clone()
            };
            if seen.insert((page.clone(), a.to_string())) {
                tests.push((page, a.clone(), w.pages[k].clone()));
            }
        }
    }
    if tests.is_empty() {
        bail!("the crawl found no actions");
    }
    let browser = launch(&BrowserConfig::default()).map_err(|e| anyhow!("{e}"))?;
    let tab = browser.new_tab().map_err(|e| anyhow!("{e}"))?;
    let (mut ours, mut thesis) = (0usize, 0usize);
    tests.sort_by(|a, b| a.0.cmp(&b.0));
    let mut at = String::new();
    for (page, a, want) in &tests {
        if *page != at {
            tab.navigate_to(&format!("{}{page}", changed.base))
                .and_then(|t| t.wait_until_navigated())
                .map_err(|e| anyhow!("{page}: {e}"))?;
            at = page.clone();
        }
        let hits = |x: &Action| {
            run_step(&tab, x, "127.0.0.1", true).map(|r| r.status == "done" && r.href == *want)
        };
        ours += usize::from(hits(a).map_err(|e| anyhow!("{e}"))?);
        if let Some(t) = thesis_only(a) {
            thesis += usize::from(hits(&t).map_err(|e| anyhow!("{e}"))?);
        }
    }
    let n = tests.len() as f64;
    Ok((ours as f64 / n, thesis as f64 / n, tests.len()))
}

/// Seconds per replayed action: `n` crawled paths replayed whole on the usual site.
fn replay_speed(walks: &[crawl::Crawled], usual: &Served, n: usize) -> Result<f64> {
    let paths: Vec<Replay> = walks
        .iter()
        .take(n)
        .map(|w| Replay {
            site: "127.0.0.1".into(),
            root: format!("{}{}", usual.base, w.root),
            actions: w.actions.clone(),
            hits: 1,
        })
        .collect();
    let started = Instant::now();
    let r = replay_all(
        &ReplayConfig::default(),
        &Rules::default(),
        &paths,
        &mut || Ok(()),
        &mut |_, _| {},
    )
    .map_err(|e| anyhow!("{e}"))?;
    let secs = started.elapsed().as_secs_f64();
    let steps: usize = r.paths.iter().map(|p| p.steps).sum();
    let stopped = r
        .paths
        .iter()
        .filter(|p| p.outcome != Outcome::Done)
        .count();
    eprintln!(
        "bench precog: {} paths replayed, {steps} actions, {stopped} stopped early",
        r.paths.len()
    );
    if steps == 0 {
        bail!("no action was replayed");
    }
    Ok(secs / steps as f64)
}

/// The lab's figures at `dir` (its news site on its first scenario).
fn lab(dir: &Path) -> Result<serde_json::Value> {
    let path = dir.join("trials.csv");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("--lab: reading {}", path.display()))?;
    let rows = roam_lab::report::parse_csv(&text, &path.display().to_string())?;
    let Some(first) = rows.iter().find(|r| r.app == "news") else {
        bail!(
            "--lab {}: no trial of roam lab precog's news site",
            dir.display()
        );
    };
    let sc = first.scenario.clone();
    Ok(json!({
        "cellular_bytes_saved": saved(&rows, "news", &sc, "precog+dedup").map(|s| s.0),
        "prefetch_efficiency": efficiency(&rows, "news", &sc, "precog+dedup"),
        "saved_per_wifi_byte_vs_url_prefetch": saved_per_wifi_vs_url(&rows, "news", &sc),
        "run": dir.display().to_string(),
    }))
}

/// Run `roam bench precog`.
pub fn precog(a: &BenchPrecogArgs) -> Result<()> {
    let from_lab = match &a.lab {
        Some(d) => Some(lab(d)?),
        None => None,
    };
    let usual = serve(news::Layout::Usual, "usual")?;
    let changed = serve(news::Layout::Changed, "changed")?;
    eprintln!("bench precog: crawling the news site ({} walks)", a.walks);
    let walks = crawl::walks(&usual.base, "/index.html", "a[href]", a.walks, 400, 1)?;
    let (ours, thesis, n) = layout_change(&walks, &changed)?;
    let per_action = replay_speed(&walks, &usual, a.replays)?;
    let field = |k: &str| {
        from_lab
            .as_ref()
            .map_or(serde_json::Value::Null, |v| v[k].clone())
    };
    let out = json!({
        "cellular_bytes_saved": field("cellular_bytes_saved"),
        "prefetch_efficiency": field("prefetch_efficiency"),
        "saved_per_wifi_byte_vs_url_prefetch": field("saved_per_wifi_byte_vs_url_prefetch"),
        "actions_resolved_after_layout_change": ours,
        "thesis_locator_resolved_after_layout_change": thesis,
        "actions_tested": n,
        "replay_s_per_action": per_action,
        "lab": field("run"),
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
