//! The progress line of `roam transfer get` and `put` ([`roam_core::progress`]): the bytes
//! the engines moved, out of the files' sizes as the engines learn them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use roam_core::progress::{Progress, Total, Unit};

/// Show the progress of `engines` (their `received`, `expected` and `sized` counters, summed)
/// on standard error until the bar is finished: `files` files in all, `verb` what happens to
/// the bytes ("received", "sent").
pub(super) fn show<'a>(
    engines: impl IntoIterator<Item = &'a roam_transfer::Engine>,
    files: u64,
    verb: &str,
) -> Progress {
    let (mut moved, mut expected, mut sized) = (Vec::new(), Vec::new(), Vec::new());
    for e in engines {
        moved.push(e.received.clone());
        expected.push(e.expected.clone());
        sized.push(e.sized.clone());
    }
    Progress::builder(Unit::Bytes)
        .verb(verb)
        .poll(move |p| {
            let (total, message) = total(sum(&expected), sum(&sized), files);
            p.set_position(sum(&moved));
            p.set_total(total);
            p.set_message(message);
        })
        .start()
}

fn sum(v: &[Arc<AtomicU64>]) -> u64 {
    v.iter().map(|c| c.load(Ordering::Relaxed)).sum()
}

/// The total from `expected` bytes, the sizes of `sized` of `files` files known: exact once
/// every size is known (and then a time left), a lower bound said to be one before.
fn total(expected: u64, sized: u64, files: u64) -> (Total, String) {
    if expected == 0 {
        (Total::Unknown, String::new())
    } else if sized >= files {
        (Total::Exact(expected), String::new())
    } else {
        (
            Total::AtLeast(expected),
            format!("(sizes of {sized}/{files} files known)"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roam_core::progress::Snapshot;

    fn line(moved: u64, expected: u64, sized: u64, files: u64, rate: f64, verb: &str) -> String {
        let (total, message) = total(expected, sized, files);
        Snapshot {
            label: None,
            unit: Unit::Bytes,
            verb: Some(verb.into()),
            position: moved,
            total,
            rate: Some(rate),
            message,
        }
        .line()
    }

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
            partly.contains("at least 10.0 MB sent, 8.0 Mbit/s (sizes of 1/4 files known)"),
            "{partly}"
        );
        assert!(!partly.contains("left"), "{partly}");
        // Bytes sent again after a failure never take it past the end.
        assert!(line(12, 10, 1, 1, 0.0, "sent").starts_with("[####################] 100%"));
    }
}
