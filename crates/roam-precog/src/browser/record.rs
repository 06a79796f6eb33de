//! Recording a tab: `js/recorder.js` in every top-level document, its reports through a
//! DevTools binding into a bounded queue, parsed and checked here.
//!
//! A page can call the binding itself, so everything it sends is untrusted: each message is
//! parsed and bounded ([`crate::action::Action::validate`]); one that does not parse or
//! exceeds a bound is dropped and counted, as are messages past [`QUEUE`] waiting. The driver
//! (`roam precog browse`, the lab's users) feeds [`Report`]s to a [`crate::PathCutter`].

use super::BrowserError;
use crate::action::Action;
use headless_chrome::protocol::cdp::Page::AddScriptToEvaluateOnNewDocument;
use headless_chrome::Tab;
use serde::Deserialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, TryRecvError};
use std::sync::Arc;
use std::time::Duration;

/// The recorder's script.
pub const RECORDER_JS: &str = concat!(include_str!("js/text.js"), include_str!("js/recorder.js"));
/// The DevTools binding the script reports through.
pub const BINDING: &str = "__roamPrecog";
/// Most reports waiting; more are dropped and counted.
pub const QUEUE: usize = 1024;
/// Longest report kept, in bytes.
pub const MAX_REPORT: usize = 16 << 10;

/// One thing the recorder saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Report {
    /// A top-level document became ready at this URL.
    Page(String),
    /// The user acted.
    Action(Action),
    /// A form was submitted with POST.
    Post,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Message {
    Page { url: String },
    Action { action: Action },
    Post,
}

/// Parse one report as the binding delivers it: the recorder's JSON message (or, should the
/// binding be wrapped as Puppeteer wraps it, `{"name","seq","args":["JSON"]}`).
pub fn parse(payload: &str) -> Option<Report> {
    if payload.len() > MAX_REPORT {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(payload).ok()?;
    let v = match v
        .get("args")
        .and_then(|a| a.get(0))
        .and_then(|a| a.as_str())
    {
        Some(inner) => serde_json::from_str(inner).ok()?,
        None => v,
    };
    Some(match serde_json::from_value::<Message>(v).ok()? {
        Message::Page { url } if url.len() <= 8192 => Report::Page(url),
        Message::Page { .. } => return None,
        Message::Action { action } => {
            action.validate().ok()?;
            Report::Action(action)
        }
        Message::Post => Report::Post,
    })
}

/// A recorded tab's reports.
pub struct Recorder {
    rx: Receiver<Report>,
    dropped: Arc<AtomicU64>,
}

impl Recorder {
    /// Start recording `tab`: the binding, and the script in this and every later document.
    pub fn attach(tab: &Tab) -> Result<Recorder, BrowserError> {
        let (tx, rx) = sync_channel(QUEUE);
        let dropped = Arc::new(AtomicU64::new(0));
        let d = dropped.clone();
        // Bindings report only to a client with the Runtime domain on.
        tab.enable_runtime().map_err(BrowserError::cdp)?;
        tab.expose_function(
            BINDING,
            Arc::new(move |v: serde_json::Value| {
                let kept = v
                    .as_str()
                    .and_then(parse)
                    .is_some_and(|r| tx.try_send(r).is_ok());
                if !kept {
                    d.fetch_add(1, Ordering::Relaxed);
                }
            }),
        )
        .map_err(BrowserError::cdp)?;
        tab.call_method(AddScriptToEvaluateOnNewDocument {
            source: RECORDER_JS.to_string(),
            world_name: None,
            include_command_line_api: None,
            run_immediately: None,
        })
        .map_err(BrowserError::cdp)?;
        Ok(Recorder { rx, dropped })
    }

    /// The next report, waiting at most `wait`; `Ok(None)` if none came.
    pub fn next(&self, wait: Duration) -> Result<Option<Report>, BrowserError> {
        match self.rx.recv_timeout(wait) {
            Ok(r) => Ok(Some(r)),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Ok(None),
            Err(_) => Err(BrowserError::Cdp("the tab closed".into())),
        }
    }

    /// Every report waiting now.
    pub fn drain(&self) -> Vec<Report> {
        let mut out = vec![];
        loop {
            match self.rx.try_recv() {
                Ok(r) => out.push(r),
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return out,
            }
        }
    }

    /// Reports dropped: malformed, over a bound, or past a full queue.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wrap(inner: &str) -> String {
        serde_json::json!({"name": BINDING, "seq": 1, "args": [inner]}).to_string()
    }

    #[test]
    fn reports_parse_and_bad_ones_are_refused() {
        assert_eq!(parse(r#"{"type":"post"}"#), Some(Report::Post));
        assert_eq!(
            parse(&wrap(r#"{"type":"page","url":"http://a.example/"}"#)),
            Some(Report::Page("http://a.example/".into()))
        );
        assert_eq!(parse(&wrap(r#"{"type":"post"}"#)), Some(Report::Post));
        let a = parse(&wrap(
            r#"{"type":"action","action":{"locators":[{"kind":"id","id":"go"}],"event":"click"}}"#,
        ));
        assert!(matches!(a, Some(Report::Action(_))));
        // No locators, unknown types, non-JSON, oversized ids: refused.
        assert_eq!(
            parse(&wrap(
                r#"{"type":"action","action":{"locators":[],"event":"click"}}"#
            )),
            None
        );
        assert_eq!(parse(&wrap(r#"{"type":"steal"}"#)), None);
        assert_eq!(parse("not json"), None);
        let long = format!(
            r#"{{"type":"action","action":{{"locators":[{{"kind":"id","id":"{}"}}],"event":"click"}}}}"#,
            "x".repeat(1000)
        );
        assert_eq!(parse(&wrap(&long)), None);
    }
}
