//! Who may upload to the HLA server: device tokens kept in a file, compared in constant time,
//! and each device's hourly quota.
//!
//! # The token file (`roam hla serve --tokens FILE`)
//!
//! One device a line, `sha256:DIGEST NAME` or `TOKEN NAME`: the SHA-256 of the device's token
//! in hex (what `roam hla token NAME` writes: the file then holds no token a reader could
//! use, as OpenSSH's `known_hosts` can hash its names), or the token itself (16 to 512
//! characters of `A-Z a-z 0-9` and `- . _ ~ + / =`, e.g. `openssl rand -hex 32`), a space,
//! and the device's name (the rest of the line, at most [`MAX_NAME`] characters). Blank lines and lines whose
//! first character is `#` are skipped. A token listed twice is refused. Lines with the same
//! name are one device: they share its quota and its share of the logs (a token rotated
//! without the device losing its logs).
//!
//! The file is looked at on every upload, and read again when it has changed (its size,
//! modification or change time, or inode): removing a line revokes that token for the next
//! upload, with no restart or signal. A file that can no longer be read, or that no longer
//! parses, refuses every upload (503, the reason printed once) until it is fixed: a mistyped
//! edit must not leave a revoked token working.
//!
//! Devices send `Authorization: Bearer TOKEN`. The token sent is hashed, and its digest
//! compared with every listed one, every byte of each, whatever matches ([`Tokens::who`]): how
//! long it takes does not tell an attacker how much of a guess was right.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::TransferError;

/// Longest device name.
pub const MAX_NAME: usize = 100;
/// Shortest token.
pub const MIN_TOKEN: usize = 16;
/// Longest token.
pub const MAX_TOKEN: usize = 512;
/// How a hashed token's line starts.
pub const HASHED: &str = "sha256:";

/// A token's SHA-256.
pub type Digest = [u8; 32];

/// The SHA-256 of `token`.
pub fn digest(token: &[u8]) -> Digest {
    let d = ring::digest::digest(&ring::digest::SHA256, token);
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// What identifies one version of the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(m: &std::fs::Metadata) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        Stamp {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }
}

/// The devices allowed to upload, as the token file lists them.
#[derive(Debug)]
pub struct Tokens {
    path: PathBuf,
    stamp: Option<Stamp>,
    /// (the token's SHA-256, device name).
    entries: Vec<(Digest, String)>,
    /// Why the file as it is now cannot be used (every upload refused until it can).
    broken: Option<String>,
}

/// Why an upload's token was not taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Denied {
    /// No token, or one the file does not list.
    Unknown,
    /// The token file cannot be used now: the reason.
    Broken(String),
}

impl Tokens {
    /// The token file at `path`, read now: refused (naming the line) if it cannot be read or
    /// does not parse. With a warning if others than its owner may read it.
    pub fn open(path: &Path) -> Result<(Tokens, Vec<String>), TransferError> {
        let mut t = Tokens {
            path: path.to_path_buf(),
            stamp: None,
            entries: Vec::new(),
            broken: None,
        };
        t.reload().map_err(|why| TransferError::File {
            path: path.into(),
            why,
        })?;
        let mut warnings = Vec::new();
        if let Ok(m) = std::fs::metadata(path) {
            use std::os::unix::fs::PermissionsExt;
            if m.permissions().mode() & 0o077 != 0 {
                warnings.push(format!(
                    "{}: readable by others than its owner (chmod 600 it): it holds every \
                     device's token",
                    path.display()
                ));
            }
        }
        Ok((t, warnings))
    }

    /// Devices listed (distinct names).
    pub fn devices(&self) -> usize {
        let mut names: Vec<&str> = self.entries.iter().map(|e| e.1.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        names.len()
    }

    /// The file read again if it changed since it was last read. What to tell the operator, if
    /// anything: the file's new state, or why it can no longer be used.
    pub fn refresh(&mut self) -> Option<String> {
        let stamp = std::fs::metadata(&self.path).map(|m| Stamp::of(&m));
        match stamp {
            Ok(s) if Some(s) == self.stamp => None,
            _ => match self.reload() {
                Ok(()) => Some(format!(
                    "{}: read again: {} device(s), {} token(s)",
                    self.path.display(),
                    self.devices(),
                    self.entries.len()
                )),
                Err(e) => Some(format!(
                    "{}: {e}: every upload refused until it is fixed",
                    self.path.display()
                )),
            },
        }
    }

    /// Read the file: on failure (why returned) every upload is refused (`broken`) until a read
    /// succeeds.
    fn reload(&mut self) -> Result<(), String> {
        let read = std::fs::metadata(&self.path)
            .and_then(|m| Ok((Stamp::of(&m), std::fs::read(&self.path)?)));
        let result = match read {
            Err(e) => Err(e.to_string()),
            Ok((stamp, bytes)) => {
                self.stamp = Some(stamp);
                parse(&bytes)
            }
        };
        match result {
            Ok(entries) => {
                self.entries = entries;
                self.broken = None;
                Ok(())
            }
            Err(e) => {
                self.entries.clear();
                self.broken = Some(e.clone());
                Err(e)
            }
        }
    }

    /// The device whose token `presented` is: every listed token compared with it in full,
    /// in time that depends on the tokens' lengths only.
    pub fn who(&self, presented: Option<&[u8]>) -> Result<&str, Denied> {
        if let Some(why) = &self.broken {
            return Err(Denied::Broken(why.clone()));
        }
        let presented = digest(presented.unwrap_or_default());
        let mut found = None;
        for (listed, name) in &self.entries {
            if constant_time_eq(&presented, listed) {
                found = Some(name.as_str());
            }
        }
        found.ok_or(Denied::Unknown)
    }
}

/// Whether `a` and `b` are equal, looking at every byte of the longer whatever differs.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = (a.len() ^ b.len()) as u64;
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= u64::from(x ^ y);
    }
    std::hint::black_box(diff) == 0
}

fn token_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"-._~+/=".contains(&c)
}

/// The 32 bytes of a digest written as 64 hex digits.
fn unhex_digest(hex: &str) -> Option<Digest> {
    let mut d = [0u8; 32];
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    for (i, b) in d.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(d)
}

/// The token file's lines: (the token's SHA-256, name) each; the first bad line named.
pub fn parse(bytes: &[u8]) -> Result<Vec<(Digest, String)>, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))?;
    let mut out: Vec<(Digest, String)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let n = i + 1;
        let (token, name) = match line.split_once(char::is_whitespace) {
            Some((t, rest)) => (t, rest.trim()),
            None => (line, ""),
        };
        if name.is_empty() {
            return Err(format!(
                "line {n}: a token without a device name (expected `TOKEN NAME`)"
            ));
        }
        let listed = match token.strip_prefix(HASHED) {
            Some(hex) => unhex_digest(hex).ok_or_else(|| {
                format!("line {n}: `{HASHED}` must be followed by 64 hex digits (a SHA-256)")
            })?,
            None if (MIN_TOKEN..=MAX_TOKEN).contains(&token.len())
                && token.bytes().all(token_char) =>
            {
                digest(token.as_bytes())
            }
            None => {
                return Err(format!(
                    "line {n}: a token must be {MIN_TOKEN} to {MAX_TOKEN} characters of A-Z a-z \
                     0-9 - . _ ~ + / = (e.g. `openssl rand -hex 32`), or `{HASHED}` and its \
                     SHA-256 in hex"
                ))
            }
        };
        if name.chars().count() > MAX_NAME {
            return Err(format!(
                "line {n}: a device name of more than {MAX_NAME} characters"
            ));
        }
        if out.iter().any(|(t, _)| *t == listed) {
            return Err(format!("line {n}: a token listed twice"));
        }
        out.push((listed, name.to_string()));
    }
    Ok(out)
}

/// The token of an `Authorization: Bearer TOKEN` header, if it has one.
pub fn bearer(headers: &hyper::HeaderMap) -> Option<Vec<u8>> {
    let v = headers.get(hyper::header::AUTHORIZATION)?.as_bytes();
    let (scheme, rest) = v.split_at(v.iter().position(|&c| c == b' ')?);
    scheme
        .eq_ignore_ascii_case(b"bearer")
        .then(|| rest.trim_ascii().to_vec())
}

/// A device's allowance of something per hour: a bucket of `per_hour` that fills back
/// continuously (a device idle for an hour may send a whole hour's worth at once).
#[derive(Clone, Debug)]
pub struct Quota {
    per_hour: f64,
    left: f64,
    at: Instant,
}

impl Quota {
    /// A full bucket.
    pub fn new(per_hour: u64, now: Instant) -> Quota {
        Quota {
            per_hour: per_hour as f64,
            left: per_hour as f64,
            at: now,
        }
    }

    fn fill(&mut self, now: Instant) {
        let hours = now.saturating_duration_since(self.at).as_secs_f64() / 3600.0;
        self.left = (self.left + hours * self.per_hour).min(self.per_hour);
        self.at = now;
    }

    /// How long until `n` can be taken (zero: now).
    pub fn wait(&mut self, n: u64, now: Instant) -> Duration {
        self.fill(now);
        let short = n as f64 - self.left;
        if short <= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((short / self.per_hour * 3600.0).min(1e9))
        }
    }

    /// Take `n` (after [`Quota::wait`] said it may be).
    pub fn take(&mut self, n: u64) {
        self.left -= n as f64;
    }

    /// The whole hour's allowance.
    pub fn per_hour(&self) -> u64 {
        self.per_hour as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_names_its_bad_line() {
        let ok =
            parse(b"# devices\n0123456789abcdef phone of Ann\n\nfedcba9876543210 Bob\n").unwrap();
        assert_eq!(ok.len(), 2);
        assert_eq!(ok[0].1, "phone of Ann");
        let e = |t: &str| parse(t.as_bytes()).unwrap_err();
        assert!(e("0123456789abcdef\n").contains("line 1: a token without"));
        assert!(e("short name\n").contains("16 to 512"));
        assert!(
            e("0123456789abcdef a\n0123456789abcdef b\n").contains("line 2: a token listed twice")
        );
        assert!(e("0123456789abcde\u{e9} a\n").contains("line 1"));
        assert!(e("sha256:00ff a\n").contains("64 hex digits"));
    }

    /// A hashed line admits its token and no other; the token and its hash count as one.
    #[test]
    fn hashed_lines_hold_no_usable_token() {
        let token = "0123456789abcdef0123";
        let hex: String = digest(token.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let line = format!("{HASHED}{hex} phone\n");
        assert!(!line.contains(token));
        let entries = parse(line.as_bytes()).unwrap();
        let t = Tokens {
            path: PathBuf::new(),
            stamp: None,
            entries,
            broken: None,
        };
        assert_eq!(t.who(Some(token.as_bytes())), Ok("phone"));
        assert_eq!(t.who(Some(hex.as_bytes())), Err(Denied::Unknown));
        assert_eq!(t.who(Some(b"0123456789abcdef0124")), Err(Denied::Unknown));
        let both = format!("{line}{token} again\n");
        assert!(parse(both.as_bytes())
            .unwrap_err()
            .contains("line 2: a token listed twice"));
    }

    #[test]
    fn tokens_compare_in_full() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
        let mut h = hyper::HeaderMap::new();
        assert_eq!(bearer(&h), None);
        h.insert("authorization", "Bearer  xyz ".parse().unwrap());
        assert_eq!(bearer(&h).as_deref(), Some(&b"xyz"[..]));
        h.insert("authorization", "Basic xyz".parse().unwrap());
        assert_eq!(bearer(&h), None);
    }

    #[test]
    fn a_quota_fills_back_over_the_hour() {
        let t0 = Instant::now();
        let mut q = Quota::new(3600, t0);
        assert_eq!(q.wait(3600, t0), Duration::ZERO);
        q.take(3600);
        let w = q.wait(10, t0);
        assert!((w.as_secs_f64() - 10.0).abs() < 0.01, "{w:?}");
        assert_eq!(q.wait(10, t0 + Duration::from_secs(10)), Duration::ZERO);
    }
}
