//! The client tier's operations on a parcel (seed 004, "Operations"), as `roam parcel` runs
//! them on the borrowed PC: [`init`], [`resume`] (a checkout from whoever owns the parcel),
//! [`suspend`] to the phone or the server, [`clean`] (ask the phone to self-clean), [`hoard`]
//! (ask the phone to hold the whole version), [`status`].
//!
//! The client keeps a parcel in a directory: its images (`disk.img`, `memory.img`,
//! `state.img`: what the VM runs on), its control state while it owns the parcel (`control.json`) and a cache of
//! sealed chunks (`cache/`, a [`DirStore`]). Suspend seals the images into the cache (only
//! chunks that changed are new there), sends the destination the chunks it must hold, hands
//! the parcel over, and then deletes the control state and the images: what stays on the
//! borrowed PC is sealed chunks it can no longer open.
//!
//! Without QEMU's dirty bitmaps, the dirty chunks are found by sealing every chunk again and
//! comparing names with the version checked out (sealing runs near 1 GB/s on one core, `roam
//! bench store`); with a bitmap, [`ingest`](crate::ingest) seals only the chunks it names.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use rand::RngCore;

use crate::chunk::ChunkId;
use crate::image::{ingest, restore};
use crate::keyring::{Keyring, ParcelKey};
use crate::ownership::Tier;
use crate::store::{ChunkStore, DirStore};
use crate::tier::net::hand_off;
use crate::tier::service::{read_held_file, write_atomic};
use crate::tier::wire::{hex, Request};
use crate::tier::{Control, Held, TierClient};

/// Bytes of repeated chunks' plaintext a resume keeps to write them again without fetching.
const REPEATS_KEPT: usize = 64 << 20;

/// The images a parcel has, in order: its disk, its memory (a guest's RAM file,
/// [`crate::vm`]) and its device state (QEMU's, without the RAM); the last two only once a
/// guest was saved (or given at init).
pub const IMAGES: [&str; 3] = ["disk", "memory", "state"];

/// A parcel's directory on the client.
#[derive(Clone, Debug)]
pub struct ParcelDir {
    root: PathBuf,
}

/// What an operation moved, for its report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Moved {
    /// Chunks sent (or fetched).
    pub chunks: u64,
    /// Their bytes (sealed).
    pub bytes: u64,
    /// Chunks of the new version not at the server.
    pub dirty: u64,
    /// The version now.
    pub version: u64,
    /// The chunks of the new version not at the server (after a suspend).
    pub dirty_ids: Vec<ChunkId>,
}

impl ParcelDir {
    /// The directory `root` (created when needed).
    pub fn new(root: impl Into<PathBuf>) -> ParcelDir {
        ParcelDir { root: root.into() }
    }

    /// Image `name`'s file.
    pub fn image(&self, name: &str) -> PathBuf {
        self.root.join(format!("{name}.img"))
    }

    /// Where a guest running on the images keeps QEMU's sockets ([`crate::vm`]).
    pub fn vm_dir(&self) -> PathBuf {
        self.root.join("vm")
    }

    fn control_path(&self) -> PathBuf {
        self.root.join("control.json")
    }

    /// The chunk cache.
    pub fn cache(&self) -> Result<DirStore, String> {
        DirStore::open(self.root.join("cache")).map_err(|e| e.to_string())
    }

    /// The control state, if the client owns the parcel.
    pub fn held(&self) -> Result<Option<Held>, String> {
        read_held_file(&self.control_path())
    }

    /// Keep `held` as the client's control state (after a handoff to the client committed).
    pub fn write_held(&self, held: &Held) -> Result<(), String> {
        let p = self.control_path();
        write_atomic(&p, &serde_json::to_vec(held).expect("serializes"))
            .map_err(|e| format!("{}: {e}", p.display()))
    }

    fn lent_path(&self) -> PathBuf {
        self.root.join("lent")
    }

    fn lease_path(&self) -> PathBuf {
        self.root.join("lease")
    }

    /// Whether the client holds the parcel on a lease from the phone (a resume cut off from
    /// the server, [`resume_offline`]): it suspends back to the phone alone.
    pub fn is_lent(&self) -> bool {
        self.lent_path().exists()
    }

    /// Delete the control state and the images (after a handoff away from the client).
    fn forget(&self) -> Result<(), String> {
        for p in [
            self.control_path(),
            self.lent_path(),
            self.lease_path(),
            self.image("disk"),
            self.image("memory"),
            self.image("state"),
        ] {
            match fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(format!("{}: {e}", p.display())),
            }
        }
        match fs::remove_dir_all(self.vm_dir()) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(format!("{}: {e}", self.vm_dir().display()))
            }
            _ => Ok(()),
        }
    }
}

/// Which chunks of each image were written since the version checked out, by image name (what
/// QEMU's dirty bitmaps give): only those are sealed again. An image the map does not name
/// (a guest's memory and device state) is sealed whole, and its chunks unchanged since the
/// basis seal to the blobs the tiers hold already.
pub type DirtyMap = BTreeMap<String, BTreeSet<u64>>;

/// Seal each image of `dir` into its cache: the keyrings, by image name. With `base` (the
/// keyrings checked out) and `dirty`, the chunks of an image the map names that it does not
/// name dirty keep their entries.
fn seal_images(
    dir: &ParcelDir,
    base: Option<(&BTreeMap<String, Keyring>, &DirtyMap)>,
) -> Result<BTreeMap<String, Keyring>, String> {
    let cache = dir.cache()?;
    let mut out = BTreeMap::new();
    for name in IMAGES {
        let path = dir.image(name);
        let mut f = match fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && name != "disk" => continue,
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        let from = base.and_then(|(k, d)| Some((k.get(name)?, d.get(name)?)));
        let got = ingest(&mut f, &cache, from).map_err(|e| format!("{}: {e}", path.display()))?;
        out.insert(name.to_string(), got.keyring);
    }
    Ok(out)
}

fn ids_of(keyrings: &BTreeMap<String, Keyring>) -> BTreeSet<ChunkId> {
    keyrings
        .values()
        .flat_map(|k| k.entries.iter().map(|e| e.id))
        .collect()
}

fn control_of(
    parcel: &str,
    version: u64,
    key: &ParcelKey,
    keyrings: &BTreeMap<String, Keyring>,
) -> Control {
    let list: Vec<(&str, &Keyring)> = keyrings.iter().map(|(n, k)| (n.as_str(), k)).collect();
    Control::new(parcel, version, key, &list)
}

/// Create parcel `parcel` at the server from the images in `dir` (`disk.img`, optionally
/// `memory.img` and `state.img`), under a fresh parcel key: every chunk uploaded, the control state put, the
/// parcel created owned by the server. The client does not own it afterwards (`resume` does
/// that).
pub fn init(
    server: &TierClient,
    parcel: &str,
    dir: &ParcelDir,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Moved, String> {
    if dir.held()?.is_some() {
        return Err(format!(
            "{}: the client already holds a parcel here",
            dir.root.display()
        ));
    }
    let mut key: ParcelKey = [0; 32];
    rand::thread_rng().fill_bytes(&mut key);
    let keyrings = seal_images(dir, None)?;
    if !keyrings.contains_key("disk") {
        return Err(format!("{}: no disk image", dir.image("disk").display()));
    }
    let control = control_of(parcel, 1, &key, &keyrings);
    let ids: Vec<ChunkId> = ids_of(&keyrings).into_iter().collect();
    let (chunks, bytes) = server.put_missing(&ids, &dir.cache()?, progress)?;
    server.put_control(&Held {
        control,
        nonce: hex(&[0; 16]),
    })?;
    let (_, version) = server.owned(&Request::Create {
        parcel: parcel.into(),
    })?;
    dir.forget()?;
    Ok(Moved {
        chunks,
        bytes,
        dirty: 0,
        version,
        dirty_ids: Vec::new(),
    })
}

/// Resume (or check out) `parcel` into `dir`: its control state from the owner (the phone or
/// the server), every chunk from the phone first and the server on a miss, the images
/// written (nothing of a chunk before it checks out), then the parcel handed to the client.
pub fn resume(
    server: &TierClient,
    phone: Option<&TierClient>,
    parcel: &str,
    dir: &ParcelDir,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Moved, String> {
    resume_images(server, phone, parcel, dir, None, progress)
}

/// As [`resume`], writing only the images named in `only` before the parcel is handed over
/// (the memory and device state: what a VM needs to start; its disk's chunks are then fetched as the
/// guest reads them, by the same `fetch` from the same stores, which the lab does not model).
pub fn resume_images(
    server: &TierClient,
    phone: Option<&TierClient>,
    parcel: &str,
    dir: &ParcelDir,
    only: Option<&[&str]>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Moved, String> {
    if dir.held()?.is_some() {
        return Err(format!("parcel `{parcel}`: the client owns it already"));
    }
    let (owner, _, _) = server.owner(parcel)?;
    let source: &TierClient = match owner {
        Tier::Server => server,
        Tier::Phone => phone.ok_or_else(|| {
            format!("parcel `{parcel}`: the phone owns it; give its address (--phone)")
        })?,
        Tier::Client => {
            return Err(format!(
                "parcel `{parcel}`: another client owns it (suspend it there, or `reclaim` it if that client is lost)"
            ))
        }
    };
    let held = source.get_control(parcel, None)?;
    let keyrings = held.control.keyrings().map_err(|e| e.to_string())?;
    let cache = dir.cache()?;
    let mut stores: Vec<&dyn ChunkStore> = vec![&cache];
    if let Some(p) = phone {
        stores.push(p);
    }
    stores.push(server);
    let total = fetch_images(
        phone.unwrap_or(server),
        &stores,
        &keyrings,
        dir,
        only,
        progress,
    )?;
    let mut control = held.control.clone();
    if owner == Tier::Server {
        control.dirty.clear(); // everything is at the server
    }
    let next = hand_off(server, &held, Tier::Client, |next| {
        dir.write_held(&Held {
            control: held.control.clone(),
            nonce: next.to_string(),
        })
    })?;
    // The client holds what was committed; only the dirty list may be cleared.
    let dirty = control.dirty.len() as u64;
    dir.write_held(&Held {
        control,
        nonce: next,
    })?;
    if owner == Tier::Phone {
        source.drop_control(parcel)?;
    }
    Ok(Moved {
        chunks: total,
        bytes: 0,
        dirty,
        version: held.control.version,
        dirty_ids: Vec::new(),
    })
}

/// Resume `parcel` into `dir` cut off from the server (seed 004 §4.2): the phone, which owns
/// the parcel and has hoarded all its data, lends it under a random lease (see the phone's
/// `lend` module); every chunk comes from the phone, checked. The client then holds the parcel
/// on the lease and suspends it back to the phone alone ([`suspend_lent`]); in the server's
/// record the phone owns it throughout.
pub fn resume_offline(
    phone: &TierClient,
    parcel: &str,
    dir: &ParcelDir,
    only: Option<&[&str]>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Moved, String> {
    if dir.held()?.is_some() {
        return Err(format!("parcel `{parcel}`: the client owns it already"));
    }
    // The lease is kept before it is asked for: a resume that fails after the phone lent the
    // parcel (a chunk it could not fetch, the link lost) asks again under the same lease.
    let lease_path = dir.lease_path();
    let lease = match fs::read_to_string(&lease_path) {
        Ok(l) if crate::tier::wire::unhex::<16>(l.trim(), "lease").is_ok() => l.trim().to_string(),
        _ => {
            let mut lease = [0u8; 16];
            rand::thread_rng().fill_bytes(&mut lease);
            write_atomic(&lease_path, hex(&lease).as_bytes())
                .map_err(|e| format!("{}: {e}", lease_path.display()))?;
            hex(&lease)
        }
    };
    let held = phone.lend(parcel, &lease)?;
    let keyrings = held.control.keyrings().map_err(|e| e.to_string())?;
    let cache = dir.cache()?;
    let stores: Vec<&dyn ChunkStore> = vec![&cache, phone];
    let total = fetch_images(phone, &stores, &keyrings, dir, only, progress)?;
    // The marker first: a client holding control state without it would suspend through the
    // server, which knows nothing of the lease.
    let marker = dir.lent_path();
    write_atomic(&marker, b"lent by the phone\n")
        .map_err(|e| format!("{}: {e}", marker.display()))?;
    dir.write_held(&held)?;
    Ok(Moved {
        chunks: total,
        bytes: 0,
        dirty: held.control.dirty.len() as u64,
        version: held.control.version,
        dirty_ids: Vec::new(),
    })
}

/// Write the images of `keyrings` (those `only` names, or all) into `dir`: a window of chunks
/// at a time from `first`, pipelined; a chunk it lacks or holds bad comes from the next of
/// `stores`, checked as `restore` checks it. Nothing of a chunk is written before it opens with
/// its key. Returns how many chunks the images hold.
fn fetch_images(
    first: &TierClient,
    stores: &[&dyn ChunkStore],
    keyrings: &BTreeMap<String, Keyring>,
    dir: &ParcelDir,
    only: Option<&[&str]>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<u64, String> {
    fs::create_dir_all(&dir.root).map_err(|e| format!("{}: {e}", dir.root.display()))?;
    let wanted = |name: &str| only.is_none_or(|o| o.contains(&name));
    let total: u64 = keyrings
        .iter()
        .filter(|(n, _)| wanted(n))
        .map(|(_, k)| k.entries.len() as u64)
        .sum();
    let mut done = 0u64;
    for (name, k) in keyrings.iter().filter(|(n, _)| wanted(n)) {
        let path = dir.image(name);
        let tmp = path.with_extension("img.part");
        let mut f = fs::File::create(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
        // A chunk the image holds more than once (a RAM image's zero pages) is fetched once:
        // its plaintext is kept, up to REPEATS_KEPT bytes.
        let mut count: HashMap<ChunkId, u32> = HashMap::new();
        for e in &k.entries {
            *count.entry(e.id).or_default() += 1;
        }
        let mut repeated: HashMap<ChunkId, Vec<u8>> = HashMap::new();
        let mut kept = 0usize;
        for window in k.entries.chunks(64) {
            let mut ids: Vec<ChunkId> = Vec::new();
            for e in window {
                if !repeated.contains_key(&e.id) && !ids.contains(&e.id) {
                    ids.push(e.id);
                }
            }
            let blobs = if ids.is_empty() {
                Vec::new()
            } else {
                first.get_pipelined(&ids)?
            };
            let fetched: HashMap<ChunkId, Option<Vec<u8>>> = ids.into_iter().zip(blobs).collect();
            for e in window {
                let got = match repeated.get(&e.id) {
                    Some(p) => Some(p.clone()),
                    None => fetched
                        .get(&e.id)
                        .cloned()
                        .flatten()
                        .and_then(|b| crate::chunk::open(&e.id, &e.key, &b).ok()),
                };
                match got {
                    Some(plain) if plain.len() == e.len as usize => {
                        f.write_all(&plain)
                            .map_err(|x| format!("{}: {x}", tmp.display()))?;
                        if count[&e.id] > 1
                            && !repeated.contains_key(&e.id)
                            && kept + plain.len() <= REPEATS_KEPT
                        {
                            kept += plain.len();
                            repeated.insert(e.id, plain);
                        }
                    }
                    _ => {
                        let one = Keyring {
                            image_len: e.len as u64,
                            entries: vec![*e],
                        };
                        restore(&one, stores, &mut f)
                            .map_err(|e| format!("image `{name}`: {e}"))?;
                    }
                }
                done += 1;
                progress(done, total);
            }
        }
        f.sync_all()
            .map_err(|e| format!("{}: {e}", tmp.display()))?;
        fs::rename(&tmp, &path).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(total)
}

/// Suspend the parcel in `dir` to `to` (the phone or the server): the images sealed, the
/// destination sent the chunks it must hold (the phone: those not at the server; the server:
/// all it lacks), the parcel handed over, and the client's control state and images deleted.
pub fn suspend(
    server: &TierClient,
    phone: Option<&TierClient>,
    to: Tier,
    dir: &ParcelDir,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Moved, String> {
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
) -> Result<Moved, String> {
    if dir.is_lent() {
        return Err(format!(
            "{}: the phone lent this parcel (it was resumed while the server was out of reach); suspend it to the phone alone",
            dir.root.display()
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
        Tier::Phone => phone.ok_or("suspend to the phone: give its address (--phone)")?,
        Tier::Server => server,
        Tier::Client => return Err("suspend goes to the phone or the server".into()),
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
    let next = hand_off(server, &staged, to, |next| {
        dst.put_control(&Held {
            control: control.clone(),
            nonce: next.to_string(),
        })?;
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
fn seal_for_suspend(dir: &ParcelDir, dirty_map: Option<&DirtyMap>) -> Result<Sealed, String> {
    let held = dir.held()?.ok_or_else(|| {
        format!(
            "{}: the client does not own a parcel here",
            dir.root.display()
        )
    })?;
    if let Some(pid) = crate::vm::running(&dir.vm_dir()) {
        return Err(format!(
            "{}: a guest (pid {pid}) is running on the images; save it first (`roam parcel suspend` does)",
            dir.root.display()
        ));
    }
    let base = held.control.keyrings().map_err(|e| e.to_string())?;
    let key = held.control.key().map_err(|e| e.to_string())?;
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

/// Suspend a parcel the phone lent ([`resume_offline`]) back to the phone, without the
/// server: its dirty chunks the phone lacks sent, then the new control state given back under
/// the lease; the phone checks it holds them and owns the parcel again. The client's control
/// state and images are then deleted.
pub fn suspend_lent(
    phone: &TierClient,
    dir: &ParcelDir,
    dirty_map: Option<&DirtyMap>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Moved, String> {
    if !dir.is_lent() {
        return Err(format!(
            "{}: not a parcel the phone lent; suspend it as usual",
            dir.root.display()
        ));
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

/// One cycle of eager propagation (seed 004 §4.6.3): while the guest runs, seal the images as
/// they are now into the client's cache and send the phone the chunks that changed since the
/// checkout and that it lacks. What is sent is speculation: no control state moves and a chunk
/// overwritten later is wasted, but at suspend only the final difference is left to send.
/// (chunks, bytes) sent.
pub fn eager(
    phone: &TierClient,
    dir: &ParcelDir,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(u64, u64), String> {
    let held = dir.held()?.ok_or_else(|| {
        format!(
            "{}: the client does not own a parcel here",
            dir.root.display()
        )
    })?;
    let base = ids_of(&held.control.keyrings().map_err(|e| e.to_string())?);
    let now = ids_of(&seal_images(dir, None)?);
    let changed: Vec<ChunkId> = now.difference(&base).copied().collect();
    phone.set_background(true);
    phone.put_missing(&changed, &dir.cache()?, progress)
}

/// The seed's concurrent upload: after a suspend to the phone, the client (which keeps the
/// sealed chunks in its cache, though it can no longer open them) uploads the chunks the
/// server lacks straight to it. The server keeps a chunk only when its hash is its name and
/// validates every chunk again before it commits a handoff, so this asks no trust of the
/// client; whatever arrives, the phone's self-cleaning skips. (chunks, bytes) uploaded.
pub fn upload_behind(
    server: &TierClient,
    dir: &ParcelDir,
    ids: &[ChunkId],
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(u64, u64), String> {
    let cache = dir.cache()?;
    server.set_background(true);
    server.put_missing(ids, &cache, progress)
}

/// Hoarding (seed 004): have the phone fetch from the server every chunk of the parcel's
/// current version that it lacks, so that a resume on another PC finds them all on the phone,
/// even cut off from the server. The version is this client's when it owns the parcel, else
/// its owner's. Waits until the phone is done, telling `progress` what it is doing; the final
/// state ("hoarded: ...").
pub fn hoard(
    server: &TierClient,
    phone: &TierClient,
    parcel: &str,
    dir: &ParcelDir,
    poll: std::time::Duration,
    progress: &mut dyn FnMut(&str),
) -> Result<String, String> {
    let held = match dir.held()? {
        Some(h) => h,
        None => match server.owner(parcel)?.0 {
            Tier::Phone => phone.get_control(parcel, None)?,
            Tier::Server => server.get_control(parcel, None)?,
            Tier::Client => {
                return Err(format!(
                    "parcel `{parcel}`: another client owns it; hoard from there"
                ))
            }
        },
    };
    let ids: Vec<ChunkId> = held
        .control
        .chunk_ids()
        .map_err(|e| e.to_string())?
        .into_iter()
        .collect();
    phone.hoard(parcel, &ids)?;
    wait_for_phone(
        phone,
        parcel,
        poll,
        progress,
        ("hoarded", "hoard failed: ", "hoarding"),
    )
}

/// Poll the phone's background task for `parcel` until its status starts with `ends.0`
/// (returned) or `ends.1` (an error naming `ends.2`).
fn wait_for_phone(
    phone: &TierClient,
    parcel: &str,
    poll: std::time::Duration,
    progress: &mut dyn FnMut(&str),
    ends: (&str, &str, &str),
) -> Result<String, String> {
    loop {
        let (_, task, _) = phone.status(parcel)?;
        let s = task.unwrap_or_default();
        progress(&s);
        if s.starts_with(ends.0) {
            return Ok(s);
        }
        if let Some(e) = s.strip_prefix(ends.1) {
            return Err(format!("{} of parcel `{parcel}` failed: {e}", ends.2));
        }
        std::thread::sleep(poll);
    }
}

/// Ask the phone to self-clean `parcel` and wait until it ends, telling `progress` what it is
/// doing; the final state ("done: ...").
pub fn clean(
    phone: &TierClient,
    parcel: &str,
    poll: std::time::Duration,
    progress: &mut dyn FnMut(&str),
) -> Result<String, String> {
    phone.clean(parcel)?;
    wait_for_phone(
        phone,
        parcel,
        poll,
        progress,
        ("done", "failed: ", "self-cleaning"),
    )
}

/// A parcel's state as `roam parcel status` shows it.
#[derive(Clone, Debug)]
pub struct Status {
    /// Who owns it, per the server.
    pub owner: Tier,
    /// The server's last committed version.
    pub committed: u64,
    /// A handoff is prepared.
    pub pending: bool,
    /// The client's version and dirty chunks, if it owns the parcel.
    pub client: Option<(u64, u64)>,
    /// The phone's control-state version and self-cleaning state, if asked.
    pub phone: Option<(Option<u64>, Option<String>, u64)>,
}

/// What the server, the phone and the client know of `parcel`.
pub fn status(
    server: &TierClient,
    phone: Option<&TierClient>,
    parcel: &str,
    dir: &ParcelDir,
) -> Result<Status, String> {
    let (owner, committed, pending) = server.owner(parcel)?;
    let client = dir
        .held()?
        .map(|h| (h.control.version, h.control.dirty.len() as u64));
    let phone = match phone {
        Some(p) => Some(p.status(parcel)?),
        None => None,
    };
    Ok(Status {
        owner,
        committed,
        pending,
        client,
        phone,
    })
}

/// The directory of parcel `name` under `base`.
pub fn parcel_dir(base: &Path, name: &str) -> ParcelDir {
    ParcelDir::new(base.join(name))
}
