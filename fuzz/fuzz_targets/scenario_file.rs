//! Fuzz scenario files (`roam_emu::scenario_file::load`, the TOML `--scenario FILE.toml`
//! reads, each link in the `--link` syntax of `roam_emu::spec::parse_link`): arbitrary bytes
//! give a scenario or a clean error, never a panic; a scenario it accepts has at least one
//! link and no name twice.
//!
//! `load` reads a path, so each input is written to a file of this process's first (and
//! removed after), under fuzz/target/scratch/ (a text entry point would spare that). A link's
//! keys name trace files that are read; inputs that could name a file outside the working
//! directory (a `/`, or a TOML `\u`/`\U` escape that could spell one) are left out, so that
//! the fuzzer never reads `/dev/zero` or waits on `/dev/stdin`.
#![no_main]
use libfuzzer_sys::fuzz_target;
use roam_emu::scenario_file::load;
use std::path::PathBuf;
use std::sync::OnceLock;

fn file() -> &'static PathBuf {
    static FILE: OnceLock<PathBuf> = OnceLock::new();
    FILE.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/scratch");
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        dir.join(format!("scenario_file-{}.toml", std::process::id()))
    })
}

fuzz_target!(|data: &[u8]| {
    if data.contains(&b'/') || data.windows(2).any(|w| w == b"\\u" || w == b"\\U") {
        return;
    }
    std::fs::write(file(), data).expect("the input is written");
    let loaded = load(file(), 7);
    // Removed at once: on ext4, rewriting a file in place flushes it at every close.
    let _ = std::fs::remove_file(file());
    let Ok(s) = loaded else {
        return;
    };
    assert!(!s.links.is_empty(), "a scenario has a link");
    for (i, l) in s.links.iter().enumerate() {
        assert!(
            s.links[..i].iter().all(|x| x.name != l.name),
            "link name {} twice",
            l.name
        );
    }
});
