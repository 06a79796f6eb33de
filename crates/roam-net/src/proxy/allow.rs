//! Where a relay may connect ([`Allow`]): a relay that connected wherever any peer asked would
//! be an open proxy into the server's network, so it takes a list of networks and ports.
//!
//! Some addresses are refused unless a rule names them ([`Special`]): loopback (the relay
//! host's own services, which listen there because nobody else should reach them), link-local
//! (cloud metadata services at 169.254.169.254), unspecified (`0.0.0.0` and `::` reach the host
//! itself) and multicast or broadcast. A rule *names* such an address when its network lies
//! inside the special range (`127.0.0.1`, `127.0.0.0/8:8080`, `fe80::/10`); a wider rule such
//! as `0.0.0.0/0` or `::/0` does not. An IPv4-mapped IPv6 address (`::ffff:127.0.0.1`, which a
//! dual-stack socket connects to over IPv4) is checked, and connected to, as the IPv4 address it
//! is, in targets and in rules alike.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use thiserror::Error;

/// Where a relay may connect: a network (address and prefix length) and optionally one port.
///
/// Written `10.0.0.0/8`, `192.0.2.7:80`, `2001:db8::/32`, `[2001:db8::7]:443` or
/// `[2001:db8::]/32:443` (an IPv6 network with a port goes in brackets); an address without a
/// prefix length is that one host. An IPv4-mapped IPv6 network (`::ffff:10.0.0.0/104`) is taken
/// as the IPv4 network it maps. Special addresses ([`Special`]) only where a rule names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allow {
    net: IpAddr,
    prefix: u8,
    port: Option<u16>,
}

/// Why text is not an [`Allow`]. Each message starts with the text.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AllowError {
    /// The port is not a number from 0 to 65535.
    #[error("`{text}`: `{word}` is not a port")]
    NotAPort {
        /// The whole text.
        text: String,
        /// The port as written.
        word: String,
    },
    /// A bracketed IPv6 network has no closing bracket.
    #[error("`{text}`: `[` without `]`")]
    Unclosed {
        /// The whole text.
        text: String,
    },
    /// The network's address is not an IPv4 or IPv6 address.
    #[error("`{text}`: `{word}` is not an IP address")]
    NotAnAddress {
        /// The whole text.
        text: String,
        /// The address as written.
        word: String,
    },
    /// The prefix length is not a number up to the address's bits (32 or 128).
    #[error("`{text}`: `{word}` is not a prefix length (0-{bits})")]
    BadPrefix {
        /// The whole text.
        text: String,
        /// The prefix length as written.
        word: String,
        /// The address family's bits.
        bits: u8,
    },
}

impl std::str::FromStr for Allow {
    type Err = AllowError;
    fn from_str(s: &str) -> Result<Allow, AllowError> {
        let port = |p: &str| {
            p.parse::<u16>().map_err(|_| AllowError::NotAPort {
                text: s.into(),
                word: p.into(),
            })
        };
        // Split off the port: after a bracketed IPv6 network, or after IPv4's one colon.
        let (addr, port) = if let Some(rest) = s.strip_prefix('[') {
            let (inside, after) = rest
                .split_once(']')
                .ok_or_else(|| AllowError::Unclosed { text: s.into() })?;
            let (len, p) = match after.split_once(':') {
                Some((len, p)) => (len, Some(port(p)?)),
                None => (after, None),
            };
            (format!("{inside}{len}"), p)
        } else if s.matches(':').count() == 1 {
            let (a, p) = s.split_once(':').unwrap_or((s, ""));
            (a.to_string(), Some(port(p)?))
        } else {
            (s.to_string(), None)
        };
        let (net, len) = match addr.split_once('/') {
            Some((n, l)) => (n, Some(l)),
            None => (addr.as_str(), None),
        };
        let net = net
            .parse::<IpAddr>()
            .map_err(|_| AllowError::NotAnAddress {
                text: s.into(),
                word: net.into(),
            })?;
        let bits = if net.is_ipv4() { 32 } else { 128 };
        let prefix = match len {
            Some(l) => l.parse::<u8>().ok().filter(|&l| l <= bits).ok_or_else(|| {
                AllowError::BadPrefix {
                    text: s.into(),
                    word: l.into(),
                    bits,
                }
            })?,
            None => bits,
        };
        // An IPv4-mapped network is the IPv4 network it maps (targets are taken so too).
        let (net, prefix) = match net {
            IpAddr::V6(v6) if prefix >= 96 => match v6.to_ipv4_mapped() {
                Some(v4) => (IpAddr::V4(v4), prefix - 96),
                None => (net, prefix),
            },
            _ => (net, prefix),
        };
        Ok(Allow { net, prefix, port })
    }
}

/// The kinds of addresses refused unless a rule names them (see the module's documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Special {
    /// `127.0.0.0/8`, `::1`: the relay host's own services.
    Loopback,
    /// `169.254.0.0/16`, `fe80::/10`: the link's own (cloud metadata services, neighbours).
    LinkLocal,
    /// `0.0.0.0/8`, `::`: connecting there reaches the host itself.
    Unspecified,
    /// `224.0.0.0/4`, `ff00::/8`, and `255.255.255.255`.
    Multicast,
}

impl std::fmt::Display for Special {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Special::Loopback => "loopback",
            Special::LinkLocal => "link-local",
            Special::Unspecified => "unspecified",
            Special::Multicast => "multicast",
        })
    }
}

/// The special ranges: (kind, network, prefix length).
const SPECIAL: [(Special, IpAddr, u8); 9] = [
    (
        Special::Loopback,
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, 0)),
        8,
    ),
    (
        Special::LinkLocal,
        IpAddr::V4(Ipv4Addr::new(169, 254, 0, 0)),
        16,
    ),
    (
        Special::Unspecified,
        IpAddr::V4(Ipv4Addr::new(0, 0, 0, 0)),
        8,
    ),
    (
        Special::Multicast,
        IpAddr::V4(Ipv4Addr::new(224, 0, 0, 0)),
        4,
    ),
    (Special::Multicast, IpAddr::V4(Ipv4Addr::BROADCAST), 32),
    (Special::Loopback, IpAddr::V6(Ipv6Addr::LOCALHOST), 128),
    (
        Special::LinkLocal,
        IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0)),
        10,
    ),
    (Special::Unspecified, IpAddr::V6(Ipv6Addr::UNSPECIFIED), 128),
    (
        Special::Multicast,
        IpAddr::V6(Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0)),
        8,
    ),
];

/// Whether `a` lies within `net/prefix` (never across families).
fn within(net: IpAddr, prefix: u8, a: IpAddr) -> bool {
    match (net, a) {
        (IpAddr::V4(n), IpAddr::V4(a)) => {
            let mask = u32::MAX.checked_shl(32 - prefix as u32).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(a)) => {
            let mask = u128::MAX.checked_shl(128 - prefix as u32).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

/// `ip` as it is connected to: an IPv4-mapped IPv6 address as its IPv4 address.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Which special range `ip` (taken as [`canonical`]) is in, if any, with the range.
fn special_range(ip: IpAddr) -> Option<(Special, IpAddr, u8)> {
    let ip = canonical(ip);
    SPECIAL.into_iter().find(|&(_, n, p)| within(n, p, ip))
}

/// Which kind of special address `ip` is (taken as [`canonical`]), if any.
pub fn special(ip: IpAddr) -> Option<Special> {
    special_range(ip).map(|(k, _, _)| k)
}

impl Allow {
    /// Whether `to` (taken as [`canonical`]) is allowed: within the network, on the port if one
    /// is given, and, for a special address ([`Special`]), only if this rule names it (its
    /// network lies inside the special range).
    pub fn permits(&self, to: SocketAddr) -> bool {
        let ip = canonical(to.ip());
        if !within(self.net, self.prefix, ip) || self.port.is_some_and(|p| p != to.port()) {
            return false;
        }
        match special_range(ip) {
            None => true,
            Some((_, n, p)) => self.prefix >= p && within(n, p, self.net),
        }
    }
}

/// Where the relay connects for `to`, if `allow` permits it: `to` as [`canonical`] (an
/// IPv4-mapped address is connected to over IPv4, as it was checked).
pub fn check(allow: &[Allow], to: SocketAddr) -> Option<SocketAddr> {
    let to = SocketAddr::new(canonical(to.ip()), to.port());
    allow.iter().any(|a| a.permits(to)).then_some(to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks_ports_and_families() {
        let a = |s: &str| s.parse::<Allow>().unwrap();
        let to = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert!(a("0.0.0.0/0").permits(to("1.2.3.4:5")));
        assert!(a("192.168.0.0/16:80").permits(to("192.168.3.4:80")));
        assert!(!a("192.168.0.0/16:80").permits(to("192.168.3.4:22")));
        assert!(!a("10.77.0.1").permits(to("10.77.0.2:80")));
        assert!(a("[2001:db8::]/32:443").permits(to("[2001:db8::9]:443")));
        assert!(!a("::/0").permits(to("10.0.0.1:80")));
        assert!(matches!(
            "10.0.0.0/33".parse::<Allow>(),
            Err(AllowError::BadPrefix { bits: 32, .. })
        ));
        assert!(matches!(
            "2001:db8::/129".parse::<Allow>(),
            Err(AllowError::BadPrefix { bits: 128, .. })
        ));
        assert!(matches!(
            "[fd00::1:80".parse::<Allow>(),
            Err(AllowError::Unclosed { .. })
        ));
        assert!(matches!(
            "10.0.0.1:http".parse::<Allow>(),
            Err(AllowError::NotAPort { .. })
        ));
        assert!(matches!(
            "example.org".parse::<Allow>(),
            Err(AllowError::NotAnAddress { .. })
        ));
    }

    /// The attacker asks for the relay host's own services, its link's, or the host itself,
    /// under rules that name none of them: all refused. (Before: `0.0.0.0/0` permitted
    /// 127.0.0.1, and `::/0` permitted ::ffff:127.0.0.1.)
    #[test]
    fn special_addresses_need_a_rule_that_names_them() {
        let a = |s: &str| s.parse::<Allow>().unwrap();
        let to = |s: &str| s.parse::<SocketAddr>().unwrap();
        let wide = [a("0.0.0.0/0"), a("::/0"), a("0.0.0.0/1"), a("::/1")];
        for t in [
            "127.0.0.1:80",
            "127.1.2.3:22",
            "169.254.169.254:80",
            "0.0.0.0:80",
            "0.1.2.3:80",
            "224.0.0.1:80",
            "255.255.255.255:80",
            "[::1]:80",
            "[fe80::1]:80",
            "[::]:80",
            "[ff02::1]:80",
            "[::ffff:127.0.0.1]:80",
            "[::ffff:169.254.169.254]:80",
            "[::ffff:0.0.0.0]:80",
        ] {
            assert!(check(&wide, to(t)).is_none(), "{t} passed a wide rule");
            assert!(special(to(t).ip()).is_some(), "{t}");
        }
        // An IPv4-mapped address is its IPv4 address: no IPv6 rule permits it, an IPv4 one does.
        assert!(check(&[a("::/0")], to("[::ffff:10.0.0.1]:80")).is_none());
        assert_eq!(
            check(&[a("10.0.0.0/8")], to("[::ffff:10.1.2.3]:80")),
            Some(to("10.1.2.3:80"))
        );
        assert_eq!(a("::ffff:10.0.0.0/104"), a("10.0.0.0/8"));
        // Named explicitly: permitted.
        assert!(a("127.0.0.1").permits(to("127.0.0.1:80")));
        assert!(a("127.0.0.0/8:8080").permits(to("127.9.9.9:8080")));
        assert!(!a("127.0.0.0/8:8080").permits(to("127.9.9.9:22")));
        assert!(a("::1").permits(to("[::1]:80")));
        assert!(a("::ffff:127.0.0.1").permits(to("[::ffff:127.0.0.1]:80")));
        assert!(a("169.254.0.0/16").permits(to("169.254.169.254:80")));
        assert!(a("fe80::/10").permits(to("[fe80::1]:80")));
        // A rule naming one special range names no other, nor ordinary addresses beyond it.
        assert!(!a("127.0.0.0/7").permits(to("127.0.0.1:80")));
        assert!(a("127.0.0.0/7").permits(to("126.0.0.1:80")));
        // Ordinary addresses pass wide rules as before.
        assert!(check(&wide, to("192.0.2.7:80")).is_some());
        assert!(check(&wide, to("[2001:db8::1]:80")).is_some());
    }
}
