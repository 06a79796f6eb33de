//! Resume: the parcel checked out into the client's directory, from whoever owns it
//! ([`resume`], [`resume_images`]), or borrowed from the phone cut off from the server
//! ([`resume_offline`]). Either way every chunk is fetched a window at a time, checked, and
//! written only once it opens with its key ([`fetch_images`]).

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::Write;
use std::path::Path;

use rand::RngCore;

use super::{Moved, ParcelDir};
use crate::chunk::open;
use crate::error::StoreError;
use crate::files::{read_private, write_atomic, write_private};
use crate::id::ChunkId;
use crate::image::restore;
use crate::keyring::{Entry, Keyring};
use crate::ownership::Tier;
use crate::store::ChunkStore;
use crate::tier::wire::{hex, unhex};
use crate::tier::{hand_off, Held, TierClient};

/// Bytes of repeated chunks' plaintext a resume keeps to write them again without fetching.
const REPEATS_KEPT: usize = 64 << 20;

/// Resume (or check out) `parcel` into `dir`: its control state from the owner (the phone or
/// the server), every chunk from the phone first and the server on a miss, the images
/// written (nothing of a chunk before it checks out), then the parcel handed to the client.
pub fn resume(
    server: &TierClient,
    phone: Option<&TierClient>,
    parcel: &str,
    dir: &ParcelDir,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Moved, StoreError> {
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
) -> Result<Moved, StoreError> {
    if dir.held()?.is_some() {
        return Err(StoreError::parcel(parcel, "the client owns it already"));
    }
    let (owner, source) = owner_link(server, phone, parcel)?;
    let held = source.get_control(parcel, None)?;
    let keyrings = held.control.keyrings()?;
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
    let dirty = take_ownership(server, &held, owner, dir)?;
    if owner == Tier::Phone {
        source.drop_control(parcel, &held.nonce)?;
    }
    Ok(Moved {
        chunks: total,
        bytes: 0,
        dirty,
        version: held.control.version,
        dirty_ids: Vec::new(),
    })
}

/// Who owns `parcel`, per the server, and the link to it.
fn owner_link<'a>(
    server: &'a TierClient,
    phone: Option<&'a TierClient>,
    parcel: &str,
) -> Result<(Tier, &'a TierClient), StoreError> {
    let (owner, _, _) = server.owner(parcel)?;
    let source =
        match owner {
            Tier::Server => server,
            Tier::Phone => phone.ok_or_else(|| StoreError::NeedsPhone {
                why: format!("parcel `{parcel}`: the phone owns it"),
            })?,
            Tier::Client => return Err(StoreError::parcel(
                parcel,
                "another client owns it (suspend it there, or `reclaim` it if that client is lost)",
            )),
        };
    Ok((owner, source))
}

/// Hand the parcel of `held` (owned by `owner`) to the client, which keeps its control state
/// in `dir`; the chunks of the version not at the server.
fn take_ownership(
    server: &TierClient,
    held: &Held,
    owner: Tier,
    dir: &ParcelDir,
) -> Result<u64, StoreError> {
    let mut control = held.control.clone();
    if owner == Tier::Server {
        control.dirty.clear(); // everything is at the server
    }
    let next = hand_off(server, held, Tier::Client, |next| {
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
    Ok(dirty)
}

/// Resume `parcel` into `dir` cut off from the server (the Horatio paper §4.2): the phone, which owns
/// the parcel and has hoarded all its data, lends it under a random lease (see the phone's
/// `lend` module); every chunk comes from the phone, checked. The client then holds the parcel
/// on the lease and suspends it back to the phone alone ([`super::suspend_lent`]); in the
/// server's record the phone owns it throughout.
pub fn resume_offline(
    phone: &TierClient,
    parcel: &str,
    dir: &ParcelDir,
    only: Option<&[&str]>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Moved, StoreError> {
    if dir.held()?.is_some() {
        return Err(StoreError::parcel(parcel, "the client owns it already"));
    }
    let lease = lease_of(dir)?;
    let held = phone.lend(parcel, &lease)?;
    let keyrings = held.control.keyrings()?;
    let cache = dir.cache()?;
    let stores: Vec<&dyn ChunkStore> = vec![&cache, phone];
    let total = fetch_images(phone, &stores, &keyrings, dir, only, progress)?;
    // The marker first: a client holding control state without it would suspend through the
    // server, which knows nothing of the lease.
    write_atomic(&dir.lent_path(), b"lent by the phone\n")?;
    dir.write_held(&held)?;
    Ok(Moved {
        chunks: total,
        bytes: 0,
        dirty: held.control.dirty.len() as u64,
        version: held.control.version,
        dirty_ids: Vec::new(),
    })
}

/// The lease a resume cut off from the server asks under: kept before it is asked for, so
/// that a resume that fails after the phone lent the parcel (a chunk it could not fetch, the
/// link lost) asks again under the same lease.
fn lease_of(dir: &ParcelDir) -> Result<String, StoreError> {
    let lease_path = dir.lease_path();
    let kept = read_private(&lease_path, "a lease")?
        .map(|b| String::from_utf8_lossy(&b).trim().to_string());
    match kept {
        Some(l) if unhex::<16>(&l, "lease").is_ok() => Ok(l),
        _ => {
            let mut lease = [0u8; 16];
            rand::thread_rng().fill_bytes(&mut lease);
            write_private(&lease_path, hex(&lease).as_bytes())?;
            Ok(hex(&lease))
        }
    }
}

/// The file `path` created (or truncated) for an image: the parcel's data in clear, so
/// readable by its owner alone (mode 0600 from its creation; an older file is narrowed too).
fn private_file(path: &Path) -> Result<fs::File, StoreError> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(StoreError::io(path))?;
    f.set_permissions(fs::Permissions::from_mode(0o600))
        .map_err(StoreError::io(path))?;
    Ok(f)
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
) -> Result<u64, StoreError> {
    crate::files::make_private_dir(&dir.root)?;
    let wanted = |name: &str| only.is_none_or(|o| o.contains(&name));
    let total: u64 = keyrings
        .iter()
        .filter(|(n, _)| wanted(n))
        .map(|(_, k)| k.entries.len() as u64)
        .sum();
    let mut done = 0u64;
    for (name, k) in keyrings.iter().filter(|(n, _)| wanted(n)) {
        let mut progress = |n: u64| progress(done + n, total);
        let image = ImageFetch {
            first,
            stores,
            keyring: k,
        };
        image
            .write(&dir.image(name), &mut progress)
            .map_err(|e| e.within(format!("image `{name}`")))?;
        done += k.entries.len() as u64;
    }
    Ok(total)
}

/// One image being fetched: its keyring, the tier asked first (pipelined), and the stores a
/// chunk it lacks or holds bad comes from.
struct ImageFetch<'a> {
    first: &'a TierClient,
    stores: &'a [&'a dyn ChunkStore],
    keyring: &'a Keyring,
}

/// The plaintext of chunks an image holds more than once (a RAM image's zero pages), kept to
/// write them again without fetching, up to [`REPEATS_KEPT`] bytes.
struct Repeats {
    count: HashMap<ChunkId, u32>,
    kept: HashMap<ChunkId, Vec<u8>>,
    bytes: usize,
}

impl Repeats {
    fn of(keyring: &Keyring) -> Repeats {
        let mut count: HashMap<ChunkId, u32> = HashMap::new();
        for e in &keyring.entries {
            *count.entry(e.id).or_default() += 1;
        }
        Repeats {
            count,
            kept: HashMap::new(),
            bytes: 0,
        }
    }

    /// Keep `plain` of chunk `id` if the image holds it again and there is room.
    fn offer(&mut self, id: ChunkId, plain: &[u8]) {
        if self.count[&id] > 1
            && !self.kept.contains_key(&id)
            && self.bytes + plain.len() <= REPEATS_KEPT
        {
            self.bytes += plain.len();
            self.kept.insert(id, plain.to_vec());
        }
    }
}

impl ImageFetch<'_> {
    /// Write the image to `path` (through `path.img.part`, renamed once whole and synced);
    /// `progress` is told how many of its chunks are written.
    fn write(&self, path: &Path, progress: &mut dyn FnMut(u64)) -> Result<(), StoreError> {
        let tmp = path.with_extension("img.part");
        let mut f = private_file(&tmp)?;
        let mut repeats = Repeats::of(self.keyring);
        let mut done = 0u64;
        for window in self.keyring.entries.chunks(64) {
            self.write_window(window, &mut repeats, &mut f, &tmp, &mut || {
                done += 1;
                progress(done);
            })?;
        }
        f.sync_all().map_err(StoreError::io(&tmp))?;
        fs::rename(&tmp, path).map_err(StoreError::io(path))
    }

    /// One window of chunks: those not kept as repeats asked of `first` at once, each written
    /// once it opens; one `first` lacks or holds bad restored from the next stores. `written`
    /// is told after each chunk.
    fn write_window(
        &self,
        window: &[Entry],
        repeats: &mut Repeats,
        f: &mut fs::File,
        tmp: &Path,
        written: &mut dyn FnMut(),
    ) -> Result<(), StoreError> {
        let mut ids: Vec<ChunkId> = Vec::new();
        for e in window {
            if !repeats.kept.contains_key(&e.id) && !ids.contains(&e.id) {
                ids.push(e.id);
            }
        }
        let blobs = if ids.is_empty() {
            Vec::new()
        } else {
            self.first.get_pipelined(&ids)?
        };
        let fetched: HashMap<ChunkId, Option<Vec<u8>>> = ids.into_iter().zip(blobs).collect();
        for e in window {
            let got = match repeats.kept.get(&e.id) {
                Some(p) => Some(p.clone()),
                None => fetched
                    .get(&e.id)
                    .cloned()
                    .flatten()
                    .and_then(|b| open(&e.id, &e.key, &b).ok()),
            };
            match got {
                Some(plain) if plain.len() == e.len as usize => {
                    f.write_all(&plain).map_err(StoreError::io(tmp))?;
                    repeats.offer(e.id, &plain);
                }
                _ => {
                    let one = Keyring {
                        image_len: e.len as u64,
                        entries: vec![*e],
                    };
                    restore(&one, self.stores, f)?;
                }
            }
            written();
        }
        Ok(())
    }
}
