//! The dirty states a trial writes: the `dirty-` amounts, the paper's six workloads, and the
//! self-cleaning amounts.

use anyhow::{anyhow, Result};

/// A dirty state: MB of memory image (rewritten whole) and of disk chunks.
#[derive(Clone, Copy, Debug)]
pub(super) struct Dirty {
    pub(super) memory_mb: f64,
    pub(super) disk_mb: f64,
}

/// `dirty-N`: N MB, half of it (at most 64 MB) the memory image.
pub(super) fn dirty_of(total_mb: f64) -> Dirty {
    let memory_mb = (total_mb / 2.0).min(64.0);
    Dirty {
        memory_mb,
        disk_mb: total_mb - memory_mb,
    }
}

/// The paper's six workloads: dirty memory and disk (MB).
pub const WORKLOADS: [(&str, f64, f64); 6] = [
    ("email", 16.1, 3.4),
    ("word", 40.8, 3.3),
    ("photo", 24.5, 3.9),
    ("shop", 30.6, 13.8),
    ("podcast", 120.4, 109.3),
    ("video", 263.8, 368.1),
];

/// The suspend applications: by dirty state, then the workloads.
pub const DIRTY_APPS: [&str; 4] = ["dirty-1mb", "dirty-10mb", "dirty-100mb", "dirty-500mb"];
/// The self-cleaning applications: by dirty state, then the six workloads' dirty state (the
/// paper's Table 8), made by the real guest when it is built.
pub const CLEAN_APPS: [&str; 9] = [
    "clean-1mb",
    "clean-10mb",
    "clean-100mb",
    "clean-email",
    "clean-word",
    "clean-photo",
    "clean-shop",
    "clean-podcast",
    "clean-video",
];

/// The workload an application runs (`email` and `clean-email`: `email`), if any.
pub(super) fn workload_of(app: &str) -> Option<&'static str> {
    let name = app.strip_prefix("clean-").unwrap_or(app);
    WORKLOADS.iter().map(|w| w.0).find(|w| *w == name)
}

pub(super) fn dirty_for(app: &str) -> Result<Dirty> {
    if let Some((_, m, d)) = WORKLOADS.iter().find(|w| Some(w.0) == workload_of(app)) {
        return Ok(Dirty {
            memory_mb: *m,
            disk_mb: *d,
        });
    }
    let mb = app
        .strip_prefix("dirty-")
        .or_else(|| app.strip_prefix("clean-"))
        .and_then(|s| s.strip_suffix("mb"))
        .and_then(|s| s.parse::<f64>().ok())
        .ok_or_else(|| anyhow!("application `{app}`: not a Horatio workload"))?;
    Ok(dirty_of(mb))
}
