//! Connection routing at a listener (sans-IO): the first frame of an accepted connection says
//! whether it starts a multi-socket (`Hello`) or joins one (`Join`, naming a session id and the
//! client's network), and [`Router`] finds the multi-socket a join names.
//!
//! Routing only finds the session; the session authenticates the join (`JoinChallenge`,
//! `JoinProof`, see `session::handshake`). A peer's `Hello` alone creates a multi-socket, so
//! the router holds at most `max_sessions` of them: past that a `Hello` is refused (sessions
//! that have ended are dropped first), and the table cannot grow with every `Hello` a peer
//! sends.

use std::collections::HashMap;

use thiserror::Error;

use super::session::NetId;
use super::wire::Frame;

/// Where an accepted connection goes, by its first frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// A `Hello`: a new multi-socket, whose first connection comes over the client's network
    /// `net` (the hello's first network).
    Start {
        /// The client's network the connection came over.
        net: NetId,
    },
    /// A `Join` of multi-socket `session` over the client's network `net`.
    Join {
        /// The session id the join names.
        session: u64,
        /// The client's network the connection came over.
        net: NetId,
    },
}

/// Why an accepted connection is refused before any session sees it.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum RouteError {
    /// The first frame is neither `Hello` nor `Join` (or, at a client's listener, not `Join`).
    #[error("first frame must be {expected}, not {got}")]
    FirstFrame {
        /// What this listener accepts.
        expected: &'static str,
        /// The frame that came.
        got: &'static str,
    },
    /// The join names no live multi-socket.
    #[error("join names unknown session {0:#x}")]
    UnknownSession(u64),
    /// A client's listener of one network got a join naming another.
    #[error("join names network {named}, this listener is network {listener}'s")]
    WrongNetwork {
        /// The network the join names.
        named: NetId,
        /// The listener's network.
        listener: NetId,
    },
    /// The listener already holds its most multi-sockets.
    #[error("{0} multi-sockets already open at this listener")]
    Full(usize),
}

/// Where the first frame of a connection accepted by a server's listener goes.
pub fn route(first: &Frame) -> Result<Route, RouteError> {
    match first {
        Frame::Hello { networks, .. } => Ok(Route::Start {
            net: networks.first().map_or(0, |n| n.net),
        }),
        Frame::Join { session, net, .. } => Ok(Route::Join {
            session: *session,
            net: *net,
        }),
        other => Err(RouteError::FirstFrame {
            expected: "Hello or Join",
            got: other.name(),
        }),
    }
}

/// Whether the first frame of a connection accepted by a client's listener on its network
/// `listener` may go to the client's multi-socket: only a `Join` naming that network (the
/// server opens connections only to join; the session then checks the session id and proof).
pub fn route_peer_join(first: &Frame, listener: NetId) -> Result<(), RouteError> {
    match first {
        Frame::Join { net, .. } if *net == listener => Ok(()),
        Frame::Join { net, .. } => Err(RouteError::WrongNetwork {
            named: *net,
            listener,
        }),
        other => Err(RouteError::FirstFrame {
            expected: "Join",
            got: other.name(),
        }),
    }
}

/// The multi-sockets of one listener by session id. `T` is the driver's handle of a
/// multi-socket; `alive` tells whether a handle's multi-socket still exists (ended ones are
/// dropped when a new one would not fit).
#[derive(Debug)]
pub struct Router<T> {
    sessions: HashMap<u64, T>,
    max_sessions: usize,
    alive: fn(&T) -> bool,
}

impl<T: Clone> Router<T> {
    /// A router for at most `max_sessions` multi-sockets.
    pub fn new(max_sessions: usize, alive: fn(&T) -> bool) -> Router<T> {
        Router {
            sessions: HashMap::new(),
            max_sessions,
            alive,
        }
    }

    /// The multi-socket a join names.
    pub fn lookup(&self, session: u64) -> Result<T, RouteError> {
        self.sessions
            .get(&session)
            .filter(|t| (self.alive)(t))
            .cloned()
            .ok_or(RouteError::UnknownSession(session))
    }

    /// Room for one more multi-socket: dropping ended ones if needed. A `Hello` is refused
    /// when this fails; call it before building the multi-socket.
    pub fn reserve(&mut self) -> Result<(), RouteError> {
        if self.sessions.len() >= self.max_sessions {
            let alive = self.alive;
            self.sessions.retain(|_, t| alive(t));
        }
        if self.sessions.len() >= self.max_sessions {
            return Err(RouteError::Full(self.max_sessions));
        }
        Ok(())
    }

    /// A fresh session id from `ids` (random), not in use here.
    pub fn fresh_id(&self, mut ids: impl FnMut() -> u64) -> u64 {
        loop {
            let id = ids();
            if !self.sessions.contains_key(&id) {
                return id;
            }
        }
    }

    /// Record multi-socket `t` under session id `id` (from [`Router::fresh_id`], after
    /// [`Router::reserve`]).
    pub fn insert(&mut self, id: u64, t: T) {
        self.sessions.insert(id, t);
    }

    /// Multi-sockets recorded (live or not yet dropped).
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Whether none is recorded.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::wire::{Caps, NetInfo};
    use std::rc::Rc;

    fn hello(net: NetId) -> Frame {
        Frame::Hello {
            key: [1; 32],
            window: 1 << 20,
            caps: Caps::NONE,
            networks: vec![NetInfo {
                net,
                addr: [10, 0, 0, 2].into(),
                rtt_us: 0,
                flags: 0,
                bandwidth_bps: 0,
                port: 0,
            }],
        }
    }

    fn join(session: u64, net: NetId) -> Frame {
        Frame::Join {
            session,
            nonce: [2; 16],
            net,
        }
    }

    #[test]
    fn first_frames_route_by_kind() {
        assert_eq!(route(&hello(3)), Ok(Route::Start { net: 3 }));
        assert_eq!(route(&join(9, 2)), Ok(Route::Join { session: 9, net: 2 }));
        assert!(matches!(
            route(&Frame::JoinOk),
            Err(RouteError::FirstFrame { got: "JoinOk", .. })
        ));
        assert_eq!(route_peer_join(&join(9, 2), 2), Ok(()));
        assert_eq!(
            route_peer_join(&join(9, 1), 2),
            Err(RouteError::WrongNetwork {
                named: 1,
                listener: 2
            })
        );
        assert!(route_peer_join(&hello(2), 2).is_err());
    }

    /// A peer's hellos cannot grow the table past its bound; ended multi-sockets make room.
    #[test]
    fn the_table_is_bounded_and_drops_ended_sessions() {
        let mut r: Router<Rc<bool>> = Router::new(2, |t| **t);
        let (live, ended) = (Rc::new(true), Rc::new(false));
        let mut next = 0;
        let mut ids = || {
            next += 1;
            next
        };
        for t in [&live, &ended] {
            r.reserve().unwrap();
            let id = r.fresh_id(&mut ids);
            r.insert(id, t.clone());
        }
        assert_eq!(r.lookup(1).as_deref(), Ok(&true));
        assert_eq!(r.lookup(2), Err(RouteError::UnknownSession(2)));
        // Full: the ended one is dropped to make room, then a live one fills it.
        r.reserve().unwrap();
        assert_eq!(r.len(), 1);
        r.insert(r.fresh_id(&mut ids), live.clone());
        assert_eq!(r.reserve(), Err(RouteError::Full(2)));
        // A fresh id skips ids in use.
        let mut same = [1, 1, 7].into_iter();
        assert_eq!(r.fresh_id(|| same.next().unwrap()), 7);
    }
}
