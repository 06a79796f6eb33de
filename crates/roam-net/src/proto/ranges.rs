//! A set of disjoint half-open byte ranges `[start, end)`, kept merged.
//!
//! The receiver records which bytes of an IROB it holds; the sender records which bytes it must
//! still (re)transmit.

use std::collections::BTreeMap;

/// Disjoint, merged ranges keyed by start. Every operation costs O(log n) plus the ranges it
/// touches, so a peer that sends one-byte chunks with gaps between them (n ranges) cannot make
/// each new chunk cost O(n).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RangeSet {
    map: BTreeMap<u64, u64>,
    /// Bytes covered (kept, so that [`RangeSet::len`] is O(1)).
    total: u64,
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
                self.total -= e - s;
            }
        }
        while let Some((&s, &e)) = self.map.range(start..).next() {
            if s > end {
                break;
            }
            end = end.max(e);
            self.map.remove(&s);
            self.total -= e - s;
        }
        self.map.insert(start, end);
        self.total += end - start;
    }

    /// Remove `[start, end)`.
    pub fn remove(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        for (s, e) in self.overlapping(start, end) {
            self.map.remove(&s);
            self.total -= e - s;
            if s < start {
                self.map.insert(s, start);
                self.total += start - s;
            }
            if e > end {
                self.map.insert(end, e);
                self.total += e - end;
            }
        }
    }

    /// The ranges that overlap `[start, end)`, in order: found from the last range starting
    /// before `end`, walking down while they reach past `start` (they are disjoint and sorted).
    fn overlapping(&self, start: u64, end: u64) -> Vec<(u64, u64)> {
        let mut v: Vec<(u64, u64)> = self
            .map
            .range(..end)
            .rev()
            .take_while(|(_, &e)| e > start)
            .map(|(&s, &e)| (s, e))
            .collect();
        v.reverse();
        v
    }

    /// The parts of `[start, end)` not in the set, in order.
    pub fn gaps(&self, start: u64, end: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut at = start;
        for (s, e) in self.overlapping(start, end) {
            if s > at {
                out.push((at, s));
            }
            at = at.max(e);
        }
        if at < end {
            out.push((at, end));
        }
        out
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

    /// The highest range, if any (O(log n); `iter().last()` walks every range).
    pub fn last(&self) -> Option<(u64, u64)> {
        self.map.last_key_value().map(|(&s, &e)| (s, e))
    }

    /// All ranges in order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.map.iter().map(|(&s, &e)| (s, e))
    }

    /// Total bytes covered.
    pub fn len(&self) -> u64 {
        self.total
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
            // The gaps of a window are exactly its absent bytes.
            let mut gap_bits = [false; 80];
            for (s, e) in set.gaps(10, 70) {
                prop_assert!(10 <= s && s < e && e <= 70);
                for b in &mut gap_bits[s as usize..e as usize] { *b = true; }
            }
            for (i, b) in gap_bits.iter().enumerate() {
                prop_assert_eq!(*b, (10..70).contains(&i) && !bits[i]);
            }
            // Merged: no two ranges touch.
            let v: Vec<_> = set.iter().collect();
            for w in v.windows(2) { prop_assert!(w[0].1 < w[1].0); }
        }
    }
}
