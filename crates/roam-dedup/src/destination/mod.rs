//! dd-dst: the phone (the thesis's Algorithms 6-8).
//!
//! [`Destination::receive`] rebuilds each record from its literals and the chunks its names
//! refer to, checks the record's checksum, and delivers its bytes in order. It then learns
//! from them: each piece is one chunk (the source sends every chunk as one piece, so the
//! phone need not cut the stream again), gathered into segments of a packet's length; at each
//! segment it tests for a flowlet boundary ([`flowlet`]), finds the past flowlets that share
//! the segment's chunks, adds the segment to the cache ([`store`]) and chooses the feedback
//! ([`select`]). [`Destination::upstream`] gives the messages for the source: feedback,
//! acknowledgements, and requests to send a record again.
//!
//! A record that cannot be rebuilt (a name no longer held, a length that does not match, a
//! checksum that fails) is never delivered: the phone asks for it again, names its chunks for
//! the source to forget, and holds the records after it (bounded) until it comes.

pub mod budget;
pub mod disk;
pub mod exchange;
pub mod flowlet;
pub mod hint;
pub mod select;
pub mod store;

use std::collections::HashMap;

use crate::lru::Lru;
use crate::name::{checksum, Name};
use crate::wire::{self, Piece, Record, Upstream, WireError};
use flowlet::FlowletConfig;
use select::{Matching, SelectConfig};
use store::{FlowletId, Store};

pub use crate::source::FlowId;

/// Which source a flow comes through (the phone's networks each have their own: WiFi and
/// cellular pass different boxes). What one source has seen says nothing of another's.
pub type SourceId = u32;

/// How a destination behaves.
#[derive(Clone, Debug)]
pub struct DestinationConfig {
    /// Bytes of chunks the cache holds (the thesis: 150-250 MB).
    pub cache_bytes: u64,
    /// Flowlet segmentation.
    pub flowlets: FlowletConfig,
    /// Feedback selection.
    pub select: SelectConfig,
    /// Names remembered as seen from the source or advertised, never advertised again.
    pub known_names: u64,
    /// Record bytes held after one that must be sent again, per flow; past it the flow fails.
    pub max_held: usize,
    /// Whether to choose and send feedback at all (off: the phone only rebuilds, as with a
    /// source that has no feedback cache).
    pub feedback: bool,
    /// The credit feedback runs on, per source ([`budget`]: beyond the thesis; `None`
    /// advertises whatever it costs, as the thesis's phone does).
    pub budget: Option<budget::FeedbackBudget>,
    /// Bits of each name used: as many as the source's
    /// ([`crate::source::SourceConfig::name_bits`]).
    pub name_bits: u32,
    /// Stream bytes delivered after which the phone acknowledges at once (beyond the thesis,
    /// whose phone acknowledges nothing). Below it, the acknowledgement waits for the phone's
    /// next message up (feedback, a request to resend, the program's next request:
    /// [`Destination::upstream_all`]) or for the source to ask ([`crate::wire::Kind::Ask`]:
    /// its pacing holds it back, or its stream ended). Each acknowledgement sent alone costs
    /// the last hop a packet up and another down. The bound keeps what the source holds for
    /// repairs small (it stops naming chunks past `SourceConfig::keep_bytes`, 512 KiB).
    /// 0: acknowledge every record.
    pub ack_every: usize,
}

impl Default for DestinationConfig {
    fn default() -> DestinationConfig {
        DestinationConfig {
            cache_bytes: 256 << 20,
            flowlets: FlowletConfig::default(),
            select: SelectConfig::default(),
            known_names: 1 << 20,
            max_held: 8 << 20,
            feedback: true,
            budget: Some(budget::FeedbackBudget::default()),
            name_bits: 64,
            ack_every: 64 << 10,
        }
    }
}

/// What a destination has done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DestinationStats {
    /// Record bytes received.
    pub bytes_in: u64,
    /// Bytes delivered.
    pub bytes_out: u64,
    /// Bytes delivered from names (chunks the cache held).
    pub named_bytes: u64,
    /// Records asked for again, and why: a name not held or of another length.
    pub unknown_names: u64,
    /// ... or a checksum that failed (a collision).
    pub checksum_failures: u64,
    /// Names advertised, and the bytes of the messages carrying them.
    pub feedback_names: u64,
    /// Bytes of advertisement messages.
    pub feedback_bytes: u64,
    /// Of the names advertised, those advertised at a request, before its response
    /// ([`Destination::request`]).
    pub hint_names: u64,
    /// Requests hinted with the names of a response whose URL moved ([`exchange`]).
    pub moved_hints: u64,
    /// Bytes of acknowledgements and requests to resend.
    pub control_bytes: u64,
    /// Bytes delivered from names the phone had advertised to their source: what its
    /// feedback found, as the phone sees it.
    pub feedback_found_bytes: u64,
    /// Times the phone would have looked for names to advertise (a segment that matched a
    /// past flowlet, a followed request) but its source's credit was spent ([`budget`]).
    pub feedback_withheld: u64,
    /// Flowlets begun.
    pub flowlets: u64,
}

/// A destination that cannot go on with a flow (the caller resets it; nothing corrupt was
/// delivered).
#[derive(Debug, thiserror::Error)]
pub enum DestinationError {
    /// Malformed record bytes.
    #[error("flow {flow}: record {seq}: {err}")]
    Wire {
        flow: FlowId,
        seq: u64,
        err: WireError,
    },
    /// A record out of order.
    #[error("flow {flow}: record {got} where {expected} was due")]
    Sequence {
        flow: FlowId,
        expected: u64,
        got: u64,
    },
    /// A record sent again as literals still does not check.
    #[error("flow {flow}: record {seq}, sent again, does not match its checksum")]
    Corrupt { flow: FlowId, seq: u64 },
    /// Too many bytes held while waiting for a record to come again.
    #[error("flow {flow}: {held} bytes held waiting for record {seq} (limit {limit})")]
    HeldTooMuch {
        flow: FlowId,
        seq: u64,
        held: usize,
        limit: usize,
    },
    /// A flow not opened.
    #[error("flow {0} is not open")]
    NoFlow(FlowId),
}

#[derive(Debug, Default)]
struct Flow {
    source: SourceId,
    next_seq: u64,
    /// The record asked for again, and the record bytes that arrived after it.
    awaiting: Option<u64>,
    held: Vec<u8>,
    /// The flowlet being built, and the segment before the one being filled.
    current: Option<FlowletId>,
    /// The previous segment's moments and gain (Algorithm 6's `series`).
    previous: Option<(flowlet::Moments, f64)>,
    segment: Vec<u8>,
    seg_chunks: Vec<(Name, Box<[u8]>)>,
    matching: Matching,
    /// The flow's own δ ([`Destination::set_flow_delta`]), else the destination's.
    delta: Option<usize>,
    /// The key of the request that began the flow ([`Destination::request`]), remembered
    /// with the flowlet its response begins with.
    request: Option<Name>,
    /// Its HTTP/1 exchanges ([`exchange`]).
    exchanges: exchange::Exchanges,
    /// Messages for the source.
    upstream: Vec<u8>,
    /// The acknowledgement held back, if any; the stream bytes it covers since the last one
    /// sent; whether it is due now ([`DestinationConfig::ack_every`]).
    ack: Option<u64>,
    unacked: usize,
    ack_due: bool,
}

/// dd-dst.
#[derive(Debug)]
pub struct Destination {
    cfg: DestinationConfig,
    store: Store,
    disk: Option<disk::Disk>,
    /// Per source: names seen from it or advertised to it.
    known: HashMap<SourceId, Lru>,
    /// Per source: the credit its feedback runs on ([`budget`]).
    credits: HashMap<SourceId, budget::Credit>,
    flows: HashMap<FlowId, Flow>,
    stats: DestinationStats,
    /// δ of the flows without their own ([`Destination::set_rates`]).
    delta: usize,
    /// Bytes learned, and names kept of them ([`Destination::mean_chunk`]).
    learned: (u64, u64),
    /// The flowlet each request's response began with ([`hint`]).
    responses: hint::Responses,
    /// Each request's response's names ([`exchange`]).
    remembered: exchange::Remembered,
    scratch: Vec<u8>,
}

/// Why a record could not be rebuilt.
enum Unbuilt {
    Unknown,
    Checksum,
}

impl Destination {
    /// A destination with `cfg`.
    pub fn new(cfg: DestinationConfig) -> Destination {
        Destination {
            store: Store::new(cfg.cache_bytes),
            disk: None,
            known: HashMap::new(),
            credits: HashMap::new(),
            cfg,
            flows: HashMap::new(),
            stats: DestinationStats::default(),
            delta: 0,
            learned: (0, 0),
            responses: hint::Responses::default(),
            remembered: exchange::Remembered::default(),
            scratch: Vec::new(),
        }
    }

    /// A destination whose cache lives in the file `path` too ([`disk`]): what it held is
    /// loaded; a file that cannot be trusted is replaced by an empty one, and why is returned
    /// beside it (a file another process holds is left alone and the cache kept in memory).
    pub fn with_disk(
        cfg: DestinationConfig,
        path: &std::path::Path,
    ) -> (Destination, Option<disk::DiskError>) {
        let (store, file, why) = disk::open_or_rebuild(path, cfg.cache_bytes, cfg.name_bits);
        let mut d = Destination::new(cfg);
        d.store = store;
        d.disk = file;
        (d, why)
    }

    /// Write what changed in the cache since the last save to its file, if it has one.
    pub fn save(&mut self) -> Result<(), disk::DiskError> {
        match &mut self.disk {
            Some(d) => d.save(&mut self.store),
            None => Ok(()),
        }
    }

    /// What it has done.
    pub fn stats(&self) -> DestinationStats {
        self.stats
    }

    /// The cache.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Start a flow through source 0.
    pub fn open(&mut self, flow: FlowId) {
        self.open_via(flow, 0);
    }

    /// Start a flow through `source`.
    pub fn open_via(&mut self, flow: FlowId, source: SourceId) {
        let f = self.flows.entry(flow).or_default();
        f.source = source;
        let limit = self.cfg.known_names;
        self.known.entry(source).or_insert_with(|| Lru::new(limit));
        let budget = self.cfg.budget;
        self.credits
            .entry(source)
            .or_insert_with(|| budget::Credit::new(budget.as_ref()));
    }

    /// End a flow.
    pub fn close(&mut self, flow: FlowId) {
        if let Some(mut f) = self.flows.remove(&flow) {
            if let Some((asked, names)) = f.exchanges.close() {
                self.remembered.remember(&asked, names);
            }
        }
    }

    /// Set the thesis's δ from the links, for every flow without its own
    /// ([`Destination::set_flow_delta`]): names the source sends while an advertisement
    /// travels up, `down x (message / up + delay) / mean chunk` (rates in bytes a second). The
    /// thesis's source sends each chunk as it encodes it, at the link's rate (§4.3.4: "δ =
    /// segments dd-src will send before the feedback arrives").
    pub fn set_rates(&mut self, down: f64, up: f64, delay_s: f64, mean_chunk: f64) {
        let msg = (self.cfg.select.per_message * Name::LEN + 3) as f64;
        let t = if up > 0.0 { msg / up } else { 0.0 } + delay_s.max(0.0);
        self.delta = names_in(down.max(0.0) * t, mean_chunk);
    }

    /// Set `flow`'s own δ, in names: its advertisements start `delta + 1` names past the last
    /// match ([`select::Matching::advertise`]). Each flow has its own because δ belongs to
    /// the path between the phone and the flow's source, and one destination serves every
    /// connection of a phone, over whichever networks and through whichever source (a relay
    /// per network): a carried connection sets it from its own links and its source's lead
    /// ([`names_in`] turns bytes into names). A flow not open is left alone.
    pub fn set_flow_delta(&mut self, flow: FlowId, delta: usize) {
        if let Some(f) = self.flows.get_mut(&flow) {
            f.delta = Some(delta);
        }
    }

    /// The stream's bytes per name the flowlets hold, as learned so far (the source's mean
    /// chunk, as far as the names advertisements count go); `None` before 64 names. What turns
    /// bytes the source runs ahead into δ's names ([`names_in`]).
    pub fn mean_chunk(&self) -> Option<f64> {
        let (bytes, names) = self.learned;
        (names >= 64).then(|| bytes as f64 / names as f64)
    }

    /// The δ `flow`'s advertisements use now (its own, else the destination's); `None` for
    /// a flow not open.
    pub fn delta(&self, flow: FlowId) -> Option<usize> {
        self.flows.get(&flow).map(|f| f.delta.unwrap_or(self.delta))
    }

    /// The program's bytes up `flow`, as they go (each call the next bytes). Beyond the
    /// thesis ([`hint`], [`exchange`]): names the phone expects in a response are queued for
    /// the source ([`Destination::upstream`]), to go up in front of the request:
    /// - for the request that begins the flow, if the same request began a flow before, the
    ///   names of the flowlet its response began with and of those after it, up to
    ///   [`SelectConfig::hint_names`];
    /// - for every HTTP/1 request the flow's exchanges follow, if no such flowlet is known,
    ///   the names its key's last response carried, or those of the response its moved key
    ///   stands for ([`exchange::Remembered`]);
    ///
    /// at most [`SelectConfig::hint_names`] a call.
    pub fn request(&mut self, flow: FlowId, bytes: &[u8]) -> Result<(), DestinationError> {
        let f = self
            .flows
            .get_mut(&flow)
            .ok_or(DestinationError::NoFlow(flow))?;
        if bytes.is_empty() {
            return Ok(());
        }
        let first = f.request.is_none() && f.current.is_none();
        if first {
            f.request = Some(hint::request_key(bytes));
        }
        let asked = f.exchanges.up(bytes);
        let max = self.cfg.select.hint_names;
        let Some(known) = self.known.get_mut(&f.source) else {
            return Ok(());
        };
        if !self.cfg.feedback || max == 0 {
            return Ok(());
        }
        let budget = self.cfg.budget.as_ref();
        let Some(credit) = self.credits.get_mut(&f.source) else {
            return Ok(());
        };
        if !credit.allows(budget) {
            if !asked.is_empty() {
                self.stats.feedback_withheld += 1;
            }
            return Ok(());
        }
        let max = max.min(credit.affords(budget));
        let mut names = vec![];
        let flowlet = first
            .then(|| f.request.and_then(|k| self.responses.first(k)))
            .flatten();
        if let Some(start) = flowlet {
            names = hint::names(&self.store, start, max, known);
        }
        for (i, a) in asked.iter().enumerate() {
            if i == 0 && flowlet.is_some() {
                continue;
            }
            let Some((remembered, moved)) = self.remembered.names_for(a) else {
                continue;
            };
            let before = names.len();
            for &n in remembered {
                if names.len() >= max {
                    break;
                }
                if !known.contains(n) && self.store.get(n).is_some() {
                    known.insert(n, 1);
                    names.push(n);
                }
            }
            if moved && names.len() > before {
                self.stats.moved_hints += 1;
            }
        }
        self.stats.hint_names += names.len() as u64;
        for msg in names.chunks(self.cfg.select.per_message.max(1)) {
            queue_advertisement(&mut self.stats, credit, &mut f.upstream, msg.to_vec());
        }
        Ok(())
    }

    /// Record bytes of `flow`: every whole record at the start of `buf` is handled, its
    /// bytes appended to `out` in order; the bytes of `buf` used (keep the rest for later).
    pub fn receive(
        &mut self,
        flow: FlowId,
        buf: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<usize, DestinationError> {
        let mut f = self
            .flows
            .remove(&flow)
            .ok_or(DestinationError::NoFlow(flow))?;
        let r = self.receive_in(flow, &mut f, buf, out);
        self.flows.insert(flow, f);
        r
    }

    fn receive_in(
        &mut self,
        flow: FlowId,
        f: &mut Flow,
        buf: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<usize, DestinationError> {
        let mut used = 0;
        loop {
            let wire_err = |err| DestinationError::Wire {
                flow,
                seq: f.next_seq,
                err,
            };
            let Some((rec, n)) = wire::record(&buf[used..]).map_err(wire_err)? else {
                return Ok(used);
            };
            let raw = &buf[used..used + n];
            used += n;
            self.stats.bytes_in += n as u64;
            match f.awaiting {
                Some(seq) if rec.resent && rec.seq == seq => {
                    self.deliver(flow, f, &rec, out)?;
                    f.awaiting = None;
                    // What arrived meanwhile, in order.
                    let held = std::mem::take(&mut f.held);
                    let mut at = 0;
                    while at < held.len() {
                        let Some((r, m)) =
                            wire::record(&held[at..]).map_err(|err| DestinationError::Wire {
                                flow,
                                seq: f.next_seq,
                                err,
                            })?
                        else {
                            break;
                        };
                        at += m;
                        if f.awaiting.is_some() {
                            f.held.extend_from_slice(&held[at - m..at]);
                        } else {
                            self.deliver(flow, f, &r, out)?;
                        }
                    }
                }
                Some(seq) => {
                    if rec.resent && rec.seq < seq {
                        continue; // a duplicate of one delivered
                    }
                    f.held.extend_from_slice(raw);
                    if f.held.len() > self.cfg.max_held {
                        return Err(DestinationError::HeldTooMuch {
                            flow,
                            seq,
                            held: f.held.len(),
                            limit: self.cfg.max_held,
                        });
                    }
                }
                None => {
                    if rec.resent && rec.seq < f.next_seq {
                        continue;
                    }
                    self.deliver(flow, f, &rec, out)?;
                }
            }
        }
    }

    /// Rebuild `rec` and, if it checks, deliver and learn from it; if not, ask for it again.
    fn deliver(
        &mut self,
        flow: FlowId,
        f: &mut Flow,
        rec: &Record<'_>,
        out: &mut Vec<u8>,
    ) -> Result<(), DestinationError> {
        if rec.seq != f.next_seq {
            return Err(DestinationError::Sequence {
                flow,
                expected: f.next_seq,
                got: rec.seq,
            });
        }
        let mut bytes = std::mem::take(&mut self.scratch);
        bytes.clear();
        // Names the record used, and every piece's chunk: (name, where in `bytes`, named).
        let mut names = Vec::new();
        let mut pieces: Vec<(Name, usize, usize, bool)> = Vec::new();
        // Chunks rebuilt so far in this record, by name: where they lie in `bytes`.
        let mut built: crate::name::NameMap<(usize, usize)> = Default::default();
        let mut failed = None;
        for p in wire::pieces(rec.body) {
            let p = p.map_err(|err| DestinationError::Wire {
                flow,
                seq: rec.seq,
                err,
            })?;
            let at = bytes.len();
            match p {
                Piece::Literal(b) => {
                    bytes.extend_from_slice(b);
                    let name = Name::of_bits(b, self.cfg.name_bits);
                    built.insert(name, (at, b.len()));
                    pieces.push((name, at, b.len(), false));
                }
                Piece::Name { name, len } => {
                    names.push(name);
                    // From the cache, the segment not yet in it, or earlier in this record
                    // (a piece there that was rebuilt: a failed one added no bytes).
                    let earlier = built.get(&name).copied().filter(|e| e.1 == len);
                    match (self.chunk(f, name), earlier) {
                        (Some(c), _) if c.len() == len => bytes.extend_from_slice(c),
                        (_, Some((from, n))) => bytes.extend_from_within(from..from + n),
                        _ => {
                            failed = Some(Unbuilt::Unknown);
                            continue;
                        }
                    }
                    built.insert(name, (at, len));
                    pieces.push((name, at, len, true));
                }
            }
            if bytes.len() > wire::MAX_RECORD {
                return Err(DestinationError::Wire {
                    flow,
                    seq: rec.seq,
                    err: WireError::TooLong {
                        what: "rebuilt record",
                        len: bytes.len() as u64,
                        max: wire::MAX_RECORD as u64,
                        at: 0,
                    },
                });
            }
        }
        if failed.is_none() && checksum(&bytes) != rec.checksum {
            failed = Some(Unbuilt::Checksum);
        }
        if let Some(why) = failed {
            self.scratch = bytes;
            if rec.resent {
                return Err(DestinationError::Corrupt { flow, seq: rec.seq });
            }
            match why {
                Unbuilt::Unknown => self.stats.unknown_names += 1,
                Unbuilt::Checksum => {
                    self.stats.checksum_failures += 1;
                    for n in &names {
                        self.store.forget(*n);
                    }
                }
            }
            let before = f.upstream.len();
            Upstream::Resend {
                seq: rec.seq,
                forget: names,
            }
            .encode(&mut f.upstream);
            self.stats.control_bytes += (f.upstream.len() - before) as u64;
            f.awaiting = Some(rec.seq);
            return Ok(());
        }
        out.extend_from_slice(&bytes);
        self.stats.bytes_out += bytes.len() as u64;
        f.next_seq += 1;
        if rec.asks {
            // The source waits for this acknowledgement.
            f.ack = Some(rec.seq);
            f.ack_due = true;
            self.scratch = bytes;
            return Ok(());
        }
        if rec.passthrough {
            // Nothing named, nothing kept at the source: no acknowledgement, no learning.
            f.exchanges.lose();
            self.scratch = bytes;
            return Ok(());
        }
        if f.exchanges.followed() {
            let named = pieces
                .iter()
                .filter(|p| p.2 > 2 * Name::LEN)
                .map(|p| (p.0, p.1));
            for (asked, names) in f.exchanges.down(&bytes, named) {
                self.remembered.remember(&asked, names);
            }
        }
        f.ack = Some(rec.seq);
        f.unacked += bytes.len();
        f.ack_due |= f.unacked >= self.cfg.ack_every;
        let budget = self.cfg.budget;
        if let Some(credit) = self.credits.get_mut(&f.source) {
            credit.delivered(budget.as_ref(), bytes.len());
        }
        // Learn, piece by piece: each piece is one chunk. Whether feedback found it is settled
        // piece by piece too, since learning one may advertise the next ones of this record.
        for &(name, at, len, named) in &pieces {
            if named {
                self.stats.named_bytes += len as u64;
            }
            let credit = self.credits.get_mut(&f.source);
            if credit.is_some_and(|c| c.arrived(budget.as_ref(), name, len, named)) {
                self.stats.feedback_found_bytes += len as u64;
            }
            self.learn(f, name, &bytes[at..at + len]);
        }
        self.end_segment(f);
        self.scratch = bytes;
        Ok(())
    }

    /// The chunk `name`, from the cache or the segment not yet added to it.
    fn chunk<'a>(&'a self, f: &'a Flow, name: Name) -> Option<&'a [u8]> {
        self.store.get(name).or_else(|| {
            f.seg_chunks
                .iter()
                .rev()
                .find(|(n, _)| *n == name)
                .map(|(_, b)| &b[..])
        })
    }

    /// One delivered chunk: into the segment being filled; a full segment is processed.
    fn learn(&mut self, f: &mut Flow, name: Name, bytes: &[u8]) {
        if let Some(k) = self.known.get_mut(&f.source) {
            k.insert(name, 1);
        }
        // Chunks no longer than a reference are never named: not worth holding.
        self.learned.0 += bytes.len() as u64;
        if bytes.len() > 2 * Name::LEN {
            self.learned.1 += 1;
            f.seg_chunks.push((name, bytes.into()));
        }
        f.segment.extend_from_slice(bytes);
        if f.segment.len() >= self.cfg.flowlets.segment {
            self.end_segment(f);
        }
    }

    /// Algorithm 8, lines 16-27, for the segment gathered: a flowlet boundary, the past
    /// flowlets that share its chunks, the chunks into the cache, the feedback.
    fn end_segment(&mut self, f: &mut Flow) {
        if f.segment.is_empty() {
            return;
        }
        let segment = std::mem::take(&mut f.segment);
        let fc = self.cfg.flowlets;
        let moments = flowlet::Moments::of(&segment, fc.order);
        let gain = moments.gain();
        let boundary = match (f.current, &f.previous) {
            (Some(id), Some((prev, prev_gain))) => {
                let long = self
                    .store
                    .flowlet(id)
                    .is_none_or(|fl| fl.names.len() >= fc.max_names);
                let full = segment.len() * 2 >= fc.segment;
                long || (full && prev.join(&moments).gain() - prev_gain - gain > fc.d_thresh)
            }
            (None, _) => true,
            (Some(_), None) => false,
        };
        if boundary {
            let first = f.current.is_none();
            let id = self.store.new_flowlet(f.current);
            if let (true, Some(key)) = (first, f.request) {
                // The response's first flowlet, for the next time this request goes up.
                self.responses.remember(key, id);
            }
            f.current = Some(id);
            f.matching.restart(id);
            self.stats.flowlets += 1;
        }
        let current = f.current.expect("a flowlet was begun");
        f.previous = Some((moments, gain));
        f.segment = segment;
        f.segment.clear();
        let chunks = std::mem::take(&mut f.seg_chunks);
        let names: Vec<Name> = chunks.iter().map(|c| c.0).collect();
        let pasts = if self.cfg.feedback {
            let mut p = self.store.flowlets_with(&names, current);
            if names.iter().any(|n| self.store.appeared_in(*n, current)) {
                p.push(current);
            }
            p
        } else {
            Vec::new()
        };
        self.store.touch(current);
        for (n, b) in chunks {
            self.store.append(current, n, b);
        }
        if pasts.is_empty() {
            return;
        }
        let Some(best) = f
            .matching
            .best(&self.store, &names, &pasts, &self.cfg.select)
        else {
            return;
        };
        self.store.touch(best);
        let (Some(known), Some(credit)) = (
            self.known.get_mut(&f.source),
            self.credits.get_mut(&f.source),
        ) else {
            return;
        };
        if !credit.allows(self.cfg.budget.as_ref()) {
            self.stats.feedback_withheld += 1;
            return;
        }
        let delta = f.delta.unwrap_or(self.delta);
        let adv = f
            .matching
            .advertise(&self.store, best, delta, known, &self.cfg.select);
        if !adv.is_empty() {
            queue_advertisement(&mut self.stats, credit, &mut f.upstream, adv);
        }
    }

    /// Append `flow`'s messages for the source that are due (feedback, a request to resend,
    /// then the latest acknowledgement when it is due or rides with them) to `out`; nothing
    /// when none is due. An acknowledgement not due waits ([`DestinationConfig::ack_every`]).
    pub fn upstream(&mut self, flow: FlowId, out: &mut Vec<u8>) -> Result<(), DestinationError> {
        self.upstream_when(flow, out, false)
    }

    /// As [`Destination::upstream`], with the acknowledgement held back too: for a message
    /// that goes up anyway (the program's request), which it rides with.
    pub fn upstream_all(
        &mut self,
        flow: FlowId,
        out: &mut Vec<u8>,
    ) -> Result<(), DestinationError> {
        self.upstream_when(flow, out, true)
    }

    fn upstream_when(
        &mut self,
        flow: FlowId,
        out: &mut Vec<u8>,
        going: bool,
    ) -> Result<(), DestinationError> {
        let f = self
            .flows
            .get_mut(&flow)
            .ok_or(DestinationError::NoFlow(flow))?;
        let going = going || !f.upstream.is_empty() || f.ack_due;
        out.append(&mut f.upstream);
        if !going {
            return Ok(());
        }
        if let Some(seq) = f.ack.take() {
            let before = out.len();
            Upstream::Ack(seq).encode(out);
            self.stats.control_bytes += (out.len() - before) as u64;
        }
        (f.unacked, f.ack_due) = (0, false);
        Ok(())
    }
}

/// Queue one advertisement of `names` for the source, counting it and spending its bytes of
/// the source's credit.
fn queue_advertisement(
    stats: &mut DestinationStats,
    credit: &mut budget::Credit,
    upstream: &mut Vec<u8>,
    names: Vec<Name>,
) {
    let before = upstream.len();
    stats.feedback_names += names.len() as u64;
    credit.advertise(&names);
    Upstream::Advertise(names).encode(upstream);
    let bytes = upstream.len() - before;
    stats.feedback_bytes += bytes as u64;
    credit.spend(bytes);
}

/// How many names `bytes` of a stream hold, chunks averaging `mean_chunk` bytes, rounded up
/// (the thesis's δ counts names; what the source has sent ahead is known in bytes).
pub fn names_in(bytes: f64, mean_chunk: f64) -> usize {
    let n = bytes / mean_chunk.max(1.0);
    if n.is_finite() && n > 0.0 {
        n.ceil().min(1e6) as usize
    } else {
        0
    }
}

#[cfg(test)]
mod tests;
