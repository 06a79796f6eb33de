//! The client tier's operations on a parcel (the Horatio paper, "Operations"), as `roam parcel` runs
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
//! bench store`); with a bitmap, [`ingest`] seals only the chunks it names.
//!
//! Here: the parcel's directory, `init`, and what the client asks of the phone (`hoard`,
//! `clean`) or of every tier (`status`); resuming is in `resume`, suspending in `suspend`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use rand::RngCore;

use crate::error::StoreError;
use crate::files::remove_if_present;
use crate::id::ChunkId;
use crate::image::ingest;
use crate::keyring::{Keyring, ParcelKey};
use crate::ownership::Tier;
use crate::store::DirStore;
use crate::tier::wire::{hex, Request};
use crate::tier::{Control, Held, TierClient};

mod resume;
mod suspend;

pub use resume::{resume, resume_images, resume_offline};
pub use suspend::{eager, suspend, suspend_dirty, suspend_lent, upload_behind};

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
    pub fn cache(&self) -> Result<DirStore, StoreError> {
        DirStore::open(self.root.join("cache"))
    }

    /// The control state, if the client owns the parcel.
    pub fn held(&self) -> Result<Option<Held>, StoreError> {
        Held::read(&self.control_path())
    }

    /// Keep `held` as the client's control state (after a handoff to the client committed).
    pub fn write_held(&self, held: &Held) -> Result<(), StoreError> {
        held.write(&self.control_path())
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
    fn forget(&self) -> Result<(), StoreError> {
        for p in [
            self.control_path(),
            self.lent_path(),
            self.lease_path(),
            self.image("disk"),
            self.image("memory"),
            self.image("state"),
        ] {
            remove_if_present(&p)?;
        }
        match fs::remove_dir_all(self.vm_dir()) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(StoreError::io(self.vm_dir())(e))
            }
            _ => Ok(()),
        }
    }

    /// An error naming this directory: why the operation cannot be done here.
    fn refuse(&self, why: impl Into<String>) -> StoreError {
        StoreError::Client {
            path: self.root.clone(),
            why: why.into(),
        }
    }

    /// The control state of the parcel the client owns here (an error if it owns none).
    fn owned(&self) -> Result<Held, StoreError> {
        self.held()?
            .ok_or_else(|| self.refuse("the client does not own a parcel here"))
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
) -> Result<BTreeMap<String, Keyring>, StoreError> {
    let cache = dir.cache()?;
    let mut out = BTreeMap::new();
    for name in IMAGES {
        let path = dir.image(name);
        let mut f = match fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && name != "disk" => continue,
            Err(e) => return Err(StoreError::io(path)(e)),
        };
        let from = base.and_then(|(k, d)| Some((k.get(name)?, d.get(name)?)));
        let got = ingest(&mut f, &cache, from).map_err(|e| e.within(path.display()))?;
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
) -> Result<Moved, StoreError> {
    if dir.held()?.is_some() {
        return Err(dir.refuse("the client already holds a parcel here"));
    }
    let mut key: ParcelKey = [0; 32];
    rand::thread_rng().fill_bytes(&mut key);
    let keyrings = seal_images(dir, None)?;
    if !keyrings.contains_key("disk") {
        return Err(StoreError::Client {
            path: dir.image("disk"),
            why: "no disk image".into(),
        });
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

/// Hoarding (the Horatio paper): have the phone fetch from the server every chunk of the parcel's
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
) -> Result<String, StoreError> {
    let held = match dir.held()? {
        Some(h) => h,
        None => match server.owner(parcel)?.0 {
            Tier::Phone => phone.get_control(parcel, None)?,
            Tier::Server => server.get_control(parcel, None)?,
            Tier::Client => {
                return Err(StoreError::parcel(
                    parcel,
                    "another client owns it; hoard from there",
                ))
            }
        },
    };
    let ids: Vec<ChunkId> = held.control.chunk_ids()?.into_iter().collect();
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
/// (returned) or `ends.1` ([`StoreError::Task`] naming `ends.2`).
fn wait_for_phone(
    phone: &TierClient,
    parcel: &str,
    poll: std::time::Duration,
    progress: &mut dyn FnMut(&str),
    ends: (&str, &str, &'static str),
) -> Result<String, StoreError> {
    loop {
        let (_, task, _) = phone.status(parcel)?;
        let s = task.unwrap_or_default();
        progress(&s);
        if s.starts_with(ends.0) {
            return Ok(s);
        }
        if let Some(e) = s.strip_prefix(ends.1) {
            return Err(StoreError::Task {
                task: ends.2,
                parcel: parcel.to_string(),
                why: e.to_string(),
            });
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
) -> Result<String, StoreError> {
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
) -> Result<Status, StoreError> {
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
