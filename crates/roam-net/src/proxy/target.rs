//! A request's target at the relay: a host name resolved there (by the request's deadline),
//! *every* address it has checked against the allow list (each taken as the address it is
//! connected to: an IPv4-mapped one as IPv4), and a TCP connection to the first permitted one
//! that answers. An address literal is checked the same way; nothing unchecked is connected to,
//! and nothing is resolved twice (a name cannot change between its check and its use).

use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::allow::{self, special, Allow};
use super::Error;

/// `HOST:PORT` split (an IPv6 host may be in brackets).
pub fn split(target: &str) -> Result<(&str, u16), Error> {
    let (host, port) = target.rsplit_once(':').ok_or_else(|| Error::NoPort {
        target: target.into(),
    })?;
    let port = port.parse::<u16>().map_err(|_| Error::BadPort {
        target: target.into(),
    })?;
    Ok((host, port))
}

/// The addresses of `host` (a name or an address literal) that `allow` permits, in the
/// resolver's order, by `deadline` (`after` names it in the error).
pub(super) fn resolve(
    host: &str,
    port: u16,
    allow: &[Allow],
    deadline: Instant,
    after: Duration,
) -> Result<Vec<SocketAddr>, Error> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        let to = SocketAddr::new(ip, port);
        return match allow::check(allow, to) {
            Some(to) => Ok(vec![to]),
            None => Err(Error::NotAllowed {
                to: SocketAddr::new(allow::canonical(ip), port),
                special: special(ip),
            }),
        };
    }
    // The system's resolver cannot be interrupted: it answers on a thread of its own, and the
    // request gives up waiting at its deadline.
    let (tx, rx) = mpsc::channel();
    let name = host.to_string();
    std::thread::spawn(move || {
        let _ = tx.send((name.as_str(), port).to_socket_addrs());
    });
    let left = deadline.saturating_duration_since(Instant::now());
    let all: Vec<SocketAddr> = match rx.recv_timeout(left) {
        Ok(r) => r
            .map_err(|cause| Error::Resolve {
                host: host.into(),
                cause,
            })?
            .collect(),
        Err(_) => {
            return Err(Error::Timeout {
                what: "resolving the target",
                after,
            })
        }
    };
    let mut permitted = Vec::new();
    let mut refused = Vec::new();
    for a in all {
        match allow::check(allow, a) {
            Some(to) if !permitted.contains(&to) => permitted.push(to),
            Some(_) => {}
            None => refused.push(a),
        }
    }
    if permitted.is_empty() {
        return Err(Error::NoAllowedAddress {
            host: host.into(),
            refused,
        });
    }
    Ok(permitted)
}

/// A TCP connection to the first of `addrs` that answers by `deadline`.
pub(super) fn connect(
    addrs: &[SocketAddr],
    deadline: Instant,
    after: Duration,
) -> Result<TcpStream, Error> {
    let mut last = None;
    for &to in addrs {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match TcpStream::connect_timeout(&to, left) {
            Ok(t) => return Ok(t),
            Err(cause) => last = Some(Error::ConnectTarget { to, cause }),
        }
    }
    Err(last.unwrap_or(Error::Timeout {
        what: "connecting to the target",
        after,
    }))
}
