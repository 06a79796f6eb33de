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

/// `N log σ²` of the AR(`p`) model fitted to `x` by Yule-Walker (Algorithm 6, `gain`): the
/// covariances `C[i][j] = 1/(N-p) Σ_k x[k-i] x[k-j]`, the coefficients `α = D⁻¹ b` with
/// `D[i][j] = C[i+1][j+1]`, `b[i] = C[i+1][0]`, and `σ² = a C aᵀ` with `a = [1, -α]`.
pub fn gain(x: &[u8], p: usize) -> f64 {
    let n = x.len();
    if n <= p + 1 {
        return 0.0;
    }
    // Centre the series: the thesis's covariances are of raw bytes; without the mean removed
    // σ² is dominated by the mean and the statistic sees level shifts only. (A deviation.)
    let mean = x.iter().map(|&v| f64::from(v)).sum::<f64>() / n as f64;
    let v: Vec<f64> = x.iter().map(|&b| f64::from(b) - mean).collect();
    let m = p + 1;
    let mut c = vec![0.0; m * m];
    for i in 0..m {
        for j in i..m {
            let mut s = 0.0;
            for k in p..n {
                s += v[k - i] * v[k - j];
            }
            s /= (n - p) as f64;
            c[i * m + j] = s;
            c[j * m + i] = s;
        }
    }
    let alpha = solve(
        (0..p)
            .map(|i| (0..p).map(|j| c[(i + 1) * m + (j + 1)]).collect())
            .collect(),
        (0..p).map(|i| c[(i + 1) * m]).collect(),
    );
    let a: Vec<f64> = std::iter::once(1.0)
        .chain(alpha.iter().map(|x| -x))
        .collect();
    let mut s2 = 0.0;
    for i in 0..m {
        for j in 0..m {
            s2 += a[i] * c[i * m + j] * a[j];
        }
    }
    // A constant stretch has no noise: floor it so its log is finite.
    n as f64 * s2.max(1e-3).ln()
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
    let mut ab = Vec::with_capacity(a.len() + b.len());
    ab.extend_from_slice(a);
    ab.extend_from_slice(b);
    gain(&ab, p) - gain(a, p) - gain(b, p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(n: usize) -> Vec<u8> {
        let words = [
            "the ",
            "network ",
            "phone ",
            "cache ",
            "flow ",
            "of ",
            "and ",
            "bytes ",
            "is ",
            "a ",
            "feedback ",
            "upstream ",
        ];
        let mut x = 12345u32;
        let mut out = Vec::new();
        while out.len() < n {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            out.extend_from_slice(words[(x >> 16) as usize % words.len()].as_bytes());
        }
        out.truncate(n);
        out
    }

    fn noise(n: usize) -> Vec<u8> {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
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
