//! A scenario's links as the emulator runs them, written once for every command and the lab.
//!
//! A [`Scenario`] says how each link behaves over time (capacity, delay, loss, availability);
//! running it also takes a drop-tail queue bound, which is the emulator's or the lab's and not
//! the scenario's, and a seed for each link's random loss (and jitter, which scenario links do
//! not have). The seed rule is one for all: **link `i` (from 0, in the scenario's order) gets
//! seed `first_seed + i`** (wrapping), where the caller passes `first_seed`: `roam emu run`,
//! `roam trace` and `roam drive` their `--seed`, the lab 1. Scenario links keep the interface up
//! through outages (a silent drop, [`LinkConfig::carrier_after`] `None`).

use roam_trace::link::NamedLink;
use roam_trace::scenario::Scenario;

use crate::queue::QueueLimit;
use crate::spec::LinkConfig;

/// One scenario link as the emulator runs it: drop-tail bound `queue` each way, no jitter,
/// outages silent, `seed` for its random loss.
pub fn link(l: &NamedLink, queue: QueueLimit, seed: u64) -> LinkConfig {
    LinkConfig {
        name: l.name.clone(),
        kind: l.kind,
        trace: l.trace.clone(),
        queue,
        jitter: Default::default(),
        carrier_after: None,
        seed,
    }
}

/// Every link of `scenario` as the emulator runs it (see [`link`]), link `i` seeded
/// `first_seed + i`.
pub fn links(scenario: &Scenario, queue: QueueLimit, first_seed: u64) -> Vec<LinkConfig> {
    scenario
        .links
        .iter()
        .enumerate()
        .map(|(i, l)| link(l, queue, first_seed.wrapping_add(i as u64)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_i_gets_the_first_seed_plus_i() {
        let s = Scenario::by_name("hotspot", 1).unwrap();
        let q = QueueLimit::Packets(100);
        let l = links(&s, q, 7);
        assert_eq!(
            l.iter()
                .map(|l| (l.name.as_str(), l.seed))
                .collect::<Vec<_>>(),
            [("wifi", 7), ("cell", 8)]
        );
        assert!(l.iter().all(|l| l.queue == q && l.carrier_after.is_none()));
        assert_eq!(l[1].trace, s.links[1].trace);
        assert_eq!(links(&s, q, u64::MAX)[1].seed, 0, "wrapping");
    }
}
