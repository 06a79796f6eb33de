//! Beyond the thesis: feedback at the request ([`super::Destination::request`]).
//!
//! The thesis's phone predicts from what arrives (§4.3.4): its advertisements follow the past
//! flowlet that the arriving segments match, from the last match on, so nothing can be
//! advertised before the first segment of a response has reached the phone, and nothing the
//! source encodes before the advertisement reaches it can be replaced. In the thesis's traces a
//! flow is long and that is a small share. On the web it is most of it: a page of a few tens
//! of kilobytes has been encoded whole by the time its first segment arrives (the relay runs
//! its lead ahead of the phone), and every connection begins a new flow.
//!
//! The phone also sees what it asks for. A page asked for again (the same request line and
//! host) usually begins with the flowlet that answered it last time, edited or not. So the
//! phone remembers, for each request that began a flow, the flowlet its response began with
//! ([`Responses`]), and when the same request goes up again it advertises that flowlet's names,
//! and those of the flowlets that followed it, up to [`super::select::SelectConfig::hint_names`],
//! sent in front of the request on the connection's ordered stream: the source holds them in
//! its feedback cache before the target has answered. Every later request on a connection,
//! and a page whose URL changed, is [`super::exchange`]'s: it follows the HTTP/1 exchanges to
//! remember each response's names.
//!
//! The key ([`request_key`]): for an HTTP/1 request, its request line and `Host` header (the
//! other headers vary between two asks for one page: cookies, dates, caching validators);
//! otherwise the request's first [`KEY_PREFIX`] bytes (a TLS hello's are random, so it never
//! repeats: nothing to find in ciphertext anyway). The index lives in memory only, at most
//! [`MAX_RESPONSES`] requests, the oldest forgotten first; after a restart it is learnt again.

use std::collections::{HashMap, VecDeque};

use super::store::{FlowletId, Store};
use crate::lru::Lru;
use crate::name::Name;

/// Requests remembered at most.
pub const MAX_RESPONSES: usize = 1 << 16;

/// Bytes of a request that is not HTTP/1 its key covers.
pub const KEY_PREFIX: usize = 256;

/// The flowlet each remembered request's response began with.
#[derive(Debug, Default)]
pub struct Responses {
    first: HashMap<Name, FlowletId>,
    /// Keys in the order first remembered, oldest first.
    order: VecDeque<Name>,
}

impl Responses {
    /// The response to the request `key` began with `flowlet` (replacing what it began with
    /// before).
    pub fn remember(&mut self, key: Name, flowlet: FlowletId) {
        if self.first.insert(key, flowlet).is_none() {
            self.order.push_back(key);
            while self.order.len() > MAX_RESPONSES {
                if let Some(old) = self.order.pop_front() {
                    self.first.remove(&old);
                }
            }
        }
    }

    /// The flowlet the last response to `key` began with, if remembered.
    pub fn first(&self, key: Name) -> Option<FlowletId> {
        self.first.get(&key).copied()
    }

    /// Requests remembered.
    pub fn len(&self) -> usize {
        self.first.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.first.is_empty()
    }
}

/// The key of a request whose first bytes are `bytes` (see the module's doc).
pub fn request_key(bytes: &[u8]) -> Name {
    match http_line_and_host(bytes) {
        Some((line, host)) => {
            let mut k = Vec::with_capacity(line.len() + host.len() + 1);
            k.extend_from_slice(line);
            k.push(b'\n');
            k.extend_from_slice(host);
            Name::of(&k)
        }
        None => Name::of(&bytes[..bytes.len().min(KEY_PREFIX)]),
    }
}

/// An HTTP/1 request's line and its `Host` header's value (trimmed), when `bytes` begins
/// with a whole request line ending in ` HTTP/1.x`; the host is empty when no header within
/// `bytes` names it.
fn http_line_and_host(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let end = bytes.windows(2).position(|w| w == b"\r\n")?;
    let line = &bytes[..end];
    let method_ok = line
        .iter()
        .take_while(|&&c| c != b' ')
        .all(|c| c.is_ascii_uppercase());
    if !method_ok || !line.contains(&b' ') || !line.windows(7).any(|w| w == b" HTTP/1") {
        return None;
    }
    let mut host: &[u8] = b"";
    for h in bytes[end + 2..].split(|&c| c == b'\n') {
        let h = h.strip_suffix(b"\r").unwrap_or(h);
        if h.is_empty() {
            break;
        }
        if h.len() > 5 && h[..5].eq_ignore_ascii_case(b"host:") {
            host = h[5..].trim_ascii();
            break;
        }
    }
    Some((line, host))
}

/// Up to `max` names of the chain of flowlets from `first` on, in stream order, leaving out
/// those `known` (seen from the source or advertised to it) or no longer held; each taken is
/// added to `known`.
pub fn names(store: &Store, first: FlowletId, max: usize, known: &mut Lru) -> Vec<Name> {
    let mut out = Vec::new();
    let mut id = Some(first);
    let mut walked = 0;
    while let Some(f) = id.and_then(|i| store.flowlet(i)) {
        for &n in &f.names {
            if walked == max {
                return out;
            }
            walked += 1;
            if known.contains(n) || store.get(n).is_none() {
                continue;
            }
            known.insert(n, 1);
            out.push(n);
        }
        id = f.next;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http_request_is_keyed_by_its_line_and_host_alone() {
        let a = b"GET /docs/a.html HTTP/1.1\r\nHost: example.org\r\nCookie: s=1\r\n\r\n";
        let b = b"GET /docs/a.html HTTP/1.1\r\nUser-Agent: x\r\nhost:  example.org \r\nCookie: s=2\r\n\r\n";
        let c = b"GET /docs/b.html HTTP/1.1\r\nHost: example.org\r\n\r\n";
        let d = b"GET /docs/a.html HTTP/1.1\r\nHost: example.net\r\n\r\n";
        assert_eq!(request_key(a), request_key(b));
        assert_ne!(request_key(a), request_key(c));
        assert_ne!(request_key(a), request_key(d));
        // Not HTTP/1: the first bytes.
        let tls = [0x16u8, 3, 1, 0, 5, 1, 2, 3, 4, 5];
        assert_eq!(request_key(&tls), Name::of(&tls));
        let long = vec![b'x'; 1000];
        assert_eq!(request_key(&long), Name::of(&long[..KEY_PREFIX]));
        // A line without its end is not taken for a request line.
        assert_eq!(request_key(b"GET / HTTP/1.1"), Name::of(b"GET / HTTP/1.1"));
    }

    #[test]
    fn the_index_forgets_its_oldest_requests_first() {
        let mut r = Responses::default();
        for i in 0..MAX_RESPONSES as u64 + 2 {
            r.remember(Name(i), i);
        }
        r.remember(Name(5), 99); // replaced, not added
        assert_eq!(r.len(), MAX_RESPONSES);
        assert_eq!((r.first(Name(0)), r.first(Name(1))), (None, None));
        assert_eq!(r.first(Name(5)), Some(99));
        assert_eq!(
            r.first(Name(MAX_RESPONSES as u64 + 1)),
            Some(MAX_RESPONSES as u64 + 1)
        );
    }
}
