//! Beyond the thesis: the HTTP/1 exchanges on a flow ([`Exchanges`]), so that every response,
//! not only a connection's first, is remembered by the request that asked for it
//! ([`Remembered`]), and a page whose URL changed is found where it moved ([`moved_key`]).
//!
//! [`super::hint`] hints the first response of a flow only: later ones cannot be told apart
//! in the byte stream without following the protocol. A browser keeps its connections open and
//! asks for page after page on each, and a site that puts the hour or the edition in its URLs
//! (`/world/h97/1234-storm.html`, an hour later `/world/h98/1234-storm.html`) never asks for
//! the same URL twice. Precog (the thesis, ch. V) relies on exactly that content: prefetched on
//! WiFi under one URL, asked for on cellular under another.
//!
//! So the phone follows the HTTP/1 exchanges of each flow it can parse: the requests going up
//! (request line, headers, a body of `Content-Length` bytes) and the responses coming down
//! (status line, headers, then a body of `Content-Length` bytes, chunked, none — HEAD, 1xx,
//! 204, 304 — or up to the close). The names of each response's chunks, its first
//! [`NAMES_PER_RESPONSE`], are remembered under its request's key ([`super::hint::request_key`])
//! and under the request's *moved key*: its host and the last segment of its path, which an
//! edition path leaves alone. A moved key two different requests share (`/world/index.html`,
//! `/sports/index.html`) is ambiguous and never used, as the thesis's runner-up rule refuses an
//! ambiguous flowlet. When a request goes up, the names remembered for its key, or else for its
//! moved key, go up in front of it: the source holds them in its feedback cache before the
//! server has answered.
//!
//! Anything the parser does not follow (a header block over [`MAX_HEAD`] bytes, a request with
//! a chunked body, a protocol upgrade, a response nobody asked for, bytes that are not HTTP/1,
//! an encrypted record) ends the tracking of that flow, which is left to the thesis's matching.
//! What is delivered never depends on any of it; a wrong hint costs feedback bytes only.

use std::collections::{HashMap, VecDeque};

use super::hint::request_key;
use crate::name::Name;

/// Names remembered of one response at most (its first: a page's head is what a short
/// response cannot wait for feedback to cover).
pub const NAMES_PER_RESPONSE: usize = 256;

/// Responses remembered at most, the oldest forgotten first: at most
/// `MAX_REMEMBERED x NAMES_PER_RESPONSE` names, 16 MiB.
pub const MAX_REMEMBERED: usize = 8192;

/// The longest request or response head followed, bytes.
pub const MAX_HEAD: usize = 64 * 1024;

/// Requests asked and not yet answered on one flow at most (pipelining).
const MAX_ASKED: usize = 64;

/// A request that went up: what its response is remembered and found by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Asked {
    /// Its key ([`request_key`]).
    pub key: Name,
    /// Its moved key ([`moved_key`]), for a GET.
    pub moved: Option<Name>,
    /// A HEAD: its response has no body.
    head: bool,
}

/// The key a GET for `target` on `host` keeps when its path moves: the host and the path's
/// last segment (no query, no fragment); `None` for a path ending in `/`.
pub fn moved_key(host: &[u8], target: &[u8]) -> Option<Name> {
    let mut path = target;
    for scheme in [&b"http://"[..], b"https://"] {
        if path.len() >= scheme.len() && path[..scheme.len()].eq_ignore_ascii_case(scheme) {
            let rest = &path[scheme.len()..];
            path = rest
                .iter()
                .position(|&c| c == b'/')
                .map_or(&b"/"[..], |i| &rest[i..]);
        }
    }
    let end = path
        .iter()
        .position(|&c| c == b'?' || c == b'#')
        .unwrap_or(path.len());
    let path = &path[..end];
    let last = &path[path.iter().rposition(|&c| c == b'/').map_or(0, |i| i + 1)..];
    if last.is_empty() {
        return None;
    }
    let mut k = Vec::with_capacity(host.len() + last.len() + 8);
    k.extend_from_slice(b"moved\n");
    k.extend_from_slice(host);
    k.push(b'\n');
    k.extend_from_slice(last);
    Some(Name::of(&k))
}

/// Responses' names by their requests' keys, and moved keys to the request key they stand
/// for (`None`: ambiguous) with how many remembered keys share them.
#[derive(Debug, Default)]
pub struct Remembered {
    names: HashMap<Name, Vec<Name>>,
    moved: HashMap<Name, (Option<Name>, usize)>,
    /// Keys in the order first remembered, with their moved keys, oldest first.
    order: VecDeque<(Name, Option<Name>)>,
}

impl Remembered {
    /// The response to `asked` carried `names` (replacing what it carried before).
    pub fn remember(&mut self, asked: &Asked, names: Vec<Name>) {
        if names.is_empty() {
            return;
        }
        if self.names.insert(asked.key, names).is_some() {
            return;
        }
        self.order.push_back((asked.key, asked.moved));
        if let Some(m) = asked.moved {
            // A moved key stays ambiguous while two of the keys sharing it are remembered.
            let e = self.moved.entry(m).or_insert((Some(asked.key), 0));
            e.1 += 1;
            if e.0 != Some(asked.key) {
                e.0 = None;
            }
        }
        while self.order.len() > MAX_REMEMBERED {
            let Some((old, moved)) = self.order.pop_front() else {
                break;
            };
            self.names.remove(&old);
            if let Some(m) = moved {
                if let Some(e) = self.moved.get_mut(&m) {
                    e.1 -= 1;
                    if e.1 == 0 {
                        self.moved.remove(&m);
                    }
                }
            }
        }
    }

    /// The names remembered for `asked`'s key, else for its moved key if that is not
    /// ambiguous; and whether they were found by the moved key.
    pub fn names_for(&self, asked: &Asked) -> Option<(&[Name], bool)> {
        if let Some(n) = self.names.get(&asked.key) {
            return Some((n, false));
        }
        let key = self.moved.get(&asked.moved?)?.0?;
        self.names.get(&key).map(|n| (&n[..], true))
    }

    /// Responses remembered.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// Where the requests going up stand.
#[derive(Debug)]
enum Up {
    Head(Vec<u8>),
    Body(u64),
}

/// Where the response coming down stands.
#[derive(Debug)]
enum Down {
    /// Between responses.
    Idle,
    Head(Vec<u8>),
    Fixed(u64),
    ChunkSize(Vec<u8>),
    ChunkData(u64),
    /// The CRLF after a chunk's data: bytes of it left.
    ChunkEnd(u8),
    Trailer(Vec<u8>),
    /// Up to the close.
    Rest,
}

/// What happened at a place in delivered bytes.
enum Mark {
    Begin(Asked),
    End,
}

/// The HTTP/1 exchanges of one flow (see the module's doc).
#[derive(Debug)]
pub struct Exchanges {
    up: Up,
    asked: VecDeque<Asked>,
    down: Down,
    /// The response being delivered and its names so far.
    answering: Option<(Asked, Vec<Name>)>,
    /// Something was not followed: the flow is no longer tracked.
    lost: bool,
}

impl Default for Exchanges {
    fn default() -> Self {
        Exchanges {
            up: Up::Head(Vec::new()),
            asked: VecDeque::new(),
            down: Down::Idle,
            answering: None,
            lost: false,
        }
    }
}

/// Append `bytes[*i..]` to `buf` up to and including the first `\r\n\r\n` (or, with `line`,
/// the first `\n`) in `buf`; true once it ends there. `None`: the head grew past `max`.
fn take_until_end(
    buf: &mut Vec<u8>,
    bytes: &[u8],
    i: &mut usize,
    line: bool,
    max: usize,
) -> Option<bool> {
    while *i < bytes.len() {
        let c = bytes[*i];
        *i += 1;
        // Empty lines before a head (allowed before a request line) are skipped.
        if !line && buf.is_empty() && (c == b'\r' || c == b'\n') {
            continue;
        }
        buf.push(c);
        if buf.len() > max {
            return None;
        }
        let ended = if line {
            c == b'\n'
        } else {
            c == b'\n' && (buf.ends_with(b"\r\n\r\n") || buf.ends_with(b"\n\n"))
        };
        if ended {
            return Some(true);
        }
    }
    Some(false)
}

/// A head's header lines (after its first line), as (name, value) trimmed.
fn headers(head: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    head.split(|&c| c == b'\n').skip(1).filter_map(|l| {
        let l = l.strip_suffix(b"\r").unwrap_or(l);
        let colon = l.iter().position(|&c| c == b':')?;
        Some((l[..colon].trim_ascii(), l[colon + 1..].trim_ascii()))
    })
}

/// How a message's body is framed, from its headers: `Err(())` for what is not followed.
#[derive(Debug, PartialEq, Eq)]
enum Body {
    Length(u64),
    Chunked,
    None,
}

fn body_of(head: &[u8]) -> Result<Body, ()> {
    let mut body = Body::None;
    for (name, value) in headers(head) {
        if name.eq_ignore_ascii_case(b"transfer-encoding") {
            if value.to_ascii_lowercase().ends_with(b"chunked") {
                body = Body::Chunked;
            } else {
                return Err(());
            }
        } else if name.eq_ignore_ascii_case(b"content-length") && body != Body::Chunked {
            let n = std::str::from_utf8(value)
                .ok()
                .and_then(|s| s.parse::<u64>().ok())
                .ok_or(())?;
            body = Body::Length(n);
        }
    }
    Ok(body)
}

impl Exchanges {
    /// Whether the flow is still followed.
    pub fn followed(&self) -> bool {
        !self.lost
    }

    /// Stop following the flow (e.g. its records are encrypted and pass through).
    pub fn lose(&mut self) {
        self.lost = true;
        self.answering = None;
        self.asked.clear();
        self.up = Up::Head(Vec::new());
        self.down = Down::Idle;
    }

    /// Bytes of the program going up: the requests whose heads ended in them.
    pub fn up(&mut self, bytes: &[u8]) -> Vec<Asked> {
        let mut out = vec![];
        let mut i = 0;
        while i < bytes.len() && !self.lost {
            match &mut self.up {
                Up::Body(n) => {
                    let k = (*n).min((bytes.len() - i) as u64);
                    i += k as usize;
                    *n -= k;
                    if *n == 0 {
                        self.up = Up::Head(Vec::new());
                    }
                }
                Up::Head(h) => match take_until_end(h, bytes, &mut i, false, MAX_HEAD) {
                    // A request line begins with its method's capitals.
                    _ if h.first().is_some_and(|c| !c.is_ascii_uppercase()) => self.lose(),
                    None => self.lose(),
                    Some(false) => {}
                    Some(true) => {
                        let head = std::mem::take(h);
                        match self.asked_by(&head) {
                            Some((asked, body)) if self.asked.len() < MAX_ASKED => {
                                self.asked.push_back(asked);
                                out.push(asked);
                                self.up = match body {
                                    Body::Length(n) if n > 0 => Up::Body(n),
                                    _ => Up::Head(Vec::new()),
                                };
                            }
                            _ => self.lose(),
                        }
                    }
                },
            }
        }
        out
    }

    /// The request a head makes and its body's framing; `None` if not followed.
    fn asked_by(&self, head: &[u8]) -> Option<(Asked, Body)> {
        let line_end = head.iter().position(|&c| c == b'\n')?;
        let line = head[..line_end]
            .strip_suffix(b"\r")
            .unwrap_or(&head[..line_end]);
        let mut parts = line.split(|&c| c == b' ');
        let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
        if method.is_empty()
            || !method.iter().all(|c| c.is_ascii_uppercase())
            || !version.starts_with(b"HTTP/1.")
        {
            return None;
        }
        let body = body_of(head).ok()?;
        // A chunked request body is not followed, nor a tunnel.
        if body == Body::Chunked || method == b"CONNECT" {
            return None;
        }
        let host = headers(head)
            .find(|(n, _)| n.eq_ignore_ascii_case(b"host"))
            .map_or(&b""[..], |(_, v)| v);
        let asked = Asked {
            key: request_key(head),
            moved: (method == b"GET")
                .then(|| moved_key(host, target))
                .flatten(),
            head: method == b"HEAD",
        };
        Some((asked, body))
    }

    /// Bytes delivered down the flow, with the pieces (name, offset in `bytes`) they were
    /// rebuilt from, in order: the responses that ended in them, with their names.
    pub fn down(
        &mut self,
        bytes: &[u8],
        pieces: impl Iterator<Item = (Name, usize)>,
    ) -> Vec<(Asked, Vec<Name>)> {
        let marks = self.parse_down(bytes);
        let mut done = vec![];
        let mut marks = marks.into_iter().peekable();
        for (name, at) in pieces {
            while let Some((_, m)) = marks.next_if(|(pos, _)| *pos <= at) {
                self.apply(m, &mut done);
            }
            if let Some((_, names)) = &mut self.answering {
                if names.len() < NAMES_PER_RESPONSE {
                    names.push(name);
                }
            }
        }
        for (_, m) in marks {
            self.apply(m, &mut done);
        }
        if self.lost {
            self.answering = None;
        }
        done
    }

    /// The flow ended: a response that ran to the close is done.
    pub fn close(&mut self) -> Option<(Asked, Vec<Name>)> {
        match self.down {
            Down::Rest if !self.lost => self.answering.take(),
            _ => None,
        }
    }

    fn apply(&mut self, m: Mark, done: &mut Vec<(Asked, Vec<Name>)>) {
        match m {
            Mark::Begin(a) => self.answering = Some((a, vec![])),
            Mark::End => done.extend(self.answering.take()),
        }
    }

    /// Follow the responses through `bytes`: where each begins and ends.
    fn parse_down(&mut self, bytes: &[u8]) -> Vec<(usize, Mark)> {
        let mut marks = vec![];
        let mut i = 0;
        while i < bytes.len() && !self.lost {
            match &mut self.down {
                Down::Idle => match self.asked.pop_front() {
                    Some(a) => {
                        marks.push((i, Mark::Begin(a)));
                        self.down = Down::Head(Vec::new());
                    }
                    // A response nobody asked for.
                    None => self.lose(),
                },
                Down::Head(h) => match take_until_end(h, bytes, &mut i, false, MAX_HEAD) {
                    // A status line begins `HTTP/`.
                    _ if h.first().is_some_and(|&c| c != b'H') => self.lose(),
                    None => self.lose(),
                    Some(false) => {}
                    Some(true) => {
                        let head = std::mem::take(h);
                        let asked = marks
                            .iter()
                            .rev()
                            .find_map(|(_, m)| match m {
                                Mark::Begin(a) => Some(*a),
                                Mark::End => None,
                            })
                            .or(self.answering.as_ref().map(|a| a.0));
                        match self.after_head(&head, asked.is_some_and(|a| a.head)) {
                            Some(Some(next)) => self.down = next,
                            Some(None) => {
                                marks.push((i, Mark::End));
                                self.down = Down::Idle;
                            }
                            None => self.lose(),
                        }
                    }
                },
                Down::Fixed(n) => {
                    let k = (*n).min((bytes.len() - i) as u64);
                    i += k as usize;
                    *n -= k;
                    if *n == 0 {
                        marks.push((i, Mark::End));
                        self.down = Down::Idle;
                    }
                }
                Down::ChunkSize(l) => match take_until_end(l, bytes, &mut i, true, 1024) {
                    None => self.lose(),
                    Some(false) => {}
                    Some(true) => {
                        let line = std::mem::take(l);
                        let hex = line
                            .split(|&c| c == b';' || c == b'\r' || c == b'\n')
                            .next()
                            .unwrap_or_default()
                            .trim_ascii();
                        match std::str::from_utf8(hex)
                            .ok()
                            .and_then(|s| u64::from_str_radix(s, 16).ok())
                        {
                            Some(0) => self.down = Down::Trailer(Vec::new()),
                            Some(n) => self.down = Down::ChunkData(n),
                            None => self.lose(),
                        }
                    }
                },
                Down::ChunkData(n) => {
                    let k = (*n).min((bytes.len() - i) as u64);
                    i += k as usize;
                    *n -= k;
                    if *n == 0 {
                        self.down = Down::ChunkEnd(2);
                    }
                }
                Down::ChunkEnd(k) => {
                    // The CRLF after the data: anything else and the framing is not followed.
                    let want = if *k == 2 { b'\r' } else { b'\n' };
                    if bytes[i] != want {
                        self.lose();
                        continue;
                    }
                    i += 1;
                    *k -= 1;
                    if *k == 0 {
                        self.down = Down::ChunkSize(Vec::new());
                    }
                }
                Down::Trailer(l) => match take_until_end(l, bytes, &mut i, true, MAX_HEAD) {
                    None => self.lose(),
                    Some(false) => {}
                    Some(true) => {
                        if l.as_slice() == b"\r\n" || l.as_slice() == b"\n" {
                            marks.push((i, Mark::End));
                            self.down = Down::Idle;
                        } else {
                            l.clear();
                        }
                    }
                },
                Down::Rest => i = bytes.len(),
            }
        }
        marks
    }

    /// After a response's head: how its body goes (`Some(None)`: it has none and is done);
    /// `None` if not followed.
    fn after_head(&self, head: &[u8], to_head: bool) -> Option<Option<Down>> {
        let line = head.split(|&c| c == b'\n').next()?;
        let mut parts = line.split(|&c| c == b' ');
        let version = parts.next()?;
        let status: u16 = std::str::from_utf8(parts.next()?)
            .ok()?
            .trim()
            .parse()
            .ok()?;
        if !version.starts_with(b"HTTP/1.") {
            return None;
        }
        match status {
            101 => None,
            // An interim response: the final one follows, for the same request.
            100..=199 => Some(Some(Down::Head(Vec::new()))),
            204 | 304 => Some(None),
            _ if to_head => Some(None),
            _ => match body_of(head).ok()? {
                Body::Length(0) => Some(None),
                Body::Length(n) => Some(Some(Down::Fixed(n))),
                Body::Chunked => Some(Some(Down::ChunkSize(Vec::new()))),
                Body::None => Some(Some(Down::Rest)),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(path: &str) -> Vec<u8> {
        format!("GET {path} HTTP/1.1\r\nHost: news.example\r\nAccept: */*\r\n\r\n").into_bytes()
    }

    fn ok(body: &str) -> Vec<u8> {
        format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    }

    /// Deliver `bytes` as pieces of `size` bytes each named by their offset in `stream`.
    fn deliver(
        x: &mut Exchanges,
        bytes: &[u8],
        from: usize,
        size: usize,
    ) -> Vec<(Asked, Vec<Name>)> {
        let pieces = (0..bytes.len())
            .step_by(size)
            .map(|at| (Name((from + at) as u64), at));
        x.down(bytes, pieces)
    }

    #[test]
    fn a_moved_key_is_the_host_and_the_last_segment() {
        let a = moved_key(b"n.example", b"/world/h97/1234-storm.html");
        assert_eq!(
            a,
            moved_key(b"n.example", b"/world/h98/1234-storm.html?ref=top")
        );
        assert_eq!(
            a,
            moved_key(b"n.example", b"http://n.example/x/1234-storm.html")
        );
        assert_ne!(a, moved_key(b"m.example", b"/world/h97/1234-storm.html"));
        assert_ne!(a, moved_key(b"n.example", b"/world/h97/1235-storm.html"));
        assert_eq!(moved_key(b"n.example", b"/world/"), None);
        assert_eq!(moved_key(b"n.example", b"http://n.example"), None);
    }

    #[test]
    fn every_response_on_a_kept_alive_flow_is_paired_with_its_request() {
        let mut x = Exchanges::default();
        let mut up = get("/a");
        up.extend(get("/b"));
        let asked = x.up(&up[..10]);
        assert!(asked.is_empty());
        let asked = [asked, x.up(&up[10..])].concat();
        assert_eq!(asked.len(), 2);
        // A fixed-length response, then a chunked one, delivered in awkward pieces.
        let mut down = ok(&"a".repeat(300));
        let first_len = down.len();
        down.extend_from_slice(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n100\r\n");
        down.extend_from_slice(&[b'b'; 256]);
        down.extend_from_slice(b"\r\n0\r\nX-T: 1\r\n\r\n");
        let mut done = vec![];
        let mut at = 0;
        for part in down.chunks(37) {
            done.extend(deliver(&mut x, part, at, 10));
            at += part.len();
        }
        assert_eq!(done.len(), 2, "{done:?}");
        assert_eq!(done[0].0, asked[0]);
        assert_eq!(done[1].0, asked[1]);
        // Every piece is the response's it starts in.
        assert!(done[0].1.iter().all(|n| (n.0 as usize) < first_len));
        assert!(done[1].1.iter().all(|n| (n.0 as usize) >= first_len));
        assert!(x.followed());
    }

    #[test]
    fn bodiless_responses_and_an_interim_one_end_where_they_should() {
        let mut x = Exchanges::default();
        let mut up = b"HEAD /h HTTP/1.1\r\nHost: a\r\n\r\n".to_vec();
        up.extend(get("/n"));
        up.extend(b"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello".to_vec());
        up.extend(get("/c"));
        assert_eq!(x.up(&up).len(), 4);
        let mut down = b"HTTP/1.1 200 OK\r\nContent-Length: 999\r\n\r\n".to_vec();
        down.extend(b"HTTP/1.1 304 Not Modified\r\nETag: x\r\n\r\n");
        down.extend(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok",
        );
        down.extend(b"HTTP/1.1 200 OK\r\n\r\nto the close");
        let done = deliver(&mut x, &down, 0, 16);
        assert_eq!(done.len(), 3);
        let last = x
            .close()
            .expect("the response to the close ends with the flow");
        assert!(!last.1.is_empty());
        assert!(x.followed());
    }

    #[test]
    fn what_is_not_followed_stops_the_tracking() {
        let mut x = Exchanges::default();
        assert!(x.up(b"\x16\x03\x01\x02\x00\r\n\r\n").is_empty());
        assert!(!x.followed());
        let mut y = Exchanges::default();
        y.up(&get("/a"));
        deliver(
            &mut y,
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
            0,
            8,
        );
        assert!(!y.followed());
        let mut z = Exchanges::default();
        assert!(deliver(&mut z, &ok("nobody asked"), 0, 4).is_empty());
        assert!(!z.followed());
        let mut w = Exchanges::default();
        w.up(&[b'G'; MAX_HEAD + 10]);
        assert!(!w.followed());
        // A tunnel is not followed; nor a chunk's data without its CRLF.
        let mut t = Exchanges::default();
        t.up(b"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n");
        assert!(!t.followed());
        let mut c = Exchanges::default();
        c.up(&get("/a"));
        deliver(
            &mut c,
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY",
            0,
            8,
        );
        assert!(!c.followed());
    }

    #[test]
    fn a_moved_key_two_requests_share_is_never_used() {
        let mut r = Remembered::default();
        let mut x = Exchanges::default();
        let asked = x.up(&[
            get("/world/h97/1234-storm.html"),
            get("/world/index.html"),
            get("/sports/index.html"),
        ]
        .concat());
        for (i, a) in asked.iter().enumerate() {
            r.remember(a, vec![Name(i as u64 + 1)]);
        }
        let later = x.up(&[get("/world/h98/1234-storm.html"), get("/tech/index.html")].concat());
        assert_eq!(r.names_for(&later[0]), Some((&[Name(1)][..], true)));
        assert_eq!(r.names_for(&later[1]), None, "index.html names two pages");
        assert_eq!(r.names_for(&asked[2]), Some((&[Name(3)][..], false)));
    }

    #[test]
    fn the_remembered_are_bounded_and_forget_the_oldest() {
        let mut r = Remembered::default();
        let asked = |i: u64| Asked {
            key: Name(i),
            moved: Some(Name(1 << 40 | i)),
            head: false,
        };
        for i in 0..MAX_REMEMBERED as u64 + 3 {
            r.remember(&asked(i), vec![Name(i)]);
        }
        assert_eq!(r.len(), MAX_REMEMBERED);
        assert_eq!(r.names_for(&asked(0)), None);
        assert!(r.moved.len() <= MAX_REMEMBERED);
        assert!(r.names_for(&asked(MAX_REMEMBERED as u64 + 2)).is_some());
    }

    #[test]
    fn a_moved_key_stays_ambiguous_while_a_key_sharing_it_is_remembered() {
        let mut r = Remembered::default();
        let shared = Some(Name(7));
        let asked = |i: u64, moved| Asked {
            key: Name(i),
            moved,
            head: false,
        };
        r.remember(&asked(1, shared), vec![Name(1)]);
        r.remember(&asked(2, shared), vec![Name(2)]);
        // Enough others that the first, and only the first, is forgotten.
        for i in 0..MAX_REMEMBERED as u64 - 1 {
            r.remember(&asked(100 + i, None), vec![Name(3)]);
        }
        assert_eq!(r.names_for(&asked(1, None)), None);
        assert!(r.names_for(&asked(2, None)).is_some());
        // A third page with the same last segment: the key is still shared with the second.
        assert_eq!(r.names_for(&asked(9, shared)), None);
    }
}
