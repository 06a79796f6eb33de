//! A tier's service (the phone's or the server's): answers [`Request`]s from its chunk store,
//! the control state it holds and, on the server, the ownership record, which it keeps on disk
//! (`registry.json`, written to a temporary file, synced and renamed after every change). On
//! the phone it also runs self-cleaning: the parcel's chunks uploaded to the server, then the
//! parcel handed to it (`Clean`).
//!
//! Layout of a tier's directory (mode 0700 when the tier makes it): `blobs/` (a [`DirStore`]:
//! sealed chunks, no secret), `control/<parcel>.json` (the [`Held`] control state: the parcel
//! key), on the server `incoming/<parcel>.json` (control state of a handoff to the server,
//! until it commits) and `registry.json` (the ownership record: nonces), on the phone
//! `owned/<parcel>` (the nonce it owns a parcel under) and `lent/<parcel>.json` (a lease
//! out). Every file but the blobs holds a secret: each is written with mode 0600 from its
//! creation and refused when its group or others may read it ([`crate::files`]).
//!
//! One service per directory: `open` takes an exclusive lock on `DIR/lock` (two servers on one
//! ownership record would hand out nonces independently) and, holding it, removes the
//! temporary files a killed predecessor left half written (`.NAME.PID.tmp`; nothing under a
//! real name is ever partial).
//!
//! The answers are one file per family of requests, each an `impl TierService` block: the
//! chunks (`Has`, `Put`, `Get`: `chunks`), control state (`PutControl`, `SwapControl`,
//! `Holds`, `GetControl`, `DropControl`, `Validate`: `control`), the server's ownership record (`Create`, `Owner`,
//! `Prepare`, `Commit`, `Abort`, `Reclaim`: `registry`), the phone's background tasks and what
//! a tier knows of a parcel (`Hoard`, `Clean`, `Status`: `tasks`) and lending (`Committed`,
//! `Lend`, `Return`: `lend`). A refusal is a [`StoreError`]; its text is the
//! [`Reply::Error`] the link carries back.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rand::RngCore;

use super::client::TierClient;
use super::control::Held;
use super::wire::{unhex, Reply, Request};
use crate::chunk::CHUNK_SIZE;
use crate::error::StoreError;
use crate::files::{make_private_dir, read_private_json, remove_temporaries, write_private};
use crate::id::ChunkId;
use crate::ownership::{Nonce, Registry, Tier};
use crate::store::{ChunkStore, DirStore};

mod chunks;
mod control;
mod lend;
mod registry;
mod tasks;

/// Largest blob a tier keeps: a chunk that did not compress, with its header and tag.
pub const MAX_BLOB: usize = CHUNK_SIZE + 1024;

/// How the phone reaches the server (for self-cleaning).
pub type Upstream = Box<dyn Fn() -> Result<TierClient, StoreError> + Send + Sync>;

/// One tier's state and the answers to its requests.
pub struct TierService {
    role: Tier,
    dir: PathBuf,
    store: DirStore,
    /// Where blobs live when not in `store` (the server's S3 bucket).
    blobs: Option<Box<dyn ChunkStore>>,
    secret: [u8; 32],
    /// The server's ownership record.
    registry: Option<Mutex<Registry>>,
    /// Control-state files are read and written under this lock.
    control: Mutex<()>,
    upstream: Option<Upstream>,
    /// The phone's background task (self-cleaning or hoarding), by parcel: what it is doing
    /// or how it ended.
    cleaning: Mutex<HashMap<String, String>>,
    /// Held while the service lives: the directory's exclusive lock.
    _lock: fs::File,
}

/// Whether `name` may name a parcel (and so a file): 1-64 of `[A-Za-z0-9._-]`, not starting
/// with a dot.
pub fn valid_parcel_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

/// `parcel`, if it may name a file ([`valid_parcel_name`]).
fn parcel_ok(parcel: &str) -> Result<(), StoreError> {
    if valid_parcel_name(parcel) {
        Ok(())
    } else {
        Err(StoreError::ParcelName(parcel.to_string()))
    }
}

fn random_nonce() -> Nonce {
    let mut n = [0u8; 16];
    rand::thread_rng().fill_bytes(&mut n);
    n
}

/// A request's answer: the reply and its payload, or why not.
pub type Answer = Result<(Reply, Vec<u8>), StoreError>;

/// [`Reply::Ok`], with no payload.
fn ok() -> Answer {
    Ok((Reply::Ok, Vec::new()))
}

/// `reply`, with no payload.
fn reply(reply: Reply) -> Answer {
    Ok((reply, Vec::new()))
}

/// Take the exclusive lock of the tier directory `dir` (`DIR/lock`), held while the file is.
fn lock_dir(dir: &Path) -> Result<fs::File, StoreError> {
    make_private_dir(dir)?;
    let lock_path = dir.join("lock");
    let lock = fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(StoreError::io(&lock_path))?;
    lock.try_lock().map_err(|e| match e {
        fs::TryLockError::WouldBlock => StoreError::Locked {
            dir: dir.to_path_buf(),
            lock: lock_path.clone(),
        },
        fs::TryLockError::Error(e) => StoreError::io(&lock_path)(e),
    })?;
    Ok(lock)
}

/// The server's ownership record kept in `dir` (a new one where there is none).
fn load_registry(dir: &Path) -> Result<Registry, StoreError> {
    Ok(
        read_private_json(&dir.join("registry.json"), "an ownership record (nonces)")?
            .unwrap_or_default(),
    )
}

impl TierService {
    /// The service of tier `role` (phone or server) over directory `dir`, answering links that
    /// present `secret`. The server reads its ownership record from the directory.
    pub fn open(role: Tier, dir: &Path, secret: [u8; 32]) -> Result<TierService, StoreError> {
        if role == Tier::Client {
            return Err(StoreError::WrongTier(
                "the client tier runs no service (it is `roam parcel`)".into(),
            ));
        }
        let lock = lock_dir(dir)?;
        let store = DirStore::open(dir.join("blobs"))?;
        for sub in ["", "control", "incoming"] {
            remove_temporaries(&dir.join(sub))?;
        }
        store.remove_temporaries()?;
        let registry = match role {
            Tier::Server => Some(Mutex::new(load_registry(dir)?)),
            _ => None,
        };
        Ok(TierService {
            role,
            dir: dir.to_path_buf(),
            store,
            blobs: None,
            secret,
            registry,
            control: Mutex::new(()),
            upstream: None,
            cleaning: Mutex::new(HashMap::new()),
            _lock: lock,
        })
    }

    /// The phone: how to reach the server for self-cleaning.
    pub fn with_upstream(mut self, upstream: Upstream) -> TierService {
        self.upstream = Some(upstream);
        self
    }

    /// The server: keep blobs in `blobs` (an S3 bucket, for a server that outgrows one disk)
    /// instead of the directory; control state and the ownership record stay in the directory.
    pub fn with_blobs(mut self, blobs: Box<dyn ChunkStore>) -> Result<TierService, StoreError> {
        if self.role != Tier::Server {
            return Err(StoreError::WrongTier(
                "only the server keeps its blobs elsewhere than its directory".into(),
            ));
        }
        self.blobs = Some(blobs);
        Ok(self)
    }

    /// Where this tier's blobs are kept.
    fn blobs(&self) -> &dyn ChunkStore {
        self.blobs.as_deref().unwrap_or(&self.store)
    }

    /// Which tier this is.
    pub fn role(&self) -> Tier {
        self.role
    }

    /// The tier's directory store (its blobs unless [`TierService::with_blobs`] moved them).
    pub fn store(&self) -> &DirStore {
        &self.store
    }

    /// Whether `secret` (hex) is the user's access secret (compared in constant time).
    pub fn secret_ok(&self, secret: &str) -> bool {
        match unhex::<32>(secret, "secret") {
            Ok(s) => {
                s.iter()
                    .zip(self.secret.iter())
                    .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                    == 0
            }
            Err(_) => false,
        }
    }

    /// The answer to `req` with `payload` at wall-clock time `now` (since the Unix epoch):
    /// the reply and its payload; a refusal is [`Reply::Error`] with the error's text.
    pub fn handle(
        self: &Arc<Self>,
        req: Request,
        payload: &[u8],
        now: Duration,
    ) -> (Reply, Vec<u8>) {
        match self.answer(req, payload, now) {
            Ok(a) => a,
            Err(e) => (Reply::Error(e.to_string()), Vec::new()),
        }
    }

    /// As [`TierService::handle`], a refusal as the error itself (what the link carries as
    /// its text).
    pub fn answer(self: &Arc<Self>, req: Request, payload: &[u8], now: Duration) -> Answer {
        match req {
            Request::Auth { .. } => Err(StoreError::BadRequest("already authenticated".into())),
            // Chunks (`chunks`).
            Request::Has { ids } => self.has(&ids),
            Request::Put { id } => self.put(&id, payload),
            Request::Get { id } => self.get(&id),
            // Control state (`control`).
            Request::PutControl { parcel } => self.put_control(&parcel, payload, now),
            Request::GetControl { parcel, nonce } => {
                self.get_control(&parcel, nonce.as_deref(), now)
            }
            Request::SwapControl { parcel, replaces } => {
                self.swap_control(&parcel, replaces.as_deref(), payload)
            }
            Request::Holds { parcel } => self.holds(&parcel),
            Request::DropControl { parcel, nonce } => self.drop_control(&parcel, &nonce),
            Request::Validate { parcel } => self.validate(&parcel),
            // The server's ownership record (`registry`).
            Request::Create { parcel } => self.create(&parcel),
            Request::Owner { parcel } => self.owner(&parcel, now),
            Request::Prepare {
                parcel,
                nonce,
                to,
                version,
                hash,
            } => self.prepare(&parcel, &nonce, to, version, &hash, now),
            Request::Commit {
                parcel,
                nonce,
                next,
                hash,
            } => self.commit(&parcel, &nonce, &next, &hash, now),
            Request::Abort { parcel, nonce } => self.abort(&parcel, &nonce, now),
            Request::Reclaim { parcel } => self.reclaim(&parcel, now),
            // The phone's background tasks, and what a tier knows (`tasks`).
            Request::Hoard { parcel, count } => self.start_hoard(parcel, count, payload),
            Request::Clean { parcel } => self.start_clean(parcel),
            Request::Status { parcel } => self.status(&parcel),
            // Lending (`lend`).
            Request::Committed { parcel, nonce } => {
                parcel_ok(&parcel)?;
                self.phone_only("`Committed`")?;
                self.confirm(&parcel, &nonce)
            }
            Request::Lend { parcel, lease } => {
                parcel_ok(&parcel)?;
                self.phone_only("lending")?;
                self.lend(&parcel, &lease)
            }
            Request::Return { parcel } => {
                parcel_ok(&parcel)?;
                self.phone_only("`Return`")?;
                self.take_back(&parcel, payload)
            }
        }
    }

    /// The control-state file of `parcel` in `dir` (`control` or `incoming`).
    fn control_path(&self, dir: &str, parcel: &str) -> PathBuf {
        self.dir.join(dir).join(format!("{parcel}.json"))
    }

    /// The control state held in `dir` (`control` or `incoming`) for `parcel`.
    pub fn read_held(&self, dir: &str, parcel: &str) -> Result<Option<Held>, StoreError> {
        Held::read(&self.control_path(dir, parcel))
    }

    fn write_held(&self, dir: &str, parcel: &str, held: &Held) -> Result<(), StoreError> {
        held.write(&self.control_path(dir, parcel))
    }

    /// The control lock (control-state files are read and written under it).
    fn control_lock(&self) -> MutexGuard<'_, ()> {
        self.control.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn save_registry(&self, r: &Registry) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec_pretty(r).expect("the registry serializes");
        write_private(&self.dir.join("registry.json"), &bytes)
    }

    /// The server's registry, or an error for a phone.
    fn registry(&self) -> Result<MutexGuard<'_, Registry>, StoreError> {
        self.registry
            .as_ref()
            .map(|r| r.lock().unwrap_or_else(|p| p.into_inner()))
            .ok_or_else(|| {
                StoreError::WrongTier("only the server keeps the ownership record".into())
            })
    }

    /// An error unless this is the phone (`what` names the request).
    fn phone_only(&self, what: &str) -> Result<(), StoreError> {
        if self.role == Tier::Phone {
            Ok(())
        } else {
            Err(StoreError::WrongTier(format!("{what} is the phone's")))
        }
    }

    /// Chunks of control state `held` this tier must hold and does not hold with a good hash:
    /// (named, missing). The server must hold every chunk; the phone those not yet at the
    /// server ([`Control::dirty`](super::Control::dirty)).
    fn missing(&self, held: &Held) -> Result<(u64, Vec<ChunkId>), StoreError> {
        let ids = if self.role == Tier::Server {
            held.control.chunk_ids()?
        } else {
            held.control.dirty_ids()?
        };
        let mut missing = Vec::new();
        for id in &ids {
            let good = match self.blobs().get(id)? {
                Some(blob) => ChunkId::of(&blob) == *id,
                None => false,
            };
            if !good {
                missing.push(*id);
            }
        }
        Ok((ids.len() as u64, missing))
    }
}
