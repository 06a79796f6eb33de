//! The Horatio paper's figures for each cell (seconds), beside which the report puts ours.

use super::path::Path;
use super::workloads::{CLEAN_APPS, DIRTY_APPS};

/// The paper's figures (seconds) for a cell, where it has one.
pub fn paper(app: &str, path: Path) -> Option<f64> {
    let i = DIRTY_APPS.iter().position(|a| *a == app);
    let c = CLEAN_APPS.iter().position(|a| *a == app);
    match (path, i, c) {
        (Path::Isr1, Some(i), _) => Some([1433.5, 1487.5, 2118.0, 4936.0][i]),
        (Path::PhoneWifi, Some(i), _) => Some([39.0, 68.7, 301.3, 1239.2][i]),
        (Path::PhoneUsb, Some(i), _) => Some([29.3, 44.0, 142.0, 625.0][i]),
        (Path::SdUsb, Some(i), _) => Some([23.3, 25.3, 40.3, 136.0][i]),
        // Table 7, then Table 8 (the workloads; its estimates, not measured, are left out:
        // podcast over 3G and video over both).
        (Path::CleanWifi, _, Some(c)) => [
            Some(36.3),
            Some(97.0),
            Some(869.0),
            Some(213.3),
            Some(953.0),
            Some(839.3),
            Some(1103.0),
            Some(2199.7),
            None,
        ][c],
        (Path::Clean3g, _, Some(c)) => [
            Some(152.7),
            Some(477.7),
            Some(3848.3),
            Some(739.3),
            Some(4353.5),
            Some(3381.0),
            Some(4830.0),
            None,
            None,
        ][c],
        _ => None,
    }
}

/// The paper's resume time (s) from the card, by dirty state (ISR's plain resume: 281.5 s).
pub fn paper_resume(app: &str, path: Path) -> Option<f64> {
    let i = DIRTY_APPS.iter().position(|a| *a == app)?;
    match path {
        Path::SdUsb => Some([34.7, 34.3, 35.7, 51.3][i]),
        Path::Isr1 => Some(281.5),
        _ => None,
    }
}
