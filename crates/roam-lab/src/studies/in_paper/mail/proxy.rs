//! The client-side caching proxy: it speaks IMAP upstream over one [`Conn`] to the endpoint,
//! keeps the bodies that arrive, and lets the user wait for what it needs.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use roam_net::Label;

use super::ENDPOINT_PORT;
use crate::harness::channel::Conn;
use crate::harness::system::System;
use crate::harness::trial::ClientLinks;
use crate::servers::dovecot;
use crate::servers::imap::{self, Response};

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
pub(super) enum Pending {
    Headers,
    Body(u32),
}

#[derive(Default)]
pub(super) struct Cache {
    pub(super) pending: HashMap<String, Pending>,
    /// (UID, size) of messages listed so far by the header fetch under way.
    listed: Vec<(u32, u64)>,
    /// (UID, size) of every message, once the listing is complete.
    pub(super) headers: Option<Vec<(u32, u64)>>,
    pub(super) bodies: HashSet<u32>,
    /// Bodies that arrived a second time (prefetched and fetched on demand).
    pub(super) twice: u32,
    pub(super) all_at: Option<Instant>,
    error: Option<String>,
}

/// The client-side caching proxy.
pub(super) struct Proxy {
    /// The connection to the endpoint (roam, TCP or MPTCP: the proxy is the same).
    pub(super) up: Conn,
    pub(super) cache: Mutex<Cache>,
    cv: Condvar,
    next_tag: AtomicU64,
}

impl Proxy {
    /// Connect to the endpoint over `system` (from the client's `locals`), read Dovecot's
    /// greeting, log in and select the inbox: a proxy ready for the user, its reader not yet
    /// started ([`Proxy::spawn_reader`]).
    pub(super) fn connect(system: System, locals: &ClientLinks) -> Result<Arc<Proxy>> {
        let up = Conn::connect(system, locals, ENDPOINT_PORT)?;
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
        Ok(Arc::new(Proxy {
            up,
            cache: Mutex::default(),
            cv: Condvar::new(),
            next_tag: AtomicU64::new(1),
        }))
    }

    /// Start the thread that handles responses ([`Proxy::read_loop`]); when it ends, its
    /// error (or the server's closing) is left in the cache for [`Proxy::wait`] to report.
    pub(super) fn spawn_reader(self: &Arc<Self>) {
        let rp = self.clone();
        std::thread::spawn(move || {
            if let Err(e) = rp.read_loop() {
                rp.cache.lock().unwrap().error = Some(format!("{e:#}"));
            } else {
                rp.cache.lock().unwrap().error = Some("the server closed the connection".into());
            }
            rp.cv.notify_all();
        });
    }

    /// Prefetch the body of every one of `uids` in the background, in mailbox order, on a
    /// thread of its own (a background send may wait).
    pub(super) fn prefetch_all(self: &Arc<Self>, uids: Vec<u32>) {
        let pp = self.clone();
        std::thread::spawn(move || {
            for uid in uids {
                if pp.fetch_body(Label::BackgroundSmall, uid).is_err() {
                    break;
                }
            }
        });
    }

    /// Send a command for `what` under a fresh tag.
    pub(super) fn request(&self, label: Label, what: Pending, args: &str) -> Result<()> {
        let tag = format!("p{}", self.next_tag.fetch_add(1, Ordering::Relaxed));
        self.cache.lock().unwrap().pending.insert(tag.clone(), what);
        self.up
            .send(label, &[], format!("{tag} {args}\r\n").into_bytes(), None)?;
        Ok(())
    }

    pub(super) fn fetch_body(&self, label: Label, uid: u32) -> Result<()> {
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
    pub(super) fn wait(&self, deadline: Instant, done: impl Fn(&Cache) -> bool) -> Result<bool> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
