//! Chromium over the DevTools protocol (the `headless_chrome` crate): launching Debian's
//! `chromium`, the recorder ([`record`]), the replayer ([`replay`]), a replay session
//! through several tabs ([`session`]), the replayer's log of responses ([`request_log`]) and a
//! prefetch session's copies of the pages it fetched ([`reuse`]).
//!
//! roam never downloads a browser: it runs `/usr/bin/chromium` (or `$ROAM_CHROMIUM`), with the
//! user's profile directory so that what a replay fetches lands in the HTTP cache the user's
//! browser reads, and optionally through a proxy (`roam net proxy`, whose dedup cache then
//! holds the replayed bytes too). A profile is one browser's at a time: Chromium locks it
//! (`SingletonLock`), and [`profile_in_use`] says so before a replay tries.

pub mod record;
pub mod replay;
pub mod request_log;
pub mod reuse;
pub mod session;

use headless_chrome::{Browser, LaunchOptions};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The browser roam runs when `$ROAM_CHROMIUM` does not name another.
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// How to start the browser.
#[derive(Clone, Debug)]
pub struct BrowserConfig {
    /// The executable.
    pub chromium: PathBuf,
    /// The profile directory (`--user-data-dir`); `None`: a fresh temporary one.
    pub profile: Option<PathBuf>,
    /// A proxy for every request, e.g. `socks5://127.0.0.1:1080`.
    pub proxy: Option<String>,
    /// Without a window (replay); with one for `roam precog browse`.
    pub headless: bool,
}

impl Default for BrowserConfig {
    fn default() -> Self {
        BrowserConfig {
            chromium: std::env::var_os("ROAM_CHROMIUM")
                .map_or_else(|| CHROMIUM.into(), PathBuf::from),
            profile: None,
            proxy: None,
            headless: true,
        }
    }
}

/// Why the browser could not be driven.
#[derive(Debug, thiserror::Error)]
pub enum BrowserError {
    /// No executable where the config says.
    #[error("{0}: no Chromium there (install Debian's chromium: apt-get install chromium; or set ROAM_CHROMIUM)")]
    NotInstalled(PathBuf),
    /// The profile is open in another browser.
    #[error(
        "profile {0} is in use by a running Chromium (close it, or replay into another profile)"
    )]
    ProfileInUse(PathBuf),
    /// Chromium did not start or answer.
    #[error("Chromium did not start: {0}")]
    Launch(String),
    /// A DevTools call failed (the browser may have crashed).
    #[error("DevTools: {0}")]
    Cdp(String),
}

impl BrowserError {
    pub(crate) fn cdp(e: impl std::fmt::Display) -> BrowserError {
        BrowserError::Cdp(e.to_string())
    }
}

/// Whether a running Chromium holds `profile` (its `SingletonLock` names a live process).
pub fn profile_in_use(profile: &Path) -> bool {
    let Ok(target) = std::fs::read_link(profile.join("SingletonLock")) else {
        return false;
    };
    // The lock's target is HOSTNAME-PID.
    let pid = target
        .to_string_lossy()
        .rsplit('-')
        .next()
        .and_then(|p| p.parse::<u32>().ok());
    pid.is_some_and(|p| Path::new(&format!("/proc/{p}")).exists())
}

/// Start Chromium as `cfg` says.
pub fn launch(cfg: &BrowserConfig) -> Result<Browser, BrowserError> {
    if !cfg.chromium.is_file() {
        return Err(BrowserError::NotInstalled(cfg.chromium.clone()));
    }
    if let Some(p) = &cfg.profile {
        if profile_in_use(p) {
            return Err(BrowserError::ProfileInUse(p.clone()));
        }
    }
    let mut args: Vec<OsString> = vec![
        // No first-run UI, no component updates or other traffic of the browser's own.
        "--no-first-run".into(),
        "--disable-component-update".into(),
        "--disable-sync".into(),
        // Debian's Chromium otherwise reaches for its search engine, sign-in and updates.
        "--disable-background-networking".into(),
        "--disable-domain-reliability".into(),
        "--no-pings".into(),
        "--disable-features=OptimizationHints,MediaRouter,AutofillServerCommunication,Translate,InterestFeedContentSuggestions".into(),
        "--homepage=about:blank".into(),
    ];
    if cfg.headless {
        // A replay's tabs side by side are all in the background but one: their timers and
        // renderers run at full speed all the same (the user's own browser keeps Chromium's
        // thrift).
        for a in [
            "--disable-background-timer-throttling",
            "--disable-renderer-backgrounding",
            "--disable-backgrounding-occluded-windows",
        ] {
            args.push(a.into());
        }
    }
    if let Some(p) = &cfg.proxy {
        args.push(format!("--proxy-server={p}").into());
        // Chromium sends loopback addresses around a proxy unless told not to.
        args.push("--proxy-bypass-list=<-loopback>".into());
    }
    let args_ref: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    let opts = LaunchOptions {
        headless: cfg.headless,
        // Chromium refuses to run as root with its sandbox on.
        sandbox: unsafe { libc::geteuid() } != 0,
        path: Some(cfg.chromium.clone()),
        user_data_dir: cfg.profile.clone(),
        args: args_ref,
        idle_browser_timeout: Duration::from_secs(600),
        ..LaunchOptions::default()
    };
    Browser::new(opts).map_err(|e| BrowserError::Launch(e.to_string()))
}

/// The host of `url` belongs to `site`: the same host, or one is a subdomain of the other.
pub fn same_site(url: &str, site: &str) -> bool {
    crate::path::host(url).is_some_and(|h| {
        h == site || h.ends_with(&format!(".{site}")) || site.ends_with(&format!(".{h}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sites() {
        assert!(same_site("http://news.example/a", "news.example"));
        assert!(same_site("http://m.news.example/a", "news.example"));
        assert!(same_site("http://news.example/a", "www.news.example"));
        assert!(!same_site("http://ads.example/a", "news.example"));
        assert!(!same_site("about:blank", "news.example"));
    }

    #[test]
    fn a_missing_browser_is_named() {
        let cfg = BrowserConfig {
            chromium: "/nonexistent/chromium".into(),
            ..Default::default()
        };
        let e = launch(&cfg).err().unwrap().to_string();
        assert!(
            e.contains("/nonexistent/chromium") && e.contains("apt-get"),
            "{e}"
        );
    }
}
