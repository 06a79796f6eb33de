//! The C ABI: build `examples/c/imp_fetch.c` against `include/roam_prefetch.h` and the static
//! library, and run it. Skips with a one-line reason when no C compiler is installed.

use std::process::Command;

#[test]
fn c_example_builds_and_runs() {
    let Some(exe) =
        roam_net::capi::build_c_program("roam-prefetch", "examples/c/imp_fetch.c").unwrap()
    else {
        return;
    };
    let run = Command::new(&exe).output().unwrap();
    let _ = std::fs::remove_file(&exe);
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "C example failed: {stdout}{stderr}");
    assert!(stdout.starts_with("ok: "), "{stdout}{stderr}");
}
