//! Fuzz the relay's request line (`roam-relay 2 HOST:PORT LABEL NONCE PROOF`, the first IROB a
//! proxy sends, at most `MAX_REQUEST` bytes): an arbitrary line read as the relay reads it
//! (`RelayRequest::parse`, then its target split by `split_target`) gives its words or a
//! clean error, never a panic; the words it gives, joined again, are the line; and a target it
//! splits, written back as `HOST:PORT`, splits the same.
//!
//! Not fuzzed here: the proof (it needs the key) and resolving the host (DNS).
#![no_main]
use libfuzzer_sys::fuzz_target;
use roam_net::proxy::{split_target, RelayRequest};

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(r) = RelayRequest::parse(line) else {
        return;
    };
    let again = format!(
        "roam-relay 2 {} {} {} {}",
        r.target, r.label, r.nonce, r.proof
    );
    assert_eq!(again, line, "the request's words make its line");
    if let Ok((host, port)) = split_target(r.target) {
        let written = format!("{host}:{port}");
        assert_eq!(split_target(&written).ok(), Some((host, port)), "{written}");
    }
});
