//! [`Config`]: the tunables and limits of a multi-socket, with their defaults.

use std::time::Duration;

use thiserror::Error;

use super::*;

/// Tunables and limits of a multi-socket.
#[derive(Clone, Debug)]
pub struct Config {
    /// Largest data chunk.
    pub chunk_size: usize,
    /// Bytes sent of unacknowledged IROBs before new bytes wait (the oldest unacknowledged
    /// IROB excepted); announced to the peer as this side's receive window, and the sender uses
    /// the smaller of both sides' windows.
    pub window: u64,
    /// Most unacknowledged bytes the peer may make this side buffer, counting the receiver's
    /// bookkeeping beside the payload (`PIECE_OVERHEAD` per stored piece, `DEP_OVERHEAD` per
    /// dependency); past it the multi-socket fails with a reason naming the limit. An honest
    /// peer stays within `window + max_irob_size` of payload (its window of sent bytes, plus
    /// the oldest unacknowledged IROB, which may always proceed) and a sixteenth of that plus
    /// a piece per unfinished IROB of bookkeeping, so this must be at least
    /// [`Config::min_receive_limit`] ([`Config::validate`]). Default: exactly that, 97 MiB.
    /// Acknowledged bytes the application has not read yet are bounded apart from this: by
    /// the credit granted (`Config::flow`), or with a peer that lacks credit, by the driver,
    /// which stops reading from the network while they exceed `window`.
    pub receive_limit: u64,
    /// Largest IROB accepted (either direction).
    pub max_irob_size: u64,
    /// Most dependencies per IROB.
    pub max_deps: usize,
    /// Most IROBs the receiver holds unfinished at once.
    pub max_pending_irobs: usize,
    /// Bytes the application may queue for sending before calls would block.
    pub max_send_buffer: u64,
    /// Most TCP connections per multi-socket.
    pub max_connections: usize,
    /// Most accepted joins that have been challenged and not yet proved the key; they take no
    /// connection slot, and a newer one displaces the oldest (see
    /// `Session::accept_connection`).
    pub max_half_open: usize,
    /// A connection still in its handshake this long after it opened (hello or join sent,
    /// challenged, proof sent) is closed: a half-open join must not hold a connection slot
    /// for anyone who merely knows the session id.
    pub handshake_timeout: Duration,
    /// Most networks a peer may announce (server side; further network ids in its `Hello` or
    /// `Estimate` frames are ignored). Each announced network is a connection the server may
    /// open, so a peer must not be able to name thousands.
    pub max_networks: usize,
    /// The application sees a failure when no connection has been up this long.
    pub failure_timeout: Duration,
    /// Probe a connection whose network has been idle this long.
    pub probe_interval: Duration,
    /// Idle probes back off: the least gap between a connection's idle probes doubles with
    /// each, from `probe_interval` (10 s, 20 s, 40 s, ...) up to this (see
    /// `Conn::next_idle_probe`). At a fixed 10 s the proxy sessions of Precog's hour of
    /// prefetching carried 9 MB of probes each way on WiFi, more than the pages it fetched.
    pub max_probe_interval: Duration,
    /// Wait before reopening a connection over a network that is up.
    pub reconnect_backoff: Duration,
    /// The server opens a connection over a client network that accepts them (its `NetInfo`
    /// names a port) once the network has been usable without a connection this long and the
    /// server has data to send. The client, which sees its networks first, normally reopens
    /// within `reconnect_backoff`; this is the other peer's turn (paper §4.2: either peer may
    /// open a connection). `None`: the server never opens one.
    pub peer_open_delay: Option<Duration>,
    /// An IROB sent completely and not acknowledged this long, or asked about (`ResendRequest`)
    /// and not answered this long, is asked about (again): the acknowledgement or answer may
    /// have gone out on a connection that broke before the peer noticed (see
    /// `Session::recheck_unacknowledged`).
    pub ack_timeout: Duration,
    /// Acknowledgements are coalesced: they ride on the next data chunk to the peer, and go out in
    /// a frame of their own only once the oldest has waited this long, once the IROBs they
    /// acknowledge hold [`ACK_BYTES`](super::ACK_BYTES) of payload, or once more wait than one
    /// frame lists (`WireLimits::max_list`; see `Session::acks_due`). A request answered within it
    /// carries its acknowledgement in the answer; a stream of small messages gets an
    /// acknowledgement frame per this much time, not per read (issue 48, item 1). Default 1 ms: a
    /// small part of any network's round trip (the hedges and the sender's window wait round trips,
    /// not this).
    pub ack_delay: Duration,
    /// The policy of each label, by [`Label::rank`] (see [`Config::policy`]).
    pub policies: [LabelPolicy; 4],
    /// Frame decoder limits.
    pub wire: WireLimits,
    /// Most memory held for answers to the peer, all connections together: control frames
    /// queued (probe replies, handshake frames, errors, our own questions) and the IROBs it
    /// asked about whose `Have` answer has not gone out (`ASKED_COST` each). A peer that asks
    /// and does not read the answers would grow them without bound: past this, the connection
    /// that asked is closed. An honest peer asks about each IROB once after a break (at most
    /// `max_pending_irobs`, 2 MiB of questions). Default 4 MiB.
    pub max_control_bytes: usize,
    /// How long a multi-socket the application has released (dropped its last handle) may go
    /// without progress before it fails (`Session::release`): none of its data acknowledged
    /// or sent for the first time, no goodbye from the peer. Default 10 s.
    pub release_timeout: Duration,
    /// Report scheduling decisions as [`Event::Trace`] lines (where a foreground IROB went,
    /// and why; hedges): for tracing a slow message after the fact. Off by default.
    pub trace: bool,
    /// Meatballs' redundant network selection for small foreground IROBs (Meatballs thesis §4.4.2;
    /// `selection`): each goes over one network or two at once by least expected weighted
    /// cost given the networks' record of error, and one left unacknowledged is re-evaluated
    /// instead of hedged after a fixed delay. Off (`None`) by default.
    pub redundancy: Option<Redundancy>,
    /// Flow control (`flow`): credit with AFC's feed-forward by default, the window and the
    /// driver's pause with a peer that lacks it.
    pub flow: FlowConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            chunk_size: 256 * 1024,
            window: 16 << 20,
            max_irob_size: 64 << 20,
            // `min_receive_limit` of these figures: 80 MiB + 5 MiB + 12 MiB.
            receive_limit: (16 << 20) + (64 << 20) + (5 << 20) + (1 << 16) * PIECE_OVERHEAD,
            max_deps: 1024,
            max_pending_irobs: 1 << 16,
            max_send_buffer: 64 << 20,
            max_connections: 16,
            max_half_open: 4,
            max_networks: 8,
            handshake_timeout: Duration::from_secs(10),
            failure_timeout: Duration::from_secs(30),
            probe_interval: Duration::from_secs(10),
            max_probe_interval: Duration::from_secs(300),
            reconnect_backoff: Duration::from_secs(1),
            peer_open_delay: Some(Duration::from_secs(2)),
            ack_timeout: Duration::from_secs(10),
            ack_delay: Duration::from_millis(1),
            policies: Label::ALL.map(LabelPolicy::default_for),
            wire: WireLimits::default(),
            max_control_bytes: 4 << 20,
            release_timeout: Duration::from_secs(10),
            trace: false,
            redundancy: None,
            flow: FlowConfig::default(),
        }
    }
}

/// What a label may do (paper §3.3, the deferral policy, and Meatballs' redundancy): per label,
/// because an application's background sync may stay off a metered network while its
/// interactive traffic may not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LabelPolicy {
    /// The label may use metered networks (default: yes, for every label).
    pub metered: bool,
    /// A send is deferred (its thunk fires later) or would block while the label's unsent
    /// backlog exceeds this much time at the estimated bandwidth of its appropriate networks
    /// (at least 64 KiB). Default: 1 s.
    pub backlog_bound: Duration,
    /// A late IROB of the label, sent completely and unacknowledged past its hedge delay, is
    /// sent again over another network (see `Session::hedge_late_foreground`). Only small
    /// foreground IROBs are ever hedged; default: on for them.
    pub hedge: bool,
    /// Which networks the label's IROBs go over (default: any, by the placement policy).
    pub networks: NetworkChoice,
}

/// Which networks a label's IROBs may take: the placement policy's choice among all of them,
/// or the two fixed rules of Meatballs' baselines (Meatballs thesis §4.4.2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NetworkChoice {
    /// Any network, by the placement policy (`Session::best_connection`).
    #[default]
    Any,
    /// A network that is not cellular whenever one has an established connection (a phone's
    /// default route: WiFi when associated); cellular otherwise.
    PreferNonCellular,
    /// Cellular networks only: the label waits (or its sends are deferred) while none is up.
    CellularOnly,
}

impl LabelPolicy {
    /// The default policy of `label`.
    pub fn default_for(label: Label) -> LabelPolicy {
        LabelPolicy {
            metered: true,
            backlog_bound: Duration::from_secs(1),
            hedge: label == Label::ForegroundSmall,
            networks: NetworkChoice::Any,
        }
    }
}

impl Config {
    /// The policy of `label`.
    pub fn policy(&self, label: Label) -> &LabelPolicy {
        &self.policies[label.rank()]
    }

    /// The policy of `label`, to change it.
    pub fn policy_mut(&mut self, label: Label) -> &mut LabelPolicy {
        &mut self.policies[label.rank()]
    }
}

/// A [`Config`] whose figures contradict each other.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// An honest peer could exceed the receive limit, and would see the multi-socket fail.
    #[error(
        "receive_limit {receive_limit} is below {min} (window {window} + max_irob_size \
         {max_irob_size}, and bookkeeping: see Config::min_receive_limit): an honest peer may \
         make this side hold that much unacknowledged"
    )]
    ReceiveLimit {
        /// `Config::receive_limit`.
        receive_limit: u64,
        /// [`Config::min_receive_limit`].
        min: u64,
        /// `Config::window`.
        window: u64,
        /// `Config::max_irob_size`.
        max_irob_size: u64,
    },
    /// A data chunk with its largest dependency and acknowledgement lists would not fit a frame
    /// the decoder accepts.
    #[error(
        "chunk_size {chunk_size} plus 8 bytes per dependency ({max_deps}) and acknowledgement \
         ({max_list}) exceeds the frame body limit of {max_body} bytes"
    )]
    ChunkSize {
        /// `Config::chunk_size`.
        chunk_size: usize,
        /// `Config::max_deps`.
        max_deps: usize,
        /// `WireLimits::max_list`.
        max_list: usize,
        /// `WireLimits::max_body`.
        max_body: usize,
    },
    /// A limit that must be positive is zero.
    #[error("{0} must be at least 1")]
    Zero(&'static str),
    /// The flow control's figures cannot work (`FlowConfig::check`).
    #[error("{0}")]
    Flow(String),
}

impl Config {
    /// The least receive limit an honest peer stays within: `window + max_irob_size` of
    /// payload, and bookkeeping of a sixteenth of that (pieces of about 2 KiB once small
    /// contiguous ones are merged, `MERGE_BELOW`) plus one piece per unfinished IROB
    /// (`max_pending_irobs`; an IROB's last piece may be small). An honest peer whose
    /// unacknowledged IROBs name many dependencies (`DEP_OVERHEAD` each) needs more.
    pub fn min_receive_limit(&self) -> u64 {
        let payload = self.window.saturating_add(self.max_irob_size);
        payload
            .saturating_add(payload / 16)
            .saturating_add((self.max_pending_irobs as u64).saturating_mul(PIECE_OVERHEAD))
    }

    /// Check that the figures fit together; the runtime refuses a configuration that fails
    /// this (`MultiSocket::connect`, `Listener::bind`).
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (name, v) in [
            ("chunk_size", self.chunk_size as u64),
            ("window", self.window),
            ("max_irob_size", self.max_irob_size),
            ("max_connections", self.max_connections as u64),
            ("max_half_open", self.max_half_open as u64),
            ("max_networks", self.max_networks as u64),
            ("max_control_bytes", self.max_control_bytes as u64),
        ] {
            if v == 0 {
                return Err(ConfigError::Zero(name));
            }
        }
        if self.receive_limit < self.min_receive_limit() {
            return Err(ConfigError::ReceiveLimit {
                receive_limit: self.receive_limit,
                min: self.min_receive_limit(),
                window: self.window,
                max_irob_size: self.max_irob_size,
            });
        }
        self.flow.check().map_err(ConfigError::Flow)?;
        let frame = self
            .chunk_size
            .saturating_add(8 * (self.max_deps + self.wire.max_list));
        if frame > self.wire.max_body {
            return Err(ConfigError::ChunkSize {
                chunk_size: self.chunk_size,
                max_deps: self.max_deps,
                max_list: self.wire.max_list,
                max_body: self.wire.max_body,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_configuration_is_valid_and_contradictions_are_named() {
        assert_eq!(Config::default().validate(), Ok(()));
        assert_eq!(
            Config::default().receive_limit,
            Config::default().min_receive_limit()
        );
        let small = Config {
            receive_limit: 1 << 20,
            ..Config::default()
        };
        let e = small.validate().unwrap_err().to_string();
        assert!(e.contains("receive_limit 1048576"), "{e}");
        let big = Config {
            chunk_size: 1 << 20,
            ..Config::default()
        };
        assert!(matches!(big.validate(), Err(ConfigError::ChunkSize { .. })));
        let none = Config {
            window: 0,
            ..Config::default()
        };
        assert_eq!(none.validate(), Err(ConfigError::Zero("window")));
        let mut backwards = Config::default();
        backwards.flow.lower = 2.0;
        let e = backwards.validate().unwrap_err().to_string();
        assert!(e.contains("flow.lower 2"), "{e}");
        let mut empty = Config::default();
        empty.flow.memory = Memory::Fixed(0);
        assert!(matches!(empty.validate(), Err(ConfigError::Flow(_))));
    }
}
