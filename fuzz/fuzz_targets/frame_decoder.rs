//! Fuzz the wire decoder: arbitrary bytes must give frames or a clean error, never a panic,
//! and a decoded frame must re-encode to bytes that decode to the same frame.
#![no_main]
use libfuzzer_sys::fuzz_target;
use roam_net::proto::wire::Decoder;

fuzz_target!(|data: &[u8]| {
    let mut d = Decoder::default();
    d.push(data);
    while let Ok(Some(f)) = d.next_frame() {
        let mut again = Decoder::default();
        again.push(&f.to_bytes());
        assert_eq!(again.next_frame().unwrap(), Some(f));
    }
});
