//! The lab's shape: dependencies point one way (nothing in the framework names a study), and
//! every registered study is whole (its defaults name its own applications and systems).

use std::path::Path;

use roam_lab::studies;

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn the_framework_imports_no_study() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    for part in ["harness", "report", "servers"] {
        sources(&src.join(part), &mut files);
    }
    assert!(files.len() > 10, "found only {files:?}");
    let mut found = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (i, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            if code.contains("studies::") || code.contains("studies;") {
                found.push(format!("{}:{}: {code}", f.display(), i + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "the framework names a study:\n{}",
        found.join("\n")
    );
}

#[test]
fn every_study_is_registered_whole() {
    let names = studies::names();
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        names.len(),
        "two studies share a name: {names:?}"
    );
    for study in studies::ALL {
        let apps: Vec<&str> = study.apps().iter().map(|a| a.name).collect();
        let d = study.defaults();
        for a in d.apps.iter().chain(&d.quick_apps) {
            assert!(
                apps.contains(&a.as_str()),
                "{}: default app {a} unknown",
                study.name()
            );
        }
        assert!(
            d.out.ends_with(study.name()),
            "{}: results in {}",
            study.name(),
            d.out
        );
        for quick in [false, true] {
            let systems = study.systems(quick);
            assert!(!systems.is_empty(), "{}: no systems", study.name());
            for s in systems {
                let back = study.system(s.name()).unwrap();
                assert_eq!(
                    back,
                    s,
                    "{}: {} does not parse back",
                    study.name(),
                    s.name()
                );
            }
        }
        assert!(study.system("no-such-system").is_err());
        assert!(!study.paper().is_empty());
    }
    assert!(studies::find("in-paper").is_ok());
    let e = match studies::find("nope") {
        Ok(s) => panic!("found {}", s.name()),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("in-paper, imp, meatballs, fasthla, horatio"),
        "{e}"
    );
}
