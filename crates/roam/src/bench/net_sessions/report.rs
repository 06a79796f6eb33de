//! What the parent derives from its children's figures: the aggregates against one session
//! alone, and the targets.

use serde_json::{json, Map, Value};

/// The targets of issue 48 ("at the scale of a relay"), reported, not tuned toward.
const TARGET_KIB: f64 = 64.0;
const TARGET_AGGREGATE_1000: f64 = 0.8;
const TARGET_WAKEUPS: f64 = 1.0;

/// Add to a stack's figures `v` one session's rate alone (`alone`: the figures of a run with
/// one session) and the aggregates as ratios to it.
pub(super) fn add_alone(v: &mut Value, alone: &Value) {
    let runs = [
        &alone["aggregate_gbit"]["1"],
        &alone["one_session_gbit_after"],
    ];
    let runs: Vec<f64> = runs.iter().filter_map(|r| r.as_f64()).collect();
    if runs.is_empty() {
        v["one_session_alone_error"] = alone["error"].clone();
        return;
    }
    let one = runs.iter().sum::<f64>() / runs.len() as f64;
    let ratios: Map<String, Value> = v["aggregate_vs_one"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.keys())
        .map(|k| {
            let r = v["aggregate_gbit"][k].as_f64().map(|g| g / one);
            (k.clone(), json!(r.filter(|r| r.is_finite())))
        })
        .collect();
    v["one_session_alone_gbit"] = json!(one);
    v["aggregate_vs_one_alone"] = Value::Object(ratios);
}

/// The targets and whether roam meets them (`null`: not measured). The aggregate
/// counts as met only against both references, one session among the idle ones and one
/// alone: idle sessions that starve even one active session would otherwise pass by
/// dividing by the starved figure.
pub(super) fn targets(roam: &Value) -> Value {
    let f = |v: &Value| v.as_f64();
    let kib = f(&roam["idle_kib_per_session"]);
    let agg = match (
        f(&roam["aggregate_vs_one"]["1000"]),
        f(&roam["aggregate_vs_one_alone"]["1000"]),
    ) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let wake = match (
        f(&roam["idle_wakeups_per_session_per_s"]),
        f(&roam["idle_wakeups_per_session_per_s_at_10"]),
    ) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    json!({
        "idle_kib_per_session_at_most": TARGET_KIB,
        "aggregate_vs_one_1000_at_least": TARGET_AGGREGATE_1000,
        "idle_wakeups_per_session_per_s_at_most": TARGET_WAKEUPS,
        "roam_met": {
            "idle_kib_per_session": kib.map(|k| k <= TARGET_KIB),
            "aggregate_vs_one_1000": agg.map(|a| a >= TARGET_AGGREGATE_1000),
            "idle_wakeups_per_session_per_s": wake.map(|w| w <= TARGET_WAKEUPS),
        },
    })
}
