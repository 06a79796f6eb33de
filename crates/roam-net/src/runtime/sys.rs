//! The Linux socket mechanisms the driver uses: TCP_INFO (passive estimates), SIOCOUTQ
//! (bytes the kernel holds unacknowledged), TCP_NOTSENT_LOWAT (bound on unsent bytes), and
//! binding a connection to its interface.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use crate::proto::{KernelWindow, PathLoad};

/// Bytes a socket must hold for its sender to count as backlogged (four full-size segments):
/// more than a trickle of small messages leaves behind.
pub const BACKLOG_OUTQ: u64 = 4 * 1448;

/// A passive sample from TCP_INFO.
#[derive(Debug, Clone, Copy, Default)]
pub struct TcpInfo {
    /// Smoothed RTT.
    pub rtt: Duration,
    /// Minimum RTT seen on the connection (kernel >= 4.10).
    pub min_rtt: Option<Duration>,
    /// Bytes the peer has acknowledged over the connection's life.
    pub bytes_acked: u64,
    /// Congestion window, in bytes (`tcpi_snd_cwnd` × `tcpi_snd_mss`).
    pub cwnd_bytes: u64,
    /// Still in slow start: the congestion window is below the slow-start threshold (which is
    /// "infinite" until the first loss).
    pub slow_start: bool,
    /// Bytes in the send queue not yet sent (`tcpi_notsent_bytes`, kernel >= 4.6; the same
    /// count as the SIOCOUTQNSD ioctl, without a second system call).
    pub notsent: u64,
    /// Retransmission timeouts not yet recovered from (`tcpi_retransmits`: the kernel's
    /// count of RTO firings since data was last acknowledged; 0 once an acknowledgement
    /// arrives).
    pub timeouts: u8,
    /// How long the connection's sending was limited by the peer's receive window, in all
    /// (`tcpi_rwnd_limited`, kernel >= 4.10): the time a sender stalled on flow control.
    pub rwnd_limited: Option<Duration>,
}

impl TcpInfo {
    /// A queue has built on the path: the smoothed RTT is well above the minimum (by a quarter
    /// plus 2 ms of timer noise), so the connection is sending as fast as the path goes.
    pub fn queueing(&self) -> bool {
        self.min_rtt
            .is_some_and(|m| self.rtt > m + m / 4 + Duration::from_millis(2))
    }

    /// How loaded the path is by this connection now, given the socket's SIOCOUTQ `outq`:
    /// saturated when a queue has built ([`TcpInfo::queueing`]) and the socket holds at least
    /// a few full-size segments; backlogged with the data but no queue; light when the socket
    /// holds less. A raised smoothed RTT alone is not saturation: sparse small sends see the
    /// peer's delayed ACK (40 ms on a 20 ms path) and would pass for a queue.
    pub fn load(&self, outq: u64) -> PathLoad {
        match (outq >= BACKLOG_OUTQ, self.queueing()) {
            (true, true) => PathLoad::Saturated,
            (true, false) => PathLoad::Backlogged,
            (false, _) => PathLoad::Light,
        }
    }

    /// The congestion window, for `Session::background_cap`.
    pub fn window(&self) -> KernelWindow {
        KernelWindow {
            cwnd: self.cwnd_bytes,
            slow_start: self.slow_start,
            queue_built: self.queueing(),
        }
    }
}

/// Read TCP_INFO. Offsets follow `struct tcp_info` in `linux/tcp.h`.
pub fn tcp_info(fd: RawFd) -> io::Result<TcpInfo> {
    let mut buf = [0u8; 232];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf is valid for `len` bytes; the kernel writes at most `len`.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    let len = len as usize;
    let u32_at =
        |o: usize| (o + 4 <= len).then(|| u32::from_ne_bytes(buf[o..o + 4].try_into().unwrap()));
    let u64_at =
        |o: usize| (o + 8 <= len).then(|| u64::from_ne_bytes(buf[o..o + 8].try_into().unwrap()));
    Ok(TcpInfo {
        rtt: Duration::from_micros(u32_at(68).unwrap_or(0) as u64),
        min_rtt: u32_at(148)
            .filter(|&v| v != 0 && v != u32::MAX)
            .map(|v| Duration::from_micros(v as u64)),
        bytes_acked: u64_at(120).unwrap_or(0),
        cwnd_bytes: u32_at(80).unwrap_or(0) as u64 * u32_at(16).unwrap_or(0) as u64,
        slow_start: u32_at(80).unwrap_or(0) < u32_at(76).unwrap_or(0),
        notsent: u32_at(144).unwrap_or(0) as u64,
        timeouts: if len > 2 { buf[2] } else { 0 },
        rwnd_limited: u64_at(176).map(Duration::from_micros),
    })
}

/// Bytes in the socket's send queue not yet acknowledged by the peer (SIOCOUTQ): data in
/// flight plus data not yet sent.
pub fn outq(fd: RawFd) -> io::Result<u64> {
    let mut v: libc::c_int = 0;
    // SAFETY: TIOCOUTQ (= SIOCOUTQ) writes one int.
    let r = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut v) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v.max(0) as u64)
}

/// Bytes in the socket's receive queue that no one has read yet (FIONREAD, = SIOCINQ).
pub fn inq(fd: RawFd) -> io::Result<u64> {
    let mut v: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int.
    let r = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut v) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v.max(0) as u64)
}

/// Set TCP_NOTSENT_LOWAT: the socket is writable (and accepts writes) only while fewer than
/// `bytes` are waiting unsent, so data we hand the kernel cannot queue up ahead of foreground
/// data for long.
pub fn set_notsent_lowat(fd: RawFd, bytes: u32) -> io::Result<()> {
    let v = bytes as libc::c_int;
    // SAFETY: the option takes one int.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NOTSENT_LOWAT,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Bind a socket to an interface (SO_BINDTODEVICE). Needs CAP_NET_RAW; callers treat failure as
/// a soft error because source-address binding plus policy routing has the same effect.
pub fn bind_to_device(fd: RawFd, name: &str) -> io::Result<()> {
    // SAFETY: name bytes are passed with their length; the kernel copies them.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_BINDTODEVICE,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Inode of the calling thread's network namespace (threads of one runtime must share it).
pub fn netns_inode() -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/thread-self/ns/net")
        .map(|m| m.ino())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;

    #[test]
    fn saturation_needs_a_queue_and_data_in_the_socket() {
        let info = |rtt_ms: u64| TcpInfo {
            rtt: Duration::from_millis(rtt_ms),
            min_rtt: Some(Duration::from_millis(20)),
            ..TcpInfo::default()
        };
        // A delayed ACK on a 20 ms path: the smoothed RTT says "queue", the socket is empty.
        assert!(info(60).queueing());
        assert_eq!(info(60).load(21), PathLoad::Light);
        assert_eq!(info(60).load(BACKLOG_OUTQ), PathLoad::Saturated);
        // Data waiting but no queue on the path (loopback, or our own cap).
        assert_eq!(info(22).load(1 << 20), PathLoad::Backlogged);
    }

    #[test]
    fn unsent_bytes_are_counted_apart_from_those_in_flight() {
        // A peer that does not read: its receive window fills, the rest stays unsent here.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (_s, _) = l.accept().unwrap();
        c.set_nonblocking(true).unwrap();
        let mut sent = 0;
        while let Ok(n) = (&c).write(&[1u8; 65536]) {
            sent += n as u64;
        }
        // What the peer's buffer took is acknowledged; the rest waits here, unsent.
        let (q, u) = (
            outq(c.as_raw_fd()).unwrap(),
            tcp_info(c.as_raw_fd()).unwrap().notsent,
        );
        assert!(
            q < sent && u > 0 && u <= q,
            "sent {sent}, outq {q}, unsent {u}"
        );
    }

    #[test]
    fn tcp_info_and_outq_on_loopback() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        set_notsent_lowat(c.as_raw_fd(), 128 * 1024).unwrap();
        c.write_all(&[1u8; 10_000]).unwrap();
        let mut buf = [0u8; 10_000];
        s.read_exact(&mut buf).unwrap();
        let info = tcp_info(c.as_raw_fd()).unwrap();
        assert!(info.min_rtt.is_some(), "{info:?}");
        assert!(info.rtt < Duration::from_millis(100));
        // Everything was read, so sent; acknowledged eventually.
        assert_eq!(tcp_info(c.as_raw_fd()).unwrap().notsent, 0);
        assert_eq!(info.timeouts, 0, "no retransmission timeout on loopback");
        for _ in 0..100 {
            if outq(c.as_raw_fd()).unwrap() == 0 {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        panic!("SIOCOUTQ never drained");
    }

    #[test]
    fn a_sender_held_by_a_reader_that_does_not_read_counts_window_limited_time() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let before = tcp_info(c.as_raw_fd()).unwrap().rwnd_limited;
        let Some(before) = before else {
            eprintln!("skipped: this kernel's TCP_INFO has no tcpi_rwnd_limited (before 4.10)");
            return;
        };
        assert_eq!(before, Duration::ZERO, "nothing sent yet");
        // Fill the receiver's window and hold it full for a while.
        c.set_nonblocking(true).unwrap();
        let block = [7u8; 64 * 1024];
        let mut sent = 0;
        loop {
            match c.write(&block) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        std::thread::sleep(Duration::from_millis(100));
        let held = tcp_info(c.as_raw_fd()).unwrap().rwnd_limited.unwrap();
        assert!(
            held >= Duration::from_millis(20),
            "{held:?} after {sent} bytes"
        );
        assert!(
            inq(s.as_raw_fd()).unwrap() > 0,
            "the reader holds what it did not read"
        );
        let mut buf = vec![0u8; 1 << 20];
        let _ = s.read(&mut buf).unwrap();
    }
}
