//! `roam lab afc` end to end in the emulator: a short trial of the thesis's scenario 2 with
//! each kind of stack (kernel TCP, quinn, roam-net with AFC) produces the figures the report
//! and `roam bench afc` need: goodput, what the receiver held unread (like with like), and
//! how the sender was held by the receiver's window. (Needs root or user namespaces; skipped
//! with a reason otherwise.)

use std::sync::Arc;
use std::time::Duration;

use roam_lab::harness::system::System;
use roam_lab::harness::trial::{self, Metric};
use roam_lab::studies::afc::{bulk, systems::AfcSystem};
use roam_net::proto::session::FlowPolicy;
use roam_trace::scenario::Scenario;

fn get(ms: &[Metric], name: &str) -> Option<f64> {
    ms.iter().find(|m| m.name == name).map(|m| m.value)
}

#[test]
fn each_stack_reports_goodput_memory_and_how_its_sender_was_held() {
    if !roam_emu::testing::privileged_or_skip() {
        return;
    }
    // Scenario 2: 15 Mbit/s, reads <0, 6, 6> Mbit/s per 530 ms, a 256 kB buffer. In the
    // slots where nothing is read the window closes and every sender is held.
    let sc = Scenario::by_name("afc-s2", 1).unwrap();
    let afc = AfcSystem::Roam(FlowPolicy::Afc);
    for system in [AfcSystem::TcpFixed, AfcSystem::Quic, afc] {
        let ms = trial::run(
            bulk::run,
            &sc,
            roam_lab::harness::system::QUEUE,
            System::new(system),
            Duration::from_secs(10),
            1,
            Arc::new(|_| {}),
            None,
        )
        .unwrap_or_else(|e| panic!("{}: {e:#}", system.name()))
        .metrics;
        let name = system.name();
        eprintln!("{name}: {ms:?}");
        let goodput = get(&ms, "goodput_mbps").unwrap();
        assert!(goodput > 0.5 && goodput < 15.0, "{name}: {ms:?}");
        let unread = get(&ms, "peak_unread_kb").unwrap();
        assert!(unread > 0.0, "{name}: {ms:?}");
        match system {
            AfcSystem::TcpFixed => {
                // The kernel says how long (tcpi_rwnd_limited), not how often.
                assert!(get(&ms, "sender_wait_s").unwrap() > 0.0, "{name}: {ms:?}");
                assert_eq!(get(&ms, "sender_waits"), None, "{name}");
            }
            AfcSystem::Quic => {
                // quinn says how often (its DATA_BLOCKED frames), not how long.
                assert!(get(&ms, "sender_waits").unwrap() >= 1.0, "{name}: {ms:?}");
                assert_eq!(get(&ms, "sender_wait_s"), None, "{name}");
            }
            _ => {
                assert!(get(&ms, "sender_wait_s").is_some(), "{name}: {ms:?}");
                assert!(get(&ms, "sender_waits").is_some(), "{name}: {ms:?}");
                // Like with like: what roam holds counts its acknowledged bytes and more. The
                // two peaks are sampled at different moments (before each read; at each
                // arrival), so allow a receive buffer's worth (about 1 MiB) between them.
                let acked = get(&ms, "peak_acked_unread_kb").unwrap();
                assert!(acked > 0.0 && unread + 1100.0 >= acked, "{name}: {ms:?}");
            }
        }
    }
}
