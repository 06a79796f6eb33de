//! The handshakes (paper §4.2; wire format in docs/wire-format.md). The first connection of a
//! client carries `Hello`/`HelloAck`, which exchange keys and fix the session id and a shared
//! secret. Every later connection (opened by either peer) joins with `Join`, `JoinChallenge`,
//! `JoinProof`, `JoinOk`: both sides prove they hold the secret over fresh nonces, so knowing a
//! session id is not enough to join it. A connection still in its handshake after
//! `Config::handshake_timeout` is closed: a half-open join holds no slot for long.

use rand::RngCore;
use roam_core::Time;

use super::*;
use crate::proto::auth::{proofs_equal, Secret};
use crate::proto::wire::{Frame, NetInfo};

impl Session {
    /// A handshake frame `frame` arrived on `conn`, which is in handshake state `state`.
    pub(super) fn handle_handshake(
        &mut self,
        conn: ConnId,
        state: ConnState,
        frame: Frame,
        now: Time,
    ) -> Result<(), String> {
        match (state, frame) {
            (
                ConnState::HelloSent,
                Frame::HelloAck {
                    session,
                    key,
                    window,
                    caps,
                    networks,
                },
            ) => {
                self.session_id = session;
                self.secret = Some(Secret::new(&self.my_key, &key));
                self.peer_window = window.min(self.config.window);
                self.absorb_netinfos(&networks, now);
                self.establish(conn, now);
                self.flow_negotiated(caps);
                self.established = true;
                self.events.push_back(Event::Established);
                let waiting: Vec<ConnId> = self
                    .conns
                    .iter()
                    .filter(|(_, c)| c.state == ConnState::Waiting)
                    .map(|(&id, _)| id)
                    .collect();
                for w in waiting {
                    self.send_join(w, now);
                }
                self.maybe_open(now);
                Ok(())
            }
            (ConnState::JoinSent, Frame::JoinChallenge { nonce, mac }) => {
                let secret = self.secret.clone().expect("join only after hello");
                let c = self.conns.get_mut(&conn).unwrap();
                let expected = secret.acceptor_proof(self.session_id, &c.my_nonce, &nonce);
                if !proofs_equal(&expected, &mac) {
                    Err("join challenge carries a wrong proof".to_string())
                } else {
                    c.peer_nonce = nonce;
                    let proof = secret.initiator_proof(self.session_id, &c.my_nonce, &nonce);
                    c.control.push(Frame::JoinProof { mac: proof });
                    c.state = ConnState::Proved;
                    Ok(())
                }
            }
            (ConnState::Challenged, Frame::JoinProof { mac }) => {
                let secret = self.secret.clone().expect("challenge only with a secret");
                let c = self.conns.get_mut(&conn).unwrap();
                let expected = secret.initiator_proof(self.session_id, &c.peer_nonce, &c.my_nonce);
                if !proofs_equal(&expected, &mac) {
                    Err("join refused: wrong proof (forged or replayed)".to_string())
                } else {
                    c.control.push(Frame::JoinOk);
                    let net = c.net;
                    let from = c.peer_addr;
                    self.networks.entry(net).or_default().up = true;
                    let rtt = now.saturating_since(c.opened);
                    self.establish(conn, now);
                    self.networks
                        .get_mut(&net)
                        .unwrap()
                        .estimate
                        .adopt(Some(rtt), None);
                    if let Some(a) = from {
                        self.network_seen(net, a);
                    }
                    Ok(())
                }
            }
            (ConnState::Proved, Frame::JoinOk) => {
                self.establish(conn, now);
                Ok(())
            }
            (s, f) => Err(format!("unexpected {} frame during {:?}", f.name(), s)),
        }
    }

    /// The driver opened connection `conn` over local network `net` (initiator side): the
    /// session queues `Hello` (first connection of a client) or `Join`.
    pub fn add_connection(&mut self, conn: ConnId, net: NetId, now: Time) {
        if let Some(n) = self.networks.get_mut(&net) {
            n.opening = false;
        }
        if self.conns.len() >= self.config.max_connections || self.failed.is_some() {
            self.events.push_back(Event::CloseConnection {
                conn,
                reason: "connection limit reached".into(),
            });
            return;
        }
        if self.secret.is_none() && self.role != Role::Client {
            self.events.push_back(Event::CloseConnection {
                conn,
                reason: "no session to join yet".into(),
            });
            return;
        }
        self.conns
            .insert(conn, Box::new(Conn::new(net, ConnState::Waiting, now)));
        let hello_pending = self.conns.values().any(|c| c.state == ConnState::HelloSent);
        if self.secret.is_some() {
            self.send_join(conn, now);
        } else if !hello_pending {
            self.send_hello(conn, now);
        }
        // Otherwise it waits for the hello under way on another connection.
    }

    /// Start the first handshake on `conn`.
    pub(super) fn send_hello(&mut self, conn: ConnId, now: Time) {
        let mut networks = self.netinfos();
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let net = c.net;
        // The hello's first network names the connection's own network.
        if let Some(i) = networks.iter().position(|n| n.net == net) {
            networks.swap(0, i);
        } else {
            networks.insert(
                0,
                NetInfo {
                    net,
                    addr: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                    rtt_us: 0,
                    flags: NET_USABLE,
                    bandwidth_bps: 0,
                    port: 0,
                },
            );
        }
        c.state = ConnState::HelloSent;
        // The hello's round trip is what the first RTT sample measures (not a wait before it).
        c.opened = now;
        let caps = self.flow_caps();
        let c = self.conns.get_mut(&conn).unwrap();
        c.control.push(Frame::Hello {
            key: self.my_key,
            window: self.config.window,
            caps,
            networks,
        });
    }

    /// Join `conn` to the session (the secret is known).
    pub(super) fn send_join(&mut self, conn: ConnId, now: Time) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        self.rng.fill_bytes(&mut c.my_nonce);
        c.state = ConnState::JoinSent;
        // The join's round trips are what the first RTT sample measures.
        c.opened = now;
        c.control.push(Frame::Join {
            session: self.session_id,
            nonce: c.my_nonce,
            net: c.net,
        });
    }

    /// An accepted connection whose first frame (`Hello` or `Join`) is `first`, arriving over
    /// the client's network `net` (for a `Hello`: its first network; for a `Join`: the net field).
    ///
    /// A join is challenged first and holds no connection slot until it proves the key: it
    /// takes one of `Config::max_half_open` places, and a newer join displaces the oldest.
    /// Someone who merely knows the session id (it travels in clear without TLS) can keep
    /// only those few places busy, not the slots, and cannot keep out an honest join, which
    /// proves the key within a round trip of arriving.
    pub fn accept_connection(&mut self, conn: ConnId, first: Frame, now: Time) {
        let slots = self
            .conns
            .values()
            .filter(|c| c.state != ConnState::Challenged)
            .count();
        if slots >= self.config.max_connections {
            self.events.push_back(Event::CloseConnection {
                conn,
                reason: "connection limit reached".into(),
            });
            return;
        }
        if matches!(first, Frame::Join { .. }) {
            self.displace_half_open();
        }
        let mut c = Conn::new(0, ConnState::Established, now);
        match first {
            Frame::Hello {
                key,
                window,
                caps,
                networks,
            } if self.secret.is_none() && self.role == Role::Server => {
                self.secret = Some(Secret::new(&key, &self.my_key));
                self.peer_window = window.min(self.config.window);
                c.net = networks.first().map_or(0, |n| n.net);
                self.absorb_netinfos(&networks, now);
                self.networks.entry(c.net).or_default().up = true;
                c.control.push(Frame::HelloAck {
                    session: self.session_id,
                    key: self.my_key,
                    window: self.config.window,
                    caps: self.flow_caps(),
                    networks: vec![],
                });
                self.flow_negotiated(caps);
                self.established = true;
                self.events.push_back(Event::Established);
            }
            Frame::Join {
                session,
                nonce,
                net,
            } if session == self.session_id
                && self.secret.is_some()
                && (self.role == Role::Server
                    || self.networks.get(&net).is_some_and(|n| n.up && n.port != 0)) =>
            {
                c.net = net;
                c.peer_nonce = nonce;
                self.rng.fill_bytes(&mut c.my_nonce);
                let mac =
                    self.secret
                        .as_ref()
                        .unwrap()
                        .acceptor_proof(session, &nonce, &c.my_nonce);
                c.state = ConnState::Challenged;
                c.control.push(Frame::JoinChallenge {
                    nonce: c.my_nonce,
                    mac,
                });
            }
            Frame::Join { net, .. } if self.role == Role::Client => {
                self.events.push_back(Event::CloseConnection {
                    conn,
                    reason: format!(
                        "a join naming another session, or network {net}, which accepts no \
                         connections now"
                    ),
                });
                return;
            }
            other => {
                self.events.push_back(Event::CloseConnection {
                    conn,
                    reason: format!("unexpected first frame {}", other.name()),
                });
                return;
            }
        }
        self.conns.insert(conn, Box::new(c));
        self.update_down_since(now);
    }

    pub(super) fn establish(&mut self, conn: ConnId, now: Time) {
        let c = self.conns.get_mut(&conn).unwrap();
        c.state = ConnState::Established;
        c.last_data = now;
        let rtt = now.saturating_since(c.opened);
        let net = c.net;
        if self.role == Role::Client {
            if let Some(n) = self.networks.get_mut(&net) {
                n.estimate.adopt(Some(rtt), None);
            }
        }
        self.all_down_since = None;
        // Anything in doubt can now be asked about.
        self.check_thunks(now);
    }

    /// Make room for one more challenged join: close the oldest while `Config::max_half_open`
    /// are challenged (at once, without an error frame: it has not proved anything).
    fn displace_half_open(&mut self) {
        loop {
            let challenged = self
                .conns
                .iter()
                .filter(|(_, c)| c.state == ConnState::Challenged);
            if challenged.clone().count() < self.config.max_half_open.max(1) {
                return;
            }
            let Some(oldest) = challenged
                .min_by_key(|(&id, c)| (c.opened, id))
                .map(|(&id, _)| id)
            else {
                return;
            };
            self.conns.remove(&oldest);
            self.events.push_back(Event::CloseConnection {
                conn: oldest,
                reason: "displaced by a newer join before proving the key".into(),
            });
        }
    }

    /// Close every connection whose handshake has run past `Config::handshake_timeout`.
    pub(super) fn expire_handshakes(&mut self, now: Time) {
        let t = self.config.handshake_timeout;
        let late: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.state.in_handshake() && now.saturating_since(c.opened) >= t)
            .map(|(&id, _)| id)
            .collect();
        for id in late {
            self.close_conn_with_error(id, format!("handshake not done within {t:?}"), now);
        }
    }
}
