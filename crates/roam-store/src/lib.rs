//! The content-addressed chunk store of Horatio (the Horatio paper; ../shared/spec/horatio.md): a
//! parcel's disk and memory images as 128 KB chunks, each compressed (LZ4), sealed under a key
//! of its own (AES-256-GCM, convergent keys) and named by the BLAKE3 hash of the sealed blob
//! ([`chunk`]); per image a [`Keyring`] of every chunk's name, key and length, sealed under the
//! parcel key ([`keyring`]); stores that keep blobs by name and are never trusted: every blob
//! read is checked against its name and its tag, and a bad copy is refused and fetched from
//! the next store ([`store`]); images in and out, only dirty chunks sealed again ([`image`]).
//!
//! Anyone may cache or relay blobs (the phone, the server, a borrowed PC); only the holder of
//! the keyring and the parcel key can read them. Backends: a local directory ([`DirStore`])
//! and any S3-compatible object store ([`S3Store`]). Who owns a parcel, and how the
//! ownership nonce moves by two-phase commit: [`ownership`] (the server's record). The three
//! tiers and their links: [`tier`] (the phone's and the server's service, the client's link to
//! them); the client's operations (init, resume, suspend, self-cleaning, status): [`parcel`];
//! the parcel's QEMU guest: [`vm`].
//!
//! Errors are values ([`error`]): every fallible public function returns a [`StoreError`]
//! (the guest's a [`VmError`], which converts into one), one variant per reason, each naming
//! what and where.
//!
//! Dependencies point one way, from the leaves up: [`id`] and [`ownership`] (sans-IO) use
//! nothing of the crate; [`error`] uses only them; [`files`], [`chunk`], [`keyring`],
//! [`store`], [`image`] and [`s3`] use those; [`vm`] uses [`chunk`] and [`error`]; [`tier`]
//! uses the stores; [`parcel`] uses [`tier`].

pub mod chunk;
pub mod error;
pub mod files;
pub mod id;
pub mod image;
pub mod keyring;
pub mod ownership;
pub mod parcel;
pub mod s3;
pub mod store;
pub mod tier;
pub mod vm;

pub use chunk::{open, seal, ChunkId, ChunkKey, Sealed, CHUNK_SIZE};
pub use error::{StoreError, VmError, WireError};
pub use image::{ingest, restore, Ingested};
pub use keyring::{Entry, Keyring, ParcelKey};
pub use s3::{S3Config, S3Store};
pub use store::{fetch, ChunkStore, DirStore};

#[cfg(test)]
mod tests;
