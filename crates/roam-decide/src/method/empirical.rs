//! The empirical ("brute force") method (Meatballs thesis §4.3.1): each predictor's aged relative error
//! samples are its error distribution; every strategy's expected time, energy and data are
//! weighted sums over the *joint* distribution of the predictors it reads (a redundant
//! strategy's time the least of its parts' at each point, its energy and data their sum), and
//! the least expected weighted cost wins. The work is the product of the predictors' sample
//! counts (O(n^m)); the thesis kept it off the critical path by deciding quickly without
//! redundancy first ([`crate::Meatballs::choose_single`]) and by caching decisions until a
//! measurement changes them, as [`crate::Meatballs::choose`] does.

use crate::problem::Problem;
use crate::Choice;

/// The empirical method's decision.
pub(crate) fn choose(p: &Problem) -> Choice {
    let dists: Vec<Vec<(f64, f64)>> = p
        .reads
        .iter()
        .map(|&i| {
            let pr = &p.predictors[i];
            let prediction = pr.prediction().unwrap_or(0.0);
            if pr.errors().len() == 0 {
                vec![(pr.value(), 1.0)]
            } else {
                pr.errors()
                    .map(|(ratio, w)| (pr.clamp(prediction * ratio), w))
                    .collect()
            }
        })
        .collect();
    p.expect(&dists)
}
