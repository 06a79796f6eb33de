//! A set of names bounded by the bytes they stand for, the least recently used leaving first:
//! dd-src's regular and feedback caches (the thesis's caches hold names, not content: what
//! they bound is the content the phone holds for them, §4.4.3 "Cache management").
//!
//! A doubly linked list threaded through a slab, indexed by name: every operation is O(1).

use crate::name::{Name, NameMap};

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Node {
    name: Name,
    bytes: u32,
    prev: u32,
    next: u32,
}

/// Names and the bytes each stands for, at most `limit` bytes in all.
#[derive(Debug)]
pub struct Lru {
    index: NameMap<u32>,
    nodes: Vec<Node>,
    free: Vec<u32>,
    /// Most recently used.
    head: u32,
    /// Least recently used.
    tail: u32,
    bytes: u64,
    limit: u64,
}

impl Lru {
    /// An empty set that holds at most `limit` bytes.
    pub fn new(limit: u64) -> Lru {
        Lru {
            index: NameMap::default(),
            nodes: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            bytes: 0,
            limit,
        }
    }

    /// Names held.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Bytes the names held stand for.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Whether `name` is held (without making it recent).
    pub fn contains(&self, name: Name) -> bool {
        self.index.contains_key(&name)
    }

    /// If `name` is held, make it the most recent and say so.
    pub fn touch(&mut self, name: Name) -> bool {
        let Some(&i) = self.index.get(&name) else {
            return false;
        };
        self.unlink(i);
        self.push_front(i);
        true
    }

    /// Add `name` standing for `bytes` (or make it recent if held), evicting the least
    /// recently used until the total fits; how many were evicted. A name larger than the
    /// whole limit is not held.
    pub fn insert(&mut self, name: Name, bytes: u32) -> usize {
        if self.touch(name) {
            return 0;
        }
        if u64::from(bytes) > self.limit {
            return 0;
        }
        let mut evicted = 0;
        while self.bytes + u64::from(bytes) > self.limit && self.tail != NIL {
            let old = self.nodes[self.tail as usize].name;
            self.remove(old);
            evicted += 1;
        }
        let node = Node {
            name,
            bytes,
            prev: NIL,
            next: NIL,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        self.index.insert(name, i);
        self.push_front(i);
        self.bytes += u64::from(bytes);
        evicted
    }

    /// Forget `name`; whether it was held.
    pub fn remove(&mut self, name: Name) -> bool {
        let Some(i) = self.index.remove(&name) else {
            return false;
        };
        self.unlink(i);
        self.bytes -= u64::from(self.nodes[i as usize].bytes);
        self.free.push(i);
        true
    }

    fn unlink(&mut self, i: u32) {
        let Node { prev, next, .. } = self.nodes[i as usize];
        if prev == NIL {
            self.head = next;
        } else {
            self.nodes[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.nodes[next as usize].prev = prev;
        }
    }

    fn push_front(&mut self, i: u32) {
        let old = self.head;
        {
            let n = &mut self.nodes[i as usize];
            n.prev = NIL;
            n.next = old;
        }
        if old == NIL {
            self.tail = i;
        } else {
            self.nodes[old as usize].prev = i;
        }
        self.head = i;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_least_recently_used_leaves_first() {
        let mut l = Lru::new(300);
        l.insert(Name(1), 100);
        l.insert(Name(2), 100);
        l.insert(Name(3), 100);
        assert!(l.touch(Name(1)));
        assert_eq!(l.insert(Name(4), 100), 1);
        assert!(!l.contains(Name(2)) && l.contains(Name(1)));
        assert_eq!(l.bytes(), 300);
        assert_eq!(
            l.insert(Name(5), 1000),
            0,
            "larger than the limit: not held"
        );
        assert!(!l.contains(Name(5)));
    }

    proptest! {
        /// Against a plain model: the same names held, never more bytes than the limit.
        #[test]
        fn matches_a_model(ops in proptest::collection::vec((0u8..3, 0u64..20, 1u32..50), 1..300)) {
            let mut l = Lru::new(200);
            let mut model: Vec<(u64, u32)> = Vec::new(); // most recent last
            for (op, k, b) in ops {
                match op {
                    0 => {
                        l.insert(Name(k), b);
                        if let Some(p) = model.iter().position(|x| x.0 == k) {
                            let e = model.remove(p);
                            model.push(e);
                        } else {
                            while model.iter().map(|x| u64::from(x.1)).sum::<u64>() + u64::from(b) > 200 {
                                model.remove(0);
                            }
                            model.push((k, b));
                        }
                    }
                    1 => {
                        let hit = l.touch(Name(k));
                        let p = model.iter().position(|x| x.0 == k);
                        prop_assert_eq!(hit, p.is_some());
                        if let Some(p) = p {
                            let e = model.remove(p);
                            model.push(e);
                        }
                    }
                    _ => {
                        let was = l.remove(Name(k));
                        let p = model.iter().position(|x| x.0 == k);
                        prop_assert_eq!(was, p.is_some());
                        if let Some(p) = p {
                            model.remove(p);
                        }
                    }
                }
                prop_assert!(l.bytes() <= 200);
                prop_assert_eq!(l.len(), model.len());
                prop_assert_eq!(l.bytes(), model.iter().map(|x| u64::from(x.1)).sum::<u64>());
            }
        }
    }
}
