//! Mail with prefetching (the paper's §6.2 application: Thunderbird behind a prefetching IMAP
//! proxy), against a real, unmodified IMAP server ([`crate::servers::dovecot`]).
//!
//! The client-side **proxy** speaks IMAP upstream. After a disconnection the scripted **user**
//! lists the mailbox (the headers of all 100 messages, a foreground fetch); the proxy then
//! prefetches every body in mailbox order (background: one `UID FETCH n (BODY.PEEK[])` per
//! message, all pipelined at once). After reading the list for [`READ_HEADERS`] the user opens
//! 5 messages (chosen from the trial's seed, the same for every system), one after another;
//! a message not yet in the proxy's cache is fetched on demand (foreground) even if its
//! prefetch is under way. Requests are labelled small; responses carry the request's
//! foreground/background label and are small or large by size ([`SMALL_MAX`]).
//!
//! Every system runs the same application: the proxy's upstream is one [`Conn`] to a
//! server-side **endpoint** that speaks plain IMAP to Dovecot over loopback, relaying whole
//! commands and whole responses (one message each, matched by IMAP tag); Dovecot is
//! unmodified. Only the transport differs: a roam multi-socket, where labels schedule the
//! messages, or one TCP or MPTCP connection, where they travel in order and change nothing.
//! The endpoint gives Dovecot one command at a time, foreground first, and composes each
//! prefetch response only when the connection can take it ([`Readiness`]), leaving out a body
//! the user has meanwhile fetched on demand. Over roam that is when the background backlog is
//! under its bound; over TCP, when the socket has taken the previous response. The endpoint
//! also makes every system's responses leave through the lab's congestion control (cubic):
//! Dovecot's own sockets take the namespace default, BBR on this machine, a non-initial
//! namespace may not set a default outside `tcp_allowed_congestion_control`, and Dovecot
//! cannot open MPTCP sockets.
//!
//! The user side is called in-process instead of over a loopback IMAP connection from a GUI
//! client (that hop would add microseconds to what the links add in hundreds of ms).
//!
//! Measured: the on-demand delay (mean over the 5 opens; an open served from the cache counts
//! its near-zero wait), the time to list the headers, and the background time (from the header
//! request until every body is in the cache).

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{BufReader, Write};
use std::net::{Ipv4Addr, Shutdown, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use crate::report::UNFINISHED;
use rand::seq::index::sample;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use roam_net::Label;

use crate::harness::channel::{Conn, Readiness};
use crate::harness::trial::{Metric, Trial};
use crate::servers::dovecot::{self, Dovecot, IMAP_PORT};
use crate::servers::imap::{self, Response};

/// Responses up to this size are labelled small, larger ones large.
pub const SMALL_MAX: usize = 4096;
/// Messages the user opens.
pub const OPENS: usize = 5;
/// How long the user reads the header list before opening the first message.
pub const READ_HEADERS: Duration = Duration::from_secs(1);
/// The server-side endpoint's port.
pub(crate) const ENDPOINT_PORT: u16 = 6300;

/// The next response from the server side: one message, one whole IMAP response (its untagged
/// data and tagged completion), as the endpoint relays them.
pub(crate) fn recv_response(up: &Conn) -> Result<Option<Response>> {
    match up.recv()? {
        None => Ok(None),
        Some(m) => Ok(Some(Response {
            tag: imap::response_tag(&m.data)?,
            bytes: m.data,
        })),
    }
}

/// What a tag was sent for.
#[derive(Clone, Copy, Debug)]
enum Pending {
    Headers,
    Body(u32),
}

#[derive(Default)]
struct Cache {
    pending: HashMap<String, Pending>,
    /// (UID, size) of messages listed so far by the header fetch under way.
    listed: Vec<(u32, u64)>,
    /// (UID, size) of every message, once the listing is complete.
    headers: Option<Vec<(u32, u64)>>,
    bodies: HashSet<u32>,
    /// Bodies that arrived a second time (prefetched and fetched on demand).
    twice: u32,
    all_at: Option<Instant>,
    error: Option<String>,
}

/// The client-side caching proxy.
struct Proxy {
    /// The connection to the endpoint (roam, TCP or MPTCP: the proxy is the same).
    up: Conn,
    cache: Mutex<Cache>,
    cv: Condvar,
    next_tag: AtomicU64,
}

impl Proxy {
    /// Send a command for `what` under a fresh tag.
    fn request(&self, label: Label, what: Pending, args: &str) -> Result<()> {
        let tag = format!("p{}", self.next_tag.fetch_add(1, Ordering::Relaxed));
        self.cache.lock().unwrap().pending.insert(tag.clone(), what);
        self.up
            .send(label, &[], format!("{tag} {args}\r\n").into_bytes(), None)?;
        Ok(())
    }

    fn fetch_body(&self, label: Label, uid: u32) -> Result<()> {
        self.request(
            label,
            Pending::Body(uid),
            &format!("UID FETCH {uid} (BODY.PEEK[])"),
        )
    }

    /// Handle responses until the stream ends. Untagged FETCH data is matched to messages by
    /// UID (Dovecot may interleave the responses of pipelined commands), tagged completions to
    /// commands by tag.
    fn read_loop(&self) -> Result<()> {
        while let Some(resp) = recv_response(&self.up)? {
            let mut c = self.cache.lock().unwrap();
            for line in imap::logical_lines(&resp.bytes)? {
                if let Some(f) = parse_fetch(&line)? {
                    if let Some(size) = f.size {
                        c.listed.push((f.uid, size));
                    }
                    if let Some(got) = f.body {
                        let want = c
                            .headers
                            .iter()
                            .flatten()
                            .find(|m| m.0 == f.uid)
                            .map(|m| m.1);
                        if want != Some(got) {
                            bail!("UID {}: body of {got} bytes, listed as {want:?}", f.uid);
                        }
                        if !c.bodies.insert(f.uid) {
                            c.twice += 1;
                        }
                        let listed = c.headers.as_ref().map_or(0, Vec::len);
                        if c.all_at.is_none() && c.bodies.len() == listed {
                            c.all_at = Some(Instant::now());
                        }
                    }
                    continue;
                }
                if line.starts_with(b"* ") || line.starts_with(b"+") {
                    continue;
                }
                let tag = imap::response_tag(&line)?;
                let what = c
                    .pending
                    .remove(&tag)
                    .ok_or_else(|| anyhow!("a completion for unknown tag `{tag}`"))?;
                let done = Response { tag, bytes: line };
                if !done.ok() {
                    bail!("IMAP {what:?} failed: {}", done.status_line());
                }
                match what {
                    Pending::Headers => {
                        let list = std::mem::take(&mut c.listed);
                        c.headers = Some(list);
                    }
                    // A command's data precedes its completion. A prefetch of a
                    // body the user fetched on demand completes without it (the endpoint
                    // leaves it out), possibly before the on-demand response arrives.
                    Pending::Body(uid)
                        if !c.bodies.contains(&uid)
                            && !c
                                .pending
                                .values()
                                .any(|p| matches!(p, Pending::Body(u) if *u == uid)) =>
                    {
                        bail!("the fetch of UID {uid} completed without its body")
                    }
                    Pending::Body(_) => {}
                }
            }
            self.cv.notify_all();
        }
        Ok(())
    }

    /// Wait until `done` holds or `deadline` passes (false then).
    fn wait(&self, deadline: Instant, done: impl Fn(&Cache) -> bool) -> Result<bool> {
        let mut c = self.cache.lock().unwrap();
        loop {
            if let Some(e) = &c.error {
                bail!("the proxy's reader failed: {e}");
            }
            if done(&c) {
                return Ok(true);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            c = self
                .cv
                .wait_timeout(c, (deadline - now).min(Duration::from_millis(500)))
                .unwrap()
                .0;
        }
    }
}

/// What one untagged FETCH response line says about a message.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Fetch {
    pub(crate) uid: u32,
    /// RFC822.SIZE, if asked for.
    pub(crate) size: Option<u64>,
    /// Length of the whole body (`BODY[] {n}`), if it is here.
    pub(crate) body: Option<u64>,
}

/// Parse `* n FETCH (UID u [RFC822.SIZE s] [BODY[...] {k}] ...)`; `None` for other lines.
/// Only the text before the line's first literal is looked at (a literal is message data).
pub(crate) fn parse_fetch(line: &[u8]) -> Result<Option<Fetch>> {
    let head_end = line.iter().position(|&b| b == b'{').unwrap_or(line.len());
    let head = String::from_utf8_lossy(&line[..head_end]);
    if !head.starts_with("* ") || !head.contains(" FETCH (") {
        return Ok(None);
    }
    let num = |key: &str| -> Option<u64> {
        let i = head.find(key)? + key.len();
        head[i..].split([' ', ')']).next()?.parse().ok()
    };
    let uid = num("UID ")
        .and_then(|u| u32::try_from(u).ok())
        .ok_or_else(|| anyhow!("a FETCH response without a UID: `{}`", head.trim()))?;
    let body = if head.ends_with("BODY[] ") {
        let digits = line[head_end + 1..]
            .split(|&b| b == b'}')
            .next()
            .and_then(|d| std::str::from_utf8(d).ok())
            .and_then(|d| d.parse().ok())
            .ok_or_else(|| anyhow!("UID {uid}: bad body literal"))?;
        Some(digits)
    } else {
        None
    };
    Ok(Some(Fetch {
        uid,
        size: num("RFC822.SIZE "),
        body,
    }))
}

/// Send one command and wait for its response (before the reader thread starts).
pub(crate) fn command(up: &Conn, tag: &str, args: &str) -> Result<()> {
    up.send(
        Label::ForegroundSmall,
        &[],
        format!("{tag} {args}\r\n").into_bytes(),
        None,
    )?;
    let r = recv_response(up)?
        .ok_or_else(|| anyhow!("the server closed the connection during `{args}`"))?;
    if r.tag != tag || !r.ok() {
        bail!("IMAP `{args}` failed: {}", r.status_line());
    }
    Ok(())
}

/// Commands waiting at the endpoint, foreground first.
#[derive(Default)]
struct Waiting {
    fg: VecDeque<(String, Vec<u8>)>,
    bg: VecDeque<(String, Vec<u8>)>,
    /// A background response is composed and not yet taken by the connection: the next
    /// background command waits (it is composed only when it can go).
    bg_held: bool,
    /// UIDs whose body the endpoint has fetched for a foreground command.
    on_demand: HashSet<u32>,
    closed: bool,
}

/// The UID of a whole-body fetch (`tag UID FETCH n (BODY.PEEK[])` or `BODY[]`), as the proxy
/// sends them; `None` for any other command.
fn body_fetch_uid(cmd: &[u8]) -> Option<u32> {
    let text = std::str::from_utf8(cmd).ok()?;
    let w: Vec<&str> = text.split_ascii_whitespace().collect();
    match w[..] {
        [_, uid_kw, fetch, n, item]
            if uid_kw.eq_ignore_ascii_case("UID")
                && fetch.eq_ignore_ascii_case("FETCH")
                && (item.eq_ignore_ascii_case("(BODY.PEEK[])")
                    || item.eq_ignore_ascii_case("(BODY[])")) =>
        {
            n.parse().ok()
        }
        _ => None,
    }
}

/// The command to give Dovecot for a prefetch when it can go: a body the user has meanwhile
/// fetched on demand is not sent again; the prefetch asks only for the UID (a real, tiny
/// response from Dovecot that completes the tag).
fn compose_prefetch(tag: &str, cmd: Vec<u8>, on_demand: &HashSet<u32>) -> Vec<u8> {
    match body_fetch_uid(&cmd) {
        Some(uid) if on_demand.contains(&uid) => format!("{tag} UID FETCH {uid} (UID)\r\n").into(),
        _ => cmd,
    }
}

/// The server-side endpoint, the same for every system: serve one connection (a roam
/// multi-socket, or one TCP or MPTCP connection), relaying each command message to Dovecot
/// over loopback and each complete response back as one message with the command's
/// foreground or background label, small or large by size.
///
/// Dovecot runs pipelined commands concurrently and may interleave their untagged responses,
/// so the endpoint gives it one command at a time (about a millisecond each on loopback),
/// foreground commands first: a user's fetch never waits behind prefetches queued here.
///
/// Prefetch responses are composed when they can go ([`Readiness`]): one at a time, and the
/// next only once the connection has taken it, so prefetches wait here, as commands, while
/// the connection cannot take more. Over roam that is while the background backlog is over
/// its bound (roam's thunk); over TCP or MPTCP, while the socket has not taken the previous
/// response. A prefetch of a message the user has meanwhile opened (fetched in the
/// foreground) is then composed without the body (`compose_prefetch`), so that body does
/// not cross the network twice. How often that happens is the transport's doing: a socket's
/// send buffer takes most of a mailbox at once, roam's bound a round trip's worth.
pub fn endpoint(conn: Arc<Conn>) -> Result<()> {
    let dove = TcpStream::connect((Ipv4Addr::LOCALHOST, IMAP_PORT))
        .context("the endpoint connecting to Dovecot")?;
    dove.set_nodelay(true)?;
    let mut r = BufReader::with_capacity(256 * 1024, dove.try_clone()?);
    let greeting = imap::read_greeting(&mut r)?;
    conn.send(Label::ForegroundSmall, &[], greeting.bytes, None)?;
    let waiting = Arc::new((Mutex::new(Waiting::default()), Condvar::new()));
    let (bg_tx, bg) = prefetch_sender(conn.clone(), waiting.clone());
    let (dconn, dwait, mut w) = (conn.clone(), waiting.clone(), dove.try_clone()?);
    let driver = std::thread::spawn(move || -> Result<()> {
        loop {
            let (fg, tag, cmd, orig) = {
                let (lock, cv) = &*dwait;
                let mut q = lock.lock().unwrap();
                loop {
                    if let Some((t, c)) = q.fg.pop_front() {
                        if let Some(uid) = body_fetch_uid(&c) {
                            q.on_demand.insert(uid);
                        }
                        break (true, t, c, Vec::new());
                    }
                    if !q.bg_held {
                        if let Some((t, c)) = q.bg.pop_front() {
                            q.bg_held = true;
                            let composed = compose_prefetch(&t, c.clone(), &q.on_demand);
                            break (false, t, composed, c);
                        }
                    }
                    if q.closed {
                        return Ok(());
                    }
                    q = cv.wait(q).unwrap();
                }
            };
            w.write_all(&cmd)?;
            let resp = imap::read_response(&mut r)?
                .ok_or_else(|| anyhow!("Dovecot closed the connection during `{tag}`"))?;
            if resp.tag != tag {
                bail!("Dovecot answered `{}` where `{tag}` was due", resp.tag);
            }
            let small = resp.bytes.len() <= SMALL_MAX;
            let label = match (fg, small) {
                (true, true) => Label::ForegroundSmall,
                (true, false) => Label::ForegroundLarge,
                (false, true) => Label::BackgroundSmall,
                (false, false) => Label::BackgroundLarge,
            };
            if fg {
                dconn.send(label, &[], resp.bytes, None)?;
            } else if bg_tx
                .send(Prefetch {
                    tag,
                    cmd: orig,
                    label,
                    resp: resp.bytes,
                })
                .is_err()
            {
                return Ok(());
            }
        }
    });
    let relayed = (|| -> Result<()> {
        while let Some(m) = conn.recv()? {
            let tag = imap::command_tag(&m.data)?;
            let (lock, cv) = &*waiting;
            let mut q = lock.lock().unwrap();
            if m.label.is_foreground() {
                q.fg.push_back((tag, m.data));
            } else {
                q.bg.push_back((tag, m.data));
            }
            cv.notify_all();
        }
        Ok(())
    })();
    {
        let (lock, cv) = &*waiting;
        let mut q = lock.lock().unwrap();
        q.closed = true;
        q.fg.clear();
        q.bg.clear();
        cv.notify_all();
    }
    let _ = dove.shutdown(Shutdown::Both);
    let driven = driver
        .join()
        .map_err(|_| anyhow!("the endpoint's Dovecot driver panicked"))?;
    let _ = bg.join();
    relayed.and(driven)
}

/// A composed prefetch response the endpoint holds until roam takes it.
struct Prefetch {
    tag: String,
    /// The command as the proxy sent it (to compose again).
    cmd: Vec<u8>,
    label: Label,
    resp: Vec<u8>,
}

/// Hand composed prefetch responses to the connection when it can take them ([`Readiness`]):
/// until then the response waits here; when the connection is ready again, a body the user
/// has meanwhile fetched on demand sends the command back to the driver to be composed
/// again. Clears [`Waiting::bg_held`] once the connection has taken the response (or the
/// command went back).
fn prefetch_sender(
    conn: Arc<Conn>,
    waiting: Arc<(Mutex<Waiting>, Condvar)>,
) -> (mpsc::Sender<Prefetch>, std::thread::JoinHandle<Result<()>>) {
    let (tx, rx) = mpsc::channel::<Prefetch>();
    let t = std::thread::spawn(move || -> Result<()> {
        let ready = Readiness::default();
        let release = |requeue: Option<(String, Vec<u8>)>| {
            let (lock, cv) = &*waiting;
            let mut q = lock.lock().unwrap();
            if let Some(c) = requeue {
                q.bg.push_front(c);
            }
            q.bg_held = false;
            cv.notify_all();
        };
        for p in rx {
            loop {
                if ready.send(&conn, p.label, p.resp.clone())? {
                    release(None);
                    break;
                }
                // Deferred: a body the user has fetched meanwhile goes back to be composed
                // without it.
                let stale = body_fetch_uid(&p.cmd)
                    .is_some_and(|uid| waiting.0.lock().unwrap().on_demand.contains(&uid));
                if stale {
                    release(Some((p.tag.clone(), p.cmd.clone())));
                    break;
                }
            }
        }
        Ok(())
    });
    (tx, t)
}

/// What the scripted user measured.
struct Outcome {
    headers_s: f64,
    /// The user's opens, in order (none if the mailbox was never listed).
    opens: Vec<Open>,
    background_s: f64,
    /// Bodies received twice (prefetched and fetched on demand), once every response is in.
    twice: u32,
    /// What did not finish within the workload, and how far it got (for the trial's notes).
    unfinished: Vec<String>,
}

/// One message the user opened.
struct Open {
    /// When (seconds since the user's clock started).
    at_s: f64,
    uid: u32,
    /// The body's size (RFC822.SIZE).
    bytes: u64,
    /// Not in the cache when opened: fetched on demand.
    from_network: bool,
    /// Bodies in the cache when it was opened.
    cached: usize,
    /// How long the user waited ([`UNFINISHED`] if the body never came).
    ms: f64,
}

/// The header and rows of `mail-opens.csv`, which a trial writes into its log directory
/// (`--emu-logs`): every message the user opened, to tell where the on-demand time went.
fn opens_csv(opens: &[Open]) -> String {
    let mut s = String::from("at_s,uid,bytes,from_network,cached,ms\n");
    for o in opens {
        s.push_str(&format!(
            "{:.3},{},{},{},{},{:.1}\n",
            o.at_s, o.uid, o.bytes, o.from_network as u8, o.cached, o.ms
        ));
    }
    s
}

/// The interactive event whose latencies a trial records ([`Trial::event_latencies`]): each
/// open's wait (an open served from the cache counts its near-zero wait).
pub const EVENT: &str = "open_ms";

/// Run one trial.
pub fn run(t: &Trial) -> Result<Vec<Metric>> {
    let system = t.system;
    let seed = t.seed;
    let server = t.start_server(
        "mail",
        ENDPOINT_PORT,
        move || Dovecot::start(seed),
        // Dovecot's log explains most of what goes wrong behind the endpoint.
        |dove, c| endpoint(c).map_err(|e| anyhow!("{e:#}{}", dove.log_tail())),
    )?;
    let locals = t.client_links();
    let progress = t.progress.clone();
    let cap = t.duration;
    let proxy_slot: Arc<Mutex<Option<Arc<Proxy>>>> = Arc::default();
    let ps = proxy_slot.clone();
    let client = move || -> Result<Outcome> {
        let up = Conn::connect(system, &locals, ENDPOINT_PORT)?;
        let greeting = up
            .recv()?
            .ok_or_else(|| anyhow!("the endpoint closed without a greeting"))?;
        imap::read_greeting(&mut &greeting.data[..])?;
        command(
            &up,
            "l1",
            &format!("LOGIN {} {}", dovecot::USER.0, dovecot::USER.1),
        )?;
        command(&up, "l2", "SELECT INBOX")?;
        let proxy = Arc::new(Proxy {
            up,
            cache: Mutex::default(),
            cv: Condvar::new(),
            next_tag: AtomicU64::new(1),
        });
        *ps.lock().unwrap() = Some(proxy.clone());
        let start = Instant::now();
        let deadline = start + cap;
        let rp = proxy.clone();
        std::thread::spawn(move || {
            if let Err(e) = rp.read_loop() {
                rp.cache.lock().unwrap().error = Some(format!("{e:#}"));
            } else {
                rp.cache.lock().unwrap().error = Some("the server closed the connection".into());
            }
            rp.cv.notify_all();
        });
        // The user lists the mailbox.
        proxy.request(
            Label::ForegroundSmall,
            Pending::Headers,
            "UID FETCH 1:* (UID RFC822.SIZE BODY.PEEK[HEADER])",
        )?;
        if !proxy.wait(deadline, |c| c.headers.is_some())? {
            // Over the time limit: a result ("unfinished"), not a failure.
            return Ok(Outcome {
                headers_s: UNFINISHED,
                opens: Vec::new(),
                background_s: UNFINISHED,
                twice: 0,
                unfinished: vec![format!(
                    "the mailbox listing got no reply within the workload ({:.0} s)",
                    (deadline - start).as_secs_f64()
                )],
            });
        }
        let headers_s = start.elapsed().as_secs_f64();
        let list = proxy
            .cache
            .lock()
            .unwrap()
            .headers
            .clone()
            .unwrap_or_default();
        if list.len() != dovecot::MESSAGES {
            bail!(
                "listed {} messages, expected {}",
                list.len(),
                dovecot::MESSAGES
            );
        }
        // The proxy prefetches every body (its own thread: a background send may wait).
        let pp = proxy.clone();
        let uids: Vec<u32> = list.iter().map(|x| x.0).collect();
        std::thread::spawn(move || {
            for uid in uids {
                if pp.fetch_body(Label::BackgroundSmall, uid).is_err() {
                    break;
                }
            }
        });
        std::thread::sleep(READ_HEADERS);
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x0e4a11);
        let picks = sample(&mut rng, list.len(), OPENS).into_vec();
        let mut opens = Vec::new();
        let mut unfinished = Vec::new();
        for i in picks {
            let (uid, bytes) = list[i];
            let t0 = Instant::now();
            let (cached, from_network) = {
                let c = proxy.cache.lock().unwrap();
                (c.bodies.len(), !c.bodies.contains(&uid))
            };
            if from_network {
                proxy.fetch_body(Label::ForegroundSmall, uid)?;
            }
            let came = proxy.wait(deadline, |c| c.bodies.contains(&uid))?;
            opens.push(Open {
                at_s: (t0 - start).as_secs_f64(),
                uid,
                bytes,
                from_network,
                cached,
                ms: if came {
                    t0.elapsed().as_secs_f64() * 1e3
                } else {
                    UNFINISHED
                },
            });
            if !came {
                unfinished.push(format!(
                    "opening message UID {uid}: its body had not arrived {:.1} s later, at the \
                     end of the workload",
                    t0.elapsed().as_secs_f64()
                ));
                break;
            }
            progress(start.elapsed().as_secs());
        }
        // Background: every body in the cache.
        while !proxy.wait(
            (Instant::now() + Duration::from_secs(1)).min(deadline),
            |c| c.all_at.is_some(),
        )? && Instant::now() < deadline
        {
            progress(start.elapsed().as_secs());
        }
        let (all_at, cached) = {
            let c = proxy.cache.lock().unwrap();
            (c.all_at, c.bodies.len())
        };
        if all_at.is_none() {
            unfinished.push(format!(
                "background: {cached} of {} bodies in the cache at the end of the workload",
                list.len()
            ));
        }
        // Every response in (a prefetch overtaken by an on-demand fetch may still be on its
        // way), to count the bodies that crossed the network twice.
        proxy.wait(deadline, |c| c.pending.is_empty())?;
        let twice = proxy.cache.lock().unwrap().twice;
        Ok(Outcome {
            twice,
            headers_s,
            opens,
            unfinished,
            background_s: all_at.map_or(UNFINISHED, |a| (a - start).as_secs_f64()),
        })
    };
    let out = t.run_client("mail", client);
    let proxy = proxy_slot.lock().unwrap().take();
    let (recovery, served) = server.finish(proxy.as_ref().map(|p| &p.up));
    let out = match out {
        Ok(o) => o,
        Err(e) => {
            // The server side's error (with Dovecot's log) explains a client failure best.
            if let Err(se) = served {
                bail!("{e:#}; server side: {se:#}");
            }
            return Err(e);
        }
    };
    for why in out.unfinished {
        t.note(why);
    }
    t.keep_log("mail-opens.csv", || opens_csv(&out.opens))?;
    let open_ms: Vec<f64> = out.opens.iter().map(|o| o.ms).collect();
    t.event_latencies(EVENT, open_ms.iter().copied());
    let ondemand_ms = if open_ms.is_empty() {
        UNFINISHED
    } else {
        crate::report::mean(&open_ms)
    };
    let fetched: Vec<f64> = out
        .opens
        .iter()
        .filter(|o| o.from_network)
        .map(|o| o.ms)
        .collect();
    Ok(vec![
        Metric::new("ondemand_ms", ondemand_ms, "ms"),
        Metric::new("headers_s", out.headers_s, "s"),
        Metric::new("background_s", out.background_s, "s"),
        Metric::new("opens_from_network", fetched.len() as f64, "msgs"),
        Metric::new(
            "network_open_ms",
            if fetched.is_empty() {
                f64::NAN // every open was served from the cache
            } else {
                crate::report::mean(&fetched)
            },
            "ms",
        ),
        Metric::new("bodies_twice", out.twice as f64, "msgs"),
    ]
    .into_iter()
    .chain(recovery)
    .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefetch_of_a_body_fetched_on_demand_asks_only_for_the_uid() {
        assert_eq!(
            body_fetch_uid(b"p7 UID FETCH 42 (BODY.PEEK[])\r\n"),
            Some(42)
        );
        assert_eq!(body_fetch_uid(b"p7 uid fetch 42 (BODY[])\r\n"), Some(42));
        for other in [
            &b"p1 UID FETCH 1:* (UID RFC822.SIZE BODY.PEEK[HEADER])\r\n"[..],
            b"p2 UID FETCH 4,5 (BODY.PEEK[])\r\n",
            b"l2 SELECT INBOX\r\n",
            b"\xff\xfe\r\n",
        ] {
            assert_eq!(body_fetch_uid(other), None);
        }
        let on_demand = HashSet::from([42]);
        let cmd = b"p7 UID FETCH 42 (BODY.PEEK[])\r\n".to_vec();
        assert_eq!(
            compose_prefetch("p7", cmd, &on_demand),
            b"p7 UID FETCH 42 (UID)\r\n"
        );
        let cmd = b"p8 UID FETCH 43 (BODY.PEEK[])\r\n".to_vec();
        assert_eq!(compose_prefetch("p8", cmd.clone(), &on_demand), cmd);
    }

    #[test]
    fn fetch_lines_are_parsed_without_reading_message_data() {
        let wire = b"* 1 FETCH (UID 4 RFC822.SIZE 120 BODY[HEADER] {25}\r\nSubject: * 9 FETCH (UID\r\n)\r\n* 2 FETCH (UID 9 BODY[] {5}\r\nhello)\r\n* 3 EXISTS\r\np1 OK Fetch completed.\r\n";
        let lines = imap::logical_lines(wire).unwrap();
        let parsed: Vec<_> = lines.iter().map(|l| parse_fetch(l).unwrap()).collect();
        assert_eq!(
            parsed,
            vec![
                Some(Fetch {
                    uid: 4,
                    size: Some(120),
                    body: None
                }),
                Some(Fetch {
                    uid: 9,
                    size: None,
                    body: Some(5)
                }),
                None,
                None
            ]
        );
        assert!(parse_fetch(b"* 1 FETCH (RFC822.SIZE 3)\r\n").is_err());
        assert!(parse_fetch(b"* 1 FETCH (UID 2 BODY[] {x}\r\n").is_err());
    }
}
