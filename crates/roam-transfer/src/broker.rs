//! The device's side of FastHLA (the FastHLA paper, ../shared/spec/fasthla.md "Architecture"): the
//! **transfer broker** picks each transfer's parameters from the **parameter cache** (the HLA
//! server's optimum per cluster of conditions) when the condition is familiar, else from the
//! **learning module**'s model, else the plain defaults; it never probes during a transfer.
//! Each transfer it ran leaves a [`Record`] in a bounded ring buffer, uploaded to the server
//! from time to time; the broker asks the server for an immediate [`Update`] only when a
//! transfer was much slower than predicted or ran in a condition the cache did not know.
//!
//! An update is checked before the broker uses it ([`Update::sanitize`]: entries out of bounds
//! and a model that does not check are dropped, the rest kept), as is a stored state at load:
//! whatever the server (or whoever answers in its place) sends, the broker chooses parameters
//! within [`crate::params`]' bounds.
//!
//! Sans-IO: the caller measures, uploads and fetches; the broker decides. Its state (cache,
//! model, logs not yet uploaded) is one JSON file ([`Broker::load`], [`Broker::save`]).

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::TransferError;
use crate::hla::{Record, Table};
use crate::model::{Condition, Model};
use crate::params::Params;

/// What the HLA server sends a device: the clusters' optima (the cache's contents) and the
/// model for conditions between them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Update {
    /// Per cluster of conditions its centroid and optimum.
    pub table: Table,
    /// The learnt model, once there were logs to learn from.
    pub model: Option<Model>,
}

/// Reasons an update's parts were dropped that [`Update::sanitize`] lists one by one; beyond,
/// a count.
const LISTED: usize = 5;

impl Update {
    /// Check an update before use, as a device must (the server, or whoever answers in its
    /// place, may send anything): a table entry whose parameters are out of
    /// [`crate::params`]' bounds, whose centroid, throughput or energy is not finite, is
    /// dropped; a model that [`Model::from_json`] refuses (format, dimensions, weights, its
    /// classes' parameters) is dropped; the rest is kept. What was dropped and why, for a
    /// warning (empty: the update was whole). [`Broker::apply`] and [`Broker::load`] call it, so
    /// a broker never chooses parameters that were not checked.
    pub fn sanitize(&mut self) -> Vec<String> {
        let mut why = Vec::new();
        let mut dropped = 0usize;
        let mut i = 0usize;
        self.table.entries.retain(|(c, o)| {
            i += 1;
            match check_entry(c, o) {
                Ok(()) => true,
                Err(e) => {
                    dropped += 1;
                    if why.len() < LISTED {
                        why.push(format!("table entry {i} dropped: {e}"));
                    }
                    false
                }
            }
        });
        if dropped > LISTED {
            why.push(format!("{} more table entries dropped", dropped - LISTED));
        }
        if let Some(m) = &self.model {
            if let Err(e) = Model::from_json(&m.to_json()) {
                why.push(format!("the model dropped: {e}"));
                self.model = None;
            }
        }
        why
    }
}

/// Why a table entry cannot be used, if it cannot: parameters within bounds (so that products
/// such as cc × p cannot overflow), finite centroid, finite non-negative predictions.
fn check_entry(c: &[f64; 3], o: &crate::hla::Optimum) -> Result<(), String> {
    o.params.validate().map_err(|e| e.to_string())?;
    // Within bounds, the channels fit a u32 (checked all the same: what is multiplied later).
    o.params
        .cc
        .checked_mul(o.params.p)
        .ok_or("cc × p overflows")?;
    if !c.iter().all(|v| v.is_finite()) {
        return Err(format!("a centroid that is not finite: {c:?}"));
    }
    for (what, v) in [
        ("throughput", o.throughput_mbps),
        ("energy", o.energy_j_per_100mb),
    ] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(format!("{what} {v} is not a finite number >= 0"));
        }
    }
    Ok(())
}

/// Where a choice came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// A cluster the condition belongs to.
    Cache,
    /// The model (an unfamiliar condition).
    Model,
    /// Neither known: one file at a time, one stream.
    Default,
}

/// The broker's choice for a transfer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Choice {
    /// The parameters.
    pub params: Params,
    /// Where they came from.
    pub source: Source,
    /// The throughput the cache's cluster reached with them, Mbit/s (cache choices only).
    pub expected_mbps: Option<f64>,
}

/// The device's broker, cache, model and log ring.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Broker {
    cache: Table,
    model: Option<Model>,
    logs: VecDeque<Record>,
    /// The fastest transfer seen, Mbit/s: a lower bound of the bandwidth where none is known.
    #[serde(default)]
    fastest_mbps: f64,
}

impl Broker {
    /// A condition within this distance of a cluster's centroid (log10 units: about a factor
    /// of 1.4 on one axis) is that cluster's.
    pub const CACHE_DISTANCE: f64 = 0.15;
    /// Logs kept until uploaded (the oldest dropped beyond).
    pub const RING: usize = 4096;
    /// A transfer below this fraction of its predicted throughput asks for an update.
    pub const SLOW: f64 = 0.5;

    /// The parameters for a transfer in condition `c`.
    pub fn choose(&self, c: &Condition) -> Choice {
        if let Some((d, o)) = self.cache.nearest(c) {
            if d <= Self::CACHE_DISTANCE {
                return Choice {
                    params: o.params,
                    source: Source::Cache,
                    expected_mbps: Some(o.throughput_mbps),
                };
            }
        }
        match &self.model {
            Some(m) => Choice {
                params: m.predict(c),
                source: Source::Model,
                expected_mbps: None,
            },
            None => Choice {
                params: Params::default(),
                source: Source::Default,
                expected_mbps: None,
            },
        }
    }

    /// A transfer ran: keep its log for upload; whether to ask the server for an update now
    /// (much slower than the cache predicted, or a condition the cache did not know). A record
    /// that [`Record::validate`] refuses is not kept (the server would refuse the upload
    /// holding it).
    pub fn ran(&mut self, choice: &Choice, record: Record) -> bool {
        let slow = choice
            .expected_mbps
            .is_some_and(|e| record.throughput_mbps < Self::SLOW * e);
        let ask = slow || choice.source != Source::Cache;
        if record.validate().is_err() {
            return ask;
        }
        if record.ok && record.throughput_mbps.is_finite() {
            self.fastest_mbps = self.fastest_mbps.max(record.throughput_mbps);
        }
        if self.logs.len() == Self::RING {
            self.logs.pop_front();
        }
        self.logs.push_back(record);
        ask
    }

    /// The fastest transfer this broker has seen, Mbit/s (a lower bound of the bandwidth).
    pub fn fastest_mbps(&self) -> Option<f64> {
        (self.fastest_mbps > 0.0).then_some(self.fastest_mbps)
    }

    /// Whether the server has sent anything yet.
    pub fn has_update(&self) -> bool {
        self.model.is_some() || !self.cache.entries.is_empty()
    }

    /// The logs not yet uploaded, oldest first.
    pub fn pending(&self) -> impl ExactSizeIterator<Item = &Record> {
        self.logs.iter()
    }

    /// The first `n` pending logs were uploaded.
    pub fn uploaded(&mut self, n: usize) {
        self.logs.drain(..n.min(self.logs.len()));
    }

    /// Take the server's update, checked first ([`Update::sanitize`]: what cannot be used is
    /// dropped; call it first to see what).
    pub fn apply(&mut self, mut u: Update) {
        u.sanitize();
        self.cache = u.table;
        self.model = u.model;
    }

    /// The broker's state from `path` (a new broker if there is no file).
    pub fn load(path: &Path) -> Result<Broker, TransferError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Broker::default()),
            Err(e) => return Err(TransferError::io(path)(e)),
        };
        let mut b: Broker = serde_json::from_str(&text).map_err(|e| {
            TransferError::Model(format!("{}: not a broker state file: {e}", path.display()))
        })?;
        // The same checks as an update from the server (a state saved by a roam that did not
        // check them may hold anything): what cannot be used is dropped, as are logs the server
        // would refuse.
        let mut u = Update {
            table: std::mem::take(&mut b.cache),
            model: b.model.take(),
        };
        u.sanitize();
        (b.cache, b.model) = (u.table, u.model);
        b.logs.retain(|r| r.validate().is_ok());
        if !(b.fastest_mbps.is_finite() && b.fastest_mbps >= 0.0) {
            b.fastest_mbps = 0.0;
        }
        Ok(b)
    }

    /// Write the state to `path` (through a temporary file: never half-written).
    pub fn save(&self, path: &Path) -> Result<(), TransferError> {
        let tmp = path.with_extension("tmp");
        let text = serde_json::to_string(self).expect("the broker serialises");
        std::fs::write(&tmp, text).map_err(TransferError::io(&tmp))?;
        std::fs::rename(&tmp, path).map_err(TransferError::io(path))
    }
}

/// The radio energy of moving `bytes` down in `wall`, per 100 MB, in joules: **modelled** by
/// `roam-budget`'s radio profile `radio` (e.g. `huang2012/lte`, `huang2012/wifi`) from an idle
/// radio: promotion, the transfer at its mean throughput, and the tail. The CPU is not counted.
pub fn modelled_energy_per_100mb(
    radio: &str,
    bytes: u64,
    wall: Duration,
) -> Result<f64, TransferError> {
    let profile = roam_budget::profile::profile(radio)
        .map_err(|e| TransferError::Params(format!("radio profile `{radio}`: {e}")))?;
    if bytes == 0 || wall.is_zero() {
        return Err(TransferError::Params(
            "no bytes or no time: no energy per byte".into(),
        ));
    }
    let radio = roam_budget::radio::Radio::new(Arc::new(profile), roam_core::Time::ZERO);
    let bps = (bytes as f64 * 8.0 / wall.as_secs_f64()).max(1.0) as u64;
    let e = radio.marginal_energy(
        roam_core::Time::ZERO,
        roam_core::Bytes(bytes),
        roam_budget::radio::Direction::Down,
        roam_core::BitRate::bps(bps),
    );
    Ok(e.0 * 100e6 / bytes as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hla::Optimum;
    use crate::model::Kind;

    fn cond(rtt: f64) -> Condition {
        Condition {
            rtt_ms: rtt,
            bandwidth_mbps: 100.0,
            mean_file_bytes: 112e3,
        }
    }

    fn record(rtt: f64, p: Params, th: f64) -> Record {
        Record {
            rtt_ms: rtt,
            bandwidth_mbps: 100.0,
            mean_file_bytes: 112e3,
            params: p,
            throughput_mbps: th,
            energy_j_per_100mb: 10.0,
            ok: true,
            context: Default::default(),
        }
    }

    #[test]
    fn cache_then_model_then_defaults() {
        let mut b = Broker::default();
        assert_eq!(b.choose(&cond(290.0)).source, Source::Default);
        let best = Params {
            cc: 16,
            p: 1,
            bs: 65536,
            ..Params::default()
        };
        let table = Table {
            entries: vec![(
                cond(290.0).features(),
                Optimum {
                    params: best,
                    throughput_mbps: 40.0,
                    energy_j_per_100mb: 12.0,
                },
            )],
        };
        let set = vec![(cond(290.0), best), (cond(20.0), Params::default())];
        let model = Model::train(Kind::Knn, &set, 1).unwrap();
        b.apply(Update {
            table,
            model: Some(model),
        });
        let c = b.choose(&cond(280.0));
        assert_eq!(
            (c.source, c.params, c.expected_mbps),
            (Source::Cache, best, Some(40.0))
        );
        let far = b.choose(&cond(25.0));
        assert_eq!((far.source, far.params), (Source::Model, Params::default()));
        // As fast as predicted: no update; much slower, or unfamiliar: ask.
        assert!(!b.ran(&c, record(280.0, best, 38.0)));
        assert!(b.ran(&c, record(280.0, best, 10.0)));
        assert!(b.ran(&far, record(25.0, far.params, 50.0)));
        assert_eq!(b.pending().len(), 3);
        assert_eq!(b.fastest_mbps(), Some(50.0));
        b.uploaded(2);
        assert_eq!(b.pending().len(), 1);
    }

    #[test]
    fn the_ring_is_bounded_and_the_state_survives_a_restart() {
        let mut b = Broker::default();
        let c = b.choose(&cond(59.0));
        for i in 0..Broker::RING + 10 {
            b.ran(&c, record(59.0, Params::default(), i as f64));
        }
        assert_eq!(b.pending().len(), Broker::RING);
        assert_eq!(b.pending().next().unwrap().throughput_mbps, 10.0);
        let dir = std::env::temp_dir().join(format!("roam-broker-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("broker.json");
        assert_eq!(Broker::load(&path).unwrap().pending().len(), 0);
        b.save(&path).unwrap();
        assert_eq!(Broker::load(&path).unwrap().pending().len(), Broker::RING);
        std::fs::write(&path, "{\"cache\":").unwrap();
        let e = Broker::load(&path).unwrap_err().to_string();
        assert!(e.contains("not a broker state file"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A state saved before updates were checked (a cache entry of cc and p 4294967295, which
    /// crashed the plan's cc × p) and a log the server would refuse: both dropped at load; a
    /// record out of bounds is not kept.
    #[test]
    fn unchecked_state_is_checked_at_load() {
        let wild = Params {
            cc: u32::MAX,
            p: u32::MAX,
            ..Params::default()
        };
        let entry = |params| {
            (
                cond(290.0).features(),
                Optimum {
                    params,
                    throughput_mbps: 40.0,
                    energy_j_per_100mb: 12.0,
                },
            )
        };
        let mut b = Broker {
            cache: Table {
                entries: vec![entry(wild), entry(Params::default())],
            },
            ..Broker::default()
        };
        b.logs.push_back(record(290.0, wild, 10.0));
        b.logs.push_back(record(290.0, Params::default(), 10.0));
        let dir = std::env::temp_dir().join(format!("roam-broker-wild-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("broker.json");
        b.save(&path).unwrap();
        let b = Broker::load(&path).unwrap();
        assert_eq!(b.cache.entries.len(), 1);
        assert_eq!(b.choose(&cond(290.0)).params, Params::default());
        assert_eq!(b.pending().len(), 1);
        let mut b = Broker::default();
        let c = b.choose(&cond(59.0));
        b.ran(&c, record(59.0, wild, 10.0));
        assert_eq!(b.pending().len(), 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn faster_transfers_cost_less_energy_per_byte() {
        let mb = 10_000_000;
        let slow = modelled_energy_per_100mb("huang2012/lte", mb, Duration::from_secs(10)).unwrap();
        let fast = modelled_energy_per_100mb("huang2012/lte", mb, Duration::from_secs(1)).unwrap();
        assert!(fast < slow && fast > 0.0, "{fast} {slow}");
        assert!(modelled_energy_per_100mb("no/such", mb, Duration::from_secs(1)).is_err());
        assert!(modelled_energy_per_100mb("huang2012/lte", 0, Duration::from_secs(1)).is_err());
    }
}
