//! The control-state requests: `PutControl`, `SwapControl`, `Holds`, `GetControl`,
//! `DropControl` and `Validate`. Control state moves only with ownership. The server keeps it
//! only for a parcel being created or a handoff to the server that is prepared at that
//! version (`PutControl`; the ownership record's nonces are the compare-and-swap), and answers
//! it only under the current nonce (or to the user, without one: a checkout). The phone,
//! which keeps no record, changes its control state only by compare-and-swap: `SwapControl`
//! and `DropControl` name the nonce of the state they replace or drop (`None`: none held), and
//! naming another is refused as stale ([`StoreError::StaleControl`]) with nothing changed, so a
//! replayed or forged update cannot overwrite or drop what the phone holds. A new handoff to
//! the phone (a swap) ends a lease still out.

use std::time::Duration;

use super::{ok, parcel_ok, reply, Answer, TierService};
use crate::error::StoreError;
use crate::files::remove_if_present;
use crate::ownership::Tier;
use crate::tier::control::Held;
use crate::tier::wire::{decode_payload, hex, unhex, Reply};

impl TierService {
    /// `PutControl`: keep `payload` as the control state of `parcel` (the server).
    pub(super) fn put_control(&self, parcel: &str, payload: &[u8], now: Duration) -> Answer {
        parcel_ok(parcel)?;
        if self.role == Tier::Phone {
            return Err(StoreError::WrongTier(
                "the phone takes control state only by compare-and-swap (`SwapControl`, naming the state it replaces)".into(),
            ));
        }
        let held = checked_control_state(parcel, payload)?;
        let _g = self.control_lock();
        let mut reg = self.registry()?;
        if !reg.knows(parcel) {
            // A parcel being created: its first version, owned by the server.
            self.write_held("control", parcel, &held)?;
            return ok();
        }
        match reg.pending(parcel, now) {
            Some((Tier::Server, v))
                if v.keyring == held.control.hash() && v.number == held.control.version =>
            {
                self.write_held("incoming", parcel, &held)?;
                ok()
            }
            _ => Err(StoreError::parcel(
                parcel,
                "no handoff to the server of this version is prepared",
            )),
        }
    }

    /// `SwapControl`: the phone keeps `payload` as the control state of `parcel` in place of
    /// the one held under nonce `replaces` (none: `None`), and ends a lease still out.
    pub(super) fn swap_control(
        &self,
        parcel: &str,
        replaces: Option<&str>,
        payload: &[u8],
    ) -> Answer {
        parcel_ok(parcel)?;
        self.phone_only("`SwapControl`")?;
        let held = checked_control_state(parcel, payload)?;
        let _g = self.control_lock();
        let current = self.read_held("control", parcel)?;
        self.compare(parcel, current.as_ref(), replaces)?;
        if current.is_some_and(|c| c.nonce == held.nonce) {
            // The state it names, under the same nonce again: a replay of the swap itself.
            return Err(stale(parcel, Some(&held.nonce), Some(held.control.version)));
        }
        self.write_held("control", parcel, &held)?;
        self.end_lease(parcel)?;
        ok()
    }

    /// An error unless the phone holds `current` under nonce `named` (`None`: holds none).
    fn compare(
        &self,
        parcel: &str,
        current: Option<&Held>,
        named: Option<&str>,
    ) -> Result<(), StoreError> {
        if current.map(|c| c.nonce.as_str()) == named {
            Ok(())
        } else {
            Err(stale(parcel, named, current.map(|c| c.control.version)))
        }
    }

    /// `Holds`: the version and nonce of the control state of `parcel` held here, if any.
    pub(super) fn holds(&self, parcel: &str) -> Answer {
        parcel_ok(parcel)?;
        let held = {
            let _g = self.control_lock();
            self.read_held("control", parcel)?
        };
        reply(Reply::Holds {
            version: held.as_ref().map(|h| h.control.version),
            nonce: held.map(|h| h.nonce),
        })
    }

    /// `GetControl`: the control state of `parcel`, for whoever names the nonce it is held
    /// under (the user may name none).
    pub(super) fn get_control(&self, parcel: &str, nonce: Option<&str>, now: Duration) -> Answer {
        parcel_ok(parcel)?;
        let _g = self.control_lock();
        if self.role == Tier::Phone {
            self.not_lent(parcel)?;
            let held = self
                .read_held("control", parcel)?
                .ok_or_else(|| StoreError::parcel(parcel, "the phone holds no control state"))?;
            // The user (who presented the access secret) may ask without a nonce (a resume); a
            // tier naming one must name the right one.
            if nonce.is_some_and(|n| n != held.nonce) {
                return Err(StoreError::parcel(
                    parcel,
                    "not the nonce the phone holds it under",
                ));
            }
            return Ok((Reply::Payload, held.to_bytes()));
        }
        let mut reg = self.registry()?;
        let (owner, current) = reg.owner(parcel, now)?;
        if owner != Tier::Server {
            return Err(StoreError::parcel(
                parcel,
                format!("owned by the {owner:?} tier, not the server"),
            ));
        }
        if let Some(n) = nonce {
            if unhex::<16>(n, "nonce")? != current {
                return Err(StoreError::parcel(parcel, "stale ownership nonce"));
            }
        }
        let mut held = self
            .read_held("control", parcel)?
            .ok_or_else(|| StoreError::parcel(parcel, "the server lost its control state"))?;
        held.nonce = hex(&current);
        Ok((Reply::Payload, held.to_bytes()))
    }

    /// `DropControl`: a source deletes its control state held under `nonce` after its handoff
    /// committed (the server keeps its own).
    pub(super) fn drop_control(&self, parcel: &str, nonce: &str) -> Answer {
        parcel_ok(parcel)?;
        if self.role == Tier::Server {
            return Err(StoreError::WrongTier(
                "the server keeps its control state (a reclaim returns to it)".into(),
            ));
        }
        unhex::<16>(nonce, "nonce")?;
        let _g = self.control_lock();
        self.not_lent(parcel)?;
        let current = self.read_held("control", parcel)?;
        self.compare(parcel, current.as_ref(), Some(nonce))?;
        remove_if_present(&self.control_path("control", parcel))?;
        ok()
    }

    /// `Validate`: how many chunks the control state of `parcel` here names, and those this
    /// tier does not hold valid (the server: the state of a handoff to it, if one is in).
    pub(super) fn validate(&self, parcel: &str) -> Answer {
        parcel_ok(parcel)?;
        let held = {
            let _g = self.control_lock();
            match self.read_held("incoming", parcel)? {
                Some(h) if self.role == Tier::Server => Some(h),
                _ => self.read_held("control", parcel)?,
            }
        }
        .ok_or_else(|| StoreError::parcel(parcel, "no control state here"))?;
        let (total, missing) = self.missing(&held)?;
        reply(Reply::Missing {
            total,
            count: missing.len() as u64,
            missing: missing.iter().take(100).map(|i| i.hex()).collect(),
        })
    }
}

/// The control state in `payload`, which a request (`how`: "put", "returned") says is of
/// `parcel`: it must parse and be of that parcel.
pub(super) fn control_state_for(
    parcel: &str,
    payload: &[u8],
    how: &str,
) -> Result<Held, StoreError> {
    let held: Held = decode_payload(payload, "control state")?;
    if held.control.parcel != parcel {
        return Err(StoreError::BadRequest(format!(
            "control state of parcel `{}` {how} as `{parcel}`",
            held.control.parcel
        )));
    }
    Ok(held)
}

/// The control state of `parcel` in `payload`, put or swapped: it parses, names a nonce and
/// opens.
fn checked_control_state(parcel: &str, payload: &[u8]) -> Result<Held, StoreError> {
    let held = control_state_for(parcel, payload, "put")?;
    unhex::<16>(&held.nonce, "nonce")?;
    check_opens(&held)?;
    Ok(held)
}

/// A stale control update of `parcel`: it named the state under nonce `named`, the phone
/// holds version `held`.
fn stale(parcel: &str, named: Option<&str>, held: Option<u64>) -> StoreError {
    StoreError::StaleControl {
        parcel: parcel.to_string(),
        named: named.map(|n| n.chars().take(8).collect()),
        held,
    }
}

/// An error unless control state `held` opens: its key opens every keyring.
pub(super) fn check_opens(held: &Held) -> Result<(), StoreError> {
    held.control
        .keyrings()
        .map(|_| ())
        .map_err(|e| e.within("control state"))
}
