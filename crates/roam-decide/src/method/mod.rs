//! The three ways of folding predictor error into a decision (Meatballs thesis §4.3.1-4.3.3).

pub(crate) mod bayesian;
pub(crate) mod bounds;
pub(crate) mod empirical;

/// How an evaluator accounts for predictor error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Method {
    /// Expectations over the joint empirical error distributions ("brute force").
    Empirical,
    /// Student's t prediction intervals, and redundancy when its greatest benefit exceeds its
    /// least cost.
    Bounds,
    /// Posterior distributions of the quantities given the predictors' decision.
    Bayesian,
}

impl Method {
    /// Every method.
    pub const ALL: [Method; 3] = [Method::Empirical, Method::Bounds, Method::Bayesian];

    /// Its name in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Method::Empirical => "empirical",
            Method::Bounds => "bounds",
            Method::Bayesian => "bayesian",
        }
    }
}
