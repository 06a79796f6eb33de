//! The receiving application of `roam lab afc`: a loop that reads the stream at the scenario's
//! read rate, one slot of the profile per round trip, in one of two ways ([`Reading`]).
//!
//! **Paced** (the thesis's application, ch. III §3.5): the reader wakes every [`TICK`] and
//! reads what its rate allows in that tick, and no more: a slot at 0 Mbit/s reads nothing,
//! and time the reader found nothing to read is not made up later (no banking). A roam
//! delivery can be larger than a tick's allowance: the excess is owed and repaid from the
//! next ticks, so the mean rate is the profile's.
//!
//! **CPU-bound** (contention, as on a phone, §3.1): the application spends a fixed amount of
//! CPU on every byte it reads (a checksum, [`Work`]), so how fast it reads is the CPU it gets.
//! Its worker thread sits in a cgroup (`cgroup`) whose share of one CPU follows the profile:
//! the slot's rate over the worker's full speed, which is [`FULL_OVER_PEAK`] times the
//! profile's peak. The socket is read by a second thread outside the group that hands each
//! chunk to the worker by rendezvous: the socket is read no faster than the worker works, and
//! a throttled thread never holds a lock it shares with the network stack (roam's session,
//! quinn's connection). A first version read the socket in the throttled thread itself, and
//! its roam and quinn trials read about half what they do now (kernel TCP's unchanged): it
//! was throttled inside one (docs/results/afc-cpu-quick5-aae61a4 and -823010a). The cost per byte is calibrated against the thread's own CPU clock, so
//! other load on the machine does not change it; other load can still leave the reader less
//! than its share, which the trial reports (`reader_cpu_s` beside the share it was granted).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use super::cgroup::{self, CpuGroup};
use super::paper::Table4;
use roam_net::proto::session::FlowStats;

/// How often the paced reader wakes.
pub const TICK: Duration = Duration::from_millis(10);

/// The CPU-bound reader's full speed (a whole CPU) over the profile's peak rate: the share a
/// slot at the peak asks for is its inverse. Small shares leave room for the lab's other
/// trials on the same cores.
pub const FULL_OVER_PEAK: f64 = 8.0;

/// The most the CPU-bound reader takes from the socket at once: a roam delivery's size in the
/// lab (`bulk::options`), so each take is one read-rate sample of one delivery.
const CHUNK: u64 = 16 << 10;

/// How the application's read rate follows the profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reading {
    /// Every tick, what the slot's rate allows.
    Paced,
    /// As fast as a CPU share that follows the profile lets it.
    Cpu,
}

/// What the reader measured.
#[derive(Debug, Default)]
pub struct Read {
    /// Bytes the application read.
    pub bytes: u64,
    /// Over how long.
    pub seconds: f64,
    /// The most the receiver held that the application had not read (as sampled).
    pub peak_unread: u64,
    /// roam's receiver statistics.
    pub flow: Option<FlowStats>,
    /// The CPU-bound reader's CPU.
    pub cpu: Option<CpuUse>,
}

/// What the CPU-bound reader's worker had of the CPU, seconds.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuUse {
    /// CPU time it used.
    pub used_s: f64,
    /// CPU time its cgroup's quotas granted over the run.
    pub granted_s: f64,
    /// How long its cgroup was throttled.
    pub throttled_s: f64,
}

impl Read {
    /// What the application read, Mbit/s.
    pub fn goodput_mbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / 1e6 / self.seconds
    }
}

/// The application's read rate at `t` seconds into the run, bytes a second.
pub fn read_rate(table: &Table4, slot: Duration, t: f64) -> f64 {
    slot_rate(table, (t / slot.as_secs_f64()) as usize)
}

/// The read rate of the profile's `k`th slot from the start, bytes a second.
fn slot_rate(table: &Table4, k: usize) -> f64 {
    table.read_mbps[k % table.read_mbps.len()] * 1e6 / 8.0
}

/// Run the reader for `duration`: `take(most)` reads up to that many bytes without blocking
/// and returns what it read (a roam delivery may make it more), and `unread()` what waits.
pub fn read(
    reading: Reading,
    table: &Table4,
    slot: Duration,
    duration: Duration,
    take: impl FnMut(u64) -> Result<u64>,
    unread: impl FnMut() -> u64,
) -> Result<Read> {
    match reading {
        Reading::Paced => paced(table, slot, duration, take, unread),
        Reading::Cpu => cpu_bound(table, slot, duration, take, unread),
    }
}

fn paced(
    table: &Table4,
    slot: Duration,
    duration: Duration,
    mut take: impl FnMut(u64) -> Result<u64>,
    mut unread: impl FnMut() -> u64,
) -> Result<Read> {
    let start = Instant::now();
    let mut out = Read::default();
    let mut owed = 0.0f64;
    let mut next = start;
    while start.elapsed() < duration {
        next += TICK;
        if let Some(d) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
        let t = start.elapsed().as_secs_f64();
        let allowance = read_rate(table, slot, t) * TICK.as_secs_f64() - owed;
        out.peak_unread = out.peak_unread.max(unread());
        if allowance <= 0.0 {
            owed = -allowance;
            continue;
        }
        let got = take(allowance as u64)?;
        out.bytes += got;
        // A tick's allowance not used is lost (no banking); one overdrawn is owed.
        owed = (got as f64 - allowance).max(0.0);
    }
    out.seconds = start.elapsed().as_secs_f64();
    Ok(out)
}

fn cpu_bound(
    table: &Table4,
    slot: Duration,
    duration: Duration,
    mut take: impl FnMut(u64) -> Result<u64>,
    mut unread: impl FnMut() -> u64,
) -> Result<Read> {
    let peak = table.read_mbps.iter().fold(0.0f64, |a, &b| a.max(b)) * 1e6 / 8.0;
    let full = FULL_OVER_PEAK * peak;
    let work = Work::calibrated(full);
    // One group per reader, however many trials run at once.
    static READERS: AtomicU64 = AtomicU64::new(0);
    let n = READERS.fetch_add(1, Ordering::Relaxed);
    let group = CpuGroup::create(&format!("roam-afc-{}-{n}", std::process::id()))?;
    // Slot k's share, indexed by k itself: `read_rate` at k * slot can land in slot k - 1
    // by rounding (0.6 / 0.2 is 2.9999999999999996).
    let share = |k: usize| slot_rate(table, k) / full;
    group.set_share(share(0))?;
    let start = Instant::now();
    let over = AtomicBool::new(false);
    let mut out = Read::default();
    let (used, ran, shares) = std::thread::scope(|s| -> Result<(f64, Duration, Vec<_>)> {
        // Ends the controller however the reader ends, a panic included.
        let _stop = SetOnDrop(&over);
        // The controller, outside the group: each slot's share at the slot's start, and when
        // each was set with the ratio Linux grants for it. A failure stops the reader too.
        let (over, group) = (&over, &group);
        let controller = s.spawn(move || -> Result<Vec<(Duration, f64)>> {
            let _stop = SetOnDrop(over);
            let mut shares = Vec::new();
            let mut k = 0usize;
            while !over.load(Ordering::SeqCst) {
                let at = slot * k as u32;
                if let Some(d) = (start + at).checked_duration_since(Instant::now()) {
                    std::thread::sleep(d.min(Duration::from_millis(20)));
                    continue;
                }
                group.set_share(share(k))?;
                shares.push((start.elapsed(), cgroup::granted(share(k))));
                k += 1;
            }
            Ok(shares)
        });
        // The application's work, in the group; it takes each chunk from the socket side
        // by rendezvous, so the socket is read only as fast as the work goes, and at most one
        // chunk is held outside it.
        let (tx, rx) = std::sync::mpsc::sync_channel::<u64>(0);
        let work = &work;
        let worker = s.spawn(move || -> Result<(f64, u64)> {
            let _stop = SetOnDrop(over);
            let _inside = group.enter()?;
            let cpu0 = thread_cpu();
            let mut bytes = 0;
            while let Ok(n) = rx.recv() {
                work.spend(n);
                bytes += n;
            }
            Ok((thread_cpu() - cpu0, bytes))
        });
        // The socket side, outside the group: it never holds a lock of the network stack
        // while throttled.
        let run = (|| -> Result<Duration> {
            while start.elapsed() < duration && !over.load(Ordering::SeqCst) {
                out.peak_unread = out.peak_unread.max(unread());
                let got = take(CHUNK)?;
                if got == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
                if tx.send(got).is_err() {
                    break; // the worker ended: its error says why
                }
            }
            Ok(start.elapsed())
        })();
        drop(tx);
        let worked = worker
            .join()
            .map_err(|_| anyhow!("the reader's worker panicked"))?;
        over.store(true, Ordering::SeqCst);
        let shares = controller
            .join()
            .map_err(|_| anyhow!("the reader's CPU controller panicked"))?
            .context("setting the reader's CPU share")?;
        let (used, bytes) = worked?;
        let ran = run?;
        out.bytes = bytes;
        if ran < duration {
            bail!(
                "the reader stopped after {:.1} s of {} s",
                ran.as_secs_f64(),
                duration.as_secs()
            );
        }
        Ok((used, ran, shares))
    })?;
    let granted = granted_seconds(&shares, ran);
    out.seconds = start.elapsed().as_secs_f64();
    out.cpu = Some(CpuUse {
        used_s: used,
        granted_s: granted,
        throttled_s: group.throttled()?.as_secs_f64(),
    });
    Ok(out)
}

/// Sets the flag when dropped.
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// CPU seconds granted over `[0, end]` by `shares`, each (when it was set, the ratio granted)
/// and lasting until the next.
fn granted_seconds(shares: &[(Duration, f64)], end: Duration) -> f64 {
    shares
        .iter()
        .enumerate()
        .map(|(i, &(from, ratio))| {
            let to = shares.get(i + 1).map_or(end, |n| n.0).min(end);
            ratio * to.saturating_sub(from).as_secs_f64()
        })
        .sum()
}

/// CPU spent per byte read: passes of a rotate-and-xor checksum over a scratch buffer.
#[derive(Debug)]
pub struct Work {
    passes: u32,
    scratch: Vec<u8>,
}

impl Work {
    /// Passes per byte such that one CPU reads `bytes_per_s`, timed on this thread's clock.
    pub fn calibrated(bytes_per_s: f64) -> Work {
        let mut w = Work {
            passes: 1,
            scratch: (0..CHUNK).map(|i| i as u8).collect(),
        };
        // 64 passes over 64 KiB: a few milliseconds, long enough for the clock.
        let trial = 64;
        w.passes = trial;
        let t0 = thread_cpu();
        w.spend(CHUNK);
        let per_pass_byte = (thread_cpu() - t0).max(1e-9) / (trial as f64 * CHUNK as f64);
        let want = 1.0 / bytes_per_s.max(1.0);
        w.passes = (want / per_pass_byte).round().clamp(1.0, 1e6) as u32;
        w
    }

    /// Spend the CPU of reading `bytes`.
    pub fn spend(&self, bytes: u64) {
        let mut left = bytes as usize;
        let mut h = 0u64;
        while left > 0 {
            let n = left.min(self.scratch.len());
            for _ in 0..self.passes {
                for &b in std::hint::black_box(&self.scratch[..n]) {
                    h = h.rotate_left(5) ^ u64::from(b);
                }
            }
            left -= n;
        }
        std::hint::black_box(h);
    }
}

/// This thread's CPU time, seconds.
fn thread_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through the pointer, which is valid for it.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn granted_seconds_charge_each_share_until_the_next_or_the_end() {
        let s = |ms| Duration::from_millis(ms);
        let shares = [
            (s(0), 0.001),
            (s(530), 0.25),
            (s(1060), 0.25),
            (s(1590), 0.001),
        ];
        let g = granted_seconds(&shares, s(1600));
        assert!(
            (g - (0.53 * 0.001 + 1.06 * 0.25 + 0.01 * 0.001)).abs() < 1e-12,
            "{g}"
        );
        assert_eq!(granted_seconds(&[], s(1000)), 0.0);
    }

    #[test]
    fn the_work_is_calibrated_to_the_speed_asked_for() {
        let slow = Work::calibrated(1e6);
        let fast = Work::calibrated(1e8);
        assert!(
            slow.passes > 10 * fast.passes,
            "{} vs {}",
            slow.passes,
            fast.passes
        );
    }

    /// The cgroup holds a reader that could read 8x the profile's peak to the profile: an
    /// endless source, Table 4's <0, 6, 6> Mbit/s per 200 ms slot, 3 s.
    #[test]
    fn the_cpu_bound_reader_reads_at_the_profiles_rate() {
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: the CPU-bound reader's cgroup needs root");
            return;
        }
        if let Err(e) = CpuGroup::create("roam-afc-probe") {
            eprintln!("skipped: {e:#}");
            return;
        }
        let table = super::super::paper::table4("afc-s2").unwrap();
        let slot = Duration::from_millis(200);
        let r = read(Reading::Cpu, table, slot, Duration::from_secs(3), Ok, || 0).unwrap();
        let CpuUse {
            used_s: used,
            granted_s: granted,
            throttled_s: throttled,
        } = r.cpu.unwrap();
        // The profile's mean is 4 Mbit/s; unlimited, the reader would reach 48.
        let mbps = r.goodput_mbps();
        assert!(mbps < 8.0, "read {mbps} Mbit/s: the share did not hold it");
        // A share is a ceiling, not a floor: on a busy machine the reader gets less (0.13
        // Mbit/s beside a dozen emulators), so only that it read at all is asserted.
        assert!(mbps > 0.0, "read nothing");
        assert!(throttled > 0.0, "never throttled");
        assert!(
            used <= granted * 1.5 + 0.05,
            "used {used} s of {granted} s granted"
        );
    }
}
