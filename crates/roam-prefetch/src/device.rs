//! The [`Environment`] of a client on a real device: networks from roam-net's estimates
//! (`MultiSocket::estimates`), each interface's radio driven by its counters
//! ([`roam_budget::live::InterfaceMeter`]), and the prices of energy and data from the
//! budgets' controllers, charged what the radios spent and what the metered interfaces moved.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use roam_budget::live::{Counters, InterfaceMeter};
use roam_budget::{Budget, BudgetError, PriceController, Radio, RadioProfile};
use roam_core::{BitRate, Bytes, Time};
use roam_net::runtime::NetworkView;

use crate::decision::Prices;
use crate::runtime::{Environment, Network};

/// An interface the device may use.
pub struct Interface {
    /// Its name (what roam-net's estimates call it).
    pub name: String,
    /// Its radio's power model.
    pub profile: RadioProfile,
    /// WiFi (else cellular).
    pub wifi: bool,
    /// Whether its bytes count against the data budget.
    pub metered: bool,
}

struct Iface {
    name: String,
    wifi: bool,
    metered: bool,
    meter: InterfaceMeter,
}

struct Live {
    ifaces: Vec<Iface>,
    energy: Option<PriceController>,
    data: Option<PriceController>,
    /// Energy and metered bytes already charged to the controllers.
    charged: (f64, u64),
    last_sample: Option<Instant>,
}

/// What IMP reads on a device.
pub struct DeviceEnvironment {
    estimates: Box<dyn Fn() -> Vec<NetworkView> + Send + Sync>,
    live: Mutex<Live>,
    start: Instant,
}

impl DeviceEnvironment {
    /// An environment over `interfaces`, with `estimates` giving roam-net's current estimates
    /// (say, `move || socket.estimates()`), and energy (joules) and data (bytes) budgets if
    /// there are any: without one, that resource is free (price zero).
    pub fn new(
        interfaces: Vec<Interface>,
        estimates: impl Fn() -> Vec<NetworkView> + Send + Sync + 'static,
        energy: Option<Budget>,
        data: Option<Budget>,
    ) -> Result<DeviceEnvironment, BudgetError> {
        let now = Time::ZERO;
        let controller = |b: Option<Budget>| -> Result<Option<PriceController>, BudgetError> {
            b.map(|b| {
                let b = Budget {
                    end: Time::ZERO + b.end.saturating_since(b.start),
                    start: now,
                    ..b
                };
                PriceController::new(b, roam_budget::Prices::default(), now)
            })
            .transpose()
        };
        Ok(DeviceEnvironment {
            estimates: Box::new(estimates),
            live: Mutex::new(Live {
                ifaces: interfaces
                    .into_iter()
                    .map(|i| Iface {
                        meter: InterfaceMeter::new(
                            &i.name,
                            Radio::new(std::sync::Arc::new(i.profile), now),
                        ),
                        name: i.name,
                        wifi: i.wifi,
                        metered: i.metered,
                    })
                    .collect(),
                energy: controller(energy)?,
                data: controller(data)?,
                charged: (0.0, 0),
                last_sample: None,
            }),
            start: Instant::now(),
        })
    }

    /// Sample every interface's counters (at most every 100 ms) and charge the controllers.
    fn sample(&self, live: &mut Live) {
        if live
            .last_sample
            .is_some_and(|t| t.elapsed() < roam_budget::live::SAMPLE_EVERY)
        {
            return;
        }
        live.last_sample = Some(Instant::now());
        let now = self.now();
        let mut metered = 0;
        for i in &mut live.ifaces {
            // An interface that is gone reads as nothing moved.
            if let Ok(c) = Counters::read(&i.name) {
                let (up, down) = i.meter.sample(now, c);
                if i.metered {
                    metered += up.0 + down.0;
                }
            } else {
                i.meter.radio.advance(now);
            }
        }
        let spent: f64 = live.ifaces.iter().map(|i| i.meter.radio.energy().0).sum();
        let (e0, _) = live.charged;
        if let Some(c) = &mut live.energy {
            c.record(spent - e0);
            c.tick(now);
        }
        if let Some(c) = &mut live.data {
            c.record(metered as f64);
            c.tick(now);
        }
        live.charged = (spent, live.charged.1 + metered);
    }

    /// Energy spent (modelled) and metered bytes moved up to now (the counters are sampled
    /// first; a tail still running is charged only up to now).
    pub fn spent(&self) -> (f64, Bytes) {
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        self.sample(&mut live);
        (live.charged.0, Bytes(live.charged.1))
    }
}

impl Environment for DeviceEnvironment {
    fn now(&self) -> Time {
        Time::from_nanos(self.start.elapsed().as_nanos() as u64)
    }

    fn networks(&self) -> Vec<Network> {
        let views = (self.estimates)();
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        self.sample(&mut live);
        views
            .iter()
            .filter_map(|v| {
                let i = live.ifaces.iter().find(|i| i.name == v.name)?;
                Some(Network {
                    name: v.name.clone(),
                    wifi: i.wifi,
                    metered: i.metered,
                    // A network without an estimate yet is still there.
                    bandwidth: v.bandwidth.unwrap_or(BitRate(0)),
                    latency: v.rtt.map_or(Duration::ZERO, |r| r / 2),
                    radio: i.meter.radio.clone(),
                })
            })
            .collect()
    }

    fn prices(&self) -> Prices {
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        self.sample(&mut live);
        Prices {
            energy: live.energy.as_ref().map_or(0.0, |c| c.price()),
            data: live.data.as_ref().map_or(0.0, |c| c.price()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roam_budget::profile;

    fn view(name: &str, bw: Option<BitRate>) -> NetworkView {
        NetworkView {
            net: Default::default(),
            name: name.into(),
            rtt: Some(Duration::from_millis(80)),
            bandwidth: bw,
        }
    }

    #[test]
    fn networks_are_the_estimated_interfaces_with_their_radios_and_prices_follow_budgets() {
        let ifaces = vec![Interface {
            name: "lo".into(),
            profile: profile("huang2012/wifi").unwrap(),
            wifi: true,
            metered: false,
        }];
        let est = || {
            vec![
                view("lo", Some(BitRate::mbps(20))),
                view("eth9", Some(BitRate::mbps(1))),
                view("lo2", None),
            ]
        };
        let env = DeviceEnvironment::new(ifaces, est, None, None).unwrap();
        let nets = env.networks();
        assert_eq!(nets.len(), 1, "only the known interface");
        assert_eq!(
            (nets[0].name.as_str(), nets[0].latency),
            ("lo", Duration::from_millis(40))
        );
        assert_eq!(env.prices(), Prices::default(), "no budgets: free");
        let hour = Budget::battery(100.0, Time::ZERO, Time::from_millis(3_600_000));
        let priced = DeviceEnvironment::new(Vec::new(), Vec::new, Some(hour), None).unwrap();
        assert!(priced.prices().energy > 0.0);
        assert_eq!(priced.prices().data, 0.0);
        let empty = Budget::battery(0.0, Time::ZERO, Time::from_millis(1000));
        assert!(DeviceEnvironment::new(Vec::new(), Vec::new, Some(empty), None).is_err());
    }
}
