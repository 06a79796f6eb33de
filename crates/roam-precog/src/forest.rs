//! The forest of action trees (the thesis, ch. V, "action trees").
//!
//! One tree per root page (the static URL a path starts from); each node below the root is an
//! action, and a node's children are the actions the user took next. Recording a [`Path`]
//! walks it down the tree, adding the nodes it lacks and raising the hit counter of every
//! node it passes, the root's too. Trees are grouped by site (the root's host), so a user can
//! see and forget one site.
//!
//! **Ageing** (beyond the thesis, which keeps raw hit counts). Habits change: a section read
//! every morning last month and never since should give way to this week's. Each node keeps,
//! beside its raw `hits`, a `weight`: its hits, each counting half as much for every
//! [`Forest::half_life`] since it happened (an exponentially decayed count, kept as of the
//! node's last hit and brought forward when it is hit again or ranked: [`aged`]). The default
//! half-life is [`HALF_LIFE`], a week: a habit left for a week counts half, for a month about
//! a twentieth. The plan ranks by the aged weight ([`crate::PlanConfig::ageing`]) or, as the
//! thesis, by raw hits. Each node also keeps when it was last hit, shown by `roam precog
//! status`.
//!
//! The forest is bounded: past [`Forest::max_nodes`] the leaves of least aged weight (oldest
//! first among equals) are dropped, so a long-lived profile cannot grow without end.

use crate::action::Action;
use crate::path::{host, Path};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Default bound on the nodes in the forest (roots included).
pub const MAX_NODES: usize = 100_000;

/// Default half-life of a hit (see the module's docs on ageing): a week, in seconds.
pub const HALF_LIFE: u64 = 7 * 24 * 3600;

/// A node's `weight`, kept as of its last hit `last`, brought forward to `now` with a
/// half-life of `half_life` seconds (0: no ageing). A node from a file written before ageing
/// (weight 0 with hits) counts its raw hits.
pub fn aged(weight: f64, hits: u64, last: u64, now: u64, half_life: u64) -> f64 {
    let w = if weight > 0.0 { weight } else { hits as f64 };
    if half_life == 0 {
        return w;
    }
    w * 0.5f64.powf(now.saturating_sub(last) as f64 / half_life as f64)
}

/// One node: the action it stands for (none at a root), its hits and its children.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// The action (the most recent recording of it, whose locators best fit today's layout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<Action>,
    /// How many recorded paths passed through this node.
    pub hits: u64,
    /// Its hits aged as of `last` (see the module's docs; 0 in files written before ageing).
    #[serde(default)]
    pub weight: f64,
    /// When it was last hit (seconds since the Unix epoch).
    pub last: u64,
    /// The actions taken next.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<Node>,
}

impl Node {
    fn new(action: Option<Action>) -> Node {
        Node {
            action,
            hits: 0,
            weight: 0.0,
            last: 0,
            children: vec![],
        }
    }

    /// One more hit at `now`.
    fn hit(&mut self, now: u64, half_life: u64) {
        self.weight = aged(self.weight, self.hits, self.last, now, half_life) + 1.0;
        self.hits += 1;
        self.last = self.last.max(now);
    }

    fn count(&self) -> usize {
        1 + self.children.iter().map(Node::count).sum::<usize>()
    }
}

/// One tree: a root page and the actions from it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tree {
    /// The root page's URL.
    pub url: String,
    /// The root node (no action).
    pub root: Node,
}

/// Every site's trees.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Forest {
    /// Trees by site (the root's host), each site's by root URL.
    pub sites: BTreeMap<String, BTreeMap<String, Node>>,
    /// The bound on nodes; see the module's docs.
    #[serde(default = "default_max")]
    pub max_nodes: usize,
    /// The half-life of a hit, seconds (0: no ageing); see the module's docs.
    #[serde(default = "default_half_life")]
    pub half_life: u64,
    /// The node count, once known (recounted after loading).
    #[serde(skip)]
    nodes: Option<usize>,
}

fn default_max() -> usize {
    MAX_NODES
}

fn default_half_life() -> u64 {
    HALF_LIFE
}

impl Default for Forest {
    fn default() -> Self {
        Forest {
            sites: BTreeMap::new(),
            max_nodes: MAX_NODES,
            half_life: HALF_LIFE,
            nodes: None,
        }
    }
}

/// A node reached by a path from a root: what replay works from.
#[derive(Clone, Debug, PartialEq)]
pub struct Reach {
    /// The site.
    pub site: String,
    /// The root's URL.
    pub root: String,
    /// The actions from the root to the node (empty: the root itself).
    pub actions: Vec<Action>,
    /// The node's hits.
    pub hits: u64,
    /// Its hits aged as of `last` (its `weight`; [`aged`] brings it forward).
    pub weight: f64,
    /// When it was last hit.
    pub last: u64,
}

impl Forest {
    /// An empty forest with the default bound.
    pub fn new() -> Self {
        Self::default()
    }

    /// Record one path at `now` (seconds since the Unix epoch). Paths whose root is not an
    /// http(s) URL are ignored.
    pub fn record(&mut self, path: &Path, now: u64) {
        let Some(site) = host(&path.root) else {
            return;
        };
        let mut count = self.nodes.unwrap_or_else(|| self.len());
        let mut node = self
            .sites
            .entry(site)
            .or_default()
            .entry(path.root.clone())
            .or_insert_with(|| {
                count += 1;
                Node::new(None)
            });
        let half_life = self.half_life;
        node.hit(now, half_life);
        for a in &path.actions {
            let i = match node
                .children
                .iter()
                .position(|c| c.action.as_ref().is_some_and(|x| x.same_as(a)))
            {
                Some(i) => i,
                None => {
                    count += 1;
                    node.children.push(Node::new(None));
                    node.children.len() - 1
                }
            };
            node = &mut node.children[i];
            node.action = Some(a.clone());
            node.hit(now, half_life);
        }
        self.nodes = Some(count);
        self.bound(now);
    }

    /// The most recent hit anywhere in the forest (0 when empty): the `now` a plan ages
    /// weights to unless told otherwise.
    pub fn latest(&self) -> u64 {
        fn walk(n: &Node) -> u64 {
            n.children.iter().map(walk).fold(n.last, u64::max)
        }
        self.sites
            .values()
            .flat_map(|t| t.values())
            .map(walk)
            .max()
            .unwrap_or(0)
    }

    /// How many nodes the forest holds (roots included).
    pub fn len(&self) -> usize {
        self.sites
            .values()
            .flat_map(|t| t.values())
            .map(Node::count)
            .sum()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.sites.is_empty()
    }

    /// Forget everything recorded on `site` and its subdomains; returns how many nodes went.
    pub fn forget(&mut self, site: &str) -> usize {
        let site = site.trim_end_matches('.').to_ascii_lowercase();
        let gone: Vec<String> = self
            .sites
            .keys()
            .filter(|s| **s == site || s.ends_with(&format!(".{site}")))
            .cloned()
            .collect();
        self.nodes = None;
        gone.iter()
            .filter_map(|s| self.sites.remove(s))
            .map(|t| t.values().map(Node::count).sum::<usize>())
            .sum()
    }

    /// Every node, with the path that reaches it, in no particular order.
    pub fn reaches(&self) -> Vec<Reach> {
        fn walk(n: &Node, site: &str, root: &str, trail: &mut Vec<Action>, out: &mut Vec<Reach>) {
            out.push(Reach {
                site: site.to_string(),
                root: root.to_string(),
                actions: trail.clone(),
                hits: n.hits,
                weight: n.weight,
                last: n.last,
            });
            for c in &n.children {
                if let Some(a) = &c.action {
                    trail.push(a.clone());
                    walk(c, site, root, trail, out);
                    trail.pop();
                }
            }
        }
        let mut out = vec![];
        for (site, trees) in &self.sites {
            for (root, n) in trees {
                walk(n, site, root, &mut vec![], &mut out);
            }
        }
        out
    }

    /// Drop the leaves of least weight aged to `now` (the oldest first among equals) until
    /// within `max_nodes`: in rounds, each taking the weakest leaves there are (a leaf's
    /// parent can become one).
    fn bound(&mut self, now: u64) {
        let mut count = self.nodes.unwrap_or_else(|| self.len());
        let half_life = self.half_life;
        while count > self.max_nodes {
            let mut all: Vec<Leaf> = vec![];
            for (site, trees) in &self.sites {
                for (root, n) in trees {
                    leaves(n, &mut vec![], &mut |leaf, at| {
                        all.push((
                            (
                                aged(leaf.weight, leaf.hits, leaf.last, now, half_life),
                                leaf.last,
                            ),
                            site.clone(),
                            root.clone(),
                            at.to_vec(),
                        ))
                    });
                }
            }
            all.sort_by(|a, b| {
                a.0 .0
                    .total_cmp(&b.0 .0)
                    .then(a.0 .1.cmp(&b.0 .1))
                    .then_with(|| (&a.1, &a.2, &a.3).cmp(&(&b.1, &b.2, &b.3)))
            });
            all.truncate(count - self.max_nodes);
            if all.is_empty() {
                break;
            }
            count -= all.len();
            // Deepest and rightmost first, so that indices still to remove stay valid.
            all.sort_by(|a, b| (&b.1, &b.2, &b.3).cmp(&(&a.1, &a.2, &a.3)));
            for (_, site, root, at) in all {
                let trees = self.sites.get_mut(&site).expect("listed above");
                match at.split_last() {
                    None => {
                        trees.remove(&root);
                    }
                    Some((last, parents)) => {
                        let mut n = trees.get_mut(&root).expect("listed above");
                        for &i in parents {
                            n = &mut n.children[i];
                        }
                        n.children.remove(*last);
                    }
                }
            }
            self.sites.retain(|_, t| !t.is_empty());
        }
        self.nodes = Some(count);
    }
}

/// A leaf for [`Forest::bound`]: (aged weight, last hit), site, root, child indices.
type Leaf = ((f64, u64), String, String, Vec<usize>);

fn leaves(n: &Node, at: &mut Vec<usize>, f: &mut dyn FnMut(&Node, &[usize])) {
    if n.children.is_empty() {
        f(n, at);
    }
    for (i, c) in n.children.iter().enumerate() {
        at.push(i);
        leaves(c, at, f);
        at.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::click;

    fn path(root: &str, ids: &[&str]) -> Path {
        Path {
            root: root.into(),
            actions: ids.iter().map(|i| click(i)).collect(),
        }
    }

    #[test]
    fn paths_merge_and_count_hits() {
        let mut f = Forest::new();
        f.record(&path("http://n.example/", &["sports", "s1"]), 10);
        f.record(&path("http://n.example/", &["sports", "s2"]), 20);
        f.record(&path("http://n.example/", &[]), 30);
        let root = &f.sites["n.example"]["http://n.example/"];
        assert_eq!(root.hits, 3);
        assert_eq!(root.last, 30);
        assert_eq!(root.children.len(), 1);
        assert_eq!(root.children[0].hits, 2);
        assert_eq!(root.children[0].children.len(), 2);
        assert_eq!(f.len(), 4);
        let mut r = f.reaches();
        r.sort_by_key(|r| r.actions.len());
        assert_eq!(r[2].actions.len(), 2);
    }

    #[test]
    fn forget_removes_a_site_and_its_subdomains() {
        let mut f = Forest::new();
        f.record(&path("http://example.org/", &["a"]), 1);
        f.record(&path("http://news.example.org/", &["a"]), 1);
        f.record(&path("http://other.net/", &["a"]), 1);
        assert_eq!(f.forget("EXAMPLE.org"), 4);
        assert_eq!(f.sites.keys().collect::<Vec<_>>(), ["other.net"]);
    }

    #[test]
    fn a_hit_counts_half_after_each_half_life() {
        let mut f = Forest {
            half_life: 100,
            ..Forest::new()
        };
        f.record(&path("http://a.example/", &["x"]), 0);
        f.record(&path("http://a.example/", &["x"]), 100);
        let x = &f.sites["a.example"]["http://a.example/"].children[0];
        assert_eq!(x.hits, 2);
        assert!((x.weight - 1.5).abs() < 1e-9, "{}", x.weight);
        assert!((aged(x.weight, x.hits, x.last, 300, 100) - 0.375).abs() < 1e-9);
        assert_eq!(aged(x.weight, x.hits, x.last, 300, 0), 1.5, "no ageing");
        // A node from before ageing counts its raw hits.
        assert_eq!(aged(0.0, 4, 0, 0, 100), 4.0);
        assert_eq!(f.latest(), 100);
    }

    #[test]
    fn the_bound_drops_weak_leaves_first() {
        let mut f = Forest {
            max_nodes: 3,
            ..Forest::new()
        };
        assert!(f.is_empty());
        f.record(&path("http://a.example/", &["x"]), 1);
        f.record(&path("http://a.example/", &["x"]), 2);
        f.record(&path("http://a.example/", &["y"]), 3);
        assert_eq!(f.len(), 3);
        f.record(&path("http://a.example/", &["z"]), 4);
        let root = &f.sites["a.example"]["http://a.example/"];
        // y (1 hit, older than z) went; x (2 hits) stays.
        let kept: Vec<String> = root
            .children
            .iter()
            .map(|c| c.action.as_ref().unwrap().to_string())
            .collect();
        assert_eq!(kept, ["click #x", "click #z"]);
    }
}
