//! The emulator with real kernel TCP and MPTCP running through it. Skips with a one-line reason
//! where namespaces and TUN devices are unavailable (CI runs as root, so they run there).

use roam_emu::traffic::{bulk_download, bulk_server, echo_server, rtt_probe};
use roam_emu::{Command, Emulator, LinkCommand};
use std::sync::atomic::Ordering;
use std::time::Duration;

fn emu(links: &[&str]) -> Option<Emulator> {
    roam_emu::testing::emulator_or_skip(links)
}

/// Bytes link `name` delivered towards the client so far.
fn down_bytes(emu: &Emulator, name: &str) -> u64 {
    emu.link(name)
        .unwrap()
        .down
        .delivered_bytes
        .load(Ordering::Relaxed)
}

#[test]
fn mptcp_uses_both_links_as_subflows() {
    let Some(emu) = emu(&["wifi=rate=20mbit,delay=5ms", "cell=rate=20mbit,delay=20ms"]) else {
        return;
    };
    if !std::path::Path::new("/proc/sys/net/mptcp/enabled").exists() {
        eprintln!("skipped: kernel without MPTCP");
        return;
    }
    assert!(emu.warnings().is_empty(), "{:?}", emu.warnings());
    let srv = bulk_server(&emu, 7000, true).unwrap();
    let clock = emu.clock();
    let addr = emu.link("wifi").unwrap().client_addr;
    let until = clock.now() + Duration::from_secs(4);
    let r = emu
        .spawn_in_client(move || {
            bulk_download(clock, addr, 7000, true, until, Duration::from_secs(3))
        })
        .join()
        .unwrap()
        .unwrap();
    srv.stop();
    assert!(
        r.total() > 1_000_000,
        "MPTCP download moved {} bytes",
        r.total()
    );
    let wifi = down_bytes(&emu, "wifi");
    let cell = down_bytes(&emu, "cell");
    // The initial subflow uses wifi; the path manager adds a subflow from cell's address.
    assert!(wifi > 500_000, "wifi carried {wifi} bytes");
    assert!(cell > 500_000, "cell carried {cell} bytes");
}

#[test]
fn plain_tcp_stays_on_the_link_it_is_bound_to() {
    let Some(emu) = emu(&["wifi=rate=10mbit", "cell=rate=10mbit"]) else {
        return;
    };
    let srv = bulk_server(&emu, 7001, false).unwrap();
    let clock = emu.clock();
    let addr = emu.link("cell").unwrap().client_addr;
    let until = clock.now() + Duration::from_secs(1);
    let r = emu
        .spawn_in_client(move || {
            bulk_download(clock, addr, 7001, false, until, Duration::from_secs(3))
        })
        .join()
        .unwrap()
        .unwrap();
    srv.stop();
    assert!(r.total() > 100_000);
    // A link's counters grow a 100 ms bin at a time, when its forwarder closes the bin: on a
    // loaded machine the last bins come a little after the application has its bytes.
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while down_bytes(&emu, "cell") < r.total() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let wifi = down_bytes(&emu, "wifi");
    let cell = down_bytes(&emu, "cell");
    assert!(cell >= r.total(), "cell {cell} vs app {}", r.total());
    assert!(
        wifi < 10_000,
        "wifi carried {wifi} bytes of a download bound to cell"
    );
}

#[test]
fn rtt_is_never_below_the_configured_delay_and_cuts_stop_traffic() {
    let Some(emu) = emu(&["a=rate=10mbit,delay=50ms"]) else {
        return;
    };
    let srv = echo_server(&emu, 7002).unwrap();
    let clock = emu.clock();
    let addr = emu.links()[0].client_addr;
    let until = clock.now() + Duration::from_millis(1500);
    let h = emu.spawn_in_client(move || {
        rtt_probe(
            clock,
            addr,
            7002,
            64,
            Duration::from_millis(100),
            until,
            Duration::from_millis(400),
        )
    });
    // Cut the link from 0.5 s to 1.0 s.
    std::thread::sleep(Duration::from_millis(500));
    let cut_at = clock.now();
    emu.command(&Command {
        link: "a".into(),
        action: LinkCommand::Down,
    })
    .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let restored_at = clock.now();
    emu.command(&Command {
        link: "a".into(),
        action: LinkCommand::Up,
    })
    .unwrap();
    let samples = h.join().unwrap().unwrap();
    srv.stop();
    assert!(samples.len() >= 5, "{samples:?}");
    for (_, rtt) in &samples {
        assert!(
            *rtt >= Duration::from_millis(100),
            "RTT {rtt:?} below the configured 100 ms"
        );
    }
    // No exchange that started and ended inside the cut could have completed.
    for (t, rtt) in &samples {
        let end = *t + *rtt;
        assert!(
            !(*t > cut_at && end < restored_at),
            "exchange at {t} completed during the cut"
        );
    }
    assert!(
        samples.iter().any(|(t, _)| *t > restored_at),
        "traffic resumes after the cut"
    );
    assert!(emu
        .command(&Command {
            link: "zz".into(),
            action: LinkCommand::Up
        })
        .is_err());
}

/// With `carrier=`, an outage that lasts takes the client interface's carrier down (the kernel
/// sees NO-CARRIER, as after a WiFi disassociation) and the link's return brings it back;
/// without, the interface stays up through the outage (a silent drop).
#[test]
fn a_long_outage_takes_the_carrier_down_only_when_asked() {
    let Some(emu) = emu(&["a=rate=10mbit,carrier=200ms", "b=rate=10mbit"]) else {
        return;
    };
    let no_carrier = |dev: &'static str| {
        emu.spawn_in_client(move || {
            let o = std::process::Command::new("ip")
                .args(["-o", "link", "show", "dev", dev])
                .output()
                .expect("ip");
            String::from_utf8_lossy(&o.stdout).contains("NO-CARRIER")
        })
        .join()
        .unwrap()
        .unwrap()
    };
    let set = |link: &str, action: LinkCommand| {
        emu.command(&Command {
            link: link.into(),
            action,
        })
        .unwrap()
    };
    assert!(!no_carrier("a") && !no_carrier("b"));
    set("a", LinkCommand::Down);
    set("b", LinkCommand::Down);
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        !no_carrier("a"),
        "an outage shorter than 200 ms keeps the carrier"
    );
    std::thread::sleep(Duration::from_millis(400));
    assert!(no_carrier("a"), "a 500 ms outage took the carrier down");
    assert!(
        !no_carrier("b"),
        "without carrier=, an outage is a silent drop"
    );
    set("a", LinkCommand::Up);
    set("b", LinkCommand::Up);
    std::thread::sleep(Duration::from_millis(300));
    assert!(!no_carrier("a"), "the link's return restores the carrier");
}

/// A link whose carrier follows its outages withdraws its MPTCP endpoint while down and adds
/// it back when up, so that a connection made during the outage gets a subflow over the link
/// once it returns. (Before, the in-kernel path manager tried the link's join once, during the
/// outage, and never again: the link carried nothing for the rest of the connection.)
#[test]
fn mptcp_joins_a_link_that_comes_back() {
    let Some(emu) = emu(&["a=rate=10mbit,carrier=200ms", "b=rate=10mbit"]) else {
        return;
    };
    if !std::path::Path::new("/proc/sys/net/mptcp/enabled").exists() {
        eprintln!("skipped: kernel without MPTCP");
        return;
    }
    let endpoints = || {
        emu.spawn_in_client(|| {
            let o = std::process::Command::new("ip")
                .args(["mptcp", "endpoint", "show"])
                .output()
                .expect("ip");
            String::from_utf8_lossy(&o.stdout).into_owned()
        })
        .join()
        .unwrap()
        .unwrap()
    };
    let set = |action: LinkCommand| {
        emu.command(&Command {
            link: "a".into(),
            action,
        })
        .unwrap()
    };
    assert!(endpoints().contains("id 1"), "{}", endpoints());
    set(LinkCommand::Down);
    std::thread::sleep(Duration::from_millis(600));
    assert!(
        !endpoints().contains("id 1"),
        "withdrawn while down: {}",
        endpoints()
    );
    let srv = bulk_server(&emu, 7002, true).unwrap();
    let clock = emu.clock();
    let b = emu.link("b").unwrap().client_addr;
    let until = clock.now() + Duration::from_secs(5);
    let download = emu.spawn_in_client(move || {
        bulk_download(clock, b, 7002, true, until, Duration::from_secs(3))
    });
    std::thread::sleep(Duration::from_millis(1500));
    let before = down_bytes(&emu, "a");
    set(LinkCommand::Up);
    let r = download.join().unwrap().unwrap();
    assert!(r.total() > 0);
    assert!(endpoints().contains("id 1"), "added back: {}", endpoints());
    let over_a = down_bytes(&emu, "a") - before;
    assert!(
        over_a > 200_000,
        "after its return link a carried {over_a} bytes of the download"
    );
    srv.stop();
    assert!(emu.warnings().is_empty(), "{:?}", emu.warnings());
}

/// Three hosts: the client reaches the phone over `usb` and the server over `wan`; the phone
/// reaches the server over `cell`. Each connection goes over the link that joins its two
/// hosts, and a link naming an unknown host is refused.
#[test]
fn a_phone_between_client_and_server_is_reached_over_its_own_links() {
    use std::io::{Read, Write};
    if !roam_emu::testing::privileged_or_skip() {
        return;
    }
    let links: Vec<_> = [
        "usb=rate=12mbit",
        "wan=rate=10mbit,delay=10ms",
        "cell=rate=2mbit,delay=50ms",
    ]
    .iter()
    .map(|l| roam_emu::spec::parse_link(l, 1).unwrap())
    .collect();
    let mut ends = std::collections::HashMap::new();
    ends.insert(
        "usb".to_string(),
        ("client".to_string(), "phone".to_string()),
    );
    ends.insert(
        "cell".to_string(),
        ("phone".to_string(), "server".to_string()),
    );
    let bad = Emulator::start(roam_emu::EmuConfig {
        links: links.clone(),
        ends: [(
            "usb".to_string(),
            ("client".to_string(), "tablet".to_string()),
        )]
        .into(),
        hosts: vec!["phone".into()],
        ..Default::default()
    });
    assert!(bad
        .err()
        .unwrap()
        .to_string()
        .contains("unknown host `tablet`"));
    let emu = Emulator::start(roam_emu::EmuConfig {
        links,
        ends,
        hosts: vec!["phone".into()],
        ..Default::default()
    })
    .unwrap();
    let phone = emu.host_addr("phone").unwrap();
    let server = emu.host_addr("server").unwrap();
    // An echo listener on the phone and one on the server.
    let listen = |addr: std::net::Ipv4Addr| {
        move || {
            let l = std::net::TcpListener::bind((addr, 7100)).unwrap();
            let (mut c, _) = l.accept().unwrap();
            let mut buf = vec![0u8; 200_000];
            c.read_exact(&mut buf).unwrap();
            c.write_all(b"ok").unwrap();
        }
    };
    let on_phone = emu.spawn_in_host("phone", listen(phone)).unwrap();
    let on_server = emu.spawn_in_server(listen(server));
    std::thread::sleep(Duration::from_millis(200));
    let send = |to: std::net::Ipv4Addr| {
        move || {
            let mut c = std::net::TcpStream::connect((to, 7100)).unwrap();
            c.write_all(&vec![1u8; 200_000]).unwrap();
            let mut ok = [0u8; 2];
            c.read_exact(&mut ok).unwrap();
            ok
        }
    };
    assert_eq!(
        &emu.spawn_in_client(send(phone)).join().unwrap().unwrap(),
        b"ok"
    );
    assert_eq!(
        &emu.spawn_in_host("phone", send(server))
            .unwrap()
            .join()
            .unwrap()
            .unwrap(),
        b"ok"
    );
    on_phone.join().unwrap().unwrap();
    on_server.join().unwrap().unwrap();
    let up = |n: &str| {
        emu.link(n)
            .unwrap()
            .up
            .delivered_bytes
            .load(Ordering::Relaxed)
    };
    assert!(up("usb") > 200_000, "usb carried {}", up("usb"));
    assert!(up("cell") > 200_000, "cell carried {}", up("cell"));
    assert!(up("wan") < 10_000, "wan carried {}", up("wan"));
}

/// `EmuConfig::congestion_control` is every namespace's default (so programs that never set it,
/// such as the baselines' tools, use it too), and a name the kernel lacks fails the start.
#[test]
fn every_namespace_defaults_to_the_congestion_control_asked() {
    if !roam_emu::testing::privileged_or_skip() {
        return;
    }
    let config = |cc: &str| roam_emu::EmuConfig {
        links: vec![roam_emu::spec::parse_link("l=rate=10mbit", 1).unwrap()],
        congestion_control: Some(cc.into()),
        ..Default::default()
    };
    let emu = Emulator::start(config("cubic")).unwrap();
    let read = || std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control").unwrap();
    let client = emu.spawn_in_client(read).join().unwrap().unwrap();
    let server = emu.spawn_in_server(read).join().unwrap().unwrap();
    assert_eq!((client.trim(), server.trim()), ("cubic", "cubic"));
    drop(emu);
    let e = Emulator::start(config("no-such-cc"))
        .err()
        .expect("an unknown name");
    assert!(e.to_string().contains("no-such-cc"), "{e}");
}
