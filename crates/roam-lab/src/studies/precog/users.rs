//! The thesis's synthetic users (ch. V, "Evaluation"), and what is measured of them.
//!
//! A user is active 16 hours a day for 7 days: 112 hours. Each hour is WiFi or cellular with
//! equal odds, except the first hour of each day (hours 1, 17, ..., 97), which is WiFi. Each
//! hour the user picks a random number between 1 and `MAX_ACCESS` and takes that many paths,
//! each truncated to a random depth from 1 to 10. Hours 1-96 only build the action trees
//! (cellular hours' paths; no page is loaded), as the thesis trained; on day 7 one WiFi hour's
//! prefetch and the cellular hour after it load pages and are measured.
//!
//! **Where the thesis is silent, roam's choice** (docs/precog.md): the thesis says the paths
//! come "from the universal set" and that a larger `MAX_ACCESS` means "a wider variety of
//! paths and lower redundancy", but drawing uniformly from one fixed set would make redundancy
//! *rise* with `MAX_ACCESS`. Here each user draws from a pool of their own,
//! [`POOL_PER_ACCESS`] x `MAX_ACCESS` paths of the universal set (all of it if smaller):
//! variety grows with how much a user browses. The draws are uniform, with replacement.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Hours in the week (16 a day for 7 days).
pub const HOURS: u32 = 112;
/// The last training hour.
pub const TRAIN: u32 = 96;
/// A user's pool of paths per unit of `MAX_ACCESS`.
pub const POOL_PER_ACCESS: usize = 10;
/// The deepest truncation.
pub const MAX_DEPTH: usize = 10;

/// One hour of a user's week.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hour {
    /// 1-based.
    pub hour: u32,
    /// On WiFi (else cellular).
    pub wifi: bool,
    /// The paths taken: an index into the universal set and a depth.
    pub paths: Vec<(usize, usize)>,
}

/// A user's week over a universal set of `depths.len()` paths (`depths[i]`: path i's length),
/// for `max_access` and `seed`.
pub fn week(depths: &[usize], max_access: usize, seed: u64) -> Vec<Hour> {
    let mut r = ChaCha8Rng::seed_from_u64(seed ^ 0x9ec0);
    let mut all: Vec<usize> = (0..depths.len()).collect();
    all.shuffle(&mut r);
    all.truncate((POOL_PER_ACCESS * max_access).max(1));
    let pool = all;
    (1..=HOURS)
        .map(|hour| {
            let wifi = (hour - 1) % 16 == 0 || r.gen_bool(0.5);
            let n = if pool.is_empty() {
                0
            } else {
                r.gen_range(1..=max_access.max(1))
            };
            let paths = (0..n)
                .map(|_| {
                    let i = pool[r.gen_range(0..pool.len())];
                    let d = r.gen_range(1..=MAX_DEPTH).min(depths[i].max(1));
                    (i, d)
                })
                .collect();
            Hour { hour, wifi, paths }
        })
        .collect()
}

/// Day 7's measured pair: the last WiFi hour that a cellular hour follows, and that cellular
/// hour (the prefetch session and the session it serves). `None` if day 7 has no cellular
/// hour after a WiFi one.
pub fn measured(week: &[Hour]) -> Option<(u32, u32)> {
    let day7: Vec<&Hour> = week.iter().filter(|h| h.hour > TRAIN).collect();
    day7.windows(2)
        .rev()
        .find(|w| w[0].wifi && !w[1].wifi)
        .map(|w| (w[0].hour, w[1].hour))
}

/// The paths of a measured hour that are loaded: all of them if there are at most `n`, else a
/// uniform sample of `n` (without replacement, in the hour's order), the same for the same
/// seed. Loading every path of a MAX_ACCESS 1000 hour in a real browser takes hours; the hour's
/// bytes are then estimated from the sample ([`scale`]).
pub fn sample(paths: &[(usize, usize)], n: usize, seed: u64) -> Vec<(usize, usize)> {
    if paths.len() <= n {
        return paths.to_vec();
    }
    let mut r = ChaCha8Rng::seed_from_u64(seed ^ 0x5a3b);
    let mut ix = rand::seq::index::sample(&mut r, paths.len(), n).into_vec();
    ix.sort_unstable();
    ix.into_iter().map(|i| paths[i]).collect()
}

/// What a sample's bytes are multiplied by to estimate the whole hour's: the hour's paths per
/// path loaded.
pub fn scale(hour: usize, loaded: usize) -> f64 {
    if loaded == 0 {
        1.0
    } else {
        hour as f64 / loaded as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_week_follows_the_thesis() {
        let depths = vec![10; 500];
        let w = week(&depths, 20, 1);
        assert_eq!(w.len(), HOURS as usize);
        for h in &w {
            if (h.hour - 1) % 16 == 0 {
                assert!(h.wifi, "hour {} starts a day", h.hour);
            }
            assert!((1..=20).contains(&h.paths.len()));
            assert!(h
                .paths
                .iter()
                .all(|&(i, d)| i < 500 && (1..=MAX_DEPTH).contains(&d)));
        }
        let cell = w.iter().filter(|h| !h.wifi).count();
        assert!((35..75).contains(&cell), "{cell} cellular hours");
        // The pool: at most POOL_PER_ACCESS x MAX_ACCESS distinct paths.
        let mut seen: Vec<usize> = w.iter().flat_map(|h| h.paths.iter().map(|p| p.0)).collect();
        seen.sort();
        seen.dedup();
        assert!(seen.len() <= POOL_PER_ACCESS * 20);
        assert_eq!(week(&depths, 20, 1), w, "a seed's week is the same");
    }

    #[test]
    fn a_long_hour_is_sampled_uniformly_and_the_same_way_for_a_seed() {
        let hour: Vec<(usize, usize)> = (0..1000).map(|i| (i, 1 + i % 10)).collect();
        assert_eq!(sample(&hour[..30], 40, 1), hour[..30].to_vec());
        let s = sample(&hour, 40, 1);
        assert_eq!(s.len(), 40);
        assert!(
            s.windows(2).all(|w| w[0].0 < w[1].0),
            "in the hour's order, no repeats"
        );
        assert_eq!(s, sample(&hour, 40, 1));
        assert_ne!(s, sample(&hour, 40, 2));
        // Spread over the hour, not its head.
        assert!(s.iter().any(|p| p.0 >= 500) && s.iter().any(|p| p.0 < 500));
        assert_eq!(scale(1000, 40), 25.0);
        assert_eq!(scale(30, 30), 1.0);
    }

    #[test]
    fn the_measured_pair_is_wifi_then_cellular_on_day_7() {
        let w = week(&[3; 50], 5, 9);
        let (a, b) = measured(&w).unwrap();
        assert!(a > TRAIN && b == a + 1);
        assert!(w[a as usize - 1].wifi && !w[b as usize - 1].wifi);
    }
}
