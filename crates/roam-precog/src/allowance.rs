//! What replays may spend a day, across replays: WiFi bytes fetched and the WiFi radio's
//! energy (modelled with roam-budget's radio model, not measured).
//!
//! The thesis prefetches "if battery, CPU and disk allow" and gives no budget. A replay's own
//! caps (`roam precog replay --max-mb`, `--max-joules`) bound one session; an allowance bounds
//! a day's sessions together, as a data plan or a battery's share is a budget over a period
//! (roam-budget's `Budget`): each replay may take what the day has left, and what it took is
//! counted when it ends. A day is a UTC day; what was spent is forgotten when the next one
//! starts (a day's allowance is not carried over).
//!
//! roam-budget's price controller (IMP's, Odyssey's) spreads a budget over its period by
//! pricing each use against its value; a replay instead takes paths most-hit first until its
//! cap, so the allowance only has to say how much is left.

use serde::{Deserialize, Serialize};

/// Seconds in a day.
const DAY: u64 = 86_400;

/// The user's daily allowance for replays, and what today's replays spent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Allowance {
    /// Bytes replays may fetch a day (`None`: no bound).
    pub bytes_per_day: Option<u64>,
    /// Modelled radio energy replays may spend a day, joules (`None`: no bound).
    pub joules_per_day: Option<f64>,
    /// What was spent on the day it was spent.
    #[serde(default)]
    pub spent: Spent,
}

/// What replays spent on one day.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Spent {
    /// The day (days since the Unix epoch, UTC).
    pub day: u64,
    /// Bytes fetched.
    pub bytes: u64,
    /// Modelled joules.
    pub joules: f64,
}

impl Allowance {
    /// What today's replays spent so far at `now` (seconds since the Unix epoch).
    pub fn spent_today(&self, now: u64) -> Spent {
        if self.spent.day == now / DAY {
            self.spent.clone()
        } else {
            Spent {
                day: now / DAY,
                ..Spent::default()
            }
        }
    }

    /// What a replay starting at `now` may still spend: bytes and joules (`None`: unbounded).
    pub fn left(&self, now: u64) -> (Option<u64>, Option<f64>) {
        let s = self.spent_today(now);
        (
            self.bytes_per_day.map(|b| b.saturating_sub(s.bytes)),
            self.joules_per_day.map(|j| (j - s.joules).max(0.0)),
        )
    }

    /// A replay that ended at `now` spent `bytes` and `joules`.
    pub fn spend(&mut self, now: u64, bytes: u64, joules: f64) {
        let mut s = self.spent_today(now);
        s.bytes += bytes;
        if joules.is_finite() && joules > 0.0 {
            s.joules += joules;
        }
        self.spent = s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replays_share_a_day_and_the_next_day_starts_afresh() {
        let mut a = Allowance {
            bytes_per_day: Some(50_000_000),
            joules_per_day: Some(20.0),
            ..Allowance::default()
        };
        let morning = 10 * DAY + 3600;
        assert_eq!(a.left(morning), (Some(50_000_000), Some(20.0)));
        a.spend(morning, 30_000_000, 12.5);
        assert_eq!(a.left(morning + 60), (Some(20_000_000), Some(7.5)));
        // Overspent (a path finishes past the cap): nothing left, never negative.
        a.spend(morning + 120, 25_000_000, 9.0);
        assert_eq!(a.left(morning + 180), (Some(0), Some(0.0)));
        // The next day.
        assert_eq!(a.left(11 * DAY), (Some(50_000_000), Some(20.0)));
        a.spend(11 * DAY, 1, f64::NAN);
        assert_eq!(
            a.spent,
            Spent {
                day: 11,
                bytes: 1,
                joules: 0.0
            }
        );
        // Unbounded.
        assert_eq!(Allowance::default().left(morning), (None, None));
    }
}
