//! A replay session: the plan's paths, in order of preference, through one browser's tabs,
//! within the session's budgets.
//!
//! A path spends most of its time waiting: for its page to load over the network, then for
//! the network to be idle for [`ReplayConfig::idle`] after each step. With
//! [`ReplayConfig::tabs`] above one, that many paths are replayed side by side, each in its
//! own tab of the one browser (one profile, so one HTTP cache: what one tab fetched another
//! finds), and a WiFi window holds that many times more paths. The calling thread hands out
//! the paths in order, asks `allowed` (the conditions, [`crate::gate`]) and checks the budgets
//! before each one, and hears each tab's report; the tabs' threads only replay.
//!
//! Before each path, and every [`CHECK_EVERY`] while paths are under way, the session stops
//! if:
//! - `allowed` says no (WiFi went, the battery fell): [`SessionReport::stopped`] says why;
//! - the bytes fetched so far (paths under way included) reached [`ReplayConfig::max_bytes`],
//!   or their modelled radio energy [`ReplayConfig::max_joules`];
//! - [`ReplayConfig::max_time`] has passed since the first path started (the browser's start
//!   is not counted).
//!
//! Once stopped, no path starts, and the paths under way are halted at their next step
//! ([`Outcome::Halted`]): what they fetch meanwhile, at most half a second's worth and a
//! step's, is all a budget can be passed by.
//!
//! A browser that crashed (a path ended [`Outcome::BrowserLost`]) is started again, with
//! every tab, once the paths under way have ended (at most 3 times a session).

use super::replay::{Outcome, PathReport, ReplayConfig, Replayer, TabReplayer};
use super::BrowserError;
use crate::plan::Replay;
use crate::rules::Rules;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A replay session's result.
#[derive(Clone, Debug, Default)]
pub struct SessionReport {
    /// Each path's replay, in the plan's order (the paths started; with several tabs they
    /// ended in another order).
    pub paths: Vec<PathReport>,
    /// Why the session ended early, if it did.
    pub stopped: Option<String>,
    /// The WiFi radio's energy for the session's bytes over its length, joules, modelled
    /// with [`ReplayConfig::radio`] (roam-budget's model, not a measurement).
    pub joules: f64,
}

impl SessionReport {
    /// Bytes fetched by the whole session.
    pub fn bytes(&self) -> u64 {
        self.sum(|p| p.bytes)
    }

    /// One of the paths' counts, summed over the session.
    pub fn sum(&self, count: impl Fn(&PathReport) -> u64) -> u64 {
        self.paths.iter().map(count).sum()
    }
}

/// `tab.replay(path)`, with a panic in the DevTools client taken as the browser lost: the
/// session hears of every path it handed out, and waits for none forever.
fn replay_caught(tab: &TabReplayer, path: &Replay) -> PathReport {
    let started = Instant::now();
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| tab.replay(path))).unwrap_or_else(
        |_| PathReport {
            root: path.root.clone(),
            actions: path.actions.clone(),
            steps: 0,
            outcome: Outcome::BrowserLost {
                step: 0,
                why: "the DevTools client panicked".into(),
            },
            bytes: 0,
            cached: 0,
            posts_refused: 0,
            took: started.elapsed(),
            hovered: Duration::ZERO,
            speculative: 0,
            by_kind: Default::default(),
            revalidated: 0,
            reused: 0,
        },
    )
}

/// How often the session checks its conditions and budgets while paths are under way.
const CHECK_EVERY: Duration = Duration::from_millis(500);

/// The most times a session starts its browser again after a crash.
const RESTARTS: usize = 3;

/// Replay `paths` in order, [`ReplayConfig::tabs`] at a time. Before each path `allowed` is
/// asked whether replay may go on (the conditions, [`crate::gate`]); `progress` hears of each
/// path as it ends (with its index in `paths`).
pub fn replay_all(
    cfg: &ReplayConfig,
    rules: &Rules,
    paths: &[Replay],
    allowed: &mut dyn FnMut() -> Result<(), String>,
    progress: &mut dyn FnMut(usize, &PathReport),
) -> Result<SessionReport, BrowserError> {
    let radio = Arc::new(
        roam_budget::profile::profile(cfg.radio)
            .map_err(|e| BrowserError::Launch(format!("radio model {}: {e}", cfg.radio)))?,
    );
    let started = Instant::now();
    let energy = |bytes: u64| {
        roam_budget::transfer_energy(
            radio.clone(),
            bytes,
            started.elapsed(),
            roam_budget::Direction::Down,
        )
        .0
    };
    // Why the next path may not start, if it may not.
    let mut spent = 0;
    let mut first_path = None;
    let mut refuse = |spent: u64| -> Option<String> {
        if let Err(why) = allowed() {
            return Some(why);
        }
        if cfg.max_bytes.is_some_and(|m| spent >= m) {
            return Some(format!("the byte budget ({spent} B) is spent"));
        }
        if let (Some(max), true) = (cfg.max_joules, spent > 0) {
            let j = energy(spent);
            if j >= max {
                return Some(format!("the energy budget is spent ({j:.1} J modelled)"));
            }
        }
        let first = *first_path.get_or_insert_with(Instant::now);
        if let Some(t) = cfg.max_time.filter(|&t| first.elapsed() >= t) {
            return Some(format!("the session's time ({} s) is up", t.as_secs()));
        }
        None
    };
    let mut done: Vec<(usize, PathReport)> = vec![];
    let mut next = 0;
    let mut stopped = None;
    let mut restarts = 0;
    while next < paths.len() && stopped.is_none() {
        if restarts > 0 {
            // The old browser lets go of the profile before a new one takes it.
            if let Some(p) = &cfg.browser.profile {
                let deadline = Instant::now() + Duration::from_secs(10);
                while super::profile_in_use(p) && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
        let replayer = match Replayer::start(cfg, rules) {
            Ok(r) => r,
            Err(e) if restarts == 0 => return Err(e),
            Err(e) => {
                stopped = Some(format!("the browser could not be started again: {e}"));
                break;
            }
        };
        // What earlier browsers of the session fetched: with this one's live count, the
        // session's bytes so far, paths under way included.
        let spent_before = spent;
        let lost = std::thread::scope(|s| {
            let (ended_tx, ended) = mpsc::channel::<(usize, usize, PathReport)>();
            let mut hand = vec![];
            for (k, tab) in replayer.tabs().iter().enumerate() {
                let (tx, rx) = mpsc::channel::<usize>();
                hand.push(tx);
                let ended_tx = ended_tx.clone();
                s.spawn(move || {
                    for i in rx {
                        if ended_tx
                            .send((k, i, replay_caught(tab, &paths[i])))
                            .is_err()
                        {
                            break;
                        }
                    }
                });
            }
            drop(ended_tx);
            let mut idle: Vec<usize> = (0..hand.len()).rev().collect();
            let (mut under_way, mut lost) = (0, false);
            loop {
                while !lost && stopped.is_none() && next < paths.len() {
                    let Some(&k) = idle.last() else { break };
                    if let Some(why) = refuse(spent) {
                        stopped = Some(why);
                        break;
                    }
                    idle.pop();
                    if hand[k].send(next).is_err() {
                        // The tab's thread is gone: take the browser for lost.
                        lost = true;
                        break;
                    }
                    next += 1;
                    under_way += 1;
                }
                if under_way == 0 {
                    break;
                }
                let (k, i, r) = match ended.recv_timeout(CHECK_EVERY) {
                    Ok(x) => x,
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        // Paths under way: the conditions and budgets are checked meanwhile,
                        // and a stop halts them at their next step.
                        if stopped.is_none() {
                            if let Some(why) = refuse(spent_before + replayer.bytes()) {
                                stopped = Some(why);
                                replayer.halt();
                            }
                        }
                        continue;
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                };
                under_way -= 1;
                spent += r.bytes;
                lost |= matches!(r.outcome, Outcome::BrowserLost { .. });
                progress(i, &r);
                done.push((i, r));
                idle.push(k);
            }
            drop(hand);
            lost
        });
        drop(replayer);
        if !lost {
            break;
        }
        if restarts == RESTARTS {
            stopped.get_or_insert(format!("the browser was lost {} times", RESTARTS + 1));
            break;
        }
        restarts += 1;
    }
    done.sort_by_key(|(i, _)| *i);
    Ok(SessionReport {
        paths: done.into_iter().map(|(_, r)| r).collect(),
        stopped,
        joules: if spent > 0 { energy(spent) } else { 0.0 },
    })
}
