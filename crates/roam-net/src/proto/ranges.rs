//! A set of disjoint half-open byte ranges `[start, end)`, kept merged.
//!
//! The receiver records which bytes of an IROB it holds; the sender records which bytes it must
//! still (re)transmit.

use std::collections::BTreeMap;

/// Disjoint, merged ranges keyed by start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RangeSet {
    map: BTreeMap<u64, u64>,
}

impl RangeSet {
    /// The empty set.
    pub fn new() -> RangeSet {
        RangeSet::default()
    }

    /// Add `[start, end)`, merging with neighbours.
    pub fn insert(&mut self, mut start: u64, mut end: u64) {
        if start >= end {
            return;
        }
        if let Some((&s, &e)) = self.map.range(..=start).next_back() {
            if e >= start {
                start = s;
                end = end.max(e);
                self.map.remove(&s);
            }
        }
        while let Some((&s, &e)) = self.map.range(start..).next() {
            if s > end {
                break;
            }
            end = end.max(e);
            self.map.remove(&s);
        }
        self.map.insert(start, end);
    }

    /// Remove `[start, end)`.
    pub fn remove(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        let overlapping: Vec<(u64, u64)> = self
            .map
            .range(..end)
            .filter(|(_, &e)| e > start)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in overlapping {
            self.map.remove(&s);
            if s < start {
                self.map.insert(s, start);
            }
            if e > end {
                self.map.insert(end, e);
            }
        }
    }

    /// Whether every byte of `[start, end)` is present.
    pub fn contains(&self, start: u64, end: u64) -> bool {
        if start >= end {
            return true;
        }
        matches!(self.map.range(..=start).next_back(), Some((_, &e)) if e >= end)
    }

    /// Length of the contiguous run starting at 0 (0 if byte 0 is missing).
    pub fn prefix(&self) -> u64 {
        match self.map.get(&0) {
            Some(&e) => e,
            None => 0,
        }
    }

    /// The lowest range, if any.
    pub fn first(&self) -> Option<(u64, u64)> {
        self.map.iter().next().map(|(&s, &e)| (s, e))
    }

    /// All ranges in order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.map.iter().map(|(&s, &e)| (s, e))
    }

    /// Total bytes covered.
    pub fn len(&self) -> u64 {
        self.map.iter().map(|(s, e)| e - s).sum()
    }

    /// Whether no byte is covered.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Number of disjoint ranges.
    pub fn count(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn matches_a_bitmap(ops in proptest::collection::vec((any::<bool>(), 0u64..64, 0u64..16), 0..40)) {
            let mut set = RangeSet::new();
            let mut bits = [false; 80];
            for (add, s, l) in ops {
                let e = s + l;
                if add { set.insert(s, e) } else { set.remove(s, e) }
                for b in &mut bits[s as usize..e as usize] { *b = add; }
            }
            let from_set: Vec<bool> = (0..80).map(|i| set.contains(i, i + 1)).collect();
            prop_assert_eq!(from_set, bits.to_vec());
            prop_assert_eq!(set.len(), bits.iter().filter(|b| **b).count() as u64);
            // Merged: no two ranges touch.
            let v: Vec<_> = set.iter().collect();
            for w in v.windows(2) { prop_assert!(w[0].1 < w[1].0); }
        }
    }
}
