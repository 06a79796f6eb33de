//! The `docs` corpus: two versions of a Debian documentation package, PostgreSQL's HTML manual
//! (`postgresql-doc-15`), as the Debian archive holds them today: the oldest and newest
//! versions `apt-cache madison` lists (bookworm's and bookworm-security's point releases).
//! Between point releases every page changes a little (the version in each page's header and
//! footer, fixed passages) and most of each page stays: the version-to-version churn a reader
//! of a manual meets after an upgrade, which asymmetric caching should find.
//!
//! The packages are fetched once with `apt-get download` (the archive is a package registry,
//! reachable from CI) and unpacked with `dpkg-deb -x` into the cache directory
//! (`$XDG_CACHE_HOME/roam/lab-dedup`, else `~/.cache/roam/lab-dedup`); later runs use what is
//! there. The report names the versions.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, bail, Context, Result};

/// The Debian package whose versions make the corpus.
pub const PACKAGE: &str = "postgresql-doc-15";
/// Where its HTML pages are inside the package.
const HTML: &str = "usr/share/doc/postgresql-doc-15/html";

/// Two versions of the manual, unpacked.
#[derive(Clone, Debug)]
pub struct Docs {
    /// The older version's name and its HTML directory.
    pub old: (String, PathBuf),
    /// The newer version's.
    pub new: (String, PathBuf),
    /// The pages (paths relative to the HTML directory) both versions have, sorted.
    pub pages: Vec<String>,
}

/// Where the lab keeps what it downloaded.
pub fn cache_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("roam").join("lab-dedup")
}

/// The versions of [`PACKAGE`] the archive offers, as `apt-cache madison` lists them.
fn versions() -> Result<Vec<String>> {
    let out = Command::new("apt-cache")
        .args(["madison", PACKAGE])
        .output()
        .context("running apt-cache (the docs corpus comes from the Debian archive)")?;
    if !out.status.success() {
        bail!(
            "apt-cache madison {PACKAGE} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let mut v: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split('|').nth(1).map(|x| x.trim().to_string()))
        .filter(|x| !x.is_empty())
        .collect();
    v.sort_by(|a, b| compare_versions(a, b));
    v.dedup();
    Ok(v)
}

/// Debian version order, by `dpkg --compare-versions`.
fn compare_versions(a: &str, b: &str) -> std::cmp::Ordering {
    let lt = Command::new("dpkg")
        .args(["--compare-versions", a, "lt", b])
        .status()
        .is_ok_and(|s| s.success());
    if a == b {
        std::cmp::Ordering::Equal
    } else if lt {
        std::cmp::Ordering::Less
    } else {
        std::cmp::Ordering::Greater
    }
}

/// Version `version` unpacked under `dir`, downloaded and unpacked first if it is not.
fn unpacked(dir: &Path, version: &str) -> Result<PathBuf> {
    let safe: String = version
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let root = dir.join(format!("{PACKAGE}-{safe}"));
    let html = root.join(HTML);
    if root.join(".complete").exists() {
        return Ok(html);
    }
    let work = dir.join(format!("download-{safe}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    eprintln!("lab dedup: downloading {PACKAGE} {version} from the Debian archive...");
    let out = Command::new("apt-get")
        .args(["download", &format!("{PACKAGE}={version}")])
        .current_dir(&work)
        .output()
        .context("running apt-get download")?;
    if !out.status.success() {
        bail!(
            "apt-get download {PACKAGE}={version} failed (the docs corpus needs the Debian \
             archive once; it is then kept in {}): {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let deb = std::fs::read_dir(&work)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .ok_or_else(|| anyhow!("apt-get download left no .deb in {}", work.display()))?;
    let _ = std::fs::remove_dir_all(&root);
    let status = Command::new("dpkg-deb")
        .arg("-x")
        .arg(&deb)
        .arg(&root)
        .status()
        .context("running dpkg-deb")?;
    if !status.success() {
        bail!("dpkg-deb -x {} failed ({status})", deb.display());
    }
    if !html.is_dir() {
        bail!(
            "{} has no {HTML}: the package's layout changed",
            deb.display()
        );
    }
    std::fs::write(root.join(".complete"), version)?;
    let _ = std::fs::remove_dir_all(&work);
    Ok(html)
}

/// The HTML pages under `dir`, relative to it.
fn html_pages(dir: &Path) -> Result<Vec<String>> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if name.ends_with(".html") && e.file_type()?.is_file() {
            v.push(name);
        }
    }
    v.sort();
    Ok(v)
}

/// The two versions of the manual (fetched and unpacked on first use; found once per
/// process).
pub fn docs() -> Result<Docs> {
    static FOUND: std::sync::Mutex<Option<Docs>> = std::sync::Mutex::new(None);
    let mut found = FOUND.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(d) = &*found {
        return Ok(d.clone());
    }
    let d = find_docs()?;
    *found = Some(d.clone());
    Ok(d)
}

fn find_docs() -> Result<Docs> {
    let dir = cache_dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut v = versions()?;
    if v.len() < 2 && roam_emu::sys::is_root() {
        // A machine whose package lists were never fetched lists nothing.
        eprintln!("lab dedup: apt-get update (the archive's lists name the manual's versions)...");
        let ok = Command::new("apt-get")
            .args(["update", "-qq"])
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            v = versions()?;
        }
    }
    let (Some(old), Some(new)) = (v.first(), v.last()) else {
        bail!("the Debian archive lists no version of {PACKAGE} (apt-get update first?)");
    };
    if old == new {
        bail!("the Debian archive lists one version of {PACKAGE} ({old}): the corpus needs two");
    }
    let (o, n) = (unpacked(&dir, old)?, unpacked(&dir, new)?);
    let newer: std::collections::HashSet<String> = html_pages(&n)?.into_iter().collect();
    let pages: Vec<String> = html_pages(&o)?
        .into_iter()
        .filter(|p| newer.contains(p))
        .collect();
    if pages.is_empty() {
        bail!("{} and {} share no page", o.display(), n.display());
    }
    Ok(Docs {
        old: (old.clone(), o),
        new: (new.clone(), n),
        pages,
    })
}
