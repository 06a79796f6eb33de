//! Coordination of several processes on one device through shared memory (paper §4.2).
//!
//! Anticipatory scheduling caps the background data a network holds; with several
//! Intentional-Networking processes on one device, the cap must hold for their sum, and one
//! process's interactive traffic must shrink the others' budget as it shrinks its own. Each
//! multi-socket publishes, per network, the bytes it has outstanding in the kernel (SIOCOUTQ),
//! its current estimates and when it last saw foreground data into a small shared table; each
//! writer subtracts what the *other* multi-sockets hold (of other processes, and of its own)
//! from its allowance, and each session takes the latest foreground activity of any of them for
//! its anticipatory budget (`Session::foreground_elsewhere`). `roam net estimates` reads the same
//! table.
//!
//! The table is a file mapped shared: `$ROAM_NET_SHM`, or `/dev/shm/roam-net-<netns inode>`
//! (one table per network namespace, i.e. per emulated device). It is opened without following
//! a symbolic link, created readable and writable by its owner only, and used only if it is a
//! regular file owned by this user: another user's file at that path (planted to feed this
//! process false counts) is refused. It has [`SLOTS`] slots of 64 bytes: `pid u32 | owner u32 |
//! name [u8; 16] | outq u64 | rtt_us u64 | bandwidth_bps u64 | updated_ms u64 |
//! foreground_ms u64`. A slot belongs to (process, handle, network): `owner` tells the
//! multi-sockets of one process apart. A handle claims a free slot (pid 0, or a pid that no
//! longer exists) with a compare-and-swap. Entries older than two seconds are ignored.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use roam_core::BitRate;

/// Slots in the table.
pub const SLOTS: usize = 256;
const SLOT: usize = 64;
const STALE_MS: u64 = 2000;

/// What coordinating through the table has cost this process: every publish and every read
/// of the others' counts ([`SharedCounts::publish`], [`SharedCounts::others`],
/// [`SharedCounts::foreground_elsewhere`]), counted with the time they took. The paper's §7.2.4
/// found the cost of coordinating through shared memory insignificant; [`coordination`] lets a
/// run measure it.
static OPS: AtomicU64 = AtomicU64::new(0);
static OPS_NS: AtomicU64 = AtomicU64::new(0);

/// This process's coordination so far: operations on the table and the time they took.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Coordination {
    /// Publishes and reads of the table.
    pub ops: u64,
    /// Their total time.
    pub total: Duration,
}

/// This process's [`Coordination`] so far.
pub fn coordination() -> Coordination {
    Coordination {
        ops: OPS.load(Ordering::Relaxed),
        total: Duration::from_nanos(OPS_NS.load(Ordering::Relaxed)),
    }
}

/// Count one operation on the table that began at `t0`.
fn counted(t0: std::time::Instant) {
    OPS.fetch_add(1, Ordering::Relaxed);
    OPS_NS.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
}

/// One entry as read by [`SharedCounts::entries`].
#[derive(Debug, Clone)]
pub struct Entry {
    /// Publishing process.
    pub pid: u32,
    /// Network (interface) name.
    pub network: String,
    /// Bytes that process holds unacknowledged in the kernel on that network.
    pub outstanding: u64,
    /// Its RTT estimate.
    pub rtt: Option<Duration>,
    /// Its bandwidth estimate.
    pub bandwidth: Option<BitRate>,
    /// Milliseconds since the entry was updated.
    pub age_ms: u64,
}

/// One mapping of a table, shared by every handle of this process on that table
/// ([`SharedCounts::open`]): mapped once per process, not once per multi-socket, so a relay with
/// a thousand sessions holds one 16 KiB mapping, not a thousand (each of which counted in its
/// resident memory).
struct Mapping {
    base: *mut u8,
}

// SAFETY: the mapping is shared memory accessed only through atomics and plain byte copies of
// names; the pointer stays valid for the life of the value.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps what `Mapping::map` mapped.
        unsafe { libc::munmap(self.base.cast(), SLOTS * SLOT) };
    }
}

impl Mapping {
    /// Map the table at `path` (see [`SharedCounts::open`] for the checks).
    fn map(path: &std::path::Path) -> io::Result<Mapping> {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)?;
        let meta = f.metadata()?;
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        if !meta.file_type().is_file() || meta.uid() != me {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{} is not a regular file owned by uid {me} (owner {}): not using it",
                    path.display(),
                    meta.uid()
                ),
            ));
        }
        if f.metadata()?.len() < (SLOTS * SLOT) as u64 {
            f.set_len((SLOTS * SLOT) as u64)?;
        }
        // SAFETY: maps the file shared; length matches the file.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                SLOTS * SLOT,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping { base: p.cast() })
    }
}

/// This process's mappings, by path.
static MAPPINGS: Mutex<Vec<(PathBuf, Weak<Mapping>)>> = Mutex::new(Vec::new());

/// The mapped table.
pub struct SharedCounts {
    map: Arc<Mapping>,
    pid: u32,
    /// Tells this handle's slots from those of the process's other handles.
    owner: u32,
    mine: Mutex<HashMap<String, usize>>,
    path: PathBuf,
}

impl Drop for SharedCounts {
    fn drop(&mut self) {
        for &i in self.mine.lock().unwrap().values() {
            self.pid_at(i).store(0, Ordering::SeqCst);
        }
    }
}

/// The wall clock in milliseconds since the epoch (the table's time base: processes share no
/// other clock).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    pid != 0
        && (unsafe { libc::kill(pid as i32, 0) } == 0
            || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM))
}

impl SharedCounts {
    /// The default table path for this namespace.
    pub fn default_path() -> PathBuf {
        std::env::var_os("ROAM_NET_SHM")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(format!("/dev/shm/roam-net-{}", super::sys::netns_inode()))
            })
    }

    /// Open (creating if needed) the default table.
    pub fn open_default() -> io::Result<SharedCounts> {
        SharedCounts::open(Self::default_path())
    }

    /// Open (creating if needed) the table at `path`: not through a symbolic link, and only a
    /// regular file owned by this user (see the module doc). A table this process has mapped
    /// already is not mapped again: the new handle shares the mapping.
    pub fn open(path: PathBuf) -> io::Result<SharedCounts> {
        let map = {
            let mut maps = MAPPINGS.lock().unwrap_or_else(|p| p.into_inner());
            maps.retain(|(_, m)| m.strong_count() > 0);
            match maps
                .iter()
                .find(|(p, _)| *p == path)
                .and_then(|(_, m)| m.upgrade())
            {
                Some(m) => m,
                None => {
                    let m = Arc::new(Mapping::map(&path)?);
                    maps.push((path.clone(), Arc::downgrade(&m)));
                    m
                }
            }
        };
        static OWNERS: AtomicU32 = AtomicU32::new(1);
        Ok(SharedCounts {
            map,
            pid: std::process::id(),
            owner: OWNERS.fetch_add(1, Ordering::Relaxed),
            mine: Mutex::new(HashMap::new()),
            path,
        })
    }

    /// Where the table lives.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    fn base(&self) -> *mut u8 {
        self.map.base
    }

    fn pid_at(&self, i: usize) -> &AtomicU32 {
        // SAFETY: in bounds, 4-aligned (page-aligned base, 64-byte slots).
        unsafe { &*(self.base().add(i * SLOT) as *const AtomicU32) }
    }

    fn owner_at(&self, i: usize) -> &AtomicU32 {
        // SAFETY: in bounds, 4-aligned.
        unsafe { &*(self.base().add(i * SLOT + 4) as *const AtomicU32) }
    }

    /// Whether slot `i` is this handle's.
    /// Whether process `pid` is alive. This process's own slots (other multi-sockets of it)
    /// need no system call: with a thousand multi-sockets in one process (a relay), every
    /// slot is this process's, and a `kill(pid, 0)` per slot on every tick and writer pass
    /// took three quarters of an idle relay's CPU (`roam bench net --sessions`).
    fn alive(&self, pid: u32) -> bool {
        pid == self.pid || alive(pid)
    }

    fn is_mine(&self, i: usize, pid: u32) -> bool {
        pid == self.pid && self.owner_at(i).load(Ordering::SeqCst) == self.owner
    }

    fn u64_at(&self, i: usize, off: usize) -> &AtomicU64 {
        // SAFETY: in bounds, 8-aligned.
        unsafe { &*(self.base().add(i * SLOT + off) as *const AtomicU64) }
    }

    /// Slot `i`'s name as stored: up to 16 bytes, NUL-padded. Copied out, as other processes
    /// may write it meanwhile.
    fn name_bytes(&self, i: usize) -> [u8; 16] {
        let mut b = [0u8; 16];
        // SAFETY: 16 bytes in bounds.
        unsafe { std::ptr::copy_nonoverlapping(self.base().add(i * SLOT + 8), b.as_mut_ptr(), 16) };
        b
    }

    fn name_at(&self, i: usize) -> String {
        let b = self.name_bytes(i);
        let end = b.iter().position(|&c| c == 0).unwrap_or(16);
        String::from_utf8_lossy(&b[..end]).into_owned()
    }

    /// Whether slot `i` is for `network`, compared without a `String` (`others` runs for every
    /// write batch and looks at every slot: building each slot's name as a `String` took 5%
    /// of the samples with 1,000 active sessions, issue 48).
    fn is_named(&self, i: usize, network: &str) -> bool {
        let n = network.as_bytes();
        if n.len() > 16 {
            return false; // never published under such a name (`publish` truncates)
        }
        let b = self.name_bytes(i);
        b[..n.len()] == *n && (n.len() == 16 || b[n.len()] == 0)
    }

    fn slot_for(&self, network: &str) -> Option<usize> {
        let mut mine = self.mine.lock().unwrap();
        if let Some(&i) = mine.get(network) {
            return Some(i);
        }
        for i in 0..SLOTS {
            let cur = self.pid_at(i).load(Ordering::SeqCst);
            if (cur == 0 || !self.alive(cur))
                && self
                    .pid_at(i)
                    .compare_exchange(cur, self.pid, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
            {
                self.u64_at(i, 48).store(0, Ordering::SeqCst);
                self.owner_at(i).store(self.owner, Ordering::SeqCst);
                let mut b = [0u8; 16];
                let n = network.len().min(16);
                b[..n].copy_from_slice(&network.as_bytes()[..n]);
                // SAFETY: 16 bytes in bounds of our claimed slot.
                unsafe {
                    std::ptr::copy_nonoverlapping(b.as_ptr(), self.base().add(i * SLOT + 8), 16)
                };
                mine.insert(network.to_string(), i);
                return Some(i);
            }
        }
        None
    }

    /// Publish this handle's outstanding bytes and estimates for `network`, and when its
    /// multi-socket last saw foreground data (wall clock, milliseconds since the epoch; 0:
    /// never).
    pub fn publish(
        &self,
        network: &str,
        outstanding: u64,
        rtt: Option<Duration>,
        bandwidth: Option<BitRate>,
        foreground_ms: u64,
    ) {
        let t0 = std::time::Instant::now();
        let Some(i) = self.slot_for(network) else {
            return;
        };
        self.u64_at(i, 56).store(foreground_ms, Ordering::Relaxed);
        self.u64_at(i, 24).store(outstanding, Ordering::Relaxed);
        self.u64_at(i, 32)
            .store(rtt.map_or(0, |d| d.as_micros() as u64), Ordering::Relaxed);
        self.u64_at(i, 40)
            .store(bandwidth.map_or(0, |b| b.as_bps()), Ordering::Relaxed);
        self.u64_at(i, 48).store(now_ms(), Ordering::SeqCst);
        counted(t0);
    }

    /// Bytes the other multi-sockets (of live processes, this one's included) hold outstanding
    /// on `network`.
    pub fn others(&self, network: Option<&str>) -> u64 {
        let Some(network) = network else { return 0 };
        let t0 = std::time::Instant::now();
        // Called for every write batch: skip our own and free slots before any system call.
        let now = now_ms();
        let sum = (0..SLOTS)
            .filter(|&i| {
                self.fresh_pid(i, now).is_some_and(|pid| {
                    !self.is_mine(i, pid) && self.is_named(i, network) && self.alive(pid)
                })
            })
            .map(|i| self.u64_at(i, 24).load(Ordering::Relaxed))
            .sum();
        counted(t0);
        sum
    }

    /// When any other multi-socket on this device last saw foreground data (wall clock,
    /// milliseconds since the epoch), if one has.
    pub fn foreground_elsewhere(&self) -> Option<u64> {
        let t0 = std::time::Instant::now();
        let now = now_ms();
        let latest = (0..SLOTS)
            .filter(|&i| {
                self.fresh_pid(i, now)
                    .is_some_and(|pid| !self.is_mine(i, pid) && self.alive(pid))
            })
            .map(|i| self.u64_at(i, 56).load(Ordering::Relaxed))
            .filter(|&t| t != 0)
            .max();
        counted(t0);
        latest
    }

    /// The owner of slot `i` if the slot is claimed and was updated within [`STALE_MS`].
    fn fresh_pid(&self, i: usize, now: u64) -> Option<u32> {
        let pid = self.pid_at(i).load(Ordering::SeqCst);
        let updated = self.u64_at(i, 48).load(Ordering::SeqCst);
        (pid != 0 && updated != 0 && now.saturating_sub(updated) <= STALE_MS).then_some(pid)
    }

    /// Every fresh entry of a live process.
    pub fn entries(&self) -> Vec<Entry> {
        let now = now_ms();
        (0..SLOTS)
            .filter_map(|i| {
                let pid = self.fresh_pid(i, now).filter(|&p| self.alive(p))?;
                let updated = self.u64_at(i, 48).load(Ordering::SeqCst);
                let rtt = self.u64_at(i, 32).load(Ordering::Relaxed);
                let bw = self.u64_at(i, 40).load(Ordering::Relaxed);
                Some(Entry {
                    pid,
                    network: self.name_at(i),
                    outstanding: self.u64_at(i, 24).load(Ordering::Relaxed),
                    rtt: (rtt > 0).then(|| Duration::from_micros(rtt)),
                    bandwidth: (bw > 0).then_some(BitRate::bps(bw)),
                    age_ms: now.saturating_sub(updated),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Handles of other processes and of this one see each other's counts and foreground
    /// times, never their own. (Handles of one process once excluded each other, by pid: two
    /// multi-sockets of one process did not add up.)
    #[test]
    fn handles_see_each_others_counts_but_not_their_own() {
        let dir = std::env::temp_dir().join(format!("roam-shm-test-{}", std::process::id()));
        let a = SharedCounts::open(dir.clone()).unwrap();
        let mut b = SharedCounts::open(dir.clone()).unwrap();
        b.pid = 1; // pid 1 (init) is always alive: stands in for another process
        let c = SharedCounts::open(dir.clone()).unwrap(); // a second handle of this process
        a.publish("wifi", 1000, Some(Duration::from_millis(20)), None, 0);
        b.publish("wifi", 500, None, Some(BitRate::mbps(3)), 0);
        b.publish("cell", 700, None, None, 0);
        c.publish("wifi", 50, None, None, 1234);
        assert_eq!(a.others(Some("wifi")), 550);
        assert_eq!(b.others(Some("wifi")), 1050);
        assert_eq!(c.others(Some("wifi")), 1500);
        assert_eq!(a.others(Some("cell")), 700);
        assert_eq!(a.entries().len(), 4);
        assert_eq!(a.foreground_elsewhere(), Some(1234));
        assert_eq!(c.foreground_elsewhere(), None);
        // One mapping for the process's handles (issue 48: not 16 KiB per multi-socket).
        assert!(Arc::ptr_eq(&a.map, &c.map) && Arc::ptr_eq(&a.map, &b.map));
        drop(b);
        assert_eq!(a.others(Some("wifi")), 50);
        drop((a, c));
        // The last handle gone, the mapping goes; a new handle maps the table afresh and sees
        // what is in it.
        let live = |p: &std::path::Path| {
            let maps = MAPPINGS.lock().unwrap();
            maps.iter().any(|(q, m)| q == p && m.strong_count() > 0)
        };
        assert!(!live(&dir));
        let d = SharedCounts::open(dir.clone()).unwrap();
        assert!(live(&dir) && d.entries().is_empty());
        drop(d);
        std::fs::remove_file(dir).unwrap();
    }

    /// A slot's name matches a network's name whole: not a prefix of it, nor one that has it
    /// as a prefix; a name of the full 16 bytes matches; a longer one (never published as
    /// such) matches nothing.
    #[test]
    fn a_network_is_matched_by_its_whole_name() {
        let dir = std::env::temp_dir().join(format!("roam-shm-names-{}", std::process::id()));
        let a = SharedCounts::open(dir.clone()).unwrap();
        let mut b = SharedCounts::open(dir.clone()).unwrap();
        b.pid = 1;
        b.publish("wlan0", 100, None, None, 0);
        b.publish("wlan01", 20, None, None, 0);
        b.publish("abcdefghijklmnop", 3, None, None, 0);
        assert_eq!(a.others(Some("wlan0")), 100);
        assert_eq!(a.others(Some("wlan01")), 20);
        assert_eq!(a.others(Some("wlan")), 0);
        assert_eq!(a.others(Some("abcdefghijklmnop")), 3);
        assert_eq!(a.others(Some("abcdefghijklmnopq")), 0);
        drop((a, b));
        std::fs::remove_file(dir).unwrap();
    }

    /// A symbolic link at the table's path is not followed (it could point the mapping at any
    /// file this user may write).
    #[test]
    fn a_symbolic_link_is_not_followed() {
        let dir = std::env::temp_dir().join(format!("roam-shm-link-{}", std::process::id()));
        let target = dir.with_extension("target");
        std::fs::write(&target, b"precious").unwrap();
        std::os::unix::fs::symlink(&target, &dir).unwrap();
        let e = SharedCounts::open(dir.clone()).err().expect("refused");
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{e}");
        assert_eq!(std::fs::read(&target).unwrap(), b"precious");
        std::fs::remove_file(dir).unwrap();
        std::fs::remove_file(target).unwrap();
    }
}
