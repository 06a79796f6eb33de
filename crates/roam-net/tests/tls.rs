//! TLS on every connection: data crosses intact over the first connection and a join; a
//! client that does not trust the server's certificate, or expects another name, cannot
//! connect; a plain client cannot talk to a TLS listener.

use roam_net::proto::NetKind;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::time::Duration;

use roam_net::proto::wire::{Decoder, WireLimits};
use roam_net::proto::{Deps, Label};
use roam_net::runtime::blocking::{Listener, MultiSocket};
use roam_net::runtime::{LocalNetwork, Networks, Options, Tls};

struct Pki {
    cert: String,
    key: String,
}

fn pki() -> Pki {
    let c = rcgen::generate_simple_self_signed(vec!["roam.test".to_string()]).unwrap();
    Pki {
        cert: c.cert.pem(),
        key: c.signing_key.serialize_pem(),
    }
}

fn net(addr: [u8; 4]) -> LocalNetwork {
    LocalNetwork {
        name: "lo".into(),
        addr: Ipv4Addr::from(addr).into(),
        kind: NetKind::default(),
    }
}

fn client(nets: Vec<LocalNetwork>, tls: Tls) -> Options {
    Options {
        networks: Networks::Explicit(nets),
        tls: Some(tls),
        connect_timeout: Duration::from_secs(3),
        ..Options::default()
    }
}

fn server(p: &Pki) -> Listener {
    let tls = Tls::server(p.cert.as_bytes(), p.key.as_bytes()).unwrap();
    let opts = Options {
        tls: Some(tls),
        handshake_timeout: Duration::from_secs(2),
        ..Options::default()
    };
    Listener::bind("127.0.0.1:0".parse().unwrap(), opts).unwrap()
}

#[test]
fn data_crosses_tls_on_the_first_connection_and_a_join() {
    let p = pki();
    let l = server(&p);
    let addr = l.local_addr();
    let tls = Tls::client(p.cert.as_bytes(), "roam.test").unwrap();
    // Two "networks" on loopback: two source addresses, so the second connection is a join.
    let opts = client(vec![net([127, 0, 0, 1]), net([127, 0, 0, 2])], tls);
    let t = std::thread::spawn(move || MultiSocket::connect(addr, opts).unwrap());
    let s = l.accept().unwrap();
    let c = t.join().unwrap();
    let bulk: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let a = c
        .begin_irob(Label::BackgroundLarge, Deps::List(vec![]), None)
        .unwrap();
    c.irob_send(a, bulk.clone()).unwrap();
    c.end_irob(a).unwrap();
    let b = c.send(Label::ForegroundSmall, &b"ping"[..], None).unwrap();
    let mut got = std::collections::HashMap::new();
    for _ in 0..2 {
        let (id, _, data) = s.recv_irob().unwrap().unwrap();
        got.insert(id, data);
    }
    assert_eq!(got[&a], bulk);
    assert_eq!(got[&b], b"ping");
    // Both client networks joined the session (the second connection authenticated inside TLS).
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while s.connections().len() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(s.connections().len(), 2, "{:?}", s.connections());
    s.send(Label::ForegroundSmall, &b"pong"[..], None).unwrap();
    let (_, _, data) = c.recv_irob().unwrap().unwrap();
    assert_eq!(data, b"pong");
    assert!(c.close(Duration::from_secs(5)));
}

#[test]
fn untrusted_or_misnamed_servers_are_refused() {
    let p = pki();
    let l = server(&p);
    let addr = l.local_addr();
    let other = pki();
    let wrong_root = Tls::client(other.cert.as_bytes(), "roam.test").unwrap();
    let e = MultiSocket::connect(addr, client(vec![net([127, 0, 0, 1])], wrong_root)).unwrap_err();
    assert!(e.to_string().contains("certificate"), "{e}");
    let wrong_name = Tls::client(p.cert.as_bytes(), "elsewhere.test").unwrap();
    let e = MultiSocket::connect(addr, client(vec![net([127, 0, 0, 1])], wrong_name)).unwrap_err();
    assert!(e.to_string().contains("certificate"), "{e}");
    // The listener still serves a client that trusts it.
    let good = Tls::client(p.cert.as_bytes(), "roam.test").unwrap();
    let opts = client(vec![net([127, 0, 0, 1])], good);
    let t = std::thread::spawn(move || MultiSocket::connect(addr, opts).unwrap());
    let s = l.accept().unwrap();
    let c = t.join().unwrap();
    c.send(Label::ForegroundSmall, &b"hello"[..], None).unwrap();
    assert_eq!(s.recv_irob().unwrap().unwrap().2, b"hello");
}

#[test]
fn a_plain_client_gets_nothing_from_a_tls_listener() {
    let p = pki();
    let l = server(&p);
    // Speak the plain protocol's first bytes: the TLS acceptor rejects them and closes.
    let mut t = TcpStream::connect(l.local_addr()).unwrap();
    t.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    t.write_all(&[0u8; 64]).unwrap();
    let mut buf = Vec::new();
    let _ = t.read_to_end(&mut buf);
    // What comes back (a TLS alert, if anything) is no protocol frame.
    let mut dec = Decoder::new(WireLimits::default());
    dec.buffer_mut().extend_from_slice(&buf);
    assert!(!matches!(dec.next_frame(), Ok(Some(_))), "{buf:?}");
    assert!(matches!(
        l.accept_timeout(Duration::from_millis(200)),
        Ok(None)
    ));
}

#[test]
fn bad_pem_is_a_clear_error() {
    let e = Tls::client(b"not pem", "roam.test").unwrap_err();
    assert!(e.to_string().contains("TLS roots"), "{e}");
    let p = pki();
    let e = Tls::server(p.cert.as_bytes(), b"garbage").unwrap_err();
    assert!(e.to_string().contains("TLS private key"), "{e}");
    let e = Tls::client(p.cert.as_bytes(), "not a name!").unwrap_err();
    assert!(e.to_string().contains("server name"), "{e}");
}
