//! The phone's cache (the thesis's dd-dst_cache): chunks by name, and every flowlet as the
//! sequence of its chunks' names, linked to the flowlet that followed it in its flow.
//!
//! Bounded in bytes of chunk content. Eviction takes the least recently used flowlet whole;
//! a chunk goes when the last flowlet naming it goes (§4.4.3: reference counts). An index from
//! each name to the flowlets it appeared in (the most recent few) finds the past flowlets an
//! arriving segment shares chunks with.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::name::{Name, NameMap, NameSet};

/// A flowlet's number (the thesis's `id_count`).
pub type FlowletId = u64;

/// How many flowlets the index remembers per name (the most recent).
const INDEX_PER_NAME: usize = 8;

#[derive(Debug)]
struct Chunk {
    bytes: Box<[u8]>,
    /// Places in flowlets that name it.
    refs: u32,
}

/// One flowlet: its chunks' names in order, and the flowlet after it in its flow.
#[derive(Debug, Default)]
pub struct Flowlet {
    /// Names in stream order.
    pub names: Vec<Name>,
    /// The flowlet that followed it.
    pub next: Option<FlowletId>,
    /// When it was last used (its key in the LRU order).
    used: u64,
}

/// The cache.
#[derive(Debug)]
pub struct Store {
    chunks: NameMap<Chunk>,
    flowlets: HashMap<FlowletId, Flowlet>,
    /// Flowlets by last use, oldest first.
    order: BTreeMap<u64, FlowletId>,
    index: NameMap<Vec<FlowletId>>,
    bytes: u64,
    limit: u64,
    clock: u64,
    next_id: FlowletId,
    /// Flowlets evicted so far.
    pub evicted: u64,
    /// What changed since the cache was last written to disk ([`super::disk`]).
    pub(super) changes: Changes,
}

/// Changes since the last save.
#[derive(Debug, Default)]
pub(super) struct Changes {
    pub(super) chunks_added: NameSet,
    pub(super) chunks_removed: NameSet,
    pub(super) flowlets: HashSet<FlowletId>,
    pub(super) flowlets_removed: HashSet<FlowletId>,
}

impl Store {
    /// An empty cache of at most `limit` bytes of chunks.
    pub fn new(limit: u64) -> Store {
        Store {
            chunks: NameMap::default(),
            flowlets: HashMap::new(),
            order: BTreeMap::new(),
            index: NameMap::default(),
            bytes: 0,
            limit,
            clock: 0,
            next_id: 1,
            evicted: 0,
            changes: Changes::default(),
        }
    }

    /// A cache of at most `limit` bytes rebuilt from saved flowlets (`(id, names, next,
    /// last use)`) and chunks; the least recently used flowlets beyond the limit are left
    /// out. Chunks no flowlet names are dropped.
    pub(super) fn rebuilt(
        limit: u64,
        mut flowlets: Vec<(FlowletId, Vec<Name>, Option<FlowletId>, u64)>,
        mut chunk: impl FnMut(Name) -> Option<Box<[u8]>>,
    ) -> Store {
        let mut s = Store::new(limit);
        flowlets.sort_by_key(|f| std::cmp::Reverse(f.3));
        for (id, names, next, used) in flowlets {
            let mut bytes = 0;
            let mut fresh = Vec::new();
            for n in &names {
                if !s.chunks.contains_key(n) && !fresh.iter().any(|(m, _)| m == n) {
                    match chunk(*n) {
                        Some(b) => {
                            bytes += b.len() as u64;
                            fresh.push((*n, b));
                        }
                        None => continue,
                    }
                }
            }
            if s.bytes + bytes > limit {
                continue;
            }
            for (n, b) in fresh {
                s.bytes += b.len() as u64;
                s.chunks.insert(n, Chunk { bytes: b, refs: 0 });
            }
            let names: Vec<Name> = names
                .into_iter()
                .filter(|n| s.chunks.contains_key(n))
                .collect();
            for n in &names {
                s.chunks.get_mut(n).expect("inserted").refs += 1;
                let ix = s.index.entry(*n).or_default();
                if ix.last() != Some(&id) && ix.len() < INDEX_PER_NAME {
                    ix.push(id);
                }
            }
            s.order.insert(used, id);
            s.clock = s.clock.max(used);
            s.next_id = s.next_id.max(id + 1);
            s.flowlets.insert(id, Flowlet { names, next, used });
        }
        s
    }

    /// Flowlet `id`'s names, the flowlet after it and its last use.
    pub(super) fn flowlet_entry(&self, id: FlowletId) -> Option<(&[Name], Option<FlowletId>, u64)> {
        self.flowlets
            .get(&id)
            .map(|f| (&f.names[..], f.next, f.used))
    }

    /// Bytes of chunks held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Chunks held.
    pub fn chunks(&self) -> usize {
        self.chunks.len()
    }

    /// The chunk named `name`.
    pub fn get(&self, name: Name) -> Option<&[u8]> {
        self.chunks.get(&name).map(|c| &*c.bytes)
    }

    /// A flowlet.
    pub fn flowlet(&self, id: FlowletId) -> Option<&Flowlet> {
        self.flowlets.get(&id)
    }

    /// Start a new flowlet, after `prev` in its flow if given.
    pub fn new_flowlet(&mut self, prev: Option<FlowletId>) -> FlowletId {
        let id = self.next_id;
        self.next_id += 1;
        self.clock += 1;
        self.flowlets.insert(
            id,
            Flowlet {
                names: Vec::new(),
                next: None,
                used: self.clock,
            },
        );
        self.order.insert(self.clock, id);
        self.changes.flowlets.insert(id);
        if let Some(f) = prev.and_then(|p| self.flowlets.get_mut(&p)) {
            f.next = Some(id);
            self.changes.flowlets.insert(prev.expect("some"));
        }
        id
    }

    /// Make `id` the most recently used.
    pub fn touch(&mut self, id: FlowletId) {
        if let Some(f) = self.flowlets.get_mut(&id) {
            self.order.remove(&f.used);
            self.clock += 1;
            f.used = self.clock;
            self.order.insert(self.clock, id);
            self.changes.flowlets.insert(id);
        }
    }

    /// Past flowlets (other than `current`) in which any of `names` appeared.
    pub fn flowlets_with(&self, names: &[Name], current: FlowletId) -> Vec<FlowletId> {
        let mut out: Vec<FlowletId> = names
            .iter()
            .filter_map(|n| self.index.get(n))
            .flatten()
            .copied()
            .filter(|id| *id != current && self.flowlets.contains_key(id))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Whether `id` is among the flowlets `name` appeared in.
    pub fn appeared_in(&self, name: Name, id: FlowletId) -> bool {
        self.index.get(&name).is_some_and(|v| v.contains(&id))
    }

    /// Append a chunk to flowlet `id` (keeping its bytes, taken without a copy, if new), then
    /// evict least recently used flowlets, never `id` itself, until the cache fits.
    pub fn append(&mut self, id: FlowletId, name: Name, bytes: Box<[u8]>) {
        let Some(f) = self.flowlets.get_mut(&id) else {
            return;
        };
        f.names.push(name);
        self.changes.flowlets.insert(id);
        match self.chunks.get_mut(&name) {
            Some(c) => c.refs += 1,
            None => {
                self.changes.chunks_added.insert(name);
                self.changes.chunks_removed.remove(&name);
                self.bytes += bytes.len() as u64;
                self.chunks.insert(name, Chunk { bytes, refs: 1 });
            }
        }
        let ix = self.index.entry(name).or_default();
        if ix.last() != Some(&id) {
            ix.push(id);
            if ix.len() > INDEX_PER_NAME {
                ix.remove(0);
            }
        }
        while self.bytes > self.limit {
            let Some((&used, &old)) = self.order.iter().find(|(_, &f)| f != id) else {
                break;
            };
            self.order.remove(&used);
            self.evict(old);
        }
    }

    /// Forget a chunk (its name was found to collide): it stays out of every flowlet's use.
    pub fn forget(&mut self, name: Name) {
        if let Some(c) = self.chunks.remove(&name) {
            self.bytes -= c.bytes.len() as u64;
            self.changes.chunks_added.remove(&name);
            self.changes.chunks_removed.insert(name);
        }
        self.index.remove(&name);
    }

    fn evict(&mut self, id: FlowletId) {
        let Some(f) = self.flowlets.remove(&id) else {
            return;
        };
        self.evicted += 1;
        self.changes.flowlets.remove(&id);
        self.changes.flowlets_removed.insert(id);
        for name in f.names {
            if let Some(c) = self.chunks.get_mut(&name) {
                c.refs -= 1;
                if c.refs == 0 {
                    self.bytes -= c.bytes.len() as u64;
                    self.chunks.remove(&name);
                    self.index.remove(&name);
                    self.changes.chunks_added.remove(&name);
                    self.changes.chunks_removed.insert(name);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eviction_takes_whole_flowlets_and_keeps_shared_chunks() {
        let mut s = Store::new(300);
        let a = s.new_flowlet(None);
        s.append(a, Name(1), Box::new([1; 100]));
        s.append(a, Name(2), Box::new([2; 100]));
        let b = s.new_flowlet(Some(a));
        s.append(b, Name(2), Box::new([2; 100]));
        s.append(b, Name(3), Box::new([3; 100]));
        assert_eq!(s.bytes(), 300);
        assert_eq!(s.flowlet(a).unwrap().next, Some(b));
        // A fourth chunk: flowlet a goes; chunk 2 stays (b names it), chunk 1 goes.
        s.append(b, Name(4), Box::new([4; 100]));
        assert!(s.flowlet(a).is_none());
        assert!(s.get(Name(1)).is_none());
        assert_eq!(s.get(Name(2)), Some(&[2u8; 100][..]));
        assert_eq!(s.bytes(), 300);
        assert_eq!(s.flowlets_with(&[Name(2)], 999), vec![b]);
    }
}
