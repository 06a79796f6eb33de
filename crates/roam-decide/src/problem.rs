//! One decision as the evaluation methods see it: the evaluator's strategies (singles and the
//! redundant ones built of them), the predictors they read, the prices, and what has been
//! observed of a strategy already running (seed 000 §4.3.4). The expectation over a discrete
//! joint distribution of predictor values, which the empirical and Bayesian methods share,
//! lives here.

use crate::outcome::{Outcome, Prices};
use crate::predictor::Predictor;
use crate::strategy::{Inputs, Kind, Strategy, StrategyId};
use crate::Choice;

/// A strategy under way for `elapsed` seconds with no result yet: the decision is between
/// letting it run alone and adding the other parts of a redundant strategy that contains it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Running {
    /// The single strategy running.
    pub strategy: StrategyId,
    /// Seconds it has run.
    pub elapsed: f64,
}

/// The candidates of one decision and how to evaluate them.
pub(crate) struct Problem<'a> {
    pub(crate) predictors: &'a [Predictor],
    pub(crate) strategies: &'a [Strategy],
    /// The evaluator's single strategies.
    pub(crate) singles: &'a [StrategyId],
    /// Its redundant strategies, each with the indices in `singles` of its parts.
    pub(crate) redundants: &'a [(StrategyId, Vec<usize>)],
    /// Every predictor a single strategy reads, each once.
    pub(crate) reads: &'a [usize],
    pub(crate) prices: Prices,
    /// The running single strategy (index in `singles`) and its elapsed time.
    pub(crate) running: Option<(usize, f64)>,
}

impl Problem<'_> {
    /// The candidates: every strategy, or with a running one, it alone (index 0) and each
    /// redundant strategy containing it.
    pub(crate) fn candidates(&self) -> Vec<Candidate> {
        match self.running {
            None => (0..self.singles.len())
                .map(Candidate::Single)
                .chain((0..self.redundants.len()).map(Candidate::Redundant))
                .collect(),
            Some((s, _)) => std::iter::once(Candidate::Single(s))
                .chain(
                    self.redundants
                        .iter()
                        .enumerate()
                        .filter(|(_, r)| r.1.contains(&s))
                        .map(|(i, _)| Candidate::Redundant(i)),
                )
                .collect(),
        }
    }

    pub(crate) fn id(&self, c: Candidate) -> StrategyId {
        match c {
            Candidate::Single(i) => self.singles[i],
            Candidate::Redundant(i) => self.redundants[i].0,
        }
    }

    /// Every single strategy's outcome at `values` (indexed by predictor).
    pub(crate) fn singles_at(&self, values: &[f64], out: &mut Vec<Outcome>) {
        out.clear();
        let inputs = Inputs { values };
        for s in self.singles {
            match &self.strategies[s.0].kind {
                Kind::Single { f, .. } => out.push(f(&inputs)),
                Kind::Redundant { .. } => unreachable!("singles are single"),
            }
        }
    }

    /// Candidate `c`'s outcome given the singles' outcomes at one point; with a running
    /// strategy, its time counts from now (the elapsed part is sunk).
    pub(crate) fn outcome(&self, c: Candidate, singles: &[Outcome]) -> Outcome {
        let shift = |i: usize, o: Outcome| match self.running {
            Some((s, elapsed)) if s == i => Outcome {
                time: crate::Seconds(o.time.0 - elapsed),
                ..o
            },
            _ => o,
        };
        match c {
            Candidate::Single(i) => shift(i, singles[i]),
            Candidate::Redundant(r) => {
                Outcome::redundant(self.redundants[r].1.iter().map(|&i| shift(i, singles[i])))
            }
        }
    }

    /// Whether a point agrees with what was observed: the running strategy has not finished.
    pub(crate) fn agrees(&self, singles: &[Outcome]) -> bool {
        self.running
            .is_none_or(|(s, elapsed)| singles[s].time.0 >= elapsed)
    }

    /// The values every predictor has outside the distribution (its error-adjusted value).
    pub(crate) fn point_values(&self) -> Vec<f64> {
        self.predictors.iter().map(Predictor::value).collect()
    }

    /// The best single strategy at the predictors' current values (the quick, non-redundant
    /// decision; the Bayesian method's evidence), as an index in `singles`.
    pub(crate) fn best_single_at_point(&self) -> usize {
        let mut outs = Vec::new();
        self.singles_at(&self.point_values(), &mut outs);
        let costs: Vec<f64> = outs.iter().map(|o| self.prices.cost(o)).collect();
        argmin(&costs)
    }

    /// The candidate of least expected weighted cost over a discrete joint distribution:
    /// `dists[k]` holds the (value, weight) points of predictor `reads[k]`. Points that
    /// disagree with a running strategy are left out; if none agrees, the running strategy is
    /// taken to need as long again as it has run.
    pub(crate) fn expect(&self, dists: &[Vec<(f64, f64)>]) -> Choice {
        let cands = self.candidates();
        let mut sums = vec![Outcome::default(); cands.len()];
        let mut total = 0.0;
        let mut values = self.point_values();
        let mut outs = Vec::with_capacity(self.singles.len());
        let mut at = vec![0usize; dists.len()];
        if dists.iter().any(Vec::is_empty) {
            return self.unsupported();
        }
        loop {
            let mut w = 1.0;
            for (k, &i) in at.iter().enumerate() {
                let (v, wk) = dists[k][i];
                values[self.reads[k]] = v;
                w *= wk;
            }
            self.singles_at(&values, &mut outs);
            if w > 0.0 && self.agrees(&outs) {
                total += w;
                for (j, &c) in cands.iter().enumerate() {
                    let o = self.outcome(c, &outs);
                    sums[j].time.0 += w * o.time.0;
                    sums[j].energy.0 += w * o.energy.0;
                    sums[j].data.0 += w * o.data.0;
                }
            }
            // Next point (mixed-radix counter).
            let mut k = 0;
            loop {
                if k == at.len() {
                    break;
                }
                at[k] += 1;
                if at[k] < dists[k].len() {
                    break;
                }
                at[k] = 0;
                k += 1;
            }
            if k == at.len() {
                break;
            }
        }
        if total <= 0.0 {
            return self.unsupported();
        }
        let expected: Vec<Outcome> = sums
            .iter()
            .map(|s| Outcome::new(s.time.0 / total, s.energy.0 / total, s.data.0 / total))
            .collect();
        self.pick(&cands, &expected)
    }

    /// The candidate of least weighted cost among `expected` outcomes.
    pub(crate) fn pick(&self, cands: &[Candidate], expected: &[Outcome]) -> Choice {
        let costs: Vec<f64> = expected.iter().map(|o| self.prices.cost(o)).collect();
        let j = argmin(&costs);
        Choice {
            strategy: self.id(cands[j]),
            expected: expected[j],
            cost: costs[j],
        }
    }

    /// No point of the distribution agrees with what was observed (the running strategy has
    /// taken longer than any of them allows): assume it needs as long again as it has run,
    /// and evaluate the candidates at the predictors' values otherwise.
    fn unsupported(&self) -> Choice {
        let cands = self.candidates();
        let mut outs = Vec::new();
        self.singles_at(&self.point_values(), &mut outs);
        if let Some((s, elapsed)) = self.running {
            outs[s].time.0 = 2.0 * elapsed;
        }
        let expected: Vec<Outcome> = cands.iter().map(|&c| self.outcome(c, &outs)).collect();
        self.pick(&cands, &expected)
    }
}

/// A candidate of a decision: an index in the evaluator's singles or redundants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Candidate {
    Single(usize),
    Redundant(usize),
}

/// The index of the least value (the first of equals; NaN never wins).
pub(crate) fn argmin(v: &[f64]) -> usize {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x < v[best] || v[best].is_nan() {
            best = i;
        }
    }
    best
}
