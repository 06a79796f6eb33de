//! The client's end of a link to a tier (the phone or the server): [`TierClient`], one request
//! in flight and its reply, chunks pipelined ([`PIPELINE`] requests ahead of their replies),
//! and a [`ChunkStore`] over the link, so that `fetch`, `ingest` and `restore` work across it.
//! A tier's refusal comes back as [`StoreError::Refused`], naming the tier and carrying what it
//! said.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use roam_net::proto::Label;
use roam_net::runtime::blocking::MultiSocket;
use roam_net::runtime::{Options, Tls};

use super::control::Held;
use super::net::{link_options, recv_message, send_message, Deadlines, Limits};
use super::wire::{decode, decode_payload, encode, hex, Reply, Request, MAX_HAS};
use crate::error::StoreError;
use crate::id::ChunkId;
use crate::ownership::Tier;
use crate::store::ChunkStore;

/// Chunk requests a client sends ahead of their replies: 8 chunks (1 MB) cover the
/// bandwidth-delay product of a 10 Mbit/s WAN with a 20 ms round trip several times over.
pub const PIPELINE: usize = 8;

/// A link to a tier (phone or server): its requests, and a [`ChunkStore`] over it. A tier
/// closes a link idle for [`LINK_IDLE`](super::LINK_IDLE) (its default) (a client suspending to the phone leaves its link to
/// the server idle for as long as the chunks take); the next request then opens a new one and
/// authenticates again. A request already sent is never sent twice.
pub struct TierClient {
    ms: Mutex<MultiSocket>,
    name: String,
    addr: SocketAddr,
    /// Its roam-net options (kept to open the link again).
    options: Options,
    secret: [u8; 32],
    /// One request in flight: requests and their replies pair up in order.
    call: Mutex<()>,
    background: AtomicBool,
}

impl TierClient {
    /// Connect to the tier at `addr` (TLS when `tls` is set) and authenticate with `secret`.
    /// `name` names it in errors ("phone", "server").
    pub fn connect(
        name: &str,
        addr: SocketAddr,
        tls: Option<Tls>,
        secret: &[u8; 32],
    ) -> Result<TierClient, StoreError> {
        Self::connect_with(name, addr, link_options(tls), secret)
    }

    /// As [`TierClient::connect`] with the link's roam-net options given (say, which local
    /// networks are cellular where the interface names do not tell: the emulator's).
    pub fn connect_with(
        name: &str,
        addr: SocketAddr,
        options: Options,
        secret: &[u8; 32],
    ) -> Result<TierClient, StoreError> {
        let c = TierClient {
            ms: Mutex::new(Self::open(name, addr, &options)?),
            name: name.to_string(),
            addr,
            options,
            secret: *secret,
            call: Mutex::new(()),
            background: AtomicBool::new(false),
        };
        c.authenticate()?; // nobody else has the client yet: no `call` lock needed
        Ok(c)
    }

    fn open(name: &str, addr: SocketAddr, options: &Options) -> Result<MultiSocket, StoreError> {
        MultiSocket::connect(addr, options.clone()).map_err(|error| StoreError::Connect {
            tier: name.to_string(),
            addr,
            error: Box::new(error),
        })
    }

    /// The link's multi-socket.
    fn ms(&self) -> MultiSocket {
        self.ms.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Present the access secret (the caller holds the `call` lock).
    fn authenticate(&self) -> Result<(), StoreError> {
        self.send_request(
            &Request::Auth {
                secret: hex(&self.secret),
            },
            b"",
        )?;
        match self.next_reply()?.0 {
            Reply::Ok => Ok(()),
            r => Err(self.unexpected(r)),
        }
    }

    /// Before a request (the caller holds the `call` lock): a link the tier has closed is
    /// opened again.
    fn ensure_open(&self) -> Result<(), StoreError> {
        if !self.ms().peer_closed() {
            return Ok(());
        }
        let fresh = Self::open(&self.name, self.addr, &self.options)?;
        let old = std::mem::replace(
            &mut *self.ms.lock().unwrap_or_else(|p| p.into_inner()),
            fresh,
        );
        old.close(Duration::from_millis(100));
        self.authenticate()
    }

    /// Send bulk requests (chunks) with the background label (self-cleaning), or not.
    pub fn set_background(&self, on: bool) {
        self.background.store(on, Ordering::Relaxed);
    }

    /// The label a request goes with: chunks with a large label (background while
    /// self-cleaning), everything else as small foreground IROBs.
    fn label_of(&self, req: &Request) -> Label {
        let bulk = matches!(req, Request::Put { .. } | Request::Get { .. });
        match (bulk, self.background.load(Ordering::Relaxed)) {
            (true, true) => Label::BackgroundLarge,
            (true, false) => Label::ForegroundLarge,
            _ => Label::ForegroundSmall,
        }
    }

    /// A reply that does not answer the request.
    fn unexpected(&self, r: Reply) -> StoreError {
        StoreError::Unexpected {
            tier: self.name.clone(),
            reply: format!("{r:?}"),
        }
    }

    /// Send one request (the caller holds the `call` lock and takes its reply in order),
    /// handed to roam-net whole within the message deadline.
    fn send_request(&self, req: &Request, payload: &[u8]) -> Result<(), StoreError> {
        let until = Instant::now() + Limits::default().message_deadline;
        send_message(
            &self.ms(),
            self.label_of(req),
            &encode(req, payload),
            until,
            &self.name,
        )
    }

    /// The next reply (an `Error` reply as [`StoreError::Refused`]): it begins within
    /// [`LINK_IDLE`](super::LINK_IDLE) (a tier idle that long has closed the link) and arrives whole within the
    /// message deadline.
    fn next_reply(&self) -> Result<(Reply, Vec<u8>), StoreError> {
        let (msg, _) = recv_message(
            &self.ms(),
            Deadlines::message(&Limits::default()),
            &self.name,
        )?
        .ok_or_else(|| StoreError::Closed {
            tier: self.name.clone(),
        })?;
        let (reply, payload) = decode::<Reply>(&msg).map_err(|error| StoreError::Malformed {
            tier: self.name.clone(),
            error,
        })?;
        match reply {
            Reply::Error(why) => Err(StoreError::Refused {
                tier: self.name.clone(),
                why,
            }),
            r => Ok((r, payload.to_vec())),
        }
    }

    /// One request and its reply with its payload.
    pub fn call(&self, req: &Request, payload: &[u8]) -> Result<(Reply, Vec<u8>), StoreError> {
        let _g = self.call.lock().unwrap_or_else(|p| p.into_inner());
        self.ensure_open()?;
        self.send_request(req, payload)?;
        self.next_reply()
    }

    /// One request answered by [`Reply::Ok`].
    pub fn expect_ok(&self, req: &Request, payload: &[u8]) -> Result<(), StoreError> {
        match self.call(req, payload)?.0 {
            Reply::Ok => Ok(()),
            r => Err(self.unexpected(r)),
        }
    }

    /// One request answered by a control state ([`Reply::Payload`]).
    fn expect_held(&self, req: &Request) -> Result<Held, StoreError> {
        match self.call(req, b"")? {
            (Reply::Payload, body) => {
                decode_payload(&body, "control state").map_err(|error| StoreError::Malformed {
                    tier: self.name.clone(),
                    error,
                })
            }
            (r, _) => Err(self.unexpected(r)),
        }
    }

    /// Put chunks, up to [`PIPELINE`] requests ahead of their replies (the tier answers a
    /// link's requests in order), so that the link does not idle a round trip per chunk.
    /// `blob` reads each chunk; `progress` is told (chunks, bytes) as replies come.
    pub fn put_pipelined(
        &self,
        ids: &[ChunkId],
        blob: &mut dyn FnMut(&ChunkId) -> Result<Vec<u8>, StoreError>,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<(u64, u64), StoreError> {
        let _g = self.call.lock().unwrap_or_else(|p| p.into_inner());
        self.ensure_open()?;
        let mut sizes = VecDeque::new();
        let (mut n, mut bytes) = (0u64, 0u64);
        let mut take = |sizes: &mut VecDeque<u64>| -> Result<(), StoreError> {
            match self.next_reply()?.0 {
                Reply::Ok => {
                    n += 1;
                    bytes += sizes.pop_front().unwrap_or(0);
                    progress(n, bytes);
                    Ok(())
                }
                r => Err(self.unexpected(r)),
            }
        };
        for id in ids {
            let b = blob(id)?;
            self.send_request(&Request::Put { id: id.hex() }, &b)?;
            sizes.push_back(b.len() as u64);
            if sizes.len() >= PIPELINE {
                take(&mut sizes)?;
            }
        }
        while !sizes.is_empty() {
            take(&mut sizes)?;
        }
        Ok((n, bytes))
    }

    /// Get chunks, up to [`PIPELINE`] requests ahead of their replies: each blob, or `None`
    /// where the tier does not hold it. Blobs are not checked here (the caller opens them
    /// with their keys).
    pub fn get_pipelined(&self, ids: &[ChunkId]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let _g = self.call.lock().unwrap_or_else(|p| p.into_inner());
        self.ensure_open()?;
        let mut out = Vec::with_capacity(ids.len());
        let take = |out: &mut Vec<Option<Vec<u8>>>| -> Result<(), StoreError> {
            match self.next_reply()? {
                (Reply::Payload, blob) => out.push(Some(blob)),
                (Reply::NotFound, _) => out.push(None),
                (r, _) => return Err(self.unexpected(r)),
            }
            Ok(())
        };
        for (i, id) in ids.iter().enumerate() {
            self.send_request(&Request::Get { id: id.hex() }, b"")?;
            if i + 1 - out.len() >= PIPELINE {
                take(&mut out)?;
            }
        }
        while out.len() < ids.len() {
            take(&mut out)?;
        }
        Ok(out)
    }

    /// Which of `ids` the tier holds.
    pub fn has_many(&self, ids: &[ChunkId]) -> Result<Vec<bool>, StoreError> {
        let mut out = Vec::with_capacity(ids.len());
        for batch in ids.chunks(MAX_HAS) {
            let req = Request::Has {
                ids: batch.iter().map(|i| i.hex()).collect(),
            };
            match self.call(&req, b"")?.0 {
                Reply::Have(h) if h.len() == batch.len() => out.extend(h),
                r => return Err(self.unexpected(r)),
            }
        }
        Ok(out)
    }

    /// Put the chunks of `ids` the tier lacks, read from `from`; how many were sent and their
    /// bytes. `progress` is told after each.
    pub fn put_missing(
        &self,
        ids: &[ChunkId],
        from: &dyn ChunkStore,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<(u64, u64), StoreError> {
        let have = self.has_many(ids)?;
        let missing: Vec<ChunkId> = ids
            .iter()
            .zip(have)
            .filter(|(_, had)| !had)
            .map(|(id, _)| *id)
            .collect();
        self.put_pipelined(
            &missing,
            &mut |id| {
                from.get(id)?.ok_or_else(|| StoreError::Absent {
                    id: *id,
                    place: format!("in {}", from.name()),
                })
            },
            progress,
        )
    }

    /// Give the server control state `held` (of a parcel being created, or a handoff to the
    /// server that is prepared).
    pub fn put_control(&self, held: &Held) -> Result<(), StoreError> {
        let req = Request::PutControl {
            parcel: held.control.parcel.clone(),
        };
        self.expect_ok(&req, &held.to_bytes())
    }

    /// Give the phone control state `held` in place of the one it holds under nonce
    /// `replaces` (`None`: it holds none): refused as stale if it holds another.
    pub fn swap_control(&self, held: &Held, replaces: Option<&str>) -> Result<(), StoreError> {
        let req = Request::SwapControl {
            parcel: held.control.parcel.clone(),
            replaces: replaces.map(str::to_string),
        };
        self.expect_ok(&req, &held.to_bytes())
    }

    /// The version and nonce of the control state of `parcel` the tier holds, if any.
    pub fn holds(&self, parcel: &str) -> Result<Option<(u64, String)>, StoreError> {
        let req = Request::Holds {
            parcel: parcel.into(),
        };
        match self.call(&req, b"")?.0 {
            Reply::Holds {
                version: Some(v),
                nonce: Some(n),
            } => Ok(Some((v, n))),
            Reply::Holds { .. } => Ok(None),
            r => Err(self.unexpected(r)),
        }
    }

    /// The tier's control state of `parcel`, held under `nonce` (the server: `None` for its own).
    pub fn get_control(&self, parcel: &str, nonce: Option<&str>) -> Result<Held, StoreError> {
        self.expect_held(&Request::GetControl {
            parcel: parcel.into(),
            nonce: nonce.map(str::to_string),
        })
    }

    /// The phone deletes its control state of `parcel`, held under `nonce` (refused as stale
    /// if it holds another).
    pub fn drop_control(&self, parcel: &str, nonce: &str) -> Result<(), StoreError> {
        let req = Request::DropControl {
            parcel: parcel.into(),
            nonce: nonce.into(),
        };
        self.expect_ok(&req, b"")
    }

    /// Tell the phone that the handoff giving it `parcel` under `nonce` committed (so it may
    /// lend the parcel while the server is out of reach).
    pub fn confirm(&self, parcel: &str, nonce: &str) -> Result<(), StoreError> {
        let req = Request::Committed {
            parcel: parcel.into(),
            nonce: nonce.into(),
        };
        self.expect_ok(&req, b"")
    }

    /// Borrow `parcel` from the phone that owns it under `lease` (a resume cut off from the
    /// server): its control state, held under the lease.
    pub fn lend(&self, parcel: &str, lease: &str) -> Result<Held, StoreError> {
        self.expect_held(&Request::Lend {
            parcel: parcel.into(),
            lease: lease.into(),
        })
    }

    /// Give a lent parcel back to the phone: `held` is its new control state under the lease.
    pub fn give_back(&self, held: &Held) -> Result<(), StoreError> {
        let req = Request::Return {
            parcel: held.control.parcel.clone(),
        };
        self.expect_ok(&req, &held.to_bytes())
    }

    /// The tier checks that it holds every chunk of its control state of `parcel` with a good
    /// hash; [`StoreError::Incomplete`] says how many it lacks.
    pub fn validate(&self, parcel: &str) -> Result<(), StoreError> {
        let req = Request::Validate {
            parcel: parcel.into(),
        };
        match self.call(&req, b"")?.0 {
            Reply::Missing { count: 0, .. } => Ok(()),
            Reply::Missing {
                total,
                count,
                missing,
            } => Err(StoreError::Incomplete {
                tier: self.name.clone(),
                parcel: parcel.to_string(),
                count,
                total,
                first: missing.into_iter().next().unwrap_or_default(),
            }),
            r => Err(self.unexpected(r)),
        }
    }

    /// A request answered by [`Reply::Owned`]: (nonce, version).
    pub fn owned(&self, req: &Request) -> Result<(String, u64), StoreError> {
        match self.call(req, b"")?.0 {
            Reply::Owned { nonce, version } => Ok((nonce, version)),
            r => Err(self.unexpected(r)),
        }
    }

    /// A request answered by [`Reply::Prepared`]: the next nonce.
    pub fn prepared(&self, req: &Request) -> Result<String, StoreError> {
        match self.call(req, b"")?.0 {
            Reply::Prepared { next } => Ok(next),
            r => Err(self.unexpected(r)),
        }
    }

    /// The server: who owns `parcel`, its last committed version, and whether a handoff is
    /// prepared.
    pub fn owner(&self, parcel: &str) -> Result<(Tier, u64, bool), StoreError> {
        let req = Request::Owner {
            parcel: parcel.into(),
        };
        match self.call(&req, b"")?.0 {
            Reply::Owner {
                tier,
                committed,
                pending,
            } => Ok((tier, committed, pending)),
            r => Err(self.unexpected(r)),
        }
    }

    /// What the tier knows of `parcel`: (control-state version held, self-cleaning state,
    /// chunks held).
    pub fn status(&self, parcel: &str) -> Result<(Option<u64>, Option<String>, u64), StoreError> {
        let req = Request::Status {
            parcel: parcel.into(),
        };
        match self.call(&req, b"")?.0 {
            Reply::Status {
                control,
                cleaning,
                chunks,
            } => Ok((control, cleaning, chunks)),
            r => Err(self.unexpected(r)),
        }
    }

    /// Ask the phone to self-clean `parcel`.
    pub fn clean(&self, parcel: &str) -> Result<(), StoreError> {
        let req = Request::Clean {
            parcel: parcel.into(),
        };
        self.expect_ok(&req, b"")
    }

    /// Ask the phone to hoard `ids` (answers at once; `status` tells the progress).
    pub fn hoard(&self, parcel: &str, ids: &[ChunkId]) -> Result<(), StoreError> {
        let payload: Vec<u8> = ids.iter().flat_map(|i| i.0).collect();
        let req = Request::Hoard {
            parcel: parcel.into(),
            count: ids.len() as u64,
        };
        self.expect_ok(&req, &payload)
    }

    /// Close the link.
    pub fn close(&self) {
        self.ms().close(Duration::from_secs(5));
    }
}

impl ChunkStore for TierClient {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn put(&self, id: &ChunkId, blob: &[u8]) -> Result<(), StoreError> {
        self.expect_ok(&Request::Put { id: id.hex() }, blob)
    }

    fn get(&self, id: &ChunkId) -> Result<Option<Vec<u8>>, StoreError> {
        match self.call(&Request::Get { id: id.hex() }, b"")? {
            (Reply::Payload, blob) => Ok(Some(blob)),
            (Reply::NotFound, _) => Ok(None),
            (r, _) => Err(self.unexpected(r)),
        }
    }

    fn has(&self, id: &ChunkId) -> Result<bool, StoreError> {
        Ok(self.has_many(&[*id])?[0])
    }
}
