//! Horatio's three tiers (the Horatio paper; ../shared/spec/horatio.md "Ownership and trust"): the
//! client (the borrowed PC, where `roam parcel` runs), the phone and the server, each a process
//! that can run in its own network namespace. The phone and the server run a [`TierService`]
//! behind [`serve()`]; the client reaches them with a [`TierClient`], which is also a
//! [`ChunkStore`](crate::ChunkStore), so `fetch`, `ingest` and `restore` work across the links.
//!
//! - **What moves.** Data state (sealed chunks) may be cached or relayed by anyone: a tier
//!   keeps a chunk only when its hash is its name. Control state ([`Control`]: the version,
//!   the parcel key, the sealed keyrings) moves only with ownership, under the nonce the
//!   server's [`Registry`](crate::ownership::Registry) issued.
//! - **Handoff** ([`hand_off`]): the source makes sure the destination holds every
//!   chunk the version names, prepares the handoff at the server (which issues the next
//!   nonce), gives the destination the control state with that nonce, has it validate every
//!   chunk (`Validate`), commits at the server, and then deletes its own control state. A
//!   handoff to the server is refused at commit unless the server validated the version
//!   itself: trust flows upstream only with validated state.
//! - **Links** are roam-net multi-sockets, with TLS under a certificate the tier made and the
//!   client pins (the CLI's default), and the user's access secret as the first message: a
//!   link that does not present it gets nothing. Self-cleaning goes over the phone's link to
//!   the server with the background label, so it never holds up the user's own traffic.
//! - **Hostile peers** ([`Limits`]; the table of every limit, its default and why is in
//!   [`net`]): links not yet authenticated wait in a pool of their own ([`MAX_PENDING`],
//!   [`MAX_PENDING_PER_SOURCE`] from one source address) and
//!   must present the access secret within [`AUTH_DEADLINE`] in at most a kilobyte, so a silent
//!   peer never takes one of the [`MAX_LINKS`] authenticated slots; a message must arrive whole
//!   within [`MESSAGE_DEADLINE`] of its first byte and a link idle for [`LINK_IDLE`] is closed;
//!   roam-net holds little for any peer (messages go as fragments of a mebibyte). One request
//!   in flight per link, headers and payloads bounded ([`wire`]); a chunk is kept only after
//!   its hash is checked; the server keeps control state only for a parcel it is creating or a
//!   handoff to it that is prepared, and the phone changes its own only by compare-and-swap
//!   on the nonce it holds it under (`SwapControl`, `DropControl`).
//! - **Secrets on disk**: every file holding a secret (control states, the ownership record,
//!   leases and nonces, the access secret, the tier's TLS key) is written with mode 0600 from
//!   its creation and refused when others may read it ([`crate::files`]).
//!
//! Modules: the messages ([`wire`]); the link's options and limits ([`net`]); the client's end
//! ([`client`]); control state ([`control`]); the two-phase handoff ([`handoff`]); the tier's
//! answers ([`service`], one file per family of requests) and the server loop that serves them
//! on a listener ([`server`]). Dependencies point one way: `server` uses `service`, which uses
//! `client` and `handoff` (the phone is the server's client when it self-cleans), which use
//! `net`, `control` and `wire`.

pub mod client;
pub mod control;
pub mod handoff;
pub mod net;
pub mod server;
pub mod service;
pub mod wire;

pub use client::{TierClient, PIPELINE};
pub use control::{Control, Held};
pub use handoff::hand_off;
pub use net::{
    link_options, Limits, AUTH_DEADLINE, LINK_IDLE, MAX_LINKS, MAX_PENDING, MAX_PENDING_PER_SOURCE,
    MESSAGE_DEADLINE,
};
pub use server::{serve, serve_idle, serve_with, LinkCounts, ServeHandle};
pub use service::TierService;

#[cfg(test)]
mod tests;
