//! `roam dedup analyze` end to end: captures written as the emulator's `--pcap` writes them,
//! a page downloaded before and again after a small edit, analysed with `--past`, with a
//! sensitivity sweep, as JSON and as tables; bad arguments name what is wrong.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use etherparse::PacketBuilder;
use roam_emu::pcap::PcapWriter;

fn roam(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_roam"))
        .arg("dedup")
        .arg("analyze")
        .args(args)
        .output()
        .expect("roam runs")
}

/// One TCP connection from a client port to port 80 whose server sends `body`, in segments
/// of 1400 bytes, into a capture at `path`.
fn capture(path: &Path, client_port: u16, body: &[u8]) {
    let (c, s) = ([10, 0, 0, 2], [10, 0, 0, 1]);
    let seg = |from: [u8; 4], fp: u16, to: [u8; 4], tp: u16, seq: u32, syn: bool, data: &[u8]| {
        let mut b = PacketBuilder::ipv4(from, to, 64).tcp(fp, tp, seq, 65535);
        if syn {
            b = b.syn();
        }
        if fp == 80 || !syn {
            b = b.ack(1); // the server's SYN is a SYN-ACK
        }
        let mut out = Vec::new();
        b.write(&mut out, data).unwrap();
        out
    };
    let mut w = PcapWriter::create(path).unwrap();
    let t = Duration::from_secs(1);
    w.write(t, &seg(c, client_port, s, 80, 100, true, b""))
        .unwrap();
    w.write(t, &seg(s, 80, c, client_port, 5000, true, b""))
        .unwrap();
    w.write(
        t,
        &seg(c, client_port, s, 80, 101, false, b"GET / HTTP/1.1\r\n\r\n"),
    )
    .unwrap();
    for (i, part) in body.chunks(1400).enumerate() {
        let seq = 5001 + (i * 1400) as u32;
        w.write(t, &seg(s, 80, c, client_port, seq, false, part))
            .unwrap();
    }
    w.flush().unwrap();
}

/// `n` bytes that do not compress or repeat (xorshift).
fn noise(n: usize, mut x: u64) -> Vec<u8> {
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn a_page_read_again_after_an_edit_is_found_redundant_and_swept() {
    let dir = std::env::temp_dir().join(format!("roam-dedup-analyze-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let before = noise(200_000, 7);
    let mut after = before.clone();
    after[100_000..100_200].copy_from_slice(&noise(200, 9));
    let (past, present) = (dir.join("past.pcap"), dir.join("present.pcap"));
    capture(&past, 40000, &before);
    capture(&present, 40001, &after);
    let (p, q) = (past.to_str().unwrap(), present.to_str().unwrap());
    let o = roam(&[
        q,
        "--past",
        p,
        "--json",
        "--sweep",
        "src-kb=64,1024",
        "--ratio",
        "2",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let runs = v.as_array().unwrap();
    assert_eq!(runs.len(), 2, "one result per swept value: {v}");
    assert_eq!(runs[0]["src_cache_kb"], 64.0);
    assert_eq!(runs[1]["src_cache_kb"], 1024.0);
    for r in runs {
        assert_eq!(r["present_bytes"], 200_000, "{r}");
        // All but the chunks around the edit were seen before.
        let redundant = r["redundant_bytes"].as_u64().unwrap();
        assert!(redundant > 180_000 && redundant < 200_000, "{r}");
        assert_eq!(r["by_port"][0]["port"], 80, "{r}");
        let found = r["found_fraction"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&found), "{r}");
    }
    // dd-src never saw the past: what it finds of it, it finds by the phone's feedback.
    let fb = |r: &serde_json::Value| r["found_feedback_bytes"].as_u64().unwrap();
    assert!(fb(&runs[1]) > 0, "feedback found nothing: {v}");
    // The same as tables.
    let o = roam(&[q, "--past", p]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("| dd-src kB |") && out.contains("present: 1 streams"),
        "{out}"
    );
    // Bad arguments say what is wrong.
    let o = roam(&[q, "--sweep", "cache=1,2"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown parameter `cache`"));
    let o = roam(&[q, "--sweep", "ratio=2,x"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("`x` is not a positive number"));
    let o = roam(&[q, "--min-stream", "300000"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("no present stream"));
    let _ = std::fs::remove_dir_all(&dir);
}
