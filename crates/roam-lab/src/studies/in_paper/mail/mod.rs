//! Mail with prefetching (the paper's §6.2 application: Thunderbird behind a prefetching IMAP
//! proxy), against a real, unmodified IMAP server ([`crate::servers::dovecot`]).
//!
//! The client-side **proxy** speaks IMAP upstream. After a disconnection the scripted **user**
//! lists the mailbox (the headers of all 100 messages, a foreground fetch); the proxy then
//! prefetches every body in mailbox order (background: one `UID FETCH n (BODY.PEEK[])` per
//! message, all pipelined at once). After reading the list for [`READ_HEADERS`] the user opens
//! 5 messages (chosen from the trial's seed, the same for every system), one after another;
//! a message not yet in the proxy's cache is fetched on demand (foreground) even if its
//! prefetch is under way. Requests are labelled small; responses carry the request's
//! foreground/background label and are small or large by size ([`SMALL_MAX`]).
//!
//! Every system runs the same application: the proxy's upstream is one [`Conn`] to a
//! server-side **endpoint** that speaks plain IMAP to Dovecot over loopback, relaying whole
//! commands and whole responses (one message each, matched by IMAP tag); Dovecot is
//! unmodified. Only the transport differs: a roam multi-socket, where labels schedule the
//! messages, or one TCP or MPTCP connection, where they travel in order and change nothing.
//! The endpoint gives Dovecot one command at a time, foreground first, and composes each
//! prefetch response only when the connection can take it ([`Readiness`]), leaving out a body
//! the user has meanwhile fetched on demand. Over roam that is when the background backlog is
//! under its bound; over TCP, when the socket has taken the previous response. The endpoint
//! also makes every system's responses leave through the lab's congestion control (cubic):
//! Dovecot's own sockets take the namespace default, BBR on this machine, a non-initial
//! namespace may not set a default outside `tcp_allowed_congestion_control`, and Dovecot
//! cannot open MPTCP sockets.
//!
//! The user side is called in-process instead of over a loopback IMAP connection from a GUI
//! client (that hop would add microseconds to what the links add in hundreds of ms).
//!
//! Measured: the on-demand delay (mean over the 5 opens; an open served from the cache counts
//! its near-zero wait), the time to list the headers, and the background time (from the header
//! request until every body is in the cache).
//!
//! The client-side proxy is in `proxy`, the server-side endpoint in `endpoint` and the
//! scripted user in `user`; this module runs a trial and reports it.
//!
//! [`Conn`]: crate::harness::channel::Conn
//! [`Readiness`]: crate::harness::channel::Readiness

mod endpoint;
mod proxy;
mod user;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, bail, Result};

use crate::harness::trial::{Metric, Trial};
use crate::report::UNFINISHED;
use crate::servers::dovecot::Dovecot;
use proxy::Proxy;
use user::{opens_csv, Outcome};

pub use endpoint::endpoint;
pub(crate) use proxy::{command, parse_fetch};

/// Responses up to this size are labelled small, larger ones large.
pub const SMALL_MAX: usize = 4096;
/// Messages the user opens.
pub const OPENS: usize = 5;
/// How long the user reads the header list before opening the first message.
pub const READ_HEADERS: Duration = Duration::from_secs(1);
/// The server-side endpoint's port.
pub(crate) const ENDPOINT_PORT: u16 = 6300;

/// The interactive event whose latencies a trial records ([`Trial::event_latencies`]): each
/// open's wait (an open served from the cache counts its near-zero wait).
pub const EVENT: &str = "open_ms";

/// Run one trial: start Dovecot and the endpoint, run the scripted user against the proxy
/// (`Proxy::connect`, `user::script`), and report what the user measured (`record`,
/// `metrics`).
pub fn run(t: &Trial) -> Result<Vec<Metric>> {
    let system = t.system.clone();
    let seed = t.seed;
    let server = t.start_server(
        "mail",
        ENDPOINT_PORT,
        move || Dovecot::start(seed),
        // Dovecot's log explains most of what goes wrong behind the endpoint.
        |dove, c| endpoint(c).map_err(|e| anyhow!("{e:#}{}", dove.log_tail())),
    )?;
    let locals = t.client_links();
    let progress = t.progress.clone();
    let cap = t.duration;
    let proxy_slot: Arc<Mutex<Option<Arc<Proxy>>>> = Arc::default();
    let ps = proxy_slot.clone();
    let client = move || -> Result<Outcome> {
        let proxy = Proxy::connect(system, &locals)?;
        *ps.lock().unwrap() = Some(proxy.clone());
        user::script(&proxy, seed, cap, &*progress)
    };
    let out = t.run_client("mail", client);
    let proxy = proxy_slot.lock().unwrap().take();
    let (recovery, served) = server.finish(proxy.as_ref().map(|p| &p.up));
    let out = with_server_error(out, served)?;
    record(t, &out)?;
    Ok(metrics(&out, recovery))
}

/// The client's outcome; if it failed, its error with the server side's (with Dovecot's log),
/// which explains a client failure best.
fn with_server_error(out: Result<Outcome>, served: Result<()>) -> Result<Outcome> {
    match out {
        Ok(o) => Ok(o),
        Err(e) => {
            if let Err(se) = served {
                bail!("{e:#}; server side: {se:#}");
            }
            Err(e)
        }
    }
}

/// Keep what the user's outcome leaves beside the metrics: why something did not finish (the
/// trial's notes), every open (`mail-opens.csv` in the trial's log directory) and each open's
/// wait (the interactive events' distribution).
fn record(t: &Trial, out: &Outcome) -> Result<()> {
    for why in &out.unfinished {
        t.note(why.clone());
    }
    t.keep_log("mail-opens.csv", || opens_csv(&out.opens))?;
    t.event_latencies(EVENT, out.opens.iter().map(|o| o.ms));
    Ok(())
}

/// The trial's metrics: the user's waits and the background time, then the connection's
/// `recovery` costs.
fn metrics(out: &Outcome, recovery: Vec<Metric>) -> Vec<Metric> {
    let open_ms: Vec<f64> = out.opens.iter().map(|o| o.ms).collect();
    let ondemand_ms = if open_ms.is_empty() {
        UNFINISHED
    } else {
        crate::report::mean(&open_ms)
    };
    let fetched: Vec<f64> = out
        .opens
        .iter()
        .filter(|o| o.from_network)
        .map(|o| o.ms)
        .collect();
    vec![
        Metric::new("ondemand_ms", ondemand_ms, "ms"),
        Metric::new("headers_s", out.headers_s, "s"),
        Metric::new("background_s", out.background_s, "s"),
        Metric::new("opens_from_network", fetched.len() as f64, "msgs"),
        Metric::new(
            "network_open_ms",
            if fetched.is_empty() {
                f64::NAN // every open was served from the cache
            } else {
                crate::report::mean(&fetched)
            },
            "ms",
        ),
        Metric::new("bodies_twice", out.twice as f64, "msgs"),
    ]
    .into_iter()
    .chain(recovery)
    .collect()
}
