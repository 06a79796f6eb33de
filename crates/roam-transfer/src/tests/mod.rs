//! The engine against a small HTTP/1.1 server written here: files served with or without
//! range support, a missing one, and one whose response is cut short.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;

/// Files by path. Under `/plain/` ranges are ignored (200, whole file); `/cut/` answers a
/// range with half its bytes and closes; `/stall/` answers a range with half its bytes and
/// then nothing, the connection left open; `/dead/` answers a range's headers and closes;
/// `/mute/` leaves the server's first request unanswered (the connection open); `/slow/`
/// sends a range that starts at byte 0 (longer than one byte) 2 KiB every 5 ms;
/// `/short/` answers `bytes=A-` with half the file (a
/// correct, shorter range); anything else missing is a 404.
type Files = Arc<HashMap<String, Vec<u8>>>;

/// `alt`: an `Alt-Svc` header's value sent with every 200 and 206.
async fn serve(listener: TcpListener, files: Files, conns: Arc<Conns>, alt: Option<Arc<str>>) {
    loop {
        let Ok((s, _)) = listener.accept().await else {
            return;
        };
        let i = {
            let mut c = conns.requests.lock().unwrap();
            c.push(0);
            c.len() - 1
        };
        tokio::spawn(connection(s, files.clone(), alt.clone(), conns.clone(), i));
    }
}

/// The connections a test server accepted: how many requests each carried.
#[derive(Default)]
struct Conns {
    requests: std::sync::Mutex<Vec<usize>>,
    /// Body bytes written, all files together.
    served: AtomicUsize,
    /// A `/mute/` request went unanswered.
    muted: std::sync::atomic::AtomicBool,
}

impl Conns {
    fn accepted(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
    /// (requests in all, the most that one connection carried).
    fn busiest(&self) -> (usize, usize) {
        let r = self.requests.lock().unwrap();
        (r.iter().sum(), r.iter().copied().max().unwrap_or(0))
    }
}

async fn connection(
    mut s: TcpStream,
    files: Files,
    alt: Option<Arc<str>>,
    conns: Arc<Conns>,
    me: usize,
) {
    let alt = alt.map_or(String::new(), |a| format!("alt-svc: {a}\r\n"));
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
        conns.requests.lock().unwrap()[me] += 1;
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        buf.drain(..head_end);
        let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
        let range = head.lines().find_map(|l| {
            let v = l
                .strip_prefix("range: ")
                .or_else(|| l.strip_prefix("Range: "))?;
            let (a, b) = v.trim().strip_prefix("bytes=")?.split_once('-')?;
            // `bytes=A-`: to the end.
            let b = if b.trim().is_empty() {
                u64::MAX
            } else {
                b.trim().parse::<u64>().ok()?
            };
            Some((a.parse::<u64>().ok()?, b))
        });
        if path.starts_with("/mute/") && !conns.muted.swap(true, Ordering::SeqCst) {
            let mut sink = [0u8; 1024];
            while !matches!(s.read(&mut sink).await, Ok(0) | Err(_)) {}
            return;
        }
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
            // `/short/` answers an open range with its first half only (a server may).
            Some((a, u64::MAX)) if path.starts_with("/short/") => Some((a, (len / 2).max(a))),
            Some((a, b)) => Some((a, b.min(len - 1))),
            None => None,
        };
        match resp {
            None => {
                let _ = s
                    .write_all(
                        format!("HTTP/1.1 200 OK\r\n{alt}content-length: {len}\r\n\r\n").as_bytes(),
                    )
                    .await;
                let _ = s.write_all(body).await;
            }
            Some((a, b)) => {
                let part = &body[a as usize..=b as usize];
                let _ = s
                    .write_all(
                        format!(
                            "HTTP/1.1 206 Partial Content\r\n{alt}content-range: bytes {a}-{b}/{len}\r\ncontent-length: {}\r\n\r\n",
                            part.len()
                        )
                        .as_bytes(),
                    )
                    .await;
                if path.starts_with("/dead/") {
                    return; // closed before the body
                }
                if (path.starts_with("/cut/") || path.starts_with("/stall/")) && part.len() > 1 {
                    let half = &part[..part.len() / 2];
                    conns.served.fetch_add(half.len(), Ordering::Relaxed);
                    let _ = s.write_all(half).await;
                    if path.starts_with("/stall/") {
                        // Silent, and open, until the client gives up on it.
                        let mut sink = [0u8; 1024];
                        while !matches!(s.read(&mut sink).await, Ok(0) | Err(_)) {}
                    }
                    return; // closed mid-body
                }
                if path.starts_with("/slow/") && a == 0 && part.len() > 1 {
                    for chunk in part.chunks(2048) {
                        if s.write_all(chunk).await.is_err() {
                            return; // the client dropped the rest
                        }
                        conns.served.fetch_add(chunk.len(), Ordering::Relaxed);
                        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                    }
                    continue;
                }
                conns.served.fetch_add(part.len(), Ordering::Relaxed);
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

/// A server with these files; its base URL and the connections it accepted.
async fn counting_server(files: &[(&str, Vec<u8>)]) -> (String, Arc<Conns>) {
    advertising_server(files, None).await
}

fn file_map(files: &[(&str, Vec<u8>)]) -> Files {
    Arc::new(
        files
            .iter()
            .map(|(p, b)| (p.to_string(), b.clone()))
            .collect(),
    )
}

/// [`counting_server`] whose responses carry `Alt-Svc: alt`.
async fn advertising_server(files: &[(&str, Vec<u8>)], alt: Option<&str>) -> (String, Arc<Conns>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let accepted = Arc::new(Conns::default());
    tokio::spawn(serve(
        l,
        file_map(files),
        accepted.clone(),
        alt.map(Arc::from),
    ));
    (format!("http://{addr}"), accepted)
}

/// hyper's server's answer to `r` from `files`: ranges served (`bytes=A-B`, `bytes=A-`), a
/// missing file a 404.
fn answer(
    files: &Files,
    r: &hyper::Request<hyper::body::Incoming>,
) -> hyper::http::Result<hyper::Response<http_body_util::Full<bytes::Bytes>>> {
    use http_body_util::Full;
    use hyper::{Response, StatusCode};
    let body = files.get(r.uri().path()).cloned();
    let range = r
        .headers()
        .get("range")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("bytes="))
        .and_then(|v| v.split_once('-'))
        .and_then(|(a, b)| {
            let b = if b.is_empty() {
                usize::MAX
            } else {
                b.parse::<usize>().ok()?
            };
            Some((a.parse::<usize>().ok()?, b))
        });
    match (body, range) {
        (None, _) => Response::builder()
            .status(StatusCode::NOT_FOUND)
            .body(Full::default()),
        (Some(b), Some((a, z))) if a < b.len() => {
            let z = z.min(b.len() - 1);
            Response::builder()
                .status(StatusCode::PARTIAL_CONTENT)
                .header("content-range", format!("bytes {a}-{z}/{}", b.len()))
                .body(Full::new(bytes::Bytes::copy_from_slice(&b[a..=z])))
        }
        (Some(b), _) => Response::builder().body(Full::new(bytes::Bytes::from(b))),
    }
}

/// A cleartext HTTP/2 (prior knowledge) server of these files, on hyper's server, serving
/// ranges: its port, the connections it accepted and the requests it answered.
async fn h2c_server(files: &[(&str, Vec<u8>)]) -> (u16, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let files = file_map(files);
    let (accepted, requests) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (acc, req) = (accepted.clone(), requests.clone());
    tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            acc.fetch_add(1, Ordering::SeqCst);
            let (files, req) = (files.clone(), req.clone());
            let service =
                hyper::service::service_fn(move |r: hyper::Request<hyper::body::Incoming>| {
                    req.fetch_add(1, Ordering::SeqCst);
                    let resp = answer(&files, &r);
                    async move { resp }
                });
            tokio::spawn(
                hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
                    .serve_connection(hyper_util::rt::TokioIo::new(s), service),
            );
        }
    });
    (port, accepted, requests)
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
        ..Params::default()
    };
    let survey = Arc::new(Engine::new(p).unwrap());
    survey.survey(&specs).await.unwrap().apply(&mut specs);
    let after_survey = accepted.accepted();
    let out = scratch("sharing");
    let e = Arc::new(survey.sharing(p).unwrap());
    let r = e.run(&specs, &out).await.unwrap();
    assert!(r.failures().is_empty());
    let n = accepted.accepted();
    assert!(
        n <= after_survey + 1,
        "{after_survey} connections for the survey, {n} in all"
    );
    for (p, b) in &files {
        assert_eq!(&std::fs::read(out.join(&p[3..])).unwrap(), b);
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// With one file at a time in one stream, each file is one request (`bytes=0-`: its size and
/// its bytes at once), and the requests go over kept-alive connections: a new connection per
/// file would pay a handshake and TCP's slow start each time (at 290 ms, 7.6 Mbit/s where
/// wget's one connection made 31).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_one_at_a_time_share_one_connection() {
    let files: Vec<(String, Vec<u8>)> = (0..8)
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
    let e = Arc::new(engine(1, 1, 65536));
    let r = e.run(&specs, &out).await.unwrap();
    assert!(r.failures().is_empty());
    // hyper's pool takes a connection back a moment after its response ends, so a request
    // sent in that moment opens another, and on a loaded machine that happens now and then;
    // then later requests spread over the connections open. A connection per file would
    // carry one request.
    let (all, busiest) = accepted.busiest();
    assert_eq!(all, 8, "a request a file");
    assert!(
        busiest >= 3,
        "the busiest of {} connections carried {busiest} of the 8 requests",
        accepted.accepted()
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// An engine over HTTP/1.1 at concurrency `cc`, parallelism `p` and block size `bs`.
fn engine(cc: u32, p: u32, bs: usize) -> Engine {
    Engine::new(Params {
        cc,
        p,
        bs,
        ..Params::default()
    })
    .unwrap()
}

/// `e` fetching the one file at `url` into `out`.
async fn fetch_one(e: &Arc<Engine>, url: &str, out: &std::path::Path) -> Report {
    let spec = FileSpec::from_url(url).unwrap();
    e.run(&[spec], out).await.unwrap()
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
        let e = Arc::new(engine(cc, p, bs));
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
        // The progress counters: every file's size known, every byte expected and received.
        let count = |c: &AtomicU64| c.load(Ordering::Relaxed);
        assert_eq!(count(&e.sized), files.len() as u64, "cc {cc} p {p}");
        assert_eq!(count(&e.expected), expect, "cc {cc} p {p}");
        assert_eq!(count(&e.received), expect, "cc {cc} p {p}");
        let _ = std::fs::remove_dir_all(&out);
    }
}

/// A server that ignores ranges: the file comes whole over one stream, and the log says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_range_support_a_file_comes_in_one_stream() {
    let body = bytes(300_000, 9);
    let base = server(&[("/plain/big.bin", body.clone())]).await;
    let out = scratch("plain");
    let e = Arc::new(engine(1, 4, 16384));
    let r = fetch_one(&e, &format!("{base}/plain/big.bin"), &out).await;
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
    let dead = bytes(200_000, 2);
    let base = server(&[("/d/good.bin", good.clone()), ("/dead/bad.bin", dead)]).await;
    let out = scratch("errors");
    let specs: Vec<FileSpec> = ["/d/good.bin", "/d/nothere.bin", "/dead/bad.bin"]
        .iter()
        .map(|p| FileSpec::from_url(&format!("{base}{p}")).unwrap())
        .collect();
    let e = Arc::new(engine(3, 2, 8192).with_retry_wait(std::time::Duration::from_millis(2)));
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
    // A stream that never brings a byte is asked again a bounded number of times.
    assert_eq!(
        r.files[2].retries,
        2 * STREAM_RETRIES,
        "both streams retried"
    );
    assert_eq!(std::fs::read(out.join("good.bin")).unwrap(), good);
    assert!(
        !out.join("bad.bin").exists(),
        "a cut file was given its name"
    );
    assert!(out.join("bad.bin.part").exists());
    let _ = std::fs::remove_dir_all(&out);
}

/// A server that answers in another version of HTTP than the one asked for (an HTTP/2-only
/// port asked in HTTP/1.1, an HTTP/1.1 server asked in HTTP/2 with prior knowledge) fails the
/// file at once, saying so, instead of asking again and again as if the network had failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_speaking_another_http_fails_at_once_and_says_so() {
    // What nginx's cleartext `listen ... http2` port answers an HTTP/1.1 request with: its
    // SETTINGS frame, then GOAWAY (PROTOCOL_ERROR), then the rest read until the client closes
    // (a close with a request body unread would reset the connection before the client reads
    // the answer).
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let h2_port = l.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).await;
                let settings = [0, 0, 0, 4, 0, 0, 0, 0, 0];
                let goaway = [0, 0, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
                let _ = s.write_all(&[&settings[..], &goaway[..]].concat()).await;
                while matches!(s.read(&mut buf).await, Ok(n) if n > 0) {}
            });
        }
    });
    // And what an HTTP/1.1 server answers HTTP/2's preface with: a 400, the rest read until
    // the client closes (nginx's lingering close; a close at once may reset the connection
    // before the client reads the answer, which the client rightly takes for the network).
    // The answer comes a round trip of a real network later: on loopback at once, it may end
    // the connection before the client has handed it the request, which then reads only
    // "connection closed" and is rightly asked again.
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let h1 = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).await;
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                let bad = "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n";
                let _ = s.write_all(bad.as_bytes()).await;
                while matches!(s.read(&mut buf).await, Ok(n) if n > 0) {}
            });
        }
    });
    for (protocol, url, says) in [
        (
            Protocol::Http1,
            format!("http://127.0.0.1:{h2_port}/a.bin"),
            "not HTTP/1.1",
        ),
        (Protocol::Http2, format!("{h1}/a.bin"), "not HTTP/2"),
    ] {
        let out = scratch(&format!("version-{protocol:?}"));
        let e = Arc::new(
            Engine::new(Params {
                protocol,
                ..Params::default()
            })
            .unwrap()
            .with_retry_wait(std::time::Duration::from_millis(1)),
        );
        let specs = [FileSpec::from_url(&url).unwrap()];
        let r = e.run(&specs, &out).await.unwrap();
        let f = &r.files[0];
        assert!(f.outcome.contains(says), "{protocol:?}: {}", f.outcome);
        assert_eq!(f.retries, 0, "{protocol:?}: {}", f.outcome);
        assert!(!out.join("a.bin").exists());
        // An upload there is refused the same way: it is one mechanism.
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("up.bin"), bytes(10_000, 8)).unwrap();
        let up = [Upload {
            path: out.join("up.bin"),
            url: url.replace("a.bin", "up.bin"),
        }];
        let r = e.put(&up).await.unwrap();
        let f = &r.files[0];
        assert!(
            f.outcome.contains(says),
            "{protocol:?} upload: {}",
            f.outcome
        );
        assert_eq!(f.retries, 0, "{protocol:?} upload: {}", f.outcome);
        let _ = std::fs::remove_dir_all(&out);
    }
}

/// A stream that breaks off mid-body, or falls silent, is asked for the bytes it had not
/// brought, and a request left unanswered is sent again: the file completes, byte for byte,
/// and no byte is served twice. With one stream the whole-file
/// request breaks too, and its rest comes in ranges.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_mid_body_is_asked_for_the_rest() {
    for (how, p) in [
        ("cut", 1),
        ("cut", 3),
        ("stall", 2),
        ("mute", 1),
        ("mute", 2),
    ] {
        let body = bytes(300_000, 7);
        let path = format!("/{how}/f.bin");
        let (base, conns) = counting_server(&[(path.as_str(), body.clone())]).await;
        let out = scratch(&format!("{how}-{p}"));
        let spec = FileSpec::from_url(&format!("{base}{path}")).unwrap();
        let e = Arc::new(
            engine(1, p, 64 * 1024)
                .with_retry_wait(std::time::Duration::from_millis(2))
                .with_stall_timeout(std::time::Duration::from_millis(100)),
        );
        let r = e.run(&[spec], &out).await.unwrap();
        assert_eq!(r.files[0].outcome, "ok", "{how}, p = {p}");
        assert!(r.files[0].retries > 0, "p = {p}: no stream was asked again");
        assert_eq!(std::fs::read(out.join("f.bin")).unwrap(), body, "p = {p}");
        // The server also answered the one-byte probe (p > 1) with its byte.
        let probe = usize::from(p > 1);
        assert_eq!(
            conns.served.load(Ordering::Relaxed),
            body.len() + probe,
            "p = {p}: bytes served twice"
        );
        let _ = std::fs::remove_dir_all(&out);
    }
}

/// A stream that finishes its range while another is slow takes the back half of the slow
/// one's remainder, again and again: the file arrives byte for byte. The same transfer with
/// stealing turned off takes nothing (so the count is the engine's doing, not the server's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_free_stream_takes_half_of_a_slow_one() {
    let body = bytes(1_000_000, 11);
    let base = server(&[("/slow/f.bin", body.clone())]).await;
    for (min_steal, stealing) in [(32 << 10, true), (u64::MAX, false)] {
        let out = scratch(&format!("steal-{stealing}"));
        let spec = FileSpec::from_url(&format!("{base}/slow/f.bin")).unwrap();
        let e = Arc::new(engine(1, 2, 64 * 1024).with_min_steal(min_steal));
        let r = e.run(&[spec], &out).await.unwrap();
        let f = &r.files[0];
        assert_eq!(f.outcome, "ok", "stealing {stealing}");
        assert_eq!(f.streams, 2);
        assert_eq!(std::fs::read(out.join("f.bin")).unwrap(), body);
        assert_eq!(f.fetched, body.len() as u64);
        if stealing {
            // 500 KB left to the slow stream, halved down to under 64 KiB: several steals.
            assert!(f.steals >= 2, "{} steals", f.steals);
        } else {
            assert_eq!(f.steals, 0);
        }
        let _ = std::fs::remove_dir_all(&out);
    }
}

/// Two files that would be saved under one name are refused before anything is fetched:
/// their streams would share one partial file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_saved_under_one_name_are_refused() {
    let (base, conns) =
        counting_server(&[("/a/f.bin", bytes(10, 1)), ("/b/f.bin", bytes(10, 2))]).await;
    let out = scratch("same-name");
    let e = Arc::new(Engine::new(Params::default()).unwrap());
    for (second, why) in [("/b/f.bin", "as http://"), ("/a/f.bin", "listed twice")] {
        let files = [
            FileSpec::from_url(&format!("{base}/a/f.bin")).unwrap(),
            FileSpec::from_url(&format!("{base}{second}")).unwrap(),
        ];
        let err = e.run(&files, &out).await.unwrap_err().to_string();
        assert!(err.contains(second) && err.contains(why), "{err}");
    }
    let files = [
        FileSpec::from_url(&format!("{base}/a/f.bin.part")).unwrap(),
        FileSpec::from_url(&format!("{base}/a/f.bin")).unwrap(),
    ];
    let err = e.run(&files, &out).await.unwrap_err().to_string();
    assert!(err.contains("f.bin.part: its name is that of"), "{err}");
    assert_eq!(conns.accepted(), 0, "nothing is fetched");
    assert!(!out.exists());
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
    let e = Arc::new(engine(1, 2, 8192));
    let r = fetch_one(&e, &format!("{base}/r/file.bin"), &out).await;
    assert_eq!(r.files[0].outcome, "ok");
    assert_eq!(
        r.files[0].fetched, 200_000,
        "only the missing half was fetched"
    );
    assert_eq!(
        e.expected.load(Ordering::Relaxed),
        200_000,
        "only it was expected"
    );
    assert_eq!(std::fs::read(out.join("file.bin")).unwrap(), body);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn bad_parameters_and_urls_are_refused_with_what_is_wrong() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _g = rt.enter();
    let e = Engine::new(Params {
        cc: 0,
        p: 1,
        bs: 4096,
        ..Params::default()
    })
    .err()
    .unwrap();
    assert!(e.to_string().contains("concurrency 0"), "{e}");
    let e = Engine::new(Params {
        cc: 1,
        p: 1,
        bs: 10,
        ..Params::default()
    })
    .err()
    .unwrap();
    assert!(e.to_string().contains("block size 10"), "{e}");
    assert!(FileSpec::from_url("ftp://x/y").is_err());
    assert!(FileSpec::from_url("http://host/").is_err());
    assert_eq!(
        FileSpec::from_url("http://h:1/a/b.txt?x=1").unwrap().name,
        "b.txt"
    );
    // Names are percent-decoded, and a decoded name that leaves the directory is refused.
    assert_eq!(
        FileSpec::from_url("https://h/a%201%25.bin").unwrap().name,
        "a 1%.bin"
    );
    assert_eq!(FileSpec::from_url("http://h/50%zz").unwrap().name, "50%zz");
    for bad in [
        "http://h/..%2Fetc%2Fpasswd",
        "http://h/%2E%2E",
        "http://h/a%00b",
        "http://h/%ff",
    ] {
        let e = FileSpec::from_url(bad).unwrap_err().to_string();
        assert!(e.contains(bad), "{e}");
    }
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
    let e = Arc::new(engine(2, 1, 64 * 1024));
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

/// A dataset listed by its HTTP/1.1 URLs moves over HTTP/2 when the server advertises it
/// (`Alt-Svc: h2c=":PORT"`) and the parameters say HTTP/2: every file with several range
/// streams, all over one connection to the HTTP/2 server, byte for byte. The HTTP/1.1 server
/// answers only the survey's first wave, whose advertisement sends the rest of the survey over
/// HTTP/2 as well.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_is_taken_where_the_server_advertises_it() {
    let files: Vec<(String, Vec<u8>)> = (0..10)
        .map(|i| {
            (
                format!("/h/f{i}.bin"),
                bytes(50_000 + i as usize * 999, 300 + i),
            )
        })
        .collect();
    let listed: Vec<(&str, Vec<u8>)> = files.iter().map(|(p, b)| (p.as_str(), b.clone())).collect();
    let (port, h2_conns, h2_requests) = h2c_server(&listed).await;
    let alt = format!("h2c=\":{port}\"; ma=3600");
    let (base, h1_conns) = advertising_server(&listed, Some(&alt)).await;
    let mut specs: Vec<FileSpec> = files
        .iter()
        .map(|(p, _)| FileSpec::from_url(&format!("{base}{p}")).unwrap())
        .collect();
    let survey = Arc::new(engine(4, 1, 64 * 1024));
    let sv = survey.survey(&specs).await.unwrap();
    assert!(
        sv.h2c_for_all(&(0..files.len()).collect::<Vec<_>>()),
        "{:?}",
        sv.h2c
    );
    sv.apply(&mut specs);
    // The first wave (at most cc = 4: on loopback the first answer may come before the
    // other requests are sent) over HTTP/1.1, the rest over the HTTP/2 it advertised.
    let h1 = h1_conns.busiest().0;
    assert!(
        (1..=4).contains(&h1),
        "{h1} HTTP/1.1 requests in the survey"
    );
    assert_eq!(h2_requests.load(Ordering::SeqCst), files.len() - h1);
    let p = Params {
        cc: 4,
        p: 3,
        protocol: Protocol::Http2,
        ..Params::default()
    };
    let out = scratch("h2c");
    let e = Arc::new(survey.sharing(p).unwrap());
    let r = e.run(&specs, &out).await.unwrap();
    assert!(r.failures().is_empty(), "{:?}", r.failures());
    for (p, b) in &files {
        assert_eq!(&std::fs::read(out.join(&p[3..])).unwrap(), b, "{p}");
    }
    // One connection; hyper may open a second when requests race its first one's handshake
    // (seen on a loaded machine), never one per stream.
    let c = h2_conns.load(Ordering::SeqCst);
    assert!((1..=2).contains(&c), "{c} HTTP/2 connections");
    assert_eq!(
        h2_requests.load(Ordering::SeqCst),
        files.len() - h1 + files.len() * 3,
        "the survey's and 3 ranges a file"
    );
    assert_eq!(h1_conns.busiest().0, h1, "HTTP/1.1 requests in all");
    assert!(r
        .files
        .iter()
        .all(|f| f.params.protocol == Protocol::Http2 && f.url.starts_with(&base)));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn alt_svc_advertisements_are_read_or_ignored() {
    let u = "http://10.0.0.2:8080/d/f1.bin";
    assert_eq!(
        engine::alt_svc_h2c(u, "h2c=\":8081\"; ma=60").as_deref(),
        Some("http://10.0.0.2:8081/d/f1.bin")
    );
    assert_eq!(
        engine::alt_svc_h2c(u, "h3=\":443\", h2c=\"10.0.0.2:81\"").as_deref(),
        Some("http://10.0.0.2:81/d/f1.bin")
    );
    // Another host: not taken without TLS to vouch for it.
    assert_eq!(engine::alt_svc_h2c(u, "h2c=\"other:81\""), None);
    assert_eq!(
        engine::alt_svc_h2c("http://[::1]:80/x", "h2c=\":81\"").as_deref(),
        Some("http://[::1]:81/x")
    );
    for bad in [
        "clear",
        "h2=\":443\"",
        "h2c=:81",
        "h2c=\":0\"",
        "h2c=\":99999\"",
        "h2c=\"a/b:1\"",
        "",
    ] {
        assert_eq!(engine::alt_svc_h2c(u, bad), None, "{bad}");
    }
}

/// A file asked for whole (`bytes=0-`) and answered with less, in a correct range: the rest
/// comes in ranges, and the file is whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shorter_answer_to_the_whole_file_is_completed_in_ranges() {
    let body = bytes(100_001, 7);
    let (base, conns) = counting_server(&[("/short/f.bin", body.clone())]).await;
    let out = scratch("short");
    let e = Arc::new(Engine::new(Params::default()).unwrap());
    let spec = FileSpec::from_url(&format!("{base}/short/f.bin")).unwrap();
    let r = e.run(&[spec], &out).await.unwrap();
    assert!(r.failures().is_empty(), "{:?}", r.failures());
    assert_eq!(std::fs::read(out.join("f.bin")).unwrap(), body);
    assert_eq!((r.bytes, r.files[0].size), (100_001, 100_001));
    assert_eq!(conns.busiest().0, 2, "the open range and the rest");
    let _ = std::fs::remove_dir_all(&out);
}

/// A dataset whose listing gives every size: the survey asks only its first wave (the RTT and
/// the server's range support), and the transfer is whole. A listed size that is wrong is an
/// error naming it, and the file is not claimed complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listed_dataset_is_surveyed_by_its_first_wave() {
    let files: Vec<(String, Vec<u8>)> = (0..12)
        .map(|i| {
            (
                format!("/l/f{i}.bin"),
                bytes(20_000 + i as usize * 77, 900 + i),
            )
        })
        .collect();
    let listed: Vec<(&str, Vec<u8>)> = files.iter().map(|(p, b)| (p.as_str(), b.clone())).collect();
    let (base, conns) = counting_server(&listed).await;
    let mut specs: Vec<FileSpec> = files
        .iter()
        .map(|(p, b)| FileSpec {
            listed_size: Some(b.len() as u64),
            ..FileSpec::from_url(&format!("{base}{p}")).unwrap()
        })
        .collect();
    let e = Arc::new(engine(4, 2, 64 * 1024));
    let sv = e.survey(&specs).await.unwrap();
    let asked = conns.busiest().0;
    assert!((1..=4).contains(&asked), "{asked} survey requests");
    assert!(sv.rtt_ms.is_finite());
    assert_eq!(
        sv.sizes,
        files.iter().map(|f| f.1.len() as u64).collect::<Vec<_>>()
    );
    assert!(sv.ranged.iter().all(|&r| r));
    sv.apply(&mut specs);
    let out = scratch("listed");
    let r = e.run(&specs, &out).await.unwrap();
    assert!(r.failures().is_empty(), "{:?}", r.failures());
    for (p, b) in &files {
        assert_eq!(&std::fs::read(out.join(&p[3..])).unwrap(), b, "{p}");
    }
    // A wrong listed size (as a survey would pass it on).
    let mut wrong = specs[0].clone();
    wrong.ranged_size = Some(files[0].1.len() as u64 + 5);
    wrong.name = "wrong.bin".into();
    let r = e.run(&[wrong], &out).await.unwrap();
    assert!(
        r.files[0].outcome.contains("the server's range says"),
        "{}",
        r.files[0].outcome
    );
    assert!(!out.join("wrong.bin").exists());
    let _ = std::fs::remove_dir_all(&out);
}

mod session;
mod tls;
mod upload;
