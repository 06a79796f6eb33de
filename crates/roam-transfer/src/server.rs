//! The HLA server (`roam hla serve`; the FastHLA paper, ../shared/spec/fasthla.md
//! "Architecture"): devices upload their transfer logs, the server learns from them ([`learn`]:
//! outliers out, clusters, spline surfaces, optima, a model) and serves the result as an
//! [`Update`].
//!
//! HTTP/1.1 on hyper, over TLS when given a certificate and key ([`Tls`]):
//! - `POST /logs`: JSON lines, one [`Record`] each, with `Authorization: Bearer TOKEN`, a token
//!   of the token file ([`tokens`]; without one the server takes no upload: 403). All or
//!   nothing: a line that does not parse, or whose values [`Record::validate`] refuses, refuses
//!   the body with 400, naming the line and the field. Then the device's hourly quota (429 with
//!   `Retry-After` past it), then the log store ([`store`]: bounded, and one device cannot evict
//!   the others' logs).
//! - `GET /update`: the [`Update`] as JSON. Open to anyone by default (it holds the clusters'
//!   conditions and optima and the model, learnt from every device's logs and naming none);
//!   with [`Config::update_needs_token`], a token of the file too (401 without).
//!
//! # Learning
//!
//! A background task learns whenever logs came since the last learning (at most once every
//! [`Limits::relearn`] once there is a model: an uploader cannot keep the server learning),
//! from at most [`MAX_LEARN`] records shared evenly among the devices ([`store::LogStore::sample`]),
//! with no lock held: requests are served meanwhile, and the new update replaces the old when it
//! is ready. Its work is bounded whatever was uploaded: every record's values are checked, the
//! surfaces are evaluated on a bounded grid ([`crate::hla::GRID`]), the model learns at most
//! [`crate::model::MAX_CLASSES`] classes. `GET /update` answers with the latest update; when
//! logs came since and the learner is not waiting out its interval, it first waits up to
//! [`Limits::learn_wait`] for the learning that takes them in.
//!
//! # Limits (defaults; `roam hla serve` sets the sizes)
//!
//! | what | default |
//! | --- | --- |
//! | connections served at once ([`Limits::max_connections`]; more are closed at once) | 64 |
//! | connections from one source at once ([`Limits::max_per_source`]: one IPv4 address, one IPv6 /64) | 8 |
//! | TLS handshake and a request's headers ([`Limits::header_timeout`]) | 10 s |
//! | a request's body ([`Limits::body_timeout`]; 408 past it) | 20 s |
//! | a connection, all its requests ([`Limits::connection_timeout`]) | 60 s |
//! | bytes of one upload ([`Limits::max_body`]; 413 past it) | 4 MiB |
//! | records kept ([`store::StoreLimits::max_logs`]) | 200,000 |
//! | bytes of records kept ([`store::StoreLimits::max_bytes`]) | 64 MiB |
//! | records a device uploads an hour ([`Limits::quota_records`]) | 20,000 |
//! | bytes a device uploads an hour ([`Limits::quota_bytes`]) | 16 MiB |
//! | least time between learnings once there is a model ([`Limits::relearn`]) | 30 s |
//! | longest `GET /update` waits for a learning under way ([`Limits::learn_wait`]) | 2 s |
//!
//! With a state directory the logs are kept in `DIR/logs.jsonl` ([`store`]: what is done with a
//! partial last line or invalid stored records at start).

pub mod client;
pub mod store;
pub mod tokens;

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::broker::Update;
use crate::error::TransferError;
use crate::hla::{analyse, Record, CLUSTER_DISTANCE};
use crate::model::{Kind, Model};
pub use client::{HlaClient, MAX_UPDATE};
use store::{LogStore, StoreLimits};
use tokens::{Denied, Quota, Tokens};

/// Records one learning samples at most (its clustering needs memory quadratic in them).
pub const MAX_LEARN: usize = 3000;

/// Learn from logs: the table of clusters' optima and a `kind` model of the optimiser's
/// choices (`None` when no record survives cleaning). Bounded work whatever `records` hold:
/// at most [`MAX_LEARN`] of them (evenly spread), checked ([`crate::hla::clean`]), a bounded
/// grid and a bounded number of classes.
pub fn learn(records: &[Record], kind: Kind) -> Result<Update, TransferError> {
    let sample = stride_sample(records, MAX_LEARN);
    let (table, set) = analyse(&sample, CLUSTER_DISTANCE);
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

/// JSON lines of records (blank lines allowed); the first bad line named. Syntax only: see
/// [`parse_upload`] for what the server takes.
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

/// An upload's records: JSON lines, each a record that [`Record::validate`] takes; the first
/// bad line named, with the field.
pub fn parse_upload(body: &[u8]) -> Result<Vec<Record>, String> {
    let text = std::str::from_utf8(body).map_err(|e| format!("not UTF-8: {e}"))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let r: Record = serde_json::from_str(line).map_err(|e| format!("line {}: {e}", i + 1))?;
        r.validate().map_err(|e| format!("line {}: {e}", i + 1))?;
        out.push(r);
    }
    Ok(out)
}

/// The server's limits: see the [module](self) for what each bounds and its default.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// Connections served at once.
    pub max_connections: usize,
    /// Connections from one source (an IPv4 address, an IPv6 /64) at once.
    pub max_per_source: usize,
    /// Time for the TLS handshake, and for each request's headers.
    pub header_timeout: Duration,
    /// Time for a request's body.
    pub body_timeout: Duration,
    /// Time a connection may last.
    pub connection_timeout: Duration,
    /// Bytes of one upload.
    pub max_body: usize,
    /// The log store's bounds.
    pub store: StoreLimits,
    /// Records a device may upload an hour.
    pub quota_records: u64,
    /// Bytes a device may upload an hour.
    pub quota_bytes: u64,
    /// Least time between two learnings once there is a model.
    pub relearn: Duration,
    /// Longest `GET /update` waits for a learning of logs that came before it.
    pub learn_wait: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: 64,
            max_per_source: 8,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(20),
            connection_timeout: Duration::from_secs(60),
            max_body: 4 << 20,
            store: StoreLimits::default(),
            quota_records: 20_000,
            quota_bytes: 16 << 20,
            relearn: Duration::from_secs(30),
            learn_wait: Duration::from_secs(2),
        }
    }
}

/// How a server is set up.
#[derive(Clone, Debug)]
pub struct Config {
    /// The model it learns.
    pub kind: Kind,
    /// Where its logs are kept (none: in memory only).
    pub state: Option<PathBuf>,
    /// The token file ([`tokens`]); none: no upload is taken.
    pub tokens: Option<PathBuf>,
    /// `GET /update` needs a token too.
    pub update_needs_token: bool,
    /// Its limits.
    pub limits: Limits,
}

impl Config {
    /// A server of `kind` models, in memory, without tokens, with the default limits.
    pub fn new(kind: Kind) -> Config {
        Config {
            kind,
            state: None,
            tokens: None,
            update_needs_token: false,
            limits: Limits::default(),
        }
    }
}

/// The update devices are served, and which uploads it took in.
#[derive(Clone, Debug)]
struct Published {
    json: Bytes,
    /// The uploads (counted since start) learnt from.
    covers: u64,
    /// Whether it has a model (from then on, learnings are [`Limits::relearn`] apart).
    modelled: bool,
    at: Instant,
}

/// What uploads change, under one lock (never held while learning, nor by `GET /update`).
struct Inner {
    store: LogStore,
    tokens: Option<Tokens>,
    /// Per device: its records' and bytes' quotas.
    quotas: HashMap<String, (Quota, Quota)>,
}

/// An HLA server: its logs, devices, quotas and latest update. [`HlaServer::serve`] serves it.
pub struct HlaServer {
    kind: Kind,
    limits: Limits,
    update_needs_token: bool,
    inner: Mutex<Inner>,
    /// Uploads taken since start.
    generation: AtomicU64,
    /// The learner is waiting out its interval.
    cooling: AtomicBool,
    published: tokio::sync::watch::Sender<Published>,
    wake: tokio::sync::Notify,
}

/// Why a request was refused: its status, what to tell the client, and when to try again.
#[derive(Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The HTTP status.
    pub status: StatusCode,
    /// Why.
    pub why: String,
    /// Seconds until a retry may succeed (429).
    pub retry_after: Option<u64>,
}

impl Refusal {
    fn new(status: StatusCode, why: impl Into<String>) -> Refusal {
        Refusal {
            status,
            why: why.into(),
            retry_after: None,
        }
    }
}

impl HlaServer {
    /// A server as `config` says: its token file and stored logs read. The server, and what to
    /// warn the operator of (records skipped or cut off at start, a token file others may
    /// read).
    pub fn open(config: Config) -> Result<(Arc<HlaServer>, Vec<String>), TransferError> {
        let (store, mut warnings) = LogStore::open(config.state.as_deref(), config.limits.store)?;
        let tokens = match &config.tokens {
            Some(path) => {
                let (t, w) = Tokens::open(path)?;
                warnings.extend(w);
                Some(t)
            }
            None => None,
        };
        let generation = u64::from(!store.is_empty());
        let empty = serde_json::to_vec(&Update::default()).expect("serialises");
        let (published, _) = tokio::sync::watch::channel(Published {
            json: Bytes::from(empty),
            covers: 0,
            modelled: false,
            at: Instant::now(),
        });
        let server = HlaServer {
            kind: config.kind,
            limits: config.limits,
            update_needs_token: config.update_needs_token,
            inner: Mutex::new(Inner {
                store,
                tokens,
                quotas: HashMap::new(),
            }),
            generation: AtomicU64::new(generation),
            cooling: AtomicBool::new(false),
            published,
            wake: tokio::sync::Notify::new(),
        };
        Ok((Arc::new(server), warnings))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Logs held.
    pub fn len(&self) -> usize {
        self.lock().store.len()
    }

    /// Whether no logs are held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Devices in the token file (`None`: no token file, no upload taken).
    pub fn devices(&self) -> Option<usize> {
        self.lock().tokens.as_ref().map(Tokens::devices)
    }

    /// The device whose token `presented` is, the token file read again first if it changed.
    pub fn authenticate(&self, presented: Option<&[u8]>) -> Result<String, Refusal> {
        let mut inner = self.lock();
        let Some(tokens) = inner.tokens.as_mut() else {
            return Err(Refusal::new(
                StatusCode::FORBIDDEN,
                "this server takes no uploads (started without --tokens)",
            ));
        };
        if let Some(news) = tokens.refresh() {
            eprintln!("{news}");
        }
        match tokens.who(presented) {
            Ok(name) => Ok(name.to_string()),
            Err(Denied::Unknown) => Err(Refusal::new(
                StatusCode::UNAUTHORIZED,
                "a device token is needed (Authorization: Bearer TOKEN), and this one is not \
                 listed",
            )),
            Err(Denied::Broken(_)) => Err(Refusal::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "the server's token file cannot be read now: try again later",
            )),
        }
    }

    /// Take `owner`'s upload (JSON lines of records): how many it held, or why it was refused.
    /// Checked ([`parse_upload`]), charged to the device's quota, stored.
    pub fn ingest(&self, owner: &str, body: &[u8]) -> Result<usize, Refusal> {
        let records = parse_upload(body).map_err(|e| Refusal::new(StatusCode::BAD_REQUEST, e))?;
        let n = records.len();
        if n == 0 {
            return Ok(0);
        }
        let mut inner = self.lock();
        let now = Instant::now();
        let (rq, bq) = (self.limits.quota_records, self.limits.quota_bytes);
        let (records_q, bytes_q) = inner
            .quotas
            .entry(owner.to_string())
            .or_insert_with(|| (Quota::new(rq, now), Quota::new(bq, now)));
        if n as u64 > records_q.per_hour() || body.len() as u64 > bytes_q.per_hour() {
            return Err(Refusal::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "an upload is at most a device's hourly quota: {rq} records, {bq} bytes; send \
                     it in parts"
                ),
            ));
        }
        let wait = records_q
            .wait(n as u64, now)
            .max(bytes_q.wait(body.len() as u64, now));
        if !wait.is_zero() {
            return Err(Refusal {
                status: StatusCode::TOO_MANY_REQUESTS,
                why: format!(
                    "this device's hourly quota ({rq} records, {bq} bytes) is used up: try again \
                     in {} s",
                    wait.as_secs() + 1
                ),
                retry_after: Some(wait.as_secs() + 1),
            });
        }
        records_q.take(n as u64);
        bytes_q.take(body.len() as u64);
        inner
            .store
            .add(owner, records)
            .map_err(|e| Refusal::new(StatusCode::INTERNAL_SERVER_ERROR, e))?;
        drop(inner);
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.wake.notify_one();
        Ok(n)
    }

    /// The latest update as JSON: waiting up to [`Limits::learn_wait`] for a learning of the
    /// logs that came before, unless the learner is waiting out its interval.
    pub async fn update_json(&self) -> Bytes {
        let mut rx = self.published.subscribe();
        let want = self.generation.load(Ordering::SeqCst);
        let cooling = self.cooling.load(Ordering::SeqCst);
        if !cooling && rx.borrow().covers < want {
            let _ = tokio::time::timeout(self.limits.learn_wait, rx.wait_for(|p| p.covers >= want))
                .await;
        }
        let json = rx.borrow().json.clone();
        json
    }

    /// Learn whenever logs came since the last learning, until dropped.
    async fn learner(self: Arc<Self>) {
        loop {
            let last = self.published.borrow().clone();
            let generation = self.generation.load(Ordering::SeqCst);
            if generation <= last.covers {
                self.wake.notified().await;
                continue;
            }
            if last.modelled {
                let due = last.at + self.limits.relearn;
                if due > Instant::now() {
                    self.cooling.store(true, Ordering::SeqCst);
                    tokio::time::sleep_until(due.into()).await;
                    self.cooling.store(false, Ordering::SeqCst);
                }
            }
            // Every upload counted is in the store: the sample holds at least those.
            let generation = self.generation.load(Ordering::SeqCst);
            let me = self.clone();
            let sample = match tokio::task::spawn_blocking(move || {
                me.lock().store.sample(MAX_LEARN)
            })
            .await
            {
                Ok(s) => s,
                Err(_) => continue,
            };
            let kind = self.kind;
            let learnt = tokio::task::spawn_blocking(move || learn(&sample, kind)).await;
            let (json, modelled) = match learnt {
                Ok(Ok(u)) => (
                    Bytes::from(serde_json::to_vec(&u).expect("serialises")),
                    u.model.is_some(),
                ),
                failed => {
                    let why = match failed {
                        Ok(Err(e)) => e.to_string(),
                        Err(e) => e.to_string(),
                        Ok(Ok(_)) => unreachable!(),
                    };
                    eprintln!("learning failed (the previous update kept): {why}");
                    (last.json.clone(), last.modelled)
                }
            };
            self.published.send_replace(Published {
                json,
                covers: generation,
                modelled,
                at: Instant::now(),
            });
        }
    }

    async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        let r = match (req.method(), req.uri().path()) {
            (&Method::POST, "/logs") => self.post_logs(req).await,
            (&Method::GET, "/update") => self.get_update(req).await,
            _ => Err(Refusal::new(
                StatusCode::NOT_FOUND,
                "POST /logs (JSON lines of records) or GET /update",
            )),
        };
        match r {
            Ok(resp) => resp,
            Err(refusal) => {
                let mut resp = reply(refusal.status, format!("{}\n", refusal.why), false);
                if let Some(s) = refusal.retry_after {
                    resp.headers_mut()
                        .insert(hyper::header::RETRY_AFTER, s.into());
                }
                if refusal.status == StatusCode::UNAUTHORIZED {
                    resp.headers_mut().insert(
                        hyper::header::WWW_AUTHENTICATE,
                        hyper::header::HeaderValue::from_static("Bearer realm=\"roam-hla\""),
                    );
                }
                resp
            }
        }
    }

    /// Authenticate in a blocking task (the token file may be read again).
    async fn device_of(self: &Arc<Self>, req: &Request<Incoming>) -> Result<String, Refusal> {
        let presented = tokens::bearer(req.headers());
        let me = self.clone();
        tokio::task::spawn_blocking(move || me.authenticate(presented.as_deref()))
            .await
            .map_err(|e| Refusal::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
    }

    async fn post_logs(self: Arc<Self>, req: Request<Incoming>) -> Result<Response<Body>, Refusal> {
        // Who, before a byte of the body is read.
        let owner = self.device_of(&req).await?;
        let max = self.limits.max_body;
        let too_large = || {
            Refusal::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("an upload is at most {max} bytes"),
            )
        };
        let collect = Limited::new(req.into_body(), max).collect();
        let body = match tokio::time::timeout(self.limits.body_timeout, collect).await {
            Err(_) => {
                return Err(Refusal::new(
                    StatusCode::REQUEST_TIMEOUT,
                    format!(
                        "the body did not arrive within {} s",
                        self.limits.body_timeout.as_secs_f64()
                    ),
                ))
            }
            Ok(Ok(b)) => b.to_bytes(),
            Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => return Err(too_large()),
            Ok(Err(e)) => return Err(Refusal::new(StatusCode::BAD_REQUEST, e.to_string())),
        };
        let me = self.clone();
        let n = tokio::task::spawn_blocking(move || me.ingest(&owner, &body))
            .await
            .map_err(|e| Refusal::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))??;
        Ok(reply(StatusCode::OK, format!("accepted {n}\n"), false))
    }

    async fn get_update(
        self: Arc<Self>,
        req: Request<Incoming>,
    ) -> Result<Response<Body>, Refusal> {
        if self.update_needs_token {
            self.device_of(&req).await?;
        }
        Ok(reply(StatusCode::OK, self.update_json().await, true))
    }

    /// Serve on `listener` (over TLS if `tls`) until the task is dropped; learning in the
    /// background meanwhile.
    pub async fn serve(self: Arc<Self>, listener: tokio::net::TcpListener, tls: Option<Tls>) {
        // Stopped with the serving (this future dropped).
        let _learner = AbortOnDrop(tokio::spawn(self.clone().learner()));
        let slots = Arc::new(tokio::sync::Semaphore::new(self.limits.max_connections));
        let sources: Arc<Mutex<HashMap<IpAddr, usize>>> = Arc::default();
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(a) => a,
                Err(_) => {
                    // Out of descriptors, say: not a busy loop.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let Ok(permit) = slots.clone().try_acquire_owned() else {
                drop(stream); // full: the newcomer is closed, the served keep their slots
                continue;
            };
            let Some(source) =
                SourceSlot::take(&sources, source_of(peer.ip()), self.limits.max_per_source)
            else {
                drop(stream); // this source has its share
                continue;
            };
            let _ = stream.set_nodelay(true);
            let (me, tls) = (self.clone(), tls.clone());
            tokio::spawn(async move {
                let _held = (permit, source);
                let limits = me.limits.clone();
                let deadline = tokio::time::Instant::now() + limits.connection_timeout;
                match tls {
                    None => {
                        let _ = tokio::time::timeout_at(deadline, me.connection(stream)).await;
                    }
                    Some(t) => {
                        let hs = tokio::time::timeout(limits.header_timeout, t.0.accept(stream));
                        if let Ok(Ok(s)) = hs.await {
                            let _ = tokio::time::timeout_at(deadline, me.connection(s)).await;
                        }
                    }
                }
            });
        }
    }

    async fn connection<IO>(self: Arc<Self>, io: IO)
    where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let header_timeout = self.limits.header_timeout;
        let service = hyper::service::service_fn(move |req| {
            let me = self.clone();
            async move { Ok::<_, std::convert::Infallible>(me.handle(req).await) }
        });
        let _ = hyper::server::conn::http1::Builder::new()
            .timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(header_timeout)
            .serve_connection(TokioIo::new(io), service)
            .await;
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The source a connection is counted under: an IPv4 address, or an IPv6 address's /64 (one
/// host usually has a whole /64).
fn source_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

/// One of a source's connections, given back when dropped.
struct SourceSlot {
    sources: Arc<Mutex<HashMap<IpAddr, usize>>>,
    source: IpAddr,
}

impl SourceSlot {
    fn take(
        sources: &Arc<Mutex<HashMap<IpAddr, usize>>>,
        source: IpAddr,
        max: usize,
    ) -> Option<SourceSlot> {
        let mut m = sources.lock().unwrap_or_else(|p| p.into_inner());
        let n = m.entry(source).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(SourceSlot {
            sources: sources.clone(),
            source,
        })
    }
}

impl Drop for SourceSlot {
    fn drop(&mut self) {
        let mut m = self.sources.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = m.get_mut(&self.source) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.source);
            }
        }
    }
}

/// TLS for the server: a certificate chain and its private key, HTTP/1.1 offered in ALPN.
#[derive(Clone)]
pub struct Tls(tokio_rustls::TlsAcceptor);

impl Tls {
    /// From PEM files: `cert` (the certificate, then any intermediates) and `key` (its private
    /// key: PKCS#8, PKCS#1 or SEC1). Refused, naming the file, if either does not parse or
    /// they do not belong together.
    pub fn from_pem_files(cert: &Path, key: &Path) -> Result<Tls, TransferError> {
        use rustls::pki_types::pem::PemObject;
        let bad = |path: &Path, why: String| TransferError::File {
            path: path.into(),
            why,
        };
        let read = |path: &Path| std::fs::read(path).map_err(|e| bad(path, e.to_string()));
        let chain = rustls::pki_types::CertificateDer::pem_slice_iter(&read(cert)?)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(cert, format!("a certificate that does not parse: {e}")))?;
        if chain.is_empty() {
            return Err(bad(cert, "no certificate in it".into()));
        }
        let key_der = rustls::pki_types::PrivateKeyDer::from_pem_slice(&read(key)?)
            .map_err(|e| bad(key, format!("no private key in it: {e}")))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring's provider supports the default TLS versions")
            .with_no_client_auth()
            .with_single_cert(chain, key_der)
            .map_err(|e| bad(key, format!("not the certificate's key, or unusable: {e}")))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Tls(tokio_rustls::TlsAcceptor::from(Arc::new(config))))
    }
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

#[cfg(test)]
mod tests;
