//! The Bayesian method (Meatballs thesis §4.3.3): the prior of each predicted quantity is the aged
//! histogram of its measured values (the predictor keeps it); the evidence is the decision the
//! predictors make now (the best single strategy at their current values); the likelihood is
//! how often that decision was the one made just before a measurement that fell in each bin
//! ("when bandwidths were such that WiFi was better, how often was WiFi predicted better?").
//! The posterior of each quantity is prior × likelihood / p(evidence), bin by bin; the
//! expected weighted cost of each strategy is then taken over the joint posterior as in the
//! empirical method, visiting only bins the likelihood has seen. The method judges the
//! predictors by the decisions they lead to rather than by their error, which makes it cheap
//! (fixed bins, not samples) and, as the thesis found, prone to underestimating uncertainty.

use std::collections::HashMap;

use crate::predictor::{bin_of, bin_value, Ageing, Histogram};
use crate::problem::Problem;
use crate::Choice;

/// What a Bayesian evaluator has learnt: for each (decision, predictor), the aged histogram of
/// the measurements that followed that decision.
#[derive(Clone, Debug, Default)]
pub(crate) struct Likelihood {
    seen: HashMap<(usize, usize), Histogram>,
}

impl Likelihood {
    /// Predictor `predictor` measured `measured` while the predictors' decision was the
    /// single strategy `evidence` (an index in the evaluator's singles).
    pub(crate) fn observe(
        &mut self,
        evidence: usize,
        predictor: usize,
        measured: f64,
        ageing: &Ageing,
    ) {
        self.seen
            .entry((evidence, predictor))
            .or_default()
            .add(bin_of(measured), ageing);
    }

    fn weight(&self, evidence: usize, predictor: usize, bin: i32) -> f64 {
        self.seen
            .get(&(evidence, predictor))
            .map_or(0.0, |h| h.get(bin))
    }
}

/// The Bayesian method's decision.
pub(crate) fn choose(p: &Problem, lk: &Likelihood) -> Choice {
    let evidence = p.best_single_at_point();
    let dists: Vec<Vec<(f64, f64)>> = p
        .reads
        .iter()
        .map(|&i| {
            let pr = &p.predictors[i];
            let prior = &pr.prior.bins;
            let posterior: Vec<(f64, f64)> = prior
                .iter()
                .filter_map(|(&bin, &w)| {
                    let all: f64 = (0..p.singles.len()).map(|e| lk.weight(e, i, bin)).sum();
                    let agree = lk.weight(evidence, i, bin);
                    (all > 0.0 && agree > 0.0).then(|| (pr.clamp(bin_value(bin)), w * agree / all))
                })
                .collect();
            if !posterior.is_empty() {
                posterior
            } else if !prior.is_empty() {
                prior
                    .iter()
                    .map(|(&bin, &w)| (pr.clamp(bin_value(bin)), w))
                    .collect()
            } else {
                vec![(pr.value(), 1.0)]
            }
        })
        .collect();
    p.expect(&dists)
}
