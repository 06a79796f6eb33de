//! The trees and rules on disk: the user's data directory, private files written whole.
//!
//! What Precog records is a browsing history, so both files are written as secrets are
//! (`roam_store::files::write_private`: mode 0600, a temporary synced and renamed, so a crash
//! leaves the old file or the new one, never half of one) and read back only if no one else
//! may read them. A file that does not parse, or that another version of roam wrote, is
//! refused with an error naming it; it is never overwritten silently.

use crate::allowance::Allowance;
use crate::forest::Forest;
use crate::rules::Rules;
use roam_store::files::{read_private_json, write_private};
use roam_store::StoreError;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The format version of `forest.json` and `rules.json`.
pub const VERSION: u32 = 1;

/// Why the state could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// Reading or writing a file failed, or it does not parse.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A file of another format version.
    #[error("{path}: format version {found}, this roam reads {VERSION} (move the file away to start afresh)")]
    Version {
        /// The file.
        path: PathBuf,
        /// The version it holds.
        found: u32,
    },
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File<T> {
    version: u32,
    #[serde(flatten)]
    body: T,
}

#[derive(Serialize, Deserialize)]
struct ForestBody {
    forest: Forest,
}

#[derive(Serialize, Deserialize)]
struct RulesBody {
    rules: Rules,
}

#[derive(Serialize, Deserialize)]
struct AllowanceBody {
    allowance: Allowance,
}

/// Precog's directory: `forest.json` (the action trees), `rules.json` (the user's rules) and
/// `allowance.json` (what replays may spend a day, and what today's spent).
#[derive(Clone, Debug)]
pub struct State {
    dir: PathBuf,
}

impl State {
    /// The state kept in `dir` (created, mode 0700, at the first save).
    pub fn new(dir: impl Into<PathBuf>) -> State {
        State { dir: dir.into() }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn read<T: for<'de> Deserialize<'de>>(
        &self,
        name: &str,
        what: &'static str,
    ) -> Result<Option<T>, StateError> {
        let path = self.dir.join(name);
        // The version is read first, so that another version's file is named as such rather
        // than as corrupt.
        let Some(v) = read_private_json::<serde_json::Value>(&path, what)? else {
            return Ok(None);
        };
        let found = v.get("version").and_then(|x| x.as_u64()).unwrap_or(0) as u32;
        if found != VERSION {
            return Err(StateError::Version { path, found });
        }
        let f: File<T> = read_private_json(&path, what)?.expect("read just above");
        Ok(Some(f.body))
    }

    fn write<T: Serialize>(&self, name: &str, body: T) -> Result<(), StateError> {
        let bytes = serde_json::to_vec(&File {
            version: VERSION,
            body,
        })
        .expect("the state serializes");
        write_private(&self.dir.join(name), &bytes)?;
        Ok(())
    }

    /// The action trees (empty if none were saved yet).
    pub fn forest(&self) -> Result<Forest, StateError> {
        Ok(self
            .read::<ForestBody>("forest.json", "Precog's action trees")?
            .map(|b| b.forest)
            .unwrap_or_default())
    }

    /// Save the action trees.
    pub fn save_forest(&self, forest: &Forest) -> Result<(), StateError> {
        self.write(
            "forest.json",
            ForestBody {
                forest: forest.clone(),
            },
        )
    }

    /// The user's rules (the defaults if none were saved yet).
    pub fn rules(&self) -> Result<Rules, StateError> {
        Ok(self
            .read::<RulesBody>("rules.json", "Precog's rules")?
            .map(|b| b.rules)
            .unwrap_or_default())
    }

    /// Save the user's rules.
    pub fn save_rules(&self, rules: &Rules) -> Result<(), StateError> {
        self.write(
            "rules.json",
            RulesBody {
                rules: rules.clone(),
            },
        )
    }

    /// The replays' daily allowance (unbounded if none was saved yet).
    pub fn allowance(&self) -> Result<Allowance, StateError> {
        Ok(self
            .read::<AllowanceBody>("allowance.json", "Precog's replay allowance")?
            .map(|b| b.allowance)
            .unwrap_or_default())
    }

    /// Save the replays' daily allowance.
    pub fn save_allowance(&self, allowance: &Allowance) -> Result<(), StateError> {
        self.write(
            "allowance.json",
            AllowanceBody {
                allowance: allowance.clone(),
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::Path as ActionPath;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("roam-precog-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn round_trip_and_private() {
        let d = dir("rt");
        let s = State::new(&d);
        assert!(s.forest().unwrap().is_empty());
        let mut f = Forest::new();
        f.record(
            &ActionPath {
                root: "http://a.example/".into(),
                actions: vec![],
            },
            5,
        );
        s.save_forest(&f).unwrap();
        assert_eq!(s.forest().unwrap().sites, f.sites);
        let mut r = Rules::default();
        r.set_record("bank.example", false);
        s.save_rules(&r).unwrap();
        assert_eq!(s.rules().unwrap(), r);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(d.join("forest.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn corrupt_and_foreign_files_are_refused_by_name() {
        let d = dir("bad");
        let s = State::new(&d);
        s.save_rules(&Rules::default()).unwrap();
        let p = d.join("forest.json");
        std::fs::write(&p, b"{\"version\":1,\"forest\":{\"sites\":{\"a\":7}}}").unwrap();
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
        let e = s.forest().unwrap_err().to_string();
        assert!(e.contains("forest.json"), "{e}");
        std::fs::write(&p, b"{\"version\":9,\"forest\":{}}").unwrap();
        let e = s.forest().unwrap_err().to_string();
        assert!(e.contains("version 9"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// Not a test on its own: the writer `a_killed_writer_leaves_the_last_whole_forest` kills.
    /// With `ROAM_PRECOG_CRASH_DIR` set, it saves ever larger forests there until killed.
    #[test]
    fn crash_writer() {
        let Some(d) = std::env::var_os("ROAM_PRECOG_CRASH_DIR") else {
            return;
        };
        let s = State::new(PathBuf::from(d));
        let mut f = Forest::new();
        for i in 0u64.. {
            f.record(
                &ActionPath {
                    root: format!("http://a.example/{i}"),
                    actions: vec![],
                },
                i,
            );
            s.save_forest(&f).unwrap();
        }
    }

    #[test]
    fn a_killed_writer_leaves_the_last_whole_forest() {
        let d = dir("crash");
        for round in 0..3 {
            let mut child = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "store::tests::crash_writer", "--nocapture"])
                .env("ROAM_PRECOG_CRASH_DIR", &d)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            // Let it write a few hundred forests, then kill it wherever it is.
            std::thread::sleep(std::time::Duration::from_millis(400 + 150 * round));
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
            let f = State::new(&d)
                .forest()
                .unwrap_or_else(|e| panic!("round {round}: {e}"));
            let n = f.sites.get("a.example").map_or(0, |t| t.len());
            assert!(n > 0, "round {round}: nothing was saved in time");
            // Whole: every root from 0 to the last, as one save wrote them.
            let roots = &f.sites["a.example"];
            assert!((0..n).all(|i| roots.contains_key(&format!("http://a.example/{i}"))));
        }
        std::fs::remove_dir_all(&d).unwrap();
    }
}
