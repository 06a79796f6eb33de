//! Uploads (`Engine::put`) against a `PUT` server on hyper's: both HTTP versions, refusals,
//! streams cut or left unanswered.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::net::TcpListener;

use super::{bytes, scratch};
use crate::{Engine, Params, Protocol, Upload};

/// What a PUT server received: path -> body, complete uploads only.
type Stored = Arc<std::sync::Mutex<HashMap<String, Vec<u8>>>>;

/// A server taking `PUT`s on hyper's server (HTTP/1.1, or cleartext HTTP/2 with prior
/// knowledge): `/deny/...` is answered 403; the first `PUT` to a `/cut/...` path is read
/// half-way and its connection closed; the first to a `/mute/...` path is read whole and never
/// answered; anything else is stored, 201. Its base URL and what it stored.
async fn put_server(http2: bool) -> (String, Stored) {
    use http_body_util::Full;
    use hyper::{Response, StatusCode};
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", l.local_addr().unwrap());
    let stored: Stored = Arc::default();
    let first_seen: Arc<std::sync::Mutex<std::collections::HashSet<String>>> = Arc::default();
    let st = stored.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            let (st, first_seen) = (st.clone(), first_seen.clone());
            let service =
                hyper::service::service_fn(move |r: hyper::Request<hyper::body::Incoming>| {
                    let (st, first_seen) = (st.clone(), first_seen.clone());
                    async move {
                        let path = r.uri().path().to_string();
                        let len: usize = r
                            .headers()
                            .get("content-length")
                            .and_then(|v| v.to_str().ok()?.parse().ok())
                            .unwrap_or(0);
                        let answer = |status| {
                            Ok::<_, std::io::Error>(
                                Response::builder()
                                    .status(status)
                                    .body(Full::<bytes::Bytes>::default())
                                    .unwrap(),
                            )
                        };
                        if path.starts_with("/deny/") {
                            return answer(StatusCode::FORBIDDEN);
                        }
                        let first = first_seen.lock().unwrap().insert(path.clone());
                        use http_body_util::BodyExt;
                        let mut body = r.into_body();
                        let mut got = Vec::new();
                        while let Some(Ok(f)) = body.frame().await {
                            if let Ok(d) = f.into_data() {
                                got.extend_from_slice(&d);
                            }
                            if first && path.starts_with("/cut/") && got.len() >= len / 2 {
                                // An error from the service closes the connection mid-body.
                                return Err(std::io::Error::other("cut"));
                            }
                        }
                        if first && path.starts_with("/mute/") {
                            std::future::pending::<()>().await;
                        }
                        st.lock().unwrap().insert(path, got);
                        answer(StatusCode::CREATED)
                    }
                });
            let io = hyper_util::rt::TokioIo::new(s);
            tokio::spawn(async move {
                if http2 {
                    let _ = hyper::server::conn::http2::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    )
                    .serve_connection(io, service)
                    .await;
                } else {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, service)
                        .await;
                }
            });
        }
    });
    (base, stored)
}

/// Files uploaded `cc` at a time arrive whole over HTTP/1.1 and over HTTP/2; a refused one
/// and a missing local file are errors naming them, the others unaffected; two files to one
/// URL are refused before anything is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_arrive_whole_and_refusals_are_named() {
    let dir = scratch("put-src");
    std::fs::create_dir_all(&dir).unwrap();
    let bodies: Vec<Vec<u8>> = (0..5)
        .map(|i| bytes(100_000 + i * 77_777, 60 + i as u32))
        .collect();
    for (i, b) in bodies.iter().enumerate() {
        std::fs::write(dir.join(format!("u{i}.bin")), b).unwrap();
    }
    for protocol in [Protocol::Http1, Protocol::Http2] {
        let (base, stored) = put_server(protocol == Protocol::Http2).await;
        let mut ups: Vec<Upload> = (0..5)
            .map(|i| Upload {
                path: dir.join(format!("u{i}.bin")),
                url: format!("{base}/up/u{i}.bin"),
            })
            .collect();
        ups.push(Upload {
            path: dir.join("u0.bin"),
            url: format!("{base}/deny/u0.bin"),
        });
        ups.push(Upload {
            path: dir.join("absent.bin"),
            url: format!("{base}/up/absent.bin"),
        });
        let e = Arc::new(
            Engine::new(Params {
                cc: 2,
                bs: 16_384,
                protocol,
                ..Params::default()
            })
            .unwrap(),
        );
        let r = e.put(&ups).await.unwrap();
        let stored = stored.lock().unwrap().clone();
        for (i, b) in bodies.iter().enumerate() {
            assert_eq!(r.files[i].outcome, "ok", "{protocol:?}");
            assert_eq!(r.files[i].fetched, b.len() as u64);
            assert_eq!(
                stored.get(&format!("/up/u{i}.bin")),
                Some(b),
                "{protocol:?} u{i}"
            );
        }
        assert!(
            r.files[5].outcome.contains("/deny/u0.bin: HTTP 403"),
            "{}",
            r.files[5].outcome
        );
        assert!(
            r.files[6].outcome.contains("absent.bin"),
            "{}",
            r.files[6].outcome
        );
        assert_eq!(r.bytes, bodies.iter().map(|b| b.len() as u64).sum::<u64>());
        let twice = [
            ups[0].clone(),
            Upload {
                path: dir.join("u1.bin"),
                url: ups[0].url.clone(),
            },
        ];
        let err = e.put(&twice).await.unwrap_err().to_string();
        assert!(err.contains("u0.bin") && err.contains("u1.bin"), "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// An upload whose connection closes mid-body, or that is never answered, is sent again
/// whole and arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_or_stalled_upload_is_sent_again() {
    let dir = scratch("put-retry");
    std::fs::create_dir_all(&dir).unwrap();
    let body = bytes(400_000, 9);
    std::fs::write(dir.join("r.bin"), &body).unwrap();
    let (base, stored) = put_server(false).await;
    let e = Arc::new(
        Engine::new(Params::default())
            .unwrap()
            .with_retry_wait(std::time::Duration::from_millis(2))
            .with_stall_timeout(std::time::Duration::from_millis(200)),
    );
    for how in ["cut", "mute"] {
        let up = Upload {
            path: dir.join("r.bin"),
            url: format!("{base}/{how}/r.bin"),
        };
        let r = e.put(&[up]).await.unwrap();
        assert_eq!(r.files[0].outcome, "ok", "{how}");
        assert!(r.files[0].retries >= 1, "{how}: not sent again");
        assert_eq!(
            stored.lock().unwrap().get(&format!("/{how}/r.bin")),
            Some(&body),
            "{how}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
