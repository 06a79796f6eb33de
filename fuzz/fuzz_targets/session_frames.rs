//! Fuzz a server session with whatever frames arbitrary bytes decode to: no panic, and the
//! session's own accounting stays consistent (it can still be polled and asked to receive).
#![no_main]
use libfuzzer_sys::fuzz_target;
use roam_core::Time;
use roam_net::proto::session::{Config, Session};
use roam_net::proto::wire::Decoder;

fuzz_target!(|data: &[u8]| {
    let mut s = Session::server(Config::default(), 1, 7);
    let mut d = Decoder::default();
    d.push(data);
    let mut first = true;
    let mut t = 0;
    while let Ok(Some(f)) = d.next_frame() {
        t += 1;
        if first {
            s.accept_connection(1, f, Time::from_millis(t));
            first = false;
        } else {
            s.handle_frame(1, f, Time::from_millis(t));
        }
        while s.recv().is_some() {}
        while s.poll_transmit(1, Time::from_millis(t), 1 << 20).is_some() {}
        while s.poll_event().is_some() {}
    }
});
