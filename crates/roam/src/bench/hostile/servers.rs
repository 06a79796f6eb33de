//! The four servers of `roam bench hostile`, each a process of its own started from this
//! binary with the options a user would give it (so that its peak RSS is its own), and each
//! one's honest client: one request, timed by the caller.
//!
//! - `net`: an application's roam-net listener (`roam bench hostile --serve-echo`: a
//!   multi-socket echo, default `Options`); an honest request is a new multi-socket from
//!   127.0.0.1, one 1 KiB IROB echoed;
//! - `relay`: `roam net relay` with a key, allowed to reach this process's TCP echo; an honest
//!   request goes through a `roam net proxy` with the key (SOCKS5, 1 KiB echoed);
//! - `hla`: `roam hla serve` with a token file; honest requests alternate `GET /update` and a
//!   device's `POST /logs` of one record;
//! - `tier`: `roam parcel serve --tier server`; an honest request is a new authenticated link
//!   getting one chunk put there at the start.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use roam_net::proto::{Label, NetKind};
use roam_net::runtime::blocking::{Listener, MultiSocket};
use roam_net::runtime::{LocalNetwork, Networks, Options, Tls};
use roam_store::tier::TierClient;
use roam_store::ChunkId;

use crate::cmd::{random_32, write_private};
use roam_store::tier::wire::hex;

/// Bytes of an honest request (and of its echo).
const REQUEST: usize = 1024;
/// An honest request not answered within this counts as not served.
pub const HONEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A server process, killed when dropped.
pub struct Process {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
}

impl Process {
    /// Start `roam ARGS` (this binary) listening on `addr`, and wait until it accepts TCP
    /// connections there.
    fn start(args: &[String], addr: SocketAddr, log: &Path) -> Result<Process> {
        let err = std::fs::File::create(log).with_context(|| format!("{}", log.display()))?;
        let child = Command::new(std::env::current_exe()?)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .context("starting a server")?;
        let mut p = Process { child, addr };
        let t0 = Instant::now();
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            if let Some(status) = p.child.try_wait()? {
                bail!(
                    "`roam {}` exited ({status}) before listening; its log: {}",
                    args.join(" "),
                    log.display()
                );
            }
            if t0.elapsed() > Duration::from_secs(30) {
                bail!(
                    "`roam {}` is not listening on {addr} after 30 s",
                    args.join(" ")
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(p)
    }

    /// Its peak resident set (VmHWM), in MiB; an error once it has exited.
    pub fn peak_rss_mib(&mut self) -> Result<f64> {
        if let Some(status) = self.child.try_wait()? {
            bail!("the server exited ({status}) during the soak");
        }
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let kib: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .ok_or_else(|| anyhow!("no VmHWM in /proc/{}/status", self.child.id()))?;
        Ok(kib / 1024.0)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free loopback port's address (bound and let go: the server binds it next).
fn free_addr() -> Result<SocketAddr> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?)
}

/// A fresh random key, secret or token, in hex.
fn random_hex() -> Result<String> {
    Ok(hex(&random_32()?))
}

/// The multi-socket options of an honest client: its one network is 127.0.0.1.
fn honest_options() -> Options {
    Options {
        networks: Networks::Explicit(vec![LocalNetwork {
            name: "lo".into(),
            addr: Ipv4Addr::LOCALHOST.into(),
            kind: NetKind::default(),
        }]),
        connect_timeout: HONEST_TIMEOUT,
        ..Options::default()
    }
}

/// `roam bench hostile --serve-echo ADDR`: an application's roam-net listener that echoes
/// every IROB back, each multi-socket on a thread of its own.
pub fn serve_echo(addr: SocketAddr) -> Result<()> {
    let l = Listener::bind(addr, Options::default())?;
    loop {
        let ms = l.accept()?;
        std::thread::spawn(move || {
            while let Ok(Some((_, label, data))) = ms.recv_irob() {
                if ms.send(label, data, None).is_err() {
                    break;
                }
            }
        });
    }
}

/// A server under the soak: its process, its honest client's state, and what its attackers
/// need.
pub struct Server {
    /// `net`, `relay`, `hla` or `tier`.
    pub name: &'static str,
    /// The server's process.
    pub process: Process,
    /// The processes it needs besides (the relay's honest proxy).
    _helpers: Vec<Process>,
    honest: Honest,
    /// The tier's certificate and TLS name, for its attackers.
    pub tls: Option<(Vec<u8>, &'static str)>,
    /// A device token for the hostile records (the HLA server's compromised device).
    pub token: Option<String>,
    requests: u64,
}

/// What an honest client needs to make a request.
enum Honest {
    Net,
    Relay {
        proxy: SocketAddr,
        echo: SocketAddr,
    },
    Hla {
        token: String,
    },
    Tier {
        tls: Vec<u8>,
        secret: [u8; 32],
        chunk: (ChunkId, Vec<u8>),
    },
}

impl Server {
    /// One honest request; an error says why it was not served.
    pub fn request(&mut self) -> Result<()> {
        self.requests += 1;
        let k = self.requests;
        match &self.honest {
            Honest::Net => echo_over_roam_net(self.process.addr),
            Honest::Relay { proxy, echo } => echo_through_proxy(*proxy, *echo),
            Honest::Hla { token } => hla_request(self.process.addr, token, k),
            Honest::Tier { tls, secret, chunk } => tier_get(self.process.addr, tls, secret, chunk),
        }
    }
}

fn payload() -> Vec<u8> {
    (0..REQUEST).map(|i| (i % 251) as u8).collect()
}

fn echo_over_roam_net(addr: SocketAddr) -> Result<()> {
    let ms = MultiSocket::connect(addr, honest_options())?;
    let sent = payload();
    ms.send(Label::ForegroundSmall, sent.clone(), None)?;
    let got = ms.recv_timeout(HONEST_TIMEOUT)?;
    ms.abort("done");
    match got {
        Some(d) if d.data[..] == sent[..] => Ok(()),
        Some(_) => bail!("a wrong echo"),
        None => bail!("no echo within {HONEST_TIMEOUT:?}"),
    }
}

fn echo_through_proxy(proxy: SocketAddr, echo: SocketAddr) -> Result<()> {
    let mut s = TcpStream::connect_timeout(&proxy, HONEST_TIMEOUT)?;
    s.set_read_timeout(Some(HONEST_TIMEOUT))?;
    s.set_nodelay(true)?;
    let SocketAddr::V4(e) = echo else {
        bail!("the echo is not IPv4")
    };
    s.write_all(&[5, 1, 0])?;
    let mut m = [0u8; 2];
    s.read_exact(&mut m)?;
    let mut req = vec![5, 1, 0, 1];
    req.extend(e.ip().octets());
    req.extend(e.port().to_be_bytes());
    s.write_all(&req)?;
    let mut reply = [0u8; 10];
    s.read_exact(&mut reply)?;
    if reply[1] != 0 {
        bail!(
            "the proxy refused the connection (SOCKS5 reply {})",
            reply[1]
        );
    }
    let sent = payload();
    s.write_all(&sent)?;
    let mut got = vec![0u8; sent.len()];
    s.read_exact(&mut got)?;
    if got != sent {
        bail!("a wrong echo");
    }
    Ok(())
}

/// One HTTP/1.1 exchange on a new connection; the status code.
fn http(addr: SocketAddr, request: &str) -> Result<u16> {
    let mut s = TcpStream::connect_timeout(&addr, HONEST_TIMEOUT)?;
    s.set_read_timeout(Some(HONEST_TIMEOUT))?;
    s.write_all(request.as_bytes())?;
    let mut answer = Vec::new();
    s.read_to_end(&mut answer)?;
    let text = String::from_utf8_lossy(&answer);
    text.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| anyhow!("no HTTP status in the answer ({} bytes)", answer.len()))
}

/// One valid record (what `roam transfer get` uploads after a transfer).
fn honest_record(k: u64) -> String {
    format!(
        r#"{{"rtt_ms":59,"bandwidth_mbps":200,"mean_file_bytes":2700000,"params":{{"cc":{},"p":1,"bs":65536}},"throughput_mbps":{},"energy_j_per_100mb":20,"ok":true}}"#,
        1 + k % 16,
        5.0 + (k % 16) as f64
    ) + "\n"
}

fn hla_request(addr: SocketAddr, token: &str, k: u64) -> Result<()> {
    let status = if k.is_multiple_of(2) {
        http(
            addr,
            "GET /update HTTP/1.1\r\nHost: hla\r\nConnection: close\r\n\r\n",
        )?
    } else {
        let body = honest_record(k);
        http(
            addr,
            &format!(
                "POST /logs HTTP/1.1\r\nHost: hla\r\nAuthorization: Bearer {token}\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            ),
        )?
    };
    if status != 200 {
        bail!("HTTP {status}");
    }
    Ok(())
}

fn tier_get(
    addr: SocketAddr,
    tls: &[u8],
    secret: &[u8; 32],
    (id, blob): &(ChunkId, Vec<u8>),
) -> Result<()> {
    let tls = Tls::client(tls, crate::cmd::parcel::TLS_NAME)?;
    let c = TierClient::connect_with(
        "server",
        addr,
        {
            let mut o = roam_store::tier::link_options(Some(tls));
            o.networks = honest_options().networks;
            o
        },
        secret,
    )?;
    let got = c.get_pipelined(std::slice::from_ref(id))?;
    c.close();
    match got.first() {
        Some(Some(b)) if b == blob => Ok(()),
        Some(Some(_)) => bail!("a wrong chunk"),
        _ => bail!("the chunk is missing"),
    }
}

/// Start server `name` in `dir` (its files and log).
pub fn start(name: &'static str, dir: &Path) -> Result<Server> {
    std::fs::create_dir_all(dir)?;
    let log = dir.join(format!("{name}.log"));
    let addr = free_addr()?;
    let a = addr.to_string();
    let p = |d: &Path| d.display().to_string();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let plain = |name, process| Server {
        name,
        process,
        _helpers: vec![],
        honest: Honest::Net,
        tls: None,
        token: None,
        requests: 0,
    };
    Ok(match name {
        "net" => plain(
            name,
            Process::start(&s(&["bench", "hostile", "--serve-echo", &a]), addr, &log)?,
        ),
        "relay" => {
            let key: PathBuf = dir.join("relay.key");
            write_private(&key, random_hex()?.as_bytes())?;
            let echo = echo_server()?;
            let relay = Process::start(
                &s(&[
                    "net",
                    "relay",
                    "--listen",
                    &a,
                    "--allow",
                    "127.0.0.1",
                    "--key-file",
                ])
                .into_iter()
                .chain([p(&key)])
                .collect::<Vec<_>>(),
                addr,
                &log,
            )?;
            let proxy_addr = free_addr()?;
            let proxy = Process::start(
                &s(&[
                    "net",
                    "proxy",
                    "--listen",
                    &proxy_addr.to_string(),
                    "--relay",
                    &a,
                    "--dedup-in-memory",
                ])
                .into_iter()
                .chain(["--key-file".into(), p(&key)])
                .collect::<Vec<_>>(),
                proxy_addr,
                &dir.join("proxy.log"),
            )?;
            Server {
                name,
                process: relay,
                _helpers: vec![proxy],
                honest: Honest::Relay {
                    proxy: proxy_addr,
                    echo,
                },
                tls: None,
                token: None,
                requests: 0,
            }
        }
        "hla" => {
            let (honest, mallory) = (random_hex()?, random_hex()?);
            let tokens = dir.join("tokens");
            write_private(
                &tokens,
                format!("{honest} phone\n{mallory} mallory\n").as_bytes(),
            )?;
            let state = dir.join("state");
            std::fs::create_dir_all(&state)?;
            let args = s(&["hla", "serve", "--listen", &a, "--state"])
                .into_iter()
                .chain([p(&state), "--tokens".into(), p(&tokens)])
                .collect::<Vec<_>>();
            Server {
                name,
                process: Process::start(&args, addr, &log)?,
                _helpers: vec![],
                honest: Honest::Hla { token: honest },
                tls: None,
                token: Some(mallory),
                requests: 0,
            }
        }
        "tier" => {
            let secret = random_32()?;
            let secret_hex = hex(&secret);
            let secret_file = dir.join("secret");
            write_private(&secret_file, secret_hex.as_bytes())?;
            let tier_dir = dir.join("tier");
            let args = s(&[
                "parcel", "serve", "--tier", "server", "--listen", &a, "--dir",
            ])
            .into_iter()
            .chain([p(&tier_dir), "--secret-file".into(), p(&secret_file)])
            .collect::<Vec<_>>();
            let process = Process::start(&args, addr, &log)?;
            let cert = std::fs::read(tier_dir.join("tls/cert.pem")).context("the tier's cert")?;
            let chunk = put_chunk(addr, &cert, &secret)?;
            Server {
                name,
                process,
                _helpers: vec![],
                honest: Honest::Tier {
                    tls: cert.clone(),
                    secret,
                    chunk,
                },
                tls: Some((cert, crate::cmd::parcel::TLS_NAME)),
                token: None,
                requests: 0,
            }
        }
        other => bail!("no server `{other}` (net, relay, hla, tier)"),
    })
}

/// Put one sealed chunk at the tier: what the honest client gets back.
fn put_chunk(addr: SocketAddr, cert: &[u8], secret: &[u8; 32]) -> Result<(ChunkId, Vec<u8>)> {
    let tls = Tls::client(cert, crate::cmd::parcel::TLS_NAME)?;
    let c = TierClient::connect("server", addr, Some(tls), secret)?;
    let sealed = roam_store::seal(&payload().repeat(64));
    let blob = sealed.blob.clone();
    c.put_pipelined(&[sealed.id], &mut |_| Ok(blob.clone()), &mut |_, _| {})?;
    c.close();
    Ok((sealed.id, sealed.blob))
}

/// A TCP echo on loopback (the relay's target), a thread per connection; its address.
fn echo_server() -> Result<SocketAddr> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    let addr = l.local_addr()?;
    std::thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut b = vec![0u8; 16 << 10];
                while let Ok(n) = c.read(&mut b) {
                    if n == 0 || c.write_all(&b[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    Ok(addr)
}
