//! One decision as the evaluation methods see it: the evaluator's strategies (singles and the
//! redundant ones built of them), the predictors they read, the prices, and what has been
//! observed of a strategy already running (Meatballs thesis §4.3.4). The expectation over a discrete
//! joint distribution of predictor values, which the empirical and Bayesian methods share,
//! lives here.

use crate::cost::{Outcome, Prices};
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
    /// Most points of a joint distribution visited ([`crate::Meatballs::set_max_joint`]).
    pub(crate) max_joint: usize,
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

    /// Single strategy `i`'s outcome at `values` (indexed by predictor).
    pub(crate) fn single_at(&self, i: usize, values: &[f64]) -> Outcome {
        match &self.strategies[self.singles[i].0].kind {
            Kind::Single { f, .. } => f(&Inputs { values }),
            Kind::Redundant { .. } => unreachable!("singles are single"),
        }
    }

    /// The single strategies (indices in `singles`) candidate `c` runs.
    pub(crate) fn parts(&self, c: Candidate) -> Vec<usize> {
        match c {
            Candidate::Single(i) => vec![i],
            Candidate::Redundant(r) => self.redundants[r].1.clone(),
        }
    }

    /// The outcome of running `parts` at once given their outcomes `outs` (in the same
    /// order); with a running strategy among them, its time counts from now (the elapsed part
    /// is sunk).
    fn combine(&self, parts: &[usize], outs: &[Outcome]) -> Outcome {
        Outcome::redundant(parts.iter().zip(outs).map(|(&i, &o)| match self.running {
            Some((s, elapsed)) if s == i => Outcome {
                time: crate::Seconds(o.time.0 - elapsed),
                ..o
            },
            _ => o,
        }))
    }

    /// Whether outcomes `outs` of `parts` agree with what was observed: the running strategy,
    /// if among them, has not finished.
    fn agrees(&self, parts: &[usize], outs: &[Outcome]) -> bool {
        match self.running {
            Some((s, elapsed)) => parts
                .iter()
                .zip(outs)
                .all(|(&i, o)| i != s || o.time.0 >= elapsed),
            None => true,
        }
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
    /// `dists[k]` holds the (value, weight) points of predictor `reads[k]`, the predictors
    /// independent of each other. Points that disagree with a running strategy are left out;
    /// if none agrees, the running strategy is taken to need as long again as it has run.
    ///
    /// A candidate's strategies fall into groups that share no predictor (the two networks of
    /// a redundant send). Each group's joint distribution is enumerated on its own (coarsened
    /// past `max_joint` points, [`coarsen`]); energy and data add up, so their expectations
    /// do; the expected least time of independent groups is the integral of the product of
    /// their survival functions, E[min T] = ∫ Π P(T_g > t) dt, taken exactly over the
    /// merged, sorted points. The result equals enumerating the whole joint distribution, in
    /// O(N log N) for N points in all instead of the product of the groups' sizes.
    pub(crate) fn expect(&self, dists: &[Vec<(f64, f64)>]) -> Choice {
        let cands = self.candidates();
        let point = self.point_values();
        let expected: Vec<Outcome> = cands
            .iter()
            .map(|&c| self.expect_one(c, dists, &point))
            .collect();
        self.pick(&cands, &expected)
    }

    /// The positions in `reads` of the predictors single strategy `i` reads.
    fn read_positions(&self, i: usize) -> Vec<usize> {
        match &self.strategies[self.singles[i].0].kind {
            Kind::Single { reads, .. } => reads
                .iter()
                .filter_map(|r| self.reads.iter().position(|&x| x == r.0))
                .collect(),
            Kind::Redundant { .. } => Vec::new(),
        }
    }

    fn expect_one(&self, c: Candidate, dists: &[Vec<(f64, f64)>], point: &[f64]) -> Outcome {
        let parts = self.parts(c);
        // Groups of parts that share predictors, with the predictors (positions) each reads.
        let mut groups: Vec<(Vec<usize>, Vec<usize>)> = Vec::new();
        for &i in &parts {
            let ks = self.read_positions(i);
            let (mut members, mut reads) = (vec![i], ks.clone());
            groups.retain(|(m, r)| {
                if r.iter().any(|k| ks.contains(k)) {
                    members.extend(m);
                    reads.extend(r);
                    false
                } else {
                    true
                }
            });
            reads.sort_unstable();
            reads.dedup();
            groups.push((members, reads));
        }
        let mut lists = Vec::with_capacity(groups.len());
        for (members, ks) in &groups {
            let list = self.group_outcomes(members, ks, dists, point);
            if list.is_empty() {
                return self.unsupported(&parts, point);
            }
            lists.push(list);
        }
        let mut energy = 0.0;
        let mut data = 0.0;
        for l in &lists {
            for &(o, w) in l {
                energy += w * o.energy.0;
                data += w * o.data.0;
            }
        }
        Outcome::new(expected_min_time(&lists), energy, data)
    }

    /// The outcomes of strategies `members` (run at once) over the joint distribution of the
    /// predictors at positions `ks`, with their weights normalised; the points that disagree
    /// with a running strategy left out (empty if none agrees).
    fn group_outcomes(
        &self,
        members: &[usize],
        ks: &[usize],
        dists: &[Vec<(f64, f64)>],
        point: &[f64],
    ) -> Vec<(Outcome, f64)> {
        let mut sub: Vec<Vec<(f64, f64)>> = ks.iter().map(|&k| dists[k].clone()).collect();
        let size = sub
            .iter()
            .fold(1usize, |a, d| a.saturating_mul(d.len().max(1)));
        if size > self.max_joint.max(1) {
            let per = (self.max_joint.max(1) as f64)
                .powf(1.0 / sub.len() as f64)
                .floor()
                .max(1.0) as usize;
            sub = sub.iter().map(|d| coarsen(d, per)).collect();
        }
        if sub.iter().any(|d| d.is_empty()) {
            return Vec::new();
        }
        let mut values = point.to_vec();
        let mut outs = vec![Outcome::default(); members.len()];
        let mut list = Vec::new();
        let mut total = 0.0;
        let mut at = vec![0usize; sub.len()];
        loop {
            let mut w = 1.0;
            for (j, &i) in at.iter().enumerate() {
                let (v, wj) = sub[j][i];
                values[self.reads[ks[j]]] = v;
                w *= wj;
            }
            for (o, &i) in outs.iter_mut().zip(members) {
                *o = self.single_at(i, &values);
            }
            if w > 0.0 && self.agrees(members, &outs) {
                total += w;
                list.push((self.combine(members, &outs), w));
            }
            // Next point (mixed-radix counter).
            let mut j = 0;
            while j < at.len() {
                at[j] += 1;
                if at[j] < sub[j].len() {
                    break;
                }
                at[j] = 0;
                j += 1;
            }
            if j == at.len() {
                break;
            }
        }
        for e in &mut list {
            e.1 /= total;
        }
        list
    }

    /// No point agrees with what was observed (the running strategy has taken longer than any
    /// of them allows): assume it needs as long again as it has run, at the predictors' values
    /// otherwise.
    fn unsupported(&self, parts: &[usize], point: &[f64]) -> Outcome {
        let outs: Vec<Outcome> = parts
            .iter()
            .map(|&i| {
                let mut o = self.single_at(i, point);
                if let Some((s, elapsed)) = self.running {
                    if s == i {
                        o.time.0 = 2.0 * elapsed;
                    }
                }
                o
            })
            .collect();
        self.combine(parts, &outs)
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
}

/// `d` merged into at most `groups` points: the points in order of value are cut at the
/// `groups - 1` widest gaps between neighbours (in the logarithm of the value, as the errors
/// are ratios), and each run becomes its weighted mean value with its total weight. Outliers,
/// the samples that make redundancy pay, stay apart; samples close to each other merge. The
/// joint distribution's size is the product of the predictors' sample counts (500 samples of
/// 4 predictors would be 6e10 points); the thesis measured hundreds of milliseconds per
/// decision on a phone and kept the work off the critical path, roam also bounds it.
pub(crate) fn coarsen(d: &[(f64, f64)], groups: usize) -> Vec<(f64, f64)> {
    if d.len() <= groups {
        return d.to_vec();
    }
    let mut sorted = d.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let log = |v: f64| v.max(1e-300).ln();
    let mut gaps: Vec<(f64, usize)> = sorted
        .windows(2)
        .enumerate()
        .map(|(i, w)| (log(w[1].0) - log(w[0].0), i + 1))
        .collect();
    gaps.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut cuts: Vec<usize> = gaps.iter().take(groups.max(1) - 1).map(|g| g.1).collect();
    cuts.sort_unstable();
    cuts.push(sorted.len());
    let mut out = Vec::with_capacity(cuts.len());
    let mut start = 0;
    for end in cuts {
        let run = &sorted[start..end];
        let w: f64 = run.iter().map(|p| p.1).sum();
        if w > 0.0 {
            out.push((run.iter().map(|p| p.0 * p.1).sum::<f64>() / w, w));
        }
        start = end;
    }
    out
}

/// E[min over groups of T_g] for independent groups, each a list of (outcome, probability):
/// ∫ Π_g P(T_g > t) dt over t >= 0, exactly, by walking the merged points in order of time.
/// Infinite if every group keeps some probability of never finishing.
pub(crate) fn expected_min_time(lists: &[Vec<(Outcome, f64)>]) -> f64 {
    let mut events: Vec<(f64, usize, f64)> = lists
        .iter()
        .enumerate()
        .flat_map(|(g, l)| l.iter().map(move |&(o, p)| (o.time.0.max(0.0), g, p)))
        .collect();
    events.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut survival = vec![1.0_f64; lists.len()];
    let (mut acc, mut prev) = (0.0, 0.0);
    for (t, g, p) in events {
        let alive: f64 = survival.iter().product();
        if alive <= 0.0 {
            break;
        }
        if t.is_infinite() {
            return f64::INFINITY;
        }
        acc += (t - prev) * alive;
        prev = t;
        // Rounding leaves a group that has finished all its points a hair above zero.
        survival[g] -= p;
        if survival[g] < 1e-12 {
            survival[g] = 0.0;
        }
    }
    acc
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
