//! Fuzz a client session: it has sent its `Hello` on connection 1 and, once that is answered,
//! its `Join` on connection 2 (its second network); whatever the input decodes to is fed to
//! the connection the selector byte names: `HelloAck`, `JoinChallenge`, `JoinOk`, data,
//! errors. No panic, and the session's bounds hold after every frame.
#![no_main]
use libfuzzer_sys::fuzz_target;
use roam_core::Time;
use roam_net::proto::session::{Config, Event, NetKind, Session};
use roam_net::proto::wire::Decoder;

#[path = "checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| {
    let Some((&selectors, rest)) = data.split_first() else {
        return;
    };
    let config = Config::default();
    let mut s = Session::client(config.clone(), 1);
    s.network_up(1, [10, 0, 1, 2].into(), NetKind::default(), Time::ZERO);
    open_requested(&mut s, Time::ZERO);
    let mut d = Decoder::default();
    d.push(rest);
    let mut i = 0u32;
    let mut second = false;
    while let Ok(Some(f)) = d.next_frame() {
        let now = Time::from_millis(10 * i as u64);
        if s.is_established() && !second {
            second = true;
            s.network_up(2, [10, 0, 2, 2].into(), NetKind::default(), now);
            open_requested(&mut s, now);
        }
        let conn = 1 + ((selectors >> (i % 8)) & 1) as u64;
        s.handle_frame(conn, f, now);
        checks::drive_and_check(&mut s, &config, &[1, 2], now);
        i += 1;
    }
});

/// Open the connections the session asks for (connection id = network id).
fn open_requested(s: &mut Session, now: Time) {
    let events: Vec<Event> = std::iter::from_fn(|| s.poll_event()).collect();
    for e in events {
        if let Event::OpenConnection { net } = e {
            s.add_connection(net as u64, net, now);
        }
    }
}
