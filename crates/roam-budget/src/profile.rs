//! Radio power profiles: the constants of a published power model, as data a user can
//! replace (TOML), each with its verification status (../shared/spec/power-models.md):
//! V read verbatim in the source's code or text, Q quoted by a third party (or AT&T's ARO tool
//! configuration), R reconstructed (consistent with the source's totals, not read verbatim).
//!
//! Every profile is one parametrisation of the same state machine ([`crate::radio`]): an
//! optional **promotion** (power, duration) before the first packet leaves an idle radio, an
//! **active** power while transferring (`b`, plus `a_u`, `a_d` mW per Mbit/s of throughput:
//! Huang et al. 2012, Table 4), and **tail** phases after the last packet, highest first (LTE's
//! continuous reception then its DRX tail; 3G's DCH then FACH; WiFi's tail). Two optional
//! rules cover PowerTutor's state machines: a **small packet** (at most a queue threshold)
//! takes an idle 3G radio only to a later phase (FACH, not DCH), and an **active packet rate**
//! below which WiFi stays in its low state.
//!
//! ```toml
//! source = "Huang et al., MobiSys 2012, Tables 3 and 4"
//! [[radio]]
//! name = "lte"
//! network = "lte"                                   # lte, 3g, wifi or 5g
//! promotion_mw = { value = 1210.7, status = "Q" }
//! promotion_ms = { value = 260.1, status = "Q" }
//! active_mw = { value = 1288.04, status = "Q" }
//! up_mw_per_mbps = { value = 438.39, status = "Q" }
//! down_mw_per_mbps = { value = 51.97, status = "Q" }
//! idle_mw = { value = 20.05, status = "R", note = "594.3 mW for 43.2 ms every 1280.2 ms" }
//! [[radio.tail]]
//! name = "DRX tail"
//! mw = { value = 1075.46, status = "R" }
//! ms = { value = 11576, status = "Q" }
//! ```
//!
//! Energy is charged above the idle power (`idle_mw`, reported, not charged): what a
//! network's use adds, as the sources count a transfer's promotion, transfer and tail.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use roam_core::Bytes;
use serde::Deserialize;
use thiserror::Error;
use toml::Spanned;

use crate::energy::Milliwatts;

/// How far a constant was checked against its source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum Status {
    /// Read verbatim in the source's released code or text.
    V,
    /// Quoted from the source by a third party, or by AT&T's ARO tool configuration.
    Q,
    /// Reconstructed: consistent with the source's quoted totals, not read verbatim.
    R,
}

/// Which kind of network a radio profile models.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum NetworkKind {
    /// 4G LTE.
    #[serde(rename = "lte")]
    Lte,
    /// 3G (UMTS, EV-DO).
    #[serde(rename = "3g")]
    Umts,
    /// WiFi.
    #[serde(rename = "wifi")]
    Wifi,
    /// 5G NR.
    #[serde(rename = "5g")]
    Nr,
}

/// A malformed profile file: which file, where, which key, what is wrong.
#[derive(Debug, Error)]
#[error("{file}{}: {what}", line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct ProfileError {
    /// The file (or the built-in's name).
    pub file: String,
    /// The line, when known.
    pub line: Option<usize>,
    /// What is wrong, naming the key.
    pub what: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Constant {
    value: f64,
    status: Status,
    #[allow(dead_code)] // documentation for the reader of the file
    note: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FilePhase {
    name: String,
    mw: Spanned<Constant>,
    ms: Spanned<Constant>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSmall {
    up_bytes: Spanned<Constant>,
    down_bytes: Spanned<Constant>,
    enters: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRadio {
    name: String,
    network: NetworkKind,
    promotion_mw: Option<Spanned<Constant>>,
    promotion_ms: Option<Spanned<Constant>>,
    active_mw: Spanned<Constant>,
    up_mw_per_mbps: Option<Spanned<Constant>>,
    down_mw_per_mbps: Option<Spanned<Constant>>,
    idle_mw: Option<Spanned<Constant>>,
    active_pps: Option<Spanned<Constant>>,
    small_packet: Option<FileSmall>,
    tail: Vec<FilePhase>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    source: String,
    radio: Vec<FileRadio>,
}

/// One phase of a radio's tail: a power held for a duration after the last packet.
#[derive(Clone, Debug, PartialEq)]
pub struct Phase {
    /// Its name in the source (`DCH tail`, `DRX tail`).
    pub name: String,
    /// The power drawn.
    pub power: Milliwatts,
    /// How long it lasts.
    pub duration: Duration,
}

/// PowerTutor's queue thresholds: a packet of at most this many bytes takes an idle or
/// lower-state radio only to tail phase `enters` (3G: FACH rather than DCH).
#[derive(Clone, Debug, PartialEq)]
pub struct SmallPackets {
    /// The uplink threshold.
    pub up: Bytes,
    /// The downlink threshold.
    pub down: Bytes,
    /// The tail phase (index) such a packet enters.
    pub enters: usize,
}

/// One radio's power model.
#[derive(Clone, Debug, PartialEq)]
pub struct RadioProfile {
    /// `source-file/radio`, e.g. `huang2012/lte`.
    pub name: String,
    /// The kind of network.
    pub network: NetworkKind,
    /// Where the constants come from.
    pub source: String,
    /// Power and duration of the promotion out of idle, if the radio has one.
    pub promotion: Option<(Milliwatts, Duration)>,
    /// Power while transferring, before the throughput terms (`b`).
    pub active: Milliwatts,
    /// Extra power per Mbit/s of uplink throughput (`a_u`).
    pub up_mw_per_mbps: f64,
    /// Extra power per Mbit/s of downlink throughput (`a_d`).
    pub down_mw_per_mbps: f64,
    /// Power when idle (reported; energy is charged above it).
    pub idle: Milliwatts,
    /// Packets per second below which traffic leaves the radio in its low state (PowerTutor's
    /// WiFi); `None`: every packet activates it.
    pub active_pps: Option<f64>,
    /// Queue thresholds of a state machine with an intermediate state (3G FACH).
    pub small: Option<SmallPackets>,
    /// The tail phases, highest first.
    pub tail: Vec<Phase>,
    /// The keys whose constants are reconstructed (R).
    pub reconstructed: Vec<String>,
}

impl RadioProfile {
    /// The whole tail's length.
    pub fn tail_length(&self) -> Duration {
        self.tail.iter().map(|p| p.duration).sum()
    }

    /// How the profile's figures are to be labelled: always modelled (there is no power meter),
    /// and which constants are reconstructed.
    pub fn label(&self) -> String {
        if self.reconstructed.is_empty() {
            format!("modelled ({})", self.name)
        } else {
            format!(
                "modelled ({}; reconstructed constants: {})",
                self.name,
                self.reconstructed.join(", ")
            )
        }
    }
}

impl fmt::Display for RadioProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({:?}, {})", self.name, self.network, self.source)
    }
}

/// The profiles shipped with roam: (file name, text).
pub const BUILT_IN: [(&str, &str); 5] = [
    ("huang2012", include_str!("../profiles/huang2012.toml")),
    (
        "powertutor-nexus-one",
        include_str!("../profiles/powertutor-nexus-one.toml"),
    ),
    (
        "powertutor-htc-dream",
        include_str!("../profiles/powertutor-htc-dream.toml"),
    ),
    ("aro-3g", include_str!("../profiles/aro-3g.toml")),
    ("5g", include_str!("../profiles/5g.toml")),
];

/// A built-in profile by name (`huang2012/lte`), or every radio of a profile file (a path
/// ending in `.toml`) whose radio is named after `#` (`my.toml#lte`).
pub fn profile(name: &str) -> Result<RadioProfile, ProfileError> {
    let (file, radio) = name.rsplit_once(['/', '#']).ok_or_else(|| ProfileError {
        file: name.into(),
        line: None,
        what: "expected SOURCE/RADIO (e.g. huang2012/lte) or FILE.toml#RADIO".into(),
    })?;
    let all = if file.ends_with(".toml") {
        load(Path::new(file))?
    } else {
        let (_, text) = BUILT_IN
            .iter()
            .find(|(n, _)| *n == file)
            .ok_or_else(|| ProfileError {
                file: file.into(),
                line: None,
                what: format!(
                    "no such built-in profile (built in: {})",
                    BUILT_IN.map(|b| b.0).join(", ")
                ),
            })?;
        parse(text, file)?
    };
    let names: Vec<String> = all.iter().map(|p| p.name.clone()).collect();
    all.into_iter()
        .find(|p| p.name.rsplit('/').next() == Some(radio))
        .ok_or_else(|| ProfileError {
            file: file.into(),
            line: None,
            what: format!("no radio `{radio}` (it has: {})", names.join(", ")),
        })
}

/// Every radio of the profile file at `path`.
pub fn load(path: &Path) -> Result<Vec<RadioProfile>, ProfileError> {
    let at = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ProfileError {
        file: at.clone(),
        line: None,
        what: e.to_string(),
    })?;
    let stem = path
        .file_stem()
        .map_or("profile".into(), |s| s.to_string_lossy().into_owned());
    parse(&text, &stem).map_err(|e| ProfileError { file: at, ..e })
}

/// Every radio of a profile file's `text`; `source_name` prefixes the radios' names and names
/// the file in errors.
///
/// Two steps: the TOML is read into the file's layout ([`read_file`]: syntax, unknown keys,
/// missing keys, at least one radio), then each radio's constants are checked and converted
/// ([`radio_profile`]), the first error ending the parse. Errors name the line wherever the
/// TOML reader reports a position (a value's line for a bad constant).
pub fn parse(text: &str, source_name: &str) -> Result<Vec<RadioProfile>, ProfileError> {
    let line_of = |offset: usize| text[..offset.min(text.len())].lines().count().max(1);
    let err = |line: Option<usize>, what: String| ProfileError {
        file: source_name.into(),
        line,
        what,
    };
    let file = read_file(text, &line_of, &err)?;
    file.radio
        .iter()
        .map(|r| radio_profile(r, &file.source, source_name, &line_of, &err))
        .collect()
}

/// The file's TOML as its layout ([`File`]): a syntax error, an unknown key (a misspelt one
/// would otherwise be silently ignored) or a missing one is an error at the line the TOML
/// reader names, and a file without a `[[radio]]` is an error too.
fn read_file(
    text: &str,
    line_of: &dyn Fn(usize) -> usize,
    err: &dyn Fn(Option<usize>, String) -> ProfileError,
) -> Result<File, ProfileError> {
    let file: File = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| line_of(s.start + 1));
        err(line, e.message().to_string())
    })?;
    if file.radio.is_empty() {
        return Err(err(None, "no [[radio]]".into()));
    }
    Ok(file)
}

/// One radio of the file, `source_name/radio` by name, its constants checked in the file's
/// order (so that the reconstructed ones are listed in that order): the promotion, the active
/// power and its throughput terms, the idle power, the packet rate, the tail, the small-packet
/// rule. Optional throughput terms and idle power default to 0.
fn radio_profile(
    r: &FileRadio,
    source: &str,
    source_name: &str,
    line_of: &dyn Fn(usize) -> usize,
    err: &dyn Fn(Option<usize>, String) -> ProfileError,
) -> Result<RadioProfile, ProfileError> {
    let mut c = Checker {
        reconstructed: Vec::new(),
        line_of,
        err,
        radio: &r.name,
    };
    let promotion = promotion(&mut c, r)?;
    let active = Milliwatts(c.value("active_mw", &r.active_mw)?);
    let up = c
        .optional("up_mw_per_mbps", &r.up_mw_per_mbps)?
        .unwrap_or(0.0);
    let down = c
        .optional("down_mw_per_mbps", &r.down_mw_per_mbps)?
        .unwrap_or(0.0);
    let idle = Milliwatts(c.optional("idle_mw", &r.idle_mw)?.unwrap_or(0.0));
    let active_pps = c.optional("active_pps", &r.active_pps)?;
    let tail = tail_phases(&mut c, r)?;
    let small = small_packets(&mut c, r, &tail)?;
    Ok(RadioProfile {
        name: format!("{source_name}/{}", r.name),
        network: r.network,
        source: source.to_string(),
        promotion,
        active,
        up_mw_per_mbps: up,
        down_mw_per_mbps: down,
        idle,
        active_pps,
        small,
        tail,
        reconstructed: c.reconstructed,
    })
}

/// An error about the radio's `key` that the TOML reader gives no position for (a rule
/// between keys, not one value).
fn radio_error(c: &Checker, key: &str, what: &str) -> ProfileError {
    (c.err)(None, format!("radio `{}`: {key}: {what}", c.radio))
}

/// The promotion out of idle, a power and a duration given together: a radio either has one
/// (LTE, 3G) or not (WiFi), and half of one is a mistake in the file.
fn promotion(
    c: &mut Checker,
    r: &FileRadio,
) -> Result<Option<(Milliwatts, Duration)>, ProfileError> {
    Ok(match (&r.promotion_mw, &r.promotion_ms) {
        (Some(p), Some(d)) => Some((
            Milliwatts(c.value("promotion_mw", p)?),
            c.millis("promotion_ms", d)?,
        )),
        (None, None) => None,
        _ => {
            return Err(radio_error(
                c,
                "promotion_mw, promotion_ms",
                "give both or neither",
            ))
        }
    })
}

/// The tail phases, highest first as the file lists them; at least one, since every radio
/// lingers in a higher state after its last packet. A phase's constants are named by its
/// index and name in errors (`tail[1] (FACH).mw`).
fn tail_phases(c: &mut Checker, r: &FileRadio) -> Result<Vec<Phase>, ProfileError> {
    if r.tail.is_empty() {
        return Err(radio_error(c, "tail", "no [[radio.tail]] phase"));
    }
    let mut tail = Vec::new();
    for (i, p) in r.tail.iter().enumerate() {
        let k = |f: &str| format!("tail[{i}] ({}).{f}", p.name);
        tail.push(Phase {
            name: p.name.clone(),
            power: Milliwatts(c.value(&k("mw"), &p.mw)?),
            duration: c.millis(&k("ms"), &p.ms)?,
        });
    }
    Ok(tail)
}

/// The small-packet rule, if the radio has one: the thresholds, and the tail phase such a
/// packet enters, which the file names and which must be one of `tail`'s (checked before the
/// thresholds).
fn small_packets(
    c: &mut Checker,
    r: &FileRadio,
    tail: &[Phase],
) -> Result<Option<SmallPackets>, ProfileError> {
    let Some(s) = &r.small_packet else {
        return Ok(None);
    };
    let enters = tail
        .iter()
        .position(|p| p.name == s.enters)
        .ok_or_else(|| {
            radio_error(
                c,
                "small_packet.enters",
                &format!("`{}` is not a tail phase's name", s.enters),
            )
        })?;
    Ok(Some(SmallPackets {
        up: Bytes(c.value("small_packet.up_bytes", &s.up_bytes)? as u64),
        down: Bytes(c.value("small_packet.down_bytes", &s.down_bytes)? as u64),
        enters,
    }))
}

/// Checks a radio's constants as they are read, and notes the reconstructed ones.
struct Checker<'a> {
    reconstructed: Vec<String>,
    line_of: &'a dyn Fn(usize) -> usize,
    err: &'a dyn Fn(Option<usize>, String) -> ProfileError,
    radio: &'a str,
}

impl Checker<'_> {
    /// The value of constant `key`: a finite number, not negative.
    fn value(&mut self, key: &str, c: &Spanned<Constant>) -> Result<f64, ProfileError> {
        let v = c.get_ref().value;
        if !v.is_finite() || v < 0.0 {
            return Err((self.err)(
                Some((self.line_of)(c.span().start + 1)),
                format!(
                    "radio `{}`: {key}: {v} (must be a number of at least 0)",
                    self.radio
                ),
            ));
        }
        if c.get_ref().status == Status::R {
            self.reconstructed.push(key.to_string());
        }
        Ok(v)
    }

    /// The value of constant `key` read as milliseconds: as [`Self::value`], and short
    /// enough for a `Duration`.
    fn millis(&mut self, key: &str, c: &Spanned<Constant>) -> Result<Duration, ProfileError> {
        let v = self.value(key, c)?;
        roam_core::seconds(v / 1e3).ok_or_else(|| {
            (self.err)(
                Some((self.line_of)(c.span().start + 1)),
                format!("radio `{}`: {key}: {v} ms is too long", self.radio),
            )
        })
    }

    fn optional(
        &mut self,
        key: &str,
        c: &Option<Spanned<Constant>>,
    ) -> Result<Option<f64>, ProfileError> {
        c.as_ref().map(|c| self.value(key, c)).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_profile_parses() {
        for (name, text) in BUILT_IN {
            let radios = parse(text, name).unwrap_or_else(|e| panic!("{e}"));
            assert!(!radios.is_empty(), "{name}");
        }
        let lte = profile("huang2012/lte").unwrap();
        assert_eq!(lte.network, NetworkKind::Lte);
        assert_eq!(lte.promotion.unwrap().1, Duration::from_micros(260_100));
        assert!(lte.label().starts_with("modelled (huang2012/lte"));
        let g3 = profile("huang2012/3g").unwrap();
        assert!(
            g3.label().contains("reconstructed constants: promotion_mw"),
            "{}",
            g3.label()
        );
    }

    #[test]
    fn a_malformed_profile_names_the_file_the_line_and_the_key() {
        let base = "source = \"s\"\n[[radio]]\nname = \"x\"\nnetwork = \"lte\"\n";
        let tail = "[[radio.tail]]\nname = \"t\"\nmw = { value = 1.0, status = \"V\" }\nms = { value = 10.0, status = \"V\" }\n";
        let cases = [
            (
                format!("{base}active_mw = {{ value = -5.0, status = \"V\" }}\n{tail}"),
                "f:5: radio `x`: active_mw: -5",
            ),
            (
                format!("{base}active_mw = {{ value = 5.0, status = \"X\" }}\n{tail}"),
                "f:5:",
            ),
            (
                format!("{base}active_mw = {{ value = 5.0, status = \"V\" }}\n"),
                "missing field `tail`",
            ),
            (
                format!("{base}active_mw = {{ value = 5.0, status = \"V\" }}\npromotion_mw = {{ value = 5.0, status = \"V\" }}\n{tail}"),
                "give both or neither",
            ),
            (
                format!("{base}active_mw = {{ value = 5.0, status = \"V\" }}\nactve = 1\n{tail}"),
                "unknown field `actve`",
            ),
            (
                format!("{base}active_mw = {{ value = 5.0, status = \"V\" }}\nsmall_packet = {{ up_bytes = {{ value = 1.0, status = \"V\" }}, down_bytes = {{ value = 1.0, status = \"V\" }}, enters = \"FACH\" }}\n{tail}"),
                "small_packet.enters: `FACH` is not a tail phase",
            ),
        ];
        for (text, want) in cases {
            let e = parse(&text, "f").unwrap_err().to_string();
            assert!(e.contains(want), "want `{want}` in: {e}\n{text}");
        }
        let e = profile("huang2012/lte5").unwrap_err().to_string();
        assert!(
            e.contains("no radio `lte5`") && e.contains("huang2012/wifi"),
            "{e}"
        );
        let e = profile("nowhere/lte").unwrap_err().to_string();
        assert!(e.contains("no such built-in profile"), "{e}");
        let e = profile("/nonexistent/p.toml#lte").unwrap_err().to_string();
        assert!(e.starts_with("/nonexistent/p.toml"), "{e}");
    }
}
