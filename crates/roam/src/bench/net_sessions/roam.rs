//! The roam stack: roam-net multi-sockets of the blocking API, accepted by one [`Listener`]
//! sized for N, each received by a task on roam-net's runtime and sent on from tasks there.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Result;
use bytes::Bytes;
use roam_net::proto::Label;
use roam_net::runtime::blocking::{Listener, MultiSocket};
use tokio::runtime::Handle;

use super::super::net::{lo, roam_options};
use super::sessions::{Connector, Counters, Sender, Transport};

/// roam-net's listener, accepting on a thread of its own.
pub(super) struct Roam {
    addr: SocketAddr,
}

impl Roam {
    /// Listen for `n` sessions, reporting to `counters`.
    pub(super) fn new(n: usize, counters: &Counters) -> Result<Roam> {
        let mut server = roam_options(lo());
        // A relay's operator sizes its listener for its clients: every session here comes
        // from 127.0.0.1, and the bench opens them `--open-concurrency` at a time.
        server.max_sessions = n + 64;
        server.max_connections_per_source = 2 * n + 64;
        server.max_pending_per_source = server.max_pending_handshakes;
        let l = Listener::bind((Ipv4Addr::LOCALHOST, 0).into(), server)?;
        let addr = l.local_addr();
        let counters = counters.clone();
        let rt = roam_net::runtime::blocking::runtime();
        std::thread::Builder::new()
            .name("bench-accept".into())
            .spawn(move || loop {
                match l.accept() {
                    Ok(ms) => {
                        let (ms, got) = (ms.as_async().clone(), counters.clone());
                        rt.spawn(async move {
                            while let Ok(Some(d)) = ms.recv().await {
                                got.receive(d.data.len() as u64);
                            }
                        });
                        counters.accept();
                    }
                    Err(e) => {
                        counters.fail(e.to_string());
                        return;
                    }
                }
            })?;
        Ok(Roam { addr })
    }
}

impl Transport for Roam {
    type Client = MultiSocket;

    fn runtime(&self) -> Handle {
        roam_net::runtime::blocking::runtime()
    }

    fn connector(&self) -> Connector<MultiSocket> {
        let addr = self.addr;
        Arc::new(move || MultiSocket::connect(addr, roam_options(lo())).map_err(|e| e.to_string()))
    }

    fn start(
        &self,
        clients: &mut Vec<MultiSocket>,
        k: usize,
        chunk: &Bytes,
        stop: &Arc<AtomicBool>,
    ) -> Vec<Sender<MultiSocket>> {
        let rt = self.runtime();
        let senders = clients[..k].iter().map(|c| {
            let (ms, stop, chunk) = (c.as_async().clone(), stop.clone(), chunk.clone());
            rt.spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    ms.send(Label::BackgroundLarge, chunk.clone(), None)
                        .await
                        .map_err(|e| e.to_string())?;
                }
                Ok(None)
            })
        });
        senders.collect()
    }
}
