//! A replay's responses, one CSV line each: what the byte counts of [`super::replay`] are
//! made of.
//!
//! The replayer counts bytes from the browser's own events: a response's `encodedDataLength`
//! when it finishes, by the resource type DevTools gave it, unless DevTools said the cache
//! served it. When those counts disagree with the bytes a link carried, the log says which
//! responses made the difference: their URL, type, status, where DevTools says they came from
//! (the disk cache, the prefetch cache, a service worker, an address and port on the
//! network), and how the replayer counted them. It is written only when asked for
//! ([`super::replay::ReplayConfig::request_log`]); the lab writes each hour's
//! (`wifi-requests.csv`, `cell-requests.csv`) beside its emulator's logs (`--emu-logs`). The
//! file is appended to (a session's browser started again goes on with it), so a log
//! directory is for one run.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Mutex;

/// The columns, in order.
pub const HEADER: &str =
    "tab,url,type,status,mime,remote,disk_cache,prefetch_cache,service_worker,bytes,counted";

/// How the replayer counted a finished response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counted {
    /// As bytes fetched over the network.
    Network,
    /// As a request the cache served (its bytes not counted).
    Cache,
    /// It failed (`Network.loadingFailed`): nothing counted.
    Failed,
    /// A page the session answered from its own copy (`super::reuse`): nothing sent.
    Reused,
}

impl Counted {
    fn name(self) -> &'static str {
        match self {
            Counted::Network => "network",
            Counted::Cache => "cache",
            Counted::Failed => "failed",
            Counted::Reused => "reused",
        }
    }
}

/// What DevTools said of one response, as far as it said it. A response whose
/// `Network.responseReceived` never arrived has the defaults: no type, status 0.
#[derive(Clone, Debug, Default)]
pub struct Response {
    /// The URL the request was last sent to (after redirects); empty if this tab never saw
    /// the request start.
    pub url: String,
    /// DevTools' resource type (`Document`, `Image`, `Fetch`, ...); empty if none arrived.
    pub resource_type: String,
    /// The HTTP status DevTools reported (a revalidated copy's is the cached one's).
    pub status: u32,
    /// The MIME type.
    pub mime: String,
    /// `address:port` it came from, empty when DevTools named none (a cache).
    pub remote: String,
    /// `fromDiskCache`.
    pub disk_cache: bool,
    /// `fromPrefetchCache`.
    pub prefetch_cache: bool,
    /// `fromServiceWorker`.
    pub service_worker: bool,
}

/// The log file, shared by a replayer's tabs.
pub struct RequestLog {
    out: Mutex<BufWriter<File>>,
    /// The first write that failed: the log stops there rather than lose lines silently in
    /// the middle.
    failed: Mutex<Option<std::io::Error>>,
}

impl RequestLog {
    /// Open the log at `path` to append to it (a session's browser started again goes on
    /// with the same file), writing the header when the file is new or empty.
    pub fn open(path: &Path) -> std::io::Result<RequestLog> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        let empty = file.metadata()?.len() == 0;
        let mut out = BufWriter::new(file);
        if empty {
            writeln!(out, "{HEADER}")?;
        }
        Ok(RequestLog {
            out: Mutex::new(out),
            failed: Mutex::new(None),
        })
    }

    /// Append tab `tab`'s finished response `r`, of `bytes` (its `encodedDataLength`),
    /// counted as `counted`.
    pub fn write(&self, tab: usize, r: &Response, bytes: u64, counted: Counted) {
        let mut failed = self.failed.lock().unwrap_or_else(|e| e.into_inner());
        if failed.is_some() {
            return;
        }
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let line = format!(
            "{tab},{},{},{},{},{},{},{},{},{bytes},{}",
            quoted(&r.url),
            quoted(&r.resource_type),
            r.status,
            quoted(&r.mime),
            quoted(&r.remote),
            r.disk_cache as u8,
            r.prefetch_cache as u8,
            r.service_worker as u8,
            counted.name()
        );
        if let Err(e) = writeln!(out, "{line}") {
            *failed = Some(e);
        }
    }

    /// Flush what is buffered; the first error any write or this flush met.
    pub fn finish(&self) -> std::io::Result<()> {
        if let Some(e) = self.failed.lock().unwrap_or_else(|e| e.into_inner()).take() {
            return Err(e);
        }
        self.out.lock().unwrap_or_else(|e| e.into_inner()).flush()
    }
}

/// A CSV field: quoted when it holds a comma, a quote or a line break.
fn quoted(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_follow_the_header_and_quote_what_needs_it() {
        let path =
            std::env::temp_dir().join(format!("roam-request-log-{}.csv", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let log = RequestLog::open(&path).unwrap();
        let r = Response {
            url: "http://n/a?x=1,2".into(),
            resource_type: "Image".into(),
            status: 200,
            mime: "image/png".into(),
            remote: String::new(),
            disk_cache: true,
            ..Response::default()
        };
        log.write(1, &r, 512, Counted::Cache);
        log.finish().unwrap();
        drop(log);
        // A browser started again appends, without a second header.
        let again = RequestLog::open(&path).unwrap();
        again.write(0, &Response::default(), 0, Counted::Failed);
        again.finish().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], HEADER);
        assert_eq!(
            lines[1],
            "1,\"http://n/a?x=1,2\",Image,200,image/png,,1,0,0,512,cache"
        );
        assert_eq!(lines[2], "0,,,0,,,0,0,0,0,failed");
        assert_eq!(lines.len(), 3);
    }
}
