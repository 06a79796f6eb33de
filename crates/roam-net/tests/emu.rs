//! Multi-sockets through `roam emu`: two emulated links, the client finding them with its scout.
//! Skips with a one-line reason where namespaces and TUN devices are unavailable (CI runs as
//! root, so they run there).

use roam_net::proto::NetKind;
use std::net::{SocketAddr, SocketAddrV4};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use roam_emu::{Command, Emulator, LinkCommand, SERVER_ADDR};
use roam_net::proto::{Deps, Label};
use roam_net::runtime::blocking::{Listener, MultiSocket};
use roam_net::runtime::{LocalNetwork, Networks, Options};

fn emu(links: &[&str]) -> Option<Emulator> {
    roam_emu::testing::emulator_or_skip(links)
}

/// Two links for tests that cut them (WiFi-like and cellular-like), and options whose user
/// timeout (1.5 s) declares a cut connection dead well within a 2.5 s cut.
fn cut_links() -> Option<(Emulator, Options)> {
    let emu = emu(&[
        "wifi=rate=20mbit,delay=10ms,queue=200pkt",
        "cell=rate=8mbit,delay=40ms,queue=200pkt",
    ])?;
    let opts = Options {
        user_timeout: Duration::from_millis(1500),
        ..Options::default()
    };
    Some((emu, opts))
}

/// Take `link` down for `d`, then bring it back.
fn cut(emu: &Emulator, link: &str, d: Duration) {
    let set = |action| {
        emu.command(&Command {
            link: link.into(),
            action,
        })
        .unwrap()
    };
    set(LinkCommand::Down);
    std::thread::sleep(d);
    set(LinkCommand::Up);
}

/// The client's networks: one per emulated link, unmetered.
fn networks(emu: &Emulator) -> Vec<LocalNetwork> {
    emu.links()
        .iter()
        .map(|l| LocalNetwork {
            name: l.name.clone(),
            addr: l.client_addr.into(),
            kind: NetKind::default(),
        })
        .collect()
}

/// Every IROB it delivers.
type Delivered = Vec<(u64, Label, Vec<u8>)>;

/// A listener on the server's `port` that accepts one multi-socket and collects every IROB it
/// delivers until the stream ends; returns once it listens.
fn collecting_server(
    emu: &Emulator,
    port: u16,
    opts: Options,
) -> std::thread::JoinHandle<std::io::Result<Result<Delivered, String>>> {
    let (ready_tx, ready_rx) = mpsc::channel();
    let server = emu.spawn_in_server(move || -> Result<Delivered, String> {
        let l = Listener::bind(SocketAddr::V4(SocketAddrV4::new(SERVER_ADDR, port)), opts)
            .map_err(|e| e.to_string())?;
        ready_tx.send(()).unwrap();
        let ms = l.accept().map_err(|e| e.to_string())?;
        let mut got = Vec::new();
        while let Some(x) = ms.recv_irob().map_err(|e| e.to_string())? {
            got.push(x);
        }
        Ok(got)
    });
    ready_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    server
}

fn content(id: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u64 ^ (id * 2654435761)) as u8)
        .collect()
}

fn size_of(i: u64) -> usize {
    if i.is_multiple_of(5) {
        300
    } else {
        20_000 + (i as usize * 7919) % 150_000
    }
}

#[test]
fn repeated_cuts_lose_and_duplicate_nothing() {
    let Some((emu, opts)) = cut_links() else {
        return;
    };
    const N: u64 = 200;
    let server = collecting_server(&emu, 7100, opts.clone());
    let client = emu.spawn_in_client(move || -> Result<(), String> {
        let ms = MultiSocket::connect(SocketAddr::V4(SocketAddrV4::new(SERVER_ADDR, 7100)), opts)
            .map_err(|e| e.to_string())?;
        for i in 0..N {
            let label = if i.is_multiple_of(5) {
                Label::ForegroundSmall
            } else {
                Label::BackgroundLarge
            };
            let deps = if i.is_multiple_of(7) {
                Deps::AllEarlier
            } else {
                Deps::List(vec![])
            };
            let id = ms
                .begin_irob(label, deps, None)
                .map_err(|e| e.to_string())?;
            assert_eq!(id, i);
            ms.irob_send(id, content(id, size_of(id)))
                .map_err(|e| e.to_string())?;
            ms.end_irob(id).map_err(|e| e.to_string())?;
            std::thread::sleep(Duration::from_millis(20));
        }
        if !ms.close(Duration::from_secs(60)) {
            return Err(format!(
                "{} bytes never acknowledged",
                ms.as_async().unacknowledged()
            ));
        }
        Ok(())
    });
    // Cut each link in turn, long enough for the user timeout to declare its connection dead.
    let start = Instant::now();
    let mut cuts = 0;
    while !client.is_finished() && start.elapsed() < Duration::from_secs(90) {
        for link in ["wifi", "cell"] {
            std::thread::sleep(Duration::from_millis(700));
            cut(&emu, link, Duration::from_millis(2500));
            cuts += 1;
        }
    }
    client.join().unwrap().unwrap().unwrap();
    // The client's goodbye ends the server's stream; a lost goodbye must fail, not hang.
    let t = Instant::now();
    while !server.is_finished() && t.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        server.is_finished(),
        "the server never saw the end of the stream (the client's goodbye was lost)"
    );
    let got = server.join().unwrap().unwrap().unwrap();
    assert!(cuts >= 2, "only {cuts} cuts happened during the transfer");
    let mut seen = std::collections::BTreeSet::new();
    for (id, label, data) in &got {
        assert!(seen.insert(*id), "IROB {id} delivered twice");
        let want = if id.is_multiple_of(5) {
            Label::ForegroundSmall
        } else {
            Label::BackgroundLarge
        };
        assert_eq!(*label, want, "IROB {id} label");
        assert!(
            *data == content(*id, size_of(*id)),
            "IROB {id} corrupted ({} bytes)",
            data.len()
        );
    }
    assert_eq!(
        seen.len() as u64,
        N,
        "IROBs missing: {:?}",
        (0..N).filter(|i| !seen.contains(i)).collect::<Vec<_>>()
    );
}

#[test]
fn foreground_requests_and_background_bulk_share_two_links() {
    // wifi: short round trip; cell: long. Background fills both; foreground takes wifi.
    let Some(emu) = emu(&[
        "wifi=rate=4mbit,delay=10ms,queue=100pkt",
        "cell=rate=4mbit,delay=200ms,queue=100pkt",
    ]) else {
        return;
    };
    let (ready_tx, ready_rx) = mpsc::channel();
    let server = emu.spawn_in_server(move || -> Result<(), String> {
        let l = Listener::bind(
            SocketAddr::V4(SocketAddrV4::new(SERVER_ADDR, 7101)),
            Options::default(),
        )
        .map_err(|e| e.to_string())?;
        ready_tx.send(()).unwrap();
        let ms = l.accept().map_err(|e| e.to_string())?;
        // Bulk: background large IROBs, independent of each other, kept ahead of the links.
        let bulk = ms.clone();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop2 = stop.clone();
        let t = std::thread::spawn(move || {
            while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
                if bulk
                    .send(Label::BackgroundLarge, vec![0u8; 64 * 1024], None)
                    .is_err()
                {
                    break;
                }
            }
        });
        // Requests: answer each foreground request at once with a foreground reply.
        while let Some((_, label, req)) = ms.recv_irob().map_err(|e| e.to_string())? {
            assert_eq!(label, Label::ForegroundSmall);
            if req == b"bye" {
                break;
            }
            let id = ms
                .begin_irob(Label::ForegroundSmall, Deps::List(vec![]), None)
                .map_err(|e| e.to_string())?;
            ms.irob_send(id, req).map_err(|e| e.to_string())?;
            ms.end_irob(id).map_err(|e| e.to_string())?;
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        t.join().unwrap();
        Ok(())
    });
    ready_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let client = emu.spawn_in_client(move || -> Result<(Vec<Duration>, u64), String> {
        let ms = MultiSocket::connect(
            SocketAddr::V4(SocketAddrV4::new(SERVER_ADDR, 7101)),
            Options::default(),
        )
        .map_err(|e| e.to_string())?;
        let mut lat = Vec::new();
        let mut bulk = 0u64;
        std::thread::sleep(Duration::from_secs(2)); // let the bulk transfer fill both links
        for i in 0..12u32 {
            let t0 = Instant::now();
            let id = ms
                .begin_irob(Label::ForegroundSmall, Deps::List(vec![]), None)
                .map_err(|e| e.to_string())?;
            ms.irob_send(id, i.to_be_bytes().to_vec())
                .map_err(|e| e.to_string())?;
            ms.end_irob(id).map_err(|e| e.to_string())?;
            loop {
                let (_, label, data) = ms
                    .recv_irob()
                    .map_err(|e| e.to_string())?
                    .ok_or("server closed")?;
                if label == Label::ForegroundSmall {
                    assert_eq!(data, i.to_be_bytes());
                    lat.push(t0.elapsed());
                    break;
                }
                bulk += data.len() as u64;
            }
            let until = Instant::now() + Duration::from_millis(300);
            while Instant::now() < until {
                if let Some(d) = ms
                    .recv_timeout(Duration::from_millis(50))
                    .map_err(|e| e.to_string())?
                {
                    bulk += d.data.len() as u64;
                }
            }
        }
        ms.send(Label::ForegroundSmall, &b"bye"[..], None)
            .map_err(|e| e.to_string())?;
        Ok((lat, bulk))
    });
    let (mut lat, bulk) = client.join().unwrap().unwrap().unwrap();
    server.join().unwrap().unwrap().unwrap();
    lat.sort();
    let median = lat[lat.len() / 2];
    let wifi = emu
        .link("wifi")
        .unwrap()
        .down
        .delivered_bytes
        .load(std::sync::atomic::Ordering::Relaxed);
    let cell = emu
        .link("cell")
        .unwrap()
        .down
        .delivered_bytes
        .load(std::sync::atomic::Ordering::Relaxed);
    eprintln!(
        "foreground median {median:?}, background {bulk} bytes, wifi {wifi} B, cell {cell} B"
    );
    assert!(bulk > 1_000_000, "background moved only {bulk} bytes");
    assert!(
        wifi > 500_000 && cell > 500_000,
        "background should use both links: wifi {wifi}, cell {cell}"
    );
    // The cell round trip alone is 400 ms: a median below it means foreground took wifi and was
    // not queued behind the bulk transfer.
    assert!(
        median < Duration::from_millis(400),
        "foreground median {median:?}"
    );
}

#[test]
fn a_network_in_an_outage_does_not_hold_up_the_handshake() {
    let Some(emu) = emu(&["wifi=rate=20mbit,delay=10ms", "cell=rate=8mbit,delay=100ms"]) else {
        return;
    };
    let (ready_tx, ready_rx) = mpsc::channel();
    let server = emu.spawn_in_server(move || -> Result<Vec<u8>, String> {
        let l = Listener::bind(
            SocketAddr::V4(SocketAddrV4::new(SERVER_ADDR, 7200)),
            Options::default(),
        )
        .map_err(|e| e.to_string())?;
        ready_tx.send(()).unwrap();
        let ms = l.accept().map_err(|e| e.to_string())?;
        let got = ms.recv_irob().map_err(|e| e.to_string())?;
        Ok(got.map(|x| x.2).unwrap_or_default())
    });
    ready_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    // The first network the client knows of is in an outage from the start.
    emu.command(&Command {
        link: "wifi".into(),
        action: LinkCommand::Down,
    })
    .unwrap();
    let nets = networks(&emu);
    assert_eq!(nets[0].name, "wifi");
    let client = emu.spawn_in_client(move || -> Result<Duration, String> {
        let t0 = Instant::now();
        let ms = MultiSocket::connect(
            SocketAddr::V4(SocketAddrV4::new(SERVER_ADDR, 7200)),
            Options {
                networks: Networks::Explicit(nets),
                ..Options::default()
            },
        )
        .map_err(|e| e.to_string())?;
        let took = t0.elapsed();
        ms.send(Label::ForegroundSmall, &b"over the other network"[..], None)
            .map_err(|e| e.to_string())?;
        if !ms.close(Duration::from_secs(10)) {
            return Err("not acknowledged".into());
        }
        Ok(took)
    });
    let took = client.join().unwrap().unwrap().unwrap();
    let got = server.join().unwrap().unwrap().unwrap();
    assert_eq!(got, b"over the other network");
    // The cell handshake takes two 200 ms round trips; waiting for the dead network first
    // would take the whole connect timeout (10 s).
    assert!(
        took < Duration::from_secs(2),
        "connected after {took:?} with the first network down"
    );
}

/// Either peer may open a connection (paper §4.2): after a cut breaks the WiFi connection, a
/// client that will not reopen it (back-off of an hour) gets it back from the server, which
/// joins at the port the client announced, and the server's data all arrives intact.
#[test]
fn the_server_reopens_a_connection_the_client_does_not() {
    let Some((emu, opts)) = cut_links() else {
        return;
    };
    const N: u64 = 200;
    let (ready_tx, ready_rx) = mpsc::channel();
    let sopts = opts.clone();
    let server = emu.spawn_in_server(move || -> Result<(), String> {
        let l = Listener::bind(SocketAddr::V4(SocketAddrV4::new(SERVER_ADDR, 7300)), sopts)
            .map_err(|e| e.to_string())?;
        ready_tx.send(()).unwrap();
        let ms = l.accept().map_err(|e| e.to_string())?;
        for i in 0..N {
            ms.send(Label::BackgroundLarge, content(i, 30_000), None)
                .map_err(|e| e.to_string())?;
            std::thread::sleep(Duration::from_millis(40));
        }
        if !ms.close(Duration::from_secs(60)) {
            return Err("not all acknowledged".into());
        }
        Ok(())
    });
    ready_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let nets = networks(&emu);
    let mut copts = opts;
    copts.networks = Networks::Explicit(nets);
    copts.config.reconnect_backoff = Duration::from_secs(3600);
    let client = emu.spawn_in_client(move || -> Result<(Vec<u64>, u64), String> {
        let ms = MultiSocket::connect(SocketAddr::V4(SocketAddrV4::new(SERVER_ADDR, 7300)), copts)
            .map_err(|e| e.to_string())?;
        // Every connection the client has had over WiFi (network 1), in order seen.
        let mut wifi = Vec::new();
        let mut n = 0;
        while let Some((id, label, data)) = ms.recv_irob().map_err(|e| e.to_string())? {
            if id != n || label != Label::BackgroundLarge || data != content(id, 30_000) {
                return Err(format!("IROB {id} (expected {n}) wrong or corrupted"));
            }
            n += 1;
            for (conn, net) in ms.as_async().connections() {
                if net == 1 && !wifi.contains(&conn) {
                    wifi.push(conn);
                }
            }
        }
        Ok((wifi, n))
    });
    std::thread::sleep(Duration::from_millis(1000));
    cut(&emu, "wifi", Duration::from_millis(2500));
    server.join().unwrap().unwrap().unwrap();
    let (wifi, n) = client.join().unwrap().unwrap().unwrap();
    assert_eq!(n, N, "IROBs delivered");
    assert!(
        wifi.len() >= 2,
        "no second WiFi connection after the cut (connections seen: {wifi:?}); the client does \
         not reopen, so the server should have"
    );
}

/// Run `ip` with `script` (one command a line, `ip -batch`) in the calling thread's namespace.
fn ip_batch(script: &str) {
    use std::io::Write;
    let mut child = std::process::Command::new("ip")
        .args(["-batch", "-"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("ip runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    // Deleting what is already gone (a route the kernel flushed) is not an error here.
    let _ = child.wait();
}

/// The interface changes a network manager makes, done with `ip` in the client namespace while
/// data flows both ways: the WiFi's address removed and added again, then its link set down
/// and up (the kernel flushes its routes; they are put back as a DHCP client would). The
/// client follows them with its scout (`Networks::Auto`), whose network events take the
/// session's lock from the scout's thread while the timer task and the connections' tasks
/// take it too. No request, reply or bulk byte may be lost, nothing may hang (every reply has
/// to arrive within the deadline), and once the WiFi is back for good the client has a
/// connection over it again.
///
/// This does not catch the old lock-order hang: on the code before it was fixed this passed
/// in 4 of 4 runs, because there the scout's thread panicked ("no reactor running") at the
/// WiFi's first return and followed nothing after it, while broken connections were still
/// reopened by the session. `runtime::lock_order_tests`, which drives the network events
/// directly in a tight loop, hung on the old order in 3 of 3 runs. (With the scout taking the networks' lock before the
/// session's, a network event during traffic could hang the multi-socket; the unit test
/// `runtime::lock_order_tests` plays the same over loopback with direct events.)
#[test]
fn interface_changes_during_two_way_traffic_lose_nothing_and_do_not_hang() {
    let Some((emu, opts)) = cut_links() else {
        return;
    };
    const N: u64 = 300;
    const REPLY: usize = 20_000;
    let wifi = emu.link("wifi").unwrap();
    let (ready_tx, ready_rx) = mpsc::channel();
    let sopts = opts.clone();
    let server = emu.spawn_in_server(move || -> Result<(u64, usize), String> {
        let l = Listener::bind(SocketAddr::V4(SocketAddrV4::new(SERVER_ADDR, 7300)), sopts)
            .map_err(|e| e.to_string())?;
        ready_tx.send(()).unwrap();
        let ms = l.accept().map_err(|e| e.to_string())?;
        let (mut requests, mut bulk) = (0, 0);
        while let Some((_, label, data)) = ms.recv_irob().map_err(|e| e.to_string())? {
            if label == Label::ForegroundSmall {
                let id = u64::from_be_bytes(data[..8].try_into().unwrap());
                if id != requests {
                    return Err(format!("request {id} arrived as number {requests}"));
                }
                requests += 1;
                let mut reply = content(id, REPLY);
                reply[..8].copy_from_slice(&id.to_be_bytes());
                ms.send(Label::BackgroundLarge, reply, None)
                    .map_err(|e| e.to_string())?;
            } else {
                bulk += data.len();
            }
        }
        Ok((requests, bulk))
    });
    ready_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let (done_tx, done_rx) = mpsc::channel();
    let (changed_tx, changed_rx) = mpsc::channel::<()>();
    let client = emu.spawn_in_client(move || {
        let r = (|| -> Result<usize, String> {
            let ms =
                MultiSocket::connect(SocketAddr::V4(SocketAddrV4::new(SERVER_ADDR, 7300)), opts)
                    .map_err(|e| e.to_string())?;
            let reader = ms.clone();
            let replies = std::thread::spawn(move || -> Result<u64, String> {
                let mut got = 0;
                while got < N {
                    let Some((_, _, data)) = reader.recv_irob().map_err(|e| e.to_string())? else {
                        break;
                    };
                    let id = u64::from_be_bytes(data[..8].try_into().unwrap());
                    if data.len() != REPLY || data[8..] != content(id, REPLY)[8..] {
                        return Err(format!("reply {id} corrupted"));
                    }
                    got += 1;
                }
                Ok(got)
            });
            let mut bulk = 0;
            for i in 0..N {
                ms.send(Label::ForegroundSmall, i.to_be_bytes().to_vec(), None)
                    .map_err(|e| e.to_string())?;
                let b = content(i, 30_000);
                bulk += b.len();
                ms.send(Label::BackgroundLarge, b, None)
                    .map_err(|e| e.to_string())?;
                std::thread::sleep(Duration::from_millis(40));
            }
            let got = replies.join().unwrap()?;
            if got != N {
                return Err(format!("{got} of {N} replies"));
            }
            // The scout followed the changes to the end: once the WiFi is back for good, the
            // client has a connection over it again.
            changed_rx
                .recv_timeout(Duration::from_secs(60))
                .map_err(|_| "the changes did not end")?;
            let wifi_net = |ms: &MultiSocket| {
                let net = ms.estimates().into_iter().find(|n| n.name == "wifi")?.net;
                ms.connections().iter().any(|c| c.1 == net).then_some(())
            };
            let deadline = Instant::now() + Duration::from_secs(10);
            while wifi_net(&ms).is_none() {
                if Instant::now() > deadline {
                    return Err(format!(
                        "no connection over the WiFi 10 s after it came back: {:?}",
                        ms.connections()
                    ));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            if !ms.close(Duration::from_secs(60)) {
                return Err("not everything was acknowledged".into());
            }
            Ok(bulk)
        })();
        let _ = done_tx.send(r);
    });
    // The changes, for as long as the traffic lasts (about 12 s), in the client namespace:
    // every 100 ms in one cycle (many events while the timer task runs), every 600 ms in the
    // next (long enough for connections to break and be reopened).
    let (addr, dev) = (wifi.client_addr, wifi.name.clone());
    let routes = format!(
        "route replace default dev {dev} metric 100\nroute replace default dev {dev} table 100\n"
    );
    let changer = emu.spawn_in_client(move || {
        let start = Instant::now();
        let mut cycles = 0;
        while start.elapsed() < Duration::from_secs(11) {
            let pause = Duration::from_millis(if cycles % 2 == 0 { 100 } else { 600 });
            ip_batch(&format!("addr del {addr}/24 dev {dev}\n"));
            std::thread::sleep(pause);
            ip_batch(&format!("addr add {addr}/24 dev {dev}\n{routes}"));
            std::thread::sleep(pause);
            ip_batch(&format!("link set dev {dev} down\n"));
            std::thread::sleep(pause);
            ip_batch(&format!("link set dev {dev} up\n{routes}"));
            std::thread::sleep(pause);
            cycles += 1;
        }
        cycles
    });
    let cycles = changer.join().unwrap().unwrap();
    changed_tx.send(()).unwrap();
    let result = done_rx
        .recv_timeout(Duration::from_secs(120))
        .expect("the client hung: no result 120 s after the interface changes ended");
    let bulk = result.unwrap();
    client.join().unwrap().unwrap();
    let (requests, got_bulk) = server.join().unwrap().unwrap().unwrap();
    assert!(cycles >= 6, "{cycles} cycles of changes");
    assert_eq!((requests, got_bulk), (N, bulk));
}

/// The role a child process of `a_bulk_process_backs_off_while_another_is_interactive` plays
/// (`ROAM_TEST_ROLE`), against the server at `ROAM_TEST_PEER`: `bulk` sends background data
/// until it is killed; `interactive` sends a small foreground message every 300 ms for 8 s.
/// Run by that test in the emulator's client namespace; alone it does nothing.
#[test]
#[ignore = "a child process of a_bulk_process_backs_off_while_another_is_interactive"]
fn child_process_role() {
    let (Ok(role), Ok(peer)) = (
        std::env::var("ROAM_TEST_ROLE"),
        std::env::var("ROAM_TEST_PEER"),
    ) else {
        return;
    };
    let ms = MultiSocket::connect(peer.parse().unwrap(), Options::default()).unwrap();
    match role.as_str() {
        "bulk" => loop {
            ms.send(Label::BackgroundLarge, vec![3u8; 64 << 10], None)
                .unwrap();
        },
        "interactive" => {
            let end = Instant::now() + Duration::from_secs(8);
            while Instant::now() < end {
                ms.send(Label::ForegroundSmall, vec![1u8; 100], None)
                    .unwrap();
                std::thread::sleep(Duration::from_millis(300));
            }
            ms.close(Duration::from_secs(5));
        }
        other => panic!("unknown role {other}"),
    }
}

/// Paper §4.2, several processes: one process uploads in the background while, later, another
/// sends small foreground messages, both over the one emulated WiFi (2 Mbit/s, 40 ms). The
/// device's multi-sockets share their last foreground activity and their bytes in the kernel
/// through shared memory, so the bulk process's anticipatory budget shrinks from 1 s (it has
/// seen no foreground data itself) to 50 ms once the other is active, and the background
/// bytes it holds in the kernel drop with it (each read from the same shared table the
/// processes publish to). Measured: 156 KB alone, 21 KB beside the other; with the foreground
/// time not shared, 151 KB beside it (the test failed).
#[test]
fn a_bulk_process_backs_off_while_another_is_interactive() {
    let Some(emu) = emu(&["wifi=rate=2mbit,delay=20ms,queue=300pkt"]) else {
        return;
    };
    let peer = SocketAddr::V4(SocketAddrV4::new(SERVER_ADDR, 7400));
    let (ready_tx, ready_rx) = mpsc::channel();
    let _server = emu.spawn_in_server(move || {
        let l = Listener::bind(peer, Options::default()).unwrap();
        ready_tx.send(()).unwrap();
        while let Ok(ms) = l.accept() {
            std::thread::spawn(move || while let Ok(Some(_)) = ms.recv() {});
        }
    });
    ready_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let exe = std::env::current_exe().unwrap();
    let child = |role: &'static str| {
        let exe = exe.clone();
        emu.spawn_in_client(move || {
            std::process::Command::new(exe)
                .args(["--exact", "child_process_role", "--ignored", "--nocapture"])
                .env("ROAM_TEST_ROLE", role)
                .env("ROAM_TEST_PEER", peer.to_string())
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .join()
        .unwrap()
        .unwrap()
    };
    // The bulk process's bytes in the kernel over the WiFi, sampled for a second from the
    // shared table (in the client namespace, where the table is the processes').
    let sample = |pid: u32| {
        emu.spawn_in_client(move || {
            let table = roam_net::runtime::shm::SharedCounts::open_default().unwrap();
            let mut v = Vec::new();
            for _ in 0..10 {
                let held = table
                    .entries()
                    .into_iter()
                    .filter(|e| e.pid == pid && e.network == "wifi")
                    .map(|e| e.outstanding)
                    .sum::<u64>();
                v.push(held);
                std::thread::sleep(Duration::from_millis(100));
            }
            v.sort_unstable();
            v[v.len() / 2]
        })
        .join()
        .unwrap()
        .unwrap()
    };
    let mut bulk = child("bulk");
    std::thread::sleep(Duration::from_secs(6));
    let alone = sample(bulk.id());
    let mut interactive = child("interactive");
    std::thread::sleep(Duration::from_secs(3));
    let beside = sample(bulk.id());
    let _ = bulk.kill();
    let _ = bulk.wait();
    let done = interactive.wait().unwrap();
    assert!(done.success(), "the interactive process failed: {done}");
    eprintln!("the bulk process held {alone} B in the kernel alone, {beside} B beside the other");
    assert!(
        alone > 100_000,
        "the bulk process alone held only {alone} bytes in the kernel (expected its 1 s budget)"
    );
    assert!(
        beside * 4 < alone,
        "the bulk process held {beside} bytes beside the interactive one, {alone} alone"
    );
}

/// Over TLS on a slow link, a reply larger than the socket takes at once still goes out at
/// once: a TLS write that meets a full socket leaves records buffered in the TLS session, and
/// the writer must flush them (it once did not, and each such reply waited for the 10 s
/// acknowledgement timeout's probe to push it out).
#[test]
fn large_tls_replies_on_a_slow_link_are_not_held_back() {
    let Some(emu) = emu(&["wan=rate=10mbit,delay=10ms"]) else {
        return;
    };
    let c = rcgen::generate_simple_self_signed(vec!["roam.test".to_string()]).unwrap();
    let (cert, key) = (c.cert.pem(), c.signing_key.serialize_pem());
    let sopts = Options {
        tls: Some(roam_net::runtime::Tls::server(cert.as_bytes(), key.as_bytes()).unwrap()),
        ..Options::default()
    };
    let copts = Options {
        tls: Some(roam_net::runtime::Tls::client(cert.as_bytes(), "roam.test").unwrap()),
        networks: Networks::Explicit(networks(&emu)),
        ..Options::default()
    };
    let (ready_tx, ready_rx) = mpsc::channel();
    let addr = SocketAddr::V4(SocketAddrV4::new(SERVER_ADDR, 7101));
    let server = emu.spawn_in_server(move || {
        let l = Listener::bind(addr, sopts).unwrap();
        ready_tx.send(()).unwrap();
        let ms = l.accept().unwrap();
        while let Some((_, _, req)) = ms.recv_irob().unwrap() {
            let reply = content(req[0] as u64, 131_000);
            ms.send(Label::ForegroundLarge, reply, None).unwrap();
        }
    });
    ready_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let slowest = emu
        .spawn_in_client(move || {
            let ms = MultiSocket::connect(addr, copts).unwrap();
            let mut slowest = Duration::ZERO;
            for i in 0..5u8 {
                let t = Instant::now();
                ms.send(Label::ForegroundSmall, vec![i; 40], None).unwrap();
                let (_, _, reply) = ms.recv_irob().unwrap().unwrap();
                assert_eq!(reply, content(i as u64, 131_000));
                slowest = slowest.max(t.elapsed());
            }
            ms.close(Duration::from_secs(10));
            slowest
        })
        .join()
        .unwrap()
        .unwrap();
    server.join().unwrap().unwrap();
    // 131 KB at 10 Mbit/s is about 0.1 s; the bug held one back for 10 s.
    assert!(slowest < Duration::from_secs(3), "a reply took {slowest:?}");
}

/// Five networks at once (issue 48: 5G, LTE, two WiFis, a tether): background data is striped
/// over every one of them, and when three go down mid-transfer the other two carry the rest,
/// every IROB delivered once and intact.
#[test]
fn five_networks_stripe_background_data_and_survive_losing_three() {
    let Some(emu) = emu(&[
        "nr=rate=6mbit,delay=15ms,queue=100pkt",
        "lte=rate=4mbit,delay=40ms,queue=100pkt",
        "wifi1=rate=5mbit,delay=5ms,queue=100pkt",
        "wifi2=rate=3mbit,delay=8ms,queue=100pkt",
        "tether=rate=2mbit,delay=25ms,queue=100pkt",
    ]) else {
        return;
    };
    let opts = Options {
        user_timeout: Duration::from_millis(1500),
        ..Options::default()
    };
    const N: u64 = 160;
    const LEN: usize = 64 * 1024;
    let server = collecting_server(&emu, 7105, opts.clone());
    let client = emu.spawn_in_client(move || -> Result<usize, String> {
        let ms = MultiSocket::connect(SocketAddr::V4(SocketAddrV4::new(SERVER_ADDR, 7105)), opts)
            .map_err(|e| e.to_string())?;
        // Every network connected before the data starts (the scout finds them all).
        let t = Instant::now();
        while ms.estimates().len() < 5 && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let networks = ms.estimates().len();
        for i in 0..N {
            ms.send(Label::BackgroundLarge, content(i, LEN), None)
                .map_err(|e| e.to_string())?;
        }
        if !ms.close(Duration::from_secs(90)) {
            return Err(format!(
                "{} bytes never acknowledged",
                ms.as_async().unacknowledged()
            ));
        }
        Ok(networks)
    });
    // Striped: after 3 s every link has carried a share of the upload.
    std::thread::sleep(Duration::from_secs(3));
    let up = |name: &str| {
        emu.link(name)
            .unwrap()
            .up
            .delivered_bytes
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    let names = ["nr", "lte", "wifi1", "wifi2", "tether"];
    let before: Vec<u64> = names.iter().map(|n| up(n)).collect();
    // Three networks go, for good.
    for link in ["nr", "wifi1", "tether"] {
        emu.command(&Command {
            link: link.into(),
            action: LinkCommand::Down,
        })
        .unwrap();
    }
    let networks = client.join().unwrap().unwrap().unwrap();
    let got = server.join().unwrap().unwrap().unwrap();
    let after: Vec<u64> = names.iter().map(|n| up(n)).collect();
    eprintln!("networks {networks}; upload per link at 3 s {before:?}, at the end {after:?}");
    assert_eq!(networks, 5, "the client found {networks} networks");
    for (n, b) in names.iter().zip(&before) {
        assert!(
            *b > 100_000,
            "{n} carried only {b} bytes of the striped upload"
        );
    }
    let mut seen = std::collections::BTreeSet::new();
    for (id, label, data) in &got {
        assert!(seen.insert(*id), "IROB {id} delivered twice");
        assert_eq!(*label, Label::BackgroundLarge);
        assert!(*data == content(*id, LEN), "IROB {id} corrupted");
    }
    assert_eq!(seen.len() as u64, N, "IROBs missing");
    // The rest went over the two networks left.
    let rest: u64 = [1, 3].iter().map(|&i| after[i] - before[i]).sum();
    assert!(
        rest > 2_000_000,
        "the two networks left carried only {rest} bytes"
    );
}
