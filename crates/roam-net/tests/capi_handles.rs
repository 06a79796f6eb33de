//! The C ABI's IROB handles against a peer that picks its IROB ids: a received IROB's handle
//! never names another multi-socket's IROB. (This binary has one test: it relies on the
//! numbering of socket handles, which other tests would share.)

use std::ffi::CString;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::Bytes;
use roam_net::capi::*;
use roam_net::proto::wire::{Caps, Chunk, Decoder, Deps, Frame};
use roam_net::proto::Label;

fn read_frame(t: &mut TcpStream) -> Option<Frame> {
    let mut dec = Decoder::default();
    let mut buf = [0u8; 4096];
    t.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    loop {
        if let Ok(Some(f)) = dec.next_frame() {
            return Some(f);
        }
        match t.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => dec.push(&buf[..n]),
        }
    }
}

fn data(irob: u64, bytes: &'static [u8]) -> Vec<u8> {
    Frame::Data(Chunk {
        irob,
        label: Label::ForegroundSmall,
        offset: 0,
        deps: Some(Deps::List(vec![])),
        end: true,
        acks: vec![],
        data: Bytes::from_static(bytes),
    })
    .to_bytes()
}

/// Receive one IROB's bytes on `s`: the count (or -1) and its handle.
fn recv(s: MsSocket) -> (isize, i64) {
    let mut buf = [0u8; 64];
    let mut irob = 0i64;
    // SAFETY: `buf` is writable for its length; the other out pointers may be NULL.
    let n = unsafe {
        ms_recv(
            s,
            buf.as_mut_ptr().cast(),
            buf.len(),
            0,
            std::ptr::null_mut(),
            &mut irob,
            std::ptr::null_mut(),
        )
    };
    (n, irob)
}

/// A peer sends IROBs 0 and 1, then IROB 2^32 + 1. The handles of the first two name IROBs
/// received on this multi-socket: distinct, and refused by `ms_irob_send` (they are not ours
/// to send on). The third never becomes a handle of the next multi-socket's IROB 1, which an
/// `ms_irob_send` would then write into. (Before, a handle was `socket << 32 | id`, and the
/// id's bit 32 landed in the socket's bits: the handle was exactly the next socket's IROB 1,
/// and `ms_irob_send` on it wrote the peer's choice of bytes into that other multi-socket.)
#[test]
fn a_peer_chosen_irob_id_never_names_another_multi_socket() {
    let host = CString::new("127.0.0.1").unwrap();
    let l = ms_socket();
    assert_eq!(ms_listen(l, host.as_ptr(), 0), 0);
    let port = ms_local_port(l) as u16;
    let mut peer = TcpStream::connect(("127.0.0.1", port)).unwrap();
    peer.write_all(
        &Frame::Hello {
            key: [3; 32],
            window: 1 << 20,
            caps: Caps::NONE,
            networks: vec![],
        }
        .to_bytes(),
    )
    .unwrap();
    assert!(matches!(
        read_frame(&mut peer),
        Some(Frame::HelloAck { .. })
    ));
    let s = ms_accept(l);
    assert!(s > 0);
    // The next multi-socket, numbered right after `s`, with IROBs 0 and 1 open.
    let t = ms_socket();
    assert_eq!(t, s + 1, "socket handles are numbered in order");
    assert_eq!(ms_connect(t, host.as_ptr(), port), 0);
    // SAFETY: no dependencies, no thunk.
    let own: Vec<i64> = (0..2)
        .map(|_| unsafe { ms_begin_irob(t, 0, 0, std::ptr::null(), None, std::ptr::null_mut()) })
        .collect();
    assert!(own.iter().all(|&h| h > 0), "{own:?}");

    peer.write_all(&data(0, b"zero")).unwrap();
    peer.write_all(&data(1, b"one")).unwrap();
    let (n0, h0) = recv(s);
    let (n1, h1) = recv(s);
    assert_eq!((n0, n1), (4, 3));
    assert!(h0 > 0 && h1 > 0 && h0 != h1 && !own.contains(&h0) && !own.contains(&h1));
    // SAFETY: a one-byte buffer.
    let r = unsafe { ms_irob_send(h1, b"x".as_ptr().cast(), 1, 0) };
    assert_eq!(r, -1, "a received IROB's handle was taken for sending");

    peer.write_all(&data((1 << 32) + 1, b"evil")).unwrap();
    let (n, h) = recv(s);
    if n >= 0 {
        assert!(
            !own.contains(&h),
            "the peer's IROB 2^32 + 1 got handle {h}, t's IROB 1"
        );
        // SAFETY: a four-byte buffer.
        let r = unsafe { ms_irob_send(h, b"evil".as_ptr().cast(), 4, 0) };
        assert_eq!(
            r, -1,
            "a handle from a peer's IROB id wrote into another multi-socket"
        );
    }
    // (Now the peer, 2^32 ids ahead of what it has had acknowledged, fails the multi-socket:
    // `IROB_SPAN`, and `n` is -1.)
    let _ = ms_close(t, 0);
    let _ = ms_close(s, 0);
    let _ = ms_close(l, 0);
}
