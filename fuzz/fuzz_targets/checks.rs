//! What every session fuzz target checks after each frame.
use roam_core::Time;
use roam_net::proto::session::{Config, Session};
use roam_net::proto::wire::Decoder;

/// Let the application read, run the timers, collect the driver events and every frame the
/// session would write on `conns`; then check its bounds: every frame it writes decodes at
/// the peer, what it buffers for the peer stays within the receive limit, its connections
/// within their bounds, and its running counts agree with what they count.
pub fn drive_and_check(s: &mut Session, config: &Config, conns: &[u64], now: Time) {
    while s.recv(now).is_some() {}
    s.handle_timeout(now);
    while s.poll_event().is_some() {}
    for &c in conns {
        let mut peer = Decoder::new(config.wire);
        while let Some(t) = s.poll_transmit(c, now, 1 << 20) {
            peer.push(&t.head);
            peer.push(&t.data);
        }
        while peer.next_frame().expect("a frame the session wrote decodes").is_some() {}
    }
    if s.failure().is_none() {
        assert!(s.receive_buffered() - s.receive_backlog() <= config.receive_limit);
    }
    assert!(s.connection_count() <= config.max_connections + config.max_half_open);
    let _ = s.poll_timeout();
    if let Err(e) = s.check_invariants() {
        panic!("{e}");
    }
}
