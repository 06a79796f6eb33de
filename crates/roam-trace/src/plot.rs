//! Capacity and availability over time, as an SVG: one panel per link, downlink and uplink
//! capacity per second, availability shaded.

use crate::scenario::Scenario;
use roam_core::plot::{Figure, Panel, Series};
use roam_core::Time;
use std::time::Duration;

/// Draw a scenario's links over `[0, duration)`.
pub fn scenario_figure(s: &Scenario, duration: Duration) -> Figure {
    let end = Time::ZERO + duration;
    let panels = s
        .links
        .iter()
        .map(|l| {
            let secs = l.trace.per_second(duration);
            let pts = |f: &dyn Fn(&crate::link::SecondSample) -> f64| {
                secs.iter()
                    .map(|x| {
                        (
                            x.t_s as f64,
                            if f(x).is_finite() { f(x) / 1000.0 } else { 0.0 },
                        )
                    })
                    .collect()
            };
            Panel {
                title: format!(
                    "{} ({} down, {} up, RTT {:.0} ms at start)",
                    l.name,
                    l.trace.down.describe(),
                    l.trace.up.describe(),
                    l.trace.delay.value_at(Time::ZERO).as_secs_f64() * 2000.0
                ),
                y_label: "capacity (Mbit/s)".into(),
                series: vec![
                    Series {
                        name: "down".into(),
                        points: pts(&|x| x.down_kbps),
                    },
                    Series {
                        name: "up".into(),
                        points: pts(&|x| x.up_kbps),
                    },
                ],
                bands: l
                    .trace
                    .availability
                    .true_intervals(Time::ZERO, end)
                    .into_iter()
                    .map(|(a, b)| (a.as_secs_f64(), b.as_secs_f64()))
                    .collect(),
                band_label: Some("available".into()),
            }
        })
        .collect();
    Figure {
        title: format!("scenario {}", s.name),
        x_label: "time (s)".into(),
        panels,
    }
}
