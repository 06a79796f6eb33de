//! A real, unmodified web server for the news reader (`roam lab imp`): nginx from Debian
//! (`apt-get install nginx`), started per trial inside the emulator's server namespace with its
//! own configuration and document root, and stopped with the trial.
//!
//! The site: 5 feeds of 5 articles (the IMP thesis's 25 articles in 5 feeds), each article an
//! HTML file whose size is drawn log-uniformly from 4 KB to 400 KB (the thesis gives no sizes;
//! the range straddles the size-limit strategy's 128 KB) from the trial's seed.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::harness::scratch::Scratch;

/// Feeds on the site.
pub const FEEDS: usize = 5;
/// Articles per feed.
pub const PER_FEED: usize = 5;
/// Smallest article, bytes.
pub const MIN_SIZE: u64 = 4 * 1024;
/// Largest article, bytes.
pub const MAX_SIZE: u64 = 400 * 1024;
/// The port nginx listens on (loopback of the server namespace).
pub const HTTP_PORT: u16 = 8080;

/// Where nginx is installed, if it is.
pub fn binary() -> Option<PathBuf> {
    crate::harness::setup::NGINX
        .paths
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// The path of article `a` of feed `f`.
pub fn article_path(f: usize, a: usize) -> String {
    format!("/feed{f}/article{a}.html")
}

/// Every article's size for `seed`: `[feed][article]`.
pub fn article_sizes(seed: u64) -> Vec<Vec<u64>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6e_5e);
    let (lo, hi) = ((MIN_SIZE as f64).ln(), (MAX_SIZE as f64).ln());
    (0..FEEDS)
        .map(|_| {
            (0..PER_FEED)
                .map(|_| rng.gen_range(lo..=hi).exp().round() as u64)
                .collect()
        })
        .collect()
}

/// A running nginx; stopped (and its directory removed) when dropped.
pub struct Nginx {
    child: Child,
    dir: Scratch,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Nginx {
    /// Its document root (where the site's files are).
    pub fn docroot(&self) -> PathBuf {
        self.dir.join("www")
    }

    /// Write the site for `seed` and start nginx; call from inside the namespace it should
    /// serve. Returns once it accepts connections on 127.0.0.1:[`HTTP_PORT`].
    pub fn start(seed: u64) -> Result<Nginx> {
        let dir = Scratch::new("nginx")?;
        let www = dir.join("www");
        for (f, sizes) in article_sizes(seed).into_iter().enumerate() {
            let feed = www.join(format!("feed{f}"));
            std::fs::create_dir_all(&feed)
                .with_context(|| format!("creating {}", feed.display()))?;
            for (a, size) in sizes.into_iter().enumerate() {
                let p = www.join(article_path(f, a).trim_start_matches('/'));
                std::fs::write(&p, article(f, a, size))
                    .with_context(|| format!("writing {}", p.display()))?;
            }
        }
        let servers = format!(
            "server {{ listen 127.0.0.1:{HTTP_PORT}; root {}/www; }}",
            dir.display()
        );
        let addr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, HTTP_PORT));
        let child = launch(&dir, &servers, addr)?;
        Ok(Nginx { child, dir })
    }
}

/// Start nginx with its state in `dir` and the `server` blocks `servers` (their roots under
/// `dir`), in the calling thread's network namespace, dying with this process
/// (`roam_emu::run::spawn_lasting`); returns once `probe` accepts connections (at most 15 s),
/// else the error nginx gave.
pub fn launch(dir: &std::path::Path, servers: &str, probe: SocketAddr) -> Result<Child> {
    let bin =
        binary().ok_or_else(|| anyhow!("nginx is not installed (apt-get install -y nginx)"))?;
    std::fs::create_dir_all(dir.join("tmp"))?;
    let d = dir.display();
    let conf = dir.join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\n\
             error_log {d}/error.log;\nevents {{ worker_connections 1024; }}\n\
             http {{\n  access_log off;\n  client_body_temp_path {d}/tmp;\n  \
             proxy_temp_path {d}/tmp;\n  fastcgi_temp_path {d}/tmp;\n  \
             uwsgi_temp_path {d}/tmp;\n  scgi_temp_path {d}/tmp;\n  {servers}\n}}\n"
        ),
    )?;
    let mut cmd = Command::new(&bin);
    cmd.arg("-c")
        .arg(&conf)
        .arg("-p")
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child =
        roam_emu::run::spawn_lasting(cmd).with_context(|| format!("starting {}", bin.display()))?;
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(status) = child.try_wait()? {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                use std::io::Read;
                let _ = e.read_to_string(&mut err);
            }
            let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
            bail!(
                "nginx exited at start ({status}): {} {}",
                err.trim(),
                log.trim()
            );
        }
        if TcpStream::connect_timeout(&probe, Duration::from_millis(200)).is_ok() {
            return Ok(child);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("nginx did not accept connections within 15 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One article of exactly `size` bytes.
fn article(f: usize, a: usize, size: u64) -> Vec<u8> {
    let mut m =
        format!("<html><head><title>feed {f}, article {a}</title></head><body>\n").into_bytes();
    let line = b"<p>Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod.</p>\n";
    while (m.len() as u64) < size {
        let room = (size - m.len() as u64) as usize;
        m.extend_from_slice(&line[..room.min(line.len())]);
    }
    m
}

/// GET `path` from nginx on loopback: the status code and the body (HTTP/1.1, one request per
/// connection).
pub fn get(path: &str) -> Result<(u16, Vec<u8>)> {
    use std::io::{Read, Write};
    let mut s =
        TcpStream::connect((Ipv4Addr::LOCALHOST, HTTP_PORT)).context("connecting to nginx")?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: lab\r\nConnection: close\r\n\r\n"
    )?;
    let mut all = Vec::new();
    s.read_to_end(&mut all)?;
    let head_end = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| anyhow!("nginx's response to {path} has no header end"))?;
    let head = String::from_utf8_lossy(&all[..head_end]);
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| anyhow!("nginx's response to {path} has no status: {head}"))?;
    Ok((status, all[head_end + 4..].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_site_is_the_same_for_a_seed_and_straddles_the_size_limit() {
        let s = article_sizes(1);
        assert_eq!(s, article_sizes(1));
        assert_eq!((s.len(), s[0].len()), (FEEDS, PER_FEED));
        let all: Vec<u64> = s.into_iter().flatten().collect();
        assert!(all.iter().all(|&x| (MIN_SIZE..=MAX_SIZE).contains(&x)));
        assert!(all.iter().any(|&x| x > 128 * 1024) && all.iter().any(|&x| x < 128 * 1024));
        assert_eq!(article(1, 2, 5000).len(), 5000);
    }
}
