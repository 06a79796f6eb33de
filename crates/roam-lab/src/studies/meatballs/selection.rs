//! How `roam lab meatballs` decides (Meatballs thesis §4.4.2-4.4.3): per request, which network
//! (the thesis's three baselines and Meatballs with each evaluation method at each cost level;
//! every one over roam-net with the same application, only the multi-sockets' configuration
//! differs, at both ends); per utterance, where to recognise speech (local-only, remote-only,
//! remote-preferred, adaptive, Meatballs), which the speech application decides itself.

use roam_decide::{CostLevel, Method, Prices};
use roam_net::proto::session::{Config, NetworkChoice, Redundancy};
use roam_net::Label;

use crate::harness::system::{SystemUnderTest, Transport};

/// A network-selection rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Selection {
    /// Every request and response over the cellular network.
    CellularOnly,
    /// Over WiFi whenever it is associated (connected), else cellular; a WiFi that vanishes
    /// is left only when its connection breaks.
    WifiPreferred,
    /// roam-net's placement without redundancy: the network the estimates say delivers first
    /// (speech: the place of least weighted cost at the predicted values).
    Adaptive,
    /// Speech: recognise on the phone, always.
    LocalOnly,
    /// Speech: recognise on the server whenever the WiFi is there, else on the phone.
    RemotePreferred,
    /// Speech: recognise on the server, always (over the 3G when the WiFi is gone).
    RemoteOnly,
    /// Meatballs: one network or both, by least expected weighted cost at a cost level.
    Meatballs(Method, CostLevel),
}

impl Selection {
    /// The network-selection rules: the three baselines, then Meatballs by method and level.
    pub fn all() -> Vec<Selection> {
        Selection::with_baselines(&[
            Selection::CellularOnly,
            Selection::WifiPreferred,
            Selection::Adaptive,
        ])
    }

    /// The speech rules: local-only, remote-only, remote-preferred, adaptive, then Meatballs.
    pub fn speech_all() -> Vec<Selection> {
        Selection::with_baselines(&[
            Selection::LocalOnly,
            Selection::RemoteOnly,
            Selection::RemotePreferred,
            Selection::Adaptive,
        ])
    }

    fn with_baselines(baselines: &[Selection]) -> Vec<Selection> {
        let mut v = baselines.to_vec();
        for m in Method::ALL {
            for l in CostLevel::ALL {
                v.push(Selection::Meatballs(m, l));
            }
        }
        v
    }

    /// Whether the speech application runs under this rule.
    pub fn speech(self) -> bool {
        !matches!(self, Selection::CellularOnly | Selection::WifiPreferred)
    }

    /// Whether the network-selection application runs under this rule.
    pub fn network(self) -> bool {
        !matches!(
            self,
            Selection::LocalOnly | Selection::RemoteOnly | Selection::RemotePreferred
        )
    }

    /// Name on the command line and in reports (`meatballs-empirical-low`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Selection::CellularOnly => "cellular-only",
            Selection::WifiPreferred => "wifi-preferred",
            Selection::Adaptive => "adaptive",
            Selection::LocalOnly => "local-only",
            Selection::RemotePreferred => "remote-preferred",
            Selection::RemoteOnly => "remote-only",
            Selection::Meatballs(m, l) => {
                const NAMES: [[&str; 4]; 3] = [
                    [
                        "meatballs-empirical-none",
                        "meatballs-empirical-low",
                        "meatballs-empirical-mid",
                        "meatballs-empirical-high",
                    ],
                    [
                        "meatballs-bounds-none",
                        "meatballs-bounds-low",
                        "meatballs-bounds-mid",
                        "meatballs-bounds-high",
                    ],
                    [
                        "meatballs-bayesian-none",
                        "meatballs-bayesian-low",
                        "meatballs-bayesian-mid",
                        "meatballs-bayesian-high",
                    ],
                ];
                NAMES[m as usize][l as usize]
            }
        }
    }

    /// Parse a name.
    pub fn parse(s: &str) -> Result<Selection, String> {
        Selection::all()
            .into_iter()
            .chain(Selection::speech_all())
            .find(|x| x.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown rule `{s}` (expected cellular-only, wifi-preferred, local-only, \
                     remote-only, remote-preferred, adaptive or meatballs-METHOD-LEVEL with METHOD \
                     empirical, bounds or bayesian and LEVEL none, low, mid or high)"
                )
            })
    }

    /// The cost level Meatballs decides at, if this is Meatballs.
    pub fn level(self) -> Option<CostLevel> {
        match self {
            Selection::Meatballs(_, l) => Some(l),
            _ => None,
        }
    }

    /// Configure a multi-socket for this rule: the foreground labels' network choice, no
    /// fixed-delay hedging (the baselines do not hedge; Meatballs re-evaluates instead), and
    /// Meatballs' redundancy.
    pub fn configure(self, config: &mut Config) {
        for label in [Label::ForegroundSmall, Label::ForegroundLarge] {
            let p = config.policy_mut(label);
            p.hedge = false;
            p.networks = match self {
                Selection::CellularOnly => NetworkChoice::CellularOnly,
                Selection::WifiPreferred => NetworkChoice::PreferNonCellular,
                _ => NetworkChoice::Any,
            };
        }
        config.redundancy = match self {
            Selection::Meatballs(m, l) => Some(Redundancy::new(m, Prices::level(l))),
            _ => None,
        };
    }
}

/// A selection rule is a system under test: roam's multi-sockets over both links, configured
/// by the rule ([`Selection::configure`]).
impl SystemUnderTest for Selection {
    fn name(&self) -> &str {
        Selection::name(*self)
    }

    fn transport(&self) -> Transport {
        Transport::Roam
    }

    fn configure(&self, config: &mut Config) {
        Selection::configure(*self, config)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_selection_parses_back_from_its_name() {
        let all = Selection::all();
        assert_eq!(all.len(), 15);
        for s in all.into_iter().chain(Selection::speech_all()) {
            assert_eq!(Selection::parse(s.name()), Ok(s));
        }
        assert!(Selection::parse("meatballs-magic-low").is_err());
    }

    #[test]
    fn only_meatballs_is_redundant_and_no_rule_hedges() {
        for s in Selection::all() {
            let mut c = Config::default();
            s.configure(&mut c);
            assert_eq!(c.redundancy.is_some(), s.level().is_some(), "{}", s.name());
            assert!(!c.policy(Label::ForegroundSmall).hedge);
        }
    }
}
