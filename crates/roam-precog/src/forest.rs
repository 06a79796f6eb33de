//! The forest of action trees (the thesis, ch. V, "action trees").
//!
//! One tree per root page (the static URL a path starts from); each node below the root is an
//! action, and a node's children are the actions the user took next. Recording a [`Path`]
//! walks it down the tree, adding the nodes it lacks and raising the hit counter of every
//! node it passes, the root's too. Trees are grouped by site (the root's host), so a user can
//! see and forget one site.
//!
//! The thesis keeps raw hit counts and no ageing; so does roam. Each node also keeps when it
//! was last hit, shown by `roam precog status`. The forest is bounded: past
//! [`Forest::max_nodes`] the least-hit leaves (oldest first among equals) are dropped, so a
//! long-lived profile cannot grow without end.

use crate::action::Action;
use crate::path::{host, Path};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Default bound on the nodes in the forest (roots included).
pub const MAX_NODES: usize = 100_000;

/// One node: the action it stands for (none at a root), its hits and its children.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// The action (the most recent recording of it, whose locators best fit today's layout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<Action>,
    /// How many recorded paths passed through this node.
    pub hits: u64,
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
            last: 0,
            children: vec![],
        }
    }

    fn count(&self) -> usize {
        1 + self.children.iter().map(Node::count).sum::<usize>()
    }
}

/// One tree: a root page and the actions from it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
    /// The node count, once known (recounted after loading).
    #[serde(skip)]
    nodes: Option<usize>,
}

fn default_max() -> usize {
    MAX_NODES
}

impl Default for Forest {
    fn default() -> Self {
        Forest {
            sites: BTreeMap::new(),
            max_nodes: MAX_NODES,
            nodes: None,
        }
    }
}

/// A node reached by a path from a root: what replay works from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reach {
    /// The site.
    pub site: String,
    /// The root's URL.
    pub root: String,
    /// The actions from the root to the node (empty: the root itself).
    pub actions: Vec<Action>,
    /// The node's hits.
    pub hits: u64,
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
        node.hits += 1;
        node.last = now;
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
            node.hits += 1;
            node.last = now;
        }
        self.nodes = Some(count);
        self.bound();
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

    /// Drop the least-hit leaves (the oldest first among equals) until within `max_nodes`:
    /// in rounds, each taking the weakest leaves there are (a leaf's parent can become one).
    fn bound(&mut self) {
        let mut count = self.nodes.unwrap_or_else(|| self.len());
        while count > self.max_nodes {
            let mut all: Vec<Leaf> = vec![];
            for (site, trees) in &self.sites {
                for (root, n) in trees {
                    leaves(n, &mut vec![], &mut |leaf, at| {
                        all.push((
                            (leaf.hits, leaf.last),
                            site.clone(),
                            root.clone(),
                            at.to_vec(),
                        ))
                    });
                }
            }
            all.sort();
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

/// A leaf for [`Forest::bound`]: (hits, last hit), site, root, child indices.
type Leaf = ((u64, u64), String, String, Vec<usize>);

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
