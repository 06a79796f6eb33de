//! Strategies: ways of accomplishing one task (send over WiFi, over cellular; recognise speech
//! on the phone, on a server), each described by its time, energy and data as functions of
//! predictor values; and redundant strategies, several run at once with the first result kept
//! (Meatballs thesis §4.3).

use std::ops::Index;

use crate::cost::Outcome;

/// A predictor, as a [`crate::Meatballs`] handed it out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PredictorId(pub(crate) usize);

/// A strategy, as a [`crate::Meatballs`] handed it out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StrategyId(pub(crate) usize);

/// The predictor values one evaluation of a strategy sees, indexed by [`PredictorId`]: the
/// current values, or the values at one point of an error distribution.
pub struct Inputs<'a> {
    pub(crate) values: &'a [f64],
}

impl Index<PredictorId> for Inputs<'_> {
    type Output = f64;

    fn index(&self, p: PredictorId) -> &f64 {
        &self.values[p.0]
    }
}

/// A strategy's time, energy and data at given predictor values (thesis: `time_fn`,
/// `energy_fn`, `data_fn` in one).
pub type StrategyFn = Box<dyn Fn(&Inputs) -> Outcome + Send + Sync>;

pub(crate) enum Kind {
    /// One way of doing the task; it reads these predictors.
    Single {
        reads: Vec<PredictorId>,
        f: StrategyFn,
    },
    /// Several single strategies at once.
    Redundant { parts: Vec<StrategyId> },
}

pub(crate) struct Strategy {
    pub(crate) name: String,
    pub(crate) kind: Kind,
}
