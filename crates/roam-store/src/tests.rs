use std::collections::BTreeSet;

use super::*;

/// A scratch directory, removed when dropped.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let p = std::env::temp_dir().join(format!(
            "roam-store-{name}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&p);
        Scratch(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// An image of `chunks` chunks and a bit: text that compresses, bytes that do not, and two
/// equal chunks.
fn image(chunks: usize) -> Vec<u8> {
    let mut v = Vec::new();
    let mut x: u32 = 7;
    for c in 0..chunks {
        for i in 0..CHUNK_SIZE {
            v.push(if c % 2 == 0 {
                b"a disk block "[i % 13]
            } else {
                x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (x >> 24) as u8
            });
        }
    }
    v.extend_from_slice(b"the tail of the image");
    v
}

#[test]
fn an_image_comes_back_byte_for_byte_and_equal_chunks_are_kept_once() {
    let dir = Scratch::new("roundtrip");
    let store = DirStore::open(&dir.0).unwrap();
    let img = image(4);
    let got = ingest(&mut &img[..], &store, None).unwrap();
    assert_eq!(got.keyring.entries.len(), 5);
    assert_eq!(got.keyring.image_len, img.len() as u64);
    // Chunks 0 and 2 are equal: one blob.
    assert_eq!((got.stored, got.already_kept), (4, 1));
    let mut back = Vec::new();
    restore(&got.keyring, &[&store], &mut back).unwrap();
    assert_eq!(back, img);
}

#[test]
fn only_dirty_chunks_are_sealed_again() {
    let dir = Scratch::new("dirty");
    let store = DirStore::open(&dir.0).unwrap();
    let mut img = image(4);
    let first = ingest(&mut &img[..], &store, None).unwrap();
    img[CHUNK_SIZE + 5] ^= 0xff; // chunk 1 written
    let dirty: BTreeSet<u64> = [1].into();
    let second = ingest(&mut &img[..], &store, Some((&first.keyring, &dirty))).unwrap();
    assert_eq!((second.unchanged, second.stored), (4, 1));
    assert_ne!(second.keyring.entries[1], first.keyring.entries[1]);
    let mut back = Vec::new();
    restore(&second.keyring, &[&store], &mut back).unwrap();
    assert_eq!(back, img);
}

/// The phone's copy of a chunk was modified: it is refused and the server's copy used; with
/// no valid copy anywhere the restore stops, naming the chunk and what each store said.
#[test]
fn a_tampered_chunk_is_refused_and_fetched_from_the_next_store() {
    let (d1, d2) = (Scratch::new("phone"), Scratch::new("server"));
    let phone = DirStore::open(&d1.0).unwrap();
    let server = DirStore::open(&d2.0).unwrap();
    let img = image(2);
    let k = ingest(&mut &img[..], &phone, None).unwrap().keyring;
    ingest(&mut &img[..], &server, None).unwrap();
    let victim = phone.path(&k.entries[1].id);
    let mut blob = std::fs::read(&victim).unwrap();
    blob[100] ^= 1;
    std::fs::write(&victim, &blob).unwrap();
    let mut back = Vec::new();
    restore(&k, &[&phone, &server], &mut back).unwrap();
    assert_eq!(back, img);
    let mut partial = Vec::new();
    let e = restore(&k, &[&phone], &mut partial)
        .unwrap_err()
        .to_string();
    assert!(e.contains(&k.entries[1].id.hex()), "{e}");
    assert!(e.contains("hash does not match"), "{e}");
    assert_eq!(
        partial.len(),
        CHUNK_SIZE,
        "nothing of the bad chunk was written"
    );
}

#[test]
fn a_keyring_round_trips_under_the_parcel_key() {
    let dir = Scratch::new("keyring");
    let store = DirStore::open(&dir.0).unwrap();
    let img = image(3);
    let k = ingest(&mut &img[..], &store, None).unwrap().keyring;
    let sealed = k.seal(&[5; 32]);
    let opened = Keyring::open(&sealed, &[5; 32]).unwrap();
    let mut back = Vec::new();
    restore(&opened, &[&store], &mut back).unwrap();
    assert_eq!(back, img);
    assert!(Keyring::open(&sealed, &[6; 32]).is_err());
}

#[test]
fn an_empty_image_has_an_empty_keyring() {
    let dir = Scratch::new("empty");
    let store = DirStore::open(&dir.0).unwrap();
    let got = ingest(&mut &[][..], &store, None).unwrap();
    assert_eq!(got.keyring, Keyring::default());
    let mut back = Vec::new();
    restore(&got.keyring, &[&store], &mut back).unwrap();
    assert!(back.is_empty());
}

/// A real S3 server for the S3 backend's test: versitygw (an S3 gateway over a directory),
/// found as `$ROAM_VERSITYGW`, on the PATH or in `~/go/bin` (`./scripts/test` installs it with
/// `go install`); stopped when dropped.
/// A real S3 server (versitygw) for the tests, stopped when dropped.
pub(crate) struct Versity {
    child: std::process::Child,
    /// Its URL.
    pub(crate) endpoint: String,
    _root: Scratch,
}

impl Versity {
    /// Started with `bucket`, keys `roamtest` / `roamtestsecret`; None without versitygw.
    pub(crate) fn start(bucket: &str) -> Option<Versity> {
        let candidates = [
            std::env::var_os("ROAM_VERSITYGW").map(std::path::PathBuf::from),
            std::env::var_os("PATH").and_then(|p| {
                std::env::split_paths(&p)
                    .map(|d| d.join("versitygw"))
                    .find(|f| f.exists())
            }),
            std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join("go/bin/versitygw")),
        ];
        let bin = candidates.into_iter().flatten().find(|p| p.exists())?;
        let root = Scratch::new("s3");
        std::fs::create_dir_all(root.0.join(bucket)).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = std::process::Command::new(&bin)
            .args([
                "--access",
                "roamtest",
                "--secret",
                "roamtestsecret",
                "--port",
            ])
            .arg(format!("127.0.0.1:{port}"))
            .arg("posix")
            .arg(&root.0)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "versitygw did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Some(Versity {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            _root: root,
        })
    }
}

impl Drop for Versity {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_s3_backend_keeps_blobs_on_a_real_s3_server_and_a_bad_copy_is_refused() {
    let Some(server) = Versity::start("parcels") else {
        eprintln!(
            "skipped: no versitygw (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0)"
        );
        return;
    };
    let config = |secret: &str| S3Config {
        endpoint: server.endpoint.clone(),
        bucket: "parcels".into(),
        region: "us-east-1".into(),
        access_key: "roamtest".into(),
        secret_key: secret.into(),
        prefix: "server".into(),
    };
    let s3 = S3Store::open(config("roamtestsecret")).unwrap();
    let img = image(3);
    let got = ingest(&mut &img[..], &s3, None).unwrap();
    // Chunks 0 and 2 are equal: the first, the second and the tail are stored.
    assert_eq!((got.stored, got.already_kept), (3, 1));
    let e = &got.keyring.entries[1];
    assert!(s3.has(&e.id).unwrap());
    assert_eq!(
        s3.object(&e.id),
        format!("server/{}/{}", &e.id.hex()[..2], e.id.hex())
    );
    let mut back = Vec::new();
    restore(&got.keyring, &[&s3], &mut back).unwrap();
    assert_eq!(back, img);
    // Stored again: nothing new.
    assert_eq!(ingest(&mut &img[..], &s3, None).unwrap().stored, 0);
    // A copy modified in the bucket is refused and the next store's taken.
    let bad = seal(b"something else entirely");
    let other = S3Store::open(S3Config {
        prefix: "tampered".into(),
        ..config("roamtestsecret")
    })
    .unwrap();
    other.put(&e.id, &bad.blob).unwrap();
    let plain = fetch(&e.id, &e.key, &[&other, &s3]).unwrap();
    assert_eq!(plain, img[CHUNK_SIZE..2 * CHUNK_SIZE]);
    // A wrong secret: an error naming the store, not a panic or a miss.
    let wrong = S3Store::open(config("wrong")).unwrap();
    let err = wrong.has(&e.id).unwrap_err().to_string();
    assert!(err.contains("s3 http://127.0.0.1"), "{err}");
    assert!(S3Store::open(S3Config {
        endpoint: "ftp://x".into(),
        ..config("x")
    })
    .is_err());
}
