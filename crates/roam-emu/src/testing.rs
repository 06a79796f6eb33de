//! Helpers for tests that run through the emulator: they skip, with a one-line reason on
//! standard error, where the emulator cannot run (no root, no TUN, no namespaces).

use crate::emulator::{EmuConfig, Emulator};
use crate::spec::parse_link;

/// Whether the emulator can run here; if not, prints `skipped: <reason>`.
pub fn privileged_or_skip() -> bool {
    match crate::sys::check_privileges() {
        Ok(()) => true,
        Err(reason) => {
            eprintln!("skipped: {reason}");
            false
        }
    }
}

/// An emulator with these `--link` specs (seed 1), or `None` (after printing why) where the
/// emulator cannot run. Panics on a bad spec or a failed start: those are test bugs.
pub fn emulator_or_skip(links: &[&str]) -> Option<Emulator> {
    if !privileged_or_skip() {
        return None;
    }
    let links = links.iter().map(|l| parse_link(l, 1).unwrap()).collect();
    Some(
        Emulator::start(EmuConfig {
            links,
            ..Default::default()
        })
        .unwrap(),
    )
}
