//! Predictors and their error (Meatballs thesis §4.3.1-4.3.3).
//!
//! A [`Predictor`] holds the latest prediction of a quantity (a bandwidth, a latency, a
//! computation's time) and what the past says of its error: each measurement is divided by the
//! prediction made before it, giving a *relative error* sample (above 1: the prediction was too
//! low). Samples are aged as an exponentially weighted moving average: each new one has weight 1
//! and every older one's weight is multiplied by [`Ageing::decay`]; once a sample's weight falls
//! below [`Ageing::negligible`] it is dropped, which also bounds how many are kept. The same
//! samples give the Student's t prediction interval the bounds method uses (cached here, since
//! they change only with a measurement), and the measured values themselves, binned, are the
//! Bayesian method's prior.

use std::collections::{BTreeMap, VecDeque};

use roam_core::student::t_critical;

use crate::error::DecideError;

/// How error samples age (EWMA) and when an old one no longer counts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ageing {
    /// Factor applied to every older sample's weight when a new one arrives.
    pub decay: f64,
    /// A sample whose weight (the newest has 1) falls below this is dropped.
    pub negligible: f64,
}

impl Default for Ageing {
    /// Decay 0.95 and a negligible weight of 0.01: about the last 90 samples count, the last 14
    /// for half of the total weight. The thesis ages samples but gives no constant; this keeps
    /// a few minutes of once-a-second measurements, long enough to see a network's spread and
    /// short enough to follow it as it changes.
    fn default() -> Ageing {
        Ageing {
            decay: 0.95,
            negligible: 0.01,
        }
    }
}

impl Ageing {
    /// The most samples these constants keep.
    pub fn capacity(&self) -> usize {
        if self.decay <= 0.0 || self.negligible >= 1.0 {
            return 1;
        }
        if self.decay >= 1.0 || self.negligible <= 0.0 {
            return usize::MAX;
        }
        1 + (self.negligible.ln() / self.decay.ln()).floor() as usize
    }
}

/// Confidence of the bounds method's prediction interval (alpha = 0.05, Meatballs thesis §4.3.2).
pub const PREDICTION_LEVEL: f64 = 0.95;

/// Which end of a predictor's range an application bound sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BoundKind {
    /// The quantity is never below this.
    Lower,
    /// The quantity is never above this.
    Upper,
}

/// Bins per octave of the Bayesian method's histograms of measured values: a bin spans a
/// factor of 2^(1/4), about 19%.
pub const BINS_PER_OCTAVE: f64 = 4.0;

/// The histogram bin of a measured value (`i32::MIN` holds zero).
pub(crate) fn bin_of(v: f64) -> i32 {
    if v <= 0.0 {
        i32::MIN
    } else {
        (v.log2() * BINS_PER_OCTAVE).floor() as i32
    }
}

/// The value a histogram bin stands for: its geometric centre.
pub(crate) fn bin_value(bin: i32) -> f64 {
    if bin == i32::MIN {
        0.0
    } else {
        ((bin as f64 + 0.5) / BINS_PER_OCTAVE).exp2()
    }
}

/// Aged weights over histogram bins: each new observation multiplies every weight by the decay,
/// adds 1 to its bin and drops the bins that have become negligible.
#[derive(Clone, Debug, Default)]
pub(crate) struct Histogram {
    pub(crate) bins: BTreeMap<i32, f64>,
}

impl Histogram {
    pub(crate) fn add(&mut self, bin: i32, ageing: &Ageing) {
        for w in self.bins.values_mut() {
            *w *= ageing.decay;
        }
        *self.bins.entry(bin).or_insert(0.0) += 1.0;
        self.bins.retain(|_, w| *w >= ageing.negligible);
    }

    pub(crate) fn get(&self, bin: i32) -> f64 {
        self.bins.get(&bin).copied().unwrap_or(0.0)
    }
}

/// The prediction interval of a predictor's relative error, and its weighted mean.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ErrorInterval {
    /// Weighted mean of the relative error samples.
    pub mean: f64,
    /// Lower end (at least 0).
    pub lower: f64,
    /// Upper end.
    pub upper: f64,
}

/// One predicted quantity with the record of its error.
#[derive(Clone, Debug)]
pub struct Predictor {
    name: String,
    ageing: Ageing,
    prediction: Option<f64>,
    /// Relative error samples (measured / predicted) and their weights, oldest first.
    errors: VecDeque<(f64, f64)>,
    interval: Option<ErrorInterval>,
    lower: Option<f64>,
    upper: Option<f64>,
    /// Measured values, binned and aged (the Bayesian prior).
    pub(crate) prior: Histogram,
    /// Bumped by every change that can change a decision.
    pub(crate) version: u64,
}

impl Predictor {
    /// A predictor named `name` (for errors and reports) with no prediction yet.
    pub fn new(name: impl Into<String>, ageing: Ageing) -> Predictor {
        Predictor {
            name: name.into(),
            ageing,
            prediction: None,
            errors: VecDeque::new(),
            interval: None,
            lower: None,
            upper: None,
            prior: Histogram::default(),
            version: 0,
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn check(&self, what: &'static str, value: f64) -> Result<(), DecideError> {
        if value.is_finite() && value >= 0.0 {
            Ok(())
        } else {
            Err(DecideError::BadValue {
                predictor: self.name.clone(),
                what,
                value,
            })
        }
    }

    /// Set the prediction without a measurement (the first one, or a new estimate from a
    /// filter that did not come with a measurement of its own).
    pub fn set_prediction(&mut self, prediction: f64) -> Result<(), DecideError> {
        self.check("prediction", prediction)?;
        self.prediction = Some(prediction);
        self.version += 1;
        Ok(())
    }

    /// Refuse a measurement or prediction that is not a finite number >= 0, naming the
    /// predictor (what [`Predictor::add_measurement`] checks first).
    pub fn check_measurement(&self, measured: f64, new_prediction: f64) -> Result<(), DecideError> {
        self.check("measurement", measured)?;
        self.check("prediction", new_prediction)
    }

    /// A measurement of the quantity, and the prediction from now on (thesis:
    /// `add_measurement(p, measured, new_prediction)`). The measurement divided by the
    /// prediction made before it is a new error sample (none when there was no prediction, or
    /// it was 0). A value that is not finite and non-negative is refused and changes nothing.
    pub fn add_measurement(
        &mut self,
        measured: f64,
        new_prediction: f64,
    ) -> Result<(), DecideError> {
        self.check_measurement(measured, new_prediction)?;
        if let Some(p) = self.prediction.filter(|&p| p > 0.0) {
            for s in &mut self.errors {
                s.1 *= self.ageing.decay;
            }
            self.errors.push_back((measured / p, 1.0));
            while self
                .errors
                .front()
                .is_some_and(|s| s.1 < self.ageing.negligible)
            {
                self.errors.pop_front();
            }
            self.interval = interval(&self.errors);
        }
        self.prior.add(bin_of(measured), &self.ageing);
        self.prediction = Some(new_prediction);
        self.version += 1;
        Ok(())
    }

    /// Drop the prediction (back to none), as before the first one.
    pub(crate) fn forget_prediction(&mut self) {
        self.prediction = None;
        self.version += 1;
    }

    /// Forget the error samples and the prior (thesis: the WiFi's error distributions restart
    /// with each new access point); the prediction stays.
    pub fn reset_errors(&mut self) {
        self.errors.clear();
        self.interval = None;
        self.prior = Histogram::default();
        self.version += 1;
    }

    /// Bound the quantity on one side (thesis: `set_predictor_bound`): every value a decision
    /// uses is clamped to it.
    pub fn set_bound(&mut self, bound: f64, kind: BoundKind) -> Result<(), DecideError> {
        let refuse = |why| DecideError::BadBound {
            predictor: self.name.clone(),
            value: bound,
            why,
        };
        if !bound.is_finite() {
            return Err(refuse("not finite"));
        }
        match kind {
            BoundKind::Lower if self.upper.is_some_and(|u| bound > u) => {
                return Err(refuse("above the upper bound"))
            }
            BoundKind::Upper if self.lower.is_some_and(|l| bound < l) => {
                return Err(refuse("below the lower bound"))
            }
            BoundKind::Lower => self.lower = Some(bound),
            BoundKind::Upper => self.upper = Some(bound),
        }
        self.version += 1;
        Ok(())
    }

    /// Remove both bounds (thesis: `clear_predictor_bounds`).
    pub fn clear_bounds(&mut self) {
        self.lower = None;
        self.upper = None;
        self.version += 1;
    }

    /// `v` within the predictor's bounds.
    pub fn clamp(&self, v: f64) -> f64 {
        let v = self.lower.map_or(v, |l| v.max(l));
        self.upper.map_or(v, |u| v.min(u))
    }

    /// The raw prediction, if any.
    pub fn prediction(&self) -> Option<f64> {
        self.prediction
    }

    /// The error-adjusted value (thesis: `get_predictor_value`): the prediction times the
    /// weighted mean relative error, within the bounds; the bare prediction while there are
    /// no error samples; 0 with no prediction.
    pub fn value(&self) -> f64 {
        let p = self.prediction.unwrap_or(0.0);
        self.clamp(p * self.interval.map_or(1.0, |i| i.mean))
    }

    /// The relative error samples and their weights, oldest first.
    pub fn errors(&self) -> impl ExactSizeIterator<Item = (f64, f64)> + '_ {
        self.errors.iter().copied()
    }

    /// The prediction interval of the relative error ([`PREDICTION_LEVEL`]), once there are
    /// two samples; `None` before.
    pub fn interval(&self) -> Option<ErrorInterval> {
        self.interval
    }
}

/// The weighted mean of the samples and the Student's t prediction interval around it:
/// mean ± t(n-1) · s · sqrt(1 + 1/n), where s is the weighted standard deviation and n the
/// effective number of samples (Kish: (Σw)² / Σw²), the lower end at least 0. With one sample
/// the interval is that sample alone.
fn interval(samples: &VecDeque<(f64, f64)>) -> Option<ErrorInterval> {
    let sw: f64 = samples.iter().map(|s| s.1).sum();
    if samples.is_empty() || sw <= 0.0 {
        return None;
    }
    let mean = samples.iter().map(|s| s.0 * s.1).sum::<f64>() / sw;
    if samples.len() < 2 {
        return Some(ErrorInterval {
            mean,
            lower: mean,
            upper: mean,
        });
    }
    let sw2: f64 = samples.iter().map(|s| s.1 * s.1).sum();
    let n = sw * sw / sw2;
    let var = samples
        .iter()
        .map(|s| s.1 * (s.0 - mean).powi(2))
        .sum::<f64>()
        / sw
        * n
        / (n - 1.0).max(1e-9);
    let df = (n - 1.0).round().max(1.0) as usize;
    let half = t_critical(PREDICTION_LEVEL, df) * var.sqrt() * (1.0 + 1.0 / n).sqrt();
    Some(ErrorInterval {
        mean,
        lower: (mean - half).max(0.0),
        upper: mean + half,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_measurements_over_the_prediction_before_them() {
        let mut p = Predictor::new("bw", Ageing::default());
        p.add_measurement(100.0, 100.0).unwrap(); // no prediction yet: no sample
        assert_eq!(p.errors().len(), 0);
        p.add_measurement(50.0, 80.0).unwrap();
        p.add_measurement(120.0, 80.0).unwrap();
        let e: Vec<f64> = p.errors().map(|e| e.0).collect();
        assert_eq!(e, vec![0.5, 1.5]);
        assert_eq!(p.prediction(), Some(80.0));
    }

    #[test]
    fn bad_values_are_refused_and_change_nothing() {
        let mut p = Predictor::new("latency", Ageing::default());
        p.add_measurement(1.0, 2.0).unwrap();
        let before = (p.prediction(), p.errors().len(), p.version);
        for bad in [f64::NAN, -1.0, f64::INFINITY, f64::NEG_INFINITY] {
            let e = p.add_measurement(bad, 1.0).unwrap_err();
            assert!(e.to_string().contains("latency"), "{e}");
            assert!(p.add_measurement(1.0, bad).is_err());
            assert!(p.set_prediction(bad).is_err());
        }
        assert_eq!((p.prediction(), p.errors().len(), p.version), before);
        assert!(p.set_bound(f64::NAN, BoundKind::Upper).is_err());
        p.set_bound(5.0, BoundKind::Upper).unwrap();
        assert!(p.set_bound(6.0, BoundKind::Lower).is_err());
    }

    #[test]
    fn old_samples_age_out() {
        let ageing = Ageing {
            decay: 0.5,
            negligible: 0.1,
        };
        assert_eq!(ageing.capacity(), 4);
        let mut p = Predictor::new("x", ageing);
        p.set_prediction(1.0).unwrap();
        for _ in 0..10 {
            p.add_measurement(1.0, 1.0).unwrap();
        }
        // Weights 1, 0.5, 0.25, 0.125 remain; 0.0625 is negligible.
        assert_eq!(p.errors().len(), 4);
        assert_eq!(Ageing::default().capacity(), 90);
    }

    #[test]
    fn the_prediction_interval_widens_with_the_spread() {
        let mut tight = Predictor::new("tight", Ageing::default());
        let mut loose = Predictor::new("loose", Ageing::default());
        tight.set_prediction(10.0).unwrap();
        loose.set_prediction(10.0).unwrap();
        for i in 0..20 {
            let wobble = if i % 2 == 0 { 1.0 } else { -1.0 };
            tight.add_measurement(10.0 + 0.1 * wobble, 10.0).unwrap();
            loose.add_measurement(10.0 + 5.0 * wobble, 10.0).unwrap();
        }
        let (t, l) = (tight.interval().unwrap(), loose.interval().unwrap());
        assert!((t.mean - 1.0).abs() < 0.01 && (l.mean - 1.0).abs() < 0.05);
        assert!(t.upper - t.lower < 0.1, "{t:?}");
        assert!(l.upper - l.lower > 1.5, "{l:?}");
        assert!(l.lower >= 0.0);
    }

    #[test]
    fn the_value_is_error_adjusted_and_bounded() {
        let mut p = Predictor::new("bw", Ageing::default());
        p.set_prediction(100.0).unwrap();
        p.add_measurement(50.0, 100.0).unwrap();
        p.add_measurement(50.0, 100.0).unwrap();
        assert!((p.value() - 50.0).abs() < 1e-9);
        p.set_bound(60.0, BoundKind::Lower).unwrap();
        assert_eq!(p.value(), 60.0);
    }

    #[test]
    fn bins_cover_values_within_a_fifth() {
        for v in [0.001, 0.3, 1.0, 7.0, 1e6] {
            let c = bin_value(bin_of(v));
            assert!(c / v < 1.2 && v / c < 1.2, "{v} -> {c}");
        }
        assert_eq!(bin_value(bin_of(0.0)), 0.0);
    }
}
