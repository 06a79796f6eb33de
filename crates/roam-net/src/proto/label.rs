//! Labels: the application's statement of intent for an IROB (paper §3.1).
//!
//! Two axes: *interactivity* (foreground: a user-visible event waits on it; background: it may be
//! deferred) and *size* (small: latency-dominated; large: bandwidth-dominated). The application
//! decides what is small. The label travels with every chunk and is returned by `recv`.

use std::fmt;

/// One of the four labels of Intentional Networking.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Label {
    /// A user waits; one round trip dominates (an RPC, a keystroke).
    ForegroundSmall = 0,
    /// A user waits; the transfer time dominates (opening a large message).
    ForegroundLarge = 1,
    /// Opportunistic and short (a sensor summary).
    BackgroundSmall = 2,
    /// Opportunistic bulk (prefetching, write-back, raw samples).
    BackgroundLarge = 3,
}

impl Label {
    /// Every label, highest priority first.
    pub const ALL: [Label; 4] = [
        Label::ForegroundSmall,
        Label::ForegroundLarge,
        Label::BackgroundSmall,
        Label::BackgroundLarge,
    ];

    /// Priority rank: 0 is served first. Foreground before background, small before large.
    pub fn rank(self) -> usize {
        self as usize
    }

    /// Whether a user-visible event waits on this data.
    pub fn is_foreground(self) -> bool {
        matches!(self, Label::ForegroundSmall | Label::ForegroundLarge)
    }

    /// Whether the application said the data is latency-dominated.
    pub fn is_small(self) -> bool {
        matches!(self, Label::ForegroundSmall | Label::BackgroundSmall)
    }

    /// The wire encoding.
    pub fn to_wire(self) -> u8 {
        self as u8
    }

    /// Decode the wire encoding; `None` for anything but 0..=3.
    pub fn from_wire(b: u8) -> Option<Label> {
        Label::ALL.get(b as usize).copied()
    }

    /// Parse `fg-small`, `fg-large`, `bg-small`, `bg-large` (also `foreground-small`, ...).
    pub fn parse(text: &str) -> Option<Label> {
        match text.trim().to_ascii_lowercase().as_str() {
            "fg-small" | "foreground-small" => Some(Label::ForegroundSmall),
            "fg-large" | "foreground-large" => Some(Label::ForegroundLarge),
            "bg-small" | "background-small" => Some(Label::BackgroundSmall),
            "bg-large" | "background-large" => Some(Label::BackgroundLarge),
            _ => None,
        }
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Label::ForegroundSmall => "fg-small",
            Label::ForegroundLarge => "fg-large",
            Label::BackgroundSmall => "bg-small",
            Label::BackgroundLarge => "bg-large",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_and_text_round_trip() {
        for l in Label::ALL {
            assert_eq!(Label::from_wire(l.to_wire()), Some(l));
            assert_eq!(Label::parse(&l.to_string()), Some(l));
        }
        assert_eq!(Label::from_wire(4), None);
        assert_eq!(Label::parse("urgent"), None);
        assert!(Label::ForegroundLarge.rank() < Label::BackgroundSmall.rank());
    }
}
