//! Issue 43, "every server safe to expose": the tiers (`roam parcel serve`) against peers that
//! play the attacker over loopback, each attack one that succeeded before the fix: silent and
//! slow peers holding every link slot (and a trickled authentication), a trickled request
//! holding a link, key material readable by others, and a replayed or forged control update
//! changing the phone's control state. (What a tier holds for a peer that never authenticates
//! is measured in `preauth_memory.rs`, a binary of its own for its counting allocator.)

use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use roam_net::proto::NetKind;
use roam_net::runtime::blocking::MultiSocket;
use roam_net::runtime::{LocalNetwork, Networks, Tls};
use roam_net::{Deps, Label};
use roam_store::ownership::Tier;
use roam_store::parcel::{self, ParcelDir};
use roam_store::tier::net::{link_options, recv_message, send_message, Deadlines, Limits};
use roam_store::tier::wire::{encode, hex, Request, LAST, MORE};
use roam_store::tier::{serve, serve_with, Held, ServeHandle, TierClient, TierService};
use roam_store::StoreError;

const SECRET: [u8; 32] = [7; 32];

/// A directory removed when dropped.
struct TempDir(PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp(tag: &str) -> TempDir {
    let r = std::env::temp_dir().join(format!("roam-hostile-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&r);
    TempDir(r)
}

fn tls_pair() -> (Tls, String) {
    let c = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert, key) = (c.cert.pem(), c.signing_key.serialize_pem());
    (Tls::server(cert.as_bytes(), key.as_bytes()).unwrap(), cert)
}

fn ctls(cert: &str) -> Option<Tls> {
    Some(Tls::client(cert.as_bytes(), "localhost").unwrap())
}

/// A server tier under `limits`, with its certificate.
fn server(dir: &Path, limits: Limits) -> (ServeHandle, String) {
    let (tls, cert) = tls_pair();
    let svc = Arc::new(TierService::open(Tier::Server, dir, SECRET).unwrap());
    let h = serve_with(svc, "127.0.0.1:0".parse().unwrap(), Some(tls), limits).unwrap();
    (h, cert)
}

/// The attacker's raw link: a multi-socket with the tier's options, nothing sent.
fn raw(addr: SocketAddr, cert: &str) -> MultiSocket {
    MultiSocket::connect(addr, link_options(ctls(cert))).unwrap()
}

/// Whether the tier has closed (or aborted) the raw link `ms`.
fn closed(ms: &MultiSocket) -> bool {
    ms.peer_closed() || ms.try_recv().is_err()
}

/// Wait up to `limit` for `ms` to be closed; how long it took.
fn closed_within(ms: &MultiSocket, limit: Duration) -> Option<Duration> {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if closed(ms) {
            return Some(t0.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Wait up to 10 s for `cond`.
fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < Duration::from_secs(10), "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Authenticate the raw link `ms` with the user's secret.
fn auth(ms: &MultiSocket) {
    let far = Instant::now() + Duration::from_secs(10);
    let msg = encode(
        &Request::Auth {
            secret: hex(&SECRET),
        },
        b"",
    );
    send_message(ms, Label::ForegroundSmall, &msg, far, "tier").unwrap();
    recv_message(ms, Deadlines::message(&Limits::default()), "tier")
        .unwrap()
        .unwrap();
}

/// Finding 1: silent peers filling the pending pool (and beyond: before the fix, 32 of them
/// took all 32 link slots and locked the user out) do not keep the user out, take no
/// authenticated slot, and are closed at the authentication deadline; a wrong secret gives
/// its slot back at once.
#[test]
fn silent_peers_take_no_slot_from_the_user() {
    let tmp = temp("slots");
    let limits = Limits {
        max_links: 4,
        max_pending: 4,
        auth_deadline: Duration::from_secs(3),
        ..Limits::default()
    };
    let (h, cert) = server(&tmp.0, limits);
    let silent: Vec<MultiSocket> = (0..12).map(|_| raw(h.addr(), &cert)).collect();
    eventually("the pending pool fills", || h.links().pending == 4);
    // The oldest went to make room: at most the pool's size wait, none authenticated.
    eventually("the oldest silent links are closed", || {
        silent.iter().filter(|ms| closed(ms)).count() >= 8
    });
    assert_eq!(h.links().authenticated, 0);
    // The user still gets in, however many silent peers there are.
    for _ in 0..4 {
        let user = TierClient::connect("server", h.addr(), ctls(&cert), &SECRET)
            .expect("the user is locked out by silent peers");
        assert!(user.owner("p").unwrap_err().to_string().contains("unknown"));
        std::mem::forget(user); // holds its slot
    }
    assert_eq!(h.links().authenticated, 4);
    // Authenticated slots are full: one more user is told so (silent peers never were).
    let e = TierClient::connect("server", h.addr(), ctls(&cert), &SECRET)
        .err()
        .expect("a fifth link")
        .to_string();
    assert!(e.contains("serves 4 links already"), "{e}");
    // The silent ones are all gone by the deadline, and the pool is empty.
    for ms in &silent {
        assert!(closed_within(ms, Duration::from_secs(5)).is_some());
    }
    eventually("the pending pool empties", || h.links().pending == 0);
    // A wrong secret: refused, its slot given back at once.
    let e = TierClient::connect("server", h.addr(), ctls(&cert), &[9; 32])
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("wrong access secret") || e.contains("closed"),
        "{e}"
    );
    eventually("a failed authentication gives its slot back", || {
        h.links().pending == 0
    });
}

/// The attacker's raw link from local address `from`.
fn raw_from(from: Ipv4Addr, addr: SocketAddr, cert: &str) -> MultiSocket {
    let mut o = link_options(ctls(cert));
    o.networks = Networks::Explicit(vec![LocalNetwork {
        name: "lo".into(),
        addr: from.into(),
        kind: NetKind::default(),
    }]);
    MultiSocket::connect(addr, o).unwrap()
}

/// Per-source limits on links not yet authenticated: a flood of silent links from one source
/// address only ever closes its own, so a link from another source keeps its place in the
/// pool (before, the pool closed its oldest link whoever's it was: the first link here, from
/// 127.0.0.2, was closed as the flood from 127.0.0.1 came in).
#[test]
fn a_flood_from_one_source_closes_only_its_own_links() {
    let tmp = temp("persource");
    let limits = Limits {
        max_pending: 6,
        max_pending_per_source: 4,
        auth_deadline: Duration::from_secs(8),
        ..Limits::default()
    };
    let per_source = limits.max_pending_per_source;
    let (h, cert) = server(&tmp.0, limits);
    let other = raw_from(Ipv4Addr::new(127, 0, 0, 2), h.addr(), &cert);
    eventually("the first link is pending", || h.links().pending == 1);
    let flood: Vec<MultiSocket> = (0..12)
        .map(|_| raw_from(Ipv4Addr::LOCALHOST, h.addr(), &cert))
        .collect();
    eventually("the flood's oldest links are closed", || {
        flood.iter().filter(|ms| closed(ms)).count() >= flood.len() - per_source
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !closed(&other),
        "a flood from 127.0.0.1 closed the link from 127.0.0.2"
    );
    assert_eq!(h.links().pending, 1 + per_source);
    // The link from the other source still authenticates.
    auth(&other);
    assert_eq!(h.links().authenticated, 1);
}

/// Finding 1: the authentication deadline covers the whole authentication, not each read: a
/// peer trickling its `Auth` a byte every 200 ms (before the fix, a silent peer held its link
/// for the idle timeout, 120 s, and a trickling one for ever) is closed at the deadline.
#[test]
fn a_trickled_authentication_is_cut_at_the_deadline() {
    let tmp = temp("authtrickle");
    let limits = Limits {
        auth_deadline: Duration::from_secs(1),
        ..Limits::default()
    };
    let (h, cert) = server(&tmp.0, limits);
    let silent = raw(h.addr(), &cert);
    let took = closed_within(&silent, Duration::from_secs(5)).expect("a silent peer stays");
    assert!(took < Duration::from_secs(3), "{took:?}");

    let ms = raw(h.addr(), &cert);
    let auth = encode(
        &Request::Auth {
            secret: hex(&SECRET),
        },
        b"",
    );
    let irob = ms
        .begin_irob(Label::ForegroundSmall, Deps::AllEarlier, None)
        .unwrap();
    ms.irob_send(irob, vec![LAST]).unwrap();
    let t0 = Instant::now();
    for b in auth {
        if closed(&ms) {
            break;
        }
        let _ = ms.irob_send(irob, vec![b]);
        std::thread::sleep(Duration::from_millis(200));
    }
    let took = t0.elapsed();
    assert!(
        closed(&ms) && took < Duration::from_secs(3),
        "a trickled authentication held its link for {took:?}"
    );
    eventually("its slot is given back", || h.links().pending == 0);
}

/// Finding 2: a request must arrive whole within the message deadline of its first byte. An
/// authenticated peer trickling a byte every 300 ms (each well within the idle timeout, which
/// before the fix restarted with every byte and let it hold the link for ever) is closed.
#[test]
fn a_trickled_request_is_cut_at_its_deadline() {
    let tmp = temp("trickle");
    let limits = Limits {
        idle: Duration::from_secs(2),
        message_deadline: Duration::from_secs(1),
        ..Limits::default()
    };
    let (h, cert) = server(&tmp.0, limits);
    let ms = raw(h.addr(), &cert);
    auth(&ms);
    assert_eq!(h.links().authenticated, 1);
    let irob = ms
        .begin_irob(Label::ForegroundSmall, Deps::AllEarlier, None)
        .unwrap();
    ms.irob_send(irob, vec![MORE]).unwrap();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(6) && !closed(&ms) {
        let _ = ms.irob_send(irob, vec![b' ']);
        std::thread::sleep(Duration::from_millis(300));
    }
    let took = t0.elapsed();
    assert!(
        closed(&ms) && took < Duration::from_secs(3),
        "a peer trickling a byte every 300 ms held its link for {took:?}"
    );
    eventually("its slot is given back", || h.links().authenticated == 0);
    // An honest request still goes through, and an idle link is closed after the idle time.
    let user = TierClient::connect("server", h.addr(), ctls(&cert), &SECRET).unwrap();
    assert!(user.owner("p").unwrap_err().to_string().contains("unknown"));
    eventually("an idle link is closed", || h.links().authenticated == 0);
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// The three tiers on loopback, a parcel initialised and resumed on a client.
struct Three {
    tmp: TempDir,
    _server: ServeHandle,
    _phone: ServeHandle,
    server: TierClient,
    phone: TierClient,
    phone_svc: Arc<TierService>,
    dir: ParcelDir,
}

fn three(tag: &str) -> Three {
    let tmp = temp(tag);
    let (tls, cert) = tls_pair();
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let ssvc = Arc::new(TierService::open(Tier::Server, &tmp.0.join("server"), SECRET).unwrap());
    let s = serve(ssvc, any, Some(tls.clone())).unwrap();
    let phone_svc = Arc::new(TierService::open(Tier::Phone, &tmp.0.join("phone"), SECRET).unwrap());
    let p = serve(phone_svc.clone(), any, Some(tls)).unwrap();
    let server = TierClient::connect("server", s.addr(), ctls(&cert), &SECRET).unwrap();
    let phone = TierClient::connect("phone", p.addr(), ctls(&cert), &SECRET).unwrap();
    let dir = ParcelDir::new(tmp.0.join("client/p"));
    std::fs::create_dir_all(tmp.0.join("client/p")).unwrap();
    std::fs::write(dir.image("disk"), vec![3u8; 300_000]).unwrap();
    parcel::init(&server, "p", &dir, &mut |_, _| {}).unwrap();
    parcel::resume(&server, Some(&phone), "p", &dir, &mut |_, _| {}).unwrap();
    Three {
        tmp,
        _server: s,
        _phone: p,
        server,
        phone,
        phone_svc,
        dir,
    }
}

/// Finding 4: every file holding a secret is the owner's alone (before the fix: the umask's
/// 0644), and one that others may read is refused, naming the file and the fix.
#[test]
fn key_material_is_private_and_exposed_key_files_are_refused() {
    let t = three("modes");
    let r = &t.tmp.0;
    let private = |files: &[PathBuf]| {
        for f in files {
            assert_eq!(mode(f) & 0o077, 0, "{} is {:o}", f.display(), mode(f));
        }
    };
    private(&[
        r.join("client/p/control.json"),
        r.join("client/p/disk.img"),
        r.join("server/registry.json"),
        r.join("server/control/p.json"),
    ]);
    parcel::suspend(
        &t.server,
        Some(&t.phone),
        Tier::Phone,
        &t.dir,
        &mut |_, _| {},
    )
    .unwrap();
    private(&[r.join("phone/control/p.json"), r.join("phone/owned/p")]);
    for d in [r.join("server"), r.join("phone")] {
        assert_eq!(mode(&d) & 0o077, 0, "{} is {:o}", d.display(), mode(&d));
    }

    // A control state others may read is refused, as OpenSSH refuses such a key.
    let held = Held {
        control: roam_store::tier::Control::new("q", 1, &[1; 32], &[]),
        nonce: hex(&[2; 16]),
    };
    let q = ParcelDir::new(r.join("client/q"));
    q.write_held(&held).unwrap();
    let f = r.join("client/q/control.json");
    assert_eq!(mode(&f), 0o600);
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = q.held().unwrap_err();
    assert!(matches!(e, StoreError::Exposed { .. }), "{e}");
    let e = e.to_string();
    assert!(
        e.contains(&f.display().to_string()) && e.contains("chmod 600"),
        "{e}"
    );
    // So is a tier's ownership record.
    let reg = r.join("spare/registry.json");
    std::fs::create_dir_all(reg.parent().unwrap()).unwrap();
    std::fs::write(&reg, b"{\"parcels\":{}}").unwrap();
    std::fs::set_permissions(&reg, std::fs::Permissions::from_mode(0o640)).unwrap();
    let e = TierService::open(Tier::Server, &r.join("spare"), SECRET)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("registry.json") && e.contains("chmod 600"),
        "{e}"
    );
}

/// Finding 5: the phone changes its control state only by compare-and-swap. Before the fix a
/// replayed `PutControl` of an old version overwrote the phone's current one and a
/// `DropControl` naming nothing dropped it.
#[test]
fn a_replayed_or_forged_control_update_changes_nothing() {
    let t = three("cas");
    let p = |e: &StoreError| e.to_string();
    parcel::suspend(
        &t.server,
        Some(&t.phone),
        Tier::Phone,
        &t.dir,
        &mut |_, _| {},
    )
    .unwrap();
    let recorded = t.phone.get_control("p", None).unwrap(); // version 2
    parcel::resume(&t.server, Some(&t.phone), "p", &t.dir, &mut |_, _| {}).unwrap();
    std::fs::write(t.dir.image("disk"), vec![4u8; 300_000]).unwrap();
    parcel::suspend(
        &t.server,
        Some(&t.phone),
        Tier::Phone,
        &t.dir,
        &mut |_, _| {},
    )
    .unwrap();
    let current = t.phone_svc.read_held("control", "p").unwrap().unwrap();
    assert_eq!(current.control.version, 3);

    // A plain put is refused on the phone; a replayed swap (it replaced no state) is stale.
    let e = t.phone.put_control(&recorded).unwrap_err();
    assert!(p(&e).contains("compare-and-swap"), "{e}");
    let e = t.phone.swap_control(&recorded, None).unwrap_err();
    assert!(p(&e).contains("stale control update"), "{e}");
    // A forged swap naming a guessed nonce, and a swap naming the state it is (a replay of
    // the swap that put it).
    let e = t
        .phone
        .swap_control(&recorded, Some(&hex(&[9; 16])))
        .unwrap_err();
    assert!(p(&e).contains("stale"), "{e}");
    // Drops naming a stale or a forged nonce.
    for n in [recorded.nonce.clone(), hex(&[9; 16])] {
        let e = t.phone.drop_control("p", &n).unwrap_err();
        assert!(p(&e).contains("stale control update"), "{e}");
    }
    assert_eq!(
        t.phone_svc.read_held("control", "p").unwrap().unwrap(),
        current,
        "nothing changed"
    );
    // In the process, the refusal is the typed error.
    let r = t.phone_svc.answer(
        Request::DropControl {
            parcel: "p".into(),
            nonce: recorded.nonce.clone(),
        },
        b"",
        Duration::ZERO,
    );
    assert!(
        matches!(r, Err(StoreError::StaleControl { held: Some(3), .. })),
        "{r:?}"
    );
    // The owner's own flow goes on: a resume from the phone drops its state under its nonce.
    let dir2 = ParcelDir::new(t.tmp.0.join("client2/p"));
    parcel::resume(&t.server, Some(&t.phone), "p", &dir2, &mut |_, _| {}).unwrap();
    assert!(t.phone_svc.read_held("control", "p").unwrap().is_none());
}
