//! Who owns a parcel (the Horatio paper, ../shared/spec/horatio.md "Ownership and trust"): exactly one
//! of the client (the borrowed PC), the phone or the server at a time, named by a nonce issued
//! at checkout. The server is the trust anchor and keeps the record ([`Registry`]); a handoff
//! moves the nonce by two-phase commit:
//!
//! 1. **Prepare**: the owner, naming its nonce, asks to hand the parcel to another tier at a
//!    version whose keyring hash it names. The server records the pending handoff and issues
//!    the next nonce. Nothing has moved yet.
//! 2. The source checks that the destination holds and has validated every chunk that version
//!    needs (the chunk store's hashes), and passes it the control state (keyring, config).
//! 3. **Commit**: the source, naming the old nonce and the new one, commits. The destination
//!    is the owner from then on; a client or phone source deletes its control state.
//!
//! A handoff prepared and never committed (the source died between the phases) expires after
//! [`PREPARE_TIMEOUT`] and the old owner keeps the parcel. Upstream handoffs (towards the
//! server) carry only validated state: the server commits a version only with the keyring hash
//! it prepared. A lost device: the server **reclaims** the parcel, rolling back to its last
//! committed version under a fresh nonce; any later request naming the old nonce fails
//! ([`OwnershipError::StaleNonce`]). Sans-IO: time is an input; nonces come from the caller's
//! random source.

use std::collections::HashMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// How long a prepared handoff waits for its commit.
pub const PREPARE_TIMEOUT: Duration = Duration::from_secs(300);

/// The three tiers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// The borrowed PC running the parcel.
    Client,
    /// The phone, the portable cache.
    Phone,
    /// The server, the trust anchor.
    Server,
}

/// An ownership nonce (the spec's 10 bytes, here 16).
pub type Nonce = [u8; 16];

/// A committed version of a parcel: a counter and the hash of its keyring.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    /// Increases with every commit.
    pub number: u64,
    /// The keyring's hash (what the version's chunks are checked against).
    pub keyring: [u8; 32],
}

/// What ownership refuses.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum OwnershipError {
    /// No parcel of that name.
    #[error("parcel `{0}`: unknown")]
    Unknown(String),
    /// A nonce that is not the parcel's current one (a lost device checking in after the server
    /// reclaimed the parcel, or a replay).
    #[error("parcel `{0}`: stale ownership nonce (the parcel has moved on; check it out again)")]
    StaleNonce(String),
    /// A commit with nothing prepared, or not matching what was prepared.
    #[error("parcel `{parcel}`: commit refused: {why}")]
    Commit {
        /// The parcel.
        parcel: String,
        /// Why.
        why: &'static str,
    },
    /// A handoff to the owner itself.
    #[error("parcel `{0}`: already owned by that tier")]
    SameTier(String),
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Pending {
    to: Tier,
    next: Nonce,
    version: Version,
    expires: Duration,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Record {
    owner: Tier,
    nonce: Nonce,
    /// The last version the server holds validated (what a reclaim rolls back to).
    committed: Version,
    pending: Option<Pending>,
}

/// The server's record of every parcel's owner (serialized as the server keeps it on disk).
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Registry {
    parcels: HashMap<String, Record>,
}

impl Registry {
    /// A new parcel at `version`, owned by the server under `nonce`.
    pub fn create(&mut self, parcel: &str, version: Version, nonce: Nonce) {
        self.parcels.insert(
            parcel.to_string(),
            Record {
                owner: Tier::Server,
                nonce,
                committed: version,
                pending: None,
            },
        );
    }

    fn record(&mut self, parcel: &str, now: Duration) -> Result<&mut Record, OwnershipError> {
        let r = self
            .parcels
            .get_mut(parcel)
            .ok_or_else(|| OwnershipError::Unknown(parcel.into()))?;
        if r.pending.as_ref().is_some_and(|p| now >= p.expires) {
            r.pending = None; // the source never committed: the old owner keeps it
        }
        Ok(r)
    }

    /// The owner and its nonce.
    pub fn owner(&mut self, parcel: &str, now: Duration) -> Result<(Tier, Nonce), OwnershipError> {
        let r = self.record(parcel, now)?;
        Ok((r.owner, r.nonce))
    }

    /// The handoff prepared, if any and not expired: its destination and version.
    pub fn pending(&mut self, parcel: &str, now: Duration) -> Option<(Tier, Version)> {
        let r = self.record(parcel, now).ok()?;
        r.pending.as_ref().map(|p| (p.to, p.version))
    }

    /// Whether a parcel of that name is recorded.
    pub fn knows(&self, parcel: &str) -> bool {
        self.parcels.contains_key(parcel)
    }

    /// The last committed version.
    pub fn committed(&self, parcel: &str) -> Result<Version, OwnershipError> {
        self.parcels
            .get(parcel)
            .map(|r| r.committed)
            .ok_or_else(|| OwnershipError::Unknown(parcel.into()))
    }

    /// Phase 1: the owner (naming `nonce`) prepares to hand the parcel to `to` at `version`;
    /// `next` becomes the nonce on commit. A handoff the owner prepared before and never
    /// committed is replaced: only the owner holds its nonce, so a second prepare means the
    /// first source gave up (it died between the phases and started again); the first's
    /// commit, naming the old `next`, is refused from then on.
    pub fn prepare(
        &mut self,
        parcel: &str,
        nonce: Nonce,
        to: Tier,
        version: Version,
        next: Nonce,
        now: Duration,
    ) -> Result<(), OwnershipError> {
        let r = self.record(parcel, now)?;
        if r.nonce != nonce {
            return Err(OwnershipError::StaleNonce(parcel.into()));
        }
        if r.owner == to {
            return Err(OwnershipError::SameTier(parcel.into()));
        }
        r.pending = Some(Pending {
            to,
            next,
            version,
            expires: now + PREPARE_TIMEOUT,
        });
        Ok(())
    }

    /// Phase 2: the source commits the prepared handoff, naming the old nonce and the new one
    /// and the version's keyring hash; the destination owns the parcel from now on. A handoff
    /// to the server makes its version the committed one (what a reclaim returns to).
    pub fn commit(
        &mut self,
        parcel: &str,
        nonce: Nonce,
        next: Nonce,
        keyring: [u8; 32],
        now: Duration,
    ) -> Result<Tier, OwnershipError> {
        let r = self.record(parcel, now)?;
        if r.nonce != nonce {
            return Err(OwnershipError::StaleNonce(parcel.into()));
        }
        let refuse = |why| OwnershipError::Commit {
            parcel: parcel.into(),
            why,
        };
        let p = r
            .pending
            .clone()
            .ok_or_else(|| refuse("nothing prepared (or it expired)"))?;
        if p.next != next {
            return Err(refuse("not the nonce prepared"));
        }
        if p.version.keyring != keyring {
            return Err(refuse("not the version prepared"));
        }
        r.owner = p.to;
        r.nonce = p.next;
        r.pending = None;
        if p.to == Tier::Server {
            r.committed = p.version;
        }
        Ok(p.to)
    }

    /// Give up a prepared handoff (the destination could not validate the data).
    pub fn abort(
        &mut self,
        parcel: &str,
        nonce: Nonce,
        now: Duration,
    ) -> Result<(), OwnershipError> {
        let r = self.record(parcel, now)?;
        if r.nonce != nonce {
            return Err(OwnershipError::StaleNonce(parcel.into()));
        }
        r.pending = None;
        Ok(())
    }

    /// A lost device: the server takes the parcel back at its last committed version under
    /// `fresh`; the lost owner's nonce is stale from now on.
    pub fn reclaim(
        &mut self,
        parcel: &str,
        fresh: Nonce,
        now: Duration,
    ) -> Result<Version, OwnershipError> {
        let r = self.record(parcel, now)?;
        r.owner = Tier::Server;
        r.nonce = fresh;
        r.pending = None;
        Ok(r.committed)
    }

    /// A check-in (an upload of dirty state, a status) by whoever holds `nonce`: refused when
    /// it is stale.
    pub fn check_in(
        &mut self,
        parcel: &str,
        nonce: Nonce,
        now: Duration,
    ) -> Result<Tier, OwnershipError> {
        let r = self.record(parcel, now)?;
        if r.nonce != nonce {
            return Err(OwnershipError::StaleNonce(parcel.into()));
        }
        Ok(r.owner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Duration = Duration::ZERO;

    fn v(n: u64) -> Version {
        Version {
            number: n,
            keyring: [n as u8; 32],
        }
    }

    /// Checkout to the client, suspend to the phone, self-clean to the server: one owner at
    /// every step, each nonce good only until the next commit.
    #[test]
    fn the_nonce_moves_by_two_phase_commit() {
        let mut reg = Registry::default();
        reg.create("p", v(1), [1; 16]);
        reg.prepare("p", [1; 16], Tier::Client, v(1), [2; 16], T0)
            .unwrap();
        // Until the commit, the server still owns it.
        assert_eq!(reg.owner("p", T0).unwrap(), (Tier::Server, [1; 16]));
        assert_eq!(
            reg.commit("p", [1; 16], [2; 16], v(1).keyring, T0),
            Ok(Tier::Client)
        );
        // Suspend to the phone with the dirty state of version 2.
        reg.prepare("p", [2; 16], Tier::Phone, v(2), [3; 16], T0)
            .unwrap();
        assert_eq!(
            reg.commit("p", [2; 16], [3; 16], v(2).keyring, T0),
            Ok(Tier::Phone)
        );
        assert_eq!(
            reg.committed("p").unwrap(),
            v(1),
            "the server has not validated 2 yet"
        );
        // The client's old nonce is stale.
        assert_eq!(
            reg.check_in("p", [2; 16], T0),
            Err(OwnershipError::StaleNonce("p".into()))
        );
        // Self-cleaned: to the server, which commits version 2.
        reg.prepare("p", [3; 16], Tier::Server, v(2), [4; 16], T0)
            .unwrap();
        reg.commit("p", [3; 16], [4; 16], v(2).keyring, T0).unwrap();
        assert_eq!(reg.committed("p").unwrap(), v(2));
    }

    /// The owner prepares again (its first attempt died between the phases): the second
    /// handoff replaces the first, whose commit is refused.
    #[test]
    fn a_second_prepare_by_the_owner_replaces_the_first() {
        let mut reg = Registry::default();
        reg.create("p", v(1), [1; 16]);
        reg.prepare("p", [1; 16], Tier::Phone, v(1), [2; 16], T0)
            .unwrap();
        reg.prepare("p", [1; 16], Tier::Phone, v(1), [3; 16], T0)
            .unwrap();
        assert!(reg.commit("p", [1; 16], [2; 16], v(1).keyring, T0).is_err());
        assert_eq!(reg.owner("p", T0).unwrap(), (Tier::Server, [1; 16]));
        reg.commit("p", [1; 16], [3; 16], v(1).keyring, T0).unwrap();
        assert_eq!(reg.owner("p", T0).unwrap(), (Tier::Phone, [3; 16]));
    }

    /// A source that dies between the phases: the handoff expires and the old owner keeps the
    /// parcel; a commit naming another version or nonce is refused and changes nothing.
    #[test]
    fn an_uncommitted_handoff_expires_and_a_wrong_commit_changes_nothing() {
        let mut reg = Registry::default();
        reg.create("p", v(1), [1; 16]);
        reg.prepare("p", [1; 16], Tier::Phone, v(1), [2; 16], T0)
            .unwrap();
        assert!(reg.commit("p", [1; 16], [2; 16], v(7).keyring, T0).is_err());
        assert!(reg.commit("p", [1; 16], [8; 16], v(1).keyring, T0).is_err());
        assert_eq!(reg.owner("p", T0).unwrap(), (Tier::Server, [1; 16]));
        let later = PREPARE_TIMEOUT + Duration::from_secs(1);
        assert!(reg
            .commit("p", [1; 16], [2; 16], v(1).keyring, later)
            .is_err());
        assert_eq!(reg.owner("p", later).unwrap(), (Tier::Server, [1; 16]));
        // And a new handoff may be prepared.
        reg.prepare("p", [1; 16], Tier::Client, v(1), [3; 16], later)
            .unwrap();
    }

    /// A lost phone: the server reclaims the parcel at its last committed version; the phone's
    /// nonce no longer checks in, prepares or commits.
    #[test]
    fn a_lost_device_is_reclaimed_and_its_nonce_goes_stale() {
        let mut reg = Registry::default();
        reg.create("p", v(1), [1; 16]);
        reg.prepare("p", [1; 16], Tier::Phone, v(2), [2; 16], T0)
            .unwrap();
        reg.commit("p", [1; 16], [2; 16], v(2).keyring, T0).unwrap();
        assert_eq!(reg.reclaim("p", [5; 16], T0), Ok(v(1)));
        assert_eq!(reg.owner("p", T0).unwrap(), (Tier::Server, [5; 16]));
        let stale = Err(OwnershipError::StaleNonce("p".into()));
        assert_eq!(
            reg.check_in("p", [2; 16], T0),
            stale.clone().map(|()| Tier::Phone)
        );
        assert_eq!(
            reg.prepare("p", [2; 16], Tier::Client, v(3), [6; 16], T0),
            stale
        );
        assert!(reg.abort("p", [2; 16], T0).is_err());
        assert!(reg.owner("q", T0).is_err());
        assert_eq!(
            reg.prepare("p", [5; 16], Tier::Server, v(1), [6; 16], T0),
            Err(OwnershipError::SameTier("p".into()))
        );
    }
}
