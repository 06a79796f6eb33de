//! Progress of long work, shown on standard error: one module for every roam command and
//! library (a transfer's bytes, a parcel's chunks, a lab's workload seconds).
//!
//! A [`Progress`] is a bar with a position and a [`Total`] in a [`Unit`], an optional label,
//! verb and message, and a rate and time left measured as the position moves:
//!
//! ```text
//! [##########..........]  50% 5.0 of 10.0 MB received, 8.0 Mbit/s, 0:05 left
//! resume: [####................]  20% 24/120 chunks, 0:12 left
//! ```
//!
//! On a terminal the line is redrawn in place about once a second ([`REDRAW_EVERY`]); where
//! standard error is not a terminal (a log file, CI) a whole line is written every
//! [`LOG_EVERY`] instead, so that a log holds lines and not one growing line of carriage
//! returns. Work that keeps its own counters (atomics updated by other threads or tasks) hands
//! the bar a [`Builder::poll`] function that reads them before each redraw; other work sets the
//! position as it goes ([`Progress::set_position`], [`Progress::inc`]). Lines printed while the
//! bar runs go through [`Progress::println`], which keeps the bar below them.
//!
//! ```
//! use roam_core::progress::{Progress, Unit};
//!
//! let bar = Progress::builder(Unit::Count("chunks")).label("upload").total(120).start();
//! for _ in 0..120 {
//!     bar.inc(1);
//! }
//! bar.println("chunk 7 sent again");
//! bar.finish();
//! ```
//!
//! [`Progress`] is a handle: clones share one bar, and may be moved to worker threads. The
//! drawing runs on a thread of its own; the formatting ([`Snapshot::line`]) and the rate
//! ([`Meter`]) are plain functions of their inputs, time included.

use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the line is redrawn on a terminal.
pub const REDRAW_EVERY: Duration = Duration::from_secs(1);
/// How often a whole line is written where standard error is not a terminal.
pub const LOG_EVERY: Duration = Duration::from_secs(10);

/// Width of the bar, in characters between its brackets.
const BAR_WIDTH: usize = 20;

/// What the position counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Bytes: amounts in MB, the rate in Mbit/s.
    Bytes,
    /// Things, named by a plural noun (`chunks`, `workload-s`, `trials`); no rate is shown,
    /// only the time left.
    Count(&'static str),
}

/// How much there is to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Total {
    /// Not known (yet): no bar, no percentage, no time left.
    #[default]
    Unknown,
    /// Known.
    Exact(u64),
    /// At least this much (some sizes are still unknown): a bar, but no time left.
    AtLeast(u64),
}

impl From<u64> for Total {
    fn from(n: u64) -> Total {
        Total::Exact(n)
    }
}

impl From<Option<u64>> for Total {
    fn from(n: Option<u64>) -> Total {
        n.map_or(Total::Unknown, Total::Exact)
    }
}

/// The rate a position moves at, smoothed over the last few seconds: each update weighs the
/// newest interval's rate 0.3 against the rate before. Work that moves in whole steps (a
/// count of trials, each minutes long) reads a smoothed rate of nearly nothing between steps,
/// and a time left of days; its bar shows the mean rate since the first update instead
/// ([`Meter::shown`]).
#[derive(Debug, Clone, Default)]
pub struct Meter {
    first: Option<(Duration, u64)>,
    last: Option<(Duration, u64)>,
    rate: Option<f64>,
}

impl Meter {
    /// The position was `position` at `at` (time since the work started).
    pub fn update(&mut self, at: Duration, position: u64) {
        let (t0, p0) = self.last.unwrap_or((Duration::ZERO, 0));
        let dt = at.saturating_sub(t0).as_secs_f64();
        if dt <= 0.0 {
            return;
        }
        let now = position.saturating_sub(p0) as f64 / dt;
        self.rate = Some(self.rate.map_or(now, |r| 0.7 * r + 0.3 * now));
        self.last = Some((at, position));
        self.first.get_or_insert((at, position));
    }

    /// Units a second, once an interval has been measured.
    pub fn rate(&self) -> Option<f64> {
        self.rate
    }

    /// Units a second since the first update, once there has been progress since it.
    pub fn mean(&self) -> Option<f64> {
        let ((t0, p0), (t1, p1)) = (self.first?, self.last?);
        let dt = t1.saturating_sub(t0).as_secs_f64();
        (dt > 0.0 && p1 > p0).then(|| (p1 - p0) as f64 / dt)
    }

    /// The rate a bar of `unit` shows: bytes flow, so the smoothed rate (a stall shows as
    /// one); counts move in steps, so the mean since the first update (none before a step).
    pub fn shown(&self, unit: Unit) -> Option<f64> {
        match unit {
            Unit::Bytes => self.rate(),
            Unit::Count(_) => self.mean(),
        }
    }
}

/// What one line shows: the bar's state at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// Written first, with a colon (`resume: ...`).
    pub label: Option<String>,
    /// What the position counts.
    pub unit: Unit,
    /// What happens to the units (`received`, `sent`), after the amount.
    pub verb: Option<String>,
    /// How far.
    pub position: u64,
    /// Out of how much.
    pub total: Total,
    /// Units a second ([`Meter`]).
    pub rate: Option<f64>,
    /// Written last (what is running, what is unknown).
    pub message: String,
}

impl Snapshot {
    /// The line: `[label: ][bar pct% ]amount[ verb][, rate][, time left][ message]`.
    pub fn line(&self) -> String {
        let mut out = String::new();
        if let Some(l) = &self.label {
            let _ = write!(out, "{l}: ");
        }
        let (total, exact) = match self.total {
            Total::Unknown => (None, false),
            Total::Exact(t) => (Some(t), true),
            Total::AtLeast(t) => (Some(t), false),
        };
        if let Some(t) = total.filter(|&t| t > 0) {
            let done = (self.position as f64 / t as f64).min(1.0);
            let full = (done * BAR_WIDTH as f64).round() as usize;
            let _ = write!(
                out,
                "[{}{}] {:3.0}% ",
                "#".repeat(full),
                ".".repeat(BAR_WIDTH - full),
                done * 100.0
            );
        }
        let mb = |b: u64| b as f64 / 1e6;
        let at_least = if exact { "" } else { "at least " };
        match (self.unit, total.filter(|&t| t > 0)) {
            (Unit::Bytes, None) => {
                let _ = write!(out, "{:.1} MB", mb(self.position));
            }
            (Unit::Bytes, Some(t)) => {
                let _ = write!(out, "{:.1} of {at_least}{:.1} MB", mb(self.position), mb(t));
            }
            (Unit::Count(noun), None) => {
                let _ = write!(out, "{} {noun}", self.position);
            }
            (Unit::Count(noun), Some(t)) if exact => {
                let _ = write!(out, "{}/{t} {noun}", self.position);
            }
            (Unit::Count(noun), Some(t)) => {
                let _ = write!(out, "{} of at least {t} {noun}", self.position);
            }
        }
        if let Some(v) = &self.verb {
            let _ = write!(out, " {v}");
        }
        let rate = self.rate.unwrap_or(0.0);
        if self.unit == Unit::Bytes {
            let _ = write!(out, ", {:.1} Mbit/s", rate * 8.0 / 1e6);
        }
        let fast_enough = match self.unit {
            Unit::Bytes => rate >= 1.0,
            Unit::Count(_) => rate > 0.0,
        };
        if let (true, Some(t), true) = (exact, total, fast_enough) {
            let s = (t.saturating_sub(self.position) as f64 / rate).round() as u64;
            let _ = write!(out, ", {}:{:02} left", s / 60, s % 60);
        }
        if !self.message.is_empty() {
            let _ = write!(out, " {}", self.message);
        }
        out
    }
}

/// A function that reads counters kept elsewhere into the bar before each redraw.
type Poll = Box<dyn Fn(&Progress) + Send + Sync>;

/// How a [`Progress`] is set up; [`Builder::start`] starts it.
pub struct Builder {
    snapshot: Snapshot,
    poll: Option<Poll>,
    hidden: bool,
}

impl Builder {
    /// Written first, with a colon: what the work is (`upload`, `resume`).
    pub fn label(mut self, label: &str) -> Builder {
        self.snapshot.label = Some(label.into());
        self
    }

    /// What happens to the units, written after the amount (`received`, `sent`).
    pub fn verb(mut self, verb: &str) -> Builder {
        self.snapshot.verb = Some(verb.into());
        self
    }

    /// How much there is to do, if known at the start.
    pub fn total(mut self, total: impl Into<Total>) -> Builder {
        self.snapshot.total = total.into();
        self
    }

    /// Before each redraw, call `poll`, which sets position, total and message from counters
    /// kept elsewhere (an engine's atomics).
    pub fn poll(mut self, poll: impl Fn(&Progress) + Send + Sync + 'static) -> Builder {
        self.poll = Some(Box::new(poll));
        self
    }

    /// Draw nothing (tests, callers with a display of their own); [`Progress::println`] still
    /// prints.
    pub fn hidden(mut self) -> Builder {
        self.hidden = true;
        self
    }

    /// Start showing progress on standard error.
    pub fn start(self) -> Progress {
        let mode = if self.hidden {
            Mode::Hidden
        } else if std::io::stderr().is_terminal() {
            Mode::Terminal
        } else {
            Mode::Log
        };
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                snapshot: self.snapshot,
                meter: Meter::default(),
                drawn: false,
                finished: false,
            }),
            poll: self.poll,
            mode,
            started: Instant::now(),
            stop: stop.clone(),
            thread: Mutex::new(None),
        });
        let progress = Progress { shared };
        let weak = Arc::downgrade(&progress.shared);
        let spawned = std::thread::Builder::new()
            .name("roam-progress".into())
            .spawn(move || ticks(weak, stop));
        // Without a thread the bar only shows what `println` and `finish` draw.
        if let Ok(t) = spawned {
            *progress.shared.thread.lock().unwrap() = Some(t);
        }
        progress
    }
}

/// Where the line goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Redrawn in place every [`REDRAW_EVERY`].
    Terminal,
    /// A whole line every [`LOG_EVERY`].
    Log,
    /// Nowhere.
    Hidden,
}

struct State {
    snapshot: Snapshot,
    meter: Meter,
    /// Whether a line is on the terminal now, to be redrawn or ended.
    drawn: bool,
    finished: bool,
}

struct Shared {
    state: Mutex<State>,
    poll: Option<Poll>,
    mode: Mode,
    started: Instant,
    /// Set (and notified) to stop the drawing thread.
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Shared {
    /// The last handle gone without [`Progress::finish`]: stop drawing and end the line.
    fn drop(&mut self) {
        signal(&self.stop);
        let s = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        if s.drawn && !s.finished {
            eprintln!();
        }
    }
}

fn signal(stop: &(Mutex<bool>, Condvar)) {
    *stop.0.lock().unwrap_or_else(|e| e.into_inner()) = true;
    stop.1.notify_all();
}

/// The drawing thread: a tick every [`REDRAW_EVERY`] until stopped or every handle is gone.
fn ticks(progress: Weak<Shared>, stop: Arc<(Mutex<bool>, Condvar)>) {
    let log_every = (LOG_EVERY.as_secs_f64() / REDRAW_EVERY.as_secs_f64()).round() as u64;
    for tick in 1u64.. {
        {
            let mut stopped = stop.0.lock().unwrap_or_else(|e| e.into_inner());
            let until = Instant::now() + REDRAW_EVERY;
            while !*stopped {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                stopped = stop
                    .1
                    .wait_timeout(stopped, left)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            if *stopped {
                return;
            }
        }
        let Some(shared) = progress.upgrade() else {
            return;
        };
        let p = Progress { shared };
        p.refresh();
        let draw = match p.shared.mode {
            Mode::Terminal => true,
            Mode::Log => tick % log_every == 0,
            Mode::Hidden => false,
        };
        if draw {
            let mut s = p.state();
            if !s.finished {
                p.draw(&mut s);
            }
        }
    }
}

/// A progress bar on standard error (see the module's documentation). Clones share the bar.
#[derive(Clone)]
pub struct Progress {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("snapshot", &self.snapshot())
            .finish()
    }
}

impl Progress {
    /// Set up a bar counting `unit`.
    pub fn builder(unit: Unit) -> Builder {
        Builder {
            snapshot: Snapshot {
                label: None,
                unit,
                verb: None,
                position: 0,
                total: Total::Unknown,
                rate: None,
                message: String::new(),
            },
            poll: None,
            hidden: false,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Set how far the work is.
    pub fn set_position(&self, position: u64) {
        self.state().snapshot.position = position;
    }

    /// Move the position on by `n`.
    pub fn inc(&self, n: u64) {
        let mut s = self.state();
        s.snapshot.position = s.snapshot.position.saturating_add(n);
    }

    /// Set how much there is to do.
    pub fn set_total(&self, total: impl Into<Total>) {
        self.state().snapshot.total = total.into();
    }

    /// Set the text written at the end of the line (empty: none).
    pub fn set_message(&self, message: impl Into<String>) {
        self.state().snapshot.message = message.into();
    }

    /// How far the work is.
    pub fn position(&self) -> u64 {
        self.state().snapshot.position
    }

    /// How much there is to do.
    pub fn total(&self) -> Total {
        self.state().snapshot.total
    }

    /// What the next line would show.
    pub fn snapshot(&self) -> Snapshot {
        let s = self.state();
        Snapshot {
            rate: s.meter.shown(s.snapshot.unit),
            ..s.snapshot.clone()
        }
    }

    /// Whether the bar is redrawn in place on a terminal (rather than written as a line every
    /// [`LOG_EVERY`], or hidden): a caller that reports finished steps as lines of its own
    /// where there is no terminal asks this.
    pub fn on_terminal(&self) -> bool {
        self.shared.mode == Mode::Terminal
    }

    /// Print `line` on standard error, keeping the bar (on a terminal) below it.
    pub fn println(&self, line: &str) {
        let mut s = self.state();
        let mut err = std::io::stderr().lock();
        if s.drawn {
            let _ = write!(err, "\r\x1b[K");
        }
        let _ = writeln!(err, "{line}");
        drop(err);
        if s.drawn && !s.finished {
            self.draw(&mut s);
        }
    }

    /// Stop: on a terminal, draw the line a last time and end it, so that what follows starts
    /// on a line of its own. Later calls do nothing.
    pub fn finish(&self) {
        signal(&self.shared.stop);
        let thread = self.shared.thread.lock().unwrap().take();
        if let Some(t) = thread {
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
        if self.state().finished {
            return;
        }
        self.refresh();
        let mut s = self.state();
        if self.shared.mode == Mode::Terminal {
            self.draw(&mut s);
            eprintln!();
        }
        s.drawn = false;
        s.finished = true;
    }

    /// Read the counters (the poll function) and measure the rate.
    fn refresh(&self) {
        if let Some(poll) = &self.shared.poll {
            poll(self);
        }
        let mut s = self.state();
        let position = s.snapshot.position;
        s.meter.update(self.shared.started.elapsed(), position);
    }

    /// Write the line: redrawn in place on a terminal (long lines cut at its edge rather than
    /// wrapped), a whole line elsewhere.
    fn draw(&self, s: &mut State) {
        let text = Snapshot {
            rate: s.meter.shown(s.snapshot.unit),
            ..s.snapshot.clone()
        }
        .line();
        let mut err = std::io::stderr().lock();
        match self.shared.mode {
            Mode::Terminal => {
                // Autowrap off while drawing (DECAWM), the rest of the line cleared.
                let _ = write!(err, "\r\x1b[?7l{text}\x1b[K\x1b[?7h");
                let _ = err.flush();
                s.drawn = true;
            }
            Mode::Log => {
                let _ = writeln!(err, "{text}");
            }
            Mode::Hidden => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(position: u64, total: Total, rate: f64, verb: &str, message: &str) -> String {
        Snapshot {
            label: None,
            unit: Unit::Bytes,
            verb: Some(verb.into()),
            position,
            total,
            rate: Some(rate),
            message: message.into(),
        }
        .line()
    }

    #[test]
    fn a_bytes_line_shows_a_bar_once_sizes_are_known() {
        assert_eq!(
            line(2_500_000, Total::Unknown, 1e6, "received", ""),
            "2.5 MB received, 8.0 Mbit/s"
        );
        assert_eq!(
            line(5_000_000, Total::Exact(10_000_000), 1e6, "received", ""),
            "[##########..........]  50% 5.0 of 10.0 MB received, 8.0 Mbit/s, 0:05 left"
        );
        let partly = line(5_000_000, Total::AtLeast(10_000_000), 1e6, "sent", "(1/4)");
        assert_eq!(
            partly,
            "[##########..........]  50% 5.0 of at least 10.0 MB sent, 8.0 Mbit/s (1/4)"
        );
        // Bytes sent again after a failure never take it past the end.
        assert!(
            line(12, Total::Exact(10), 0.0, "sent", "").starts_with("[####################] 100%")
        );
    }

    #[test]
    fn a_count_line_has_a_label_and_no_rate() {
        let s = Snapshot {
            label: Some("resume".into()),
            unit: Unit::Count("chunks"),
            verb: None,
            position: 24,
            total: Total::Exact(120),
            rate: Some(8.0),
            message: String::new(),
        };
        assert_eq!(
            s.line(),
            "resume: [####................]  20% 24/120 chunks, 0:12 left"
        );
        let unknown = Snapshot {
            total: Total::Unknown,
            rate: None,
            message: "1.5 MB".into(),
            ..s
        };
        assert_eq!(unknown.line(), "resume: 24 chunks 1.5 MB");
    }

    #[test]
    fn the_rate_is_smoothed_over_intervals() {
        let mut m = Meter::default();
        assert_eq!(m.rate(), None);
        m.update(Duration::from_secs(1), 100);
        assert_eq!(m.rate(), Some(100.0));
        m.update(Duration::from_secs(2), 100);
        assert_eq!(m.rate(), Some(70.0));
        // Half-second intervals count as rates a second.
        m.update(Duration::from_millis(2500), 200);
        assert!((m.rate().unwrap() - (0.7 * 70.0 + 0.3 * 200.0)).abs() < 1e-9);
        m.update(Duration::from_millis(2500), 300);
        assert!(
            (m.rate().unwrap() - 109.0).abs() < 1e-9,
            "no time, no update"
        );
    }

    #[test]
    fn counts_show_the_mean_rate_so_a_step_does_not_make_days_left() {
        let mut m = Meter::default();
        let trials = Unit::Count("trials");
        m.update(Duration::from_secs(1), 0);
        m.update(Duration::from_secs(61), 1);
        // Nine minutes with no trial finished: the smoothed rate all but vanishes.
        for k in 0..9 {
            m.update(Duration::from_secs(121 + 60 * k), 1);
        }
        assert!(m.rate().unwrap() < 0.001);
        // One trial in the ten minutes since the first update.
        assert!((m.shown(trials).unwrap() - 1.0 / 600.0).abs() < 1e-9);
        assert_eq!(m.shown(Unit::Bytes), m.rate());
        assert_eq!(Meter::default().shown(trials), None);
    }

    #[test]
    fn handles_share_one_bar_and_poll_reads_counters() {
        use std::sync::atomic::{AtomicU64, Ordering};
        let counter = Arc::new(AtomicU64::new(0));
        let c = counter.clone();
        let bar = Progress::builder(Unit::Bytes)
            .total(1000)
            .poll(move |p| p.set_position(c.load(Ordering::Relaxed)))
            .hidden()
            .start();
        let other = bar.clone();
        std::thread::spawn(move || other.inc(5)).join().unwrap();
        assert_eq!(bar.position(), 5);
        counter.store(700, Ordering::Relaxed);
        bar.finish();
        assert_eq!(bar.position(), 700, "finish reads the counters a last time");
        assert_eq!(bar.total(), Total::Exact(1000));
        assert!(!bar.on_terminal());
        bar.finish();
    }
}
