//! The probabilistic error bounds method (Meatballs thesis §4.3.2): each predictor's relative error
//! samples give a Student's t prediction interval (alpha = 0.05, cached by the predictor), so
//! each quantity lies between `prediction × lower` and `prediction × upper`. Those bounds
//! propagate to each single strategy's time, energy and data (evaluated at every corner of the
//! box of the predictors it reads, so that the least time is found wherever it lies: at the
//! upper bandwidth and the lower latency for a transfer). If no other single strategy's time
//! interval overlaps the best one's (the best by weighted cost at the error-adjusted values),
//! redundancy cannot help at this confidence and the best single is chosen. Otherwise the
//! benefit of a redundant strategy containing it is the best one's greatest time minus the
//! redundant strategy's least, its cost the least energy and data of the parts it adds; the
//! redundant strategy of greatest benefit minus cost is chosen if that is positive. Taking the
//! upper bound of benefit and the lower bound of cost biases the method towards redundancy, as
//! the thesis found.

use crate::cost::{Outcome, Prices};
use crate::problem::{argmin, Candidate, Problem};
use crate::strategy::Kind;
use crate::Choice;

/// Most predictors one strategy may read under this method (2^n corners are evaluated).
pub const MAX_CORNERS_PREDICTORS: usize = 12;

/// One single strategy's outcome at the error-adjusted values and its bounds.
#[derive(Clone, Copy, Debug)]
struct Bounded {
    central: Outcome,
    min: Outcome,
    max: Outcome,
}

fn bounded(p: &Problem, single: usize) -> Bounded {
    let id = p.singles[single];
    let Kind::Single { reads, .. } = &p.strategies[id.0].kind else {
        unreachable!("singles are single")
    };
    let mut values = p.point_values();
    let mut outs = Vec::new();
    p.singles_at(&values, &mut outs);
    let central = outs[single];
    let ranges: Vec<(usize, f64, f64)> = reads
        .iter()
        .take(MAX_CORNERS_PREDICTORS)
        .map(|r| {
            let pr = &p.predictors[r.0];
            let pred = pr.prediction().unwrap_or(0.0);
            match pr.interval() {
                Some(i) => (r.0, pr.clamp(pred * i.lower), pr.clamp(pred * i.upper)),
                None => (r.0, pr.value(), pr.value()),
            }
        })
        .collect();
    let mut min = Outcome::new(f64::INFINITY, f64::INFINITY, f64::INFINITY);
    let mut max = Outcome::new(f64::NEG_INFINITY, f64::NEG_INFINITY, f64::NEG_INFINITY);
    for corner in 0u32..(1 << ranges.len()) {
        for (k, &(i, lo, hi)) in ranges.iter().enumerate() {
            values[i] = if corner & (1 << k) == 0 { lo } else { hi };
        }
        p.singles_at(&values, &mut outs);
        let o = outs[single];
        min.time.0 = min.time.0.min(o.time.0);
        min.energy.0 = min.energy.0.min(o.energy.0);
        min.data.0 = min.data.0.min(o.data.0);
        max.time.0 = max.time.0.max(o.time.0);
        max.energy.0 = max.energy.0.max(o.energy.0);
        max.data.0 = max.data.0.max(o.data.0);
    }
    Bounded { central, min, max }
}

fn added_cost(prices: &Prices, b: &Bounded) -> f64 {
    prices.resource_cost(&b.min)
}

/// The bounds method's decision.
pub(crate) fn choose(p: &Problem) -> Choice {
    let mut b: Vec<Bounded> = (0..p.singles.len()).map(|i| bounded(p, i)).collect();
    let best = match p.running {
        Some((s, elapsed)) => {
            // What is left of the running strategy: its bounds less the time it has run; past
            // its upper bound, assume as long again as it has run.
            let r = &mut b[s];
            let upper = if r.max.time.0 >= elapsed {
                r.max.time.0 - elapsed
            } else {
                elapsed
            };
            r.central.time.0 = (r.central.time.0 - elapsed).max(0.0);
            r.min.time.0 = (r.min.time.0 - elapsed).max(0.0);
            r.max.time.0 = upper;
            s
        }
        None => {
            let costs: Vec<f64> = b.iter().map(|x| p.prices.cost(&x.central)).collect();
            let best = argmin(&costs);
            let overlaps = (0..b.len()).any(|j| {
                j != best
                    && b[j].min.time.0 <= b[best].max.time.0
                    && b[best].min.time.0 <= b[j].max.time.0
            });
            if !overlaps {
                return single(p, &b, best);
            }
            best
        }
    };
    let mut choice: Option<(f64, usize)> = None;
    for (r, (_, parts)) in p.redundants.iter().enumerate() {
        if !parts.contains(&best) {
            continue;
        }
        let least = parts
            .iter()
            .map(|&i| b[i].min.time.0)
            .fold(f64::INFINITY, f64::min);
        let benefit = b[best].max.time.0 - least;
        let cost: f64 = parts
            .iter()
            .filter(|&&i| i != best)
            .map(|&i| added_cost(&p.prices, &b[i]))
            .sum();
        let net = benefit - cost;
        if net > 0.0 && choice.is_none_or(|(n, _)| net > n) {
            choice = Some((net, r));
        }
    }
    match choice {
        Some((_, r)) => {
            let parts = &p.redundants[r].1;
            let expected = Outcome::redundant(parts.iter().map(|&i| b[i].central));
            Choice {
                strategy: p.id(Candidate::Redundant(r)),
                expected,
                cost: p.prices.cost(&expected),
            }
        }
        None => single(p, &b, best),
    }
}

fn single(p: &Problem, b: &[Bounded], i: usize) -> Choice {
    Choice {
        strategy: p.id(Candidate::Single(i)),
        expected: b[i].central,
        cost: p.prices.cost(&b[i].central),
    }
}
