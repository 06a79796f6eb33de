//! `roam net`: Intentional Networking's tools. `estimates` prints what this namespace's
//! multi-sockets publish; `proxy` and `relay` carry unmodified programs' TCP connections over
//! multi-sockets ([`roam_net::proxy`]: the SOCKS5 or transparent proxy on the device, the relay
//! at the server side), for proxies that prove the relay's key (`key` makes one).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use roam_net::proxy::compress::{Dictionaries, DictionaryConfig};
use roam_net::proxy::{
    read_private, Allow, Compression, Intercept, Key, LabelRules, NetworkMatch, NetworkRelay,
    Proxy, ProxyConfig, Relay, RelayConfig,
};
use roam_net::runtime::{Options, Tls};

/// The limits both commands hold their peers to, after `--help`.
const LIMITS: &str = "\
Limits (each bounds what one peer can hold):
  --handshake-timeout (proxy, 10s)  deadline for a program's whole SOCKS5 negotiation
  --request-timeout (10s)           relay: from a multi-socket's arrival to its answer (the
                                    key's proof, the whole request, resolving and connecting
                                    to the target); proxy: from the relay being reached to
                                    its answer
  --idle-timeout (10m)              a carried connection with no byte moving either way, or
                                    whose program or target stops reading, is closed
  --max-connections (256)           connections carried at once (a relay counts requests not
                                    yet proved too)
  --max-per-source (proxy, 128)     connections at once from one source address (an IPv6
                                    /64); programs on the device all come from 127.0.0.1
  requests, challenges, answers     at most 512 bytes
  multi-sockets                     roam-net's own: 10s to reach the relay, 5s for a
                                    connection's first frame, 1024 sessions and 64 pending
                                    handshakes at the relay's listener";

/// `roam net ...`.
#[derive(Subcommand)]
pub enum NetCmd {
    /// Each network's current estimates (RTT, bandwidth) and outstanding background bytes, as
    /// published by the multi-socket processes of this network namespace.
    Estimates {
        /// The shared table (default: $ROAM_NET_SHM or /dev/shm/roam-net-<netns inode>).
        #[arg(long)]
        shm: Option<PathBuf>,
        /// Print again every second until interrupted.
        #[arg(long)]
        watch: bool,
    },
    /// On the device: carry unmodified programs' TCP connections (SOCKS5, or redirected by the
    /// firewall) over multi-sockets to a `roam net relay`, labelled by destination port,
    /// proving the relay's key (--key-file) for each.
    #[command(after_help = LIMITS)]
    Proxy(ProxyArgs),
    /// At the server side: open the TCP connections `roam net proxy` asks for and copy their
    /// bytes over the multi-sockets, for proxies that prove the key (--key-file), where --allow
    /// permits. Without a key it refuses to start unless --insecure-no-auth is given.
    #[command(after_help = LIMITS)]
    Relay(RelayArgs),
    /// Make a key for `roam net relay` and `roam net proxy` (64 hex digits, in a new file only
    /// its owner may read). Copy it to the other end as privately.
    Key {
        /// Where to write it (refused if it exists).
        #[arg(long)]
        out: PathBuf,
    },
}

/// Options of `roam net proxy`.
#[derive(Args, Debug)]
pub struct ProxyArgs {
    /// Where programs connect: a SOCKS5 proxy (or, with --transparent, where the firewall
    /// redirects their connections).
    #[arg(long, default_value = "127.0.0.1:1080")]
    listen: SocketAddr,
    /// The `roam net relay` at the server side (the default one, with --network-relay).
    #[arg(long)]
    relay: SocketAddr,
    /// The relay of some networks, repeated: NETWORK=ADDRESS:PORT[,KEYFILE], NETWORK being
    /// `wifi` (every network not cellular), `cellular` or `if:NAME` (one interface). Each new
    /// connection goes to the relay of the network in use now (one not cellular while one is
    /// up, else cellular), to --relay when none is named for it; a connection under way stays
    /// with its relay, over whichever networks remain. The key defaults to --key-file's; with
    /// --tls-ca, the relay's certificate must carry its address.
    #[arg(long = "network-relay", value_name = "NETWORK=ADDR[,KEYFILE]")]
    network_relays: Vec<String>,
    /// The relay's key (64 hex digits; `roam net key` makes one), proved to the relay for
    /// every connection; the relay must prove it back. The file must be readable by its
    /// owner only (chmod 600), or it is refused. Required unless --insecure-no-auth.
    #[arg(long, value_name = "FILE")]
    key_file: Option<PathBuf>,
    /// Without a key: only for a relay started with --insecure-no-auth (which serves whoever
    /// reaches it).
    #[arg(long, conflicts_with = "key_file")]
    insecure_no_auth: bool,
    /// TLS to the relay: trust the certificates in this PEM file (the relay's --tls-cert, or
    /// its authority). Without it, an on-path attacker can read and alter carried connections.
    #[arg(long, value_name = "FILE")]
    tls_ca: Option<PathBuf>,
    /// The name the relay's certificate must carry (default: the --relay address).
    #[arg(long, value_name = "NAME", requires = "tls_ca")]
    tls_name: Option<String>,
    /// Accept connections the firewall redirected here (`iptables -t nat -A OUTPUT -p tcp
    /// --dport 5201 -j REDIRECT --to-ports PORT`) instead of SOCKS5; the destination is the
    /// connection's original one (SO_ORIGINAL_DST).
    #[arg(long)]
    transparent: bool,
    /// The label of connections to a destination port: PORT=LABEL, repeated (labels:
    /// foreground-small, foreground-large, background-small, background-large).
    #[arg(long = "label", value_name = "PORT=LABEL")]
    labels: Vec<String>,
    /// A file of rules, one a line: `PORT LABEL` (`*` for any port; `#` starts a comment).
    /// --label options take precedence.
    #[arg(long)]
    rules: Option<PathBuf>,
    /// The label of connections no rule names.
    #[arg(long, default_value = "foreground-small")]
    default_label: String,
    /// Most connections carried at once (further ones are closed at once).
    #[arg(long, default_value_t = roam_net::proxy::DEFAULT_MAX_CONNECTIONS)]
    max_connections: usize,
    /// Most connections carried at once from one source address, an IPv6 /64 counting as one
    /// (further ones from it are closed at once). Programs on this device all come from
    /// 127.0.0.1.
    #[arg(long, default_value_t = roam_net::proxy::DEFAULT_MAX_PER_SOURCE)]
    max_per_source: usize,
    /// Deadline for a program's whole SOCKS5 negotiation (not per read).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = positive)]
    handshake_timeout: Duration,
    /// Deadline from the relay being reached to its answer.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = positive)]
    request_timeout: Duration,
    /// A connection with no byte moving either way for this long (or whose program or
    /// target stops reading) is closed.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = positive)]
    idle_timeout: Duration,
    /// Do not ask the relay for asymmetric caching (last-hop deduplication of what targets
    /// send, steered by this device's cache; on by default for every plaintext connection).
    #[arg(long)]
    no_dedup: bool,
    /// Destination ports carried without dedup (repeat).
    #[arg(long, value_name = "PORT")]
    no_dedup_port: Vec<u16>,
    /// The device's dedup cache, MB of content (in memory, and on disk in --dedup-store).
    #[arg(long, value_name = "MB", default_value_t = 256)]
    dedup_cache_mb: u64,
    /// Where the dedup cache persists across restarts (default ~/.cache/roam/dedup.redb;
    /// written every 30 s; a damaged file is replaced by an empty one, and said so).
    #[arg(long, value_name = "FILE")]
    dedup_store: Option<PathBuf>,
    /// Keep the dedup cache in memory only.
    #[arg(long, conflicts_with = "dedup_store")]
    dedup_in_memory: bool,
    /// Ask the relay to compress what targets send with zstd, one stream per connection
    /// (plain if the relay does not offer it).
    #[arg(long, conflicts_with = "zstd_dict_mb")]
    zstd: bool,
    /// Ask the relay to compress with zstd, the previous response to the same request as a
    /// dictionary (RFC 9842's idea); keep this many MB of previous responses.
    #[arg(long, value_name = "MB")]
    zstd_dict_mb: Option<usize>,
}

/// Options of `roam net relay`.
#[derive(Args, Debug)]
pub struct RelayArgs {
    /// Where proxies' multi-sockets arrive.
    #[arg(long)]
    listen: SocketAddr,
    /// Where the relay may connect: an address or network with an optional port
    /// (`10.77.0.1`, `10.0.0.0/8`, `192.0.2.7:80`, `0.0.0.0/0:443`, `2001:db8::/32`,
    /// `[2001:db8::]/32:443`), repeated. Required: without it the relay would connect wherever
    /// any peer asked. Loopback, link-local, unspecified and multicast addresses only where a
    /// rule names them (`127.0.0.1`, `127.0.0.0/8:8080`; `0.0.0.0/0` names none); an
    /// IPv4-mapped IPv6 address counts as its IPv4 address; a host name is resolved here and
    /// each of its addresses checked.
    #[arg(long, value_name = "NET[:PORT]", required = true)]
    allow: Vec<String>,
    /// The key proxies must prove (64 hex digits; `roam net key` makes one). The file must be
    /// readable by its owner only (chmod 600), or it is refused. Without a key the relay
    /// refuses to start unless --insecure-no-auth is given.
    #[arg(long, value_name = "FILE")]
    key_file: Option<PathBuf>,
    /// Serve whoever reaches --listen, without a key: anyone who can reach the port gets every
    /// connection --allow permits. Only for a trusted network.
    #[arg(long, conflicts_with = "key_file")]
    insecure_no_auth: bool,
    /// TLS: present this certificate chain (PEM) to proxies (which check it with --tls-ca).
    /// Without TLS, an on-path attacker can read and alter carried connections.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// TLS: the certificate's private key (PEM), in a file readable by its owner only.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Most connections relayed at once, requests not yet proved included (further
    /// multi-sockets are refused).
    #[arg(long, default_value_t = roam_net::proxy::DEFAULT_MAX_CONNECTIONS)]
    max_connections: usize,
    /// Deadline from a multi-socket's arrival to the relay's answer: the key's proof, the
    /// whole request, resolving and connecting to the target (not per read).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = positive)]
    request_timeout: Duration,
    /// A relayed connection with no byte moving either way for this long (or whose target or
    /// program stops reading) is closed.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = positive)]
    idle_timeout: Duration,
    /// Refuse proxies' requests for asymmetric caching (last-hop deduplication; on by
    /// default): their connections are carried plain.
    #[arg(long)]
    no_dedup: bool,
    /// The relay's dedup caches (regular and feedback, half each), kB of content they stand
    /// for (the thesis: about 1 MB).
    #[arg(long, value_name = "KB", default_value_t = 1024)]
    dedup_cache_kb: u64,
    /// Refuse proxies' requests for zstd compression (offered by default).
    #[arg(long)]
    no_zstd: bool,
    /// Offer zstd with the previous response as a dictionary, keeping this many MB of
    /// previous responses (for every proxy together; off by default).
    #[arg(long, value_name = "MB")]
    zstd_dict_mb: Option<usize>,
}

/// A store of `mb` MB of zstd dictionaries.
fn dictionaries(mb: usize) -> std::sync::Arc<std::sync::Mutex<Dictionaries>> {
    std::sync::Arc::new(std::sync::Mutex::new(Dictionaries::new(DictionaryConfig {
        bytes: mb << 20,
    })))
}

/// A duration argument above zero.
fn positive(s: &str) -> Result<Duration, String> {
    match crate::parse_dur(s)? {
        d if d.is_zero() => Err("must be above zero".into()),
        d => Ok(d),
    }
}

/// Run `roam net ...`.
pub fn run(cmd: NetCmd) -> Result<()> {
    match cmd {
        NetCmd::Estimates { shm, watch } => estimates(shm, watch),
        NetCmd::Proxy(a) => proxy(a),
        NetCmd::Relay(a) => relay(a),
        NetCmd::Key { out } => {
            Key::write_new(&out)?;
            eprintln!("wrote {}", out.display());
            Ok(())
        }
    }
}

/// `roam net estimates`: the shared table as a markdown table, once or every second.
fn estimates(shm: Option<PathBuf>, watch: bool) -> Result<()> {
    use roam_net::runtime::shm::SharedCounts;
    let path = shm.unwrap_or_else(SharedCounts::default_path);
    if !path.exists() {
        bail!(
            "{}: no estimates published (no multi-socket has run in this network namespace)",
            path.display()
        );
    }
    let table =
        SharedCounts::open(path.clone()).with_context(|| format!("opening {}", path.display()))?;
    loop {
        let entries = table.entries();
        println!("| pid | network | RTT (ms) | bandwidth (kbit/s) | background outstanding (bytes) | age (ms) |");
        println!("|---:|---|---:|---:|---:|---:|");
        for e in &entries {
            let rtt = e
                .rtt
                .map_or("-".to_string(), |d| format!("{:.1}", d.as_secs_f64() * 1e3));
            let bw = e
                .bandwidth
                .map_or("-".to_string(), |b| format!("{:.0}", b.as_kbps_f64()));
            println!(
                "| {} | {} | {} | {} | {} | {} |",
                e.pid, e.network, rtt, bw, e.outstanding, e.age_ms
            );
        }
        if entries.is_empty() {
            println!("(no live multi-socket process has published in the last 2 s)");
        }
        if !watch {
            return Ok(());
        }
        std::thread::sleep(Duration::from_secs(1));
        println!();
    }
}

/// The key in `path`, if given.
fn key(path: &Option<PathBuf>) -> Result<Option<Key>> {
    path.as_deref()
        .map(Key::from_file)
        .transpose()
        .map_err(Into::into)
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
}

/// `roam net proxy`: until interrupted.
fn proxy(a: ProxyArgs) -> Result<()> {
    let key = key(&a.key_file)?;
    if key.is_none() && !a.insecure_no_auth {
        bail!(
            "the proxy needs the relay's key (--key-file); --insecure-no-auth only for a relay \
             that serves whoever reaches it"
        );
    }
    let file = match &a.rules {
        Some(p) => Some((
            p.display().to_string(),
            std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?,
        )),
        None => None,
    };
    let rules = LabelRules::parse(
        &a.labels,
        file.as_ref().map(|(n, t)| (n.as_str(), t.as_str())),
        &a.default_label,
    )?;
    let tls = match &a.tls_ca {
        Some(ca) => {
            let name = a.tls_name.clone().unwrap_or(a.relay.ip().to_string());
            Some(Tls::client(&read(ca)?, &name).with_context(|| ca.display().to_string())?)
        }
        None => None,
    };
    let ca = a.tls_ca.as_deref().map(read).transpose()?;
    let mut per_network: Vec<NetworkRelay> = Vec::new();
    for value in &a.network_relays {
        let (serves, relay, key_file) = network_relay(value).map_err(|e| anyhow!(e))?;
        if per_network.iter().any(|r| r.serves == serves) {
            bail!("--network-relay {value}: `{serves}` is named by an earlier --network-relay");
        }
        let key = match key_file {
            Some(f) => {
                Some(Key::from_file(&f).with_context(|| format!("--network-relay {value}"))?)
            }
            None => key.clone(),
        };
        let mut r = NetworkRelay::new(serves, relay, key);
        if let Some(ca) = &ca {
            r.tls = Some(
                Tls::client(ca, &relay.ip().to_string())
                    .with_context(|| format!("--network-relay {value}"))?,
            );
        }
        per_network.push(r);
    }
    let upstreams: String = per_network
        .iter()
        .map(|r| format!(", {} relay {}", r.serves, r.relay))
        .collect();
    let proxy = Proxy::bind(ProxyConfig {
        listen: a.listen,
        relay: a.relay,
        key,
        per_network,
        networks_now: None,
        intercept: if a.transparent {
            Intercept::Transparent
        } else {
            Intercept::Socks5
        },
        rules,
        max_connections: a.max_connections,
        max_per_source: a.max_per_source,
        handshake_timeout: a.handshake_timeout,
        request_timeout: a.request_timeout,
        idle_timeout: a.idle_timeout,
        options: Options {
            tls,
            ..Options::default()
        },
        dedup: (!a.no_dedup).then(|| dedup_cache(&a)),
        no_dedup_ports: a.no_dedup_port.clone(),
        compress: match (a.zstd, a.zstd_dict_mb) {
            (_, Some(mb)) => Compression::ZstdDict(dictionaries(mb)),
            (true, None) => Compression::Zstd,
            (false, None) => Compression::Off,
        },
    })?;
    eprintln!(
        "roam net proxy: {} on {}, relay {}{upstreams}{}",
        if a.transparent {
            "redirected connections"
        } else {
            "SOCKS5"
        },
        proxy.local_addr()?,
        a.relay,
        if a.tls_ca.is_some() { " (TLS)" } else { "" }
    );
    proxy.run(|event| eprintln!("roam net proxy: {event}"))?;
    Ok(())
}

/// One `--network-relay` value, `NETWORK=ADDRESS:PORT[,KEYFILE]`: which networks, the relay's
/// address, its key file if another than --key-file's. The error names the flag and the value.
fn network_relay(value: &str) -> Result<(NetworkMatch, SocketAddr, Option<PathBuf>), String> {
    let bad = |why: String| format!("--network-relay {value}: {why}");
    let Some((network, rest)) = value.split_once('=') else {
        return Err(bad(
            "expected NETWORK=ADDRESS:PORT[,KEYFILE] (NETWORK: wifi, cellular or if:NAME)".into(),
        ));
    };
    let serves = network
        .parse::<NetworkMatch>()
        .map_err(|e| bad(e.to_string()))?;
    let (addr, key_file) = match rest.split_once(',') {
        Some((_, "")) => return Err(bad("no key file after the comma".into())),
        Some((addr, file)) => (addr, Some(PathBuf::from(file))),
        None => (rest, None),
    };
    let relay = addr.parse::<SocketAddr>().map_err(|_| {
        bad(format!(
            "`{addr}` is not an address and port (192.0.2.1:7500, [2001:db8::1]:7500)"
        ))
    })?;
    Ok((serves, relay, key_file))
}

/// The proxy's dedup cache: loaded from its file (unless --dedup-in-memory), saved every 30 s
/// by a thread of its own.
fn dedup_cache(a: &ProxyArgs) -> std::sync::Arc<std::sync::Mutex<roam_dedup::Destination>> {
    use std::sync::{Arc, Mutex};
    let cfg = roam_dedup::destination::DestinationConfig {
        cache_bytes: a.dedup_cache_mb << 20,
        ..Default::default()
    };
    let path = a.dedup_store.clone().or_else(|| {
        (!a.dedup_in_memory).then(|| {
            let home = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
                .unwrap_or_else(|| PathBuf::from("."));
            home.join("roam").join("dedup.redb")
        })
    });
    let Some(path) = path else {
        return Arc::new(Mutex::new(roam_dedup::Destination::new(cfg)));
    };
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let (d, why) = roam_dedup::Destination::with_disk(cfg, &path);
    if let Some(why) = why {
        eprintln!(
            "roam net proxy: dedup cache {}: {why}; starting empty",
            path.display()
        );
    }
    let d = Arc::new(Mutex::new(d));
    let saver = d.clone();
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_secs(30));
        let r = saver.lock().unwrap_or_else(|p| p.into_inner()).save();
        if let Err(e) = r {
            eprintln!("roam net proxy: saving the dedup cache: {e}");
        }
    });
    d
}

/// `roam net relay`: until interrupted.
fn relay(a: RelayArgs) -> Result<()> {
    let allow: Vec<Allow> = a
        .allow
        .iter()
        .map(|s| s.parse::<Allow>().map_err(|e| anyhow!("--allow {e}")))
        .collect::<Result<_>>()?;
    let key = key(&a.key_file)?;
    let tls = match (&a.tls_cert, &a.tls_key) {
        (Some(cert), Some(k)) => Some(
            Tls::server(&read(cert)?, &read_private(k)?)
                .with_context(|| format!("{} and {}", cert.display(), k.display()))?,
        ),
        _ => None,
    };
    let relay = Relay::bind(RelayConfig {
        listen: a.listen,
        allow,
        key,
        insecure_no_auth: a.insecure_no_auth,
        max_connections: a.max_connections,
        request_timeout: a.request_timeout,
        idle_timeout: a.idle_timeout,
        options: Options {
            tls,
            ..Options::default()
        },
        dedup: if a.no_dedup {
            None
        } else {
            let half = (a.dedup_cache_kb << 10) / 2;
            Some(std::sync::Arc::new(std::sync::Mutex::new(
                roam_dedup::Source::new(roam_dedup::source::SourceConfig {
                    regular_bytes: half,
                    feedback_bytes: half,
                    ..Default::default()
                })
                .context("--dedup-cache-kb")?,
            )))
        },
        zstd: !a.no_zstd,
        dictionaries: a.zstd_dict_mb.map(dictionaries),
    })?;
    eprintln!(
        "roam net relay: on {}{}{}",
        relay.local_addr(),
        if a.tls_cert.is_some() { " (TLS)" } else { "" },
        if a.insecure_no_auth {
            "; WITHOUT a key (--insecure-no-auth): serving whoever reaches this port"
        } else {
            ""
        }
    );
    relay.run(|event| match event {
        // Turned away silently, as the proxy sees the multi-socket aborted.
        roam_net::proxy::Event::Refused { .. } => {}
        e => eprintln!("roam net relay: {e}"),
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The defaults --help shows are the library's.
    #[test]
    fn the_documented_defaults_are_the_librarys() {
        use roam_net::proxy::{HANDSHAKE_TIMEOUT, IDLE_TIMEOUT, REQUEST_TIMEOUT};
        assert_eq!(positive("10s").unwrap(), HANDSHAKE_TIMEOUT);
        assert_eq!(positive("10s").unwrap(), REQUEST_TIMEOUT);
        assert_eq!(positive("10m").unwrap(), IDLE_TIMEOUT);
        assert!(positive("0s").is_err());
        assert!(LIMITS.contains(&format!("({})", roam_net::proxy::DEFAULT_MAX_CONNECTIONS)));
        assert!(LIMITS.contains(&format!("{})", roam_net::proxy::DEFAULT_MAX_PER_SOURCE)));
        assert!(LIMITS.contains(&format!("{} bytes", roam_net::proxy::MAX_REQUEST)));
    }

    #[test]
    fn network_relays_parse_and_malformed_ones_are_named() {
        let (serves, relay, key) = network_relay("wifi=192.0.2.1:7500").unwrap();
        assert_eq!(serves, NetworkMatch::NonCellular);
        assert_eq!(relay, "192.0.2.1:7500".parse().unwrap());
        assert_eq!(key, None);
        let (serves, relay, key) =
            network_relay("cellular=[2001:db8::1]:7501,/etc/roam/cell.key").unwrap();
        assert_eq!(serves, NetworkMatch::Cellular);
        assert_eq!(relay, "[2001:db8::1]:7501".parse().unwrap());
        assert_eq!(key, Some(PathBuf::from("/etc/roam/cell.key")));
        let (serves, _, _) = network_relay("if:wlan0=192.0.2.1:7500").unwrap();
        assert_eq!(serves, NetworkMatch::Interface("wlan0".into()));
        for (value, why) in [
            ("wifi", "expected NETWORK=ADDRESS:PORT"),
            ("", "expected NETWORK=ADDRESS:PORT"),
            ("wlan=192.0.2.1:7500", "`wlan` names no network"),
            ("if:=192.0.2.1:7500", "`if:` names no network"),
            ("wifi=192.0.2.1", "`192.0.2.1` is not an address and port"),
            ("wifi=relay.example:7500", "is not an address and port"),
            ("wifi=", "`` is not an address and port"),
            ("cellular=192.0.2.1:7500,", "no key file"),
        ] {
            let e = network_relay(value).unwrap_err();
            assert!(
                e.starts_with(&format!("--network-relay {value}: ")) && e.contains(why),
                "{value}: {e}"
            );
        }
    }
}
