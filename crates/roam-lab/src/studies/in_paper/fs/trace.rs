//! The recorded build the client replays: its files' sizes and its operations in time order,
//! parsed from `fixtures/lighttpd-build.trace`.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};

use super::client::Client;
use super::BLOCK;

/// The recorded build.
pub const FIXTURE: &str = include_str!("../../../../fixtures/lighttpd-build.trace");

/// The recorded build, parsed once per process.
pub fn build_trace() -> Result<&'static FsTrace> {
    static TRACE: OnceLock<Result<FsTrace, String>> = OnceLock::new();
    TRACE
        .get_or_init(|| FsTrace::parse(FIXTURE).map_err(|e| format!("{e:#}")))
        .as_ref()
        .map_err(|e| anyhow!("fixtures/lighttpd-build.trace: {e}"))
}

/// What an operation of the trace does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// Read `len` bytes at `off`.
    Read,
    /// Write `len` bytes at `off`.
    Write,
    /// The build creates or truncates the file (`C` records): from now on its contents are
    /// what the build writes, held by the client, so its reads never go to the server.
    Create,
}

/// One operation of the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Op {
    /// Time since the start of the build, ms.
    pub t_ms: u64,
    /// Read, write or create.
    pub kind: OpKind,
    /// File id.
    pub file: u32,
    /// Byte offset (0 for [`OpKind::Create`]).
    pub off: u64,
    /// Length, bytes (0 for [`OpKind::Create`]).
    pub len: u64,
}

/// A parsed trace.
#[derive(Clone, Debug, Default)]
pub struct FsTrace {
    /// File sizes by id.
    pub sizes: HashMap<u32, u64>,
    /// Operations in time order.
    pub ops: Vec<Op>,
}

impl FsTrace {
    /// Parse the text format (v2, see `scripts/fs-trace-from-strace.py`; v1 is v2 without `C`
    /// records).
    pub fn parse(text: &str) -> Result<FsTrace> {
        let mut t = FsTrace::default();
        for (i, line) in text.lines().enumerate() {
            let n = i + 1;
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let f: Vec<&str> = line.split_whitespace().collect();
            let num = |k: usize| -> Result<u64> {
                f.get(k)
                    .ok_or_else(|| anyhow!("line {n}: missing field {k}"))?
                    .parse()
                    .with_context(|| format!("line {n}: field {k} is not a number"))
            };
            let op = match f[0] {
                "F" => {
                    t.sizes.insert(num(1)? as u32, num(2)?);
                    continue;
                }
                "C" => Op {
                    t_ms: num(1)?,
                    kind: OpKind::Create,
                    file: num(2)? as u32,
                    off: 0,
                    len: 0,
                },
                "O" => Op {
                    t_ms: num(1)?,
                    kind: match f.get(2) {
                        Some(&"R") => OpKind::Read,
                        Some(&"W") => OpKind::Write,
                        other => bail!("line {n}: operation {other:?} is neither R nor W"),
                    },
                    file: num(3)? as u32,
                    off: num(4)?,
                    len: num(5)?,
                },
                other => bail!("line {n}: unknown record `{other}`"),
            };
            if !t.sizes.contains_key(&op.file) {
                bail!("line {n}: file {} was not declared", op.file);
            }
            if t.ops.last().is_some_and(|p: &Op| p.t_ms > op.t_ms) {
                bail!("line {n}: time goes backwards");
            }
            t.ops.push(op);
        }
        Ok(t)
    }

    /// The operations of the first `d` of the build.
    pub fn prefix(&self, d: Duration) -> &[Op] {
        let end = d.as_millis() as u64;
        let n = self.ops.partition_point(|o| o.t_ms < end);
        &self.ops[..n]
    }

    /// Bytes of blocks the client asks the server for over the first `d` of the build (demand
    /// fetches and prefetches), if every block it asks for arrived at once: what the network
    /// must carry down, whatever the system. `honour_creates: false` ignores the `C` records
    /// (the trace's first version, which fetched the build's own output).
    pub fn fetched_bytes(&self, d: Duration, honour_creates: bool) -> u64 {
        let mut client = Client::default();
        let mut have = HashSet::new();
        let mut blocks = 0;
        for op in self.prefix(d) {
            if op.kind == OpKind::Create && !honour_creates {
                continue;
            }
            let size = self.sizes.get(&op.file).copied().unwrap_or(0);
            let n = client.plan(op, size, &mut have);
            let asked = n
                .prefetch
                .iter()
                .flat_map(|&(k, c)| k..k + c)
                .chain(n.demand);
            for k in asked {
                blocks += u64::from(have.insert((op.file, k)));
            }
        }
        blocks * BLOCK
    }

    /// Length of the recorded build.
    pub fn length(&self) -> Duration {
        Duration::from_millis(self.ops.last().map_or(0, |o| o.t_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixture_parses_and_errors_name_the_line() {
        let t = FsTrace::parse(FIXTURE).unwrap();
        assert!(t.ops.len() > 100 && t.ops.iter().any(|o| o.kind == OpKind::Write));
        assert!(t.ops.iter().any(|o| o.kind == OpKind::Create));
        assert!(t.length() > Duration::from_secs(10));
        let e = FsTrace::parse("F 1 10 a\nO 5 X 1 0 4\n").unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
        let e = FsTrace::parse("O 5 R 9 0 4\n").unwrap_err();
        assert!(e.to_string().contains("not declared"), "{e}");
        let e = FsTrace::parse("F 1 10 a\nO 5 R 1 0 4\nO 4 R 1 0 4\n").unwrap_err();
        assert!(e.to_string().contains("backwards"), "{e}");
        let t = FsTrace::parse("F 1 10 a\nO 5 R 1 0 4\nO 900 R 1 0 4\n").unwrap();
        assert_eq!(t.prefix(Duration::from_millis(100)).len(), 1);
        let t = FsTrace::parse("F 1 10 a\nC 3 1\nO 5 W 1 0 4\n").unwrap();
        assert_eq!(t.ops[0].kind, OpKind::Create);
        assert_eq!((t.ops[0].t_ms, t.ops[0].file), (3, 1));
        let e = FsTrace::parse("F 1 10 a\nC 3 2\n").unwrap_err();
        assert!(
            e.to_string().contains("line 2: file 2 was not declared"),
            "{e}"
        );
    }

    /// What the recorded build makes the client fetch (docs/lab.md quotes these figures:
    /// `cargo test -p roam-lab --lib the_build_fetches -- --nocapture`).
    #[test]
    fn the_build_fetches_its_sources_not_its_own_output() {
        let t = build_trace().unwrap();
        let mb = |d, creates| t.fetched_bytes(d, creates) as f64 / 1e6;
        let (all, quick) = (t.length() + Duration::from_secs(1), Duration::from_secs(6));
        let (whole, first6, without) = (mb(all, true), mb(quick, true), mb(all, false));
        println!(
            "whole build {whole:.2} MB, first 6 s {first6:.2} MB; ignoring C records {without:.1} MB"
        );
        assert!((6.5..7.5).contains(&whole), "{whole} MB");
        assert!((2.0..3.0).contains(&first6), "{first6} MB");
        assert!(without > 40.0, "{without} MB");
    }
}
