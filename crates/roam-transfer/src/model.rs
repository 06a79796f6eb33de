//! The learning module (the FastHLA paper, ../shared/spec/fasthla.md "Analysis"): a fixed-size model
//! that maps a network condition to the parameters the HLA server's optimiser found best for
//! it, so the device needs no table of every condition and no probing, and a prediction takes
//! microseconds.
//!
//! The seed trained an artificial neural network (94% accuracy), an SVM (92%) and k nearest
//! neighbours (86%) on the optimiser's outputs. Here, each cleaned log record is a training
//! sample: its condition (log10 of RTT, bandwidth and mean file size, standardised) labelled
//! with its cluster's optimum ([`crate::hla::optimize`]); the distinct optima are the classes
//! (the [`MAX_CLASSES`] most frequent: training costs samples × classes, and the logs are
//! uploaded by anyone holding a token).
//!
//! - [`Kind::Network`]: a multilayer perceptron, one hidden layer of [`HIDDEN`] tanh units and a
//!   softmax over the classes, trained by full-batch Adam on the cross-entropy with a little L2.
//! - [`Kind::Svm`]: a support vector machine with a Gaussian (RBF) kernel, approximated by
//!   [`FEATURES`] random Fourier features (Rahimi and Recht, 2007) so that its size is fixed,
//!   one-vs-rest linear SVMs on them trained by Pegasos (stochastic sub-gradient on the hinge
//!   loss).
//! - [`Kind::Knn`]: the three nearest training samples vote; kept for the accuracy comparison
//!   (its size grows with the logs, which is why the seed did not ship it).
//!
//! Written here by hand, not taken from a crate: these are a few dozen lines each over at most a
//! few thousand samples of three features, where the Rust learning crates (linfa, smartcore)
//! bring a linear-algebra stack and, for SVMs, kernels whose model size grows with the support
//! vectors. The model file is JSON with a format number; a file of another format, with
//! inconsistent dimensions or non-finite weights is refused with the reason.

use roam_core::rng::SplitMix;
use serde::{Deserialize, Serialize};

pub use crate::condition::Condition;
use crate::error::TransferError;
use crate::hla::{self, Record};
use crate::params::Params;

/// Hidden units of the network.
pub const HIDDEN: usize = 16;
/// Random Fourier features of the SVM.
pub const FEATURES: usize = 64;
/// Samples a model is trained on at most (a deterministic subset beyond).
pub const MAX_TRAINING: usize = 4000;
/// Classes (distinct parameters) a model learns at most: beyond, the most frequent ones are
/// kept and the samples of the others left out (the table still holds their clusters' optima).
/// Training costs samples × classes: this bounds it whatever the logs hold (thousands of
/// clusters each with its own optimum would otherwise keep the server training for hours).
pub const MAX_CLASSES: usize = 16;
/// The model file's format number. 2: classes carry the HTTP version (format 1's are read as
/// HTTP/1.1; a roam that reads only format 1 refuses a format 2 model rather than ignore its
/// versions).
pub const FORMAT: u32 = 2;

/// Which learner.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Multilayer perceptron.
    Network,
    /// RBF-kernel SVM on random Fourier features.
    Svm,
    /// Three nearest neighbours.
    Knn,
}

impl Kind {
    /// Every learner, in the paper's order.
    pub const ALL: [Kind; 3] = [Kind::Network, Kind::Svm, Kind::Knn];

    /// Name in files, reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Network => "network",
            Kind::Svm => "svm",
            Kind::Knn => "knn",
        }
    }
}

/// The learnt weights.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum Weights {
    Network {
        /// HIDDEN × 3, row-major.
        w1: Vec<f64>,
        b1: Vec<f64>,
        /// classes × HIDDEN.
        w2: Vec<f64>,
        b2: Vec<f64>,
    },
    Svm {
        /// FEATURES × 3 frequencies and FEATURES phases.
        omega: Vec<f64>,
        phase: Vec<f64>,
        /// classes × FEATURES, and classes biases.
        w: Vec<f64>,
        b: Vec<f64>,
    },
    Knn {
        /// Standardised samples and their classes.
        x: Vec<[f64; 3]>,
        y: Vec<usize>,
    },
}

/// A trained model: standardisation, classes, weights.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Model {
    format: u32,
    mean: [f64; 3],
    scale: [f64; 3],
    /// The parameters each class stands for.
    pub classes: Vec<Params>,
    weights: Weights,
}

/// The training set: each cleaned record's condition labelled with its cluster's optimum.
pub fn training_set(records: &[Record], distance: f64) -> Vec<(Condition, Params)> {
    hla::analyse(records, distance).1
}

fn bad(why: impl Into<String>) -> TransferError {
    TransferError::Model(why.into())
}

impl Model {
    /// Train a `kind` model on `set` (conditions and the parameters wanted for them).
    pub fn train(
        kind: Kind,
        set: &[(Condition, Params)],
        seed: u64,
    ) -> Result<Model, TransferError> {
        if set.is_empty() {
            return Err(bad("no training samples (no logs survived cleaning)"));
        }
        let mut rng = SplitMix(seed);
        let mut set: Vec<(Condition, Params)> = set.to_vec();
        while set.len() > MAX_TRAINING {
            let i = rng.below(set.len());
            set.swap_remove(i);
        }
        keep_frequent_classes(&mut set, MAX_CLASSES);
        let mut classes: Vec<Params> = Vec::new();
        let mut y = Vec::with_capacity(set.len());
        for (_, p) in &set {
            let c = match classes.iter().position(|q| q == p) {
                Some(c) => c,
                None => {
                    classes.push(*p);
                    classes.len() - 1
                }
            };
            y.push(c);
        }
        let raw: Vec<[f64; 3]> = set.iter().map(|(c, _)| c.features()).collect();
        let n = raw.len() as f64;
        let mut mean = [0.0; 3];
        let mut scale = [0.0; 3];
        for k in 0..3 {
            mean[k] = raw.iter().map(|f| f[k]).sum::<f64>() / n;
            let var = raw.iter().map(|f| (f[k] - mean[k]).powi(2)).sum::<f64>() / n;
            scale[k] = if var > 1e-12 { var.sqrt() } else { 1.0 };
        }
        let x: Vec<[f64; 3]> = raw
            .iter()
            .map(|f| std::array::from_fn(|k| (f[k] - mean[k]) / scale[k]))
            .collect();
        let weights = match kind {
            Kind::Network => train_network(&x, &y, classes.len(), &mut rng),
            Kind::Svm => train_svm(&x, &y, classes.len(), &mut rng),
            Kind::Knn => Weights::Knn { x, y },
        };
        Ok(Model {
            format: FORMAT,
            mean,
            scale,
            classes,
            weights,
        })
    }

    /// Which learner this is.
    pub fn kind(&self) -> Kind {
        match self.weights {
            Weights::Network { .. } => Kind::Network,
            Weights::Svm { .. } => Kind::Svm,
            Weights::Knn { .. } => Kind::Knn,
        }
    }

    /// The parameters for a condition.
    pub fn predict(&self, c: &Condition) -> Params {
        self.classes[self.class(c)]
    }

    fn class(&self, c: &Condition) -> usize {
        let f = c.features();
        let x: [f64; 3] = std::array::from_fn(|k| (f[k] - self.mean[k]) / self.scale[k]);
        let k = self.classes.len();
        let argmax = |scores: &mut dyn Iterator<Item = f64>| {
            scores
                .enumerate()
                .fold(
                    (0, f64::NEG_INFINITY),
                    |b, (i, s)| if s > b.1 { (i, s) } else { b },
                )
                .0
        };
        match &self.weights {
            Weights::Network { w1, b1, w2, b2 } => {
                let h: [f64; HIDDEN] = std::array::from_fn(|j| {
                    (b1[j] + (0..3).map(|i| w1[j * 3 + i] * x[i]).sum::<f64>()).tanh()
                });
                argmax(
                    &mut (0..k).map(|c| {
                        b2[c] + (0..HIDDEN).map(|j| w2[c * HIDDEN + j] * h[j]).sum::<f64>()
                    }),
                )
            }
            Weights::Svm { omega, phase, w, b } => {
                let z = fourier(omega, phase, &x);
                argmax(&mut (0..k).map(|c| {
                    b[c] + (0..FEATURES)
                        .map(|j| w[c * FEATURES + j] * z[j])
                        .sum::<f64>()
                }))
            }
            Weights::Knn { x: xs, y } => {
                let mut d: Vec<(f64, usize)> = xs
                    .iter()
                    .zip(y)
                    .map(|(p, &c)| ((0..3).map(|i| (p[i] - x[i]).powi(2)).sum::<f64>(), c))
                    .collect();
                let m = d.len().min(3);
                d.select_nth_unstable_by(m - 1, |a, b| a.0.total_cmp(&b.0));
                let mut votes = vec![0usize; k];
                for &(_, c) in &d[..m] {
                    votes[c] += 1;
                }
                // Ties go to the nearest.
                let nearest = d[..m]
                    .iter()
                    .min_by(|a, b| a.0.total_cmp(&b.0))
                    .map_or(0, |v| v.1);
                let top = *votes.iter().max().unwrap_or(&0);
                if votes[nearest] == top {
                    nearest
                } else {
                    votes.iter().position(|&v| v == top).unwrap_or(0)
                }
            }
        }
    }

    /// The model as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a model serialises")
    }

    /// A model from JSON, checked: its format, dimensions consistent with its classes, every
    /// weight finite, every class's parameters within bounds.
    pub fn from_json(text: &str) -> Result<Model, TransferError> {
        let m: Model =
            serde_json::from_str(text).map_err(|e| bad(format!("not a model file: {e}")))?;
        if !(1..=FORMAT).contains(&m.format) {
            return Err(bad(format!(
                "model format {} (this roam reads formats 1 to {FORMAT}): retrain or update roam",
                m.format
            )));
        }
        let k = m.classes.len();
        if k == 0 {
            return Err(bad("a model without classes"));
        }
        for p in &m.classes {
            p.validate().map_err(|e| bad(format!("a class's {e}")))?;
        }
        let finite = |v: &[f64]| v.iter().all(|x| x.is_finite());
        if !finite(&m.mean) || !finite(&m.scale) || m.scale.iter().any(|s| *s <= 0.0) {
            return Err(bad("its standardisation is not finite and positive"));
        }
        let ok = match &m.weights {
            Weights::Network { w1, b1, w2, b2 } => {
                w1.len() == HIDDEN * 3
                    && b1.len() == HIDDEN
                    && w2.len() == k * HIDDEN
                    && b2.len() == k
                    && [w1, b1, w2, b2].iter().all(|v| finite(v))
            }
            Weights::Svm { omega, phase, w, b } => {
                omega.len() == FEATURES * 3
                    && phase.len() == FEATURES
                    && w.len() == k * FEATURES
                    && b.len() == k
                    && [omega, phase, w, b].iter().all(|v| finite(v))
            }
            Weights::Knn { x, y } => {
                !x.is_empty()
                    && x.len() == y.len()
                    && y.iter().all(|&c| c < k)
                    && x.iter().all(|p| finite(p))
            }
        };
        if !ok {
            return Err(bad(format!(
                "its {} weights do not match its {k} classes or are not finite",
                m.kind().name()
            )));
        }
        Ok(m)
    }
}

/// Only the samples of the `max` most frequent classes in `set` (ties: the first seen).
fn keep_frequent_classes(set: &mut Vec<(Condition, Params)>, max: usize) {
    let mut by: std::collections::HashMap<Params, (usize, usize)> = Default::default();
    for (i, (_, p)) in set.iter().enumerate() {
        by.entry(*p).or_insert((0, i)).0 += 1;
    }
    if by.len() <= max {
        return;
    }
    let mut ranked: Vec<(Params, (usize, usize))> = by.into_iter().collect();
    ranked.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.1 .1.cmp(&b.1 .1)));
    let kept: std::collections::HashSet<Params> =
        ranked.into_iter().take(max).map(|r| r.0).collect();
    set.retain(|(_, p)| kept.contains(p));
}

fn train_network(x: &[[f64; 3]], y: &[usize], k: usize, rng: &mut SplitMix) -> Weights {
    let n = x.len();
    // Parameters in one vector: w1 (H×3), b1 (H), w2 (k×H), b2 (k).
    let (o1, o2, o3) = (HIDDEN * 3, HIDDEN * 4, HIDDEN * 4 + k * HIDDEN);
    let len = o3 + k;
    let mut th = vec![0.0; len];
    for (i, v) in th.iter_mut().enumerate() {
        let fan_in = if i < o1 { 3.0 } else { HIDDEN as f64 };
        if i < o1 || (o2..o3).contains(&i) {
            *v = rng.normal() / fan_in.sqrt();
        }
    }
    let (mut m1, mut m2) = (vec![0.0; len], vec![0.0; len]);
    let (lr, beta1, beta2, l2) = (0.03, 0.9, 0.999, 1e-4);
    let mut g = vec![0.0; len];
    let mut h = vec![[0.0; HIDDEN]; n];
    let mut p = vec![0.0; k];
    // Each class's output gradient of the sample at hand (computed once, used twice).
    let mut dc = vec![0.0; k];
    for step in 1..=600 {
        g.iter_mut().for_each(|v| *v = 0.0);
        for (s, xs) in x.iter().enumerate() {
            for j in 0..HIDDEN {
                h[s][j] = (th[o1 + j] + (0..3).map(|i| th[j * 3 + i] * xs[i]).sum::<f64>()).tanh();
            }
            for (c, pc) in p.iter_mut().enumerate() {
                *pc = th[o3 + c]
                    + (0..HIDDEN)
                        .map(|j| th[o2 + c * HIDDEN + j] * h[s][j])
                        .sum::<f64>();
            }
            let top = p.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = p.iter().map(|v| (v - top).exp()).sum();
            for c in 0..k {
                let d = ((p[c] - top).exp() / z - f64::from(u8::from(c == y[s]))) / n as f64;
                dc[c] = d;
                g[o3 + c] += d;
                for j in 0..HIDDEN {
                    g[o2 + c * HIDDEN + j] += d * h[s][j];
                }
            }
            for j in 0..HIDDEN {
                let back: f64 = (0..k).map(|c| dc[c] * th[o2 + c * HIDDEN + j]).sum::<f64>()
                    * (1.0 - h[s][j] * h[s][j]);
                g[o1 + j] += back;
                for i in 0..3 {
                    g[j * 3 + i] += back * xs[i];
                }
            }
        }
        for i in 0..len {
            let gi = g[i] + l2 * th[i];
            m1[i] = beta1 * m1[i] + (1.0 - beta1) * gi;
            m2[i] = beta2 * m2[i] + (1.0 - beta2) * gi * gi;
            let mh = m1[i] / (1.0 - beta1.powi(step));
            let vh = m2[i] / (1.0 - beta2.powi(step));
            th[i] -= lr * mh / (vh.sqrt() + 1e-8);
        }
    }
    Weights::Network {
        w1: th[..o1].to_vec(),
        b1: th[o1..o2].to_vec(),
        w2: th[o2..o3].to_vec(),
        b2: th[o3..].to_vec(),
    }
}

/// z(x) = sqrt(2/D) cos(ω·x + φ): E[z(x)·z(y)] is the Gaussian kernel exp(-|x-y|²/2σ²) for
/// ω ~ N(0, I/σ²), φ ~ U(0, 2π).
fn fourier(omega: &[f64], phase: &[f64], x: &[f64; 3]) -> [f64; FEATURES] {
    let a = (2.0 / FEATURES as f64).sqrt();
    std::array::from_fn(|j| {
        a * (phase[j] + (0..3).map(|i| omega[j * 3 + i] * x[i]).sum::<f64>()).cos()
    })
}

fn train_svm(x: &[[f64; 3]], y: &[usize], k: usize, rng: &mut SplitMix) -> Weights {
    // Kernel width: half a standard deviation, so clusters a factor of two apart separate.
    let sigma = 0.5;
    let omega: Vec<f64> = (0..FEATURES * 3).map(|_| rng.normal() / sigma).collect();
    let phase: Vec<f64> = (0..FEATURES)
        .map(|_| rng.unit() * std::f64::consts::TAU)
        .collect();
    let z: Vec<[f64; FEATURES]> = x.iter().map(|v| fourier(&omega, &phase, v)).collect();
    let n = x.len();
    let lambda = 1e-4;
    let steps = (n * 30).clamp(2000, 100_000);
    let mut w = vec![0.0; k * FEATURES];
    let mut b = vec![0.0; k];
    for c in 0..k {
        let wc = &mut w[c * FEATURES..(c + 1) * FEATURES];
        for t in 1..=steps {
            let s = rng.below(n);
            let label = if y[s] == c { 1.0 } else { -1.0 };
            let eta = 1.0 / (lambda * t as f64);
            let margin = label * (b[c] + (0..FEATURES).map(|j| wc[j] * z[s][j]).sum::<f64>());
            for v in wc.iter_mut() {
                *v *= 1.0 - eta * lambda;
            }
            if margin < 1.0 {
                for j in 0..FEATURES {
                    wc[j] += eta * label * z[s][j];
                }
                b[c] += eta.min(1.0) * label * 0.01;
            }
        }
    }
    Weights::Svm { omega, phase, w, b }
}

/// Cross-validated accuracy of a learner on `set`: `folds` folds by a seeded shuffle, the
/// fraction of held-out samples whose predicted parameters are the wanted ones.
pub fn accuracy(kind: Kind, set: &[(Condition, Params)], folds: usize, seed: u64) -> Option<f64> {
    if set.len() < folds.max(2) {
        return None;
    }
    let mut rng = SplitMix(seed ^ 0xacc);
    let mut order: Vec<usize> = (0..set.len()).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i + 1));
    }
    let (mut right, mut total) = (0usize, 0usize);
    for f in 0..folds {
        let (test, train): (Vec<usize>, Vec<usize>) = order.iter().partition(|&&i| i % folds == f);
        let train: Vec<(Condition, Params)> = train.iter().map(|&i| set[i]).collect();
        let m = Model::train(kind, &train, seed).ok()?;
        for &i in &test {
            total += 1;
            right += usize::from(m.predict(&set[i].0) == set[i].1);
        }
    }
    (total > 0).then(|| right as f64 / total as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Protocol;

    /// Three conditions (a near server over a fast link, a far one, a slow link), each with its
    /// own best parameters, sampled with noise.
    fn set(n: usize) -> Vec<(Condition, Params)> {
        let mut rng = SplitMix(7);
        let kinds = [
            (
                59.0,
                100.0,
                112e3,
                Params {
                    cc: 16,
                    p: 1,
                    bs: 65536,
                    ..Params::default()
                },
            ),
            (
                290.0,
                100.0,
                2.7e6,
                Params {
                    cc: 8,
                    p: 4,
                    bs: 65536,
                    ..Params::default()
                },
            ),
            (
                115.0,
                5.0,
                152e6,
                Params {
                    cc: 2,
                    p: 2,
                    bs: 16384,
                    protocol: Protocol::Http2,
                },
            ),
        ];
        (0..n)
            .map(|i| {
                let (rtt, bw, size, p) = kinds[i % 3];
                let j = |v: f64, rng: &mut SplitMix| v * (1.0 + 0.2 * (rng.unit() - 0.5));
                (
                    Condition {
                        rtt_ms: j(rtt, &mut rng),
                        bandwidth_mbps: j(bw, &mut rng),
                        mean_file_bytes: j(size, &mut rng),
                    },
                    p,
                )
            })
            .collect()
    }

    #[test]
    fn every_learner_separates_distinct_conditions() {
        let s = set(90);
        for kind in Kind::ALL {
            let a = accuracy(kind, &s, 5, 1).unwrap();
            assert!(a > 0.95, "{}: {a}", kind.name());
            let m = Model::train(kind, &s, 1).unwrap();
            assert_eq!(m.kind(), kind);
            let far = Condition {
                rtt_ms: 280.0,
                bandwidth_mbps: 90.0,
                mean_file_bytes: 3e6,
            };
            assert_eq!(
                m.predict(&far),
                Params {
                    cc: 8,
                    p: 4,
                    bs: 65536,
                    ..Params::default()
                }
            );
        }
    }

    #[test]
    fn a_model_survives_its_file_and_a_bad_file_is_refused() {
        let s = set(30);
        for kind in Kind::ALL {
            let m = Model::train(kind, &s, 3).unwrap();
            let back = Model::from_json(&m.to_json()).unwrap();
            for (c, _) in &s {
                assert_eq!(back.predict(c), m.predict(c));
            }
        }
        let m = Model::train(Kind::Network, &s, 3).unwrap();
        let text = m.to_json();
        let err = |t: &str| Model::from_json(t).unwrap_err().to_string();
        assert!(err("{").contains("not a model file"));
        assert!(err(&text.replacen("\"format\":2", "\"format\":3", 1)).contains("format 3"));
        // A format 1 file (before the HTTP version was a parameter): every class HTTP/1.1.
        let old = text
            .replacen("\"format\":2", "\"format\":1", 1)
            .replace(",\"protocol\":\"Http2\"", "")
            .replace(",\"protocol\":\"Http1\"", "");
        let old = Model::from_json(&old).unwrap();
        assert!(old.classes.iter().all(|c| c.protocol == Protocol::Http1));
        assert!(m.classes.iter().any(|c| c.protocol == Protocol::Http2));
        let mut wrong = m.clone();
        wrong.classes.push(Params::default());
        assert!(err(&wrong.to_json()).contains("do not match"));
        let mut zero = m.clone();
        zero.classes[0].cc = 0;
        assert!(err(&zero.to_json()).contains("concurrency 0"));
        assert!(Model::train(Kind::Svm, &[], 1).is_err());
    }

    #[test]
    fn the_training_set_labels_records_with_their_clusters_optimum() {
        let mut rs = Vec::new();
        for (cc, th) in [(1, 5.0), (4, 18.0), (16, 40.0)] {
            rs.push(Record {
                rtt_ms: 290.0,
                bandwidth_mbps: 100.0,
                mean_file_bytes: 112e3,
                params: Params {
                    cc,
                    p: 1,
                    bs: 65536,
                    ..Params::default()
                },
                throughput_mbps: th,
                energy_j_per_100mb: 400.0 / th,
                ok: true,
                context: Default::default(),
            });
        }
        let s = training_set(&rs, hla::CLUSTER_DISTANCE);
        assert_eq!(s.len(), 3);
        assert!(s.iter().all(|(_, p)| p.cc == 16), "{s:?}");
    }
}
