//! The options of a multi-socket ([`Options`]): its protocol [`Config`], which local networks a
//! client uses ([`Networks`]), timeouts, TLS, logging.

use super::*;

/// One local network a client multi-socket may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalNetwork {
    /// Interface name (for SO_BINDTODEVICE and display).
    pub name: String,
    /// Source address connections over it bind to.
    pub addr: IpAddr,
    /// What using it costs: metered data, a cellular radio's tails ([`NetKind`]).
    pub kind: NetKind,
}

/// Which local networks a client uses.
#[derive(Debug, Clone, Default)]
pub enum Networks {
    /// Every up, non-loopback IPv4 interface, followed as they come and go (rtnetlink scout).
    #[default]
    Auto,
    /// Exactly these.
    Explicit(Vec<LocalNetwork>),
}

/// Options of a multi-socket.
#[derive(Debug, Clone)]
pub struct Options {
    /// Protocol tunables and limits.
    pub config: Config,
    /// Local networks (client side).
    pub networks: Networks,
    /// How long `connect` waits for the first handshake.
    pub connect_timeout: Duration,
    /// Most accepted connections still in their handshake (listener side): accepted, and not
    /// yet past their first frame (and TLS handshake). Default 64.
    pub max_pending_handshakes: usize,
    /// Most of those from one source address: one host opening connections and sending
    /// nothing cannot take every place (`max_pending_handshakes`) and keep honest clients out.
    /// Default 8.
    pub max_pending_per_source: usize,
    /// Most connections a listener holds open from one source address, in their handshake or
    /// carrying a multi-socket: one host cannot hold the listener's multi-sockets
    /// (`max_sessions`) by itself. Clients behind one NAT share an address; raise it for
    /// them. Default 64.
    pub max_connections_per_source: usize,
    /// Most multi-sockets a listener holds at once. A `Hello` alone creates one, so past this
    /// further hellos are refused (multi-sockets that have ended make room; one the
    /// application dropped ends within `Config::release_timeout` of its last progress).
    /// Default 1024.
    pub max_sessions: usize,
    /// An accepted connection must have done its TLS handshake (when configured) and sent its
    /// first frame this long after it was accepted: one deadline, not a timeout per read, so a
    /// peer trickling bytes holds the place no longer than a silent one. (A join's exchange
    /// after that is bounded by `Config::handshake_timeout`.) Default 5 s.
    pub handshake_timeout: Duration,
    /// A connection whose sent data stays unacknowledged this long is declared broken
    /// (TCP_USER_TIMEOUT; idle connections are checked by keepalives at the same pace). An
    /// emulated or real outage does not reset a TCP connection, it stalls it: this is how long
    /// a stall lasts before failover. It must exceed the worst queueing delay of the links.
    pub user_timeout: Duration,
    /// TCP congestion control for every connection (e.g. `cubic`); `None` keeps the system
    /// default.
    pub congestion_control: Option<String>,
    /// TLS on every connection (`None`: plain TCP). A client needs [`Tls::Client`], a
    /// listener [`Tls::Server`]; both sides must agree.
    pub tls: Option<Tls>,
    /// Client: accept connections the server opens (joins only), on a listener at each local
    /// network's address announced to the server, so that either peer may open a connection
    /// (paper §4.2; the server's turn comes after `Config::peer_open_delay`). Never with TLS:
    /// the client has no certificate to present.
    pub accept_from_peer: bool,
    /// Kinds of local networks by interface name, over what the scout finds out
    /// ([`scout::kind_of`](super::scout::kind_of)): e.g. an emulated link named `cell` that
    /// is to be treated as cellular.
    pub kinds: Vec<(String, NetKind)>,
    /// What the device remembers of its paths ([`PathMemory`]), shared by every multi-socket
    /// given the same one: a connection over a path another measured starts from its
    /// estimates rather than probing it at once. `None` (the default): each multi-socket
    /// measures alone. The proxy and the relay give all theirs one.
    pub paths: Option<Arc<PathMemory>>,
    /// A send writes its frames to an idle connection from the sending thread itself, and a
    /// connection's reader what received frames make sendable, instead of handing them to the
    /// connection's writer task (`out`; issue 48). On by default; off only to measure what it
    /// buys (`roam bench net --writer-only`).
    pub writes_from_caller: bool,
    /// Log connection events (opens, closes with reasons) and scheduling decisions
    /// ([`Config::trace`]: where each foreground IROB went, hedges) to standard error.
    pub log: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            config: Config::default(),
            networks: Networks::Auto,
            connect_timeout: Duration::from_secs(10),
            max_pending_handshakes: 64,
            max_pending_per_source: 8,
            max_connections_per_source: 64,
            max_sessions: 1024,
            handshake_timeout: Duration::from_secs(5),
            user_timeout: Duration::from_secs(4),
            congestion_control: None,
            tls: None,
            accept_from_peer: true,
            kinds: Vec::new(),
            paths: None,
            writes_from_caller: true,
            log: std::env::var_os("ROAM_NET_LOG").is_some(),
        }
    }
}
