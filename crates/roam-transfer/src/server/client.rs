//! A device's side of the HLA server: uploading its logs and fetching the update, over
//! `http://` or `https://` (the system's certificate authorities and any added), with the
//! device's token.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{Method, Request};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;

use crate::broker::Update;
use crate::error::{with_causes, TransferError};
use crate::hla::Record;

/// Largest update a device accepts.
pub const MAX_UPDATE: usize = 32 << 20;
/// Longest a request to the HLA server may take.
pub const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The HLA server at one base URL, as a device talks to it.
#[derive(Clone, Debug)]
pub struct HlaClient {
    base: String,
    token: Option<String>,
    client: Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
}

/// Whether `host` (as a URI gives it) is this machine.
fn loopback(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    h.eq_ignore_ascii_case("localhost")
        || h.parse::<std::net::IpAddr>().is_ok_and(|a| a.is_loopback())
}

impl HlaClient {
    /// The HLA server at `base` (`http://host:port` or `https://host:port`), trusting for
    /// `https://` the system's certificate authorities and those in the PEM file `ca`, sending
    /// `token` (the device's, for uploads) if given. A token is never sent over plain
    /// `http://` beyond this machine: refused, so that it cannot be read on the way.
    pub fn new(
        base: &str,
        ca: Option<&Path>,
        token: Option<String>,
    ) -> Result<HlaClient, TransferError> {
        let bad = |why: String| TransferError::Url {
            url: base.into(),
            why,
        };
        let uri: hyper::Uri = base.parse().map_err(|e| bad(format!("{e}")))?;
        let host = uri.host().unwrap_or_default();
        match uri.scheme_str() {
            Some("https") => {}
            Some("http") if token.is_none() || loopback(host) => {}
            Some("http") => {
                return Err(bad(
                    "the device's token is not sent over plain http:// beyond this machine: \
                     use https://"
                        .into(),
                ))
            }
            _ => return Err(bad("expected http://HOST:PORT or https://HOST:PORT".into())),
        }
        if let Some(t) = &token {
            hyper::header::HeaderValue::from_str(&format!("Bearer {t}"))
                .map_err(|_| bad("the token is not one header value".into()))?;
        }
        let mut roots = rustls::RootCertStore::empty();
        roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        if let Some(ca) = ca {
            use rustls::pki_types::pem::PemObject;
            let io = |why: String| TransferError::File {
                path: ca.into(),
                why,
            };
            let pem = std::fs::read(ca).map_err(|e| io(e.to_string()))?;
            let certs = rustls::pki_types::CertificateDer::pem_slice_iter(&pem)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| io(format!("a certificate that does not parse: {e}")))?;
            if certs.is_empty() {
                return Err(io("no certificate in it".into()));
            }
            for c in certs {
                roots
                    .add(c)
                    .map_err(|e| io(format!("a certificate that cannot be trusted: {e}")))?;
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring's provider supports the default TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(config)
            .https_or_http()
            .enable_http1()
            .build();
        let client = Client::builder(hyper_util::rt::TokioExecutor::new())
            .build::<_, Full<Bytes>>(connector);
        Ok(HlaClient {
            base: base.trim_end_matches('/').to_string(),
            token,
            client,
        })
    }

    /// Whether it has a token to send (uploads need one).
    pub fn has_token(&self) -> bool {
        self.token.is_some()
    }

    async fn request(
        &self,
        path: &str,
        method: Method,
        body: Vec<u8>,
    ) -> Result<Bytes, TransferError> {
        let url = format!("{}{path}", self.base);
        let mut req = Request::builder().method(method).uri(&url);
        if let Some(t) = &self.token {
            req = req.header(hyper::header::AUTHORIZATION, format!("Bearer {t}"));
        }
        let req = req
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| TransferError::Url {
                url: url.clone(),
                why: format!("{e}"),
            })?;
        let net = |why: String| TransferError::Network {
            url: url.clone(),
            why,
        };
        let exchange = async {
            let resp = self
                .client
                .request(req)
                .await
                .map_err(|e| net(with_causes(&e)))?;
            let status = resp.status();
            let body = Limited::new(resp.into_body(), MAX_UPDATE)
                .collect()
                .await
                .map_err(|e| net(format!("reading the answer: {e}")))?
                .to_bytes();
            Ok::<_, TransferError>((status, body))
        };
        let (status, body) = tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| net("no answer within a minute".into()))??;
        if !status.is_success() {
            return Err(net(format!(
                "HTTP {}: {}",
                status.as_u16(),
                String::from_utf8_lossy(&body[..body.len().min(500)]).trim()
            )));
        }
        Ok(body)
    }

    /// Upload `records`: how many the server accepted.
    pub async fn upload(&self, records: &[Record]) -> Result<usize, TransferError> {
        let mut body = Vec::new();
        for r in records {
            body.extend(serde_json::to_vec(r).expect("a record serialises"));
            body.push(b'\n');
        }
        let answer = self.request("/logs", Method::POST, body).await?;
        let text = String::from_utf8_lossy(&answer);
        text.trim()
            .strip_prefix("accepted ")
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| TransferError::Network {
                url: format!("{}/logs", self.base),
                why: format!("an answer that is not an HLA server's: `{}`", text.trim()),
            })
    }

    /// The server's update, checked ([`Update::sanitize`]): the update, and what of it was
    /// dropped and why (for a warning).
    pub async fn fetch_update(&self) -> Result<(Update, Vec<String>), TransferError> {
        let url = format!("{}/update", self.base);
        let body = self.request("/update", Method::GET, Vec::new()).await?;
        let mut u: Update = serde_json::from_slice(&body)
            .map_err(|e| TransferError::Model(format!("{url}: not an update: {e}")))?;
        let dropped = u.sanitize();
        Ok((u, dropped))
    }
}
