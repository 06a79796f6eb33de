//! Asymmetric caching: last-hop deduplication steered by the phone's feedback (the Sanadhya
//! thesis on ultra-mobile computing, chapter IV; digested in `../shared/spec/sanadhya.md` §2).
//!
//! A box upstream of a phone's last hop, **dd-src** ([`Source`]), replaces chunks of the
//! downstream byte stream that the phone already holds by their 8-byte names. Its memory is
//! small (about 1 MB of content): a *regular cache* of what it sent recently and a *feedback
//! cache* of what the phone told it the phone holds. The phone, **dd-dst**
//! ([`Destination`]), keeps a large cache (about 250 MB), rebuilds the stream, cuts it into
//! *flowlets* (stretches of statistically uniform bytes, approximating the objects a
//! connection carries), finds the past flowlet the arriving one matches best, and advertises
//! the names that flowlet held next, ahead of the stream (thesis §4.3-4.4, Algorithms 5-8).
//!
//! The crate is sans-IO, as quinn-proto is: [`Source::push`] and [`Destination::receive`] take
//! bytes and give bytes; the caller carries the downstream records and the upstream messages
//! ([`wire`]) on whatever transport it has (roam's relay and proxy carry them on roam-net).
//!
//! | module | what |
//! |---|---|
//! | [`chunk`] | content-defined chunking: FastCDC (the default) and the thesis's Rabin fingerprints |
//! | [`name`] | a chunk's 8-byte name (XXH3-64; the thesis's 4-byte hashes collided 0.02%) |
//! | [`lru`] | a map bounded in bytes, least recently used out first |
//! | [`wire`] | downstream records (the shim: 1 bit name-or-literal, 15 bits length) and upstream messages |
//! | [`source`] | dd-src |
//! | [`destination`] | dd-dst: the chunk store, flowlets, feedback selection |
//! | [`analyze`] | the thesis's trace analysis: past and present streams, the oracle, what each cache finds |
//!
//! **Never corrupt output.** Every record carries a checksum of the bytes it stands for. When
//! the phone cannot rebuild one (a name it no longer holds, or a checksum that fails: a
//! collision), it asks for the record again and names the chunks to forget; dd-src keeps the
//! original bytes of every record that refers to names until the phone acknowledges it
//! (bounded: past the bound it sends literals, which need no keeping), and sends it again as
//! literals. The phone delivers records in order, holding later ones meanwhile.

pub mod analyze;
pub mod chunk;
pub mod destination;
pub mod lru;
pub mod name;
pub mod source;
#[cfg(test)]
mod testdata;
pub mod wire;

pub use destination::Destination;
pub use name::Name;
pub use source::Source;
