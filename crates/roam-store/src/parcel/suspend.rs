//! Suspend: the images sealed as the next version, the destination sent the chunks it must
//! hold, ownership handed over, and the client's control state and images deleted
//! ([`suspend`], [`suspend_dirty`]; a parcel the phone lent goes back to the phone alone,
//! [`suspend_lent`]). While the guest runs, chunks can go ahead of the suspend ([`eager`]), and
//! after a suspend to the phone the client can upload behind it ([`upload_behind`]).

use std::collections::BTreeSet;

use super::{control_of, ids_of, seal_images, DirtyMap, Moved, ParcelDir};
use crate::error::StoreError;
use crate::id::ChunkId;
use crate::ownership::Tier;
use crate::tier::{hand_off, Control, Held, TierClient};

/// Suspend the parcel in `dir` to `to` (the phone or the server): the images sealed, the
/// destination sent the chunks it must hold (the phone: those not at the server; the server:
/// all it lacks), the parcel handed over, and the client's control state and images deleted.
pub fn suspend(
    server: &TierClient,
    phone: Option<&TierClient>,
    to: Tier,
    dir: &ParcelDir,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Moved, StoreError> {
    suspend_dirty(server, phone, to, dir, None, progress)
}

/// As [`suspend`], with the chunks written since the checkout given (QEMU's dirty bitmaps):
/// only those are sealed again, so the time goes with the dirty state, not the image size.
pub fn suspend_dirty(
    server: &TierClient,
    phone: Option<&TierClient>,
    to: Tier,
    dir: &ParcelDir,
    dirty_map: Option<&DirtyMap>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Moved, StoreError> {
    if dir.is_lent() {
        return Err(dir.refuse(
            "the phone lent this parcel (it was resumed while the server was out of reach); suspend it to the phone alone",
        ));
    }
    let Sealed {
        held,
        parcel,
        control,
        dirty,
        now_ids,
    } = seal_for_suspend(dir, dirty_map)?;
    let dst: &TierClient = match to {
        Tier::Phone => phone.ok_or_else(|| StoreError::NeedsPhone {
            why: "suspend to the phone".into(),
        })?,
        Tier::Server => server,
        Tier::Client => {
            return Err(StoreError::BadRequest(
                "suspend goes to the phone or the server".into(),
            ))
        }
    };
    let send: Vec<ChunkId> = match to {
        Tier::Phone => dirty.iter().copied().collect(),
        _ => now_ids.iter().copied().collect(),
    };
    let cache = dir.cache()?;
    let (chunks, bytes) = dst.put_missing(&send, &cache, progress)?;
    let staged = Held {
        control: control.clone(),
        nonce: held.nonce.clone(),
    };
    // The phone takes control state by compare-and-swap: it names the (stale) state the phone
    // may still hold of the parcel.
    let replaces = match to {
        Tier::Phone => dst.holds(&parcel)?.map(|(_, nonce)| nonce),
        _ => None,
    };
    let next = hand_off(server, &staged, to, |next| {
        let new = Held {
            control: control.clone(),
            nonce: next.to_string(),
        };
        match to {
            Tier::Phone => dst.swap_control(&new, replaces.as_deref())?,
            _ => dst.put_control(&new)?,
        }
        dst.validate(&parcel)
    })?;
    if to == Tier::Phone {
        // Only a phone that knows it owns the parcel may lend it later; if this is lost,
        // a resume cut off from the server is refused, saying why.
        let _ = dst.confirm(&parcel, &next);
    }
    dir.forget()?;
    Ok(Moved {
        chunks,
        bytes,
        dirty: dirty.len() as u64,
        version: control.version,
        dirty_ids: dirty.into_iter().collect(),
    })
}

/// A suspend's sealed state: the held control state, the new version's control state (its
/// dirty list set), its dirty chunks (not at the server) and all its chunks.
struct Sealed {
    held: Held,
    parcel: String,
    control: Control,
    dirty: BTreeSet<ChunkId>,
    now_ids: BTreeSet<ChunkId>,
}

/// Seal the images of the parcel the client holds in `dir` as the next version.
fn seal_for_suspend(dir: &ParcelDir, dirty_map: Option<&DirtyMap>) -> Result<Sealed, StoreError> {
    let held = dir.owned()?;
    if let Some(pid) = crate::vm::running(&dir.vm_dir()) {
        return Err(dir.refuse(format!(
            "a guest (pid {pid}) is running on the images; save it first (`roam parcel suspend` does)"
        )));
    }
    let base = held.control.keyrings()?;
    let key = held.control.key()?;
    let keyrings = seal_images(dir, dirty_map.map(|d| (&base, d)))?;
    let before = ids_of(&base);
    let still_dirty = held.control.dirty_ids()?;
    let now_ids = ids_of(&keyrings);
    let dirty: BTreeSet<ChunkId> = now_ids
        .iter()
        .filter(|id| !before.contains(id) || still_dirty.contains(id))
        .copied()
        .collect();
    let parcel = held.control.parcel.clone();
    let mut control = control_of(&parcel, held.control.version + 1, &key, &keyrings);
    control.dirty = dirty.iter().map(|i| i.hex()).collect();
    Ok(Sealed {
        held,
        parcel,
        control,
        dirty,
        now_ids,
    })
}

/// Suspend a parcel the phone lent ([`resume_offline`](super::resume_offline)) back to the phone, without the
/// server: its dirty chunks the phone lacks sent, then the new control state given back under
/// the lease; the phone checks it holds them and owns the parcel again. The client's control
/// state and images are then deleted.
pub fn suspend_lent(
    phone: &TierClient,
    dir: &ParcelDir,
    dirty_map: Option<&DirtyMap>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Moved, StoreError> {
    if !dir.is_lent() {
        return Err(dir.refuse("not a parcel the phone lent; suspend it as usual"));
    }
    let Sealed {
        held,
        control,
        dirty,
        ..
    } = seal_for_suspend(dir, dirty_map)?;
    let send: Vec<ChunkId> = dirty.iter().copied().collect();
    let (chunks, bytes) = phone.put_missing(&send, &dir.cache()?, progress)?;
    phone.give_back(&Held {
        control: control.clone(),
        nonce: held.nonce,
    })?;
    dir.forget()?;
    Ok(Moved {
        chunks,
        bytes,
        dirty: dirty.len() as u64,
        version: control.version,
        dirty_ids: dirty.into_iter().collect(),
    })
}

/// One cycle of eager propagation (the Horatio paper §4.6.3): while the guest runs, seal the images as
/// they are now into the client's cache and send the phone the chunks that changed since the
/// checkout and that it lacks. What is sent is speculation: no control state moves and a chunk
/// overwritten later is wasted, but at suspend only the final difference is left to send.
/// (chunks, bytes) sent.
pub fn eager(
    phone: &TierClient,
    dir: &ParcelDir,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(u64, u64), StoreError> {
    let held = dir.owned()?;
    let base = ids_of(&held.control.keyrings()?);
    let now = ids_of(&seal_images(dir, None)?);
    let changed: Vec<ChunkId> = now.difference(&base).copied().collect();
    phone.set_background(true);
    phone.put_missing(&changed, &dir.cache()?, progress)
}

/// The paper's concurrent upload: after a suspend to the phone, the client (which keeps the
/// sealed chunks in its cache, though it can no longer open them) uploads the chunks the
/// server lacks straight to it. The server keeps a chunk only when its hash is its name and
/// validates every chunk again before it commits a handoff, so this asks no trust of the
/// client; whatever arrives, the phone's self-cleaning skips. (chunks, bytes) uploaded.
pub fn upload_behind(
    server: &TierClient,
    dir: &ParcelDir,
    ids: &[ChunkId],
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(u64, u64), StoreError> {
    let cache = dir.cache()?;
    server.set_background(true);
    server.put_missing(ids, &cache, progress)
}
