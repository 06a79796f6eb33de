//! Modelled radio energy for the labs: no power meter measures it; a published radio model
//! (`roam_budget::profile`, e.g. `huang2012/lte`) prices what a link moved.

use std::sync::Arc;

use anyhow::{anyhow, Result};

/// Modelled radio energy (J) of moving `bytes` in `secs` over a link of radio `profile`, in
/// direction `dir`: the radio's marginal energy at that average rate, promotion and tail
/// included.
pub fn radio_energy(
    profile: &str,
    bytes: u64,
    secs: f64,
    dir: roam_budget::radio::Direction,
) -> Result<f64> {
    let p = roam_budget::profile::profile(profile)
        .map_err(|e| anyhow!("radio profile {profile}: {e}"))?;
    let took = roam_core::seconds(secs).unwrap_or_default();
    Ok(roam_budget::transfer_energy(Arc::new(p), bytes, took, dir).0)
}
