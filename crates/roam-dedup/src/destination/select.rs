//! Choosing feedback (the thesis §4.3.4, Algorithm 7): which past flowlet the arriving one
//! follows, and which of its names to advertise next.
//!
//! For each past flowlet sharing names with the arriving segment, `subsequenceMatch` counts
//! the segment's names found among the `win_factor x num_hashes` names after the last place
//! the two matched, and moves that place on. The flowlet with the most hits so far is the
//! match (`bestMatchedFlowlet`); if that is the arriving flowlet itself, the runner-up is
//! taken when it has at least `K`% of its hits. The advertisement (`selectAdvertisement`)
//! starts `delta + 1` names after the last match (δ: the names the source will have encoded
//! by the time the advertisement reaches it), or after the last name advertised if that is
//! further, and takes `MTU / (2 x 8)` names, continuing into the flowlet that followed when
//! one ends; names already seen from this source or advertised are dropped.
//!
//! Beyond the thesis: when the window after the last match finds none of the segment's names
//! but the past flowlet holds some of them elsewhere (the arriving object matches the middle
//! of a past one, or the stream skipped ahead), the match re-anchors at the earliest of them
//! instead of never matching again.

use std::collections::HashMap;

use super::store::{FlowletId, Store};
use crate::lru::Lru;
use crate::name::{Name, NameMap};

/// The selection's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SelectConfig {
    /// How far past the last match a segment's names are looked for, in segment lengths.
    pub win_factor: usize,
    /// The runner-up replaces the arriving flowlet itself as the match when it has at least
    /// this share of its hits (the thesis's K%).
    pub runner_up: f64,
    /// Names per advertisement: the thesis's `MTU / (2 x hash length)`.
    pub per_message: usize,
    /// What a flowlet's hits are worth a segment later (1: the thesis, hits add up over the
    /// whole arriving flowlet). Below 1, recent matches weigh more: when one flowlet carries
    /// several objects of one kind (the segmentation's blind spot, §4.4.3), the match follows
    /// the object now arriving instead of the first one matched.
    pub decay: f64,
    /// How far past the last match (plus δ) advertisements may run, in names. The thesis
    /// advertises from the later of the last match and the last name advertised, so on a long
    /// flowlet it runs ahead by a message a packet, many times faster than the stream, and the
    /// source's small feedback cache drops the near names for far ones; this keeps it to what
    /// the stream will reach soon.
    pub max_lead: usize,
    /// Beyond the thesis: names advertised at most when a request that began a flow before
    /// goes up again, from the flowlet its response began with ([`super::hint`]); 0: none.
    /// The default, 8 messages (744 names, about 230 kB of text in FastCDC's chunks), covers
    /// most web pages and is under a tenth of what a phone may send a second
    /// ([`crate::source::SourceConfig::feedback_names_per_s`]).
    pub hint_names: usize,
}

impl Default for SelectConfig {
    fn default() -> SelectConfig {
        SelectConfig {
            win_factor: 4,
            runner_up: 0.5,
            per_message: 1500 / (2 * Name::LEN),
            decay: 0.5,
            max_lead: 2 * (1500 / (2 * Name::LEN)),
            hint_names: 8 * (1500 / (2 * Name::LEN)),
        }
    }
}

/// What the arriving flowlet knows of one past flowlet.
#[derive(Debug, Default)]
struct Pair {
    hits: f64,
    /// Position of the last match in the past flowlet.
    last_match: Option<usize>,
    /// Position (in the chain starting at the past flowlet) of the last name advertised.
    last_adv: Option<usize>,
    /// Where each name sits in the past flowlet (built when re-anchoring first needs it).
    positions: Option<NameMap<usize>>,
}

/// The matching state of one flow's arriving flowlet.
#[derive(Debug, Default)]
pub struct Matching {
    current: FlowletId,
    pairs: HashMap<FlowletId, Pair>,
}

impl Matching {
    /// A new flowlet began: its matches start afresh.
    pub fn restart(&mut self, current: FlowletId) {
        self.current = current;
        self.pairs.clear();
    }

    /// `subsequenceMatch` of `seg` against each of `pasts`, then `bestMatchedFlowlet`; the
    /// match, if any has hits.
    pub fn best(
        &mut self,
        store: &Store,
        seg: &[Name],
        pasts: &[FlowletId],
        cfg: &SelectConfig,
    ) -> Option<FlowletId> {
        if cfg.decay < 1.0 {
            for p in self.pairs.values_mut() {
                p.hits *= cfg.decay;
            }
        }
        for &past in pasts {
            let Some(f) = store.flowlet(past) else {
                continue;
            };
            let pair = self.pairs.entry(past).or_default();
            let from = pair.last_match.map_or(0, |m| m + 1);
            let to = (from + cfg.win_factor * seg.len().max(1)).min(f.names.len());
            let window: NameMap<usize> = (from..to).map(|i| (f.names[i], i)).collect();
            let mut found = 0;
            let mut last = None;
            for n in seg {
                if let Some(&i) = window.get(n) {
                    found += 1;
                    last = last.max(Some(i));
                }
            }
            if found == 0 {
                // Re-anchor where the past flowlet holds the segment's names, if anywhere.
                let pos = pair.positions.get_or_insert_with(|| {
                    f.names.iter().enumerate().map(|(i, n)| (*n, i)).collect()
                });
                let at: Vec<usize> = seg.iter().filter_map(|n| pos.get(n).copied()).collect();
                found = at.len();
                last = at.iter().copied().max();
            }
            pair.hits += found as f64;
            if last.is_some() {
                pair.last_match = last;
            }
        }
        let mut ranked: Vec<(FlowletId, f64)> = self
            .pairs
            .iter()
            .filter(|(id, p)| p.hits > 0.0 && store.flowlet(**id).is_some())
            .map(|(id, p)| (*id, p.hits))
            .collect();
        ranked.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
        let (best, hits) = *ranked.first()?;
        if best == self.current {
            if let Some(&(second, h2)) = ranked.get(1) {
                if h2 >= cfg.runner_up * hits {
                    return Some(second);
                }
            }
        }
        Some(best)
    }

    /// `selectAdvertisement` from `best`: the names to advertise, each added to `known`.
    pub fn advertise(
        &mut self,
        store: &Store,
        best: FlowletId,
        delta: usize,
        known: &mut Lru,
        cfg: &SelectConfig,
    ) -> Vec<Name> {
        let pair = self.pairs.entry(best).or_default();
        // δ + 1 past the last match, and never again what was advertised: δ is not added to
        // the last name advertised, which is already ahead (once it was, each advertisement
        // after the first skipped δ names, and with δ of a paced relay's lead the phone
        // stopped advertising after two).
        let from_match = pair.last_match.map_or(0, |m| m + 1) + delta;
        let anchor = pair.last_adv.map_or(from_match, |a| from_match.max(a + 1));
        let limit = pair.last_match.map_or(0, |m| m + 1) + delta + cfg.max_lead;
        let mut out = Vec::new();
        let mut pos = 0;
        let mut id = Some(best);
        let mut taken = 0;
        let mut last = None;
        // Walk the chain best, best.next, ... from `anchor`, `per_message` names.
        while let Some(f) = id.and_then(|i| store.flowlet(i)) {
            let len = f.names.len();
            if anchor < pos + len {
                let start = anchor.max(pos) - pos;
                for (k, &n) in f.names[start..].iter().enumerate() {
                    if taken == cfg.per_message || pos + start + k >= limit {
                        taken = cfg.per_message;
                        break;
                    }
                    taken += 1;
                    last = Some(pos + start + k);
                    if known.contains(n) || store.get(n).is_none() {
                        continue;
                    }
                    known.insert(n, 1);
                    out.push(n);
                }
            }
            if taken == cfg.per_message {
                break;
            }
            pos += len;
            id = f.next;
        }
        if last.is_some() {
            pair.last_adv = last;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store holding one flowlet per list of name numbers (chained in order), and its ids.
    fn store(flowlets: &[&[u64]]) -> (Store, Vec<FlowletId>) {
        let mut s = Store::new(1 << 30);
        let mut ids: Vec<FlowletId> = vec![];
        for names in flowlets {
            let id = s.new_flowlet(ids.last().copied());
            for &n in *names {
                s.append(id, Name(n), Box::new([n as u8; 16]));
            }
            ids.push(id);
        }
        (s, ids)
    }

    fn names(v: impl IntoIterator<Item = u64>) -> Vec<Name> {
        v.into_iter().map(Name).collect()
    }

    fn thesis() -> SelectConfig {
        SelectConfig {
            decay: 1.0,
            ..SelectConfig::default()
        }
    }

    #[test]
    fn a_match_is_looked_for_only_within_the_window_after_the_last_one() {
        // Past flowlet: 0..100. A segment of 2 names, win_factor 4: 8 names are looked at.
        let (s, ids) = store(&[&(0..100).collect::<Vec<_>>()]);
        let (past, cfg) = (ids[0], thesis());
        let mut m = Matching::default();
        m.restart(999);
        assert_eq!(m.best(&s, &names([0, 1]), &[past], &cfg), Some(past));
        assert_eq!(m.pairs[&past].last_match, Some(1));
        // 5 and 9 lie in the window 2..10: both found, the match moves to 9.
        m.best(&s, &names([5, 9]), &[past], &cfg);
        assert_eq!(m.pairs[&past].hits, 4.0);
        assert_eq!(m.pairs[&past].last_match, Some(9));
        // 12 is in the window 10..18, 50 is not: one hit, the match at 12.
        m.best(&s, &names([12, 50]), &[past], &cfg);
        assert_eq!(m.pairs[&past].hits, 5.0);
        assert_eq!(m.pairs[&past].last_match, Some(12));
        // Nothing of the window (13..21): re-anchored where the flowlet holds them.
        m.best(&s, &names([70, 71]), &[past], &cfg);
        assert_eq!(m.pairs[&past].hits, 7.0);
        assert_eq!(m.pairs[&past].last_match, Some(71));
    }

    #[test]
    fn the_most_hit_past_flowlet_wins_and_the_runner_up_replaces_the_arriving_one() {
        let (s, ids) = store(&[&[1, 2, 3, 4], &[1, 2, 3, 9], &[1, 2, 7, 8]]);
        let (a, b, c) = (ids[0], ids[1], ids[2]);
        let cfg = thesis();
        let mut m = Matching::default();
        m.restart(999);
        // a and b match three names each, c two: the tie goes to the newer id, b.
        assert_eq!(m.best(&s, &names([1, 2, 3]), &[a, b, c], &cfg), Some(b));
        // When the best is the arriving flowlet itself (its own names, just stored), the
        // runner-up takes its place if it has at least half its hits...
        let mut m = Matching::default();
        m.restart(b);
        assert_eq!(m.best(&s, &names([1, 2, 3, 9]), &[b, c], &cfg), Some(c));
        // ...and not below that share.
        let strict = SelectConfig {
            runner_up: 0.6,
            ..cfg
        };
        let mut m = Matching::default();
        m.restart(b);
        assert_eq!(m.best(&s, &names([1, 2, 3, 9]), &[b, c], &strict), Some(b));
    }

    #[test]
    fn advertisements_start_delta_past_the_match_never_repeat_and_follow_the_chain() {
        let (s, ids) = store(&[&(0..10).collect::<Vec<_>>(), &(10..20).collect::<Vec<_>>()]);
        let (past, cfg) = (
            ids[0],
            SelectConfig {
                per_message: 4,
                max_lead: 100,
                ..thesis()
            },
        );
        let mut m = Matching::default();
        m.restart(999);
        m.best(&s, &names([0, 1]), &[past], &cfg);
        let mut known = Lru::new(1 << 20);
        // Last match at 1, δ = 2: from name 4, four names.
        let adv = m.advertise(&s, past, 2, &mut known, &cfg);
        assert_eq!(adv, names([4, 5, 6, 7]));
        // The next goes on after the last advertised, into the flowlet that followed.
        assert_eq!(
            m.advertise(&s, past, 2, &mut known, &cfg),
            names([8, 9, 10, 11])
        );
        // Names the phone already has from this source are not advertised again.
        known.insert(Name(13), 1);
        assert_eq!(
            m.advertise(&s, past, 2, &mut known, &cfg),
            names([12, 14, 15])
        );
        // The lead is bounded: no further than max_lead past the match (+ δ).
        let short = SelectConfig { max_lead: 3, ..cfg };
        let mut m = Matching::default();
        m.restart(999);
        m.best(&s, &names([0, 1]), &[past], &short);
        let adv = m.advertise(&s, past, 0, &mut Lru::new(1 << 20), &short);
        assert_eq!(adv, names([2, 3, 4]));
    }
}
