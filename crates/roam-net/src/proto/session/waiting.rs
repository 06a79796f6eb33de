//! Which of the peer's IROBs are done, and which wait for which: the receiver's record of
//! acknowledged and of delivered IROBs ([`IdSet`]), and the IROBs waiting for their
//! dependencies to be acknowledged or delivered ([`DepWait`]).
//!
//! Both are incremental: an IROB is looked at when it starts waiting and once per dependency
//! when that dependency is done, never rescanned. (The receiver once rescanned every complete,
//! unacknowledged IROB whenever one completed: a peer that sent 65,536 IROBs depending on one
//! it never sent made that quadratic, billions of steps under the session's lock.)
//!
//! Both are bounded: a peer may send a chunk of IROB `n` only while `n` is below the lowest
//! IROB not yet acknowledged here plus [`IROB_SPAN`] (`Session::on_chunk` fails a peer past
//! it, and a sender keeps within it, `Session::next_chunk`), so an `IdSet` of acknowledged ids
//! holds fewer than `IROB_SPAN` ids above its low-water mark; the delivered set is held to the
//! same by back-pressure (`Session::receive_paused`).

use std::collections::{BTreeSet, HashMap};

use super::IrobId;
use crate::proto::wire::Deps;

/// How far ahead of the lowest unacknowledged IROB a sender may go: it sends no chunk of IROB
/// `n >= lowest unacknowledged + IROB_SPAN`, and a receiver fails a peer that does. With ids
/// dense from 0 (as every honest peer's are) this is a window in IROBs beside the window in
/// bytes: it bounds the sets of done ids above their low-water marks, which a peer sending
/// sparse ids (1, 3, 5, ...) would otherwise grow for ever, and the ids a peer can make the
/// receiver see (so an id cannot reach 2^32 before four billion IROBs have passed).
pub const IROB_SPAN: u64 = 1 << 16;

/// Ids below a watermark plus a set above it: a compact record of "done" IROBs.
#[derive(Debug, Default, Clone)]
pub(super) struct IdSet {
    /// Every id below this is in the set.
    pub(super) below: u64,
    /// Ids in the set above `below` (none equal to it).
    pub(super) above: BTreeSet<u64>,
}

impl IdSet {
    pub(super) fn contains(&self, id: u64) -> bool {
        id < self.below || self.above.contains(&id)
    }

    pub(super) fn insert(&mut self, id: u64) {
        if id < self.below {
            return;
        }
        self.above.insert(id);
        while self.above.first() == Some(&self.below) {
            self.above.pop_first();
            self.below += 1;
        }
    }
}

/// IROBs waiting for their dependencies to be done (acknowledged, or delivered), indexed by
/// what they wait for, so that each dependency done wakes exactly the IROBs waiting for it.
#[derive(Debug, Default)]
pub(super) struct DepWait {
    /// (an id not yet done, an IROB waiting for it): pairs in a B-tree, 16 bytes each and a
    /// share of a node, where a map to a list per id took 200 bytes per distinct id.
    waiters: BTreeSet<(IrobId, IrobId)>,
    /// IROBs waiting for a list of dependencies: how many of them (distinct) are not done yet.
    missing: HashMap<IrobId, usize>,
    /// IROBs that depend on every lower id and wait for some of them.
    all_earlier: BTreeSet<IrobId>,
}

impl DepWait {
    /// IROB `id`, depending on `deps`, starts waiting for them to be in `done`. True when
    /// nothing is missing (it is ready now and is not recorded).
    pub(super) fn wait(&mut self, id: IrobId, deps: &Deps, done: &IdSet) -> bool {
        match deps {
            Deps::AllEarlier if done.below >= id => true,
            Deps::AllEarlier => {
                self.all_earlier.insert(id);
                false
            }
            Deps::List(list) => {
                let mut n = 0;
                for &d in list {
                    if !done.contains(d) && self.waiters.insert((d, id)) {
                        n += 1;
                    }
                }
                if n > 0 {
                    self.missing.insert(id, n);
                }
                n == 0
            }
        }
    }

    /// `id` has just been added to `done`: append to `ready` the IROBs that no longer wait.
    pub(super) fn done(&mut self, id: IrobId, done: &IdSet, ready: &mut Vec<IrobId>) {
        while let Some(&(d, w)) = self.waiters.range((id, 0)..).next() {
            if d != id {
                break;
            }
            self.waiters.remove(&(d, w));
            if let Some(n) = self.missing.get_mut(&w) {
                *n -= 1;
                if *n == 0 {
                    self.missing.remove(&w);
                    ready.push(w);
                }
            }
        }
        while let Some(&first) = self.all_earlier.first() {
            if first > done.below {
                break;
            }
            self.all_earlier.pop_first();
            ready.push(first);
        }
    }

    /// Whether `id` is waiting here.
    pub(super) fn is_waiting(&self, id: IrobId) -> bool {
        self.missing.contains_key(&id) || self.all_earlier.contains(&id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_set_keeps_a_watermark_and_the_ids_above_it() {
        let mut s = IdSet::default();
        for id in [1, 3, 0, 5] {
            s.insert(id);
        }
        assert_eq!(
            (s.below, s.above.iter().copied().collect::<Vec<_>>()),
            (2, vec![3, 5])
        );
        s.insert(2);
        assert_eq!((s.below, s.above.len()), (4, 1));
        assert!(s.contains(0) && s.contains(5) && !s.contains(4));
    }

    /// Each dependency done wakes exactly the IROBs that waited for it alone.
    #[test]
    fn dependencies_done_wake_their_waiters() {
        let mut done = IdSet::default();
        let mut w = DepWait::default();
        assert!(!w.wait(5, &Deps::List(vec![1, 3, 3]), &done));
        assert!(!w.wait(6, &Deps::AllEarlier, &done));
        assert!(w.wait(7, &Deps::List(vec![]), &done));
        let mut ready = Vec::new();
        for id in [3, 0, 1, 2, 4] {
            done.insert(id);
            w.done(id, &done, &mut ready);
            if id == 3 || id == 0 {
                assert!(ready.is_empty(), "{ready:?} after {id}");
            }
        }
        assert_eq!(ready, vec![5]);
        ready.clear();
        done.insert(5);
        w.done(5, &done, &mut ready);
        assert_eq!(ready, vec![6]);
        assert!(!w.is_waiting(5) && !w.is_waiting(6));
    }
}
