//! The commands, one module per command group: each parses its arguments (clap) and calls the
//! libraries; `main.rs` dispatches to them.

pub mod drive;
pub mod emu;
pub mod energy;
pub mod hla;
pub mod lab;
pub mod net;
pub mod parcel;
pub mod trace;
pub mod transfer;
