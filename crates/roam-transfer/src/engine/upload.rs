//! Uploads: local files sent with HTTP `PUT`, `cc` at a time, each read from disk `bs` bytes
//! at a time as its connection takes them ([`Engine::put`]).
//!
//! A file goes in one stream: HTTP has no standard way to assemble a resource from ranged
//! `PUT`s, so parallelism does not apply (the log says `streams: 1`). A stream that breaks off,
//! or makes no progress for the stall timeout (no byte taken by the connection, or no answer
//! once the last byte went), is sent again whole, as [`STREAM_RETRIES`] says for downloads; a
//! server that cannot be reached or answers with an error status is an error at once, naming
//! the URL. A file that changes size while it is sent is an error (the server would keep a
//! mixture), never sent short.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Frame, SizeHint};
use hyper::Request;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::io::{AsyncRead, ReadBuf};

use super::{final_failure, Engine, FileLog, Protocol, Report, STREAM_RETRIES};
use crate::error::{with_causes, TransferError};

/// One file to upload: where it is, and the URL to `PUT` it to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upload {
    /// The local file.
    pub path: PathBuf,
    /// Its `http://` or `https://` destination.
    pub url: String,
}

/// A file's bytes as a request body, read `block` at a time as the connection takes them.
struct FileBody {
    file: tokio::fs::File,
    left: u64,
    block: usize,
    /// Bytes handed to the connection by this attempt.
    sent: Arc<AtomicU64>,
    /// The engine's progress counter.
    moved: Arc<AtomicU64>,
}

impl hyper::body::Body for FileBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        let n = (self.block as u64).min(self.left) as usize;
        let mut buf = vec![0u8; n];
        let mut rb = ReadBuf::new(&mut buf);
        match Pin::new(&mut self.file).poll_read(cx, &mut rb) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(e)) => Poll::Ready(Some(Err(e))),
            Poll::Ready(Ok(())) => {
                let got = rb.filled().len();
                if got == 0 {
                    return Poll::Ready(Some(Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "the file shrank while it was being sent",
                    ))));
                }
                buf.truncate(got);
                self.left -= got as u64;
                self.sent.fetch_add(got as u64, Ordering::Relaxed);
                self.moved.fetch_add(got as u64, Ordering::Relaxed);
                Poll::Ready(Some(Ok(Frame::data(Bytes::from(buf)))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.left)
    }
}

type UploadClient = Client<hyper_rustls::HttpsConnector<super::Route>, FileBody>;

/// Refuse uploads that name one destination twice (the server would keep whichever came last).
pub fn distinct_destinations(files: &[Upload]) -> Result<(), TransferError> {
    let mut seen = std::collections::HashMap::new();
    for f in files {
        if let Some(first) = seen.insert(f.url.as_str(), &f.path) {
            return Err(TransferError::Url {
                url: f.url.clone(),
                why: format!(
                    "the destination of both {} and {}",
                    first.display(),
                    f.path.display()
                ),
            });
        }
    }
    Ok(())
}

impl Engine {
    /// Upload every file of `files` with `PUT`, `cc` at a time over this engine's HTTP version
    /// (parallelism does not apply: one stream a file); every file gets a log record, failed
    /// or not, its `fetched` the bytes the server accepted. Two files to one URL are refused.
    pub async fn put(self: &Arc<Self>, files: &[Upload]) -> Result<Report, TransferError> {
        distinct_destinations(files)?;
        let http2 = self.params.protocol == Protocol::Http2;
        let mut b = Client::builder(TokioExecutor::new());
        b.pool_max_idle_per_host(self.params.cc as usize);
        if http2 {
            b.http2_only(true)
                .http2_initial_connection_window_size(super::H2_WINDOW)
                .http2_initial_stream_window_size(super::H2_WINDOW);
        }
        let client: UploadClient = b.build(self.connector.tls(Some(http2)));
        let start = Instant::now();
        let sem = Arc::new(tokio::sync::Semaphore::new(self.params.cc as usize));
        let mut tasks = Vec::new();
        for f in files {
            let (me, sem, f, client) = (self.clone(), sem.clone(), f.clone(), client.clone());
            tasks.push(tokio::spawn(async move {
                let _slot = sem.acquire_owned().await;
                let t0 = Instant::now();
                let mut log = me.log(&f.url, "ok".into());
                log.streams = 1;
                if let Err(e) = me.send(&client, &f, &mut log).await {
                    log.outcome = format!("error: {e}");
                }
                log.seconds = t0.elapsed().as_secs_f64();
                log
            }));
        }
        let urls = files.iter().map(|f| f.url.as_str());
        Ok(self.gather(tasks, urls, start, "upload").await)
    }

    /// One file, sent again whole after a stream that broke off or stalled.
    async fn send(
        &self,
        client: &UploadClient,
        up: &Upload,
        log: &mut FileLog,
    ) -> Result<(), TransferError> {
        let mut in_a_row = 0;
        loop {
            let (file, size) = open_regular(&up.path).await?;
            if in_a_row == 0 {
                self.expect(size);
            }
            log.size = size;
            let sent = Arc::new(AtomicU64::new(0));
            let body = FileBody {
                file,
                left: size,
                block: self.params.bs,
                sent: sent.clone(),
                moved: self.received.clone(),
            };
            let req = Request::put(&up.url)
                .header(hyper::header::CONTENT_LENGTH, size)
                .body(body)
                .map_err(|e| TransferError::Url {
                    url: up.url.clone(),
                    why: e.to_string(),
                })?;
            let t0 = Instant::now();
            let why = match self.watched(client.request(req), &sent).await {
                Some(Ok(resp)) => {
                    log.probe_ms = t0.elapsed().as_secs_f64() * 1e3;
                    let status = resp.status();
                    // The answer's body is small; read it so the connection can be reused.
                    let _ =
                        tokio::time::timeout(self.stall_timeout, resp.into_body().collect()).await;
                    if !status.is_success() {
                        return Err(TransferError::Status {
                            url: up.url.clone(),
                            status: status.as_u16(),
                        });
                    }
                    log.fetched = size;
                    return Ok(());
                }
                Some(Err(e)) => match final_failure(&e, self.params.protocol) {
                    Some(why) => {
                        return Err(TransferError::Network {
                            url: up.url.clone(),
                            why,
                        })
                    }
                    None => with_causes(&e),
                },
                None => format!(
                    "no progress for {} s after {} of {size} bytes",
                    self.stall_timeout.as_secs_f64(),
                    sent.load(Ordering::Relaxed)
                ),
            };
            // A file that changed while it went cannot be sent again as it was.
            let now = open_regular(&up.path).await?.1;
            if now != size {
                return Err(TransferError::Io {
                    path: up.path.clone(),
                    source: std::io::Error::other(format!(
                        "changed size while it was being sent ({size} then {now} bytes): {why}"
                    )),
                });
            }
            in_a_row += 1;
            if in_a_row > STREAM_RETRIES {
                return Err(TransferError::Network {
                    url: up.url.clone(),
                    why,
                });
            }
            log.retries += 1;
            tokio::time::sleep(self.retry_wait * (1 << (in_a_row - 1))).await;
        }
    }

    /// `request`'s outcome, or `None` once `sent` has not grown for the stall timeout (the
    /// connection takes no byte, or no answer comes after the last).
    async fn watched<F, T>(&self, request: F, sent: &AtomicU64) -> Option<T>
    where
        F: std::future::Future<Output = T>,
    {
        tokio::pin!(request);
        let tick = (self.stall_timeout / 4).max(std::time::Duration::from_millis(10));
        let (mut last, mut since) = (sent.load(Ordering::Relaxed), Instant::now());
        loop {
            tokio::select! {
                out = &mut request => return Some(out),
                _ = tokio::time::sleep(tick) => {
                    let now = sent.load(Ordering::Relaxed);
                    if now != last {
                        (last, since) = (now, Instant::now());
                    } else if since.elapsed() >= self.stall_timeout {
                        return None;
                    }
                }
            }
        }
    }
}

/// `path` opened for reading, and its size; an error naming it if it is not a regular file.
async fn open_regular(path: &Path) -> Result<(tokio::fs::File, u64), TransferError> {
    let file = tokio::fs::File::open(path)
        .await
        .map_err(TransferError::io(path))?;
    let meta = file.metadata().await.map_err(TransferError::io(path))?;
    if !meta.is_file() {
        return Err(TransferError::Io {
            path: path.into(),
            source: std::io::Error::other("not a regular file"),
        });
    }
    Ok((file, meta.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file shorter than the size its request announced (it shrank after it was opened)
    /// ends the body with an error, so the request fails rather than sending it short.
    #[tokio::test]
    async fn a_file_that_shrank_ends_its_body_with_an_error() {
        let path = std::env::temp_dir().join(format!("roam-shrank-{}", std::process::id()));
        std::fs::write(&path, vec![7u8; 1000]).unwrap();
        let body = FileBody {
            file: tokio::fs::File::open(&path).await.unwrap(),
            left: 1500,
            block: 256,
            sent: Arc::default(),
            moved: Arc::default(),
        };
        let err = body.collect().await.unwrap_err();
        assert!(err.to_string().contains("shrank"), "{err}");
        let _ = std::fs::remove_file(&path);
    }
}
