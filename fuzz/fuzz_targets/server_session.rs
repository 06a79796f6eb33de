//! Fuzz a server session: the first frame of connection 1 is accepted as a new multi-socket's
//! (a `Hello`, or whatever the bytes decode to), connection 2's as a join, and every later
//! frame goes to the connection the input's selector byte names. No panic, and the session's
//! bounds hold after every frame (`checks.rs`).
#![no_main]
use libfuzzer_sys::fuzz_target;
use roam_core::Time;
use roam_net::proto::session::{Config, Session};
use roam_net::proto::wire::Decoder;

#[path = "checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| {
    let Some((&selectors, rest)) = data.split_first() else {
        return;
    };
    let config = Config::default();
    let mut s = Session::server(config.clone(), 1, 7);
    let mut d = Decoder::default();
    d.push(rest);
    let mut opened = [false; 2];
    let mut i = 0u32;
    while let Ok(Some(f)) = d.next_frame() {
        let now = Time::from_millis(10 * i as u64);
        let conn = 1 + ((selectors >> (i % 8)) & 1) as u64;
        if !opened[conn as usize - 1] {
            opened[conn as usize - 1] = true;
            s.accept_connection(conn, f, now);
            s.connection_from(conn, [10, 0, conn as u8, 2].into());
        } else {
            s.handle_frame(conn, f, now);
        }
        checks::drive_and_check(&mut s, &config, &[1, 2], now);
        i += 1;
    }
});
