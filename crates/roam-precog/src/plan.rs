//! What to replay: the thesis's top 25% of nodes (ch. V).
//!
//! Every node of the forest (roots included) is ranked by its hits aged to the plan's time
//! (the forest's module docs: a hit counts half after each half-life; with
//! [`PlanConfig::ageing`] off, raw hit counts, as the thesis), the most-hit first (ties: the
//! most recently hit, then the shorter path, then by name, so a plan is deterministic). The top [`PlanConfig::fraction`] of them, rounded up, are chosen, over the
//! whole forest as the thesis's evaluation does, on the sites the user lets replay. Replaying
//! the path to a node passes through every node above it, so a chosen node whose path is a
//! prefix of another chosen node's is covered by that one: the plan keeps only the paths no
//! other chosen path extends, most-hit first.

use crate::action::Action;
use crate::forest::{aged, Forest, Reach};
use crate::rules::Rules;
use std::collections::HashSet;

/// How much to replay.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanConfig {
    /// The fraction of nodes to choose, in (0, 1]; the thesis's 0.25.
    pub fraction: f64,
    /// Most paths in one plan (a replay session's bound; budgets may stop it sooner).
    pub max_paths: usize,
    /// Rank by hits aged with the forest's half-life (`true`, roam's default) or by raw hit
    /// counts (`false`, the thesis's).
    pub ageing: bool,
    /// When the plan is made, seconds since the Unix epoch, which hits are aged to; `None`:
    /// the forest's latest hit ([`Forest::latest`]).
    pub at: Option<u64>,
}

impl Default for PlanConfig {
    fn default() -> Self {
        PlanConfig {
            fraction: 0.25,
            max_paths: 10_000,
            ageing: true,
            at: None,
        }
    }
}

/// One path to replay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replay {
    /// The site.
    pub site: String,
    /// The root page.
    pub root: String,
    /// The actions from it.
    pub actions: Vec<Action>,
    /// The hits of the node it was chosen for.
    pub hits: u64,
}

/// The chosen paths, most-hit first, and how many nodes were ranked and chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The paths to replay.
    pub paths: Vec<Replay>,
    /// Nodes ranked (on sites that allow replay).
    pub ranked: usize,
    /// Nodes chosen (each covered by some path of the plan).
    pub chosen: usize,
}

/// Choose what to replay from `forest` under `rules`.
pub fn plan(forest: &Forest, rules: &Rules, cfg: &PlanConfig) -> Plan {
    let mut nodes: Vec<Reach> = forest
        .reaches()
        .into_iter()
        .filter(|r| rules.replays(&r.site))
        .collect();
    // Hits aged to the plan's time, or the raw counts.
    let now = cfg
        .ageing
        .then(|| cfg.at.unwrap_or_else(|| forest.latest()));
    let score = |r: &Reach| match now {
        Some(now) => aged(r.weight, r.hits, r.last, now, forest.half_life),
        None => r.hits as f64,
    };
    nodes.sort_by(|a, b| {
        score(b)
            .total_cmp(&score(a))
            .then(b.last.cmp(&a.last))
            .then(a.actions.len().cmp(&b.actions.len()))
            .then_with(|| (&a.site, &a.root).cmp(&(&b.site, &b.root)))
            .then_with(|| key(&a.actions).cmp(&key(&b.actions)))
    });
    let ranked = nodes.len();
    let fraction = cfg.fraction.clamp(0.0, 1.0);
    let chosen = ((ranked as f64 * fraction).ceil() as usize).min(ranked);
    nodes.truncate(chosen);
    // Every proper prefix of a chosen path is covered by it (the nodes of one tree share
    // their ancestors' actions, so equal prefixes are equal values).
    let mut covered: HashSet<(&str, &[Action])> = HashSet::new();
    for n in &nodes {
        for k in 0..n.actions.len() {
            covered.insert((n.root.as_str(), &n.actions[..k]));
        }
    }
    let paths: Vec<Replay> = nodes
        .iter()
        .filter(|n| !covered.contains(&(n.root.as_str(), n.actions.as_slice())))
        .take(cfg.max_paths)
        .map(|n| Replay {
            site: n.site.clone(),
            root: n.root.clone(),
            actions: n.actions.clone(),
            hits: n.hits,
        })
        .collect();
    Plan {
        paths,
        ranked,
        chosen,
    }
}

fn key(actions: &[Action]) -> Vec<String> {
    actions.iter().map(|a| a.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::click;
    use crate::path::Path;

    fn record(f: &mut Forest, root: &str, ids: &[&str], times: usize) {
        for _ in 0..times {
            f.record(
                &Path {
                    root: root.into(),
                    actions: ids.iter().map(|i| click(i)).collect(),
                },
                1,
            );
        }
    }

    #[test]
    fn the_top_quarter_is_chosen_and_prefixes_fold_into_their_extensions() {
        let mut f = Forest::new();
        record(&mut f, "http://n.example/", &["sports", "s1"], 5);
        record(&mut f, "http://n.example/", &["sports", "s2"], 1);
        record(&mut f, "http://n.example/", &["world"], 1);
        record(&mut f, "http://w.example/", &["a"], 1);
        // Nodes: n root 7, sports 6, s1 5, s2 1, world 1, w root 1, a 1: 7 nodes, top 2 chosen
        // (ceil 1.75): n's root and sports, one path: root -> sports.
        let p = plan(&f, &Rules::default(), &PlanConfig::default());
        assert_eq!((p.ranked, p.chosen), (7, 2));
        assert_eq!(p.paths.len(), 1);
        assert_eq!(p.paths[0].actions, vec![click("sports")]);
        // Half: s1 joins, and its path covers the others.
        let p = plan(
            &f,
            &Rules::default(),
            &PlanConfig {
                fraction: 0.5,
                ..Default::default()
            },
        );
        assert_eq!(p.chosen, 4);
        assert_eq!(p.paths.len(), 2, "{:?}", p.paths);
        assert_eq!(p.paths[0].actions, vec![click("sports"), click("s1")]);
    }

    #[test]
    fn ageing_lets_a_new_habit_displace_an_old_one_that_raw_counts_keep() {
        let day = 24 * 3600;
        let mut f = Forest::new();
        let at = |f: &mut Forest, id: &str, when: u64, times: usize| {
            for _ in 0..times {
                f.record(
                    &Path {
                        root: "http://n.example/".into(),
                        actions: vec![click(id)],
                    },
                    when,
                );
            }
        };
        // Sports every day of a month ago, then world news three times this week.
        at(&mut f, "sports", day, 10);
        at(&mut f, "world", 30 * day, 3);
        // Three nodes: the root (13 hits, first either way), sports and world; two chosen.
        let cfg = |ageing| PlanConfig {
            fraction: 2.0 / 3.0,
            ageing,
            ..Default::default()
        };
        let aged = plan(&f, &Rules::default(), &cfg(true));
        assert_eq!(aged.paths[0].actions, vec![click("world")], "{aged:?}");
        let raw = plan(&f, &Rules::default(), &cfg(false));
        assert_eq!(raw.paths[0].actions, vec![click("sports")], "{raw:?}");
        // Planned on the day of the old habit, it still wins.
        let then = plan(
            &f,
            &Rules::default(),
            &PlanConfig {
                at: Some(day),
                ..cfg(true)
            },
        );
        assert_eq!(then.paths[0].actions, vec![click("sports")], "{then:?}");
    }

    #[test]
    fn sites_without_replay_are_left_out() {
        let mut f = Forest::new();
        record(&mut f, "http://n.example/", &["a"], 3);
        record(&mut f, "http://w.example/", &["b"], 1);
        let mut rules = Rules::default();
        rules.set_replay("n.example", false);
        let p = plan(
            &f,
            &rules,
            &PlanConfig {
                fraction: 1.0,
                ..Default::default()
            },
        );
        assert_eq!(p.ranked, 2);
        assert!(p.paths.iter().all(|r| r.site == "w.example"));
    }
}
