//! Connections the firewall redirected to the proxy (`iptables -t nat -A OUTPUT -p tcp --dport
//! 5201 -j REDIRECT --to-ports PORT`): the program connected to its server, and the kernel
//! remembers where (`SO_ORIGINAL_DST`), so the program needs no SOCKS support at all.

use std::net::{Ipv4Addr, Ipv6Addr, TcpStream};
use std::os::fd::AsRawFd;

use super::Error;

/// The destination a connection redirected by the firewall was first addressed to, `(HOST,
/// PORT)` with an IPv6 host in brackets (SO_ORIGINAL_DST, or IP6T_SO_ORIGINAL_DST on an IPv6
/// connection; both are option 80).
pub(super) fn original_destination(s: &TcpStream) -> Result<(String, u16), Error> {
    const SO_ORIGINAL_DST: libc::c_int = 80;
    let v6 = s.local_addr()?.is_ipv6();
    // SAFETY: all-zero is a valid sockaddr_in6, large enough for either family.
    let mut sa: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t;
    let level = if v6 { libc::SOL_IPV6 } else { libc::SOL_IP };
    // SAFETY: getsockopt on our socket into the buffer above, `len` its size.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            level,
            SO_ORIGINAL_DST,
            (&mut sa as *mut libc::sockaddr_in6).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(Error::OriginalDestination {
            cause: std::io::Error::last_os_error(),
        });
    }
    if v6 {
        let ip = Ipv6Addr::from(sa.sin6_addr.s6_addr);
        return Ok((format!("[{ip}]"), u16::from_be(sa.sin6_port)));
    }
    // SAFETY: for IPv4 the kernel wrote a sockaddr_in at the start of the buffer.
    let sin: libc::sockaddr_in =
        unsafe { std::ptr::read((&sa as *const libc::sockaddr_in6).cast()) };
    let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
    Ok((ip.to_string(), u16::from_be(sin.sin_port)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_not_redirected_has_its_own_destination_or_none() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let to = l.local_addr().unwrap();
        let _c = TcpStream::connect(to).unwrap();
        let (s, _) = l.accept().unwrap();
        // With connection tracking the original destination is the one connected to; without
        // it the kernel has none to give (ENOENT, or ENOPROTOOPT without netfilter).
        match original_destination(&s) {
            Ok(d) => assert_eq!(d, (to.ip().to_string(), to.port())),
            Err(e) => assert!(matches!(e, Error::OriginalDestination { .. }), "{e}"),
        }
    }
}
