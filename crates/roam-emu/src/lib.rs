//! roam's multi-link, trace-driven network emulator.
pub mod queue;
