//! Replaying action paths in a headless browser (the thesis, ch. V).
//!
//! For each path of a [`Plan`](crate::Plan): open the root page, then for each action find
//! the element by its candidate locators and perform the event (`js/replay.js`), waiting
//! after each step until the network has been idle for [`ReplayConfig::idle`]. A path stops
//! at the first step that cannot be done, with a logged [`Outcome`], and the replay goes on
//! with the next path:
//!
//! - a locator that resolves to nothing ([`Outcome::Missing`]) or to several elements
//!   ([`Outcome::Ambiguous`]): never a guess;
//! - a link or a form that leaves the site ([`Outcome::OffDomain`]), or a redirect that did;
//! - a page that does not go idle within [`ReplayConfig::step_timeout`] ([`Outcome::Timeout`]),
//!   or a root page the network or server fails ([`Outcome::PageFailed`]);
//! - a form that would POST ([`Outcome::Post`]). Every request the browser makes passes
//!   through DevTools' Fetch interception, and a POST the user's rules do not allow (only a
//!   sign-in they named may be sent) is failed before it leaves: the guarantee does not rest
//!   on the page's script;
//! - the browser crashed ([`Outcome::BrowserLost`]): it is started again for the next path;
//! - the session stopped it while it ran ([`Outcome::Halted`], [`Replayer::halt`]).
//!
//! Bytes are counted from the browser's own network events (`encodedDataLength`: bytes on
//! the wire, headers included) and requests served from its cache are counted apart. A
//! prefetch session may answer a page it fetched minutes before from its own copy
//! ([`ReplayConfig::reuse_pages`], [`super::reuse`]). A session of many paths, its budgets
//! and its tabs side by side, is [`super::session`]'s.

use super::request_log::{Counted, RequestLog, Response};
use super::reuse::{Page, PageReuse};
use super::{launch, same_site, BrowserConfig, BrowserError};
use crate::action::Action;
use crate::action::Event as ActionEvent;
use crate::plan::Replay;
use crate::rules::Rules;
use base64::Engine as _;
use headless_chrome::browser::tab::point::Point;
use headless_chrome::browser::tab::RequestPausedDecision;
use headless_chrome::protocol::cdp::types::Event;
use headless_chrome::protocol::cdp::{Fetch, Network};
use headless_chrome::{Browser, Tab};
use serde::Deserialize;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The replay step's script.
pub const REPLAY_JS: &str = concat!(include_str!("js/text.js"), include_str!("js/replay.js"));

/// How a replay runs.
#[derive(Clone, Debug)]
pub struct ReplayConfig {
    /// The browser.
    pub browser: BrowserConfig,
    /// Longest wait for a step's page to go idle.
    pub step_timeout: Duration,
    /// How long the network must be quiet for a step to be done.
    pub idle: Duration,
    /// Stop the session once this many bytes were fetched (a data budget's share).
    pub max_bytes: Option<u64>,
    /// Turn the browser's HTTP cache off (a baseline with no cache at all).
    pub cache_disabled: bool,
    /// Stop the session once its modelled radio energy reaches this (an energy budget's
    /// share), priced with [`ReplayConfig::radio`].
    pub max_joules: Option<f64>,
    /// The radio model the energy is priced with (a `roam_budget::profile` name; the
    /// replay runs on WiFi).
    pub radio: &'static str,
    /// Rest the pointer on an element this long before clicking it, as a person's hand does
    /// (what hover-triggered features, such as speculation rules' `moderate` eagerness, need).
    pub hover: Option<Duration>,
    /// Paths replayed side by side, each in its own tab of the one browser (its HTTP cache
    /// shared): a path spends most of its time waiting for its page to go idle.
    pub tabs: usize,
    /// Start no path once this long has passed since the first one started (the WiFi hour's
    /// length, say).
    pub max_time: Option<Duration>,
    /// Append one CSV line per response the tabs see finish or fail to this file
    /// ([`super::request_log`]): what the byte counts are made of.
    pub request_log: Option<PathBuf>,
    /// Answer a page the session fetched less than this long ago from its own copy, without
    /// asking the network ([`super::reuse`]; a prefetch session's, [`REUSE_PAGES`]); `None`
    /// (the default): every load goes to the browser's cache and the network, as a person's.
    pub reuse_pages: Option<Duration>,
}

/// How long a prefetch session answers a page from the copy it fetched
/// ([`ReplayConfig::reuse_pages`]): long enough for the many paths through one site's
/// front pages to share one fetch of each, short against a news site's hour.
pub const REUSE_PAGES: Duration = Duration::from_secs(600);

impl Default for ReplayConfig {
    fn default() -> Self {
        ReplayConfig {
            browser: BrowserConfig::default(),
            step_timeout: Duration::from_secs(20),
            idle: Duration::from_millis(500),
            max_bytes: None,
            cache_disabled: false,
            max_joules: None,
            radio: "huang2012/wifi",
            hover: None,
            tabs: 1,
            max_time: None,
            request_log: None,
            reuse_pages: None,
        }
    }
}

/// How one path's replay ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every step done.
    Done,
    /// No candidate locator of step `step` (0-based) matched.
    Missing {
        /// The step.
        step: usize,
    },
    /// Candidates of step `step` matched several elements, none exactly one.
    Ambiguous {
        /// The step.
        step: usize,
        /// The most elements one candidate matched.
        count: usize,
    },
    /// Step `step` would leave the site (a link, a form, or a redirect to `url`).
    OffDomain {
        /// The step (the root's load is step 0 when it redirects away).
        step: usize,
        /// Where it led.
        url: String,
    },
    /// Step `step` would POST.
    Post {
        /// The step.
        step: usize,
    },
    /// The page of step `step` did not go idle in time.
    Timeout {
        /// The step.
        step: usize,
    },
    /// The root page of the path failed to load (the network or the server failed it).
    PageFailed {
        /// What the browser said (`net::ERR_...`).
        why: String,
    },
    /// The session stopped the replay before step `step` was done (the conditions changed, a
    /// budget was spent, or its time was up while the path was under way).
    Halted {
        /// The step.
        step: usize,
    },
    /// The browser failed at step `step`.
    BrowserLost {
        /// The step.
        step: usize,
        /// What DevTools said.
        why: String,
    },
}

/// One path's replay.
#[derive(Clone, Debug)]
pub struct PathReport {
    /// The root page.
    pub root: String,
    /// The actions.
    pub actions: Vec<Action>,
    /// Steps done (actions performed).
    pub steps: usize,
    /// How it ended.
    pub outcome: Outcome,
    /// Bytes fetched over the network.
    pub bytes: u64,
    /// Requests answered from the browser's cache.
    pub cached: u64,
    /// POSTs refused.
    pub posts_refused: u64,
    /// How long it took.
    pub took: Duration,
    /// Of that, how long the pointer rested on elements before clicks ([`ReplayConfig::hover`]).
    pub hovered: Duration,
    /// Requests the browser made speculatively (`Sec-Purpose: prefetch`, from the page's
    /// speculation rules).
    pub speculative: u64,
    /// [`PathReport::bytes`] by what the browser fetched them as.
    pub by_kind: ByKind,
    /// Responses that only confirmed a cached copy (`304 Not Modified` on the wire: DevTools
    /// reports such a response with the cached copy's status, so this counts the raw status
    /// of `Network.responseReceivedExtraInfo`).
    pub revalidated: u64,
    /// Pages answered from the session's own copies ([`ReplayConfig::reuse_pages`]): not
    /// asked of the network, not counted in [`PathReport::cached`].
    pub reused: u64,
}

/// Bytes fetched over the network, by the resource type DevTools gives each response.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ByKind {
    /// Pages (`Document`).
    pub document: u64,
    /// Images.
    pub image: u64,
    /// Scripts and stylesheets: shared by a site's pages, so a cache that works fetches them
    /// once.
    pub code: u64,
    /// Everything else (fonts, fetches, favicons), and a response whose type never arrived.
    pub other: u64,
}

impl ByKind {
    fn add(&mut self, kind: Kind, bytes: u64) {
        match kind {
            Kind::Document => self.document += bytes,
            Kind::Image => self.image += bytes,
            Kind::Code => self.code += bytes,
            Kind::Other => self.other += bytes,
        }
    }

    fn since(self, before: ByKind) -> ByKind {
        ByKind {
            document: self.document - before.document,
            image: self.image - before.image,
            code: self.code - before.code,
            other: self.other - before.other,
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Document,
    Image,
    Code,
    Other,
}

#[derive(Default)]
struct Net {
    /// Whether responses are logged ([`ReplayConfig::request_log`]): only then are their
    /// URLs and what DevTools said of them kept.
    logging: bool,
    /// Requests under way, with the URL each was last sent to (when logging).
    inflight: HashMap<String, String>,
    /// Requests answered from a cache: the disk or prefetch cache (`responseReceived` says
    /// so), or the memory cache (`requestServedFromCache`). Their `encodedDataLength` is not
    /// network bytes, and each counts once in [`Counts::cached`].
    from_cache: HashSet<String>,
    last: Option<Instant>,
    /// Each response's resource type and, when logging, what DevTools said of it, until it
    /// finishes.
    responses: HashMap<String, (Kind, Option<Response>)>,
    counts: Counts,
    /// While pages are kept for reuse ([`ReplayConfig::reuse_pages`]), the tab's main frame
    /// (its target's id): only its pages are kept and reused, not those of the frames inside
    /// them.
    reuse_frame: Option<String>,
    /// Requests for a page of the main frame with `GET`, while reusing; with the URL, MIME
    /// type and charset of a `200` response once it arrived.
    pages: HashMap<String, Option<Fetched>>,
    /// Pages fetched from the network and finished, to be copied ([`TabReplayer::keep_pages`]).
    to_keep: Vec<(String, Fetched)>,
    /// Requests answered from the session's copies.
    reused: HashSet<String>,
}

impl Net {
    /// Request `id` ended: no longer tracked. Its resource type ([`Kind::Other`] if no
    /// response arrived) and, when logging, what DevTools said of it (its URL alone then).
    fn ended(&mut self, id: &str) -> (Kind, Response) {
        let url = self.inflight.remove(id).unwrap_or_default();
        self.pages.remove(id);
        match self.responses.remove(id) {
            Some((kind, seen)) => (kind, seen.unwrap_or_default()),
            None => (
                Kind::Other,
                Response {
                    url,
                    ..Response::default()
                },
            ),
        }
    }
}

/// A page fetched from the network, as its response described it.
#[derive(Clone, Debug)]
struct Fetched {
    url: String,
    mime: String,
    charset: String,
}

/// A tab's counters; a path's report is their difference across it.
#[derive(Clone, Copy, Default)]
struct Counts {
    bytes: u64,
    cached: u64,
    refused: u64,
    /// Requests the browser made ahead of a click (`Sec-Purpose: prefetch`: speculation rules).
    speculative: u64,
    by_kind: ByKind,
    revalidated: u64,
    reused: u64,
}

/// A browser set up for replay: [`ReplayConfig::tabs`] tabs sharing its profile (so its HTTP
/// cache), each replaying one path at a time.
pub struct Replayer {
    browser: Browser,
    tabs: Vec<TabReplayer>,
    halt: Arc<AtomicBool>,
    log: Option<Arc<RequestLog>>,
}

/// One tab of a [`Replayer`]: its network events counted, its POSTs intercepted.
pub struct TabReplayer {
    tab: Arc<Tab>,
    net: Arc<Mutex<Net>>,
    rules: Arc<Mutex<(Rules, String)>>,
    cfg: ReplayConfig,
    /// Set by [`Replayer::halt`]: the path under way stops at its next step.
    halt: Arc<AtomicBool>,
    /// The session's copies of pages, shared by its tabs.
    reuse: Option<Arc<Mutex<PageReuse>>>,
}

/// What `js/replay.js` said of one step.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct StepResult {
    /// `done`, `missing`, `ambiguous`, `off_domain` or `post`.
    pub status: String,
    /// Which candidate found the element, when done.
    #[serde(default)]
    pub used: usize,
    /// The most elements one candidate matched, when ambiguous.
    #[serde(default)]
    pub count: usize,
    /// Where an off-domain step led.
    #[serde(default)]
    pub url: String,
    /// In a dry run, the site-relative URL of the link the element is or is in (empty if none).
    #[serde(default)]
    pub href: String,
    /// In a dry run, the element's centre in the viewport (CSS pixels), scrolled into view.
    #[serde(default)]
    pub x: f64,
    /// See [`StepResult::x`].
    #[serde(default)]
    pub y: f64,
}

/// Run `js/replay.js` for action `a` on `tab`'s page (`site`: the replayed site's host);
/// `dry`: find the element and stop (nothing is clicked or submitted).
pub fn run_step(tab: &Tab, a: &Action, site: &str, dry: bool) -> Result<StepResult, BrowserError> {
    let expr = format!(
        "{REPLAY_JS}({}, {}, {}, {dry})",
        serde_json::to_string(a.locators.candidates()).expect("locators serialize"),
        serde_json::to_string(a).expect("an action serializes"),
        serde_json::to_string(site).expect("a string serializes"),
    );
    let v = tab.evaluate(&expr, false).map_err(BrowserError::cdp)?;
    v.value
        .and_then(|v| {
            v.as_str()
                .and_then(|s| serde_json::from_str::<StepResult>(s).ok())
        })
        .ok_or_else(|| BrowserError::Cdp("the step's script gave no result".into()))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Replayer {
    /// Start the browser for replay under `rules`, with [`ReplayConfig::tabs`] tabs.
    pub fn start(cfg: &ReplayConfig, rules: &Rules) -> Result<Replayer, BrowserError> {
        let log = match &cfg.request_log {
            Some(p) => Some(Arc::new(RequestLog::open(p).map_err(|e| {
                BrowserError::Cdp(format!("the request log {}: {e}", p.display()))
            })?)),
            None => None,
        };
        let browser = launch(&cfg.browser)?;
        let halt = Arc::new(AtomicBool::new(false));
        let reuse = cfg
            .reuse_pages
            .map(|ttl| Arc::new(Mutex::new(PageReuse::new(ttl))));
        let tabs = (0..cfg.tabs.max(1))
            .map(|k| {
                let shared = (halt.clone(), reuse.clone());
                TabReplayer::open(&browser, cfg, rules, shared, (k, log.clone()))
            })
            .collect::<Result<_, _>>()?;
        Ok(Replayer {
            browser,
            tabs,
            halt,
            log,
        })
    }

    /// Stop every tab's path under way at its next step ([`Outcome::Halted`]); paths replayed
    /// after this are halted at once.
    pub fn halt(&self) {
        self.halt.store(true, Ordering::Relaxed);
    }

    /// The tabs, to replay paths side by side (from one thread each).
    pub fn tabs(&self) -> &[TabReplayer] {
        &self.tabs
    }

    /// Replay one path in the first tab.
    pub fn replay(&self, r: &Replay) -> PathReport {
        self.tabs[0].replay(r)
    }

    /// The browser's process id, if roam started it.
    pub fn pid(&self) -> Option<u32> {
        self.browser.get_process_id()
    }

    /// Bytes fetched by this browser's tabs so far.
    pub fn bytes(&self) -> u64 {
        self.tabs.iter().map(|t| t.counts().bytes).sum()
    }
}

impl Drop for Replayer {
    fn drop(&mut self) {
        if let Some(Err(e)) = self.log.as_ref().map(|l| l.finish()) {
            eprintln!("precog: the request log is incomplete: {e}");
        }
    }
}

impl TabReplayer {
    /// Open tab `log.0` in `browser` and set it up for replay under `rules`, its responses
    /// written to `log.1` if there is one; `shared`: the session's halt flag and copies of
    /// pages.
    fn open(
        browser: &Browser,
        cfg: &ReplayConfig,
        rules: &Rules,
        shared: (Arc<AtomicBool>, Option<Arc<Mutex<PageReuse>>>),
        log: (usize, Option<Arc<RequestLog>>),
    ) -> Result<TabReplayer, BrowserError> {
        let (halt, reuse) = shared;
        let tab = browser.new_tab().map_err(BrowserError::cdp)?;
        tab.set_default_timeout(cfg.step_timeout);
        let main_frame = tab.get_target_id().clone();
        let net = Arc::new(Mutex::new(Net {
            logging: log.1.is_some(),
            reuse_frame: reuse.is_some().then(|| main_frame.clone()),
            ..Net::default()
        }));
        let n = net.clone();
        tab.add_event_listener(Arc::new(move |e: &Event| {
            let mut n = lock(&n);
            match e {
                Event::NetworkRequestWillBeSent(r) => {
                    let purpose = r.params.request.headers.0.as_ref().and_then(|h| {
                        h.as_object()?
                            .iter()
                            .find(|(k, _)| k.eq_ignore_ascii_case("sec-purpose"))
                            .and_then(|(_, v)| v.as_str().map(str::to_string))
                    });
                    if purpose.is_some_and(|p| p.starts_with("prefetch"))
                        && r.params.redirect_response.is_none()
                    {
                        n.counts.speculative += 1;
                    }
                    let url = if n.logging {
                        r.params.request.url.clone()
                    } else {
                        String::new()
                    };
                    if n.reuse_frame.is_some()
                        && r.params.request.method == "GET"
                        && r.params.Type == Some(Network::ResourceType::Document)
                        && r.params.frame_id == n.reuse_frame
                    {
                        n.pages.insert(r.params.request_id.clone(), None);
                    }
                    n.inflight.insert(r.params.request_id.clone(), url);
                    n.last = Some(Instant::now());
                }
                Event::NetworkResponseReceived(r) => {
                    let resp = &r.params.response;
                    if resp.from_disk_cache == Some(true) || resp.from_prefetch_cache == Some(true)
                    {
                        n.from_cache.insert(r.params.request_id.clone());
                    }
                    let kind = match r.params.Type {
                        Network::ResourceType::Document => Kind::Document,
                        Network::ResourceType::Image => Kind::Image,
                        Network::ResourceType::Script | Network::ResourceType::Stylesheet => {
                            Kind::Code
                        }
                        _ => Kind::Other,
                    };
                    let seen = n.logging.then(|| Response {
                        url: resp.url.clone(),
                        resource_type: format!("{:?}", r.params.Type),
                        status: resp.status,
                        mime: resp.mime_type.clone(),
                        remote: match (&resp.remote_ip_address, resp.remote_port) {
                            (Some(a), Some(p)) => format!("{a}:{p}"),
                            (Some(a), None) => a.clone(),
                            _ => String::new(),
                        },
                        disk_cache: resp.from_disk_cache == Some(true),
                        prefetch_cache: resp.from_prefetch_cache == Some(true),
                        service_worker: resp.from_service_worker == Some(true),
                    });
                    if let Some(page) = n.pages.get_mut(&r.params.request_id) {
                        *page = (resp.status == 200).then(|| Fetched {
                            url: resp.url.clone(),
                            mime: resp.mime_type.clone(),
                            charset: resp.charset.clone(),
                        });
                    }
                    n.responses
                        .insert(r.params.request_id.clone(), (kind, seen));
                }
                Event::NetworkLoadingFinished(f) => {
                    let id = &f.params.request_id;
                    let page = n.pages.get(id).cloned().flatten();
                    let (kind, seen) = n.ended(id);
                    let bytes = f.params.encoded_data_length.max(0.0) as u64;
                    let counted = if n.reused.remove(id) {
                        n.from_cache.remove(id);
                        n.counts.reused += 1;
                        Counted::Reused
                    } else if n.from_cache.remove(id) {
                        n.counts.cached += 1;
                        Counted::Cache
                    } else {
                        n.counts.bytes += bytes;
                        n.counts.by_kind.add(kind, bytes);
                        if let Some(page) = page {
                            n.to_keep.push((id.clone(), page));
                        }
                        Counted::Network
                    };
                    if let Some(l) = &log.1 {
                        l.write(log.0, &seen, bytes, counted);
                    }
                    n.last = Some(Instant::now());
                }
                Event::NetworkResponseReceivedExtraInfo(x) if x.params.status_code == 304 => {
                    n.counts.revalidated += 1;
                }
                Event::NetworkLoadingFailed(f) => {
                    let id = &f.params.request_id;
                    let (_, seen) = n.ended(id);
                    n.from_cache.remove(id);
                    n.reused.remove(id);
                    if let Some(l) = &log.1 {
                        l.write(log.0, &seen, 0, Counted::Failed);
                    }
                    n.last = Some(Instant::now());
                }
                Event::NetworkRequestServedFromCache(r) => {
                    n.from_cache.insert(r.params.request_id.clone());
                }
                _ => {}
            }
        }))
        .map_err(BrowserError::cdp)?;
        tab.call_method(Network::Enable {
            max_total_buffer_size: None,
            max_resource_buffer_size: None,
            max_post_data_size: None,
            report_direct_socket_traffic: None,
            enable_durable_messages: None,
        })
        .map_err(BrowserError::cdp)?;
        if cfg.cache_disabled {
            tab.call_method(Network::SetCacheDisabled {
                cache_disabled: true,
            })
            .map_err(BrowserError::cdp)?;
        }
        // Every request pauses at the Fetch stage; a POST the rules do not allow fails there,
        // and a page the session holds a copy of is answered with it.
        let rules = Arc::new(Mutex::new((rules.clone(), String::new())));
        let (r, n, kept) = (rules.clone(), net.clone(), reuse.clone());
        tab.enable_request_interception(Arc::new(
            move |_t, _s, ev: Fetch::events::RequestPausedEvent| {
                let req = &ev.params.request;
                let copy = match (&kept, &ev.params.network_id) {
                    (Some(k), Some(id))
                        if req.method == "GET"
                            && ev.params.resource_Type == Network::ResourceType::Document
                            && ev.params.frame_id == main_frame =>
                    {
                        lock(k)
                            .get(&req.url, Instant::now())
                            .cloned()
                            .map(|p| (id, p))
                    }
                    _ => None,
                };
                if let Some((id, page)) = copy {
                    // Counted when it finishes: not as network bytes, and not kept again.
                    lock(&n).reused.insert(id.clone());
                    return RequestPausedDecision::Fulfill(Fetch::FulfillRequest {
                        request_id: ev.params.request_id.clone(),
                        response_code: 200,
                        response_headers: Some(vec![Fetch::HeaderEntry {
                            name: "Content-Type".into(),
                            value: page.content_type,
                        }]),
                        binary_response_headers: None,
                        body: Some(page.body_base64),
                        response_phrase: None,
                    });
                }
                let g = lock(&r);
                let allowed = req.method != "POST" || g.0.may_post(&g.1, &req.url);
                if allowed {
                    RequestPausedDecision::Continue(None)
                } else {
                    lock(&n).counts.refused += 1;
                    RequestPausedDecision::Fail(Fetch::FailRequest {
                        request_id: ev.params.request_id.clone(),
                        error_reason: Network::ErrorReason::BlockedByClient,
                    })
                }
            },
        ))
        .map_err(BrowserError::cdp)?;
        tab.enable_fetch(
            Some(&[Fetch::RequestPattern {
                url_pattern: Some("*".into()),
                resource_Type: None,
                request_stage: Some(Fetch::RequestStage::Request),
            }]),
            None,
        )
        .map_err(BrowserError::cdp)?;
        Ok(TabReplayer {
            halt,
            tab,
            net,
            rules,
            cfg: cfg.clone(),
            reuse,
        })
    }

    /// Copy the pages this tab fetched from the network since the last call into the
    /// session's copies ([`ReplayConfig::reuse_pages`]). A body DevTools no longer has (the
    /// tab went on to another page) is simply not kept.
    fn keep_pages(&self, site: &str) {
        let Some(reuse) = &self.reuse else { return };
        let fetched = std::mem::take(&mut lock(&self.net).to_keep);
        for (id, f) in fetched {
            if !same_site(&f.url, site) {
                continue;
            }
            let Ok(got) = self
                .tab
                .call_method(Network::GetResponseBody { request_id: id })
            else {
                continue;
            };
            // DevTools gives a text body decoded, which is then sent back as UTF-8 and must
            // say so (the page's own charset would misread it); raw bytes keep their charset.
            let (body_base64, charset) = if got.base_64_encoded {
                (got.body, f.charset)
            } else {
                let b = base64::engine::general_purpose::STANDARD.encode(got.body);
                (b, "utf-8".to_string())
            };
            let content_type = if charset.is_empty() {
                f.mime
            } else {
                format!("{}; charset={charset}", f.mime)
            };
            let page = Page {
                content_type,
                body_base64,
            };
            lock(reuse).keep(&f.url, page, Instant::now());
        }
    }

    /// Why a step's page did not settle: the session halted it, or it timed out.
    fn unsettled(&self, step: usize) -> Outcome {
        if self.halted() {
            Outcome::Halted { step }
        } else {
            Outcome::Timeout { step }
        }
    }

    /// Wait until the network has been quiet for `idle` (true), or the step timed out or was
    /// halted.
    ///
    /// Quiet is counted from the step's start at the earliest: a request the step's action
    /// starts reaches us as a DevTools event some time after the action returns (long on a
    /// loaded machine), and a step that ended before it would close the tab on it unsent.
    fn settle(&self) -> bool {
        let started = Instant::now();
        let deadline = started + self.cfg.step_timeout;
        while Instant::now() < deadline && !self.halted() {
            {
                let n = lock(&self.net);
                let since = n.last.map_or(started, |t| t.max(started));
                let quiet = since.elapsed() >= self.cfg.idle;
                if n.inflight.is_empty() && quiet {
                    return true;
                }
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        false
    }

    fn halted(&self) -> bool {
        self.halt.load(Ordering::Relaxed)
    }

    fn counts(&self) -> Counts {
        lock(&self.net).counts
    }

    /// Replay one path in this tab.
    pub fn replay(&self, r: &Replay) -> PathReport {
        let start = Instant::now();
        let before = self.counts();
        lock(&self.rules).1 = r.site.clone();
        let mut hovered = Duration::ZERO;
        let (steps, outcome) = self.steps(r, &mut hovered);
        let after = self.counts();
        PathReport {
            root: r.root.clone(),
            actions: r.actions.clone(),
            steps,
            outcome,
            bytes: after.bytes - before.bytes,
            cached: after.cached - before.cached,
            posts_refused: after.refused - before.refused,
            speculative: after.speculative - before.speculative,
            by_kind: after.by_kind.since(before.by_kind),
            revalidated: after.revalidated - before.revalidated,
            reused: after.reused - before.reused,
            took: start.elapsed(),
            hovered,
        }
    }

    fn steps(&self, r: &Replay, hovered: &mut Duration) -> (usize, Outcome) {
        if self.halted() {
            return (0, Outcome::Halted { step: 0 });
        }
        if let Err(e) = self.tab.navigate_to(&r.root) {
            let why = e.to_string();
            // A network error is the page's; anything else, the browser's.
            return if why.contains("net::") {
                (0, Outcome::PageFailed { why })
            } else {
                (0, Outcome::BrowserLost { step: 0, why })
            };
        }
        if !self.settle() {
            return (0, self.unsettled(0));
        }
        if !same_site(&self.tab.get_url(), &r.site) {
            return (
                0,
                Outcome::OffDomain {
                    step: 0,
                    url: self.tab.get_url(),
                },
            );
        }
        self.keep_pages(&r.site);
        for (i, a) in r.actions.iter().enumerate() {
            let step = i + 1;
            if self.halted() {
                return (i, Outcome::Halted { step });
            }
            if let (Some(rest), ActionEvent::Click) = (self.cfg.hover, &a.event) {
                // The pointer goes to the element and rests there before the click.
                if let Ok(found) = run_step(&self.tab, a, &r.site, true) {
                    if found.status == "done" {
                        let at = Point {
                            x: found.x,
                            y: found.y,
                        };
                        if self.tab.move_mouse_to_point(at).is_ok() {
                            std::thread::sleep(rest);
                            *hovered += rest;
                        }
                    }
                }
            }
            let res = match run_step(&self.tab, a, &r.site, false) {
                Ok(res) => res,
                Err(e) => {
                    return (
                        i,
                        Outcome::BrowserLost {
                            step,
                            why: e.to_string(),
                        },
                    )
                }
            };
            match res.status.as_str() {
                "done" => {}
                "ambiguous" => {
                    return (
                        i,
                        Outcome::Ambiguous {
                            step,
                            count: res.count,
                        },
                    )
                }
                "off_domain" => return (i, Outcome::OffDomain { step, url: res.url }),
                "post" => return (i, Outcome::Post { step }),
                _ => return (i, Outcome::Missing { step }),
            }
            if !self.settle() {
                return (step, self.unsettled(step));
            }
            let url = self.tab.get_url();
            if !same_site(&url, &r.site) {
                return (step, Outcome::OffDomain { step, url });
            }
            self.keep_pages(&r.site);
        }
        (r.actions.len(), Outcome::Done)
    }
}
