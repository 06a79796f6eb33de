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
    let radio = roam_budget::radio::Radio::new(Arc::new(p), roam_core::Time::ZERO);
    let bps = ((bytes as f64 * 8.0 / secs.max(1e-3)) as u64).max(1);
    Ok(radio
        .marginal_energy(
            roam_core::Time::ZERO,
            roam_core::Bytes(bytes),
            dir,
            roam_core::BitRate::bps(bps),
        )
        .0)
}
