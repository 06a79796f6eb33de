//! Precog's recorder and replayer in Debian's Chromium, against pages served on loopback by a
//! small HTTP server that logs every request it gets. Skipped, with a one-line reason, where
//! `/usr/bin/chromium` (or `$ROAM_CHROMIUM`) is not installed.

use roam_core::Time;
use roam_precog::browser::record::{Recorder, Report};
use roam_precog::browser::replay::{run_step, Outcome, ReplayConfig, Replayer};
use roam_precog::browser::session::{replay_all, SessionReport};
use roam_precog::browser::{launch, BrowserConfig};
use roam_precog::{Action, Event, Locator, Locators, PathCutter, Replay, Rules};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn chromium() -> bool {
    let cfg = BrowserConfig::default();
    if cfg.chromium.is_file() {
        return true;
    }
    eprintln!(
        "skipped: {} is not installed (apt-get install chromium)",
        cfg.chromium.display()
    );
    false
}

const ROOT: &str = r#"<!doctype html><html><body>
<nav id="menu"><a id="sports" href="/sports">Sports</a> <a href="/world">World</a></nav>
<div id="news"><div class="box"><a class="headline" href="/story/17">Storm hits coast</a></div>
<div class="box"><a class="headline" href="/story/18">Markets rally</a></div></div>
<form id="search" action="/search"><input name="q"><button>Go</button></form>
<form id="edit" method="post" action="/edit"><input name="t" value="x"><button id="save">Save</button></form>
<p><a id="away" href="http://other.invalid/">Elsewhere</a> <span class="twin">a</span><span class="twin">b</span></p>
</body></html>"#;

/// A settings page: a checkbox whose change the page reports (a GET the server logs), and a
/// GET sign-in form with a password field.
const PREFS: &str = r#"<!doctype html><html><body>
<label><input type="checkbox" id="dark" onchange="fetch('/pref?dark=' + this.checked)"> Dark</label>
<form id="login" action="/hello"><input name="user"><input type="password" name="pw">
<button id="go">Sign in</button></form>
</body></html>"#;

/// Requests for `/slow` being answered now, and the most at once.
static SLOW: AtomicUsize = AtomicUsize::new(0);
static SLOW_MOST: AtomicUsize = AtomicUsize::new(0);

/// Serve ROOT at `/`, a page after 3 s at `/slow`, PREFS at `/prefs`, a script that POSTs at
/// `/autopost`, a page revalidated on every use (`no-cache`, ETag; 304 when it matches) that
/// loads a cacheable script at `/fresh`, a `no-cache` page in windows-1252 at `/latin`, and a
/// small page anywhere else; log "METHOD path" of every request.
fn serve() -> (String, Arc<Mutex<Vec<String>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://127.0.0.1:{}", l.local_addr().unwrap().port());
    let log = Arc::new(Mutex::new(vec![]));
    let lg = log.clone();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let lg = lg.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut line = String::new();
                if r.read_line(&mut line).is_err() {
                    return;
                }
                let mut len = 0usize;
                let mut conditional = false;
                loop {
                    let mut h = String::new();
                    if r.read_line(&mut h).is_err() || h.trim().is_empty() {
                        break;
                    }
                    if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                    conditional |= h.to_ascii_lowercase().starts_with("if-none-match:");
                }
                let mut body = vec![0; len];
                let _ = std::io::Read::read_exact(&mut r, &mut body);
                let mut parts = line.split_whitespace();
                let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
                lg.lock().unwrap().push(format!("{method} {path}"));
                if path == "/hang" {
                    // Accepts, reads, never answers.
                    std::thread::sleep(Duration::from_secs(8));
                    return;
                }
                if path.starts_with("/slow") {
                    // Answers after 3 s; counts how many wait at once.
                    let now = SLOW.fetch_add(1, Ordering::SeqCst) + 1;
                    SLOW_MOST.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_secs(3));
                    SLOW.fetch_sub(1, Ordering::SeqCst);
                }
                if path == "/away" {
                    // Another site: the same server under another name.
                    let _ = write!(s, "HTTP/1.1 302 Found\r\nLocation: http://localhost:{port}/\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                    return;
                }
                if path == "/fresh" && conditional {
                    let _ = write!(s, "HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n");
                    return;
                }
                if path == "/fresh" {
                    let page = "<html><head><script src=\"/app.js\"></script></head><body>fresh <a id=\"again\" href=\"/fresh?2\">again</a></body></html>";
                    let _ = write!(s, "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nETag: \"v1\"\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n{page}", page.len());
                    return;
                }
                if path == "/latin" {
                    // Not UTF-8: "Café" in windows-1252, revalidated on every use.
                    let page = b"<html><body><a href=\"/fresh?3\">Caf\xe9</a></body></html>";
                    let _ = write!(s, "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=windows-1252\r\nContent-Length: {}\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n", page.len());
                    let _ = s.write_all(page);
                    return;
                }
                if path == "/app.js" {
                    let js = "var loaded = true;\n".repeat(100);
                    let _ = write!(s, "HTTP/1.1 200 OK\r\nContent-Type: text/javascript\r\nContent-Length: {}\r\nCache-Control: max-age=3600\r\nConnection: close\r\n\r\n{js}", js.len());
                    return;
                }
                let page = match path {
                    "/" => ROOT.to_string(),
                    // The front page with a box inserted before the others (a layout change).
                    "/moved" => ROOT.replace("<div id=\"news\">", "<div id=\"news\"><div class=\"box\"><a class=\"headline\" href=\"/story/16\">Breaking</a></div>"),
                    "/autopost" => "<html><body><script>fetch('/edit',{method:'POST',body:'x'})</script>posting</body></html>".into(),
                    "/prefs" => PREFS.into(),
                    p => format!("<html><body><h1>{p}</h1></body></html>"),
                };
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nCache-Control: max-age=3600\r\nConnection: close\r\n\r\n{page}",
                    page.len()
                );
            });
        }
    });
    (base, log)
}

/// A path of no action: the page at `url`, on the test server's site.
fn page(url: String) -> Replay {
    Replay {
        site: "127.0.0.1".into(),
        root: url,
        actions: vec![],
        hits: 1,
    }
}

/// A click on the element `l` finds.
fn click_on(l: Locator) -> Action {
    Action {
        locators: loc(l),
        event: Event::Click,
    }
}

fn loc(l: Locator) -> Locators {
    Locators::new(vec![l]).unwrap()
}

/// A browser with one tab recorded, opened at `url`.
fn recording(
    url: &str,
) -> (
    headless_chrome::Browser,
    std::sync::Arc<headless_chrome::Tab>,
    Recorder,
) {
    let browser = launch(&BrowserConfig::default()).unwrap();
    let tab = browser.new_tab().unwrap();
    let rec = Recorder::attach(&tab).unwrap();
    tab.navigate_to(url)
        .unwrap()
        .wait_until_navigated()
        .unwrap();
    (browser, tab, rec)
}

#[test]
fn the_recorder_turns_clicks_into_a_path() {
    if !chromium() {
        return;
    }
    let (base, _log) = serve();
    let (_browser, tab, rec) = recording(&format!("{base}/"));
    // A trusted click, as a user's (DevTools input events).
    tab.wait_for_element("#sports").unwrap().click().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let rules = Rules::default();
    let mut cut = PathCutter::new();
    let mut t = 0;
    for r in rec.drain() {
        t += 1;
        let now = Time::from_millis(t);
        match r {
            Report::Page(u) => assert!(cut.page(&u, now, &rules).is_none(), "one path only"),
            Report::Action(a) => assert!(cut.action(a, now).is_none()),
            Report::Post => panic!("no POST here"),
        }
    }
    let p = cut.finish().expect("a path");
    assert_eq!(p.root, format!("{base}/"));
    assert_eq!(p.actions.len(), 1, "{:?}", p.actions);
    let a = &p.actions[0];
    assert_eq!(a.event, Event::Click);
    assert_eq!(
        a.locators.primary(),
        &Locator::Id {
            id: "sports".into()
        }
    );
    // The thesis's anchored locator is among the candidates: from #menu, child 0.
    assert!(a.locators.candidates().iter().any(|l| matches!(l,
        Locator::Anchored { anchor: Some(x), path, .. } if x == "menu" && path == &vec![0])));
    assert_eq!(rec.dropped(), 0);
}

#[test]
fn replay_follows_paths_and_stops_where_it_must() {
    follows_paths_and_stops_where_it_must(1);
}

/// The same paths in four tabs side by side: each path's outcome as in one tab, the report
/// in the plan's order, no POST sent.
#[test]
fn tabs_side_by_side_replay_each_path_as_one_tab_does() {
    follows_paths_and_stops_where_it_must(4);
}

fn follows_paths_and_stops_where_it_must(tabs: usize) {
    if !chromium() {
        return;
    }
    let (base, log) = serve();
    let site = "127.0.0.1".to_string();
    let path = |actions: Vec<Action>| Replay {
        site: site.clone(),
        root: format!("{base}/"),
        actions,
        hits: 1,
    };
    let click = click_on;
    let headline = click(Locator::Anchored {
        anchor: Some("news".into()),
        path: vec![1, 0],
        attr: Some(("class".into(), "headline".into())),
    });
    let search = Action {
        locators: loc(Locator::Id {
            id: "search".into(),
        }),
        event: Event::Submit {
            fields: vec![("q".into(), "weather".into())],
        },
    };
    let edit = Action {
        locators: loc(Locator::Id { id: "edit".into() }),
        event: Event::Submit { fields: vec![] },
    };
    let paths = vec![
        path(vec![click(Locator::Id {
            id: "sports".into(),
        })]),
        path(vec![headline]),
        path(vec![search]),
        path(vec![edit]),
        path(vec![click(Locator::Id { id: "away".into() })]),
        path(vec![click(Locator::Id { id: "gone".into() })]),
        path(vec![click(Locator::Css {
            selector: "span.twin".into(),
        })]),
        Replay {
            root: format!("{base}/autopost"),
            ..path(vec![])
        },
    ];
    let cfg = ReplayConfig {
        idle: Duration::from_millis(300),
        tabs,
        ..Default::default()
    };
    let mut seen = 0;
    let report = replay_all(
        &cfg,
        &Rules::default(),
        &paths,
        &mut || Ok(()),
        &mut |_, _| seen += 1,
    )
    .unwrap();
    assert_eq!(seen, paths.len());
    let outcomes: Vec<&Outcome> = report.paths.iter().map(|p| &p.outcome).collect();
    assert_eq!(outcomes[0], &Outcome::Done);
    assert_eq!(outcomes[1], &Outcome::Done);
    assert_eq!(outcomes[2], &Outcome::Done);
    assert_eq!(outcomes[3], &Outcome::Post { step: 1 });
    assert!(
        matches!(outcomes[4], Outcome::OffDomain { step: 1, .. }),
        "{:?}",
        outcomes[4]
    );
    assert_eq!(outcomes[5], &Outcome::Missing { step: 1 });
    assert_eq!(outcomes[6], &Outcome::Ambiguous { step: 1, count: 2 });
    assert_eq!(outcomes[7], &Outcome::Done);
    assert!(
        report.paths[7].posts_refused >= 1,
        "the page's own POST was refused"
    );
    assert!(report.paths[0].bytes > 0);
    // The bytes by kind add up: here pages only.
    for p in &report.paths {
        let k = p.by_kind;
        assert_eq!(k.document + k.image + k.code + k.other, p.bytes, "{p:?}");
    }
    assert!(report.paths[0].by_kind.document > 0);
    let log = log.lock().unwrap();
    assert!(log.iter().any(|l| l == "GET /sports"), "{log:?}");
    assert!(log.iter().any(|l| l == "GET /story/18"), "{log:?}");
    assert!(log.iter().any(|l| l == "GET /search?q=weather"), "{log:?}");
    assert!(
        !log.iter().any(|l| l.starts_with("POST")),
        "no POST reached the server: {log:?}"
    );
}

#[test]
fn a_sign_in_the_user_allowed_is_the_one_post_sent() {
    if !chromium() {
        return;
    }
    let (base, log) = serve();
    let mut rules = Rules::default();
    rules.set_sign_in("127.0.0.1", Some(format!("{base}/edit")));
    let p = page(format!("{base}/autopost"));
    let cfg = ReplayConfig {
        idle: Duration::from_millis(300),
        ..Default::default()
    };
    let report = replay_all(&cfg, &rules, &[p], &mut || Ok(()), &mut |_, _| {}).unwrap();
    assert_eq!(report.paths[0].posts_refused, 0);
    assert!(log.lock().unwrap().iter().any(|l| l == "POST /edit"));
}

#[test]
fn replay_stops_when_the_conditions_do() {
    if !chromium() {
        return;
    }
    let (base, _log) = serve();
    let p = page(format!("{base}/"));
    let report = replay_all(
        &ReplayConfig::default(),
        &Rules::default(),
        &[p.clone(), p],
        &mut wifi_for(1),
        &mut |_, _| {},
    )
    .unwrap();
    assert_eq!(report.paths.len(), 1);
    assert_eq!(report.stopped.as_deref(), Some("not on WiFi"));
}

/// Conditions that allow `n` paths to start, then say WiFi went.
fn wifi_for(n: usize) -> impl FnMut() -> Result<(), String> {
    let mut calls = 0;
    move || {
        calls += 1;
        if calls > n {
            Err("not on WiFi".into())
        } else {
            Ok(())
        }
    }
}

/// Paths to `/slow` pages, each its own URL: the browser's cache would hold a second request
/// for one URL until the first is answered.
fn slow_pages(base: &str, ids: std::ops::Range<u32>) -> Vec<Replay> {
    ids.map(|i| page(format!("{base}/slow?{i}"))).collect()
}

/// A page the server asks to revalidate on every use, loaded twice: the second load is a
/// 304 and fetches its script from the cache, and the bytes by kind say so.
#[test]
fn a_revalidated_page_is_counted_and_its_cached_script_is_not() {
    if !chromium() {
        return;
    }
    let (base, _log) = serve();
    let fresh = page(format!("{base}/fresh"));
    let log = std::env::temp_dir().join(format!("roam-requests-{}.csv", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let cfg = ReplayConfig {
        idle: Duration::from_millis(300),
        request_log: Some(log.clone()),
        ..Default::default()
    };
    let report = replay(&cfg, &[fresh.clone(), fresh]);
    // The request log accounts for every byte the paths counted, each response typed.
    let text = std::fs::read_to_string(&log).unwrap();
    std::fs::remove_file(&log).unwrap();
    let lines: Vec<Vec<&str>> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    let logged: u64 = lines
        .iter()
        .filter(|f| f[10] == "network")
        .map(|f| f[9].parse::<u64>().unwrap())
        .sum();
    assert_eq!(
        logged,
        report.paths.iter().map(|p| p.bytes).sum::<u64>(),
        "{text}"
    );
    assert!(lines.iter().all(|f| !f[2].is_empty()), "{text}");
    assert!(
        lines
            .iter()
            .any(|f| f[1].ends_with("/app.js") && f[10] == "cache"),
        "{text}"
    );
    let (first, second) = (&report.paths[0], &report.paths[1]);
    assert_eq!(first.revalidated, 0, "{first:?}");
    assert!(
        first.by_kind.code >= 1900,
        "the script came over the network: {first:?}"
    );
    assert_eq!(second.revalidated, 1, "{second:?}");
    assert_eq!(
        second.by_kind.code, 0,
        "the script came from the cache: {second:?}"
    );
    assert!(
        second.by_kind.document < first.by_kind.document,
        "{second:?}"
    );
}

/// A prefetch session that reuses pages asks the network for a `no-cache` page once, and a
/// path clicks on the copy as on the page (its text read right though the page was not
/// UTF-8), and a page's script still cannot POST; without reuse (a person's browsing) each
/// load revalidates it.
#[test]
fn a_prefetch_session_asks_for_a_page_once_and_clicks_on_its_copy() {
    if !chromium() {
        return;
    }
    let asked = |reuse: Option<Duration>| {
        let (base, log) = serve();
        let fresh = page(format!("{base}/fresh"));
        let onward = Replay {
            actions: vec![click_on(Locator::Id { id: "again".into() })],
            ..fresh.clone()
        };
        let latin = Replay {
            root: format!("{base}/latin"),
            actions: vec![click_on(Locator::Text {
                tag: "a".into(),
                text: "Café".into(),
            })],
            ..fresh.clone()
        };
        let autopost = Replay {
            root: format!("{base}/autopost"),
            ..fresh.clone()
        };
        let cfg = ReplayConfig {
            idle: Duration::from_millis(300),
            reuse_pages: reuse,
            ..Default::default()
        };
        let paths = [
            fresh,
            onward.clone(),
            onward,
            latin.clone(),
            latin,
            autopost.clone(),
            autopost,
        ];
        let report = replay(&cfg, &paths);
        assert!(
            report.paths.iter().all(|p| p.outcome == Outcome::Done),
            "{:?}",
            report.paths
        );
        let log = log.lock().unwrap().clone();
        assert!(!log.iter().any(|l| l.starts_with("POST")), "{log:?}");
        let refused: Vec<u64> = report.paths.iter().map(|p| p.posts_refused).collect();
        assert_eq!(refused, [0, 0, 0, 0, 0, 1, 1]);
        let n = log.iter().filter(|l| *l == "GET /fresh").count();
        (n, report)
    };
    let (once, report) = asked(Some(Duration::from_secs(600)));
    assert_eq!(once, 1);
    // The third path finds both its pages kept: the root, and the page the second fetched;
    // the fifth finds /latin and /fresh?3, the seventh /autopost.
    let reused: Vec<u64> = report.paths.iter().map(|p| p.reused).collect();
    assert_eq!(reused, [0, 1, 2, 0, 2, 0, 1]);
    assert_eq!(report.paths[2].by_kind.document, 0, "{:?}", report.paths[2]);
    let (each, report) = asked(None);
    assert_eq!(each, 3);
    assert!(report.paths.iter().all(|p| p.reused == 0));
}

/// Replay `paths` under `cfg` and the default rules, with nothing to stop the session.
fn replay(cfg: &ReplayConfig, paths: &[Replay]) -> SessionReport {
    replay_all(
        cfg,
        &Rules::default(),
        paths,
        &mut || Ok(()),
        &mut |_, _| {},
    )
    .unwrap()
}

/// Two tabs side by side, a short idle wait.
fn two_tabs() -> ReplayConfig {
    ReplayConfig {
        idle: Duration::from_millis(300),
        tabs: 2,
        ..Default::default()
    }
}

/// Two tabs wait on two slow pages at once, and once the session's time is up no further
/// path starts and those under way are halted.
#[test]
fn a_session_runs_tabs_at_once_and_starts_no_path_after_its_time() {
    if !chromium() {
        return;
    }
    let (base, log) = serve();
    let slow = slow_pages(&base, 0..5);
    let cfg = ReplayConfig {
        max_time: Some(Duration::from_secs(1)),
        ..two_tabs()
    };
    let report = replay(&cfg, &slow);
    // The two under way when the time ran out were halted, and no other started.
    assert_eq!(report.paths.len(), 2, "{:?}", report.paths);
    assert!(
        report
            .paths
            .iter()
            .all(|p| p.outcome == Outcome::Halted { step: 0 }),
        "{:?}",
        report.paths
    );
    assert!(
        report
            .stopped
            .as_deref()
            .is_some_and(|s| s.contains("time")),
        "{:?}",
        report.stopped
    );
    assert_eq!(
        SLOW_MOST.load(Ordering::SeqCst),
        2,
        "both tabs waited at once"
    );
    let asked = log
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.starts_with("GET /slow"))
        .count();
    assert_eq!(asked, 2, "{:?}", log.lock().unwrap());
}

/// WiFi goes while two tabs wait on slow pages: no further path starts, and those under way
/// are halted rather than finished on whatever network is left.
#[test]
fn paths_under_way_are_halted_when_the_conditions_fail() {
    if !chromium() {
        return;
    }
    let (base, log) = serve();
    let slow = slow_pages(&base, 10..15);
    let cfg = two_tabs();
    let report = replay_all(
        &cfg,
        &Rules::default(),
        &slow,
        &mut wifi_for(2),
        &mut |_, _| {},
    )
    .unwrap();
    assert_eq!(report.stopped.as_deref(), Some("not on WiFi"));
    assert_eq!(report.paths.len(), 2, "{:?}", report.paths);
    assert!(
        report
            .paths
            .iter()
            .all(|p| p.outcome == Outcome::Halted { step: 0 }),
        "{:?}",
        report.paths
    );
    let asked = log
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.starts_with("GET /slow?1"))
        .count();
    assert_eq!(asked, 2);
}

#[test]
fn an_element_is_found_by_what_stayed_put() {
    if !chromium() {
        return;
    }
    let (base, _log) = serve();
    let browser = launch(&BrowserConfig::default()).unwrap();
    let tab = browser.new_tab().unwrap();
    let anchored = Locator::Anchored {
        anchor: Some("news".into()),
        path: vec![1, 0],
        attr: Some(("class".into(), "headline".into())),
    };
    let text = |t: &str| Locator::Text {
        tag: "a".into(),
        text: t.into(),
    };
    let act = |l: Vec<Locator>| Action {
        locators: Locators::new(l).unwrap(),
        event: Event::Click,
    };
    let href = |page: &str, a: &Action| {
        tab.navigate_to(&format!("{base}{page}"))
            .unwrap()
            .wait_until_navigated()
            .unwrap();
        let r = run_step(&tab, a, "127.0.0.1", true).unwrap();
        (r.status, r.href)
    };
    let markets = act(vec![anchored.clone(), text("Markets rally")]);
    // Nothing moved: both agree.
    assert_eq!(href("/", &markets), ("done".into(), "/story/18".into()));
    // The layout moved: the path now points at another box; the text still finds the story.
    assert_eq!(
        href("/moved", &markets),
        ("done".into(), "/story/18".into())
    );
    // The content changed (the story is gone): the thesis's positional locator decides.
    let gone = act(vec![anchored, text("Yesterday's story")]);
    assert_eq!(href("/", &gone), ("done".into(), "/story/18".into()));
    assert_eq!(href("/moved", &gone), ("done".into(), "/story/17".into()));
}

#[test]
fn faults_are_outcomes_and_the_replay_goes_on() {
    if !chromium() {
        return;
    }
    let (base, _log) = serve();
    let paths = vec![
        // A page that never answers.
        page(format!("{base}/hang")),
        // A redirect off the site.
        page(format!("{base}/away")),
        // A renderer that crashes.
        page("chrome://crash".into()),
        // And the replay goes on.
        page(format!("{base}/")),
    ];
    let cfg = ReplayConfig {
        step_timeout: Duration::from_secs(3),
        idle: Duration::from_millis(300),
        ..Default::default()
    };
    let report = replay(&cfg, &paths);
    let outcomes: Vec<&Outcome> = report.paths.iter().map(|p| &p.outcome).collect();
    assert!(
        matches!(
            outcomes[0],
            Outcome::Timeout { step: 0 } | Outcome::PageFailed { .. }
        ),
        "{outcomes:?}"
    );
    assert!(
        matches!(outcomes[1], Outcome::OffDomain { step: 0, .. }),
        "{outcomes:?}"
    );
    assert!(!matches!(outcomes[2], Outcome::Done), "{outcomes:?}");
    assert_eq!(outcomes[3], &Outcome::Done, "{outcomes:?}");
    assert_eq!(report.stopped, None);
}

#[test]
fn a_killed_browser_is_an_outcome_not_a_panic() {
    if !chromium() {
        return;
    }
    let (base, _log) = serve();
    let cfg = ReplayConfig {
        step_timeout: Duration::from_secs(5),
        ..Default::default()
    };
    let r = Replayer::start(&cfg, &Rules::default()).unwrap();
    let pid = r.pid().expect("roam started it");
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let p = page(format!("{base}/"));
    let out = r.replay(&p);
    assert!(
        matches!(
            out.outcome,
            Outcome::BrowserLost { .. } | Outcome::Timeout { .. }
        ),
        "{:?}",
        out.outcome
    );
}

#[test]
fn replay_stops_when_its_energy_budget_is_spent() {
    if !chromium() {
        return;
    }
    let (base, _log) = serve();
    let p = page(format!("{base}/"));
    // Any transfer on an idle WiFi radio costs more than a millijoule (modelled).
    let cfg = ReplayConfig {
        max_joules: Some(0.001),
        ..Default::default()
    };
    let report = replay(&cfg, &[p.clone(), p.clone(), p]);
    assert_eq!(report.paths.len(), 1);
    assert!(
        report
            .stopped
            .as_deref()
            .unwrap_or("")
            .contains("energy budget"),
        "{:?}",
        report.stopped
    );
}

#[test]
fn the_recorder_keeps_a_typed_search_and_ends_a_path_at_a_post() {
    if !chromium() {
        return;
    }
    let (base, _log) = serve();
    let (_browser, tab, rec) = recording(&format!("{base}/"));
    tab.wait_for_element("input[name=q]")
        .unwrap()
        .click()
        .unwrap();
    tab.type_str("weather").unwrap().press_key("Enter").unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    tab.navigate_to(&format!("{base}/"))
        .unwrap()
        .wait_until_navigated()
        .unwrap();
    tab.wait_for_element("#save").unwrap().click().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let reports = rec.drain();
    let submits: Vec<&Action> = reports
        .iter()
        .filter_map(|r| match r {
            Report::Action(a) if matches!(a.event, Event::Submit { .. }) => Some(a),
            _ => None,
        })
        .collect();
    assert_eq!(submits.len(), 1, "{reports:?}");
    assert_eq!(
        submits[0].event,
        Event::Submit {
            fields: vec![("q".into(), "weather".into())]
        }
    );
    assert_eq!(
        submits[0].locators.primary(),
        &Locator::Id {
            id: "search".into()
        }
    );
    assert!(
        reports.contains(&Report::Post),
        "the POST form ends the path: {reports:?}"
    );
}

#[test]
fn a_checkbox_is_recorded_and_replayed_and_a_password_never_reaches_a_path() {
    if !chromium() {
        return;
    }
    let (base, log) = serve();
    let (_browser, tab, rec) = recording(&format!("{base}/prefs"));
    tab.wait_for_element("#dark").unwrap().click().unwrap();
    tab.wait_for_element("input[name=user]")
        .unwrap()
        .click()
        .unwrap();
    tab.type_str("ann").unwrap();
    tab.wait_for_element("input[name=pw]")
        .unwrap()
        .click()
        .unwrap();
    tab.type_str("hunter2-secret").unwrap();
    // Back into the field, as to fix a typo: a click on it is recorded, its content is not.
    tab.wait_for_element("input[name=pw]")
        .unwrap()
        .click()
        .unwrap();
    tab.wait_for_element("input[name=user]")
        .unwrap()
        .click()
        .unwrap();
    // A GET form with a password: its submission would put the password in the next URL.
    tab.wait_for_element("#go").unwrap().click().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let reports = rec.drain();
    assert!(
        reports.contains(&Report::Post),
        "a sign-in is a POST: {reports:?}"
    );
    let rules = Rules::default();
    let mut cut = PathCutter::new();
    let mut paths = vec![];
    for (i, r) in reports.iter().enumerate() {
        let now = Time::from_millis(i as u64);
        paths.extend(match r.clone() {
            Report::Page(u) => cut.page(&u, now, &rules),
            Report::Action(a) => cut.action(a, now),
            Report::Post => cut.post(now),
        });
    }
    paths.extend(cut.finish());
    assert!(
        !format!("{paths:?}").contains("hunter2-secret"),
        "the password was recorded: {paths:?}"
    );
    let actions: Vec<&Report> = reports
        .iter()
        .filter(|r| matches!(r, Report::Action(_)))
        .collect();
    assert!(
        !format!("{actions:?}").contains("hunter2") && !format!("{actions:?}").contains("ann\""),
        "typed text in a recorded action: {actions:?}"
    );
    assert_eq!(paths.len(), 1, "{paths:?}");
    let check = paths[0]
        .actions
        .iter()
        .find(|a| matches!(a.event, Event::Check { .. }))
        .unwrap_or_else(|| panic!("no checkbox change recorded: {reports:?}"));
    assert_eq!(check.event, Event::Check { checked: true });
    assert_eq!(check.locators.primary(), &Locator::Id { id: "dark".into() });
    assert!(
        !paths[0]
            .actions
            .iter()
            .any(|a| matches!(a.event, Event::Submit { .. })),
        "the sign-in form is not an action: {paths:?}"
    );
    // What was recorded replays: the checkbox is set again, and the page sees its change.
    log.lock().unwrap().clear();
    let report = replay_all(
        &ReplayConfig {
            idle: Duration::from_millis(300),
            ..Default::default()
        },
        &Rules::default(),
        &[Replay {
            site: "127.0.0.1".into(),
            root: paths[0].root.clone(),
            actions: vec![check.clone()],
            hits: 1,
        }],
        &mut || Ok(()),
        &mut |_, _| {},
    )
    .unwrap();
    assert_eq!(report.paths[0].outcome, Outcome::Done, "{report:?}");
    let log = log.lock().unwrap();
    assert!(log.iter().any(|l| l == "GET /pref?dark=true"), "{log:?}");
}

#[test]
fn a_replay_session_restarts_a_lost_browser_on_the_same_profile_and_goes_on() {
    if !chromium() {
        return;
    }
    let (base, _log) = serve();
    let profile = std::env::temp_dir().join(format!("roam-precog-restart-{}", std::process::id()));
    let cfg = ReplayConfig {
        idle: Duration::from_millis(300),
        step_timeout: Duration::from_secs(5),
        browser: BrowserConfig {
            profile: Some(profile.clone()),
            ..Default::default()
        },
        ..Default::default()
    };
    let at = |p: &str| page(format!("{base}{p}"));
    let paths = [at("/a"), at("/b"), at("/c")];
    // After the first path the browser dies (every process on the profile, as a crash).
    let mut progress = |i: usize, _: &roam_precog::browser::replay::PathReport| {
        if i == 0 {
            std::process::Command::new("pkill")
                .args(["-9", "-f", &profile.display().to_string()])
                .status()
                .unwrap();
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    let report = replay_all(
        &cfg,
        &Rules::default(),
        &paths,
        &mut || Ok(()),
        &mut progress,
    )
    .unwrap();
    let outcomes: Vec<&Outcome> = report.paths.iter().map(|p| &p.outcome).collect();
    assert_eq!(outcomes.len(), 3, "{report:?}");
    assert_eq!(outcomes[0], &Outcome::Done);
    assert!(
        matches!(outcomes[1], Outcome::BrowserLost { .. }),
        "{:?}",
        outcomes[1]
    );
    assert_eq!(
        outcomes[2],
        &Outcome::Done,
        "a new browser took over: {report:?}"
    );
    assert_eq!(report.stopped, None);
    let _ = std::fs::remove_dir_all(&profile);
}
