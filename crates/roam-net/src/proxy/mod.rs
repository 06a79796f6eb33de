//! Unmodified programs over Intentional Networking, as the paper's mail proxy ran an unmodified
//! mail client (and as `mptcpize run` does for MPTCP).
//!
//! On the device, a [`Proxy`] accepts programs' TCP connections: as a SOCKS5 server
//! ([`Intercept::Socks5`], `CONNECT` only) or as the target the firewall redirects them to
//! ([`Intercept::Transparent`], the destination read back with `SO_ORIGINAL_DST`). It carries
//! each over a multi-socket of its own to a [`Relay`] at the server side, which opens the TCP
//! connection the program asked for and copies bytes both ways. Each connection's bytes travel
//! as IROBs that each depend on all earlier ones (the byte stream's order), with the label its
//! destination port is given ([`LabelRules`]): an unmodified program gets the multi-socket's use
//! of every network, failover and the label's placement, not the deferral that needs the
//! program's cooperation (thunks).
//!
//! A proxy may have a relay per network ([`ProxyConfig::per_network`], `per_network`): each new
//! connection goes to the relay of the network roam-net would use now (WiFi while it is up,
//! else cellular), as the thesis's multi-homed phone passes a different upstream node on each;
//! a connection under way stays with its relay, carried over whichever networks remain.
//!
//! # Safe to expose
//! A relay's port is reachable by whoever can reach the server, so:
//! - **Only proxies that know its [`Key`]** are served: each request proves the key
//!   (HMAC-SHA256 over the relay's fresh challenge, see `auth`), and the relay proves it back.
//!   A relay without a key refuses to start unless told `insecure_no_auth`. Keys live in files
//!   only their owner may read ([`Key::from_file`], [`read_private`], as OpenSSH's private
//!   keys). With TLS in the multi-sockets' options (`Options::tls`: `roam net relay
//!   --tls-cert/--tls-key`, `roam net proxy --tls-ca`) the whole exchange is private and the
//!   relay's certificate is checked; without it an on-path attacker can still read and tamper
//!   with a connection after its request.
//! - **Only where its [`Allow`] list permits** (an open relay would connect wherever any peer
//!   asked); loopback, link-local, unspecified and multicast addresses only where a rule names
//!   them ([`Special`]; `0.0.0.0/0` names none), IPv4-mapped IPv6 addresses checked and
//!   connected to as IPv4, host names resolved at the relay and every address checked.
//! - **Everything bounded**: the limits below.
//!
//! # Limits
//! | limit | default | what it bounds | set with |
//! |---|---|---|---|
//! | [`HANDSHAKE_TIMEOUT`] | 10 s | a program's whole SOCKS5 negotiation at the proxy (a deadline, not per read) | `ProxyConfig::handshake_timeout`, `--handshake-timeout` |
//! | [`REQUEST_TIMEOUT`] | 10 s | relay: from a multi-socket's arrival to its answer (challenge, whole request, resolving, connecting to the target); proxy: from the multi-socket to the relay being open to the answer | `request_timeout`, `--request-timeout` |
//! | [`IDLE_TIMEOUT`] | 10 min | a carried connection with no byte moving either way (or a program or target not reading) is closed, at both ends | `idle_timeout`, `--idle-timeout` |
//! | [`DEFAULT_MAX_CONNECTIONS`] | 256 | connections a proxy or relay carries at once (a relay's count includes requests not yet proved) | `max_connections`, `--max-connections` |
//! | [`DEFAULT_MAX_PER_SOURCE`] | 128 | connections a proxy carries at once from one source address (an IPv4 address, an IPv6 /64); half the total, so no one source takes every slot; programs on the device itself all come from 127.0.0.1 | `ProxyConfig::max_per_source`, `--max-per-source` |
//! | [`MAX_REQUEST`] | 512 bytes | the relay's challenge, a request, an answer | fixed |
//! | the multi-socket's own | see `Options` | connecting to the relay (10 s), a connection's first frame (5 s), sessions (1024) and pending handshakes (64) at the relay's listener | `RelayConfig::options`, `ProxyConfig::options` |
//!
//! # The relay request
//! The relay's first IROB is its challenge, `roam-relay 2 challenge NONCE` (32 random bytes in
//! hex). The proxy's first IROB is one line, `roam-relay 2 HOST:PORT LABEL NONCE PROOF`: a
//! nonce of its own and the HMAC of both nonces, the target and the label under the key (`-`
//! without a key). The relay answers with one IROB, `ok PROOF` (the HMAC of both nonces and
//! the target under the key, in another role; `ok` without a key) or `error REASON`. Each is at
//! most [`MAX_REQUEST`] bytes. Closing is carried through: the program's end of stream closes
//! the proxy's sending side (the relay then shuts down its write side to the target), and the
//! target's end of stream reaches the program the same way.
//!
//! # Use
//! ```no_run
//! use roam_net::proxy::{Allow, Key, LabelRules, Proxy, ProxyConfig, Relay, RelayConfig};
//! use roam_net::Label;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Both ends: the same key, in a file only its owner reads (`roam net key --out relay.key`).
//! let key = Key::from_file("relay.key".as_ref())?;
//! // At the server side: relay to 10.0.0.0/8 only.
//! let relay = Relay::bind(RelayConfig::new(
//!     "0.0.0.0:7500".parse()?,
//!     vec!["10.0.0.0/8".parse::<Allow>()?],
//!     key.clone(),
//! ))?;
//! std::thread::spawn(move || relay.run(|event| eprintln!("relay: {event}")));
//!
//! // On the device: a SOCKS5 proxy; IMAPS in the background, everything else foreground.
//! let mut rules = LabelRules::new(Label::ForegroundSmall);
//! rules.set(993, Label::BackgroundLarge);
//! let mut config =
//!     ProxyConfig::new("127.0.0.1:1080".parse()?, "192.0.2.1:7500".parse()?, Some(key));
//! config.rules = rules;
//! Proxy::bind(config)?.run(|event| eprintln!("proxy: {event}"))?;
//! # Ok(())
//! # }
//! ```
//!
//! The parts: [`rules`](LabelRules) (which label a destination port gets), [`allow`](Allow)
//! (where a relay may connect), `auth` ([`Key`]: who may use a relay), `target` (a request's
//! target resolved and checked), `socks5` (the SOCKS5 server's handshake), `transparent`
//! (connections redirected by the firewall), `carry` (bytes between a TCP connection and a
//! multi-socket; bounded connection counts, deadlines), `device` ([`Proxy`]), `per_network`
//! ([`NetworkRelay`]: which relay a new connection goes to), `relay` ([`Relay`]).

mod allow;
mod auth;
mod carry;
pub mod compress;
mod dedup;
mod device;
mod error;
pub mod features;
pub mod per_network;
mod relay;
mod rules;
mod socks5;
mod target;
mod transparent;

#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::time::Duration;

pub use allow::{canonical, check, special, Allow, AllowError, Special};
pub use auth::{read_private, Key, KeyError};
pub use device::{Compression, Intercept, Proxy, ProxyConfig};
pub use error::Error;
pub use per_network::{NetworkMatch, NetworkMatchError, NetworkRelay, NetworksNow};
pub use relay::{Relay, RelayConfig};
pub use roam_dedup::source::FlowStats as DedupStats;
pub use rules::{LabelRules, RulesError};

// The parsers of what a peer sends, for the fuzz targets in fuzz/ (not an API to build on).
#[doc(hidden)]
pub use relay::Request as RelayRequest;
#[doc(hidden)]
pub use socks5::accept as socks5_accept;
#[doc(hidden)]
pub use target::split as split_target;

/// Longest relay challenge, request line or answer, in bytes.
pub const MAX_REQUEST: usize = 512;
/// How often a relay or proxy told to stop ([`Relay::run_until`], [`Proxy::run_until`])
/// looks whether it should.
pub const STOP_POLL: Duration = Duration::from_millis(200);
/// How long a program may take for its whole SOCKS5 negotiation with the proxy (a deadline:
/// a program sending a byte at a time gets no longer).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Relay: from a multi-socket's arrival to its answer (the whole request, resolving and
/// connecting to the target). Proxy: from the multi-socket to the relay being open to the
/// relay's answer. A deadline, not per read.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// A carried connection with no byte moving either way for this long is closed (at the proxy
/// and at the relay).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(600);
/// Most connections a proxy or relay carries at once unless configured otherwise.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// Most connections a proxy carries at once from one source address (IPv4) or /64 (IPv6)
/// unless configured otherwise.
pub const DEFAULT_MAX_PER_SOURCE: usize = 128;

/// What a running [`Proxy`] or [`Relay`] reports about one connection; it goes on serving.
#[derive(Debug)]
pub enum Event {
    /// A connection turned away because `max` connections were being carried already.
    Refused {
        /// The program's address (a proxy's), when known.
        from: Option<SocketAddr>,
        /// The limit reached (`max_connections`).
        max: usize,
    },
    /// A program's connection turned away because `max` from its source address were being
    /// carried already.
    RefusedSource {
        /// The program's address.
        from: SocketAddr,
        /// The limit reached (`max_per_source`).
        max: usize,
    },
    /// A relayed connection deduplicated (asymmetric caching) ended: what its source did.
    Deduplicated {
        /// The flow's bytes in, on the wire, found in each cache, of feedback, passed through.
        stats: DedupStats,
    },
    /// A connection that ended in an error: its handshake, the relay's refusal, the target's.
    Failed {
        /// The program's address (a proxy's), when known.
        from: Option<SocketAddr>,
        /// What went wrong.
        error: Error,
    },
}

impl std::fmt::Display for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let from = |f: &mut std::fmt::Formatter<'_>, a: &Option<SocketAddr>| match a {
            Some(a) => write!(f, "{a}"),
            None => f.write_str("an unknown address"),
        };
        match self {
            Event::Refused { from: a, max } => {
                f.write_str("refusing ")?;
                from(f, a)?;
                write!(f, ": {max} connections carried")
            }
            Event::RefusedSource { from, max } => {
                write!(
                    f,
                    "refusing {from}: {max} connections from its address carried"
                )
            }
            Event::Deduplicated { stats: s } => write!(
                f,
                "dedup: {} bytes in, {} on the wire; found {} in the regular cache, {} by \
                 feedback ({} bytes up); {} passed through",
                s.bytes_in,
                s.bytes_out,
                s.regular_hit_bytes,
                s.feedback_hit_bytes,
                s.upstream_bytes,
                s.passthrough_bytes
            ),
            Event::Failed { from: None, error } => write!(f, "{error}"),
            Event::Failed { from: a, error } => {
                f.write_str("connection from ")?;
                from(f, a)?;
                write!(f, ": {error}")
            }
        }
    }
}
