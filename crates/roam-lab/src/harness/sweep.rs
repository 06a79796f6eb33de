//! Parameter sweeps: a scenario with one or more of its network's parameters changed, named
//! `SCENARIO+PARAM=VALUE[+PARAM=VALUE...]` wherever a scenario name goes
//! (`roam lab in-paper --scenarios hotspot+queue=20pkt`), and `--sweep PARAM=V1,V2,...`,
//! which runs every scenario at every value (`--sweep rtt=0ms,100ms,300ms`).
//!
//! - `queue=N`: every link's drop-tail bound (`20pkt`, `64kb`, `unlimited`; the lab's is
//!   [`crate::harness::system::QUEUE`]);
//! - `rtt=D`: `D` added to every link's round-trip time (half each way);
//! - `rate=K`: every link's capacity times `K` (`0.5`, `2x`; a Mahimahi trace is thinned or
//!   repeated evenly, so its bursts and outages stay where they were);
//! - `loss=P`: every link's random loss, each direction (`1%`, `0.01`), in place of its own.
//!
//! The baselines are derived from the changed links, so every system sees the same network;
//! trial k of every variant uses seed k, so variants pair as systems do.

use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use roam_core::units::parse_duration;
use roam_emu::queue::QueueLimit;
use roam_emu::scenario_file;
use roam_emu::spec::parse_queue;
use roam_trace::scenario::Scenario;

/// What separates a scenario from its changed parameters in a name.
pub const SEP: char = '+';

/// The parameters a sweep can change.
const PARAMS: &str = "queue, rtt, rate, loss";

/// The changes a scenario name asks for.
#[derive(Clone, Debug, PartialEq)]
pub struct Variant {
    /// Every link's queue bound, if not the lab's.
    pub queue: Option<QueueLimit>,
    /// Added to every link's round-trip time.
    pub extra_rtt: Duration,
    /// Every link's capacity is multiplied by this.
    pub rate: f64,
    /// Every link's random loss, if not its own.
    pub loss: Option<f64>,
}

impl Default for Variant {
    fn default() -> Variant {
        Variant {
            queue: None,
            extra_rtt: Duration::ZERO,
            rate: 1.0,
            loss: None,
        }
    }
}

/// Split `name` into its base scenario and the changes after it.
pub fn parse(name: &str) -> Result<(&str, Variant)> {
    let mut parts = name.split(SEP);
    let base = parts.next().unwrap_or_default();
    if base.is_empty() {
        bail!("`{name}`: no scenario before `{SEP}`");
    }
    let mut v = Variant::default();
    for p in parts {
        let (key, value) = p
            .split_once('=')
            .ok_or_else(|| anyhow!("`{name}`: `{p}` is not PARAM=VALUE ({PARAMS})"))?;
        set(&mut v, key, value).with_context(|| format!("`{name}`"))?;
    }
    Ok((base, v))
}

fn set(v: &mut Variant, key: &str, value: &str) -> Result<()> {
    match key {
        "queue" => v.queue = Some(parse_queue(value).map_err(|e| anyhow!("queue: {e}"))?),
        "rtt" => {
            v.extra_rtt = parse_duration(value).map_err(|e| anyhow!("rtt: {e}"))?;
        }
        "rate" => {
            let k: f64 = value
                .strip_suffix('x')
                .unwrap_or(value)
                .parse()
                .map_err(|_| anyhow!("rate: `{value}` is not a factor such as 0.5 or 2x"))?;
            if !(k.is_finite() && k > 0.0) {
                bail!("rate: the factor must be positive, not `{value}`");
            }
            v.rate = k;
        }
        "loss" => {
            let p = match value.strip_suffix('%') {
                Some(pct) => pct.parse::<f64>().map(|x| x / 100.0),
                None => value.parse::<f64>(),
            }
            .map_err(|_| anyhow!("loss: `{value}` is not a probability such as 1% or 0.01"))?;
            if !(0.0..=1.0).contains(&p) {
                bail!("loss: `{value}` is not between 0 and 1 (0% and 100%)");
            }
            v.loss = Some(p);
        }
        other => bail!("unknown parameter `{other}` (expected one of: {PARAMS})"),
    }
    Ok(())
}

/// The scenario named `name` (a built-in, a scenario file, either with changes) for `seed`,
/// with its links changed as asked; it is named `name`. The queue bound, if changed, comes
/// back beside it (a queue is the emulator's, not the scenario's).
pub fn scenario(name: &str, seed: u64) -> Result<(Scenario, Option<QueueLimit>)> {
    let (base, v) = parse(name)?;
    let mut sc =
        scenario_file::scenario(base, seed).map_err(|e| anyhow!("scenario `{base}`: {e}"))?;
    for l in &mut sc.links {
        if v.extra_rtt > Duration::ZERO {
            l.trace = l.trace.with_extra_rtt(v.extra_rtt);
        }
        if v.rate != 1.0 {
            let at = |e: String| anyhow!("`{name}`: link {}: {e}", l.name);
            l.trace.down = l.trace.down.scaled(v.rate).map_err(at)?;
            l.trace.up = l.trace.up.scaled(v.rate).map_err(at)?;
        }
        if let Some(p) = v.loss {
            l.trace.loss = p;
        }
    }
    sc.name = name.to_string();
    Ok((sc, v.queue))
}

/// Every scenario at every value of every sweep (`PARAM=V1,V2,...`; several sweeps give
/// every combination), in order: the scenarios as given when there are no sweeps.
pub fn expand(scenarios: &[String], sweeps: &[String]) -> Result<Vec<String>> {
    let mut out: Vec<String> = scenarios.to_vec();
    for sw in sweeps {
        let (key, values) = sw
            .split_once('=')
            .ok_or_else(|| anyhow!("--sweep `{sw}`: expected PARAM=V1,V2,... ({PARAMS})"))?;
        let values: Vec<&str> = values.split(',').filter(|x| !x.is_empty()).collect();
        if values.is_empty() {
            bail!("--sweep `{sw}`: no values");
        }
        for v in &values {
            set(&mut Variant::default(), key, v).with_context(|| format!("--sweep `{sw}`"))?;
        }
        out = out
            .iter()
            .flat_map(|s| values.iter().map(move |v| format!("{s}{SEP}{key}={v}")))
            .collect();
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_says_which_parameters_change_and_errors_say_what_is_wrong() {
        let (base, v) = parse("hotspot+queue=20pkt+rtt=100ms+rate=0.5x+loss=1%").unwrap();
        assert_eq!(base, "hotspot");
        assert_eq!(
            v,
            Variant {
                queue: Some(QueueLimit::Packets(20)),
                extra_rtt: Duration::from_millis(100),
                rate: 0.5,
                loss: Some(0.01),
            }
        );
        assert_eq!(parse("hotspot+loss=0.02").unwrap().1.loss, Some(0.02));
        assert_eq!(parse("vehicular").unwrap().1, Variant::default());
        for (bad, want) in [
            ("hotspot+queue", "not PARAM=VALUE"),
            ("hotspot+delay=5ms", "unknown parameter `delay`"),
            ("hotspot+rate=fast", "not a factor"),
            ("hotspot+rate=0", "must be positive"),
            ("hotspot+rtt=soon", "rtt:"),
            ("hotspot+loss=lots", "not a probability"),
            ("hotspot+loss=200%", "not between 0 and 1"),
            ("+rtt=5ms", "no scenario"),
        ] {
            let e = format!("{:#}", parse(bad).unwrap_err());
            assert!(e.contains(want), "{bad}: {e}");
        }
    }

    #[test]
    fn a_variant_changes_every_link_and_keeps_the_rest() {
        let (plain, q) = scenario("hotspot", 1).unwrap();
        assert_eq!(q, None);
        let (slow, q) = scenario("hotspot+rate=0.5+rtt=100ms+queue=10pkt+loss=1%", 1).unwrap();
        assert_eq!(q, Some(QueueLimit::Packets(10)));
        assert_eq!(slow.name, "hotspot+rate=0.5+rtt=100ms+queue=10pkt+loss=1%");
        let t = roam_core::Time::ZERO;
        let end = roam_core::Time::from_millis(10_000);
        for (a, b) in plain.links.iter().zip(&slow.links) {
            let (x, y) = (
                a.trace.down.bytes_between(t, end).unwrap() as f64,
                b.trace.down.bytes_between(t, end).unwrap() as f64,
            );
            assert!((y / x - 0.5).abs() < 0.01, "{}: {x} -> {y}", a.name);
            assert_eq!(
                *b.trace.delay.value_at(t),
                *a.trace.delay.value_at(t) + Duration::from_millis(50)
            );
            assert_eq!(a.trace.availability, b.trace.availability);
            assert_eq!((a.trace.loss, b.trace.loss), (0.0, 0.01));
        }
        assert!(format!("{:#}", scenario("nowhere+rtt=1ms", 1).unwrap_err()).contains("nowhere"));
    }

    #[test]
    fn sweeps_run_every_scenario_at_every_value() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            expand(&s(&["hotspot", "vehicular"]), &s(&["queue=20pkt,1000pkt"])).unwrap(),
            s(&[
                "hotspot+queue=20pkt",
                "hotspot+queue=1000pkt",
                "vehicular+queue=20pkt",
                "vehicular+queue=1000pkt"
            ])
        );
        assert_eq!(
            expand(&s(&["hotspot"]), &s(&["rtt=0ms,100ms", "rate=2"])).unwrap(),
            s(&["hotspot+rtt=0ms+rate=2", "hotspot+rtt=100ms+rate=2"])
        );
        assert_eq!(expand(&s(&["hotspot"]), &[]).unwrap(), s(&["hotspot"]));
        for (bad, want) in [
            ("queue", "PARAM=V1"),
            ("rtt=", "no values"),
            ("rate=1,x", "not a factor"),
        ] {
            let e = format!("{:#}", expand(&s(&["hotspot"]), &s(&[bad])).unwrap_err());
            assert!(e.contains(want), "{bad}: {e}");
        }
    }
}
