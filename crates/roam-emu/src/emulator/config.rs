//! What the emulator is asked to build ([`EmuConfig`]), what can go wrong ([`EmuError`]), and
//! the check that runs before anything touches the kernel ([`validate`]).
//!
//! Validation comes first and is pure: a typo in a host name or a link given twice is reported
//! before a namespace or a device exists, so a bad configuration leaves nothing behind and its
//! error names the mistake rather than a failed `ip` command.

use crate::control::ScheduledCommand;
use crate::spec::LinkConfig;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::Duration;

/// At most this many links: link `i` is numbered into `10.77.(i+1).0/24`, routing table
/// `100+i` and rule preference `1000+i`, and an address octet stops at 255.
const MAX_LINKS: usize = 200;

/// At most this many named hosts besides `client` and `server` (own addresses `10.78.k.1`).
const MAX_HOSTS: usize = 50;

/// Errors starting or running the emulator.
#[derive(Debug, thiserror::Error)]
pub enum EmuError {
    /// Missing privileges or kernel support; a one-line reason.
    #[error("{0}")]
    Privilege(String),
    /// The configuration is unusable.
    #[error("{0}")]
    Config(String),
    /// A system operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
}

/// Wrap an I/O error with what was being done: `.map_err(io_err("creating X"))`.
pub(super) fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> EmuError {
    let what = what.into();
    move |source| EmuError::Io { what, source }
}

/// Emulator settings.
#[derive(Clone, Debug, Default)]
pub struct EmuConfig {
    /// The links, in routing-preference order.
    pub links: Vec<LinkConfig>,
    /// Where to write per-link, per-direction logs (`<link>.<up|down>.csv`, `summary.json`).
    pub log_dir: Option<PathBuf>,
    /// Width of a log row (default 100 ms).
    pub log_interval: Option<Duration>,
    /// With `log_dir`, also write per-packet logs in Mahimahi's `mm-link --log` format,
    /// `<link>.<up|down>.mm.log`, which Mahimahi's `mm-throughput-graph` and
    /// `mm-delay-graph` read.
    pub packet_log: bool,
    /// Where to write packet captures of what each link delivers
    /// (`<link>.<up|down>.pcap`, see [`crate::pcap`]).
    pub pcap_dir: Option<PathBuf>,
    /// Scripted link changes.
    pub events: Vec<ScheduledCommand>,
    /// Where to listen for control commands.
    pub control_socket: Option<PathBuf>,
    /// Hosts besides `client` and `server` (each a namespace; names of 1-15 letters or
    /// digits).
    pub hosts: Vec<String>,
    /// The two hosts a link joins, by link name: (A, B), where A takes the client's side of
    /// the link (the `up` direction runs from A to B). Links not named join the client (A) and
    /// the server (B).
    pub ends: HashMap<String, (String, String)>,
    /// The TCP congestion control every namespace uses by default
    /// (`net.ipv4.tcp_congestion_control`, per namespace): new namespaces inherit the host's,
    /// which on this machine is BBR where a phone's Linux runs CUBIC. Unset: the host's. A
    /// name the kernel does not have fails [`super::Emulator::start`].
    pub congestion_control: Option<String>,
}

/// The two hosts one link joins, `(A, B)`: A holds the client's side (`10.77.i.2`, the `up`
/// direction leaves it), B the server's side (`10.77.i.1`).
pub(super) type Ends = (String, String);

/// Check `cfg` and resolve each link's two ends (in `cfg.links` order; a link missing from
/// [`EmuConfig::ends`] joins `client` to `server`).
///
/// The rules, checked in this order so that the first mistake is the one reported:
/// 1. at least one link and at most [`MAX_LINKS`], each name given once;
/// 2. at most [`MAX_HOSTS`] named hosts, each 1-15 letters or digits (a host name becomes
///    part of an environment variable, `ROAM_HOST_<NAME>_ADDR`) and none repeated or called
///    `client` or `server`;
/// 3. each link joins two different known hosts;
/// 4. [`EmuConfig::ends`] names only links that exist (a misspelt link would otherwise
///    silently keep its default ends).
pub(super) fn validate(cfg: &EmuConfig) -> Result<Vec<Ends>, EmuError> {
    let links = validate_links(&cfg.links)?;
    let hosts = validate_hosts(&cfg.hosts)?;
    let ends = resolve_ends(cfg, &hosts)?;
    if let Some(name) = cfg.ends.keys().find(|name| !links.contains(name.as_str())) {
        return Err(EmuError::Config(format!(
            "ends given for unknown link `{name}`"
        )));
    }
    Ok(ends)
}

/// Rule 1: the link count and unique names; the set of link names.
fn validate_links(links: &[LinkConfig]) -> Result<HashSet<&str>, EmuError> {
    if links.is_empty() {
        return Err(EmuError::Config(
            "no links: give at least one --link NAME=SPEC or a --scenario".into(),
        ));
    }
    if links.len() > MAX_LINKS {
        return Err(EmuError::Config(format!("at most {MAX_LINKS} links")));
    }
    let mut seen = HashSet::new();
    for l in links {
        if !seen.insert(l.name.as_str()) {
            return Err(EmuError::Config(format!("link `{}` given twice", l.name)));
        }
    }
    Ok(seen)
}

/// Rule 2: the named hosts; the set of every host name, `client` and `server` included.
fn validate_hosts(hosts: &[String]) -> Result<HashSet<&str>, EmuError> {
    if hosts.len() > MAX_HOSTS {
        return Err(EmuError::Config(format!(
            "at most {MAX_HOSTS} hosts besides client and server"
        )));
    }
    let mut names = HashSet::from(["client", "server"]);
    for h in hosts {
        let ok = !h.is_empty() && h.len() <= 15 && h.bytes().all(|b| b.is_ascii_alphanumeric());
        if !ok {
            return Err(EmuError::Config(format!(
                "host name `{h}`: 1-15 letters or digits"
            )));
        }
        if !names.insert(h.as_str()) {
            return Err(EmuError::Config(format!("host `{h}` given twice")));
        }
    }
    Ok(names)
}

/// Rule 3: each link's ends, defaulted and checked against the known `hosts`.
fn resolve_ends(cfg: &EmuConfig, hosts: &HashSet<&str>) -> Result<Vec<Ends>, EmuError> {
    let mut ends = Vec::with_capacity(cfg.links.len());
    for l in &cfg.links {
        let (a, b) = cfg
            .ends
            .get(&l.name)
            .cloned()
            .unwrap_or_else(|| ("client".into(), "server".into()));
        for h in [&a, &b] {
            if !hosts.contains(h.as_str()) {
                return Err(EmuError::Config(format!(
                    "link `{}` joins unknown host `{h}` (hosts: client, server{})",
                    l.name,
                    cfg.hosts
                        .iter()
                        .map(|h| format!(", {h}"))
                        .collect::<String>()
                )));
            }
        }
        if a == b {
            return Err(EmuError::Config(format!(
                "link `{}` joins host `{a}` to itself",
                l.name
            )));
        }
        ends.push((a, b));
    }
    Ok(ends)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::parse_link;

    fn cfg(links: &[&str], hosts: &[&str], ends: &[(&str, &str, &str)]) -> EmuConfig {
        EmuConfig {
            links: links
                .iter()
                .map(|l| parse_link(&format!("{l}=rate=1mbit"), 1).unwrap())
                .collect(),
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            ends: ends
                .iter()
                .map(|(l, a, b)| (l.to_string(), (a.to_string(), b.to_string())))
                .collect(),
            ..Default::default()
        }
    }

    fn error(c: &EmuConfig) -> String {
        validate(c).unwrap_err().to_string()
    }

    #[test]
    fn links_default_to_joining_the_client_and_the_server() {
        let c = cfg(
            &["wifi", "lte", "usb"],
            &["phone"],
            &[("usb", "client", "phone")],
        );
        let ends = validate(&c).unwrap();
        let s = |a: &str, b: &str| (a.to_string(), b.to_string());
        assert_eq!(
            ends,
            [
                s("client", "server"),
                s("client", "server"),
                s("client", "phone")
            ]
        );
    }

    #[test]
    fn mistakes_are_reported_before_anything_is_built() {
        assert!(error(&cfg(&[], &[], &[])).starts_with("no links"));
        assert_eq!(
            error(&cfg(&["wifi", "wifi"], &[], &[])),
            "link `wifi` given twice"
        );
        assert_eq!(
            error(&cfg(&["wifi"], &["a-b"], &[])),
            "host name `a-b`: 1-15 letters or digits"
        );
        assert_eq!(
            error(&cfg(&["wifi"], &["server"], &[])),
            "host `server` given twice"
        );
        assert_eq!(
            error(&cfg(&["wifi"], &["phone"], &[("wifi", "client", "tablet")])),
            "link `wifi` joins unknown host `tablet` (hosts: client, server, phone)"
        );
        assert_eq!(
            error(&cfg(&["wifi"], &[], &[("wifi", "client", "client")])),
            "link `wifi` joins host `client` to itself"
        );
        assert_eq!(
            error(&cfg(&["wifi"], &[], &[("lte", "client", "server")])),
            "ends given for unknown link `lte`"
        );
    }
}
