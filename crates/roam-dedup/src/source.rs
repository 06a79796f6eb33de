//! dd-src: the box upstream of the last hop (the thesis's Algorithm 5).
//!
//! One [`Source`] serves every flow through it: its two caches are shared, as a base
//! station's are, and each flow ([`FlowId`]) has its own record numbers, the tail it holds
//! back (so a chunk cut by the end of a read is cut by its content once more arrives), and the
//! records it keeps until the phone acknowledges them.
//!
//! Per chunk (the spec's order): look the name up in the regular cache; on a miss insert it,
//! then look it up in the feedback cache, whose entries go after their first use. A hit in
//! either sends the name, a miss the bytes.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use crate::chunk::{BadChunking, Chunking};
use crate::lru::Lru;
use crate::name::{checksum, Name};
use crate::wire::{self, Kind, Upstream, WireError, MAX_RECORD};

/// A flow through the source: one direction of one carried connection.
pub type FlowId = u64;

/// How a source behaves.
#[derive(Clone, Debug)]
pub struct SourceConfig {
    /// How streams are cut (the phone must cut the same way).
    pub chunking: Chunking,
    /// Content the regular cache stands for, bytes (the thesis: about 1 MB with the feedback
    /// cache).
    pub regular_bytes: u64,
    /// Content the feedback cache stands for, bytes.
    pub feedback_bytes: u64,
    /// Original bytes kept of records that name chunks, until the phone acknowledges them
    /// (per flow); past it, records go as literals, which need no keeping.
    pub keep_bytes: usize,
    /// Names of feedback accepted a second from one phone (a hostile phone cannot flood the
    /// feedback cache faster, nor crowd out the others'); the rest are dropped and counted.
    pub feedback_names_per_s: u32,
    /// Names of feedback accepted a second from all phones together.
    pub feedback_names_per_s_total: u32,
    /// Bits of each name used ([`Name::of_bits`]; 64, all of them, except in tests of
    /// collisions). The phone must use as many.
    pub name_bits: u32,
}

impl Default for SourceConfig {
    fn default() -> SourceConfig {
        SourceConfig {
            chunking: Chunking::default(),
            regular_bytes: 512 << 10,
            feedback_bytes: 512 << 10,
            keep_bytes: 512 << 10,
            feedback_names_per_s: 20_000,
            feedback_names_per_s_total: 100_000,
            name_bits: 64,
        }
    }
}

/// What a source has done (bytes, chunks, names).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SourceStats {
    /// Bytes pushed in.
    pub bytes_in: u64,
    /// Record bytes sent (what the last hop carried).
    pub bytes_out: u64,
    /// Bytes sent as literals.
    pub literal_bytes: u64,
    /// Bytes replaced by names found in the regular cache.
    pub regular_hit_bytes: u64,
    /// Bytes replaced by names found in the feedback cache.
    pub feedback_hit_bytes: u64,
    /// Records sent, first time.
    pub records: u64,
    /// Records sent again as literals at the phone's request.
    pub resent: u64,
    /// Records sent as literals because the kept records reached `keep_bytes`.
    pub unkept: u64,
    /// Names received as feedback, and of those, dropped over the rate bound.
    pub feedback_names: u64,
    /// Names of feedback dropped over `feedback_names_per_s`.
    pub feedback_dropped: u64,
    /// Upstream message bytes received.
    pub upstream_bytes: u64,
    /// Batches of upstream messages handled ([`Source::handle`] calls that used any). The
    /// relay calls it for each piece of the carrier's messages it reads, so this is at least
    /// their number; each message has framing and packets the last hop carries too.
    pub upstream_batches: u64,
    /// Of the upstream messages: advertisements (feedback and hints) ...
    pub advertisements: u64,
    /// ... and acknowledgements.
    pub acks: u64,
    /// Bytes passed through (encrypted, or dedup off).
    pub passthrough_bytes: u64,
}

/// What one flow did (returned when it closes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowStats {
    /// Bytes pushed in.
    pub bytes_in: u64,
    /// Record bytes sent.
    pub bytes_out: u64,
    /// Bytes replaced by names from the regular cache.
    pub regular_hit_bytes: u64,
    /// Bytes replaced by names from the feedback cache.
    pub feedback_hit_bytes: u64,
    /// Upstream message bytes received (feedback, acknowledgements, requests).
    pub upstream_bytes: u64,
    /// Bytes passed through.
    pub passthrough_bytes: u64,
}

/// A source that cannot go on with a flow.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The chunking is unusable.
    #[error(transparent)]
    Chunking(#[from] BadChunking),
    /// An upstream message is malformed.
    #[error("upstream message: {0}")]
    Wire(#[from] WireError),
    /// The phone asked again for a record that is not kept (never named chunks, already
    /// acknowledged, or never sent): a broken or hostile phone.
    #[error("flow {flow}: the phone asked for record {seq} again, which is not kept")]
    NotKept { flow: FlowId, seq: u64 },
    /// A flow not opened.
    #[error("flow {0} is not open")]
    NoFlow(FlowId),
}

#[derive(Debug, Default)]
struct Flow {
    /// The phone it serves (its feedback counts against that phone's rate).
    phone: u64,
    stats: FlowStats,
    seq: u64,
    /// Bytes held back: the stream after the last content-defined cut.
    tail: Vec<u8>,
    /// Records that named chunks, and their original bytes, oldest first.
    kept: VecDeque<(u64, Vec<u8>)>,
    kept_bytes: usize,
    /// Records not yet acknowledged, oldest first: each one's number and the stream's bytes
    /// encoded up to its end ([`Source::ahead`]).
    sent: VecDeque<(u64, u64)>,
    /// Stream bytes encoded into records, and of those, acknowledged.
    encoded: u64,
    acknowledged: u64,
    /// The record number after the last request to acknowledge ([`Kind::Ask`]).
    asked: Option<u64>,
}

/// dd-src.
#[derive(Debug)]
pub struct Source {
    cfg: SourceConfig,
    regular: Lru,
    feedback: Lru,
    flows: HashMap<FlowId, Flow>,
    stats: SourceStats,
    /// The feedback rate bounds: all phones together, and each phone's.
    total: Bucket,
    phones: HashMap<u64, Bucket>,
    cuts: Vec<usize>,
    body: Vec<u8>,
}

impl Source {
    /// A source with `cfg`.
    pub fn new(cfg: SourceConfig) -> Result<Source, SourceError> {
        cfg.chunking.validate()?;
        Ok(Source {
            regular: Lru::new(cfg.regular_bytes),
            feedback: Lru::new(cfg.feedback_bytes),
            total: Bucket::full(cfg.feedback_names_per_s_total),
            phones: HashMap::new(),
            cfg,
            flows: HashMap::new(),
            stats: SourceStats::default(),
            cuts: Vec::new(),
            body: Vec::new(),
        })
    }

    /// What it has done.
    pub fn stats(&self) -> SourceStats {
        self.stats
    }

    /// How it behaves.
    pub fn config(&self) -> &SourceConfig {
        &self.cfg
    }

    /// Start a flow (of phone 0).
    pub fn open(&mut self, flow: FlowId) {
        self.open_for(flow, 0);
    }

    /// Start a flow serving `phone` (any number naming it: the relay uses its address), whose
    /// feedback counts against that phone's rate.
    pub fn open_for(&mut self, flow: FlowId, phone: u64) {
        self.flows.entry(flow).or_default().phone = phone;
    }

    /// Records of `flow` kept until the phone acknowledges them (0 for a flow not open):
    /// while any is, the phone may still ask for one again, so whoever carries the records
    /// must still be able to send it a repair.
    pub fn unacknowledged(&self, flow: FlowId) -> usize {
        self.flows.get(&flow).map_or(0, |f| f.kept.len())
    }

    /// Stream bytes of `flow` encoded into records the phone has not yet acknowledged (0 for
    /// a flow not open): how far the source has run ahead of the phone. Feedback can only
    /// replace chunks not yet encoded, so a source paced on this bound
    /// (`roam_net::proxy`'s relay) has, when an advertisement arrives beside the phone's
    /// acknowledgement, encoded at most the bound past where the phone was: the phone's δ.
    pub fn ahead(&self, flow: FlowId) -> u64 {
        self.flows
            .get(&flow)
            .map_or(0, |f| f.encoded - f.acknowledged)
    }

    /// End a flow (its held-back tail must have been flushed); what it did.
    pub fn close(&mut self, flow: FlowId) -> Option<FlowStats> {
        self.flows.remove(&flow).map(|f| f.stats)
    }

    /// Bytes of `flow` to pass through as they are (encrypted: nothing to find): appended to
    /// `out` as passthrough records, after whatever the flow held back.
    pub fn pass(
        &mut self,
        flow: FlowId,
        data: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), SourceError> {
        self.flush(flow, out)?;
        let f = self.flows.get_mut(&flow).ok_or(SourceError::NoFlow(flow))?;
        for part in data.chunks(MAX_RECORD) {
            let mut body = Vec::with_capacity(part.len() + part.len() / wire::MAX_SHIM_LEN * 2 + 2);
            wire::put_literal(&mut body, part);
            let before = out.len();
            wire::put_record(out, Kind::Passthrough, f.seq, checksum(part), &body);
            f.seq += 1;
            let n = (out.len() - before) as u64;
            self.stats.bytes_out += n;
            f.stats.bytes_out += n;
        }
        self.stats.bytes_in += data.len() as u64;
        self.stats.passthrough_bytes += data.len() as u64;
        f.stats.bytes_in += data.len() as u64;
        f.stats.passthrough_bytes += data.len() as u64;
        Ok(())
    }

    /// Bytes of `flow`'s stream: append the records for every chunk whose end its content
    /// decided to `out`; the bytes after the last such cut wait for more, or [`Source::flush`].
    pub fn push(
        &mut self,
        flow: FlowId,
        data: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), SourceError> {
        self.stats.bytes_in += data.len() as u64;
        let mut f = self.flows.remove(&flow).ok_or(SourceError::NoFlow(flow))?;
        f.stats.bytes_in += data.len() as u64;
        f.tail.extend_from_slice(data);
        let mut cuts = std::mem::take(&mut self.cuts);
        self.cfg.chunking.cuts(&f.tail, &mut cuts);
        // The last cut is the data's end, not (necessarily) the content's: hold it back, unless
        // the tail is past a record's worth (then its max-size chunks are cut anyway).
        let keep_from = if cuts.len() > 1 {
            cuts[cuts.len() - 2]
        } else {
            0
        };
        if keep_from > 0 {
            let ready: Vec<u8> = f.tail.drain(..keep_from).collect();
            cuts.truncate(cuts.len() - 1);
            self.emit(&mut f, &ready, &cuts, out);
        }
        self.cuts = cuts;
        self.flows.insert(flow, f);
        Ok(())
    }

    /// Send what `flow` holds back (the stream paused: nothing more to read for now).
    pub fn flush(&mut self, flow: FlowId, out: &mut Vec<u8>) -> Result<(), SourceError> {
        let mut f = self.flows.remove(&flow).ok_or(SourceError::NoFlow(flow))?;
        if !f.tail.is_empty() {
            let ready = std::mem::take(&mut f.tail);
            let mut cuts = std::mem::take(&mut self.cuts);
            self.cfg.chunking.cuts(&ready, &mut cuts);
            self.emit(&mut f, &ready, &cuts, out);
            self.cuts = cuts;
        }
        self.flows.insert(flow, f);
        Ok(())
    }

    /// `flow`'s stream ended: append what it held back and, while the phone has records to
    /// acknowledge that it may still ask for again, a request to acknowledge ([`Kind::Ask`]).
    pub fn end(&mut self, flow: FlowId, out: &mut Vec<u8>) -> Result<(), SourceError> {
        self.flush(flow, out)?;
        let f = self.flows.get_mut(&flow).ok_or(SourceError::NoFlow(flow))?;
        if !f.kept.is_empty() {
            self.stats.bytes_out += put_ask(f, out);
        }
        Ok(())
    }

    /// The source's pacing holds `flow` back until the phone acknowledges ([`Source::ahead`]):
    /// append a request to acknowledge ([`Kind::Ask`]) if records are unacknowledged and none
    /// was asked for since the last record.
    pub fn ask(&mut self, flow: FlowId, out: &mut Vec<u8>) -> Result<(), SourceError> {
        let f = self.flows.get_mut(&flow).ok_or(SourceError::NoFlow(flow))?;
        if !f.sent.is_empty() {
            self.stats.bytes_out += put_ask(f, out);
        }
        Ok(())
    }

    /// Records for `data` (its chunks ending at `cuts`), at most [`MAX_RECORD`] bytes each.
    fn emit(&mut self, f: &mut Flow, data: &[u8], cuts: &[usize], out: &mut Vec<u8>) {
        let mut start = 0;
        let mut i = 0;
        while i < cuts.len() {
            // As many chunks as fit one record.
            let mut j = i;
            while j + 1 < cuts.len() && cuts[j + 1] - start <= MAX_RECORD {
                j += 1;
            }
            let end = cuts[j];
            self.record(f, &data[start..end], &cuts[i..=j], start, out);
            start = end;
            i = j + 1;
        }
    }

    /// One record of `bytes`, its chunks ending at `cuts` (offsets from `base`).
    fn record(
        &mut self,
        f: &mut Flow,
        bytes: &[u8],
        cuts: &[usize],
        base: usize,
        out: &mut Vec<u8>,
    ) {
        let may_name = f.kept_bytes + bytes.len() <= self.cfg.keep_bytes;
        let mut body = std::mem::take(&mut self.body);
        body.clear();
        let mut named = false;
        let mut prev = 0;
        for &c in cuts {
            let chunk = &bytes[prev..c - base];
            prev = c - base;
            let name = Name::of_bits(chunk, self.cfg.name_bits);
            // Only chunks longer than a reference are worth naming.
            let worth = chunk.len() > 2 * Name::LEN;
            let hit = if !worth {
                None
            } else if self.regular.touch(name) {
                Some(true)
            } else {
                self.regular.insert(name, chunk.len() as u32);
                if self.feedback.remove(name) {
                    Some(false)
                } else {
                    None
                }
            };
            match hit {
                Some(regular) if may_name => {
                    wire::put_name(&mut body, name, chunk.len());
                    named = true;
                    if regular {
                        self.stats.regular_hit_bytes += chunk.len() as u64;
                        f.stats.regular_hit_bytes += chunk.len() as u64;
                    } else {
                        self.stats.feedback_hit_bytes += chunk.len() as u64;
                        f.stats.feedback_hit_bytes += chunk.len() as u64;
                    }
                }
                _ => {
                    wire::put_literal(&mut body, chunk);
                    self.stats.literal_bytes += chunk.len() as u64;
                }
            }
        }
        if !may_name {
            self.stats.unkept += 1;
        }
        let seq = f.seq;
        f.seq += 1;
        let before = out.len();
        wire::put_record(out, Kind::First, seq, checksum(bytes), &body);
        self.stats.bytes_out += (out.len() - before) as u64;
        f.stats.bytes_out += (out.len() - before) as u64;
        self.stats.records += 1;
        if named {
            f.kept_bytes += bytes.len();
            f.kept.push_back((seq, bytes.to_vec()));
        }
        f.encoded += bytes.len() as u64;
        f.sent.push_back((seq, f.encoded));
        if f.sent.len() > MAX_UNACKNOWLEDGED {
            // A phone that does not acknowledge: count the oldest as if it had (the bound
            // then no longer holds the source back; nothing grows without bound).
            if let Some((_, end)) = f.sent.pop_front() {
                f.acknowledged = end;
            }
        }
        self.body = body;
    }

    /// Upstream bytes from `flow`'s phone: every whole message at the start of `buf` is
    /// handled (feedback to the feedback cache, acknowledgements free kept records, a request
    /// to resend appends the record again, as literals, to `out`); the bytes used.
    pub fn handle(
        &mut self,
        flow: FlowId,
        buf: &[u8],
        now: Instant,
        out: &mut Vec<u8>,
    ) -> Result<usize, SourceError> {
        let mut used = 0;
        while let Some((msg, n)) = Upstream::decode(&buf[used..])? {
            used += n;
            self.stats.upstream_bytes += n as u64;
            if let Some(f) = self.flows.get_mut(&flow) {
                f.stats.upstream_bytes += n as u64;
            }
            self.message(flow, msg, now, out)?;
        }
        if used > 0 {
            self.stats.upstream_batches += 1;
        }
        Ok(used)
    }

    fn message(
        &mut self,
        flow: FlowId,
        msg: Upstream,
        now: Instant,
        out: &mut Vec<u8>,
    ) -> Result<(), SourceError> {
        let f = self.flows.get_mut(&flow).ok_or(SourceError::NoFlow(flow))?;
        match msg {
            Upstream::Advertise(names) => {
                self.stats.advertisements += 1;
                let (per_phone, total) = (
                    self.cfg.feedback_names_per_s,
                    self.cfg.feedback_names_per_s_total,
                );
                if !self.phones.contains_key(&f.phone) && self.phones.len() >= MAX_PHONES {
                    // Forget the phone heard from longest ago.
                    let old = self
                        .phones
                        .iter()
                        .min_by_key(|(_, b)| b.refilled)
                        .map(|(k, _)| *k);
                    if let Some(old) = old {
                        self.phones.remove(&old);
                    }
                }
                let phone = self
                    .phones
                    .entry(f.phone)
                    .or_insert_with(|| Bucket::full(per_phone));
                phone.refill(now, per_phone);
                self.total.refill(now, total);
                for name in names {
                    self.stats.feedback_names += 1;
                    if phone.tokens < 1.0 || self.total.tokens < 1.0 {
                        self.stats.feedback_dropped += 1;
                        continue;
                    }
                    phone.tokens -= 1.0;
                    self.total.tokens -= 1.0;
                    // The phone holds the chunk; its size is unknown here: count an average
                    // chunk against the cache's bound.
                    if !self.regular.contains(name) {
                        self.feedback.insert(name, self.cfg.chunking.avg());
                    }
                }
            }
            Upstream::Ack(seq) => {
                self.stats.acks += 1;
                while f.kept.front().is_some_and(|k| k.0 <= seq) {
                    let (_, bytes) = f.kept.pop_front().expect("front exists");
                    f.kept_bytes -= bytes.len();
                }
                while let Some(&(_, end)) = f.sent.front().filter(|s| s.0 <= seq) {
                    f.acknowledged = end;
                    f.sent.pop_front();
                }
            }
            Upstream::Resend { seq, forget } => {
                for name in &forget {
                    self.regular.remove(*name);
                    self.feedback.remove(*name);
                }
                let Some(pos) = f.kept.iter().position(|k| k.0 == seq) else {
                    return Err(SourceError::NotKept { flow, seq });
                };
                let (_, bytes) = f.kept.remove(pos).expect("position exists");
                f.kept_bytes -= bytes.len();
                let mut cuts = std::mem::take(&mut self.cuts);
                self.cfg.chunking.cuts(&bytes, &mut cuts);
                let mut body = std::mem::take(&mut self.body);
                body.clear();
                let mut prev = 0;
                for &c in &cuts {
                    wire::put_literal(&mut body, &bytes[prev..c]);
                    prev = c;
                }
                let before = out.len();
                wire::put_record(out, Kind::Resent, seq, checksum(&bytes), &body);
                self.stats.bytes_out += (out.len() - before) as u64;
                f.stats.bytes_out += (out.len() - before) as u64;
                self.stats.literal_bytes += bytes.len() as u64;
                self.stats.resent += 1;
                self.cuts = cuts;
                self.body = body;
            }
        }
        Ok(())
    }
}

/// Append a request to acknowledge for `f`, unless one follows its last record already; the
/// bytes appended.
fn put_ask(f: &mut Flow, out: &mut Vec<u8>) -> u64 {
    if f.asked == Some(f.seq) {
        return 0;
    }
    let before = out.len();
    wire::put_record(out, Kind::Ask, f.seq, checksum(&[]), &[]);
    f.seq += 1;
    f.asked = Some(f.seq);
    let n = (out.len() - before) as u64;
    f.stats.bytes_out += n;
    n
}

/// Records of a flow whose acknowledgement [`Source::ahead`] waits for at most (far more
/// than a paced relay has unacknowledged: its lead is a few bandwidth-delay products).
const MAX_UNACKNOWLEDGED: usize = 1 << 16;

/// Phones whose feedback rate is tracked at once (past it, the one heard from longest ago is
/// forgotten, and starts full again if it comes back).
const MAX_PHONES: usize = 4096;

/// A token bucket: names of feedback that may be accepted now.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    refilled: Option<Instant>,
}

impl Bucket {
    fn full(rate: u32) -> Bucket {
        Bucket {
            tokens: f64::from(rate),
            refilled: None,
        }
    }

    /// Add `rate` tokens a second for the time since the last refill (at most one second's
    /// worth banked).
    fn refill(&mut self, now: Instant, rate: u32) {
        let rate = f64::from(rate);
        if let Some(then) = self.refilled {
            let dt = now
                .saturating_duration_since(then)
                .min(Duration::from_secs(1));
            self.tokens = (self.tokens + rate * dt.as_secs_f64()).min(rate);
        }
        self.refilled = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A flood of feedback from one phone is cut at its rate, and another phone's feedback
    /// still gets through.
    #[test]
    fn one_phone_cannot_crowd_out_anothers_feedback() {
        let mut s = Source::new(SourceConfig {
            feedback_names_per_s: 100,
            feedback_names_per_s_total: 150,
            ..SourceConfig::default()
        })
        .unwrap();
        s.open_for(1, 7);
        s.open_for(2, 8);
        let now = Instant::now();
        let flood = |n: u64, from: u64| {
            let mut b = Vec::new();
            Upstream::Advertise((from..from + n).map(Name).collect()).encode(&mut b);
            b
        };
        s.handle(1, &flood(1000, 0), now, &mut Vec::new()).unwrap();
        assert_eq!(s.stats().feedback_dropped, 900);
        s.handle(2, &flood(50, 5000), now, &mut Vec::new()).unwrap();
        assert_eq!(
            s.stats().feedback_dropped,
            900,
            "the other phone's 50 all taken"
        );
        // A second later the hostile phone has its rate again, no more.
        let later = now + Duration::from_secs(1);
        s.handle(1, &flood(1000, 10_000), later, &mut Vec::new())
            .unwrap();
        assert_eq!(s.stats().feedback_dropped, 900 + 900);
    }
}
