//! Data accounting: bytes sent and received per network, each network metered (a cellular
//! plan that counts bytes) or not (WiFi at home). What a data budget is charged is the
//! metered networks' bytes.

use std::collections::BTreeMap;

use roam_core::Bytes;

use crate::radio::Direction;

/// One network's bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NetworkData {
    /// Whether its bytes count against a data plan.
    pub metered: bool,
    /// Bytes sent.
    pub up: Bytes,
    /// Bytes received.
    pub down: Bytes,
}

impl NetworkData {
    /// Both directions.
    pub fn total(&self) -> Bytes {
        Bytes(self.up.0 + self.down.0)
    }
}

/// Bytes per network.
#[derive(Clone, Debug, Default)]
pub struct DataMeter {
    networks: BTreeMap<String, NetworkData>,
}

impl DataMeter {
    /// No networks yet.
    pub fn new() -> DataMeter {
        DataMeter::default()
    }

    /// Add (or re-mark) a network.
    pub fn network(&mut self, name: &str, metered: bool) {
        self.networks.entry(name.into()).or_default().metered = metered;
    }

    /// `bytes` moved `dir` on network `name` (a network not added yet counts as metered: an
    /// unknown network is not assumed free).
    pub fn on_bytes(&mut self, name: &str, bytes: Bytes, dir: Direction) {
        let n = self
            .networks
            .entry(name.into())
            .or_insert_with(|| NetworkData {
                metered: true,
                ..NetworkData::default()
            });
        match dir {
            Direction::Up => n.up.0 += bytes.0,
            Direction::Down => n.down.0 += bytes.0,
        }
    }

    /// Every network's bytes, by name.
    pub fn networks(&self) -> impl Iterator<Item = (&str, &NetworkData)> {
        self.networks.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Bytes on metered networks: what a data plan is charged.
    pub fn metered(&self) -> Bytes {
        Bytes(
            self.networks
                .values()
                .filter(|n| n.metered)
                .map(|n| n.total().0)
                .sum(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_metered_networks_count_against_the_plan() {
        let mut m = DataMeter::new();
        m.network("wifi", false);
        m.network("cell", true);
        m.on_bytes("wifi", Bytes(5_000), Direction::Down);
        m.on_bytes("cell", Bytes(700), Direction::Up);
        m.on_bytes("cell", Bytes(300), Direction::Down);
        m.on_bytes("tether", Bytes(50), Direction::Down);
        assert_eq!(m.metered(), Bytes(1_050));
        let wifi = m.networks().find(|(n, _)| *n == "wifi").unwrap().1;
        assert_eq!((wifi.down, wifi.total()), (Bytes(5_000), Bytes(5_000)));
    }
}
