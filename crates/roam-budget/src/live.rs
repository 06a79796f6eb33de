//! The driver side: what the sans-IO models are fed from on a real device. It reads the
//! kernel (never the models themselves):
//! - [`InterfaceMeter`]: an interface's byte and packet counters (`/proc/thread-self/net/dev`,
//!   the calling thread's network namespace), sampled by the caller (every 100 ms), each sample's
//!   packets spread evenly over the interval and fed to the interface's [`Radio`];
//! - [`battery`]: the battery's remaining energy from `/sys/class/power_supply`, where the
//!   device has one (an energy budget's supply); `None` elsewhere, and the supply is then
//!   modelled (a capacity less what the radios spent).

use std::path::Path;
use std::time::Duration;

use roam_core::{Bytes, Time};

use crate::energy::Joules;
use crate::radio::{Direction, Radio};

/// An interface's counters: bytes and packets sent and received.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Packets received.
    pub rx_packets: u64,
}

impl Counters {
    /// Read `iface`'s counters, as the calling thread's network namespace sees them
    /// (`/proc/thread-self/net/dev`: a thread that entered an emulator's client namespace
    /// reads that namespace's interfaces, which `/sys/class/net` would not show it).
    pub fn read(iface: &str) -> Result<Counters, String> {
        let path = "/proc/thread-self/net/dev";
        let text = std::fs::read_to_string(path).map_err(|e| format!("reading {path}: {e}"))?;
        parse_net_dev(&text, iface).ok_or_else(|| {
            format!("no interface `{iface}` in {path} (is it an interface in this namespace?)")
        })
    }
}

/// `iface`'s counters in the text of `/proc/net/dev` (`None` if it is not there or its line
/// is malformed).
pub fn parse_net_dev(text: &str, iface: &str) -> Option<Counters> {
    text.lines().skip(2).find_map(|l| {
        let (name, rest) = l.split_once(':')?;
        if name.trim() != iface {
            return None;
        }
        let f: Vec<u64> = rest
            .split_whitespace()
            .map(|x| x.parse().ok())
            .collect::<Option<_>>()?;
        // Receive: bytes packets errs drop fifo frame compressed multicast; then transmit.
        (f.len() >= 10).then(|| Counters {
            rx_bytes: f[0],
            rx_packets: f[1],
            tx_bytes: f[8],
            tx_packets: f[9],
        })
    })
}

/// One interface's radio, fed from successive counter samples.
#[derive(Clone, Debug)]
pub struct InterfaceMeter {
    /// The interface.
    pub iface: String,
    /// Its radio model.
    pub radio: Radio,
    last: Option<(Time, Counters)>,
}

impl InterfaceMeter {
    /// A meter for `iface` with `radio`; the first sample sets the baseline.
    pub fn new(iface: &str, radio: Radio) -> InterfaceMeter {
        InterfaceMeter {
            iface: iface.into(),
            radio,
            last: None,
        }
    }

    /// A sample of the counters taken at `now`: what moved since the last one goes to the
    /// radio, its packets spread evenly over the interval (a counter that went backwards, as
    /// after an interface was re-created, restarts the baseline). Returns the bytes moved
    /// (up, down).
    pub fn sample(&mut self, now: Time, c: Counters) -> (Bytes, Bytes) {
        let Some((t0, prev)) = self.last.replace((now, c)) else {
            self.radio.advance(now);
            return (Bytes(0), Bytes(0));
        };
        let span = now.saturating_since(t0);
        let mut moved = (Bytes(0), Bytes(0));
        let mut events: Vec<(Time, u64, Direction)> = Vec::new();
        for (dir, bytes, packets) in [
            (
                Direction::Up,
                c.tx_bytes.checked_sub(prev.tx_bytes),
                c.tx_packets.checked_sub(prev.tx_packets),
            ),
            (
                Direction::Down,
                c.rx_bytes.checked_sub(prev.rx_bytes),
                c.rx_packets.checked_sub(prev.rx_packets),
            ),
        ] {
            let (Some(bytes), Some(packets)) = (bytes, packets) else {
                continue;
            };
            if bytes == 0 {
                continue;
            }
            match dir {
                Direction::Up => moved.0 = Bytes(bytes),
                Direction::Down => moved.1 = Bytes(bytes),
            }
            let n = packets.max(1);
            let size = bytes / n;
            for k in 0..n {
                let extra = if k + 1 == n { bytes - size * n } else { 0 };
                let at = t0 + span.mul_f64((k as f64 + 1.0) / n as f64);
                events.push((at, size + extra, dir));
            }
        }
        events.sort_by_key(|e| e.0);
        for (at, bytes, dir) in events {
            self.radio.on_packet(at, Bytes(bytes), dir);
        }
        self.radio.advance(now);
        moved
    }
}

/// A battery's state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BatteryReading {
    /// Energy left.
    pub energy: Joules,
    /// Energy when full, if the battery says.
    pub full: Option<Joules>,
    /// Whether it is discharging (not on a charger).
    pub discharging: bool,
}

/// A battery's state from its `power_supply` attributes (`read(name)` gives a file's text):
/// `energy_now` (µWh), or `charge_now` (µAh) times `voltage_now` (µV); `None` if it is not
/// a battery or says neither.
pub fn parse_battery(read: impl Fn(&str) -> Option<String>) -> Option<BatteryReading> {
    if read("type")?.trim() != "Battery" {
        return None;
    }
    let num = |f: &str| read(f).and_then(|s| s.trim().parse::<f64>().ok());
    // µWh to J: 1e-6 Wh * 3600 s/h.
    let wh = |uwh: f64| Joules(uwh * 1e-6 * 3600.0);
    let (energy, full) = match (num("energy_now"), num("charge_now"), num("voltage_now")) {
        (Some(e), _, _) => (wh(e), num("energy_full").map(wh)),
        (None, Some(q), Some(v)) => {
            // µAh * µV = 1e-12 Wh.
            let j = |uah: f64| Joules(uah * v * 1e-12 * 3600.0);
            (j(q), num("charge_full").map(j))
        }
        _ => return None,
    };
    let discharging = read("status").is_some_and(|s| s.trim() == "Discharging");
    Some(BatteryReading {
        energy,
        full,
        discharging,
    })
}

/// The first battery under `/sys/class/power_supply`, if the device has one.
pub fn battery() -> Option<BatteryReading> {
    let dir = Path::new("/sys/class/power_supply");
    let mut entries: Vec<_> = std::fs::read_dir(dir).ok()?.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    entries.into_iter().find_map(|e| {
        let p = e.path();
        parse_battery(|f| std::fs::read_to_string(p.join(f)).ok())
    })
}

/// How often a live driver samples (the interval `roam energy --live` uses).
pub const SAMPLE_EVERY: Duration = Duration::from_millis(100);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::profile;
    use std::collections::HashMap;
    use std::sync::Arc;

    #[test]
    fn counter_samples_drive_the_radio() {
        let r = Radio::new(Arc::new(profile("huang2012/3g").unwrap()), Time::ZERO);
        let mut m = InterfaceMeter::new("wwan0", r);
        let c = |tx: u64, txp: u64| Counters {
            tx_bytes: tx,
            tx_packets: txp,
            ..Counters::default()
        };
        m.sample(Time::ZERO, c(1000, 10));
        assert_eq!(m.radio.energy(), Joules::ZERO);
        let moved = m.sample(Time::from_millis(100), c(1100, 11));
        assert_eq!(moved, (Bytes(100), Bytes(0)));
        m.sample(Time::from_millis(60_000), c(1100, 11));
        assert!(
            (m.radio.energy().0 - 7.38).abs() < 0.15,
            "{}",
            m.radio.energy()
        );
        // A counter that went back restarts the baseline without a packet.
        let before = m.radio.energy();
        m.sample(Time::from_millis(60_100), c(5, 1));
        assert_eq!(m.radio.energy(), before);
    }

    #[test]
    fn proc_net_dev_lines_give_an_interfaces_counters() {
        let text = "Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 4128 109    0    0    0     0          0         0 4200 110    0    0    0     0       0          0
  wifi:       7       1    0    0    0     0          0         0        9       2    0    0    0     0       0          0
";
        assert_eq!(
            parse_net_dev(text, "wifi"),
            Some(Counters {
                rx_bytes: 7,
                rx_packets: 1,
                tx_bytes: 9,
                tx_packets: 2
            })
        );
        assert_eq!(parse_net_dev(text, "wif"), None);
        assert_eq!(parse_net_dev("a\nb\n  x: 1 2\n", "x"), None);
        assert!(Counters::read("lo").is_ok());
        assert!(Counters::read("no-such-if0")
            .unwrap_err()
            .contains("no-such-if0"));
    }

    #[test]
    fn a_battery_is_read_in_energy_or_in_charge() {
        let files = |kv: &[(&str, &str)]| {
            let m: HashMap<String, String> = kv
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            move |f: &str| m.get(f).cloned()
        };
        let b = parse_battery(files(&[
            ("type", "Battery\n"),
            ("energy_now", "10000000\n"),
            ("energy_full", "40000000\n"),
            ("status", "Discharging\n"),
        ]))
        .unwrap();
        assert_eq!(b.energy, Joules(36_000.0));
        assert_eq!(b.full, Some(Joules(144_000.0)));
        assert!(b.discharging);
        let q = parse_battery(files(&[
            ("type", "Battery"),
            ("charge_now", "2000000"),
            ("voltage_now", "3800000"),
            ("status", "Charging"),
        ]))
        .unwrap();
        assert!((q.energy.0 - 27_360.0).abs() < 1e-6, "{q:?}");
        assert!(!q.discharging);
        assert_eq!(parse_battery(files(&[("type", "Mains")])), None);
        assert_eq!(parse_battery(files(&[("type", "Battery")])), None);
    }
}
