//! Fuzz baseline files (`roam_emu::baseline_file::load`, the TOML `--baseline FILE.toml`
//! reads): arbitrary bytes give a baseline or a clean error, never a panic; a baseline it
//! accepts decides every whole number of seconds (at least one) and has a name that can name
//! a CSV column and a directory.
//!
//! `load` reads a path, so each input is written to a file of this process's first (and
//! removed after), under fuzz/target/scratch/ (a text entry point would spare that).
#![no_main]
use libfuzzer_sys::fuzz_target;
use roam_emu::baseline_file::load;
use std::path::PathBuf;
use std::sync::OnceLock;

fn file() -> &'static PathBuf {
    static FILE: OnceLock<PathBuf> = OnceLock::new();
    FILE.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/scratch");
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        dir.join(format!("baseline_file-{}.toml", std::process::id()))
    })
}

fuzz_target!(|data: &[u8]| {
    std::fs::write(file(), data).expect("the input is written");
    let loaded = load(file());
    // Removed at once: on ext4, rewriting a file in place flushes it at every close.
    let _ = std::fs::remove_file(file());
    let Ok(b) = loaded else {
        return;
    };
    let every = b.spec.decide_every;
    assert!(every.as_secs() >= 1 && every.subsec_nanos() == 0, "{every:?}");
    assert!(
        !b.name.is_empty() && !b.name.contains([',', '/', ' ']),
        "name {:?}",
        b.name
    );
});
