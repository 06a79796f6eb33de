//! Lending: a resume cut off from the server (seed 004 §4.2: a disconnected resume needs the
//! phone to own the parcel and hold all its data).
//!
//! The server's ownership record is the lock, and it cannot be reached; but while the phone
//! owns the parcel the server has nothing to say about it until the phone hands it on. So the
//! phone lends it: the client names a random lease, the phone records it (`lent/<parcel>.json`)
//! and answers the control state under the lease; while the lease is out the phone neither
//! self-cleans the parcel nor gives it to anyone else. The client suspends back to the phone
//! (`Return`), which checks it holds the new version's dirty chunks and owns the parcel again
//! under its own nonce, which the server still knows, and self-cleans it as usual once it
//! reaches the server. In the server's record the phone owned the parcel throughout.
//!
//! Only a phone that knows its handoff committed may lend (a phone holding control state of a
//! handoff that was prepared but never committed is not the owner): the source of a handoff to
//! the phone says so after its commit (`Committed`), recorded in `owned/<parcel>`. A lost
//! phone is reclaimed by the server as before; a client holding a lease of it then cannot
//! check its session in, as any lost owner's state is rolled back. A new handoff to the phone
//! (control state put) ends a lease still out.

use std::fs;

use serde::{Deserialize, Serialize};

use super::{ok, write_atomic, Answer, TierService};
use crate::tier::wire::{unhex, Reply};
use crate::tier::Held;

/// A lease the phone has given.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Lease {
    /// The client's lease (hex).
    pub lease: String,
    /// The version lent.
    pub version: u64,
}

impl TierService {
    fn lease_path(&self, parcel: &str) -> std::path::PathBuf {
        self.dir.join("lent").join(format!("{parcel}.json"))
    }

    fn owned_path(&self, parcel: &str) -> std::path::PathBuf {
        self.dir.join("owned").join(parcel)
    }

    /// The lease out on `parcel`, if any (callers hold the control lock).
    pub(crate) fn lease(&self, parcel: &str) -> Result<Option<Lease>, String> {
        let path = self.lease_path(parcel);
        match fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| format!("{}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    /// An error if `parcel` is lent (callers hold the control lock).
    pub(crate) fn not_lent(&self, parcel: &str) -> Result<(), String> {
        match self.lease(parcel)? {
            None => Ok(()),
            Some(l) => Err(format!(
                "parcel `{parcel}`: lent to a client that resumed version {} while the server was out of reach; suspend it back to the phone first",
                l.version
            )),
        }
    }

    /// End a lease still out (a new handoff to the phone).
    pub(crate) fn end_lease(&self, parcel: &str) -> Result<(), String> {
        match fs::remove_file(self.lease_path(parcel)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(format!("{}: {e}", self.lease_path(parcel).display()))
            }
            _ => Ok(()),
        }
    }

    /// `Committed`: the phone owns `parcel` under `nonce`.
    pub(crate) fn confirm(&self, parcel: &str, nonce: &str) -> Answer {
        unhex::<16>(nonce, "nonce")?;
        let _g = self.control.lock().unwrap_or_else(|p| p.into_inner());
        let held = self
            .read_held("control", parcel)?
            .ok_or_else(|| format!("parcel `{parcel}`: the phone holds no control state"))?;
        if held.nonce != nonce {
            return Err(format!(
                "parcel `{parcel}`: not the nonce the phone holds it under"
            ));
        }
        let path = self.owned_path(parcel);
        write_atomic(&path, nonce.as_bytes()).map_err(|e| format!("{}: {e}", path.display()))?;
        ok()
    }

    /// `Lend`: the control state under `lease`, if the phone owns `parcel` and holds all of it.
    pub(crate) fn lend(&self, parcel: &str, lease: &str) -> Answer {
        unhex::<16>(lease, "lease")?;
        let busy = self
            .cleaning
            .lock()
            .unwrap()
            .get(parcel)
            .is_some_and(|s| super::running_clean(s));
        if busy {
            return Err(format!(
                "parcel `{parcel}`: the phone is self-cleaning it; resume through the server"
            ));
        }
        let _g = self.control.lock().unwrap_or_else(|p| p.into_inner());
        let mut held = self
            .read_held("control", parcel)?
            .ok_or_else(|| format!("parcel `{parcel}`: the phone does not own it"))?;
        let owned = fs::read_to_string(self.owned_path(parcel)).unwrap_or_default();
        if owned != held.nonce {
            return Err(format!(
                "parcel `{parcel}`: the phone was not told that its handoff committed, so it cannot tell it owns the parcel; resume while the server is reachable"
            ));
        }
        match self.lease(parcel)? {
            Some(l) if l.lease == lease => {}
            Some(l) => {
                return Err(format!(
                    "parcel `{parcel}`: lent already (version {}) to another client",
                    l.version
                ))
            }
            None => {
                let ids = held.control.chunk_ids().map_err(|e| e.to_string())?;
                let mut lacking = 0usize;
                for id in &ids {
                    if !self.blobs().has(id).map_err(|e| e.to_string())? {
                        lacking += 1;
                    }
                }
                if lacking > 0 {
                    return Err(format!(
                        "parcel `{parcel}`: the phone lacks {lacking} of the {} chunks of version {} (hoard it while the server is reachable: `roam parcel hoard`)",
                        ids.len(),
                        held.control.version
                    ));
                }
                let l = Lease {
                    lease: lease.to_string(),
                    version: held.control.version,
                };
                let path = self.lease_path(parcel);
                write_atomic(&path, &serde_json::to_vec(&l).expect("serializes"))
                    .map_err(|e| format!("{}: {e}", path.display()))?;
            }
        }
        held.nonce = lease.to_string();
        Ok((
            Reply::Payload,
            serde_json::to_vec(&held).expect("serializes"),
        ))
    }

    /// `Return`: the lent parcel's new control state (`payload`, under the lease).
    pub(crate) fn take_back(&self, parcel: &str, payload: &[u8]) -> Answer {
        let back: Held =
            serde_json::from_slice(payload).map_err(|e| format!("control state: {e}"))?;
        if back.control.parcel != parcel {
            return Err(format!(
                "control state of parcel `{}` returned as `{parcel}`",
                back.control.parcel
            ));
        }
        back.control
            .keyrings()
            .map_err(|e| format!("control state: {e}"))?;
        let _g = self.control.lock().unwrap_or_else(|p| p.into_inner());
        let lease = self.lease(parcel)?.ok_or_else(|| {
            format!("parcel `{parcel}`: not lent (the lease ended: a new handoff gave the phone the parcel, or it was returned already)")
        })?;
        if lease.lease != back.nonce {
            return Err(format!("parcel `{parcel}`: not the lease the phone gave"));
        }
        if back.control.version <= lease.version {
            return Err(format!(
                "parcel `{parcel}`: version {} returned for version {} lent",
                back.control.version, lease.version
            ));
        }
        let (_, missing) = self.missing(&back)?;
        if !missing.is_empty() {
            return Err(format!(
                "parcel `{parcel}`: the phone lacks {} valid chunks of the returned version",
                missing.len()
            ));
        }
        let own = self
            .read_held("control", parcel)?
            .ok_or_else(|| format!("parcel `{parcel}`: the phone lost its control state"))?;
        self.write_held(
            "control",
            parcel,
            &Held {
                control: back.control,
                nonce: own.nonce,
            },
        )?;
        self.end_lease(parcel)?;
        ok()
    }
}
