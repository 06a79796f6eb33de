//! A tier's service (the phone's or the server's): answers [`Request`]s from its chunk store,
//! the control state it holds and, on the server, the ownership record, which it keeps on disk
//! (`registry.json`, written to a temporary file, synced and renamed after every change). On
//! the phone it also runs self-cleaning: the parcel's chunks uploaded to the server, then the
//! parcel handed to it (`Clean`).
//!
//! Layout of a tier's directory: `blobs/` (a [`DirStore`]), `control/<parcel>.json` (the
//! [`Held`] control state), on the server `incoming/<parcel>.json` (control state of a handoff
//! to the server, until it commits) and `registry.json`.
//!
//! One service per directory: `open` takes an exclusive lock on `DIR/lock` (two servers on one
//! ownership record would hand out nonces independently) and, holding it, removes the
//! temporary files a killed predecessor left half written (`.NAME.PID.tmp`; nothing under a
//! real name is ever partial).

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::RngCore;

use super::net::TierClient;
use super::wire::{hex, unhex, Reply, Request, MAX_HAS};
use super::Held;
use crate::chunk::{ChunkId, CHUNK_SIZE};
use crate::ownership::{Nonce, Registry, Tier, Version};
use crate::store::{remove_temporaries, ChunkStore, DirStore};

mod lend;

/// Largest blob a tier keeps: a chunk that did not compress, with its header and tag.
pub const MAX_BLOB: usize = CHUNK_SIZE + 1024;

/// How the phone reaches the server (for self-cleaning).
pub type Upstream = Box<dyn Fn() -> Result<TierClient, String> + Send + Sync>;

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

/// Write `bytes` to `path` whole or not at all (temporary file, sync, rename, sync the
/// directory).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("file"),
        std::process::id()
    ));
    let mut f = fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    fs::rename(&tmp, path)?;
    // The rename itself is durable only once the directory is synced.
    fs::File::open(dir)?.sync_all()
}

/// Control state kept in the file `path` (`None`: no such file); errors name the file.
pub fn read_held_file(path: &Path) -> Result<Option<Held>, String> {
    match fs::read(path) {
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

fn random_nonce() -> Nonce {
    let mut n = [0u8; 16];
    rand::thread_rng().fill_bytes(&mut n);
    n
}

type Answer = Result<(Reply, Vec<u8>), String>;

fn ok() -> Answer {
    Ok((Reply::Ok, Vec::new()))
}

impl TierService {
    /// The service of tier `role` (phone or server) over directory `dir`, answering links that
    /// present `secret`. The server reads its ownership record from the directory.
    pub fn open(role: Tier, dir: &Path, secret: [u8; 32]) -> Result<TierService, String> {
        if role == Tier::Client {
            return Err("the client tier runs no service (it is `roam parcel`)".into());
        }
        fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let lock_path = dir.join("lock");
        let lock = fs::File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| format!("{}: {e}", lock_path.display()))?;
        lock.try_lock().map_err(|e| match e {
            fs::TryLockError::WouldBlock => format!(
                "{}: another tier is serving this directory (it holds {})",
                dir.display(),
                lock_path.display()
            ),
            fs::TryLockError::Error(e) => format!("{}: {e}", lock_path.display()),
        })?;
        let store = DirStore::open(dir.join("blobs")).map_err(|e| e.to_string())?;
        for sub in ["", "control", "incoming"] {
            remove_temporaries(&dir.join(sub))?;
        }
        store
            .remove_temporaries()
            .map_err(|e| format!("{}: {e}", store.root().display()))?;
        let registry = if role == Tier::Server {
            let path = dir.join("registry.json");
            let r = match fs::read(&path) {
                Ok(b) => serde_json::from_slice(&b)
                    .map_err(|e| format!("{}: not an ownership record: {e}", path.display()))?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Registry::default(),
                Err(e) => return Err(format!("{}: {e}", path.display())),
            };
            Some(Mutex::new(r))
        } else {
            None
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
    pub fn with_blobs(mut self, blobs: Box<dyn ChunkStore>) -> Result<TierService, String> {
        if self.role != Tier::Server {
            return Err("only the server keeps its blobs elsewhere than its directory".into());
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
    /// the reply and its payload.
    pub fn handle(
        self: &Arc<Self>,
        req: Request,
        payload: &[u8],
        now: Duration,
    ) -> (Reply, Vec<u8>) {
        match self.answer(req, payload, now) {
            Ok(a) => a,
            Err(e) => (Reply::Error(e), Vec::new()),
        }
    }

    fn control_path(&self, dir: &str, parcel: &str) -> PathBuf {
        self.dir.join(dir).join(format!("{parcel}.json"))
    }

    /// The control state held in `dir` (`control` or `incoming`) for `parcel`.
    pub fn read_held(&self, dir: &str, parcel: &str) -> Result<Option<Held>, String> {
        read_held_file(&self.control_path(dir, parcel))
    }

    fn write_held(&self, dir: &str, parcel: &str, held: &Held) -> Result<(), String> {
        let path = self.control_path(dir, parcel);
        let bytes = serde_json::to_vec(held).expect("control state serializes");
        write_atomic(&path, &bytes).map_err(|e| format!("{}: {e}", path.display()))
    }

    fn save_registry(&self, r: &Registry) -> Result<(), String> {
        let path = self.dir.join("registry.json");
        let bytes = serde_json::to_vec_pretty(r).expect("the registry serializes");
        write_atomic(&path, &bytes).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The server's registry, or an error for a phone.
    fn registry(&self) -> Result<std::sync::MutexGuard<'_, Registry>, String> {
        self.registry
            .as_ref()
            .map(|r| r.lock().unwrap_or_else(|p| p.into_inner()))
            .ok_or_else(|| "only the server keeps the ownership record".to_string())
    }

    /// Chunks of control state `held` this tier must hold and does not hold with a good hash:
    /// (named, missing). The server must hold every chunk; the phone those not yet at the
    /// server ([`Control::dirty`]).
    fn missing(&self, held: &Held) -> Result<(u64, Vec<ChunkId>), String> {
        let ids = if self.role == Tier::Server {
            held.control.chunk_ids().map_err(|e| e.to_string())?
        } else {
            held.control.dirty_ids()?
        };
        let mut missing = Vec::new();
        for id in &ids {
            let good = match self.blobs().get(id).map_err(|e| e.to_string())? {
                Some(blob) => ChunkId::of(&blob) == *id,
                None => false,
            };
            if !good {
                missing.push(*id);
            }
        }
        Ok((ids.len() as u64, missing))
    }

    fn answer(self: &Arc<Self>, req: Request, payload: &[u8], now: Duration) -> Answer {
        let parcel_ok = |p: &str| {
            if valid_parcel_name(p) {
                Ok(())
            } else {
                Err(format!(
                    "parcel name {p:?}: 1-64 of A-Z a-z 0-9 . _ -, not starting with a dot"
                ))
            }
        };
        match req {
            Request::Auth { .. } => Err("already authenticated".into()),
            Request::Has { ids } => {
                if ids.len() > MAX_HAS {
                    return Err(format!("`Has` of {} names (at most {MAX_HAS})", ids.len()));
                }
                let mut have = Vec::with_capacity(ids.len());
                for s in &ids {
                    let id = ChunkId::parse(s)
                        .ok_or_else(|| format!("chunk name {s:?}: not 64 hex digits"))?;
                    have.push(self.blobs().has(&id).map_err(|e| e.to_string())?);
                }
                Ok((Reply::Have(have), Vec::new()))
            }
            Request::Put { id } => {
                let id = ChunkId::parse(&id)
                    .ok_or_else(|| format!("chunk name {id:?}: not 64 hex digits"))?;
                if payload.len() > MAX_BLOB {
                    return Err(format!(
                        "chunk {id}: {} bytes (at most {MAX_BLOB})",
                        payload.len()
                    ));
                }
                let actual = ChunkId::of(payload);
                if actual != id {
                    return Err(format!("chunk {id}: refused, its hash is {actual}"));
                }
                self.blobs().put(&id, payload).map_err(|e| e.to_string())?;
                ok()
            }
            Request::Get { id } => {
                let id = ChunkId::parse(&id)
                    .ok_or_else(|| format!("chunk name {id:?}: not 64 hex digits"))?;
                match self.blobs().get(&id).map_err(|e| e.to_string())? {
                    Some(blob) => Ok((Reply::Payload, blob)),
                    None => Ok((Reply::NotFound, Vec::new())),
                }
            }
            Request::PutControl { parcel } => {
                parcel_ok(&parcel)?;
                let held: Held =
                    serde_json::from_slice(payload).map_err(|e| format!("control state: {e}"))?;
                if held.control.parcel != parcel {
                    return Err(format!(
                        "control state of parcel `{}` put as `{parcel}`",
                        held.control.parcel
                    ));
                }
                unhex::<16>(&held.nonce, "nonce")?;
                held.control
                    .keyrings()
                    .map_err(|e| format!("control state: {e}"))?;
                let _g = self.control.lock().unwrap_or_else(|p| p.into_inner());
                if self.role == Tier::Phone {
                    self.write_held("control", &parcel, &held)?;
                    self.end_lease(&parcel)?;
                    return ok();
                }
                let mut reg = self.registry()?;
                if !reg.knows(&parcel) {
                    // A parcel being created: its first version, owned by the server.
                    self.write_held("control", &parcel, &held)?;
                    return ok();
                }
                match reg.pending(&parcel, now) {
                    Some((Tier::Server, v))
                        if v.keyring == held.control.hash() && v.number == held.control.version =>
                    {
                        self.write_held("incoming", &parcel, &held)?;
                        ok()
                    }
                    _ => Err(format!(
                        "parcel `{parcel}`: no handoff to the server of this version is prepared"
                    )),
                }
            }
            Request::GetControl { parcel, nonce } => {
                parcel_ok(&parcel)?;
                let _g = self.control.lock().unwrap_or_else(|p| p.into_inner());
                if self.role == Tier::Phone {
                    self.not_lent(&parcel)?;
                    let held = self.read_held("control", &parcel)?.ok_or_else(|| {
                        format!("parcel `{parcel}`: the phone holds no control state")
                    })?;
                    // The user (who presented the access secret) may ask without a nonce (a
                    // resume); a tier naming one must name the right one.
                    if nonce.is_some_and(|n| n != held.nonce) {
                        return Err(format!(
                            "parcel `{parcel}`: not the nonce the phone holds it under"
                        ));
                    }
                    return Ok((
                        Reply::Payload,
                        serde_json::to_vec(&held).expect("serializes"),
                    ));
                }
                let mut reg = self.registry()?;
                let (owner, current) = reg.owner(&parcel, now).map_err(|e| e.to_string())?;
                if owner != Tier::Server {
                    return Err(format!(
                        "parcel `{parcel}`: owned by the {owner:?} tier, not the server"
                    ));
                }
                if let Some(n) = nonce {
                    if unhex::<16>(&n, "nonce")? != current {
                        return Err(format!("parcel `{parcel}`: stale ownership nonce"));
                    }
                }
                let mut held = self.read_held("control", &parcel)?.ok_or_else(|| {
                    format!("parcel `{parcel}`: the server lost its control state")
                })?;
                held.nonce = hex(&current);
                Ok((
                    Reply::Payload,
                    serde_json::to_vec(&held).expect("serializes"),
                ))
            }
            Request::DropControl { parcel } => {
                parcel_ok(&parcel)?;
                if self.role == Tier::Server {
                    return Err(
                        "the server keeps its control state (a reclaim returns to it)".into(),
                    );
                }
                let _g = self.control.lock().unwrap_or_else(|p| p.into_inner());
                self.not_lent(&parcel)?;
                match fs::remove_file(self.control_path("control", &parcel)) {
                    Ok(()) => ok(),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => ok(),
                    Err(e) => Err(e.to_string()),
                }
            }
            Request::Validate { parcel } => {
                parcel_ok(&parcel)?;
                let held = {
                    let _g = self.control.lock().unwrap_or_else(|p| p.into_inner());
                    match self.read_held("incoming", &parcel)? {
                        Some(h) if self.role == Tier::Server => Some(h),
                        _ => self.read_held("control", &parcel)?,
                    }
                }
                .ok_or_else(|| format!("parcel `{parcel}`: no control state here"))?;
                let (total, missing) = self.missing(&held)?;
                Ok((
                    Reply::Missing {
                        total,
                        count: missing.len() as u64,
                        missing: missing.iter().take(100).map(|i| i.hex()).collect(),
                    },
                    Vec::new(),
                ))
            }
            Request::Create { parcel } => {
                parcel_ok(&parcel)?;
                let _g = self.control.lock().unwrap_or_else(|p| p.into_inner());
                let mut reg = self.registry()?;
                if reg.knows(&parcel) {
                    return Err(format!("parcel `{parcel}`: exists"));
                }
                let held = self
                    .read_held("control", &parcel)?
                    .ok_or_else(|| format!("parcel `{parcel}`: put its control state first"))?;
                let (_, missing) = self.missing(&held)?;
                if !missing.is_empty() {
                    return Err(format!(
                        "parcel `{parcel}`: {} chunks not uploaded",
                        missing.len()
                    ));
                }
                let nonce = random_nonce();
                let version = Version {
                    number: held.control.version,
                    keyring: held.control.hash(),
                };
                reg.create(&parcel, version, nonce);
                self.save_registry(&reg)?;
                Ok((
                    Reply::Owned {
                        nonce: hex(&nonce),
                        version: version.number,
                    },
                    Vec::new(),
                ))
            }
            Request::Owner { parcel } => {
                let mut reg = self.registry()?;
                let (tier, _) = reg.owner(&parcel, now).map_err(|e| e.to_string())?;
                let pending = reg.pending(&parcel, now).is_some();
                let committed = reg.committed(&parcel).map_err(|e| e.to_string())?.number;
                Ok((
                    Reply::Owner {
                        tier,
                        committed,
                        pending,
                    },
                    Vec::new(),
                ))
            }
            Request::Prepare {
                parcel,
                nonce,
                to,
                version,
                hash,
            } => {
                let mut reg = self.registry()?;
                let next = random_nonce();
                let v = Version {
                    number: version,
                    keyring: unhex::<32>(&hash, "version hash")?,
                };
                reg.prepare(&parcel, unhex(&nonce, "nonce")?, to, v, next, now)
                    .map_err(|e| e.to_string())?;
                self.save_registry(&reg)?;
                Ok((Reply::Prepared { next: hex(&next) }, Vec::new()))
            }
            Request::Commit {
                parcel,
                nonce,
                next,
                hash,
            } => {
                let _g = self.control.lock().unwrap_or_else(|p| p.into_inner());
                let mut reg = self.registry()?;
                let hash = unhex::<32>(&hash, "version hash")?;
                if let Some((Tier::Server, _)) = reg.pending(&parcel, now) {
                    // Upstream: only state the server holds and has validated itself.
                    let held = self
                        .read_held("incoming", &parcel)?
                        .ok_or_else(|| format!("parcel `{parcel}`: commit refused, the server holds no control state of this version"))?;
                    if held.control.hash() != hash {
                        return Err(format!(
                            "parcel `{parcel}`: commit refused, not the version the server holds"
                        ));
                    }
                    let (_, missing) = self.missing(&held)?;
                    if !missing.is_empty() {
                        return Err(format!(
                            "parcel `{parcel}`: commit refused, the server lacks {} valid chunks of it",
                            missing.len()
                        ));
                    }
                }
                let to = reg
                    .commit(
                        &parcel,
                        unhex(&nonce, "nonce")?,
                        unhex(&next, "next nonce")?,
                        hash,
                        now,
                    )
                    .map_err(|e| e.to_string())?;
                self.save_registry(&reg)?;
                if to == Tier::Server {
                    let held = self.read_held("incoming", &parcel)?.expect("checked above");
                    self.write_held("control", &parcel, &held)?;
                    let _ = fs::remove_file(self.control_path("incoming", &parcel));
                }
                ok()
            }
            Request::Abort { parcel, nonce } => {
                let mut reg = self.registry()?;
                reg.abort(&parcel, unhex(&nonce, "nonce")?, now)
                    .map_err(|e| e.to_string())?;
                self.save_registry(&reg)?;
                let _ = fs::remove_file(self.control_path("incoming", &parcel));
                ok()
            }
            Request::Reclaim { parcel } => {
                let _g = self.control.lock().unwrap_or_else(|p| p.into_inner());
                let mut reg = self.registry()?;
                let fresh = random_nonce();
                let v = reg
                    .reclaim(&parcel, fresh, now)
                    .map_err(|e| e.to_string())?;
                self.save_registry(&reg)?;
                let _ = fs::remove_file(self.control_path("incoming", &parcel));
                Ok((
                    Reply::Owned {
                        nonce: hex(&fresh),
                        version: v.number,
                    },
                    Vec::new(),
                ))
            }
            Request::Hoard { parcel, count } => {
                parcel_ok(&parcel)?;
                if self.role != Tier::Phone || self.upstream.is_none() {
                    return Err("hoarding runs on a phone that knows its server".into());
                }
                if payload.len() as u64 != count.saturating_mul(32) {
                    return Err(format!(
                        "`Hoard` of {count} names with a payload of {} bytes",
                        payload.len()
                    ));
                }
                let ids: Vec<ChunkId> = payload
                    .chunks(32)
                    .map(|c| ChunkId(c.try_into().expect("32 bytes")))
                    .collect();
                {
                    let mut c = self.cleaning.lock().unwrap();
                    match c.get(&parcel) {
                        Some(s) if s.starts_with("hoarding") => return ok(), // already running
                        Some(s) if running_clean(s) => {
                            return Err(format!(
                                "parcel `{parcel}`: the phone is self-cleaning it; hoard after"
                            ))
                        }
                        _ => {}
                    }
                    c.insert(parcel.clone(), "hoarding: starting".into());
                }
                let me = self.clone();
                std::thread::spawn(move || {
                    let end = match me.hoard(&parcel, &ids) {
                        Ok((fetched, missing)) => format!(
                            "hoarded: {} chunks, {fetched} fetched{}",
                            ids.len(),
                            if missing > 0 {
                                format!(", {missing} not at the server")
                            } else {
                                String::new()
                            }
                        ),
                        Err(e) => format!("hoard failed: {e}"),
                    };
                    me.cleaning.lock().unwrap().insert(parcel, end);
                });
                ok()
            }
            Request::Clean { parcel } => {
                parcel_ok(&parcel)?;
                if self.role != Tier::Phone || self.upstream.is_none() {
                    return Err("self-cleaning runs on a phone that knows its server".into());
                }
                {
                    let mut c = self.cleaning.lock().unwrap();
                    if c.get(&parcel).is_some_and(|s| running_clean(s)) {
                        return ok(); // already running
                    }
                    if c.get(&parcel).is_some_and(|s| s.starts_with("hoarding")) {
                        return Err(format!(
                            "parcel `{parcel}`: the phone is hoarding it; clean after"
                        ));
                    }
                    c.insert(parcel.clone(), "uploading: starting".into());
                }
                let me = self.clone();
                std::thread::spawn(move || {
                    let end = match me.clean(&parcel) {
                        Ok(n) => format!("done: {n} chunks uploaded, the server owns the parcel"),
                        Err(e) => format!("failed: {e}"),
                    };
                    me.cleaning.lock().unwrap().insert(parcel, end);
                });
                ok()
            }
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
            Request::Status { parcel } => {
                parcel_ok(&parcel)?; // it names files
                let (control, lease) = {
                    let _g = self.control.lock().unwrap_or_else(|p| p.into_inner());
                    let control = self
                        .read_held("control", &parcel)?
                        .map(|h| h.control.version);
                    (control, self.lease(&parcel)?)
                };
                let mut cleaning = self.cleaning.lock().unwrap().get(&parcel).cloned();
                if let Some(l) = lease {
                    let lent = format!(
                        "version {} lent to a client cut off from the server",
                        l.version
                    );
                    cleaning = Some(match cleaning {
                        Some(c) => format!("{c}; {lent}"),
                        None => lent,
                    });
                }
                let chunks = count_blobs(self.store.root());
                Ok((
                    Reply::Status {
                        control,
                        cleaning,
                        chunks,
                    },
                    Vec::new(),
                ))
            }
        }
    }

    /// Hoarding: fetch from the server, a window at a time, the chunks of `ids` the phone
    /// lacks; each kept only when its hash is its name. (fetched, not at the server).
    fn hoard(&self, parcel: &str, ids: &[ChunkId]) -> Result<(u64, u64), String> {
        let server = (self.upstream.as_ref().expect("checked"))()?;
        server.set_background(true);
        let (mut fetched, mut missing, mut done) = (0u64, 0u64, 0usize);
        for batch in ids.chunks(MAX_HAS) {
            let lack: Vec<ChunkId> = batch
                .iter()
                .filter(|id| !self.blobs().has(id).unwrap_or(false))
                .copied()
                .collect();
            for window in lack.chunks(64) {
                for (id, blob) in window.iter().zip(server.get_pipelined(window)?) {
                    match blob {
                        Some(b) if ChunkId::of(&b) == *id => {
                            self.blobs().put(id, &b).map_err(|e| e.to_string())?;
                            fetched += 1;
                        }
                        Some(_) => {
                            return Err(format!("the server's chunk {id} does not match its name"))
                        }
                        None => missing += 1,
                    }
                }
            }
            done += batch.len();
            self.set_cleaning(
                parcel,
                format!(
                    "hoarding: {done} of {} chunks checked, {fetched} fetched",
                    ids.len()
                ),
            );
        }
        Ok((fetched, missing))
    }

    fn phone_only(&self, what: &str) -> Result<(), String> {
        if self.role == Tier::Phone {
            Ok(())
        } else {
            Err(format!("{what} is the phone's"))
        }
    }

    fn set_cleaning(&self, parcel: &str, what: String) {
        self.cleaning.lock().unwrap().insert(parcel.into(), what);
    }

    /// Self-cleaning (seed 004): upload the chunks of the parcel's control state that the
    /// server lacks (so an interrupted clean resumes where it stopped, and chunks the client
    /// uploaded meanwhile are skipped), then hand the parcel to the server, which validates
    /// every chunk before it commits. Returns how many chunks were uploaded.
    fn clean(&self, parcel: &str) -> Result<u64, String> {
        let held = {
            let _g = self.control.lock().unwrap_or_else(|p| p.into_inner());
            self.not_lent(parcel)?;
            self.read_held("control", parcel)?
        }
        .ok_or_else(|| format!("parcel `{parcel}`: the phone holds no control state"))?;
        let server = (self.upstream.as_ref().expect("checked"))()?;
        server.set_background(true);
        let ids: Vec<ChunkId> = held
            .control
            .chunk_ids()
            .map_err(|e| e.to_string())?
            .into_iter()
            .collect();
        let mut uploaded = 0u64;
        let mut done = 0usize;
        for batch in ids.chunks(MAX_HAS) {
            let have = server.has_many(batch)?;
            let missing: Vec<ChunkId> = batch
                .iter()
                .zip(have)
                .filter(|(_, had)| !had)
                .map(|(id, _)| *id)
                .collect();
            let before = uploaded;
            let (n, _) = server.put_pipelined(
                &missing,
                &mut |id| {
                    self.blobs()
                        .get(id)
                        .map_err(|e| e.to_string())?
                        .ok_or_else(|| format!("chunk {id}: not on the phone"))
                },
                &mut |n, _| {
                    self.set_cleaning(
                        parcel,
                        format!(
                            "uploading: {} of {} chunks checked, {} uploaded",
                            done + n as usize,
                            ids.len(),
                            before + n
                        ),
                    )
                },
            )?;
            uploaded += n;
            done += batch.len();
        }
        self.set_cleaning(
            parcel,
            format!("handing the parcel to the server ({uploaded} chunks uploaded)"),
        );
        super::net::hand_off(&server, &held, Tier::Server, |next| {
            server.put_control(&Held {
                control: held.control.clone(),
                nonce: next.to_string(),
            })?;
            server.validate(parcel)
        })?;
        let _g = self.control.lock().unwrap_or_else(|p| p.into_inner());
        fs::remove_file(self.control_path("control", parcel)).map_err(|e| e.to_string())?;
        Ok(uploaded)
    }
}

/// Whether a phone's task status says a self-clean is running.
fn running_clean(s: &str) -> bool {
    s.starts_with("uploading") || s.starts_with("handing")
}

/// Blobs under a directory store's root (two levels: fan-out directories, then blobs).
fn count_blobs(root: &Path) -> u64 {
    let Ok(dirs) = fs::read_dir(root) else {
        return 0;
    };
    dirs.flatten()
        .filter_map(|d| fs::read_dir(d.path()).ok())
        .map(|files| {
            files
                .flatten()
                .filter(|f| !f.file_name().to_string_lossy().starts_with('.'))
                .count() as u64
        })
        .sum()
}
