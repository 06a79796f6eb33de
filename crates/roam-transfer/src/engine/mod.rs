//! The transfer engine: a dataset of HTTP URLs downloaded with concurrency `cc` (files in
//! flight), parallelism `p` (range requests per file, each on its own connection under
//! HTTP/1.1, its own stream under HTTP/2) and block size `bs` (hyper reads exactly that much
//! from a connection at a time), on hyper's client.
//!
//! Each file whose size a survey did not give: with one stream and nothing on disk yet, one
//! request for all of it (`Range: bytes=0-`), whose answer gives the size and the bytes;
//! else a first request for its first byte (`Range: bytes=0-0`) gives its size and whether the
//! server serves ranges. With ranges, what is not yet on disk (see [`Partial`]) is cut into
//! `p` pieces fetched at once and written at their offsets; without, the file comes in one
//! stream (p = 1, and the log says so). A stream that finishes its piece while another is
//! still at work takes the back half of the largest remainder (the `board` module). A piece
//! that ends early, a status other than the one expected, or a length that does not match is
//! an error naming the URL; the pieces that finished stay listed, so running again resumes.
//!
//! # Servers are not trusted
//!
//! A server (or whoever answers in its place) may be hostile; what it can make the engine do is
//! bounded as follows (issue 43).
//!
//! - **Names.** A file is saved under the last segment of its URL's path, never outside the
//!   output directory ([`FileSpec::from_url`]); a directory listing's names starting with `.`
//!   (`.bashrc`, `.ssh`, `.profile`) are refused and counted ([`Listing::hidden`]), since the
//!   output directory is by default the working directory, often the user's home.
//! - **Files already there.** A regular file already under a file's name in the output
//!   directory is kept: not fetched, not asked for, its log's outcome `kept` (not a failure),
//!   unless [`Limits::overwrite`]; only a download's own `NAME.part` is resumed. wget and aria2
//!   users expect no clobbering: wget never overwrites (it saves `NAME.1`; `-nc` skips the
//!   file, as here), aria2 neither (`--allow-overwrite=false` by default); renaming is not
//!   done, because a second run of the same command would fetch everything again as `NAME.1`
//!   where this one resumes. A symbolic link or anything but a regular file under that name
//!   is refused, with `overwrite` too.
//! - **Links.** `NAME.part` is created with `O_CREAT|O_EXCL`, and it and `NAME.part.ranges`
//!   are opened with `O_NOFOLLOW` and refused unless regular files with one link; the final
//!   name is given by an atomic rename that does not replace a name taken meanwhile
//!   ([`Partial`]).
//! - **Answers.** A range's answer must carry the `Content-Range` asked for (start, end and
//!   total) and, if it has one, the matching `Content-Length`; anything else is refused for
//!   that request, before a byte of it is written. A body longer than its range is cut off
//!   there and the stream refused; a one-byte probe's body is read for at most its byte.
//! - **Sizes.** A file larger than [`Limits::max_file_size`] ([`MAX_FILE_SIZE`], 64 GiB), or
//!   whose missing bytes would take the transfer past [`Limits::max_total`] ([`MAX_TOTAL`],
//!   1 TiB), is refused before its partial file is created, as is one its disk has no room for
//!   (`statvfs`, with what the transfer's other files have yet to write and [`MIN_FREE`],
//!   64 MiB, kept free): the error names the file. See the `limits` module.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::error::{with_causes, TransferError};
use crate::params::Params;
pub use crate::params::Protocol;
use crate::partial::{missing, refused, split, Partial};

mod answers;
mod board;
mod connector;
mod files;
#[cfg(test)]
mod hostile_tests;
mod limits;
mod listing;
mod survey;
mod upload;
use answers::{
    content_length, content_range, final_failure, length_is, longer, probed, total_of, OPEN_END,
};
use board::Board;
pub use connector::{Connector, Route};
pub use files::{distinct_names, FileLog, FileSpec, Report, KEPT};
pub use limits::{human, parse_size, Limits, MAX_FILE_SIZE, MAX_TOTAL, MIN_FREE};
use limits::{Budget, Grant};
pub use listing::{parse_listing, percent_encode, Listing, MAX_LISTING_BYTES};
pub use survey::{alt_svc_h2c, Survey, H2_SURVEY_STREAMS, SURVEY_CC};
pub use upload::{distinct_destinations, Upload};

type HttpClient = Client<HttpsConnector<Route>, Empty<Bytes>>;

/// HTTP/2 flow-control windows (connection and every stream) the engine announces: 16 MiB,
/// as browsers open theirs and as the lab's `nghttp-16m` does. hyper's defaults (5 MiB for the
/// connection, 2 MiB a stream) would cap a stream at 55 Mbit/s on a 290 ms path.
pub const H2_WINDOW: u32 = 16 << 20;

/// A stream whose body breaks off (the connection reset or closed mid-body, a body shorter
/// than its headers said) is asked again for the bytes it had not brought, after
/// [`RETRY_WAIT`], then twice as long at each failure in a row; after this many failures in a
/// row without a byte between them, the file fails. What a broken stream brought stays: its
/// bytes are listed as finished. A request unanswered within [`STALL_TIMEOUT`], or whose
/// connection fails once made, is sent again the same way. A request that cannot connect (the
/// server unreachable, the port closed) is not, and neither is an answer that contradicts the
/// request (a wrong size, more bytes than asked): those are errors at once. (Over the lab's
/// LTE trace, with 16 connections sharing 5 Mbit/s, nginx closed a stream that had not
/// drained within its 60 s send timeout; wget and aria2 retry such streams, and so must this.)
pub const STREAM_RETRIES: u32 = 5;

/// A stream that brings no byte for this long is broken, and a request unanswered this long
/// is lost: both are asked again as [`STREAM_RETRIES`] says. Without it a
/// connection whose server had gone without its FIN arriving held a transfer for good (a
/// sweep trial over the lab's LTE trace waited out its 900 s). aria2's default is the same.
pub const STALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The first wait before a broken stream is asked again ([`STREAM_RETRIES`]).
pub const RETRY_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// A file's stream that has finished its range while another is still at work takes the back
/// half of the largest remainder, if both halves are at least this long (see the `board`
/// module). 2 MiB is about two round trips of a 25 Mbit/s stream on a 290 ms path: a smaller
/// piece would cost about as much in its request's round trip (and, under HTTP/1.1, the
/// victim's connection) as it saves.
pub const MIN_STEAL_PIECE: u64 = 2 << 20;

/// A file being written: its partial file, and the bytes it may write ([`Limits`]).
struct Writing {
    partial: Partial,
    grant: Grant,
}

/// An attempt at a byte range that ended early: the error, how many bytes it wrote before (at
/// their places: they stay), and whether asking again for the rest may help.
struct Cut {
    error: TransferError,
    written: u64,
    transient: bool,
}

/// Downloads datasets (and uploads files: [`Engine::put`]) with fixed parameters.
pub struct Engine {
    /// How servers are reached.
    connector: Connector,
    /// The first wait before a broken stream is asked again ([`STREAM_RETRIES`]).
    retry_wait: std::time::Duration,
    /// A stream silent this long is broken ([`STALL_TIMEOUT`]).
    stall_timeout: std::time::Duration,
    /// The least piece a free stream takes from a busy one ([`MIN_STEAL_PIECE`]).
    min_steal: u64,
    /// HTTP/1.1 connections (reading `bs` at a time).
    h1: HttpClient,
    /// HTTP/2 connections (one per server).
    h2: HttpClient,
    params: Params,
    /// Bytes received (or, uploading, sent) so far, for progress displays.
    pub received: Arc<AtomicU64>,
    /// Bytes this run is to move, summed as files' sizes become known (a file partly on disk
    /// counts what it lacks), and how many files' sizes are known: with `received`, a progress
    /// display's fraction and how sure it is.
    pub expected: Arc<AtomicU64>,
    /// Files whose size this run knows (see `expected`).
    pub sized: Arc<AtomicU64>,
    /// What a download may write.
    limits: Limits,
    /// What this transfer's files were granted (shared with the engines sharing this one's
    /// connections).
    budget: Arc<Budget>,
}

fn h1_client(params: &Params, connector: &Connector) -> HttpClient {
    Client::builder(TokioExecutor::new())
        .http1_read_buf_exact_size(params.bs)
        .pool_max_idle_per_host((params.cc * params.p) as usize)
        .build(connector.tls(Some(false)))
}

fn h2_client(connector: &Connector) -> HttpClient {
    Client::builder(TokioExecutor::new())
        .http2_only(true)
        .http2_initial_connection_window_size(H2_WINDOW)
        .http2_initial_stream_window_size(H2_WINDOW)
        .build(connector.tls(Some(true)))
}

impl Engine {
    /// An engine with `params` (refused if they are out of bounds), connecting directly.
    /// Must be created inside a tokio runtime.
    pub fn new(params: Params) -> Result<Engine, TransferError> {
        Engine::with_connector(params, Connector::new(None))
    }

    /// An engine with `params` reaching servers through `connector`.
    pub fn with_connector(params: Params, connector: Connector) -> Result<Engine, TransferError> {
        params.validate()?;
        Ok(Engine {
            h1: h1_client(&params, &connector),
            h2: h2_client(&connector),
            connector,
            retry_wait: RETRY_WAIT,
            stall_timeout: STALL_TIMEOUT,
            min_steal: MIN_STEAL_PIECE,
            params,
            received: Arc::default(),
            expected: Arc::default(),
            sized: Arc::default(),
            limits: Limits::default(),
            budget: Arc::default(),
        })
    }

    /// The same engine with `limits` on what its downloads write ([`Limits::default`] unless
    /// given), and a budget of its own: the engines sharing this one's connections afterwards
    /// ([`Engine::sharing`]) count against it together.
    pub fn with_limits(mut self, limits: Limits) -> Engine {
        self.limits = limits;
        self.budget = Arc::default();
        self
    }

    /// The limits on what its downloads write.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The same engine waiting `first` before asking a broken stream again (then twice as
    /// long at each failure in a row); [`RETRY_WAIT`] by default.
    pub fn with_retry_wait(mut self, first: std::time::Duration) -> Engine {
        self.retry_wait = first;
        self
    }

    /// The same engine taking a stream that brings no byte for `stall` as broken;
    /// [`STALL_TIMEOUT`] by default.
    pub fn with_stall_timeout(mut self, stall: std::time::Duration) -> Engine {
        self.stall_timeout = stall;
        self
    }

    /// The same engine letting a free stream take half of a busy one's remainder only when
    /// both halves are at least `bytes` ([`MIN_STEAL_PIECE`] by default; `u64::MAX`: never).
    pub fn with_min_steal(mut self, bytes: u64) -> Engine {
        self.min_steal = bytes;
        self
    }

    /// An engine with `params` that shares this one's connections (the survey's, already
    /// open): its HTTP/2 connections always, its HTTP/1.1 ones when the block size is the same;
    /// and its limits, counted together ([`Engine::with_limits`]).
    pub fn sharing(&self, params: Params) -> Result<Engine, TransferError> {
        params.validate()?;
        Ok(Engine {
            h1: if params.bs == self.params.bs {
                self.h1.clone()
            } else {
                h1_client(&params, &self.connector)
            },
            h2: self.h2.clone(),
            connector: self.connector.clone(),
            retry_wait: self.retry_wait,
            stall_timeout: self.stall_timeout,
            min_steal: self.min_steal,
            params,
            received: Arc::default(),
            expected: Arc::default(),
            sized: Arc::default(),
            limits: self.limits,
            budget: self.budget.clone(),
        })
    }

    /// The answer's head to a GET of `url` (bytes `range`). A request that gets no answer
    /// within the stall timeout, or whose connection fails after it was made, is sent again
    /// as [`STREAM_RETRIES`] says (counted in `retries`); one that cannot connect at all, or
    /// is answered in another HTTP, is an error at once ([`final_failure`]).
    async fn get(
        &self,
        url: &str,
        range: Option<(u64, u64)>,
        protocol: Protocol,
        retries: &AtomicU32,
    ) -> Result<Response<Incoming>, TransferError> {
        let client = match protocol {
            Protocol::Http1 => &self.h1,
            Protocol::Http2 => &self.h2,
        };
        let mut in_a_row = 0;
        loop {
            let mut req = Request::get(url);
            match range {
                Some((a, OPEN_END)) => {
                    req = req.header(hyper::header::RANGE, format!("bytes={a}-"))
                }
                Some((a, b)) => {
                    req = req.header(hyper::header::RANGE, format!("bytes={a}-{}", b - 1))
                }
                None => {}
            }
            let req = req.body(Empty::new()).map_err(|e| TransferError::Url {
                url: url.into(),
                why: e.to_string(),
            })?;
            let why = match tokio::time::timeout(self.stall_timeout, client.request(req)).await {
                Ok(Ok(r)) => return Ok(r),
                Ok(Err(e)) => match final_failure(&e, protocol) {
                    Some(why) => {
                        return Err(TransferError::Network {
                            url: url.into(),
                            why,
                        })
                    }
                    None => with_causes(&e),
                },
                Err(_) => format!("no answer within {} s", self.stall_timeout.as_secs_f64()),
            };
            in_a_row += 1;
            if in_a_row > STREAM_RETRIES {
                return Err(TransferError::Network {
                    url: url.into(),
                    why,
                });
            }
            retries.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(self.retry_wait * (1 << (in_a_row - 1))).await;
        }
    }

    /// Fetch every file of `files` into `out`, `cc` at a time; every file gets a log record,
    /// failed, kept or not. Two files to be saved under one name are refused
    /// ([`distinct_names`]), and so is a name that is not one file's in `out` (a [`FileSpec`]
    /// built by hand, not by [`FileSpec::from_url`]).
    pub async fn run(
        self: &Arc<Self>,
        files: &[FileSpec],
        out: &Path,
    ) -> Result<Report, TransferError> {
        if let Some(f) = files.iter().find(|f| {
            f.name.is_empty() || f.name == "." || f.name == ".." || f.name.contains(['/', '\0'])
        }) {
            return Err(TransferError::Url {
                url: f.url.clone(),
                why: format!("`{}` is not a file name in the output directory", f.name),
            });
        }
        distinct_names(files)?;
        std::fs::create_dir_all(out).map_err(TransferError::io(out))?;
        let start = Instant::now();
        let sem = Arc::new(tokio::sync::Semaphore::new(self.params.cc as usize));
        let mut tasks = Vec::new();
        for f in files {
            let (me, sem, f, dest) = (self.clone(), sem.clone(), f.clone(), out.join(&f.name));
            tasks.push(tokio::spawn(async move {
                let _slot = sem.acquire_owned().await;
                let from = match (me.params.protocol, &f.h2c_url) {
                    (Protocol::Http2, Some(alt)) => alt.as_str(),
                    _ => f.url.as_str(),
                };
                me.file(&f.url, from, f.ranged_size, &dest).await
            }));
        }
        let urls = files.iter().map(|f| f.url.as_str());
        Ok(self.gather(tasks, urls, start, "transfer").await)
    }

    /// The report of a run begun at `start`: each file's task's log record, in order (a task
    /// that failed gets one naming it, `what` saying what it was).
    async fn gather<'a>(
        &self,
        tasks: Vec<tokio::task::JoinHandle<FileLog>>,
        urls: impl Iterator<Item = &'a str>,
        start: Instant,
        what: &str,
    ) -> Report {
        let mut logs = Vec::new();
        for (t, url) in tasks.into_iter().zip(urls) {
            logs.push(
                t.await.unwrap_or_else(|e| {
                    self.log(url, format!("error: the {what} task failed: {e}"))
                }),
            );
        }
        Report {
            bytes: logs.iter().map(|l| l.fetched).sum(),
            files: logs,
            seconds: start.elapsed().as_secs_f64(),
        }
    }

    /// A file whose size is now known is to bring `bytes` more ([`Engine::expected`]).
    fn expect(&self, bytes: u64) {
        self.expected.fetch_add(bytes, Ordering::Relaxed);
        self.sized.fetch_add(1, Ordering::Relaxed);
    }

    /// A log record of `url` with this engine's parameters and `outcome`, nothing measured yet.
    fn log(&self, url: &str, outcome: String) -> FileLog {
        FileLog {
            url: url.into(),
            size: 0,
            fetched: 0,
            params: self.params,
            streams: 0,
            probe_ms: 0.0,
            seconds: 0.0,
            outcome,
            retries: 0,
            steals: 0,
        }
    }

    /// One file (logged under `url`, fetched from `from`).
    async fn file(
        self: Arc<Self>,
        url: &str,
        from: &str,
        known: Option<u64>,
        dest: &Path,
    ) -> FileLog {
        let start = Instant::now();
        let mut log = self.log(url, "ok".into());
        match self.in_the_way(dest) {
            Ok(false) => {}
            Ok(true) => {
                log.outcome = KEPT.into();
                return log;
            }
            Err(e) => {
                log.outcome = format!("error: {e}");
                return log;
            }
        }
        if let Err(e) = self.clone().fetch(from, known, dest, &mut log).await {
            log.outcome = format!("error: {e}");
        }
        log.seconds = start.elapsed().as_secs_f64();
        log
    }

    /// Whether a file is in `dest`'s way, to be kept ([`Limits::overwrite`] replaces it);
    /// refused if it is a symbolic link or not a regular file.
    fn in_the_way(&self, dest: &Path) -> Result<bool, TransferError> {
        match std::fs::symlink_metadata(dest) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(TransferError::io(dest)(e)),
            Ok(m) if m.file_type().is_symlink() => Err(refused(
                dest,
                "a symbolic link: refused, neither followed nor replaced",
            )),
            Ok(m) if !m.is_file() => Err(refused(dest, "not a regular file: not replaced")),
            Ok(_) => Ok(!self.limits.overwrite),
        }
    }

    /// The partial file of `dest` (`url`, `size` bytes) opened or resumed, if the limits grant
    /// what it lacks ([`Limits`]); the ranges already on disk.
    fn open(
        &self,
        url: &str,
        dest: &Path,
        size: u64,
    ) -> Result<(Writing, Vec<(u64, u64)>), TransferError> {
        let (partial, done, grant) = Partial::open_checked(dest, size, |lacking| {
            self.budget.admit(&self.limits, url, dest, size, lacking)
        })?;
        Ok((Writing { partial, grant }, done))
    }

    /// What is left of a probe's body read, at most `max` bytes, so that its connection goes
    /// back to the pool (a body that does not end within the stall timeout costs the
    /// connection only); `Err` with the bytes seen when more come: the connection is dropped
    /// there, never read on.
    async fn drain(&self, resp: Response<Incoming>, max: u64) -> Result<(), u64> {
        let mut body = resp.into_body();
        let mut seen = 0u64;
        let read = async {
            while let Some(Ok(frame)) = body.frame().await {
                if let Ok(d) = frame.into_data() {
                    seen += d.len() as u64;
                    if seen > max {
                        return Err(seen);
                    }
                }
            }
            Ok(())
        };
        tokio::time::timeout(self.stall_timeout, read)
            .await
            .unwrap_or(Ok(()))
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
        // With one stream and nothing of the file on disk, the first request asks for all of it
        // (`bytes=0-`): the answer gives the size and the bytes at once, a round trip per file
        // fewer than a one-byte probe followed by the range.
        let whole = self.params.p == 1 && !Partial::started(dest);
        let t0 = Instant::now();
        let first = if whole { (0, OPEN_END) } else { (0, 1) };
        let asked = AtomicU32::new(0);
        let probe = self
            .get(url, Some(first), self.params.protocol, &asked)
            .await;
        log.retries += asked.load(Ordering::Relaxed);
        let probe = probe?;
        log.probe_ms = t0.elapsed().as_secs_f64() * 1e3;
        let status = probe.status();
        if whole && status == StatusCode::PARTIAL_CONTENT {
            let (a, b, size) = content_range(&probe).ok_or_else(|| TransferError::Network {
                url: url.into(),
                why: "a range response without a whole Content-Range (bytes A-B/SIZE)".into(),
            })?;
            if a != 0 || b >= size {
                return Err(TransferError::Network {
                    url: url.into(),
                    why: format!("asked for bytes 0-, answered with {a}-{b}/{size}"),
                });
            }
            length_is(&probe, url, b + 1)?;
            let partial = match self.save_start(probe, url, dest, size, b + 1, log).await {
                Ok(p) => p,
                // What arrived is listed; the rest in ranges, retried as they are.
                Err(cut) if cut.transient => {
                    log.retries += 1;
                    tokio::time::sleep(self.retry_wait).await;
                    return self.ranges(url, size, dest, log).await;
                }
                Err(cut) => return Err(cut.error),
            };
            if b + 1 == size {
                return partial.partial.complete(self.limits.overwrite);
            }
            // The server sent less than the rest (it may): the remainder in ranges.
            drop(partial);
            return self.ranges(url, size, dest, log).await; // adds to log.fetched
        }
        let size = match status {
            StatusCode::PARTIAL_CONTENT => {
                let size = probed(&probe, url)?;
                // Its byte read (a response dropped unread closes its connection, and the
                // ranges would pay a new handshake and TCP's slow start for every file), and
                // no more: a longer body is cut off.
                if let Err(n) = self.drain(probe, 1).await {
                    return Err(longer(url, n, 1));
                }
                size
            }
            StatusCode::RANGE_NOT_SATISFIABLE => {
                let size = total_of(&probe).ok_or_else(|| TransferError::Network {
                    url: url.into(),
                    why: "a range response without a total size in Content-Range".into(),
                })?;
                // Its short error page, if it has one, read; a long one is dropped.
                let _ = self.drain(probe, 64 << 10).await;
                size
            }
            StatusCode::OK => {
                // No range support: the whole file in this one response.
                let len = content_length(&probe).ok_or_else(|| TransferError::Network {
                    url: url.into(),
                    why: "no range support and no Content-Length: completeness cannot be checked"
                        .into(),
                })?;
                return self
                    .save_start(probe, url, dest, len, len, log)
                    .await
                    .map_err(|cut| cut.error)?
                    .partial
                    .complete(self.limits.overwrite);
            }
            s => {
                return Err(TransferError::Status {
                    url: url.into(),
                    status: s.as_u16(),
                })
            }
        };
        self.ranges(url, size, dest, log).await
    }

    /// The first `len` bytes of a `size`-byte file from `resp`, in one stream, written and
    /// listed as finished (the caller completes the file or fetches the rest in ranges). A
    /// stream that breaks off lists what it brought.
    async fn save_start(
        &self,
        resp: Response<Incoming>,
        url: &str,
        dest: &Path,
        size: u64,
        len: u64,
        log: &mut FileLog,
    ) -> Result<Writing, Cut> {
        log.size = size;
        log.streams = 1;
        let untransient = |error| Cut {
            error,
            written: 0,
            transient: false,
        };
        let (w, _) = self.open(url, dest, size).map_err(untransient)?;
        self.expect(size);
        match self.body_to(resp, url, &w, 0, len, None).await {
            Ok(n) => {
                log.fetched = n;
                w.partial.finished(0, len).map_err(untransient)?;
                Ok(w)
            }
            Err(cut) => {
                log.fetched = cut.written;
                if cut.written > 0 {
                    w.partial.finished(0, cut.written).map_err(untransient)?;
                }
                Err(cut)
            }
        }
    }

    /// A file of `size` bytes from a server that serves ranges: what is not on disk yet, cut
    /// into `p` pieces, fetched by `p` streams at once; a stream that finishes early takes the
    /// back half of another's remainder ([`Board`]).
    async fn ranges(
        self: Arc<Self>,
        url: &str,
        size: u64,
        dest: &Path,
        log: &mut FileLog,
    ) -> Result<PathBuf, TransferError> {
        log.size = size;
        let (w, done) = self.open(url, dest, size)?;
        let w = Arc::new(w);
        let lacking = missing(&done, size);
        if log.streams == 0 {
            // Not counted yet (a whole-file request that fell back to ranges was).
            self.expect(lacking.iter().map(|(a, b)| b - a).sum());
        }
        let pieces = split(&lacking, self.params.p);
        let streams = pieces.len().min(self.params.p as usize);
        log.streams = streams as u32;
        let board = Arc::new(Board::new(&pieces, self.min_steal));
        let mut set = tokio::task::JoinSet::new();
        let retries = Arc::new(AtomicU32::new(0));
        for _ in 0..streams {
            let (me, w, url) = (self.clone(), w.clone(), url.to_string());
            let (board, retries) = (board.clone(), retries.clone());
            set.spawn(async move {
                let mut fetched = 0;
                while let Some(i) = board.next() {
                    match me.range(&url, &w, &board, i, size, &retries).await {
                        Ok(n) => fetched += n,
                        Err(e) => {
                            board.abandon(i);
                            return (fetched, Err(e));
                        }
                    }
                }
                (fetched, Ok(()))
            });
        }
        let mut first_error = None;
        while let Some(r) = set.join_next().await {
            match r {
                Ok((n, result)) => {
                    log.fetched += n;
                    if let Err(e) = result {
                        first_error.get_or_insert(e);
                    }
                }
                Err(e) => {
                    first_error.get_or_insert(TransferError::Network {
                        url: url.into(),
                        why: format!("a stream's task failed: {e}"),
                    });
                }
            }
        }
        log.retries += retries.load(Ordering::Relaxed);
        log.steals += board.steals();
        if let Some(e) = first_error {
            return Err(e);
        }
        Arc::try_unwrap(w)
            .map_err(|_| TransferError::Network {
                url: url.into(),
                why: "a stream still holds the file".into(),
            })?
            .partial
            .complete(self.limits.overwrite)
    }

    /// The board's range `i` of a `size`-byte file, written and listed as finished: the bytes
    /// fetched (its end may move down meanwhile, taken by another stream). A stream that
    /// breaks off is asked for the rest ([`STREAM_RETRIES`]), counted in `retries`. An answer
    /// with another range than the one asked (start, end or total in its `Content-Range`), or
    /// a `Content-Length` that is not its range's, is refused before a byte of it is written.
    async fn range(
        &self,
        url: &str,
        w: &Writing,
        board: &Board,
        i: usize,
        size: u64,
        retries: &AtomicU32,
    ) -> Result<u64, TransferError> {
        let (mut fetched, mut in_a_row) = (0, 0);
        loop {
            let (from, b) = board.span(i);
            if from >= b {
                return Ok(fetched);
            }
            let resp = self
                .get(url, Some((from, b)), self.params.protocol, retries)
                .await?;
            if resp.status() != StatusCode::PARTIAL_CONTENT {
                return Err(TransferError::Status {
                    url: url.into(),
                    status: resp.status().as_u16(),
                });
            }
            // The size the ranges were cut for (a survey's, a listing's) must be the
            // server's: a file grown or shrunk since would be saved cut or padded. And the
            // bytes must be the ones asked for: others would be written at the wrong offset.
            let bad = |why: String| TransferError::Network {
                url: url.into(),
                why,
            };
            match content_range(&resp) {
                Some((a, z, total)) if total != size => {
                    return Err(bad(format!(
                        "expected {size} bytes, the server's range says {total} (Content-Range: \
                         bytes {a}-{z}/{total})"
                    )))
                }
                Some((a, z, _)) if (a, z) == (from, b - 1) => {}
                other => {
                    return Err(bad(format!(
                        "asked for bytes {from}-{}, the answer's Content-Range says {}",
                        b - 1,
                        other.map_or("nothing usable".to_string(), |(a, z, n)| format!(
                            "bytes {a}-{z}/{n}"
                        ))
                    )))
                }
            }
            length_is(&resp, url, b - from)?;
            let cut = match self
                .body_to(resp, url, w, from, b - from, Some((board, i)))
                .await
            {
                Ok(n) => {
                    w.partial.finished(from, from + n)?;
                    return Ok(fetched + n);
                }
                Err(cut) => cut,
            };
            if cut.written > 0 {
                w.partial.finished(from, from + cut.written)?;
                (fetched, in_a_row) = (fetched + cut.written, 0);
            }
            in_a_row += 1;
            if !cut.transient || in_a_row > STREAM_RETRIES {
                return Err(cut.error);
            }
            retries.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(self.retry_wait * (1 << (in_a_row - 1))).await;
        }
    }

    /// Write `resp`'s body at `offset..offset + len`; exactly `len` bytes, or how far it got.
    /// With a board's range (`Some((board, i))`) each block is claimed first, and once another
    /// stream has taken the range's back half the body is dropped at the range's new end: the
    /// bytes written up to there (fewer than `len`) are the answer. A body longer than `len`
    /// is cut off at `len`, and the stream refused.
    async fn body_to(
        &self,
        resp: Response<Incoming>,
        url: &str,
        w: &Writing,
        offset: u64,
        len: u64,
        board: Option<(&Board, usize)>,
    ) -> Result<u64, Cut> {
        let mut body = resp.into_body();
        let mut at = 0u64;
        let cut = |at: u64, why: String, transient: bool| Cut {
            error: TransferError::Network {
                url: url.into(),
                why,
            },
            written: at,
            transient,
        };
        loop {
            let frame = match tokio::time::timeout(self.stall_timeout, body.frame()).await {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(_) => {
                    let silent = self.stall_timeout.as_secs_f64();
                    return Err(cut(
                        at,
                        format!("after {at} of {len} bytes: no byte for {silent} s"),
                        true,
                    ));
                }
            };
            let frame =
                frame.map_err(|e| cut(at, format!("after {at} of {len} bytes: {e}"), true))?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            // Past the range: cut off there, the rest never written.
            let over = at + data.len() as u64 > len;
            let data = if over {
                data.slice(..(len - at) as usize)
            } else {
                data
            };
            let n = match board {
                Some((board, i)) => board.claim(i, data.len() as u64),
                None => data.len() as u64,
            };
            w.partial
                .write_at(offset + at, &data[..n as usize])
                .map_err(|error| Cut {
                    error,
                    written: at,
                    transient: false,
                })?;
            w.grant.wrote(n);
            at += n;
            self.received.fetch_add(n, Ordering::Relaxed);
            if over {
                return Err(cut(
                    at,
                    format!("more than the {len} bytes asked for: cut off there"),
                    false,
                ));
            }
            if let Some((board, i)) = board {
                if at < len && board.span(i).1 == offset + at {
                    return Ok(at); // the rest is another stream's
                }
            }
        }
        if at != len {
            return Err(cut(at, format!("truncated: {at} of {len} bytes"), true));
        }
        Ok(at)
    }
}
