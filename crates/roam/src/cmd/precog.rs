//! `roam precog`: record the user's actions in Chromium, see and control what was recorded,
//! and replay the likely actions on WiFi (`roam_precog`; docs/precog.md).
//!
//! Everything lives in one directory (`--state`, default `$XDG_DATA_HOME/roam/precog`):
//! the action trees and the rules (private files), and the Chromium profile `browse` records
//! in and `replay` fills, so that what a replay fetched is in the cache the user's next
//! browsing reads. Nothing recorded leaves the device.

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use roam_core::progress::{Progress, Unit};
use roam_core::Time;
use roam_precog::browser::record::{Recorder, Report};
use roam_precog::browser::replay::{Outcome, ReplayConfig, REUSE_PAGES};
use roam_precog::browser::session::replay_all;
use roam_precog::browser::{launch, BrowserConfig};
use roam_precog::gate::{self, Thresholds};
use roam_precog::{plan, Forest, PathCutter, PlanConfig, Rules, State};
use serde_json::json;

/// `roam precog ...`.
#[derive(Subcommand)]
pub enum PrecogCmd {
    /// Start Chromium with recording on (the trees grow as you browse; saved as each path
    /// ends, and when the browser closes).
    Browse(BrowseArgs),
    /// What was recorded, per site, and what a replay would fetch now.
    Status(StatusArgs),
    /// Replay the likely actions in a headless Chromium (now, or once on WiFi).
    Replay(ReplayArgs),
    /// Forget everything recorded on a domain (and its subdomains).
    Forget(ForgetArgs),
    /// Set a domain's rule: record, replay, and the one sign-in replay may POST.
    Rule(RuleArgs),
}

/// Where the state lives.
#[derive(Args, Debug, Clone)]
pub struct StateArgs {
    /// Precog's directory: trees, rules and the browser profile
    /// (default: $XDG_DATA_HOME/roam/precog, or ~/.local/share/roam/precog).
    #[arg(long, value_name = "DIR")]
    state: Option<PathBuf>,
}

impl StateArgs {
    fn dir(&self) -> Result<PathBuf> {
        if let Some(d) = &self.state {
            return Ok(d.clone());
        }
        let base = match std::env::var_os("XDG_DATA_HOME") {
            Some(d) if !d.is_empty() => PathBuf::from(d),
            _ => PathBuf::from(
                std::env::var_os("HOME")
                    .context("neither --state, XDG_DATA_HOME nor HOME is set")?,
            )
            .join(".local/share"),
        };
        Ok(base.join("roam/precog"))
    }

    fn state(&self) -> Result<State> {
        Ok(State::new(self.dir()?))
    }
}

/// The browser's arguments, shared by `browse` and `replay`.
#[derive(Args, Debug, Clone)]
pub struct BrowserArgs {
    /// A proxy for every request the browser makes, e.g. socks5://127.0.0.1:1080 (`roam net
    /// proxy`, whose dedup cache then holds what a replay fetched).
    #[arg(long, value_name = "URL")]
    proxy: Option<String>,
    /// The Chromium profile (default: the state directory's `profile`).
    #[arg(long, value_name = "DIR")]
    profile: Option<PathBuf>,
}

impl BrowserArgs {
    fn config(&self, state: &State, headless: bool) -> BrowserConfig {
        BrowserConfig {
            profile: Some(
                self.profile
                    .clone()
                    .unwrap_or_else(|| state.dir().join("profile")),
            ),
            proxy: self.proxy.clone(),
            headless,
            ..BrowserConfig::default()
        }
    }
}

/// Arguments of `roam precog browse`.
#[derive(Args, Debug)]
pub struct BrowseArgs {
    #[command(flatten)]
    state: StateArgs,
    #[command(flatten)]
    browser: BrowserArgs,
    /// The page to open first.
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// Run without a window (recording what scripts drive over DevTools).
    #[arg(long)]
    headless: bool,
    /// Stop recording after this long (default: when the browser closes).
    #[arg(long = "for", value_name = "DURATION", value_parser = crate::parse_dur)]
    duration: Option<Duration>,
}

/// What a replay takes, shared by `status` and `replay`.
#[derive(Args, Debug)]
pub struct PlanArgs {
    /// The fraction of nodes to replay (the thesis: 0.25).
    #[arg(long, default_value_t = 0.25)]
    fraction: f64,
    /// Rank by raw hit counts, as the thesis, instead of hits aged with a half-life of a
    /// week (a habit left for a week counts half).
    #[arg(long)]
    raw_hits: bool,
}

/// Arguments of `roam precog status`.
#[derive(Args, Debug)]
pub struct StatusArgs {
    #[command(flatten)]
    state: StateArgs,
    #[command(flatten)]
    plan: PlanArgs,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// When a replay runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum When {
    /// At once if on WiFi (refused otherwise, unless --any-network), whatever the battery,
    /// CPU and disk.
    Now,
    /// Once on WiFi with battery, CPU and disk to spare (checked every 30 s).
    Wifi,
}

/// Arguments of `roam precog replay`.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    #[command(flatten)]
    state: StateArgs,
    #[command(flatten)]
    browser: BrowserArgs,
    /// When to replay.
    #[arg(long, value_enum, default_value_t = When::Now)]
    when: When,
    /// Replay now even if no WiFi is up (on cellular or metered networks: it spends the
    /// data plan Precog exists to save).
    #[arg(long)]
    any_network: bool,
    /// Read the device's conditions (WiFi, battery, load, free disk) from this JSON file at
    /// each check instead of from the device, e.g. `{"wifi": true, "battery": 0.8,
    /// "charging": false, "load": 0.1, "disk_free": 10000000000}`: for a device whose
    /// networks or battery roam cannot see, and for tests.
    #[arg(long, value_name = "FILE")]
    conditions: Option<PathBuf>,
    /// With --when wifi, give up after waiting this long.
    #[arg(long, value_name = "DURATION", value_parser = crate::parse_dur, default_value = "24h")]
    wait: Duration,
    #[command(flatten)]
    plan: PlanArgs,
    /// Stop once this many MB were fetched (this replay's data budget).
    #[arg(long, value_name = "MB")]
    max_mb: Option<f64>,
    /// Set the daily allowance of every replay together, MB fetched a day (kept in the
    /// state's allowance.json; 0 removes the bound). Each replay takes at most what the day
    /// has left.
    #[arg(long, value_name = "MB")]
    mb_per_day: Option<f64>,
    /// Set the daily allowance of modelled radio energy, joules a day (0 removes the bound).
    #[arg(long, value_name = "J")]
    joules_per_day: Option<f64>,
    /// Stop once the replay's radio energy reaches this many joules (modelled with the
    /// huang2012 WiFi radio: roam-budget's model, not a measurement).
    #[arg(long, value_name = "J")]
    max_joules: Option<f64>,
    /// Longest wait for one step's page to go idle.
    #[arg(long, value_name = "DURATION", value_parser = crate::parse_dur, default_value = "20s")]
    step_timeout: Duration,
    /// Paths replayed side by side, each in its own tab of the one browser (1-32): a path
    /// mostly waits for its pages, so a WiFi window holds that many times more.
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=32))]
    tabs: u16,
    /// Answer a page the replay fetched less than this long ago from its own copy instead
    /// of asking the network again (its many paths share their sites' front pages); default
    /// 10 minutes (`roam_precog`'s `REUSE_PAGES`), `0s`: every load asks.
    #[arg(long, value_name = "DURATION", value_parser = crate::parse_dur)]
    reuse_pages: Option<Duration>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `roam precog forget`.
#[derive(Args, Debug)]
pub struct ForgetArgs {
    #[command(flatten)]
    state: StateArgs,
    /// The domain.
    domain: String,
}

/// On or off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Switch {
    /// On.
    On,
    /// Off.
    Off,
}

/// Arguments of `roam precog rule`.
#[derive(Args, Debug)]
pub struct RuleArgs {
    #[command(flatten)]
    state: StateArgs,
    /// The domain (its subdomains follow unless they have rules of their own); `default` for
    /// every domain without a rule.
    domain: String,
    /// Record actions there.
    #[arg(long, value_enum)]
    record: Option<Switch>,
    /// Replay them.
    #[arg(long, value_enum)]
    replay: Option<Switch>,
    /// Let replay POST to URLs starting with this (a sign-in form), and nowhere else.
    #[arg(long, value_name = "URL", conflicts_with = "no_sign_in")]
    sign_in: Option<String>,
    /// Allow no sign-in POST.
    #[arg(long)]
    no_sign_in: bool,
}

/// Run `roam precog ...`.
pub fn run(cmd: PrecogCmd) -> Result<()> {
    match cmd {
        PrecogCmd::Browse(a) => browse(&a),
        PrecogCmd::Status(a) => status(&a),
        PrecogCmd::Replay(a) => replay(&a),
        PrecogCmd::Forget(a) => forget(&a),
        PrecogCmd::Rule(a) => rule(&a),
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn browse(a: &BrowseArgs) -> Result<()> {
    let state = a.state.state()?;
    let rules = state.rules()?;
    let mut forest = state.forest()?;
    let display = ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()));
    if !a.headless && !display {
        bail!("no display to open Chromium's window on (neither DISPLAY nor WAYLAND_DISPLAY is set): run it in your desktop session, or with --headless for a browser driven over DevTools");
    }
    let browser = launch(&a.browser.config(&state, a.headless))?;
    let tab = browser.new_tab().context("opening a tab")?;
    let rec = Recorder::attach(&tab)?;
    if let Some(u) = &a.url {
        tab.navigate_to(u).with_context(|| format!("opening {u}"))?;
    }
    eprintln!(
        "roam precog: recording into {} (forget a site with `roam precog forget DOMAIN`)",
        state.dir().display()
    );
    let started = Instant::now();
    let clock = Instant::now();
    let mut cut = PathCutter::new();
    let mut paths = 0;
    let pid = browser.get_process_id();
    let alive = || pid.is_none_or(|p| std::path::Path::new(&format!("/proc/{p}")).exists());
    let mut keep = |forest: &mut Forest, p: Option<roam_precog::Path>| -> Result<()> {
        if let Some(p) = p {
            forest.record(&p, unix_now());
            state.save_forest(forest)?;
            paths += 1;
            eprintln!("recorded: {} then {} actions", p.root, p.actions.len());
        }
        Ok(())
    };
    while alive() && a.duration.is_none_or(|d| started.elapsed() < d) {
        let Ok(Some(r)) = rec.next(Duration::from_millis(250)) else {
            continue;
        };
        let now = Time::ZERO + clock.elapsed();
        let done = match r {
            Report::Page(u) => cut.page(&u, now, &rules),
            Report::Action(x) => cut.action(x, now),
            Report::Post => cut.post(now),
        };
        keep(&mut forest, done)?;
    }
    keep(&mut forest, cut.finish())?;
    if rec.dropped() > 0 {
        eprintln!(
            "roam precog: {} malformed or excess reports from pages were dropped",
            rec.dropped()
        );
    }
    eprintln!(
        "roam precog: {paths} paths recorded; {} nodes in the trees",
        forest.len()
    );
    Ok(())
}

/// The state at `args`, its trees and rules, and what a replay would take now.
fn planned(args: &StateArgs, how: &PlanArgs) -> Result<(State, Forest, Rules, roam_precog::Plan)> {
    let fraction = how.fraction;
    let state = args.state()?;
    let forest = state.forest()?;
    let rules = state.rules()?;
    let p = plan(
        &forest,
        &rules,
        &PlanConfig {
            fraction,
            ageing: !how.raw_hits,
            at: Some(unix_now()),
            ..Default::default()
        },
    );
    Ok((state, forest, rules, p))
}

fn status(a: &StatusArgs) -> Result<()> {
    let (state, forest, rules, p) = planned(&a.state, &a.plan)?;
    let reaches = forest.reaches();
    let sites: Vec<serde_json::Value> = forest
        .sites
        .iter()
        .map(|(site, trees)| {
            let mine: Vec<_> = reaches.iter().filter(|r| &r.site == site).collect();
            let rule = rules.rule(site);
            json!({
                "site": site,
                "trees": trees.len(),
                "nodes": mine.len(),
                "hits": trees.values().map(|n| n.hits).sum::<u64>(),
                "last": mine.iter().map(|r| r.last).max().unwrap_or(0),
                "record": rule.record, "replay": rule.replay, "sign_in": rule.sign_in,
                "paths_to_replay": p.paths.iter().filter(|r| &r.site == site).count(),
            })
        })
        .collect();
    if a.json {
        let paths: Vec<_> = p
            .paths
            .iter()
            .map(|r| {
                json!({"root": r.root, "hits": r.hits,
                "actions": r.actions.iter().map(|x| x.to_string()).collect::<Vec<_>>()})
            })
            .collect();
        let allowance = state.allowance()?;
        let today = allowance.spent_today(unix_now());
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"dir": state.dir(), "sites": sites,
                "ranked": p.ranked, "chosen": p.chosen, "replay": paths,
                "allowance": {"bytes_per_day": allowance.bytes_per_day,
                    "joules_per_day": allowance.joules_per_day,
                    "spent_today_bytes": today.bytes, "spent_today_joules": today.joules}}))?
        );
        return Ok(());
    }
    println!("Precog's state: {}", state.dir().display());
    println!(
        "replay allowance: {}",
        spent_text(&state.allowance()?, unix_now())
    );
    if forest.is_empty() {
        println!("nothing recorded yet (roam precog browse)");
        return Ok(());
    }
    println!(
        "{:<32} {:>6} {:>6} {:>7} {:>7} {:>7} {:>8}",
        "site", "trees", "nodes", "hits", "record", "replay", "to play"
    );
    for s in &sites {
        let on = |k: &str| {
            if s[k].as_bool() == Some(true) {
                "on"
            } else {
                "off"
            }
        };
        let n = |k: &str| s[k].as_u64().unwrap_or(0);
        println!(
            "{:<32} {:>6} {:>6} {:>7} {:>7} {:>7} {:>8}",
            s["site"].as_str().unwrap_or(""),
            n("trees"),
            n("nodes"),
            n("hits"),
            on("record"),
            on("replay"),
            n("paths_to_replay")
        );
    }
    println!(
        "\na replay now takes the top {:.0}% of {} nodes ({}), as {} paths:",
        a.plan.fraction * 100.0,
        p.ranked,
        p.chosen,
        p.paths.len()
    );
    for r in p.paths.iter().take(20) {
        let steps: Vec<String> = r.actions.iter().map(|x| x.to_string()).collect();
        println!("  {:>5} hits  {} {}", r.hits, r.root, steps.join(" > "));
    }
    if p.paths.len() > 20 {
        println!("  ... and {} more (--json for all)", p.paths.len() - 20);
    }
    Ok(())
}

fn replay(a: &ReplayArgs) -> Result<()> {
    if !(a.plan.fraction > 0.0 && a.plan.fraction <= 1.0) {
        bail!(
            "--fraction {}: a fraction of the nodes, in (0, 1]",
            a.plan.fraction
        );
    }
    if a.max_mb.is_some_and(|m| !(m.is_finite() && m > 0.0)) {
        bail!("--max-mb: a positive number of MB");
    }
    if a.max_joules.is_some_and(|j| !(j.is_finite() && j > 0.0)) {
        bail!("--max-joules: a positive number of joules");
    }
    // The allowance's flags are taken (and kept) first, whatever follows.
    for (flag, v) in [
        ("--mb-per-day", a.mb_per_day),
        ("--joules-per-day", a.joules_per_day),
    ] {
        if v.is_some_and(|x| !(x.is_finite() && x >= 0.0)) {
            bail!("{flag}: a number of at least 0 (0 removes the bound)");
        }
    }
    if a.mb_per_day.is_some() || a.joules_per_day.is_some() {
        let state = a.state.state()?;
        let mut allowance = state.allowance()?;
        if let Some(mb) = a.mb_per_day {
            allowance.bytes_per_day = (mb > 0.0).then_some((mb * 1e6) as u64);
        }
        if let Some(j) = a.joules_per_day {
            allowance.joules_per_day = (j > 0.0).then_some(j);
        }
        state.save_allowance(&allowance)?;
    }
    let (state, _, rules, p) = planned(&a.state, &a.plan)?;
    allowance_left(&state)?;
    if p.paths.is_empty() {
        eprintln!("roam precog: nothing to replay (record with `roam precog browse` first)");
        return Ok(());
    }
    let thresholds = Thresholds::default();
    let dir = state.dir().to_path_buf();
    let conditions = |file: &Option<PathBuf>| -> Result<gate::Conditions> {
        match file {
            None => Ok(gate::read(&dir)),
            Some(f) => {
                let b = std::fs::read(f).with_context(|| format!("reading {}", f.display()))?;
                serde_json::from_slice(&b)
                    .with_context(|| format!("{}: not a conditions snapshot", f.display()))
            }
        }
    };
    if a.when == When::Now && !a.any_network && !conditions(&a.conditions)?.wifi {
        bail!(
            "{} (Precog replays on WiFi; --when wifi waits for it, --any-network replays anyway)",
            gate::Wait::NoWifi
        );
    }
    if a.when == When::Wifi {
        let started = Instant::now();
        loop {
            match thresholds.check(&conditions(&a.conditions)?) {
                Ok(()) => break,
                Err(w) if started.elapsed() >= a.wait => bail!("gave up after {:?}: {w}", a.wait),
                Err(w) => eprintln!("roam precog: waiting: {w}"),
            }
            std::thread::sleep(
                Duration::from_secs(30).min(a.wait.saturating_sub(started.elapsed())),
            );
        }
    }
    // What the day has left, after the wait (which may have crossed midnight).
    let (bytes_left, joules_left) = allowance_left(&state)?;
    let least = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    };
    let cfg = ReplayConfig {
        browser: a.browser.config(&state, true),
        step_timeout: a.step_timeout,
        max_bytes: least(a.max_mb.map(|m| m * 1e6), bytes_left.map(|b| b as f64)).map(|b| b as u64),
        max_joules: least(a.max_joules, joules_left),
        tabs: usize::from(a.tabs),
        reuse_pages: Some(a.reuse_pages.unwrap_or(REUSE_PAGES)).filter(|d| !d.is_zero()),
        ..ReplayConfig::default()
    };
    let bar = Progress::builder(Unit::Count("paths"))
        .label("replay")
        .total(p.paths.len() as u64)
        .start();
    let when = a.when;
    let any_network = a.any_network;
    let mut allowed = || match when {
        // Replay stops when WiFi goes, unless the user said any network would do.
        When::Now if any_network => Ok(()),
        When::Now => match conditions(&a.conditions) {
            Ok(c) if c.wifi => Ok(()),
            Ok(_) => Err(gate::Wait::NoWifi.to_string()),
            Err(e) => Err(format!("{e:#}")),
        },
        When::Wifi => match conditions(&a.conditions) {
            Ok(c) => thresholds.check(&c).map_err(|w| w.to_string()),
            Err(e) => Err(format!("{e:#}")),
        },
    };
    let b = bar.clone();
    let mut progress = |_: usize, r: &roam_precog::browser::replay::PathReport| {
        b.inc(1);
        if r.outcome != Outcome::Done {
            b.println(&format!(
                "{}: after {} of {} steps: {:?}",
                r.root,
                r.steps,
                r.actions.len(),
                r.outcome
            ));
        }
    };
    let began = Instant::now();
    let report = replay_all(&cfg, &rules, &p.paths, &mut allowed, &mut progress)?;
    // The session's own time: its paths ran side by side.
    let secs = began.elapsed().as_secs_f64();
    bar.finish();
    // What it spent, against the day's allowance, read again: the flags or another replay
    // may have changed it while this one ran.
    let mut allowance = state.allowance()?;
    allowance.spend(unix_now(), report.bytes(), report.joules);
    state.save_allowance(&allowance)?;
    let done = report
        .paths
        .iter()
        .filter(|r| r.outcome == Outcome::Done)
        .count();
    let steps: usize = report.paths.iter().map(|r| r.steps).sum();
    let actions: usize = report.paths.iter().map(|r| r.actions.len()).sum();
    let refused: u64 = report.sum(|r| r.posts_refused);
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "paths": report.paths.len(), "done": done, "steps": steps, "actions": actions,
                "bytes": report.bytes(), "cached": report.sum(|r| r.cached),
                "reused": report.sum(|r| r.reused),
                "posts_refused": refused, "seconds": secs, "stopped": report.stopped,
                "outcomes": report.paths.iter().map(|r| format!("{:?}", r.outcome)).collect::<Vec<_>>(),
            }))?
        );
    } else {
        println!(
            "replayed {} paths ({done} whole): {steps} of {actions} actions, {:.1} MB fetched in {secs:.0} s; {refused} POSTs refused",
            report.paths.len(),
            report.bytes() as f64 / 1e6
        );
        if let Some(why) = &report.stopped {
            println!("stopped early: {why}");
        }
    }
    Ok(())
}

/// What today's allowance has left (bytes, joules; `None`: no bound), or an error if it is
/// spent.
fn allowance_left(state: &State) -> Result<(Option<u64>, Option<f64>)> {
    let allowance = state.allowance()?;
    let left = allowance.left(unix_now());
    if left.0 == Some(0) || left.1 == Some(0.0) {
        bail!(
            "today's replay allowance is spent ({}; --mb-per-day or --joules-per-day change it)",
            spent_text(&allowance, unix_now())
        );
    }
    Ok(left)
}

/// Today's spending against the allowance, for people.
fn spent_text(a: &roam_precog::Allowance, now: u64) -> String {
    let s = a.spent_today(now);
    let mb = |b: u64| format!("{:.1} MB", b as f64 / 1e6);
    format!(
        "today {} of {} and {:.1} J of {} (modelled)",
        mb(s.bytes),
        a.bytes_per_day.map_or("no bound".into(), mb),
        s.joules,
        a.joules_per_day
            .map_or("no bound".into(), |j| format!("{j:.1} J"))
    )
}

fn forget(a: &ForgetArgs) -> Result<()> {
    let state = a.state.state()?;
    let mut forest = state.forest()?;
    let gone = forest.forget(&a.domain);
    state.save_forest(&forest)?;
    println!("forgot {gone} nodes recorded on {} (the browser's own cache and history are its own: clear them in Chromium)", a.domain);
    Ok(())
}

fn rule(a: &RuleArgs) -> Result<()> {
    let state = a.state.state()?;
    let mut rules: Rules = state.rules()?;
    let on = |s: Switch| s == Switch::On;
    if a.domain == "default" {
        let r = &mut rules.default_rule;
        if let Some(s) = a.record {
            r.record = on(s);
        }
        if let Some(s) = a.replay {
            r.replay = on(s);
        }
        if a.sign_in.is_some() {
            bail!("a sign-in belongs to one domain, not the default");
        }
    } else {
        if a.domain.is_empty() || a.domain.contains(['/', ':', ' ']) {
            bail!("`{}`: a domain such as example.org", a.domain);
        }
        if let Some(s) = a.record {
            rules.set_record(&a.domain, on(s));
        }
        if let Some(s) = a.replay {
            rules.set_replay(&a.domain, on(s));
        }
        if let Some(u) = &a.sign_in {
            if !roam_precog::browser::same_site(u, &a.domain.to_ascii_lowercase()) {
                bail!("--sign-in {u}: not a URL on {}", a.domain);
            }
            rules.set_sign_in(&a.domain, Some(u.clone()));
        }
        if a.no_sign_in {
            rules.set_sign_in(&a.domain, None);
        }
    }
    state.save_rules(&rules)?;
    let r = if a.domain == "default" {
        &rules.default_rule
    } else {
        rules.rule(&a.domain)
    };
    println!(
        "{}: record {}, replay {}, sign-in POST {}",
        a.domain,
        if r.record { "on" } else { "off" },
        if r.replay { "on" } else { "off" },
        r.sign_in.as_deref().unwrap_or("none")
    );
    Ok(())
}
