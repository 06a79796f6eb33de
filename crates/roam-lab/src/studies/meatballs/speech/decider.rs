//! The phone's decisions: where to recognise an utterance (on the phone, on the server, or
//! both), by the trial's rule, with predictors that learn from what each recognition took.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::{anyhow, Result};
use roam_decide::{Meatballs, Method, Outcome, Prices, Running};

use super::{AUDIO_BYTES_PER_S, CELL_RADIO, PHONE_CPU_W};
use crate::studies::meatballs::selection::Selection;

/// What the phone does with one utterance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Plan {
    Local,
    Remote,
    Both,
}

/// The phone's decision-making: the rule, and for Meatballs and adaptive the predictors of the
/// local and remote recognition times and of the utterance's length.
pub(super) struct Decider {
    rule: Selection,
    mb: Meatballs,
    local: roam_decide::PredictorId,
    remote: roam_decide::PredictorId,
    /// Remote recognition with the audio over the cellular network (its own error record:
    /// the 3G's upload and round trips add to the server's time).
    remote_cell: roam_decide::PredictorId,
    s_local: roam_decide::StrategyId,
    s_remote: roam_decide::StrategyId,
    s_remote_cell: roam_decide::StrategyId,
    with_wifi: roam_decide::EvaluatorId,
    without_wifi: roam_decide::EvaluatorId,
    /// Whether the last decision was made without WiFi (which remote strategy ran).
    cellular: bool,
    /// The cellular remote strategy's energy (J) and data (bytes) for the utterance being
    /// decided, as f64 bits.
    cell: Arc<(AtomicU64, AtomicU64)>,
    /// The cellular radio's model.
    radio: Arc<roam_budget::profile::RadioProfile>,
    /// Local and remote times against the utterance's length (regressions).
    local_fit: roam_decide::models::LinearRegression,
    remote_fit: roam_decide::models::LinearRegression,
    lengths: Vec<f64>,
}

impl Decider {
    pub(super) fn new(rule: Selection) -> Result<Decider> {
        let (method, prices) = match rule {
            Selection::Meatballs(m, l) => (m, Prices::level(l)),
            _ => (Method::Empirical, Prices::FREE),
        };
        let mut mb = Meatballs::new(prices);
        let local = mb.create_predictor("local recognition (s)");
        let remote = mb.create_predictor("remote recognition (s)");
        let remote_cell = mb.create_predictor("remote recognition over the cellular network (s)");
        // Until measured: a quarter of a core takes about the utterance's length, the
        // server a quarter of it (what a first look at PocketSphinx here gave).
        mb.set_prediction(local, 3.0)?;
        mb.set_prediction(remote, 1.0)?;
        mb.set_prediction(remote_cell, 1.5)?;
        let s_local = mb.make_strategy("local", &[local], move |v| {
            Outcome::new(v[local], PHONE_CPU_W * v[local], 0.0)
        })?;
        // WiFi only: no metered data; the radio's energy of a WiFi upload is small (0.04 J per
        // transfer on Huang et al.'s model), the phone's CPU idle.
        let s_remote = mb.make_strategy("remote", &[remote], move |v| {
            Outcome::new(v[remote], 0.04, 0.0)
        })?;
        // Over the cellular network the audio is metered data, and the radio is up for the
        // utterance and its tail (modelled per decision for the predicted length:
        // `Decider::cellular_cost`).
        let cell = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
        let c = cell.clone();
        let s_remote_cell = mb.make_strategy("remote over cellular", &[remote_cell], move |v| {
            let j = f64::from_bits(c.0.load(Ordering::Relaxed));
            let bytes = f64::from_bits(c.1.load(Ordering::Relaxed));
            Outcome::new(v[remote_cell], j, bytes)
        })?;
        let both = mb.make_redundant_strategy("both", &[s_local, s_remote])?;
        let both_cell =
            mb.make_redundant_strategy("both over cellular", &[s_local, s_remote_cell])?;
        let with_wifi = mb.register_strategies(&[both], method)?;
        let without_wifi = mb.register_strategies(&[both_cell], method)?;
        Ok(Decider {
            rule,
            mb,
            local,
            remote,
            remote_cell,
            s_local,
            s_remote,
            s_remote_cell,
            with_wifi,
            without_wifi,
            cellular: false,
            cell,
            radio: Arc::new(
                roam_budget::profile::profile(CELL_RADIO)
                    .map_err(|e| anyhow!("radio profile {CELL_RADIO}: {e}"))?,
            ),
            local_fit: Default::default(),
            remote_fit: Default::default(),
            lengths: Vec::new(),
        })
    }

    /// The predicted length of the next utterance: the mean of those before (5 s at first).
    fn predicted_length(&self) -> f64 {
        if self.lengths.is_empty() {
            5.0
        } else {
            self.lengths.iter().sum::<f64>() / self.lengths.len() as f64
        }
    }

    /// Set the predictors' predictions for an utterance of `len` seconds.
    fn predict(&mut self, len: f64) -> Result<(f64, f64)> {
        let l = self.local_fit.predict(len).unwrap_or(len).max(0.01);
        let r = self.remote_fit.predict(len).unwrap_or(len / 4.0).max(0.01);
        self.mb.set_prediction(self.local, l)?;
        self.mb.set_prediction(self.remote, r)?;
        // The same regression: what the cellular network adds shows in its error record.
        self.mb.set_prediction(self.remote_cell, r)?;
        Ok((l, r))
    }

    /// Streaming `seconds` of audio over the cellular network: the radio's energy (modelled:
    /// from an idle radio, the upload at the audio's rate, then the tail) and the bytes.
    fn cellular_cost(&self, seconds: f64) -> (f64, f64) {
        let bytes = AUDIO_BYTES_PER_S * seconds.max(0.1);
        let radio = roam_budget::radio::Radio::new(self.radio.clone(), roam_core::Time::ZERO);
        let j = radio.marginal_energy(
            roam_core::Time::ZERO,
            roam_core::Bytes(bytes as u64),
            roam_budget::radio::Direction::Up,
            roam_core::BitRate::bps((AUDIO_BYTES_PER_S * 8.0) as u64),
        );
        (j.0, bytes)
    }

    pub(super) fn decide(&mut self, wifi: bool) -> Result<(Plan, f64)> {
        let len = self.predicted_length();
        let (l, r) = self.predict(len)?;
        let (j, bytes) = self.cellular_cost(len);
        self.cell.0.store(j.to_bits(), Ordering::Relaxed);
        self.cell.1.store(bytes.to_bits(), Ordering::Relaxed);
        self.cellular = !wifi;
        let ev = if wifi {
            self.with_wifi
        } else {
            self.without_wifi
        };
        Ok(match self.rule {
            Selection::LocalOnly => (Plan::Local, l),
            Selection::RemoteOnly => (Plan::Remote, r),
            Selection::RemotePreferred if wifi => (Plan::Remote, r),
            Selection::RemotePreferred => (Plan::Local, l),
            Selection::Meatballs(..) => {
                let c = self.mb.choose(ev)?;
                let plan = if c.strategy == self.s_local {
                    Plan::Local
                } else if c.strategy == self.s_remote || c.strategy == self.s_remote_cell {
                    Plan::Remote
                } else {
                    Plan::Both
                };
                (plan, c.expected.time.0)
            }
            _ => {
                let c = self.mb.choose_single(ev)?;
                let plan = if c.strategy == self.s_local {
                    Plan::Local
                } else {
                    Plan::Remote
                };
                (plan, c.expected.time.0)
            }
        })
    }

    /// A remote recognition running `elapsed` s past the end of speech: start a local one too?
    pub(super) fn add_local(&self, elapsed: f64) -> bool {
        if !matches!(self.rule, Selection::Meatballs(..)) {
            return false;
        }
        let (strategy, ev) = if self.cellular {
            (self.s_remote_cell, self.without_wifi)
        } else {
            (self.s_remote, self.with_wifi)
        };
        let running = Running { strategy, elapsed };
        self.mb
            .reevaluate(ev, running)
            .is_ok_and(|c| c.strategy != strategy)
    }

    /// What happened: each measured time against its prediction.
    pub(super) fn measured(
        &mut self,
        len: f64,
        local: Option<f64>,
        remote: Option<f64>,
    ) -> Result<()> {
        self.lengths.push(len);
        let (pl, pr) = self.predict(len)?;
        if let Some(t) = local {
            self.mb.add_measurement(self.local, t, pl)?;
            self.local_fit.add(len, t)?;
        }
        match remote {
            // Over the cellular network: its own error record; the regression stays the
            // server's over WiFi.
            Some(t) if self.cellular => self.mb.add_measurement(self.remote_cell, t, pr)?,
            Some(t) => {
                self.mb.add_measurement(self.remote, t, pr)?;
                self.remote_fit.add(len, t)?;
            }
            None => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roam_decide::CostLevel;

    /// Without WiFi, Meatballs may recognise remotely over the cellular network: free, the
    /// server's faster recognition wins (alone or beside a local one); when a second saved is
    /// worth only 1 J or 1 KB, the 3G's energy and the audio's bytes keep it local.
    #[test]
    fn without_wifi_the_cellular_network_is_a_priced_option() {
        let mut free =
            Decider::new(Selection::Meatballs(Method::Empirical, CostLevel::None)).unwrap();
        let (plan, _) = free.decide(false).unwrap();
        assert_ne!(
            plan,
            Plan::Local,
            "free: the server's 1.5 s against the phone's 3 s"
        );
        assert!(free.cellular);
        let (j, bytes) = free.cellular_cost(5.0);
        assert!(j > 1.0 && bytes == 160_000.0, "{j} J {bytes} B");
        let mut dear =
            Decider::new(Selection::Meatballs(Method::Empirical, CostLevel::High)).unwrap();
        assert_eq!(dear.decide(false).unwrap().0, Plan::Local);
        // With WiFi, remote costs next to nothing at any level.
        assert_ne!(dear.decide(true).unwrap().0, Plan::Local);
        assert!(!dear.cellular);
    }
}
