//! The transfer engine: a dataset of HTTP URLs downloaded with concurrency `cc` (files in
//! flight), parallelism `p` (range requests per file, each on its own connection under
//! HTTP/1.1, its own stream under HTTP/2) and block size `bs` (hyper reads exactly that much
//! from a connection at a time), on hyper's client.
//!
//! Each file: a first request for its first byte (`Range: bytes=0-0`) gives its size and
//! whether the server serves ranges. With ranges, what is not yet on disk (see [`Partial`]) is
//! cut into `p` pieces fetched at once and written at their offsets; without, the file comes
//! in one stream (p = 1, and the log says so). A piece that ends early, a status other than
//! the one expected, or a length that does not match is an error naming the URL; the pieces
//! that finished stay listed, so running again resumes.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde::Serialize;

use crate::error::TransferError;
use crate::params::Params;
use crate::partial::{missing, split, Partial};

/// HTTP version of a transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Protocol {
    /// HTTP/1.1: one request at a time per connection.
    Http1,
    /// HTTP/2 (cleartext, prior knowledge): every request a stream of one connection.
    Http2,
}

/// One file of a dataset: where from, and the name to save it under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileSpec {
    /// Its `http://` URL.
    pub url: String,
    /// The file name under the output directory.
    pub name: String,
    /// Its size, when a survey ([`Engine::survey`]) found that the server serves it in ranges:
    /// the engine then skips its own first-byte request.
    pub ranged_size: Option<u64>,
}

impl FileSpec {
    /// A file named after the last segment of its URL's path.
    pub fn from_url(url: &str) -> Result<FileSpec, TransferError> {
        let bad = |why: &str| TransferError::Url {
            url: url.into(),
            why: why.into(),
        };
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| bad("only http:// URLs are supported"))?;
        let path = rest.split_once('/').map_or("", |x| x.1);
        let name = path.rsplit('/').next().unwrap_or("");
        let name = name.split(['?', '#']).next().unwrap_or("");
        if name.is_empty() || name == "." || name == ".." {
            return Err(bad("its path names no file"));
        }
        Ok(FileSpec {
            url: url.into(),
            name: name.into(),
            ranged_size: None,
        })
    }
}

/// What happened to one file (a log record of the spec's fields that a client can see).
#[derive(Clone, Debug, Serialize)]
pub struct FileLog {
    /// The URL.
    pub url: String,
    /// Its size (0 if unknown).
    pub size: u64,
    /// Bytes fetched by this run (the rest was on disk from an earlier one).
    pub fetched: u64,
    /// The parameters asked for.
    pub params: Params,
    /// Streams actually used (1 when the server serves no ranges).
    pub streams: u32,
    /// HTTP version.
    pub protocol: Protocol,
    /// Time of the first request (≈ one round trip and the server's first byte), ms.
    pub probe_ms: f64,
    /// Wall time, s.
    pub seconds: f64,
    /// `ok`, or the error.
    pub outcome: String,
}

/// The outcome of a dataset's transfer.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Per file, in the dataset's order.
    pub files: Vec<FileLog>,
    /// Bytes fetched in all.
    pub bytes: u64,
    /// Wall time, s.
    pub seconds: f64,
}

impl Survey {
    /// `files` with what the survey learnt, so the engine skips its own first-byte requests.
    pub fn apply(&self, files: &mut [FileSpec]) {
        for ((f, &size), &r) in files.iter_mut().zip(&self.sizes).zip(&self.ranged) {
            f.ranged_size = r.then_some(size);
        }
    }
}

impl Report {
    /// Throughput over the whole dataset, Mbit/s.
    pub fn mbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / 1e6 / self.seconds.max(1e-9)
    }

    /// Files that failed, with their errors.
    pub fn failures(&self) -> Vec<&FileLog> {
        self.files.iter().filter(|f| f.outcome != "ok").collect()
    }
}

/// A dataset's sizes and the network's round trip as a first look sees them ([`Engine::survey`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Survey {
    /// Each file's size, bytes, in the dataset's order.
    pub sizes: Vec<u64>,
    /// Whether the server answered its range request with a range.
    pub ranged: Vec<bool>,
    /// The shortest first-request time, ms (infinite for an empty dataset).
    pub rtt_ms: f64,
}

type HttpClient = Client<HttpConnector, Empty<Bytes>>;

/// Downloads datasets with fixed parameters.
pub struct Engine {
    client: HttpClient,
    params: Params,
    protocol: Protocol,
    /// Bytes received so far, for progress displays.
    pub received: Arc<AtomicU64>,
}

impl Engine {
    /// An engine with `params` over `protocol` (refused if the parameters are out of bounds).
    /// Must be created inside a tokio runtime.
    pub fn new(params: Params, protocol: Protocol) -> Result<Engine, TransferError> {
        params.validate()?;
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let mut b = Client::builder(TokioExecutor::new());
        b.http1_read_buf_exact_size(params.bs)
            .http2_only(protocol == Protocol::Http2)
            .pool_max_idle_per_host((params.cc * params.p) as usize);
        Ok(Engine {
            client: b.build(connector),
            params,
            protocol,
            received: Arc::default(),
        })
    }

    /// An engine with `params` that shares this one's connections (the survey's, already
    /// open and past slow start) when the block size and protocol are the same; else a new one.
    pub fn sharing(&self, params: Params, protocol: Protocol) -> Result<Engine, TransferError> {
        if params.bs != self.params.bs || protocol != self.protocol {
            return Engine::new(params, protocol);
        }
        params.validate()?;
        Ok(Engine {
            client: self.client.clone(),
            params,
            protocol,
            received: Arc::default(),
        })
    }

    async fn get(
        &self,
        url: &str,
        range: Option<(u64, u64)>,
    ) -> Result<Response<Incoming>, TransferError> {
        let mut req = Request::get(url);
        if let Some((a, b)) = range {
            req = req.header(hyper::header::RANGE, format!("bytes={a}-{}", b - 1));
        }
        let req = req.body(Empty::new()).map_err(|e| TransferError::Url {
            url: url.into(),
            why: e.to_string(),
        })?;
        self.client
            .request(req)
            .await
            .map_err(|e| TransferError::Network {
                url: url.into(),
                why: format!("{e:#}"),
            })
    }

    /// Fetch every file of `files` into `out`, `cc` at a time; every file gets a log record,
    /// failed or not.
    pub async fn run(
        self: &Arc<Self>,
        files: &[FileSpec],
        out: &Path,
    ) -> Result<Report, TransferError> {
        std::fs::create_dir_all(out).map_err(TransferError::io(out))?;
        let start = Instant::now();
        let sem = Arc::new(tokio::sync::Semaphore::new(self.params.cc as usize));
        let mut tasks = Vec::new();
        for f in files {
            let (me, sem, f, dest) = (self.clone(), sem.clone(), f.clone(), out.join(&f.name));
            tasks.push(tokio::spawn(async move {
                let _slot = sem.acquire_owned().await;
                me.file(&f.url, f.ranged_size, &dest).await
            }));
        }
        let mut logs = Vec::new();
        for (t, f) in tasks.into_iter().zip(files) {
            logs.push(t.await.unwrap_or_else(|e| {
                self.log(&f.url, format!("error: the transfer task failed: {e}"))
            }));
        }
        Ok(Report {
            bytes: logs.iter().map(|l| l.fetched).sum(),
            files: logs,
            seconds: start.elapsed().as_secs_f64(),
        })
    }

    /// What a broker needs before choosing parameters: every file's size and the shortest
    /// first-request time among them (a one-byte range request; on a connection already open
    /// that is about one round trip plus the server's first byte), asked `cc` at a time. A
    /// file whose size cannot be learnt is an error naming it.
    pub async fn survey(self: &Arc<Self>, files: &[FileSpec]) -> Result<Survey, TransferError> {
        let sem = Arc::new(tokio::sync::Semaphore::new(self.params.cc as usize));
        let mut tasks = Vec::new();
        for f in files {
            let (me, sem, url) = (self.clone(), sem.clone(), f.url.clone());
            tasks.push(tokio::spawn(async move {
                let _slot = sem.acquire_owned().await;
                let t0 = Instant::now();
                let resp = me.get(&url, Some((0, 1))).await?;
                let size = match resp.status() {
                    StatusCode::PARTIAL_CONTENT | StatusCode::RANGE_NOT_SATISFIABLE => {
                        total_of(&resp)
                    }
                    StatusCode::OK => content_length(&resp),
                    s => {
                        return Err(TransferError::Status {
                            url,
                            status: s.as_u16(),
                        })
                    }
                };
                let ms = t0.elapsed().as_secs_f64() * 1e3;
                let ranged = resp.status() == StatusCode::PARTIAL_CONTENT;
                if ranged {
                    // Read the byte, so the connection goes back to the pool for the next one.
                    let _ = resp.into_body().collect().await;
                }
                let size = size.ok_or_else(|| TransferError::Network {
                    url,
                    why: "its size is not given (no Content-Range or Content-Length)".into(),
                })?;
                Ok((size, ms, ranged))
            }));
        }
        let mut sizes = Vec::new();
        let mut ranged = Vec::new();
        let mut rtt_ms = f64::INFINITY;
        for (t, f) in tasks.into_iter().zip(files) {
            let (size, ms, r) = t.await.map_err(|e| TransferError::Network {
                url: f.url.clone(),
                why: format!("the survey's task failed: {e}"),
            })??;
            sizes.push(size);
            ranged.push(r);
            rtt_ms = rtt_ms.min(ms);
        }
        Ok(Survey {
            sizes,
            ranged,
            rtt_ms,
        })
    }

    /// A log record of `url` with this engine's parameters and `outcome`, nothing measured yet.
    fn log(&self, url: &str, outcome: String) -> FileLog {
        FileLog {
            url: url.into(),
            size: 0,
            fetched: 0,
            params: self.params,
            streams: 0,
            protocol: self.protocol,
            probe_ms: 0.0,
            seconds: 0.0,
            outcome,
        }
    }

    /// One file, logged.
    async fn file(self: Arc<Self>, url: &str, known: Option<u64>, dest: &Path) -> FileLog {
        let start = Instant::now();
        let mut log = self.log(url, "ok".into());
        if let Err(e) = self.clone().fetch(url, known, dest, &mut log).await {
            log.outcome = format!("error: {e}");
        }
        log.seconds = start.elapsed().as_secs_f64();
        log
    }

    async fn fetch(
        self: Arc<Self>,
        url: &str,
        known: Option<u64>,
        dest: &Path,
        log: &mut FileLog,
    ) -> Result<PathBuf, TransferError> {
        if let Some(size) = known {
            return self.ranges(url, size, dest, log).await;
        }
        let t0 = Instant::now();
        let probe = self.get(url, Some((0, 1))).await?;
        log.probe_ms = t0.elapsed().as_secs_f64() * 1e3;
        let status = probe.status();
        let size = match status {
            StatusCode::PARTIAL_CONTENT | StatusCode::RANGE_NOT_SATISFIABLE => total_of(&probe)
                .ok_or_else(|| TransferError::Network {
                    url: url.into(),
                    why: "a range response without a total size in Content-Range".into(),
                })?,
            StatusCode::OK => {
                // No range support: the whole file in this one response.
                log.streams = 1;
                let len = content_length(&probe).ok_or_else(|| TransferError::Network {
                    url: url.into(),
                    why: "no range support and no Content-Length: completeness cannot be checked"
                        .into(),
                })?;
                log.size = len;
                let (partial, _) = Partial::open(dest, len)?;
                let n = self.body_to(probe, url, &partial, 0, len).await?;
                log.fetched = n;
                partial.finished(0, len)?;
                return partial.complete();
            }
            s => {
                return Err(TransferError::Status {
                    url: url.into(),
                    status: s.as_u16(),
                })
            }
        };
        // Read its byte: a response dropped unread closes its connection, and the ranges would
        // pay a new handshake and TCP's slow start for every file.
        let _ = probe.into_body().collect().await;
        self.ranges(url, size, dest, log).await
    }

    /// A file of `size` bytes from a server that serves ranges: what is not on disk yet, in
    /// `p` ranges at once.
    async fn ranges(
        self: Arc<Self>,
        url: &str,
        size: u64,
        dest: &Path,
        log: &mut FileLog,
    ) -> Result<PathBuf, TransferError> {
        log.size = size;
        let (partial, done) = Partial::open(dest, size)?;
        let partial = Arc::new(partial);
        let pieces = split(&missing(&done, size), self.params.p);
        log.streams = pieces.len() as u32;
        let mut set = tokio::task::JoinSet::new();
        for (a, b) in pieces {
            let (me, partial, url) = (self.clone(), partial.clone(), url.to_string());
            set.spawn(async move {
                let resp = me.get(&url, Some((a, b))).await?;
                if resp.status() != StatusCode::PARTIAL_CONTENT {
                    return Err(TransferError::Status {
                        url,
                        status: resp.status().as_u16(),
                    });
                }
                let n = me.body_to(resp, &url, &partial, a, b - a).await?;
                partial.finished(a, b)?;
                Ok(n)
            });
        }
        let mut first_error = None;
        while let Some(r) = set.join_next().await {
            match r {
                Ok(Ok(n)) => log.fetched += n,
                Ok(Err(e)) => {
                    first_error.get_or_insert(e);
                }
                Err(e) => {
                    first_error.get_or_insert(TransferError::Network {
                        url: url.into(),
                        why: format!("a stream's task failed: {e}"),
                    });
                }
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        Arc::try_unwrap(partial)
            .map_err(|_| TransferError::Network {
                url: url.into(),
                why: "a stream still holds the file".into(),
            })?
            .complete()
    }

    /// Write `resp`'s body at `offset..offset + len`; exactly `len` bytes or an error.
    async fn body_to(
        &self,
        resp: Response<Incoming>,
        url: &str,
        partial: &Partial,
        offset: u64,
        len: u64,
    ) -> Result<u64, TransferError> {
        let mut body = resp.into_body();
        let mut at = 0u64;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| TransferError::Network {
                url: url.into(),
                why: format!("after {at} of {len} bytes: {e}"),
            })?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            if at + data.len() as u64 > len {
                return Err(TransferError::Network {
                    url: url.into(),
                    why: format!("more than the {len} bytes asked for"),
                });
            }
            partial.write_at(offset + at, &data)?;
            at += data.len() as u64;
            self.received
                .fetch_add(data.len() as u64, Ordering::Relaxed);
        }
        if at != len {
            return Err(TransferError::Network {
                url: url.into(),
                why: format!("truncated: {at} of {len} bytes"),
            });
        }
        Ok(at)
    }
}

/// The total size in a `Content-Range: bytes a-b/N` (or `bytes */N`).
fn total_of(r: &Response<Incoming>) -> Option<u64> {
    let v = r
        .headers()
        .get(hyper::header::CONTENT_RANGE)?
        .to_str()
        .ok()?;
    v.rsplit('/').next()?.trim().parse().ok()
}

fn content_length(r: &Response<Incoming>) -> Option<u64> {
    r.headers()
        .get(hyper::header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}
