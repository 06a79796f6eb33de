//! A relay per network (issue 46): the Sanadhya thesis's multi-homed phone (ch. IV; digest
//! `shared/spec/sanadhya.md` §2), whose WiFi and cellular networks pass different upstream
//! nodes, each with a small dd-src of its own, while the phone's large dd-dst cache is shared.
//!
//! **Which relay.** [`ProxyConfig::per_network`](super::ProxyConfig::per_network) names a
//! [`NetworkRelay`] for some networks. For each new carried connection the proxy takes the
//! network roam-net would use now for a new connection, the phone's default route: a network
//! that is not cellular whenever one is up, else a cellular one (the rule of
//! [`NetworkChoice::PreferNonCellular`](crate::proto::session::NetworkChoice)). Up means what
//! [`ProxyConfig::networks_now`](super::ProxyConfig::networks_now) says when given, else the
//! multi-sockets' own networks: an explicit list as it is, or the scout's interfaces that have
//! a carrier ([`scout::scan_running`]), their kinds as
//! [`Options::kinds`] names them. The first `NetworkRelay` that serves one of the preferred
//! networks gets the connection; when none does, the default
//! [`ProxyConfig::relay`](super::ProxyConfig::relay).
//!
//! **Open connections stay where they are.** The multi-socket to the chosen relay uses every
//! network, as any other: a connection begun while on WiFi, through the WiFi network's relay,
//! that loses WiFi goes on over cellular to the same relay, and the program never sees the
//! disconnection (roam's promise). Only new connections go to the other network's relay. The
//! thesis's case is "the IP changes, a new upstream node": there the phone's connections through
//! the old node end with its address. Ours keep theirs; the price is a connection carried
//! through a relay that is no longer on its network's path (a longer path, for the rest of that
//! connection; its dd-src still serves it).
//!
//! **The shared cache.** One [`Destination`](roam_dedup::Destination) serves every connection,
//! whichever relay carries it, and remembers per relay (its address) what that relay's source
//! has seen. Its feedback tells whichever relay is upstream now what the phone holds: content
//! first fetched through the WiFi relay is found at the cellular relay's feedback cache, which
//! never saw it.

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;

use super::Key;
use crate::runtime::{scout, LocalNetwork, Networks, Options, Tls};

/// Which local networks a [`NetworkRelay`] serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetworkMatch {
    /// Every network that is not cellular (WiFi, Ethernet): the phone's default route when
    /// it has one. Written `wifi`.
    NonCellular,
    /// Every cellular network ([`NetKind::cellular`](crate::proto::session::NetKind)).
    /// Written `cellular`.
    Cellular,
    /// The network of one interface, whatever its kind. Written `if:NAME` (`if:wlan0`).
    Interface(String),
}

impl NetworkMatch {
    /// Whether it serves local network `n`.
    pub fn matches(&self, n: &LocalNetwork) -> bool {
        match self {
            NetworkMatch::NonCellular => !n.kind.cellular,
            NetworkMatch::Cellular => n.kind.cellular,
            NetworkMatch::Interface(name) => n.name == *name,
        }
    }
}

impl fmt::Display for NetworkMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetworkMatch::NonCellular => f.write_str("wifi"),
            NetworkMatch::Cellular => f.write_str("cellular"),
            NetworkMatch::Interface(name) => write!(f, "if:{name}"),
        }
    }
}

/// A word that names no network: not `wifi`, `cellular` nor `if:NAME` with an interface name
/// (1 to 15 bytes, no `/`, white space nor control characters, as Linux allows).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` names no network (wifi: every network not cellular; cellular; if:NAME: one \
     interface)"
)]
pub struct NetworkMatchError(pub String);

impl FromStr for NetworkMatch {
    type Err = NetworkMatchError;

    fn from_str(s: &str) -> Result<NetworkMatch, NetworkMatchError> {
        match s {
            "wifi" => Ok(NetworkMatch::NonCellular),
            "cellular" => Ok(NetworkMatch::Cellular),
            _ => match s.strip_prefix("if:") {
                Some(name)
                    if (1..=15).contains(&name.len())
                        && !name
                            .chars()
                            .any(|c| c == '/' || c.is_whitespace() || c.is_control()) =>
                {
                    Ok(NetworkMatch::Interface(name.to_string()))
                }
                _ => Err(NetworkMatchError(s.to_string())),
            },
        }
    }
}

/// The relay of the networks it [`serves`](NetworkRelay::serves): new connections go to it
/// while one of them is the network roam-net would use (see the module).
#[derive(Debug, Clone)]
pub struct NetworkRelay {
    /// Which networks.
    pub serves: NetworkMatch,
    /// The relay's address.
    pub relay: SocketAddr,
    /// Its key, proved to it for every connection (`None`: a relay that serves anyone).
    pub key: Option<Key>,
    /// TLS to it (`None`: as the proxy's [`Options::tls`]; a client's TLS names the server
    /// whose certificate it checks, so a relay at another name needs its own).
    pub tls: Option<Tls>,
}

impl NetworkRelay {
    /// The relay at `relay` with `key` for the networks `serves` names, TLS as the proxy's.
    pub fn new(serves: NetworkMatch, relay: SocketAddr, key: Option<Key>) -> NetworkRelay {
        NetworkRelay {
            serves,
            relay,
            key,
            tls: None,
        }
    }
}

/// Which local networks are up, asked each time the proxy picks a relay for a new connection
/// ([`ProxyConfig::networks_now`](super::ProxyConfig::networks_now)): for a device whose
/// connectivity manager knows better than its interfaces (an association in progress, a
/// captive portal), and for tests.
#[derive(Clone)]
pub struct NetworksNow(Arc<dyn Fn() -> Vec<LocalNetwork> + Send + Sync>);

impl NetworksNow {
    /// Ask `f`.
    pub fn new(f: impl Fn() -> Vec<LocalNetwork> + Send + Sync + 'static) -> NetworksNow {
        NetworksNow(Arc::new(f))
    }

    /// What it says now.
    pub fn get(&self) -> Vec<LocalNetwork> {
        (self.0)()
    }
}

impl fmt::Debug for NetworksNow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NetworksNow(..)")
    }
}

/// The local networks up now (see the module): `hook`'s when given, else `options`' (an
/// explicit list, or the scout's interfaces with a carrier), with the kinds
/// [`Options::kinds`] names.
pub(super) fn networks_now(hook: Option<&NetworksNow>, options: &Options) -> Vec<LocalNetwork> {
    let mut nets = match (hook, &options.networks) {
        (Some(h), _) => h.get(),
        (None, Networks::Explicit(v)) => v.clone(),
        (None, Networks::Auto) => scout::scan_running().unwrap_or_default(),
    };
    for n in &mut nets {
        if let Some((_, kind)) = options.kinds.iter().find(|(name, _)| *name == n.name) {
            n.kind = *kind;
        }
    }
    nets
}

/// The relay of the network roam-net would use now for a new connection, among `relays`, with
/// `up` the networks up (see the module); `None`: the default relay.
pub(super) fn choose<'a>(
    relays: &'a [NetworkRelay],
    up: &[LocalNetwork],
) -> Option<&'a NetworkRelay> {
    let non_cellular = up.iter().any(|n| !n.kind.cellular);
    let preferred: Vec<&LocalNetwork> = up
        .iter()
        .filter(|n| n.kind.cellular != non_cellular)
        .collect();
    relays
        .iter()
        .find(|r| preferred.iter().any(|n| r.serves.matches(n)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::NetKind;

    fn net(name: &str, cellular: bool) -> LocalNetwork {
        LocalNetwork {
            name: name.into(),
            addr: std::net::Ipv4Addr::LOCALHOST.into(),
            kind: NetKind {
                cellular,
                ..NetKind::default()
            },
        }
    }

    fn relay(serves: &str, port: u16) -> NetworkRelay {
        NetworkRelay::new(
            serves.parse().unwrap(),
            SocketAddr::from(([192, 0, 2, 1], port)),
            None,
        )
    }

    fn port(r: Option<&NetworkRelay>) -> Option<u16> {
        r.map(|r| r.relay.port())
    }

    #[test]
    fn wifi_is_preferred_while_up_then_cellular() {
        let relays = [relay("cellular", 2), relay("wifi", 1)];
        let (wifi, cell) = (net("wlan0", false), net("rmnet0", true));
        assert_eq!(
            port(choose(&relays, &[cell.clone(), wifi.clone()])),
            Some(1)
        );
        assert_eq!(port(choose(&relays, &[cell])), Some(2));
        assert_eq!(port(choose(&relays, &[wifi])), Some(1));
        assert_eq!(port(choose(&relays, &[])), None);
    }

    #[test]
    fn an_unserved_preferred_network_takes_the_default_relay() {
        // Only cellular has a relay of its own: on WiFi, the default one.
        let relays = [relay("cellular", 2)];
        let (wifi, cell) = (net("wlan0", false), net("rmnet0", true));
        assert_eq!(port(choose(&relays, &[wifi.clone(), cell.clone()])), None);
        assert_eq!(port(choose(&relays, &[cell])), Some(2));
        assert_eq!(port(choose(&[], &[wifi])), None);
    }

    #[test]
    fn interfaces_are_matched_by_name_in_the_order_given() {
        let relays = [relay("if:wlan0", 3), relay("wifi", 1)];
        let up = [net("eth0", false), net("wlan0", false), net("wwan0", true)];
        assert_eq!(port(choose(&relays, &up)), Some(3));
        assert_eq!(port(choose(&relays, &up[..1])), Some(1));
        // A cellular interface named: only while no other network is up.
        let relays = [relay("if:wwan0", 4)];
        assert_eq!(port(choose(&relays, &up)), None);
        assert_eq!(port(choose(&relays, &up[2..])), Some(4));
    }

    #[test]
    fn kinds_named_in_the_options_count() {
        let options = Options {
            networks: Networks::Explicit(vec![net("wifi", false), net("cell", false)]),
            kinds: vec![(
                "cell".into(),
                NetKind {
                    cellular: true,
                    ..NetKind::default()
                },
            )],
            ..Options::default()
        };
        let up = networks_now(None, &options);
        assert_eq!(up, vec![net("wifi", false), net("cell", true)]);
        let hook = NetworksNow::new(|| vec![net("cell", false)]);
        assert_eq!(networks_now(Some(&hook), &options), vec![net("cell", true)]);
    }

    #[test]
    fn network_words_parse_and_print_back() {
        for w in ["wifi", "cellular", "if:wlan0", "if:rmnet_data0"] {
            assert_eq!(w.parse::<NetworkMatch>().unwrap().to_string(), w);
        }
        for w in [
            "",
            "WiFi",
            "cell",
            "if:",
            "if:a/b",
            "if:a b",
            "if:sixteen-bytes-xy",
            "eth0",
        ] {
            let e = w.parse::<NetworkMatch>().unwrap_err().to_string();
            assert!(e.contains(&format!("`{w}`")), "{e}");
        }
    }
}
