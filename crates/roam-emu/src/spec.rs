//! `--link NAME=SPEC` parsing.
//!
//! SPEC is comma-separated `key=value`:
//!
//! | key | meaning |
//! |---|---|
//! | `rate=10mbit` | constant capacity both ways (`unlimited` for none) |
//! | `down=X`, `up=X` | per direction: a Mahimahi PDO file, or a rate |
//! | `trace=FILE.csv` | an interval CSV (capacity both ways, RTT, availability) |
//! | `delay=20ms` | one-way delay, each direction (overrides a trace's RTT) |
//! | `loss=0.01` | random loss probability, each direction |
//! | `queue=100pkt` / `queue=64kb` / `queue=unlimited` | drop-tail queue bound (default 1000pkt) |
//! | `onoff=cabernet` / `onoff=FILE` / `onoff=ON.cdf:OFF.cdf` | availability: Cabernet on/off, an on/off schedule file, or on/off durations drawn from two CDF files |
//! | `seed=N` | seed for loss and on/off |

use crate::queue::{Jitter, QueueLimit};
use roam_core::{parse_duration, BitRate, Bytes};
use roam_trace::capacity::Capacity;
use roam_trace::cdf::EmpiricalCdf;
use roam_trace::interval::IntervalTrace;
use roam_trace::{onoff, LinkKind, LinkTrace, PdoTrace, Piecewise};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Default drop-tail bound, as Linux's default `txqueuelen`.
pub const DEFAULT_QUEUE: QueueLimit = QueueLimit::Packets(1000);

/// A fully specified emulated link.
#[derive(Clone, Debug)]
pub struct LinkConfig {
    /// Link name: device name in both namespaces, and `ROAM_LINK_<NAME>_*` in the environment.
    pub name: String,
    /// What it stands for (for statistics).
    pub kind: LinkKind,
    /// Its behaviour over time.
    pub trace: LinkTrace,
    /// Drop-tail bound, per direction.
    pub queue: QueueLimit,
    /// Per-packet delay variation, per direction.
    pub jitter: Jitter,
    /// How an outage looks to the client's kernel: `None`, a silent drop (the interface stays
    /// up, as when a car drives out of range and nothing tells it); `Some(d)`, once the link
    /// has been unavailable for `d` its interface loses its carrier until the link returns, as
    /// after a WiFi disassociation the kernel is told of; a client link's MPTCP endpoint is then
    /// withdrawn and added again when the carrier returns, as a phone's connection manager does.
    pub carrier_after: Option<Duration>,
    /// Seed for random loss and jitter.
    pub seed: u64,
}

/// A `--link` argument could not be used.
#[derive(Debug, thiserror::Error)]
#[error("--link {arg}: {msg}")]
pub struct SpecError {
    /// The argument as given.
    pub arg: String,
    /// What is wrong and what was expected.
    pub msg: String,
}

/// Check a link name: 1-15 characters of `a-z0-9_-`, starting with a letter (it becomes a
/// network device name and part of an environment variable name).
pub fn validate_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 15
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        && name != "lo";
    if ok {
        Ok(())
    } else {
        Err(format!(
            "link name `{name}` must be 1-15 characters of a-z, 0-9, _ or -, start with a letter, and not be `lo`"
        ))
    }
}

/// The environment-variable form of a link name: `wifi-2` -> `WIFI_2`.
pub fn env_name(name: &str) -> String {
    name.to_ascii_uppercase().replace('-', "_")
}

/// Parse `NAME=SPEC`; `default_seed` is used when the spec has no `seed=`.
///
/// In three steps, each reporting the first mistake it finds: the name ([`validate_name`]),
/// then each key on its own (a bad value, an unknown or repeated key), then how the keys
/// combine into a link (`rate` with `down`, say, or `reorder` without `jitter`).
pub fn parse_link(arg: &str, default_seed: u64) -> Result<LinkConfig, SpecError> {
    let err = |msg: String| SpecError {
        arg: arg.to_string(),
        msg,
    };
    let (name, spec) = arg
        .split_once('=')
        .ok_or_else(|| err("expected NAME=SPEC, e.g. wifi=rate=10mbit,delay=20ms".into()))?;
    validate_name(name).map_err(err)?;
    let keys = SpecKeys::read(spec, default_seed).map_err(err)?;
    keys.into_link(name).map_err(err)
}

/// The keys of one SPEC, each parsed on its own (files named are loaded); `None` where a key
/// was not given.
struct SpecKeys {
    rate: Option<Capacity>,
    down: Option<Capacity>,
    up: Option<Capacity>,
    /// `trace=`: an interval CSV, loaded.
    csv: Option<IntervalTrace>,
    delay: Option<Duration>,
    loss: f64,
    queue: QueueLimit,
    /// `onoff=` as given: loaded once the seed is known ([`availability`]).
    onoff: Option<String>,
    jitter: Jitter,
    reorder: Option<bool>,
    carrier_after: Option<Duration>,
    seed: u64,
}

impl SpecKeys {
    /// Read SPEC's comma-separated `key=value` items, each key at most once.
    fn read(spec: &str, default_seed: u64) -> Result<SpecKeys, String> {
        let mut keys = SpecKeys {
            rate: None,
            down: None,
            up: None,
            csv: None,
            delay: None,
            loss: 0.0,
            queue: DEFAULT_QUEUE,
            onoff: None,
            jitter: Jitter::default(),
            reorder: None,
            carrier_after: None,
            seed: default_seed,
        };
        let mut seen = std::collections::HashSet::new();
        for item in spec.split(',').filter(|s| !s.is_empty()) {
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| format!("`{item}` is not key=value"))?;
            if !seen.insert(k.to_string()) {
                return Err(format!("`{k}` given twice"));
            }
            keys.set(k, v)?;
        }
        Ok(keys)
    }

    /// Parse value `v` of key `k` into its place.
    fn set(&mut self, k: &str, v: &str) -> Result<(), String> {
        match k {
            "rate" => self.rate = Some(parse_rate(v)?),
            "down" => self.down = Some(parse_capacity_value(v)?),
            "up" => self.up = Some(parse_capacity_value(v)?),
            "trace" => {
                self.csv = Some(IntervalTrace::load(Path::new(v)).map_err(|e| e.to_string())?)
            }
            "delay" => self.delay = Some(parse_duration(v).map_err(|e| e.to_string())?),
            "loss" => {
                self.loss = v
                    .parse::<f64>()
                    .ok()
                    .filter(|l| (0.0..=1.0).contains(l))
                    .ok_or_else(|| {
                        format!("loss `{v}` must be a probability in [0, 1], e.g. 0.01")
                    })?
            }
            "queue" => self.queue = parse_queue(v)?,
            "jitter" => self.jitter.max = parse_duration(v).map_err(|e| e.to_string())?,
            "carrier" => {
                self.carrier_after = Some(parse_duration(v).map_err(|e| {
                    format!("carrier `{v}`: {e} (the outage's length after which the client's interface loses its carrier, e.g. 2s)")
                })?)
            }
            "reorder" => {
                self.reorder = Some(match v {
                    "yes" => true,
                    "no" => false,
                    _ => return Err(format!("reorder `{v}` must be yes or no")),
                })
            }
            "onoff" => self.onoff = Some(v.to_string()),
            "seed" => {
                self.seed = v
                    .parse()
                    .map_err(|_| format!("seed `{v}` must be a non-negative integer"))?
            }
            other => {
                return Err(format!(
                    "unknown key `{other}` (expected rate, down, up, trace, delay, loss, queue, jitter, reorder, onoff, carrier, seed)"
                ))
            }
        }
        Ok(())
    }

    /// Combine the keys into link `name`: check they fit together ([`SpecKeys::check`]),
    /// build the trace ([`SpecKeys::trace`]), then lay the on/off schedule over it.
    fn into_link(mut self, name: &str) -> Result<LinkConfig, String> {
        self.check()?;
        let mut trace = self.trace();
        let kind = match &self.onoff {
            Some(o) => {
                let (sched, kind) = availability(o, self.seed)?;
                if trace.availability.points().len() > 1 {
                    return Err(
                        "`onoff` cannot be combined with a trace that has its own availability"
                            .into(),
                    );
                }
                trace.availability = sched;
                kind
            }
            None => LinkKind::Other,
        };
        Ok(LinkConfig {
            name: name.to_string(),
            kind,
            trace,
            queue: self.queue,
            jitter: self.jitter,
            carrier_after: self.carrier_after,
            seed: self.seed,
        })
    }

    /// The rules between keys: capacity comes from one source (`rate`, `down`+`up`, or
    /// `trace`), and `reorder` qualifies `jitter` (whose `reorder` flag it sets).
    fn check(&mut self) -> Result<(), String> {
        if self.rate.is_some() && (self.down.is_some() || self.up.is_some() || self.csv.is_some()) {
            return Err("`rate` cannot be combined with `down`, `up` or `trace`".into());
        }
        if self.csv.is_some() && (self.down.is_some() || self.up.is_some()) {
            return Err("`trace` cannot be combined with `down` or `up`".into());
        }
        if let Some(r) = self.reorder {
            if self.jitter.max.is_zero() {
                return Err("`reorder` needs `jitter` (packets overtake each other only when their delays vary)".into());
            }
            self.jitter.reorder = r;
        }
        if self.down.is_some() != self.up.is_some() {
            return Err("give both `down` and `up` (or `rate` for both)".into());
        }
        Ok(())
    }

    /// The link's trace: the interval CSV's if one was given, else the capacities (unlimited
    /// where none was given) with no delay and always available; then `delay` (which
    /// overrides the CSV's RTT) and `loss` over it.
    fn trace(&mut self) -> LinkTrace {
        let mut trace = match self.csv.take() {
            Some(t) => t.to_link(),
            None => {
                let (d, u) = match (self.rate.take(), self.down.take(), self.up.take()) {
                    (Some(r), _, _) => (r.clone(), r),
                    (None, Some(d), Some(u)) => (d, u),
                    _ => (Capacity::Unlimited, Capacity::Unlimited),
                };
                LinkTrace {
                    down: d,
                    up: u,
                    delay: Piecewise::constant(std::time::Duration::ZERO),
                    loss: 0.0,
                    availability: Piecewise::constant(true),
                }
            }
        };
        if let Some(d) = self.delay {
            trace.delay = Piecewise::constant(d);
        }
        trace.loss = self.loss;
        trace
    }
}

/// The availability `onoff=o` asks for, and what kind of link that makes it: `cabernet`
/// (Cabernet's WiFi on/off model, drawn with `seed`: a WiFi link), `ON.cdf:OFF.cdf`
/// (alternating on and off periods drawn from two CDF files with `seed`), or a schedule file.
fn availability(o: &str, seed: u64) -> Result<(Piecewise<bool>, LinkKind), String> {
    if o == "cabernet" {
        Ok((onoff::cabernet(seed), LinkKind::Wifi))
    } else if let Some((on, off)) = o.split_once(':') {
        let on = EmpiricalCdf::load(Path::new(on)).map_err(|e| e.to_string())?;
        let off = EmpiricalCdf::load(Path::new(off)).map_err(|e| e.to_string())?;
        Ok((
            onoff::alternating(&on, &off, seed, onoff::GENERATED_HORIZON),
            LinkKind::Other,
        ))
    } else {
        Ok((
            onoff::load_schedule(Path::new(o)).map_err(|e| e.to_string())?,
            LinkKind::Other,
        ))
    }
}

fn parse_rate(v: &str) -> Result<Capacity, String> {
    if v == "unlimited" {
        return Ok(Capacity::Unlimited);
    }
    BitRate::parse(v)
        .map(Capacity::constant)
        .map_err(|e| e.to_string())
}

fn parse_capacity_value(v: &str) -> Result<Capacity, String> {
    if let Ok(c) = parse_rate(v) {
        return Ok(c);
    }
    if !Path::new(v).exists() {
        return Err(format!(
            "`{v}` is neither a rate (e.g. 10mbit) nor an existing trace file"
        ));
    }
    let p = PdoTrace::load(Path::new(v)).map_err(|e| e.to_string())?;
    Ok(Capacity::Opportunities(Arc::new(p)))
}

/// Parse a queue bound: `100pkt`, `64kb` or `unlimited`.
pub fn parse_queue(v: &str) -> Result<QueueLimit, String> {
    if v == "unlimited" || v == "infinite" {
        return Ok(QueueLimit::Unlimited);
    }
    if let Some(n) = v.strip_suffix("pkt") {
        return n
            .parse()
            .map(QueueLimit::Packets)
            .map_err(|_| format!("queue `{v}`: expected a packet count like 100pkt"));
    }
    Bytes::parse(v)
        .map(|b| QueueLimit::Bytes(b.0))
        .map_err(|_| format!("queue `{v}` is not a bound (expected 100pkt, 64kb or unlimited)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use roam_core::Time;
    use std::time::Duration;

    #[test]
    fn jitter_and_reordering() {
        let l = parse_link("a=rate=1mbit,jitter=5ms", 1).unwrap();
        assert_eq!(
            l.jitter,
            Jitter {
                max: Duration::from_millis(5),
                reorder: false
            }
        );
        let l = parse_link("a=rate=1mbit,jitter=5ms,reorder=yes", 1).unwrap();
        assert!(l.jitter.reorder);
        assert_eq!(
            parse_link("a=rate=1mbit", 1).unwrap().jitter,
            Jitter::default()
        );
        let e = parse_link("a=rate=1mbit,reorder=yes", 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`reorder` needs `jitter`"), "{e}");
        let e = parse_link("a=jitter=1ms,reorder=often", 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("reorder `often` must be yes or no"), "{e}");
        assert!(parse_link("a=jitter=fast", 1).is_err());
        let l = parse_link("a=rate=1mbit,carrier=2s", 1).unwrap();
        assert_eq!(l.carrier_after, Some(Duration::from_secs(2)));
        assert_eq!(parse_link("a=rate=1mbit", 1).unwrap().carrier_after, None);
        assert!(parse_link("a=carrier=soon", 1).is_err());
    }

    #[test]
    fn full_spec() {
        let l = parse_link(
            "wifi=rate=10mbit,delay=20ms,loss=0.01,queue=100pkt,onoff=cabernet,seed=3",
            1,
        )
        .unwrap();
        assert_eq!(l.name, "wifi");
        assert_eq!(l.queue, QueueLimit::Packets(100));
        assert_eq!(l.seed, 3);
        assert_eq!(l.trace.loss, 0.01);
        assert_eq!(
            *l.trace.delay.value_at(Time::ZERO),
            Duration::from_millis(20)
        );
        assert!(l.trace.availability.points().len() > 2);
        assert_eq!(l.kind, LinkKind::Wifi);
        let l = parse_link("cell=down=1mbit,up=200kbit,queue=64kb", 1).unwrap();
        assert_eq!(l.queue, QueueLimit::Bytes(65536));
        assert_eq!(
            l.trace.up.mean_rate(Time::ZERO, Time::from_millis(1000)),
            Some(BitRate::kbps(200))
        );
        let l = parse_link("x=delay=5ms", 1).unwrap();
        assert_eq!(l.trace.down, Capacity::Unlimited);
    }

    #[test]
    fn errors_say_what_and_where() {
        let cases = [
            ("wifi", "expected NAME=SPEC"),
            ("Wifi=rate=1mbit", "link name `Wifi`"),
            ("wifi=rate=10mbt", "`10mbt` is not a rate"),
            ("wifi=rate=1mbit,rate=2mbit", "`rate` given twice"),
            ("wifi=speed=1mbit", "unknown key `speed`"),
            ("wifi=loss=2", "must be a probability"),
            ("wifi=queue=lots", "is not a bound"),
            ("wifi=delay=20", "`20` is not a duration"),
            ("wifi=down=1mbit", "give both `down` and `up`"),
            ("wifi=rate=1mbit,down=1mbit,up=1mbit", "cannot be combined"),
            ("wifi=down=/nonexistent.down,up=1mbit", "/nonexistent.down"),
            ("wifi=onoff=/nonexistent", "/nonexistent"),
        ];
        for (arg, want) in cases {
            let e = parse_link(arg, 1).unwrap_err().to_string();
            assert!(e.starts_with(&format!("--link {arg}: ")), "{e}");
            assert!(e.contains(want), "{arg}: {e}");
        }
    }

    #[test]
    fn malformed_trace_file_names_file_and_line() {
        let dir = std::env::temp_dir().join(format!("roam-spec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("bad.down");
        std::fs::write(&f, "1\n2\nthree\n").unwrap();
        let arg = format!("cell=down={},up=1mbit", f.display());
        let e = parse_link(&arg, 1).unwrap_err().to_string();
        assert!(
            e.contains(&format!(
                "{}:3: expected a non-negative integer",
                f.display()
            )),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn env_names() {
        assert_eq!(env_name("wifi-2"), "WIFI_2");
    }
}
