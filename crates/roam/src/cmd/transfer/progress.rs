//! The progress line of `roam transfer get` and `put`: a bar and a percentage once the files'
//! sizes are known, the bytes moved, the rate and the time left: redrawn every second on a
//! terminal, a line every ten seconds in a log.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The counters of the engines a transfer runs ([`roam_transfer::Engine`]'s `received`,
/// `expected` and `sized`), summed.
pub(crate) struct Counters {
    pub moved: Vec<Arc<AtomicU64>>,
    pub expected: Vec<Arc<AtomicU64>>,
    pub sized: Vec<Arc<AtomicU64>>,
}

impl Counters {
    /// The counters of `engines`.
    pub fn of<'a>(engines: impl IntoIterator<Item = &'a roam_transfer::Engine>) -> Counters {
        let mut c = Counters {
            moved: Vec::new(),
            expected: Vec::new(),
            sized: Vec::new(),
        };
        for e in engines {
            c.moved.push(e.received.clone());
            c.expected.push(e.expected.clone());
            c.sized.push(e.sized.clone());
        }
        c
    }

    fn sum(v: &[Arc<AtomicU64>]) -> u64 {
        v.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }
}

/// How often the line is written where standard error is not a terminal (a log file, CI):
/// a whole line each time instead of one redrawn in place.
const LOG_EVERY: u32 = 10;

/// The progress line, running; [`Ticker::finish`] stops it.
pub(crate) struct Ticker {
    task: tokio::task::JoinHandle<()>,
    tty: bool,
}

impl Ticker {
    /// Stop, ending the line redrawn in place (on a terminal) so that what follows starts on
    /// a line of its own.
    pub fn finish(self) {
        self.task.abort();
        if self.tty {
            eprintln!();
        }
    }
}

/// Show progress on standard error until finished: on a terminal the line redrawn every
/// second, elsewhere (a log, CI) a line every [`LOG_EVERY`] seconds, so that a log holds lines
/// and not one growing line of carriage returns. `files` in all, `verb` what happens to the
/// bytes ("received", "sent").
pub(crate) fn spawn(c: Counters, files: u64, verb: &'static str) -> Ticker {
    let tty = std::io::stderr().is_terminal();
    let task = tokio::spawn(async move {
        let (mut last, mut rate) = (0u64, None::<f64>);
        for tick in 1u32.. {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let moved = Counters::sum(&c.moved);
            let now = moved.saturating_sub(last) as f64;
            // Bytes a second, smoothed over the last few seconds.
            let r = rate.map_or(now, |r| 0.7 * r + 0.3 * now);
            rate = Some(r);
            last = moved;
            let text = line(
                moved,
                Counters::sum(&c.expected),
                Counters::sum(&c.sized),
                files,
                r,
                verb,
            );
            if tty {
                eprint!("\r{text}   ");
            } else if tick % LOG_EVERY == 0 {
                eprintln!("{text}");
            }
        }
    });
    Ticker { task, tty }
}

/// The line: `moved` bytes of `expected` (the sizes of `sized` of `files` files known),
/// moving at `rate` bytes a second.
pub(crate) fn line(
    moved: u64,
    expected: u64,
    sized: u64,
    files: u64,
    rate: f64,
    verb: &str,
) -> String {
    let mb = |b: u64| b as f64 / 1e6;
    let speed = format!("{:.1} Mbit/s", rate * 8.0 / 1e6);
    if expected == 0 {
        return format!("{:.1} MB {verb}, {speed}", mb(moved));
    }
    let done = (moved as f64 / expected as f64).min(1.0);
    let width = 20;
    let full = (done * width as f64).round() as usize;
    let bar = format!("[{}{}]", "#".repeat(full), ".".repeat(width - full));
    let all_known = sized >= files;
    let of = if all_known {
        format!("{:.1} of {:.1} MB", mb(moved), mb(expected))
    } else {
        format!(
            "{:.1} of at least {:.1} MB (sizes of {sized}/{files} files known)",
            mb(moved),
            mb(expected)
        )
    };
    let left = expected.saturating_sub(moved) as f64;
    let eta = if !all_known || rate < 1.0 {
        String::new()
    } else {
        let s = (left / rate).round() as u64;
        format!(", {}:{:02} left", s / 60, s % 60)
    };
    format!("{bar} {:3.0}% {of} {verb}, {speed}{eta}", done * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_shows_a_bar_once_sizes_are_known() {
        assert_eq!(
            line(2_500_000, 0, 0, 3, 1e6, "received"),
            "2.5 MB received, 8.0 Mbit/s"
        );
        assert_eq!(
            line(5_000_000, 10_000_000, 2, 2, 1e6, "received"),
            "[##########..........]  50% 5.0 of 10.0 MB received, 8.0 Mbit/s, 0:05 left"
        );
        let partly = line(5_000_000, 10_000_000, 1, 4, 1e6, "sent");
        assert!(
            partly.contains("at least 10.0 MB (sizes of 1/4 files known) sent"),
            "{partly}"
        );
        assert!(!partly.contains("left"), "{partly}");
        // Bytes sent again after a failure never take it past the end.
        assert!(line(12, 10, 1, 1, 0.0, "sent").starts_with("[####################] 100%"));
    }
}
