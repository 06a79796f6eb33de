//! The lab's wiki: a real web application for Precog to browse (issue 47's MediaWiki).
//!
//! Debian's MediaWiki under php-fpm and nginx, its database in SQLite, with the dedup lab's
//! articles: the PostgreSQL manual's pages as wikitext ([`dedup::wiki`](super::super::dedup::wiki)).
//! The site's root is the wiki's main page, which holds the manual's table of contents, so a
//! user (and the crawler) reaches every article from it through the wiki's own links
//! (`/index.php/Title`), its sidebar and its tools, as a reader of any MediaWiki does.
//!
//! **What changes between the hours** is the articles, not the URLs: a wiki's pages keep their
//! addresses, and MediaWiki answers a revalidation of an unchanged page with `304`. Between
//! the WiFi hour and the cellular hour the wiki gets a day of edits at the dedup corpus's
//! rate (a third of the articles a week: one article in [`EDITS_ONE_IN`], each edited as
//! [`edits`](super::super::dedup::wiki::edits) edits). The rate is our model; the thesis's
//! sites were news sites and portals.

use std::sync::Mutex;

use anyhow::{Context, Result};

use super::super::dedup::{corpus, wiki as articles};
use crate::harness::scratch::Scratch;
use crate::harness::service::lock;
use crate::servers::mediawiki::{Fpm, Wiki};

/// The root of every path: the main page.
pub const ROOT: &str = "/index.php/Main_Page";

/// The links a reader follows (Vector's article text and the sidebar's navigation).
pub const LINKS: &str = "#mw-content-text a[href], #p-navigation a[href]";

/// One article in this many is edited between the WiFi hour and the cellular hour: a day at
/// the dedup corpus's rate of a third a week.
pub const EDITS_ONE_IN: u32 = articles::WEEK_EDITS_ONE_IN * 7;

/// An installed wiki, its php-fpm once started, and the edits it will get.
pub struct WikiSite {
    wiki: Mutex<Wiki>,
    edits: Vec<(String, String)>,
    /// The hour the wiki was first served at, and whether the edits are in.
    state: Mutex<(Option<u32>, bool)>,
    /// Before `dir`: php-fpm stops before its directory goes.
    fpm: Mutex<Option<Fpm>>,
    /// Last: removed after everything that uses it.
    dir: Scratch,
}

impl WikiSite {
    /// Install the wiki, reachable as `http://{server}`, with the manual's pages as articles
    /// and the main page as its table of contents; `seed` draws the day's edits.
    pub fn install(server: &str, seed: u64) -> Result<WikiSite> {
        let docs = corpus::docs()?;
        let mut all = articles::articles(&docs)?;
        let index = all
            .iter()
            .find(|(t, _)| t == "Index")
            .map(|(_, text)| text.clone())
            .context("the manual has no index page for the wiki's main page")?;
        let edits = articles::edits(&all, seed, EDITS_ONE_IN);
        all.push(("Main_Page".into(), index));
        let dir = Scratch::new("precog-wiki")?;
        let wiki = Wiki::install(&dir.join("wiki"), server, &all)?;
        Ok(WikiSite {
            wiki: Mutex::new(wiki),
            edits,
            state: Mutex::new((None, false)),
            fpm: Mutex::new(None),
            dir,
        })
    }

    /// Start php-fpm (in the calling thread's network namespace; it listens on a Unix
    /// socket). It stops when the site is dropped.
    pub fn serve(&self) -> Result<()> {
        let fpm = lock(&self.wiki).serve()?;
        *lock(&self.fpm) = Some(fpm);
        Ok(())
    }

    /// nginx's configuration for the wiki on `at` (`127.0.0.1:PORT`).
    pub fn nginx_server(&self, at: &str) -> String {
        lock(&self.wiki).nginx_server(at)
    }

    /// Where nginx keeps its files for this wiki.
    pub fn nginx_dir(&self) -> std::path::PathBuf {
        self.dir.join("nginx")
    }

    /// The wiki as it stands at `hour`: as installed at the first hour it is served at, with
    /// the day's edits at any later hour.
    pub fn at(&self, hour: u32) -> Result<()> {
        let mut st = lock(&self.state);
        let first = *st.0.get_or_insert(hour);
        if hour > first && !st.1 {
            lock(&self.wiki).import(&self.edits, "a day's edits")?;
            st.1 = true;
        }
        Ok(())
    }

    /// How many articles the day's edits change.
    pub fn edited(&self) -> usize {
        self.edits.len()
    }
}
