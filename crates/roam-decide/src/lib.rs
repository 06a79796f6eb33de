//! Meatballs: decisions that account for how wrong predictions can be (Higgins' thesis, chapter 4;
//! ../shared/spec/meatballs.md).
//!
//! Mobile software predicts bandwidth, latency, how long the WiFi will last or how long a
//! computation takes, then acts as if the prediction were right. Meatballs keeps, for every
//! [`Predictor`], a record of how wrong it has been, and folds that error into the choice among
//! [strategies](Meatballs::make_strategy): ways of doing one task, each with a time, an energy
//! and a data cost that are functions of predictor values. A *redundant* strategy runs several
//! at once and keeps the first result (time: the least; energy and data: the sum). In hindsight
//! redundancy is always wrong, since the best single strategy alone would have done; under
//! uncertainty it hedges the bet. Each strategy's weighted cost is time + c_energy × energy +
//! c_data × data ([`Prices`], set by the user or by `roam-budget`'s goal-directed adaptation);
//! the least expected weighted cost wins.
//!
//! An evaluator ([`Meatballs::register_strategies`]) decides with one of three [`Method`]s:
//! empirical error distributions, Student's t error bounds, or Bayesian posteriors. It caches its
//! decision until a measurement, a bound or the prices change; it re-evaluates a strategy
//! already under way given how long it has run ([`Meatballs::reevaluate`], the "negative
//! information" of a missing response) and finds where a decision tips
//! ([`Meatballs::tipping_point`]). Everything is sans-IO: measurements and time come in as
//! arguments.
//!
//! ```
//! use roam_decide::{Meatballs, Method, Outcome, Prices};
//! let mut mb = Meatballs::new(Prices::FREE);
//! let wifi = mb.create_predictor("WiFi bandwidth (bytes/s)");
//! let cell = mb.create_predictor("cellular bandwidth (bytes/s)");
//! mb.set_prediction(wifi, 250_000.0).unwrap();
//! mb.set_prediction(cell, 100_000.0).unwrap();
//! let size = 4_000.0;
//! let over_wifi = mb.make_strategy("wifi", &[wifi], move |v| Outcome::new(0.02 + size / v[wifi], 0.1, 0.0)).unwrap();
//! let over_cell = mb.make_strategy("cellular", &[cell], move |v| Outcome::new(0.2 + size / v[cell], 1.0, size)).unwrap();
//! let both = mb.make_redundant_strategy("both", &[over_wifi, over_cell]).unwrap();
//! let ev = mb.register_strategies(&[over_wifi, over_cell, both], Method::Empirical).unwrap();
//! assert_eq!(mb.choose(ev).unwrap().strategy, over_wifi); // no error seen yet: WiFi
//! ```

pub mod cost;
pub mod error;
pub mod method;
pub mod models;
pub mod predictor;
mod problem;
pub mod strategy;

use std::time::Duration;

use roam_core::Time;

pub use cost::{ByteCount, CostLevel, Outcome, Prices, Seconds};
pub use error::DecideError;
pub use method::Method;
pub use predictor::{Ageing, BoundKind, ErrorInterval, Predictor};
pub use problem::Running;
pub use strategy::{Inputs, PredictorId, StrategyFn, StrategyId};

use method::bayesian::Likelihood;
use problem::Problem;
use strategy::{Kind, Strategy};

/// An evaluator, as [`Meatballs::register_strategies`] handed it out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EvaluatorId(usize);

/// A decision: the strategy to use and what it is expected to cost.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Choice {
    /// The strategy (single or redundant).
    pub strategy: StrategyId,
    /// Its expected time, energy and data (with a running strategy: from now on).
    pub expected: Outcome,
    /// Its expected weighted cost, in seconds.
    pub cost: f64,
}

struct Evaluator {
    method: Method,
    singles: Vec<StrategyId>,
    redundants: Vec<(StrategyId, Vec<usize>)>,
    reads: Vec<usize>,
    /// The last decision and the state it was made in (sum of the read predictors' versions,
    /// prices).
    cache: Option<(u64, Prices, Choice)>,
    likelihood: Likelihood,
}

/// Most points of a joint distribution an evaluation visits by default (see
/// [`Meatballs::set_max_joint`]).
pub const MAX_JOINT: usize = 4096;

/// Predictors, strategies and the evaluators that choose among them.
pub struct Meatballs {
    prices: Prices,
    max_joint: usize,
    ageing: Ageing,
    predictors: Vec<Predictor>,
    strategies: Vec<Strategy>,
    evaluators: Vec<Evaluator>,
}

impl Meatballs {
    /// An empty instance with these prices and the default ageing of error samples.
    pub fn new(prices: Prices) -> Meatballs {
        Meatballs::with_ageing(prices, Ageing::default())
    }

    /// An empty instance whose predictors age their samples as `ageing` says.
    pub fn with_ageing(prices: Prices, ageing: Ageing) -> Meatballs {
        Meatballs {
            prices,
            max_joint: MAX_JOINT,
            ageing,
            predictors: Vec::new(),
            strategies: Vec::new(),
            evaluators: Vec::new(),
        }
    }

    /// The importance factors now in force.
    pub fn prices(&self) -> Prices {
        self.prices
    }

    /// New importance factors (e.g. once a second from the budgets' controllers).
    pub fn set_prices(&mut self, prices: Prices) {
        self.prices = prices;
    }

    /// Bound the work of the empirical and Bayesian methods: a joint distribution of more than
    /// `points` points (the product of the predictors' sample or bin counts) is evaluated over
    /// each predictor's samples merged into equal-weight groups, as many as keep the product
    /// within `points` ([`MAX_JOINT`] by default).
    pub fn set_max_joint(&mut self, points: usize) {
        self.max_joint = points.max(1);
        for e in &mut self.evaluators {
            e.cache = None;
        }
    }

    /// A new predictor (thesis: `create_predictor`).
    pub fn create_predictor(&mut self, name: impl Into<String>) -> PredictorId {
        self.predictors.push(Predictor::new(name, self.ageing));
        PredictorId(self.predictors.len() - 1)
    }

    /// A predictor's state.
    pub fn predictor(&self, id: PredictorId) -> Result<&Predictor, DecideError> {
        self.predictors.get(id.0).ok_or(DecideError::Unknown {
            what: "predictor",
            id: id.0,
        })
    }

    fn predictor_mut(&mut self, id: PredictorId) -> Result<&mut Predictor, DecideError> {
        self.predictors.get_mut(id.0).ok_or(DecideError::Unknown {
            what: "predictor",
            id: id.0,
        })
    }

    /// The error-adjusted value of a predictor (thesis: `get_predictor_value`).
    pub fn predictor_value(&self, id: PredictorId) -> Result<f64, DecideError> {
        Ok(self.predictor(id)?.value())
    }

    /// Set a prediction without a measurement.
    pub fn set_prediction(&mut self, id: PredictorId, prediction: f64) -> Result<(), DecideError> {
        self.predictor_mut(id)?.set_prediction(prediction)
    }

    /// A measurement, and the prediction from now on (thesis: `add_measurement`). Bayesian
    /// evaluators that read the predictor first record which decision the predictors made just
    /// before it. Refused, with nothing changed, unless both are finite and non-negative.
    pub fn add_measurement(
        &mut self,
        id: PredictorId,
        measured: f64,
        new_prediction: f64,
    ) -> Result<(), DecideError> {
        // Validate before touching any evaluator's state.
        self.predictor(id)?
            .check_measurement(measured, new_prediction)?;
        for e in 0..self.evaluators.len() {
            let ev = &self.evaluators[e];
            if ev.method != Method::Bayesian || !ev.reads.contains(&id.0) {
                continue;
            }
            let evidence = self.problem(e, None).best_single_at_point();
            let ageing = self.ageing;
            self.evaluators[e]
                .likelihood
                .observe(evidence, id.0, measured, &ageing);
        }
        self.predictor_mut(id)?
            .add_measurement(measured, new_prediction)
    }

    /// Bound a predictor's values on one side (thesis: `set_predictor_bound`).
    pub fn set_predictor_bound(
        &mut self,
        id: PredictorId,
        bound: f64,
        kind: BoundKind,
    ) -> Result<(), DecideError> {
        self.predictor_mut(id)?.set_bound(bound, kind)
    }

    /// Remove a predictor's bounds (thesis: `clear_predictor_bounds`).
    pub fn clear_predictor_bounds(&mut self, id: PredictorId) -> Result<(), DecideError> {
        self.predictor_mut(id)?.clear_bounds();
        Ok(())
    }

    /// Forget a predictor's error record (a new access point: its WiFi is another network).
    pub fn reset_errors(&mut self, id: PredictorId) -> Result<(), DecideError> {
        self.predictor_mut(id)?.reset_errors();
        Ok(())
    }

    /// A single strategy (thesis: `make_strategy`): `f` gives its time, energy and data from
    /// the values of the predictors in `reads` (the only ones it may index).
    pub fn make_strategy(
        &mut self,
        name: impl Into<String>,
        reads: &[PredictorId],
        f: impl Fn(&Inputs) -> Outcome + Send + Sync + 'static,
    ) -> Result<StrategyId, DecideError> {
        for &r in reads {
            self.predictor(r)?;
        }
        let mut reads = reads.to_vec();
        reads.sort();
        reads.dedup();
        self.strategies.push(Strategy {
            name: name.into(),
            kind: Kind::Single {
                reads,
                f: Box::new(f),
            },
        });
        Ok(StrategyId(self.strategies.len() - 1))
    }

    /// A redundant strategy (thesis: `make_redundant_strategy`): the single strategies `parts`
    /// run at once, the first result kept.
    pub fn make_redundant_strategy(
        &mut self,
        name: impl Into<String>,
        parts: &[StrategyId],
    ) -> Result<StrategyId, DecideError> {
        let name = name.into();
        let mut parts = parts.to_vec();
        parts.sort();
        parts.dedup();
        for &s in &parts {
            if let Kind::Redundant { .. } = self.strategy(s)?.kind {
                return Err(DecideError::NestedRedundancy(name));
            }
        }
        if parts.len() < 2 {
            return Err(DecideError::TooFewComponents(name));
        }
        self.strategies.push(Strategy {
            name,
            kind: Kind::Redundant { parts },
        });
        Ok(StrategyId(self.strategies.len() - 1))
    }

    fn strategy(&self, id: StrategyId) -> Result<&Strategy, DecideError> {
        self.strategies.get(id.0).ok_or(DecideError::Unknown {
            what: "strategy",
            id: id.0,
        })
    }

    /// Drop every strategy and evaluator, keeping the predictors and their error records: for a
    /// caller whose set of strategies follows the environment (the networks present now). The
    /// ids handed out for strategies and evaluators are no longer valid.
    pub fn clear_strategies(&mut self) {
        self.strategies.clear();
        self.evaluators.clear();
    }

    /// A strategy's name.
    pub fn strategy_name(&self, id: StrategyId) -> Result<&str, DecideError> {
        Ok(&self.strategy(id)?.name)
    }

    /// An evaluator over `strategies` deciding by `method` (thesis: `register_strategies`).
    /// The single strategies a redundant one is built of are candidates too, listed or not.
    pub fn register_strategies(
        &mut self,
        strategies: &[StrategyId],
        method: Method,
    ) -> Result<EvaluatorId, DecideError> {
        if strategies.is_empty() {
            return Err(DecideError::NoStrategies);
        }
        let mut singles = Vec::new();
        let mut redundant_ids = Vec::new();
        for &s in strategies {
            match &self.strategy(s)?.kind {
                Kind::Single { .. } => singles.push(s),
                Kind::Redundant { parts } => {
                    singles.extend(parts.iter().copied());
                    redundant_ids.push(s);
                }
            }
        }
        singles.sort();
        singles.dedup();
        redundant_ids.sort();
        redundant_ids.dedup();
        let redundants = redundant_ids
            .into_iter()
            .map(|r| {
                let Kind::Redundant { parts } = &self.strategies[r.0].kind else {
                    unreachable!("sorted out above")
                };
                let idx = parts
                    .iter()
                    .map(|p| singles.iter().position(|s| s == p).expect("added above"))
                    .collect();
                (r, idx)
            })
            .collect();
        let mut reads: Vec<usize> = singles
            .iter()
            .flat_map(|s| match &self.strategies[s.0].kind {
                Kind::Single { reads, .. } => reads.iter().map(|r| r.0).collect::<Vec<_>>(),
                Kind::Redundant { .. } => Vec::new(),
            })
            .collect();
        reads.sort();
        reads.dedup();
        self.evaluators.push(Evaluator {
            method,
            singles,
            redundants,
            reads,
            cache: None,
            likelihood: Likelihood::default(),
        });
        Ok(EvaluatorId(self.evaluators.len() - 1))
    }

    fn evaluator(&self, id: EvaluatorId) -> Result<&Evaluator, DecideError> {
        self.evaluators.get(id.0).ok_or(DecideError::Unknown {
            what: "evaluator",
            id: id.0,
        })
    }

    fn problem(&self, e: usize, running: Option<(usize, f64)>) -> Problem<'_> {
        let ev = &self.evaluators[e];
        Problem {
            predictors: &self.predictors,
            strategies: &self.strategies,
            singles: &ev.singles,
            redundants: &ev.redundants,
            reads: &ev.reads,
            prices: self.prices,
            running,
            max_joint: self.max_joint,
        }
    }

    fn decide(&self, e: usize, running: Option<(usize, f64)>) -> Choice {
        let p = self.problem(e, running);
        let ev = &self.evaluators[e];
        match ev.method {
            Method::Empirical => method::empirical::choose(&p),
            Method::Bounds => method::bounds::choose(&p),
            Method::Bayesian => method::bayesian::choose(&p, &ev.likelihood),
        }
    }

    fn state_of(&self, e: usize) -> u64 {
        self.evaluators[e]
            .reads
            .iter()
            .fold(0u64, |a, &r| a.wrapping_add(self.predictors[r].version))
    }

    /// The evaluator's decision (thesis: `choose_strategy`), recomputed only when a predictor
    /// it reads or the prices changed since the last one.
    pub fn choose(&mut self, id: EvaluatorId) -> Result<Choice, DecideError> {
        self.evaluator(id)?;
        let state = self.state_of(id.0);
        if let Some((s, prices, c)) = self.evaluators[id.0].cache {
            if s == state && prices == self.prices {
                return Ok(c);
            }
        }
        let c = self.decide(id.0, None);
        self.evaluators[id.0].cache = Some((state, self.prices, c));
        Ok(c)
    }

    /// The quick decision without redundancy or error: the single strategy of least weighted
    /// cost at the predictors' error-adjusted values. What to start with while a slower
    /// method's decision is computed (the thesis's control of the empirical method's cost).
    pub fn choose_single(&self, id: EvaluatorId) -> Result<Choice, DecideError> {
        self.evaluator(id)?;
        let p = self.problem(id.0, None);
        let i = p.best_single_at_point();
        let mut outs = Vec::new();
        p.singles_at(&p.point_values(), &mut outs);
        Ok(Choice {
            strategy: self.evaluators[id.0].singles[i],
            expected: outs[i],
            cost: self.prices.cost(&outs[i]),
        })
    }

    /// Re-evaluate with a strategy already under way for `running.elapsed` seconds and no
    /// result (Meatballs thesis §4.3.4): only the part of the distributions that agrees with that is
    /// kept, and the choice is between letting it run alone (the running strategy's id) and
    /// adding the other parts of a redundant strategy that contains it (that strategy's id).
    pub fn reevaluate(&self, id: EvaluatorId, running: Running) -> Result<Choice, DecideError> {
        let ev = self.evaluator(id)?;
        let s = ev
            .singles
            .iter()
            .position(|&s| s == running.strategy)
            .ok_or_else(|| {
                DecideError::NotEvaluated(
                    self.strategy_name(running.strategy)
                        .unwrap_or("?")
                        .to_string(),
                )
            })?;
        let elapsed = if running.elapsed.is_finite() {
            running.elapsed.max(0.0)
        } else {
            0.0
        };
        Ok(self.decide(id.0, Some((s, elapsed))))
    }

    /// The value of `predictor`'s prediction, between `lo` and `hi`, at which the evaluator's
    /// decision changes, found by binary search to within `granularity` (Meatballs thesis §4.3.4); `None`
    /// if the decision is the same at both ends. The predictor's error record stays as it is:
    /// only the prediction moves. Decisions made meanwhile are not cached.
    pub fn tipping_point(
        &mut self,
        id: EvaluatorId,
        predictor: PredictorId,
        lo: f64,
        hi: f64,
        granularity: f64,
    ) -> Result<Option<f64>, DecideError> {
        self.evaluator(id)?;
        self.predictor(predictor)?;
        if !(lo.is_finite() && hi.is_finite() && lo >= 0.0 && lo < hi && granularity > 0.0) {
            return Err(DecideError::BadRange {
                lo,
                hi,
                granularity,
            });
        }
        let saved = self.predictors[predictor.0].prediction();
        let at = |mb: &mut Meatballs, x: f64| {
            mb.predictors[predictor.0]
                .set_prediction(x)
                .expect("finite and non-negative");
            mb.decide(id.0, None).strategy
        };
        let (mut a, mut b) = (lo, hi);
        let (da, db) = (at(self, a), at(self, b));
        let found = if da == db {
            None
        } else {
            while b - a > granularity {
                let mid = 0.5 * (a + b);
                if at(self, mid) == da {
                    a = mid;
                } else {
                    b = mid;
                }
            }
            Some(0.5 * (a + b))
        };
        let p = &mut self.predictors[predictor.0];
        match saved {
            Some(v) => p.set_prediction(v).expect("it was valid"),
            None => p.forget_prediction(),
        }
        Ok(found)
    }
}

/// When to re-evaluate a decision whose result has not come (Meatballs thesis §4.4.2: after twice the
/// expected completion time, then every 200 ms).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reevaluation {
    /// Multiple of the expected time after which the first re-evaluation comes.
    pub factor: f64,
    /// Period of the re-evaluations after it.
    pub every: Duration,
}

impl Default for Reevaluation {
    fn default() -> Reevaluation {
        Reevaluation {
            factor: 2.0,
            every: Duration::from_millis(200),
        }
    }
}

impl Reevaluation {
    /// The next re-evaluation after `now` of a strategy started at `started` and expected to
    /// take `expected`.
    pub fn next(&self, started: Time, expected: Seconds, now: Time) -> Time {
        let first_s = (expected.0 * self.factor).clamp(0.0, 86_400.0 * 365.0);
        let first = started + Duration::from_secs_f64(if first_s.is_nan() { 0.0 } else { first_s });
        if now < first {
            return first;
        }
        let every = self.every.max(Duration::from_millis(1));
        let periods = now.saturating_since(first).as_nanos() / every.as_nanos() + 1;
        first + every * u32::try_from(periods).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests;
