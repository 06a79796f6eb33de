//! `roam bench store`: Horatio's chunk store (JSON on stdout): how fast one core seals an image
//! (hash + compress + encrypt, no I/O), and ingests it into a local directory store.
//! Suspend and resume over the emulated links are not built yet (issue 27): their fields are
//! null.

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
}

/// A synthetic image: a third zero blocks, a third text-like, a third random bytes (what a
/// disk image mixes: free space, files that compress, files that do not).
fn image(mib: usize) -> Vec<u8> {
    let len = mib << 20;
    let mut v = Vec::with_capacity(len);
    let mut x: u32 = 12345;
    let text = b"Subject: meeting notes; the quick brown fox jumps over the lazy dog 0123456789\n";
    while v.len() < len {
        let chunk = v.len() / CHUNK_SIZE;
        for i in 0..CHUNK_SIZE.min(len - v.len()) {
            v.push(match chunk % 3 {
                0 => 0,
                1 => text[(i + chunk) % text.len()],
                _ => {
                    x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    (x >> 24) as u8
                }
            });
        }
    }
    v
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
    let out = json!({
        "ingest_mb_s": mb / seal_s,
        "ingest_to_dir_mb_s": mb / ingest_s,
        "suspend_100mb_vs_link": null,
        "resume_s": null,
        "image_mb": mb,
        "sealed_mb": sealed as f64 / 1e6,
        "chunks": got.keyring.entries.len(),
        "blobs_stored": got.stored,
        "notes": "ingest_mb_s: seal (BLAKE3 + LZ4 + AES-256-GCM) on one core, no I/O; ingest_to_dir_mb_s: the same into a directory store (files written, synced, renamed); suspend and resume: not built yet",
        "targets": {"ingest_mb_s": ">= 300"},
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
