//! The tiers' links over roam-net: [`serve`] answers a [`TierService`]'s requests on a
//! listener; [`TierClient`] asks them (and is a [`ChunkStore`]); [`hand_off`] moves a parcel's
//! ownership by two-phase commit at the server.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use roam_net::proto::session::NetworkChoice;
use roam_net::proto::Label;
use roam_net::runtime::blocking::{Listener, MultiSocket};
use roam_net::runtime::{Options, Tls};

use super::service::TierService;
use super::wire::{decode, encode, hex, Reply, Request, MAX_HAS, MAX_HEADER, MAX_PAYLOAD};
use super::{Held, LINK_IDLE, MAX_LINKS};
use crate::chunk::ChunkId;
use crate::error::StoreError;
use crate::ownership::Tier;
use crate::store::ChunkStore;

/// Chunk requests a client sends ahead of their replies: 8 chunks (1 MB) cover the
/// bandwidth-delay product of a 10 Mbit/s WAN with a 20 ms round trip several times over.
pub const PIPELINE: usize = 8;

/// Largest message (header length, header, payload).
const MAX_MESSAGE: usize = 4 + MAX_HEADER + MAX_PAYLOAD;

/// roam-net options of a tier link: IROBs no larger than a message; background traffic
/// (self-cleaning and hoarding) on WiFi whenever the phone has it, cellular otherwise (the
/// seed: WiFi preferred, about 5x less energy than 3G).
pub fn link_options(tls: Option<Tls>) -> Options {
    let mut o = Options {
        tls,
        ..Options::default()
    };
    o.config.max_irob_size = MAX_MESSAGE as u64;
    for label in [Label::BackgroundSmall, Label::BackgroundLarge] {
        o.config.policy_mut(label).networks = NetworkChoice::PreferNonCellular;
    }
    o
}

fn now() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// The next whole IROB from `ms`, at most [`MAX_MESSAGE`] bytes: its bytes and label; `None`
/// at the end of the stream or after `idle` without one.
fn recv_message(ms: &MultiSocket, idle: Duration) -> Result<Option<(Vec<u8>, Label)>, String> {
    let mut parts: HashMap<u64, Vec<u8>> = HashMap::new();
    loop {
        let Some(d) = ms.recv_timeout(idle).map_err(|e| e.to_string())? else {
            return Ok(None);
        };
        let buf = parts.entry(d.irob).or_default();
        if buf.len() + d.data.len() > MAX_MESSAGE {
            return Err(format!("a message over {MAX_MESSAGE} bytes"));
        }
        buf.extend_from_slice(&d.data);
        if d.end {
            let msg = parts.remove(&d.irob).unwrap_or_default();
            return Ok(Some((msg, d.label)));
        }
    }
}

/// A running tier server; stops (and stops accepting) when dropped or [`ServeHandle::stop`]ped.
pub struct ServeHandle {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    links: Arc<Links>,
}

/// A link being served: its multi-socket and its thread.
type Link = (MultiSocket, JoinHandle<()>);

/// The links being served: each one's multi-socket (to end it) and thread (to wait for it).
#[derive(Default)]
struct Links {
    live: Mutex<HashMap<u64, Link>>,
    next: AtomicUsize,
}

impl ServeHandle {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stop accepting, end the links being served (a request being answered is finished
    /// first: its thread is waited for) and wait for every thread: afterwards nothing of the
    /// server holds its [`TierService`] (or the tier directory's lock).
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // No link is added once the accept loop has ended.
        let live: Vec<_> = self.links.live.lock().unwrap().drain().collect();
        for (_, (ms, _)) in &live {
            ms.abort("the tier is stopping");
        }
        for (_, (_, t)) in live {
            let _ = t.join();
        }
    }
}

impl Drop for ServeHandle {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Serve `service` on `addr` (TLS when `tls` is set): each link must authenticate first, then
/// gets one answer per request; at most [`MAX_LINKS`] at once, each closed after
/// [`LINK_IDLE`] without a request.
pub fn serve(
    service: Arc<TierService>,
    addr: SocketAddr,
    tls: Option<Tls>,
) -> Result<ServeHandle, String> {
    serve_idle(service, addr, tls, LINK_IDLE)
}

/// As [`serve`], closing links idle for `idle`.
pub fn serve_idle(
    service: Arc<TierService>,
    addr: SocketAddr,
    tls: Option<Tls>,
    idle: Duration,
) -> Result<ServeHandle, String> {
    let listener =
        Listener::bind(addr, link_options(tls)).map_err(|e| format!("listening on {addr}: {e}"))?;
    let addr = listener.local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let links = Arc::new(Links::default());
    let (st, all) = (stop.clone(), links.clone());
    let thread = std::thread::spawn(move || {
        while !st.load(Ordering::SeqCst) {
            let ms = match listener.accept_timeout(Duration::from_millis(200)) {
                Ok(Some(ms)) => ms,
                Ok(None) => continue,
                Err(_) => continue,
            };
            let mut live = all.live.lock().unwrap();
            // Links that ended let their entries go.
            live.retain(|_, (_, t)| !t.is_finished());
            if live.len() >= MAX_LINKS {
                drop(live);
                ms.abort("too many links");
                continue;
            }
            let id = all.next.fetch_add(1, Ordering::SeqCst) as u64;
            let (service, stop, link) = (service.clone(), st.clone(), ms.clone());
            let t = std::thread::spawn(move || {
                serve_link(&service, &link, &stop, idle);
                link.close(Duration::from_secs(5));
            });
            live.insert(id, (ms, t));
        }
    });
    Ok(ServeHandle {
        addr,
        stop,
        thread: Some(thread),
        links,
    })
}

fn serve_link(service: &Arc<TierService>, ms: &MultiSocket, stop: &AtomicBool, idle: Duration) {
    let mut authenticated = false;
    while !stop.load(Ordering::SeqCst) {
        let (msg, label) = match recv_message(ms, idle) {
            Ok(Some(m)) => m,
            Ok(None) | Err(_) => return,
        };
        let (reply, payload) = match decode::<Request>(&msg) {
            Err(e) => (Reply::Error(format!("malformed request: {e}")), Vec::new()),
            Ok((Request::Auth { secret }, _)) => {
                if service.secret_ok(&secret) {
                    authenticated = true;
                    (Reply::Ok, Vec::new())
                } else {
                    let _ = ms.send(
                        label,
                        encode(&Reply::Error("wrong access secret".into()), b""),
                        None,
                    );
                    return;
                }
            }
            Ok(_) if !authenticated => {
                let _ = ms.send(
                    label,
                    encode(&Reply::Error("authenticate first".into()), b""),
                    None,
                );
                return;
            }
            Ok((req, payload)) => service.handle(req, payload, now()),
        };
        if ms.send(label, encode(&reply, &payload), None).is_err() {
            return;
        }
    }
}

/// A link to a tier (phone or server): its requests, and a [`ChunkStore`] over it. A tier
/// closes a link idle for [`LINK_IDLE`] (a client suspending to the phone leaves its link to
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
    ) -> Result<TierClient, String> {
        Self::connect_with(name, addr, link_options(tls), secret)
    }

    /// As [`TierClient::connect`] with the link's roam-net options given (say, which local
    /// networks are cellular where the interface names do not tell: the emulator's).
    pub fn connect_with(
        name: &str,
        addr: SocketAddr,
        options: Options,
        secret: &[u8; 32],
    ) -> Result<TierClient, String> {
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

    fn open(name: &str, addr: SocketAddr, options: &Options) -> Result<MultiSocket, String> {
        MultiSocket::connect(addr, options.clone()).map_err(|e| format!("{name} at {addr}: {e}"))
    }

    /// The link's multi-socket.
    fn ms(&self) -> MultiSocket {
        self.ms.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Present the access secret (the caller holds the `call` lock).
    fn authenticate(&self) -> Result<(), String> {
        self.send_request(
            &Request::Auth {
                secret: hex(&self.secret),
            },
            b"",
        )?;
        match self.next_reply()?.0 {
            Reply::Ok => Ok(()),
            r => Err(self.err(format!("unexpected reply {r:?}"))),
        }
    }

    /// Before a request (the caller holds the `call` lock): a link the tier has closed is
    /// opened again.
    fn ensure_open(&self) -> Result<(), String> {
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

    fn err(&self, what: impl std::fmt::Display) -> String {
        format!("{}: {what}", self.name)
    }

    /// Send one request (the caller holds the `call` lock and takes its reply in order).
    fn send_request(&self, req: &Request, payload: &[u8]) -> Result<(), String> {
        self.ms()
            .send(self.label_of(req), encode(req, payload), None)
            .map(|_| ())
            .map_err(|x| self.err(x))
    }

    /// The next reply (an `Error` reply as an error).
    fn next_reply(&self) -> Result<(Reply, Vec<u8>), String> {
        let (msg, _) =
            recv_message(&self.ms(), LINK_IDLE)?.ok_or_else(|| self.err("closed the link"))?;
        let (reply, payload) =
            decode::<Reply>(&msg).map_err(|x| self.err(format!("malformed reply: {x}")))?;
        match reply {
            Reply::Error(why) => Err(self.err(why)),
            r => Ok((r, payload.to_vec())),
        }
    }

    /// One request and its reply with its payload.
    pub fn call(&self, req: &Request, payload: &[u8]) -> Result<(Reply, Vec<u8>), String> {
        let _g = self.call.lock().unwrap_or_else(|p| p.into_inner());
        self.ensure_open()?;
        self.send_request(req, payload)?;
        self.next_reply()
    }

    /// Put chunks, up to [`PIPELINE`] requests ahead of their replies (the tier answers a
    /// link's requests in order), so that the link does not idle a round trip per chunk.
    /// `blob` reads each chunk; `progress` is told (chunks, bytes) as replies come.
    pub fn put_pipelined(
        &self,
        ids: &[ChunkId],
        blob: &mut dyn FnMut(&ChunkId) -> Result<Vec<u8>, String>,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<(u64, u64), String> {
        let _g = self.call.lock().unwrap_or_else(|p| p.into_inner());
        self.ensure_open()?;
        let mut sizes = std::collections::VecDeque::new();
        let (mut n, mut bytes) = (0u64, 0u64);
        let mut take = |sizes: &mut std::collections::VecDeque<u64>| -> Result<(), String> {
            match self.next_reply()?.0 {
                Reply::Ok => {
                    n += 1;
                    bytes += sizes.pop_front().unwrap_or(0);
                    progress(n, bytes);
                    Ok(())
                }
                r => Err(self.err(format!("unexpected reply {r:?}"))),
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
    pub fn get_pipelined(&self, ids: &[ChunkId]) -> Result<Vec<Option<Vec<u8>>>, String> {
        let _g = self.call.lock().unwrap_or_else(|p| p.into_inner());
        self.ensure_open()?;
        let mut out = Vec::with_capacity(ids.len());
        let take = |out: &mut Vec<Option<Vec<u8>>>| -> Result<(), String> {
            match self.next_reply()? {
                (Reply::Payload, blob) => out.push(Some(blob)),
                (Reply::NotFound, _) => out.push(None),
                (r, _) => return Err(self.err(format!("unexpected reply {r:?}"))),
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

    fn expect_ok(&self, req: &Request) -> Result<(), String> {
        match self.call(req, b"")?.0 {
            Reply::Ok => Ok(()),
            r => Err(format!("{}: unexpected reply {r:?}", self.name)),
        }
    }

    /// Which of `ids` the tier holds.
    pub fn has_many(&self, ids: &[ChunkId]) -> Result<Vec<bool>, String> {
        let mut out = Vec::with_capacity(ids.len());
        for batch in ids.chunks(MAX_HAS) {
            let req = Request::Has {
                ids: batch.iter().map(|i| i.hex()).collect(),
            };
            match self.call(&req, b"")?.0 {
                Reply::Have(h) if h.len() == batch.len() => out.extend(h),
                r => return Err(format!("{}: unexpected reply {r:?}", self.name)),
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
    ) -> Result<(u64, u64), String> {
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
                from.get(id)
                    .map_err(|e| e.to_string())?
                    .ok_or_else(|| format!("chunk {id}: not in {}", from.name()))
            },
            progress,
        )
    }

    /// Give the tier control state `held`.
    pub fn put_control(&self, held: &Held) -> Result<(), String> {
        let body = serde_json::to_vec(held).expect("serializes");
        match self
            .call(
                &Request::PutControl {
                    parcel: held.control.parcel.clone(),
                },
                &body,
            )?
            .0
        {
            Reply::Ok => Ok(()),
            r => Err(format!("{}: unexpected reply {r:?}", self.name)),
        }
    }

    /// The tier's control state of `parcel`, held under `nonce` (the server: `None` for its own).
    pub fn get_control(&self, parcel: &str, nonce: Option<&str>) -> Result<Held, String> {
        let req = Request::GetControl {
            parcel: parcel.into(),
            nonce: nonce.map(str::to_string),
        };
        match self.call(&req, b"")? {
            (Reply::Payload, body) => serde_json::from_slice(&body)
                .map_err(|e| format!("{}: control state: {e}", self.name)),
            (r, _) => Err(format!("{}: unexpected reply {r:?}", self.name)),
        }
    }

    /// The tier deletes its control state of `parcel`.
    pub fn drop_control(&self, parcel: &str) -> Result<(), String> {
        self.expect_ok(&Request::DropControl {
            parcel: parcel.into(),
        })
    }

    /// Tell the phone that the handoff giving it `parcel` under `nonce` committed (so it may
    /// lend the parcel while the server is out of reach).
    pub fn confirm(&self, parcel: &str, nonce: &str) -> Result<(), String> {
        self.expect_ok(&Request::Committed {
            parcel: parcel.into(),
            nonce: nonce.into(),
        })
    }

    /// Borrow `parcel` from the phone that owns it under `lease` (a resume cut off from the
    /// server): its control state, held under the lease.
    pub fn lend(&self, parcel: &str, lease: &str) -> Result<Held, String> {
        let req = Request::Lend {
            parcel: parcel.into(),
            lease: lease.into(),
        };
        match self.call(&req, b"")? {
            (Reply::Payload, body) => serde_json::from_slice(&body)
                .map_err(|e| format!("{}: control state: {e}", self.name)),
            (r, _) => Err(format!("{}: unexpected reply {r:?}", self.name)),
        }
    }

    /// Give a lent parcel back to the phone: `held` is its new control state under the lease.
    pub fn give_back(&self, held: &Held) -> Result<(), String> {
        let body = serde_json::to_vec(held).expect("control state serializes");
        match self
            .call(
                &Request::Return {
                    parcel: held.control.parcel.clone(),
                },
                &body,
            )?
            .0
        {
            Reply::Ok => Ok(()),
            r => Err(format!("{}: unexpected reply {r:?}", self.name)),
        }
    }

    /// The tier checks that it holds every chunk of its control state of `parcel` with a good
    /// hash; an error says how many it lacks.
    pub fn validate(&self, parcel: &str) -> Result<(), String> {
        match self
            .call(
                &Request::Validate {
                    parcel: parcel.into(),
                },
                b"",
            )?
            .0
        {
            Reply::Missing { count: 0, .. } => Ok(()),
            Reply::Missing {
                total,
                count,
                missing,
            } => Err(format!(
                "{}: lacks {count} of the {total} chunks of parcel `{parcel}` (first: {})",
                self.name,
                missing.first().map_or("", |s| s.as_str())
            )),
            r => Err(format!("{}: unexpected reply {r:?}", self.name)),
        }
    }

    /// A request answered by [`Reply::Owned`]: (nonce, version).
    pub fn owned(&self, req: &Request) -> Result<(String, u64), String> {
        match self.call(req, b"")?.0 {
            Reply::Owned { nonce, version } => Ok((nonce, version)),
            r => Err(format!("{}: unexpected reply {r:?}", self.name)),
        }
    }

    /// The server: who owns `parcel`, its last committed version, and whether a handoff is
    /// prepared.
    pub fn owner(&self, parcel: &str) -> Result<(Tier, u64, bool), String> {
        match self
            .call(
                &Request::Owner {
                    parcel: parcel.into(),
                },
                b"",
            )?
            .0
        {
            Reply::Owner {
                tier,
                committed,
                pending,
            } => Ok((tier, committed, pending)),
            r => Err(format!("{}: unexpected reply {r:?}", self.name)),
        }
    }

    /// What the tier knows of `parcel`: (control-state version held, self-cleaning state,
    /// chunks held).
    pub fn status(&self, parcel: &str) -> Result<(Option<u64>, Option<String>, u64), String> {
        match self
            .call(
                &Request::Status {
                    parcel: parcel.into(),
                },
                b"",
            )?
            .0
        {
            Reply::Status {
                control,
                cleaning,
                chunks,
            } => Ok((control, cleaning, chunks)),
            r => Err(format!("{}: unexpected reply {r:?}", self.name)),
        }
    }

    /// Ask the phone to self-clean `parcel`.
    pub fn clean(&self, parcel: &str) -> Result<(), String> {
        self.expect_ok(&Request::Clean {
            parcel: parcel.into(),
        })
    }

    /// Ask the phone to hoard `ids` (answers at once; `status` tells the progress).
    pub fn hoard(&self, parcel: &str, ids: &[ChunkId]) -> Result<(), String> {
        let payload: Vec<u8> = ids.iter().flat_map(|i| i.0).collect();
        match self
            .call(
                &Request::Hoard {
                    parcel: parcel.into(),
                    count: ids.len() as u64,
                },
                &payload,
            )?
            .0
        {
            Reply::Ok => Ok(()),
            r => Err(format!("{}: unexpected reply {r:?}", self.name)),
        }
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
        let b = |why: String| StoreError::Backend {
            store: self.name.clone(),
            why,
        };
        match self
            .call(&Request::Put { id: id.hex() }, blob)
            .map_err(b)?
            .0
        {
            Reply::Ok => Ok(()),
            r => Err(b(format!("unexpected reply {r:?}"))),
        }
    }

    fn get(&self, id: &ChunkId) -> Result<Option<Vec<u8>>, StoreError> {
        let b = |why: String| StoreError::Backend {
            store: self.name.clone(),
            why,
        };
        match self.call(&Request::Get { id: id.hex() }, b"").map_err(b)? {
            (Reply::Payload, blob) => Ok(Some(blob)),
            (Reply::NotFound, _) => Ok(None),
            (r, _) => Err(b(format!("unexpected reply {r:?}"))),
        }
    }

    fn has(&self, id: &ChunkId) -> Result<bool, StoreError> {
        let b = |why: String| StoreError::Backend {
            store: self.name.clone(),
            why,
        };
        Ok(self.has_many(&[*id]).map_err(b)?[0])
    }
}

/// Hand the parcel whose control state is `held` (held under its current nonce) to tier `to`
/// by two-phase commit at `server`: prepare (the server issues the next nonce), `deliver` the
/// control state to the destination under that nonce and have it validated there, commit.
/// When delivery fails the handoff is aborted and the source keeps the parcel. Returns the new
/// nonce. The caller then deletes the source's control state.
pub fn hand_off(
    server: &TierClient,
    held: &Held,
    to: Tier,
    deliver: impl FnOnce(&str) -> Result<(), String>,
) -> Result<String, String> {
    let c = &held.control;
    let hash = hex(&c.hash());
    let next = match server
        .call(
            &Request::Prepare {
                parcel: c.parcel.clone(),
                nonce: held.nonce.clone(),
                to,
                version: c.version,
                hash: hash.clone(),
            },
            b"",
        )?
        .0
    {
        Reply::Prepared { next } => next,
        r => return Err(format!("server: unexpected reply {r:?}")),
    };
    if let Err(e) = deliver(&next) {
        let _ = server.call(
            &Request::Abort {
                parcel: c.parcel.clone(),
                nonce: held.nonce.clone(),
            },
            b"",
        );
        return Err(format!(
            "handoff of parcel `{}` to the {to:?} tier aborted: {e}",
            c.parcel
        ));
    }
    server.expect_ok(&Request::Commit {
        parcel: c.parcel.clone(),
        nonce: held.nonce.clone(),
        next: next.clone(),
        hash,
    })?;
    Ok(next)
}
