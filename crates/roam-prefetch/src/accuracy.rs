//! How often a class of hints is right: consumed hints over all hints resolved (Higgins' thesis
//! §3.3.2). A hint resolves as consumed when the application asks for its item (whether IMP
//! prefetched it or not: the hint's handle is its shadow-cache entry, so a demand fetch of a
//! never-prefetched item still counts), and as wrong when it is cancelled or dropped unread.

use std::collections::HashMap;

/// A class of hints (IMP's `set_prefetch_class`): hints whose accuracy is learned together,
/// e.g. the articles of one news feed.
pub type Class = u32;

/// The class of hints given none.
pub const DEFAULT_CLASS: Class = 0;

/// Consumed and resolved hints of one class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Hints whose item the application asked for.
    pub consumed: u64,
    /// Hints resolved either way.
    pub resolved: u64,
}

/// Accuracy per class.
#[derive(Clone, Debug, Default)]
pub struct Accuracy {
    classes: HashMap<Class, Counts>,
}

impl Accuracy {
    /// No history.
    pub fn new() -> Accuracy {
        Accuracy::default()
    }

    /// A hint of `class` was consumed.
    pub fn consumed(&mut self, class: Class) {
        let c = self.classes.entry(class).or_default();
        c.consumed += 1;
        c.resolved += 1;
    }

    /// A hint of `class` was withdrawn unread.
    pub fn wrong(&mut self, class: Class) {
        self.classes.entry(class).or_default().resolved += 1;
    }

    /// The counts of `class`.
    pub fn counts(&self, class: Class) -> Counts {
        self.classes.get(&class).copied().unwrap_or_default()
    }

    /// The accuracy of `class`: (consumed + 1) / (resolved + 2), the mean of a uniform prior
    /// updated by what was seen, so a class with no history starts at one half and one wrong
    /// hint does not rule a class out for ever.
    pub fn of(&self, class: Class) -> f64 {
        let c = self.counts(class);
        (c.consumed as f64 + 1.0) / (c.resolved as f64 + 2.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accuracy_follows_what_was_consumed() {
        let mut a = Accuracy::new();
        assert_eq!(a.of(3), 0.5);
        for _ in 0..8 {
            a.consumed(3);
        }
        a.wrong(3);
        a.wrong(3);
        assert_eq!(
            a.counts(3),
            Counts {
                consumed: 8,
                resolved: 10
            }
        );
        assert!((a.of(3) - 0.75).abs() < 1e-12);
        assert_eq!(a.of(4), 0.5);
    }
}
