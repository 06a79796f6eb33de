//! Models behind the thesis's predictors (Meatballs thesis §4.4.1), whose outputs become predictions
//! fed to a [`crate::Predictor`]: how long a transfer takes given bandwidth and latency, how long
//! the WiFi will stay (a Weibull distribution of association times fitted by maximum
//! likelihood, per access point once it has enough sessions, else over all of them), and a
//! computation's time as a linear function of an application parameter (an utterance's length).
//! Network bandwidth and latency themselves come from roam-net's estimates (its flip-flop
//! filter), energy from `roam-budget`'s radio models.

use std::collections::HashMap;

use crate::DecideError;

/// Seconds to move `bytes` over a path of `bandwidth` bytes per second and one-way `latency`
/// seconds: latency + bytes / bandwidth (infinite over a path of no bandwidth).
pub fn transfer_time(bytes: f64, bandwidth: f64, latency: f64) -> f64 {
    if bandwidth <= 0.0 {
        return f64::INFINITY;
    }
    latency + bytes / bandwidth
}

/// A Weibull distribution of durations: survival S(t) = exp(-(t/scale)^shape). With shape below
/// 1 the hazard falls with time: a WiFi association that has lasted is likely to last longer,
/// so a new one is the least trustworthy (the thesis's "low confidence right after
/// association").
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Weibull {
    /// Shape k.
    pub shape: f64,
    /// Scale λ, in seconds.
    pub scale: f64,
}

impl Weibull {
    /// The maximum-likelihood fit to complete durations (Newton's method on the shape's
    /// likelihood equation, Σx^k ln x / Σx^k − 1/k − mean(ln x) = 0, then the scale in closed
    /// form). `None` with fewer than two positive durations or none that differ.
    pub fn fit(durations: &[f64]) -> Option<Weibull> {
        let x: Vec<f64> = durations
            .iter()
            .copied()
            .filter(|d| d.is_finite() && *d > 0.0)
            .collect();
        if x.len() < 2 {
            return None;
        }
        let n = x.len() as f64;
        let lnx: Vec<f64> = x.iter().map(|v| v.ln()).collect();
        let mean_ln = lnx.iter().sum::<f64>() / n;
        if lnx.iter().all(|l| (l - mean_ln).abs() < 1e-12) {
            return None;
        }
        // Work with durations relative to their geometric mean: x^k stays representable.
        let z: Vec<f64> = lnx.iter().map(|l| l - mean_ln).collect();
        let g = |k: f64| {
            let (mut s0, mut s1, mut s2) = (0.0, 0.0, 0.0);
            for &zi in &z {
                let w = (k * zi).exp();
                s0 += w;
                s1 += w * zi;
                s2 += w * zi * zi;
            }
            let f = s1 / s0 - 1.0 / k;
            let df = (s2 / s0 - (s1 / s0).powi(2)) + 1.0 / (k * k);
            (f, df)
        };
        let mut k = 1.0;
        for _ in 0..100 {
            let (f, df) = g(k);
            let next = (k - f / df).clamp(k / 10.0, k * 10.0);
            if (next - k).abs() < 1e-10 * k {
                k = next;
                break;
            }
            k = next;
        }
        let s0: f64 = z.iter().map(|zi| (k * zi).exp()).sum();
        let scale = mean_ln.exp() * (s0 / n).powf(1.0 / k);
        (k.is_finite() && scale.is_finite() && k > 0.0).then_some(Weibull { shape: k, scale })
    }

    /// P(duration > t).
    pub fn survival(&self, t: f64) -> f64 {
        if t <= 0.0 {
            return 1.0;
        }
        (-(t / self.scale).powf(self.shape)).exp()
    }

    /// P(duration > elapsed + horizon | duration > elapsed): that an association that has
    /// lasted `elapsed` seconds lasts `horizon` more.
    pub fn p_stays(&self, elapsed: f64, horizon: f64) -> f64 {
        let a = (elapsed.max(0.0) / self.scale).powf(self.shape);
        let b = ((elapsed.max(0.0) + horizon.max(0.0)) / self.scale).powf(self.shape);
        (a - b).exp()
    }

    /// E[duration − elapsed | duration > elapsed]: the expected rest of an association that
    /// has lasted `elapsed` seconds (Simpson's rule over the conditional survival, out to where
    /// it falls below 1e-9).
    pub fn mean_residual(&self, elapsed: f64) -> f64 {
        let t0 = elapsed.max(0.0);
        let a = (t0 / self.scale).powf(self.shape);
        let end = self.scale * (a + 20.7).powf(1.0 / self.shape);
        let n = 400;
        let h = (end - t0) / n as f64;
        if h <= 0.0 {
            return 0.0;
        }
        let s = |u: f64| (a - (u / self.scale).powf(self.shape)).exp();
        let mut sum = s(t0) + s(end);
        for i in 1..n {
            let u = t0 + h * i as f64;
            sum += if i % 2 == 1 { 4.0 } else { 2.0 } * s(u);
        }
        sum * h / 3.0
    }
}

/// How long the device stays associated with a WiFi access point, learnt from past sessions.
///
/// Bounded: the most recent [`DwellTime::MAX_SESSIONS`] sessions overall and per access point,
/// and at most [`DwellTime::MAX_APS`] access points of their own (sessions at more count only in
/// the generic model), so a peer that reports networks coming and going cannot grow it. The fits
/// are made when a session is recorded, so asking for a model costs nothing.
#[derive(Clone, Debug)]
pub struct DwellTime {
    min_sessions: usize,
    all: Sessions,
    by_ap: HashMap<String, Sessions>,
}

/// Recent sessions and the fit to them.
#[derive(Clone, Debug, Default)]
struct Sessions {
    recent: std::collections::VecDeque<f64>,
    fit: Option<Weibull>,
}

impl Sessions {
    fn push(&mut self, seconds: f64) {
        if self.recent.len() == DwellTime::MAX_SESSIONS {
            self.recent.pop_front();
        }
        self.recent.push_back(seconds);
        self.fit = Weibull::fit(self.recent.make_contiguous());
    }
}

impl DwellTime {
    /// Sessions kept, overall and per access point (the oldest forgotten first).
    pub const MAX_SESSIONS: usize = 256;
    /// Access points with a model of their own.
    pub const MAX_APS: usize = 64;

    /// A predictor that fits an access point's own sessions once it has `min_sessions` of
    /// them (at least 2), and all sessions until then.
    pub fn new(min_sessions: usize) -> DwellTime {
        DwellTime {
            min_sessions: min_sessions.max(2),
            all: Sessions::default(),
            by_ap: HashMap::new(),
        }
    }

    /// A finished association with access point `ap` that lasted `seconds`.
    pub fn record(&mut self, ap: &str, seconds: f64) -> Result<(), DecideError> {
        if !(seconds.is_finite() && seconds >= 0.0) {
            return Err(DecideError::BadValue {
                predictor: format!("dwell time at {ap}"),
                what: "measurement",
                value: seconds,
            });
        }
        self.all.push(seconds);
        if let Some(own) = self.by_ap.get_mut(ap) {
            own.push(seconds);
        } else if self.by_ap.len() < Self::MAX_APS {
            let mut own = Sessions::default();
            own.push(seconds);
            self.by_ap.insert(ap.to_string(), own);
        }
        Ok(())
    }

    /// The distribution for access point `ap`, and whether it is the AP's own (else the
    /// generic one over every session); `None` before two sessions that differ.
    pub fn model(&self, ap: &str) -> Option<(Weibull, bool)> {
        if let Some(w) = self
            .by_ap
            .get(ap)
            .filter(|s| s.recent.len() >= self.min_sessions)
            .and_then(|s| s.fit)
        {
            return Some((w, true));
        }
        self.all.fit.map(|w| (w, false))
    }
}

/// Ordinary least squares of y on x, kept as running sums (the thesis's compute-time and
/// energy predictors, with an utterance's length as x).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LinearRegression {
    n: f64,
    sx: f64,
    sy: f64,
    sxx: f64,
    sxy: f64,
}

impl LinearRegression {
    /// One observation; refused unless both are finite.
    pub fn add(&mut self, x: f64, y: f64) -> Result<(), DecideError> {
        for (what, v) in [("parameter", x), ("measurement", y)] {
            if !v.is_finite() {
                return Err(DecideError::BadValue {
                    predictor: "linear regression".into(),
                    what,
                    value: v,
                });
            }
        }
        self.n += 1.0;
        self.sx += x;
        self.sy += y;
        self.sxx += x * x;
        self.sxy += x * y;
        Ok(())
    }

    /// The fitted y at `x`: the mean while every x was the same; `None` with no observation.
    pub fn predict(&self, x: f64) -> Option<f64> {
        if self.n == 0.0 {
            return None;
        }
        let var = self.sxx - self.sx * self.sx / self.n;
        if var.abs() < 1e-12 * self.sxx.abs().max(1.0) {
            return Some(self.sy / self.n);
        }
        let slope = (self.sxy - self.sx * self.sy / self.n) / var;
        let intercept = (self.sy - slope * self.sx) / self.n;
        Some(intercept + slope * x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Quantiles of a known Weibull (k = 0.7, λ = 40 s) fit back to it.
    #[test]
    fn the_weibull_fit_recovers_its_parameters() {
        let (k, l) = (0.7, 40.0);
        let n = 2000;
        let samples: Vec<f64> = (0..n)
            .map(|i| {
                let u = (i as f64 + 0.5) / n as f64;
                l * (-(1.0 - u).ln()).powf(1.0 / k)
            })
            .collect();
        let w = Weibull::fit(&samples).unwrap();
        assert!((w.shape - k).abs() < 0.02, "{w:?}");
        assert!((w.scale - l).abs() / l < 0.03, "{w:?}");
        assert!(Weibull::fit(&[5.0]).is_none());
        assert!(Weibull::fit(&[5.0, 5.0, 5.0]).is_none());
    }

    /// Exponential (k = 1) is memoryless; with k < 1 an association that has lasted is
    /// expected to last longer.
    #[test]
    fn residual_life_grows_with_age_when_the_hazard_falls() {
        let exp = Weibull {
            shape: 1.0,
            scale: 30.0,
        };
        assert!((exp.mean_residual(0.0) - 30.0).abs() < 0.05);
        assert!((exp.mean_residual(50.0) - 30.0).abs() < 0.05);
        let w = Weibull {
            shape: 0.6,
            scale: 30.0,
        };
        assert!(w.mean_residual(60.0) > w.mean_residual(5.0));
        assert!(w.p_stays(60.0, 10.0) > w.p_stays(0.0, 10.0));
        assert!((w.p_stays(0.0, 10.0) - w.survival(10.0)).abs() < 1e-12);
    }

    #[test]
    fn an_access_point_gets_its_own_model_once_it_has_enough_sessions() {
        let mut d = DwellTime::new(3);
        for s in [10.0, 20.0, 40.0, 80.0] {
            d.record("campus", s).unwrap();
        }
        d.record("cafe", 300.0).unwrap();
        d.record("cafe", 500.0).unwrap();
        assert!(!d.model("cafe").unwrap().1, "two sessions: generic");
        d.record("cafe", 400.0).unwrap();
        let (own, is_own) = d.model("cafe").unwrap();
        assert!(is_own && own.scale > 200.0, "{own:?}");
        assert!(d.record("cafe", f64::NAN).is_err());
    }

    #[test]
    fn the_record_is_bounded() {
        let mut d = DwellTime::new(2);
        for i in 0..1000 {
            d.record(&format!("ap{i}"), 10.0 + (i % 7) as f64).unwrap();
        }
        assert_eq!(d.by_ap.len(), DwellTime::MAX_APS);
        assert_eq!(d.all.recent.len(), DwellTime::MAX_SESSIONS);
        // An access point past the cap gets the generic model.
        assert!(!d.model("ap999").unwrap().1);
        for _ in 0..1000 {
            d.record("ap0", 5.0).unwrap();
            d.record("ap0", 50.0).unwrap();
        }
        assert_eq!(d.by_ap["ap0"].recent.len(), DwellTime::MAX_SESSIONS);
        assert!(d.model("ap0").unwrap().1);
    }

    #[test]
    fn regression_fits_a_line() {
        let mut r = LinearRegression::default();
        assert_eq!(r.predict(1.0), None);
        for x in [1.0, 2.0, 4.0, 8.0] {
            r.add(x, 0.5 + 1.5 * x).unwrap();
        }
        assert!((r.predict(6.0).unwrap() - 9.5).abs() < 1e-9);
        assert!(r.add(f64::INFINITY, 1.0).is_err());
        assert!(r.add(1.0, f64::NAN).is_err());
    }
}
