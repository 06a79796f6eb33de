//! Pages a replay session already holds: asked for again, they are not asked of the network.
//!
//! Precog replays each chosen path from its root (the thesis, ch. V), and the paths of one
//! site share their roots and first actions: the root page, a section's front page and a
//! story are loaded again and again within minutes. Sites send their HTML as `no-cache`
//! (it changes by the hour), so each load is a revalidation on WiFi, a request up and a
//! `304 Not Modified` down, for a page the session fetched minutes before. In the lab's news
//! WiFi hour at afdeb8b, 11,638 of 11,733 page loads were such revalidations, and their
//! requests made WiFi's uplink larger than its downlink (docs/precog.md).
//!
//! A prefetch session has no use for them: what it fetched is already in the browser's cache
//! and the dedup cache, and it needs a page again only to click on it. So the session keeps
//! each page it fetched (a `GET` whose response was a `200`, as the browser kept it), and for
//! [`PageReuse::ttl`] a navigation to that URL is answered from the copy
//! (`Fetch.fulfillRequest`), with nothing sent. After that, the next load asks the network
//! again and refreshes the copy. Only pages (documents) are kept: images, scripts and styles
//! are the HTTP cache's, which serves them without asking for as long as the site lets it.
//! The user's own browsing never goes through this: it is the replay's, and off unless a
//! session asks for it ([`super::replay::ReplayConfig::reuse_pages`]).
//!
//! The copies are bounded ([`PageReuse::max_bytes`]): once full, expired copies are dropped
//! first, and a page that still does not fit is not kept.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The most bytes of pages one session keeps by default.
pub const MAX_BYTES: usize = 32 << 20;

/// One kept page, ready to answer a navigation with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    /// Its `Content-Type`.
    pub content_type: String,
    /// Its body, base64 (as `Fetch.fulfillRequest` takes it).
    pub body_base64: String,
}

/// The pages a session keeps, by URL.
#[derive(Debug)]
pub struct PageReuse {
    /// How long a copy answers for after it was fetched.
    pub ttl: Duration,
    /// The most bytes of bodies kept.
    pub max_bytes: usize,
    pages: HashMap<String, (Instant, Page)>,
    bytes: usize,
}

impl PageReuse {
    /// Keep pages for `ttl` each, at most [`MAX_BYTES`] of them.
    pub fn new(ttl: Duration) -> PageReuse {
        PageReuse {
            ttl,
            max_bytes: MAX_BYTES,
            pages: HashMap::new(),
            bytes: 0,
        }
    }

    /// The copy of `url` if one was fetched less than [`PageReuse::ttl`] before `now`.
    pub fn get(&self, url: &str, now: Instant) -> Option<&Page> {
        self.pages
            .get(url)
            .filter(|(at, _)| now.saturating_duration_since(*at) < self.ttl)
            .map(|(_, p)| p)
    }

    /// Keep `page` as `url`'s copy, fetched at `now` (replacing an older one); false if it
    /// does not fit, even with the expired copies dropped.
    pub fn keep(&mut self, url: &str, page: Page, now: Instant) -> bool {
        if let Some((_, old)) = self.pages.remove(url) {
            self.bytes -= old.body_base64.len();
        }
        let size = page.body_base64.len();
        if self.bytes + size > self.max_bytes {
            let ttl = self.ttl;
            let bytes = &mut self.bytes;
            self.pages.retain(|_, (at, p)| {
                let live = now.saturating_duration_since(*at) < ttl;
                if !live {
                    *bytes -= p.body_base64.len();
                }
                live
            });
        }
        if self.bytes + size > self.max_bytes {
            return false;
        }
        self.bytes += size;
        self.pages.insert(url.to_string(), (now, page));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(n: usize) -> Page {
        Page {
            content_type: "text/html".into(),
            body_base64: "A".repeat(n),
        }
    }

    #[test]
    fn a_copy_answers_until_its_time_is_up() {
        let t0 = Instant::now();
        let mut r = PageReuse::new(Duration::from_secs(600));
        assert!(r.keep("http://n/", page(8), t0));
        assert_eq!(
            r.get("http://n/", t0 + Duration::from_secs(599)),
            Some(&page(8))
        );
        assert_eq!(r.get("http://n/", t0 + Duration::from_secs(600)), None);
        assert_eq!(r.get("http://n/other", t0), None);
        // Fetched again, it answers for another ttl.
        assert!(r.keep("http://n/", page(9), t0 + Duration::from_secs(700)));
        assert_eq!(
            r.get("http://n/", t0 + Duration::from_secs(900)),
            Some(&page(9))
        );
    }

    #[test]
    fn the_bound_drops_expired_copies_first_and_refuses_what_still_does_not_fit() {
        let t0 = Instant::now();
        let mut r = PageReuse::new(Duration::from_secs(10));
        r.max_bytes = 100;
        assert!(r.keep("a", page(60), t0));
        assert!(r.keep("b", page(30), t0 + Duration::from_secs(5)));
        // 60 + 30 + 20 > 100, and nothing has expired yet: refused, the others kept.
        assert!(!r.keep("c", page(20), t0 + Duration::from_secs(6)));
        assert_eq!(r.pages.len(), 2);
        // Once `a` expired, it makes room.
        assert!(r.keep("c", page(20), t0 + Duration::from_secs(11)));
        assert_eq!(r.pages.len(), 2);
        assert!(r.get("a", t0 + Duration::from_secs(11)).is_none());
        // Replacing a copy counts its new size, not both.
        assert!(r.keep("b", page(70), t0 + Duration::from_secs(12)));
        assert_eq!(r.bytes, 90);
    }
}
