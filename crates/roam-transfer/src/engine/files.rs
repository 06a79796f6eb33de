//! A dataset's files and what a transfer reports about them: [`FileSpec`] (where a file comes
//! from and the name it is saved under, never outside the output directory), [`distinct_names`],
//! and the per-file [`FileLog`] gathered into a transfer's [`Report`].

use serde::Serialize;

use crate::error::TransferError;
use crate::params::Params;

/// One file of a dataset: where from, and the name to save it under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileSpec {
    /// Its `http://` or `https://` URL.
    pub url: String,
    /// The file name under the output directory.
    pub name: String,
    /// Its size, when a survey ([`Engine::survey`]) found that the server serves it in ranges:
    /// the engine then skips its own first-byte request.
    pub ranged_size: Option<u64>,
    /// Where the same file is served over HTTP/2, when a survey found the server advertising
    /// cleartext HTTP/2 (`Alt-Svc: h2c=":PORT"`), or, for `https://`, offering `h2` in ALPN
    /// (the URL itself): an engine with [`Protocol::Http2`] fetches it from there, so that a
    /// dataset listed by its HTTP/1.1 URLs can move over HTTP/2.
    pub h2c_url: Option<String>,
    /// Its size as the dataset's listing gives it (`URL SIZE` lines): the survey then need not
    /// ask for it once its server has answered another file ([`Engine::survey`]).
    pub listed_size: Option<u64>,
}

impl FileSpec {
    /// A file named after the last segment of its URL's path, percent-decoded (`a%201.bin` is
    /// saved as `a 1.bin`); a segment that decodes to no name, `.`, `..`, or one with a `/`
    /// or NUL in it is refused (it would be saved outside the output directory).
    pub fn from_url(url: &str) -> Result<FileSpec, TransferError> {
        let bad = |why: &str| TransferError::Url {
            url: url.into(),
            why: why.into(),
        };
        let rest = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"))
            .ok_or_else(|| bad("only http:// and https:// URLs are supported"))?;
        let path = rest.split_once('/').map_or("", |x| x.1);
        let name = path.rsplit('/').next().unwrap_or("");
        let name = name.split(['?', '#']).next().unwrap_or("");
        let name = percent_decode(name)
            .ok_or_else(|| bad("its file name is not UTF-8 once percent-decoded"))?;
        if name.is_empty() || name == "." || name == ".." {
            return Err(bad("its path names no file"));
        }
        if name.contains(['/', '\0']) {
            return Err(bad(
                "its file name has a `/` or NUL in it once percent-decoded",
            ));
        }
        Ok(FileSpec {
            url: url.into(),
            name,
            ranged_size: None,
            h2c_url: None,
            listed_size: None,
        })
    }
}

/// `s` with its `%XX` escapes decoded (a `%` not followed by two hex digits is kept as it
/// is); `None` if the bytes are not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).and_then(|&c| hex(c)),
            b.get(i + 2).and_then(|&c| hex(c)),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// Refuse a dataset in which two files would be saved under one name (the same URL listed
/// twice, or two paths ending in the same file name), or one under another's partial file
/// (`NAME.part`, `NAME.part.ranges`): their streams would write into one partial file and
/// list each other's ranges as finished.
pub fn distinct_names(files: &[FileSpec]) -> Result<(), TransferError> {
    let mut seen = std::collections::HashMap::new();
    for f in files {
        if let Some(first) = seen.insert(f.name.clone(), f.url.as_str()) {
            return Err(TransferError::Url {
                url: f.url.clone(),
                why: if first == f.url {
                    "listed twice".into()
                } else {
                    format!("would be saved as `{}`, as {first} is", f.name)
                },
            });
        }
    }
    for f in files {
        for suffix in [".part", ".part.ranges"] {
            if let Some(other) = seen.get(&format!("{}{suffix}", f.name)) {
                return Err(TransferError::Url {
                    url: other.to_string(),
                    why: format!(
                        "its name is that of {}'s partial file while it downloads",
                        f.url
                    ),
                });
            }
        }
    }
    Ok(())
}

/// What happened to one file (a log record of the spec's fields that a client can see).
#[derive(Clone, Debug, Serialize)]
pub struct FileLog {
    /// The URL.
    pub url: String,
    /// Its size (0 if unknown).
    pub size: u64,
    /// Bytes fetched by this run (the rest was on disk from an earlier one); for an upload,
    /// the bytes the server accepted.
    pub fetched: u64,
    /// The parameters asked for (with the HTTP version used).
    pub params: Params,
    /// Streams actually used (1 when the server serves no ranges).
    pub streams: u32,
    /// Time of the first request (≈ one round trip and the server's first byte), ms.
    pub probe_ms: f64,
    /// Wall time, s.
    pub seconds: f64,
    /// `ok`; [`KEPT`] (a file already in the output directory, not fetched); or the error.
    pub outcome: String,
    /// Requests sent again: streams that broke off mid-body (asked for the bytes they had not
    /// brought) and requests left unanswered ([`STREAM_RETRIES`]).
    pub retries: u32,
    /// Ranges a stream took from another one still in flight, the back half of its remainder
    /// ([`MIN_STEAL_PIECE`]).
    pub steals: u32,
}

/// The outcome of a file already in the output directory, kept and not fetched
/// ([`Limits::overwrite`]).
pub const KEPT: &str = "kept";

impl FileLog {
    /// Whether the file was already in the output directory, kept and not fetched.
    pub fn kept(&self) -> bool {
        self.outcome == KEPT
    }
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

impl Report {
    /// Throughput over the whole dataset, Mbit/s.
    pub fn mbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / 1e6 / self.seconds.max(1e-9)
    }

    /// Files that failed, with their errors (a file kept is not one).
    pub fn failures(&self) -> Vec<&FileLog> {
        self.files
            .iter()
            .filter(|f| f.outcome != "ok" && !f.kept())
            .collect()
    }

    /// Files already in the output directory, kept and not fetched.
    pub fn kept(&self) -> usize {
        self.files.iter().filter(|f| f.kept()).count()
    }
}
