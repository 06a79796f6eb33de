//! How the engine reaches servers ([`Connector`]): TCP directly or through a SOCKS5 proxy
//! ([`Route`]), and TLS for `https://` with the system's certificate authorities and any added,
//! offering in ALPN the HTTP version the engine was asked for.

use std::path::Path;
use std::sync::Arc;

use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::proxy::SocksV5;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;

use crate::error::TransferError;

/// How the engine reaches servers: directly, or through a SOCKS5 proxy (`roam net proxy` on
/// the device carries each connection over a roam-net multi-socket, with the label its
/// destination port is given there, background-large for bulk data, so a transfer uses every
/// network the device has); and which certificate authorities an `https://` server's
/// certificate may chain to (the system's, `/etc/ssl/certs`, and any added).
#[derive(Clone, Debug)]
pub struct Connector {
    route: Route,
    roots: Arc<rustls::RootCertStore>,
}

/// The TCP part of a [`Connector`].
#[derive(Clone, Debug)]
pub enum Route {
    /// TCP to the server.
    Direct(HttpConnector),
    /// Through the SOCKS5 proxy at this address (names resolved by the proxy's side).
    Socks5(SocksV5<HttpConnector>),
}

impl Connector {
    /// A direct connector, or one through the SOCKS5 proxy `socks5`, trusting the system's
    /// certificate authorities.
    pub fn new(socks5: Option<std::net::SocketAddr>) -> Connector {
        let mut tcp = HttpConnector::new();
        tcp.set_nodelay(true);
        // `https://` URIs reach it too: the TLS layer above it connects through it.
        tcp.enforce_http(false);
        let route = match socks5 {
            None => Route::Direct(tcp),
            Some(a) => {
                let uri: hyper::Uri = format!("http://{a}").parse().expect("an address is a URI");
                Route::Socks5(SocksV5::new(uri, tcp))
            }
        };
        // The system's store, read once a process (about 150 files).
        static SYSTEM: std::sync::OnceLock<Arc<rustls::RootCertStore>> = std::sync::OnceLock::new();
        let roots = SYSTEM.get_or_init(|| {
            let mut roots = rustls::RootCertStore::empty();
            // A certificate the system's store holds but rustls cannot parse is skipped, as
            // a system without a store (an https:// server then fails on its certificate's
            // issuer).
            roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
            Arc::new(roots)
        });
        Connector {
            route,
            roots: roots.clone(),
        }
    }

    /// The same connector also trusting the certificate authorities in the PEM file `path`
    /// (a private server's own authority, a self-signed certificate).
    pub fn with_ca_file(mut self, path: &Path) -> Result<Connector, TransferError> {
        use rustls::pki_types::pem::PemObject;
        let bad = |why: String| TransferError::Io {
            path: path.into(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, why),
        };
        let certs = rustls::pki_types::CertificateDer::pem_file_iter(path)
            .map_err(|e| bad(format!("not a PEM file of certificates: {e}")))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(format!("a certificate that does not parse: {e}")))?;
        if certs.is_empty() {
            return Err(bad("no certificate in it".into()));
        }
        let roots = Arc::make_mut(&mut self.roots);
        for c in certs {
            roots
                .add(c)
                .map_err(|e| bad(format!("a certificate that cannot be trusted: {e}")))?;
        }
        Ok(self)
    }

    /// This connector with TLS for `https://` URIs, offering in ALPN `http/1.1` only, `h2`
    /// only (so that the version the engine was asked for is the one the server speaks), or
    /// both (`None`: the survey's question whether a server speaks HTTP/2).
    pub(super) fn tls(&self, http2: Option<bool>) -> HttpsConnector<Route> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring's provider supports the default TLS versions")
            .with_root_certificates(self.roots.clone())
            .with_no_client_auth();
        let b = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(config)
            .https_or_http();
        match http2 {
            Some(true) => b.enable_http2().wrap_connector(self.route.clone()),
            Some(false) => b.enable_http1().wrap_connector(self.route.clone()),
            None => b.enable_all_versions().wrap_connector(self.route.clone()),
        }
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl tower_service::Service<hyper::Uri> for Route {
    type Response = TokioIo<tokio::net::TcpStream>;
    type Error = BoxError;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, BoxError>> + Send>,
    >;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), BoxError>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, dst: hyper::Uri) -> Self::Future {
        match self {
            Route::Direct(c) => {
                let f = c.call(dst);
                Box::pin(async move { f.await.map_err(BoxError::from) })
            }
            Route::Socks5(c) => {
                // The SOCKS request needs the port, which a URI may leave implicit.
                let dst = if dst.port().is_none() {
                    let host = dst.host().unwrap_or_default();
                    let port = if dst.scheme_str() == Some("https") {
                        443
                    } else {
                        80
                    };
                    format!("http://{host}:{port}").parse().unwrap_or(dst)
                } else {
                    dst
                };
                let f = c.call(dst);
                Box::pin(async move {
                    f.await
                        .map_err(|e| BoxError::from(format!("through the SOCKS5 proxy: {e}")))
                })
            }
        }
    }
}
