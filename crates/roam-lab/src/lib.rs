//! The lab: the papers' applications, run unmodified and with roam over the emulator's links,
//! against the papers' baselines and today's alternatives, with reports that put our numbers
//! beside the papers'.
//!
//! It is a framework with studies in it, and the dependencies point one way:
//!
//! - [`harness`]: what every study runs on: a plan of applications x scenarios x systems x
//!   trials ([`harness::matrix`]), one trial in a fresh emulator ([`harness::trial`]) with the
//!   application's two ends ([`harness::ends`], [`harness::channel`]), the systems under test
//!   ([`harness::system`]), parameter sweeps ([`harness::sweep`]), what a study needs installed
//!   ([`harness::setup`]), and the [`harness::study::Study`] trait a study implements;
//! - [`report`]: statistics, comparisons between systems, charts and the CSV files;
//! - [`servers`]: real servers from Debian that studies run (Dovecot, nginx, PocketSphinx);
//! - [`studies`]: one folder per paper, registered in [`studies::ALL`]; `roam lab NAME` runs
//!   the study of that name.
//!
//! Nothing under `harness/`, `report/` or `servers/` imports a study (a test checks it); a new
//! study is a folder implementing [`harness::study::Study`] and one line in [`studies::ALL`]
//! (docs/lab.md, "Writing a study").

pub mod harness;
pub mod report;
pub mod servers;
pub mod studies;
