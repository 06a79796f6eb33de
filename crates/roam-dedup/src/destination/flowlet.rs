//! Cutting a stream into flowlets: stretches whose bytes, read as a time series, keep one
//! statistical character (the thesis §4.3.3, after Kitagawa and Akaike's segmentation of
//! piecewise-stationary series).
//!
//! Each segment of the stream (a packet's worth, [`FlowletConfig::segment`]) is fitted with an
//! autoregressive model of order `p` by Yule-Walker; its *gain* is `N log σ²`, σ² the power
//! of the model's white noise (Algorithm 6, `gain`). Between two consecutive segments `a` and
//! `b`, `d = gain(a ++ b) - gain(a) - gain(b)`, how much worse one model fits both than two
//! (`updateFlowlets`): past `d_thresh`, a new flowlet starts with `b`.

/// The segmentation's parameters (the thesis gives their roles, not their values).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowletConfig {
    /// Bytes per segment: a packet's payload.
    pub segment: usize,
    /// The AR model's order.
    pub order: usize,
    /// The boundary threshold on `d`.
    pub d_thresh: f64,
    /// The most names one flowlet holds (a stream that never changes character is still
    /// cut, so eviction can take part of it).
    pub max_names: usize,
}

impl Default for FlowletConfig {
    /// Segments of 1448 bytes (a TCP payload), AR(4), `d_thresh` 150: the value at which
    /// this crate's test separates text from compressed bytes and keeps text whole (chosen
    /// here; the thesis does not give one).
    fn default() -> FlowletConfig {
        FlowletConfig {
            segment: 1448,
            order: 4,
            d_thresh: 150.0,
            max_names: 16_384,
        }
    }
}

/// What the gain needs of a stretch of bytes: its length, sum, lagged products
/// `S_l = Σ_{k>=l} x_k x_(k-l)` for `l <= p`, and its first and last `p` bytes, from which
/// the same of two stretches joined follows in O(p²) (so each segment is read once).
#[derive(Clone, Debug, PartialEq)]
pub struct Moments {
    n: usize,
    sum: f64,
    lags: Vec<f64>,
    head: Vec<u8>,
    tail: Vec<u8>,
}

impl Moments {
    /// The moments of `x` up to lag `p`.
    pub fn of(x: &[u8], p: usize) -> Moments {
        let mut lags = vec![0.0; p + 1];
        for (l, s) in lags.iter_mut().enumerate() {
            if l < x.len() {
                *s = x[l..]
                    .iter()
                    .zip(x)
                    .map(|(&a, &b)| f64::from(a) * f64::from(b))
                    .sum();
            }
        }
        Moments {
            n: x.len(),
            sum: x.iter().map(|&v| f64::from(v)).sum(),
            lags,
            head: x[..p.min(x.len())].to_vec(),
            tail: x[x.len() - p.min(x.len())..].to_vec(),
        }
    }

    /// The moments of `self` followed by `b`.
    pub fn join(&self, b: &Moments) -> Moments {
        let p = self.lags.len() - 1;
        let mut lags: Vec<f64> = self.lags.iter().zip(&b.lags).map(|(x, y)| x + y).collect();
        // Products across the seam: b's byte j with a's byte (len a - l + j), for j < l.
        for (l, s) in lags.iter_mut().enumerate().skip(1) {
            for j in 0..l.min(b.head.len()) {
                let ai = self.tail.len() as isize - l as isize + j as isize;
                if ai >= 0 {
                    *s += f64::from(b.head[j]) * f64::from(self.tail[ai as usize]);
                }
            }
        }
        let mut head = self.head.clone();
        head.extend(b.head.iter().take(p - head.len().min(p)));
        let mut tail: Vec<u8> = self.tail.clone();
        tail.extend_from_slice(&b.tail);
        let tail = tail[tail.len() - p.min(tail.len())..].to_vec();
        Moments {
            n: self.n + b.n,
            sum: self.sum + b.sum,
            lags,
            head,
            tail,
        }
    }

    /// `N log σ²` of the AR(`p`) model fitted by Yule-Walker (Algorithm 6, `gain`): the
    /// autocovariances `R_l` of the centred series, the coefficients `α` solving the Toeplitz
    /// system `R_|i-j| α = R_(i+1)`, and the noise power `σ² = R_0 - Σ α_i R_(i+1)`.
    /// (The thesis writes the covariance method's sums, `C[i][j]` over `k = p..N`; this is
    /// the autocorrelation method, which its name, Yule-Walker, means, and which two
    /// segments' sums give for their join. The series is centred: raw bytes' covariances are
    /// dominated by their mean, and the statistic would see level shifts only.)
    pub fn gain(&self) -> f64 {
        let p = self.lags.len() - 1;
        let n = self.n;
        if n <= p + 1 {
            return 0.0;
        }
        let m = self.sum / n as f64;
        let sum_first = |l: usize| -> f64 {
            self.head[..l.min(self.head.len())]
                .iter()
                .map(|&v| f64::from(v))
                .sum()
        };
        let sum_last = |l: usize| -> f64 {
            self.tail[self.tail.len() - l.min(self.tail.len())..]
                .iter()
                .map(|&v| f64::from(v))
                .sum()
        };
        let r: Vec<f64> = (0..=p)
            .map(|l| {
                // Σ_{k>=l} (x_k - m)(x_(k-l) - m) = S_l - m (A_l + B_l) + (n - l) m².
                let a = self.sum - sum_first(l);
                let b = self.sum - sum_last(l);
                (self.lags[l] - m * (a + b) + (n - l) as f64 * m * m) / n as f64
            })
            .collect();
        let d: Vec<Vec<f64>> = (0..p)
            .map(|i| (0..p).map(|j| r[i.abs_diff(j)]).collect())
            .collect();
        let alpha = solve(d, r[1..].to_vec());
        let s2 = r[0] - alpha.iter().zip(&r[1..]).map(|(a, x)| a * x).sum::<f64>();
        // A constant stretch has no noise: floor it so its log is finite.
        n as f64 * s2.max(1e-3).ln()
    }
}

/// [`Moments::gain`] of `x`.
pub fn gain(x: &[u8], p: usize) -> f64 {
    Moments::of(x, p).gain()
}

/// `D⁻¹ b` by Gaussian elimination with partial pivoting; zeros where `D` is singular.
fn solve(mut d: Vec<Vec<f64>>, mut b: Vec<f64>) -> Vec<f64> {
    let p = b.len();
    for col in 0..p {
        let piv = (col..p)
            .max_by(|&x, &y| d[x][col].abs().total_cmp(&d[y][col].abs()))
            .unwrap_or(col);
        if d[piv][col].abs() < 1e-9 {
            return vec![0.0; p];
        }
        d.swap(col, piv);
        b.swap(col, piv);
        let (top, rest) = d.split_at_mut(col + 1);
        let pivot = &top[col];
        for (i, row) in rest.iter_mut().enumerate() {
            let f = row[col] / pivot[col];
            for (x, y) in row[col..].iter_mut().zip(&pivot[col..]) {
                *x -= f * y;
            }
            b[col + 1 + i] -= f * b[col];
        }
    }
    let mut x = vec![0.0; p];
    for row in (0..p).rev() {
        let s: f64 = (row + 1..p).map(|k| d[row][k] * x[k]).sum();
        x[row] = (b[row] - s) / d[row][row];
    }
    x
}

/// The boundary statistic between consecutive segments `a` and `b`.
pub fn distance(a: &[u8], b: &[u8], p: usize) -> f64 {
    let (ma, mb) = (Moments::of(a, p), Moments::of(b, p));
    ma.join(&mb).gain() - ma.gain() - mb.gain()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(n: usize) -> Vec<u8> {
        crate::testdata::text(n, 12345)
    }

    fn noise(n: usize) -> Vec<u8> {
        crate::testdata::noise(n, 7)
    }

    #[test]
    fn a_change_of_source_is_a_boundary_and_more_of_the_same_is_not() {
        let c = FlowletConfig::default();
        let (t, z) = (text(2 * c.segment), noise(2 * c.segment));
        let same = distance(&t[..c.segment], &t[c.segment..], c.order);
        let same_noise = distance(&z[..c.segment], &z[c.segment..], c.order);
        let change = distance(&t[..c.segment], &z[..c.segment], c.order);
        assert!(same < c.d_thresh, "text then text: {same}");
        assert!(same_noise < c.d_thresh, "noise then noise: {same_noise}");
        assert!(change > c.d_thresh, "text then noise: {change}");
    }

    #[test]
    fn joined_moments_equal_the_moments_of_the_joined_bytes() {
        let (a, b) = (text(1000), noise(777));
        for p in [0, 1, 4, 9] {
            let joined = Moments::of(&a, p).join(&Moments::of(&b, p));
            let direct = Moments::of(&[a.clone(), b.clone()].concat(), p);
            assert_eq!(joined.n, direct.n);
            assert_eq!(joined.head, direct.head);
            assert_eq!(joined.tail, direct.tail);
            for (x, y) in joined.lags.iter().zip(&direct.lags) {
                assert!((x - y).abs() < 1e-6 * y.abs().max(1.0), "p {p}: {x} vs {y}");
            }
            assert!((joined.gain() - direct.gain()).abs() < 1e-6 * direct.gain().abs().max(1.0));
        }
    }

    #[test]
    fn yule_walker_recovers_an_ar1_coefficient() {
        // x[k] = 0.8 x[k-1] + noise: one model fits it, σ² near the noise's.
        let z = noise(20_000);
        let mut x = vec![128u8; z.len()];
        let mut prev = 0.0f64;
        for (i, &n) in z.iter().enumerate() {
            let e = (f64::from(n) - 127.5) / 8.0;
            prev = 0.8 * prev + e;
            x[i] = (128.0 + prev).clamp(0.0, 255.0) as u8;
        }
        let g1 = gain(&x, 1) / x.len() as f64;
        let g0 = gain(&x, 0) / x.len() as f64;
        assert!(g1 < g0 - 0.5, "AR(1) {g1} vs AR(0) {g0}");
    }
}
