//! The QUIC baseline of `roam lab afc`: quinn (the stack in roam's lockfile) with the
//! scenario's buffer as both its connection and its stream receive window, as a careful user
//! sizes them; its congestion control is its default, CUBIC, as the kernel's is here. The
//! server streams on one unidirectional stream; the client reads it at the scenario's rate
//! (`reader`).
//!
//! "Unread" for QUIC is approximate: the bytes of UDP datagrams received less what the
//! application read, counted from the last time a read found nothing waiting (then nothing
//! in order was unread). Counted from the start instead, as before 2026-11-29, the datagrams'
//! headers piled up: 2.4-7.6 MB "unread" over a 600 s trial, against a 128-704 kB window
//! (docs/results/afc-full-80637c3). Headers since the last drain, and data held out of order
//! at a drain, still make it approximate.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use quinn::rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer};
use quinn::{ClientConfig, Endpoint, ServerConfig, TransportConfig, VarInt};
use roam_emu::SERVER_ADDR;

use super::bulk::{Flow, CONNECT_WAIT};
use super::paper::Table4;
use super::reader::{read, Read};
use crate::harness::trial::Trial;

/// The server's name in its self-signed certificate.
const NAME: &str = "afc.roam.lab";

/// Bytes per write of the server.
const BLOCK: usize = 64 << 10;

/// One trial over quinn: the reader's measurements, and the `DATA_BLOCKED` and
/// `STREAM_DATA_BLOCKED` frames the server sent while flow control held it back (frames, not
/// waits: `bulk::Stalls`).
pub(super) fn run(t: &Trial, table: &'static Table4, flow: Flow) -> Result<(Read, u64)> {
    let cert = rcgen::generate_simple_self_signed(vec![NAME.into()])?;
    let der = CertificateDer::from(cert.cert);
    let key = PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der());
    let addr = SocketAddr::V4(SocketAddrV4::new(SERVER_ADDR, flow.port));
    let over = Arc::new(AtomicBool::new(false));
    let stop = over.clone();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<std::result::Result<(), String>>();
    let server_der = der.clone();
    let server = t.emu.spawn_in_server(move || -> Result<u64> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        rt.block_on(async move {
            let config = ServerConfig::with_single_cert(vec![server_der], key.into())?;
            let endpoint = match Endpoint::server(config, addr) {
                Ok(e) => {
                    ready_tx.send(Ok(())).ok();
                    e
                }
                Err(e) => {
                    ready_tx.send(Err(e.to_string())).ok();
                    return Err(e.into());
                }
            };
            let incoming = tokio::time::timeout(CONNECT_WAIT, endpoint.accept())
                .await
                .map_err(|_| anyhow!("no client within {} s", CONNECT_WAIT.as_secs()))?
                .ok_or_else(|| anyhow!("the endpoint closed"))?;
            let conn = incoming.await?;
            let mut send = conn.open_uni().await?;
            let block = vec![0x5au8; BLOCK];
            while !stop.load(Ordering::SeqCst) {
                let w = tokio::time::timeout(Duration::from_millis(200), send.write_all(&block));
                match w.await {
                    Ok(Ok(())) | Err(_) => {}
                    Ok(Err(_)) => break, // the client went away
                }
            }
            let frames = conn.stats().frame_tx;
            conn.close(0u32.into(), b"over");
            let _ = tokio::time::timeout(Duration::from_secs(2), endpoint.wait_idle()).await;
            Ok(frames.data_blocked + frames.stream_data_blocked)
        })
    });
    super::bulk::started(&ready_rx, "the QUIC server")?;
    let (buffer, duration) = (flow.buffer, flow.duration);
    let read = t
        .emu
        .spawn_in_client(move || -> Result<Read> {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()?;
            let mut roots = quinn::rustls::RootCertStore::empty();
            roots.add(der)?;
            let mut config = ClientConfig::with_root_certificates(Arc::new(roots))?;
            let mut transport = TransportConfig::default();
            let window = VarInt::from_u64(buffer).context("the buffer as a QUIC window")?;
            transport.receive_window(window);
            transport.stream_receive_window(window);
            config.transport_config(Arc::new(transport));
            let (conn, mut recv) = rt.block_on(async {
                let bind = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
                let mut endpoint = Endpoint::client(bind)?;
                endpoint.set_default_client_config(config);
                let conn = tokio::time::timeout(CONNECT_WAIT, endpoint.connect(addr, NAME)?)
                    .await
                    .map_err(|_| {
                        anyhow!("no QUIC handshake within {} s", CONNECT_WAIT.as_secs())
                    })??;
                let recv = conn.accept_uni().await?;
                anyhow::Ok((conn, recv))
            })?;
            let mut buf = vec![0u8; 256 << 10];
            let read_total = std::cell::Cell::new(0u64);
            // UDP bytes received that were not unread stream data, as of the last drain.
            let overhead = std::cell::Cell::new(0u64);
            read(
                flow.reading,
                table,
                flow.slot,
                duration,
                |want| {
                    let got = rt.block_on(async {
                        let mut got = 0u64;
                        while got < want {
                            let n = (want - got).min(buf.len() as u64) as usize;
                            let r = tokio::time::timeout(
                                Duration::from_millis(1),
                                recv.read(&mut buf[..n]),
                            );
                            match r.await {
                                Ok(Ok(Some(n))) => got += n as u64,
                                Ok(Ok(None)) => bail!("the server ended the stream"),
                                Ok(Err(e)) => return Err(e.into()),
                                Err(_) => break, // nothing more now
                            }
                        }
                        Ok(got)
                    })?;
                    read_total.set(read_total.get() + got);
                    if got < want {
                        // Drained: whatever was received and not read is not stream data.
                        overhead.set(conn.stats().udp_rx.bytes.saturating_sub(read_total.get()));
                    }
                    Ok(got)
                },
                || {
                    conn.stats()
                        .udp_rx
                        .bytes
                        .saturating_sub(read_total.get() + overhead.get())
                },
            )
        })
        .join()
        .map_err(|_| anyhow!("the QUIC reader panicked"))?
        .context("entering the client namespace");
    over.store(true, Ordering::SeqCst);
    let blocked = server
        .join()
        .map_err(|_| anyhow!("the QUIC server panicked"))?
        .context("entering the server namespace")??;
    Ok((read??, blocked))
}
