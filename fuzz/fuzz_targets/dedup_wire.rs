//! Fuzz asymmetric caching's receiving ends (`roam_dedup`): arbitrary bytes as downstream
//! records at a phone (`Destination::receive`) and as upstream messages at a source
//! (`Source::handle`) give delivered bytes or a clean error, never a panic, and never claim to
//! have used more bytes than they were given. (That delivered bytes are the ones sent is the
//! property test `crates/roam-dedup/tests/stream.rs`.)
#![no_main]
use libfuzzer_sys::fuzz_target;
use roam_dedup::destination::DestinationConfig;
use roam_dedup::source::SourceConfig;
use roam_dedup::{Destination, Source};
use std::time::Instant;

fuzz_target!(|data: &[u8]| {
    let mut dst = Destination::new(DestinationConfig {
        cache_bytes: 1 << 20,
        ..DestinationConfig::default()
    });
    dst.open(1);
    let mut out = Vec::new();
    if let Ok(used) = dst.receive(1, data, &mut out) {
        assert!(used <= data.len());
        let mut up = Vec::new();
        dst.upstream(1, &mut up).expect("the flow is open");
    }
    let mut src = Source::new(SourceConfig::default()).expect("the default is valid");
    src.open(1);
    src.push(1, b"some bytes for the source to keep a record of", &mut Vec::new())
        .expect("the flow is open");
    let mut back = Vec::new();
    if let Ok(used) = src.handle(1, data, Instant::now(), &mut back) {
        assert!(used <= data.len());
    }
});
