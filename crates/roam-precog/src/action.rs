//! What the user did: an element (by its [`Locators`]) and an [`Event`] on it.
//!
//! The thesis records three kinds of events (ch. V): clicks, checkbox changes, and form
//! submissions that issue a GET. A submission that issues a POST changes something on the
//! server: recording stops the path there and replay never sends one (except a sign-in the
//! user allowed, see [`crate::rules`]).

use crate::locator::{LocatorError, Locators, MAX_FIELD};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Most fields kept for one GET form submission.
pub const MAX_FIELDS: usize = 32;

/// The event of an action.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A click (a link, a button, a tab, anything the page listens on).
    Click,
    /// A checkbox or radio button set to `checked`.
    Check {
        /// The state after the change.
        checked: bool,
    },
    /// A form submitted with method GET, with the values of its named fields (password
    /// fields are never recorded: the recorder leaves them out).
    Submit {
        /// `(name, value)` pairs, in the form's order.
        fields: Vec<(String, String)>,
    },
}

/// One recorded action: where and what.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Action {
    /// The element.
    pub locators: Locators,
    /// The event.
    #[serde(flatten)]
    pub event: Event,
}

impl Action {
    /// Check the bounds of what a page sent: the locators' (see [`Locators::new`]) and at most
    /// [`MAX_FIELDS`] form fields of at most [`MAX_FIELD`] bytes each.
    pub fn validate(&self) -> Result<(), LocatorError> {
        for l in self.locators.candidates() {
            l.validate()?;
        }
        if let Event::Submit { fields } = &self.event {
            if fields.len() > MAX_FIELDS {
                return Err(LocatorError::Count(fields.len()));
            }
            for (n, v) in fields {
                for (what, s) in [("field name", n), ("field value", v)] {
                    if s.len() > MAX_FIELD {
                        return Err(LocatorError::TooLong { what, len: s.len() });
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether `other` is the same action for the action trees: the same primary locator and
    /// the same event.
    pub fn same_as(&self, other: &Action) -> bool {
        self.locators.primary() == other.locators.primary() && self.event == other.event
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = self.locators.primary();
        match &self.event {
            Event::Click => write!(f, "click {l}"),
            Event::Check { checked } => {
                write!(f, "{} {l}", if *checked { "check" } else { "uncheck" })
            }
            Event::Submit { fields } => {
                write!(f, "submit {l}")?;
                for (n, v) in fields {
                    write!(f, " {n}={v:?}")?;
                }
                Ok(())
            }
        }
    }
}

/// A click on the element with id `id`: the tests' action.
#[cfg(test)]
pub(crate) fn click(id: &str) -> Action {
    Action {
        locators: Locators::new(vec![crate::locator::Locator::Id { id: id.into() }]).unwrap(),
        event: Event::Click,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_shape_is_flat() {
        let a = Action {
            event: Event::Submit {
                fields: vec![("q".into(), "weather".into())],
            },
            ..click("search")
        };
        let s = serde_json::to_string(&a).unwrap();
        assert!(s.contains("\"event\":\"submit\""), "{s}");
        assert_eq!(serde_json::from_str::<Action>(&s).unwrap(), a);
        assert_eq!(a.to_string(), "submit #search q=\"weather\"");
    }

    #[test]
    fn sameness_is_locator_and_event() {
        assert!(click("a").same_as(&click("a")));
        assert!(!click("a").same_as(&click("b")));
        let check = Action {
            event: Event::Check { checked: true },
            ..click("a")
        };
        assert!(!click("a").same_as(&check));
    }

    #[test]
    fn too_many_fields_refused() {
        let a = Action {
            event: Event::Submit {
                fields: vec![("n".into(), "v".into()); MAX_FIELDS + 1],
            },
            ..click("f")
        };
        assert!(a.validate().is_err());
    }
}
