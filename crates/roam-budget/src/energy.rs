//! Energy and power as types: joules spent, milliwatts drawn (the units the power-model
//! papers give), and the product of a power and a duration.

use std::fmt;
use std::ops::{Add, AddAssign, Mul, Sub};
use std::time::Duration;

/// Energy in joules.
#[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd)]
pub struct Joules(pub f64);

/// Power in milliwatts.
#[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd)]
pub struct Milliwatts(pub f64);

impl Joules {
    /// No energy.
    pub const ZERO: Joules = Joules(0.0);

    /// The value in joules.
    pub fn as_f64(self) -> f64 {
        self.0
    }
}

impl Milliwatts {
    /// The energy drawn at this power for `d`.
    pub fn over(self, d: Duration) -> Joules {
        Joules(self.0 * 1e-3 * d.as_secs_f64())
    }
}

impl Mul<Duration> for Milliwatts {
    type Output = Joules;
    fn mul(self, d: Duration) -> Joules {
        self.over(d)
    }
}

impl Add for Joules {
    type Output = Joules;
    fn add(self, o: Joules) -> Joules {
        Joules(self.0 + o.0)
    }
}

impl AddAssign for Joules {
    fn add_assign(&mut self, o: Joules) {
        self.0 += o.0;
    }
}

impl Sub for Joules {
    type Output = Joules;
    fn sub(self, o: Joules) -> Joules {
        Joules(self.0 - o.0)
    }
}

impl std::iter::Sum for Joules {
    fn sum<I: Iterator<Item = Joules>>(it: I) -> Joules {
        Joules(it.map(|j| j.0).sum())
    }
}

impl fmt::Display for Joules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3} J", self.0)
    }
}

impl fmt::Display for Milliwatts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.1} mW", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watt_for_a_second_is_a_joule() {
        assert_eq!(Milliwatts(1000.0) * Duration::from_secs(1), Joules(1.0));
        assert_eq!(
            Milliwatts(500.0).over(Duration::from_millis(10)) + Joules(1.0),
            Joules(1.005)
        );
        assert_eq!(format!("{}", Joules(12.7604)), "12.760 J");
    }
}
