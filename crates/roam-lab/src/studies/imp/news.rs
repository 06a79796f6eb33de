//! A news reader with Informed Mobile Prefetching (the IMP thesis's second application, seed
//! 000 §3.5): 25 articles in 5 feeds served by a real nginx ([`crate::servers::nginx`]); the user reads
//! each feed's articles at its own rate (25% to 100%), a think time of 30-60 s apart; each feed
//! is a class of hints, so IMP learns which feeds are worth prefetching.
//!
//! The server side is an endpoint in front of nginx: each request is an IROB `ID PATH`, fetched
//! from nginx over loopback (HTTP/1.1), and answered with one IROB `ID STATUS` and the body,
//! with the request's label. The client first fetches the site's index (every article's path
//! and size, as a feed lists its items), then hints every article.
//!
//! Our decisions where the thesis is silent: the read rates are 25%, 45%, 65%, 85% and 100%
//! (mean 64%, the thesis's overall rate); with 5 articles a feed that is 1, 2, 3, 4 and 5
//! articles read (15 of 25: 60%), which ones from the seed; the user reads feed by feed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use roam_net::Label;

use crate::harness::channel::Conn;
use crate::harness::trial::{Metric, Trial};
use crate::servers::nginx::{self, Nginx, FEEDS, PER_FEED};
use crate::studies::imp::client::{
    finish_trial, read, strategy_of, Budgets, Caller, Condition, Item, Session,
};

/// The news endpoint's port.
const NEWS_PORT: u16 = 6310;
/// Each feed's read rate.
pub const READ_RATES: [f64; FEEDS] = [0.25, 0.45, 0.65, 0.85, 1.0];
/// Requests the endpoint serves at once (each on its own thread); more wait their turn.
const MAX_REQUESTS: usize = 16;
/// The path of the site's index.
const INDEX: &str = "/index.txt";
/// The interactive event whose latencies a trial records: each read's wait.
pub const EVENT: &str = "read_ms";

/// The response id: the first word.
fn id_of(m: &[u8]) -> Result<String> {
    let end = m
        .iter()
        .position(|&b| b == b' ')
        .ok_or_else(|| anyhow!("a response without an id"))?;
    Ok(String::from_utf8_lossy(&m[..end]).into_owned())
}

/// A response's status and body (`ID STATUS\n` then the body).
fn split(m: &[u8]) -> Result<(u16, &[u8])> {
    let nl = m
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| anyhow!("a response without a status line"))?;
    let line = String::from_utf8_lossy(&m[..nl]);
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow!("a bad status line `{line}`"))?;
    Ok((status, &m[nl + 1..]))
}

/// The server-side endpoint: answer each `ID PATH` request from nginx, with its label.
fn endpoint(conn: Arc<Conn>) -> Result<()> {
    let busy = Arc::new(AtomicUsize::new(0));
    while let Some(m) = conn.recv()? {
        let text = String::from_utf8_lossy(&m.data).into_owned();
        let Some((id, path)) = text.split_once(' ') else {
            bail!("a request without a path: `{text}`");
        };
        let (id, path) = (id.to_string(), path.trim().to_string());
        let answer = {
            let conn = conn.clone();
            let label = m.label;
            move || -> Result<()> {
                let (status, body) = nginx::get(&path)?;
                let mut r = format!("{id} {status}\n").into_bytes();
                r.extend_from_slice(&body);
                let small = r.len() <= crate::studies::in_paper::mail::SMALL_MAX;
                let label = match (label.is_foreground(), small) {
                    (true, true) => Label::ForegroundSmall,
                    (true, false) => Label::ForegroundLarge,
                    (false, true) => Label::BackgroundSmall,
                    (false, false) => Label::BackgroundLarge,
                };
                conn.send(label, &[], r, None)?;
                Ok(())
            }
        };
        if busy.load(Ordering::SeqCst) >= MAX_REQUESTS {
            answer()?;
            continue;
        }
        busy.fetch_add(1, Ordering::SeqCst);
        let b = busy.clone();
        std::thread::spawn(move || {
            let _ = answer();
            b.fetch_sub(1, Ordering::SeqCst);
        });
    }
    Ok(())
}

/// The site's index: every article's path, size and feed.
fn index(seed: u64) -> String {
    let mut s = String::new();
    for (f, sizes) in nginx::article_sizes(seed).into_iter().enumerate() {
        for (a, size) in sizes.into_iter().enumerate() {
            s.push_str(&format!("{} {size} {f}\n", nginx::article_path(f, a)));
        }
    }
    s
}

/// Run one trial of the news reader with `budgets` (for 20 minutes; scaled to the run's
/// length).
pub fn run(t: &Trial, budgets: Budgets) -> Result<Vec<Metric>> {
    let strategy = strategy_of(t)?;
    let (seed, duration) = (t.seed, t.duration);
    let server = t.start_server(
        "imp news",
        NEWS_PORT,
        move || {
            let n = Nginx::start(seed)?;
            let p = n.docroot().join(INDEX.trim_start_matches('/'));
            std::fs::write(&p, index(seed)).with_context(|| format!("writing {}", p.display()))?;
            Ok(n)
        },
        |_nginx, c| endpoint(c),
    )?;
    let system = t.system.clone();
    let locals = t.client_links();
    let progress = t.progress.clone();
    let client = move || -> Result<(crate::studies::imp::client::Outcome, Arc<Conn>)> {
        let conn = Arc::new(Conn::connect(system, &locals, NEWS_PORT)?);
        let cl = Caller::start(conn.clone(), id_of);
        let get = |path: String| move |id: &str| format!("{id} {path}").into_bytes();
        let listing = cl.call(Label::ForegroundSmall, get(INDEX.into()))?;
        let (status, body) = split(&listing)?;
        if status != 200 {
            bail!("the index: HTTP {status}");
        }
        let mut items = Vec::new();
        for line in String::from_utf8_lossy(body).lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let [path, size, feed] = f[..] else {
                bail!("a bad index line `{line}`");
            };
            let (path, c) = (path.to_string(), cl.clone());
            let size: u64 = size.parse().context("an index size")?;
            let feed: u32 = feed.parse().context("an index feed")?;
            items.push(Item {
                name: path.clone(),
                size,
                class: feed + 1,
                fetch: Box::new(move |label| {
                    let r = c.call(label, get(path)).map_err(|e| format!("{e:#}"))?;
                    match split(&r).map_err(|e| format!("{e:#}"))? {
                        (200, b) => Ok(b.len() as u64),
                        (s, _) => Err(format!("HTTP {s}")),
                    }
                }),
            });
        }
        if items.len() != FEEDS * PER_FEED {
            bail!(
                "the index lists {} articles, expected {}",
                items.len(),
                FEEDS * PER_FEED
            );
        }
        // The user: feed by feed, that feed's share of its articles, chosen from the seed.
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x4e_3e55);
        let mut reads = Vec::new();
        for (f, rate) in READ_RATES.iter().enumerate() {
            let mut a: Vec<usize> = (0..PER_FEED).collect();
            a.shuffle(&mut rng);
            let n = (rate * PER_FEED as f64).round() as usize;
            let mut chosen: Vec<usize> = a[..n].iter().map(|x| f * PER_FEED + x).collect();
            chosen.sort();
            reads.extend(chosen);
        }
        let session = Session {
            reads,
            rng: &mut rng,
            strategy,
            budgets,
            duration,
        };
        let out = read(&conn, items, session, &*progress)?;
        Ok((out, conn))
    };
    let out = t.run_client("imp news", client);
    finish_trial(t, server, out, budgets, EVENT)
}

/// The budget conditions of the thesis's news experiment, per scenario
/// ([`Condition::for_scenario`]): on `vehicular` 80% of the least any simple strategy used there
/// on average in the held-out run at 259d81e (about 63 J and 1 MB), rounded: 50 J and 800 kB;
/// on `walking` the thesis's own: 200 J and 4 MB.
pub const CONDITIONS: [Condition; 2] = [
    Condition {
        name: "news-energy",
        vehicular: Budgets {
            energy_j: Some(50.0),
            data_bytes: None,
        },
        walking: Budgets {
            energy_j: Some(200.0),
            data_bytes: None,
        },
    },
    Condition {
        name: "news-data",
        vehicular: Budgets {
            energy_j: None,
            data_bytes: Some(800_000),
        },
        walking: Budgets {
            energy_j: None,
            data_bytes: Some(4_000_000),
        },
    },
];

/// A trial under the energy budget.
pub fn run_energy(t: &Trial) -> Result<Vec<Metric>> {
    run(t, CONDITIONS[0].for_scenario(&t.scenario.name))
}

/// A trial under the data budget.
pub fn run_data(t: &Trial) -> Result<Vec<Metric>> {
    run(t, CONDITIONS[1].for_scenario(&t.scenario.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_carry_their_id_and_status() {
        assert_eq!(id_of(b"i7 200\nbody").unwrap(), "i7");
        assert_eq!(split(b"i7 404\n").unwrap(), (404, &b""[..]));
        assert_eq!(split(b"i7 200\n<html>").unwrap().1, b"<html>");
        assert!(split(b"i7 two hundred\n").is_err());
        assert!(id_of(b"nospace").is_err());
        let idx = index(1);
        assert_eq!(idx.lines().count(), FEEDS * PER_FEED);
        assert!(idx.starts_with("/feed0/article0.html "), "{idx}");
    }
}
