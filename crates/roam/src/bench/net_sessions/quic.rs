//! The quic stack: quinn on a runtime of two workers, one server and one client endpoint for
//! every connection, a self-signed certificate, idle connections kept by keep-alives; each
//! active session sends on a unidirectional stream.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use bytes::Bytes;
use tokio::runtime::{Handle, Runtime};

use super::sessions::{two_workers, Connector, Counters, Sender, Transport};

/// The server's name in its self-signed certificate.
const QUIC_NAME: &str = "sessions.roam.bench";

/// A quinn server endpoint and the client endpoint connecting to it, on a runtime of their
/// own.
pub(super) struct Quic {
    rt: Runtime,
    addr: SocketAddr,
    /// The client endpoint (one UDP socket for every connection).
    endpoint: quinn::Endpoint,
    /// The server's endpoint, kept open.
    _server: quinn::Endpoint,
}

/// The transport both ends use: quinn's defaults, but idle connections kept (a 60 s idle
/// timeout and keep-alives every 10 s, where the default closes them after 30 s).
fn transport() -> Result<Arc<quinn::TransportConfig>> {
    let mut t = quinn::TransportConfig::default();
    t.max_idle_timeout(Some(quinn::IdleTimeout::try_from(Duration::from_secs(60))?));
    t.keep_alive_interval(Some(Duration::from_secs(10)));
    Ok(Arc::new(t))
}

/// Receive a stream to its end, counting.
async fn drain(mut r: quinn::RecvStream, got: Counters) {
    while let Ok(Some(c)) = r.read_chunk(usize::MAX, true).await {
        got.receive(c.bytes.len() as u64);
    }
}

impl Quic {
    /// Listen, reporting to `counters`.
    pub(super) fn new(counters: &Counters) -> Result<Quic> {
        use quinn::rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer};
        let rt = two_workers()?;
        let cert = rcgen::generate_simple_self_signed(vec![QUIC_NAME.into()])?;
        let der = CertificateDer::from(cert.cert);
        let key = PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der());
        let mut server = quinn::ServerConfig::with_single_cert(vec![der.clone()], key.into())?;
        server.transport_config(transport()?);
        let mut roots = quinn::rustls::RootCertStore::empty();
        roots.add(der)?;
        let mut client = quinn::ClientConfig::with_root_certificates(Arc::new(roots))?;
        client.transport_config(transport()?);
        let (server_ep, endpoint) = rt.block_on(async {
            let s = quinn::Endpoint::server(server, (Ipv4Addr::LOCALHOST, 0).into())?;
            let mut c = quinn::Endpoint::client((Ipv4Addr::LOCALHOST, 0).into())?;
            c.set_default_client_config(client);
            anyhow::Ok((s, c))
        })?;
        let addr = server_ep.local_addr()?;
        let (counters, ep) = (counters.clone(), server_ep.clone());
        rt.spawn(async move {
            while let Some(incoming) = ep.accept().await {
                let counters = counters.clone();
                tokio::spawn(async move {
                    let conn = match incoming.await {
                        Ok(c) => c,
                        Err(e) => {
                            counters.fail(e.to_string());
                            return;
                        }
                    };
                    counters.accept();
                    while let Ok(r) = conn.accept_uni().await {
                        tokio::spawn(drain(r, counters.clone()));
                    }
                });
            }
        });
        Ok(Quic {
            rt,
            addr,
            endpoint,
            _server: server_ep,
        })
    }
}

impl Transport for Quic {
    type Client = quinn::Connection;

    fn runtime(&self) -> Handle {
        self.rt.handle().clone()
    }

    fn connector(&self) -> Connector<quinn::Connection> {
        let (addr, rt, ep) = (self.addr, self.runtime(), self.endpoint.clone());
        Arc::new(move || {
            rt.block_on(async {
                let connecting = ep.connect(addr, QUIC_NAME).map_err(|e| e.to_string())?;
                match tokio::time::timeout(Duration::from_secs(10), connecting).await {
                    Ok(r) => r.map_err(|e| e.to_string()),
                    Err(_) => Err("no QUIC handshake within 10 s".to_string()),
                }
            })
        })
    }

    fn start(
        &self,
        clients: &mut Vec<quinn::Connection>,
        k: usize,
        chunk: &Bytes,
        stop: &Arc<AtomicBool>,
    ) -> Vec<Sender<quinn::Connection>> {
        let senders = clients[..k].iter().map(|c| {
            let (c, stop, chunk) = (c.clone(), stop.clone(), chunk.clone());
            self.rt.spawn(async move {
                let mut s = c.open_uni().await.map_err(|e| e.to_string())?;
                while !stop.load(Ordering::Relaxed) {
                    s.write_chunk(chunk.clone())
                        .await
                        .map_err(|e| e.to_string())?;
                }
                s.finish().map_err(|e| e.to_string())?;
                Ok(None)
            })
        });
        senders.collect()
    }
}
