//! The `news` reader: Precog's browsing (issue 46's fourth corpus). The site is the Precog
//! lab's news site ([`precog::news`](crate::studies::precog::news)), whose content changes
//! every hour on a schedule while its layout does not; the reader reads it by its boxes, as
//! the Precog user taps "the third headline", not by URL.
//!
//! A page is a **slot**: `front`, a section's page (`section:tech`), the story in the front
//! page's k-th box (`top:3`) or in a section's k-th box (`tech:5`). Before the change the site
//! stands at [`BEFORE`] (the morning of the measured day); the change moves it
//! [`HOURS_BETWEEN`] hours on, the interval of the thesis's snapshots (ch. V, Figs. 13-14),
//! so a slot read again holds another story or the same story at a new URL (story URLs carry
//! the hour). The same text under a new URL is what a URL-keyed cache misses and
//! deduplication finds. The reader fetches the HTML (as the `docs` and `wiki` readers do):
//! the images have stable URLs, which an HTTP cache already serves.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{anyhow, bail, Context, Result};

use super::trial::{served_as_is, static_server, Site};
use crate::harness::scratch::Scratch;
use crate::harness::service::point;
use crate::studies::precog::news::{self, Story, LISTED, SECTIONS, TOP};

/// The hour the reader reads at first: hour 6 of the lab week's seventh day (16-hour days).
pub const BEFORE: u32 = 6 * 16 + 6;

/// Hours between the two readings.
pub const HOURS_BETWEEN: u32 = 6;

/// Every slot a reader may read.
pub fn slots() -> Vec<String> {
    let mut out = vec!["front".to_string()];
    out.extend(SECTIONS.iter().map(|s| format!("section:{s}")));
    out.extend((1..=TOP).map(|k| format!("top:{k}")));
    for s in SECTIONS {
        out.extend((1..=LISTED).map(|k| format!("{s}:{k}")));
    }
    out
}

/// The request path of `slot` with the site at `hour`.
pub fn resolve(slot: &str, hour: u32, seed: u64) -> Result<String> {
    let story = |list: Vec<Story>, k: &str| -> Result<String> {
        let k: usize = k.parse().with_context(|| format!("slot `{slot}`"))?;
        let st = k
            .checked_sub(1)
            .and_then(|i| list.get(i))
            .ok_or_else(|| anyhow!("slot `{slot}`: no such box at hour {hour}"))?;
        Ok(st.url(hour, seed))
    };
    match slot.split_once(':') {
        None if slot == "front" => Ok("/index.html".into()),
        Some(("section", s)) if SECTIONS.contains(&s) => Ok(format!("/{s}/index.html")),
        Some(("top", k)) => story(news::front(hour, seed), k),
        Some((s, k)) => match SECTIONS.iter().position(|x| *x == s) {
            Some(i) => story(news::listed(i, hour, seed), k),
            None => bail!("slot `{slot}`: no section `{s}`"),
        },
        None => bail!("`{slot}` is not a slot of the news site"),
    }
}

/// The site at its two hours: both trees written, `current` pointing at the one served.
pub(super) struct NewsSite {
    seed: u64,
    changed: AtomicBool,
    dir: Scratch,
}

impl NewsSite {
    /// Write the site for `seed` at [`BEFORE`] and [`HOURS_BETWEEN`] later; serve the first.
    pub(super) fn new(seed: u64) -> Result<NewsSite> {
        let dir = Scratch::new("dedup-news")?;
        for h in [BEFORE, BEFORE + HOURS_BETWEEN] {
            news::write_hour(&dir.join(format!("h{h}")), h, seed)?;
        }
        point(&dir, &dir.join(format!("h{BEFORE}")))?;
        Ok(NewsSite {
            seed,
            changed: false.into(),
            dir,
        })
    }

    fn hour(&self) -> u32 {
        if self.changed.load(Ordering::Relaxed) {
            BEFORE + HOURS_BETWEEN
        } else {
            BEFORE
        }
    }
}

impl Site for NewsSite {
    fn nginx(&self) -> Option<(String, PathBuf)> {
        Some((static_server(&self.dir), self.dir.join("nginx")))
    }

    fn path(&self, page: &str) -> String {
        // Every slot of `slots()` resolves at both hours (a unit test checks it).
        resolve(page, self.hour(), self.seed).unwrap_or_else(|_| "/missing".into())
    }

    fn change(&self) -> Result<()> {
        point(
            &self.dir,
            &self.dir.join(format!("h{}", BEFORE + HOURS_BETWEEN)),
        )?;
        self.changed.store(true, Ordering::Relaxed);
        Ok(())
    }

    fn check(&self, page: &str, body: &[u8]) -> Result<()> {
        let path = resolve(page, self.hour(), self.seed)?;
        let file = self
            .dir
            .join(format!("h{}", self.hour()))
            .join(path.trim_start_matches('/'));
        served_as_is(&file, body).with_context(|| format!("slot `{page}`"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_slot_resolves_to_a_page_at_both_hours_and_stories_move() {
        let site = NewsSite::new(3).unwrap();
        let slots = slots();
        assert_eq!(slots.len(), 1 + 5 + TOP + 5 * LISTED);
        let mut same_url = 0;
        for slot in &slots {
            let before = site.path(slot);
            let file = site.dir.join(format!("h{BEFORE}{before}"));
            assert!(file.is_file(), "{slot}: {}", file.display());
            site.check(slot, &std::fs::read(&file).unwrap()).unwrap();
            let after = resolve(slot, BEFORE + HOURS_BETWEEN, 3).unwrap();
            let h = BEFORE + HOURS_BETWEEN;
            assert!(site.dir.join(format!("h{h}{after}")).is_file(), "{slot}");
            same_url += usize::from(before == after);
        }
        // Only the front and section pages keep their URLs.
        assert_eq!(same_url, 1 + SECTIONS.len());
        site.change().unwrap();
        let front = std::fs::read(site.dir.join(format!("h{}/index.html", BEFORE + 6))).unwrap();
        site.check("front", &front).unwrap();
        assert!(site.check("top:1", b"not the page").is_err());
        assert!(resolve("top:99", BEFORE, 3).is_err());
        assert!(resolve("weather:1", BEFORE, 3).is_err());
        assert!(resolve("nothing", BEFORE, 3).is_err());
    }
}
