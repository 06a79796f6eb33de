//! `roam bench store`: Horatio's chunk store (JSON on stdout): how fast one core seals an image
//! (hash + compress + encrypt, no I/O), and ingests it into a local directory store.
//! With the emulator (root or user namespaces), also Horatio's suspend of 100 MB of dirty
//! state to the phone over its emulated 12 Mbit/s USB link, as a multiple of the link's raw
//! transfer time for the bytes sent, and the resume from the phone until the guest could run
//! (control state and memory image on another client): one trial of `roam lab horatio`'s
//! `dirty-100mb` on `phone-usb`; and, where the real guest is built, its resume from the phone
//! until it runs again (`resume_guest_s`: one trial of the lab's `email` workload). Without the
//! emulator those fields are null, with the reason.

use std::time::Instant;

use anyhow::Result;
use clap::Args;
use roam_store::{ingest, seal, DirStore, CHUNK_SIZE};
use serde_json::json;

/// Arguments of `roam bench store`.
#[derive(Args, Debug)]
pub struct BenchStoreArgs {
    /// Size of the synthetic image, in MiB.
    #[arg(long, default_value_t = 256)]
    mib: usize,
    /// Directory for the ingest's store (default: a temporary directory, removed after).
    #[arg(long)]
    dir: Option<std::path::PathBuf>,
    /// Skip the suspend and resume over the emulated USB link (about two minutes).
    #[arg(long)]
    no_link: bool,
}

/// The USB link's rate in the `horatio` scenario (Mbit/s).
const USB_MBIT: f64 = 12.0;

/// Suspend 100 MB dirty to the phone over USB and resume from it: (suspend as a multiple of
/// the link's raw time for the bytes sent, resume seconds, bytes sent).
fn suspend_resume() -> Result<(f64, f64, f64)> {
    let get = lab_trial("dirty-100mb")?;
    let (suspend, mb, resume) = (get("suspend_s")?, get("dirty_mb")?, get("resume_s")?);
    Ok((suspend / (mb * 8.0 / USB_MBIT), resume, mb))
}

/// One trial of `roam lab horatio`'s `app` on the phone over USB: its metrics by name.
fn lab_trial(app: &str) -> Result<impl Fn(&str) -> Result<f64>> {
    use roam_lab::harness::system::{System, QUEUE};
    use roam_lab::studies::horatio::{apps, Path};
    let app = apps()
        .into_iter()
        .find(|a| a.name == app)
        .ok_or_else(|| anyhow::anyhow!("the lab has no {app}"))?;
    let scenario = roam_trace::scenario::Scenario::by_name("horatio", 1)?;
    let ran = roam_lab::harness::trial::run(
        app.run,
        &scenario,
        QUEUE,
        System::new(Path::PhoneUsb),
        std::time::Duration::from_secs(600),
        1,
        std::sync::Arc::new(|_| {}),
        None,
    )?;
    Ok(move |n: &str| {
        ran.metrics
            .iter()
            .find(|m| m.name == n)
            .map(|m| m.value)
            .ok_or_else(|| anyhow::anyhow!("the trial did not measure {n}"))
    })
}

/// The real guest's resume from the phone until it runs again (the e-mail workload): seconds,
/// or why not.
fn guest_resume() -> Result<f64, String> {
    let get = lab_trial("email").map_err(|e| e.to_string())?;
    if get("guest").map_err(|e| e.to_string())? < 1.0 {
        return Err("no guest (scripts/build-guest, QEMU)".into());
    }
    get("guest_running_s").map_err(|e| e.to_string())
}

/// A synthetic image of `mib` MiB ([`roam_store::image::synthetic`]).
fn image(mib: usize) -> Vec<u8> {
    roam_store::image::synthetic(mib << 20, 12345)
}

/// Run the benchmark and print its JSON.
pub fn store(a: &BenchStoreArgs) -> Result<()> {
    let img = image(a.mib.max(1));
    let mb = img.len() as f64 / 1e6;
    let t = Instant::now();
    let mut sealed = 0usize;
    for c in img.chunks(CHUNK_SIZE) {
        sealed += std::hint::black_box(seal(c)).blob.len();
    }
    let seal_s = t.elapsed().as_secs_f64();
    let (dir, remove) = match &a.dir {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!("roam-bench-store-{}", std::process::id())),
            true,
        ),
    };
    let store = DirStore::open(&dir)?;
    let t = Instant::now();
    let got = ingest(&mut &img[..], &store, None)?;
    let ingest_s = t.elapsed().as_secs_f64();
    if remove {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let (vs_link, resume_s, sent_mb, why, guest_s) = if a.no_link {
        (
            None,
            None,
            None,
            "suspend and resume: skipped (--no-link)".to_string(),
            None,
        )
    } else if let Err(e) = roam_emu::sys::check_privileges() {
        (
            None,
            None,
            None,
            format!("suspend and resume: skipped ({e})"),
            None,
        )
    } else {
        eprintln!("suspend of 100 MB dirty to the phone over emulated USB, then resume...");
        let (v, r, m) = suspend_resume()?;
        eprintln!(
            "the real guest's e-mail workload: suspend to the phone, resume until it runs..."
        );
        let guest = guest_resume();
        (
            Some(v),
            Some(r),
            Some(m),
            format!("suspend_100mb_vs_link: suspend time over the raw time of the bytes sent at the USB link's 12 Mbit/s (one trial, roam lab horatio's dirty-100mb on phone-usb); resume_s: control state and memory image from the phone on another client; resume_guest_s: {}", match &guest {
                Ok(_) => "the real guest (768 MB RAM image, the e-mail workload, the phone having hoarded the version) from the phone over USB until it answers on its console (one trial)".to_string(),
                Err(e) => format!("not measured: {e}"),
            }),
            guest.ok(),
        )
    };
    let out = json!({
        "ingest_mb_s": mb / seal_s,
        "ingest_to_dir_mb_s": mb / ingest_s,
        "suspend_100mb_vs_link": vs_link,
        "resume_s": resume_s,
        "resume_guest_s": guest_s,
        "suspend_sent_mb": sent_mb,
        "image_mb": mb,
        "sealed_mb": sealed as f64 / 1e6,
        "chunks": got.keyring.entries.len(),
        "blobs_stored": got.stored,
        "notes": format!("ingest_mb_s: seal (BLAKE3 + LZ4 + AES-256-GCM) on one core, no I/O; ingest_to_dir_mb_s: the same into a directory store (files written, synced, renamed); {why}"),
        "targets": {"ingest_mb_s": ">= 300", "suspend_100mb_vs_link": "<= 1.1"},
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
