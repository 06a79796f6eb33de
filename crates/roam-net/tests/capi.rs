//! The C ABI: build `examples/c/ms_echo.c` against `include/roam_net.h` and the static library,
//! and run it, plain and with TLS. Skips with a one-line reason when no C compiler is installed.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn c_example_builds_and_runs() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    // target/<profile>/deps/capi-<hash> -> target/<profile>
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().unwrap().parent().unwrap().to_path_buf();
    // The test harness links the rlib; build the static library the C program links.
    let mut build = Command::new(env!("CARGO"));
    build
        .args(["build", "-q", "-p", "roam-net", "--lib"])
        .env("CARGO_TARGET_DIR", profile_dir.parent().unwrap());
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        build.arg("--release");
    }
    assert!(
        build.status().unwrap().success(),
        "building libroam_net.a failed"
    );
    let lib = profile_dir.join("libroam_net.a");
    assert!(lib.exists(), "{} missing after the build", lib.display());
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    if Command::new(&cc).arg("--version").output().is_err() {
        eprintln!("skipped: no C compiler ({cc})");
        return;
    }
    let out = std::env::temp_dir().join(format!("ms_echo-{}", std::process::id()));
    let status = Command::new(&cc)
        .args([
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-D_GNU_SOURCE",
            "-o",
        ])
        .arg(&out)
        .arg(root.join("examples/c/ms_echo.c"))
        .arg("-I")
        .arg(root.join("include"))
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm", "-lrt", "-lgcc_s", "-lc"])
        .status()
        .unwrap();
    assert!(status.success(), "compiling the C example failed");
    // Plain, then with TLS under a fresh self-signed certificate for roam.test.
    let pki = rcgen::generate_simple_self_signed(vec!["roam.test".to_string()]).unwrap();
    let cert = out.with_extension("cert.pem");
    let key = out.with_extension("key.pem");
    std::fs::write(&cert, pki.cert.pem()).unwrap();
    std::fs::write(&key, pki.signing_key.serialize_pem()).unwrap();
    let plain = Command::new(&out).output().unwrap();
    let tls = Command::new(&out).arg(&cert).arg(&key).output().unwrap();
    for f in [&out, &cert, &key] {
        let _ = std::fs::remove_file(f);
    }
    for (run, want) in [(plain, "ok: bulk 1 request 1"), (tls, ", TLS")] {
        let stdout = String::from_utf8_lossy(&run.stdout);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(run.status.success(), "C example failed: {stdout}{stderr}");
        assert!(stdout.contains(want), "{stdout}{stderr}");
    }
}
