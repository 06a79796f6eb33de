//! The process's own figures, read in the child: memory, context switches, CPU time and
//! kernel counters (`/proc`, `getrusage`), rates over an idle window, and the file
//! descriptors the sessions need against RLIMIT_NOFILE.

use std::time::{Duration, Instant};

/// Descriptors kept free beyond what the sessions need.
const FD_MARGIN: u64 = 64;

/// The process's resources now.
#[derive(Clone, Copy, Debug)]
pub(super) struct Usage {
    pub(super) rss_kib: u64,
    pub(super) anon_kib: u64,
    pub(super) shmem_kib: u64,
    pub(super) threads: u64,
    cpu: Cpu,
    /// TCP keepalives the network namespace sent.
    keepalives: u64,
}

/// Read the process's resources.
pub(super) fn usage() -> Usage {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |k: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    Usage {
        rss_kib: field("VmRSS:"),
        anon_kib: field("RssAnon:"),
        shmem_kib: field("RssShmem:"),
        threads: field("Threads:"),
        cpu: cpu(),
        keepalives: tcp_keepalives(),
    }
}

/// The process's CPU time and context switches so far (`getrusage(RUSAGE_SELF)`: every
/// thread, ended ones included).
#[derive(Clone, Copy, Debug)]
pub(in crate::bench) struct Cpu {
    /// User and system time, microseconds.
    pub(in crate::bench) cpu_us: u64,
    /// Voluntary and involuntary context switches.
    pub(in crate::bench) switches: u64,
    /// Voluntary ones alone: a thread that slept waiting for something (the hand-offs). On a
    /// loaded machine involuntary ones (preemption) add noise, these do not.
    pub(in crate::bench) voluntary: u64,
}

/// What moving some bytes cost the process.
#[derive(Clone, Copy, Debug)]
pub(in crate::bench) struct Cost {
    /// CPU seconds (user and system, every thread) per GB moved.
    pub(in crate::bench) cpu_s_per_gb: f64,
    /// Context switches (voluntary and involuntary) per GB moved.
    pub(in crate::bench) switches_per_gb: f64,
    /// The voluntary ones alone ([`Cpu::voluntary`]).
    pub(in crate::bench) voluntary_per_gb: f64,
}

impl Cpu {
    /// What `bytes` moved since `before` cost: NaN (`null` in JSON) when nothing moved.
    pub(in crate::bench) fn cost_since(&self, before: &Cpu, bytes: u64) -> Cost {
        let gb = bytes as f64 / 1e9;
        let per_gb = |x: u64| if bytes > 0 { x as f64 / gb } else { f64::NAN };
        Cost {
            cpu_s_per_gb: per_gb(self.cpu_us.saturating_sub(before.cpu_us)) / 1e6,
            switches_per_gb: per_gb(self.switches.saturating_sub(before.switches)),
            voluntary_per_gb: per_gb(self.voluntary.saturating_sub(before.voluntary)),
        }
    }
}

/// Read the process's [`Cpu`].
pub(in crate::bench) fn cpu() -> Cpu {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Cpu {
        cpu_us: us(ru.ru_utime) + us(ru.ru_stime),
        switches: (ru.ru_nvcsw + ru.ru_nivcsw) as u64,
        voluntary: ru.ru_nvcsw as u64,
    }
}

/// TcpExt `TCPKeepAlive` of `/proc/net/netstat` (0 when unreadable).
fn tcp_keepalives() -> u64 {
    proc_net("/proc/net/netstat", "TcpExt:", "TCPKeepAlive")
}

/// Counter `name` of the `prefix` table of `/proc/net/netstat` or `/proc/net/snmp` (a line of
/// names, then a line of values; 0 when unreadable).
pub(super) fn proc_net(file: &str, prefix: &str, name: &str) -> u64 {
    let t = std::fs::read_to_string(file).unwrap_or_default();
    let mut table = t.lines().filter(|l| l.starts_with(prefix));
    let (Some(names), Some(values)) = (table.next(), table.next()) else {
        return 0;
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == name)
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

/// Open file descriptors.
pub(super) fn fd_count() -> u64 {
    // Less the one reading the directory.
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64 - 1)
}

/// Rates over an idle window.
#[derive(Clone, Copy, Debug)]
pub(super) struct Rates {
    pub(super) switches: f64,
    pub(super) cpu_us: f64,
    pub(super) keepalives: f64,
    /// RSS growth, KiB a second.
    pub(super) rss_kib: f64,
}

impl Rates {
    /// Per session, net of `base` (floored at 0).
    pub(super) fn per_session(&self, base: &Rates, n: usize) -> Rates {
        let n = n.max(1) as f64;
        Rates {
            switches: ((self.switches - base.switches) / n).max(0.0),
            cpu_us: ((self.cpu_us - base.cpu_us) / n).max(0.0),
            keepalives: ((self.keepalives - base.keepalives) / n).max(0.0),
            rss_kib: (self.rss_kib - base.rss_kib) / n,
        }
    }
}

/// Sleep `secs` idle and return the rates over it.
pub(super) fn idle_window(tag: &str, what: &str, secs: u64) -> Rates {
    eprintln!("[{tag}] idle {secs} s with {what}...");
    let (a, t) = (usage(), Instant::now());
    std::thread::sleep(Duration::from_secs(secs));
    let (b, dt) = (usage(), t.elapsed().as_secs_f64());
    Rates {
        switches: (b.cpu.switches - a.cpu.switches) as f64 / dt,
        cpu_us: (b.cpu.cpu_us - a.cpu.cpu_us) as f64 / dt,
        keepalives: b.keepalives.saturating_sub(a.keepalives) as f64 / dt,
        rss_kib: (b.rss_kib as f64 - a.rss_kib as f64) / dt,
    }
}

/// Raise the soft RLIMIT_NOFILE to the hard limit.
pub(super) fn raise_nofile() {
    // SAFETY: getrlimit/setrlimit on a local struct.
    unsafe {
        let mut l: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < l.rlim_max {
            l.rlim_cur = l.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
}

/// (soft, hard) RLIMIT_NOFILE.
fn nofile() -> (u64, u64) {
    // SAFETY: getrlimit on a local struct.
    unsafe {
        let mut l: libc::rlimit = std::mem::zeroed();
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut l);
        (l.rlim_cur as u64, l.rlim_max as u64)
    }
}

/// How many of `want` sessions fit in the descriptors, given `per` descriptors a session and
/// `open` open now; raises the limits as far as the process may. With fewer than `want`, why.
pub(super) fn fitting(want: usize, per: u64, open: u64) -> (usize, Option<String>) {
    let need = open + per * want as u64 + FD_MARGIN;
    if need > nofile().0 {
        // Raising the hard limit needs CAP_SYS_RESOURCE: tried, and fine if refused.
        let l = libc::rlimit {
            rlim_cur: need as libc::rlim_t,
            rlim_max: need.max(nofile().1) as libc::rlim_t,
        };
        // SAFETY: setrlimit reads a local struct.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &l) };
    }
    let (soft, hard) = nofile();
    if need <= soft {
        return (want, None);
    }
    let fit = (soft.saturating_sub(open + FD_MARGIN) / per.max(1)) as usize;
    let why = format!(
        "{want} sessions need about {need} file descriptors ({per} per session, counted on the \
         first one), but RLIMIT_NOFILE is {soft} (hard limit {hard}, which this process may \
         not raise): opened {fit}; raise the hard limit (e.g. `ulimit -Hn {need}` as root) \
         to open them all"
    );
    (fit, Some(why))
}
