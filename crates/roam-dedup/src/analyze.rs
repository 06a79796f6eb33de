//! The thesis's trace analysis (§4.5.2): how much of a user's traffic is redundant, and how
//! much of it asymmetric caching finds, on byte streams taken from captures
//! (`roam dedup analyze`) or made up (`roam bench dedup`).
//!
//! The phone's cache is filled from the *past* streams, as if they came through another
//! source (the phone's other network, or before it moved); the *present* streams then go
//! through a source that never saw them, each a flow of its own, `read` bytes at a time with
//! the phone's messages back to the source between reads (a feedback delay of one read).
//! The oracle is an unbounded cache that has seen everything before: a chunk of the present
//! counts as redundant if its name appeared in the past or earlier in the present.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::chunk::Chunking;
use crate::destination::{DestinationConfig, DestinationError};
use crate::name::{Name, NameSet};
use crate::source::{FlowId, SourceConfig, SourceError};
use crate::{Destination, Source};

/// One direction of one connection: what the server sent.
#[derive(Clone, Debug)]
pub struct Stream {
    /// The server's port (the application).
    pub port: u16,
    /// The bytes, reassembled.
    pub bytes: Vec<u8>,
}

/// How the analysis runs.
#[derive(Clone, Debug)]
pub struct Setup {
    /// dd-src.
    pub source: SourceConfig,
    /// dd-dst.
    pub destination: DestinationConfig,
    /// Bytes the source reads between two rounds of the phone's messages.
    pub read: usize,
    /// The downlink's rate over the uplink's, for the thesis's δ (`None`: δ = 0).
    pub down_over_up: Option<f64>,
}

impl Default for Setup {
    fn default() -> Setup {
        Setup {
            source: SourceConfig {
                // The analysis replays faster than any link: the bound against hostile
                // phones would bind on time, not on the phone.
                feedback_names_per_s: u32::MAX,
                feedback_names_per_s_total: u32::MAX,
                ..SourceConfig::default()
            },
            // The thesis's phone, which advertises whatever it costs: the analysis reports
            // what its feedback finds and costs, so the data path's credit (which holds it
            // back where it does not pay) would hide the cost it measures.
            destination: DestinationConfig {
                budget: None,
                ..DestinationConfig::default()
            },
            read: 16 * 1024,
            down_over_up: None,
        }
    }
}

/// What one application port's present streams held and what was found.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PortResult {
    /// Bytes of its present streams.
    pub bytes: u64,
    /// Bytes the oracle finds redundant.
    pub oracle: u64,
    /// Bytes replaced by names from the regular cache, and from feedback.
    pub regular: u64,
    /// ... from the feedback cache.
    pub feedback: u64,
}

/// The analysis's result.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Analysis {
    /// Every present stream together.
    pub total: PortResult,
    /// Per server port.
    pub by_port: BTreeMap<u16, PortResult>,
    /// Bytes of the phone's advertisements.
    pub feedback_bytes: u64,
    /// Record bytes the source sent for the present.
    pub wire_bytes: u64,
    /// Records sent again (names the phone no longer held, collisions).
    pub resent: u64,
    /// Time spent in the source and in the destination (present only).
    pub source_time: Duration,
    /// ...
    pub destination_time: Duration,
}

impl Analysis {
    /// The share of the oracle's redundancy found.
    pub fn found(&self) -> Option<f64> {
        ratio(self.total.regular + self.total.feedback, self.total.oracle)
    }

    /// Bytes the feedback cache replaced per byte of advertisement.
    pub fn per_feedback_byte(&self) -> Option<f64> {
        ratio(self.total.feedback, self.feedback_bytes)
    }
}

fn ratio(a: u64, b: u64) -> Option<f64> {
    (b > 0).then(|| a as f64 / b as f64)
}

/// A stream that could not be carried.
#[derive(Debug, thiserror::Error)]
pub enum AnalyzeError {
    /// The source failed.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The destination failed.
    #[error(transparent)]
    Destination(#[from] DestinationError),
    /// The phone delivered other bytes than were sent: a bug, never a result.
    #[error("stream {0}: the phone delivered bytes that differ from those sent")]
    Differs(usize),
}

/// Bytes of `stream`'s chunks whose names `seen` holds (then adds): the oracle.
pub fn oracle(chunking: Chunking, stream: &[u8], seen: &mut NameSet) -> u64 {
    let mut cuts = Vec::new();
    chunking.cuts(stream, &mut cuts);
    let mut found = 0;
    let mut prev = 0;
    for &c in &cuts {
        let chunk = &stream[prev..c];
        prev = c;
        if chunk.len() > 2 * Name::LEN && !seen.insert(Name::of(chunk)) {
            found += chunk.len() as u64;
        }
    }
    found
}

/// Carry `stream` from `src` to `dst` as flow `flow` through the phone's source `via`, `read`
/// bytes at a time, the phone's messages back to the source between reads; the time spent in
/// each end, and the source's account of the flow.
pub fn carry(
    stream: &[u8],
    src: &mut Source,
    dst: &mut Destination,
    flow: FlowId,
    via: u32,
    read: usize,
) -> Result<(Duration, Duration, crate::source::FlowStats), AnalyzeError> {
    let (mut t_src, mut t_dst) = (Duration::ZERO, Duration::ZERO);
    let (mut wire, mut pending, mut out, mut up) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    src.open(flow);
    dst.open_via(flow, via);
    let parts: Vec<&[u8]> = stream.chunks(read.max(1)).collect();
    let rounds = parts.len() + 10;
    for i in 0..rounds {
        let t = Instant::now();
        if let Some(part) = parts.get(i) {
            src.push(flow, part, &mut wire)?;
        }
        if i + 1 == parts.len() {
            src.flush(flow, &mut wire)?;
        }
        t_src += t.elapsed();
        pending.append(&mut wire);
        let t = Instant::now();
        let used = dst.receive(flow, &pending, &mut out)?;
        pending.drain(..used);
        dst.upstream(flow, &mut up)?;
        t_dst += t.elapsed();
        let t = Instant::now();
        let n = src.handle(flow, &up, Instant::now(), &mut wire)?;
        up.drain(..n);
        t_src += t.elapsed();
        if i >= parts.len() && wire.is_empty() && pending.is_empty() && up.is_empty() {
            break;
        }
    }
    if out != stream {
        return Err(AnalyzeError::Differs(flow as usize));
    }
    let stats = src.close(flow).unwrap_or_default();
    dst.close(flow);
    Ok((t_src, t_dst, stats))
}

/// The analysis of `present` after `past` (see the module's documentation).
pub fn analyze(
    past: &[Stream],
    present: &[Stream],
    setup: &Setup,
) -> Result<Analysis, AnalyzeError> {
    let chunking = setup.source.chunking;
    let mut seen = NameSet::default();
    for s in past {
        oracle(chunking, &s.bytes, &mut seen);
    }
    let mut dst = Destination::new(setup.destination.clone());
    if let Some(r) = setup.down_over_up {
        // Rates in any unit: only their ratio moves δ (the upstream delay is the analysis's
        // one read).
        dst.set_rates(r, 1.0, 0.0, f64::from(chunking.avg()));
    }
    let mut other = Source::new(SourceConfig {
        chunking,
        ..setup.source.clone()
    })?;
    let mut flow: FlowId = 0;
    for s in past {
        flow += 1;
        carry(&s.bytes, &mut other, &mut dst, flow, 0, setup.read)?;
    }
    let before = dst.stats();
    let mut src = Source::new(setup.source.clone())?;
    let mut a = Analysis::default();
    for s in present {
        flow += 1;
        let redundant = oracle(chunking, &s.bytes, &mut seen);
        let (ts, td, f) = carry(&s.bytes, &mut src, &mut dst, flow, 1, setup.read)?;
        a.source_time += ts;
        a.destination_time += td;
        a.wire_bytes += f.bytes_out;
        for p in [&mut a.total, a.by_port.entry(s.port).or_default()] {
            p.bytes += s.bytes.len() as u64;
            p.oracle += redundant;
            p.regular += f.regular_hit_bytes;
            p.feedback += f.feedback_hit_bytes;
        }
    }
    let after = dst.stats();
    a.feedback_bytes = after.feedback_bytes - before.feedback_bytes;
    a.resent = src.stats().resent;
    Ok(a)
}

/// The thesis's split of one user's trace: streams in order, the first ones making up half of
/// the bytes are the past, the rest the present (those shorter than `min_present` left out,
/// as the thesis left out connections under 5 KB).
pub fn split(streams: Vec<Stream>, min_present: usize) -> (Vec<Stream>, Vec<Stream>) {
    let total: usize = streams.iter().map(|s| s.bytes.len()).sum();
    let mut past = Vec::new();
    let mut present = Vec::new();
    let mut acc = 0;
    for s in streams {
        if acc * 2 < total {
            acc += s.bytes.len();
            past.push(s);
        } else if s.bytes.len() >= min_present {
            present.push(s);
        }
    }
    (past, present)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(seed: u64, n: usize) -> Vec<u8> {
        crate::testdata::text(n, seed)
    }

    #[test]
    fn a_repeated_download_is_found_and_the_split_takes_half() {
        let page = text(3, 60_000);
        let streams = vec![
            Stream {
                port: 80,
                bytes: page.clone(),
            },
            Stream {
                port: 80,
                bytes: text(9, 40_000),
            },
            Stream {
                port: 80,
                bytes: page.clone(),
            },
            Stream {
                port: 8080,
                bytes: text(11, 30_000),
            },
            Stream {
                port: 80,
                bytes: vec![1; 100],
            },
        ];
        let (past, present) = split(streams, 5000);
        assert_eq!(past.len(), 2);
        assert_eq!(present.len(), 2, "the 100-byte stream is left out");
        let a = analyze(&past, &present, &Setup::default()).unwrap();
        let http = a.by_port[&80];
        assert_eq!(http.bytes, 60_000);
        assert!(http.oracle > 55_000, "{http:?}");
        assert!(http.regular + http.feedback > http.oracle / 2, "{http:?}");
        assert_eq!(a.by_port[&8080].oracle, 0);
        assert!(a.found().unwrap() > 0.5);
    }
}
