//! Authentication of joins (after MPTCP's MP_JOIN, RFC 8684 §3.2).
//!
//! On the first connection each side sends a random 32-byte key in clear (as MP_CAPABLE does);
//! the multi-socket's secret is the two keys together. A later TCP connection that wants to join
//! the multi-socket names its session id and a fresh nonce; the acceptor answers with its own
//! nonce and an HMAC proving it knows the secret; the initiator answers with an HMAC over both
//! nonces. A recorded proof is useless later because the acceptor's nonce is fresh each time.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use super::wire::{KEY_LEN, MAC_LEN, NONCE_LEN};

/// The per-multi-socket secret.
#[derive(Clone)]
pub struct Secret {
    key: [u8; 2 * KEY_LEN],
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// The secret of a multi-socket whose client sent `client` and server sent `server`.
    pub fn new(client: &[u8; KEY_LEN], server: &[u8; KEY_LEN]) -> Secret {
        let mut key = [0u8; 2 * KEY_LEN];
        key[..KEY_LEN].copy_from_slice(client);
        key[KEY_LEN..].copy_from_slice(server);
        Secret { key }
    }

    fn mac(
        &self,
        role: &[u8],
        session: u64,
        n1: &[u8; NONCE_LEN],
        n2: &[u8; NONCE_LEN],
    ) -> [u8; MAC_LEN] {
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.key)
            .expect("HMAC takes any key length");
        m.update(role);
        m.update(&session.to_be_bytes());
        m.update(n1);
        m.update(n2);
        m.finalize().into_bytes().into()
    }

    /// The acceptor's proof over (initiator nonce, acceptor nonce).
    pub fn acceptor_proof(
        &self,
        session: u64,
        initiator: &[u8; NONCE_LEN],
        acceptor: &[u8; NONCE_LEN],
    ) -> [u8; MAC_LEN] {
        self.mac(b"roam-join-acceptor", session, initiator, acceptor)
    }

    /// The initiator's proof over (acceptor nonce, initiator nonce).
    pub fn initiator_proof(
        &self,
        session: u64,
        initiator: &[u8; NONCE_LEN],
        acceptor: &[u8; NONCE_LEN],
    ) -> [u8; MAC_LEN] {
        self.mac(b"roam-join-initiator", session, acceptor, initiator)
    }
}

/// Constant-time comparison of two proofs.
pub fn proofs_equal(a: &[u8; MAC_LEN], b: &[u8; MAC_LEN]) -> bool {
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_depend_on_key_role_and_both_nonces() {
        let s = Secret::new(&[1; 32], &[2; 32]);
        let other = Secret::new(&[1; 32], &[3; 32]);
        let a = s.acceptor_proof(7, &[4; 16], &[5; 16]);
        assert!(proofs_equal(&a, &s.acceptor_proof(7, &[4; 16], &[5; 16])));
        assert!(!proofs_equal(
            &a,
            &other.acceptor_proof(7, &[4; 16], &[5; 16])
        ));
        assert!(!proofs_equal(&a, &s.initiator_proof(7, &[4; 16], &[5; 16])));
        assert!(!proofs_equal(&a, &s.acceptor_proof(7, &[4; 16], &[6; 16])));
        assert!(!proofs_equal(&a, &s.acceptor_proof(8, &[4; 16], &[5; 16])));
    }
}
