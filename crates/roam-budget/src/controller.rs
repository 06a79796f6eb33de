//! Goal-directed adaptation (Odyssey, as IMP uses it: IMP thesis §3.4): a price for a budgeted
//! resource (energy in joules, cellular data in bytes) that rises when use runs ahead of what
//! the budget allows for the rest of its period and falls when it lags, so that use ends close
//! to, but not over, the budget ("spend effectively, live within your means, use it or lose
//! it").
//!
//! Once a second ([`PriceController::tick`]):
//! 1. the remaining supply (the budget less what was used);
//! 2. the consumption rate, exponentially smoothed;
//! 3. the demand: that rate times the time left in the budget period;
//! 4. the reduced supply: the supply less a reserve of 5% of it and 1% of the original budget;
//! 5. `c_new = c_old * demand / reduced_supply`.
//!
//! A price of 0.2 for energy means 5 J are worth 1 s of a user's time. The price stays within
//! [`Prices::min`] and [`Prices::max`]: at the minimum a price can still rise (a price of
//! zero would stay zero), and once the reduced supply is gone it is the maximum, at which no
//! prefetch pays. Time is an argument: a month runs under a virtual clock.

use std::time::Duration;

use roam_core::Time;
use thiserror::Error;

/// A budget for one resource over one period.
#[derive(Clone, Debug, PartialEq)]
pub struct Budget {
    /// How much may be used in the period (joules, or bytes).
    pub total: f64,
    /// When the period started.
    pub start: Time,
    /// When it ends (a predicted recharge, the end of a billing cycle).
    pub end: Time,
}

impl Budget {
    /// A battery discharge: `joules` until the predicted recharge at `recharge`.
    pub fn battery(joules: f64, now: Time, recharge: Time) -> Budget {
        Budget {
            total: joules,
            start: now,
            end: recharge,
        }
    }

    /// A data plan of `bytes` for `days` from `now` (a monthly plan is 30 days).
    pub fn data_plan(bytes: u64, now: Time, days: u32) -> Budget {
        Budget {
            total: bytes as f64,
            start: now,
            end: now + Duration::from_secs(u64::from(days) * 86_400),
        }
    }
}

/// The controller's constants.
#[derive(Clone, Debug, PartialEq)]
pub struct Prices {
    /// The price at the start of a period.
    pub initial: f64,
    /// The least price (it must be positive to rise again).
    pub min: f64,
    /// The price once the budget is spent: high enough that nothing pays.
    pub max: f64,
    /// Weight of the last second's rate in the smoothed rate (the rest is the old rate's).
    pub smoothing: f64,
}

impl Default for Prices {
    /// Initial price 1e-3 (per joule or per byte), bounds 1e-9 and 1e9, smoothing 0.01 (about
    /// a 100 s memory: long enough to ride out a single transfer, short enough to follow a
    /// day's rise and fall).
    fn default() -> Prices {
        Prices {
            initial: 1e-3,
            min: 1e-9,
            max: 1e9,
            smoothing: 0.01,
        }
    }
}

/// A budget or controller that cannot be used.
#[derive(Debug, Error, PartialEq)]
pub enum BudgetError {
    /// Nothing to spend.
    #[error("a budget must be more than zero (got {0})")]
    Empty(f64),
    /// The period is over before it starts.
    #[error("the budget period is already over (it ends at {end}, now is {now})")]
    Over {
        /// When it ends.
        end: Time,
        /// Now.
        now: Time,
    },
    /// The constants do not make a controller.
    #[error("prices: {0}")]
    Prices(String),
}

/// The price of one budgeted resource.
#[derive(Clone, Debug)]
pub struct PriceController {
    budget: Budget,
    prices: Prices,
    price: f64,
    used: f64,
    /// Used at the last tick.
    used_at_tick: f64,
    last_tick: Time,
    /// Smoothed consumption, per second; `None` until the first tick.
    rate: Option<f64>,
}

impl PriceController {
    /// A controller for `budget` from `now`. Refuses an empty budget, a period already over,
    /// and constants that cannot work.
    pub fn new(budget: Budget, prices: Prices, now: Time) -> Result<PriceController, BudgetError> {
        if !(budget.total.is_finite() && budget.total > 0.0) {
            return Err(BudgetError::Empty(budget.total));
        }
        if budget.end <= now {
            return Err(BudgetError::Over {
                end: budget.end,
                now,
            });
        }
        if !(prices.min > 0.0 && prices.min <= prices.initial && prices.initial <= prices.max) {
            return Err(BudgetError::Prices(format!(
                "need 0 < min <= initial <= max, got {} <= {} <= {}",
                prices.min, prices.initial, prices.max
            )));
        }
        if !(prices.smoothing > 0.0 && prices.smoothing <= 1.0) {
            return Err(BudgetError::Prices(format!(
                "smoothing must be in (0, 1], got {}",
                prices.smoothing
            )));
        }
        Ok(PriceController {
            price: prices.initial,
            budget,
            prices,
            used: 0.0,
            used_at_tick: 0.0,
            last_tick: now,
            rate: None,
        })
    }

    /// The current price.
    pub fn price(&self) -> f64 {
        self.price
    }

    /// What has been used so far.
    pub fn used(&self) -> f64 {
        self.used
    }

    /// What is left of the budget (never below zero).
    pub fn remaining(&self) -> f64 {
        (self.budget.total - self.used).max(0.0)
    }

    /// The budget.
    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    /// Record `amount` used (joules spent, bytes sent on a metered network).
    pub fn record(&mut self, amount: f64) {
        if amount.is_finite() && amount > 0.0 {
            self.used += amount;
        }
    }

    /// Adapt the price once per whole second elapsed since the last tick (call it at least
    /// once a second; a longer gap adapts once, on the average rate over it). Returns the
    /// price.
    pub fn tick(&mut self, now: Time) -> f64 {
        let elapsed = now.saturating_since(self.last_tick);
        if elapsed < Duration::from_secs(1) {
            return self.price;
        }
        let last = (self.used - self.used_at_tick) / elapsed.as_secs_f64();
        let a = self.prices.smoothing;
        let rate = match self.rate {
            None => last,
            Some(r) => a * last + (1.0 - a) * r,
        };
        self.rate = Some(rate);
        self.used_at_tick = self.used;
        self.last_tick = now;
        let supply = self.remaining();
        let left = self.budget.end.saturating_since(now).as_secs_f64();
        let demand = rate * left;
        let reduced = supply - (0.05 * supply + 0.01 * self.budget.total);
        self.price = if left <= 0.0 {
            // The period is over: nothing more to save for.
            self.prices.min
        } else if reduced <= 0.0 {
            self.prices.max
        } else {
            (self.price * demand / reduced).clamp(self.prices.min, self.prices.max)
        };
        self.price
    }
}

/// One chance to use the resource, as an application meets them: using `cost` gains `value`
/// (seconds of a user's time saved), so it is taken when `value > price * cost` (IMP's
/// benefit is positive).
#[derive(Clone, Copy, Debug)]
pub struct Offer {
    /// What taking it uses.
    pub cost: f64,
    /// What taking it gains.
    pub value: f64,
}

/// What a simulated budget period used.
#[derive(Clone, Debug, PartialEq)]
pub struct Simulated {
    /// What was used.
    pub used: f64,
    /// What every offer together would have used.
    pub offered: f64,
    /// The budget.
    pub budget: f64,
}

impl Simulated {
    /// Used, as a fraction of the budget.
    pub fn used_fraction(&self) -> f64 {
        self.used / self.budget
    }

    /// What was used beyond the budget, as a fraction of it (0 when within).
    pub fn overshoot(&self) -> f64 {
        ((self.used - self.budget) / self.budget).max(0.0)
    }
}

/// Offers for [`simulate`] whose cost per second rises and falls over `cycle` seconds (from
/// 0.1 to 1.9 times `mean`), each second's split into ten offers with values uniform in
/// [0, 1) (a deterministic stream from `seed`).
pub fn offers_rising_and_falling(
    mean: f64,
    cycle: f64,
    seed: u64,
) -> impl FnMut(Time) -> Vec<Offer> {
    // xorshift64: no dependency, and the same stream on every machine.
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    move |t| {
        let phase = 2.0 * std::f64::consts::PI * t.as_secs_f64() / cycle;
        let per_second = mean * (1.0 + 0.9 * phase.sin());
        (0..10)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                Offer {
                    cost: per_second / 10.0,
                    value: (state >> 11) as f64 / (1u64 << 53) as f64,
                }
            })
            .collect()
    }
}

/// Run a controller over its whole budget period under a virtual clock, a tick a second:
/// `offers(t)` gives the chances to spend in the second from `t`, each taken when it pays at
/// the current price.
pub fn simulate(
    budget: Budget,
    prices: Prices,
    mut offers: impl FnMut(Time) -> Vec<Offer>,
) -> Result<Simulated, BudgetError> {
    let start = budget.start;
    let end = budget.end;
    let total = budget.total;
    let mut c = PriceController::new(budget, prices, start)?;
    let mut offered = 0.0;
    let mut t = start;
    while t < end {
        for o in offers(t) {
            offered += o.cost;
            if o.value > c.price() * o.cost {
                c.record(o.cost);
            }
        }
        t = t + Duration::from_secs(1);
        c.tick(t);
    }
    Ok(Simulated {
        used: c.used(),
        offered,
        budget: total,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_budget_a_period_over_or_bad_constants_are_refused() {
        let now = Time::from_millis(5_000);
        let b = |total: f64, end: u64| Budget {
            total,
            start: Time::ZERO,
            end: Time::from_millis(end),
        };
        let p = Prices::default();
        assert_eq!(
            PriceController::new(b(0.0, 10_000), p.clone(), now).unwrap_err(),
            BudgetError::Empty(0.0)
        );
        let e = PriceController::new(b(5.0, 4_000), p.clone(), now).unwrap_err();
        assert!(e.to_string().contains("already over"), "{e}");
        let zero_min = Prices {
            min: 0.0,
            ..p.clone()
        };
        assert!(PriceController::new(b(5.0, 10_000), zero_min, now).is_err());
        let bad = Prices {
            smoothing: 0.0,
            ..p
        };
        assert!(PriceController::new(b(5.0, 10_000), bad, now).is_err());
    }

    #[test]
    fn spending_ahead_of_the_budget_raises_the_price_and_lagging_lowers_it() {
        let mut c = PriceController::new(
            Budget::battery(100.0, Time::ZERO, Time::from_millis(1_000_000)),
            Prices::default(),
            Time::ZERO,
        )
        .unwrap();
        let p0 = c.price();
        // 5 J/s over 1000 s would be 5000 J: fifty times the budget.
        for s in 1..=10 {
            c.record(5.0);
            c.tick(Time::from_millis(s * 1000));
        }
        assert!(c.price() > p0, "{} !> {p0}", c.price());
        let high = c.price();
        // Nothing used for a while: the smoothed rate falls (a 100 s memory) until the rest
        // of the period's demand is below the supply, and then so does the price.
        for s in 11..=700 {
            c.tick(Time::from_millis(s * 1000));
        }
        assert!(c.price() < high, "{} !< {high}", c.price());
        // Spent past the reserve: the maximum price.
        c.record(49.5);
        c.tick(Time::from_millis(701_000));
        assert_eq!(c.price(), Prices::default().max);
    }

    /// A whole budget period, simulated: never over the budget; at least 90% of it used when
    /// the offers could use half as much again as all of it (less where they could use only a
    /// little more: at 1.2 times the budget it uses 0.87-0.88, see docs/budgets.md); all of
    /// the offers taken when they could not use it all.
    fn whole_period(budget: Budget, cycle: f64) {
        let seconds = budget.end.saturating_since(budget.start).as_secs_f64();
        let started = std::time::Instant::now();
        for (demand, must_use) in [(3.0, 0.9), (1.5, 0.9), (1.2, 0.85), (0.5, 0.0)] {
            let mean = budget.total * demand / seconds;
            let r = simulate(
                budget.clone(),
                Prices::default(),
                offers_rising_and_falling(mean, cycle, 1),
            )
            .unwrap();
            assert!(
                r.used <= r.budget,
                "demand x{demand}: used {} of {}",
                r.used,
                r.budget
            );
            if demand > 1.0 {
                assert!(
                    r.used_fraction() >= must_use,
                    "demand x{demand}: used {:.3} of the budget",
                    r.used_fraction()
                );
            } else {
                // Everything that paid at the lowest price: every offer but those of no value.
                assert!(
                    r.used >= 0.99 * r.offered,
                    "used {} of {} offered",
                    r.used,
                    r.offered
                );
            }
        }
        // Three periods; a benchmark would say more (`roam bench prefetch`).
        assert!(started.elapsed() < std::time::Duration::from_secs(3 * 60));
    }

    #[test]
    fn a_monthly_data_plan_is_used_but_never_exceeded() {
        // 2 GB over 30 days, demand rising and falling each day.
        whole_period(Budget::data_plan(2_000_000_000, Time::ZERO, 30), 86_400.0);
    }

    #[test]
    fn a_battery_day_is_used_but_never_exceeded() {
        // 10 kJ until a recharge 8 hours away, demand rising and falling each hour.
        let day = Time::ZERO + Duration::from_secs(8 * 3600);
        whole_period(Budget::battery(10_000.0, Time::ZERO, day), 3600.0);
    }
}
