//! Statistics of trials, as the papers report them: the mean of n trials with a Student's t
//! confidence interval (the critical value exact for any n), or a percentile bootstrap
//! interval where a t interval does not suit the data; the ratio of two systems' means (the
//! papers' "X times") with its bootstrap interval; and paired per-seed ratios (trials of every
//! system share their seeds) summarised by their geometric mean and range.
//!
//! The bootstrap (Efron and Tibshirani, *An Introduction to the Bootstrap*, ch. 13: the
//! percentile interval) resamples the trials with replacement [`RESAMPLES`] times and takes
//! the 2.5th and 97.5th percentiles of the statistic. Its generator is seeded from the data,
//! so a report written twice from the same trials says the same thing. With five trials its
//! interval is narrower than the truth (it cannot see past the extreme trials); the report
//! says which interval a cell shows.

pub use roam_core::student::t_critical;

/// Per-seed ratios `a / b` of two systems' values, paired by seed (trials of every system
/// share their seeds); seeds missing on either side, or with a value that is not a finite
/// positive number, are left out.
pub fn paired_ratios(a: &[(u64, f64)], b: &[(u64, f64)]) -> Vec<(u64, f64)> {
    let ok = |x: f64| x.is_finite() && x > 0.0;
    a.iter()
        .filter(|(_, x)| ok(*x))
        .filter_map(|&(seed, x)| {
            b.iter()
                .find(|(s, y)| *s == seed && ok(*y))
                .map(|&(_, y)| (seed, x / y))
        })
        .collect()
}

/// The geometric mean of `ratios` (NaN for none): the summary of ratios that treats 2x and
/// 0.5x as equally far from 1.
pub fn geometric_mean(ratios: &[f64]) -> f64 {
    if ratios.is_empty() {
        return f64::NAN;
    }
    (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp()
}

/// Sample skewness (adjusted Fisher-Pearson) of `v`; NaN with fewer than three values or none
/// spread. Above about 1 in magnitude a t interval on a handful of trials is misleading.
pub fn skewness(v: &[f64]) -> f64 {
    let n = v.len() as f64;
    if v.len() < 3 {
        return f64::NAN;
    }
    let mean = v.iter().sum::<f64>() / n;
    let m2 = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    let m3 = v.iter().map(|x| (x - mean).powi(3)).sum::<f64>() / n;
    if m2 <= 0.0 {
        return f64::NAN;
    }
    let g1 = m3 / m2.powf(1.5);
    g1 * (n * (n - 1.0)).sqrt() / (n - 2.0)
}

/// Resamples of a bootstrap.
pub const RESAMPLES: usize = 10_000;

use roam_core::rng::SplitMix;

/// The bootstrap's generator, seeded from `data`'s bits, so that the same data resample alike.
fn seeded_by(data: &[f64]) -> SplitMix {
    SplitMix(data.iter().fold(0x9e37_79b9_7f4a_7c15, |h, x| {
        (h ^ x.to_bits()).rotate_left(23).wrapping_mul(3)
    }))
}

/// The 2.5th and 97.5th percentiles of `stats` (sorted here).
fn percentile_95(mut stats: Vec<f64>) -> Option<(f64, f64)> {
    stats.retain(|x| x.is_finite());
    if stats.is_empty() {
        return None;
    }
    stats.sort_by(f64::total_cmp);
    let at = |q: f64| stats[((stats.len() - 1) as f64 * q).round() as usize];
    Some((at(0.025), at(0.975)))
}

/// The 95% percentile bootstrap interval of the mean of `v` (finite values); `None` with
/// fewer than two.
pub fn bootstrap_mean(v: &[f64]) -> Option<(f64, f64)> {
    if v.len() < 2 || v.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let mut rng = seeded_by(v);
    let n = v.len();
    let means = (0..RESAMPLES)
        .map(|_| (0..n).map(|_| v[rng.below(n)]).sum::<f64>() / n as f64)
        .collect();
    percentile_95(means)
}

/// The ratio of two systems' means, `mean(num) / mean(den)`, with its 95% percentile
/// bootstrap interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RatioOfMeans {
    /// The ratio of the means.
    pub ratio: f64,
    /// Its interval, when there are at least two trials a side.
    pub interval: Option<(f64, f64)>,
    /// Whether the resampling kept trials paired by seed (every seed on both sides), or
    /// resampled each side alone.
    pub paired: bool,
}

/// The ratio of the means of `num` and `den` (each `(seed, value)`, every value finite and
/// positive, else `None`), as the papers' "X times" compare means. Where both sides have the
/// same seeds the bootstrap resamples seeds, keeping each pair together; otherwise each side is
/// resampled alone.
pub fn ratio_of_means(num: &[(u64, f64)], den: &[(u64, f64)]) -> Option<RatioOfMeans> {
    let ok = |v: &[(u64, f64)]| !v.is_empty() && v.iter().all(|(_, x)| x.is_finite() && *x > 0.0);
    if !ok(num) || !ok(den) {
        return None;
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (a, b): (Vec<f64>, Vec<f64>) = (
        num.iter().map(|x| x.1).collect(),
        den.iter().map(|x| x.1).collect(),
    );
    let ratio = mean(&a) / mean(&b);
    let mut seeds_a: Vec<u64> = num.iter().map(|x| x.0).collect();
    let mut seeds_b: Vec<u64> = den.iter().map(|x| x.0).collect();
    seeds_a.sort_unstable();
    seeds_b.sort_unstable();
    let paired = seeds_a == seeds_b && {
        let mut d = seeds_a.clone();
        d.dedup();
        d.len() == seeds_a.len()
    };
    let interval = if a.len() < 2 || b.len() < 2 {
        None
    } else {
        let mut rng = seeded_by(&[a.clone(), b.clone()].concat());
        let stats = if paired {
            let b_of = |seed: u64| den.iter().find(|x| x.0 == seed).map_or(f64::NAN, |x| x.1);
            let pairs: Vec<(f64, f64)> = num.iter().map(|&(s, x)| (x, b_of(s))).collect();
            let n = pairs.len();
            (0..RESAMPLES)
                .map(|_| {
                    let (mut sa, mut sb) = (0.0, 0.0);
                    for _ in 0..n {
                        let (x, y) = pairs[rng.below(n)];
                        sa += x;
                        sb += y;
                    }
                    sa / sb
                })
                .collect()
        } else {
            (0..RESAMPLES)
                .map(|_| {
                    let ra: f64 = (0..a.len()).map(|_| a[rng.below(a.len())]).sum::<f64>();
                    let rb: f64 = (0..b.len()).map(|_| b[rng.below(b.len())]).sum::<f64>();
                    (ra / a.len() as f64) / (rb / b.len() as f64)
                })
                .collect()
        };
        percentile_95(stats)
    };
    Some(RatioOfMeans {
        ratio,
        interval,
        paired,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_pair_by_seed() {
        let a = [(1, 10.0), (2, 30.0), (3, f64::INFINITY), (5, 8.0)];
        let b = [(2, 10.0), (1, 20.0), (3, 5.0), (4, 1.0)];
        assert_eq!(paired_ratios(&a, &b), [(1, 0.5), (2, 3.0)]);
        let g = geometric_mean(&[0.5, 2.0]);
        assert!((g - 1.0).abs() < 1e-12);
        assert!(geometric_mean(&[]).is_nan());
    }

    /// The bootstrap's interval holds the mean, stays within the data (never below zero for
    /// positive data, where a t interval can reach there), and is the same every time.
    #[test]
    fn bootstrap_intervals_stay_within_the_data() {
        let v = [0.1, 0.1, 0.1, 0.1, 100.0];
        let (lo, hi) = bootstrap_mean(&v).unwrap();
        let mean = 20.08;
        assert!(
            lo >= 0.1 && lo < mean && hi > mean && hi <= 100.0,
            "{lo} {hi}"
        );
        assert_eq!(bootstrap_mean(&v), Some((lo, hi)), "deterministic");
        assert_eq!(bootstrap_mean(&[1.0]), None);
        assert_eq!(bootstrap_mean(&[1.0, f64::INFINITY]), None);
        let (lo, hi) = bootstrap_mean(&[10.0, 12.0, 11.0, 9.0, 13.0]).unwrap();
        assert!(lo > 9.0 && lo < 11.0 && hi > 11.0 && hi < 13.0, "{lo} {hi}");
    }

    /// The ratio of means is what the papers' "X times" is, and differs from the geometric
    /// mean of per-seed ratios when one seed dominates the means.
    #[test]
    fn ratio_of_means_against_per_seed_ratios() {
        let other = [(1, 100.0), (2, 10.0), (3, 10.0)];
        let roam = [(1, 10.0), (2, 10.0), (3, 10.0)];
        let r = ratio_of_means(&other, &roam).unwrap();
        assert!((r.ratio - 4.0).abs() < 1e-12 && r.paired);
        let (lo, hi) = r.interval.unwrap();
        assert!(lo >= 1.0 && hi <= 10.0 && lo < 4.0 && hi > 4.0, "{lo} {hi}");
        let per_seed: Vec<f64> = paired_ratios(&other, &roam).iter().map(|x| x.1).collect();
        assert!((geometric_mean(&per_seed) - 10f64.powf(1.0 / 3.0)).abs() < 1e-9);
        // Seeds that differ: each side resampled alone.
        let r = ratio_of_means(&[(1, 2.0), (2, 4.0)], &[(3, 1.0), (4, 2.0)]).unwrap();
        assert!(!r.paired && (r.ratio - 2.0).abs() < 1e-12);
        assert_eq!(ratio_of_means(&[(1, f64::INFINITY)], &roam), None);
        assert_eq!(
            ratio_of_means(&[(1, 1.0)], &[(1, 2.0)]).unwrap().interval,
            None
        );
    }

    #[test]
    fn skewness_sees_one_far_trial() {
        assert!(skewness(&[1.0, 2.0, 3.0, 4.0, 5.0]).abs() < 1e-12);
        assert!(skewness(&[1.0, 1.1, 0.9, 1.0, 9.0]) > 2.0);
        assert!(skewness(&[1.0, 2.0]).is_nan());
    }
}
