//! The tiers' links over roam-net: the options of a link ([`link_options`]), the limits a tier
//! holds its peers to ([`Limits`]), and one whole message sent ([`send_message`]) or received
//! ([`recv_message`]) within its deadline. Both ends use it: the client ([`super::client`]) and
//! the server loop ([`super::server`]).
//!
//! # Limits against hostile peers
//!
//! A tier may be exposed to anyone who can reach its port. What a peer can make it hold, and
//! for how long, is bounded at every stage (docs/horatio.md, "Limits against hostile peers"):
//!
//! | limit | default | bounds | why |
//! | --- | --- | --- | --- |
//! | roam-net `max_pending_handshakes`, `handshake_timeout` | 64, 5 s | TCP connections in their TLS handshake and first frame | roam-net's own listener limits, unchanged |
//! | [`Limits::max_pending`] | [`MAX_PENDING`] (16) | links accepted and not yet authenticated | a pool of their own: a silent peer never takes an authenticated link's slot; when it is full the oldest is closed, so silent peers cannot keep a newcomer out |
//! | [`Limits::max_pending_per_source`] | [`MAX_PENDING_PER_SOURCE`] (4) | links not yet authenticated from one source address (an IPv6 /64 counting as one) | a flood from one host only closes its own oldest links; when the whole pool is full, the source holding most of it loses its oldest |
//! | [`Limits::auth_deadline`] | [`AUTH_DEADLINE`] (10 s) | from a link's acceptance to its access secret checked: the whole authentication, however the bytes trickle | a silent or slow peer gives its pending slot back |
//! | [`MAX_AUTH_MESSAGE`] | 1 KiB | what a tier takes from a peer before it is authenticated | an `Auth` is about 100 bytes; a peer sending more is cut off |
//! | [`Limits::max_links`] | [`MAX_LINKS`] (32) | authenticated links served at once (a thread each) | a link authenticated over it is told so and closed |
//! | [`Limits::idle`] | [`LINK_IDLE`] (120 s) | from a reply to the first byte of the next request | an idle link gives its slot back (the client opens a new one when it needs it) |
//! | [`Limits::message_deadline`] | [`MESSAGE_DEADLINE`] (120 s) | from a message's first byte to its last (a reply: handed to roam-net whole) | a peer trickling a byte at a time cannot hold a link: at 120 s the largest message (48 MiB) needs 3.4 Mbit/s |
//! | [`MAX_MESSAGE`] | 49 MiB | one message (header and payload, [`super::wire`]) | what one request or reply may make a tier hold |
//! | [`LINK_WINDOW`], [`LINK_RECEIVE_LIMIT`] | 4 MiB, 10 MiB | what roam-net holds for one link's peer, read or not, authenticated or not | messages travel as IROBs of at most [`FRAGMENT`] bytes, so the transport's limits can be small |
//! | [`LINK_SEND_BUFFER`] | 8 MiB | replies queued for a peer that does not read them | the send waits, within the message deadline |
//!
//! Before authentication a link costs at most [`MAX_AUTH_MESSAGE`] in the tier and
//! [`LINK_RECEIVE_LIMIT`] + [`LINK_WINDOW`] in roam-net, for at most [`AUTH_DEADLINE`]; at most
//! [`MAX_PENDING`] links are in that state. After it, a link costs at most one message being
//! received ([`MAX_MESSAGE`]), the reply being sent, and the same transport bounds.
//!
//! A source address is the one the link's first connection came from
//! (`MultiSocket::peer_addr`); roam-net's listener also bounds the connections one source
//! holds (`max_connections_per_source`, 64) and its handshakes (`max_pending_per_source`, 8).
//! Authenticated links are not limited per source: they need the user's secret.

use std::time::{Duration, Instant};

use roam_net::proto::session::NetworkChoice;
use roam_net::proto::Label;
use roam_net::runtime::blocking::MultiSocket;
use roam_net::runtime::{Options, Tls};

use super::wire::{FRAGMENT, LAST, MAX_HEADER, MAX_PAYLOAD, MORE};
use crate::error::{StoreError, WireError};

/// Most authenticated links a tier serves at once (default of [`Limits::max_links`]).
pub const MAX_LINKS: usize = 32;
/// Most links accepted and not yet authenticated at once (default of [`Limits::max_pending`]).
pub const MAX_PENDING: usize = 16;
/// Most links not yet authenticated from one source address (default of
/// [`Limits::max_pending_per_source`]).
pub const MAX_PENDING_PER_SOURCE: usize = 4;
/// A link must have presented the access secret this long after it was accepted (default of
/// [`Limits::auth_deadline`]).
pub const AUTH_DEADLINE: Duration = Duration::from_secs(10);
/// A link with no request for this long is closed (default of [`Limits::idle`]).
pub const LINK_IDLE: Duration = Duration::from_secs(120);
/// A message must arrive whole this long after its first byte (default of
/// [`Limits::message_deadline`]).
pub const MESSAGE_DEADLINE: Duration = Duration::from_secs(120);
/// Largest message (header length, header, payload).
pub const MAX_MESSAGE: usize = 4 + MAX_HEADER + MAX_PAYLOAD;
/// Largest message a tier takes before the peer is authenticated (an `Auth` is about 100
/// bytes).
pub const MAX_AUTH_MESSAGE: usize = 1024;
/// roam-net's window on a tier link: unacknowledged bytes in flight each way. The client keeps
/// [`super::PIPELINE`] chunk requests (1 MiB) ahead of their replies; this leaves room for
/// four times that.
pub const LINK_WINDOW: u64 = 4 << 20;
/// Most IROBs roam-net holds unfinished for a tier link's peer (a client has at most
/// [`super::PIPELINE`] requests in flight, a message a few fragments within the window).
pub const LINK_PENDING_IROBS: usize = 256;
/// Most bytes (payload and bookkeeping) roam-net holds unacknowledged for a tier link's peer:
/// twice what an honest peer can send unacknowledged (the window, and one fragment beyond it).
pub const LINK_RECEIVE_LIMIT: u64 =
    2 * (LINK_WINDOW + FRAGMENT as u64 + 1) + LINK_PENDING_IROBS as u64 * 256;
/// Most bytes a tier link queues for sending (a reply waits for room, within its deadline).
pub const LINK_SEND_BUFFER: u64 = 8 << 20;

/// What a tier holds its peers to (see the module's table).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Authenticated links served at once.
    pub max_links: usize,
    /// Links accepted and not yet authenticated at once (a pool apart from `max_links`).
    pub max_pending: usize,
    /// Of those, from one source address (an IPv6 /64 counting as one).
    pub max_pending_per_source: usize,
    /// From a link's acceptance to its access secret checked.
    pub auth_deadline: Duration,
    /// From a reply to the first byte of the next request.
    pub idle: Duration,
    /// From a message's first byte to its last.
    pub message_deadline: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_links: MAX_LINKS,
            max_pending: MAX_PENDING,
            max_pending_per_source: MAX_PENDING_PER_SOURCE,
            auth_deadline: AUTH_DEADLINE,
            idle: LINK_IDLE,
            message_deadline: MESSAGE_DEADLINE,
        }
    }
}

/// roam-net options of a tier link: IROBs of at most a fragment, the transport's buffers
/// small ([`LINK_WINDOW`], [`LINK_RECEIVE_LIMIT`], [`LINK_SEND_BUFFER`]); background traffic
/// (self-cleaning and hoarding) on WiFi whenever the phone has it, cellular otherwise (the
/// seed: WiFi preferred, about 5x less energy than 3G).
pub fn link_options(tls: Option<Tls>) -> Options {
    let mut o = Options {
        tls,
        ..Options::default()
    };
    let c = &mut o.config;
    c.max_irob_size = FRAGMENT as u64 + 1;
    c.window = LINK_WINDOW;
    c.max_pending_irobs = LINK_PENDING_IROBS;
    c.receive_limit = LINK_RECEIVE_LIMIT;
    c.max_send_buffer = LINK_SEND_BUFFER;
    for label in [Label::BackgroundSmall, Label::BackgroundLarge] {
        c.policy_mut(label).networks = NetworkChoice::PreferNonCellular;
    }
    o
}

/// When a message must arrive.
#[derive(Clone, Copy, Debug)]
pub struct Deadlines {
    /// Its first byte, from the call (the idle timeout between messages).
    pub first: Duration,
    /// All of it, from its first byte.
    pub whole: Duration,
    /// Never later than this instant (the authentication's deadline, which is this long),
    /// if set.
    pub by: Option<(Instant, Duration)>,
    /// Its largest size.
    pub max: usize,
}

impl Deadlines {
    /// A request or a reply after authentication, under `limits`.
    pub fn message(limits: &Limits) -> Deadlines {
        Deadlines {
            first: limits.idle,
            whole: limits.message_deadline,
            by: None,
            max: MAX_MESSAGE,
        }
    }
}

fn link_error(peer: &str) -> impl FnOnce(roam_net::runtime::Error) -> StoreError + '_ {
    move |error| StoreError::Link {
        tier: peer.to_string(),
        error: Box::new(error),
    }
}

/// The next whole message from `ms` (the link to `peer`): its bytes and the label it came
/// with; `None` at the end of the stream or when no byte of it came within `d.first` (before
/// `d.by`). A message is one or more IROBs, each a fragment of at most [`FRAGMENT`] bytes
/// after a byte that says whether more follow ([`MORE`], [`LAST`]). One that is not whole
/// within `d.whole` of its first byte, or by `d.by`, is [`StoreError::Deadline`]; one over
/// `d.max` bytes is refused as it arrives ([`WireError::MessageTooLarge`]).
pub fn recv_message(
    ms: &MultiSocket,
    d: Deadlines,
    peer: &str,
) -> Result<Option<(Vec<u8>, Label)>, StoreError> {
    let called = Instant::now();
    let cap = |t: Instant| d.by.map_or(t, |(by, _)| by.min(t));
    let mut until = cap(called + d.first);
    let mut msg: Vec<u8> = Vec::new();
    // The message's label, and the IROB being read with whether it is the last fragment.
    let mut started: Option<Label> = None;
    let mut current: Option<(u64, Option<bool>)> = None;
    loop {
        let now = Instant::now();
        if now >= until {
            return match (started, d.by) {
                (_, Some((by, limit))) if now >= by => Err(late(peer, "the authentication", limit)),
                (None, _) => Ok(None),
                (Some(_), _) => Err(late(peer, "a message", d.whole)),
            };
        }
        let Some(part) = ms.recv_timeout(until - now).map_err(link_error(peer))? else {
            if ms.peer_closed() {
                return Ok(None);
            }
            continue; // the deadline is checked at the top
        };
        if started.is_none() {
            started = Some(part.label);
            until = cap(Instant::now() + d.whole);
        }
        let mut data: &[u8] = &part.data;
        let last = match current {
            Some((irob, last)) if irob == part.irob => last,
            Some(_) => return Err(malformed(peer, WireError::Fragment("an IROB interleaved"))),
            None => None,
        };
        let last = match last {
            Some(l) => l,
            None if data.is_empty() => {
                if part.end {
                    return Err(malformed(peer, WireError::Fragment("an empty IROB")));
                }
                current = Some((part.irob, None));
                continue;
            }
            None => {
                let l = match data[0] {
                    MORE => false,
                    LAST => true,
                    _ => return Err(malformed(peer, WireError::Fragment("a bad fragment flag"))),
                };
                data = &data[1..];
                l
            }
        };
        if msg.len() + data.len() > d.max {
            return Err(malformed(peer, WireError::MessageTooLarge { max: d.max }));
        }
        msg.extend_from_slice(data);
        current = if part.end {
            None
        } else {
            Some((part.irob, Some(last)))
        };
        if part.end && last {
            return Ok(Some((msg, started.unwrap_or(part.label))));
        }
    }
}

fn late(peer: &str, what: &'static str, limit: Duration) -> StoreError {
    StoreError::Deadline {
        tier: peer.to_string(),
        what,
        limit,
    }
}

fn malformed(peer: &str, error: WireError) -> StoreError {
    StoreError::Malformed {
        tier: peer.to_string(),
        error,
    }
}

/// Send `msg` to `peer` over `ms` with `label`: as IROBs of at most [`FRAGMENT`] bytes each
/// (see [`recv_message`]), every one handed to roam-net by `until`
/// ([`StoreError::Deadline`] otherwise: a peer that does not read its replies cannot hold the
/// sender).
pub fn send_message(
    ms: &MultiSocket,
    label: Label,
    msg: &[u8],
    until: Instant,
    peer: &str,
) -> Result<(), StoreError> {
    let rt = roam_net::runtime::blocking::runtime();
    let mut parts = msg.chunks(FRAGMENT).peekable();
    if msg.is_empty() {
        return Err(malformed(peer, WireError::Short { len: 0 }));
    }
    while let Some(part) = parts.next() {
        let mut irob = Vec::with_capacity(part.len() + 1);
        irob.push(if parts.peek().is_some() { MORE } else { LAST });
        irob.extend_from_slice(part);
        let left = until.saturating_duration_since(Instant::now());
        let sent = rt.block_on(async {
            tokio::time::timeout(left, ms.as_async().send(label, irob, None)).await
        });
        match sent {
            Ok(r) => r.map(|_| ()).map_err(link_error(peer))?,
            Err(_) => return Err(late(peer, "a message sent", left)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The transport's bounds on a link are small and consistent (roam-net refuses options
    /// whose figures contradict each other), and the largest message goes in fragments.
    #[test]
    fn a_link_holds_little_in_roam_net() {
        let o = link_options(None);
        o.config.validate().unwrap();
        assert!(o.config.receive_limit + o.config.window <= 16 << 20);
        assert!(o.config.max_irob_size as usize > FRAGMENT);
        const { assert!(MAX_MESSAGE.div_ceil(FRAGMENT) <= 64) };
        const { assert!(MAX_AUTH_MESSAGE < FRAGMENT) };
    }
}
