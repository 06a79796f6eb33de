//! A parcel's ownership moved by two-phase commit at the server ([`hand_off`]; the record's
//! side is [`crate::ownership::Registry`]): prepare (the server issues the next nonce), deliver
//! the control state to the destination under that nonce and have it validated there, commit.
//! The client runs it for its suspends and resumes, the phone for self-cleaning.

use super::client::TierClient;
use super::control::Held;
use super::wire::{hex, Request};
use crate::error::StoreError;
use crate::ownership::Tier;

/// Hand the parcel whose control state is `held` (held under its current nonce) to tier `to`
/// by two-phase commit at `server`: prepare (the server issues the next nonce), `deliver` the
/// control state to the destination under that nonce and have it validated there, commit.
/// When delivery fails the handoff is aborted and the source keeps the parcel
/// ([`StoreError::HandoffAborted`]). Returns the new nonce. The caller then deletes the
/// source's control state.
pub fn hand_off(
    server: &TierClient,
    held: &Held,
    to: Tier,
    deliver: impl FnOnce(&str) -> Result<(), StoreError>,
) -> Result<String, StoreError> {
    let c = &held.control;
    let hash = hex(&c.hash());
    let next = server.prepared(&Request::Prepare {
        parcel: c.parcel.clone(),
        nonce: held.nonce.clone(),
        to,
        version: c.version,
        hash: hash.clone(),
    })?;
    if let Err(e) = deliver(&next) {
        let _ = server.call(
            &Request::Abort {
                parcel: c.parcel.clone(),
                nonce: held.nonce.clone(),
            },
            b"",
        );
        return Err(StoreError::HandoffAborted {
            parcel: c.parcel.clone(),
            to,
            error: Box::new(e),
        });
    }
    server.expect_ok(
        &Request::Commit {
            parcel: c.parcel.clone(),
            nonce: held.nonce.clone(),
            next: next.clone(),
            hash,
        },
        b"",
    )?;
    Ok(next)
}
