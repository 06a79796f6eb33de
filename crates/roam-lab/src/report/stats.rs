//! Statistics of trials, as the papers report them: the mean of n trials with a Student's t
//! confidence interval (the critical value exact for any n), and paired per-seed ratios
//! between two systems (trials of every system share their seeds) summarised by their
//! geometric mean and range.

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

    #[test]
    fn skewness_sees_one_far_trial() {
        assert!(skewness(&[1.0, 2.0, 3.0, 4.0, 5.0]).abs() < 1e-12);
        assert!(skewness(&[1.0, 1.1, 0.9, 1.0, 9.0]) > 2.0);
        assert!(skewness(&[1.0, 2.0]).is_nan());
    }
}
