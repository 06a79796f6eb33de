//! What a proxy may ask of a relay beyond carrying bytes: asymmetric caching (`dedup`,
//! [`super::dedup`]) and compression (`zstd`, `zstd-dict`, [`super::compress`]).
//!
//! The proxy asks in its request's label word, `LABEL+FEATURE+FEATURE`, which the request's
//! proof covers. The relay accepts those it offers by naming them after its answer's proof,
//! `ok PROOF FEATURE ...`, the proof made over `TARGET FEATURE ...` instead of the target
//! alone, so an on-path change of either side's words fails a proof. A feature the relay does
//! not know or offer is left out of its answer and the connection goes on without it; the
//! proxy refuses an answer naming one it did not ask for. (A relay from before features reads
//! `LABEL+dedup` as no label and refuses: turn the features off at the proxy.)

use super::compress::{ZSTD, ZSTD_DICT};
use super::dedup;

/// Features of one connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Features {
    /// Asymmetric caching of the downstream.
    pub dedup: bool,
    /// The downstream compressed with zstd.
    pub zstd: bool,
    /// ... with the previous response to the same request as a dictionary.
    pub zstd_dict: bool,
}

impl Features {
    /// Features named by `words` (unknown words are skipped: a relay does not accept them).
    pub fn parse<'a>(words: impl Iterator<Item = &'a str>) -> Features {
        let mut f = Features::default();
        for w in words {
            match w {
                dedup::WORD => f.dedup = true,
                ZSTD => f.zstd = true,
                ZSTD_DICT => f.zstd_dict = true,
                _ => {}
            }
        }
        f
    }

    /// The features' words, in a fixed order.
    pub fn words(self) -> Vec<&'static str> {
        let mut w = Vec::new();
        if self.dedup {
            w.push(dedup::WORD);
        }
        if self.zstd {
            w.push(ZSTD);
        }
        if self.zstd_dict {
            w.push(ZSTD_DICT);
        }
        w
    }

    /// Those of `self` also in `other`.
    pub fn and(self, other: Features) -> Features {
        Features {
            dedup: self.dedup && other.dedup,
            zstd: self.zstd && other.zstd,
            zstd_dict: self.zstd_dict && other.zstd_dict,
        }
    }

    /// Whether every feature of `self` is in `other`.
    pub fn within(self, other: Features) -> bool {
        self.and(other) == self
    }

    /// `LABEL+FEATURE...`, the request's label word.
    pub fn label_word(self, label: &str) -> String {
        let mut s = label.to_string();
        for w in self.words() {
            s.push('+');
            s.push_str(w);
        }
        s
    }

    /// A request's label word split into the label and the features asked.
    pub fn split_label(word: &str) -> (&str, Features) {
        let mut parts = word.split('+');
        let label = parts.next().unwrap_or("");
        (label, Features::parse(parts))
    }

    /// What the answer's proof covers: `TARGET FEATURE ...`.
    pub fn proved(self, target: &str) -> String {
        let mut s = target.to_string();
        for w in self.words() {
            s.push(' ');
            s.push_str(w);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_words_round_trip() {
        let f = Features {
            dedup: true,
            zstd: true,
            zstd_dict: false,
        };
        let w = f.label_word("foreground-small");
        assert_eq!(w, "foreground-small+dedup+zstd");
        assert_eq!(Features::split_label(&w), ("foreground-small", f));
        assert_eq!(Features::split_label("x"), ("x", Features::default()));
        // The form of the answer before compression existed.
        assert_eq!(
            f.and(Features::parse(["dedup"].into_iter())).proved("h:1"),
            "h:1 dedup"
        );
        assert!(!f.within(Features::parse(["zstd-dict"].into_iter())));
    }
}
