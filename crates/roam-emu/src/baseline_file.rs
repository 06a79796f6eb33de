//! Baselines in files: a TOML file describes a one-link baseline derived from a scenario's
//! links, so a researcher can compare against a migration strategy other than the paper's
//! oracles wherever a built-in baseline name goes (`roam emu run --scenario S --baseline
//! FILE.toml`, `roam trace baseline --kind FILE.toml`, `roam lab in-paper --systems
//! roam,FILE.toml`).
//!
//! ```toml
//! name = "best-latency-reactive"   # optional; the file's stem otherwise
//! rule = "best-latency"            # best-latency, best-bandwidth or aggregation
//! decide_every = "5s"              # optional, whole seconds; the paper's: 1s
//! oracle = false                   # optional; false: each choice from the interval before
//! ```
//!
//! The built-in baselines are the paper's (an oracle choosing every second,
//! [`BaselineSpec::paper`]).

use std::path::Path;

use roam_core::parse_duration;
use roam_trace::baseline::{Baseline, BaselineSpec};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    name: Option<String>,
    rule: String,
    decide_every: Option<String>,
    oracle: Option<bool>,
}

/// A named baseline.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NamedBaseline {
    /// Its name in reports (a built-in's, or the file's).
    pub name: String,
    /// How it is derived.
    pub spec: BaselineSpec,
}

/// Whether `name` names a baseline file rather than a built-in baseline.
pub fn is_file(name: &str) -> bool {
    name.ends_with(".toml")
}

/// A built-in baseline by name (the paper's), or a baseline file (a name ending in `.toml`).
pub fn baseline(name: &str) -> Result<NamedBaseline, String> {
    if is_file(name) {
        return load(Path::new(name));
    }
    let rule = Baseline::parse(name).map_err(|e| e.to_string())?;
    Ok(NamedBaseline {
        name: rule.name().into(),
        spec: BaselineSpec::paper(rule),
    })
}

/// Read the baseline file at `path`.
pub fn load(path: &Path) -> Result<NamedBaseline, String> {
    let at = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{at}: {e}"))?;
    let file: File = toml::from_str(&text).map_err(|e| format!("{at}: {e}"))?;
    let rule = Baseline::parse(&file.rule).map_err(|e| format!("{at}: rule: {e}"))?;
    let decide_every = match &file.decide_every {
        None => std::time::Duration::from_secs(1),
        Some(d) => parse_duration(d).map_err(|e| format!("{at}: decide_every: {e}"))?,
    };
    if decide_every.is_zero() || decide_every.subsec_nanos() != 0 {
        return Err(format!(
            "{at}: decide_every: a whole number of seconds, at least 1 (not `{}`)",
            file.decide_every.unwrap_or_default()
        ));
    }
    let name = file.name.unwrap_or_else(|| {
        path.file_stem()
            .map_or("baseline".into(), |s| s.to_string_lossy().into_owned())
    });
    if name.is_empty() || name.contains([',', '/', ' ']) {
        return Err(format!(
            "{at}: name `{name}`: it names the baseline in CSV files and directories (no \
             commas, slashes or spaces)"
        ));
    }
    Ok(NamedBaseline {
        name,
        spec: BaselineSpec {
            rule,
            decide_every,
            oracle: file.oracle.unwrap_or(true),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn write(name: &str, text: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("roam-bl-{}-{name}", std::process::id()));
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn a_file_describes_a_baseline_and_built_ins_are_the_papers() {
        let p = write(
            "reactive.toml",
            "name = \"late\"\nrule = \"best-latency\"\ndecide_every = \"5s\"\noracle = false\n",
        );
        let b = baseline(p.to_str().unwrap()).unwrap();
        assert_eq!(b.name, "late");
        assert_eq!(
            b.spec,
            BaselineSpec {
                rule: Baseline::BestLatency,
                decide_every: Duration::from_secs(5),
                oracle: false
            }
        );
        std::fs::remove_file(p).ok();
        let p = write("agg.toml", "rule = \"aggregation\"\n");
        let b = baseline(p.to_str().unwrap()).unwrap();
        assert_eq!(b.name, format!("roam-bl-{}-agg", std::process::id()));
        assert_eq!(b.spec, BaselineSpec::paper(Baseline::Aggregation));
        std::fs::remove_file(p).ok();
        assert_eq!(
            baseline("best-bandwidth").unwrap().spec,
            BaselineSpec::paper(Baseline::BestBandwidth)
        );
    }

    #[test]
    fn a_bad_file_is_named_with_what_is_wrong() {
        for (name, text, want) in [
            ("norule.toml", "name = \"x\"\n", "missing field `rule`"),
            (
                "rule.toml",
                "rule = \"fastest\"\n",
                "rule: unknown baseline",
            ),
            (
                "every.toml",
                "rule = \"aggregation\"\ndecide_every = \"1.5s\"\n",
                "whole number of seconds",
            ),
            (
                "typo.toml",
                "rule = \"aggregation\"\norcale = true\n",
                "unknown field `orcale`",
            ),
            (
                "name.toml",
                "name = \"a,b\"\nrule = \"aggregation\"\n",
                "no commas",
            ),
        ] {
            let p = write(name, text);
            let e = baseline(p.to_str().unwrap()).unwrap_err();
            assert!(e.contains(want) && e.contains(name), "{name}: {e}");
            std::fs::remove_file(p).ok();
        }
        assert!(baseline("/nonexistent/b.toml")
            .unwrap_err()
            .contains("/nonexistent/b.toml"));
        assert!(baseline("oracle").is_err());
    }
}
