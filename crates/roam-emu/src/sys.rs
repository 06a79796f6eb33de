//! Thin, checked wrappers over the Linux interfaces the emulator needs: network namespaces
//! (unshare/setns), TUN devices, eventfd, ppoll, and finding processes inside a namespace.
//!
//! Namespaces are anonymous: they live as long as a file descriptor or a process refers to
//! them, so a crashed emulator never leaves a named namespace behind (unlike `ip netns add`).

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Create a new network namespace and return a descriptor that keeps it alive.
pub fn new_netns() -> io::Result<OwnedFd> {
    std::thread::scope(|s| {
        s.spawn(|| -> io::Result<OwnedFd> {
            // SAFETY: unshare affects only this (short-lived) thread's namespaces.
            cvt(unsafe { libc::unshare(libc::CLONE_NEWNET) })?;
            let f = File::open("/proc/thread-self/ns/net")?;
            Ok(OwnedFd::from(f))
        })
        .join()
        .map_err(|_| io::Error::other("namespace thread panicked"))?
    })
}

/// Move the calling thread into the network namespace `ns`.
pub fn enter_netns(ns: RawFd) -> io::Result<()> {
    // SAFETY: setns with a namespace descriptor only changes this thread's namespace.
    cvt(unsafe { libc::setns(ns, libc::CLONE_NEWNET) }).map(|_| ())
}

/// Run `f` on a fresh thread inside namespace `ns` and return its result.
pub fn in_netns<R: Send>(ns: &OwnedFd, f: impl FnOnce() -> R + Send) -> io::Result<R> {
    let raw = ns.as_raw_fd();
    std::thread::scope(|s| {
        s.spawn(move || -> io::Result<R> {
            enter_netns(raw)?;
            Ok(f())
        })
        .join()
        .map_err(|_| io::Error::other("thread in namespace panicked"))?
    })
}

/// Inode number identifying the namespace `ns` refers to (as in `/proc/PID/ns/net`).
pub fn ns_inode(ns: &OwnedFd) -> io::Result<u64> {
    // SAFETY: fstat on a valid descriptor into a zeroed stat buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    cvt(unsafe { libc::fstat(ns.as_raw_fd(), &mut st) })?;
    Ok(st.st_ino)
}

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
/// `_IOW('T', 226, int)`, kernel >= 5.0.
const TUNSETCARRIER: libc::c_ulong = 0x4004_54e2;

/// Set a TUN device's carrier. Off, the kernel sees the link as down (`NO-CARRIER`, a netlink
/// link event), as after a WiFi disassociation: the device drops what is sent to it; its
/// address and routes stay (marked `linkdown`, still chosen unless
/// `ignore_routes_with_linkdown` is set).
pub fn set_carrier(fd: RawFd, on: bool) -> io::Result<()> {
    let v: libc::c_int = on.into();
    // SAFETY: TUNSETCARRIER reads an int through the pointer.
    cvt(unsafe { libc::ioctl(fd, TUNSETCARRIER, &v) }).map(|_| ())
}

#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// Create a TUN device (IP packets, no packet-information header) named `name` in the calling
/// thread's network namespace. The device exists while the descriptor is open.
pub fn create_tun(name: &str) -> io::Result<OwnedFd> {
    if name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "device name too long",
        ));
    }
    let path = c"/dev/net/tun";
    // SAFETY: open with a NUL-terminated path.
    let fd = cvt(unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) })?;
    // SAFETY: fd was just opened and is owned here.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        flags: (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short,
        _pad: [0; 22],
    };
    req.name[..name.len()].copy_from_slice(name.as_bytes());
    // SAFETY: TUNSETIFF reads an ifreq of the layout above.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF, &mut req) })?;
    set_nonblocking(fd.as_raw_fd())?;
    Ok(fd)
}

/// Put a descriptor in non-blocking mode.
pub fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a valid descriptor.
    let flags = cvt(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
    cvt(unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) }).map(|_| ())
}

/// An eventfd used to wake a forwarding thread.
pub struct EventFd(OwnedFd);

impl EventFd {
    /// A new non-blocking eventfd.
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: eventfd returns a new descriptor or -1.
        let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
        // SAFETY: just created, owned here.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }
    /// Wake the waiter.
    pub fn notify(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64.
        unsafe { libc::write(self.0.as_raw_fd(), &one as *const u64 as *const _, 8) };
    }
    /// Clear pending wakeups.
    pub fn drain(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a valid u64.
        unsafe { libc::read(self.0.as_raw_fd(), &mut v as *mut u64 as *mut _, 8) };
    }
    /// The descriptor, for polling.
    pub fn raw(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// Wait until one of `fds` is readable or `timeout` passes (nanosecond precision; `None` waits
/// forever). Returns which descriptors are readable.
pub fn wait_readable(fds: &[RawFd], timeout: Option<Duration>) -> io::Result<Vec<bool>> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs() as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: pfds is a valid array of pollfd; tsp is null or points to a live timespec.
    let r = unsafe {
        libc::ppoll(
            pfds.as_mut_ptr(),
            pfds.len() as libc::nfds_t,
            tsp,
            std::ptr::null(),
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(vec![false; fds.len()]);
        }
        return Err(e);
    }
    Ok(pfds
        .iter()
        .map(|p| p.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0)
        .collect())
}

/// Read one packet; `Ok(None)` when none is waiting.
pub fn read_packet(fd: RawFd, buf: &mut [u8]) -> io::Result<Option<usize>> {
    // SAFETY: reads at most buf.len() bytes into buf.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr() as *mut _, buf.len()) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
            _ => Err(e),
        };
    }
    Ok(Some(n as usize))
}

/// Write one packet; a full device queue drops it (as a NIC would).
pub fn write_packet(fd: RawFd, pkt: &[u8]) -> io::Result<()> {
    // SAFETY: writes pkt.len() bytes from pkt.
    let n = unsafe { libc::write(fd, pkt.as_ptr() as *const _, pkt.len()) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::WouldBlock {
            return Err(e);
        }
    }
    Ok(())
}

/// Lower this thread's timer slack to 1 ns so short sleeps end on time.
pub fn precise_timers() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer argument.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

/// Process ids of every process whose network namespace has inode `ino`.
pub fn pids_in_netns(ino: u64) -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        if let Ok(link) = std::fs::read_link(format!("/proc/{pid}/ns/net")) {
            if link.to_string_lossy() == format!("net:[{ino}]") {
                out.push(pid);
            }
        }
    }
    out
}

/// Every process descended from `root` (children, their children, ...), found through the
/// parent named in each `/proc/PID/stat`; `root` itself is not included.
pub fn descendants(root: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let parents: Vec<(i32, i32)> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| Some((pid, parent_of(pid)?)))
        .collect();
    let mut out = vec![];
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for &(child, _) in parents.iter().filter(|(_, pp)| *pp == p) {
            out.push(child);
            frontier.push(child);
        }
    }
    out
}

/// The parent of `pid`: the field after the command name, which is in parentheses and may
/// itself hold spaces and parentheses (so the last `)` ends it).
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Send `sig` to a process.
pub fn kill(pid: i32, sig: libc::c_int) {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(pid, sig) };
}

/// Whether this process is root (uid 0, possibly inside a user namespace).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Become root inside a new user namespace (for running without real root). Must be called
/// while the process is single-threaded.
pub fn enter_user_namespace() -> io::Result<()> {
    // SAFETY: getuid/getgid have no preconditions.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    // SAFETY: unshare with CLONE_NEWUSER; the caller guarantees a single thread.
    cvt(unsafe { libc::unshare(libc::CLONE_NEWUSER) })?;
    std::fs::write("/proc/self/setgroups", "deny")?;
    std::fs::write("/proc/self/uid_map", format!("0 {uid} 1"))?;
    std::fs::write("/proc/self/gid_map", format!("0 {gid} 1"))?;
    Ok(())
}

/// Check that the emulator can work here; on failure, a one-line reason.
pub fn check_privileges() -> Result<(), String> {
    if !is_root() {
        return Err("the emulator needs root (or a user namespace): run as root, or allow unprivileged user namespaces".into());
    }
    match std::fs::OpenOptions::new().read(true).write(true).open("/dev/net/tun") {
        Ok(_) => {}
        Err(e) => return Err(format!("the emulator cannot open /dev/net/tun ({e}); it needs root or a TUN device this user may open")),
    }
    match new_netns() {
        Ok(_) => Ok(()),
        Err(e) => Err(format!("the emulator cannot create a network namespace ({e}); it needs root or unprivileged user namespaces")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn descendants_are_children_and_their_children() {
        let mut sh = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & sleep 30 & wait"])
            .spawn()
            .unwrap();
        let sh_pid = sh.id() as i32;
        let me = std::process::id() as i32;
        let deadline = Instant::now() + Duration::from_secs(10);
        // Until both sleeps have started: then this process's descendants are the shell and
        // its two children.
        let (kids, mine) = loop {
            let kids = descendants(sh_pid);
            let mine = descendants(me);
            if kids.len() == 2 {
                break (kids, mine);
            }
            assert!(Instant::now() < deadline, "{kids:?}");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(mine.contains(&sh_pid), "{mine:?}");
        for p in kids {
            assert!(
                mine.contains(&p),
                "a grandchild is a descendant too: {mine:?}"
            );
            kill(p, libc::SIGKILL);
        }
        let _ = sh.wait();
        assert!(!descendants(me).contains(&sh_pid));
    }
}
