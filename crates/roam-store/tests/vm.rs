//! A real QEMU guest (`scripts/build-guest`): its dirty bitmap names exactly the disk chunks a
//! workload wrote, its RAM image and device state bring it back as it was, and new memory
//! changes few of the RAM image's chunks. Skips, saying why,
//! without QEMU or the guest (`./scripts/test` installs and builds both).

use std::collections::BTreeSet;
use std::path::Path;

use roam_store::vm::{parse_dirty_map, GuestKit, Images, Vm};
use roam_store::CHUNK_SIZE;

fn kit() -> Option<GuestKit> {
    GuestKit::available()
        .map_err(|e| eprintln!("skipped: {e}"))
        .ok()
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
    let (disk, ram, state, run) = (
        dir.join("disk.img"),
        dir.join("memory.img"),
        dir.join("state.img"),
        dir.join("run"),
    );
    std::fs::File::create(&disk)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let images = Images {
        disk: &disk,
        ram: &ram,
        state: &state,
    };

    let mut vm = Vm::start(&kit, images, &run, 512).unwrap();
    vm.dirty(8, 3, 1).unwrap();
    let before = vm.checksum().unwrap();
    let dirty = vm.suspend(&state).unwrap();
    let written = written_chunks(&disk);
    assert_eq!(written.len(), 24, "3 MiB written: 24 chunks of 128 KiB");
    assert_eq!(
        dirty, written,
        "the bitmap names exactly the chunks written"
    );
    assert_eq!(std::fs::metadata(&ram).unwrap().len(), 512 << 20);
    let state_len = std::fs::metadata(&state).unwrap().len();
    assert!(
        state_len < 4 << 20,
        "the device state leaves the RAM out ({state_len})"
    );
    let ram1 = chunk_hashes(&ram);

    // Back from the saved RAM and state: the same memory and disk, and the bitmap starts
    // afresh. 1 MB more memory changes few of the RAM image's chunks (the delta).
    let mut vm = Vm::start(&kit, images, &run, 64).unwrap();
    assert_eq!(vm.checksum().unwrap(), before);
    vm.dirty(1, 1, 2).unwrap();
    let again = vm.suspend(&state).unwrap();
    let now = written_chunks(&disk);
    assert_eq!(again.len(), 8, "1 MiB more: 8 chunks");
    assert!(again.is_subset(&now));
    assert_eq!(
        now.difference(&written).count() + written.intersection(&again).count(),
        8,
        "only the chunks of the second write are dirty the second time"
    );
    let ram2 = chunk_hashes(&ram);
    let changed = ram1.iter().zip(&ram2).filter(|(a, b)| a != b).count();
    assert!(
        changed > 8 && changed < ram1.len() / 4,
        "{changed} of {} RAM chunks changed for 1 MB of new data",
        ram1.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Each chunk's hash.
fn chunk_hashes(f: &Path) -> Vec<[u8; 32]> {
    std::fs::read(f)
        .unwrap()
        .chunks(CHUNK_SIZE)
        .map(|c| *blake3::hash(c).as_bytes())
        .collect()
}

#[test]
fn a_second_guest_on_the_same_run_directory_is_refused() {
    let Some(kit) = kit() else { return };
    let dir = std::env::temp_dir().join(format!("roam-vm-test2-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (disk, ram, state) = (
        dir.join("disk.img"),
        dir.join("memory.img"),
        dir.join("state.img"),
    );
    std::fs::File::create(&disk)
        .unwrap()
        .set_len(8 << 20)
        .unwrap();
    let images = Images {
        disk: &disk,
        ram: &ram,
        state: &state,
    };
    let vm = Vm::start(&kit, images, &dir.join("run"), 256).unwrap();
    let e = Vm::start(&kit, images, &dir.join("run"), 256)
        .err()
        .expect("a second guest from the same directory")
        .to_string();
    assert!(e.contains("already running"), "{e}");
    vm.kill();
    // A saved state without its RAM image.
    std::fs::write(&state, b"state").unwrap();
    std::fs::remove_file(&ram).unwrap();
    let e = Vm::start(&kit, images, &dir.join("run"), 256)
        .err()
        .expect("a missing RAM image")
        .to_string();
    assert!(e.contains("the RAM image of a saved guest"), "got: {e}");
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
        .to_string()
        .contains("without"));
    assert!(parse_dirty_map("not json")
        .unwrap_err()
        .to_string()
        .contains("bad JSON"));
}
