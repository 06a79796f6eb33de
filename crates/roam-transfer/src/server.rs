//! The HLA server (`roam hla serve`; the FastHLA paper, ../shared/spec/fasthla.md "Architecture"):
//! devices upload their transfer logs, the server learns from them ([`learn`]: outliers out,
//! clusters, spline surfaces, optima, a model) and serves the result as an [`Update`].
//!
//! HTTP/1.1 on hyper:
//! - `POST /logs`: JSON lines, one [`Record`] each; all or nothing (a bad line refuses the
//!   body and names the line). At most [`HlaState::MAX_BODY`] bytes a request.
//! - `GET /update`: the [`Update`] as JSON, relearnt when logs came since the last one (at
//!   most once every [`HlaState::RELEARN`] once there is a model: an uploader cannot keep the
//!   server learning).
//!
//! A hostile peer is assumed: bodies are bounded, the logs kept are bounded (the newest
//! [`HlaState::MAX_LOGS`]; the analysis samples at most [`HlaState::MAX_LEARN`] of them, as its
//! clustering needs memory quadratic in its input), at most [`MAX_CONNECTIONS`] connections
//! are served at once (more are closed), and a connection must send its headers within
//! [`HEADER_TIMEOUT`] and finish within [`CONNECTION_TIMEOUT`]. Learning is the only work a
//! request can cause, once per batch of new logs.
//!
//! With a state directory the logs are appended to `DIR/logs.jsonl` and read back at start;
//! past twice [`HlaState::MAX_LOGS`] records the file is rewritten with the kept ones.

use std::collections::VecDeque;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

use crate::broker::Update;
use crate::error::TransferError;
use crate::hla::{Record, Table, CLUSTER_DISTANCE};
use crate::model::{training_set, Kind, Model};

/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 64;
/// Time for a connection to send a request's headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Time a connection may last.
pub const CONNECTION_TIMEOUT: Duration = Duration::from_secs(60);

/// Learn from logs: the table of clusters' optima and a `kind` model of the optimiser's
/// choices (`None` when no record survives cleaning).
pub fn learn(records: &[Record], kind: Kind) -> Result<Update, TransferError> {
    let sample = stride_sample(records, HlaState::MAX_LEARN);
    let table = Table::learn(&sample, CLUSTER_DISTANCE);
    let set = training_set(&sample, CLUSTER_DISTANCE);
    let model = if set.is_empty() {
        None
    } else {
        Some(Model::train(kind, &set, 1)?)
    };
    Ok(Update { table, model })
}

/// At most `n` records, evenly spread over all of them (every condition keeps its share).
fn stride_sample(records: &[Record], n: usize) -> Vec<Record> {
    if records.len() <= n {
        return records.to_vec();
    }
    (0..n)
        .map(|i| records[i * records.len() / n].clone())
        .collect()
}

/// The server's state: the logs and the last update.
pub struct HlaState {
    logs: VecDeque<Record>,
    file: Option<PathBuf>,
    /// Records in the file (compacted to the kept ones past twice [`HlaState::MAX_LOGS`]).
    on_disk: usize,
    kind: Kind,
    /// Logs received since the update was learnt.
    fresh: bool,
    /// The last update, when it was learnt, and whether it has a model.
    update: Option<(Arc<String>, std::time::Instant, bool)>,
}

impl HlaState {
    /// Logs kept (the oldest dropped beyond).
    pub const MAX_LOGS: usize = 200_000;
    /// Bytes of one upload.
    pub const MAX_BODY: usize = 4 << 20;
    /// Records one learning samples at most.
    pub const MAX_LEARN: usize = 3000;
    /// Least time between two learnings.
    pub const RELEARN: Duration = Duration::from_secs(30);

    /// A server learning `kind` models, keeping its logs under `dir` if given (and reading
    /// those already there).
    pub fn new(kind: Kind, dir: Option<&Path>) -> Result<HlaState, TransferError> {
        let mut s = HlaState {
            logs: VecDeque::new(),
            file: None,
            on_disk: 0,
            kind,
            fresh: true,
            update: None,
        };
        if let Some(dir) = dir {
            std::fs::create_dir_all(dir).map_err(TransferError::io(dir))?;
            let file = dir.join("logs.jsonl");
            match std::fs::read_to_string(&file) {
                Ok(text) => {
                    let records = parse_lines(text.as_bytes())
                        .map_err(|e| TransferError::Model(format!("{}: {e}", file.display())))?;
                    s.on_disk = records.len();
                    s.keep(records);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(TransferError::io(&file)(e)),
            }
            s.file = Some(file);
        }
        Ok(s)
    }

    fn keep(&mut self, records: Vec<Record>) {
        for r in records {
            if self.logs.len() == Self::MAX_LOGS {
                self.logs.pop_front();
            }
            self.logs.push_back(r);
        }
        self.fresh = true;
    }

    /// Logs held.
    pub fn len(&self) -> usize {
        self.logs.len()
    }

    /// Whether no logs are held.
    pub fn is_empty(&self) -> bool {
        self.logs.is_empty()
    }

    /// Take an upload (JSON lines of records): how many it held, or why it was refused.
    pub fn ingest(&mut self, body: &[u8]) -> Result<usize, String> {
        let records = parse_lines(body)?;
        let n = records.len();
        if let Some(file) = &self.file {
            let mut text = String::new();
            for r in &records {
                text.push_str(&serde_json::to_string(r).expect("a record serialises"));
                text.push('\n');
            }
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(file)
                .and_then(|mut f| f.write_all(text.as_bytes()))
                .map_err(|e| format!("{}: {e}", file.display()))?;
            self.on_disk += n;
        }
        self.keep(records);
        if self.on_disk > 2 * Self::MAX_LOGS {
            self.compact()
                .map_err(|e| format!("compacting the logs: {e}"))?;
        }
        Ok(n)
    }

    /// Rewrite the log file with the logs kept (through a temporary file), so that uploads
    /// cannot grow it without bound.
    fn compact(&mut self) -> std::io::Result<()> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        let tmp = file.with_extension("jsonl.tmp");
        let mut w = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
        for r in &self.logs {
            serde_json::to_writer(&mut w, r)?;
            w.write_all(b"\n")?;
        }
        w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&tmp, file)?;
        self.on_disk = self.logs.len();
        Ok(())
    }

    /// The update for devices, learnt again if logs came since.
    pub fn update(&mut self) -> Result<Arc<String>, TransferError> {
        if let Some((u, at, modelled)) = &self.update {
            // Until there is a model, learning is cheap (nothing survived cleaning): new logs
            // are learnt from at once.
            if !self.fresh || (*modelled && at.elapsed() < Self::RELEARN) {
                return Ok(u.clone());
            }
        }
        // Only the sample the analysis uses is copied out of the (up to 200,000) logs.
        let (n, m) = (self.logs.len(), self.logs.len().min(Self::MAX_LEARN));
        let logs: Vec<Record> = (0..m).map(|i| self.logs[i * n / m].clone()).collect();
        let learnt = learn(&logs, self.kind)?;
        let modelled = learnt.model.is_some();
        let u = Arc::new(serde_json::to_string(&learnt).expect("serialises"));
        self.update = Some((u.clone(), std::time::Instant::now(), modelled));
        self.fresh = false;
        Ok(u)
    }
}

/// JSON lines of records (blank lines allowed); the first bad line named.
pub fn parse_lines(body: &[u8]) -> Result<Vec<Record>, String> {
    let text = std::str::from_utf8(body).map_err(|e| format!("not UTF-8: {e}"))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let r: Record = serde_json::from_str(line).map_err(|e| format!("line {}: {e}", i + 1))?;
        out.push(r);
    }
    Ok(out)
}

type Body = Full<Bytes>;

fn reply(status: StatusCode, text: impl Into<Bytes>, json: bool) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(
            "content-type",
            if json {
                "application/json"
            } else {
                "text/plain; charset=utf-8"
            },
        )
        .body(Full::new(text.into()))
        .expect("a valid response")
}

async fn handle(state: Arc<Mutex<HlaState>>, req: Request<Incoming>) -> Response<Body> {
    match (req.method(), req.uri().path()) {
        (&Method::POST, "/logs") => {
            let body = match Limited::new(req.into_body(), HlaState::MAX_BODY)
                .collect()
                .await
            {
                Ok(b) => b.to_bytes(),
                Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                    return reply(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        format!("an upload is at most {} bytes\n", HlaState::MAX_BODY),
                        false,
                    )
                }
                Err(e) => return reply(StatusCode::BAD_REQUEST, format!("{e}\n"), false),
            };
            let r = tokio::task::spawn_blocking(move || state.lock().unwrap().ingest(&body)).await;
            match r {
                Ok(Ok(n)) => reply(StatusCode::OK, format!("accepted {n}\n"), false),
                Ok(Err(e)) => reply(StatusCode::BAD_REQUEST, format!("{e}\n"), false),
                Err(e) => reply(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n"), false),
            }
        }
        (&Method::GET, "/update") => {
            let r = tokio::task::spawn_blocking(move || state.lock().unwrap().update()).await;
            match r {
                Ok(Ok(u)) => reply(StatusCode::OK, u.as_bytes().to_vec(), true),
                Ok(Err(e)) => reply(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n"), false),
                Err(e) => reply(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n"), false),
            }
        }
        _ => reply(
            StatusCode::NOT_FOUND,
            "POST /logs (JSON lines of records) or GET /update\n",
            false,
        ),
    }
}

/// Serve on `listener` until the task is dropped.
pub async fn serve(listener: tokio::net::TcpListener, state: Arc<Mutex<HlaState>>) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            drop(stream); // full: the newcomer is closed, the served keep their slots
            continue;
        };
        let state = state.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let state = state.clone();
                async move { Ok::<_, std::convert::Infallible>(handle(state, req).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            let _ = tokio::time::timeout(CONNECTION_TIMEOUT, conn).await;
            drop(permit);
        });
    }
}

/// Largest update a device accepts.
pub const MAX_UPDATE: usize = 32 << 20;

async fn request(url: &str, method: Method, body: Vec<u8>) -> Result<Bytes, TransferError> {
    let uri: hyper::Uri = url.parse().map_err(|e| TransferError::Url {
        url: url.into(),
        why: format!("{e}"),
    })?;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| TransferError::Url {
            url: url.into(),
            why: format!("{e}"),
        })?;
    let net = |why: String| TransferError::Network {
        url: url.into(),
        why,
    };
    let resp = tokio::time::timeout(CONNECTION_TIMEOUT, client.request(req))
        .await
        .map_err(|_| net("no answer within a minute".into()))?
        .map_err(|e| net(format!("{e}")))?;
    let status = resp.status();
    let body = Limited::new(resp.into_body(), MAX_UPDATE)
        .collect()
        .await
        .map_err(|e| net(format!("reading the answer: {e}")))?
        .to_bytes();
    if !status.is_success() {
        return Err(net(format!(
            "HTTP {}: {}",
            status.as_u16(),
            String::from_utf8_lossy(&body).trim()
        )));
    }
    Ok(body)
}

/// Upload `records` to the HLA server at `base` (`http://host:port`): how many it accepted.
pub async fn upload(base: &str, records: &[Record]) -> Result<usize, TransferError> {
    let mut body = Vec::new();
    for r in records {
        body.extend(serde_json::to_vec(r).expect("a record serialises"));
        body.push(b'\n');
    }
    let url = format!("{}/logs", base.trim_end_matches('/'));
    let answer = request(&url, Method::POST, body).await?;
    let text = String::from_utf8_lossy(&answer);
    text.trim()
        .strip_prefix("accepted ")
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| TransferError::Network {
            url,
            why: format!("an answer that is not an HLA server's: `{}`", text.trim()),
        })
}

/// Fetch the update from the HLA server at `base`, checked as a model file is.
pub async fn fetch_update(base: &str) -> Result<Update, TransferError> {
    let url = format!("{}/update", base.trim_end_matches('/'));
    let body = request(&url, Method::GET, Vec::new()).await?;
    let u: Update = serde_json::from_slice(&body)
        .map_err(|e| TransferError::Model(format!("{url}: not an update: {e}")))?;
    if let Some(m) = &u.model {
        Model::from_json(&m.to_json()).map_err(|e| TransferError::Model(format!("{url}: {e}")))?;
    }
    Ok(u)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Params;

    fn records() -> Vec<Record> {
        let mut v = Vec::new();
        for (rtt, best_cc) in [(59.0, 8u32), (290.0, 16)] {
            for cc in [1u32, 2, 4, 8, 16, 32] {
                // Throughput per joule peaks at best_cc.
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

    #[test]
    fn uploads_are_all_or_nothing_and_bounded() {
        let mut s = HlaState::new(Kind::Network, None).unwrap();
        let good: String = records()
            .iter()
            .map(|r| serde_json::to_string(r).unwrap() + "\n")
            .collect();
        assert_eq!(s.ingest(good.as_bytes()), Ok(12));
        let bad = format!("{good}{{\"rtt_ms\": 1}}\n");
        let e = s.ingest(bad.as_bytes()).unwrap_err();
        assert!(e.starts_with("line 13:"), "{e}");
        assert_eq!(s.len(), 12);
        assert!(s.ingest(b"\xff").is_err());
        // Learnt once; new logs within the relearning interval get the same update.
        let first = s.update().unwrap();
        s.ingest(good.as_bytes()).unwrap();
        assert!(Arc::ptr_eq(&first, &s.update().unwrap()));
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
        assert_eq!(
            m.predict(&c(290.0)).cc,
            u.table.lookup(&c(290.0)).unwrap().params.cc
        );
        assert_eq!(
            m.predict(&c(59.0)).cc,
            u.table.lookup(&c(59.0)).unwrap().params.cc
        );
        assert!(learn(&[], Kind::Svm).unwrap().model.is_none());
    }

    /// The whole path over HTTP: upload, learn, fetch; an oversized body and an unknown path
    /// refused; the logs read back from the state directory.
    #[test]
    fn a_device_uploads_and_fetches_over_http() {
        let dir = std::env::temp_dir().join(format!("roam-hla-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let state = Arc::new(Mutex::new(HlaState::new(Kind::Svm, Some(&dir)).unwrap()));
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let base = format!("http://{}", l.local_addr().unwrap());
            let server = tokio::spawn(serve(l, state.clone()));
            assert_eq!(upload(&base, &records()).await.unwrap(), 12);
            let u = fetch_update(&base).await.unwrap();
            assert_eq!(u.table.entries.len(), 2);
            assert!(u.model.is_some());
            let big = vec![b' '; HlaState::MAX_BODY + 1];
            let e = request(&format!("{base}/logs"), Method::POST, big)
                .await
                .unwrap_err()
                .to_string();
            assert!(e.contains("413"), "{e}");
            let e = request(&format!("{base}/x"), Method::GET, vec![])
                .await
                .unwrap_err()
                .to_string();
            assert!(e.contains("404"), "{e}");
            server.abort();
        });
        let mut again = HlaState::new(Kind::Svm, Some(&dir)).unwrap();
        assert_eq!(again.len(), 12);
        // Past twice the kept logs, the file is rewritten with those kept.
        again.on_disk = 2 * HlaState::MAX_LOGS;
        let one = serde_json::to_string(&records()[0]).unwrap() + "\n";
        again.ingest(one.as_bytes()).unwrap();
        let lines = std::fs::read_to_string(dir.join("logs.jsonl")).unwrap();
        assert_eq!((lines.lines().count(), again.on_disk), (13, 13));
        std::fs::write(dir.join("logs.jsonl"), "nonsense\n").unwrap();
        let e = HlaState::new(Kind::Svm, Some(&dir))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("line 1"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
