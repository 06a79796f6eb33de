//! What a strategy costs: its completion time, the energy and the metered data it spends, and
//! the weighted cost that puts the three on one scale (Meatballs thesis §4.3: "I am willing to spend
//! 10 J or 10 KB to avoid 1 second of waiting").

use roam_budget::Joules;

/// A time in seconds, as a strategy's completion time or an expectation of one (fractional and
/// possibly infinite: a strategy over a network that is absent never completes).
#[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd)]
pub struct Seconds(pub f64);

/// An amount of data in bytes, as an expectation (fractional).
#[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd)]
pub struct ByteCount(pub f64);

/// A strategy's time, energy and data at one set of predictor values.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Completion time.
    pub time: Seconds,
    /// Energy spent.
    pub energy: Joules,
    /// Metered data spent.
    pub data: ByteCount,
}

impl Outcome {
    /// An outcome of `time_s` seconds, `energy_j` joules and `data_bytes` bytes.
    pub fn new(time_s: f64, energy_j: f64, data_bytes: f64) -> Outcome {
        Outcome {
            time: Seconds(time_s),
            energy: Joules(energy_j),
            data: ByteCount(data_bytes),
        }
    }

    /// Several strategies run at once, the first result kept (Meatballs thesis §4.3.1): the least
    /// time, the sum of energy and of data.
    pub fn redundant(parts: impl IntoIterator<Item = Outcome>) -> Outcome {
        let mut o = Outcome::new(f64::INFINITY, 0.0, 0.0);
        for p in parts {
            o.time.0 = o.time.0.min(p.time.0);
            o.energy.0 += p.energy.0;
            o.data.0 += p.data.0;
        }
        o
    }
}

/// The importance factors that turn energy and data into seconds: the seconds of waiting one
/// joule, and one byte, are worth. Set by the user (the thesis's cost levels, [`Prices::level`])
/// or by goal-directed adaptation ([`Prices::from_controllers`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Prices {
    /// Seconds per joule.
    pub energy: f64,
    /// Seconds per byte.
    pub data: f64,
}

/// The thesis's cost levels (Meatballs thesis §4.4.1): what one second of waiting is worth.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CostLevel {
    /// Energy and data are free.
    None,
    /// 100 J or 100 KB per second saved.
    Low,
    /// 10 J or 10 KB per second saved.
    Mid,
    /// 1 J or 1 KB per second saved.
    High,
}

impl CostLevel {
    /// Every level, cheapest first.
    pub const ALL: [CostLevel; 4] = [
        CostLevel::None,
        CostLevel::Low,
        CostLevel::Mid,
        CostLevel::High,
    ];

    /// Its name in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            CostLevel::None => "none",
            CostLevel::Low => "low",
            CostLevel::Mid => "mid",
            CostLevel::High => "high",
        }
    }
}

impl Prices {
    /// Energy and data are free: only time counts.
    pub const FREE: Prices = Prices {
        energy: 0.0,
        data: 0.0,
    };

    /// The prices of a cost level: `J` joules or `J` KB (1 KB = 1000 bytes, as the thesis
    /// writes "10 KB") are worth one second.
    pub fn level(level: CostLevel) -> Prices {
        let per_second = match level {
            CostLevel::None => return Prices::FREE,
            CostLevel::Low => 100.0,
            CostLevel::Mid => 10.0,
            CostLevel::High => 1.0,
        };
        Prices {
            energy: 1.0 / per_second,
            data: 1.0 / (per_second * 1000.0),
        }
    }

    /// The prices goal-directed adaptation sets now (informed-prefetching.md): the energy
    /// budget's controller and the data budget's, each price in seconds per unit.
    pub fn from_controllers(
        energy: &roam_budget::PriceController,
        data: &roam_budget::PriceController,
    ) -> Prices {
        Prices {
            energy: energy.price(),
            data: data.price(),
        }
    }

    /// The weighted cost of `o`: time + c_energy × energy + c_data × data, in seconds.
    pub fn cost(&self, o: &Outcome) -> f64 {
        o.time.0 + self.energy * o.energy.0 + self.data * o.data.0
    }

    /// The weighted cost of `o`'s energy and data alone.
    pub fn resource_cost(&self, o: &Outcome) -> f64 {
        self.energy * o.energy.0 + self.data * o.data.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redundant_outcome_takes_the_least_time_and_spends_the_sum() {
        let o = Outcome::redundant([Outcome::new(2.0, 1.0, 10.0), Outcome::new(1.5, 3.0, 0.0)]);
        assert_eq!(o, Outcome::new(1.5, 4.0, 10.0));
    }

    #[test]
    fn cost_levels_price_joules_and_kilobytes_in_seconds() {
        let mid = Prices::level(CostLevel::Mid);
        // 10 J or 10 KB are worth one second.
        assert!((mid.cost(&Outcome::new(0.0, 10.0, 0.0)) - 1.0).abs() < 1e-12);
        assert!((mid.cost(&Outcome::new(0.0, 0.0, 10_000.0)) - 1.0).abs() < 1e-12);
        assert_eq!(Prices::level(CostLevel::None), Prices::FREE);
    }
}
