//! Fuzz Horatio's tier wire format (`roam_store::tier::wire`): arbitrary bytes decoded as a
//! `Request` and as a `Reply` give a message or a clean error, never a panic, and a decoded
//! message re-encodes to bytes that decode to the same header and payload. The hex fields'
//! parsers (`unhex`, `chunk_id`) get the input as text too.
#![no_main]
use libfuzzer_sys::fuzz_target;
use roam_store::tier::wire::{chunk_id, decode, encode, unhex, Reply, Request};

fuzz_target!(|data: &[u8]| {
    if let Ok((r, payload)) = decode::<Request>(data) {
        let bytes = encode(&r, payload);
        let (again, p) = decode::<Request>(&bytes).expect("a re-encoded request decodes");
        assert_eq!(again, r);
        assert_eq!(p, payload);
    }
    if let Ok((r, payload)) = decode::<Reply>(data) {
        let bytes = encode(&r, payload);
        let (again, p) = decode::<Reply>(&bytes).expect("a re-encoded reply decodes");
        assert_eq!(again, r);
        assert_eq!(p, payload);
    }
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = unhex::<16>(s, "nonce");
        let _ = unhex::<32>(s, "hash");
        let _ = chunk_id(s, "chunk name");
    }
});
