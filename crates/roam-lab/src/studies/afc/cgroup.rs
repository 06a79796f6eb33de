//! A CPU cgroup for one thread: how `roam lab afc`'s CPU-bound reader (`reader::Reading::Cpu`)
//! has its share of a processor set every slot, as contention on a phone sets an
//! application's (the Sanadhya thesis, ch. III §3.1: the read rate swings with the CPU the
//! application gets).
//!
//! **Why cgroup v1.** The share is the CFS bandwidth limit, `cpu.cfs_quota_us` of CPU time per
//! `cpu.cfs_period_us`. Only the application's worker thread is limited: the network stack beneath it (the
//! kernel's TCP, roam-net's driver threads, quinn's endpoint task) is not, as a phone's kernel
//! and radio stack are not charged to the application. Version 1's `tasks` file takes a single
//! thread; version 2 takes only whole processes outside a threaded subtree, which would need the
//! lab's whole process moved. So this needs the v1 `cpu` controller mounted (as on the lab's
//! machines, where the unified hierarchy has no controllers), and root; [`CpuGroup::create`]
//! says plainly what is missing.
//!
//! **Shares.** Linux takes quotas of at least 1 ms and periods of 1 ms to 1 s. A share is a
//! quota per 50 ms period (2% is the least); a share of zero, which a slot of the profile at
//! 0 Mbit/s asks for, is 1 ms per second, 0.1%: the nearest to a stopped application the
//! controller allows. A thread throttled while it holds a lock shares that stall with whoever
//! waits on the lock, so the limited thread holds none of the network stack's
//! (`reader::Reading::Cpu` reads the socket in another thread).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};

/// The period of a non-zero share.
pub const PERIOD: Duration = Duration::from_millis(50);

/// The least quota Linux takes, and the longest period.
const MIN_QUOTA_US: u64 = 1_000;
const MAX_PERIOD_US: u64 = 1_000_000;

/// One cgroup of the v1 `cpu` hierarchy, made for one reader and removed when dropped.
#[derive(Debug)]
pub struct CpuGroup {
    dir: PathBuf,
    parent: PathBuf,
}

/// The period and quota (µs) of `share` of one CPU; `None` for a quota of no limit.
pub fn quota(share: f64) -> (u64, Option<u64>) {
    let period = PERIOD.as_micros() as u64;
    if share.is_nan() || share <= 0.0 {
        return (MAX_PERIOD_US, Some(MIN_QUOTA_US));
    }
    if share >= 1.0 {
        return (period, None);
    }
    let q = (share * period as f64).round() as u64;
    (period, Some(q.max(MIN_QUOTA_US)))
}

/// The share of one CPU Linux grants for `share` (its floors applied).
pub fn granted(share: f64) -> f64 {
    match quota(share) {
        (_, None) => 1.0,
        (period, Some(q)) => q as f64 / period as f64,
    }
}

impl CpuGroup {
    /// Make the cgroup `name` beside this process's own in the v1 `cpu` hierarchy.
    pub fn create(name: &str) -> Result<CpuGroup> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
            .context("reading /proc/self/mountinfo")?;
        let Some((mount, root)) = cpu_mount(&mountinfo) else {
            bail!(
                "the CPU-bound reader needs cgroup v1's `cpu` controller mounted (it places one \
                 thread in a cgroup; v2 places only whole processes), and /proc/self/mountinfo \
                 has none"
            );
        };
        let own =
            std::fs::read_to_string("/proc/self/cgroup").context("reading /proc/self/cgroup")?;
        // The process's path is the hierarchy's; the mount may show only a subtree of it (a
        // container's), whose root mountinfo gives.
        let path = own_path(&own).unwrap_or("/");
        let rel = path.strip_prefix(root.as_str()).unwrap_or(path);
        let parent = mount.join(rel.trim_start_matches('/'));
        let dir = parent.join(name);
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                let why = if e.kind() == std::io::ErrorKind::PermissionDenied {
                    " (the CPU-bound reader needs root)"
                } else {
                    ""
                };
                return Err(e)
                    .with_context(|| format!("making the reader's cgroup {}{why}", dir.display()));
            }
        }
        Ok(CpuGroup { dir, parent })
    }

    /// Set the group's share of one CPU (see [`quota`]).
    pub fn set_share(&self, share: f64) -> Result<()> {
        let (period, quota) = quota(share);
        // Each write alone is a valid pair with the other's old value: the period first
        // (every old quota is at most the new period's), then the quota.
        self.write("cpu.cfs_period_us", &period.to_string())?;
        let q = quota.map_or("-1".to_string(), |q| q.to_string());
        self.write("cpu.cfs_quota_us", &q)
    }

    /// Move the calling thread into the group; it leaves when the guard drops.
    pub fn enter(&self) -> Result<Entered<'_>> {
        let tid = gettid();
        self.write("tasks", &tid.to_string())?;
        Ok(Entered { group: self, tid })
    }

    /// How long the group has been throttled, from `cpu.stat`.
    pub fn throttled(&self) -> Result<Duration> {
        let stat = std::fs::read_to_string(self.dir.join("cpu.stat"))
            .with_context(|| format!("reading {}", self.dir.join("cpu.stat").display()))?;
        stat.lines()
            .find_map(|l| l.strip_prefix("throttled_time "))
            .and_then(|ns| ns.trim().parse::<u64>().ok())
            .map(Duration::from_nanos)
            .ok_or_else(|| anyhow!("no throttled_time in {}", self.dir.display()))
    }

    fn write(&self, file: &str, value: &str) -> Result<()> {
        write(&self.dir.join(file), value)
    }
}

impl Drop for CpuGroup {
    fn drop(&mut self) {
        // Fails only while a thread is still inside; the group is then left behind, and a
        // later `create` of the same name takes it over.
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// A thread inside a [`CpuGroup`]; dropping it moves the thread back to the parent group.
#[derive(Debug)]
pub struct Entered<'a> {
    group: &'a CpuGroup,
    tid: libc::pid_t,
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        let _ = write(&self.group.parent.join("tasks"), &self.tid.to_string());
    }
}

fn write(path: &Path, value: &str) -> Result<()> {
    std::fs::write(path, value).with_context(|| format!("writing {value} to {}", path.display()))
}

fn gettid() -> libc::pid_t {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::gettid() }
}

/// The mount point of the v1 hierarchy with the `cpu` controller and the hierarchy's path
/// mounted there, from mountinfo's lines (`ID PARENT DEV ROOT POINT ... - cgroup cgroup
/// rw,cpu,cpuacct`).
fn cpu_mount(mountinfo: &str) -> Option<(PathBuf, String)> {
    mountinfo.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let mut r = right.split_whitespace();
        if r.next()? != "cgroup" {
            return None;
        }
        let options = r.nth(1)?;
        if !options.split(',').any(|o| o == "cpu") {
            return None;
        }
        let mut f = left.split_whitespace().skip(3);
        let (root, point) = (f.next()?, f.next()?);
        Some((PathBuf::from(point), root.to_string()))
    })
}

/// This process's path in the `cpu` hierarchy, from /proc/self/cgroup (`1:cpu,cpuacct:/x`).
fn own_path(cgroup: &str) -> Option<&str> {
    cgroup.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
        controllers.split(',').any(|c| c == "cpu").then_some(path)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_become_quotas_linux_accepts() {
        assert_eq!(quota(0.0), (1_000_000, Some(1_000)));
        assert_eq!(quota(f64::NAN), (1_000_000, Some(1_000)));
        assert_eq!(quota(0.25), (50_000, Some(12_500)));
        // Below 2%: Linux's least quota.
        assert_eq!(quota(0.001), (50_000, Some(1_000)));
        assert_eq!(quota(1.0), (50_000, None));
    }

    #[test]
    fn the_cpu_hierarchy_is_found_among_the_mounts() {
        let info = "30 25 0:26 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n\
                    31 25 0:27 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n\
                    32 25 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n";
        assert_eq!(
            cpu_mount(info),
            Some((PathBuf::from("/sys/fs/cgroup/cpu,cpuacct"), "/".into()))
        );
        let container = "40 30 0:28 /docker/abc /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n";
        assert_eq!(
            cpu_mount(container),
            Some((PathBuf::from("/sys/fs/cgroup/cpu"), "/docker/abc".into()))
        );
        assert_eq!(
            cpu_mount("30 25 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"),
            None
        );
        let own = "4:memory:/api/1\n1:cpu,cpuacct:/lab\n0::/\n";
        assert_eq!(own_path(own), Some("/lab"));
        assert_eq!(own_path("0::/\n"), None);
    }
}
