//! The engine against a small HTTP/1.1 server written here: files served with or without
//! range support, a missing one, and one whose response is cut short.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;

/// Files by path. Under `/plain/` ranges are ignored (200, whole file); `/cut/` answers a
/// range with half its bytes and closes; anything else missing is a 404.
type Files = Arc<HashMap<String, Vec<u8>>>;

async fn serve(listener: TcpListener, files: Files, accepted: Arc<AtomicUsize>) {
    loop {
        let Ok((s, _)) = listener.accept().await else {
            return;
        };
        accepted.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(connection(s, files.clone()));
    }
}

async fn connection(mut s: TcpStream, files: Files) {
    let mut buf = Vec::new();
    loop {
        // One request head.
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 4096];
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        buf.drain(..head_end);
        let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
        let range = head.lines().find_map(|l| {
            let v = l
                .strip_prefix("range: ")
                .or_else(|| l.strip_prefix("Range: "))?;
            let (a, b) = v.trim().strip_prefix("bytes=")?.split_once('-')?;
            Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?))
        });
        let Some(body) = files.get(&path) else {
            let _ = s
                .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                .await;
            continue;
        };
        let len = body.len() as u64;
        let resp = match range {
            Some(_) if path.starts_with("/plain/") || range.is_none() => None,
            Some((a, _)) if a >= len => {
                let _ = s
                    .write_all(format!("HTTP/1.1 416 Range Not Satisfiable\r\ncontent-range: bytes */{len}\r\ncontent-length: 0\r\n\r\n").as_bytes())
                    .await;
                continue;
            }
            Some((a, b)) => Some((a, b.min(len - 1))),
            None => None,
        };
        match resp {
            None => {
                let _ = s
                    .write_all(
                        format!("HTTP/1.1 200 OK\r\ncontent-length: {len}\r\n\r\n").as_bytes(),
                    )
                    .await;
                let _ = s.write_all(body).await;
            }
            Some((a, b)) => {
                let part = &body[a as usize..=b as usize];
                let _ = s
                    .write_all(
                        format!(
                            "HTTP/1.1 206 Partial Content\r\ncontent-range: bytes {a}-{b}/{len}\r\ncontent-length: {}\r\n\r\n",
                            part.len()
                        )
                        .as_bytes(),
                    )
                    .await;
                if path.starts_with("/cut/") && part.len() > 1 {
                    let _ = s.write_all(&part[..part.len() / 2]).await;
                    return; // closed mid-body
                }
                let _ = s.write_all(part).await;
            }
        }
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

/// A server with these files; its base URL.
async fn server(files: &[(&str, Vec<u8>)]) -> String {
    counting_server(files).await.0
}

/// A server with these files; its base URL and the count of connections it accepted.
async fn counting_server(files: &[(&str, Vec<u8>)]) -> (String, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let map: HashMap<String, Vec<u8>> = files
        .iter()
        .map(|(p, b)| (p.to_string(), b.clone()))
        .collect();
    let accepted = Arc::new(AtomicUsize::new(0));
    tokio::spawn(serve(l, Arc::new(map), accepted.clone()));
    (format!("http://{addr}"), accepted)
}

/// The transfer after a survey runs over the survey's connections (`Engine::sharing`): a
/// separate engine would open as many again, each through TCP's slow start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transfer_reuses_the_surveys_connections() {
    let files: Vec<(String, Vec<u8>)> = (0..12)
        .map(|i| (format!("/s/f{i}.bin"), bytes(30_000, 100 + i)))
        .collect();
    let (base, accepted) = counting_server(
        &files
            .iter()
            .map(|(p, b)| (p.as_str(), b.clone()))
            .collect::<Vec<_>>(),
    )
    .await;
    let mut specs: Vec<FileSpec> = files
        .iter()
        .map(|(p, _)| FileSpec::from_url(&format!("{base}{p}")).unwrap())
        .collect();
    let p = Params {
        cc: 4,
        p: 1,
        bs: 65536,
    };
    let survey = Arc::new(Engine::new(p, Protocol::Http1).unwrap());
    survey.survey(&specs).await.unwrap().apply(&mut specs);
    let after_survey = accepted.load(Ordering::SeqCst);
    let out = scratch("sharing");
    let e = Arc::new(survey.sharing(p, Protocol::Http1).unwrap());
    let r = e.run(&specs, &out).await.unwrap();
    assert!(r.failures().is_empty());
    let n = accepted.load(Ordering::SeqCst);
    assert!(
        n <= after_survey + 1,
        "{after_survey} connections for the survey, {n} in all"
    );
    for (p, b) in &files {
        assert_eq!(&std::fs::read(out.join(&p[3..])).unwrap(), b);
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// With one file at a time in one stream, the files' size probes and ranges go over kept-alive
/// connections: a new connection per file would pay a handshake and TCP's slow
/// start each time (at 290 ms, 7.6 Mbit/s where wget's one connection made 31).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_one_at_a_time_share_one_connection() {
    let files: Vec<(String, Vec<u8>)> = (0..5)
        .map(|i| (format!("/k/f{i}.bin"), bytes(40_000, i)))
        .collect();
    let (base, accepted) = counting_server(
        &files
            .iter()
            .map(|(p, b)| (p.as_str(), b.clone()))
            .collect::<Vec<_>>(),
    )
    .await;
    let specs: Vec<FileSpec> = files
        .iter()
        .map(|(p, _)| FileSpec::from_url(&format!("{base}{p}")).unwrap())
        .collect();
    let out = scratch("keepalive");
    let e = Arc::new(
        Engine::new(
            Params {
                cc: 1,
                p: 1,
                bs: 65536,
            },
            Protocol::Http1,
        )
        .unwrap(),
    );
    let r = e.run(&specs, &out).await.unwrap();
    assert!(r.failures().is_empty());
    // hyper's pool takes a connection back a moment after its response ends, so the first
    // file's range may open a second one; after that they are reused.
    let n = accepted.load(Ordering::SeqCst);
    assert!(n <= 2, "{n} connections for 5 files' probes and ranges");
    let _ = std::fs::remove_dir_all(&out);
}

fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("roam-transfer-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dataset_arrives_whole_with_every_parameter() {
    let files: Vec<(String, Vec<u8>)> = (0..6)
        .map(|i| {
            (
                format!("/data/f{i}.bin"),
                bytes(50_000 + i * 37_000, i as u32),
            )
        })
        .chain([("/data/empty.bin".to_string(), Vec::new())])
        .collect();
    let base = server(
        &files
            .iter()
            .map(|(p, b)| (p.as_str(), b.clone()))
            .collect::<Vec<_>>(),
    )
    .await;
    let specs: Vec<FileSpec> = files
        .iter()
        .map(|(p, _)| FileSpec::from_url(&format!("{base}{p}")).unwrap())
        .collect();
    for (cc, p, bs) in [(1, 1, 1024), (4, 3, 8192), (16, 8, 65536)] {
        let out = scratch(&format!("all-{cc}-{p}"));
        let e = Arc::new(Engine::new(Params { cc, p, bs }, Protocol::Http1).unwrap());
        let r = e.run(&specs, &out).await.unwrap();
        assert!(r.failures().is_empty(), "{:?}", r.failures());
        for (path, body) in &files {
            let name = path.rsplit('/').next().unwrap();
            assert_eq!(
                &std::fs::read(out.join(name)).unwrap(),
                body,
                "{name} cc {cc} p {p}"
            );
            assert!(!out.join(format!("{name}.part")).exists());
        }
        let expect: u64 = files.iter().map(|f| f.1.len() as u64).sum();
        assert_eq!(r.bytes, expect);
        let _ = std::fs::remove_dir_all(&out);
    }
}

/// A server that ignores ranges: the file comes whole over one stream, and the log says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_range_support_a_file_comes_in_one_stream() {
    let body = bytes(300_000, 9);
    let base = server(&[("/plain/big.bin", body.clone())]).await;
    let out = scratch("plain");
    let e = Arc::new(
        Engine::new(
            Params {
                cc: 1,
                p: 4,
                bs: 16384,
            },
            Protocol::Http1,
        )
        .unwrap(),
    );
    let r = e
        .run(
            &[FileSpec::from_url(&format!("{base}/plain/big.bin")).unwrap()],
            &out,
        )
        .await
        .unwrap();
    assert_eq!(r.files[0].outcome, "ok");
    assert_eq!(r.files[0].streams, 1);
    assert_eq!(std::fs::read(out.join("big.bin")).unwrap(), body);
    let _ = std::fs::remove_dir_all(&out);
}

/// A 404 in the middle of a dataset fails that file only, with its URL and status; a response
/// cut short leaves no file under its name, and what did arrive in finished ranges stays for
/// the next run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_truncated_file_is_an_error_and_never_claimed_complete() {
    let good = bytes(100_000, 1);
    let cut = bytes(200_000, 2);
    let base = server(&[("/d/good.bin", good.clone()), ("/cut/bad.bin", cut)]).await;
    let out = scratch("errors");
    let specs: Vec<FileSpec> = ["/d/good.bin", "/d/nothere.bin", "/cut/bad.bin"]
        .iter()
        .map(|p| FileSpec::from_url(&format!("{base}{p}")).unwrap())
        .collect();
    let e = Arc::new(
        Engine::new(
            Params {
                cc: 3,
                p: 2,
                bs: 8192,
            },
            Protocol::Http1,
        )
        .unwrap(),
    );
    let r = e.run(&specs, &out).await.unwrap();
    assert_eq!(r.files[0].outcome, "ok");
    assert!(
        r.files[1].outcome.contains("HTTP 404"),
        "{}",
        r.files[1].outcome
    );
    assert!(
        r.files[1].outcome.contains("nothere.bin"),
        "{}",
        r.files[1].outcome
    );
    assert!(
        r.files[2].outcome.contains("truncated") || r.files[2].outcome.contains("after"),
        "{}",
        r.files[2].outcome
    );
    assert_eq!(std::fs::read(out.join("good.bin")).unwrap(), good);
    assert!(
        !out.join("bad.bin").exists(),
        "a cut file was given its name"
    );
    assert!(out.join("bad.bin.part").exists());
    let _ = std::fs::remove_dir_all(&out);
}

/// An interrupted download resumes: ranges finished before are not fetched again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_download_resumes_with_the_ranges_it_lacks() {
    let body = bytes(400_000, 3);
    let base = server(&[("/r/file.bin", body.clone())]).await;
    let out = scratch("resume");
    std::fs::create_dir_all(&out).unwrap();
    // A first run that finished the first half only.
    let (p, _) = partial::Partial::open(&out.join("file.bin"), body.len() as u64).unwrap();
    p.write_at(0, &body[..200_000]).unwrap();
    p.finished(0, 200_000).unwrap();
    drop(p);
    let e = Arc::new(
        Engine::new(
            Params {
                cc: 1,
                p: 2,
                bs: 8192,
            },
            Protocol::Http1,
        )
        .unwrap(),
    );
    let r = e
        .run(
            &[FileSpec::from_url(&format!("{base}/r/file.bin")).unwrap()],
            &out,
        )
        .await
        .unwrap();
    assert_eq!(r.files[0].outcome, "ok");
    assert_eq!(
        r.files[0].fetched, 200_000,
        "only the missing half was fetched"
    );
    assert_eq!(std::fs::read(out.join("file.bin")).unwrap(), body);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn bad_parameters_and_urls_are_refused_with_what_is_wrong() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _g = rt.enter();
    let e = Engine::new(
        Params {
            cc: 0,
            p: 1,
            bs: 4096,
        },
        Protocol::Http1,
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("concurrency 0"), "{e}");
    let e = Engine::new(
        Params {
            cc: 1,
            p: 1,
            bs: 10,
        },
        Protocol::Http1,
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("block size 10"), "{e}");
    assert!(FileSpec::from_url("ftp://x/y").is_err());
    assert!(FileSpec::from_url("http://host/").is_err());
    assert_eq!(
        FileSpec::from_url("http://h:1/a/b.txt?x=1").unwrap().name,
        "b.txt"
    );
}

/// The broker's first look: every file's size (an empty one included) and a round trip, and
/// a missing file named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_survey_finds_sizes_and_names_a_missing_file() {
    let files = [
        ("/s/a.bin", bytes(70_000, 1)),
        ("/s/b.bin", bytes(3, 2)),
        ("/s/c.bin", Vec::new()),
    ];
    let base = server(&files).await;
    let specs: Vec<FileSpec> = files
        .iter()
        .map(|(p, _)| FileSpec::from_url(&format!("{base}{p}")).unwrap())
        .collect();
    let e = Arc::new(
        Engine::new(
            Params {
                cc: 2,
                ..Params::default()
            },
            Protocol::Http1,
        )
        .unwrap(),
    );
    let s = e.survey(&specs).await.unwrap();
    assert_eq!(s.sizes, vec![70_000, 3, 0]);
    // The empty file's range cannot be satisfied: the engine will ask for it itself.
    assert_eq!(s.ranged, vec![true, true, false]);
    let mut known = specs.clone();
    s.apply(&mut known);
    let out = scratch("surveyed");
    let r = e.run(&known, &out).await.unwrap();
    assert!(r.failures().is_empty(), "{:?}", r.failures());
    assert_eq!(
        r.files[0].probe_ms, 0.0,
        "no first-byte request after a survey"
    );
    for (p, body) in &files {
        let name = p.rsplit('/').next().unwrap();
        assert_eq!(&std::fs::read(out.join(name)).unwrap(), body);
    }
    let _ = std::fs::remove_dir_all(&out);
    assert!(s.rtt_ms > 0.0 && s.rtt_ms < 5_000.0, "{}", s.rtt_ms);
    let mut missing = specs.clone();
    missing.push(FileSpec::from_url(&format!("{base}/s/none.bin")).unwrap());
    let err = e.survey(&missing).await.unwrap_err().to_string();
    assert!(err.contains("none.bin") && err.contains("404"), "{err}");
}
