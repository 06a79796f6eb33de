//! The thesis's experiments (ch. III §3.5: Table 4, Fig. 5 and Fig. 6) as runs of the ns-3
//! program: each experiment is a list of points, each point the program's options, and each
//! point runs every system of the experiment.

use crate::studies::afc::paper::TABLE4;

/// The one-way delay the thesis uses everywhere but the RTT sweep: RTT 530 ms.
const RTT_S: f64 = 0.53;

/// One of the thesis's experiments.
#[derive(Debug)]
pub struct Experiment {
    /// Its name (`--apps`), the `app` column of `trials.csv`.
    pub name: &'static str,
    /// The report's heading.
    pub title: &'static str,
    /// What the thesis reports for it, in its words and numbers.
    pub thesis: &'static str,
    /// What its points vary.
    pub axis: &'static str,
    /// The systems each point runs: `ns3`, `tcp`, `afc` on one link; `mix` on the dumbbell
    /// (the point says how many flows are AFC).
    pub systems: &'static [&'static str],
    /// Its points.
    pub points: Vec<Point>,
    /// Whether it is the dumbbell (per-flow shares) rather than one link.
    pub dumbbell: bool,
}

/// One point of an experiment: the program's options.
#[derive(Debug)]
pub struct Point {
    /// Its label (the `scenario` column of `trials.csv`), e.g. `afc-s2` or `rtt=100ms`.
    pub label: String,
    /// `--key=value` options beyond the system, seed and duration.
    pub args: Vec<(&'static str, String)>,
    /// The ideal throughput per flow, Mbit/s: the smaller of the mean network and read rates
    /// (the thesis's definition).
    pub ideal_mbps: f64,
}

/// The mean of a rate pattern.
fn mean(p: &[f64]) -> f64 {
    p.iter().sum::<f64>() / p.len() as f64
}

fn pattern(p: &[f64]) -> String {
    p.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// A one-link point: read and network patterns, buffer (bytes), RTT (s), extra options.
fn link(label: String, read: &[f64], net: &[f64], buffer: u64, rtt: f64) -> Point {
    Point {
        label,
        args: vec![
            ("read", pattern(read)),
            ("net", pattern(net)),
            ("buffer", buffer.to_string()),
            ("rtt", rtt.to_string()),
        ],
        ideal_mbps: mean(read).min(mean(net)),
    }
}

/// The thesis's buffer rule: `min(mean network rate, mean read rate) * RTT`, in bytes.
fn rule_buffer(read: &[f64], net: &[f64], rtt: f64) -> u64 {
    (mean(read).min(mean(net)) * 1e6 / 8.0 * rtt)
        .round()
        .max(1448.0) as u64
}

/// Table 4's network pattern of a scenario (the emulator's, so both labs run the same).
fn network(scenario: &str) -> Vec<f64> {
    roam_trace::scenario::afc_network(scenario)
        .unwrap_or(&[])
        .iter()
        .map(|&m| m as f64)
        .collect()
}

/// Table 4's five scenarios at a bottleneck queue of `queue` packets.
fn table4(queue: u32) -> Vec<Point> {
    TABLE4
        .iter()
        .map(|t| {
            let mut p = link(
                t.scenario.to_string(),
                t.read_mbps,
                &network(t.scenario),
                t.buffer,
                RTT_S,
            );
            p.ideal_mbps = t.ideal_mbps;
            p.args.push(("queue", queue.to_string()));
            p
        })
        .collect()
}

/// The dumbbell (Fig. 4): `flows` flows, `afc` of them AFC, the rest default TCP.
fn dumbbell(label: String, flows: u32, afc: u32, buffer: u64, queue: u32) -> Point {
    let (read, net) = ([0.0, 6.0, 6.0], [2.0, 4.0, 4.0]);
    Point {
        label,
        args: vec![
            ("topology", "dumbbell".into()),
            ("flows", flows.to_string()),
            ("afcFlows", afc.to_string()),
            ("others", "tcp".into()),
            ("read", pattern(&read)),
            ("net", pattern(&net)),
            ("buffer", buffer.to_string()),
            ("rtt", RTT_S.to_string()),
            ("queue", queue.to_string()),
        ],
        ideal_mbps: mean(&net) / f64::from(flows),
    }
}

/// Every experiment, in the thesis's order.
pub fn all() -> Vec<Experiment> {
    let s = |name: &str| {
        TABLE4
            .iter()
            .find(|t| t.scenario == name)
            .expect("Table 4 has the scenario")
    };
    let (s2, s3, s4) = (s("afc-s2"), s("afc-s3"), s("afc-s4"));
    let one_link = &["tcp", "afc"][..];
    vec![
        Experiment {
            name: "table4",
            title: "Table 4: the five scenarios (Fig. 5a)",
            thesis: "AFC +50% (S5) to >= +100% (the others) over default TCP, up to 0.85 of \
                     ideal; default TCP at most 0.60 (S2 0.36, S3 0.44, S5 0.27)",
            axis: "scenario",
            systems: &["ns3", "tcp", "afc"],
            points: table4(1000),
            dumbbell: false,
        },
        Experiment {
            name: "table4-q100",
            title: "Table 4 with a 100-packet bottleneck queue",
            thesis: "(the thesis does not give its queue; this shows what a shallow one does)",
            axis: "scenario",
            systems: one_link,
            points: table4(100),
            dumbbell: false,
        },
        Experiment {
            name: "fairness",
            title: "Fairness: 10 flows, 0 to 10 of them AFC (Fig. 5b)",
            thesis: "default flows' mean unchanged as AFC flows are added; AFC's mean peaks \
                     with one AFC flow and converges to 0.33 Mbit/s",
            axis: "AFC flows of 10",
            systems: &["mix"],
            points: (0..=10)
                .map(|k| dumbbell(format!("afc={k}"), 10, k, 22_000, 1000))
                .collect(),
            dumbbell: true,
        },
        Experiment {
            name: "fairness-q100",
            title: "Fairness with a 100-packet bottleneck queue",
            thesis: "(as Fig. 5b; the thesis does not give its queue)",
            axis: "AFC flows of 10",
            systems: &["mix"],
            points: (0..=10)
                .map(|k| dumbbell(format!("afc={k}"), 10, k, 22_000, 100))
                .collect(),
            dumbbell: true,
        },
        Experiment {
            name: "fairness-ns2",
            title: "Fairness with NS2's default bottleneck queue (50 packets of 1000 bytes: 34 of 1448)",
            thesis: "(as Fig. 5b; NS2's default drop-tail queue, which the thesis's set-up \
                     presumably kept)",
            axis: "AFC flows of 10",
            systems: &["mix"],
            points: (0..=10)
                .map(|k| dumbbell(format!("afc={k}"), 10, k, 22_000, 34))
                .collect(),
            dumbbell: true,
        },
        Experiment {
            name: "afc-afc",
            title: "AFC with itself: 1 to 10 AFC flows (Fig. 5c)",
            thesis: "per-flow throughputs cluster around the mean; buffers from 213 KB for one \
                     flow to 22 KB for ten",
            axis: "AFC flows",
            systems: &["mix"],
            points: (1..=10)
                .map(|n| dumbbell(format!("flows={n}"), n, n, 213_000 / u64::from(n), 1000))
                .collect(),
            dumbbell: true,
        },
        Experiment {
            name: "rtt",
            title: "Round-trip time, scenario 2 (Fig. 6a)",
            thesis: "AFC > 2x default at every RTT, 0.83-0.96 of ideal, a dip at 500 ms",
            axis: "RTT",
            systems: one_link,
            points: [10, 20, 50, 100, 200, 300, 530, 750, 1000]
                .into_iter()
                .map(|ms| {
                    let rtt = f64::from(ms) / 1000.0;
                    let net = network("afc-s2");
                    let b = rule_buffer(s2.read_mbps, &net, rtt);
                    link(format!("rtt={ms}ms"), s2.read_mbps, &net, b, rtt)
                })
                .collect(),
            dumbbell: false,
        },
        Experiment {
            name: "period",
            title: "Read fluctuation period, scenario 4 (Fig. 6b)",
            thesis: "AFC dips from 1 to 2 RTT; gain about 100% when fluctuating fast, 20% when \
                     steady; default rises with the period",
            axis: "period (RTTs)",
            systems: one_link,
            points: period_points(s4.read_mbps, s4.buffer),
            dumbbell: false,
        },
        Experiment {
            name: "period-peak8",
            title: "Read fluctuation period, scenario 4 with reads of 8 Mbit/s (Fig. 6b)",
            thesis: "as above, network-limited",
            axis: "period (RTTs)",
            systems: one_link,
            points: period_points(&[0.0, 8.0, 8.0], s4.buffer),
            dumbbell: false,
        },
        Experiment {
            name: "peak",
            title: "Peak read rate, scenario 3 (Fig. 6c)",
            thesis: "default optimal below 2 Mbit/s, 0.65 of ideal at 20; AFC >= 0.86 everywhere",
            axis: "peak read (Mbit/s)",
            systems: one_link,
            points: [1.0, 2.0, 4.0, 6.0, 10.0, 15.0, 20.0]
                .into_iter()
                .map(|ar| {
                    link(
                        format!("peak={ar}"),
                        &[0.0, ar, ar],
                        &network("afc-s3"),
                        s3.buffer,
                        RTT_S,
                    )
                })
                .collect(),
            dumbbell: false,
        },
        Experiment {
            name: "nw2",
            title: "Peak network rate NW2 of <3, NW2, NW2>, scenario 4 (Fig. 6d)",
            thesis: "default loses up to 50% over 2.5 Mbit/s of variation; AFC at most 25% \
                     over 4 Mbit/s",
            axis: "NW2 (Mbit/s)",
            systems: one_link,
            points: [4.5, 5.0, 6.0, 7.0, 8.0]
                .into_iter()
                .map(|n2| {
                    link(
                        format!("nw2={n2}"),
                        s4.read_mbps,
                        &[3.0, n2, n2],
                        s4.buffer,
                        RTT_S,
                    )
                })
                .collect(),
            dumbbell: false,
        },
        Experiment {
            name: "nw1",
            title: "Low network rate NW1 of <NW1, 6, 6>, scenario 4 (Fig. 6e)",
            thesis: "as Fig. 6d",
            axis: "NW1 (Mbit/s)",
            systems: one_link,
            points: [0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
                .into_iter()
                .map(|n1| {
                    link(
                        format!("nw1={n1}"),
                        s4.read_mbps,
                        &[n1, 6.0, 6.0],
                        s4.buffer,
                        RTT_S,
                    )
                })
                .collect(),
            dumbbell: false,
        },
        Experiment {
            name: "pattern",
            title: "Read patterns: idle 1 or 2 slots, reading 1 to 4 (Fig. 6f)",
            thesis: "reading for one slot is pathological (equal for both); otherwise AFC +63% \
                     to +150%",
            axis: "idle-read slots",
            systems: one_link,
            points: [1, 2]
                .into_iter()
                .flat_map(|idle| (1..=4).map(move |read| (idle, read)))
                .map(|(idle, read)| {
                    let mut p = vec![0.0; idle];
                    p.extend(std::iter::repeat_n(6.0, read));
                    let net = [15.0];
                    let b = rule_buffer(&p, &net, RTT_S);
                    link(format!("idle{idle}-read{read}"), &p, &net, b, RTT_S)
                })
                .collect(),
            dumbbell: false,
        },
    ]
}

/// Fig. 6b's points: the read profile's slot from 1 to 40 RTTs.
fn period_points(read: &[f64], buffer: u64) -> Vec<Point> {
    [1, 2, 3, 5, 10, 20, 40]
        .into_iter()
        .map(|k| {
            let mut p = link(
                format!("period={k}"),
                read,
                &network("afc-s4"),
                buffer,
                RTT_S,
            );
            p.args.push(("readSlot", k.to_string()));
            p
        })
        .collect()
}

/// The experiments of a quick run (CI): Table 4.
pub const QUICK: [&str; 1] = ["table4"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_point_has_an_ideal_and_unique_label() {
        for e in all() {
            let mut labels: Vec<&str> = e.points.iter().map(|p| p.label.as_str()).collect();
            labels.sort_unstable();
            labels.dedup();
            assert_eq!(labels.len(), e.points.len(), "{}", e.name);
            for p in &e.points {
                assert!(p.ideal_mbps > 0.0, "{} {}", e.name, p.label);
            }
        }
    }

    #[test]
    fn the_buffer_rule_gives_table4s_buffers() {
        // S2: min(15, 4) Mbit/s x 530 ms = 265 kB (the thesis rounds to 256 KB).
        assert_eq!(rule_buffer(&[0.0, 6.0, 6.0], &[15.0], 0.53), 265_000);
        let fairness = all().into_iter().find(|e| e.name == "afc-afc").unwrap();
        assert!(fairness.points[9]
            .args
            .contains(&("buffer", "21300".into())));
    }
}
