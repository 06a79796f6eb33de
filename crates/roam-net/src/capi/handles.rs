//! IROB handles (`irob_id_t`) of the C ABI: what names a multi-socket's IROB, its direction
//! and its id in one positive `i64`, for any id a peer may choose.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use super::{fail, IrobHandle, MsSocket};

/// What the high bits of an IROB handle stand for: a multi-socket, a direction (its own IROBs,
/// or its peer's) and a run of 2^32 IROB ids (`id >> 32`). Blocks are numbered from 1 and
/// never reused, so a handle of a closed multi-socket names nothing (EBADF) rather than
/// another one; a multi-socket uses one block per direction until four billion IROBs have
/// passed, and its blocks are forgotten when it is closed.
#[derive(Debug, Default)]
pub(super) struct IrobHandles {
    blocks: HashMap<u32, (MsSocket, bool, u32)>,
    by_run: HashMap<(MsSocket, bool, u32), u32>,
    next: u32,
}

/// Most blocks in a process's lifetime: a handle stays positive (negative values are
/// `MS_ERROR` and `MS_DEFERRED`).
const MAX_BLOCKS: u32 = i32::MAX as u32;

pub(super) fn irob_handles() -> &'static Mutex<IrobHandles> {
    static H: OnceLock<Mutex<IrobHandles>> = OnceLock::new();
    H.get_or_init(Default::default)
}

impl IrobHandles {
    /// The handle of IROB `id` of multi-socket `s` (one of the peer's when `received`).
    fn handle(&mut self, s: MsSocket, received: bool, id: u64) -> Result<IrobHandle, String> {
        let run = (id >> 32) as u32;
        let block = match self.by_run.get(&(s, received, run)) {
            Some(&b) => b,
            None => {
                if self.next >= MAX_BLOCKS {
                    return Err("out of IROB handles".into());
                }
                self.next += 1;
                let b = self.next;
                self.blocks.insert(b, (s, received, run));
                self.by_run.insert((s, received, run), b);
                b
            }
        };
        Ok(((block as i64) << 32) | (id & 0xffff_ffff) as i64)
    }

    /// What handle `h` names: its multi-socket, whether it is one of the peer's IROBs, and
    /// the IROB id.
    fn resolve(&self, h: IrobHandle) -> Option<(MsSocket, bool, u64)> {
        let block = u32::try_from(h >> 32).ok()?;
        let &(s, received, run) = self.blocks.get(&block)?;
        Some((s, received, ((run as u64) << 32) | (h as u64 & 0xffff_ffff)))
    }

    /// Forget the blocks of multi-socket `s` (closed).
    pub(super) fn forget(&mut self, s: MsSocket) {
        self.blocks.retain(|_, b| b.0 != s);
        self.by_run.retain(|k, _| k.0 != s);
    }
}

/// The handle of IROB `id` of multi-socket `s`, or the C error to return.
pub(super) fn irob_handle<T: From<i8>>(
    s: MsSocket,
    received: bool,
    id: u64,
) -> Result<IrobHandle, T> {
    irob_handles()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .handle(s, received, id)
        .map_err(|e| fail(libc::EOVERFLOW, e))
}

/// The multi-socket and id of one of this side's IROBs named by handle `h`, or why not.
pub(super) fn own_irob(h: IrobHandle) -> Result<(MsSocket, u64), String> {
    match irob_handles()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .resolve(h)
    {
        Some((s, false, id)) => Ok((s, id)),
        Some((s, true, id)) => Err(format!(
            "handle {h} names IROB {id} received on multi-socket {s}, not one sent from it"
        )),
        None => Err(format!("no IROB handle {h}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Handles round-trip every id, 2^32 and beyond included, and never confuse multi-sockets
    /// or directions; a closed multi-socket's handles name nothing.
    #[test]
    fn irob_handles_name_their_socket_direction_and_id() {
        let mut t = IrobHandles::default();
        let ids = [0, 1, 0xffff_ffff, 1 << 32, (1 << 32) + 1, u64::MAX];
        let mut seen = std::collections::HashSet::new();
        for s in [7, 8] {
            for received in [false, true] {
                for id in ids {
                    let h = t.handle(s, received, id).unwrap();
                    assert!(h > 0, "{h}");
                    assert!(seen.insert(h), "handle {h} given twice");
                    assert_eq!(t.resolve(h), Some((s, received, id)));
                }
            }
        }
        let h = t.handle(7, false, 5).unwrap();
        t.forget(7);
        assert_eq!(t.resolve(h), None);
        let h = t.handle(8, true, 5).unwrap();
        assert_eq!(t.resolve(h), Some((8, true, 5)));
        assert_eq!(t.resolve(-1), None);
    }
}
