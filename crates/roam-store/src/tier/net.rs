//! The tiers' links over roam-net: the options of a link ([`link_options`]), the limits a tier
//! holds its peers to ([`MAX_LINKS`], [`LINK_IDLE`], [`MAX_MESSAGE`]), and one whole message
//! received ([`recv_message`]). Both ends use it: the client ([`super::client`]) and the
//! server loop ([`super::server`]).

use std::collections::HashMap;
use std::time::Duration;

use roam_net::proto::session::NetworkChoice;
use roam_net::proto::Label;
use roam_net::runtime::blocking::MultiSocket;
use roam_net::runtime::{Options, Tls};

use super::wire::{MAX_HEADER, MAX_PAYLOAD};
use crate::error::{StoreError, WireError};

/// Most links a tier serves at once; more are closed as they come.
pub const MAX_LINKS: usize = 32;
/// A link with no request for this long is closed.
pub const LINK_IDLE: Duration = Duration::from_secs(120);
/// Largest message (header length, header, payload).
pub const MAX_MESSAGE: usize = 4 + MAX_HEADER + MAX_PAYLOAD;

/// roam-net options of a tier link: IROBs no larger than a message; background traffic
/// (self-cleaning and hoarding) on WiFi whenever the phone has it, cellular otherwise (the
/// seed: WiFi preferred, about 5x less energy than 3G).
pub fn link_options(tls: Option<Tls>) -> Options {
    let mut o = Options {
        tls,
        ..Options::default()
    };
    o.config.max_irob_size = MAX_MESSAGE as u64;
    for label in [Label::BackgroundSmall, Label::BackgroundLarge] {
        o.config.policy_mut(label).networks = NetworkChoice::PreferNonCellular;
    }
    o
}

/// The next whole IROB from `ms` (the link to `peer`), at most [`MAX_MESSAGE`] bytes: its bytes
/// and label; `None` at the end of the stream or after `idle` without one.
pub fn recv_message(
    ms: &MultiSocket,
    idle: Duration,
    peer: &str,
) -> Result<Option<(Vec<u8>, Label)>, StoreError> {
    let mut parts: HashMap<u64, Vec<u8>> = HashMap::new();
    loop {
        let d = ms.recv_timeout(idle).map_err(|error| StoreError::Link {
            tier: peer.to_string(),
            error: Box::new(error),
        })?;
        let Some(d) = d else {
            return Ok(None);
        };
        let buf = parts.entry(d.irob).or_default();
        if buf.len() + d.data.len() > MAX_MESSAGE {
            return Err(StoreError::Malformed {
                tier: peer.to_string(),
                error: WireError::MessageTooLarge { max: MAX_MESSAGE },
            });
        }
        buf.extend_from_slice(&d.data);
        if d.end {
            let msg = parts.remove(&d.irob).unwrap_or_default();
            return Ok(Some((msg, d.label)));
        }
    }
}
