//! What every study runs on: plans, trials in fresh emulators, the systems under test, the
//! results directory with `--resume` and `--report-only`, and the [`study::Study`] trait.

pub mod channel;
pub mod charts;
pub mod ends;
pub mod energy;
pub mod index;
pub mod matrix;
pub mod plan;
pub mod results;
pub mod scratch;
pub mod seeds;
pub mod service;
pub mod setup;
pub mod study;
pub mod sweep;
pub mod system;
pub mod trial;
