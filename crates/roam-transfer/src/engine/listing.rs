//! A dataset given as a server's directory listing (`roam transfer get http://host/dir/`):
//! the files the listing links to, one level deep ([`Engine::listing`], [`parse_listing`]).
//!
//! Two forms are read: an HTML index (nginx's `autoindex`, Apache's `mod_autoindex`,
//! `python3 -m http.server`): every `href` that names a file in the directory itself, relative
//! to it; and nginx's `autoindex_format json` (`[{"name": ..., "type": "file", "size": N}]`),
//! whose sizes spare the survey. Links to subdirectories, parents, other servers, absolute
//! paths, queries (the sort links) and fragments are not files of the dataset, and neither is
//! a link whose name would leave the directory once decoded: they are counted, not followed.
//!
//! Nor is a name that starts with `.` once decoded (`.bashrc`, `.profile`, `%2Essh`): the
//! files are saved flat into the output directory, by default the working directory, which is
//! often the user's home, where such a file is read by the shell, the editor, ssh or git. wget
//! keeps a recursive download in `HOST/PATH/` for the same reason; here they are refused and
//! counted apart ([`Listing::hidden`]). A dotfile given by its URL (or in a list) is fetched:
//! the user named it.

use std::sync::atomic::AtomicU32;

use http_body_util::BodyExt;
use hyper::StatusCode;

use super::{Engine, FileSpec};
use crate::error::TransferError;

/// The most a listing may weigh: a hostile server's endless page is cut off, not read.
pub const MAX_LISTING_BYTES: usize = 16 << 20;

/// The files a directory listing links to, and how many other links it had.
#[derive(Clone, Debug, PartialEq)]
pub struct Listing {
    /// The directory's files, in the listing's order, each named after its link.
    pub files: Vec<FileSpec>,
    /// Links that are not files of the directory (subdirectories, parents, sort links).
    pub skipped: usize,
    /// Files whose names start with `.`, refused: the files are saved flat into the output
    /// directory, by default the working directory (often the user's home), where such a
    /// file is read by the shell, the editor, ssh or git.
    pub hidden: usize,
}

/// `f` added to `out`'s files, unless its name starts with `.` (counted as hidden).
fn take(out: &mut Listing, f: FileSpec) {
    if f.name.starts_with('.') {
        out.hidden += 1;
    } else {
        out.files.push(f);
    }
}

/// The files of the listing `body` of the directory at `base` (its URL, ending in `/`),
/// read as nginx's JSON index when `json`, else as HTML.
pub fn parse_listing(base: &str, body: &str, json: bool) -> Result<Listing, TransferError> {
    let bad = |why: String| TransferError::Url {
        url: base.into(),
        why,
    };
    if !base.ends_with('/') {
        return Err(bad("a directory's URL ends in `/`".into()));
    }
    let mut out = Listing {
        files: Vec::new(),
        skipped: 0,
        hidden: 0,
    };
    if json {
        #[derive(serde::Deserialize)]
        struct Entry {
            name: String,
            #[serde(rename = "type")]
            kind: String,
            size: Option<u64>,
        }
        let entries: Vec<Entry> = serde_json::from_str(body)
            .map_err(|e| bad(format!("a JSON listing that does not parse: {e}")))?;
        for e in entries {
            if e.kind != "file" || e.name.contains('/') {
                out.skipped += 1;
                continue;
            }
            match FileSpec::from_url(&format!("{base}{}", percent_encode(e.name.as_bytes()))) {
                Ok(mut f) => {
                    f.listed_size = e.size;
                    take(&mut out, f);
                }
                Err(_) => out.skipped += 1,
            }
        }
        return Ok(out);
    }
    let mut seen = std::collections::HashSet::new();
    for href in hrefs(body) {
        let href = unescape_html(&href);
        let local = !href.is_empty()
            && href != "."
            && href != ".."
            && !href.starts_with(['/', '?', '#'])
            && !href.contains("://")
            && !href.contains(['/', '?', '#'])
            && !href.starts_with("mailto:")
            && !href.starts_with("javascript:");
        if !local {
            out.skipped += 1;
            continue;
        }
        if seen.insert(href.clone()) {
            // A link whose name would leave the directory once decoded is not one of its files.
            match FileSpec::from_url(&format!("{base}{href}")) {
                Ok(f) => take(&mut out, f),
                Err(_) => out.skipped += 1,
            }
        }
    }
    Ok(out)
}

/// The values of every `href` attribute in `html`, quoted or not.
fn hrefs(html: &str) -> Vec<String> {
    let lower = html.to_ascii_lowercase();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = lower[from..].find("href") {
        let mut at = from + i + 4;
        from = at;
        let rest = &html[at..];
        let trimmed = rest.trim_start();
        if !trimmed.starts_with('=') {
            continue;
        }
        at += rest.len() - trimmed.len() + 1;
        let value = html[at..].trim_start();
        let v = match value.chars().next() {
            Some(q @ ('"' | '\'')) => value[1..].split(q).next().unwrap_or(""),
            _ => value
                .split(|c: char| c.is_whitespace() || c == '>')
                .next()
                .unwrap_or(""),
        };
        out.push(v.to_string());
    }
    out
}

/// The few character references an index's links carry (`&amp;` above all).
fn unescape_html(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// A name (its bytes) percent-encoded for one segment of a URL's path: everything but RFC
/// 3986's unreserved characters.
pub fn percent_encode(name: &[u8]) -> String {
    let mut out = String::new();
    for &b in name {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl Engine {
    /// The files of the directory listing at `url` (ending in `/`), fetched with a `GET` (at
    /// most [`MAX_LISTING_BYTES`]) and read by [`parse_listing`].
    pub async fn listing(&self, url: &str) -> Result<Listing, TransferError> {
        let resp = self
            .get(url, None, self.params.protocol, &AtomicU32::new(0))
            .await?;
        if resp.status() != StatusCode::OK {
            return Err(TransferError::Status {
                url: url.into(),
                status: resp.status().as_u16(),
            });
        }
        let json = resp
            .headers()
            .get(hyper::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("json"));
        let cut = |why: String| TransferError::Network {
            url: url.into(),
            why,
        };
        let mut body = resp.into_body();
        let mut bytes = Vec::new();
        loop {
            let frame = tokio::time::timeout(self.stall_timeout, body.frame())
                .await
                .map_err(|_| cut("the listing stalled".into()))?;
            let Some(frame) = frame else { break };
            let frame = frame.map_err(|e| cut(format!("the listing broke off: {e}")))?;
            if let Ok(d) = frame.into_data() {
                if bytes.len() + d.len() > MAX_LISTING_BYTES {
                    return Err(cut(format!(
                        "a listing of more than {MAX_LISTING_BYTES} bytes"
                    )));
                }
                bytes.extend_from_slice(&d);
            }
        }
        let text = String::from_utf8_lossy(&bytes);
        parse_listing(url, &text, json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_html_index_gives_its_files_and_counts_the_rest() {
        // nginx's autoindex, with a subdirectory, the parent, a sort link and an outside one.
        let page = r#"<html><head><title>Index of /d/</title></head><body>
<h1>Index of /d/</h1><hr><pre><a href="../">../</a>
<a href="sub/">sub/</a>                                               26-Nov-2026 01:00       -
<a href="a%201.bin">a 1.bin</a>                                       26-Nov-2026 01:00   60000
<a HREF='b&amp;c.bin'>b&amp;c.bin</a>
<a href=plain.txt>plain.txt</a>
<a href="?C=N;O=D">Name</a> <a href="http://elsewhere/x">x</a> <a href="/abs">abs</a>
<a href="a%201.bin">again</a>
</pre><hr></body></html>"#;
        let l = parse_listing("http://h/d/", page, false).unwrap();
        let names: Vec<&str> = l.files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["a 1.bin", "b&c.bin", "plain.txt"]);
        assert_eq!(l.files[1].url, "http://h/d/b&c.bin");
        assert_eq!(l.skipped, 5);
    }

    #[test]
    fn a_json_index_gives_sizes_and_bad_ones_are_named() {
        let j = r#"[{"name":"sub","type":"directory","mtime":"x"},
                    {"name":"x y.bin","type":"file","mtime":"x","size":123}]"#;
        let l = parse_listing("https://h/d/", j, true).unwrap();
        assert_eq!(l.files.len(), 1);
        assert_eq!(l.files[0].url, "https://h/d/x%20y.bin");
        assert_eq!(
            (l.files[0].name.as_str(), l.files[0].listed_size),
            ("x y.bin", Some(123))
        );
        assert_eq!(l.skipped, 1);
        let e = parse_listing("http://h/d/", "{not json", true).unwrap_err();
        assert!(e.to_string().contains("http://h/d/"), "{e}");
        let e = parse_listing("http://h/d", "", false).unwrap_err();
        assert!(e.to_string().contains("ends in `/`"), "{e}");
        // A link that decodes outside the directory is not one of its files, and a dotfile
        // is refused, spelt plainly or escaped.
        let l = parse_listing(
            "http://h/d/",
            r#"<a href="..%2Fx"><a href=.hidden><a href="%2Essh"><a href="x.y">"#,
            false,
        )
        .unwrap();
        let names: Vec<&str> = l.files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!((names, l.skipped, l.hidden), (vec!["x.y"], 1, 2));
    }
}
