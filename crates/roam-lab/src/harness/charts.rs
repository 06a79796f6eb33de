//! The charts every study gets from its measured trials: per application a bar chart of its
//! interactive and of its background metric (the mean, its interval, every trial), and per
//! scenario the distribution of its events.

use anyhow::Result;

use crate::harness::plan::{App, Plan};
use crate::harness::results::Measured;
use crate::report::chart::{self, Bar};
use crate::report::compare::values;
use crate::report::{summarize, Row};

/// Write the charts of what was measured into `plan.out`: per application a bar chart of its
/// interactive and of its background metric (the mean, its interval, every trial), and per
/// scenario the distribution of its events ([`cdf_file`]).
pub fn charts(plan: &Plan, all: &[App], m: &Measured) -> Result<()> {
    let (rows, events) = (&m.rows, &m.events);
    for &a in &m.app_ix {
        let app = &all[a];
        for (metric, label, file) in [
            (app.interactive.0, app.interactive.1, "interactive"),
            (app.background.0, app.background.1, "background"),
        ] {
            let mut bars = Vec::new();
            for s in &plan.scenarios {
                for sys in &plan.systems {
                    let points = values(rows, app.name, s, sys.name(), metric);
                    let v = summarize(&points);
                    bars.push(Bar {
                        group: s.clone(),
                        series: sys.name().into(),
                        value: v.value(),
                        whisker: v.interval().map(|i| (i.lo, i.hi)),
                        note: v.some_unfinished().unwrap_or_default(),
                        points,
                    });
                }
            }
            let svg = chart::bar_chart(
                &format!(
                    "{}: {label}\nbars: mean of the trials (median where one did not finish); \
                     whiskers: its 95% interval (Student's t, or a bootstrap where t does not suit the trials); dots: the trials",
                    app.name
                ),
                label,
                &bars,
            );
            std::fs::write(plan.out.join(format!("{}-{file}.svg", app.name)), svg)?;
        }
        for s in &plan.scenarios {
            let curves = event_curves(plan, app, s, events);
            if curves.is_empty() {
                continue;
            }
            let svg = chart::cdf_chart(
                &format!(
                    "{} on {s}: {}\nevery event of every trial, pooled per system",
                    app.name, app.event.1
                ),
                app.event.1,
                &curves,
            );
            std::fs::write(plan.out.join(cdf_file(app, s)), svg)?;
        }
    }
    Ok(())
}

/// The distribution chart of `app`'s events on scenario `s`.
pub fn cdf_file(app: &App, s: &str) -> String {
    format!("{}-{s}-events.svg", app.name)
}

/// Each system's events of `app` on scenario `s`, pooled over its trials; none if no system
/// recorded any.
pub fn event_curves(plan: &Plan, app: &App, s: &str, events: &[Row]) -> Vec<chart::Curve> {
    let curves: Vec<chart::Curve> = plan
        .systems
        .iter()
        .map(|sys| chart::Curve {
            name: sys.name().into(),
            values: events
                .iter()
                .filter(|r| {
                    r.app == app.name
                        && r.scenario == s
                        && r.system == sys.name()
                        && r.metric == app.event.0
                })
                .map(|r| r.value)
                .collect(),
        })
        .collect();
    if curves.iter().all(|c| c.values.is_empty()) {
        return Vec::new();
    }
    curves
}
