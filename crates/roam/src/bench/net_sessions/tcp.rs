//! The tcp stack: tokio TCP connections (CUBIC) on a runtime of two workers, each accepted
//! one drained by a task that allocates its read buffer only once data comes.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use bytes::Bytes;
use tokio::net::TcpStream;
use tokio::runtime::{Handle, Runtime};

use super::super::net::CC;
use super::sessions::{two_workers, Connector, Counters, Sender, Transport};

/// A TCP listener on a runtime of its own.
pub(super) struct Tcp {
    rt: Runtime,
    addr: SocketAddr,
}

/// Receive until the end of the stream, counting; the read buffer is allocated once data
/// first comes, so an idle connection holds none.
async fn drain(s: TcpStream, got: Counters) {
    let mut buf = Vec::new();
    loop {
        if s.readable().await.is_err() {
            return;
        }
        if buf.is_empty() {
            buf = vec![0u8; 256 << 10];
        }
        match s.try_read(&mut buf) {
            Ok(0) => return,
            Ok(n) => got.receive(n as u64),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => return,
        }
    }
}

impl Tcp {
    /// Listen, reporting to `counters`.
    pub(super) fn new(counters: &Counters) -> Result<Tcp> {
        let rt = two_workers()?;
        let l = rt.block_on(tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))?;
        let addr = l.local_addr()?;
        let counters = counters.clone();
        rt.spawn(async move {
            loop {
                match l.accept().await {
                    Ok((s, _)) => {
                        let _ = socket2::SockRef::from(&s).set_tcp_congestion(CC.as_bytes());
                        tokio::spawn(drain(s, counters.clone()));
                        counters.accept();
                    }
                    Err(e) => {
                        counters.fail(e.to_string());
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        });
        Ok(Tcp { rt, addr })
    }
}

impl Transport for Tcp {
    type Client = TcpStream;

    fn runtime(&self) -> Handle {
        self.rt.handle().clone()
    }

    fn connector(&self) -> Connector<TcpStream> {
        let (addr, rt) = (self.addr, self.runtime());
        Arc::new(move || {
            let s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(10))
                .map_err(|e| format!("connecting: {e}"))?;
            socket2::SockRef::from(&s)
                .set_tcp_congestion(CC.as_bytes())
                .map_err(|e| e.to_string())?;
            s.set_nonblocking(true).map_err(|e| e.to_string())?;
            let _rt = rt.enter();
            TcpStream::from_std(s).map_err(|e| e.to_string())
        })
    }

    /// `write_all` needs the stream whole: each sender takes its client end and gives it
    /// back when done.
    fn start(
        &self,
        clients: &mut Vec<TcpStream>,
        k: usize,
        chunk: &Bytes,
        stop: &Arc<AtomicBool>,
    ) -> Vec<Sender<TcpStream>> {
        let senders = clients.drain(..k).map(|mut c| {
            let (stop, chunk) = (stop.clone(), chunk.clone());
            self.rt.spawn(async move {
                use tokio::io::AsyncWriteExt;
                while !stop.load(Ordering::Relaxed) {
                    c.write_all(&chunk).await.map_err(|e| e.to_string())?;
                }
                Ok(Some(c))
            })
        });
        senders.collect()
    }
}
