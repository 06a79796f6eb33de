//! The speech server: it assembles each utterance's streamed audio and recognises it with
//! its own share of the CPU, beside other clients' recognitions when it is loaded.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use roam_net::Label;

use super::{cache_dir, GRACE, LOAD_EVERY, LOAD_SHARES, WALK_SHARES};
use crate::harness::channel::Conn;
use crate::servers::speech::{utterances, CpuLimit, CpuUse, Recognizer};

/// Server: assemble each utterance's streamed audio; on `E id`, recognise it and answer
/// `R id server_ms\ntext`.
pub(super) fn serve(
    conn: Arc<Conn>,
    load: bool,
    duration: Duration,
    seed: u64,
    used: &Mutex<Option<CpuUse>>,
) -> Result<()> {
    let dir = std::env::temp_dir();
    let share = if load { LOAD_SHARES } else { WALK_SHARES }.server;
    let limit = CpuLimit::new("server", share)?;
    let rec = Arc::new(Recognizer::new(&dir, Some(limit))?);
    let stop = Arc::new(AtomicBool::new(false));
    let loader = load.then(|| {
        let (rec, stop) = (rec.clone(), stop.clone());
        std::thread::spawn(move || server_load(rec, stop, duration, seed))
    });
    let mut audio: std::collections::HashMap<String, Vec<u8>> = Default::default();
    let result = (|| -> Result<()> {
        while let Some(m) = conn.recv()? {
            let nl = m
                .data
                .iter()
                .position(|&b| b == b'\n')
                .unwrap_or(m.data.len());
            let head = String::from_utf8_lossy(&m.data[..nl]).into_owned();
            let mut f = head.split_whitespace();
            match (f.next(), f.next()) {
                (Some("A"), Some(id)) => audio
                    .entry(id.to_string())
                    .or_default()
                    .extend_from_slice(m.data.get(nl + 1..).unwrap_or(&[])),
                (Some("E"), Some(id)) => {
                    // The phone orders the end after the audio; an end without audio is
                    // answered with an error, and the server goes on.
                    let Some(wav) = audio.remove(id) else {
                        let reply = format!("F {id}\nno audio for {id}");
                        conn.send(Label::ForegroundSmall, &[], reply.into_bytes(), None)?;
                        continue;
                    };
                    let (conn, rec, id) = (conn.clone(), rec.clone(), id.to_string());
                    // Each request on its own thread: the server serves them concurrently.
                    std::thread::spawn(move || {
                        let r = rec.recognize(&wav, &format!("req-{id}"));
                        let reply = match r {
                            Ok(r) => format!("R {id} {}\n{}", r.wall.as_millis(), r.text),
                            Err(e) => format!("F {id}\n{e:#}"),
                        };
                        let _ = conn.send(Label::ForegroundSmall, &[], reply.into_bytes(), None);
                    });
                }
                _ => bail!("a message the speech server does not know: `{head}`"),
            }
        }
        Ok(())
    })();
    stop.store(true, Ordering::SeqCst);
    if let Some(l) = loader {
        let _ = l.join();
    }
    *used.lock().unwrap() = Some(rec.cpu_use());
    result
}

/// Other clients' recognitions: every [`LOAD_EVERY`], a Poisson number of them (mean rising
/// from 6 to 10) run concurrently on the server's CPU, each recognising utterances in a loop.
fn server_load(rec: Arc<Recognizer>, stop: Arc<AtomicBool>, duration: Duration, seed: u64) {
    let Ok(us) = utterances(&cache_dir()) else {
        return;
    };
    let us = Arc::new(us);
    let want = Arc::new(AtomicUsize::new(0));
    let running = Arc::new(AtomicUsize::new(0));
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x10ad);
    let start = Instant::now();
    let mut workers = Vec::new();
    while !stop.load(Ordering::SeqCst)
        && start.elapsed() < duration + GRACE + Duration::from_secs(30)
    {
        let frac = (start.elapsed().as_secs_f64() / duration.as_secs_f64()).min(1.0);
        let n = poisson(&mut rng, 6.0 + 4.0 * frac);
        want.store(n, Ordering::SeqCst);
        while running.load(Ordering::SeqCst) < n {
            running.fetch_add(1, Ordering::SeqCst);
            let k = workers.len();
            let (rec, us, want, running, stop) = (
                rec.clone(),
                us.clone(),
                want.clone(),
                running.clone(),
                stop.clone(),
            );
            workers.push(std::thread::spawn(move || {
                let mut i = k;
                // A worker leaves once fewer are wanted than are running.
                while !stop.load(Ordering::SeqCst)
                    && running.load(Ordering::SeqCst) <= want.load(Ordering::SeqCst)
                {
                    let _ = rec.recognize(&us[i % us.len()].wav, &format!("load-{k}"));
                    i += 7;
                }
                running.fetch_sub(1, Ordering::SeqCst);
            }));
        }
        std::thread::sleep(LOAD_EVERY);
    }
    for w in workers {
        let _ = w.join();
    }
}

/// A Poisson draw with mean `mean` (Knuth's method; the means here are small).
fn poisson(rng: &mut ChaCha8Rng, mean: f64) -> usize {
    let l = (-mean).exp();
    let (mut k, mut p) = (0, 1.0);
    loop {
        p *= rng.gen::<f64>();
        if p <= l {
            return k;
        }
        k += 1;
    }
}
