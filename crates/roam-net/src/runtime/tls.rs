//! Optional TLS (rustls) on every connection of a multi-socket.
//!
//! Intentional Networking runs over ordinary TCP connections; with [`Tls`] set in the
//! options, each of them (the first and every join) is a TLS 1.2/1.3 session instead. The
//! protocol above is unchanged: the Hello/Join exchange, and with it the per-multi-socket
//! join secret, travels inside TLS, so an on-path observer can neither read the data nor
//! learn the secret that authenticates joins (without TLS it travels in clear on the first
//! connection, as MPTCP's keys do).
//!
//! Anticipatory scheduling still reads SIOCOUTQ on the TCP socket under TLS; it then counts
//! ciphertext, a few dozen bytes per 16 KiB record more than the plaintext, which the cap
//! tolerates.

use std::fmt;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// The read half of one connection, plain or TLS.
pub(crate) type ConnRead = Box<dyn AsyncRead + Send + Unpin>;
/// The write half of one connection, plain or TLS.
pub(crate) type ConnWrite = Box<dyn AsyncWrite + Send + Unpin>;

/// TLS configuration of a multi-socket: the client's (verifying the server) or the listener's
/// (presenting a certificate).
#[derive(Clone)]
pub enum Tls {
    /// Client side: every connection verifies the server with `config` under `server_name`.
    Client {
        /// rustls client configuration (roots, protocol versions, client certificate).
        config: Arc<rustls::ClientConfig>,
        /// The name the server's certificate must carry (also sent as SNI).
        server_name: ServerName<'static>,
    },
    /// Listener side: every accepted connection presents this configuration's certificate.
    Server(Arc<rustls::ServerConfig>),
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tls::Client { server_name, .. } => write!(f, "Tls::Client({server_name:?})"),
            Tls::Server(_) => write!(f, "Tls::Server"),
        }
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn bad(what: &str, e: impl fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("{what}: {e}"))
}

fn certs(what: &str, pem: &[u8]) -> io::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(what, e))?;
    if certs.is_empty() {
        return Err(bad(what, "no PEM certificate found"));
    }
    Ok(certs)
}

impl Tls {
    /// A client that trusts the certificates in `roots_pem` (PEM, one or more CA or
    /// self-signed certificates) and expects the server to be `server_name` (a DNS name or an
    /// IP address).
    pub fn client(roots_pem: &[u8], server_name: &str) -> io::Result<Tls> {
        let mut roots = rustls::RootCertStore::empty();
        for c in certs("TLS roots", roots_pem)? {
            roots.add(c).map_err(|e| bad("TLS root certificate", e))?;
        }
        let config = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| bad("TLS client configuration", e))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let server_name = ServerName::try_from(server_name.to_string())
            .map_err(|e| bad(&format!("TLS server name {server_name:?}"), e))?;
        Ok(Tls::Client {
            config: Arc::new(config),
            server_name,
        })
    }

    /// A listener presenting the certificate chain `chain_pem` with private key `key_pem`
    /// (PEM; PKCS#8, PKCS#1 or SEC1).
    pub fn server(chain_pem: &[u8], key_pem: &[u8]) -> io::Result<Tls> {
        let chain = certs("TLS certificate chain", chain_pem)?;
        let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| bad("TLS private key", e))?;
        let config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| bad("TLS server configuration", e))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| bad("TLS certificate and key", e))?;
        Ok(Tls::Server(Arc::new(config)))
    }
}

/// Split a plain connection without a lock between the halves.
fn plain(stream: TcpStream) -> (ConnRead, ConnWrite) {
    let (rd, wr) = stream.into_split();
    (Box::new(rd), Box::new(wr))
}

fn split<S: AsyncRead + AsyncWrite + Send + Unpin + 'static>(s: S) -> (ConnRead, ConnWrite) {
    let (rd, wr) = tokio::io::split(s);
    (Box::new(rd), Box::new(wr))
}

/// The client side of a new connection: a TLS handshake when configured.
pub(crate) async fn client(
    stream: TcpStream,
    tls: Option<&Tls>,
) -> io::Result<(ConnRead, ConnWrite)> {
    match tls {
        None => Ok(plain(stream)),
        Some(Tls::Client {
            config,
            server_name,
        }) => {
            let s = tokio_rustls::TlsConnector::from(config.clone())
                .connect(server_name.clone(), stream)
                .await?;
            Ok(split(s))
        }
        Some(Tls::Server(_)) => Err(bad(
            "TLS",
            "a client multi-socket was given a server configuration",
        )),
    }
}

/// An accepted connection, plain or after its TLS handshake, before it is split.
pub(crate) enum Accepted {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP.
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

impl Accepted {
    /// The listener side of a new connection: a TLS handshake when configured.
    pub(crate) async fn accept(stream: TcpStream, tls: Option<&Tls>) -> io::Result<Accepted> {
        match tls {
            None => Ok(Accepted::Plain(stream)),
            Some(Tls::Server(config)) => {
                let s = tokio_rustls::TlsAcceptor::from(config.clone())
                    .accept(stream)
                    .await?;
                Ok(Accepted::Tls(Box::new(s)))
            }
            Some(Tls::Client { .. }) => {
                Err(bad("TLS", "a listener was given a client configuration"))
            }
        }
    }

    /// The TCP socket underneath (for socket options and SIOCOUTQ).
    pub(crate) fn tcp(&self) -> &TcpStream {
        match self {
            Accepted::Plain(s) => s,
            Accepted::Tls(s) => s.get_ref().0,
        }
    }

    /// Read and write halves.
    pub(crate) fn split(self) -> (ConnRead, ConnWrite) {
        match self {
            Accepted::Plain(s) => plain(s),
            Accepted::Tls(s) => split(*s),
        }
    }
}

impl AsyncRead for Accepted {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Accepted::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Accepted::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Accepted {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Accepted::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Accepted::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Accepted::Plain(s) => Pin::new(s).poll_flush(cx),
            Accepted::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Accepted::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Accepted::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
