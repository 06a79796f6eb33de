//! A file's byte ranges in flight, shared by its `p` streams: each range's next byte and where
//! its stream is to stop. A stream that has finished its own range takes the next one not yet
//! begun, and when none is left, the back half of the range with the most bytes still to come
//! (work stealing, as aria2 splits the largest unfinished segment for an idle connection).
//!
//! Why: `p` equal ranges rarely finish together. On a long path with a little loss, one
//! stream's window is halved by a loss and grows back over many round trips while the others
//! finish; the file then waits on its slowest stream, alone on a link it cannot fill. Taking
//! half of the slowest stream's remainder keeps `p` streams busy to the end. The victim learns
//! of it at its next block: it writes up to its new end, lists what it wrote, and drops its
//! response (under HTTP/1.1 that closes its connection; under HTTP/2 it resets one stream).
//!
//! The claim protocol: a stream reserves each block's bytes ([`Board::claim`]) before writing
//! them, under the board's lock; a steal moves a range's end down only to beyond what is
//! reserved. So no byte is written by two streams, and none is left unclaimed.

use std::sync::Mutex;

/// One range: bytes `at..end` still to come; `taken` once a stream works on it.
#[derive(Clone, Copy, Debug)]
struct Slot {
    at: u64,
    end: u64,
    taken: bool,
}

/// The ranges of one file and who works on them.
pub(super) struct Board {
    slots: Mutex<Vec<Slot>>,
    /// The least a stolen piece, and the piece left to its victim, may be.
    min_piece: u64,
    steals: std::sync::atomic::AtomicU32,
}

impl Board {
    /// `pieces` (`start..end`), none begun; a steal leaves both halves at least `min_piece`.
    pub(super) fn new(pieces: &[(u64, u64)], min_piece: u64) -> Board {
        Board {
            slots: Mutex::new(
                pieces
                    .iter()
                    .map(|&(at, end)| Slot {
                        at,
                        end,
                        taken: false,
                    })
                    .collect(),
            ),
            min_piece: min_piece.max(1),
            steals: Default::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Slot>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Work for a stream that is free: the next range not begun, else the back half of the
    /// range in flight with the most bytes to come if both halves would be at least
    /// `min_piece`; `None` when there is none worth taking.
    pub(super) fn next(&self) -> Option<usize> {
        let mut slots = self.lock();
        if let Some(i) = slots.iter().position(|s| !s.taken && s.at < s.end) {
            slots[i].taken = true;
            return Some(i);
        }
        let (victim, left) = slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.taken)
            .map(|(i, s)| (i, s.end.saturating_sub(s.at)))
            .max_by_key(|&(_, left)| left)?;
        if left / 2 < self.min_piece {
            return None;
        }
        let v = &mut slots[victim];
        let mid = v.at + left / 2;
        let end = std::mem::replace(&mut v.end, mid);
        slots.push(Slot {
            at: mid,
            end,
            taken: true,
        });
        self.steals
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(slots.len() - 1)
    }

    /// Range `i`'s bytes still to come, `(at, end)`.
    pub(super) fn span(&self, i: usize) -> (u64, u64) {
        let s = self.lock()[i];
        (s.at, s.end)
    }

    /// Of `n` bytes arriving at range `i`'s next byte, how many are still its stream's to
    /// write (fewer once a steal has moved its end down); they are reserved.
    pub(super) fn claim(&self, i: usize, n: u64) -> u64 {
        let mut slots = self.lock();
        let s = &mut slots[i];
        let take = n.min(s.end.saturating_sub(s.at));
        s.at += take;
        take
    }

    /// Range `i`'s stream has failed: nobody is to take from what it left (the file fails).
    pub(super) fn abandon(&self, i: usize) {
        let mut slots = self.lock();
        let s = &mut slots[i];
        s.end = s.at;
    }

    /// Ranges taken from another stream so far.
    pub(super) fn steals(&self) -> u32 {
        self.steals.load(std::sync::atomic::Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_streams_take_unbegun_ranges_then_halves_of_the_largest() {
        let b = Board::new(&[(0, 100), (100, 200)], 10);
        assert_eq!(b.next(), Some(0));
        assert_eq!(b.next(), Some(1));
        assert_eq!(b.claim(0, 30), 30);
        assert_eq!(b.claim(1, 90), 90);
        // Range 1 has 10 left, range 0 has 70: its back half is taken.
        assert_eq!(b.next(), Some(2));
        assert_eq!(b.span(0), (30, 65));
        assert_eq!(b.span(2), (65, 100));
        assert_eq!(b.steals(), 1);
        // The victim's block that crosses its new end is cut there.
        assert_eq!(b.claim(0, 50), 35);
        assert_eq!(b.claim(0, 5), 0);
    }

    #[test]
    fn nothing_is_taken_below_two_pieces_or_from_an_abandoned_stream() {
        let b = Board::new(&[(0, 19)], 10);
        assert_eq!(b.next(), Some(0));
        assert_eq!(b.next(), None, "19 bytes cannot make two pieces of 10");
        let b = Board::new(&[(0, 100)], 10);
        assert_eq!(b.next(), Some(0));
        b.abandon(0);
        assert_eq!(b.next(), None);
    }

    /// Streams claiming blocks while others steal: every byte is claimed exactly once. The
    /// test's own thread holds the one range until three others have asked for work, so they
    /// steal (however the threads are scheduled).
    #[test]
    fn concurrent_claims_and_steals_cover_every_byte_once() {
        let size = 1_000_000u64;
        let b = std::sync::Arc::new(Board::new(&[(0, size)], 1_000));
        let claimed = std::sync::Arc::new(Mutex::new(Vec::new()));
        let work = |b: &Board, claimed: &Mutex<Vec<(u64, u64)>>, first: Option<usize>, t: u64| {
            let mut slot = first.or_else(|| b.next());
            while let Some(i) = slot {
                loop {
                    let (at, _) = b.span(i);
                    let n = b.claim(i, 97 + t);
                    if n == 0 {
                        break;
                    }
                    claimed.lock().unwrap().push((at, at + n));
                }
                slot = b.next();
            }
        };
        let mine = b.next();
        assert_eq!(mine, Some(0));
        let asked = std::sync::Arc::new(std::sync::Barrier::new(4));
        let threads: Vec<_> = (1..4)
            .map(|t| {
                let (b, claimed, asked) = (b.clone(), claimed.clone(), asked.clone());
                std::thread::spawn(move || {
                    let first = b.next();
                    asked.wait();
                    work(&b, &claimed, first, t)
                })
            })
            .collect();
        asked.wait();
        work(&b, &claimed, mine, 0);
        for t in threads {
            t.join().unwrap();
        }
        let mut c = claimed.lock().unwrap().clone();
        c.sort_unstable();
        let mut at = 0;
        for (a, e) in c {
            assert_eq!(a, at, "a gap or an overlap at {at}");
            at = e;
        }
        assert_eq!(at, size);
        assert!(b.steals() >= 3);
    }
}
