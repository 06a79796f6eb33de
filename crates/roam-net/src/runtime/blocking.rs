//! The blocking API: the same multi-sockets for threaded programs (and the C ABI).
//!
//! Calls run on a tokio runtime owned by the library, one per network namespace (sockets are
//! created by the runtime's threads, which inherit the namespace of the thread that built it).
//! Do not call these from inside an async context; use [`super::MultiSocket`] there.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use tokio::runtime::{Handle, Runtime};

use super::{Error, NetworkView, Options, Thunk};
use crate::proto::{Delivery, Deps, IrobId, Label};

/// The library's runtime for the calling thread's network namespace.
pub fn runtime() -> Handle {
    static RUNTIMES: OnceLock<Mutex<HashMap<u64, Runtime>>> = OnceLock::new();
    let ns = super::sys::netns_inode();
    let mut map = RUNTIMES.get_or_init(Default::default).lock().unwrap();
    map.entry(ns)
        .or_insert_with(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("roam-net")
                .enable_all()
                .build()
                .expect("build the roam-net runtime")
        })
        .handle()
        .clone()
}

/// A multi-socket with blocking calls.
#[derive(Clone, Debug)]
pub struct MultiSocket {
    inner: super::MultiSocket,
    rt: Handle,
}

impl MultiSocket {
    /// Connect to `peer`; blocks until the first handshake completes.
    pub fn connect(peer: SocketAddr, options: Options) -> Result<MultiSocket, Error> {
        let rt = runtime();
        let inner =
            rt.block_on(async { rt_spawned(super::MultiSocket::connect(peer, options)).await })?;
        Ok(MultiSocket { inner, rt })
    }

    /// The async handle of the same multi-socket.
    pub fn as_async(&self) -> &super::MultiSocket {
        &self.inner
    }

    /// Another handle of the same multi-socket that does not keep it from being released when
    /// the application drops its handles (see [`super::MultiSocket::watcher`]).
    pub fn watcher(&self) -> MultiSocket {
        MultiSocket {
            inner: self.inner.watcher(),
            rt: self.rt.clone(),
        }
    }

    /// See [`super::MultiSocket::begin_irob`].
    pub fn begin_irob(
        &self,
        label: Label,
        deps: Deps,
        thunk: Option<Thunk>,
    ) -> Result<IrobId, Error> {
        self.rt.block_on(self.inner.begin_irob(label, deps, thunk))
    }

    /// See [`super::MultiSocket::irob_send`].
    pub fn irob_send(&self, irob: IrobId, data: impl Into<Bytes>) -> Result<(), Error> {
        self.rt.block_on(self.inner.irob_send(irob, data))
    }

    /// See [`super::MultiSocket::end_irob`].
    pub fn end_irob(&self, irob: IrobId) -> Result<(), Error> {
        self.inner.end_irob(irob)
    }

    /// See [`super::MultiSocket::send`].
    pub fn send(
        &self,
        label: Label,
        data: impl Into<Bytes>,
        thunk: Option<Thunk>,
    ) -> Result<IrobId, Error> {
        self.rt.block_on(self.inner.send(label, data, thunk))
    }

    /// See [`super::MultiSocket::recv`].
    pub fn recv(&self) -> Result<Option<Delivery>, Error> {
        self.rt.block_on(self.inner.recv())
    }

    /// As `recv`, giving up after `timeout` (`Ok(None)` then, as at end of stream; check
    /// [`MultiSocket::peer_closed`] to tell them apart).
    pub fn recv_timeout(&self, timeout: Duration) -> Result<Option<Delivery>, Error> {
        match self
            .rt
            .block_on(async { tokio::time::timeout(timeout, self.inner.recv()).await })
        {
            Ok(r) => r,
            Err(_) => Ok(None),
        }
    }

    /// See [`super::MultiSocket::try_recv`].
    pub fn try_recv(&self) -> Result<Option<Delivery>, Error> {
        self.inner.try_recv()
    }

    /// Whether the peer has closed and everything it sent was delivered.
    pub fn peer_closed(&self) -> bool {
        self.inner.shared.session().peer_finished()
    }

    /// Receive one whole IROB: concatenated bytes, its id and label (`None` at end of stream).
    pub fn recv_irob(&self) -> Result<Option<(IrobId, Label, Vec<u8>)>, Error> {
        let mut buf = Vec::new();
        loop {
            let Some(d) = self.recv()? else {
                return Ok(None);
            };
            buf.extend_from_slice(&d.data);
            if d.end {
                return Ok(Some((d.irob, d.label, buf)));
            }
        }
    }

    /// See [`super::MultiSocket::writable`].
    pub fn writable(&self, label: Label) -> bool {
        self.inner.writable(label)
    }

    /// See [`super::MultiSocket::try_send`].
    pub fn try_send(&self, label: Label, data: impl Into<Bytes>) -> Result<IrobId, Error> {
        self.inner.try_send(label, data)
    }

    /// See [`super::MultiSocket::try_irob_send`].
    pub fn try_irob_send(&self, irob: IrobId, data: impl Into<Bytes>) -> Result<(), Error> {
        self.inner.try_irob_send(irob, data)
    }

    /// See [`super::MultiSocket::close`].
    pub fn close(&self, timeout: Duration) -> bool {
        self.rt.block_on(self.inner.close(timeout))
    }

    /// Reset now (see [`super::MultiSocket::abort`]).
    pub fn abort(&self, reason: &str) {
        self.inner.abort(reason);
    }

    /// See [`super::MultiSocket::unacknowledged`].
    pub fn unacknowledged(&self) -> u64 {
        self.inner.unacknowledged()
    }

    /// See [`super::MultiSocket::probes_sent`].
    pub fn probes_sent(&self) -> u64 {
        self.inner.probes_sent()
    }

    /// See [`super::MultiSocket::estimates`].
    pub fn estimates(&self) -> Vec<NetworkView> {
        self.inner.estimates()
    }

    /// See [`super::MultiSocket::peer_addr`].
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.inner.peer_addr()
    }

    /// See [`super::MultiSocket::session_id`].
    pub fn session_id(&self) -> u64 {
        self.inner.session_id()
    }

    /// See [`super::MultiSocket::connections`].
    pub fn connections(&self) -> Vec<(u64, u32)> {
        self.inner.connections()
    }

    /// See [`super::MultiSocket::hedges_sent`].
    pub fn hedges_sent(&self) -> u64 {
        self.inner.hedges_sent()
    }

    /// See [`super::MultiSocket::duplicate_bytes`].
    pub fn duplicate_bytes(&self) -> u64 {
        self.inner.duplicate_bytes()
    }

    /// See [`super::MultiSocket::write_counts`].
    pub fn write_counts(&self) -> super::WriteCounts {
        self.inner.write_counts()
    }

    /// See [`super::MultiSocket::receive_held`].
    pub fn receive_held(&self) -> super::ReceiveHeld {
        self.inner.receive_held()
    }

    /// See [`super::MultiSocket::flow_stats`].
    pub fn flow_stats(&self) -> crate::proto::session::FlowStats {
        self.inner.flow_stats()
    }
}

/// Run a future on a runtime worker (so that tasks it spawns and sockets it makes belong to the
/// runtime's threads) and wait for it.
async fn rt_spawned<T: Send + 'static>(
    f: impl std::future::Future<Output = T> + Send + 'static,
) -> T {
    tokio::spawn(f).await.expect("roam-net task panicked")
}

/// A listener with blocking calls.
pub struct Listener {
    inner: super::Listener,
    rt: Handle,
}

impl Listener {
    /// Listen on `addr`.
    pub fn bind(addr: SocketAddr, options: Options) -> Result<Listener, Error> {
        let rt = runtime();
        let inner = rt.block_on(rt_spawned(super::Listener::bind(addr, options)))?;
        Ok(Listener { inner, rt })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.inner.local_addr()
    }

    /// Wait for the next multi-socket.
    pub fn accept(&self) -> Result<MultiSocket, Error> {
        let inner = self.rt.block_on(self.inner.accept())?;
        Ok(MultiSocket {
            inner,
            rt: self.rt.clone(),
        })
    }

    /// As `accept`, giving up after `timeout`.
    pub fn accept_timeout(&self, timeout: Duration) -> Result<Option<MultiSocket>, Error> {
        match self
            .rt
            .block_on(async { tokio::time::timeout(timeout, self.inner.accept()).await })
        {
            Ok(r) => Ok(Some(MultiSocket {
                inner: r?,
                rt: self.rt.clone(),
            })),
            Err(_) => Ok(None),
        }
    }
}
