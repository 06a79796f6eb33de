//! The scripted user: after a disconnection it lists the mailbox, reads the list, opens a few
//! messages one after another, and the trial waits for the proxy's prefetches to finish.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use rand::seq::index::sample;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use roam_net::Label;

use super::proxy::{Pending, Proxy};
use super::{OPENS, READ_HEADERS};
use crate::report::UNFINISHED;
use crate::servers::dovecot;

/// What the scripted user measured.
pub(super) struct Outcome {
    pub(super) headers_s: f64,
    /// The user's opens, in order (none if the mailbox was never listed).
    pub(super) opens: Vec<Open>,
    pub(super) background_s: f64,
    /// Bodies received twice (prefetched and fetched on demand), once every response is in.
    pub(super) twice: u32,
    /// What did not finish within the workload, and how far it got (for the trial's notes).
    pub(super) unfinished: Vec<String>,
}

/// One message the user opened.
pub(super) struct Open {
    /// When (seconds since the user's clock started).
    pub(super) at_s: f64,
    pub(super) uid: u32,
    /// The body's size (RFC822.SIZE).
    pub(super) bytes: u64,
    /// Not in the cache when opened: fetched on demand.
    pub(super) from_network: bool,
    /// Bodies in the cache when it was opened.
    pub(super) cached: usize,
    /// How long the user waited ([`UNFINISHED`] if the body never came).
    pub(super) ms: f64,
}

/// The header and rows of `mail-opens.csv`, which a trial writes into its log directory
/// (`--emu-logs`): every message the user opened, to tell where the on-demand time went.
pub(super) fn opens_csv(opens: &[Open]) -> String {
    let mut s = String::from("at_s,uid,bytes,from_network,cached,ms\n");
    for o in opens {
        s.push_str(&format!(
            "{:.3},{},{},{},{},{:.1}\n",
            o.at_s, o.uid, o.bytes, o.from_network as u8, o.cached, o.ms
        ));
    }
    s
}

/// The scripted user, over a connected `proxy`: list the mailbox ([`list_mailbox`]), let the
/// proxy prefetch every body ([`Proxy::prefetch_all`]) while reading the list for
/// [`READ_HEADERS`], open [`OPENS`] messages chosen from `seed` ([`open_messages`]), then wait
/// for every body ([`await_background`]) and every response ([`count_twice`]). Nothing may
/// take past `cap` from the start; what does not finish by then is a result ("unfinished"),
/// not a failure. `progress` hears the seconds since the start.
pub(super) fn script(
    proxy: &Arc<Proxy>,
    seed: u64,
    cap: Duration,
    progress: &(dyn Fn(u64) + Send + Sync),
) -> Result<Outcome> {
    let start = Instant::now();
    let deadline = start + cap;
    proxy.spawn_reader();
    let Some(Listing {
        headers_s,
        messages: list,
    }) = list_mailbox(proxy, start, deadline)?
    else {
        return Ok(Outcome {
            headers_s: UNFINISHED,
            opens: Vec::new(),
            background_s: UNFINISHED,
            twice: 0,
            unfinished: vec![format!(
                "the mailbox listing got no reply within the workload ({:.0} s)",
                (deadline - start).as_secs_f64()
            )],
        });
    };
    proxy.prefetch_all(list.iter().map(|x| x.0).collect());
    std::thread::sleep(READ_HEADERS);
    let (opens, mut unfinished) = open_messages(proxy, &list, seed, start, deadline, progress)?;
    let (all_at, background) = await_background(proxy, list.len(), start, deadline, progress)?;
    unfinished.extend(background);
    let twice = count_twice(proxy, deadline)?;
    Ok(Outcome {
        twice,
        headers_s,
        opens,
        unfinished,
        background_s: all_at.map_or(UNFINISHED, |a| (a - start).as_secs_f64()),
    })
}

/// The mailbox as the user listed it.
struct Listing {
    /// Seconds from the start until the listing came.
    headers_s: f64,
    /// (UID, size) of every message, in mailbox order.
    messages: Vec<(u32, u64)>,
}

/// The user lists the mailbox (a foreground fetch of every message's UID, size and header),
/// or `None` if no listing came by `deadline`. A listing without all of Dovecot's messages is
/// an error.
fn list_mailbox(proxy: &Proxy, start: Instant, deadline: Instant) -> Result<Option<Listing>> {
    proxy.request(
        Label::ForegroundSmall,
        Pending::Headers,
        "UID FETCH 1:* (UID RFC822.SIZE BODY.PEEK[HEADER])",
    )?;
    if !proxy.wait(deadline, |c| c.headers.is_some())? {
        return Ok(None);
    }
    let headers_s = start.elapsed().as_secs_f64();
    let list = proxy
        .cache
        .lock()
        .unwrap()
        .headers
        .clone()
        .unwrap_or_default();
    if list.len() != dovecot::MESSAGES {
        bail!(
            "listed {} messages, expected {}",
            list.len(),
            dovecot::MESSAGES
        );
    }
    Ok(Some(Listing {
        headers_s,
        messages: list,
    }))
}

/// The user opens [`OPENS`] messages of `list`, chosen from `seed` (the same for every
/// system), one after another: one not yet in the proxy's cache is fetched on demand. The
/// opens, and why they stopped if a body had not come by `deadline` (the user gives up
/// there).
fn open_messages(
    proxy: &Proxy,
    list: &[(u32, u64)],
    seed: u64,
    start: Instant,
    deadline: Instant,
    progress: &(dyn Fn(u64) + Send + Sync),
) -> Result<(Vec<Open>, Vec<String>)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x0e4a11);
    let picks = sample(&mut rng, list.len(), OPENS).into_vec();
    let mut opens = Vec::new();
    let mut unfinished = Vec::new();
    for i in picks {
        let (uid, bytes) = list[i];
        let t0 = Instant::now();
        let (cached, from_network) = {
            let c = proxy.cache.lock().unwrap();
            (c.bodies.len(), !c.bodies.contains(&uid))
        };
        if from_network {
            proxy.fetch_body(Label::ForegroundSmall, uid)?;
        }
        let came = proxy.wait(deadline, |c| c.bodies.contains(&uid))?;
        opens.push(Open {
            at_s: (t0 - start).as_secs_f64(),
            uid,
            bytes,
            from_network,
            cached,
            ms: if came {
                t0.elapsed().as_secs_f64() * 1e3
            } else {
                UNFINISHED
            },
        });
        if !came {
            unfinished.push(format!(
                "opening message UID {uid}: its body had not arrived {:.1} s later, at the \
                 end of the workload",
                t0.elapsed().as_secs_f64()
            ));
            break;
        }
        progress(start.elapsed().as_secs());
    }
    Ok((opens, unfinished))
}

/// Wait, until `deadline`, for every one of the `listed` bodies to be in the cache (the
/// background time's end): when they all were, or how far the cache got if they never were.
fn await_background(
    proxy: &Proxy,
    listed: usize,
    start: Instant,
    deadline: Instant,
    progress: &(dyn Fn(u64) + Send + Sync),
) -> Result<(Option<Instant>, Option<String>)> {
    while !proxy.wait(
        (Instant::now() + Duration::from_secs(1)).min(deadline),
        |c| c.all_at.is_some(),
    )? && Instant::now() < deadline
    {
        progress(start.elapsed().as_secs());
    }
    let (all_at, cached) = {
        let c = proxy.cache.lock().unwrap();
        (c.all_at, c.bodies.len())
    };
    let unfinished = all_at.is_none().then(|| {
        format!("background: {cached} of {listed} bodies in the cache at the end of the workload")
    });
    Ok((all_at, unfinished))
}

/// Bodies that crossed the network twice, counted once every response is in (a prefetch
/// overtaken by an on-demand fetch may still be on its way) or at `deadline`.
fn count_twice(proxy: &Proxy, deadline: Instant) -> Result<u32> {
    proxy.wait(deadline, |c| c.pending.is_empty())?;
    Ok(proxy.cache.lock().unwrap().twice)
}
