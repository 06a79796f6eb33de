//! The survey: a dataset's sizes, range support, cleartext HTTP/2 advertisements and the
//! network's round trip, learnt before a broker chooses parameters ([`Engine::survey`]), and
//! the reading of `Alt-Svc` headers it relies on.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;
use std::time::Instant;

use hyper::StatusCode;

use super::{content_length, longer, probed, total_of, Engine, FileSpec};
use crate::error::TransferError;
use crate::params::Protocol;

/// Survey requests in flight at once over HTTP/1.1 (its first wave): the paper's largest
/// concurrency, so that a transfer at up to that many files at once finds its connections open.
pub const SURVEY_CC: u32 = 32;

/// Survey requests in flight at once over an HTTP/2 connection: streams cost no handshake, so
/// a dataset's probes go in one round trip (nginx allows 128 concurrent streams by default).
pub const H2_SURVEY_STREAMS: usize = 100;

/// A dataset's sizes and the network's round trip as a first look sees them ([`Engine::survey`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Survey {
    /// Each file's size, bytes, in the dataset's order.
    pub sizes: Vec<u64>,
    /// Whether the server answered its range request with a range.
    pub ranged: Vec<bool>,
    /// Where each file is served over HTTP/2: for `http://`, the cleartext URL its server
    /// advertised ([`alt_svc_h2c`]); for `https://`, the URL itself where the server's ALPN
    /// offers `h2`.
    pub h2c: Vec<Option<String>>,
    /// The shortest first-request time, ms (infinite for an empty dataset).
    pub rtt_ms: f64,
}

/// What one survey request learnt.
struct Probe {
    size: u64,
    ms: f64,
    ranged: bool,
    alt_svc: Option<String>,
}

/// A survey task's outcome, a failed task named by its file.
fn joined<T>(
    r: Result<Result<T, TransferError>, tokio::task::JoinError>,
    url: &str,
) -> Result<T, TransferError> {
    r.map_err(|e| TransferError::Network {
        url: url.into(),
        why: format!("the survey's task failed: {e}"),
    })?
}

/// `http://host:port` or `https://host:port` of a URL (the whole URL if it has no path).
fn origin(url: &str) -> &str {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .unwrap_or(url);
    match rest.find('/') {
        Some(i) => &url[..url.len() - rest.len() + i],
        None => url,
    }
}

impl Survey {
    /// `files` with what the survey learnt, so the engine skips its own first-byte requests.
    pub fn apply(&self, files: &mut [FileSpec]) {
        for (i, f) in files.iter_mut().enumerate() {
            f.ranged_size = self.ranged[i].then_some(self.sizes[i]);
            f.h2c_url = self.h2c[i].clone();
        }
    }

    /// Whether every file of `which` (indices) is served over HTTP/2 as well.
    pub fn h2c_for_all(&self, which: &[usize]) -> bool {
        which.iter().all(|&i| self.h2c[i].is_some())
    }

    /// The HTTP version the files `which` move with when a broker chose `chosen`: with
    /// `forced_http2` (the URLs themselves speak HTTP/2, the user said so) HTTP/2; a chosen
    /// HTTP/2 only where the server advertised it for every one of them, else HTTP/1.1 with a
    /// note saying why.
    pub fn version(
        &self,
        chosen: Protocol,
        which: &[usize],
        forced_http2: bool,
    ) -> (Protocol, Option<&'static str>) {
        if forced_http2 {
            return (Protocol::Http2, None);
        }
        match chosen {
            Protocol::Http2 if !self.h2c_for_all(which) => (
                Protocol::Http1,
                Some("FastHLA chose HTTP/2, but the server does not offer it (no Alt-Svc h2c; over TLS, no h2 in ALPN): HTTP/1.1"),
            ),
            v => (v, None),
        }
    }
}

impl Engine {
    /// What a broker needs before choosing parameters: every file's size, whether it is served
    /// in ranges and over HTTP/2 too, and the shortest first-request time among them (a
    /// one-byte range request; on a connection already open that is about one round trip plus
    /// the server's first byte), asked `cc` at a time. Once an answer advertises cleartext
    /// HTTP/2 (`Alt-Svc`, which names a whole origin), the files of that server not yet asked
    /// go over it, [`H2_SURVEY_STREAMS`] at a time: a hundred pages' probes take the first
    /// wave's round trips and one more, where HTTP/1.1 takes a round trip per `cc` of them.
    /// A file with a listed size is not asked at all once another file of its server has
    /// answered: it takes that answer's range support and advertisement (so a listed dataset's
    /// survey is its first wave). A file whose size cannot be learnt is an error naming it.
    pub async fn survey(self: &Arc<Self>, files: &[FileSpec]) -> Result<Survey, TransferError> {
        let n = files.len();
        let mut sv = Survey {
            sizes: vec![0; n],
            ranged: vec![false; n],
            h2c: vec![None; n],
            rtt_ms: f64::INFINITY,
        };
        let own = self.params.protocol;
        // Origin -> its Alt-Svc header, once one advertised cleartext HTTP/2.
        let advertised: Arc<std::sync::Mutex<BTreeMap<String, String>>> = Arc::default();
        // Origin -> whether its first answer was a range, once one came.
        let answered: Arc<std::sync::Mutex<BTreeMap<String, bool>>> = Arc::default();
        let (h1_slots, h2_slots) = (
            Arc::new(tokio::sync::Semaphore::new(self.params.cc as usize)),
            Arc::new(tokio::sync::Semaphore::new(H2_SURVEY_STREAMS)),
        );
        // Whether each https:// server speaks HTTP/2 (its ALPN answer), asked beside the probes.
        let mut secure: BTreeMap<String, tokio::task::JoinHandle<bool>> = BTreeMap::new();
        for f in files.iter().filter(|f| f.url.starts_with("https://")) {
            let o = origin(&f.url).to_string();
            if let std::collections::btree_map::Entry::Vacant(v) = secure.entry(o) {
                let (me, at) = (self.clone(), v.key().clone());
                v.insert(tokio::spawn(async move { me.offers_h2(&at).await }));
            }
        }
        let mut tasks = Vec::new();
        for f in files {
            let (me, url, listed) = (self.clone(), f.url.clone(), f.listed_size);
            let (advertised, answered, h1_slots, h2_slots) = (
                advertised.clone(),
                answered.clone(),
                h1_slots.clone(),
                h2_slots.clone(),
            );
            tasks.push(tokio::spawn(async move {
                let slot = h1_slots.acquire_owned().await;
                let ranged = answered.lock().unwrap().get(origin(&url)).copied();
                if let (Some(size), Some(ranged)) = (listed, ranged) {
                    let p = Probe {
                        size,
                        ms: f64::INFINITY,
                        ranged,
                        alt_svc: None,
                    };
                    return Ok((p, None)); // its advertisement is the origin's, below
                }
                let known = advertised.lock().unwrap().get(origin(&url)).cloned();
                if let Some(alt) = known.and_then(|a| alt_svc_h2c(&url, &a)) {
                    drop(slot);
                    let _slot = h2_slots.acquire_owned().await;
                    let p = me.probe(&alt, Protocol::Http2).await?;
                    return Ok((p, Some(alt)));
                }
                let p = me.probe(&url, own).await?;
                answered
                    .lock()
                    .unwrap()
                    .entry(origin(&url).to_string())
                    .or_insert(p.ranged);
                let alt = match (own, &p.alt_svc) {
                    (Protocol::Http1, Some(a)) => alt_svc_h2c(&url, a).inspect(|_| {
                        advertised
                            .lock()
                            .unwrap()
                            .insert(origin(&url).to_string(), a.clone());
                    }),
                    _ => None,
                };
                Ok((p, alt))
            }));
        }
        for (i, (t, f)) in tasks.into_iter().zip(files).enumerate() {
            let (p, alt) = joined(t.await, &f.url)?;
            sv.sizes[i] = p.size;
            sv.ranged[i] = p.ranged;
            sv.rtt_ms = sv.rtt_ms.min(p.ms);
            sv.h2c[i] = alt;
        }
        // Over TLS the same URL serves HTTP/2 where the server's ALPN offers it.
        for (o, check) in secure {
            if check.await.unwrap_or(false) {
                for (i, f) in files.iter().enumerate() {
                    if origin(&f.url) == o {
                        sv.h2c[i] = Some(f.url.clone());
                    }
                }
            }
        }
        // The advertisement names the origin: the files asked before it came have it too.
        let advertised = advertised.lock().unwrap();
        for (i, f) in files.iter().enumerate() {
            if sv.h2c[i].is_none() {
                sv.h2c[i] = advertised
                    .get(origin(&f.url))
                    .and_then(|a| alt_svc_h2c(&f.url, a));
            }
        }
        Ok(sv)
    }

    /// Whether the `https://` server at `origin` chooses HTTP/2 when offered it and HTTP/1.1
    /// (one TLS handshake; false if it cannot be reached within the stall timeout).
    async fn offers_h2(&self, origin: &str) -> bool {
        use hyper_util::client::legacy::connect::Connection;
        use tower_service::Service;
        let Ok(uri) = origin.parse::<hyper::Uri>() else {
            return false;
        };
        let mut tls = self.connector.tls(None);
        match tokio::time::timeout(self.stall_timeout, tls.call(uri)).await {
            Ok(Ok(stream)) => stream.connected().is_negotiated_h2(),
            _ => false,
        }
    }

    /// One survey request: a file's first byte.
    async fn probe(&self, url: &str, protocol: Protocol) -> Result<Probe, TransferError> {
        let t0 = Instant::now();
        let resp = self
            .get(url, Some((0, 1)), protocol, &AtomicU32::new(0))
            .await?;
        let size = match resp.status() {
            // `bytes 0-0/N`, nothing else.
            StatusCode::PARTIAL_CONTENT => Some(probed(&resp, url)?),
            StatusCode::RANGE_NOT_SATISFIABLE => total_of(&resp),
            StatusCode::OK => content_length(&resp),
            s => {
                return Err(TransferError::Status {
                    url: url.into(),
                    status: s.as_u16(),
                })
            }
        };
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        let ranged = resp.status() == StatusCode::PARTIAL_CONTENT;
        let alt_svc = resp
            .headers()
            .get("alt-svc")
            .and_then(|v| v.to_str().ok())
            .map(String::from);
        if ranged {
            // Read the byte, so the connection goes back to the pool for the next one (a byte
            // that does not come costs the connection, not the survey), and no more: a longer
            // body is cut off, and the file refused.
            if let Err(n) = self.drain(resp, 1).await {
                return Err(longer(url, n, 1));
            }
        }
        let size = size.ok_or_else(|| TransferError::Network {
            url: url.into(),
            why: "its size is not given (no Content-Range or Content-Length)".into(),
        })?;
        Ok(Probe {
            size,
            ms,
            ranged,
            alt_svc,
        })
    }
}

/// The cleartext HTTP/2 URL of `url` that an `Alt-Svc` header (RFC 7838) advertises, as
/// `h2c=":PORT"` or `h2c="HOST:PORT"` naming the URL's own host; `None` without one, for
/// `clear`, for another host (without TLS nothing vouches that it serves the same files: a
/// server could send our requests anywhere), or for anything that does not parse (an unusable
/// advertisement is ignored, not an error).
pub fn alt_svc_h2c(url: &str, header: &str) -> Option<String> {
    let rest = url.strip_prefix("http://")?;
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let host = match authority.rsplit_once(':') {
        Some((h, port)) if !port.is_empty() && port.chars().all(|c| c.is_ascii_digit()) => h,
        _ => authority,
    };
    for alt in header.split(',') {
        let first = alt.split(';').next()?.trim();
        let Some((proto, value)) = first.split_once('=') else {
            continue;
        };
        if proto.trim() != "h2c" {
            continue;
        }
        let value = value.trim().strip_prefix('"')?.strip_suffix('"')?;
        let (alt_host, port) = value.rsplit_once(':')?;
        let port: u16 = port.parse().ok().filter(|&p| p > 0)?;
        if alt_host.contains(['/', '@', ' ']) {
            return None;
        }
        if !(alt_host.is_empty() || alt_host.eq_ignore_ascii_case(host)) {
            return None;
        }
        return Some(format!("http://{host}:{port}/{path}"));
    }
    None
}
