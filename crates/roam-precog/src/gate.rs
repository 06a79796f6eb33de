//! When replay may run: on WiFi, with battery, CPU and disk to spare (the thesis, ch. V:
//! "if battery, CPU and disk allow"; it gives no values, so the defaults here are roam's).
//!
//! [`Conditions`] is a snapshot of the device; [`Thresholds::check`] says whether it allows a
//! replay, and if not, why (shown to the user by `roam precog replay --when wifi`). [`read`]
//! takes the snapshot on a Linux device: the networks from roam-net's scout (WiFi: any up
//! network that is neither cellular nor metered), the battery from roam-budget, the 1-minute
//! load average per CPU, and the free space where the browser's profile lives.

use roam_budget::live::battery;
use std::path::Path;

/// A snapshot of the device (also read from a JSON file by `roam precog replay
/// --conditions`, for a device whose state [`read`] cannot see, and for tests).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Conditions {
    /// An unmetered, non-cellular network is up.
    pub wifi: bool,
    /// The battery's charge as a fraction of full, if the device has a battery that says.
    pub battery: Option<f64>,
    /// On a charger (or no battery at all).
    pub charging: bool,
    /// The 1-minute load average per CPU.
    pub load: f64,
    /// Free bytes on the disk that holds the profile and the caches.
    pub disk_free: u64,
}

/// The limits a replay waits for.
#[derive(Clone, Debug, PartialEq)]
pub struct Thresholds {
    /// Least battery charge (fraction) to replay on when not charging.
    pub min_battery: f64,
    /// Most load per CPU.
    pub max_load: f64,
    /// Least free disk.
    pub min_disk_free: u64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            min_battery: 0.3,
            max_load: 0.5,
            min_disk_free: 1 << 30,
        }
    }
}

/// Why a replay waits.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Wait {
    /// No WiFi (replay never uses a cellular or metered network).
    #[error("not on WiFi (only cellular or metered networks are up)")]
    NoWifi,
    /// Battery below the threshold while not charging.
    #[error("battery at {0:.0}% and not charging (replay waits for {1:.0}%)")]
    Battery(f64, f64),
    /// The CPU is busy.
    #[error("load {0:.2} per CPU (replay waits for at most {1:.2})")]
    Busy(f64, f64),
    /// The disk is nearly full.
    #[error("{0} MiB free on disk (replay waits for {1} MiB)")]
    Disk(u64, u64),
}

impl Thresholds {
    /// `Ok` if `c` allows a replay now, else the first reason it does not.
    pub fn check(&self, c: &Conditions) -> Result<(), Wait> {
        if !c.wifi {
            return Err(Wait::NoWifi);
        }
        if let Some(b) = c.battery.filter(|_| !c.charging) {
            if b < self.min_battery {
                return Err(Wait::Battery(b * 100.0, self.min_battery * 100.0));
            }
        }
        if c.load > self.max_load {
            return Err(Wait::Busy(c.load, self.max_load));
        }
        if c.disk_free < self.min_disk_free {
            return Err(Wait::Disk(c.disk_free >> 20, self.min_disk_free >> 20));
        }
        Ok(())
    }
}

/// The device's conditions now; `disk` is a path on the disk that matters.
pub fn read(disk: &Path) -> Conditions {
    let wifi = roam_net::runtime::scout::scan()
        .map(|nets| nets.iter().any(|n| !n.kind.cellular && !n.kind.metered))
        .unwrap_or(false);
    let b = battery();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |l| l / cpus);
    Conditions {
        wifi,
        battery: b.and_then(|b| b.full.filter(|f| f.0 > 0.0).map(|f| b.energy.0 / f.0)),
        charging: b.is_none_or(|b| !b.discharging),
        load,
        disk_free: free_bytes(disk).unwrap_or(0),
    }
}

fn free_bytes(p: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).ok()?;
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid C string and `s` a valid out-parameter.
    (unsafe { libc::statvfs(c.as_ptr(), &mut s) } == 0)
        .then(|| s.f_bavail as u64 * s.f_frsize as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok() -> Conditions {
        Conditions {
            wifi: true,
            battery: Some(0.9),
            charging: false,
            load: 0.1,
            disk_free: 8 << 30,
        }
    }

    #[test]
    fn each_threshold_holds_replay_back() {
        let t = Thresholds::default();
        assert_eq!(t.check(&ok()), Ok(()));
        assert_eq!(
            t.check(&Conditions {
                wifi: false,
                ..ok()
            }),
            Err(Wait::NoWifi)
        );
        assert!(matches!(
            t.check(&Conditions {
                battery: Some(0.1),
                ..ok()
            }),
            Err(Wait::Battery(..))
        ));
        // Charging, a low battery does not matter.
        assert_eq!(
            t.check(&Conditions {
                battery: Some(0.1),
                charging: true,
                ..ok()
            }),
            Ok(())
        );
        assert!(matches!(
            t.check(&Conditions { load: 1.5, ..ok() }),
            Err(Wait::Busy(..))
        ));
        assert!(matches!(
            t.check(&Conditions {
                disk_free: 1 << 20,
                ..ok()
            }),
            Err(Wait::Disk(..))
        ));
    }

    #[test]
    fn reading_this_machine_does_not_fail() {
        let c = read(Path::new("/"));
        assert!(c.load >= 0.0 && c.disk_free > 0, "{c:?}");
    }
}
