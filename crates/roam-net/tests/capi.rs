//! The C ABI: build `examples/c/ms_echo.c` against `include/roam_net.h` and the static library,
//! and run it, plain and with TLS. Skips with a one-line reason when no C compiler is installed.

use std::process::Command;

#[test]
fn c_example_builds_and_runs() {
    let Some(out) = roam_net::capi::build_c_program("roam-net", "examples/c/ms_echo.c").unwrap()
    else {
        return;
    };
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

/// The C ABI without waiting: `ms_send(.., MS_DONTWAIT, ..)` fails with EAGAIN instead of
/// waiting, and `ms_poll_fd`'s descriptor signals when the send can go again: while the peer
/// reads, and, once it has stopped and the sender is stuck (a second without a signal), as
/// soon as it reads again; `ms_writable` and the next non-blocking send agree.
#[test]
fn a_non_blocking_send_gets_eagain_and_poll_signals_when_it_can_go() {
    use roam_net::capi::*;
    use std::ffi::CString;
    const MS_DONTWAIT: i32 = 0x40;
    const FG_SMALL: i32 = 0; // MS_LABEL_FG_SMALL
    const BG_LARGE: i32 = 3; // MS_LABEL_BG_LARGE
    let host = CString::new("127.0.0.1").unwrap();
    let l = ms_socket();
    assert_eq!(ms_listen(l, host.as_ptr(), 0), 0);
    let port = ms_local_port(l) as u16;
    let client = std::thread::spawn(move || {
        let host = CString::new("127.0.0.1").unwrap();
        let c = ms_socket();
        assert_eq!(ms_connect(c, host.as_ptr(), port), 0);
        c
    });
    let s = ms_accept(l);
    assert!(s > 0);
    let c = client.join().unwrap();
    let fd = ms_poll_fd(c);
    let chunk = vec![7u8; 256 << 10];
    let mut sent = 0usize;
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // Send until EAGAIN; while the server still takes data (it reads until a window's worth
    // waits unread) the descriptor signals that the send can go again, and it does.
    let mut signals = 0;
    loop {
        // SAFETY: `chunk` is valid for its length; no thunk.
        let n = unsafe {
            ms_send(
                c,
                chunk.as_ptr().cast(),
                chunk.len(),
                MS_DONTWAIT,
                BG_LARGE,
                None,
                std::ptr::null_mut(),
            )
        };
        if n >= 0 {
            sent += n as usize;
            assert!(sent < 1 << 30, "{sent} bytes taken without EAGAIN");
            continue;
        }
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::EAGAIN)
        );
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut p, 1, 1000) } == 0 {
            if ms_writable(c, BG_LARGE) == 0 {
                break; // stuck: the server has stopped reading
            }
            // It became writable as the wait ended: the signal must follow at once.
            // SAFETY: as above.
            let late = unsafe { libc::poll(&mut p, 1, 1000) };
            assert_eq!(late, 1, "writable without a signal");
        }
        signals += 1;
    }
    // The server reads everything.
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 20];
        let mut got = 0;
        while got < sent {
            // SAFETY: `buf` is writable for its length; the out pointers may be NULL.
            let n = unsafe {
                ms_recv(
                    s,
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    0,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            };
            assert!(n > 0, "ms_recv: {n} after {got} of {sent}");
            got += n as usize;
        }
        s
    });
    // SAFETY: as above.
    assert_eq!(
        unsafe { libc::poll(&mut p, 1, 20_000) },
        1,
        "no signal once the peer read"
    );
    assert_eq!(ms_writable(c, BG_LARGE), 1);
    // SAFETY: as above.
    let n = unsafe {
        ms_send(
            c,
            chunk.as_ptr().cast(),
            1,
            MS_DONTWAIT,
            FG_SMALL,
            None,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(n, 1);
    let s = reader.join().unwrap();
    eprintln!("{sent} bytes sent without waiting, {signals} signals while the peer read");
    assert_eq!(ms_close(c, 5000), 0);
    let _ = ms_close(s, 1000);
    let _ = ms_close(l, 0);
}

/// `ms_recv(s, NULL, 0, ...)`: nothing is copied (a copy from a NULL buffer is undefined even
/// of nothing, and aborted a debug build's process), nothing is taken: it returns 0 and the
/// bytes come with the next call that has room for them.
#[test]
fn a_receive_into_no_buffer_takes_nothing() {
    use roam_net::capi::*;
    use std::ffi::CString;
    let host = CString::new("127.0.0.1").unwrap();
    let l = ms_socket();
    assert_eq!(ms_listen(l, host.as_ptr(), 0), 0);
    let port = ms_local_port(l) as u16;
    let client = std::thread::spawn(move || {
        let host = CString::new("127.0.0.1").unwrap();
        let c = ms_socket();
        assert_eq!(ms_connect(c, host.as_ptr(), port), 0);
        let msg = b"hello";
        // SAFETY: `msg` is valid for its length; no thunk.
        let n = unsafe {
            ms_send(
                c,
                msg.as_ptr().cast(),
                msg.len(),
                0,
                0,
                None,
                std::ptr::null_mut(),
            )
        };
        assert_eq!(n, 5);
        c
    });
    let s = ms_accept(l);
    assert!(s > 0);
    let c = client.join().unwrap();
    let (mut label, mut irob, mut end) = (-1, 0i64, -1);
    // SAFETY: NULL with length 0; valid out pointers.
    let n = unsafe {
        ms_recv(
            s,
            std::ptr::null_mut(),
            0,
            0,
            &mut label,
            &mut irob,
            &mut end,
        )
    };
    assert_eq!((n, label, end), (0, 0, 0));
    let mut buf = [0u8; 64];
    let mut irob2 = 0i64;
    // SAFETY: `buf` is writable for its length.
    let n = unsafe {
        ms_recv(
            s,
            buf.as_mut_ptr().cast(),
            buf.len(),
            0,
            &mut label,
            &mut irob2,
            &mut end,
        )
    };
    assert_eq!((&buf[..n.max(0) as usize], end), (&b"hello"[..], 1));
    assert_eq!(irob, irob2, "the same IROB both times");
    let _ = ms_close(c, 1000);
    let _ = ms_close(s, 0);
    let _ = ms_close(l, 0);
}
