//! The proxy's and relay's typed error ([`Error`]).

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use thiserror::Error as ThisError;

use super::allow::Special;
use crate::runtime;

/// Why a [`Proxy`](super::Proxy) or [`Relay`](super::Relay) could not start, or one connection
/// it carried failed. Each message names what was being done and, where there is one, the
/// system's or the multi-socket's own error.
#[derive(Debug, ThisError)]
pub enum Error {
    /// The proxy could not listen for programs' TCP connections on this address.
    #[error("listening on {addr}: {cause}")]
    Listen {
        /// The address asked for.
        addr: SocketAddr,
        /// The system's error.
        cause: io::Error,
    },
    /// The relay could not listen for proxies' multi-sockets on this address.
    #[error("listening on {addr}: {cause}")]
    ListenMulti {
        /// The address asked for.
        addr: SocketAddr,
        /// The multi-socket listener's error.
        cause: runtime::Error,
    },
    /// A relay configured without a key and without
    /// [`insecure_no_auth`](super::RelayConfig::insecure_no_auth): it would serve whoever
    /// reaches its port.
    #[error(
        "the relay needs a key (--key-file) so that it serves only proxies that know it; \
         --insecure-no-auth serves whoever reaches its port"
    )]
    NoKey,
    /// A deadline passed: the program's SOCKS5 negotiation, the relay request, the answer.
    #[error("{what} took longer than {after:?}")]
    Timeout {
        /// What was being waited for.
        what: &'static str,
        /// The deadline, from the start.
        after: Duration,
    },
    /// Asymmetric caching could not go on with a connection (a malformed record or message,
    /// a request for a record never kept): it is closed, no wrong byte delivered.
    #[error("dedup: {what}")]
    Dedup {
        /// What failed, and where.
        what: String,
    },
    /// A compressed connection's stream failed (a corrupt zstd stream, a delivery expanding
    /// past its bound, a dictionary never offered): it is closed, no wrong byte delivered.
    #[error("compression: {what}")]
    Compress {
        /// What failed, and where.
        what: String,
    },
    /// A relayed connection moved no byte either way for this long, and was closed.
    #[error("idle for {after:?}: closed")]
    Idle {
        /// The idle timeout.
        after: Duration,
    },
    /// The proxy did not prove the relay's key (it has none, another one, or the request was
    /// changed on its way).
    #[error("the proxy did not prove the relay's key (--key-file)")]
    Unauthenticated,
    /// The relay's `ok` does not prove the proxy's key: not the relay the key is shared with.
    #[error("the relay at {relay} did not prove the key (--key-file): not trusted")]
    RelayUnauthenticated {
        /// The relay's address.
        relay: SocketAddr,
    },
    /// The relay's first IROB is not its challenge (an older relay, or not a relay).
    #[error("the relay at {relay} sent no challenge (`{line}`): an older relay, or not one")]
    NoChallenge {
        /// The relay's address.
        relay: SocketAddr,
        /// What came instead.
        line: String,
    },
    /// The program's destination is not something a request can carry (white space, control
    /// characters).
    #[error("destination `{host}` is not a host name or address")]
    BadDestination {
        /// The destination as the program gave it.
        host: String,
    },

    /// Reading or writing a TCP connection failed (the program's, during its handshake, or a
    /// copy of its handle).
    #[error("{0}")]
    Io(#[from] io::Error),
    /// A multi-socket call failed (sending, receiving, accepting).
    #[error(transparent)]
    Net(#[from] runtime::Error),

    /// The program does not speak SOCKS5: its first byte is another version.
    #[error("not SOCKS5 (version byte {version})")]
    NotSocks5 {
        /// The version byte it sent.
        version: u8,
    },
    /// The program offers only SOCKS5 methods with authentication, which the proxy has none of.
    #[error("the client offers no method without authentication")]
    NoMethodWithoutAuth,
    /// The program asked for a SOCKS command other than `CONNECT` (`BIND`, `UDP ASSOCIATE`).
    #[error("SOCKS command {command} (only CONNECT is supported)")]
    UnsupportedCommand {
        /// The command byte.
        command: u8,
    },
    /// The program gave its destination in an address type SOCKS5 does not define.
    #[error("SOCKS address type {kind} (IPv4, IPv6 and domain names are supported)")]
    UnsupportedAddressType {
        /// The address type byte.
        kind: u8,
    },
    /// The program's destination domain name is not UTF-8.
    #[error("domain name is not text")]
    NameNotText,

    /// A connection taken as redirected by the firewall has no original destination (it was
    /// not redirected, or not by netfilter).
    #[error("SO_ORIGINAL_DST (was the connection redirected by the firewall?): {cause}")]
    OriginalDestination {
        /// The system's error.
        cause: io::Error,
    },

    /// The proxy could not open a multi-socket to the relay.
    #[error("connecting to the relay at {relay}: {cause}")]
    ConnectRelay {
        /// The relay's address.
        relay: SocketAddr,
        /// The multi-socket's error.
        cause: runtime::Error,
    },
    /// The relay answered the request with an error (not allowed there, the target refused...).
    #[error("the relay refused {target}: {answer}")]
    RelayRefused {
        /// `HOST:PORT` as asked for.
        target: String,
        /// The relay's answer.
        answer: String,
    },

    /// The multi-socket ended before its request (or answer) arrived whole.
    #[error("closed before its request")]
    ClosedEarly,
    /// The request (or answer) is longer than [`MAX_REQUEST`](super::MAX_REQUEST).
    #[error("request longer than {max} bytes")]
    RequestTooLong {
        /// The limit.
        max: usize,
    },
    /// The request (or answer) is not UTF-8.
    #[error("request is not text")]
    RequestNotText,
    /// The first IROB is not a relay request (`roam-relay 2 HOST:PORT LABEL NONCE PROOF`).
    #[error("not a relay request: `{line}`")]
    NotARequest {
        /// What came instead.
        line: String,
    },
    /// The request's label is not one of the four.
    #[error("`{word}` is not a label")]
    NotALabel {
        /// The word where the label belongs.
        word: String,
    },
    /// The request's target has no `:PORT`.
    #[error("target `{target}` has no port")]
    NoPort {
        /// The target as written.
        target: String,
    },
    /// The request's target port is not a number from 0 to 65535.
    #[error("target `{target}`: bad port")]
    BadPort {
        /// The target as written.
        target: String,
    },
    /// The request's target host name could not be resolved at the relay.
    #[error("resolving {host}: {cause}")]
    Resolve {
        /// The name.
        host: String,
        /// The resolver's error.
        cause: io::Error,
    },
    /// None of the target host name's addresses is in the relay's allow list.
    #[error("{host} has no address that --allow permits (it has {})", list(.refused))]
    NoAllowedAddress {
        /// The name.
        host: String,
        /// Its addresses, each refused.
        refused: Vec<SocketAddr>,
    },
    /// The target address is not in the relay's allow list.
    #[error("{to} is not allowed (--allow{})", special.map_or(String::new(), |s| format!(
        "; {s} addresses only where a rule names them, as --allow {}", to.ip())))]
    NotAllowed {
        /// The target (an IPv4-mapped address as its IPv4 address).
        to: SocketAddr,
        /// The kind of special address it is, if it is one.
        special: Option<Special>,
    },
    /// The relay could not open the TCP connection to the target (to any of its permitted
    /// addresses; the last one's error).
    #[error("connecting to {to}: {cause}")]
    ConnectTarget {
        /// The target.
        to: SocketAddr,
        /// The system's error.
        cause: io::Error,
    },
}

fn list(addrs: &[SocketAddr]) -> String {
    let v: Vec<String> = addrs.iter().map(|a| a.ip().to_string()).collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}
