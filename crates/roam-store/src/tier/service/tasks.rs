//! The phone's background tasks and what a tier knows of a parcel: `Hoard` (fetch from the
//! server the chunks of a version the phone lacks), `Clean` (self-cleaning: upload what the
//! server lacks, then hand it the parcel) and `Status`. A task answers at once and runs on a
//! thread of its own; one at a time per parcel, and its progress, or how it ended, is what
//! `Status` tells.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use super::{ok, parcel_ok, reply, Answer, TierService};
use crate::error::StoreError;
use crate::id::ChunkId;
use crate::ownership::Tier;
use crate::tier::client::TierClient;
use crate::tier::control::Held;
use crate::tier::handoff::hand_off;
use crate::tier::wire::{Reply, MAX_HAS};

/// Whether a phone's task status says a self-clean is running.
pub(super) fn running_clean(s: &str) -> bool {
    s.starts_with("uploading") || s.starts_with("handing")
}

impl TierService {
    /// `Hoard`: start fetching the `count` chunks named in `payload` (32 bytes each) that the
    /// phone lacks.
    pub(super) fn start_hoard(
        self: &Arc<Self>,
        parcel: String,
        count: u64,
        payload: &[u8],
    ) -> Answer {
        parcel_ok(&parcel)?;
        if self.role != Tier::Phone || self.upstream.is_none() {
            return Err(StoreError::WrongTier(
                "hoarding runs on a phone that knows its server".into(),
            ));
        }
        if payload.len() as u64 != count.saturating_mul(32) {
            return Err(StoreError::BadRequest(format!(
                "`Hoard` of {count} names with a payload of {} bytes",
                payload.len()
            )));
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
                    return Err(StoreError::parcel(
                        &parcel,
                        "the phone is self-cleaning it; hoard after",
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
            me.set_cleaning(&parcel, end);
        });
        ok()
    }

    /// `Clean`: start self-cleaning `parcel`.
    pub(super) fn start_clean(self: &Arc<Self>, parcel: String) -> Answer {
        parcel_ok(&parcel)?;
        if self.role != Tier::Phone || self.upstream.is_none() {
            return Err(StoreError::WrongTier(
                "self-cleaning runs on a phone that knows its server".into(),
            ));
        }
        {
            let mut c = self.cleaning.lock().unwrap();
            if c.get(&parcel).is_some_and(|s| running_clean(s)) {
                return ok(); // already running
            }
            if c.get(&parcel).is_some_and(|s| s.starts_with("hoarding")) {
                return Err(StoreError::parcel(
                    &parcel,
                    "the phone is hoarding it; clean after",
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
            me.set_cleaning(&parcel, end);
        });
        ok()
    }

    /// `Status`: the version of the control state held, the background task's state (and a
    /// lease out), the chunks held.
    pub(super) fn status(&self, parcel: &str) -> Answer {
        parcel_ok(parcel)?; // it names files
        let (control, lease) = {
            let _g = self.control_lock();
            let control = self
                .read_held("control", parcel)?
                .map(|h| h.control.version);
            (control, self.lease(parcel)?)
        };
        let mut cleaning = self.cleaning.lock().unwrap().get(parcel).cloned();
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
        reply(Reply::Status {
            control,
            cleaning,
            chunks,
        })
    }

    fn set_cleaning(&self, parcel: &str, what: String) {
        self.cleaning.lock().unwrap().insert(parcel.into(), what);
    }

    /// The link to the server (the phone's upstream), for background traffic.
    fn upstream_link(&self) -> Result<TierClient, StoreError> {
        let server = (self.upstream.as_ref().expect("checked"))()?;
        server.set_background(true);
        Ok(server)
    }

    /// Hoarding: fetch from the server, a window at a time, the chunks of `ids` the phone
    /// lacks; each kept only when its hash is its name. (fetched, not at the server).
    fn hoard(&self, parcel: &str, ids: &[ChunkId]) -> Result<(u64, u64), StoreError> {
        let server = self.upstream_link()?;
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
                            self.blobs().put(id, &b)?;
                            fetched += 1;
                        }
                        Some(_) => {
                            return Err(StoreError::Tampered {
                                id: *id,
                                why: "the server's copy does not match its name".into(),
                            })
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

    /// Self-cleaning (the Horatio paper): upload the chunks of the parcel's control state that the
    /// server lacks (so an interrupted clean resumes where it stopped, and chunks the client
    /// uploaded meanwhile are skipped), then hand the parcel to the server, which validates
    /// every chunk before it commits. Returns how many chunks were uploaded.
    fn clean(&self, parcel: &str) -> Result<u64, StoreError> {
        let held = {
            let _g = self.control_lock();
            self.not_lent(parcel)?;
            self.read_held("control", parcel)?
        }
        .ok_or_else(|| StoreError::parcel(parcel, "the phone holds no control state"))?;
        let server = self.upstream_link()?;
        let uploaded = self.upload(parcel, &held, &server)?;
        self.set_cleaning(
            parcel,
            format!("handing the parcel to the server ({uploaded} chunks uploaded)"),
        );
        hand_off(&server, &held, Tier::Server, |next| {
            server.put_control(&Held {
                control: held.control.clone(),
                nonce: next.to_string(),
            })?;
            server.validate(parcel)
        })?;
        let _g = self.control_lock();
        let path = self.control_path("control", parcel);
        fs::remove_file(&path).map_err(StoreError::io(path))?;
        Ok(uploaded)
    }

    /// Self-cleaning's first step: the chunks of `held` that `server` lacks, uploaded a batch
    /// at a time with the progress in the task's state. How many were uploaded.
    fn upload(&self, parcel: &str, held: &Held, server: &TierClient) -> Result<u64, StoreError> {
        let ids: Vec<ChunkId> = held.control.chunk_ids()?.into_iter().collect();
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
                    self.blobs().get(id)?.ok_or_else(|| StoreError::Absent {
                        id: *id,
                        place: "on the phone".into(),
                    })
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
        Ok(uploaded)
    }
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
