//! The universal set of action paths: the thesis's crawler (ch. V, "clicks on all possible
//! elements on each website, traversing links up to a reference depth of ten"; only clicks on
//! `href` links), on the lab's sites.
//!
//! Clicking every element to depth ten is a tree of 10^10 paths on any real site; the thesis
//! kept "over 470,000" of them. Here the crawl is [`walks`] random walks of depth
//! [`DEPTH`] over the site's link graph: from the site's root, each step a link of the page
//! chosen uniformly. Each page is loaded once in headless Chromium; its same-site links are
//! read with the recorder's own locators (`roam_precog`'s `recorder.js`), so a crawled action
//! is exactly what the recorder would have recorded for a click on that link. Links are
//! followed by their URL (what a click on an `href` does).
//!
//! The crawl runs once per lab run, on the host's loopback, and is kept (`universe-APP.json`
//! in the run's directory) so that every trial draws its users from the same set.

use anyhow::{anyhow, Context, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use roam_precog::browser::record::RECORDER_JS;
use roam_precog::browser::{launch, BrowserConfig};
use roam_precog::{Action, Event, Locators};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::time::Duration;

/// The depth of a walk (the thesis's reference depth).
pub const DEPTH: usize = 10;

/// One crawled path: the root page and the actions from it, with the page each reached (as
/// paths on the site, without scheme and host, so a trial can serve the site anywhere).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Crawled {
    /// The root page (site-relative, e.g. `/index.html`).
    pub root: String,
    /// The actions.
    pub actions: Vec<Action>,
    /// The page each action reached (site-relative), one per action.
    pub pages: Vec<String>,
}

#[derive(Deserialize)]
struct Link {
    href: String,
    locators: Locators,
}

/// `n` walks over the site at `base` (e.g. `http://127.0.0.1:8080`) from `root`, with
/// `seed`, following the same-site links that the CSS selector `links` picks (`a[href]`: every
/// link); at most `max_pages` distinct pages are loaded.
pub fn walks(
    base: &str,
    root: &str,
    links: &str,
    n: usize,
    max_pages: usize,
    seed: u64,
) -> Result<Vec<Crawled>> {
    let links = serde_json::to_string(links)?;
    let browser = launch(&BrowserConfig::default()).map_err(|e| anyhow!("{e}"))?;
    let tab = browser
        .new_tab()
        .map_err(|e| anyhow!("opening a tab: {e}"))?;
    tab.set_default_timeout(Duration::from_secs(30));
    let mut graph: HashMap<String, Vec<(Action, String)>> = HashMap::new();
    let mut links_of = |page: &str| -> Result<Option<Vec<(Action, String)>>> {
        if let Some(l) = graph.get(page) {
            return Ok(Some(l.clone()));
        }
        if graph.len() >= max_pages {
            return Ok(None);
        }
        let url = format!("{base}{page}");
        tab.navigate_to(&url)
            .and_then(|t| t.wait_until_navigated())
            .map_err(|e| anyhow!("crawling {url}: {e}"))?;
        let expr = format!(
            "{RECORDER_JS}\nJSON.stringify(Array.from(document.querySelectorAll({links}))\
             .filter(a => a.origin === location.origin)\
             .map(a => ({{href: a.pathname + a.search, locators: window.__roamPrecogLocators(a)}})))"
        );
        let v = tab
            .evaluate(&expr, false)
            .map_err(|e| anyhow!("reading {url}'s links: {e}"))?;
        let text = v
            .value
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default();
        let links: Vec<Link> =
            serde_json::from_str(&text).with_context(|| format!("{url}'s links"))?;
        let links: Vec<(Action, String)> = links
            .into_iter()
            .map(|l| {
                (
                    Action {
                        locators: l.locators,
                        event: Event::Click,
                    },
                    l.href,
                )
            })
            .collect();
        graph.insert(page.to_string(), links.clone());
        Ok(Some(links))
    };
    let mut r = ChaCha8Rng::seed_from_u64(seed ^ 0xc4a1);
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let mut c = Crawled {
            root: root.to_string(),
            actions: vec![],
            pages: vec![],
        };
        let mut at = root.to_string();
        while c.actions.len() < DEPTH {
            let Some(links) = links_of(&at)? else { break };
            if links.is_empty() {
                break;
            }
            let (a, href) = links[r.gen_range(0..links.len())].clone();
            c.actions.push(a);
            c.pages.push(href.clone());
            at = href;
        }
        out.push(c);
    }
    Ok(out)
}
