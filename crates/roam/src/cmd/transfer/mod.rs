//! `roam transfer`: bulk HTTP downloads (`get`) and uploads (`put`) with FastHLA's engine
//! (`roam-transfer`), with the options, log and progress line they share.

mod get;
mod progress;
mod put;

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use roam_transfer::engine::Connector;
use roam_transfer::Report;

pub use get::GetArgs;
pub use put::PutArgs;

/// `roam transfer ...`.
#[derive(Subcommand)]
pub enum TransferCmd {
    /// Download URLs (or a list of them) into a directory; resumable, never leaving an
    /// incomplete file under its final name, nor replacing a file already there unless told
    /// to (--overwrite); a server's sizes capped (--max-file-size, --max-total).
    Get(GetArgs),
    /// Upload files and directories with HTTP PUT, several at once; a stream that breaks off
    /// or stalls is sent again.
    Put(PutArgs),
}

/// Run `roam transfer ...`: an error naming the files that failed, if any did.
pub fn run(cmd: TransferCmd) -> Result<()> {
    match cmd {
        TransferCmd::Get(a) => get::get(&a),
        TransferCmd::Put(a) => put::put(&a),
    }
}

/// How servers are reached (`roam transfer get` and `put`).
#[derive(Args, Debug)]
struct Reach {
    /// Reach the servers through this SOCKS5 proxy: `roam net proxy` (with `--label
    /// PORT=background-large` for the servers' port) carries every connection over a roam-net
    /// multi-socket, so the transfer uses every network the device has.
    #[arg(long, value_name = "ADDR:PORT")]
    socks5: Option<std::net::SocketAddr>,
    /// Also trust the certificate authorities in this PEM file for https:// servers (a
    /// private server's own authority, or its self-signed certificate); the system's
    /// (/etc/ssl/certs) are always trusted.
    #[arg(long, value_name = "FILE")]
    ca: Option<PathBuf>,
}

impl Reach {
    /// The engine's connector these options describe.
    fn connector(&self) -> Result<Connector> {
        let c = Connector::new(self.socks5);
        Ok(match &self.ca {
            Some(ca) => c.with_ca_file(ca)?,
            None => c,
        })
    }
}

/// One JSON record per file of `report` appended to `path`.
fn append_log(path: &std::path::Path, report: &Report) -> Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    for l in &report.files {
        writeln!(f, "{}", serde_json::to_string(l)?)?;
    }
    Ok(())
}

/// Each failed file's error printed, and an error counting them; `Ok` if none failed.
fn failures(report: &Report) -> Result<()> {
    let failed = report.failures();
    if !failed.is_empty() {
        for f in &failed {
            eprintln!("{}", f.outcome);
        }
        bail!("{} of {} file(s) failed", failed.len(), report.files.len());
    }
    Ok(())
}

/// CPU seconds of this process so far (user and system, every thread).
pub(crate) fn self_cpu() -> f64 {
    cpu_of(libc::RUSAGE_SELF)
}

/// CPU seconds of process group `who` so far (`RUSAGE_SELF`, `RUSAGE_CHILDREN`).
pub(crate) fn cpu_of(who: libc::c_int) -> f64 {
    // SAFETY: getrusage writes into the struct we own.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(who, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}
