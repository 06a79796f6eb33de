//! The HLA server's logs: every accepted record with the device (token name) that uploaded it,
//! bounded in count and in bytes, kept on disk as JSON lines.
//!
//! # Eviction
//!
//! Past either bound ([`StoreLimits`]), the oldest record of the device holding the most
//! records (past the count) or the most bytes (past the bytes) goes, until both hold again. A
//! device flooding the store therefore evicts its own records first: it can bring no other
//! device below an equal share of the store (the bound divided by the devices holding logs),
//! and a device at or below its share loses nothing to it. Records from before devices had
//! tokens belong to one device of the name `""`.
//!
//! # The file (`DIR/logs.jsonl`)
//!
//! One record a line, with `"owner"`: the device's name. An upload is appended in one write
//! (on a failed write the file is cut back to where it was); past twice either bound on disk
//! the file is rewritten with the records kept (through a temporary file and a rename). At
//! start ([`LogStore::open`]):
//! - a last line without its newline (a crash in the middle of an append) is dropped with a
//!   warning and cut off the file if it does not parse, kept (its newline added) if it does;
//!   every line before it is kept;
//! - a line that parses but that [`Record::validate`] refuses (from a server that did not
//!   check) is skipped with a warning, and the file rewritten without it;
//! - a complete line that does not parse refuses the start, naming it: that is a damaged or
//!   foreign file, not an interrupted append, and rewriting it would lose what it holds.

use std::collections::{BTreeMap, VecDeque};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::TransferError;
use crate::hla::Record;

/// How much the store keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreLimits {
    /// Records kept.
    pub max_logs: usize,
    /// Bytes kept (each record counted as its line in the file).
    pub max_bytes: u64,
}

impl Default for StoreLimits {
    /// 200,000 records, 64 MiB.
    fn default() -> StoreLimits {
        StoreLimits {
            max_logs: 200_000,
            max_bytes: 64 << 20,
        }
    }
}

/// A line of the file.
#[derive(Serialize, Deserialize)]
struct Line {
    #[serde(default)]
    owner: String,
    #[serde(flatten)]
    record: Record,
}

#[derive(Default, Debug)]
struct Owned {
    /// Records, oldest first, each with its line's length.
    logs: VecDeque<(Record, u64)>,
    bytes: u64,
}

/// The logs, per device.
#[derive(Debug)]
pub struct LogStore {
    owners: BTreeMap<String, Owned>,
    count: usize,
    bytes: u64,
    limits: StoreLimits,
    file: Option<PathBuf>,
    /// Records and bytes in the file.
    on_disk: usize,
    file_len: u64,
}

/// A record's line in the file, newline included.
fn line_of(owner: &str, r: &Record) -> String {
    let mut s = serde_json::to_string(&LineRef { owner, record: r }).expect("a record serialises");
    s.push('\n');
    s
}

#[derive(Serialize)]
struct LineRef<'a> {
    owner: &'a str,
    #[serde(flatten)]
    record: &'a Record,
}

/// At most this many skipped lines are named in the warning; the rest counted.
const NAMED: usize = 5;

impl LogStore {
    /// The store, kept in `dir/logs.jsonl` if `dir` is given (created if missing, its records
    /// read back): the store and what to warn the operator of.
    pub fn open(
        dir: Option<&Path>,
        limits: StoreLimits,
    ) -> Result<(LogStore, Vec<String>), TransferError> {
        let mut s = LogStore {
            owners: BTreeMap::new(),
            count: 0,
            bytes: 0,
            limits,
            file: None,
            on_disk: 0,
            file_len: 0,
        };
        let mut warnings = Vec::new();
        let Some(dir) = dir else {
            return Ok((s, warnings));
        };
        std::fs::create_dir_all(dir).map_err(TransferError::io(dir))?;
        let file = dir.join("logs.jsonl");
        let data = match std::fs::read(&file) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(TransferError::io(&file)(e)),
        };
        let bad = |why: String| TransferError::Model(format!("{}: {why}", file.display()));
        let (mut pos, mut n, mut skipped) = (0usize, 0usize, Vec::new());
        let mut cut_to = None; // where to cut a partial last line off
        let mut add_newline = false;
        while pos < data.len() {
            n += 1;
            let (line, complete) = match data[pos..].iter().position(|&c| c == b'\n') {
                Some(e) => (&data[pos..pos + e], true),
                None => (&data[pos..], false),
            };
            let start = pos;
            pos += line.len() + usize::from(complete);
            if line.trim_ascii().is_empty() {
                if !complete {
                    cut_to = Some(start);
                }
                continue;
            }
            let parsed = std::str::from_utf8(line)
                .map_err(|e| e.to_string())
                .and_then(|t| serde_json::from_str::<Line>(t).map_err(|e| e.to_string()));
            let l = match parsed {
                Ok(l) => l,
                Err(e) if complete => return Err(bad(format!("line {n}: {e}"))),
                Err(_) => {
                    warnings.push(format!(
                        "{}: line {n}, the last, is incomplete ({} bytes without a newline: an \
                         append cut short): dropped, the {} line(s) before it kept",
                        file.display(),
                        line.len(),
                        n - 1
                    ));
                    cut_to = Some(start);
                    continue;
                }
            };
            if !complete {
                add_newline = true;
            }
            match l.record.validate() {
                Ok(()) => s.push(&l.owner, l.record, line.len() as u64 + 1),
                Err(why) => skipped.push(format!("line {n}: {why}")),
            }
        }
        s.on_disk = n;
        s.file_len = data.len() as u64;
        s.file = Some(file.clone());
        if let Some(at) = cut_to {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&file)
                .map_err(TransferError::io(&file))?;
            f.set_len(at as u64).map_err(TransferError::io(&file))?;
            f.sync_all().map_err(TransferError::io(&file))?;
            s.file_len = at as u64;
        } else if add_newline {
            s.append(b"\n").map_err(TransferError::io(&file))?;
        }
        if !skipped.is_empty() {
            let more = skipped.len().saturating_sub(NAMED);
            skipped.truncate(NAMED);
            warnings.push(format!(
                "{}: {} stored record(s) skipped as invalid ({}{}); the file is rewritten \
                 without them",
                file.display(),
                skipped.len() + more,
                skipped.join("; "),
                if more > 0 {
                    format!("; {more} more")
                } else {
                    String::new()
                }
            ));
        }
        let evicted = s.evict();
        if evicted > 0 {
            warnings.push(format!(
                "{}: {evicted} record(s) beyond the store's bounds ({} records, {} bytes) evicted",
                file.display(),
                limits.max_logs,
                limits.max_bytes
            ));
        }
        if !skipped.is_empty() || evicted > 0 {
            s.compact().map_err(TransferError::io(&file))?;
        }
        Ok((s, warnings))
    }

    fn push(&mut self, owner: &str, r: Record, len: u64) {
        let o = self.owners.entry(owner.to_string()).or_default();
        o.logs.push_back((r, len));
        o.bytes += len;
        self.count += 1;
        self.bytes += len;
    }

    /// Evict past the bounds (see the module): how many went.
    fn evict(&mut self) -> usize {
        let mut evicted = 0;
        loop {
            let by_count = self.count > self.limits.max_logs;
            if !by_count && self.bytes <= self.limits.max_bytes {
                return evicted;
            }
            let Some((name, _)) = self.owners.iter().max_by_key(|(_, o)| {
                if by_count {
                    o.logs.len() as u64
                } else {
                    o.bytes
                }
            }) else {
                return evicted;
            };
            let name = name.clone();
            let o = self.owners.get_mut(&name).expect("just found");
            if let Some((_, len)) = o.logs.pop_front() {
                o.bytes -= len;
                self.count -= 1;
                self.bytes -= len;
                evicted += 1;
            }
            if o.logs.is_empty() {
                self.owners.remove(&name);
            }
        }
    }

    fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file)?;
        if let Err(e) = f.write_all(bytes) {
            // No partial line left for the next append to be glued to.
            let _ = f.set_len(self.file_len);
            return Err(e);
        }
        self.file_len += bytes.len() as u64;
        Ok(())
    }

    /// Keep `records` as `owner`'s (already checked): appended to the file, then the store
    /// evicted to its bounds and the file rewritten when it has grown past twice them.
    pub fn add(&mut self, owner: &str, records: Vec<Record>) -> Result<(), String> {
        let lines: Vec<String> = records.iter().map(|r| line_of(owner, r)).collect();
        let text: String = lines.concat();
        self.append(text.as_bytes()).map_err(|e| match &self.file {
            Some(f) => format!("{}: {e}", f.display()),
            None => e.to_string(),
        })?;
        self.on_disk += records.len();
        for (r, l) in records.into_iter().zip(&lines) {
            self.push(owner, r, l.len() as u64);
        }
        self.evict();
        if self.on_disk > 2 * self.limits.max_logs || self.file_len > 2 * self.limits.max_bytes {
            self.compact()
                .map_err(|e| format!("compacting the logs: {e}"))?;
        }
        Ok(())
    }

    /// Rewrite the file with the records kept (through a temporary file), device by device,
    /// each one's oldest first.
    fn compact(&mut self) -> std::io::Result<()> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        let tmp = file.with_extension("jsonl.tmp");
        let mut w = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
        let mut len = 0u64;
        for (owner, o) in &self.owners {
            for (r, _) in &o.logs {
                let l = line_of(owner, r);
                w.write_all(l.as_bytes())?;
                len += l.len() as u64;
            }
        }
        w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&tmp, file)?;
        self.on_disk = self.count;
        self.file_len = len;
        Ok(())
    }

    /// Records held.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether none are held.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes held (as lines of the file).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Records `owner` holds.
    pub fn held_by(&self, owner: &str) -> usize {
        self.owners.get(owner).map_or(0, |o| o.logs.len())
    }

    /// Devices holding records.
    pub fn devices(&self) -> usize {
        self.owners.len()
    }

    /// At most `n` records to learn from, shared evenly among the devices (a device with fewer
    /// than its share gives all it has, the rest is shared among the others), each device's
    /// evenly spread over its records: no device weighs more in a learning than any other.
    pub fn sample(&self, n: usize) -> Vec<Record> {
        let mut owners: Vec<&Owned> = self.owners.values().collect();
        owners.sort_by_key(|o| o.logs.len());
        let mut out = Vec::with_capacity(n.min(self.count));
        let mut left = n;
        for (i, o) in owners.iter().enumerate() {
            let share = left.div_ceil(owners.len() - i);
            let take = o.logs.len().min(share);
            let m = o.logs.len();
            out.extend((0..take).map(|j| o.logs[j * m / take].0.clone()));
            left -= take;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Params;

    pub(crate) fn rec(rtt: f64) -> Record {
        Record {
            rtt_ms: rtt,
            bandwidth_mbps: 100.0,
            mean_file_bytes: 1e6,
            params: Params::default(),
            throughput_mbps: 10.0,
            energy_j_per_100mb: 10.0,
            ok: true,
            context: Default::default(),
        }
    }

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("roam-hla-store-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    /// The attacker fills the store from one token: the honest devices keep their records,
    /// and the attacker's oldest go.
    #[test]
    fn one_device_cannot_evict_the_others() {
        let limits = StoreLimits {
            max_logs: 100,
            max_bytes: 1 << 30,
        };
        let (mut s, _) = LogStore::open(None, limits).unwrap();
        s.add("ann", (0..30).map(|i| rec(i as f64)).collect())
            .unwrap();
        s.add("bob", (0..10).map(|i| rec(i as f64)).collect())
            .unwrap();
        for _ in 0..50 {
            s.add(
                "mallory",
                (0..100).map(|i| rec(1000.0 + i as f64)).collect(),
            )
            .unwrap();
        }
        assert_eq!(s.len(), 100);
        assert_eq!((s.held_by("ann"), s.held_by("bob")), (30, 10));
        assert_eq!(s.held_by("mallory"), 60);
        // Three devices with as many each: each keeps its third.
        for _ in 0..5 {
            s.add("ann", (0..100).map(|i| rec(i as f64)).collect())
                .unwrap();
        }
        assert!(
            s.held_by("bob") == 10 && s.held_by("ann") == 45,
            "{}",
            s.held_by("ann")
        );
        // The bytes bound too: past it the device with most bytes loses its oldest.
        let line = line_of("x", &rec(1.0)).len() as u64;
        let (mut s, _) = LogStore::open(
            None,
            StoreLimits {
                max_logs: 1000,
                max_bytes: 20 * line,
            },
        )
        .unwrap();
        s.add("x", (0..5).map(|_| rec(1.0)).collect()).unwrap();
        s.add("y", (0..100).map(|_| rec(2.0)).collect()).unwrap();
        assert_eq!(s.held_by("x"), 5);
        assert!(s.bytes() <= 20 * line);
        // A learning's sample weighs devices alike.
        let (mut s, _) = LogStore::open(None, StoreLimits::default()).unwrap();
        s.add("few", vec![rec(1.0); 10]).unwrap();
        s.add("many", vec![rec(2.0); 10_000]).unwrap();
        s.add("more", vec![rec(3.0); 5_000]).unwrap();
        let sample = s.sample(1000);
        let of = |rtt: f64| sample.iter().filter(|r| r.rtt_ms == rtt).count();
        assert_eq!(
            (of(1.0), of(2.0), of(3.0), sample.len()),
            (10, 495, 495, 1000)
        );
    }

    /// A crash in the middle of an append leaves a partial last line: the store starts, drops
    /// it (cut off the file), keeps every line before it, and appends after them.
    #[test]
    fn a_partial_last_line_is_cut_off_and_the_rest_kept() {
        let d = dir("partial");
        let (mut s, w) = LogStore::open(Some(&d), StoreLimits::default()).unwrap();
        assert!(w.is_empty());
        s.add("ann", vec![rec(1.0), rec(2.0)]).unwrap();
        let file = d.join("logs.jsonl");
        let whole = std::fs::read_to_string(&file).unwrap();
        let third = line_of("ann", &rec(3.0));
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap();
        f.write_all(&third.as_bytes()[..third.len() / 2]).unwrap();
        drop(f);
        let (mut s, w) = LogStore::open(Some(&d), StoreLimits::default()).unwrap();
        assert_eq!(s.len(), 2);
        assert!(
            w.len() == 1 && w[0].contains("line 3, the last, is incomplete"),
            "{w:?}"
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), whole);
        s.add("ann", vec![rec(4.0)]).unwrap();
        let (s, w) = LogStore::open(Some(&d), StoreLimits::default()).unwrap();
        assert_eq!((s.len(), w.len()), (3, 0));
        // A whole last line without its newline is kept, and the newline added.
        std::fs::write(&file, whole.trim_end()).unwrap();
        let (mut s, _) = LogStore::open(Some(&d), StoreLimits::default()).unwrap();
        assert_eq!(s.len(), 2);
        s.add("ann", vec![rec(5.0)]).unwrap();
        assert_eq!(
            LogStore::open(Some(&d), StoreLimits::default())
                .unwrap()
                .0
                .len(),
            3
        );
        // Past twice the bound on disk, the file is rewritten with the records kept.
        let small = StoreLimits {
            max_logs: 10,
            max_bytes: 1 << 30,
        };
        let (mut s, _) = LogStore::open(Some(&d), small).unwrap();
        assert_eq!(s.len(), 3);
        for i in 0..20 {
            s.add("bob", vec![rec(i as f64)]).unwrap();
        }
        let lines = std::fs::read_to_string(&file).unwrap().lines().count();
        assert!(
            lines <= 20 && s.len() == 10,
            "{lines} lines, {} kept",
            s.len()
        );
        assert_eq!(LogStore::open(Some(&d), small).unwrap().0.len(), 10);
        // A damaged line before the last refuses the start, named.
        std::fs::write(&file, format!("nonsense\n{whole}")).unwrap();
        let e = LogStore::open(Some(&d), StoreLimits::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 1"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    /// Records stored by a server that did not check them (cc 4294967295: learning over the
    /// grid up to it never ended, and started again at every restart) are skipped at start,
    /// with a warning, and the file rewritten without them.
    #[test]
    fn invalid_stored_records_are_skipped_at_start() {
        let d = dir("invalid");
        std::fs::create_dir_all(&d).unwrap();
        let mut bad = rec(5.0);
        bad.params.cc = u32::MAX;
        bad.params.p = u32::MAX;
        let mut negative = rec(6.0);
        negative.throughput_mbps = -1.0;
        let negative = serde_json::to_string(&negative).unwrap();
        let text = format!(
            "{}\n{}\n{}\n{negative}\n",
            serde_json::to_string(&rec(1.0)).unwrap(),
            serde_json::to_string(&bad).unwrap(),
            serde_json::to_string(&rec(2.0)).unwrap(),
        );
        std::fs::write(d.join("logs.jsonl"), text).unwrap();
        let (s, w) = LogStore::open(Some(&d), StoreLimits::default()).unwrap();
        assert_eq!(s.len(), 2);
        assert!(
            w.len() == 1
                && w[0].contains("2 stored record(s) skipped")
                && w[0].contains("params.cc"),
            "{w:?}"
        );
        let again = std::fs::read_to_string(d.join("logs.jsonl")).unwrap();
        assert_eq!(again.lines().count(), 2);
        let (_, w) = LogStore::open(Some(&d), StoreLimits::default()).unwrap();
        assert!(w.is_empty(), "{w:?}");
        let _ = std::fs::remove_dir_all(&d);
    }
}
