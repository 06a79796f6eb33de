//! How a prefetcher chooses: IMP, or one of the thesis's baselines (IMP thesis §3.5, all over
//! Intentional Networking, so every one of them prefetches in the background): never prefetch;
//! prefetch items up to a size (128 KB in the thesis); prefetch only over WiFi; prefetch
//! everything at once.

use roam_core::{Bytes, Time};

use crate::accuracy::Accuracy;
use crate::decision::{decide, Candidate, Decision, LongRun, NetworkState, Prices};

/// The thesis's size limit.
pub const SIZE_LIMIT: Bytes = Bytes(128 * 1024);

/// A prefetching strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Strategy {
    /// Never prefetch: every item is fetched on demand.
    Never,
    /// Prefetch every item up to this size (a hint without one: the mean item size).
    SizeLimit(Bytes),
    /// Prefetch every item while a WiFi network is available.
    WifiOnly,
    /// Prefetch every item at once, whatever it costs.
    Always,
    /// Informed Mobile Prefetching ([`decide`]).
    Imp,
}

impl Strategy {
    /// Every strategy, the thesis's order (IMP last).
    pub const ALL: [Strategy; 5] = [
        Strategy::Never,
        Strategy::SizeLimit(SIZE_LIMIT),
        Strategy::WifiOnly,
        Strategy::Always,
        Strategy::Imp,
    ];

    /// Its name in reports and on command lines.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Never => "never",
            Strategy::SizeLimit(_) => "size-limit",
            Strategy::WifiOnly => "wifi-only",
            Strategy::Always => "always",
            Strategy::Imp => "imp",
        }
    }

    /// Parse a name (`size-limit` takes the thesis's 128 KB).
    pub fn parse(s: &str) -> Result<Strategy, String> {
        Strategy::ALL
            .into_iter()
            .find(|x| x.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown strategy `{s}` (expected one of: {})",
                    Strategy::ALL.map(Strategy::name).join(", ")
                )
            })
    }

    /// Which of `candidates` to prefetch now, and on which networks.
    #[allow(clippy::too_many_arguments)]
    pub fn choose(
        self,
        now: Time,
        candidates: &[Candidate],
        networks: &[NetworkState],
        accuracy: &Accuracy,
        long_run: &LongRun,
        prices: Prices,
        default_size: Bytes,
    ) -> Decision {
        let all = |pick: &dyn Fn(&Candidate) -> bool, on: &dyn Fn(&NetworkState) -> bool| {
            let on: Vec<String> = networks
                .iter()
                .filter(|n| on(n))
                .map(|n| n.name.to_string())
                .collect();
            if on.is_empty() {
                return Decision::default();
            }
            Decision {
                start: candidates
                    .iter()
                    .filter(|c| pick(c))
                    .map(|c| c.id)
                    .collect(),
                on,
                benefit: 0.0,
            }
        };
        match self {
            Strategy::Never => Decision::default(),
            Strategy::Always => all(&|_| true, &|_| true),
            Strategy::SizeLimit(limit) => {
                all(&|c| c.size.unwrap_or(default_size).0 <= limit.0, &|_| true)
            }
            Strategy::WifiOnly => all(&|_| true, &|n| n.wifi),
            Strategy::Imp => decide(
                now,
                candidates,
                networks,
                accuracy,
                long_run,
                prices,
                default_size,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roam_budget::{profile, Radio};
    use roam_core::BitRate;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn the_baselines_choose_as_the_thesis_describes() {
        let r = Radio::new(Arc::new(profile("huang2012/3g").unwrap()), Time::ZERO);
        let net = |name: &'static str, wifi: bool| NetworkState {
            name,
            wifi,
            metered: !wifi,
            bandwidth: BitRate::mbps(1),
            latency: Duration::from_millis(100),
            radio: &r,
        };
        let c = [
            Candidate {
                id: 1,
                class: 0,
                size: Some(Bytes(10_000)),
            },
            Candidate {
                id: 2,
                class: 0,
                size: Some(Bytes(500_000)),
            },
            Candidate {
                id: 3,
                class: 0,
                size: None,
            },
        ];
        let (acc, lr) = (Accuracy::new(), LongRun::default());
        let dear = Prices {
            energy: 1e6,
            data: 1e6,
        };
        let run = |s: Strategy, nets: &[NetworkState]| {
            s.choose(Time::ZERO, &c, nets, &acc, &lr, dear, Bytes(50_000))
                .start
        };
        let cell = [net("cell", false)];
        let both = [net("cell", false), net("wifi", true)];
        assert!(run(Strategy::Never, &both).is_empty());
        assert_eq!(run(Strategy::Always, &cell), vec![1, 2, 3]);
        assert_eq!(run(Strategy::SizeLimit(SIZE_LIMIT), &cell), vec![1, 3]);
        assert!(run(Strategy::WifiOnly, &cell).is_empty());
        assert_eq!(run(Strategy::WifiOnly, &both), vec![1, 2, 3]);
        assert!(
            run(Strategy::Imp, &cell).is_empty(),
            "nothing pays at these prices"
        );
        assert_eq!(Strategy::parse("wifi-only"), Ok(Strategy::WifiOnly));
        assert!(Strategy::parse("sometimes")
            .unwrap_err()
            .contains("never, size-limit"));
    }
}
