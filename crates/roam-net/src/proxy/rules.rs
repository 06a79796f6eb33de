//! Which label a proxied connection gets ([`LabelRules`]): an unmodified program cannot label
//! its own traffic, so the proxy labels each connection by its destination port (mail in the
//! background, the web in the foreground, ...).

use std::collections::BTreeMap;

use thiserror::Error;

use crate::proto::Label;

/// Which label each destination port gets: a label per port, and a default for the rest.
///
/// Written as `roam net proxy` takes them: options `PORT=LABEL` ([`LabelRules::add_option`]),
/// and rules files of lines `PORT LABEL`, `*` for any port, `#` starting a comment
/// ([`LabelRules::add_file`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelRules {
    by_port: BTreeMap<u16, Label>,
    default: Label,
}

/// Why rules could not be read. Each message starts with where: `FILE:LINE`, `--label OPTION`
/// or `--default-label`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RulesError {
    /// A word where a label belongs is not one of the four labels.
    #[error(
        "{at}: `{word}` is not a label (foreground-small, foreground-large, background-small, \
         background-large)"
    )]
    NotALabel {
        /// Where.
        at: String,
        /// The word.
        word: String,
    },
    /// A word where a port belongs is not a port number (nor `*`, in a file).
    #[error("{at}: `{word}` is not a port (1-65535, or * in a rules file)")]
    NotAPort {
        /// Where.
        at: String,
        /// The word.
        word: String,
    },
    /// A rules file's line is not two words, `PORT LABEL`.
    #[error("{at}: expected `PORT LABEL`, got `{line}`")]
    NotARule {
        /// Where (`FILE:LINE`).
        at: String,
        /// The line, without its comment.
        line: String,
    },
    /// An option has no `=` between port and label.
    #[error("--label {option}: expected PORT=LABEL")]
    NotAnOption {
        /// The option's value.
        option: String,
    },
}

impl Default for LabelRules {
    /// Every connection `foreground-small`, as a program a user waits on would label it.
    fn default() -> Self {
        LabelRules::new(Label::ForegroundSmall)
    }
}

impl LabelRules {
    /// Every port labelled `default` until rules say otherwise.
    pub fn new(default: Label) -> LabelRules {
        LabelRules {
            by_port: BTreeMap::new(),
            default,
        }
    }

    /// Rules from `--label` options, a rules file (its name and text) and the default label's
    /// name, as `roam net proxy` takes them: the options take precedence over the file, whose
    /// `*` line takes precedence over `default`.
    pub fn parse(
        options: &[String],
        file: Option<(&str, &str)>,
        default: &str,
    ) -> Result<Self, RulesError> {
        let mut rules = LabelRules::new(label(default, "--default-label")?);
        if let Some((name, text)) = file {
            rules.add_file(name, text)?;
        }
        for o in options {
            rules.add_option(o)?;
        }
        Ok(rules)
    }

    /// Connections to `port` get `label`.
    pub fn set(&mut self, port: u16, label: Label) {
        self.by_port.insert(port, label);
    }

    /// Connections to ports no rule names get `label`.
    pub fn set_default(&mut self, label: Label) {
        self.default = label;
    }

    /// Add a rules file's lines, `PORT LABEL` (`*` for the default; `#` starts a comment);
    /// `name` names the file in errors.
    pub fn add_file(&mut self, name: &str, text: &str) -> Result<(), RulesError> {
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let at = format!("{name}:{}", i + 1);
            let mut words = line.split_whitespace();
            let (Some(port), Some(l), None) = (words.next(), words.next(), words.next()) else {
                return Err(RulesError::NotARule {
                    at,
                    line: line.into(),
                });
            };
            let l = label(l, &at)?;
            if port == "*" {
                self.default = l;
            } else {
                self.set(self::port(port, &at)?, l);
            }
        }
        Ok(())
    }

    /// Add one option, `PORT=LABEL`.
    pub fn add_option(&mut self, option: &str) -> Result<(), RulesError> {
        let (p, l) = option
            .split_once('=')
            .ok_or_else(|| RulesError::NotAnOption {
                option: option.into(),
            })?;
        let at = format!("--label {option}");
        let p = port(p, &at)?;
        self.set(p, label(l, &at)?);
        Ok(())
    }

    /// The label of a connection to `port`.
    pub fn label(&self, port: u16) -> Label {
        self.by_port.get(&port).copied().unwrap_or(self.default)
    }
}

fn label(word: &str, at: &str) -> Result<Label, RulesError> {
    Label::parse(word).ok_or_else(|| RulesError::NotALabel {
        at: at.into(),
        word: word.into(),
    })
}

fn port(word: &str, at: &str) -> Result<u16, RulesError> {
    word.parse::<u16>().map_err(|_| RulesError::NotAPort {
        at: at.into(),
        word: word.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_come_from_options_then_the_rules_file_then_the_default() {
        let file = "# mail is background\n993 background-large\n* background-small\n80 foreground-small # web\n";
        let r = LabelRules::parse(
            &["443=foreground-large".into()],
            Some(("rules", file)),
            "foreground-small",
        )
        .unwrap();
        assert_eq!(r.label(993), Label::BackgroundLarge);
        assert_eq!(r.label(80), Label::ForegroundSmall);
        assert_eq!(r.label(443), Label::ForegroundLarge);
        assert_eq!(r.label(22), Label::BackgroundSmall);
        let e = LabelRules::parse(&[], Some(("rules", "80 fast\n")), "foreground-small")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("rules:1: "), "{e}");
        let e = LabelRules::parse(&["x=foreground-small".into()], None, "foreground-small")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`x` is not a port"), "{e}");
        assert_eq!(
            LabelRules::parse(&["80".into()], None, "foreground-small"),
            Err(RulesError::NotAnOption {
                option: "80".into()
            })
        );
        assert!(matches!(
            LabelRules::parse(&[], Some(("f", "80 foreground-small extra")), "fg-small"),
            Err(RulesError::NotARule { .. })
        ));
    }
}
