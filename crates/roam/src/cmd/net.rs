//! `roam net proxy` and `roam net relay`: unmodified programs over Intentional Networking, as
//! the paper's mail proxy ran an unmodified mail client (and as `mptcpize run` does for MPTCP).
//!
//! On the device, `roam net proxy` accepts TCP connections (SOCKS5 `CONNECT`, or redirected to
//! it by the firewall with `--transparent`) and carries each over a multi-socket of its own to
//! `roam net relay` at the server side, which opens the TCP connection the program asked for and
//! copies bytes both ways. Each connection's bytes travel as IROBs that each depend on all
//! earlier ones (the byte stream's order), with the label its destination port is given
//! (`--label PORT=LABEL`, a `--rules` file, `--default-label`): an unmodified program gets the
//! multi-socket's use of every network, failover and the label's placement, not the deferral
//! that needs the program's cooperation (thunks).
//!
//! The relay connects only where `--allow` permits (an open relay would connect wherever any
//! peer asked), and both ends bound their connections and time out half-open requests.
//!
//! The relay request is the multi-socket's first IROB from the proxy, one text line:
//! `roam-relay 1 HOST:PORT LABEL`; the relay answers with one IROB, `ok` or `error REASON`.
//! Closing is carried through: the program's end of stream closes the proxy's sending side
//! (the relay then shuts down its write side to the target), and the target's end of stream
//! reaches the program the same way.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use roam_net::proto::Label;
use roam_net::runtime::blocking::{Listener, MultiSocket};
use roam_net::runtime::Options;

/// Longest relay request line.
const MAX_REQUEST: usize = 512;
/// How long a client may take for its SOCKS negotiation, or the proxy for its relay request.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes read from a TCP connection at a time (each read becomes one IROB).
const READ_CHUNK: usize = 64 * 1024;

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
    #[arg(long, default_value_t = 256)]
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
    #[arg(long, default_value_t = 256)]
    max_connections: usize,
}

/// Which label each destination port gets.
#[derive(Debug, Clone)]
pub struct LabelRules {
    by_port: BTreeMap<u16, Label>,
    default: Label,
}

impl LabelRules {
    /// Rules from `--label` options, a rules file's text, and the default.
    pub fn parse(options: &[String], file: Option<(&str, &str)>, default: &str) -> Result<Self> {
        let label = |s: &str, at: &str| {
            Label::parse(s).ok_or_else(|| {
                anyhow!(
                    "{at}: `{s}` is not a label (foreground-small, foreground-large, \
                     background-small, background-large)"
                )
            })
        };
        let mut rules = LabelRules {
            by_port: BTreeMap::new(),
            default: label(default, "--default-label")?,
        };
        if let Some((name, text)) = file {
            for (i, line) in text.lines().enumerate() {
                let line = line.split('#').next().unwrap_or("").trim();
                if line.is_empty() {
                    continue;
                }
                let at = format!("{name}:{}", i + 1);
                let mut words = line.split_whitespace();
                let (Some(port), Some(l), None) = (words.next(), words.next(), words.next()) else {
                    bail!("{at}: expected `PORT LABEL`, got `{line}`");
                };
                let l = label(l, &at)?;
                if port == "*" {
                    rules.default = l;
                } else {
                    let p = port
                        .parse::<u16>()
                        .map_err(|_| anyhow!("{at}: `{port}` is not a port (1-65535 or *)"))?;
                    rules.by_port.insert(p, l);
                }
            }
        }
        for o in options {
            let (port, l) = o
                .split_once('=')
                .ok_or_else(|| anyhow!("--label {o}: expected PORT=LABEL"))?;
            let p = port
                .parse::<u16>()
                .map_err(|_| anyhow!("--label {o}: `{port}` is not a port"))?;
            rules.by_port.insert(p, label(l, &format!("--label {o}"))?);
        }
        Ok(rules)
    }

    /// The label of a connection to `port`.
    pub fn label(&self, port: u16) -> Label {
        self.by_port.get(&port).copied().unwrap_or(self.default)
    }
}

/// Where a relay may connect: a network (address and prefix length) and optionally one port.
/// Written `10.0.0.0/8`, `192.0.2.7:80`, `2001:db8::/32`, `[2001:db8::7]:443` or
/// `[2001:db8::]/32:443` (an IPv6 network with a port goes in brackets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allow {
    net: IpAddr,
    prefix: u8,
    port: Option<u16>,
}

impl std::str::FromStr for Allow {
    type Err = String;
    fn from_str(s: &str) -> Result<Allow, String> {
        let port = |p: &str| {
            p.parse::<u16>()
                .map_err(|_| format!("`{s}`: `{p}` is not a port"))
        };
        // Split off the port: after a bracketed IPv6 network, or after IPv4's one colon.
        let (addr, port) = if let Some(rest) = s.strip_prefix('[') {
            let (inside, after) = rest
                .split_once(']')
                .ok_or_else(|| format!("`{s}`: `[` without `]`"))?;
            let (len, p) = match after.split_once(':') {
                Some((len, p)) => (len, Some(port(p)?)),
                None => (after, None),
            };
            (format!("{inside}{len}"), p)
        } else if s.matches(':').count() == 1 {
            let (a, p) = s.split_once(':').unwrap_or((s, ""));
            (a.to_string(), Some(port(p)?))
        } else {
            (s.to_string(), None)
        };
        let (net, len) = match addr.split_once('/') {
            Some((n, l)) => (n, Some(l)),
            None => (addr.as_str(), None),
        };
        let net = net
            .parse::<IpAddr>()
            .map_err(|_| format!("`{s}`: `{net}` is not an IP address"))?;
        let bits = if net.is_ipv4() { 32 } else { 128 };
        let prefix = match len {
            Some(l) => l
                .parse::<u8>()
                .ok()
                .filter(|&l| l <= bits)
                .ok_or_else(|| format!("`{s}`: `{l}` is not a prefix length (0-{bits})"))?,
            None => bits,
        };
        Ok(Allow { net, prefix, port })
    }
}

impl Allow {
    /// Whether `to` is allowed.
    pub fn permits(&self, to: SocketAddr) -> bool {
        let within = match (self.net, to.ip()) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = u32::MAX.checked_shl(32 - self.prefix as u32).unwrap_or(0);
                u32::from(a) & mask == u32::from(n) & mask
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = u128::MAX.checked_shl(128 - self.prefix as u32).unwrap_or(0);
                u128::from(a) & mask == u128::from(n) & mask
            }
            _ => false,
        };
        within && self.port.is_none_or(|p| p == to.port())
    }
}

/// At most `max` of something at once: a slot is held while its guard lives.
#[derive(Clone)]
struct Slots {
    used: Arc<AtomicUsize>,
    max: usize,
}

struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Slots {
    fn new(max: usize) -> Slots {
        Slots {
            used: Arc::new(AtomicUsize::new(0)),
            max,
        }
    }
    fn take(&self) -> Option<Slot> {
        let mut n = self.used.load(Ordering::SeqCst);
        loop {
            if n >= self.max {
                return None;
            }
            match self
                .used
                .compare_exchange(n, n + 1, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return Some(Slot(self.used.clone())),
                Err(now) => n = now,
            }
        }
    }
}

/// Copy a TCP stream into the multi-socket as IROBs of `label` until end of stream, then close
/// the multi-socket's sending side (its `Goodbye` tells the peer).
fn tcp_to_ms(mut tcp: TcpStream, ms: &MultiSocket, label: Label) {
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        match tcp.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if ms.send(label, buf[..n].to_vec(), None).is_err() {
                    break;
                }
            }
        }
    }
    ms.close(Duration::from_secs(60));
}

/// Copy what the multi-socket delivers into a TCP stream until the peer has closed its side,
/// then shut down the stream's write side.
fn ms_to_tcp(ms: &MultiSocket, mut tcp: TcpStream) {
    while let Ok(Some(d)) = ms.recv() {
        if tcp.write_all(&d.data).is_err() {
            break;
        }
    }
    let _ = tcp.shutdown(Shutdown::Write);
}

/// Carry `tcp` over `ms` both ways until both sides have closed.
fn pump(ms: MultiSocket, tcp: TcpStream, label: Label) -> Result<()> {
    let up = tcp.try_clone().context("cloning the TCP connection")?;
    let ms2 = ms.clone();
    let t = std::thread::spawn(move || tcp_to_ms(up, &ms2, label));
    ms_to_tcp(&ms, tcp);
    let _ = t.join();
    Ok(())
}

/// The next IROB, whole, of at most `max` bytes (the relay request and its answer).
fn recv_line(ms: &MultiSocket, max: usize) -> Result<String> {
    let mut line = Vec::new();
    loop {
        let d = ms
            .recv_timeout(HANDSHAKE_TIMEOUT)?
            .ok_or_else(|| anyhow!("closed before its request"))?;
        line.extend_from_slice(&d.data);
        if line.len() > max {
            bail!("request longer than {max} bytes");
        }
        if d.end {
            return String::from_utf8(line).map_err(|_| anyhow!("request is not text"));
        }
    }
}

// ----- proxy ------------------------------------------------------------------------------------

/// SOCKS5 (RFC 1928), no authentication, `CONNECT` only: the destination the client asks for.
/// Domain names are passed on to the relay, which resolves them at the server side.
fn socks5_accept(s: &mut TcpStream) -> Result<(String, u16)> {
    let mut head = [0u8; 2];
    s.read_exact(&mut head)?;
    if head[0] != 5 {
        bail!("not SOCKS5 (version byte {})", head[0]);
    }
    let mut methods = vec![0u8; head[1] as usize];
    s.read_exact(&mut methods)?;
    if !methods.contains(&0) {
        s.write_all(&[5, 0xff])?;
        bail!("the client offers no method without authentication");
    }
    s.write_all(&[5, 0])?;
    let mut req = [0u8; 4];
    s.read_exact(&mut req)?;
    if req[0] != 5 || req[1] != 1 {
        socks5_reply(s, 7)?; // command not supported
        bail!("SOCKS command {} (only CONNECT is supported)", req[1]);
    }
    let host = match req[3] {
        1 => {
            let mut a = [0u8; 4];
            s.read_exact(&mut a)?;
            Ipv4Addr::from(a).to_string()
        }
        3 => {
            let mut n = [0u8; 1];
            s.read_exact(&mut n)?;
            let mut name = vec![0u8; n[0] as usize];
            s.read_exact(&mut name)?;
            String::from_utf8(name).map_err(|_| anyhow!("domain name is not text"))?
        }
        4 => {
            let mut a = [0u8; 16];
            s.read_exact(&mut a)?;
            format!("[{}]", Ipv6Addr::from(a))
        }
        t => {
            socks5_reply(s, 8)?; // address type not supported
            bail!("SOCKS address type {t} (IPv4, IPv6 and domain names are supported)");
        }
    };
    let mut port = [0u8; 2];
    s.read_exact(&mut port)?;
    Ok((host, u16::from_be_bytes(port)))
}

fn socks5_reply(s: &mut TcpStream, code: u8) -> Result<()> {
    s.write_all(&[5, code, 0, 1, 0, 0, 0, 0, 0, 0])?;
    Ok(())
}

/// The destination a connection redirected by the firewall was first addressed to
/// (SO_ORIGINAL_DST, or IP6T_SO_ORIGINAL_DST on an IPv6 connection; both are option 80).
fn original_destination(s: &TcpStream) -> Result<(String, u16)> {
    use std::os::fd::AsRawFd;
    const SO_ORIGINAL_DST: libc::c_int = 80;
    let v6 = s.local_addr()?.is_ipv6();
    // SAFETY: all-zero is a valid sockaddr_in6, large enough for either family.
    let mut sa: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t;
    let level = if v6 { libc::SOL_IPV6 } else { libc::SOL_IP };
    // SAFETY: getsockopt on our socket into the buffer above, `len` its size.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            level,
            SO_ORIGINAL_DST,
            (&mut sa as *mut libc::sockaddr_in6).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error())
            .context("SO_ORIGINAL_DST (was the connection redirected by the firewall?)");
    }
    if v6 {
        let ip = Ipv6Addr::from(sa.sin6_addr.s6_addr);
        return Ok((format!("[{ip}]"), u16::from_be(sa.sin6_port)));
    }
    // SAFETY: for IPv4 the kernel wrote a sockaddr_in at the start of the buffer.
    let sin: libc::sockaddr_in =
        unsafe { std::ptr::read((&sa as *const libc::sockaddr_in6).cast()) };
    let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
    Ok((ip.to_string(), u16::from_be(sin.sin_port)))
}

fn proxy_one(mut client: TcpStream, a: &ProxyArgs, rules: &LabelRules) -> Result<()> {
    client.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    let (host, port) = if a.transparent {
        original_destination(&client)?
    } else {
        socks5_accept(&mut client)?
    };
    client.set_read_timeout(None)?;
    let label = rules.label(port);
    let opened = MultiSocket::connect(a.relay, Options::default())
        .with_context(|| format!("connecting to the relay at {}", a.relay));
    let ms = match opened {
        Ok(ms) => ms,
        Err(e) => {
            if !a.transparent {
                socks5_reply(&mut client, 1)?;
            }
            return Err(e);
        }
    };
    ms.send(
        Label::ForegroundSmall,
        format!("roam-relay 1 {host}:{port} {label}").into_bytes(),
        None,
    )?;
    let answer = recv_line(&ms, MAX_REQUEST)?;
    if answer != "ok" {
        if !a.transparent {
            socks5_reply(&mut client, 5)?; // connection refused
        }
        bail!("the relay refused {host}:{port}: {answer}");
    }
    if !a.transparent {
        socks5_reply(&mut client, 0)?;
    }
    pump(ms, client, label)
}

/// Run `roam net proxy`.
pub fn proxy(a: ProxyArgs) -> Result<()> {
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
    let l = TcpListener::bind(a.listen).with_context(|| format!("listening on {}", a.listen))?;
    eprintln!(
        "roam net proxy: {} on {}, relay {}",
        if a.transparent {
            "redirected connections"
        } else {
            "SOCKS5"
        },
        l.local_addr()?,
        a.relay
    );
    let a = Arc::new(a);
    let rules = Arc::new(rules);
    let slots = Slots::new(a.max_connections);
    for c in l.incoming() {
        let Ok(c) = c else { continue };
        let from = c.peer_addr().ok();
        let Some(slot) = slots.take() else {
            eprintln!(
                "roam net proxy: refusing {from:?}: {} connections carried",
                a.max_connections
            );
            continue;
        };
        let (a, rules) = (a.clone(), rules.clone());
        std::thread::spawn(move || {
            if let Err(e) = proxy_one(c, &a, &rules) {
                eprintln!("roam net proxy: connection from {from:?}: {e:#}");
            }
            drop(slot);
        });
    }
    Ok(())
}

// ----- relay ------------------------------------------------------------------------------------

/// The target of a relay request line, its label, checked against `allow`.
fn parse_request(line: &str, allow: &[Allow]) -> Result<(SocketAddr, Label)> {
    let mut w = line.split(' ');
    let (Some("roam-relay"), Some("1"), Some(target), Some(label), None) =
        (w.next(), w.next(), w.next(), w.next(), w.next())
    else {
        bail!("not a relay request: `{line}`");
    };
    let label = Label::parse(label).ok_or_else(|| anyhow!("`{label}` is not a label"))?;
    let (host, port) = target
        .rsplit_once(':')
        .ok_or_else(|| anyhow!("target `{target}` has no port"))?;
    let port = port
        .parse::<u16>()
        .map_err(|_| anyhow!("target `{target}`: bad port"))?;
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let to = match bare.parse::<IpAddr>() {
        Ok(ip) => SocketAddr::new(ip, port),
        Err(_) => {
            use std::net::ToSocketAddrs;
            // A name: the first of its addresses that --allow permits.
            (host, port)
                .to_socket_addrs()
                .with_context(|| format!("resolving {host}"))?
                .find(|a| allow.iter().any(|x| x.permits(*a)))
                .ok_or_else(|| anyhow!("{host} has no address that --allow permits"))?
        }
    };
    if !allow.iter().any(|a| a.permits(to)) {
        bail!("{to} is not allowed (--allow)");
    }
    Ok((to, label))
}

fn relay_one(ms: MultiSocket, allow: &[Allow]) -> Result<()> {
    let line = recv_line(&ms, MAX_REQUEST)?;
    let (to, label) = match parse_request(&line, allow) {
        Ok(x) => x,
        Err(e) => {
            let _ = ms.send(
                Label::ForegroundSmall,
                format!("error {e:#}").into_bytes(),
                None,
            );
            ms.close(Duration::from_secs(5));
            return Err(e);
        }
    };
    let tcp = match TcpStream::connect_timeout(&to, HANDSHAKE_TIMEOUT) {
        Ok(t) => t,
        Err(e) => {
            let _ = ms.send(
                Label::ForegroundSmall,
                format!("error connecting to {to}: {e}").into_bytes(),
                None,
            );
            ms.close(Duration::from_secs(5));
            bail!("connecting to {to}: {e}");
        }
    };
    tcp.set_nodelay(true)?;
    ms.send(Label::ForegroundSmall, b"ok".to_vec(), None)?;
    pump(ms, tcp, label)
}

/// Run `roam net relay`.
pub fn relay(a: RelayArgs) -> Result<()> {
    let allow: Vec<Allow> = a
        .allow
        .iter()
        .map(|s| s.parse::<Allow>().map_err(|e| anyhow!("--allow {e}")))
        .collect::<Result<_>>()?;
    let l = Listener::bind(a.listen, Options::default())
        .with_context(|| format!("listening on {}", a.listen))?;
    eprintln!("roam net relay: on {}", l.local_addr());
    let allow = Arc::new(allow);
    let slots = Slots::new(a.max_connections);
    loop {
        let ms = l.accept()?;
        let Some(slot) = slots.take() else {
            ms.as_async().abort("the relay is full");
            continue;
        };
        let allow = allow.clone();
        std::thread::spawn(move || {
            if let Err(e) = relay_one(ms, &allow) {
                eprintln!("roam net relay: {e:#}");
            }
            drop(slot);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_come_from_options_then_the_rules_file_then_the_default() {
        let file = "# mail is background\n993 background-large\n* background-small\n80 foreground-small # web\n";
        let r = LabelRules::parse(
            &["443=foreground-large".into()],
            Some(("rules", file)),
            "foreground-small",
        )
        .unwrap();
        assert_eq!(r.label(993), Label::BackgroundLarge);
        assert_eq!(r.label(80), Label::ForegroundSmall);
        assert_eq!(r.label(443), Label::ForegroundLarge);
        assert_eq!(r.label(22), Label::BackgroundSmall);
        let e = LabelRules::parse(&[], Some(("rules", "80 fast\n")), "foreground-small")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("rules:1: "), "{e}");
        let e = LabelRules::parse(&["x=foreground-small".into()], None, "foreground-small")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`x` is not a port"), "{e}");
    }

    #[test]
    fn the_relay_connects_only_where_allowed() {
        let allow: Vec<Allow> = ["10.77.0.1", "192.168.0.0/16:80"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let ok = |l: &str| parse_request(l, &allow).map(|(to, _)| to.to_string());
        assert_eq!(
            ok("roam-relay 1 10.77.0.1:5201 background-large").unwrap(),
            "10.77.0.1:5201"
        );
        assert!(ok("roam-relay 1 192.168.3.4:80 foreground-small").is_ok());
        assert!(ok("roam-relay 1 192.168.3.4:22 foreground-small").is_err());
        assert!(ok("roam-relay 1 10.77.0.2:80 foreground-small").is_err());
        assert!(ok("roam-relay 2 10.77.0.1:80 foreground-small").is_err());
        assert!(ok("GET / HTTP/1.1").is_err());
        assert!("10.0.0.0/33".parse::<Allow>().is_err());
        assert!("0.0.0.0/0"
            .parse::<Allow>()
            .unwrap()
            .permits("1.2.3.4:5".parse().unwrap()));
        assert!(ok("roam-relay 1 [2001:db8::5]:80 foreground-small").is_err());
        // IPv6: networks, with a port in brackets, never matching IPv4.
        let v6: Vec<Allow> = ["2001:db8::/32", "[fd00::7]:443"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let ok6 = |l: &str| parse_request(l, &v6).map(|(to, _)| to.to_string());
        assert_eq!(
            ok6("roam-relay 1 [2001:db8::5]:80 foreground-small").unwrap(),
            "[2001:db8::5]:80"
        );
        assert!(ok6("roam-relay 1 [fd00::7]:443 foreground-small").is_ok());
        assert!(ok6("roam-relay 1 [fd00::7]:80 foreground-small").is_err());
        assert!(ok6("roam-relay 1 10.77.0.1:80 foreground-small").is_err());
        assert!("2001:db8::/129".parse::<Allow>().is_err());
    }
}
