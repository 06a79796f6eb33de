//! The commands, one module per command group: each parses its arguments (clap) and calls the
//! libraries; `main.rs` dispatches to them.

pub mod dedup;
pub mod drive;
pub mod emu;
pub mod energy;
pub mod hla;
pub mod lab;
pub mod net;
pub mod parcel;
pub mod precog;
pub mod results;
pub mod trace;
pub mod transfer;

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};

/// Write a new file only its owner can read (keys, secrets, tokens); refused if it exists.
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("{}", path.display()))?;
    f.write_all(bytes)?;
    Ok(())
}

/// 32 bytes from the kernel's random source (/dev/urandom): keys, secrets, tokens.
pub(crate) fn random_32() -> Result<[u8; 32]> {
    use std::io::Read;
    let mut b = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .context("reading /dev/urandom")?;
    Ok(b)
}
