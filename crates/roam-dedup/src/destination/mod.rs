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
    ack: Option<u64>,
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

    /// Append `flow`'s messages for the source (feedback, then the latest acknowledgement) to
    /// `out`.
    pub fn upstream(&mut self, flow: FlowId, out: &mut Vec<u8>) -> Result<(), DestinationError> {
        let f = self
            .flows
            .get_mut(&flow)
            .ok_or(DestinationError::NoFlow(flow))?;
        out.append(&mut f.upstream);
        if let Some(seq) = f.ack.take() {
            let before = out.len();
            Upstream::Ack(seq).encode(out);
            self.stats.control_bytes += (out.len() - before) as u64;
        }
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
mod tests {
    use super::*;

    /// Found by fuzzing: a record naming a chunk the phone lacks, twice, once made the second
    /// reference copy bytes the first never added.
    #[test]
    fn a_record_naming_an_unknown_chunk_twice_is_asked_for_again() {
        let mut body = Vec::new();
        wire::put_name(&mut body, Name(7), 300);
        wire::put_name(&mut body, Name(7), 300);
        let mut rec = Vec::new();
        wire::put_record(&mut rec, wire::Kind::First, 0, 1, &body);
        let mut d = Destination::new(DestinationConfig::default());
        d.open(1);
        let mut out = Vec::new();
        assert_eq!(d.receive(1, &rec, &mut out).unwrap(), rec.len());
        assert!(out.is_empty());
        let mut up = Vec::new();
        d.upstream(1, &mut up).unwrap();
        let (m, _) = Upstream::decode(&up).unwrap().unwrap();
        assert!(matches!(m, Upstream::Resend { seq: 0, .. }), "{m:?}");
    }

    /// The first names `flow` advertises after the start of `stream` (`len` bytes) arrives
    /// through a source that never saw it (every chunk a literal).
    fn first_advertised(d: &mut Destination, flow: FlowId, stream: &[u8], len: usize) -> Vec<Name> {
        use crate::source::{Source, SourceConfig};
        let mut src = Source::new(SourceConfig::default()).unwrap();
        src.open(flow);
        let mut wire = Vec::new();
        src.push(flow, &stream[..len], &mut wire).unwrap();
        src.flush(flow, &mut wire).unwrap();
        let mut out = Vec::new();
        assert_eq!(d.receive(flow, &wire, &mut out).unwrap(), wire.len());
        assert!(out == stream[..len]);
        let mut up = Vec::new();
        d.upstream(flow, &mut up).unwrap();
        let mut at = 0;
        while let Some((m, n)) = Upstream::decode(&up[at..]).unwrap() {
            at += n;
            if let Upstream::Advertise(names) = m {
                return names;
            }
        }
        Vec::new()
    }

    /// A destination that read `past` (flow 1, through source 0), and where each of the
    /// past's names sits in it (every chunk longer than a reference).
    fn with_past(past: &[u8]) -> (Destination, HashMap<Name, usize>) {
        with_past_as(past, DestinationConfig::default())
    }

    /// [`with_past`] with `cfg`.
    fn with_past_as(past: &[u8], cfg: DestinationConfig) -> (Destination, HashMap<Name, usize>) {
        let mut d = Destination::new(cfg);
        let mut src = crate::source::Source::new(crate::source::SourceConfig::default()).unwrap();
        src.open(1);
        d.open_via(1, 0);
        let mut wire = Vec::new();
        src.push(1, past, &mut wire).unwrap();
        src.flush(1, &mut wire).unwrap();
        let mut out = Vec::new();
        d.receive(1, &wire, &mut out).unwrap();
        assert!(out == past);
        d.close(1);
        let mut cuts = Vec::new();
        crate::source::SourceConfig::default()
            .chunking
            .cuts(past, &mut cuts);
        let mut at = HashMap::new();
        let mut prev = 0;
        for c in cuts {
            let chunk = &past[prev..c];
            prev = c;
            if chunk.len() > 2 * Name::LEN {
                let i = at.len();
                at.entry(Name::of(chunk)).or_insert(i);
            }
        }
        (d, at)
    }

    /// Issue 46: δ is per flow. A phone reads the start of a past stream again; the first
    /// advertisement starts right after the last match (δ = 0), or 40 names further on when
    /// the flow's δ is 40. Another flow of the same destination keeps the destination's δ,
    /// and the destination's δ ([`Destination::set_rates`]) moves only the flows without
    /// their own.
    #[test]
    fn each_flow_advertises_from_its_own_delta_past_the_last_match() {
        let past = crate::testdata::text(200_000, 46);
        let start = |at: &HashMap<Name, usize>, names: &[Name]| -> usize {
            let first = names.iter().filter_map(|n| at.get(n).copied()).min();
            first.expect("an advertisement of the past")
        };
        // Without δ.
        let (mut d, at) = with_past(&past);
        d.open_via(2, 1);
        let plain = start(&at, &first_advertised(&mut d, 2, &past, 6_000));
        // With δ = 40 for flow 2; flow 3 (through another source, reading the same) without.
        let (mut d, at) = with_past(&past);
        d.open_via(2, 1);
        d.open_via(3, 2);
        d.set_flow_delta(2, 40);
        assert_eq!(
            (d.delta(2), d.delta(3), d.delta(4)),
            (Some(40), Some(0), None)
        );
        let ahead = start(&at, &first_advertised(&mut d, 2, &past, 6_000));
        assert_eq!(ahead, plain + 40);
        let other = start(&at, &first_advertised(&mut d, 3, &past, 6_000));
        assert_eq!(other, plain);
        d.set_rates(1e6, 1e6, 0.01, 250.0); // 1 MB/s for 10.7 ms: 43 names
        assert_eq!((d.delta(2), d.delta(3)), (Some(40), Some(43)));
    }

    /// A phone that read a stream reads it again, 4 KiB at a time, through a source that never
    /// saw it, under `budget`; its feedback reaches the source if `heard`. What the phone and
    /// the source did.
    fn read_again(
        len: usize,
        budget: Option<budget::FeedbackBudget>,
        heard: bool,
    ) -> (DestinationStats, crate::source::SourceStats) {
        read_again_times(len, 1, budget, heard)
    }

    /// [`read_again`], the stream read `times` times over in one flow.
    fn read_again_times(
        len: usize,
        times: usize,
        budget: Option<budget::FeedbackBudget>,
        heard: bool,
    ) -> (DestinationStats, crate::source::SourceStats) {
        let past = crate::testdata::text(len, 47);
        let again = past.repeat(times);
        let cfg = DestinationConfig {
            budget,
            ..Default::default()
        };
        let (mut d, _) = with_past_as(&past, cfg);
        let mut src = crate::source::Source::new(crate::source::SourceConfig::default()).unwrap();
        src.open(2);
        d.open_via(2, 1);
        let (mut wire, mut out, mut up) = (Vec::new(), Vec::new(), Vec::new());
        let now = std::time::Instant::now();
        for piece in again.chunks(4096) {
            src.push(2, piece, &mut wire).unwrap();
            let used = d.receive(2, &wire, &mut out).unwrap();
            wire.drain(..used);
            d.upstream(2, &mut up).unwrap();
            if heard {
                let used = src.handle(2, &up, now, &mut wire).unwrap();
                up.drain(..used);
            } else {
                up.clear();
            }
        }
        src.flush(2, &mut wire).unwrap();
        let used = d.receive(2, &wire, &mut out).unwrap();
        assert_eq!(used, wire.len());
        assert!(out == again, "the stream out is the stream in");
        (d.stats(), src.stats())
    }

    /// Feedback that finds nothing (the source never hears it) stops costing once its credit
    /// is spent: at most the start, the share of what was delivered and one message. The
    /// thesis's phone (no budget) goes on advertising.
    #[test]
    fn feedback_that_finds_nothing_stops_at_its_credit() {
        let b = budget::FeedbackBudget::default();
        let (governed, _) = read_again(2_000_000, Some(b), false);
        let bound = b.start as f64 + b.share * 2_000_000.0 + 1500.0;
        assert!(
            (governed.feedback_bytes as f64) < bound,
            "{} bytes of feedback, bound {bound}: {governed:?}",
            governed.feedback_bytes
        );
        assert!(governed.feedback_withheld > 0, "{governed:?}");
        assert_eq!(governed.feedback_found_bytes, 0);
        let (thesis, _) = read_again(2_000_000, None, false);
        assert!(
            thesis.feedback_bytes as f64 > 2.0 * bound,
            "the thesis's phone advertises on: {thesis:?}"
        );
    }

    /// A stream read twice over through a source that never hears the phone: the source's
    /// regular cache finds the second time, whose names the phone had advertised, but they came
    /// first as literals, so they are not feedback's and earn no credit.
    #[test]
    fn a_repeat_the_regular_cache_finds_is_not_feedback() {
        let (d, src) = read_again_times(200_000, 2, None, false);
        assert!(src.regular_hit_bytes > 100_000, "{src:?}");
        assert!(d.feedback_names > 0, "{d:?}");
        assert_eq!(d.feedback_found_bytes, 0, "{d:?}");
    }

    /// Feedback that pays is not held back: reading a past stream again finds as much of it
    /// with the credit as without, though the credit starts at a few names and no share of
    /// the traffic tops it up (what feedback finds pays for the rest), and the phone's count
    /// of what its feedback found is the source's.
    #[test]
    fn feedback_that_pays_is_not_held_back() {
        let b = budget::FeedbackBudget {
            start: 256,
            share: 0.0,
            ..Default::default()
        };
        let (governed, at_src) = read_again(200_000, Some(b), true);
        let (thesis, _) = read_again(200_000, None, true);
        assert!(
            governed.feedback_found_bytes > 100_000,
            "found {} of 200000: {governed:?}",
            governed.feedback_found_bytes
        );
        assert!(
            governed.feedback_found_bytes as f64 >= 0.95 * thesis.feedback_found_bytes as f64,
            "{governed:?} against {thesis:?}"
        );
        assert_eq!(governed.feedback_found_bytes, at_src.feedback_hit_bytes);
    }

    /// A destination hinting at most `hint_names` names a request.
    fn hinting(hint_names: usize) -> Destination {
        Destination::new(DestinationConfig {
            select: SelectConfig {
                hint_names,
                ..Default::default()
            },
            ..Default::default()
        })
    }

    /// A source with 1 MiB for each cache.
    fn source() -> crate::source::Source {
        crate::source::Source::new(crate::source::SourceConfig {
            regular_bytes: 1 << 20,
            feedback_bytes: 1 << 20,
            ..Default::default()
        })
        .unwrap()
    }

    /// One exchange on `flow`: the request (and what it hints) up to `src`, the response
    /// `resp` down through it, delivered whole.
    fn exchange(
        d: &mut Destination,
        src: &mut crate::source::Source,
        flow: FlowId,
        req: &str,
        resp: &[u8],
    ) {
        d.request(flow, req.as_bytes()).unwrap();
        let mut up = Vec::new();
        d.upstream(flow, &mut up).unwrap();
        let mut back = Vec::new();
        assert_eq!(
            src.handle(flow, &up, std::time::Instant::now(), &mut back)
                .unwrap(),
            up.len()
        );
        let mut wire = Vec::new();
        src.push(flow, resp, &mut wire).unwrap();
        src.flush(flow, &mut wire).unwrap();
        let mut out = Vec::new();
        assert_eq!(d.receive(flow, &wire, &mut out).unwrap(), wire.len());
        assert!(out == resp, "the stream out is the stream in");
    }

    /// Beyond the thesis ([`hint`]): a page asked for again, edited since, through a source
    /// that never saw it. The names of its last response go up at the request, before any of
    /// the new one, and the source finds most of it by feedback; another request, or hints
    /// turned off, advertise nothing.
    #[test]
    fn a_request_asked_again_advertises_its_last_response_before_any_of_it_arrives() {
        use crate::source::Source;
        let page = crate::testdata::text(60_000, 7);
        let mut edited = page.clone();
        edited.splice(
            30_000..30_000,
            b"an edit in the middle of the page".iter().copied(),
        );
        let ask = |cookie: &str| {
            format!("GET /a.html HTTP/1.1\r\nHost: docs\r\nCookie: {cookie}\r\n\r\n")
        };
        let fetch =
            |d: &mut Destination, src: &mut Source, flow: FlowId, req: &str, body: &[u8]| {
                src.open(flow);
                let hinted = d.stats().hint_names;
                exchange(d, src, flow, req, body);
                d.close(flow);
                d.stats().hint_names - hinted
            };
        for hint_names in [744, 0] {
            let mut d = hinting(hint_names);
            d.open_via(1, 0);
            assert_eq!(fetch(&mut d, &mut source(), 1, &ask("1"), &page), 0);
            // Another page's request: nothing to hint.
            d.open_via(2, 1);
            let mut other = source();
            let other_page = crate::testdata::text(20_000, 8);
            let req = "GET /b.html HTTP/1.1\r\nHost: docs\r\n\r\n";
            assert_eq!(fetch(&mut d, &mut other, 2, req, &other_page), 0);
            // The same request again, through a source that never saw the page.
            d.open_via(3, 2);
            let mut fresh = source();
            let hinted = fetch(&mut d, &mut fresh, 3, &ask("2"), &edited);
            let found = fresh.stats().feedback_hit_bytes as f64 / edited.len() as f64;
            if hint_names == 0 {
                assert_eq!(hinted, 0);
            } else {
                assert!(hinted > 100, "{hinted} names hinted");
                assert!(found > 0.8, "found by feedback: {found:.3}");
            }
        }
    }

    /// Beyond the thesis ([`exchange`]): a story prefetched on one network as the second page
    /// of a kept-alive connection, asked for on the other network under the URL of the next
    /// hour, also as a connection's second page. Its request goes up with the names of the
    /// response its moved key stands for, and the other network's source, which never saw
    /// the story, finds most of it by feedback; with hints off it finds nothing.
    #[test]
    fn a_story_whose_url_moved_is_found_on_a_kept_alive_connection() {
        let story = crate::testdata::text(12_000, 11);
        let http = |body: &[u8]| {
            let mut r = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )
            .into_bytes();
            r.extend_from_slice(body);
            r
        };
        let get = |path: &str| format!("GET {path} HTTP/1.1\r\nHost: news\r\n\r\n");
        for hint_names in [744, 0] {
            let mut d = hinting(hint_names);
            // On WiFi, at hour 97.
            let mut wifi = source();
            d.open_via(1, 0);
            wifi.open(1);
            let front = crate::testdata::text(3_000, 12);
            exchange(&mut d, &mut wifi, 1, &get("/world/"), &http(&front));
            exchange(
                &mut d,
                &mut wifi,
                1,
                &get("/world/h97/1234-storm.html"),
                &http(&story),
            );
            d.close(1);
            // On cellular, at hour 98, from another section's page: the story moved.
            let mut cell = source();
            d.open_via(2, 1);
            cell.open(2);
            let sports = crate::testdata::text(3_000, 13);
            exchange(&mut d, &mut cell, 2, &get("/sports/"), &http(&sports));
            let before = cell.stats().feedback_hit_bytes;
            exchange(
                &mut d,
                &mut cell,
                2,
                &get("/world/h98/1234-storm.html"),
                &http(&story),
            );
            let found = (cell.stats().feedback_hit_bytes - before) as f64 / story.len() as f64;
            if hint_names == 0 {
                assert_eq!(d.stats().moved_hints, 0);
                assert!(found < 0.1, "found by feedback without hints: {found:.3}");
            } else {
                assert_eq!(d.stats().moved_hints, 1);
                assert!(found > 0.8, "found by feedback: {found:.3}");
            }
        }
    }
}
