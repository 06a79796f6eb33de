//! The HLA server against its attackers: every test plays one (issue 43), over loopback.

use std::io::Write as _;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::*;
use crate::hla::Optimum;
use crate::params::Params;

const ANN: &str = "0123456789abcdef0123456789abcdef";
const BOB: &str = "fedcba9876543210fedcba9876543210";

/// Two conditions, cc swept, throughput per joule peaking at a known cc.
fn records() -> Vec<Record> {
    let mut v = Vec::new();
    for (rtt, best_cc) in [(59.0, 8u32), (290.0, 16)] {
        for cc in [1u32, 2, 4, 8, 16, 32] {
            let th = 5.0 * (cc.min(best_cc) as f64) + 0.1 * cc as f64;
            let e = 100.0 / th * if cc > best_cc { 2.0 } else { 1.0 };
            v.push(Record {
                rtt_ms: rtt,
                bandwidth_mbps: 200.0,
                mean_file_bytes: 2.7e6,
                params: Params {
                    cc,
                    p: 1,
                    bs: 65536,
                    ..Params::default()
                },
                throughput_mbps: th,
                energy_j_per_100mb: e,
                ok: true,
                context: Default::default(),
            });
        }
    }
    v
}

fn lines(records: &[Record]) -> String {
    records
        .iter()
        .map(|r| serde_json::to_string(r).unwrap() + "\n")
        .collect()
}

/// A scratch directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("roam-hla-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A token file of Ann's and Bob's tokens, private.
fn token_file(dir: &Path, text: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join("tokens");
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

fn ann_and_bob() -> String {
    format!("# devices\n{ANN} ann's phone\n{BOB} bob\n")
}

/// A server of `config` on a loopback port: its address and the server; served until the
/// returned guard is dropped.
async fn start(config: Config, tls: Option<Tls>) -> (SocketAddr, Arc<HlaServer>, AbortOnDrop) {
    let (server, _) = HlaServer::open(config).unwrap();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let task = AbortOnDrop(tokio::spawn(server.clone().serve(l, tls)));
    (addr, server, task)
}

fn client(addr: SocketAddr, token: Option<&str>) -> HlaClient {
    HlaClient::new(&format!("http://{addr}"), None, token.map(String::from)).unwrap()
}

/// One raw request on a fresh connection: the answer's text (status line first), within
/// `limit`, or `None` if none came.
async fn raw(addr: SocketAddr, request: &[u8], limit: Duration) -> Option<String> {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(request).await.unwrap();
    let mut out = Vec::new();
    let read = tokio::time::timeout(limit, async {
        let mut buf = [0u8; 4096];
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
            if out.windows(4).any(|w| w == b"\r\n\r\n") {
                break;
            }
        }
    })
    .await;
    (read.is_ok() && !out.is_empty()).then(|| String::from_utf8_lossy(&out).into_owned())
}

fn post(token: Option<&str>, body: &str) -> Vec<u8> {
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    format!(
        "POST /logs HTTP/1.1\r\nHost: hla\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

const SECOND: Duration = Duration::from_secs(1);

/// The whole path over HTTP: upload with a token, learn, fetch; an oversized body and an
/// unknown path refused; the logs read back from the state directory, with their device.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_uploads_and_fetches_over_http() {
    let dir = Scratch::new("http");
    let config = Config {
        state: Some(dir.0.join("state")),
        tokens: Some(token_file(&dir.0, &ann_and_bob())),
        ..Config::new(Kind::Svm)
    };
    let (addr, server, task) = start(config.clone(), None).await;
    let ann = client(addr, Some(ANN));
    assert_eq!(ann.upload(&records()).await.unwrap(), 12);
    let (u, dropped) = ann.fetch_update().await.unwrap();
    assert!(dropped.is_empty(), "{dropped:?}");
    assert_eq!(u.table.entries.len(), 2);
    assert!(u.model.is_some());
    let big = " ".repeat(Limits::default().max_body + 1);
    let a = raw(addr, &post(Some(ANN), &big), 5 * SECOND).await.unwrap();
    assert!(a.starts_with("HTTP/1.1 413"), "{a}");
    let a = raw(addr, b"GET /x HTTP/1.1\r\nHost: hla\r\n\r\n", 5 * SECOND)
        .await
        .unwrap();
    assert!(a.starts_with("HTTP/1.1 404"), "{a}");
    // New logs within the relearning interval: the same update, at once.
    let first = server.update_json().await;
    ann.upload(&records()).await.unwrap();
    let t = Instant::now();
    assert_eq!(server.update_json().await, first);
    assert!(t.elapsed() < Limits::default().learn_wait + SECOND);
    drop(task);
    let (again, w) = HlaServer::open(config).unwrap();
    assert_eq!((again.len(), w.len()), (24, 0), "{w:?}");
    let text = std::fs::read_to_string(dir.0.join("state/logs.jsonl")).unwrap();
    assert!(text
        .lines()
        .all(|l| l.contains("\"owner\":\"ann's phone\"")));
}

#[test]
fn the_update_holds_each_conditions_optimum_and_a_model() {
    let u = learn(&records(), Kind::Network).unwrap();
    assert_eq!(u.table.entries.len(), 2);
    let m = u.model.unwrap();
    let c = |rtt_ms| crate::model::Condition {
        rtt_ms,
        bandwidth_mbps: 200.0,
        mean_file_bytes: 2.7e6,
    };
    for rtt in [290.0, 59.0] {
        assert_eq!(
            m.predict(&c(rtt)).cc,
            u.table.lookup(&c(rtt)).unwrap().params.cc
        );
    }
    assert!(learn(&[], Kind::Svm).unwrap().model.is_none());
}

/// Finding 1: anyone could upload. Now: no token, an unknown one, or one whose line was
/// removed from the file is refused (401) before the body is read; a server started without
/// a token file takes no upload at all (403).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_need_a_listed_token_and_removing_its_line_revokes_it() {
    let dir = Scratch::new("auth");
    let tokens = token_file(&dir.0, &ann_and_bob());
    let config = Config {
        tokens: Some(tokens.clone()),
        ..Config::new(Kind::Knn)
    };
    let (addr, server, _task) = start(config, None).await;
    let body = lines(&records());
    for token in [None, Some("not-a-listed-token-at-all")] {
        let a = raw(addr, &post(token, &body), 5 * SECOND).await.unwrap();
        assert!(a.starts_with("HTTP/1.1 401"), "{a}");
        assert!(a.to_lowercase().contains("www-authenticate: bearer"), "{a}");
    }
    assert_eq!(server.len(), 0);
    assert_eq!(
        client(addr, Some(BOB)).upload(&records()).await.unwrap(),
        12
    );
    // Bob's line removed: his token no longer uploads, Ann's still does.
    std::fs::write(&tokens, format!("{ANN} ann's phone\n")).unwrap();
    let e = client(addr, Some(BOB))
        .upload(&records())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("HTTP 401"), "{e}");
    assert_eq!(
        client(addr, Some(ANN)).upload(&records()).await.unwrap(),
        12
    );
    // A token file that no longer parses refuses everyone until fixed.
    std::fs::write(&tokens, format!("{ANN}\n")).unwrap();
    let e = client(addr, Some(ANN))
        .upload(&records())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("HTTP 503"), "{e}");
    assert_eq!(server.len(), 24);
    // Without a token file: no uploads; the update still served.
    let (addr, _, _task) = start(Config::new(Kind::Knn), None).await;
    let e = client(addr, Some(ANN))
        .upload(&records())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("HTTP 403"), "{e}");
    assert!(client(addr, None).fetch_update().await.is_ok());
    // With --update-needs-token, the update too.
    let config = Config {
        tokens: Some(token_file(&dir.0, &ann_and_bob())),
        update_needs_token: true,
        ..Config::new(Kind::Knn)
    };
    let (addr, _, _task) = start(config, None).await;
    let e = client(addr, None).fetch_update().await.unwrap_err();
    assert!(e.to_string().contains("HTTP 401"), "{e}");
    assert!(client(addr, Some(ANN)).fetch_update().await.is_ok());
}

/// Finding 1: a device past its hourly quota is refused (429, Retry-After), and others are
/// not; a flood from one token cannot evict another device's logs ([`store`]'s tests show the
/// eviction rule in full).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_past_its_quota_is_refused_and_cannot_evict_the_others() {
    let dir = Scratch::new("quota");
    let mut limits = Limits {
        quota_records: 30,
        ..Limits::default()
    };
    limits.store.max_logs = 40;
    let config = Config {
        tokens: Some(token_file(&dir.0, &ann_and_bob())),
        limits,
        ..Config::new(Kind::Knn)
    };
    let (addr, server, _task) = start(config, None).await;
    let body = lines(&records());
    assert_eq!(
        client(addr, Some(ANN)).upload(&records()).await.unwrap(),
        12
    );
    assert_eq!(
        client(addr, Some(BOB)).upload(&records()).await.unwrap(),
        12
    );
    assert_eq!(
        client(addr, Some(BOB)).upload(&records()).await.unwrap(),
        12
    );
    let a = raw(addr, &post(Some(BOB), &body), 5 * SECOND)
        .await
        .unwrap();
    assert!(a.starts_with("HTTP/1.1 429"), "{a}");
    assert!(a.to_lowercase().contains("retry-after: "), "{a}");
    assert_eq!(
        client(addr, Some(ANN)).upload(&records()).await.unwrap(),
        12
    );
    // Bob's flood (within a larger quota) evicts Bob's own records only.
    let (addr, server2, _task2) = start(
        Config {
            tokens: Some(token_file(&dir.0, &ann_and_bob())),
            limits: Limits {
                store: StoreLimits {
                    max_logs: 40,
                    max_bytes: 1 << 30,
                },
                ..Limits::default()
            },
            ..Config::new(Kind::Knn)
        },
        None,
    )
    .await;
    client(addr, Some(ANN)).upload(&records()).await.unwrap();
    for _ in 0..10 {
        client(addr, Some(BOB)).upload(&records()).await.unwrap();
    }
    let inner = server2.lock();
    assert_eq!(inner.store.held_by("ann's phone"), 12);
    assert_eq!(inner.store.held_by("bob"), 28);
    drop(inner);
    assert_eq!(server.len(), 40);
}

/// Finding 2: a record with cc and p of 4294967295 (learning looped over the grid up to them,
/// under the lock, so that no `GET /update` was answered again, even after a restart) is
/// refused with 400, naming the line and the field; so is every other value out of bounds,
/// and nothing of such a body is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_with_values_out_of_bounds_is_refused_naming_the_field() {
    let dir = Scratch::new("bounds");
    let config = Config {
        tokens: Some(token_file(&dir.0, &ann_and_bob())),
        ..Config::new(Kind::Knn)
    };
    let (addr, server, _task) = start(config, None).await;
    let mut rs = records()[..3].to_vec();
    rs[2].params.cc = u32::MAX;
    rs[2].params.p = u32::MAX;
    let a = raw(addr, &post(Some(ANN), &lines(&rs)), 5 * SECOND)
        .await
        .unwrap();
    assert!(a.starts_with("HTTP/1.1 400"), "{a}");
    assert!(a.contains("line 3: params.cc: 4294967295"), "{a}");
    type Spoil = fn(&mut Record);
    let cases: [(&str, Spoil); 6] = [
        ("params.p", |r| r.params.p = 0),
        ("params.bs", |r| r.params.bs = usize::MAX),
        ("rtt_ms", |r| r.rtt_ms = -1.0),
        ("bandwidth_mbps", |r| r.bandwidth_mbps = 0.0),
        ("throughput_mbps", |r| r.throughput_mbps = 1e300),
        ("energy_j_per_100mb", |r| r.energy_j_per_100mb = -5.0),
    ];
    for (field, spoil) in cases {
        let mut r = records()[0].clone();
        spoil(&mut r);
        let a = raw(addr, &post(Some(ANN), &lines(&[r])), 5 * SECOND)
            .await
            .unwrap();
        assert!(
            a.starts_with("HTTP/1.1 400") && a.contains(&format!("line 1: {field}")),
            "{field}: {a}"
        );
    }
    assert_eq!(server.len(), 0);
    assert!(client(addr, None).fetch_update().await.is_ok());
}

/// Valid records at their bounds, made for the longest learning: `n / 2` conditions each its
/// own cluster (apart by more than the clustering distance), each with a pair of records at
/// the extremes of cc and p (the widest grid), and every cluster's optimum its own parameters
/// (one class each).
fn hostile(n: usize) -> Vec<Record> {
    let mut out = Vec::new();
    let step = 0.35;
    'all: for i in 0..15 {
        for j in 0..20 {
            for k in 0..35 {
                let c = out.len() / 2;
                for far in [false, true] {
                    if out.len() >= n {
                        break 'all;
                    }
                    out.push(Record {
                        rtt_ms: 10f64.powf(i as f64 * step),
                        bandwidth_mbps: 10f64.powf(-2.0 + j as f64 * step),
                        mean_file_bytes: 10f64.powf(k as f64 * step),
                        params: Params {
                            cc: if far {
                                crate::params::MAX_CC
                            } else {
                                1 + (c % 200) as u32
                            },
                            p: if far { crate::params::MAX_P } else { 1 },
                            bs: crate::params::MIN_BS + c,
                            ..Params::default()
                        },
                        throughput_mbps: 10f64.powf(-2.0 + j as f64 * step) * 0.5,
                        energy_j_per_100mb: 10.0 + c as f64,
                        ok: true,
                        context: Default::default(),
                    });
                }
            }
        }
    }
    out
}

/// `f` within `limit`, else a failure (not a hang).
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("did not finish within {limit:?}"))
}

/// Finding 2: learning is bounded whatever valid records hold (thousands of clusters each its
/// own optimum took the learner hours: one class each for the model; the grid up to cc 256 and
/// p 64 in every cluster).
#[test]
fn learning_takes_bounded_time_whatever_is_uploaded() {
    for kind in [Kind::Network, Kind::Svm] {
        let rs = hostile(MAX_LEARN);
        let t = Instant::now();
        let u = within(Duration::from_secs(60), move || learn(&rs, kind).unwrap());
        eprintln!(
            "{}: {} clusters learnt in {:.2} s",
            kind.name(),
            u.table.entries.len(),
            t.elapsed().as_secs_f64()
        );
        assert!(u.table.entries.len() > 1000);
        assert!(u.model.unwrap().classes.len() <= crate::model::MAX_CLASSES);
    }
    // Few classes, many samples each: the most the model's training does.
    let mut rs = hostile(MAX_LEARN);
    for (i, r) in rs.iter_mut().enumerate() {
        r.params.cc = 1 + (i % crate::model::MAX_CLASSES) as u32;
        r.params.p = 1;
        r.params.bs = 65536;
    }
    let t = Instant::now();
    within(Duration::from_secs(60), move || {
        learn(&rs, Kind::Network).unwrap()
    });
    eprintln!("16 classes: learnt in {:.2} s", t.elapsed().as_secs_f64());
}

/// Finding 2: while the learner works through the hostile logs, `GET /update` is answered
/// (the learning holds no lock the requests need); the update that follows is learnt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_update_is_served_while_learning() {
    let dir = Scratch::new("learning");
    let config = Config {
        tokens: Some(token_file(&dir.0, &ann_and_bob())),
        ..Config::new(Kind::Network)
    };
    let (addr, _server, _task) = start(config, None).await;
    let rs = hostile(MAX_LEARN);
    assert_eq!(
        client(addr, Some(ANN)).upload(&rs).await.unwrap(),
        MAX_LEARN
    );
    for _ in 0..3 {
        let t = Instant::now();
        let got = tokio::time::timeout(10 * SECOND, client(addr, None).fetch_update()).await;
        assert!(got.is_ok(), "no update within 10 s");
        assert!(t.elapsed() < Limits::default().learn_wait + 2 * SECOND);
    }
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let (u, _) = client(addr, None).fetch_update().await.unwrap();
        if u.model.is_some() {
            assert!(u.table.entries.len() > 1000);
            break;
        }
        assert!(Instant::now() < end, "no learnt update within a minute");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Finding 3: an update whose entry has cc and p of 4294967295 (a client multiplied them and,
/// with overflow checks, crashed), others out of bounds, and a model with a class of
/// concurrency 0: the entries and the model are dropped with the reasons, the valid entry
/// kept, and what the broker then chooses is within bounds and plans without overflow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_update_is_checked_before_use() {
    let good = Optimum {
        params: Params {
            cc: 8,
            p: 2,
            bs: 65536,
            ..Params::default()
        },
        throughput_mbps: 40.0,
        energy_j_per_100mb: 10.0,
    };
    let spoilt = |f: fn(&mut Optimum)| {
        let mut o = good;
        f(&mut o);
        o
    };
    let c = crate::model::Condition {
        rtt_ms: 50.0,
        bandwidth_mbps: 100.0,
        mean_file_bytes: 1e6,
    };
    let mut model = learn(&records(), Kind::Knn).unwrap().model.unwrap();
    model.classes[0].cc = 0;
    let hostile = Update {
        table: crate::hla::Table {
            entries: vec![
                (
                    c.features(),
                    spoilt(|o| {
                        o.params.cc = u32::MAX;
                        o.params.p = u32::MAX;
                    }),
                ),
                ([1.0, 2.0, 5.0], spoilt(|o| o.params.bs = 0)),
                ([1.0, 2.0, 5.0], spoilt(|o| o.throughput_mbps = -1.0)),
                ([9.0, 9.0, 9.0], good),
            ],
        },
        model: Some(model),
    };
    let json = serde_json::to_string(&hostile).unwrap();
    // A server answering every request with it.
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let answer = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{json}",
        json.len()
    );
    let evil = AbortOnDrop(tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let answer = answer.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                let _ = s.write_all(answer.as_bytes()).await;
            });
        }
    }));
    let (u, dropped) = client(addr, None).fetch_update().await.unwrap();
    drop(evil);
    assert_eq!(u.table.entries, vec![([9.0, 9.0, 9.0], good)]);
    assert!(u.model.is_none());
    assert_eq!(dropped.len(), 4, "{dropped:?}");
    assert!(dropped[0].contains("concurrency 4294967295"), "{dropped:?}");
    assert!(dropped[3].contains("the model dropped"), "{dropped:?}");
    // The broker checks too (an update it is handed directly), and plans within bounds.
    let mut b = crate::broker::Broker::default();
    b.apply(hostile);
    let choice = b.choose(&c);
    choice.params.validate().unwrap();
    let plan = crate::mixed::plan(&[1_000_000; 4], |_, _| b.choose(&c).params, 64);
    assert!(plan.iter().all(|c| c.params.validate().is_ok()));
    // And the plan's arithmetic does not overflow even on unchecked parameters.
    let wild = Params {
        cc: u32::MAX,
        p: u32::MAX,
        ..Params::default()
    };
    let plan = crate::mixed::plan(&[u64::MAX, u64::MAX, 1], |_, _| wild, 64);
    assert!(!plan.is_empty());
}

/// A self-signed certificate for 127.0.0.1 in `dir`: (cert, key) paths.
fn certificate(dir: &Path) -> (PathBuf, PathBuf) {
    let c = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, c.cert.pem()).unwrap();
    std::fs::write(&key, c.signing_key.serialize_pem()).unwrap();
    (cert, key)
}

/// Finding 4: over HTTPS. A device trusting the server's authority uploads and fetches; one
/// that does not refuses the certificate; plain HTTP to the HTTPS port gets nothing; a token is
/// never sent over plain HTTP beyond loopback; files that are not a certificate and key are
/// refused, named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn devices_upload_and_fetch_over_https() {
    let dir = Scratch::new("tls");
    let (cert, key) = certificate(&dir.0);
    let tls = Tls::from_pem_files(&cert, &key).unwrap();
    let config = Config {
        tokens: Some(token_file(&dir.0, &ann_and_bob())),
        ..Config::new(Kind::Svm)
    };
    let (addr, server, _task) = start(config, Some(tls)).await;
    let base = format!("https://{addr}");
    let ann = HlaClient::new(&base, Some(&cert), Some(ANN.into())).unwrap();
    assert_eq!(ann.upload(&records()).await.unwrap(), 12);
    let (u, _) = ann.fetch_update().await.unwrap();
    assert_eq!(u.table.entries.len(), 2);
    assert_eq!(server.len(), 12);
    let stranger = HlaClient::new(&base, None, Some(ANN.into())).unwrap();
    let e = stranger.upload(&records()).await.unwrap_err().to_string();
    assert!(e.to_lowercase().contains("certificate"), "{e}");
    assert!(raw(addr, &post(Some(ANN), "{}"), 3 * SECOND)
        .await
        .is_none_or(|a| !a.starts_with("HTTP/1.1 200")));
    let e = HlaClient::new("http://192.0.2.1:8790", None, Some(ANN.into()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("use https://"), "{e}");
    assert!(HlaClient::new("http://[::1]:8790", None, Some(ANN.into())).is_ok());
    let e = Tls::from_pem_files(&key, &key).err().unwrap().to_string();
    assert!(e.contains("key.pem") && e.contains("no certificate"), "{e}");
    let e = Tls::from_pem_files(&cert, &cert).err().unwrap().to_string();
    assert!(e.contains("cert.pem") && e.contains("private key"), "{e}");
}

/// An idle connection from `from` to `addr`.
async fn idle_from(from: &str, addr: SocketAddr) -> TcpStream {
    let s = tokio::net::TcpSocket::new_v4().unwrap();
    s.bind(format!("{from}:0").parse().unwrap()).unwrap();
    s.connect(addr).await.unwrap()
}

/// Whether the server closed `s` within `limit`.
async fn closed(s: &mut TcpStream, limit: Duration) -> bool {
    let mut buf = [0u8; 64];
    matches!(
        tokio::time::timeout(limit, s.read(&mut buf)).await,
        Ok(Ok(0)) | Ok(Err(_))
    )
}

/// Finding 6: one source cannot take every connection: past its share its newcomers are
/// closed at once while another source's are served; the connections in all are bounded too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_source_cannot_hold_every_connection() {
    let limits = Limits {
        max_connections: 5,
        max_per_source: 3,
        header_timeout: Duration::from_secs(30),
        ..Limits::default()
    };
    let (addr, _, _task) = start(
        Config {
            limits,
            ..Config::new(Kind::Knn)
        },
        None,
    )
    .await;
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(idle_from("127.0.0.1", addr).await);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    for s in &mut held {
        assert!(!closed(s, Duration::from_millis(100)).await);
    }
    let mut fourth = idle_from("127.0.0.1", addr).await;
    assert!(
        closed(&mut fourth, 2 * SECOND).await,
        "a 4th from one source"
    );
    // Another source is served.
    let mut other = idle_from("127.0.0.2", addr).await;
    other
        .write_all(b"GET /update HTTP/1.1\r\nHost: hla\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(5 * SECOND, other.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    // 3 + 1 held: one slot left of 5, then none.
    let _fifth = idle_from("127.0.0.3", addr).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut sixth = idle_from("127.0.0.4", addr).await;
    assert!(
        closed(&mut sixth, 2 * SECOND).await,
        "past the connections in all"
    );
    // A slot given back is taken again.
    drop(held);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut again = idle_from("127.0.0.1", addr).await;
    assert!(!closed(&mut again, Duration::from_millis(300)).await);
}

/// Finding 6: a body that stalls is cut off at the body deadline (408) rather than holding its
/// connection for the connection's whole minute; headers that stall, at the header deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_requests_are_cut_off_at_their_deadlines() {
    let dir = Scratch::new("slow");
    let limits = Limits {
        header_timeout: SECOND,
        body_timeout: SECOND,
        ..Limits::default()
    };
    let config = Config {
        tokens: Some(token_file(&dir.0, &ann_and_bob())),
        limits,
        ..Config::new(Kind::Knn)
    };
    let (addr, _, _task) = start(config, None).await;
    let t = Instant::now();
    let req = format!(
        "POST /logs HTTP/1.1\r\nHost: hla\r\nAuthorization: Bearer {ANN}\r\nContent-Length: 1000\r\n\r\n{{"
    );
    let a = raw(addr, req.as_bytes(), 5 * SECOND).await;
    let a = a.expect("an answer before the connection's deadline");
    assert!(a.starts_with("HTTP/1.1 408"), "{a}");
    assert!(t.elapsed() < 3 * SECOND);
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /upd").await.unwrap();
    let t = Instant::now();
    let mut buf = [0u8; 256];
    tokio::time::timeout(5 * SECOND, async {
        while let Ok(n) = s.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    })
    .await
    .expect("closed at the header deadline");
    assert!(t.elapsed() < 3 * SECOND);
}

/// Finding 5 at the server's level: a partial last line (a crash mid-append) does not stop
/// the server from starting; the lines before it are served from.
#[test]
fn a_server_starts_over_a_partial_last_line() {
    let dir = Scratch::new("partial");
    let state = dir.0.join("state");
    std::fs::create_dir_all(&state).unwrap();
    let whole = lines(&records());
    let mut f = std::fs::File::create(state.join("logs.jsonl")).unwrap();
    f.write_all(whole.as_bytes()).unwrap();
    f.write_all(b"{\"rtt_ms\": 59.0, \"bandwidth_m").unwrap();
    drop(f);
    let (server, warnings) = HlaServer::open(Config {
        state: Some(state.clone()),
        ..Config::new(Kind::Knn)
    })
    .unwrap();
    assert_eq!(server.len(), 12);
    assert!(
        warnings[0].contains("line 13, the last, is incomplete"),
        "{warnings:?}"
    );
    assert_eq!(
        std::fs::read_to_string(state.join("logs.jsonl")).unwrap(),
        whole
    );
}
