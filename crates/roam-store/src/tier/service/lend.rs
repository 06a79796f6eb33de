//! Lending: a resume cut off from the server (the Horatio paper §4.2: a disconnected resume needs the
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

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::control::{check_opens, control_state_for};
use super::tasks::running_clean;
use super::{ok, Answer, TierService};
use crate::error::StoreError;
use crate::files::{read_private, read_private_json, remove_if_present, write_private};
use crate::tier::control::Held;
use crate::tier::wire::{unhex, Reply};

/// A lease the phone has given.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Lease {
    /// The client's lease (hex).
    pub lease: String,
    /// The version lent.
    pub version: u64,
}

impl TierService {
    fn lease_path(&self, parcel: &str) -> PathBuf {
        self.dir.join("lent").join(format!("{parcel}.json"))
    }

    fn owned_path(&self, parcel: &str) -> PathBuf {
        self.dir.join("owned").join(parcel)
    }

    /// The lease out on `parcel`, if any (callers hold the control lock).
    pub(crate) fn lease(&self, parcel: &str) -> Result<Option<Lease>, StoreError> {
        read_private_json(&self.lease_path(parcel), "a lease")
    }

    /// An error if `parcel` is lent (callers hold the control lock).
    pub(crate) fn not_lent(&self, parcel: &str) -> Result<(), StoreError> {
        match self.lease(parcel)? {
            None => Ok(()),
            Some(l) => Err(StoreError::parcel(parcel, format!(
                "lent to a client that resumed version {} while the server was out of reach; suspend it back to the phone first",
                l.version
            ))),
        }
    }

    /// End a lease still out (a new handoff to the phone).
    pub(crate) fn end_lease(&self, parcel: &str) -> Result<(), StoreError> {
        remove_if_present(&self.lease_path(parcel))
    }

    /// `Committed`: the phone owns `parcel` under `nonce`.
    pub(crate) fn confirm(&self, parcel: &str, nonce: &str) -> Answer {
        unhex::<16>(nonce, "nonce")?;
        let _g = self.control_lock();
        let held = self
            .read_held("control", parcel)?
            .ok_or_else(|| StoreError::parcel(parcel, "the phone holds no control state"))?;
        if held.nonce != nonce {
            return Err(StoreError::parcel(
                parcel,
                "not the nonce the phone holds it under",
            ));
        }
        write_private(&self.owned_path(parcel), nonce.as_bytes())?;
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
            .is_some_and(|s| running_clean(s));
        if busy {
            return Err(StoreError::parcel(
                parcel,
                "the phone is self-cleaning it; resume through the server",
            ));
        }
        let _g = self.control_lock();
        let mut held = self
            .read_held("control", parcel)?
            .ok_or_else(|| StoreError::parcel(parcel, "the phone does not own it"))?;
        let owned = read_private(&self.owned_path(parcel), "an ownership nonce")?
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        if owned != held.nonce {
            return Err(StoreError::parcel(
                parcel,
                "the phone was not told that its handoff committed, so it cannot tell it owns the parcel; resume while the server is reachable",
            ));
        }
        match self.lease(parcel)? {
            Some(l) if l.lease == lease => {}
            Some(l) => {
                return Err(StoreError::parcel(
                    parcel,
                    format!("lent already (version {}) to another client", l.version),
                ))
            }
            None => self.give_lease(parcel, lease, &held)?,
        }
        held.nonce = lease.to_string();
        Ok((Reply::Payload, held.to_bytes()))
    }

    /// Record `lease` on `parcel`, if the phone holds every chunk of the version `held` (the
    /// callers hold the control lock).
    fn give_lease(&self, parcel: &str, lease: &str, held: &Held) -> Result<(), StoreError> {
        let ids = held.control.chunk_ids()?;
        let mut lacking = 0usize;
        for id in &ids {
            if !self.blobs().has(id)? {
                lacking += 1;
            }
        }
        if lacking > 0 {
            return Err(StoreError::parcel(parcel, format!(
                "the phone lacks {lacking} of the {} chunks of version {} (hoard it while the server is reachable: `roam parcel hoard`)",
                ids.len(),
                held.control.version
            )));
        }
        let l = Lease {
            lease: lease.to_string(),
            version: held.control.version,
        };
        write_private(
            &self.lease_path(parcel),
            &serde_json::to_vec(&l).expect("serializes"),
        )
    }

    /// `Return`: the lent parcel's new control state (`payload`, under the lease).
    pub(crate) fn take_back(&self, parcel: &str, payload: &[u8]) -> Answer {
        let back = control_state_for(parcel, payload, "returned")?;
        check_opens(&back)?;
        let _g = self.control_lock();
        let lease = self.lease(parcel)?.ok_or_else(|| {
            StoreError::parcel(parcel, "not lent (the lease ended: a new handoff gave the phone the parcel, or it was returned already)")
        })?;
        if lease.lease != back.nonce {
            return Err(StoreError::parcel(parcel, "not the lease the phone gave"));
        }
        if back.control.version <= lease.version {
            return Err(StoreError::parcel(
                parcel,
                format!(
                    "version {} returned for version {} lent",
                    back.control.version, lease.version
                ),
            ));
        }
        let (_, missing) = self.missing(&back)?;
        if !missing.is_empty() {
            return Err(StoreError::parcel(
                parcel,
                format!(
                    "the phone lacks {} valid chunks of the returned version",
                    missing.len()
                ),
            ));
        }
        let own = self
            .read_held("control", parcel)?
            .ok_or_else(|| StoreError::parcel(parcel, "the phone lost its control state"))?;
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
