//! The connection scout: which local networks exist, followed as they come and go.
//!
//! [`scan`] lists the addresses of up, non-loopback interfaces (getifaddrs): IPv4, and IPv6
//! other than link-local. A multi-socket uses those of its peer's family. `follow` subscribes a
//! multi-socket to changes: one thread per network namespace listens on an rtnetlink socket
//! (RTMGRP_LINK | RTMGRP_IPV4_IFADDR) and, on every notification (and every second), rescans and
//! reports networks that appeared, changed address or disappeared.
//!
//! Each network's kind ([`NetKind`], see [`kind_of`]): cellular when the kernel says the device
//! is a WWAN modem (`DEVTYPE=wwan` in its sysfs uevent) or its name is one that phones and
//! modems use (`wwan*`, `rmnet*`, `ccmni*`); the environment variables `ROAM_NET_METERED` and
//! `ROAM_NET_CELLULAR` (comma-separated interface names) mark more, and
//! [`Options::kinds`](super::Options::kinds) overrides all of it per multi-socket.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use super::{LocalNetwork, MultiSocket, Shared};
use crate::proto::session::NetKind;

/// Whether interface `name` is named in the comma-separated list of environment variable `var`.
fn named_in(var: &str, name: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v.split(',').any(|s| s.trim() == name))
}

/// Name prefixes of cellular interfaces: Linux WWAN drivers (`wwan0`), Qualcomm modems on
/// Android (`rmnet_data0`), MediaTek modems on Android (`ccmni0`).
const CELLULAR_PREFIXES: [&str; 3] = ["wwan", "rmnet", "ccmni"];

/// What interface `name` is, as far as this host tells: metered when named in
/// `ROAM_NET_METERED`; cellular when named in `ROAM_NET_CELLULAR`, when the kernel reports it as
/// a WWAN device, or when its name has a modem's prefix ([`CELLULAR_PREFIXES`]).
pub fn kind_of(name: &str) -> NetKind {
    let wwan = std::fs::read_to_string(format!("/sys/class/net/{name}/uevent"))
        .is_ok_and(|u| u.lines().any(|l| l.trim() == "DEVTYPE=wwan"));
    NetKind {
        metered: named_in("ROAM_NET_METERED", name),
        cellular: wwan
            || CELLULAR_PREFIXES.iter().any(|p| name.starts_with(p))
            || named_in("ROAM_NET_CELLULAR", name),
    }
}

/// Up, non-loopback interfaces' IPv4 and (not link-local) IPv6 addresses, one network each, in
/// the calling thread's namespace.
pub fn scan() -> io::Result<Vec<LocalNetwork>> {
    scan_where(false)
}

/// [`scan`] less the interfaces without a carrier (`IFF_RUNNING` clear: a cable pulled, a
/// radio out of range, an emulated link past its `carrier=` outage): the networks a new
/// connection can use now. The proxy picks a relay per network by these
/// ([`crate::proxy::NetworkRelay`]); multi-sockets keep following [`scan`], which keeps an
/// interface whose carrier comes back in a moment.
pub fn scan_running() -> io::Result<Vec<LocalNetwork>> {
    scan_where(true)
}

/// [`scan`], and with `running` only interfaces with a carrier.
fn scan_where(running: bool) -> io::Result<Vec<LocalNetwork>> {
    let mut out = Vec::new();
    let mut ifap: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates a list we free below; we only read it meanwhile.
    if unsafe { libc::getifaddrs(&mut ifap) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut p = ifap;
    while !p.is_null() {
        // SAFETY: p walks the list getifaddrs returned.
        let ifa = unsafe { &*p };
        p = ifa.ifa_next;
        let flags = ifa.ifa_flags;
        if ifa.ifa_addr.is_null()
            || flags & libc::IFF_UP as u32 == 0
            || flags & libc::IFF_LOOPBACK as u32 != 0
            || (running && flags & libc::IFF_RUNNING as u32 == 0)
        {
            continue;
        }
        // SAFETY: ifa_addr is non-null and its family tells its type.
        let family = unsafe { (*ifa.ifa_addr).sa_family } as i32;
        let addr = match family {
            libc::AF_INET => {
                // SAFETY: an AF_INET address is a sockaddr_in.
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                IpAddr::V4(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)))
            }
            libc::AF_INET6 => {
                // SAFETY: an AF_INET6 address is a sockaddr_in6.
                let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                let a = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
                // Link-local addresses need a scope to bind to; the interface has others.
                if a.segments()[0] & 0xffc0 == 0xfe80 {
                    continue;
                }
                IpAddr::V6(a)
            }
            _ => continue,
        };
        // SAFETY: ifa_name is a NUL-terminated string.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        let kind = kind_of(&name);
        out.push(LocalNetwork { name, addr, kind });
    }
    // SAFETY: frees the list returned above.
    unsafe { libc::freeifaddrs(ifap) };
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

type Subscribers = Arc<Mutex<Vec<Weak<Shared>>>>;

static WATCHERS: OnceLock<Mutex<HashMap<u64, Subscribers>>> = OnceLock::new();

/// Subscribe a multi-socket to interface changes in the calling thread's namespace.
pub(crate) fn follow(sh: Weak<Shared>) {
    let ns = super::sys::netns_inode();
    let mut map = WATCHERS.get_or_init(Default::default).lock().unwrap();
    if let Some(subs) = map.get(&ns) {
        subs.lock().unwrap().push(sh);
        return;
    }
    let subs: Subscribers = Arc::new(Mutex::new(vec![sh]));
    map.insert(ns, subs.clone());
    // The thread inherits this thread's network namespace.
    let _ = std::thread::Builder::new()
        .name("roam-scout".into())
        .spawn(move || watch(ns, subs));
}

fn netlink_socket() -> io::Result<i32> {
    // SAFETY: plain socket calls on an fd we own.
    unsafe {
        let fd = libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        );
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut sa: libc::sockaddr_nl = std::mem::zeroed();
        sa.nl_family = libc::AF_NETLINK as u16;
        sa.nl_groups = (libc::RTMGRP_LINK | libc::RTMGRP_IPV4_IFADDR) as u32;
        if libc::bind(
            fd,
            (&sa as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as u32,
        ) != 0
        {
            let e = io::Error::last_os_error();
            libc::close(fd);
            return Err(e);
        }
        let tv = libc::timeval {
            tv_sec: 1,
            tv_usec: 0,
        };
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as u32,
        );
        Ok(fd)
    }
}

fn watch(ns: u64, subs: Subscribers) {
    let fd = netlink_socket().ok();
    let mut known: Vec<LocalNetwork> = scan().unwrap_or_default();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match fd {
            // SAFETY: recv into our buffer; the result only wakes us (we rescan rather than parse).
            Some(fd) => unsafe {
                libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0);
            },
            None => std::thread::sleep(Duration::from_secs(1)),
        }
        let now = scan().unwrap_or_default();
        let live: Vec<Arc<Shared>> = {
            let mut map = WATCHERS.get_or_init(Default::default).lock().unwrap();
            let mut s = subs.lock().unwrap();
            s.retain(|w| w.strong_count() > 0);
            if s.is_empty() {
                // Nobody follows this namespace any more: stop (and let it go).
                map.remove(&ns);
                if let Some(fd) = fd {
                    // SAFETY: our own fd.
                    unsafe { libc::close(fd) };
                }
                return;
            }
            s.iter().filter_map(|w| w.upgrade()).collect()
        };
        for sh in &live {
            let ms = MultiSocket::unheld(sh.clone());
            // Only networks of the peer's family can reach it.
            let v6 = sh.peer.is_some_and(|p| p.is_ipv6());
            let of_family = |n: &&LocalNetwork| n.addr.is_ipv6() == v6;
            for n in now.iter().filter(of_family) {
                if !known.contains(n) {
                    sh.log(format!("scout: network {} ({}) is up", n.name, n.addr));
                    ms.network_event(&n.name, Some(n.addr));
                }
            }
            for n in known.iter().filter(of_family) {
                if !now
                    .iter()
                    .any(|m| m.name == n.name && m.addr.is_ipv6() == v6)
                {
                    sh.log(format!("scout: network {} is gone", n.name));
                    ms.network_event(&n.name, None);
                }
            }
        }
        known = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modem_interfaces_are_cellular() {
        for name in ["wwan0", "rmnet_data0", "ccmni1"] {
            assert!(kind_of(name).cellular, "{name}");
        }
        for name in ["wlan0", "eth0", "lo"] {
            assert_eq!(kind_of(name), NetKind::default(), "{name}");
        }
    }

    #[test]
    fn scan_lists_no_loopback() {
        let nets = super::scan().unwrap();
        assert!(nets.iter().all(|n| !n.addr.is_loopback()), "{nets:?}");
        let running = super::scan_running().unwrap();
        assert!(running.iter().all(|n| nets.contains(n)), "{running:?}");
    }
}
