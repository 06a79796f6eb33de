//! Asymmetric caching in the carried connections (`roam_dedup`; the Sanadhya thesis, ch. IV):
//! the relay is dd-src for what targets send to programs, the proxy dd-dst.
//!
//! **Negotiation.** A proxy with dedup asks for the feature `dedup` in its request's label
//! word, `LABEL+dedup`, and a relay with dedup accepts it in its answer, both covered by the
//! proofs ([`super::features`]). A relay without dedup leaves it out and the connection is
//! carried plain. (A relay from before dedup refuses `LABEL+dedup` as not a label: turn dedup
//! off at the proxy, `--no-dedup`.)
//!
//! **Downstream** (relay to proxy): the target's bytes go through the relay's
//! [`Source`] as records ([`roam_dedup::wire`]), one IROB per read; a pause of the target
//! flushes what the source held back. A stream whose first bytes are a TLS record header is
//! passed through (its bytes are ciphertext, nothing to find) and counted. **Upstream** (proxy
//! to relay): every IROB begins with a tag byte: 0, the program's bytes; 1, the phone's
//! messages to the source (feedback, acknowledgements, requests to resend), sent
//! foreground-small as soon as a record has been handled and one is due; 2, `len:u32le` bytes
//! of such messages, then the program's bytes (a request with the messages riding in front
//! of it). An acknowledgement alone is due only past `ack_every` bytes delivered
//! (`roam_dedup::destination::DestinationConfig::ack_every`, 64 KiB); a smaller one waits to
//! ride with feedback or the program's next request, or until the source asks
//! ([`roam_dedup::wire::Kind::Ask`]): when its pacing holds it back, and at the target's end
//! while the phone has records to acknowledge. The phone acknowledges an ask at once.
//!
//! **Repairs.** The source answers a request to resend with the record again (a repair),
//! sent downstream foreground-small from the thread that reads upstream; the phone holds the
//! records after it until it comes, so it may arrive anywhere among them, but only whole (each
//! IROB holds whole records, and the multi-socket delivers a connection's IROBs one after
//! another). After the target's end the relay closes its side only once the phone has
//! acknowledged every record it might ask for again (`Codec::settled`): after the close no
//! IROB, repairs included, can be sent.
//!
//! **Feedback at the request** (beyond the thesis, `roam_dedup::destination::hint`): the
//! program's first bytes up a connection are its request; if the same request began a
//! connection before, the phone's advertisement of the response it got then goes up in front
//! of it, so the source holds those names before the target has answered.
//!
//! **Feedback in time (the thesis's δ, §4.3.4).** Feedback can only replace what the source
//! has not yet encoded, so the relay paces its source (`carry`'s `pace`): before each read
//! (8 KiB) it waits until the multi-socket's unacknowledged bytes, and the stream's bytes in
//! records the phone has not acknowledged ([`Source::ahead`]: records of names are far shorter
//! than what they stand for, and the multi-socket acknowledges on arrival, before dd-dst has
//! rebuilt anything), are both within its lead: twice the networks' bandwidth-delay products,
//! at least 16 KiB. The phone acknowledges with each advertisement, so when one arrives the
//! source has encoded at most the lead and one read past where the phone was: each
//! connection's [`ProxyEnd`] sets its flow's δ to that many names
//! ([`Destination::set_flow_delta`], per flow: each connection has its own networks and
//! relay), from its multi-socket's estimates, again at most every 100 ms as records arrive.
//!
//! One [`Source`] serves every connection through a relay and one [`Destination`] every
//! connection of a proxy, as a base station's and a phone's caches do; each connection is a
//! flow of its own. A failure of either (a malformed record or message, a hostile phone's
//! request for a record never kept) ends the connection, never delivers wrong bytes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use roam_dedup::destination::{FlowId, SourceId};
use roam_dedup::source::FlowStats;
use roam_dedup::{Destination, Source};

use super::carry::{lock, Codec};
use super::Error;
use crate::runtime::blocking::MultiSocket;

/// The feature word asking for and accepting dedup ([`super::features`]).
pub const WORD: &str = "dedup";

/// Upstream tag: the program's bytes.
const TAG_DATA: u8 = 0;
/// Upstream tag: messages for the source.
const TAG_DEDUP: u8 = 1;
/// Upstream tag: `len:u32le`, that many bytes of messages for the source, then the program's
/// bytes: the phone's messages riding with a request, one IROB (and packet) for both.
const TAG_BOTH: u8 = 2;

/// What an upstream IROB's bytes are, as they arrive.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Reading {
    /// The program's bytes.
    Data,
    /// Messages for the source.
    Messages,
    /// [`TAG_BOTH`]'s length (its bytes so far), then `left` bytes of messages.
    Leading { length: Vec<u8>, left: usize },
}

/// Flow numbers, unique within the process.
fn next_flow() -> FlowId {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Whether `first` begins with a TLS record header (handshake, alert or application data of
/// TLS 1.0-1.3).
fn looks_like_tls(first: &[u8]) -> bool {
    matches!(first, [0x14..=0x17, 0x03, 0x00..=0x04, ..])
}

fn failed(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Dedup {
        what: format!("{what}: {e}"),
    }
}

/// The relay's end: dd-src.
pub(super) struct RelayEnd {
    source: Arc<Mutex<Source>>,
    flow: FlowId,
    /// None until the first bytes: then whether they are passed through.
    passthrough: Mutex<Option<bool>>,
    /// The upstream IROB being read: what its bytes are (none before the first IROB).
    tag: Mutex<Option<Reading>>,
    /// Messages from the phone not yet whole.
    pending: Mutex<Vec<u8>>,
    report: Box<dyn Fn(FlowStats) + Send + Sync>,
}

impl RelayEnd {
    /// The relay's end of one connection from `phone` (its address: feedback is bounded per
    /// phone, so one cannot crowd out the others').
    pub(super) fn new(
        source: Arc<Mutex<Source>>,
        phone: Option<std::net::IpAddr>,
        report: Box<dyn Fn(FlowStats) + Send + Sync>,
    ) -> RelayEnd {
        let flow = next_flow();
        let key = phone.map_or(0, |ip| {
            roam_dedup::Name::of(super::allow::canonical(ip).to_string().as_bytes()).0
        });
        lock(&source).open_for(flow, key);
        RelayEnd {
            source,
            flow,
            passthrough: Mutex::new(None),
            tag: Mutex::new(None),
            pending: Mutex::new(Vec::new()),
            report,
        }
    }
}

/// The most bytes of the phone's messages held while not yet whole.
const MAX_PENDING: usize = 1 << 20;

impl RelayEnd {
    /// What `step` of the source appends for this flow, as one IROB if anything (nothing for
    /// a stream passed through).
    fn source_says(
        &self,
        send: &mut Vec<Vec<u8>>,
        step: fn(&mut Source, FlowId, &mut Vec<u8>) -> Result<(), roam_dedup::source::SourceError>,
    ) -> Result<(), Error> {
        if *lock(&self.passthrough) == Some(true) {
            return Ok(());
        }
        let mut out = Vec::new();
        step(&mut lock(&self.source), self.flow, &mut out).map_err(|e| failed("dd-src", e))?;
        if !out.is_empty() {
            send.push(out);
        }
        Ok(())
    }

    /// Bytes of the phone's messages: each whole one handled by the source (a request to
    /// resend answered into `back`).
    fn messages(&self, data: &[u8], back: &mut Vec<Vec<u8>>) -> Result<(), Error> {
        let mut pending = lock(&self.pending);
        pending.extend_from_slice(data);
        if pending.len() > MAX_PENDING {
            return Err(failed("upstream", "over 1 MiB of messages not yet whole"));
        }
        let mut out = Vec::new();
        let used = lock(&self.source)
            .handle(self.flow, &pending, Instant::now(), &mut out)
            .map_err(|e| failed("dd-src", e))?;
        pending.drain(..used);
        if !out.is_empty() {
            back.push(out);
        }
        Ok(())
    }
}

impl Codec for RelayEnd {
    fn outgoing(&self, data: &[u8], more: bool, send: &mut Vec<Vec<u8>>) -> Result<(), Error> {
        let mut out = Vec::new();
        {
            let mut pass = lock(&self.passthrough);
            if pass.is_none() && !data.is_empty() {
                *pass = Some(looks_like_tls(data));
            }
            let mut src = lock(&self.source);
            let r = if *pass == Some(true) {
                src.pass(self.flow, data, &mut out)
            } else {
                src.push(self.flow, data, &mut out).and_then(|()| {
                    if more {
                        Ok(())
                    } else {
                        src.flush(self.flow, &mut out)
                    }
                })
            };
            r.map_err(|e| failed("dd-src", e))?;
        }
        if !out.is_empty() {
            send.push(out);
        }
        Ok(())
    }

    fn incoming(
        &self,
        start: bool,
        mut data: Bytes,
        write: &mut Vec<Bytes>,
        back: &mut Vec<Vec<u8>>,
    ) -> Result<(), Error> {
        let mut tag = lock(&self.tag);
        if start {
            let Some(&t) = data.first() else {
                return Err(failed("upstream", "an IROB without its tag"));
            };
            *tag = Some(match t {
                TAG_DATA => Reading::Data,
                TAG_DEDUP => Reading::Messages,
                TAG_BOTH => Reading::Leading {
                    length: Vec::new(),
                    left: 0,
                },
                t => return Err(failed("upstream", format!("unknown tag {t}"))),
            });
            data = data.slice(1..);
        }
        while !data.is_empty() {
            match tag.as_mut() {
                Some(Reading::Data) => {
                    write.push(std::mem::take(&mut data));
                }
                Some(Reading::Messages) => {
                    self.messages(&std::mem::take(&mut data), back)?;
                }
                Some(Reading::Leading { length, left }) if length.len() < 4 => {
                    let n = (4 - length.len()).min(data.len());
                    length.extend_from_slice(&data[..n]);
                    data = data.slice(n..);
                    if length.len() == 4 {
                        *left =
                            u32::from_le_bytes(length[..].try_into().expect("4 bytes")) as usize;
                        if *left > MAX_PENDING {
                            return Err(failed(
                                "upstream",
                                format!("{left} bytes of messages before a request"),
                            ));
                        }
                        if *left == 0 {
                            *tag = Some(Reading::Data);
                        }
                    }
                }
                Some(Reading::Leading { left, .. }) => {
                    let n = (*left).min(data.len());
                    *left -= n;
                    if *left == 0 {
                        *tag = Some(Reading::Data);
                    }
                    let messages = data.slice(..n);
                    data = data.slice(n..);
                    self.messages(&messages, back)?;
                }
                None => return Err(failed("upstream", "bytes before any IROB began")),
            }
        }
        Ok(())
    }

    /// A request to acknowledge: the pacing waits on the phone.
    fn waiting(&self, send: &mut Vec<Vec<u8>>) -> Result<(), Error> {
        self.source_says(send, Source::ask)
    }

    /// What the source held back, and a request to acknowledge if the phone has records it
    /// may still ask for again.
    fn ended(&self, send: &mut Vec<Vec<u8>>) -> Result<(), Error> {
        self.source_says(send, Source::end)
    }

    fn paced(&self) -> bool {
        *lock(&self.passthrough) != Some(true)
    }

    /// What the phone has not acknowledged of the stream, for a source with a feedback cache
    /// (without one, feedback has nothing to reach in time for, and the wire's pacing alone
    /// lets a stream the regular cache finds go as fast as its records shrink).
    fn ahead(&self) -> u64 {
        let src = lock(&self.source);
        if src.config().feedback_bytes == 0 {
            return 0;
        }
        src.ahead(self.flow)
    }

    /// Settled once the phone has acknowledged every record it might ask for again.
    fn settled(&self) -> bool {
        lock(&self.source).unacknowledged(self.flow) == 0
    }

    fn close(&self) {
        if let Some(stats) = lock(&self.source).close(self.flow) {
            (self.report)(stats);
        }
    }
}

/// The proxy's end: dd-dst.
pub(super) struct ProxyEnd {
    destination: Arc<Mutex<Destination>>,
    flow: FlowId,
    /// Record bytes not yet whole.
    pending: Mutex<Vec<u8>>,
    /// The connection's multi-socket (a handle that does not keep it open), whose estimates
    /// set the flow's δ, and when they last did.
    links: Option<(MultiSocket, Mutex<Option<Instant>>)>,
}

/// How often a connection's δ follows its multi-socket's estimates (the ticker updates them
/// every 100 ms).
const DELTA_EVERY: Duration = Duration::from_millis(100);

impl ProxyEnd {
    pub(super) fn new(destination: Arc<Mutex<Destination>>, via: SourceId) -> ProxyEnd {
        let flow = next_flow();
        lock(&destination).open_via(flow, via);
        ProxyEnd {
            destination,
            flow,
            pending: Mutex::new(Vec::new()),
            links: None,
        }
    }

    /// The flow's δ follows `ms`'s estimates: set now, and again at most every
    /// [`DELTA_EVERY`] as records arrive ([`ProxyEnd::follow_links`]).
    pub(super) fn with_links(mut self, ms: &MultiSocket) -> ProxyEnd {
        self.links = Some((ms.watcher(), Mutex::new(None)));
        self.follow_links(Instant::now());
        self
    }

    /// Set the flow's δ from the multi-socket's estimates, if [`DELTA_EVERY`] has passed since
    /// it last was.
    ///
    /// δ, in bytes of the stream, is how far past the phone the relay's source may have encoded
    /// when an advertisement reaches it: chunks feedback can no longer replace.
    ///
    /// The thesis (§4.3.4, Algorithm 7) counts what dd-src sends while the advertisement travels
    /// up, `down x (message / up + delay)` ([`Destination::set_rates`]): its dd-src sends each
    /// chunk as it encodes it, at the link's rate. The relay instead encodes ahead of the link, as
    /// far as its pacing lets it: within its lead of what the phone has acknowledged, both on the
    /// multi-socket and of the stream ([`super::carry`]'s `pace`, [`Codec::ahead`]). The phone
    /// sends its acknowledgement beside each advertisement, so the source cannot pass the bound
    /// before the advertisement arrives, however long it travels: when it arrives the source has
    /// encoded at most the lead, plus the read it made after last looking, past where the phone
    /// was ([`super::carry::held`]; and the last chunk of the read before, which its chunking
    /// held back until more came, under 2 KiB: not counted). The links enter through the lead,
    /// twice the networks' bandwidth-delay products (down rate x round trip), from the same
    /// estimates the relay paces by: the phone's own of the same networks (the relay's start
    /// from what the phone reports and from what each end remembers of the path, then follow its
    /// own samples).
    ///
    /// A page shorter than that is encoded whole before the phone has seen its first segment:
    /// its advertisements start past its end, and feedback finds nothing in it, as it could not
    /// in time anyway.
    fn follow_links(&self, now: Instant) {
        let Some((ms, last)) = &self.links else {
            return;
        };
        {
            let mut last = lock(last);
            if last.is_some_and(|t| now.saturating_duration_since(t) < DELTA_EVERY) {
                return;
            }
            *last = Some(now);
        }
        // The estimates first: the multi-socket's locks are never taken under the cache's.
        let bytes = super::carry::held(&ms.estimates());
        let mut dst = lock(&self.destination);
        // Bytes per name as the cache has learned them (FastCDC's chunks average about 310
        // bytes on text), the chunking's nominal average until then.
        let mean = dst.mean_chunk().unwrap_or_else(|| {
            f64::from(roam_dedup::source::SourceConfig::default().chunking.avg())
        });
        let delta = roam_dedup::destination::names_in(bytes as f64, mean);
        dst.set_flow_delta(self.flow, delta);
    }
}

impl Codec for ProxyEnd {
    /// The program's bytes, each IROB behind its tag; in front of them, the phone's feedback
    /// for the responses they ask for ([`Destination::request`]: the flow's first request's,
    /// and each HTTP/1 request's the destination follows).
    fn outgoing(&self, data: &[u8], _more: bool, send: &mut Vec<Vec<u8>>) -> Result<(), Error> {
        if data.is_empty() {
            return Ok(());
        }
        // The messages ride in front of the request, in its IROB: an acknowledgement held
        // back goes with them.
        let mut b = vec![TAG_BOTH, 0, 0, 0, 0];
        {
            let mut dst = lock(&self.destination);
            dst.request(self.flow, data)
                .and_then(|()| dst.upstream_all(self.flow, &mut b))
                .map_err(|e| failed("dd-dst", e))?;
        }
        let len = b.len() - 5;
        if len == 0 {
            b.truncate(1);
            b[0] = TAG_DATA;
        } else {
            b[1..5].copy_from_slice(&(len as u32).to_le_bytes());
        }
        b.extend_from_slice(data);
        send.push(b);
        Ok(())
    }

    fn incoming(
        &self,
        _start: bool,
        data: Bytes,
        write: &mut Vec<Bytes>,
        back: &mut Vec<Vec<u8>>,
    ) -> Result<(), Error> {
        self.follow_links(Instant::now());
        let mut pending = lock(&self.pending);
        pending.extend_from_slice(&data);
        let mut up = vec![TAG_DEDUP];
        let mut out = Vec::new();
        {
            let mut dst = lock(&self.destination);
            let used = dst
                .receive(self.flow, &pending, &mut out)
                .map_err(|e| failed("dd-dst", e))?;
            pending.drain(..used);
            dst.upstream(self.flow, &mut up)
                .map_err(|e| failed("dd-dst", e))?;
        }
        if pending.len() > 2 * roam_dedup::wire::MAX_BODY {
            return Err(failed(
                "downstream",
                "a record longer than any the source sends",
            ));
        }
        if !out.is_empty() {
            write.push(out.into());
        }
        if up.len() > 1 {
            back.push(up);
        }
        Ok(())
    }

    fn close(&self) {
        lock(&self.destination).close(self.flow);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_records_are_recognised() {
        assert!(looks_like_tls(&[0x16, 0x03, 0x01, 0x02, 0x00]));
        assert!(looks_like_tls(&[0x17, 0x03, 0x03]));
        assert!(!looks_like_tls(b"HTTP/1.1 200 OK"));
        assert!(!looks_like_tls(&[0x16]));
    }

    /// A request carries the acknowledgement held back in its own IROB, and the relay reads
    /// both however the IROB arrives in pieces.
    #[test]
    fn an_acknowledgement_rides_in_front_of_a_request() {
        let text: Vec<u8> = (0..3_000u32)
            .map(|i| b"the quick brown fox jumps over a lazy dog "[(i * 7 % 42) as usize])
            .collect();
        let request = b"GET /again HTTP/1.1\r\n\r\n".to_vec();
        for split in [1, 2, 3, 4, 5, 7, 64, usize::MAX] {
            let source = Arc::new(Mutex::new(
                Source::new(roam_dedup::source::SourceConfig::default()).unwrap(),
            ));
            let relay = RelayEnd::new(source.clone(), None, Box::new(|_| {}));
            let dst = Arc::new(Mutex::new(Destination::new(Default::default())));
            let proxy = ProxyEnd::new(dst, 0);
            // The same response twice (named the second time), each a pause of the target.
            let (mut down, mut write, mut back) = (vec![], vec![], vec![]);
            for _ in 0..2 {
                relay.outgoing(&text, false, &mut down).unwrap();
            }
            for irob in down {
                proxy
                    .incoming(true, irob.into(), &mut write, &mut back)
                    .unwrap();
            }
            assert!(back.is_empty(), "an acknowledgement of 6 kB went alone");
            assert!(lock(&source).unacknowledged(relay.flow) > 0);
            let mut up = vec![];
            proxy.outgoing(&request, false, &mut up).unwrap();
            assert_eq!(up.len(), 1, "one IROB for the request and its messages");
            assert_eq!(up[0][0], TAG_BOTH);
            let irob = Bytes::from(up.remove(0));
            let (mut data, mut repairs) = (vec![], vec![]);
            let mut at = 0;
            while at < irob.len() {
                let end = irob.len().min(at.saturating_add(split));
                relay
                    .incoming(at == 0, irob.slice(at..end), &mut data, &mut repairs)
                    .unwrap();
                at = end;
            }
            assert_eq!(data.concat(), request, "split {split}");
            assert_eq!(lock(&source).unacknowledged(relay.flow), 0, "split {split}");
        }
    }
}
