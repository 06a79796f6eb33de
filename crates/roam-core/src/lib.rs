//! Shared vocabulary of roam.
//!
//! Every roam component takes time as an input ([`Time`]) instead of reading a clock, and passes
//! quantities with their unit in the type ([`BitRate`], [`Bytes`]). Text forms follow `tc(8)`:
//! `10mbit`, `20ms`, `64kb`, so that a researcher used to netem or Mahimahi reads them at sight.

pub mod plot;
pub mod progress;
pub mod rng;
pub mod student;
pub mod time;
pub mod units;

pub use time::{Clock, Time};
pub use units::{parse_duration, seconds, BitRate, Bytes, UnitError};
