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

/// A prefetcher's handle passed where a hint is expected (`imp_cancel`), or a hint's where a
/// prefetcher is (`imp_close`): EBADF, and the handle stays as it was. (Before, `imp_cancel` on
/// a prefetcher took it out of the table before finding it was not a hint: the prefetcher was
/// closed, and every later call on it failed.)
#[test]
fn a_handle_of_the_wrong_kind_is_refused_and_left_open() {
    use roam_net::capi::*;
    use roam_prefetch::capi::*;
    use std::ffi::CString;
    let host = CString::new("127.0.0.1").unwrap();
    let l = ms_socket();
    assert_eq!(ms_listen(l, host.as_ptr(), 0), 0);
    let port = ms_local_port(l) as u16;
    let server = std::thread::spawn(move || ms_accept(l));
    let c = ms_socket();
    assert_eq!(ms_connect(c, host.as_ptr(), port), 0);
    let s = server.join().unwrap();
    let ifaces = CString::new("lo=huang2012/wifi").unwrap();
    // SAFETY: a NUL-terminated string.
    let imp = unsafe { imp_new(c, ifaces.as_ptr(), 0.0, 0.0, 0.0, 0.0) };
    assert!(imp > 0, "imp_new failed");
    unsafe extern "C" fn fetch(
        _arg: *mut std::ffi::c_void,
        _label: i32,
        item: *mut *mut std::ffi::c_void,
        len: *mut usize,
    ) -> i32 {
        // SAFETY: IMP passes valid out pointers; the item is malloc'ed as documented.
        unsafe {
            *item = libc::malloc(1);
            *len = 1;
        }
        0
    }
    let errno = || std::io::Error::last_os_error().raw_os_error();
    assert_eq!(imp_cancel(imp), -1);
    assert_eq!(errno(), Some(libc::EBADF));
    let hint = imp_prefetch(imp, Some(fetch), std::ptr::null_mut());
    assert!(
        hint > 0,
        "the prefetcher was closed by imp_cancel on its handle"
    );
    assert_eq!(imp_close(hint), -1);
    assert_eq!(errno(), Some(libc::EBADF));
    assert_eq!(
        imp_cancel(hint),
        0,
        "the hint was dropped by imp_close on its handle"
    );
    assert_eq!(imp_close(imp), 0);
    let _ = ms_close(c, 0);
    let _ = ms_close(s, 0);
    let _ = ms_close(l, 0);
}
