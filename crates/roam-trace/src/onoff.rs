//! On/off availability: a link that comes and goes, as WiFi does from a moving car.
//!
//! Sources:
//! - [`cabernet`]: alternating usable periods and gaps, drawn from the Cabernet encounter and
//!   disconnection CDFs (Eriksson et al., MobiCom 2008), as the Intentional Networking scout
//!   did. Seeded, so a scenario is reproducible.
//! - [`walking`]: WiFi met while walking, matching the statistics of the IMP thesis's walking
//!   trace (constructed: the trace is not available);
//! - [`load_schedule`]: an on/off schedule file, one change per line: `<time> on|off`, where time
//!   is seconds (`12.5`) or a duration (`12.5s`, `1500ms`). The link is on before the first line.

use crate::cdf::EmpiricalCdf;
use crate::error::{content_lines, read_text, TraceError};
use crate::piecewise::Piecewise;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use roam_core::Time;
use std::path::Path;
use std::time::Duration;

/// The Cabernet encounter-duration CDF (seconds an open AP stays usable while driving).
pub const CABERNET_ENCOUNTER: &str = include_str!("../data/cabernet-encounter-duration.cdf");
/// The Cabernet disconnection-duration CDF (seconds between usable APs).
pub const CABERNET_DISCONNECT: &str = include_str!("../data/cabernet-disconnect-duration.cdf");

/// WiFi sessions while walking (seconds): uniform 13-99 s (median 56, longest 99).
pub const WALKING_SESSION: &str = include_str!("../data/walking-wifi-session.cdf");
/// Gaps between WiFi sessions while walking (seconds): exponential, mean 255 s.
pub const WALKING_GAP: &str = include_str!("../data/walking-wifi-gap.cdf");
/// WiFi sessions on the Meatballs thesis's walk (seconds): median 41 s, longest 300 s.
pub const WALKING_CAMPUS_SESSION: &str = include_str!("../data/walking-campus-wifi-session.cdf");
/// Gaps between WiFi sessions on the Meatballs thesis's walk (seconds): exponential, mean 30 s.
pub const WALKING_CAMPUS_GAP: &str = include_str!("../data/walking-campus-wifi-gap.cdf");

/// How far ahead a generated schedule reaches before it repeats.
pub const GENERATED_HORIZON: Duration = Duration::from_secs(6 * 3600);

/// The Cabernet CDFs, (encounter, disconnection).
pub fn cabernet_cdfs() -> (EmpiricalCdf, EmpiricalCdf) {
    let on = EmpiricalCdf::parse(
        CABERNET_ENCOUNTER,
        Path::new("cabernet-encounter-duration.cdf"),
    )
    .expect("embedded Cabernet encounter CDF parses");
    let off = EmpiricalCdf::parse(
        CABERNET_DISCONNECT,
        Path::new("cabernet-disconnect-duration.cdf"),
    )
    .expect("embedded Cabernet disconnection CDF parses");
    (on, off)
}

/// Alternating on/off periods drawn from two CDFs (seconds), reaching at least `horizon`, then
/// repeating. The initial state is on with the long-run probability of being on; each period
/// is at least 100 ms.
pub fn alternating(
    on: &EmpiricalCdf,
    off: &EmpiricalCdf,
    seed: u64,
    horizon: Duration,
) -> Piecewise<bool> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (mean_on, mean_off) = (on.mean(), off.mean());
    let p_on = mean_on / (mean_on + mean_off);
    let mut state = rng.gen::<f64>() < p_on;
    let mut t = Time::ZERO;
    let mut points = Vec::new();
    let end = Time::ZERO + horizon;
    while t < end {
        points.push((t, state));
        let secs = if state {
            on.sample(&mut rng)
        } else {
            off.sample(&mut rng)
        };
        t = t + Duration::from_secs_f64(secs.max(0.1));
        state = !state;
    }
    // Repeat after a whole number of on/off pairs so the pattern stays alternating.
    if points.len() % 2 == 1 {
        let secs = off.sample(&mut rng).max(0.1);
        points.push((t, state));
        t = t + Duration::from_secs_f64(secs);
    }
    Piecewise::new(points, Some(t - Time::ZERO)).expect("generated breakpoints increase")
}

/// WiFi availability from the Cabernet CDFs.
pub fn cabernet(seed: u64) -> Piecewise<bool> {
    let (on, off) = cabernet_cdfs();
    alternating(&on, &off, seed, GENERATED_HORIZON)
}

/// WiFi availability while walking: sessions and gaps matching the statistics of the IMP
/// thesis's walking trace (WiFi in reach 18% of the time, sessions median 56 s, longest 99 s).
pub fn walking(seed: u64) -> Piecewise<bool> {
    let on = EmpiricalCdf::parse(WALKING_SESSION, Path::new("walking-wifi-session.cdf"))
        .expect("embedded walking session CDF parses");
    let off = EmpiricalCdf::parse(WALKING_GAP, Path::new("walking-wifi-gap.cdf"))
        .expect("embedded walking gap CDF parses");
    alternating(&on, &off, seed, GENERATED_HORIZON)
}

/// WiFi availability on the Meatballs thesis's walk (Higgins' thesis Table 4.2: WiFi in reach 69% of
/// the time, sessions of median 41 s and at most 5 min), with gaps of mean 30 s.
pub fn walking_campus(seed: u64) -> Piecewise<bool> {
    let on = EmpiricalCdf::parse(
        WALKING_CAMPUS_SESSION,
        Path::new("walking-campus-wifi-session.cdf"),
    )
    .expect("embedded campus session CDF parses");
    let off = EmpiricalCdf::parse(WALKING_CAMPUS_GAP, Path::new("walking-campus-wifi-gap.cdf"))
        .expect("embedded campus gap CDF parses");
    alternating(&on, &off, seed, GENERATED_HORIZON)
}

/// Read an on/off schedule file (see the module docs).
pub fn load_schedule(path: &Path) -> Result<Piecewise<bool>, TraceError> {
    parse_schedule(&read_text(path)?, path)
}

/// Parse on/off schedule text; `path` names the source in errors.
pub fn parse_schedule(text: &str, path: &Path) -> Result<Piecewise<bool>, TraceError> {
    let mut points: Vec<(Time, bool)> = vec![(Time::ZERO, true)];
    for (n, line) in content_lines(text) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.len() != 2 {
            return Err(TraceError::parse(
                path,
                n,
                format!("expected `<time> on|off`, found `{line}`"),
            ));
        }
        let t = parse_time(cols[0]).ok_or_else(|| {
            TraceError::parse(
                path,
                n,
                format!(
                    "expected a time in seconds or with a unit (12.5, 1500ms), found `{}`",
                    cols[0]
                ),
            )
        })?;
        let state = match cols[1].to_ascii_lowercase().as_str() {
            "on" | "up" | "1" => true,
            "off" | "down" | "0" => false,
            other => {
                return Err(TraceError::parse(
                    path,
                    n,
                    format!("expected `on` or `off`, found `{other}`"),
                ))
            }
        };
        let last = points.last().unwrap().0;
        if t < last || (t == last && points.len() > 1) {
            return Err(TraceError::parse(
                path,
                n,
                "times must increase from line to line",
            ));
        }
        if t == Time::ZERO {
            points[0].1 = state;
        } else {
            points.push((t, state));
        }
    }
    Piecewise::new(points, None).map_err(|e| TraceError::invalid(path, e))
}

/// Parse a time given as plain seconds or as a duration with a unit.
pub(crate) fn parse_time(s: &str) -> Option<Time> {
    if let Ok(v) = s.parse::<f64>() {
        return (v.is_finite() && v >= 0.0).then(|| Time::from_secs_f64(v));
    }
    roam_core::parse_duration(s).ok().map(|d| Time::ZERO + d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cabernet_is_reproducible_and_plausible() {
        let a = cabernet(7);
        let b = cabernet(7);
        let c = cabernet(8);
        assert_eq!(a, b);
        assert_ne!(a, c);
        let frac = a.fraction_true(Time::ZERO, Time::ZERO + Duration::from_secs(6 * 3600));
        let (on, off) = cabernet_cdfs();
        let expect = on.mean() / (on.mean() + off.mean());
        assert!((frac - expect).abs() < 0.08, "{frac} vs {expect}");
        // Alternates strictly.
        for w in a.points().windows(2) {
            assert_ne!(w[0].1, w[1].1);
        }
    }

    #[test]
    fn schedule_file() {
        let s =
            parse_schedule("# cut twice\n2 off\n3.5s on\n5000ms off\n", Path::new("s")).unwrap();
        assert!(*s.value_at(Time::from_millis(1999)));
        assert!(!*s.value_at(Time::from_millis(2000)));
        assert!(*s.value_at(Time::from_millis(4000)));
        assert!(!*s.value_at(Time::from_millis(60_000)));
        let e = parse_schedule("2 off\n1 on\n", Path::new("s")).unwrap_err();
        assert_eq!(e.to_string(), "s:2: times must increase from line to line");
        let e = parse_schedule("2 maybe\n", Path::new("s")).unwrap_err();
        assert_eq!(e.to_string(), "s:1: expected `on` or `off`, found `maybe`");
        let e = parse_schedule("soon off\n", Path::new("s")).unwrap_err();
        assert!(e.to_string().starts_with("s:1: expected a time"));
    }
}
