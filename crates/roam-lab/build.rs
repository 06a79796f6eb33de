//! Stamps the lab with the source it was built from (`ROAM_VERSION`: `git describe --always
//! --dirty`, or `unknown` outside a Git checkout), so a report says what it measured and
//! `roam lab in-paper --resume` adds trials only to a run of the same code.
//!
//! The script reruns when anything under `crates/` changes (Cargo scans a directory given to
//! `rerun-if-changed` recursively) or the Git index or HEAD moves; an edit elsewhere (docs)
//! does not restamp, which is right for what the stamp is for: the code that ran.

use std::path::Path;
use std::process::Command;

fn git(root: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    println!("cargo:rerun-if-changed={}", root.join("crates").display());
    if let Some(dir) = git(&root, &["rev-parse", "--absolute-git-dir"]) {
        for f in ["HEAD", "index"] {
            println!(
                "cargo:rerun-if-changed={}",
                Path::new(&dir).join(f).display()
            );
        }
    }
    let version = git(&root, &["describe", "--always", "--dirty", "--abbrev=12"])
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=ROAM_VERSION={version}");
}
