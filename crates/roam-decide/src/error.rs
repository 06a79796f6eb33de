//! What the decision library refuses.

use thiserror::Error;

/// A call the decision library refuses; nothing changed.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum DecideError {
    /// A measurement or prediction that is not a finite, non-negative number.
    #[error("predictor `{predictor}`: {what} {value} is not a finite number >= 0")]
    BadValue {
        /// The predictor's name.
        predictor: String,
        /// "measurement" or "prediction".
        what: &'static str,
        /// The value given.
        value: f64,
    },
    /// A bound that is not a finite number, or a lower bound above the upper one.
    #[error("predictor `{predictor}`: bound {value} is not usable ({why})")]
    BadBound {
        /// The predictor's name.
        predictor: String,
        /// The bound given.
        value: f64,
        /// Why it is refused.
        why: &'static str,
    },
    /// No strategy to choose from.
    #[error("an evaluator needs at least one strategy")]
    NoStrategies,
    /// A redundant strategy of fewer than two distinct strategies.
    #[error("redundant strategy `{0}` needs at least two distinct single strategies")]
    TooFewComponents(String),
    /// A redundant strategy among the components of another.
    #[error("redundant strategy `{0}` lists a redundant strategy; list its single strategies")]
    NestedRedundancy(String),
    /// An id this library did not hand out.
    #[error("unknown {what} id {id}")]
    Unknown {
        /// "predictor", "strategy" or "evaluator".
        what: &'static str,
        /// The id.
        id: usize,
    },
    /// A strategy that is not among the evaluator's.
    #[error("strategy `{0}` is not one of the evaluator's")]
    NotEvaluated(String),
    /// A search range that is empty or not finite.
    #[error("tipping point: range {lo}..{hi} with granularity {granularity} is not usable")]
    BadRange {
        /// Lower end.
        lo: f64,
        /// Upper end.
        hi: f64,
        /// Step.
        granularity: f64,
    },
}
