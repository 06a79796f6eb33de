//! `roam net`: Intentional Networking's tools. `estimates` prints what this namespace's
//! multi-sockets publish; `proxy` and `relay` carry unmodified programs' TCP connections over
//! multi-sockets ([`roam_net::proxy`]: the SOCKS5 or transparent proxy on the device, the relay
//! at the server side).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use roam_net::proxy::{Allow, Intercept, LabelRules, Proxy, ProxyConfig, Relay, RelayConfig};
use roam_net::runtime::Options;

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
    /// firewall) over multi-sockets to a `roam net relay`, labelled by destination port.
    Proxy(ProxyArgs),
    /// At the server side: open the TCP connections `roam net proxy` asks for (where --allow
    /// permits) and copy their bytes over the multi-sockets.
    Relay(RelayArgs),
}

/// Options of `roam net proxy`.
#[derive(Args, Debug)]
pub struct ProxyArgs {
    /// Where programs connect: a SOCKS5 proxy (or, with --transparent, where the firewall
    /// redirects their connections).
    #[arg(long, default_value = "127.0.0.1:1080")]
    listen: SocketAddr,
    /// The `roam net relay` at the server side.
    #[arg(long)]
    relay: SocketAddr,
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
    /// Most connections carried at once (further ones are refused).
    #[arg(long, default_value_t = roam_net::proxy::DEFAULT_MAX_CONNECTIONS)]
    max_connections: usize,
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
    /// any peer asked.
    #[arg(long, value_name = "NET[:PORT]", required = true)]
    allow: Vec<String>,
    /// Most connections relayed at once (further requests are refused).
    #[arg(long, default_value_t = roam_net::proxy::DEFAULT_MAX_CONNECTIONS)]
    max_connections: usize,
}

/// Run `roam net ...`.
pub fn run(cmd: NetCmd) -> Result<()> {
    match cmd {
        NetCmd::Estimates { shm, watch } => estimates(shm, watch),
        NetCmd::Proxy(a) => proxy(a),
        NetCmd::Relay(a) => relay(a),
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

/// `roam net proxy`: until interrupted.
fn proxy(a: ProxyArgs) -> Result<()> {
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
    let proxy = Proxy::bind(ProxyConfig {
        listen: a.listen,
        relay: a.relay,
        intercept: if a.transparent {
            Intercept::Transparent
        } else {
            Intercept::Socks5
        },
        rules,
        max_connections: a.max_connections,
        options: Options::default(),
    })?;
    eprintln!(
        "roam net proxy: {} on {}, relay {}",
        if a.transparent {
            "redirected connections"
        } else {
            "SOCKS5"
        },
        proxy.local_addr()?,
        a.relay
    );
    proxy.run(|event| eprintln!("roam net proxy: {event}"))?;
    Ok(())
}

/// `roam net relay`: until interrupted.
fn relay(a: RelayArgs) -> Result<()> {
    let allow: Vec<Allow> = a
        .allow
        .iter()
        .map(|s| s.parse::<Allow>().map_err(|e| anyhow!("--allow {e}")))
        .collect::<Result<_>>()?;
    let relay = Relay::bind(RelayConfig {
        listen: a.listen,
        allow,
        max_connections: a.max_connections,
        options: Options::default(),
    })?;
    eprintln!("roam net relay: on {}", relay.local_addr());
    relay.run(|event| match event {
        // Turned away silently, as the proxy sees the multi-socket aborted.
        roam_net::proxy::Event::Refused { .. } => {}
        e => eprintln!("roam net relay: {e}"),
    })?;
    Ok(())
}
