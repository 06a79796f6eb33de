//! Cutting what the browser reports into action paths (sans-IO).
//!
//! A path (the thesis's "session", ch. V) starts at a page the user reached by typing or
//! opening a URL (the tree's root: the static URL, without its `#fragment`) and goes on with
//! each action the user took from there. The browser side reports three things (see
//! `browser/js/recorder.js`): a top-level page load, an action, and a form submission that
//! issues a POST. [`PathCutter`] turns them into finished [`Path`]s:
//!
//! - a page load within [`FOLLOW`] of the last action is that action's result: the path goes on;
//! - any other page load ends the path and starts a new one rooted at the new page;
//! - a POST ends the path (the thesis stops recording there), and what follows until the next
//!   root page is not recorded; so does any form carrying a password (the recorder reports it
//!   as a POST: sent with GET, the password is in the next page's URL). A page after a POST
//!   that comes too late to be taken for its result still starts a path, but rooted at its URL
//!   without the query (which may carry what the form sent);
//! - a path reaching [`MAX_DEPTH`] actions ends.
//!
//! Paths are recorded only on sites the user's rules allow ([`crate::rules::Rules::records`]).

use crate::action::Action;
use crate::rules::Rules;
use roam_core::Time;
use std::time::Duration;

/// A page load this soon after an action is taken to be that action's result.
pub const FOLLOW: Duration = Duration::from_secs(10);
/// Longest path kept, in actions (the thesis's crawler and users go 10 deep).
pub const MAX_DEPTH: usize = 32;

/// One finished path: the root page and the actions from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Path {
    /// The root's URL (fragment removed).
    pub root: String,
    /// The actions, in order (possibly none: the user only opened the page).
    pub actions: Vec<Action>,
}

/// The URL without its fragment: the same page for the action trees.
pub fn static_url(url: &str) -> &str {
    url.split('#').next().unwrap_or(url)
}

/// The host of an `http(s)` URL, lower-cased, without a port; `None` for anything else.
pub fn host(url: &str) -> Option<String> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit('@').next()?;
    let h = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next()?
    } else {
        authority.split(':').next()?
    };
    (!h.is_empty()).then(|| h.to_ascii_lowercase())
}

/// The state machine from browser reports to paths, for one tab.
#[derive(Debug, Default)]
pub struct PathCutter {
    current: Option<Path>,
    last_action: Option<Time>,
    /// After a POST, nothing is recorded until a new root page.
    after_post: bool,
}

impl PathCutter {
    /// A cutter with no path open.
    pub fn new() -> Self {
        Self::default()
    }

    /// A top-level page finished loading at `now`. Returns the path it ended, if any.
    pub fn page(&mut self, url: &str, now: Time, rules: &Rules) -> Option<Path> {
        let followed = self
            .last_action
            .is_some_and(|t| now.saturating_since(t) <= FOLLOW);
        if followed && self.current.is_some() {
            return None;
        }
        if followed && self.after_post {
            return None;
        }
        let done = self.finish();
        let root = if std::mem::take(&mut self.after_post) {
            static_url(url).split('?').next().unwrap_or_default()
        } else {
            static_url(url)
        };
        if host(url).is_some_and(|h| rules.records(&h)) {
            self.current = Some(Path {
                root: root.to_string(),
                actions: vec![],
            });
        }
        done
    }

    /// The user acted at `now`. Returns a path that ended because it grew too deep.
    pub fn action(&mut self, action: Action, now: Time) -> Option<Path> {
        self.last_action = Some(now);
        let p = self.current.as_mut()?;
        p.actions.push(action);
        if p.actions.len() >= MAX_DEPTH {
            return self.finish();
        }
        None
    }

    /// A form was submitted with POST at `now`: the path ends before it.
    pub fn post(&mut self, now: Time) -> Option<Path> {
        self.last_action = Some(now);
        self.after_post = true;
        self.finish()
    }

    /// The tab closed or recording stopped: the open path, if any.
    pub fn finish(&mut self) -> Option<Path> {
        self.current.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::click;

    fn t(s: u64) -> Time {
        Time::from_millis(s * 1000)
    }

    #[test]
    fn hosts() {
        assert_eq!(
            host("http://News.example:8080/a?b#c").as_deref(),
            Some("news.example")
        );
        assert_eq!(host("https://u:p@h/").as_deref(), Some("h"));
        assert_eq!(host("http://[::1]:80/").as_deref(), Some("::1"));
        assert_eq!(host("about:blank"), None);
        assert_eq!(host("http:///x"), None);
    }

    #[test]
    fn actions_and_their_pages_make_one_path() {
        let rules = Rules::default();
        let mut c = PathCutter::new();
        assert_eq!(c.page("http://n.example/#top", t(0), &rules), None);
        c.action(click("sports"), t(5));
        assert_eq!(c.page("http://n.example/sports", t(6), &rules), None);
        c.action(click("story3"), t(20));
        // A page long after the last action is a new root.
        let p = c.page("http://n.example/", t(100), &rules).unwrap();
        assert_eq!(p.root, "http://n.example/");
        assert_eq!(p.actions, vec![click("sports"), click("story3")]);
        let p = c.finish().unwrap();
        assert!(p.actions.is_empty());
    }

    #[test]
    fn a_post_ends_the_path_and_what_follows_is_not_recorded() {
        let rules = Rules::default();
        let mut c = PathCutter::new();
        c.page("http://w.example/", t(0), &rules);
        c.action(click("edit"), t(1));
        let p = c.post(t(2)).unwrap();
        assert_eq!(p.actions.len(), 1);
        assert_eq!(c.page("http://w.example/saved", t(3), &rules), None);
        assert_eq!(c.action(click("x"), t(4)), None);
        assert_eq!(c.finish(), None);
        // The next root page records again.
        c.page("http://w.example/", t(60), &rules);
        assert!(c.finish().is_some());
    }

    #[test]
    fn a_late_page_after_a_post_is_rooted_without_its_query() {
        let rules = Rules::default();
        let mut c = PathCutter::new();
        c.page("http://w.example/login", t(0), &rules);
        c.post(t(1));
        // A sign-in answered slowly: what the form sent may be in the query.
        c.page("http://w.example/hello?user=a&pw=secret#top", t(30), &rules);
        assert_eq!(c.finish().unwrap().root, "http://w.example/hello");
        // After it, roots keep their queries again.
        c.page("http://w.example/find?q=x", t(60), &rules);
        assert_eq!(c.finish().unwrap().root, "http://w.example/find?q=x");
    }

    #[test]
    fn sites_the_user_excluded_are_not_recorded() {
        let mut rules = Rules::default();
        rules.set_record("bank.example", false);
        let mut c = PathCutter::new();
        c.page("https://bank.example/", t(0), &rules);
        c.action(click("pay"), t(1));
        assert_eq!(c.finish(), None);
    }

    #[test]
    fn paths_are_bounded() {
        let rules = Rules::default();
        let mut c = PathCutter::new();
        c.page("http://d.example/", t(0), &rules);
        let mut ended = None;
        for i in 0..MAX_DEPTH {
            ended = c.action(click("next"), t(i as u64));
        }
        assert_eq!(ended.unwrap().actions.len(), MAX_DEPTH);
    }
}
