//! Scenarios in files: a TOML file names a set of links in the `--link` syntax, so that a
//! researcher's own place or drive runs wherever a built-in scenario name does
//! (`roam emu run --scenario FILE.toml`, `roam lab in-paper --scenarios FILE.toml`).
//!
//! ```toml
//! name = "campus"            # optional; the file's stem otherwise
//! [[link]]
//! spec = "wifi=rate=20mbit,delay=5ms,onoff=cabernet"
//! kind = "wifi"              # optional: wifi, cellular or other (onoff=cabernet means wifi)
//! [[link]]
//! spec = "cell=down=../shared/traces/cellular/Verizon-LTE-short.down,up=../shared/traces/cellular/Verizon-LTE-short.up,delay=40ms"
//! kind = "cellular"
//! ```
//!
//! Relative trace paths are taken from where the command runs. A link's `seed=` fixes its
//! random parts; without one they follow the run's seed (a trial's, in the lab), as the
//! built-in scenarios' do. A link's `queue=` is not part of a scenario: the emulator's command
//! line or the lab sets the queue.

use std::path::Path;

use roam_trace::link::{LinkKind, NamedLink};
use roam_trace::scenario::Scenario;
use serde::Deserialize;

use crate::spec::parse_link;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    name: Option<String>,
    #[serde(rename = "link")]
    links: Vec<FileLink>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileLink {
    spec: String,
    kind: Option<String>,
}

/// Whether `name` names a scenario file rather than a built-in scenario.
pub fn is_file(name: &str) -> bool {
    name.ends_with(".toml")
}

/// A built-in scenario by name, or a scenario file (a name ending in `.toml`), with `seed`
/// for the random parts its links do not fix.
pub fn scenario(name: &str, seed: u64) -> Result<Scenario, String> {
    if is_file(name) {
        load(Path::new(name), seed)
    } else {
        Scenario::by_name(name, seed).map_err(|e| e.to_string())
    }
}

/// Read the scenario file at `path`.
pub fn load(path: &Path, seed: u64) -> Result<Scenario, String> {
    let at = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{at}: {e}"))?;
    let file: File = toml::from_str(&text).map_err(|e| format!("{at}: {e}"))?;
    if file.links.is_empty() {
        return Err(format!("{at}: no [[link]]"));
    }
    let mut links = Vec::new();
    for (i, l) in file.links.iter().enumerate() {
        let c = parse_link(&l.spec, seed.wrapping_add(i as u64))
            .map_err(|e| format!("{at}: link {}: {e}", i + 1))?;
        if links.iter().any(|x: &NamedLink| x.name == c.name) {
            return Err(format!(
                "{at}: link {}: the name `{}` is used twice",
                i + 1,
                c.name
            ));
        }
        let kind = match l.kind.as_deref() {
            None => c.kind,
            Some("wifi") => LinkKind::Wifi,
            Some("cellular") => LinkKind::Cellular,
            Some("other") => LinkKind::Other,
            Some(k) => {
                return Err(format!(
                    "{at}: link {}: kind `{k}` (expected wifi, cellular or other)",
                    i + 1
                ))
            }
        };
        links.push(NamedLink {
            name: c.name,
            kind,
            trace: c.trace,
        });
    }
    let name = file.name.unwrap_or_else(|| {
        path.file_stem()
            .map_or("scenario".into(), |s| s.to_string_lossy().into_owned())
    });
    Ok(Scenario { name, links })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, text: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("roam-scn-{}-{name}", std::process::id()));
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn a_file_gives_links_as_the_link_syntax_does() {
        let p = write(
            "campus.toml",
            r#"
[[link]]
spec = "wifi=rate=20mbit,delay=5ms,onoff=cabernet"
[[link]]
spec = "cell=rate=2mbit,delay=40ms,loss=0.01"
kind = "cellular"
"#,
        );
        let s = scenario(p.to_str().unwrap(), 3).unwrap();
        assert_eq!(s.name, format!("roam-scn-{}-campus", std::process::id()));
        assert_eq!(s.links.len(), 2);
        assert_eq!(
            (s.links[0].name.as_str(), s.links[0].kind),
            ("wifi", LinkKind::Wifi)
        );
        assert_eq!(s.links[1].kind, LinkKind::Cellular);
        assert_eq!(s.links[1].trace.loss, 0.01);
        // The run's seed drives the on/off schedule, as for the built-in scenarios.
        let again = scenario(p.to_str().unwrap(), 3).unwrap();
        let other = scenario(p.to_str().unwrap(), 4).unwrap();
        assert_eq!(s.links[0].trace, again.links[0].trace);
        assert_ne!(s.links[0].trace, other.links[0].trace);
        std::fs::remove_file(p).ok();
        assert_eq!(scenario("hotspot", 1).unwrap().links.len(), 2);
    }

    #[test]
    fn a_bad_file_is_named_with_what_is_wrong() {
        let cases = [
            ("empty.toml", "name = \"x\"\n", "missing field `link`"),
            ("nolinks.toml", "link = []\n", "no [[link]]"),
            (
                "typo.toml",
                "[[link]]\nspec = \"a=rate=1mbit\"\nknd = \"wifi\"\n",
                "unknown field `knd`",
            ),
            (
                "badspec.toml",
                "[[link]]\nspec = \"a=rate=fast\"\n",
                "link 1: --link a=rate=fast",
            ),
            (
                "twice.toml",
                "[[link]]\nspec = \"a=rate=1mbit\"\n[[link]]\nspec = \"a=rate=2mbit\"\n",
                "`a` is used twice",
            ),
            (
                "kind.toml",
                "[[link]]\nspec = \"a=rate=1mbit\"\nkind = \"lte\"\n",
                "kind `lte`",
            ),
        ];
        for (name, text, want) in cases {
            let p = write(name, text);
            let e = scenario(p.to_str().unwrap(), 1).unwrap_err();
            assert!(e.contains(want) && e.contains(name), "{name}: {e}");
            std::fs::remove_file(p).ok();
        }
        assert!(scenario("/nonexistent/x.toml", 1)
            .unwrap_err()
            .contains("/nonexistent/x.toml"));
        assert!(scenario("nowhere", 1).is_err());
    }
}
