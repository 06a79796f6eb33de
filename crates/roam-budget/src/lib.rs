//! Energy and data budgets (Higgins' thesis, chapter 3; ../shared/spec/informed-prefetching.md and
//! power-models.md): what each network costs, and the prices that make use end close to, but
//! not over, a budget.
//!
//! - [`energy`]: joules and milliwatts as types;
//! - [`profile`](mod@profile): published radio power models as data files, each constant with its
//!   verification status (every figure they give is *modelled*: there is no power meter);
//! - [`radio`]: a radio's state machine and energy, driven by packet events and time;
//! - [`data`]: bytes per network, metered or not;
//! - [`controller`]: goal-directed adaptation of the prices of energy and data;
//! - [`live`]: the driver side, reading the kernel: interface counters for the radios, the
//!   battery for an energy budget's supply.
//!
//! Everything but [`live`] is sans-IO: time is an argument, so a month-long budget period runs under
//! a virtual clock in a test.

#![warn(missing_docs)]

pub mod controller;
pub mod data;
pub mod energy;
pub mod live;
pub mod profile;
pub mod radio;

pub use controller::{Budget, BudgetError, PriceController, Prices};
pub use data::DataMeter;
pub use energy::{Joules, Milliwatts};
pub use profile::{profile, NetworkKind, RadioProfile, Status};
pub use radio::{transfer_energy, Direction, Radio, RadioState};
