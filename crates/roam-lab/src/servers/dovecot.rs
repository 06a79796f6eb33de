//! A real, unmodified IMAP server for the mail application: Dovecot from Debian
//! (`apt-get install dovecot-imapd`), started per trial inside the emulator's server
//! namespace with its own configuration, run directory and maildir, and stopped with the trial.
//!
//! The mailbox is the paper's (§6.2): 100 messages of 50 B to 256 KB. Sizes are drawn
//! log-uniformly (the paper gives only the range) from the trial's seed, so every system of a
//! trial sees the same mailbox.

use std::io::BufReader;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::harness::scratch::Scratch;

use crate::servers::imap;

/// Messages in the mailbox.
pub const MESSAGES: usize = 100;
/// Smallest message, bytes.
pub const MIN_SIZE: u64 = 50;
/// Largest message, bytes.
pub const MAX_SIZE: u64 = 256 * 1024;
/// The IMAP port Dovecot listens on (every address of the server namespace).
pub const IMAP_PORT: u16 = 143;
/// The mail user's login and password.
pub const USER: (&str, &str) = ("roam", "roam-lab");

/// Dovecot's Debian version (of `dovecot-imapd`), as dpkg knows it.
pub fn version() -> String {
    super::package_version(crate::harness::setup::DOVECOT.package)
}

/// Where Dovecot is installed, if it is.
pub fn binary() -> Option<PathBuf> {
    crate::harness::setup::DOVECOT
        .paths
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// The sizes of the mailbox's messages for `seed`, in mailbox order.
pub fn message_sizes(seed: u64) -> Vec<u64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x3a11);
    let (lo, hi) = ((MIN_SIZE as f64).ln(), (MAX_SIZE as f64).ln());
    (0..MESSAGES)
        .map(|_| rng.gen_range(lo..=hi).exp().round() as u64)
        .collect()
}

/// One RFC 5322 message of exactly `size` bytes (at least its headers).
pub fn message(n: usize, size: u64) -> Vec<u8> {
    let mut m = format!("From: s{n}@lab\r\nSubject: m{n}\r\n\r\n").into_bytes();
    // Body: 76-character lines, as a base64 attachment would have.
    let line = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/ABCDEFGHIJKL\r\n";
    while (m.len() as u64) < size {
        let room = (size - m.len() as u64) as usize;
        if room >= line.len() {
            m.extend_from_slice(line);
        } else {
            // A short last line (it ends with CRLF when there is room for one).
            if room >= 2 {
                m.extend_from_slice(&line[..room - 2]);
                m.extend_from_slice(b"\r\n");
            } else {
                m.push(b'.');
            }
        }
    }
    m
}

fn nobody() -> Result<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").context("reading /etc/passwd")?;
    passwd
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.first() == Some(&"nobody") && f.len() > 3)
                .then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))
                .flatten()
        })
        .ok_or_else(|| anyhow!("/etc/passwd has no usable `nobody` user for the mail files"))
}

/// A running Dovecot with the lab mailbox. Stopped (and its files removed) on drop.
pub struct Dovecot {
    child: Child,
    dir: Scratch,
}

impl Dovecot {
    /// Write the mailbox for `seed` and start Dovecot; call from inside the namespace it
    /// should serve. Returns once it accepts IMAP connections on 127.0.0.1.
    pub fn start(seed: u64) -> Result<Dovecot> {
        let messages = message_sizes(seed)
            .into_iter()
            .enumerate()
            .map(|(i, size)| message(i + 1, size));
        Dovecot::with_messages(messages)
    }

    /// Start Dovecot with `messages` in the mailbox, UIDs 1, 2, ... in their order (RFC 5322,
    /// CRLF line ends: IMAP serves them as they are); call from inside the namespace it should
    /// serve. Returns once it accepts IMAP connections on 127.0.0.1.
    pub fn with_messages(messages: impl IntoIterator<Item = impl AsRef<[u8]>>) -> Result<Dovecot> {
        let bin = binary().ok_or_else(|| {
            anyhow!("Dovecot is not installed (apt-get install -y dovecot-imapd)")
        })?;
        let dir = Scratch::new("dovecot")?;
        let maildir = dir.join("Maildir");
        for sub in ["cur", "new", "tmp"] {
            std::fs::create_dir_all(maildir.join(sub))
                .with_context(|| format!("creating {}", maildir.display()))?;
        }
        // Mail processes run as `nobody`; the directory must be reachable by it.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
        for (i, m) in messages.into_iter().enumerate() {
            // Dovecot assigns UIDs in file-name order for new files.
            let p = maildir.join("cur").join(format!("{:05}.lab:2,S", i + 1));
            std::fs::write(&p, m.as_ref()).with_context(|| format!("writing {}", p.display()))?;
        }
        let (uid, gid) = nobody()?;
        for entry in walk(&maildir)? {
            std::os::unix::fs::chown(&entry, Some(uid), Some(gid))
                .with_context(|| format!("chown {}", entry.display()))?;
        }
        let conf = dir.join("dovecot.conf");
        std::fs::write(&conf, config(&dir, &maildir, uid, gid))?;
        let mut cmd = Command::new(&bin);
        cmd.arg("-F")
            .arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = roam_emu::run::spawn_lasting(cmd)
            .with_context(|| format!("starting {}", bin.display()))?;
        let deadline = Instant::now() + Duration::from_secs(15);
        let addr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, IMAP_PORT));
        loop {
            if let Some(status) = child.try_wait()? {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    use std::io::Read;
                    let _ = e.read_to_string(&mut err);
                }
                bail!(
                    "Dovecot exited at start ({status}): {}{}",
                    err.trim(),
                    log_tail(&dir)
                );
            }
            if let Ok(s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
                let mut r = BufReader::new(s);
                if imap::read_greeting(&mut r).is_ok() {
                    break;
                }
            }
            if Instant::now() > deadline {
                let d = Dovecot { child, dir };
                bail!(
                    "Dovecot did not accept connections within 15 s{}",
                    log_tail(&d.dir)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Dovecot { child, dir })
    }

    /// Deliver `messages` as new mail, numbered on from `delivered` (the messages the mailbox
    /// had): they take the next UIDs in their order at the client's next look.
    pub fn deliver(
        &self,
        delivered: usize,
        messages: impl IntoIterator<Item = impl AsRef<[u8]>>,
    ) -> Result<()> {
        let maildir = self.dir.join("Maildir");
        let (uid, gid) = nobody()?;
        for (i, m) in messages.into_iter().enumerate() {
            // Written in tmp/ and moved to new/, as a delivery agent does (Maildir's rule:
            // a reader never sees half a message).
            let name = format!("{:05}.lab", delivered + i + 1);
            let (tmp, new) = (
                maildir.join("tmp").join(&name),
                maildir.join("new").join(&name),
            );
            std::fs::write(&tmp, m.as_ref())
                .with_context(|| format!("writing {}", tmp.display()))?;
            std::os::unix::fs::chown(&tmp, Some(uid), Some(gid))
                .with_context(|| format!("chown {}", tmp.display()))?;
            std::fs::rename(&tmp, &new).with_context(|| format!("delivering {}", new.display()))?;
        }
        Ok(())
    }

    /// The last lines of Dovecot's log (for error messages).
    pub fn log_tail(&self) -> String {
        log_tail(&self.dir)
    }
}

fn log_tail(dir: &Path) -> String {
    let log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    let tail = lines[lines.len().saturating_sub(5)..].join("\n");
    if tail.is_empty() {
        String::new()
    } else {
        format!("\nDovecot's log ends:\n{tail}")
    }
}

fn walk(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = vec![dir.to_path_buf()];
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            out.extend(walk(&p)?);
        } else {
            out.push(p);
        }
    }
    Ok(out)
}

fn config(dir: &Path, maildir: &Path, uid: u32, gid: u32) -> String {
    let d = dir.display();
    format!(
        "# roam lab: one IMAP user, plaintext login (the emulated links are private).
protocols = imap
listen = *
base_dir = {d}/run
state_dir = {d}/state
log_path = {d}/log
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
default_internal_user = dovecot
default_login_user = dovenull
first_valid_uid = 1
passdb {{
  driver = static
  args = user={user} password={pass}
}}
userdb {{
  driver = static
  args = uid={uid} gid={gid} home={d} mail=maildir:{m}
}}
service imap-login {{
  inet_listener imap {{
    port = {IMAP_PORT}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
",
        user = USER.0,
        pass = USER.1,
        m = maildir.display(),
    )
}

impl Drop for Dovecot {
    fn drop(&mut self) {
        super::terminate(&mut self.child);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_have_their_exact_size_and_the_paper_range() {
        let sizes = message_sizes(1);
        assert_eq!(sizes.len(), MESSAGES);
        assert!(sizes.iter().all(|&s| (MIN_SIZE..=MAX_SIZE).contains(&s)));
        assert_eq!(sizes, message_sizes(1));
        assert_ne!(sizes, message_sizes(2));
        for (i, &s) in sizes.iter().enumerate() {
            let m = message(i + 1, s);
            assert_eq!(m.len() as u64, s, "message {}", i + 1);
        }
    }
}
