//! The ends of asymmetric caching as the labs build them (`roam lab dedup`, and `roam lab
//! precog`'s `precog+dedup`): the upstream node (a relay whose dd-src has the thesis's ~1 MB)
//! that lets carried connections reach the lab's server and nothing else, and the phone's
//! cache (dd-dst, the thesis's ~250 MB). Written once, so both labs measure the same thing.

use std::net::{SocketAddr, SocketAddrV4};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Result};
use roam_dedup::destination::DestinationConfig;
use roam_dedup::source::SourceConfig;
use roam_dedup::{Destination, Source};
use roam_emu::SERVER_ADDR;
use roam_net::proxy::{Allow, Key, RelayConfig};

use crate::harness::trial::Trial;

/// dd-src's memory, every system that has one (the thesis's ~1 MB): asymmetric caching
/// splits it evenly between its regular and feedback caches; the regular-only baseline has
/// it all as its regular cache.
pub const SOURCE_BYTES: u64 = 1 << 20;

/// dd-dst's memory (the thesis's ~250 MB).
pub const DESTINATION_BYTES: u64 = 256 << 20;

/// A relay listening on `port` of the emulator's server host with a new key, carrying
/// connections only to the lab's server (`127.0.0.1:target_port` there: the web server, or
/// the dedup lab's IMAP server), with the trial's roam-net options; its address and key, for
/// the phone's proxy.
pub fn relay_to(t: &Trial, port: u16, target_port: u16) -> Result<(RelayConfig, SocketAddr, Key)> {
    let key = Key::generate();
    let at = SocketAddr::V4(SocketAddrV4::new(SERVER_ADDR, port));
    let allow = format!("127.0.0.1:{target_port}")
        .parse::<Allow>()
        .map_err(|e| anyhow!("{e}"))?;
    let mut relay = RelayConfig::new(at, vec![allow], key.clone());
    relay.options = crate::harness::channel::roam_options(t.system.clone(), &[]);
    Ok((relay, at, key))
}

/// A dd-src of [`SOURCE_BYTES`]: half regular and half feedback cache when the phone sends
/// feedback, else all regular.
pub fn source(feedback: bool) -> Result<Arc<Mutex<Source>>> {
    let (regular_bytes, feedback_bytes) = if feedback {
        (SOURCE_BYTES / 2, SOURCE_BYTES / 2)
    } else {
        (SOURCE_BYTES, 0)
    };
    let source = Source::new(SourceConfig {
        regular_bytes,
        feedback_bytes,
        ..Default::default()
    })
    .map_err(|e| anyhow!("dd-src: {e}"))?;
    Ok(Arc::new(Mutex::new(source)))
}

/// The phone's dd-dst of [`DESTINATION_BYTES`], choosing and sending feedback or not.
pub fn destination(feedback: bool) -> Arc<Mutex<Destination>> {
    Arc::new(Mutex::new(Destination::new(DestinationConfig {
        cache_bytes: DESTINATION_BYTES,
        feedback,
        ..Default::default()
    })))
}
