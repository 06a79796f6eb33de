//! Compression of the carried connections' downstream with zstd: the baselines asymmetric
//! caching is measured against (`roam lab dedup`), and a combination with it.
//!
//! - **`zstd`**: each connection's bytes from the target are one zstd stream, flushed at every
//!   read, so a connection compresses against everything it carried before (as a compressing
//!   proxy or `Content-Encoding: zstd` over a kept-alive connection would).
//! - **`zstd-dict`**: as `zstd`, with the previous response to the same request as a
//!   dictionary, the idea of RFC 9842's `dcz` (Compression Dictionary Transport) moved into the
//!   relay: both ends keep, per target and request line, the last connection's downstream
//!   bytes (at most [`MAX_DICTIONARY`], the least recently used dropped beyond
//!   [`DictionaryConfig::bytes`]); the proxy opens the connection's upstream with the
//!   XXH3-64 of the dictionary it holds for the request (8 bytes, zero for none), and the
//!   relay compresses with its own only if it hashes the same. Only connections whose program
//!   speaks first can have one (HTTP can; IMAP, where the server greets first, cannot: there
//!   `zstd-dict` is `zstd`). The relay keys its dictionaries by the phone's address as well,
//!   so no phone's responses serve as another's dictionary.
//! - **`dedup` with `zstd`**: asymmetric caching's records ([`super::dedup`]) compressed as in
//!   `zstd` (literal bytes the caches did not find still shrink).
//!
//! **Framing.** Downstream, the compressed stream begins with one byte, 1 if the relay used
//! the dictionary and 0 if not; each IROB is what one flush produced, so each holds whole
//! inner IROBs' bytes (what the inner codec sent as one IROB comes out of one IROB here).
//! Upstream is not compressed (requests and feedback are small). A stream that does not
//! decompress, or a delivery that would expand past [`MAX_EXPANSION`], ends the connection.
//!
//! **Two threads, one stream.** With `dedup`, the relay also sends downstream from the thread
//! that reads upstream: the source's repairs (records sent again when the phone could not
//! rebuild them). They go through the same encoder as the stream (`Codec::prepare_back`),
//! and the relay's end is `Codec::ordered`: carry makes and sends each batch under one lock
//! per connection, so IROBs are sent in the order the encoder made them, and the multi-socket
//! delivers them in the order they were sent whatever their labels (each depends on all
//! before it). The phone takes a repair anywhere among the records after it. Upstream, in
//! dictionary mode, the 8-byte header goes before everything: the phone's feedback before
//! the program has spoken goes after a header naming no dictionary.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use zstd::stream::raw::{Decoder, Encoder, InBuffer, Operation, OutBuffer};

use super::carry::{lock, Codec};
use super::Error;

/// The feature word asking for per-connection zstd.
pub const ZSTD: &str = "zstd";
/// The feature word asking for zstd with the previous response as a dictionary.
pub const ZSTD_DICT: &str = "zstd-dict";

/// The zstd level the relay compresses at (zstd's default: fast, most of the gain).
pub const LEVEL: i32 = 3;
/// The most of one connection kept as a dictionary.
pub const MAX_DICTIONARY: usize = 1 << 20;
/// The most one delivery may decompress to.
pub const MAX_EXPANSION: usize = 16 << 20;
/// The largest window the proxy's decoder accepts (2^23 = 8 MiB): bounds its memory.
const WINDOW_LOG_MAX: u32 = 23;
/// Bytes of the upstream's dictionary header.
const HEADER: usize = 8;
/// How much of a program's first bytes names its request (the request line, at most).
const REQUEST_LINE: usize = 256;

/// How many bytes of dictionaries one end keeps.
#[derive(Clone, Copy, Debug)]
pub struct DictionaryConfig {
    /// Total bytes kept, least recently used dropped first.
    pub bytes: usize,
}

impl Default for DictionaryConfig {
    fn default() -> DictionaryConfig {
        DictionaryConfig { bytes: 64 << 20 }
    }
}

/// Previous responses by request, bounded in bytes (least recently used dropped).
pub struct Dictionaries {
    limit: usize,
    held: usize,
    map: HashMap<u64, Arc<Vec<u8>>>,
    order: VecDeque<u64>,
}

impl std::fmt::Debug for Dictionaries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dictionaries")
            .field("held", &self.held)
            .field("limit", &self.limit)
            .field("count", &self.map.len())
            .finish()
    }
}

impl Dictionaries {
    /// An empty store that keeps at most `config.bytes`.
    pub fn new(config: DictionaryConfig) -> Dictionaries {
        Dictionaries {
            limit: config.bytes,
            held: 0,
            map: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    fn get(&mut self, key: u64) -> Option<Arc<Vec<u8>>> {
        let d = self.map.get(&key)?.clone();
        self.order.retain(|k| *k != key);
        self.order.push_back(key);
        Some(d)
    }

    fn put(&mut self, key: u64, dict: Vec<u8>) {
        if dict.is_empty() || dict.len() > self.limit {
            return;
        }
        if let Some(old) = self.map.remove(&key) {
            self.held -= old.len();
            self.order.retain(|k| *k != key);
        }
        self.held += dict.len();
        self.map.insert(key, Arc::new(dict));
        self.order.push_back(key);
        while self.held > self.limit {
            let Some(k) = self.order.pop_front() else {
                break;
            };
            if let Some(d) = self.map.remove(&k) {
                self.held -= d.len();
            }
        }
    }

    /// Bytes held.
    pub fn held(&self) -> usize {
        self.held
    }
}

fn failed(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Compress {
        what: format!("{what}: {e}"),
    }
}

/// A dictionary's name in the header: XXH3-64 of its bytes, never zero (zero is "none").
fn dict_hash(d: &[u8]) -> u64 {
    roam_dedup::Name::of(d).0.max(1)
}

/// The key a connection's dictionary is kept under: its target, its request's first line and
/// (at the relay) its phone.
fn request_key(scope: &str, first: &[u8]) -> u64 {
    let line = &first[..first.len().min(REQUEST_LINE)];
    let line = line.split(|b| *b == b'\n').next().unwrap_or(line);
    let mut k = scope.as_bytes().to_vec();
    k.push(0);
    k.extend_from_slice(line);
    roam_dedup::Name::of(&k).0
}

/// What one end records of a connection's downstream, to keep as the next dictionary.
struct Recording {
    store: Arc<Mutex<Dictionaries>>,
    scope: String,
    key: Option<u64>,
    bytes: Vec<u8>,
    over: bool,
}

impl Recording {
    fn new(store: Arc<Mutex<Dictionaries>>, scope: String) -> Recording {
        Recording {
            store,
            scope,
            key: None,
            bytes: Vec::new(),
            over: false,
        }
    }

    fn add(&mut self, b: &[u8]) {
        if self.over || self.bytes.len() + b.len() > MAX_DICTIONARY {
            self.over = true;
            self.bytes = Vec::new();
            return;
        }
        self.bytes.extend_from_slice(b);
    }

    fn keep(&mut self) {
        if let (Some(key), false) = (self.key, self.over) {
            lock(&self.store).put(key, std::mem::take(&mut self.bytes));
        }
    }
}

/// The relay's end: compresses what `inner` sends downstream.
pub(super) struct RelayZstd {
    inner: Arc<dyn Codec>,
    state: Mutex<RelayState>,
}

struct RelayState {
    encoder: Option<Encoder<'static>>,
    /// Upstream header bytes still expected (dictionary mode), and those read.
    header: Vec<u8>,
    header_left: usize,
    /// The dictionary the proxy holds for this request, once its header and request are read.
    offered: Option<u64>,
    recording: Option<Recording>,
}

impl RelayZstd {
    /// The relay's end around `inner`; with `dicts`, dictionary mode for a connection to
    /// `target` from `phone`.
    pub(super) fn new(
        inner: Arc<dyn Codec>,
        dicts: Option<Arc<Mutex<Dictionaries>>>,
        target: &str,
        phone: Option<std::net::IpAddr>,
    ) -> RelayZstd {
        let header_left = if dicts.is_some() { HEADER } else { 0 };
        let recording = dicts.map(|store| Recording {
            store,
            scope: format!(
                "{target} {}",
                phone.map_or(String::new(), |p| p.to_string())
            ),
            key: None,
            bytes: Vec::new(),
            over: false,
        });
        RelayZstd {
            inner,
            state: Mutex::new(RelayState {
                encoder: None,
                header: Vec::new(),
                header_left,
                offered: None,
                recording,
            }),
        }
    }
}

/// Run `op` over `input` (or flush it, with `input` None), appending its output to `out`.
fn drive(op: &mut impl Operation, input: Option<&[u8]>, out: &mut Vec<u8>) -> std::io::Result<()> {
    let mut buf = [0u8; 32 << 10];
    match input {
        Some(data) => {
            let mut inb = InBuffer::around(data);
            while inb.pos() < data.len() {
                let mut o = OutBuffer::around(&mut buf[..]);
                op.run(&mut inb, &mut o)?;
                let n = o.pos();
                out.extend_from_slice(&buf[..n]);
            }
        }
        None => loop {
            let mut o = OutBuffer::around(&mut buf[..]);
            let left = op.flush(&mut o)?;
            let n = o.pos();
            out.extend_from_slice(&buf[..n]);
            if left == 0 {
                break;
            }
        },
    }
    Ok(())
}

impl RelayZstd {
    /// Compress `irobs` (what the inner codec sent, stream or repairs) into `send`, one IROB
    /// each, in this one stream: the first call makes the encoder (and the flag byte), each
    /// IROB is flushed whole, and the recording sees the bytes in the order the proxy's
    /// decoder will.
    fn encode(&self, irobs: Vec<Vec<u8>>, send: &mut Vec<Vec<u8>>) -> Result<(), Error> {
        if irobs.is_empty() {
            return Ok(());
        }
        let mut st = lock(&self.state);
        let mut out = Vec::new();
        if st.encoder.is_none() {
            // The dictionary is used only if the proxy's header and request came first and
            // the proxy holds what this end holds.
            let dict = match (&st.recording, st.offered) {
                (Some(r), Some(h)) => r
                    .key
                    .and_then(|k| lock(&r.store).get(k))
                    .filter(|d| dict_hash(d) == h),
                _ => None,
            };
            let enc = match &dict {
                Some(d) => Encoder::with_dictionary(LEVEL, d),
                None => Encoder::new(LEVEL),
            }
            .map_err(|e| failed("zstd", e))?;
            st.encoder = Some(enc);
            out.push(u8::from(dict.is_some()));
        }
        let RelayState {
            encoder, recording, ..
        } = &mut *st;
        let enc = encoder.as_mut().expect("made above");
        for b in irobs {
            if let Some(r) = recording.as_mut() {
                r.add(&b);
            }
            drive(enc, Some(&b), &mut out).map_err(|e| failed("zstd", e))?;
            drive(enc, None, &mut out).map_err(|e| failed("zstd", e))?;
            send.push(std::mem::take(&mut out));
        }
        Ok(())
    }
}

/// Both directions' threads feed the one zstd stream: the stream's records from `outgoing`,
/// the dedup source's repairs (records sent again, answering the phone's requests) from
/// `prepare_back`. Each IROB must reach the proxy's decoder in the order the encoder made
/// it, so the codec is [`Codec::ordered`]: carry makes and sends each batch under one lock.
impl Codec for RelayZstd {
    fn outgoing(&self, data: &[u8], more: bool, send: &mut Vec<Vec<u8>>) -> Result<(), Error> {
        let mut inner = Vec::new();
        self.inner.outgoing(data, more, &mut inner)?;
        self.encode(inner, send)
    }

    fn incoming(
        &self,
        start: bool,
        mut data: Bytes,
        write: &mut Vec<Bytes>,
        back: &mut Vec<Vec<u8>>,
    ) -> Result<(), Error> {
        {
            let mut st = lock(&self.state);
            if st.header_left > 0 {
                let n = st.header_left.min(data.len());
                st.header.extend_from_slice(&data[..n]);
                st.header_left -= n;
                data = data.slice(n..);
                if st.header_left == 0 {
                    let h = u64::from_be_bytes(st.header[..].try_into().expect("8 bytes"));
                    st.offered = Some(h);
                }
                if data.is_empty() {
                    return Ok(());
                }
            }
            // The request names the dictionary only if it came before the downstream began
            // (after, none can be used, and the bytes may be the phone's feedback).
            let RelayState {
                encoder, recording, ..
            } = &mut *st;
            if let (Some(r), None) = (recording.as_mut(), encoder.as_ref()) {
                if r.key.is_none() {
                    r.key = Some(request_key(&r.scope, &data));
                }
            }
        }
        self.inner.incoming(start, data, write, back)
    }

    /// The inner codec's request to acknowledge, compressed into the stream.
    fn waiting(&self, send: &mut Vec<Vec<u8>>) -> Result<(), Error> {
        let mut inner = Vec::new();
        self.inner.waiting(&mut inner)?;
        self.encode(inner, send)
    }

    /// The inner codec's last IROBs, compressed into the stream.
    fn ended(&self, send: &mut Vec<Vec<u8>>) -> Result<(), Error> {
        let mut inner = Vec::new();
        self.inner.ended(&mut inner)?;
        self.encode(inner, send)
    }

    /// The inner codec's repairs, compressed into the stream.
    fn prepare_back(&self, back: &mut Vec<Vec<u8>>) -> Result<(), Error> {
        self.inner.prepare_back(back)?;
        let plain = std::mem::take(back);
        self.encode(plain, back)
    }

    fn ordered(&self) -> bool {
        true
    }

    fn settled(&self) -> bool {
        self.inner.settled()
    }

    fn paced(&self) -> bool {
        self.inner.paced()
    }

    fn ahead(&self) -> u64 {
        self.inner.ahead()
    }

    fn close(&self) {
        self.inner.close();
        if let Some(r) = lock(&self.state).recording.as_mut() {
            r.keep();
        }
    }
}

/// The proxy's end: decompresses what arrives and hands it to `inner`.
pub(super) struct ProxyZstd {
    inner: Arc<dyn Codec>,
    state: Mutex<ProxyState>,
}

struct ProxyState {
    decoder: Option<Decoder<'static>>,
    /// The next decompressed bytes begin an inner IROB.
    starts: bool,
    /// Dictionary mode: whether the header was sent, and the dictionary it named.
    header_sent: bool,
    offered: Option<Arc<Vec<u8>>>,
    recording: Option<Recording>,
}

impl ProxyZstd {
    /// The proxy's end around `inner`; with `dicts`, dictionary mode for a connection to
    /// `target`.
    pub(super) fn new(
        inner: Arc<dyn Codec>,
        dicts: Option<Arc<Mutex<Dictionaries>>>,
        target: &str,
    ) -> ProxyZstd {
        let recording = dicts.map(|store| Recording::new(store, target.to_string()));
        ProxyZstd {
            inner,
            state: Mutex::new(ProxyState {
                decoder: None,
                starts: true,
                header_sent: false,
                offered: None,
                recording,
            }),
        }
    }
}

impl Codec for ProxyZstd {
    fn outgoing(&self, data: &[u8], more: bool, send: &mut Vec<Vec<u8>>) -> Result<(), Error> {
        {
            let mut st = lock(&self.state);
            if !st.header_sent && !data.is_empty() {
                if let Some(r) = st.recording.as_mut() {
                    let key = request_key(&r.scope, data);
                    r.key = Some(key);
                    let held = lock(&r.store).get(key);
                    let h = held.as_ref().map_or(0, |d| dict_hash(d));
                    st.offered = held;
                    send.push(h.to_be_bytes().to_vec());
                }
                st.header_sent = true;
            }
        }
        self.inner.outgoing(data, more, send)
    }

    fn incoming(
        &self,
        start: bool,
        mut data: Bytes,
        write: &mut Vec<Bytes>,
        back: &mut Vec<Vec<u8>>,
    ) -> Result<(), Error> {
        let plain = {
            let mut st = lock(&self.state);
            if start {
                st.starts = true;
            }
            if st.decoder.is_none() {
                let Some(&flag) = data.first() else {
                    return Ok(());
                };
                data = data.slice(1..);
                let dict = match flag {
                    0 => None,
                    1 => Some(st.offered.clone().ok_or_else(|| {
                        failed("downstream", "the relay used a dictionary never offered")
                    })?),
                    f => return Err(failed("downstream", format!("unknown first byte {f}"))),
                };
                let mut dec = match &dict {
                    Some(d) => Decoder::with_dictionary(d),
                    None => Decoder::new(),
                }
                .map_err(|e| failed("zstd", e))?;
                dec.set_parameter(zstd::zstd_safe::DParameter::WindowLogMax(WINDOW_LOG_MAX))
                    .map_err(|e| failed("zstd", e))?;
                st.decoder = Some(dec);
            }
            let mut plain = Vec::new();
            let dec = st.decoder.as_mut().expect("made above");
            let mut inb = InBuffer::around(&data[..]);
            let mut buf = [0u8; 32 << 10];
            loop {
                let mut o = OutBuffer::around(&mut buf[..]);
                dec.run(&mut inb, &mut o)
                    .map_err(|e| failed("downstream zstd", e))?;
                let n = o.pos();
                plain.extend_from_slice(&buf[..n]);
                if plain.len() > MAX_EXPANSION {
                    return Err(failed(
                        "downstream",
                        format!("a delivery expanding past {MAX_EXPANSION} bytes"),
                    ));
                }
                // Done when the input is used and the output did not fill (nothing held back).
                if inb.pos() == data.len() && n < buf.len() {
                    break;
                }
            }
            if let Some(r) = st.recording.as_mut() {
                r.add(&plain);
            }
            plain
        };
        if plain.is_empty() {
            return Ok(());
        }
        let starts = std::mem::replace(&mut lock(&self.state).starts, false);
        self.inner.incoming(starts, plain.into(), write, back)
    }

    /// In dictionary mode the relay reads the first 8 bytes upstream as the header, so
    /// feedback the inner codec sends before the program has spoken (the target spoke first)
    /// goes after a header naming no dictionary; no dictionary is kept of this connection.
    fn prepare_back(&self, back: &mut Vec<Vec<u8>>) -> Result<(), Error> {
        self.inner.prepare_back(back)?;
        let mut st = lock(&self.state);
        if !back.is_empty() && !st.header_sent && st.recording.is_some() {
            back.insert(0, 0u64.to_be_bytes().to_vec());
            st.header_sent = true;
        }
        Ok(())
    }

    /// In dictionary mode: the header must be sent before anything `prepare_back` makes.
    fn ordered(&self) -> bool {
        lock(&self.state).recording.is_some() || self.inner.ordered()
    }

    fn settled(&self) -> bool {
        self.inner.settled()
    }

    fn close(&self) {
        self.inner.close();
        if let Some(r) = lock(&self.state).recording.as_mut() {
            r.keep();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::carry::Plain;
    use super::super::dedup::{ProxyEnd, RelayEnd};
    use super::*;
    use roam_dedup::destination::DestinationConfig;
    use roam_dedup::source::SourceConfig;
    use roam_dedup::{Destination, Source};

    /// Carry `responses` (one connection each, requesting `request`) from a relay's end to a
    /// proxy's: the bytes delivered and the bytes on the wire.
    fn carry(
        relay_dicts: Option<Arc<Mutex<Dictionaries>>>,
        proxy_dicts: Option<Arc<Mutex<Dictionaries>>>,
        request: &[u8],
        response: &[u8],
    ) -> (Vec<u8>, usize) {
        let relay = RelayZstd::new(Arc::new(Plain), relay_dicts, "t:80", None);
        let proxy = ProxyZstd::new(Arc::new(Plain), proxy_dicts, "t:80");
        let mut up = Vec::new();
        proxy.outgoing(request, false, &mut up).unwrap();
        let (mut w, mut b) = (Vec::new(), Vec::new());
        for (i, irob) in up.into_iter().enumerate() {
            relay.incoming(i == 0, irob.into(), &mut w, &mut b).unwrap();
        }
        assert_eq!(w.concat(), request);
        let mut down = Vec::new();
        for part in response.chunks(5000) {
            relay.outgoing(part, true, &mut down).unwrap();
        }
        let wire: usize = down.iter().map(Vec::len).sum();
        let mut out = Vec::new();
        for irob in down {
            // Deliveries split mid-IROB, as the multi-socket may.
            let irob = Bytes::from(irob);
            let cut = irob.len() / 2;
            proxy
                .incoming(true, irob.slice(..cut), &mut out, &mut b)
                .unwrap();
            proxy
                .incoming(false, irob.slice(cut..), &mut out, &mut b)
                .unwrap();
        }
        relay.close();
        proxy.close();
        (out.concat(), wire)
    }

    fn page(version: u8) -> Vec<u8> {
        let mut p = b"HTTP/1.1 200 OK\r\n\r\n".to_vec();
        for i in 0..3000u32 {
            let x = (i.wrapping_mul(2654435761) >> 7) as u8;
            p.push(x);
            if i % 97 == 0 {
                p.push(version);
            }
        }
        p
    }

    #[test]
    fn zstd_carries_bytes_unchanged() {
        let r = page(1);
        let (out, _) = carry(None, None, b"GET / HTTP/1.1\r\n\r\n", &r);
        assert_eq!(out, r);
    }

    #[test]
    fn the_previous_response_serves_as_dictionary() {
        let rd = Arc::new(Mutex::new(Dictionaries::new(DictionaryConfig::default())));
        let pd = Arc::new(Mutex::new(Dictionaries::new(DictionaryConfig::default())));
        let req = b"GET /a HTTP/1.1\r\nHost: t\r\n\r\n";
        let (out1, wire1) = carry(Some(rd.clone()), Some(pd.clone()), req, &page(1));
        assert_eq!(out1, page(1));
        let (out2, wire2) = carry(Some(rd.clone()), Some(pd.clone()), req, &page(2));
        assert_eq!(out2, page(2));
        assert!(
            wire2 * 4 < wire1,
            "with the previous response as dictionary: {wire2} bytes, without: {wire1}"
        );
        // The proxy forgot its dictionary: the relay must not use its own.
        let pd2 = Arc::new(Mutex::new(Dictionaries::new(DictionaryConfig::default())));
        let (out3, wire3) = carry(Some(rd), Some(pd2), req, &page(3));
        assert_eq!(out3, page(3));
        assert!(wire3 > wire2);
    }

    #[test]
    fn a_corrupt_stream_is_an_error() {
        let proxy = ProxyZstd::new(Arc::new(Plain), None, "t:80");
        let (mut w, mut b) = (Vec::new(), Vec::new());
        let bad = Bytes::from_static(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        assert!(proxy.incoming(true, bad, &mut w, &mut b).is_err());
        let proxy = ProxyZstd::new(Arc::new(Plain), None, "t:80");
        let dictless = Bytes::from_static(&[1, 0x28, 0xb5]);
        assert!(proxy.incoming(true, dictless, &mut w, &mut b).is_err());
    }

    fn source() -> Arc<Mutex<Source>> {
        Arc::new(Mutex::new(Source::new(SourceConfig::default()).unwrap()))
    }

    fn destination() -> Arc<Mutex<Destination>> {
        Arc::new(Mutex::new(Destination::new(DestinationConfig::default())))
    }

    /// Text-like bytes, different for each `seed`.
    fn text(len: u32, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| b"the quick brown fox jumps over a lazy dog "[(i * 7 % 42) as usize] ^ seed)
            .collect()
    }

    /// IROBs from one end handed whole, in order, to the other (`to`), as the multi-socket
    /// delivers them; what `to` gives back, prepared as carry prepares it before sending.
    fn deliver(
        to: &dyn Codec,
        irobs: impl IntoIterator<Item = Vec<u8>>,
        write: &mut Vec<Bytes>,
    ) -> Result<Vec<Vec<u8>>, Error> {
        let mut back = Vec::new();
        for irob in irobs {
            to.incoming(true, irob.into(), write, &mut back)?;
        }
        to.prepare_back(&mut back)?;
        Ok(back)
    }

    /// A phone whose cache lost what the relay's source sent it before gets names it cannot
    /// rebuild: it asks for those records again and the relay sends repairs from the thread
    /// that reads upstream, while the stream goes on. The repairs must be in the zstd stream
    /// (sent raw, the phone's decoder failed on them: issue 46), and the phone, lagging
    /// behind, takes them among later records.
    #[test]
    fn dedup_repairs_go_through_the_compressed_stream() {
        let src = source();
        let body = text(60_000, 3);
        // The first connection, to a phone that keeps the chunks: the source holds them now.
        let (relay, proxy) = (
            RelayEnd::new(src.clone(), None, Box::new(|_| {})),
            ProxyEnd::new(destination(), 1),
        );
        let mut down = Vec::new();
        relay.outgoing(&body, false, &mut down).unwrap();
        let mut out = Vec::new();
        deliver(&proxy, down, &mut out).unwrap();
        assert_eq!(out.concat(), body);
        relay.close();
        proxy.close();
        // The second, to a phone whose cache is empty, through zstd.
        let lost = destination();
        let relay = RelayZstd::new(
            Arc::new(RelayEnd::new(src, None, Box::new(|_| {}))),
            None,
            "t:80",
            None,
        );
        let proxy = ProxyZstd::new(Arc::new(ProxyEnd::new(lost.clone(), 1)), None, "t:80");
        // The wire downstream, in the order the relay sent: the phone reads one IROB for
        // every read of the target, so repairs land among the records after theirs.
        let mut wire = std::collections::VecDeque::new();
        let (mut out, mut to_target) = (Vec::new(), Vec::new());
        let mut reads = body.chunks(8 << 10);
        loop {
            let mut sent = Vec::new();
            match reads.next() {
                Some(part) => relay.outgoing(part, true, &mut sent).unwrap(),
                None => relay.outgoing(&[], false, &mut sent).unwrap(),
            }
            wire.extend(sent);
            let Some(irob) = wire.pop_front() else {
                break;
            };
            let up = deliver(&proxy, [irob], &mut out).unwrap();
            let repairs = deliver(&relay, up, &mut to_target).unwrap();
            wire.extend(repairs);
        }
        assert!(to_target.is_empty());
        assert!(lost.lock().unwrap().stats().unknown_names > 0, "no repair");
        assert!(
            out.concat() == body,
            "{} of {} bytes",
            out.concat().len(),
            body.len()
        );
        assert!(relay.settled(), "the phone acknowledged every record");
    }

    /// In dictionary mode the relay reads the first 8 bytes upstream as the header. When the
    /// target speaks first, the phone's feedback goes up before the program has said
    /// anything: it must come after a header (naming no dictionary), or the relay takes
    /// feedback for the header and the header for the program's bytes.
    #[test]
    fn feedback_before_the_program_speaks_follows_the_dictionary_header() {
        let dicts = || {
            Some(Arc::new(Mutex::new(Dictionaries::new(
                DictionaryConfig::default(),
            ))))
        };
        let relay = RelayZstd::new(
            Arc::new(RelayEnd::new(source(), None, Box::new(|_| {}))),
            dicts(),
            "t:143",
            None,
        );
        let proxy = ProxyZstd::new(Arc::new(ProxyEnd::new(destination(), 1)), dicts(), "t:143");
        // Past the phone's `ack_every`, so its acknowledgement goes up at once.
        let greeting = text(80_000, 5);
        let mut down = Vec::new();
        relay.outgoing(&greeting, false, &mut down).unwrap();
        let mut out = Vec::new();
        let up = deliver(&proxy, down, &mut out).unwrap();
        assert_eq!(out.concat(), greeting);
        assert!(!up.is_empty(), "feedback");
        let first = up[0].clone();
        let mut to_target = Vec::new();
        deliver(&relay, up, &mut to_target).unwrap();
        assert!(to_target.is_empty());
        // The program speaks: its bytes, and only them, reach the target.
        let mut up = Vec::new();
        proxy.outgoing(b"a1 LOGIN\r\n", false, &mut up).unwrap();
        deliver(&relay, up, &mut to_target).unwrap();
        assert_eq!(to_target.concat(), b"a1 LOGIN\r\n");
        assert_eq!(first, vec![0; HEADER], "the header, naming no dictionary");
    }

    #[test]
    fn dictionaries_are_bounded() {
        let mut d = Dictionaries::new(DictionaryConfig { bytes: 100 });
        d.put(1, vec![0; 60]);
        d.put(2, vec![0; 60]);
        assert!(d.held() <= 100);
        assert!(d.get(1).is_none() && d.get(2).is_some());
        d.put(3, vec![0; 101]);
        assert!(d.get(3).is_none());
    }
}
