//! The user's control, per domain (the thesis, ch. V: "users control Precog per domain").
//!
//! For each domain the user may turn off recording, turn off replay, and allow the one kind of
//! POST replay may ever send: a sign-in, named by the URL prefix it posts to. Nothing else is
//! ever posted by a replay. A rule for `example.org` covers its subdomains (`news.example.org`)
//! unless a longer rule names them. What is recorded stays on the device: the trees and these
//! rules are files in the user's data directory and nothing in roam sends them anywhere.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The rule for one domain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DomainRule {
    /// Record the user's actions on this domain.
    pub record: bool,
    /// Replay them on WiFi.
    pub replay: bool,
    /// The URL prefix of a sign-in form replay may POST to, if the user allowed one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sign_in: Option<String>,
}

impl Default for DomainRule {
    fn default() -> Self {
        DomainRule {
            record: true,
            replay: true,
            sign_in: None,
        }
    }
}

/// Every domain's rule; a domain without one gets [`Rules::default_rule`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rules {
    /// The rule for domains no entry names (record and replay, no sign-in, unless changed).
    #[serde(default)]
    pub default_rule: DomainRule,
    /// Per-domain rules, by lower-case domain.
    #[serde(default)]
    pub domains: BTreeMap<String, DomainRule>,
}

impl Rules {
    /// The rule that applies to `host`: the longest domain rule it falls under, else the
    /// default.
    pub fn rule(&self, host: &str) -> &DomainRule {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let mut at = host.as_str();
        loop {
            if let Some(r) = self.domains.get(at) {
                return r;
            }
            match at.split_once('.') {
                Some((_, parent)) if !parent.is_empty() => at = parent,
                _ => return &self.default_rule,
            }
        }
    }

    fn entry(&mut self, domain: &str) -> &mut DomainRule {
        let d = domain.trim_end_matches('.').to_ascii_lowercase();
        let inherited = self.rule(&d).clone();
        self.domains.entry(d).or_insert(inherited)
    }

    /// Whether actions on `host` are recorded.
    pub fn records(&self, host: &str) -> bool {
        self.rule(host).record
    }

    /// Whether paths on `host` are replayed.
    pub fn replays(&self, host: &str) -> bool {
        self.rule(host).replay
    }

    /// Whether a replay may POST to `url` on `host`: only to the sign-in prefix the user set.
    pub fn may_post(&self, host: &str, url: &str) -> bool {
        self.rule(host)
            .sign_in
            .as_deref()
            .is_some_and(|p| url.starts_with(p))
    }

    /// Turn recording on `domain` on or off.
    pub fn set_record(&mut self, domain: &str, on: bool) {
        self.entry(domain).record = on;
    }

    /// Turn replay on `domain` on or off.
    pub fn set_replay(&mut self, domain: &str, on: bool) {
        self.entry(domain).replay = on;
    }

    /// Allow (or, with `None`, stop allowing) a sign-in POST to URLs starting `prefix`.
    pub fn set_sign_in(&mut self, domain: &str, prefix: Option<String>) {
        self.entry(domain).sign_in = prefix;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_domain_wins_and_subdomains_inherit() {
        let mut r = Rules::default();
        r.set_record("example.org", false);
        r.set_record("news.example.org", true);
        assert!(!r.records("example.org"));
        assert!(!r.records("www.EXAMPLE.org."));
        assert!(r.records("news.example.org"));
        assert!(r.records("a.news.example.org"));
        assert!(r.records("other.net"));
        // A new subdomain rule starts from what the domain had.
        r.set_replay("shop.example.org", false);
        assert!(!r.records("shop.example.org"));
    }

    #[test]
    fn posts_only_to_the_sign_in_the_user_allowed() {
        let mut r = Rules::default();
        assert!(!r.may_post("w.example", "http://w.example/login"));
        r.set_sign_in("w.example", Some("http://w.example/login".into()));
        assert!(r.may_post("w.example", "http://w.example/login?next=/"));
        assert!(!r.may_post("w.example", "http://w.example/edit"));
        assert!(!r.may_post("other.example", "http://w.example/login"));
    }
}
