//! Who may use a relay ([`Key`]): a proxy proves it knows the relay's key before the relay does
//! anything for it, and the relay proves it back.
//!
//! The key is 32 random bytes both ends read from a file only its owner can read (64 hex
//! digits; [`Key::write_new`] makes one, as `roam net key` and `roam parcel secret` do). The
//! proof is HMAC-SHA256, after the multi-socket's own joins ([`crate::proto::auth`]): the
//! relay's first IROB is a fresh 32-byte challenge; the proxy's request carries a nonce of its
//! own and an HMAC over both nonces and the request itself (target and label, which an on-path
//! attacker cannot change unnoticed); the relay's `ok` carries an HMAC over both nonces and the
//! target, under another role, so that a proxy with a key talks only to a relay that has it. The
//! key never crosses the network, and a recorded request is useless on another multi-socket
//! (the challenge differs). Without TLS, what follows the request is not protected from an
//! on-path attacker: use TLS (`Options::tls`) wherever the path is not trusted.

use std::fmt;
use std::io::Read;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use thiserror::Error;

use crate::proto::auth::proofs_equal;

/// Bytes of a key, of a nonce and of a proof.
pub(super) const LEN: usize = 32;

/// A relay's key: 32 bytes. Its `Debug` does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Key([u8; LEN]);

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(..)")
    }
}

/// Why a key (or another private file, such as a TLS private key) could not be read. Each
/// message starts with the file's name.
#[derive(Debug, Error)]
pub enum KeyError {
    /// The file could not be opened or read.
    #[error("{}: {cause}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The system's error.
        cause: std::io::Error,
    },
    /// Others than its owner may read or write the file (as OpenSSH, a key others can read is
    /// taken as no longer secret).
    #[error(
        "{}: permissions {mode:04o} are too open: a key must be readable by its owner only \
         (chmod 600 {})",
        path.display(),
        path.display()
    )]
    TooOpen {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The path is not a regular file.
    #[error("{}: not a regular file", path.display())]
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// The file's text is not 64 hex digits.
    #[error("{}: not a key (64 hex digits; `roam net key --out FILE` makes one)", path.display())]
    NotAKey {
        /// The file.
        path: PathBuf,
    },
}

/// The whole of a file only its owner may read or write (a key, a TLS private key): refused if
/// its group or others have any permission on it, as OpenSSH refuses such a private key. The
/// permissions are those of the file opened (no race with a rename).
pub fn read_private(path: &Path) -> Result<Vec<u8>, KeyError> {
    let io = |cause| KeyError::Io {
        path: path.into(),
        cause,
    };
    let mut f = std::fs::File::open(path).map_err(io)?;
    let meta = f.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(KeyError::NotAFile { path: path.into() });
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(KeyError::TooOpen {
            path: path.into(),
            mode,
        });
    }
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).map_err(io)?;
    Ok(bytes)
}

impl Key {
    /// A key from its bytes.
    pub fn from_bytes(bytes: [u8; LEN]) -> Key {
        Key(bytes)
    }

    /// A fresh random key.
    pub fn generate() -> Key {
        Key(random())
    }

    /// The key in a file of 64 hex digits (surrounding white space ignored) that only its owner
    /// may read ([`read_private`]).
    pub fn from_file(path: &Path) -> Result<Key, KeyError> {
        let bytes = read_private(path)?;
        let not = || KeyError::NotAKey { path: path.into() };
        let text = std::str::from_utf8(&bytes).map_err(|_| not())?;
        unhex(text.trim()).ok_or_else(not).map(Key)
    }

    /// Write a fresh key to `path` (mode 0600; refused if the file exists) and return it.
    pub fn write_new(path: &Path) -> Result<Key, KeyError> {
        use std::io::Write;
        let io = |cause| KeyError::Io {
            path: path.into(),
            cause,
        };
        let key = Key::generate();
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(io)?;
        f.write_all(format!("{}\n", hex(&key.0)).as_bytes())
            .map_err(io)?;
        Ok(key)
    }

    fn mac(&self, role: &str, parts: &[&[u8]]) -> [u8; LEN] {
        let mut m =
            <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0).expect("HMAC takes any key length");
        m.update(role.as_bytes());
        for p in parts {
            // Each part's length first: no two different lists of parts hash alike.
            m.update(&(p.len() as u64).to_be_bytes());
            m.update(p);
        }
        m.finalize().into_bytes().into()
    }

    /// The proxy's proof for the request `target label` answering `challenge` with `nonce`.
    pub(super) fn request_proof(
        &self,
        challenge: &[u8; LEN],
        nonce: &[u8; LEN],
        target: &str,
        label: &str,
    ) -> [u8; LEN] {
        self.mac(
            "roam-relay 2 request",
            &[challenge, nonce, target.as_bytes(), label.as_bytes()],
        )
    }

    /// The relay's proof in its `ok` to that request.
    pub(super) fn answer_proof(
        &self,
        challenge: &[u8; LEN],
        nonce: &[u8; LEN],
        target: &str,
    ) -> [u8; LEN] {
        self.mac(
            "roam-relay 2 answer",
            &[challenge, nonce, target.as_bytes()],
        )
    }
}

/// Whether `text` is the hex of `proof` (in constant time once the length is right).
pub(super) fn proof_matches(text: &str, proof: &[u8; LEN]) -> bool {
    unhex(text).is_some_and(|p| proofs_equal(&p, proof))
}

/// 32 bytes from the system's random source.
pub(super) fn random() -> [u8; LEN] {
    let mut b = [0u8; LEN];
    getrandom::getrandom(&mut b).expect("the OS random source works");
    b
}

/// Lower-case hex.
pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// 32 bytes from exactly 64 hex digits.
pub(super) fn unhex(text: &str) -> Option<[u8; LEN]> {
    if text.len() != 2 * LEN || !text.is_ascii() {
        return None;
    }
    let mut out = [0u8; LEN];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "roam-proxy-key-{}-{}",
            std::process::id(),
            hex(&random()[..4])
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_key_file_others_can_read_is_refused() {
        let d = dir();
        let f = d.join("key");
        let key = Key::write_new(&f).unwrap();
        assert_eq!(Key::from_file(&f).unwrap(), key);
        assert!(
            Key::write_new(&f).is_err(),
            "an existing file is not overwritten"
        );
        for mode in [0o640, 0o604, 0o644, 0o660, 0o602] {
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
            let e = Key::from_file(&f).unwrap_err();
            assert!(matches!(e, KeyError::TooOpen { .. }), "{mode:o}: {e}");
            assert!(e.to_string().contains("too open"), "{e}");
        }
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o400)).unwrap();
        assert_eq!(Key::from_file(&f).unwrap(), key);
        let bad = d.join("bad");
        std::fs::write(&bad, "not hex\n").unwrap();
        std::fs::set_permissions(&bad, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(matches!(
            Key::from_file(&bad),
            Err(KeyError::NotAKey { .. })
        ));
        assert!(matches!(
            read_private(&d),
            Err(KeyError::NotAFile { .. }) | Err(KeyError::TooOpen { .. })
        ));
        assert_eq!(format!("{key:?}"), "Key(..)");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn proofs_bind_the_key_both_nonces_and_the_request() {
        let (k, other) = (Key::from_bytes([1; 32]), Key::from_bytes([2; 32]));
        let p = k.request_proof(&[3; 32], &[4; 32], "10.0.0.1:80", "foreground-small");
        assert!(proof_matches(&hex(&p), &p));
        for q in [
            other.request_proof(&[3; 32], &[4; 32], "10.0.0.1:80", "foreground-small"),
            k.request_proof(&[5; 32], &[4; 32], "10.0.0.1:80", "foreground-small"),
            k.request_proof(&[3; 32], &[5; 32], "10.0.0.1:80", "foreground-small"),
            k.request_proof(&[3; 32], &[4; 32], "10.0.0.1:81", "foreground-small"),
            k.request_proof(&[3; 32], &[4; 32], "10.0.0.1:80", "background-large"),
            k.answer_proof(&[3; 32], &[4; 32], "10.0.0.1:80"),
        ] {
            assert!(!proof_matches(&hex(&q), &p));
        }
        assert!(!proof_matches("-", &p));
        assert!(!proof_matches(&hex(&p)[..62], &p));
    }
}
