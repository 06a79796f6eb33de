//! `roam transfer put`: upload files and directories with HTTP `PUT` (to a WebDAV share, an
//! object store's presigned URLs, nginx's `dav_methods PUT`), `--cc` files at once, read
//! `--bs` bytes at a time, over HTTP/1.1 or HTTP/2 (FastHLA's engine, `roam-transfer`).

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::Args;
use roam_transfer::engine::percent_encode;
use roam_transfer::{Engine, Params, Protocol, Upload};

use super::{append_log, failures, progress, Reach};

/// Arguments of `roam transfer put`.
#[derive(Args, Debug)]
pub struct PutArgs {
    /// Files and directories to upload. A file goes to `--to` followed by its name; a
    /// directory's files (recursively, symbolic links to directories not followed) go to
    /// `--to` followed by their paths within it.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// The destination directory's URL (http:// or https://, ending in `/`).
    #[arg(long, value_name = "URL")]
    to: String,
    /// Concurrency: files in flight at once.
    #[arg(long, default_value_t = 4)]
    cc: u32,
    /// Block size in bytes: how much is read from a file at a time.
    #[arg(long, default_value_t = Params::default().bs)]
    bs: usize,
    /// HTTP/2 (for http://, cleartext with prior knowledge; for https://, by ALPN): every file
    /// a stream of one connection.
    #[arg(long)]
    http2: bool,
    #[command(flatten)]
    reach: Reach,
    /// Append one JSON record per file to this file.
    #[arg(long)]
    log: Option<PathBuf>,
}

/// Every regular file under `path` (itself, if it is one) with its path relative to the
/// directory given (a file: its name). Other kinds of file are skipped, said once each.
fn files_of(path: &Path) -> Result<Vec<(PathBuf, Vec<String>)>> {
    let meta = std::fs::metadata(path).with_context(|| format!("{}", path.display()))?;
    if meta.is_file() {
        let name = path
            .file_name()
            .with_context(|| format!("{}: names no file", path.display()))?;
        return Ok(vec![(
            path.to_path_buf(),
            vec![percent_encode(name.as_bytes())],
        )]);
    }
    if !meta.is_dir() {
        bail!("{}: neither a file nor a directory", path.display());
    }
    let mut out = Vec::new();
    let mut stack = vec![(path.to_path_buf(), Vec::new())];
    while let Some((dir, rel)) = stack.pop() {
        let mut entries = std::fs::read_dir(&dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .collect::<std::io::Result<Vec<_>>>()
            .with_context(|| format!("reading {}", dir.display()))?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let p = e.path();
            let mut r: Vec<String> = rel.clone();
            r.push(percent_encode(e.file_name().as_bytes()));
            let kind = e
                .file_type()
                .with_context(|| format!("reading {}", p.display()))?;
            if kind.is_dir() {
                stack.push((p, r));
            } else if std::fs::metadata(&p).is_ok_and(|m| m.is_file()) {
                out.push((p, r));
            } else {
                eprintln!("{}: skipped (not a regular file)", p.display());
            }
        }
    }
    Ok(out)
}

/// Run it: 0 when every file was accepted, an error naming the failed ones otherwise.
pub fn put(a: &PutArgs) -> Result<()> {
    if !(a.to.starts_with("http://") || a.to.starts_with("https://")) || !a.to.ends_with('/') {
        bail!(
            "--to {}: expected a directory's URL, http:// or https:// ending in /",
            a.to
        );
    }
    let mut uploads = Vec::new();
    for p in &a.paths {
        for (path, rel) in files_of(p)? {
            uploads.push(Upload {
                path,
                url: format!("{}{}", a.to, rel.join("/")),
            });
        }
    }
    if uploads.is_empty() {
        bail!("nothing to upload: no regular file under the paths given");
    }
    let params = Params {
        cc: a.cc,
        p: 1,
        bs: a.bs,
        protocol: if a.http2 {
            Protocol::Http2
        } else {
            Protocol::Http1
        },
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let report = rt.block_on(async {
        let e = Arc::new(Engine::with_connector(params, a.reach.connector()?)?);
        let bar = progress::show([e.as_ref()], uploads.len() as u64, "sent");
        let r = e.put(&uploads).await;
        bar.finish();
        Ok::<_, anyhow::Error>(r?)
    })?;
    if let Some(path) = &a.log {
        append_log(path, &report)?;
    }
    let retried: u32 = report.files.iter().map(|f| f.retries).sum();
    if retried > 0 {
        eprintln!("{retried} file(s) sent again (a stream that broke off or made no progress)");
    }
    eprintln!(
        "{} file(s), {:.1} MB in {:.1} s: {:.1} Mbit/s",
        report.files.len(),
        report.bytes as f64 / 1e6,
        report.seconds,
        report.mbps()
    );
    failures(&report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_percent_encoded_and_directories_walked() {
        assert_eq!(percent_encode(b"a b%/c.txt"), "a%20b%25%2Fc.txt");
        assert_eq!(percent_encode("é~".as_bytes()), "%C3%A9~");
        let root = std::env::temp_dir().join(format!("roam-put-walk-{}", std::process::id()));
        std::fs::create_dir_all(root.join("d/sub")).unwrap();
        std::fs::write(root.join("d/x y.bin"), b"1").unwrap();
        std::fs::write(root.join("d/sub/z.bin"), b"2").unwrap();
        let mut got: Vec<String> = files_of(&root.join("d"))
            .unwrap()
            .into_iter()
            .map(|(_, r)| r.join("/"))
            .collect();
        got.sort();
        assert_eq!(got, vec!["sub/z.bin", "x%20y.bin"]);
        let one = files_of(&root.join("d/sub/z.bin")).unwrap();
        assert_eq!(one[0].1, vec!["z.bin"]);
        let err = format!("{:#}", files_of(&root.join("absent")).unwrap_err());
        assert!(err.contains("absent"), "{err}");
        let _ = std::fs::remove_dir_all(&root);
    }
}
