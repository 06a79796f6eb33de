//! The chunk requests: `Has`, `Put` and `Get`. A chunk is kept only when its hash is its name
//! and it is no larger than a sealed chunk can be ([`MAX_BLOB`]); anyone who presented the
//! access secret may put and get chunks, since they are sealed.

use super::{ok, reply, Answer, TierService, MAX_BLOB};
use crate::error::StoreError;
use crate::id::ChunkId;
use crate::tier::wire::{chunk_id, Reply, MAX_HAS};

impl TierService {
    /// `Has`: which of `ids` this tier holds.
    pub(super) fn has(&self, ids: &[String]) -> Answer {
        if ids.len() > MAX_HAS {
            return Err(StoreError::BadRequest(format!(
                "`Has` of {} names (at most {MAX_HAS})",
                ids.len()
            )));
        }
        let mut have = Vec::with_capacity(ids.len());
        for s in ids {
            let id = chunk_id(s, "chunk name")?;
            have.push(self.blobs().has(&id)?);
        }
        reply(Reply::Have(have))
    }

    /// `Put`: keep `blob` as chunk `id`, if its hash is `id`.
    pub(super) fn put(&self, id: &str, blob: &[u8]) -> Answer {
        let id = chunk_id(id, "chunk name")?;
        if blob.len() > MAX_BLOB {
            return Err(StoreError::Tampered {
                id,
                why: format!("{} bytes (at most {MAX_BLOB})", blob.len()),
            });
        }
        let actual = ChunkId::of(blob);
        if actual != id {
            return Err(StoreError::Tampered {
                id,
                why: format!("its hash is {actual}"),
            });
        }
        self.blobs().put(&id, blob)?;
        ok()
    }

    /// `Get`: the blob of chunk `id`, or [`Reply::NotFound`].
    pub(super) fn get(&self, id: &str) -> Answer {
        let id = chunk_id(id, "chunk name")?;
        match self.blobs().get(&id)? {
            Some(blob) => Ok((Reply::Payload, blob)),
            None => reply(Reply::NotFound),
        }
    }
}
