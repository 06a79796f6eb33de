//! What each operation of the recorded build asks of the file service (demand fetches,
//! prefetches, a write-back) and which blocks the build then waits for, decided without I/O
//! so that a test and [`super::FsTrace::fetched_bytes`] can run it.

use std::collections::{HashMap, HashSet};

use super::{blocks, Op, OpKind, BLOCK, PREFETCH_MAX};

/// The client's decisions, without I/O: what each operation of the build asks of the server
/// and which blocks it must then wait for. Blocks arrive (into the cache's `have`) elsewhere.
#[derive(Default)]
pub(super) struct Client {
    /// Files the build created or truncated so far (their reads are local).
    created: HashSet<u32>,
    /// Per file read so far, the blocks its prefetch asked for.
    prefetched: HashMap<u32, std::ops::Range<u64>>,
    /// Blocks fetched on demand so far (each at most once).
    demanded: HashSet<(u32, u64)>,
    /// Demand fetches of blocks a prefetch had already asked for (the prefetch was late).
    pub(super) overtaking: u64,
}

/// What one operation needs from the network.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Needs {
    /// Blocks to fetch on demand now.
    pub(super) demand: Vec<u64>,
    /// Prefetch requests (first block, blocks), the rest of a file read the first time.
    pub(super) prefetch: Vec<(u64, u64)>,
    /// Blocks the build waits for before its next operation.
    pub(super) wait: Vec<u64>,
    /// The operation is a write: write it back.
    pub(super) write_back: bool,
}

impl Client {
    /// Plan `op`; `have` is the cache's blocks (a write adds its blocks).
    pub(super) fn plan(&mut self, op: &Op, size: u64, have: &mut HashSet<(u32, u64)>) -> Needs {
        match op.kind {
            OpKind::Create => {
                self.created.insert(op.file);
                return Needs::default();
            }
            OpKind::Write => {
                have.extend(blocks(op.off, op.len).map(|k| (op.file, k)));
                return Needs {
                    write_back: true,
                    ..Needs::default()
                };
            }
            // The build's own data (see `OpKind::Create`): in the client's cache.
            OpKind::Read if self.created.contains(&op.file) => return Needs::default(),
            OpKind::Read => {}
        }
        let want: Vec<u64> = blocks(op.off, op.len).collect();
        // A block the build needs now is fetched on demand even if a prefetch of it is under
        // way (it may be queued behind much more).
        let demand: Vec<u64> = want
            .iter()
            .copied()
            .filter(|k| !have.contains(&(op.file, *k)))
            .filter(|k| self.demanded.insert((op.file, *k)))
            .collect();
        self.overtaking += demand
            .iter()
            .filter(|k| self.prefetched.get(&op.file).is_some_and(|r| r.contains(k)))
            .count() as u64;
        let mut prefetch = Vec::new();
        if let std::collections::hash_map::Entry::Vacant(e) = self.prefetched.entry(op.file) {
            // First read of the file: prefetch the rest of it in the background.
            let (last, total) = (blocks(op.off, op.len).end, size.div_ceil(BLOCK));
            e.insert(last..total);
            let mut k = last;
            while k < total {
                let n = (total - k).min(PREFETCH_MAX / BLOCK);
                prefetch.push((k, n));
                k += n;
            }
        }
        Needs {
            demand,
            prefetch,
            wait: want,
            write_back: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The client fetches a source file's missing blocks on demand and prefetches the rest on
    /// its first read, but never fetches a file the build created: those blocks are its own.
    #[test]
    fn the_client_fetches_source_files_but_not_the_builds_own() {
        let op = |kind, file, off, len| Op {
            t_ms: 0,
            kind,
            file,
            off,
            len,
        };
        let mut c = Client::default();
        let mut have = HashSet::new();
        // File 1 (20 blocks) from the source tree: blocks 0-1 on demand, the rest prefetched.
        let n = c.plan(&op(OpKind::Read, 1, 0, 8192), 20 * BLOCK, &mut have);
        assert_eq!(n.demand, vec![0, 1]);
        assert_eq!(n.prefetch, vec![(2, 18)]);
        assert_eq!(n.wait, vec![0, 1]);
        // Block 5 is needed before its prefetch arrived: fetched on demand, "overtaking".
        let n = c.plan(&op(OpKind::Read, 1, 5 * BLOCK, 10), 20 * BLOCK, &mut have);
        assert_eq!((n.demand, n.prefetch, c.overtaking), (vec![5], vec![], 1));
        // File 2 is created by the build, written in part, then read past what the trace
        // shows written (the linker seeks; `lseek` is not traced): nothing to fetch or await.
        assert_eq!(
            c.plan(&op(OpKind::Create, 2, 0, 0), 0, &mut have),
            Needs::default()
        );
        let n = c.plan(&op(OpKind::Write, 2, 0, 100), 64 * BLOCK, &mut have);
        assert!(n.write_back && have.contains(&(2, 0)));
        let n = c.plan(&op(OpKind::Read, 2, 100, 40_000), 64 * BLOCK, &mut have);
        assert_eq!(n, Needs::default());
        // A source file written before its first read: the written block is not fetched.
        c.plan(&op(OpKind::Write, 3, 0, 10), 3 * BLOCK, &mut have);
        let n = c.plan(&op(OpKind::Read, 3, 0, 2 * BLOCK), 3 * BLOCK, &mut have);
        assert_eq!((n.demand, n.prefetch), (vec![1], vec![(2, 1)]));
    }
}
