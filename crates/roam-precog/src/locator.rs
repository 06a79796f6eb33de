//! Where an action happened on a page: element locators.
//!
//! The thesis (Sanadhya, ch. V) names an element by its `id` when it has one, else by the
//! nearest ancestor with an `id`, the path of child indices from that ancestor down, and one
//! attribute that tells the element apart ([`Locator::Anchored`]). Content changes by the hour
//! but a site's layout rarely does, so that name still finds "the third headline box"
//! tomorrow, whatever headline it holds.
//!
//! One name breaks when the layout moves by one element, so roam records several candidates
//! for each action ([`Locators`]) and tries them in order when it replays: the id, the
//! thesis's anchored path, a CSS path, the element's text, one stable attribute. A candidate
//! counts only if it matches **exactly one** element: a candidate that matches several is
//! skipped, never guessed. The browser side of this is `browser/js/resolve.js`; this module
//! holds the names, their validation (they come from pages, so they are untrusted) and the
//! key by which actions are merged in the action trees.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Longest text kept in any locator field, in bytes: a page controls these strings.
pub const MAX_FIELD: usize = 256;
/// Deepest child-index path kept.
pub const MAX_PATH: usize = 64;
/// Most candidates kept per action.
pub const MAX_CANDIDATES: usize = 8;

/// One way to find an element again.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Locator {
    /// The element's `id`, unique on the page when recorded.
    Id {
        /// The id.
        id: String,
    },
    /// The thesis's locator: from the nearest ancestor with an id (`None`: from `<body>`), the
    /// index among element children at each step down, and one attribute (name, value) the
    /// element must still carry.
    Anchored {
        /// The ancestor's id, or `None` for the document's body.
        anchor: Option<String>,
        /// Child indices, outermost first.
        path: Vec<u32>,
        /// A distinguishing attribute (e.g. `href`, `name`, `class`), if the element has one.
        attr: Option<(String, String)>,
    },
    /// A CSS selector of tag names and `:nth-of-type`, from the nearest id ancestor.
    Css {
        /// The selector.
        selector: String,
    },
    /// The element's tag and its visible text, whitespace collapsed.
    Text {
        /// Lower-case tag name.
        tag: String,
        /// The text.
        text: String,
    },
    /// The element's tag and one stable attribute (`name`, `aria-label`, `title`, `href`).
    Attr {
        /// Lower-case tag name.
        tag: String,
        /// Attribute name.
        name: String,
        /// Attribute value.
        value: String,
    },
}

/// Why a locator read from a page or a file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LocatorError {
    /// A field longer than [`MAX_FIELD`].
    #[error("{what} is {len} bytes (at most {MAX_FIELD})")]
    TooLong {
        /// Which field.
        what: &'static str,
        /// Its length.
        len: usize,
    },
    /// A child-index path deeper than [`MAX_PATH`].
    #[error("a child-index path {0} deep (at most {MAX_PATH})")]
    TooDeep(usize),
    /// An empty id, tag, selector or attribute name.
    #[error("an empty {0}")]
    Empty(&'static str),
    /// No candidates, or more than [`MAX_CANDIDATES`].
    #[error("{0} locator candidates (1 to {MAX_CANDIDATES})")]
    Count(usize),
}

fn field(what: &'static str, s: &str, may_be_empty: bool) -> Result<(), LocatorError> {
    if s.len() > MAX_FIELD {
        return Err(LocatorError::TooLong { what, len: s.len() });
    }
    if s.is_empty() && !may_be_empty {
        return Err(LocatorError::Empty(what));
    }
    Ok(())
}

impl Locator {
    /// Check the bounds: every string at most [`MAX_FIELD`] bytes, paths at most
    /// [`MAX_PATH`] deep, names not empty.
    pub fn validate(&self) -> Result<(), LocatorError> {
        match self {
            Locator::Id { id } => field("id", id, false),
            Locator::Anchored { anchor, path, attr } => {
                if let Some(a) = anchor {
                    field("anchor id", a, false)?;
                }
                if path.len() > MAX_PATH {
                    return Err(LocatorError::TooDeep(path.len()));
                }
                if let Some((n, v)) = attr {
                    field("attribute name", n, false)?;
                    field("attribute value", v, true)?;
                }
                Ok(())
            }
            Locator::Css { selector } => field("selector", selector, false),
            Locator::Text { tag, text } => {
                field("tag", tag, false)?;
                field("text", text, false)
            }
            Locator::Attr { tag, name, value } => {
                field("tag", tag, false)?;
                field("attribute name", name, false)?;
                field("attribute value", value, true)
            }
        }
    }
}

impl fmt::Display for Locator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Locator::Id { id } => write!(f, "#{id}"),
            Locator::Anchored { anchor, path, attr } => {
                write!(
                    f,
                    "{}",
                    anchor.as_deref().map_or("body".into(), |a| format!("#{a}"))
                )?;
                for i in path {
                    write!(f, "/{i}")?;
                }
                if let Some((n, v)) = attr {
                    write!(f, "[{n}={v:?}]")?;
                }
                Ok(())
            }
            Locator::Css { selector } => write!(f, "css {selector}"),
            Locator::Text { tag, text } => write!(f, "{tag} {text:?}"),
            Locator::Attr { tag, name, value } => write!(f, "{tag}[{name}={value:?}]"),
        }
    }
}

/// The candidate locators of one action, most specific first.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "Vec<Locator>", into = "Vec<Locator>")]
pub struct Locators(Vec<Locator>);

impl Locators {
    /// Candidates in the order to try them; each is validated, and there must be 1 to
    /// [`MAX_CANDIDATES`].
    pub fn new(candidates: Vec<Locator>) -> Result<Self, LocatorError> {
        if candidates.is_empty() || candidates.len() > MAX_CANDIDATES {
            return Err(LocatorError::Count(candidates.len()));
        }
        for c in &candidates {
            c.validate()?;
        }
        Ok(Locators(candidates))
    }

    /// The candidates, in order.
    pub fn candidates(&self) -> &[Locator] {
        &self.0
    }

    /// The locator that names this action in the action trees: the first candidate (the id
    /// if the element had one, else the thesis's anchored path). Two recordings of "the same
    /// action" are the same tree node when their primary locators are equal.
    pub fn primary(&self) -> &Locator {
        &self.0[0]
    }
}

impl TryFrom<Vec<Locator>> for Locators {
    type Error = LocatorError;
    fn try_from(v: Vec<Locator>) -> Result<Self, LocatorError> {
        Locators::new(v)
    }
}

impl From<Locators> for Vec<Locator> {
    fn from(l: Locators) -> Vec<Locator> {
        l.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_checked() {
        assert!(Locator::Id {
            id: "x".repeat(MAX_FIELD + 1)
        }
        .validate()
        .is_err());
        assert_eq!(
            Locator::Anchored {
                anchor: None,
                path: vec![0; MAX_PATH + 1],
                attr: None
            }
            .validate(),
            Err(LocatorError::TooDeep(MAX_PATH + 1))
        );
        assert_eq!(Locators::new(vec![]).unwrap_err(), LocatorError::Count(0));
        assert_eq!(
            Locator::Text {
                tag: String::new(),
                text: "a".into()
            }
            .validate(),
            Err(LocatorError::Empty("tag"))
        );
    }

    #[test]
    fn json_round_trip_and_refusal() {
        let l = Locators::new(vec![
            Locator::Anchored {
                anchor: Some("news".into()),
                path: vec![2, 0],
                attr: Some(("class".into(), "headline".into())),
            },
            Locator::Text {
                tag: "a".into(),
                text: "Sports".into(),
            },
        ])
        .unwrap();
        let s = serde_json::to_string(&l).unwrap();
        assert_eq!(serde_json::from_str::<Locators>(&s).unwrap(), l);
        assert!(serde_json::from_str::<Locators>("[]").is_err());
        assert_eq!(l.primary().to_string(), "#news/2/0[class=\"headline\"]");
    }
}
