//! The server-side endpoint: it relays the proxy's commands to an unmodified Dovecot over
//! loopback, one at a time and foreground first, and composes prefetch responses only when the
//! connection can take them.

use std::collections::{HashSet, VecDeque};
use std::io::{BufReader, Write};
use std::net::{Ipv4Addr, Shutdown, TcpStream};
use std::sync::{mpsc, Arc, Condvar, Mutex};

use anyhow::{anyhow, bail, Context, Result};
use roam_net::Label;

use super::SMALL_MAX;
use crate::harness::channel::{Conn, Readiness};
use crate::servers::dovecot::IMAP_PORT;
use crate::servers::imap;

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
}
