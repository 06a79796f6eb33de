//! The server's ownership-record requests: `Create`, `Owner`, and the two-phase handoff
//! (`Prepare`, `Commit`, `Abort`), and `Reclaim` for a lost device. The record
//! ([`Registry`](crate::ownership::Registry)) decides; this keeps it on disk after every change
//! and, for a handoff to the server, commits only a version the server holds and has
//! validated itself.

use std::fs;
use std::time::Duration;

use super::{ok, parcel_ok, random_nonce, reply, Answer, TierService};
use crate::error::StoreError;
use crate::ownership::{Tier, Version};
use crate::tier::wire::{hex, unhex, Reply};

impl TierService {
    /// `Create`: a new parcel, owned by the server, from the control state put first (every
    /// chunk it names uploaded).
    pub(super) fn create(&self, parcel: &str) -> Answer {
        parcel_ok(parcel)?;
        let _g = self.control_lock();
        let mut reg = self.registry()?;
        if reg.knows(parcel) {
            return Err(StoreError::parcel(parcel, "exists"));
        }
        let held = self
            .read_held("control", parcel)?
            .ok_or_else(|| StoreError::parcel(parcel, "put its control state first"))?;
        let (_, missing) = self.missing(&held)?;
        if !missing.is_empty() {
            return Err(StoreError::parcel(
                parcel,
                format!("{} chunks not uploaded", missing.len()),
            ));
        }
        let nonce = random_nonce();
        let version = Version {
            number: held.control.version,
            keyring: held.control.hash(),
        };
        reg.create(parcel, version, nonce);
        self.save_registry(&reg)?;
        reply(Reply::Owned {
            nonce: hex(&nonce),
            version: version.number,
        })
    }

    /// `Owner`: who owns `parcel`, its last committed version, and whether a handoff is
    /// prepared.
    pub(super) fn owner(&self, parcel: &str, now: Duration) -> Answer {
        let mut reg = self.registry()?;
        let (tier, _) = reg.owner(parcel, now)?;
        let pending = reg.pending(parcel, now).is_some();
        let committed = reg.committed(parcel)?.number;
        reply(Reply::Owner {
            tier,
            committed,
            pending,
        })
    }

    /// `Prepare`: phase 1 of a handoff of `parcel` to `to` at `version` (whose hash is
    /// `hash`), asked by the owner naming its `nonce`; the next nonce.
    pub(super) fn prepare(
        &self,
        parcel: &str,
        nonce: &str,
        to: Tier,
        version: u64,
        hash: &str,
        now: Duration,
    ) -> Answer {
        let mut reg = self.registry()?;
        let next = random_nonce();
        let v = Version {
            number: version,
            keyring: unhex::<32>(hash, "version hash")?,
        };
        reg.prepare(parcel, unhex(nonce, "nonce")?, to, v, next, now)?;
        self.save_registry(&reg)?;
        reply(Reply::Prepared { next: hex(&next) })
    }

    /// `Commit`: phase 2. A handoff to the server commits only the version the server holds
    /// (`incoming/`) with every chunk valid, which then becomes its control state.
    pub(super) fn commit(
        &self,
        parcel: &str,
        nonce: &str,
        next: &str,
        hash: &str,
        now: Duration,
    ) -> Answer {
        let _g = self.control_lock();
        let mut reg = self.registry()?;
        let hash = unhex::<32>(hash, "version hash")?;
        if let Some((Tier::Server, _)) = reg.pending(parcel, now) {
            // Upstream: only state the server holds and has validated itself.
            self.check_incoming(parcel, &hash)?;
        }
        let to = reg.commit(
            parcel,
            unhex(nonce, "nonce")?,
            unhex(next, "next nonce")?,
            hash,
            now,
        )?;
        self.save_registry(&reg)?;
        if to == Tier::Server {
            let held = self.read_held("incoming", parcel)?.expect("checked above");
            self.write_held("control", parcel, &held)?;
            let _ = fs::remove_file(self.control_path("incoming", parcel));
        }
        ok()
    }

    /// Before a handoff to the server commits: the server holds the version of `hash` in
    /// `incoming/`, and every chunk of it valid.
    fn check_incoming(&self, parcel: &str, hash: &[u8; 32]) -> Result<(), StoreError> {
        let refused = |why: String| StoreError::parcel(parcel, format!("commit refused, {why}"));
        let held = self
            .read_held("incoming", parcel)?
            .ok_or_else(|| refused("the server holds no control state of this version".into()))?;
        if held.control.hash() != *hash {
            return Err(refused("not the version the server holds".into()));
        }
        let (_, missing) = self.missing(&held)?;
        if !missing.is_empty() {
            return Err(refused(format!(
                "the server lacks {} valid chunks of it",
                missing.len()
            )));
        }
        Ok(())
    }

    /// `Abort`: give up the handoff the owner (naming `nonce`) prepared.
    pub(super) fn abort(&self, parcel: &str, nonce: &str, now: Duration) -> Answer {
        let mut reg = self.registry()?;
        reg.abort(parcel, unhex(nonce, "nonce")?, now)?;
        self.save_registry(&reg)?;
        let _ = fs::remove_file(self.control_path("incoming", parcel));
        ok()
    }

    /// `Reclaim`: a lost device; the server owns `parcel` again at its last committed version,
    /// under a fresh nonce.
    pub(super) fn reclaim(&self, parcel: &str, now: Duration) -> Answer {
        let _g = self.control_lock();
        let mut reg = self.registry()?;
        let fresh = random_nonce();
        let v = reg.reclaim(parcel, fresh, now)?;
        self.save_registry(&reg)?;
        let _ = fs::remove_file(self.control_path("incoming", parcel));
        reply(Reply::Owned {
            nonce: hex(&fresh),
            version: v.number,
        })
    }
}
