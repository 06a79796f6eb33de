//! The HLA server's offline analysis (the FastHLA paper as ../shared/spec/fasthla.md reconstructs it):
//! from logs of past transfers to the parameters that maximise throughput per joule, per
//! network condition.
//!
//! 1. [`clean`]: failed transfers and impossible ones (throughput above the bandwidth) go.
//! 2. [`cluster`]: hierarchical agglomerative clustering (average linkage, the `kodama` crate)
//!    of the records by condition: log10 of RTT, bandwidth and mean file size, cut where clusters
//!    are further apart than a distance (0.3 by default: about a factor of 2 on one axis).
//! 3. [`optimize`]: per cluster, block size and HTTP version, the mean throughput and energy at
//!    each sampled (cc, p) are interpolated over the grid by piecewise cubic Hermite splines
//!    that keep the data's monotonicity (Fritsch-Carlson; along cc, then along p: the "cubic
//!    pattern" the seed observed, without the overshoot of a plain cubic), every integer (cc, p)
//!    within the sampled bounds is evaluated (at most [`GRID`] values an axis: wider ranges are
//!    evaluated at their sampled values and a log-spaced grid), and the one of greatest
//!    throughput per joule wins;
//!    the block size and version are those whose best is best (the seed treats bs apart from the
//!    cc × p surface; the version, which the seed did not vary, is treated the same way), the
//!    largest block size among those within [`BS_TIE`] of it.
//! 4. [`Table`]: the clusters' centroids and optima, looked up by the nearest centroid: the
//!    device's parameter cache ([`crate::broker`]); the learnt models that cover the conditions
//!    between clusters are [`crate::model`].
//!
//! What is written here by hand and why: the spline (monotone cubic Hermite interpolation is
//! forty lines, and the crates offering it interpolate 1-D only or bring a linear-algebra
//! stack); clustering uses `kodama`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::condition::Condition;
use crate::params::{Params, Protocol};

/// One logged transfer, with the condition it ran in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Round-trip time, ms.
    pub rtt_ms: f64,
    /// The path's bandwidth, Mbit/s (from the network's estimate).
    pub bandwidth_mbps: f64,
    /// Mean file size of the dataset, bytes.
    pub mean_file_bytes: f64,
    /// The parameters it ran with.
    pub params: Params,
    /// Throughput reached, Mbit/s.
    pub throughput_mbps: f64,
    /// Energy per 100 MB moved, J (modelled).
    pub energy_j_per_100mb: f64,
    /// Whether it completed.
    pub ok: bool,
    /// What else the device logged (not learnt from; kept for analysis).
    #[serde(default, flatten)]
    pub context: LogContext,
}

/// The rest of a transfer's log (the FastHLA paper's log fields beyond the condition and outcome).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LogContext {
    /// Files in the dataset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<u64>,
    /// The client's CPU seconds during the transfer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_s: Option<f64>,
    /// The kernel's ceiling on a TCP receive buffer, bytes (`net.ipv4.tcp_rmem`'s third value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_rmem_max: Option<u64>,
}

impl LogContext {
    /// The kernel's TCP receive-buffer ceiling, if readable.
    pub fn tcp_rmem_max() -> Option<u64> {
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_rmem")
            .ok()?
            .split_whitespace()
            .nth(2)?
            .parse()
            .ok()
    }
}

/// Bounds of a record's values beyond [`Params`]' own ([`Record::validate`]): what no transfer
/// a device logs comes near, and what keeps the analysis's arithmetic finite.
pub mod bounds {
    /// Longest round trip, ms (ten minutes).
    pub const MAX_RTT_MS: f64 = 600_000.0;
    /// Fastest path or transfer, Mbit/s (10 Tbit/s).
    pub const MAX_MBPS: f64 = 1e7;
    /// Largest mean file size, bytes (1 PB).
    pub const MAX_FILE_BYTES: f64 = 1e15;
    /// Most energy per 100 MB, J.
    pub const MAX_ENERGY_J: f64 = 1e9;
    /// Most CPU seconds one transfer may log.
    pub const MAX_CPU_S: f64 = 1e9;
}

impl Record {
    /// Refuse a record whose values no transfer gives, naming the field: every number finite,
    /// not negative and within [`bounds`] (the bandwidth above 0), the parameters within
    /// [`crate::params`]' bounds. The HLA server refuses an upload holding one, skips a stored
    /// one at start, and [`clean`] drops one; a device's broker does not keep one.
    pub fn validate(&self) -> Result<(), String> {
        use crate::params::{MAX_BS, MAX_CC, MAX_P, MIN_BS};
        let number = |field: &str, v: f64, max: f64| -> Result<(), String> {
            if v.is_finite() && (0.0..=max).contains(&v) {
                Ok(())
            } else {
                Err(format!("{field}: {v} is outside 0..={max}"))
            }
        };
        number("rtt_ms", self.rtt_ms, bounds::MAX_RTT_MS)?;
        number("bandwidth_mbps", self.bandwidth_mbps, bounds::MAX_MBPS)?;
        if self.bandwidth_mbps <= 0.0 {
            return Err("bandwidth_mbps: 0 (a path of no bandwidth)".into());
        }
        number(
            "mean_file_bytes",
            self.mean_file_bytes,
            bounds::MAX_FILE_BYTES,
        )?;
        number("throughput_mbps", self.throughput_mbps, bounds::MAX_MBPS)?;
        number(
            "energy_j_per_100mb",
            self.energy_j_per_100mb,
            bounds::MAX_ENERGY_J,
        )?;
        if let Some(c) = self.context.cpu_s {
            number("cpu_s", c, bounds::MAX_CPU_S)?;
        }
        let p = &self.params;
        if !(1..=MAX_CC).contains(&p.cc) {
            return Err(format!("params.cc: {} is outside 1..={MAX_CC}", p.cc));
        }
        if !(1..=MAX_P).contains(&p.p) {
            return Err(format!("params.p: {} is outside 1..={MAX_P}", p.p));
        }
        if !(MIN_BS..=MAX_BS).contains(&p.bs) {
            return Err(format!(
                "params.bs: {} is outside {MIN_BS}..={MAX_BS}",
                p.bs
            ));
        }
        Ok(())
    }

    /// The condition this record's transfer ran in.
    pub fn condition(&self) -> Condition {
        Condition {
            rtt_ms: self.rtt_ms,
            bandwidth_mbps: self.bandwidth_mbps,
            mean_file_bytes: self.mean_file_bytes,
        }
    }

    /// The condition as clustering sees it.
    fn features(&self) -> [f64; 3] {
        self.condition().features()
    }
}

/// The records worth learning from, and how many were dropped: failed transfers, throughput
/// above the bandwidth (5% allowed for estimation error), anything not finite or not positive,
/// anything [`Record::validate`] refuses.
pub fn clean(records: &[Record]) -> (Vec<Record>, usize) {
    let kept: Vec<Record> = records
        .iter()
        .filter(|r| {
            r.ok && r.validate().is_ok()
                && r.throughput_mbps.is_finite()
                && r.energy_j_per_100mb.is_finite()
                && r.throughput_mbps > 0.0
                && r.energy_j_per_100mb > 0.0
                && r.throughput_mbps <= r.bandwidth_mbps * 1.05
                && r.rtt_ms.is_finite()
                && r.mean_file_bytes.is_finite()
        })
        .cloned()
        .collect();
    let dropped = records.len() - kept.len();
    (kept, dropped)
}

/// Default clustering distance (log10 units: about a factor of 2 on one axis).
pub const CLUSTER_DISTANCE: f64 = 0.3;

/// Group the records by condition; each group a list of indices into `records`.
pub fn cluster(records: &[Record], distance: f64) -> Vec<Vec<usize>> {
    let n = records.len();
    if n <= 1 {
        return if n == 1 { vec![vec![0]] } else { Vec::new() };
    }
    let f: Vec<[f64; 3]> = records.iter().map(Record::features).collect();
    let mut condensed = Vec::with_capacity(n * (n - 1) / 2);
    for i in 0..n {
        for j in i + 1..n {
            let d: f64 = (0..3)
                .map(|k| (f[i][k] - f[j][k]).powi(2))
                .sum::<f64>()
                .sqrt();
            condensed.push(d);
        }
    }
    let dendrogram = kodama::linkage(&mut condensed, n, kodama::Method::Average);
    // Merge the steps within the distance (union-find over kodama's cluster labels).
    let mut parent: Vec<usize> = (0..2 * n).collect();
    fn root(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    for (k, step) in dendrogram.steps().iter().enumerate() {
        let new = n + k;
        if step.dissimilarity <= distance {
            let (a, b) = (
                root(&mut parent, step.cluster1),
                root(&mut parent, step.cluster2),
            );
            parent[a] = new;
            parent[b] = new;
        }
    }
    let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for i in 0..n {
        let r = root(&mut parent, i);
        groups.entry(r).or_default().push(i);
    }
    let mut out: Vec<Vec<usize>> = groups.into_values().collect();
    out.sort_by_key(|g| g[0]);
    out
}

/// The best parameters of a cluster, and what the surfaces predict for them.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Optimum {
    /// The parameters.
    pub params: Params,
    /// Predicted throughput, Mbit/s.
    pub throughput_mbps: f64,
    /// Predicted energy per 100 MB, J.
    pub energy_j_per_100mb: f64,
}

/// Monotone cubic Hermite interpolation (Fritsch-Carlson) through `(x, y)` points sorted by
/// strictly increasing x, evaluated at `at` (clamped to the points' range).
pub fn pchip(x: &[f64], y: &[f64], at: f64) -> f64 {
    let n = x.len();
    if n == 0 {
        return f64::NAN;
    }
    if n == 1 || at <= x[0] {
        return y[0];
    }
    if at >= x[n - 1] {
        return y[n - 1];
    }
    let h: Vec<f64> = x.windows(2).map(|w| w[1] - w[0]).collect();
    let d: Vec<f64> = (0..n - 1).map(|i| (y[i + 1] - y[i]) / h[i]).collect();
    let mut m = vec![0.0; n];
    m[0] = d[0];
    m[n - 1] = d[n - 2];
    for i in 1..n - 1 {
        m[i] = if d[i - 1] * d[i] <= 0.0 {
            0.0
        } else {
            // Weighted harmonic mean of the neighbouring slopes.
            let (w1, w2) = (2.0 * h[i] + h[i - 1], h[i] + 2.0 * h[i - 1]);
            (w1 + w2) / (w1 / d[i - 1] + w2 / d[i])
        };
    }
    let i = x.windows(2).position(|w| at < w[1]).unwrap_or(n - 2);
    let t = (at - x[i]) / h[i];
    let (t2, t3) = (t * t, t * t * t);
    (2.0 * t3 - 3.0 * t2 + 1.0) * y[i]
        + (t3 - 2.0 * t2 + t) * h[i] * m[i]
        + (-2.0 * t3 + 3.0 * t2) * y[i + 1]
        + (t3 - t2) * h[i] * m[i + 1]
}

/// Mean values at sampled (cc, p) points: (sum, count) per point.
type Grid = BTreeMap<(u32, u32), (f64, u32)>;

/// A surface over (cc, p) from mean values at sampled points: along cc for each sampled p (a
/// row), then along p. Evaluated a column (one cc) at a time, so that a grid of C × P points
/// costs C interpolations per row and C × P across the rows.
struct Surface {
    /// Per sampled p, its (cc, mean) points, by increasing cc.
    rows: Vec<(f64, Vec<f64>, Vec<f64>)>,
}

impl Surface {
    fn new(points: &Grid) -> Surface {
        let mut rows: BTreeMap<u32, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
        for (&(c, pp), &(sum, n)) in points {
            let r = rows.entry(pp).or_default();
            r.0.push(c as f64);
            r.1.push(sum / n as f64);
        }
        Surface {
            rows: rows
                .into_iter()
                .map(|(pp, (x, y))| (pp as f64, x, y))
                .collect(),
        }
    }

    /// The column at `cc`: per row its p and its value at `cc`.
    fn column(&self, cc: f64) -> (Vec<f64>, Vec<f64>) {
        self.rows
            .iter()
            .map(|(pp, x, y)| (*pp, pchip(x, y, cc)))
            .unzip()
    }
}

/// Most values of cc, and of p, that one (block size, version)'s surfaces are evaluated at:
/// every integer within the sampled range when it holds at most this many, else the sampled
/// values (this many at most, evenly spread) and this many spread evenly in log scale between
/// the extremes. With the parameters' bounds this caps a learning's work whatever the logs
/// hold.
pub const GRID: usize = 64;

/// The values of one axis to evaluate (see [`GRID`]), sorted.
fn candidates(sampled: impl Iterator<Item = u32>) -> Vec<u32> {
    let sampled: std::collections::BTreeSet<u32> = sampled.collect();
    let (Some(&lo), Some(&hi)) = (sampled.first(), sampled.last()) else {
        return Vec::new();
    };
    if ((hi - lo) as usize) < GRID {
        return (lo..=hi).collect();
    }
    let (a, b) = ((lo.max(1) as f64).ln(), (hi as f64).ln());
    let sampled: Vec<u32> = sampled.into_iter().collect();
    let n = sampled.len();
    let mut out: std::collections::BTreeSet<u32> = (0..n.min(GRID))
        .map(|i| sampled[i * n / n.min(GRID)])
        .collect();
    out.extend([lo, hi]);
    for i in 0..GRID {
        let v = (a + (b - a) * i as f64 / (GRID - 1) as f64).exp().round();
        out.insert((v as u32).clamp(lo, hi));
    }
    out.into_iter().collect()
}

/// The parameters of greatest throughput per joule for one cluster's records (`None` if they
/// are empty).
pub fn optimize(records: &[Record]) -> Option<Optimum> {
    let mut by_bs: BTreeMap<(usize, Protocol), Vec<&Record>> = BTreeMap::new();
    for r in records {
        by_bs
            .entry((r.params.bs, r.params.protocol))
            .or_default()
            .push(r);
    }
    // Each (block size, version)'s best.
    let mut bests: Vec<(f64, Optimum)> = Vec::new();
    for ((bs, protocol), rs) in by_bs {
        let mut best: Option<(f64, Optimum)> = None;
        let (mut th, mut en): (Grid, Grid) = Default::default();
        for r in &rs {
            let k = (r.params.cc, r.params.p);
            let t = th.entry(k).or_insert((0.0, 0));
            t.0 += r.throughput_mbps;
            t.1 += 1;
            let e = en.entry(k).or_insert((0.0, 0));
            e.0 += r.energy_j_per_100mb;
            e.1 += 1;
        }
        let ccs = candidates(th.keys().map(|k| k.0));
        let ps = candidates(th.keys().map(|k| k.1));
        let (th_s, en_s) = (Surface::new(&th), Surface::new(&en));
        for &cc in &ccs {
            let (tx, ty) = th_s.column(cc as f64);
            let (ex, ey) = en_s.column(cc as f64);
            for &p in &ps {
                let t = pchip(&tx, &ty, p as f64);
                let e = pchip(&ex, &ey, p as f64);
                if !(t.is_finite() && e.is_finite() && e > 0.0 && t > 0.0) {
                    continue;
                }
                let score = t / e;
                if best.is_none_or(|(s, _)| score > s) {
                    best = Some((
                        score,
                        Optimum {
                            params: Params {
                                cc,
                                p,
                                bs,
                                protocol,
                            },
                            throughput_mbps: t,
                            energy_j_per_100mb: e,
                        },
                    ));
                }
            }
        }
        bests.extend(best);
    }
    // Block sizes within BS_TIE of the best are as good (the energy model counts the radio,
    // not the CPU that small reads cost): the largest of them.
    let top = bests.iter().map(|b| b.0).fold(f64::NEG_INFINITY, f64::max);
    bests
        .into_iter()
        .filter(|b| b.0 >= top * (1.0 - BS_TIE))
        .max_by(|a, b| {
            (a.1.params.bs, a.0)
                .partial_cmp(&(b.1.params.bs, b.0))
                .unwrap_or(std::cmp::Ordering::Equal)
        })
        .map(|b| b.1)
}

/// How close (a fraction of throughput per joule) a block size's best must come to the best
/// for the larger block size to be preferred: 2%, below what one sweep trial can tell apart
/// (the paper's block sizes at 290 ms: 1 and 64 KiB within 0.5% of each other).
pub const BS_TIE: f64 = 0.02;

/// Clean, cluster and optimise each cluster once: the [`Table`] of the clusters' centroids and
/// optima, and each cleaned record's condition labelled with its cluster's optimum (the
/// learning module's training set, [`crate::model::training_set`]).
pub fn analyse(records: &[Record], distance: f64) -> (Table, Vec<(Condition, Params)>) {
    let (kept, _) = clean(records);
    let (mut entries, mut labelled) = (Vec::new(), Vec::new());
    for g in cluster(&kept, distance) {
        let rs: Vec<&Record> = g.iter().map(|&i| &kept[i]).collect();
        let owned: Vec<Record> = rs.iter().map(|r| (*r).clone()).collect();
        let Some(opt) = optimize(&owned) else {
            continue;
        };
        let mut c = [0.0; 3];
        for r in &rs {
            for (k, v) in r.features().iter().enumerate() {
                c[k] += v / rs.len() as f64;
            }
        }
        entries.push((c, opt));
        labelled.extend(rs.iter().map(|r| (r.condition(), opt.params)));
    }
    (Table { entries }, labelled)
}

/// The learnt parameters: per cluster its centroid (the condition features' mean) and optimum.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Table {
    /// (centroid: log10 RTT ms, log10 bandwidth Mbit/s, log10 mean file bytes; optimum).
    pub entries: Vec<([f64; 3], Optimum)>,
}

impl Table {
    /// Learn from raw logs: clean, cluster, optimise each cluster.
    pub fn learn(records: &[Record], distance: f64) -> Table {
        analyse(records, distance).0
    }

    /// The parameters for a condition: the nearest cluster's optimum (`None` before learning).
    pub fn lookup(&self, c: &Condition) -> Option<Optimum> {
        self.nearest(c).map(|n| n.1)
    }

    /// The nearest cluster's distance from a condition (log10 units) and its optimum.
    pub fn nearest(&self, c: &Condition) -> Option<(f64, Optimum)> {
        let q = c.features();
        self.entries
            .iter()
            .map(|e| (dist(&e.0, &q), e.1))
            .min_by(|a, b| a.0.total_cmp(&b.0))
    }
}

fn dist(a: &[f64; 3], b: &[f64; 3]) -> f64 {
    (0..3).map(|k| (a[k] - b[k]).powi(2)).sum::<f64>().sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(rtt: f64, cc: u32, p: u32, bs: usize, th: f64, e: f64) -> Record {
        Record {
            rtt_ms: rtt,
            bandwidth_mbps: 100.0,
            mean_file_bytes: 112_000.0,
            params: Params {
                cc,
                p,
                bs,
                protocol: Protocol::Http1,
            },
            throughput_mbps: th,
            energy_j_per_100mb: e,
            ok: true,
            context: Default::default(),
        }
    }

    #[test]
    fn pchip_passes_through_its_points_and_keeps_monotone_data_monotone() {
        let x = [1.0, 2.0, 4.0, 8.0, 16.0];
        let y = [2.6, 6.0, 15.0, 30.0, 42.0];
        for (a, b) in x.iter().zip(&y) {
            assert!((pchip(&x, &y, *a) - b).abs() < 1e-9);
        }
        let mut last = 0.0;
        for i in 0..=150 {
            let v = pchip(&x, &y, 1.0 + i as f64 * 0.1);
            assert!(v >= last - 1e-9, "not monotone at {i}: {v} < {last}");
            last = v;
        }
        assert_eq!(pchip(&x, &y, 100.0), 42.0);
    }

    #[test]
    fn a_record_keeps_its_context_and_older_records_still_read() {
        let mut r = rec(59.0, 4, 2, 65536, 10.0, 10.0);
        r.context = LogContext {
            files: Some(100),
            cpu_s: Some(0.5),
            tcp_rmem_max: Some(6 << 20),
        };
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains("\"files\":100"), "{text}");
        assert_eq!(serde_json::from_str::<Record>(&text).unwrap(), r);
        let old = r#"{"rtt_ms":59,"bandwidth_mbps":100,"mean_file_bytes":1,"params":{"cc":1,"p":1,"bs":65536},"throughput_mbps":1,"energy_j_per_100mb":1,"ok":true}"#;
        let old = serde_json::from_str::<Record>(old).unwrap();
        assert_eq!(old.context, LogContext::default());
        assert_eq!(
            old.params.protocol,
            Protocol::Http1,
            "logs from before HTTP/2 was swept"
        );
    }

    #[test]
    fn impossible_and_failed_records_are_dropped() {
        let mut bad = rec(59.0, 1, 1, 65536, 150.0, 10.0); // above the 100 Mbit/s bandwidth
        let (kept, dropped) = clean(&[rec(59.0, 1, 1, 65536, 10.0, 10.0), bad.clone()]);
        assert_eq!((kept.len(), dropped), (1, 1));
        bad.throughput_mbps = 10.0;
        bad.ok = false;
        assert_eq!(clean(&[bad]).1, 1);
    }

    #[test]
    fn records_cluster_by_condition() {
        let rs = vec![
            rec(59.0, 1, 1, 65536, 5.0, 50.0),
            rec(61.0, 2, 1, 65536, 9.0, 30.0),
            rec(290.0, 1, 1, 65536, 1.0, 90.0),
            rec(300.0, 4, 1, 65536, 4.0, 40.0),
        ];
        assert_eq!(cluster(&rs, CLUSTER_DISTANCE), vec![vec![0, 1], vec![2, 3]]);
        assert_eq!(cluster(&rs, 10.0).len(), 1);
    }

    /// Throughput rising with concurrency to 16 and flat after, energy per byte falling to 16
    /// and rising after (the paper's image dataset): the optimum is cc 16.
    #[test]
    fn the_optimum_is_where_throughput_per_joule_peaks() {
        let mut rs = Vec::new();
        for (cc, th, e) in [
            (1, 5.6, 100.0),
            (4, 20.0, 45.0),
            (8, 35.0, 35.0),
            (16, 48.0, 32.0),
            (32, 49.0, 45.0),
        ] {
            for p in [1, 2] {
                rs.push(rec(
                    290.0,
                    cc,
                    p,
                    65536,
                    th * if p == 2 { 0.9 } else { 1.0 },
                    e,
                ));
            }
        }
        let o = optimize(&rs).unwrap();
        assert_eq!((o.params.p, o.params.bs), (1, 65536));
        assert!((14..=18).contains(&o.params.cc), "{o:?}");
        let t = Table::learn(&rs, CLUSTER_DISTANCE);
        assert_eq!(t.entries.len(), 1);
        let c = |rtt_ms, bandwidth_mbps, mean_file_bytes| Condition {
            rtt_ms,
            bandwidth_mbps,
            mean_file_bytes,
        };
        assert_eq!(
            t.lookup(&c(250.0, 100.0, 100_000.0)).unwrap().params,
            o.params
        );
        assert!(Table::default().lookup(&c(1.0, 1.0, 1.0)).is_none());
    }

    /// The HTTP version is chosen as the block size is: its own surface, and the version whose
    /// best is best. Pages on a long path: HTTP/2's one connection beats HTTP/1.1's many.
    /// Block sizes the sweep cannot tell apart: the largest (fewer reads); one clearly better
    /// wins however small.
    #[test]
    fn a_block_size_as_good_as_the_best_is_preferred_when_larger() {
        let mut rs = Vec::new();
        for (cc, th) in [(1, 2.0), (8, 12.0), (32, 23.5)] {
            rs.push(rec(290.0, cc, 1, 1024, th, 400.0 / th));
            rs.push(rec(290.0, cc, 1, 65536, th * 0.995, 400.0 / (th * 0.995)));
        }
        assert_eq!(optimize(&rs).unwrap().params.bs, 65536);
        for r in rs.iter_mut().filter(|r| r.params.bs == 65536) {
            r.throughput_mbps *= 0.9;
            r.energy_j_per_100mb /= 0.9;
        }
        assert_eq!(optimize(&rs).unwrap().params.bs, 1024);
    }

    #[test]
    fn the_http_version_whose_best_is_best_wins() {
        let mut rs = Vec::new();
        for (cc, h1, h2) in [(1, 2.0, 3.0), (8, 10.0, 17.0), (32, 14.0, 19.0)] {
            rs.push(rec(290.0, cc, 1, 65536, h1, 400.0 / h1));
            let mut r = rec(290.0, cc, 1, 65536, h2, 400.0 / h2);
            r.params.protocol = Protocol::Http2;
            rs.push(r);
        }
        let o = optimize(&rs).unwrap();
        assert_eq!(o.params.protocol, Protocol::Http2, "{o:?}");
        assert!(o.throughput_mbps > 17.0, "{o:?}");
        // Without the HTTP/2 records, HTTP/1.1 at its own best.
        let h1: Vec<Record> = rs
            .into_iter()
            .filter(|r| r.params.protocol == Protocol::Http1)
            .collect();
        assert_eq!(optimize(&h1).unwrap().params.protocol, Protocol::Http1);
    }
}
