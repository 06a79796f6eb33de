//! Precog: prefetching by the user's recorded actions, replayed in a headless browser on WiFi
//! (Sanadhya's thesis, ch. V; `../shared/spec/sanadhya.md` §3; docs/precog.md).
//!
//! Web content changes by the hour, but a site's layout and a person's habits do not: the same
//! "Sports" tab, the same third headline box, every morning. Precog records *what the user
//! did* (which element, which event) rather than which URLs they fetched, and on WiFi replays
//! the likely actions in a headless browser, so that what they will reach for on cellular is
//! already in the browser's cache, and in the phone's dedup cache (asymmetric caching,
//! `roam-dedup`) where the URL changed but the bytes did not.
//!
//! The parts, in the order data flows:
//! - [`locator`] and [`action`]: what an action is: an element's candidate locators and an event;
//! - [`path`]: the browser's reports cut into paths (root page, then actions), sans-IO;
//! - [`forest`]: the action trees those paths build, with hit counters and their ageing;
//! - [`plan`]: what to replay: the thesis's top 25% of nodes;
//! - [`rules`]: the user's control per domain (record, replay, the one sign-in POST allowed);
//! - [`gate`]: when replay may run (WiFi, battery, CPU, disk);
//! - [`allowance`]: what replays may spend a day, across replays (bytes, modelled energy);
//! - [`store`]: the trees, rules and allowance on disk, private and written whole;
//! - [`browser`]: Chromium over the DevTools protocol: the recorder and the replayer.
//!
//! Everything but [`browser`] and [`gate::read`] is sans-IO.

pub mod action;
pub mod allowance;
pub mod browser;
pub mod forest;
pub mod gate;
pub mod locator;
pub mod path;
pub mod plan;
pub mod rules;
pub mod store;

pub use action::{Action, Event};
pub use allowance::Allowance;
pub use forest::Forest;
pub use locator::{Locator, Locators};
pub use path::{Path, PathCutter};
pub use plan::{plan, Plan, PlanConfig, Replay};
pub use rules::Rules;
pub use store::State;
