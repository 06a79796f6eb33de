//! Fuzz the Mahimahi trace parser (`roam_trace::PdoTrace::parse`): arbitrary text gives a
//! trace or a clean error, never a panic; and a trace it accepts can be used as the emulator
//! uses one (its first period's opportunities walked from time zero, the bytes it carries in
//! a span, the trace scaled) without a panic, its opportunities going forward in time and
//! none later than the period. (There is no writer to round-trip through.)
#![no_main]
use libfuzzer_sys::fuzz_target;
use roam_core::Time;
use roam_trace::PdoTrace;
use std::path::Path;
use std::time::Duration;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(t) = PdoTrace::parse(text, Path::new("fuzz.down")) else {
        return;
    };
    assert!(!t.is_empty());
    assert!(t.period() > Duration::ZERO);

    let mut c = t.first_after(Time::ZERO);
    let mut prev = Time::ZERO;
    let period = Time::ZERO + t.period();
    for _ in 0..t.len().min(10_000) {
        let at = t.time_of(c);
        assert!(at > Time::ZERO && at >= prev, "opportunities go forward in time");
        assert!(at <= period, "the first period's opportunities lie within it");
        prev = at;
        c = t.advance(c);
    }
    let end = prev + t.period();
    let (part, all) = (
        t.bytes_between(Time::ZERO, prev),
        t.bytes_between(Time::ZERO, end),
    );
    assert!(part <= all);
    let _ = t.count_at_or_before(end);
    for k in [0.5, 3.0] {
        let s = t.scaled(k).expect("a positive factor scales");
        assert_eq!(s.period(), t.period());
    }
});
