//! The studies: one folder per paper, each implementing [`crate::harness::study::Study`].

pub mod afc;
pub mod dedup;
pub mod fasthla;
pub mod horatio;
pub mod imp;
pub mod in_paper;
pub mod meatballs;
pub mod precog;

use anyhow::{anyhow, Result};

use crate::harness::study::Study;

/// Every study, in the order `roam lab --help` lists them.
pub static ALL: [&dyn Study; 8] = [
    &in_paper::InPaper,
    &imp::Imp,
    &meatballs::Meatballs,
    &fasthla::FastHla,
    &horatio::Horatio,
    &afc::Afc,
    &dedup::Dedup,
    &precog::PrecogLab,
];

/// The study named `name`, or an error listing them.
pub fn find(name: &str) -> Result<&'static dyn Study> {
    ALL.iter()
        .copied()
        .find(|s| s.name() == name)
        .ok_or_else(|| {
            anyhow!(
                "unknown study `{name}` (expected one of: {})",
                names().join(", ")
            )
        })
}

/// Every study's name.
pub fn names() -> Vec<&'static str> {
    ALL.iter().map(|s| s.name()).collect()
}
