//! A real QEMU guest (`scripts/build-guest`): its dirty bitmap names exactly the disk chunks a
//! workload wrote, and its memory image brings the guest back as it was. Skips, saying why,
//! without QEMU or the guest (`./scripts/test` installs and builds both).

use std::collections::BTreeSet;
use std::path::Path;

use roam_store::vm::{parse_dirty_map, GuestKit, Vm};
use roam_store::CHUNK_SIZE;

fn kit() -> Option<GuestKit> {
    for tool in ["qemu-system-x86_64", "qemu-img"] {
        let found = std::env::var_os("PATH")
            .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()));
        if !found {
            eprintln!(
                "skipped: {tool} is not installed (apt-get install qemu-system-x86 qemu-utils)"
            );
            return None;
        }
    }
    match GuestKit::in_dir(&GuestKit::default_dir()) {
        Ok(k) => Some(k),
        Err(e) => {
            eprintln!("skipped: {e}");
            None
        }
    }
}

/// The chunks of `disk` that are not all zero.
fn written_chunks(disk: &Path) -> BTreeSet<u64> {
    let bytes = std::fs::read(disk).unwrap();
    bytes
        .chunks(CHUNK_SIZE)
        .enumerate()
        .filter(|(_, c)| c.iter().any(|&b| b != 0))
        .map(|(i, _)| i as u64)
        .collect()
}

#[test]
fn a_guest_suspends_with_its_dirty_chunks_and_resumes_as_it_was() {
    let Some(kit) = kit() else { return };
    let dir = std::env::temp_dir().join(format!("roam-vm-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (disk, memory, run) = (
        dir.join("disk.img"),
        dir.join("memory.img"),
        dir.join("run"),
    );
    std::fs::File::create(&disk)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();

    let mut vm = Vm::start(&kit, &disk, None, &run, 512).unwrap();
    vm.dirty(8, 3, 1).unwrap();
    let before = vm.checksum().unwrap();
    let dirty = vm.suspend(&memory).unwrap();
    let written = written_chunks(&disk);
    assert_eq!(written.len(), 24, "3 MiB written: 24 chunks of 128 KiB");
    assert_eq!(
        dirty, written,
        "the bitmap names exactly the chunks written"
    );
    let mem_len = std::fs::metadata(&memory).unwrap().len();
    assert!(
        mem_len > 8 << 20,
        "the memory image holds the 8 MB written ({mem_len})"
    );

    // Back from the memory image: the same memory and disk, and the bitmap starts afresh.
    let mut vm = Vm::start(&kit, &disk, Some(&memory), &run, 512).unwrap();
    assert_eq!(vm.checksum().unwrap(), before);
    vm.dirty(0, 1, 2).unwrap();
    let again = vm.suspend(&memory).unwrap();
    let now = written_chunks(&disk);
    assert_eq!(again.len(), 8, "1 MiB more: 8 chunks");
    assert!(again.is_subset(&now));
    assert_eq!(
        now.difference(&written).count() + written.intersection(&again).count(),
        8,
        "only the chunks of the second write are dirty the second time"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_second_guest_on_the_same_run_directory_is_refused() {
    let Some(kit) = kit() else { return };
    let dir = std::env::temp_dir().join(format!("roam-vm-test2-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let disk = dir.join("disk.img");
    std::fs::File::create(&disk)
        .unwrap()
        .set_len(8 << 20)
        .unwrap();
    let vm = Vm::start(&kit, &disk, None, &dir.join("run"), 256).unwrap();
    let e = Vm::start(&kit, &disk, None, &dir.join("run"), 256)
        .err()
        .expect("a second guest from the same directory");
    assert!(e.contains("already running"), "{e}");
    vm.kill();
    let e = Vm::start(
        &kit,
        &disk,
        Some(&dir.join("none.img")),
        &dir.join("run"),
        256,
    )
    .err()
    .expect("a missing memory image");
    assert!(e.contains("no memory image"), "got: {e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_dirty_map_is_read_from_qemu_img_output() {
    let out = r#"[{ "start": 0, "length": 44040192, "depth": 0, "present": true, "zero": false, "data": true, "offset": 0},
{ "start": 44040192, "length": 3145728, "depth": 0, "present": false, "zero": false, "data": false},
{ "start": 47185920, "length": 100, "depth": 0, "present": true, "zero": false, "data": true}]"#;
    let d = parse_dirty_map(out).unwrap();
    assert_eq!(d, (336..360).collect());
    assert!(parse_dirty_map("[{\"start\": 0}]")
        .unwrap_err()
        .contains("without"));
    assert!(parse_dirty_map("not json")
        .unwrap_err()
        .contains("bad JSON"));
}
