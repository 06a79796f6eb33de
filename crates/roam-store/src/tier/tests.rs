//! The three tiers over loopback links (TLS, the access secret): the parcel's life from init
//! through checkout, suspend to the phone, resume from it, suspend again and self-cleaning;
//! and what each fault or bad input does (nothing changes, a clear error).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use roam_net::runtime::Tls;

use super::*;
use crate::ownership::Tier;
use crate::parcel::{self, ParcelDir};
use crate::tier::wire::Request;

const SECRET: [u8; 32] = [7; 32];

struct Tiers {
    _tmp: TempDir,
    root: std::path::PathBuf,
    server: ServeHandle,
    phone: ServeHandle,
    cert: String,
    tls: Tls,
    server_svc: Arc<TierService>,
    phone_svc: Arc<TierService>,
}

/// A directory removed when dropped.
struct TempDir(std::path::PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tls_pair() -> (Tls, String) {
    let c = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert, key) = (c.cert.pem(), c.signing_key.serialize_pem());
    (Tls::server(cert.as_bytes(), key.as_bytes()).unwrap(), cert)
}

fn client_tls(cert: &str) -> Option<Tls> {
    Some(Tls::client(cert.as_bytes(), "localhost").unwrap())
}

fn link(name: &str, addr: SocketAddr, cert: &str) -> TierClient {
    TierClient::connect(name, addr, client_tls(cert), &SECRET).unwrap()
}

fn start(tag: &str) -> Tiers {
    let root = std::env::temp_dir().join(format!("roam-tiers-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let (tls, cert) = tls_pair();
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let server_svc =
        Arc::new(TierService::open(Tier::Server, &root.join("server"), SECRET).unwrap());
    let server = serve(server_svc.clone(), any, Some(tls.clone())).unwrap();
    let (saddr, scert) = (server.addr(), cert.clone());
    let phone_svc = Arc::new(
        TierService::open(Tier::Phone, &root.join("phone"), SECRET)
            .unwrap()
            .with_upstream(Box::new(move || {
                TierClient::connect("server", saddr, client_tls(&scert), &SECRET)
            })),
    );
    let phone = serve(phone_svc.clone(), any, Some(tls.clone())).unwrap();
    Tiers {
        _tmp: TempDir(root.clone()),
        root,
        server,
        phone,
        cert,
        tls,
        server_svc,
        phone_svc,
    }
}

/// An image of `chunks` chunks, chunk `i` filled from `seed + i`.
fn write_image(path: &Path, chunks: usize, seed: u8) {
    let mut v = Vec::new();
    for i in 0..chunks {
        let b = seed.wrapping_add(i as u8);
        v.extend((0..crate::CHUNK_SIZE).map(|j| b ^ (j % 251) as u8));
    }
    v.extend_from_slice(b"tail");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, v).unwrap();
}

fn nothing(_: u64, _: u64) {}

#[test]
fn a_parcel_goes_round_the_three_tiers_and_only_dirty_chunks_move() {
    let t = start("life");
    let server = link("server", t.server.addr(), &t.cert);
    let phone = link("phone", t.phone.addr(), &t.cert);
    let dir = ParcelDir::new(t.root.join("client/p1"));
    write_image(&dir.image("disk"), 12, 1);
    write_image(&dir.image("memory"), 4, 100);
    let original = std::fs::read(dir.image("disk")).unwrap();

    let m = parcel::init(&server, "p1", &dir, &mut nothing).unwrap();
    // Both images end in the same 4-byte tail, which seals alike and is sent once.
    assert_eq!(m.chunks, 12 + 4 + 1);
    assert!(
        !dir.image("disk").exists(),
        "init leaves no plaintext behind"
    );
    assert_eq!(server.owner("p1").unwrap().0, Tier::Server);

    // Checkout: from the server.
    parcel::resume(&server, Some(&phone), "p1", &dir, &mut nothing).unwrap();
    assert_eq!(std::fs::read(dir.image("disk")).unwrap(), original);
    assert_eq!(server.owner("p1").unwrap().0, Tier::Client);

    // The user works: two disk chunks change. Suspend to the phone sends just those.
    let mut disk = original.clone();
    disk[5] ^= 0xff;
    disk[3 * crate::CHUNK_SIZE + 9] ^= 0xff;
    std::fs::write(dir.image("disk"), &disk).unwrap();
    let m = parcel::suspend(&server, Some(&phone), Tier::Phone, &dir, &mut nothing).unwrap();
    assert_eq!((m.chunks, m.dirty, m.version), (2, 2, 2));
    assert_eq!(server.owner("p1").unwrap().0, Tier::Phone);
    assert!(dir.held().unwrap().is_none() && !dir.image("disk").exists());

    // Resume elsewhere: dirty chunks from the phone, the rest from the server.
    let dir2 = ParcelDir::new(t.root.join("client2/p1"));
    parcel::resume(&server, Some(&phone), "p1", &dir2, &mut nothing).unwrap();
    assert_eq!(std::fs::read(dir2.image("disk")).unwrap(), disk);
    assert_eq!(server.owner("p1").unwrap().0, Tier::Client);
    assert_eq!(
        phone.status("p1").unwrap().0,
        None,
        "the phone dropped its control state"
    );

    // Another change, suspend to the phone again, and the phone self-cleans to the server.
    disk[7 * crate::CHUNK_SIZE] ^= 1;
    std::fs::write(dir2.image("disk"), &disk).unwrap();
    let m = parcel::suspend(&server, Some(&phone), Tier::Phone, &dir2, &mut nothing).unwrap();
    assert_eq!(
        m.dirty, 3,
        "the phone still holds the two chunks the server lacks"
    );
    assert_eq!(m.chunks, 1);
    let end = parcel::clean(&phone, "p1", Duration::from_millis(20), &mut |_| {}).unwrap();
    assert!(end.starts_with("done: 3 chunks uploaded"), "{end}");
    let (owner, committed, _) = server.owner("p1").unwrap();
    assert_eq!((owner, committed), (Tier::Server, 3));

    // The server alone now has everything.
    let dir3 = ParcelDir::new(t.root.join("client3/p1"));
    let m = parcel::resume(&server, None, "p1", &dir3, &mut nothing).unwrap();
    assert_eq!(std::fs::read(dir3.image("disk")).unwrap(), disk);
    assert_eq!(
        m.dirty, 0,
        "after the clean nothing is missing at the server"
    );
}

#[test]
fn a_lost_phone_is_reclaimed_and_its_stale_nonce_fails() {
    let t = start("lost");
    let server = link("server", t.server.addr(), &t.cert);
    let phone = link("phone", t.phone.addr(), &t.cert);
    let dir = ParcelDir::new(t.root.join("client/p"));
    write_image(&dir.image("disk"), 3, 9);
    parcel::init(&server, "p", &dir, &mut nothing).unwrap();
    parcel::resume(&server, Some(&phone), "p", &dir, &mut nothing).unwrap();
    let mut disk = std::fs::read(dir.image("disk")).unwrap();
    disk[0] ^= 1;
    std::fs::write(dir.image("disk"), &disk).unwrap();
    parcel::suspend(&server, Some(&phone), Tier::Phone, &dir, &mut nothing).unwrap();
    let stale = phone.get_control("p", None).unwrap();

    // The phone is lost: the server takes the parcel back at version 1.
    let (_, v) = server
        .owned(&Request::Reclaim { parcel: "p".into() })
        .unwrap();
    assert_eq!(v, 1);
    // The phone's self-cleaning (a late check-in under the stale nonce) fails and changes
    // nothing.
    let e = parcel::clean(&phone, "p", Duration::from_millis(20), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("stale"), "{e}");
    assert_eq!(server.owner("p").unwrap(), (Tier::Server, 1, false));
    // A resume gets version 1 (the change on the lost phone is gone, as the spec says).
    let dir2 = ParcelDir::new(t.root.join("client2/p"));
    parcel::resume(&server, Some(&phone), "p", &dir2, &mut nothing).unwrap();
    assert_ne!(std::fs::read(dir2.image("disk")).unwrap(), disk);
    assert_eq!(stale.control.version, 2);
}

#[test]
fn bad_input_is_refused_with_a_clear_error_and_changes_nothing() {
    let t = start("bad");
    let server = link("server", t.server.addr(), &t.cert);
    let phone = link("phone", t.phone.addr(), &t.cert);

    // A wrong access secret: no link.
    let e = TierClient::connect("server", t.server.addr(), client_tls(&t.cert), &[0; 32])
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("wrong access secret") || e.contains("closed"),
        "{e}"
    );
    // No TLS against a TLS tier: no link either.
    assert!(TierClient::connect("server", t.server.addr(), None, &SECRET).is_err());

    let dir = ParcelDir::new(t.root.join("client/p"));
    write_image(&dir.image("disk"), 2, 3);
    parcel::init(&server, "p", &dir, &mut nothing).unwrap();

    // A blob that is not what its name says.
    let id = crate::ChunkId::of(b"something");
    let e = crate::ChunkStore::put(&server, &id, b"something else")
        .unwrap_err()
        .to_string();
    assert!(e.to_string().contains("refused"), "{e}");
    // A bad parcel name.
    let e = server.owner("../etc").unwrap_err().to_string();
    assert!(e.contains("unknown") || e.contains("parcel name"), "{e}");

    // A control state whose keyring is truncated, or sealed under another key: refused.
    let held = server.get_control("p", None).unwrap();
    let mut cut = held.clone();
    let k = cut.control.images.get_mut("disk").unwrap();
    k.truncate(k.len() - 10);
    let e = phone.swap_control(&cut, None).unwrap_err().to_string();
    assert!(e.contains("image `disk`"), "{e}");
    let mut wrong = held.clone();
    wrong.control.parcel_key = super::wire::hex(&[1; 32]);
    let e = phone.swap_control(&wrong, None).unwrap_err().to_string();
    assert!(e.contains("parcel key"), "{e}");
    assert_eq!(phone.status("p").unwrap().0, None);

    // A stale nonce: prepare and commit refused, nothing moves.
    let e = server
        .call(
            &Request::Prepare {
                parcel: "p".into(),
                nonce: super::wire::hex(&[5; 16]),
                to: Tier::Phone,
                version: 1,
                hash: super::wire::hex(&held.control.hash()),
            },
            b"",
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("stale"), "{e}");
    assert_eq!(server.owner("p").unwrap(), (Tier::Server, 1, false));

    // A tampered chunk on the phone: refused, and taken from the server instead.
    parcel::resume(&server, Some(&phone), "p", &dir, &mut nothing).unwrap();
    let disk = std::fs::read(dir.image("disk")).unwrap();
    let mut d2 = disk.clone();
    d2[1] ^= 1;
    std::fs::write(dir.image("disk"), &d2).unwrap();
    parcel::suspend(&server, Some(&phone), Tier::Phone, &dir, &mut nothing).unwrap();
    let held = phone.get_control("p", None).unwrap();
    let dirty = held.control.dirty_ids().unwrap();
    let id = dirty.iter().next().unwrap();
    let path = t.phone_svc.store().path(id);
    let mut blob = std::fs::read(&path).unwrap();
    let last = blob.len() - 1;
    blob[last] ^= 1;
    std::fs::write(&path, blob).unwrap();
    // The phone no longer validates it, so a handoff from it to the server cannot commit.
    let e = phone.validate("p").unwrap_err().to_string();
    assert!(e.contains("lacks 1"), "{e}");
    let _ = &t.server_svc;
}

#[test]
fn a_self_clean_cut_by_the_server_going_away_resumes_where_it_stopped() {
    let t = start("cut");
    let server = link("server", t.server.addr(), &t.cert);
    let phone = link("phone", t.phone.addr(), &t.cert);
    let dir = ParcelDir::new(t.root.join("client/p"));
    write_image(&dir.image("disk"), 4, 50);
    parcel::init(&server, "p", &dir, &mut nothing).unwrap();
    parcel::resume(&server, Some(&phone), "p", &dir, &mut nothing).unwrap();
    let mut disk = std::fs::read(dir.image("disk")).unwrap();
    for i in 0..4 {
        disk[i * crate::CHUNK_SIZE] ^= 0x55;
    }
    std::fs::write(dir.image("disk"), &disk).unwrap();
    parcel::suspend(&server, Some(&phone), Tier::Phone, &dir, &mut nothing).unwrap();

    // Two of the four dirty chunks reach the server before it goes away (as the client's
    // concurrent upload or an earlier, interrupted clean would leave them).
    let held = phone.get_control("p", None).unwrap();
    for id in held.control.dirty_ids().unwrap().iter().take(2) {
        let blob = crate::ChunkStore::get(t.phone_svc.store(), id)
            .unwrap()
            .unwrap();
        crate::ChunkStore::put(&server, id, &blob).unwrap();
    }
    server.close();
    let addr = t.server.addr();
    let server_dir = t.root.join("server");
    let Tiers {
        server: handle,
        server_svc,
        tls,
        cert,
        ..
    } = t;
    handle.stop();
    drop(server_svc);
    // The server is gone: cleaning fails and the phone keeps the parcel.
    let e = parcel::clean(&phone, "p", Duration::from_millis(20), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("server"), "{e}");
    assert!(phone.status("p").unwrap().0.is_some());

    // The server comes back (same directory, certificate and address): cleaning resumes,
    // sends only the two chunks the server still lacks, and the server owns the parcel.
    let svc = Arc::new(TierService::open(Tier::Server, &server_dir, SECRET).unwrap());
    let back = serve(svc, addr, Some(tls)).unwrap();
    let end = parcel::clean(&phone, "p", Duration::from_millis(20), &mut |_| {}).unwrap();
    assert!(end.starts_with("done: 2 chunks uploaded"), "{end}");
    let server = link("server", back.addr(), &cert);
    assert_eq!(server.owner("p").unwrap(), (Tier::Server, 2, false));
}

/// The phone dies in the middle of a suspend to it: the suspend fails, the client still owns
/// the parcel with its images and control state, and suspending to the server then works.
#[test]
fn a_phone_lost_mid_suspend_leaves_the_client_the_owner() {
    let t = start("midsuspend");
    let server = link("server", t.server.addr(), &t.cert);
    let phone = link("phone", t.phone.addr(), &t.cert);
    let dir = ParcelDir::new(t.root.join("client/p"));
    write_image(&dir.image("disk"), 200, 11);
    parcel::init(&server, "p", &dir, &mut nothing).unwrap();
    parcel::resume(&server, Some(&phone), "p", &dir, &mut nothing).unwrap();
    // Every chunk changes: 200 chunks to send.
    let disk: Vec<u8> = std::fs::read(dir.image("disk"))
        .unwrap()
        .iter()
        .map(|b| b ^ 0x3c)
        .collect();
    std::fs::write(dir.image("disk"), &disk).unwrap();
    let phone_blobs = t.phone_svc.store().root().to_path_buf();
    let held = |dir: &Path| {
        std::fs::read_dir(dir)
            .map(|d| {
                d.flatten()
                    .filter_map(|x| std::fs::read_dir(x.path()).ok())
                    .map(|f| f.count())
                    .sum::<usize>()
            })
            .unwrap_or(0)
    };
    let Tiers { phone: ph, .. } = t;
    let killer = std::thread::spawn(move || {
        let t0 = std::time::Instant::now();
        while held(&phone_blobs) < 10 && t0.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(1));
        }
        ph.stop(); // stops accepting, and every link at its next request
    });
    let e = parcel::suspend(&server, Some(&phone), Tier::Phone, &dir, &mut nothing)
        .unwrap_err()
        .to_string();
    killer.join().unwrap();
    assert!(e.contains("phone"), "{e}");
    assert_eq!(server.owner("p").unwrap(), (Tier::Client, 1, false));
    assert!(
        dir.held().unwrap().is_some(),
        "the client keeps its control state"
    );
    assert_eq!(std::fs::read(dir.image("disk")).unwrap(), disk);
    let m = parcel::suspend(&server, None, Tier::Server, &dir, &mut nothing).unwrap();
    assert_eq!(server.owner("p").unwrap(), (Tier::Server, m.version, false));
}

/// An image that holds one chunk many times (a RAM image's zero pages) among others comes back
/// byte for byte; the repeated chunk is fetched once and written from memory after.
#[test]
fn an_image_with_repeated_chunks_resumes_byte_for_byte() {
    let t = start("repeats");
    let server = link("server", t.server.addr(), &t.cert);
    let phone = link("phone", t.phone.addr(), &t.cert);
    let dir = ParcelDir::new(t.root.join("client/p"));
    write_image(&dir.image("disk"), 2, 5);
    let mut ram = vec![0u8; 300 * crate::CHUNK_SIZE + 100];
    for (i, c) in ram.chunks_mut(crate::CHUNK_SIZE).enumerate() {
        if i % 37 == 3 {
            c.fill(i as u8);
        }
    }
    std::fs::write(dir.image("memory"), &ram).unwrap();
    parcel::init(&server, "p", &dir, &mut nothing).unwrap();
    let dir2 = ParcelDir::new(t.root.join("client2/p"));
    parcel::resume(&server, Some(&phone), "p", &dir2, &mut nothing).unwrap();
    assert_eq!(std::fs::read(dir2.image("memory")).unwrap(), ram);
}

/// Hoarding: the phone fetches every chunk of the version from the server, so a resume
/// elsewhere gets all its data from the phone: here the server has lost its blobs by then.
#[test]
fn a_hoarded_parcel_resumes_from_the_phone_alone() {
    let t = start("hoard");
    let server = link("server", t.server.addr(), &t.cert);
    let phone = link("phone", t.phone.addr(), &t.cert);
    let dir = ParcelDir::new(t.root.join("client/p"));
    write_image(&dir.image("disk"), 12, 31);
    write_image(&dir.image("memory"), 5, 77);
    let images: Vec<Vec<u8>> = ["disk", "memory"]
        .iter()
        .map(|n| std::fs::read(dir.image(n)).unwrap())
        .collect();
    parcel::init(&server, "p", &dir, &mut nothing).unwrap();
    let end = parcel::hoard(
        &server,
        &phone,
        "p",
        &dir,
        Duration::from_millis(10),
        &mut |_| {},
    )
    .unwrap();
    // 18 distinct chunks: both images end in the same short chunk.
    assert!(end.starts_with("hoarded: 18 chunks, 18 fetched"), "{end}");
    // Again: nothing left to fetch.
    let end = parcel::hoard(
        &server,
        &phone,
        "p",
        &dir,
        Duration::from_millis(10),
        &mut |_| {},
    )
    .unwrap();
    assert!(end.starts_with("hoarded: 18 chunks, 0 fetched"), "{end}");

    let blobs = t.server_svc.store().root().to_path_buf();
    std::fs::remove_dir_all(&blobs).unwrap();
    std::fs::create_dir_all(&blobs).unwrap();
    let dir2 = ParcelDir::new(t.root.join("client2/p"));
    parcel::resume(&server, Some(&phone), "p", &dir2, &mut nothing).unwrap();
    for (name, bytes) in ["disk", "memory"].iter().zip(&images) {
        assert_eq!(&std::fs::read(dir2.image(name)).unwrap(), bytes);
    }
    // A hoard list that does not match its payload is refused.
    let e = phone
        .call(
            &Request::Hoard {
                parcel: "p".into(),
                count: 3,
            },
            &[0u8; 64],
        )
        .map(|r| r.0);
    assert!(format!("{e:?}").contains("payload of 64 bytes"), "{e:?}");
}

/// The client's upload behind the phone: after a suspend to the phone the client sends the
/// dirty chunks from its cache straight to the server; the phone's clean then uploads none.
#[test]
fn chunks_the_client_uploaded_behind_the_phone_are_not_sent_again() {
    let t = start("behind");
    let server = link("server", t.server.addr(), &t.cert);
    let phone = link("phone", t.phone.addr(), &t.cert);
    let dir = ParcelDir::new(t.root.join("client/p"));
    write_image(&dir.image("disk"), 8, 41);
    parcel::init(&server, "p", &dir, &mut nothing).unwrap();
    parcel::resume(&server, Some(&phone), "p", &dir, &mut nothing).unwrap();
    let mut disk = std::fs::read(dir.image("disk")).unwrap();
    disk[0] ^= 1;
    disk[5 * crate::CHUNK_SIZE] ^= 1;
    std::fs::write(dir.image("disk"), &disk).unwrap();
    let m = parcel::suspend(&server, Some(&phone), Tier::Phone, &dir, &mut nothing).unwrap();
    assert_eq!(m.dirty_ids.len(), 2);
    let (n, _) = parcel::upload_behind(&server, &dir, &m.dirty_ids, &mut nothing).unwrap();
    assert_eq!(n, 2);
    let end = parcel::clean(&phone, "p", Duration::from_millis(20), &mut |_| {}).unwrap();
    assert!(end.starts_with("done: 0 chunks uploaded"), "{end}");
    let dir2 = ParcelDir::new(t.root.join("client2/p"));
    parcel::resume(&server, None, "p", &dir2, &mut nothing).unwrap();
    assert_eq!(std::fs::read(dir2.image("disk")).unwrap(), disk);
}

/// Eager propagation: chunks sent to the phone while the parcel is in use are not sent again
/// at suspend; one overwritten after its eager cycle is (the cost of speculation).
#[test]
fn eager_cycles_leave_only_the_final_difference_for_the_suspend() {
    let t = start("eager");
    let server = link("server", t.server.addr(), &t.cert);
    let phone = link("phone", t.phone.addr(), &t.cert);
    let dir = ParcelDir::new(t.root.join("client/p"));
    write_image(&dir.image("disk"), 10, 51);
    parcel::init(&server, "p", &dir, &mut nothing).unwrap();
    parcel::resume(&server, Some(&phone), "p", &dir, &mut nothing).unwrap();
    let mut disk = std::fs::read(dir.image("disk")).unwrap();
    for c in [1, 2, 3] {
        disk[c * crate::CHUNK_SIZE] ^= 1;
    }
    std::fs::write(dir.image("disk"), &disk).unwrap();
    let (n, _) = parcel::eager(&phone, &dir, &mut nothing).unwrap();
    assert_eq!(n, 3);
    let (n, _) = parcel::eager(&phone, &dir, &mut nothing).unwrap();
    assert_eq!(n, 0, "a second cycle with no change sends nothing");
    // Chunk 3 changes again after the cycle, chunk 7 for the first time.
    disk[3 * crate::CHUNK_SIZE + 1] ^= 1;
    disk[7 * crate::CHUNK_SIZE] ^= 1;
    std::fs::write(dir.image("disk"), &disk).unwrap();
    let m = parcel::suspend(&server, Some(&phone), Tier::Phone, &dir, &mut nothing).unwrap();
    assert_eq!(
        (m.chunks, m.dirty),
        (2, 4),
        "only the final difference is sent"
    );
    let dir2 = ParcelDir::new(t.root.join("client2/p"));
    parcel::resume(&server, Some(&phone), "p", &dir2, &mut nothing).unwrap();
    assert_eq!(std::fs::read(dir2.image("disk")).unwrap(), disk);
}

/// A server that keeps its blobs in S3 (`roam parcel serve --s3-...`): a parcel goes in and
/// comes back whole, and no blob is in its directory.
#[test]
fn a_server_keeping_its_blobs_in_s3_serves_a_parcel() {
    let Some(s3) = crate::tests::Versity::start("tierblobs") else {
        eprintln!(
            "skipped: no versitygw (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0)"
        );
        return;
    };
    let root = std::env::temp_dir().join(format!("roam-tiers-s3-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let _tmp = TempDir(root.clone());
    let store = crate::S3Store::open(crate::S3Config {
        endpoint: s3.endpoint.clone(),
        bucket: "tierblobs".into(),
        region: "us-east-1".into(),
        access_key: "roamtest".into(),
        secret_key: "roamtestsecret".into(),
        prefix: "server".into(),
    })
    .unwrap();
    let svc = TierService::open(Tier::Server, &root.join("server"), SECRET)
        .unwrap()
        .with_blobs(Box::new(store))
        .unwrap();
    let svc = Arc::new(svc);
    let (tls, cert) = tls_pair();
    let h = serve(svc.clone(), "127.0.0.1:0".parse().unwrap(), Some(tls)).unwrap();
    let server = link("server", h.addr(), &cert);
    let dir = ParcelDir::new(root.join("client/p"));
    write_image(&dir.image("disk"), 4, 61);
    let disk = std::fs::read(dir.image("disk")).unwrap();
    parcel::init(&server, "p", &dir, &mut nothing).unwrap();
    assert_eq!(
        count_files(svc.store().root()),
        0,
        "no blob in the directory"
    );
    let dir2 = ParcelDir::new(root.join("client2/p"));
    parcel::resume(&server, None, "p", &dir2, &mut nothing).unwrap();
    assert_eq!(std::fs::read(dir2.image("disk")).unwrap(), disk);
    // A phone may not keep its blobs elsewhere.
    let phone = TierService::open(Tier::Phone, &root.join("phone"), SECRET).unwrap();
    let other = crate::DirStore::open(root.join("x")).unwrap();
    assert!(phone.with_blobs(Box::new(other)).is_err());
}

/// Files under `root`, at any depth.
fn count_files(root: &Path) -> usize {
    std::fs::read_dir(root)
        .map(|d| {
            d.flatten()
                .map(|e| {
                    if e.path().is_dir() {
                        count_files(&e.path())
                    } else {
                        1
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

/// The client dies between the two phases of its handoff to the phone: the server prepared it
/// and the phone holds the control state under the next nonce, but no commit came. The
/// client still owns the parcel; the phone's copy is refused when it self-cleans and nothing
/// changes; the client, started again, suspends, its new handoff replacing the dead one.
#[test]
fn a_client_that_dies_between_the_commit_phases_stays_the_owner_and_can_suspend_again() {
    let t = start("twophase");
    let server = link("server", t.server.addr(), &t.cert);
    let phone = link("phone", t.phone.addr(), &t.cert);
    let dir = ParcelDir::new(t.root.join("client/p"));
    write_image(&dir.image("disk"), 6, 21);
    parcel::init(&server, "p", &dir, &mut nothing).unwrap();
    parcel::resume(&server, Some(&phone), "p", &dir, &mut nothing).unwrap();
    let held = dir.held().unwrap().unwrap();
    let died = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        hand_off(&server, &held, Tier::Phone, |next| {
            phone.swap_control(
                &Held {
                    control: held.control.clone(),
                    nonce: next.to_string(),
                },
                None,
            )?;
            phone.validate("p")?;
            panic!("the client dies between the two phases");
        })
    }));
    assert!(died.is_err());
    assert_eq!(server.owner("p").unwrap(), (Tier::Client, 1, true));
    let e = parcel::clean(&phone, "p", Duration::from_millis(20), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("stale"), "{e}");
    assert_eq!(server.owner("p").unwrap().0, Tier::Client);

    let mut disk = std::fs::read(dir.image("disk")).unwrap();
    disk[3] ^= 1;
    std::fs::write(dir.image("disk"), &disk).unwrap();
    let m = parcel::suspend(&server, Some(&phone), Tier::Phone, &dir, &mut nothing).unwrap();
    assert_eq!(m.version, 2);
    assert_eq!(
        server.owner("p").unwrap(),
        (Tier::Phone, 1, false),
        "committed: still 1"
    );
    parcel::clean(&phone, "p", Duration::from_millis(20), &mut |_| {}).unwrap();
    let dir2 = ParcelDir::new(t.root.join("client2/p"));
    parcel::resume(&server, None, "p", &dir2, &mut nothing).unwrap();
    assert_eq!(std::fs::read(dir2.image("disk")).unwrap(), disk);
}

/// The phone dies between the two phases of its self-cleaning handoff: the server prepared it
/// and took the control state into `incoming/`, but no commit came. The phone still owns the
/// parcel; when it cleans again its new handoff replaces the dead one and the server owns the
/// parcel with every chunk.
#[test]
fn a_phone_that_dies_between_the_commit_phases_of_a_clean_cleans_again() {
    let t = start("phonephases");
    let server = link("server", t.server.addr(), &t.cert);
    let phone = link("phone", t.phone.addr(), &t.cert);
    let dir = ParcelDir::new(t.root.join("client/p"));
    write_image(&dir.image("disk"), 5, 71);
    parcel::init(&server, "p", &dir, &mut nothing).unwrap();
    parcel::resume(&server, Some(&phone), "p", &dir, &mut nothing).unwrap();
    let mut disk = std::fs::read(dir.image("disk")).unwrap();
    disk[2 * crate::CHUNK_SIZE] ^= 1;
    std::fs::write(dir.image("disk"), &disk).unwrap();
    parcel::suspend(&server, Some(&phone), Tier::Phone, &dir, &mut nothing).unwrap();

    // What the phone's clean does, up to the commit: its chunks to the server, prepare,
    // the control state to the server, validated; then the phone dies.
    let held = phone.get_control("p", None).unwrap();
    for id in held.control.dirty_ids().unwrap() {
        let blob = crate::ChunkStore::get(t.phone_svc.store(), &id)
            .unwrap()
            .unwrap();
        crate::ChunkStore::put(&server, &id, &blob).unwrap();
    }
    let died = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        hand_off(&server, &held, Tier::Server, |next| {
            server.put_control(&Held {
                control: held.control.clone(),
                nonce: next.to_string(),
            })?;
            server.validate("p")?;
            panic!("the phone dies between the two phases");
        })
    }));
    assert!(died.is_err());
    assert_eq!(server.owner("p").unwrap(), (Tier::Phone, 1, true));

    let end = parcel::clean(&phone, "p", Duration::from_millis(20), &mut |_| {}).unwrap();
    assert!(end.starts_with("done: 0 chunks uploaded"), "{end}");
    assert_eq!(server.owner("p").unwrap(), (Tier::Server, 2, false));
    let dir2 = ParcelDir::new(t.root.join("client2/p"));
    parcel::resume(&server, None, "p", &dir2, &mut nothing).unwrap();
    assert_eq!(std::fs::read(dir2.image("disk")).unwrap(), disk);
}

/// A tier closes a link idle too long (hostile peers cannot hold links open); the client's
/// next request opens a new link and authenticates again, as a long suspend to the phone
/// leaves its link to the server idle.
#[test]
fn a_link_the_tier_closed_for_idleness_is_opened_again() {
    let root = std::env::temp_dir().join(format!("roam-tiers-idle-{}", std::process::id()));
    let _tmp = TempDir(root.clone());
    let (tls, cert) = tls_pair();
    let svc = Arc::new(TierService::open(Tier::Server, &root, SECRET).unwrap());
    let h = super::serve_idle(
        svc,
        "127.0.0.1:0".parse().unwrap(),
        Some(tls),
        Duration::from_millis(300),
    )
    .unwrap();
    let server = link("server", h.addr(), &cert);
    assert!(server
        .owner("p")
        .unwrap_err()
        .to_string()
        .contains("unknown"));
    std::thread::sleep(Duration::from_millis(1500));
    // The tier has closed the first link by now; the request still gets its answer.
    let e = server.owner("p").unwrap_err().to_string();
    assert!(e.contains("unknown"), "{e}");
}

/// Stopping a tier ends the links it serves, however long they would stay idle: afterwards
/// nothing holds the service, and the tier's directory can be opened again in this process.
#[test]
fn a_stopped_tier_lets_go_of_its_links_and_its_directory() {
    let root = std::env::temp_dir().join(format!("roam-tiers-stop-{}", std::process::id()));
    let _tmp = TempDir(root.clone());
    let (tls, cert) = tls_pair();
    let svc = Arc::new(TierService::open(Tier::Server, &root, SECRET).unwrap());
    let h = super::serve(svc.clone(), "127.0.0.1:0".parse().unwrap(), Some(tls)).unwrap();
    let server = link("server", h.addr(), &cert);
    assert!(server
        .owner("p")
        .unwrap_err()
        .to_string()
        .contains("unknown"));
    assert!(
        TierService::open(Tier::Server, &root, SECRET).is_err(),
        "locked while served"
    );
    let t0 = std::time::Instant::now();
    h.stop(); // the link would idle for LINK_IDLE (two minutes) otherwise
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    assert_eq!(Arc::strong_count(&svc), 1, "a link still holds the service");
    drop(svc);
    TierService::open(Tier::Server, &root, SECRET).unwrap();
}

/// A resume cut off from the server (the Horatio paper §4.2): the phone owns the parcel and has hoarded
/// it; the server goes away; the phone lends the parcel to a client, which changes it and
/// suspends it back to the phone alone; in reach again, the phone self-cleans and the server
/// has the new version. Lending needs the hoard and the phone's knowledge that it owns the
/// parcel; while lent the phone neither self-cleans it nor lends it again.
#[test]
fn a_hoarded_parcel_resumes_and_suspends_cut_off_from_the_server() {
    let t = start("offline");
    let server = link("server", t.server.addr(), &t.cert);
    let phone = link("phone", t.phone.addr(), &t.cert);
    let dir = ParcelDir::new(t.root.join("client/p"));
    write_image(&dir.image("disk"), 12, 41);
    write_image(&dir.image("memory"), 4, 90);
    parcel::init(&server, "p", &dir, &mut nothing).unwrap();
    parcel::resume(&server, Some(&phone), "p", &dir, &mut nothing).unwrap();
    let mut disk = std::fs::read(dir.image("disk")).unwrap();
    disk[3 * crate::CHUNK_SIZE] ^= 1;
    std::fs::write(dir.image("disk"), &disk).unwrap();
    parcel::suspend(&server, Some(&phone), Tier::Phone, &dir, &mut nothing).unwrap();

    // Not hoarded: the phone lacks the chunks only the server holds.
    let away = ParcelDir::new(t.root.join("away/p"));
    let e = parcel::resume_offline(&phone, "p", &away, None, &mut nothing)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("lacks 16 of the 17 chunks") && e.contains("hoard"),
        "{e}"
    );
    parcel::hoard(
        &server,
        &phone,
        "p",
        &away,
        Duration::from_millis(10),
        &mut |_| {},
    )
    .unwrap();

    // The phone was not told its handoff committed (the notice lost): it cannot lend.
    let owned = t.root.join("phone/owned/p");
    let nonce = std::fs::read_to_string(&owned).unwrap();
    std::fs::remove_file(&owned).unwrap();
    let e = parcel::resume_offline(&phone, "p", &away, None, &mut nothing)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not told"), "{e}");
    let e = phone.confirm("p", &"0".repeat(32)).unwrap_err().to_string();
    assert!(e.contains("not the nonce"), "{e}");
    phone.confirm("p", &nonce).unwrap();

    // The server goes away; the client resumes from the phone alone.
    server.close();
    let addr = t.server.addr();
    let Tiers {
        server: handle,
        server_svc,
        tls,
        cert,
        phone_svc,
        root,
        ..
    } = t;
    handle.stop();
    // An earlier attempt got the lease and failed before it was done: asking again under
    // the lease it kept goes through.
    let lease = "5".repeat(32);
    std::fs::create_dir_all(root.join("away/p")).unwrap();
    crate::files::write_private(&root.join("away/p/lease"), lease.as_bytes()).unwrap();
    phone.lend("p", &lease).unwrap();
    let m = parcel::resume_offline(&phone, "p", &away, None, &mut nothing).unwrap();
    assert_eq!(m.version, 2);
    assert_eq!(std::fs::read(away.image("disk")).unwrap(), disk);
    assert!(away.is_lent());
    let status = phone.status("p").unwrap().1.unwrap_or_default();
    assert!(status.contains("lent"), "{status}");

    // While lent: no other client borrows it, the phone does not self-clean it, and the
    // client does not suspend it through the server.
    let other = ParcelDir::new(root.join("other/p"));
    let e = parcel::resume_offline(&phone, "p", &other, None, &mut nothing)
        .unwrap_err()
        .to_string();
    assert!(e.contains("lent already"), "{e}");
    let e = parcel::clean(&phone, "p", Duration::from_millis(10), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("lent"), "{e}");
    let e = parcel::suspend(&server, Some(&phone), Tier::Phone, &away, &mut nothing)
        .unwrap_err()
        .to_string();
    assert!(e.contains("suspend it to the phone alone"), "{e}");

    // The user works: one more chunk changes. Back to the phone, without the server: only
    // that chunk goes, and the phone owns the parcel again under its own nonce.
    disk[7 * crate::CHUNK_SIZE] ^= 1;
    std::fs::write(away.image("disk"), &disk).unwrap();
    let held = away.held().unwrap().unwrap();
    let m = parcel::suspend_lent(&phone, &away, None, &mut nothing).unwrap();
    assert_eq!((m.chunks, m.version, m.dirty), (1, 3, 2));
    assert!(!away.is_lent() && !away.image("disk").exists());
    assert!(!root.join("away/p/lease").exists());
    assert_eq!(
        phone_svc.read_held("control", "p").unwrap().unwrap().nonce,
        nonce
    );
    // The lease is over: giving it back again is refused.
    let e = phone.give_back(&held).unwrap_err().to_string();
    assert!(e.contains("not lent"), "{e}");

    // In reach again: the phone self-cleans, and the server has version 3.
    // (The same service: a link the stopped server still has open keeps its directory's
    // lock until it closes.)
    let back = serve(server_svc, addr, Some(tls)).unwrap();
    let end = parcel::clean(&phone, "p", Duration::from_millis(20), &mut |_| {}).unwrap();
    assert!(end.starts_with("done: 2 chunks uploaded"), "{end}");
    let server = link("server", back.addr(), &cert);
    assert_eq!(server.owner("p").unwrap(), (Tier::Server, 3, false));
    let home = ParcelDir::new(root.join("home/p"));
    parcel::resume(&server, None, "p", &home, &mut nothing).unwrap();
    assert_eq!(std::fs::read(home.image("disk")).unwrap(), disk);
}
