//! What the paper reported for each cell we reproduce (Higgins et al., MobiCom 2010, §5; the
//! digest is `../shared/spec/intentional-networking.md`, "Evaluation"). The paper reports
//! roam's advantage as ratios against its one-link baselines, so that is what is compared.
//! It did not measure MPTCP.

/// The paper's figure for `app` on `scenario`, comparing roam with `system`, if it gave one.
pub fn claim(app: &str, scenario: &str, system: &str) -> Option<&'static str> {
    let traces = scenario.starts_with("vehicular");
    Some(match (app, system) {
        ("fs", "aggregation") if scenario == "hotspot" => {
            "interactive 1.14x faster (14%); write-back 9% sooner"
        }
        ("fs", "best-latency") if scenario == "hotspot" => "interactive 3x faster",
        ("fs", "best-bandwidth") if scenario == "hotspot" => "interactive 4x faster",
        ("fs", "aggregation") if scenario == "intermittent" => {
            "interactive latency 40% lower (1.67x faster)"
        }
        ("fs", "aggregation") if traces => "interactive 5-8x faster; write-back 1-7% longer",
        ("fs", "best-latency" | "best-bandwidth") if traces => "interactive 7-8x faster",
        ("mail", "aggregation") if scenario == "hotspot" => {
            "on-demand 5x faster; background 18% longer"
        }
        ("mail", "aggregation") if scenario == "intermittent" => {
            "on-demand 8x faster; background 1% longer"
        }
        ("mail", "best-latency" | "best-bandwidth") if !traces => "on-demand 8-23x faster",
        ("mail", "aggregation") if traces => "on-demand 7-13x faster; background within 1-3%",
        ("sensing", "aggregation") if scenario == "hotspot" => {
            "urgent equal (~30 ms); bulk within 0.5% of 29 KB/s"
        }
        ("sensing", "best-latency") if scenario == "hotspot" => {
            ">4x (urgent or bulk; text unclear)"
        }
        ("sensing", "aggregation") if scenario == "intermittent" => {
            "urgent 1.41x faster (41%); bulk 25% higher"
        }
        ("sensing", "aggregation") if traces => "urgent 2-5x faster; bulk 1-6% higher",
        ("sensing", "best-latency" | "best-bandwidth") if traces => "bulk up to 29% higher",
        (_, "mptcp") => "not measured in the paper",
        _ => return None,
    })
}

/// The paper's interactive advantage of roam over idealized aggregation for `app` on
/// `scenario`, as a ratio of aggregation's interactive metric to roam's (1.0 where the paper
/// found them equal; the lower end where it gave a range). The issue asks us to check, not
/// tune, that roam reaches it.
pub fn aggregation_ratio(app: &str, scenario: &str) -> Option<f64> {
    let traces = scenario.starts_with("vehicular");
    Some(match (app, scenario) {
        ("fs", "hotspot") => 1.14,
        ("fs", "intermittent") => 1.0 / 0.6,
        ("fs", _) if traces => 5.0,
        ("mail", "hotspot") => 5.0,
        ("mail", "intermittent") => 8.0,
        ("mail", _) if traces => 7.0,
        ("sensing", "hotspot") => 1.0,
        ("sensing", "intermittent") => 1.41,
        ("sensing", _) if traces => 2.0,
        _ => return None,
    })
}

/// How much worse than idealized aggregation roam's background metric may be (the paper's
/// background results were within 7% of aggregation or better).
pub const BACKGROUND_WITHIN: f64 = 0.07;

/// The paper's trace table (its Table 2), for the report's side-by-side with ours.
pub const TRACE_TABLE: &str = "\
| trace | 3G down median / max | 3G up median / max | WiFi available | WiFi session median / longest | length |
|---|---|---|---|---|---|
| paper trace 1 | 382 kbit/s / 1.3 Mbit/s | 57 / 78 kbit/s | 7% | 11 s / 72 s | 138 min |
| paper trace 2 | 368 kbit/s / 1.2 Mbit/s | 40 / 74 kbit/s | 27% | 7 s / 131 s | 36 min |
";
