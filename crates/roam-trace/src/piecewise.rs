//! Piecewise-constant functions of time, optionally periodic.
//!
//! Delay, availability and interval-trace rates are all piecewise constant: a value holds from
//! one breakpoint to the next. A periodic function repeats its breakpoints every `period`, as
//! Mahimahi repeats a trace when it reaches its end.

use roam_core::Time;
use std::time::Duration;

/// A piecewise-constant function of time.
#[derive(Clone, Debug, PartialEq)]
pub struct Piecewise<T> {
    /// Breakpoints `(start, value)`, strictly increasing in start; the first starts at zero.
    points: Vec<(Time, T)>,
    /// When set, the function repeats with this period (longer than the last breakpoint).
    period: Option<Duration>,
}

impl<T: Clone> Piecewise<T> {
    /// A function with one value forever.
    pub fn constant(v: T) -> Piecewise<T> {
        Piecewise {
            points: vec![(Time::ZERO, v)],
            period: None,
        }
    }

    /// Build from breakpoints. Breakpoints must be strictly increasing, the first at time zero,
    /// and a period, if any, must be later than the last breakpoint.
    pub fn new(points: Vec<(Time, T)>, period: Option<Duration>) -> Result<Piecewise<T>, String> {
        if points.is_empty() {
            return Err("no breakpoints".into());
        }
        if points[0].0 != Time::ZERO {
            return Err("the first breakpoint must be at time 0".into());
        }
        if points.windows(2).any(|w| w[1].0 <= w[0].0) {
            return Err("breakpoints must be strictly increasing in time".into());
        }
        if let Some(p) = period {
            if Time::ZERO + p <= points.last().unwrap().0 {
                return Err("the period must be later than the last breakpoint".into());
            }
        }
        Ok(Piecewise { points, period })
    }

    /// The breakpoints.
    pub fn points(&self) -> &[(Time, T)] {
        &self.points
    }

    /// The period, if the function repeats.
    pub fn period(&self) -> Option<Duration> {
        self.period
    }

    fn fold(&self, t: Time) -> (u64, Time) {
        match self.period {
            Some(p) => {
                let p = p.as_nanos() as u64;
                (t.0 / p, Time(t.0 % p))
            }
            None => (0, t),
        }
    }

    fn index_at(&self, local: Time) -> usize {
        self.points.partition_point(|(s, _)| *s <= local) - 1
    }

    /// The value at time `t`.
    pub fn value_at(&self, t: Time) -> &T {
        let (_, local) = self.fold(t);
        &self.points[self.index_at(local)].1
    }

    /// The first breakpoint strictly after `t`, where the value may change; `None` if the value
    /// never changes again.
    pub fn next_change_after(&self, t: Time) -> Option<Time> {
        let (cycle, local) = self.fold(t);
        let i = self.index_at(local);
        match self.period {
            None => self.points.get(i + 1).map(|p| p.0),
            Some(p) => {
                let p = p.as_nanos() as u64;
                let base = cycle * p;
                match self.points.get(i + 1) {
                    Some(next) => Some(Time(base + next.0 .0)),
                    None if self.points.len() == 1 => None,
                    None => Some(Time(base + p)),
                }
            }
        }
    }

    /// The same function started again at `t`: `g(t + x) = f(x)` for every `x >= 0` (before
    /// `t`, `g` holds `f`'s first value, or a periodic `f`'s value that leads into time `t`).
    /// What an emulated link's `restart` command does to its delay and availability.
    pub fn starting_at(&self, t: Time) -> Piecewise<T> {
        match self.period {
            None => {
                let mut points = vec![self.points[0].clone()];
                points.extend(
                    self.points[1..]
                        .iter()
                        .map(|(p, v)| (*p + (t - Time::ZERO), v.clone())),
                );
                Piecewise {
                    points,
                    period: None,
                }
            }
            Some(period) => {
                // Rotate the period by the phase `t` falls at.
                let p = period.as_nanos() as u64;
                let shift = t.0 % p;
                if shift == 0 {
                    return self.clone();
                }
                let mut points: Vec<(Time, T)> = self
                    .points
                    .iter()
                    .map(|(at, v)| (Time((at.0 + shift) % p), v.clone()))
                    .collect();
                points.push((Time::ZERO, self.value_at(Time(p - shift)).clone()));
                // A rotated breakpoint that landed at zero holds the same value as the one
                // added (both are `f` just before the phase); the last of equal times is kept.
                points.sort_by_key(|(at, _)| *at);
                let mut kept: Vec<(Time, T)> = Vec::with_capacity(points.len());
                for pt in points {
                    match kept.last_mut() {
                        Some(last) if last.0 == pt.0 => *last = pt,
                        _ => kept.push(pt),
                    }
                }
                Piecewise {
                    points: kept,
                    period: self.period,
                }
            }
        }
    }

    /// The segments overlapping `[t0, t1)`, as `(start, end, value)` clipped to that window.
    pub fn segments(&self, t0: Time, t1: Time) -> Vec<(Time, Time, T)> {
        let mut out = Vec::new();
        let mut t = t0;
        while t < t1 {
            let end = self.next_change_after(t).unwrap_or(Time::MAX).min(t1);
            out.push((t, end, self.value_at(t).clone()));
            t = end;
        }
        out
    }
}

impl Piecewise<bool> {
    /// Fraction of `[t0, t1)` during which the value is true.
    pub fn fraction_true(&self, t0: Time, t1: Time) -> f64 {
        if t1 <= t0 {
            return 0.0;
        }
        let on: u64 = self
            .segments(t0, t1)
            .iter()
            .filter(|s| s.2)
            .map(|s| s.1 .0 - s.0 .0)
            .sum();
        on as f64 / (t1.0 - t0.0) as f64
    }

    /// The maximal intervals within `[t0, t1)` during which the value is true.
    pub fn true_intervals(&self, t0: Time, t1: Time) -> Vec<(Time, Time)> {
        let mut out: Vec<(Time, Time)> = Vec::new();
        for (a, b, v) in self.segments(t0, t1) {
            if !v {
                continue;
            }
            match out.last_mut() {
                Some(last) if last.1 == a => last.1 = b,
                _ => out.push((a, b)),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Time {
        Time::from_millis(v)
    }

    #[test]
    fn aperiodic() {
        let f = Piecewise::new(vec![(ms(0), 1), (ms(10), 2)], None).unwrap();
        assert_eq!(*f.value_at(ms(5)), 1);
        assert_eq!(*f.value_at(ms(10)), 2);
        assert_eq!(*f.value_at(ms(10_000)), 2);
        assert_eq!(f.next_change_after(ms(0)), Some(ms(10)));
        assert_eq!(f.next_change_after(ms(10)), None);
    }

    #[test]
    fn periodic() {
        let f = Piecewise::new(
            vec![(ms(0), true), (ms(10), false)],
            Some(Duration::from_millis(30)),
        )
        .unwrap();
        assert!(*f.value_at(ms(35)));
        assert!(!*f.value_at(ms(45)));
        assert_eq!(f.next_change_after(ms(35)), Some(ms(40)));
        assert_eq!(f.next_change_after(ms(40)), Some(ms(60)));
        assert!((f.fraction_true(ms(0), ms(60)) - 1.0 / 3.0).abs() < 1e-9);
        assert_eq!(
            f.true_intervals(ms(5), ms(65)),
            vec![(ms(5), ms(10)), (ms(30), ms(40)), (ms(60), ms(65))]
        );
    }

    #[test]
    fn a_function_started_again_repeats_itself_from_then() {
        let aperiodic = Piecewise::new(vec![(ms(0), 1), (ms(10), 2)], None).unwrap();
        let periodic = Piecewise::new(
            vec![(ms(0), 1), (ms(10), 2), (ms(25), 3)],
            Some(Duration::from_millis(30)),
        )
        .unwrap();
        for f in [aperiodic, periodic] {
            for t in [0, 7, 10, 25, 30, 44, 1000] {
                let g = f.starting_at(ms(t));
                for x in 0..100 {
                    assert_eq!(g.value_at(ms(t + x)), f.value_at(ms(x)), "t {t} x {x}");
                }
                assert_eq!(g.period(), f.period());
            }
        }
    }

    #[test]
    fn rejects_bad_breakpoints() {
        assert!(Piecewise::<u8>::new(vec![], None).is_err());
        assert!(Piecewise::new(vec![(ms(1), 0)], None).is_err());
        assert!(Piecewise::new(vec![(ms(0), 0), (ms(0), 1)], None).is_err());
        assert!(
            Piecewise::new(vec![(ms(0), 0), (ms(5), 1)], Some(Duration::from_millis(5))).is_err()
        );
    }
}
