//! Scripted link changes: commands, an events file, and a control socket.
//!
//! A command names a link and what happens to it:
//! - `wifi down`: outage; both directions silently drop (the interface stays up);
//! - `wifi up`: end of a scripted outage (the link's own on/off schedule still applies);
//! - `wifi set rate=1mbit,delay=50ms,loss=0.02`: change capacity, one-way delay or loss;
//! - `cell restart`: the link's trace (capacity, delay, on/off schedule) starts again from its
//!   beginning now, so that phases of an experiment that start at different times meet the
//!   same stretch of a drive (`roam lab precog`'s cellular hour). It undoes `set`'s capacity
//!   and delay; loss and a scripted outage stay.
//!
//! An **events file** (`--events FILE`) schedules commands, one per line: `<time> <command>`,
//! with time in seconds from the start (`12.5`) or with a unit (`1500ms`); `#` starts a comment.
//! The **control socket** (`--control PATH`, a Unix stream socket; `ROAM_EMU_CONTROL` in the
//! commands' environment) takes one command per line and answers `ok` or `error: ...`;
//! `roam emu ctl PATH wifi down` sends one.

use roam_core::{parse_duration, BitRate};
use roam_trace::capacity::Capacity;
use std::path::Path;
use std::time::Duration;

/// A change to one link.
#[derive(Clone, Debug, PartialEq)]
pub enum LinkCommand {
    /// Begin a scripted outage.
    Down,
    /// End a scripted outage.
    Up,
    /// Start the link's own trace again from its beginning, now.
    Restart,
    /// Change parameters from now on.
    Set {
        /// New capacity, both directions.
        capacity: Option<Capacity>,
        /// New one-way delay.
        delay: Option<Duration>,
        /// New loss probability.
        loss: Option<f64>,
    },
}

/// A command for a named link.
#[derive(Clone, Debug, PartialEq)]
pub struct Command {
    /// The link.
    pub link: String,
    /// What to do.
    pub action: LinkCommand,
}

/// A command at a time from the start of the emulation.
#[derive(Clone, Debug, PartialEq)]
pub struct ScheduledCommand {
    /// When, from the start.
    pub at: Duration,
    /// What.
    pub command: Command,
}

/// Parse a command from its words, e.g. `["wifi", "set", "rate=1mbit"]`.
pub fn parse_command(words: &[&str]) -> Result<Command, String> {
    let usage =
        "expected `LINK down`, `LINK up`, `LINK restart` or `LINK set rate=R,delay=D,loss=P`";
    let (link, rest) = words.split_first().ok_or_else(|| usage.to_string())?;
    let action = match rest {
        ["down"] => LinkCommand::Down,
        ["up"] => LinkCommand::Up,
        ["restart"] => LinkCommand::Restart,
        ["set", kv] => {
            let (mut capacity, mut delay, mut loss) = (None, None, None);
            for item in kv.split(',').filter(|s| !s.is_empty()) {
                let (k, v) = item
                    .split_once('=')
                    .ok_or_else(|| format!("`{item}` is not key=value"))?;
                match k {
                    "rate" if v == "unlimited" => capacity = Some(Capacity::Unlimited),
                    "rate" => {
                        capacity = Some(Capacity::constant(
                            BitRate::parse(v).map_err(|e| e.to_string())?,
                        ))
                    }
                    "delay" => delay = Some(parse_duration(v).map_err(|e| e.to_string())?),
                    "loss" => {
                        loss = Some(
                            v.parse::<f64>()
                                .ok()
                                .filter(|l| (0.0..=1.0).contains(l))
                                .ok_or_else(|| format!("loss `{v}` must be in [0, 1]"))?,
                        )
                    }
                    other => {
                        return Err(format!(
                            "cannot set `{other}` (expected rate, delay or loss)"
                        ))
                    }
                }
            }
            LinkCommand::Set {
                capacity,
                delay,
                loss,
            }
        }
        _ => return Err(format!("`{}`: {usage}", words.join(" "))),
    };
    Ok(Command {
        link: link.to_string(),
        action,
    })
}

/// Read an events file (see the module docs).
pub fn load_events(path: &Path) -> Result<Vec<ScheduledCommand>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse_events(&text, path)
}

/// Parse events text; `path` names the source in errors.
pub fn parse_events(text: &str, path: &Path) -> Result<Vec<ScheduledCommand>, String> {
    let mut out: Vec<ScheduledCommand> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let at = |msg: String| format!("{}:{}: {msg}", path.display(), i + 1);
        let words: Vec<&str> = line.split_whitespace().collect();
        let t = words[0];
        let when = match t.parse::<f64>() {
            Ok(v) => roam_core::seconds(v)
                .ok_or_else(|| at(format!("time `{t}` must be non-negative and under 2^64 s")))?,
            Err(_) => parse_duration(t).map_err(|e| at(e.to_string()))?,
        };
        let command = parse_command(&words[1..]).map_err(at)?;
        if out.last().is_some_and(|p| p.at > when) {
            return Err(at("events must be in time order".into()));
        }
        out.push(ScheduledCommand { at: when, command });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands() {
        assert_eq!(
            parse_command(&["wifi", "down"]).unwrap().action,
            LinkCommand::Down
        );
        assert_eq!(
            parse_command(&["cell", "restart"]).unwrap().action,
            LinkCommand::Restart
        );
        let c = parse_command(&["cell", "set", "rate=1mbit,delay=50ms"]).unwrap();
        assert_eq!(
            c.action,
            LinkCommand::Set {
                capacity: Some(Capacity::constant(BitRate::mbps(1))),
                delay: Some(Duration::from_millis(50)),
                loss: None
            }
        );
        assert!(parse_command(&["wifi", "sideways"]).is_err());
        assert!(parse_command(&["wifi", "set", "colour=red"])
            .unwrap_err()
            .contains("cannot set `colour`"));
    }

    #[test]
    fn events_file() {
        let ev = parse_events("# cut wifi\n1.5 wifi down\n3s wifi up\n", Path::new("e")).unwrap();
        assert_eq!(ev.len(), 2);
        assert_eq!(ev[1].at, Duration::from_secs(3));
        let e = parse_events("1 wifi down\n0.5 wifi up\n", Path::new("e")).unwrap_err();
        assert_eq!(e, "e:2: events must be in time order");
        let e = parse_events("soon wifi down\n", Path::new("e")).unwrap_err();
        assert!(e.starts_with("e:1: `soon` is not a duration"), "{e}");
        let e = parse_events("1 wifi\n", Path::new("e")).unwrap_err();
        assert!(e.starts_with("e:1: `wifi`: expected"), "{e}");
    }
}
