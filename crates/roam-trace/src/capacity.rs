//! Link capacity in one direction.
//!
//! Two models, because traces come in two forms:
//! - [`Capacity::Opportunities`]: a Mahimahi PDO trace. Capacity arrives in discrete 1500-byte
//!   delivery opportunities; an opportunity with an empty queue is wasted.
//! - [`Capacity::Rate`]: a piecewise-constant bit rate (constant links, interval CSV traces). A
//!   packet occupies the link for its serialisation time, as on a real wire or `tc tbf`.
//!
//! [`Capacity::Unlimited`] forwards as fast as the emulator can (for delay-only links and for
//! measuring the emulator itself).

use crate::pdo::PdoTrace;
use crate::piecewise::Piecewise;
use roam_core::{BitRate, Time};
use std::sync::Arc;

/// Capacity of one direction of a link over time.
#[derive(Clone, Debug, PartialEq)]
pub enum Capacity {
    /// No capacity limit.
    Unlimited,
    /// A piecewise-constant rate.
    Rate(Piecewise<BitRate>),
    /// Mahimahi delivery opportunities.
    Opportunities(Arc<PdoTrace>),
}

impl Capacity {
    /// A constant rate.
    pub fn constant(rate: BitRate) -> Capacity {
        Capacity::Rate(Piecewise::constant(rate))
    }

    /// Bytes the link can carry in `[t0, t1)`; `None` when unlimited.
    pub fn bytes_between(&self, t0: Time, t1: Time) -> Option<u64> {
        match self {
            Capacity::Unlimited => None,
            Capacity::Opportunities(p) => Some(p.bytes_between(t0, t1)),
            Capacity::Rate(r) => Some(
                r.segments(t0, t1)
                    .iter()
                    .map(|(a, b, rate)| rate.bytes_in(*b - *a))
                    .sum(),
            ),
        }
    }

    /// Mean rate over `[t0, t1)`; `None` when unlimited.
    pub fn mean_rate(&self, t0: Time, t1: Time) -> Option<BitRate> {
        let bytes = self.bytes_between(t0, t1)?;
        let secs = (t1 - t0).as_secs_f64();
        if secs <= 0.0 {
            return Some(BitRate(0));
        }
        Some(BitRate((bytes as f64 * 8.0 / secs).round() as u64))
    }

    /// The same capacity times `k` (`k` > 0; unlimited stays unlimited): a sweep of a
    /// link's rate. A Mahimahi trace is thinned or repeated evenly ([`PdoTrace::scaled`]).
    pub fn scaled(&self, k: f64) -> Result<Capacity, String> {
        if !(k.is_finite() && k > 0.0) {
            return Err(format!("a rate factor must be positive, not {k}"));
        }
        Ok(match self {
            Capacity::Unlimited => Capacity::Unlimited,
            Capacity::Opportunities(p) => Capacity::Opportunities(Arc::new(p.scaled(k)?)),
            Capacity::Rate(r) => {
                let points = r
                    .points()
                    .iter()
                    .map(|(t, rate)| (*t, BitRate((rate.as_bps() as f64 * k).round() as u64)))
                    .collect();
                Capacity::Rate(Piecewise::new(points, r.period())?)
            }
        })
    }

    /// The same capacity started again at `t` ([`PdoTrace::starting_at`],
    /// [`Piecewise::starting_at`]): from `t` on, the link carries what it carried from time
    /// zero.
    pub fn starting_at(&self, t: Time) -> Capacity {
        match self {
            Capacity::Unlimited => Capacity::Unlimited,
            Capacity::Opportunities(p) => Capacity::Opportunities(Arc::new(p.starting_at(t))),
            Capacity::Rate(r) => Capacity::Rate(r.starting_at(t)),
        }
    }

    /// Short human description, e.g. `10mbit` or `trace Verizon-EVDO-driving.down`.
    pub fn describe(&self) -> String {
        match self {
            Capacity::Unlimited => "unlimited".into(),
            Capacity::Opportunities(p) => format!("trace {}", p.name()),
            Capacity::Rate(r) if r.points().len() == 1 => r.points()[0].1.to_string(),
            Capacity::Rate(r) => format!("{} rate steps", r.points().len()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_scaled_capacity_carries_k_times_the_bytes() {
        let r = Piecewise::new(
            vec![
                (Time::ZERO, BitRate::mbps(8)),
                (Time::from_millis(500), BitRate::mbps(2)),
            ],
            Some(Duration::from_secs(1)),
        )
        .unwrap();
        let c = Capacity::Rate(r).scaled(0.5).unwrap();
        // 8 Mbit/s for half a second, 2 for the other half, halved: 250 + 62.5 KB.
        assert_eq!(
            c.bytes_between(Time::ZERO, Time::from_millis(1000)),
            Some(312_500)
        );
        assert_eq!(Capacity::Unlimited.scaled(3.0), Ok(Capacity::Unlimited));
        assert!(Capacity::constant(BitRate::mbps(1)).scaled(-1.0).is_err());
    }

    #[test]
    fn constant_bytes() {
        let c = Capacity::constant(BitRate::mbps(8));
        assert_eq!(
            c.bytes_between(Time::ZERO, Time::from_millis(1000)),
            Some(1_000_000)
        );
        assert_eq!(
            c.mean_rate(Time::ZERO, Time::ZERO + Duration::from_secs(2)),
            Some(BitRate::mbps(8))
        );
        assert_eq!(
            Capacity::Unlimited.bytes_between(Time::ZERO, Time::MAX),
            None
        );
    }
}
