//! The client session ([`crate::session`]) against the test servers: a mixed dataset in size
//! clusters with a broker's parameters over the survey's connections, fixed parameters with
//! and without a survey, HTTP/2 where advertised, the time limit, refusals.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::{advertising_server, bytes, counting_server, h2c_server, scratch, Conns};
use crate::broker::{Broker, Source, Update};
use crate::error::{Phase, SessionError};
use crate::hla::{Optimum, Table};
use crate::model::Condition;
use crate::session::{Group, Network, Options, Session, Tuning, Watch};
use crate::{Engine, FileSpec, Params, Protocol};

/// The network the tests' broker knows: 50 ms, 100 Mbit/s.
const NET: Network = Network {
    rtt_ms: Some(50.0),
    bandwidth_mbps: 100.0,
};

fn params(cc: u32, p: u32, protocol: Protocol) -> Params {
    Params {
        cc,
        p,
        bs: 64 * 1024,
        protocol,
    }
}

/// A broker whose cache holds, on [`NET`], `small` for files of about 20 KB and `large` for
/// files of about 600 KB.
fn broker(small: Params, large: Params) -> Broker {
    let at = |mean: f64| {
        Condition {
            rtt_ms: 50.0,
            bandwidth_mbps: 100.0,
            mean_file_bytes: mean,
        }
        .features()
    };
    let optimum = |params| Optimum {
        params,
        throughput_mbps: 80.0,
        energy_j_per_100mb: 5.0,
    };
    let mut b = Broker::default();
    b.apply(Update {
        table: Table {
            entries: vec![(at(20e3), optimum(small)), (at(600e3), optimum(large))],
        },
        model: None,
    });
    b
}

/// Twelve pages of about 20 KB and two files of 600 KB.
fn mixed_files() -> Vec<(String, Vec<u8>)> {
    (0..12)
        .map(|i| {
            (
                format!("/m/p{i:02}.bin"),
                bytes(20_000 + i * 77, 40 + i as u32),
            )
        })
        .chain((0..2).map(|i| (format!("/m/v{i}.bin"), bytes(600_000, 70 + i as u32))))
        .collect()
}

fn listed(files: &[(String, Vec<u8>)]) -> Vec<(&str, Vec<u8>)> {
    files.iter().map(|(p, b)| (p.as_str(), b.clone())).collect()
}

fn specs(base: &str, files: &[(String, Vec<u8>)]) -> Vec<FileSpec> {
    files
        .iter()
        .map(|(p, _)| FileSpec::from_url(&format!("{base}{p}")).unwrap())
        .collect()
}

/// Every file of `files` under `out`, byte for byte.
fn arrived(files: &[(String, Vec<u8>)], out: &std::path::Path) {
    for (p, b) in files {
        let name = p.rsplit('/').next().unwrap();
        assert_eq!(&std::fs::read(out.join(name)).unwrap(), b, "{p}");
    }
}

/// What a test sees of a session: the plan, and the server's connections and the engines'
/// bytes when the engines start.
#[derive(Default)]
struct Seen {
    conns: Option<Arc<Conns>>,
    planned: Vec<Group>,
    at_start: Option<(usize, u64)>,
}

impl Watch for Seen {
    fn planned(&mut self, groups: &[Group]) {
        assert!(self.at_start.is_none(), "planned after the engines started");
        self.planned = groups.to_vec();
    }

    fn started(&mut self, engines: &[Arc<Engine>]) {
        assert_eq!(engines.len(), self.planned.len(), "an engine per group");
        let received = engines
            .iter()
            .map(|e| e.received.load(Ordering::Relaxed))
            .sum();
        let conns = self.conns.as_ref().map_or(0, |c| c.accepted());
        self.at_start = Some((conns, received));
    }
}

/// A broker's session: pages and large files in two groups, each with the cache's parameters
/// for its own mean size, over the survey's connections (none opened for the transfer beyond
/// hyper's occasional race), every file whole; each group's report and condition come back for
/// the broker's log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_dataset_moves_in_size_clusters_over_the_surveys_connections() {
    let files = mixed_files();
    let (base, conns) = counting_server(&listed(&files)).await;
    let (small, large) = (params(4, 1, Protocol::Http1), params(1, 2, Protocol::Http1));
    let b = broker(small, large);
    let out = scratch("session-mixed");
    let mut seen = Seen {
        conns: Some(conns.clone()),
        ..Seen::default()
    };
    let session = Session::new(specs(&base, &files), Options::default()).unwrap();
    let tuning = Tuning::Broker {
        broker: &b,
        max_channels: 64,
    };
    let o = session.run(&tuning, NET, &out, &mut seen).await.unwrap();
    let g: Vec<&Group> = o.groups.iter().map(|r| &r.group).collect();
    assert_eq!(g.len(), 2);
    assert_eq!((g[0].files.len(), g[1].files.len()), (12, 2));
    assert_eq!(
        (g[0].choice.params, g[0].choice.source),
        (small, Source::Cache)
    );
    assert_eq!(
        (g[1].choice.params, g[1].choice.source),
        (large, Source::Cache)
    );
    assert_eq!(g[1].condition.mean_file_bytes, 600_000.0);
    assert_eq!(
        g[1].condition.rtt_ms, 50.0,
        "the network's round trip, as given"
    );
    assert_eq!(seen.planned.len(), 2);
    let (conns_at_start, received_at_start) = seen.at_start.unwrap();
    assert_eq!(received_at_start, 0);
    arrived(&files, &out);
    for r in &o.groups {
        assert!(r.report.failures().is_empty(), "{:?}", r.report.failures());
        assert!(r
            .report
            .files
            .iter()
            .all(|f| f.params == r.group.choice.params && f.probe_ms == 0.0));
    }
    let whole = o.whole();
    let total: u64 = files.iter().map(|f| f.1.len() as u64).sum();
    assert_eq!((whole.files.len(), whole.bytes), (files.len(), total));
    let sv = o.survey.as_ref().unwrap();
    assert_eq!(sv.sizes[12], 600_000);
    // The requests: the survey's one a file, then one range a page and two a large file.
    assert_eq!(conns.busiest().0, files.len() + 12 + 2 * 2);
    let n = conns.accepted();
    assert!(
        n <= conns_at_start + 1,
        "{conns_at_start} connections for the survey, {n} in all"
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// Fixed parameters without a survey: one group, nothing asked before the files themselves
/// (one request a file), logged under the condition of no survey; a missing file fails in its
/// log, not the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_parameters_without_a_survey_ask_for_the_files_only() {
    let files = mixed_files();
    let (base, conns) = counting_server(&listed(&files)).await;
    let mut all = specs(&base, &files);
    all.push(FileSpec::from_url(&format!("{base}/m/none.bin")).unwrap());
    let fixed = params(3, 1, Protocol::Http1);
    let out = scratch("session-fixed");
    let net = Network {
        rtt_ms: None,
        bandwidth_mbps: 9.0,
    };
    let o = Session::new(all, Options::default())
        .unwrap()
        .run(&Tuning::Fixed(fixed), net, &out, &mut ())
        .await
        .unwrap();
    assert!(o.survey.is_none());
    assert_eq!(o.groups.len(), 1);
    let g = &o.groups[0];
    assert_eq!(
        (g.group.choice.params, g.group.choice.source),
        (fixed, Source::Default)
    );
    assert_eq!(
        g.group.condition,
        Condition {
            rtt_ms: 0.0,
            bandwidth_mbps: 9.0,
            mean_file_bytes: 0.0
        }
    );
    let failed = g.report.failures();
    assert_eq!(failed.len(), 1);
    assert!(
        failed[0].outcome.contains("HTTP 404"),
        "{}",
        failed[0].outcome
    );
    arrived(&files, &out);
    assert_eq!(conns.busiest().0, files.len() + 1, "a request a file");
    let _ = std::fs::remove_dir_all(&out);
}

/// Fixed parameters with a survey (as when the transfer is logged for the broker): the
/// transfer is logged under the survey's round trip and mean size, and runs over its
/// connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_parameters_with_a_survey_are_logged_under_its_condition() {
    let files = mixed_files();
    let (base, conns) = counting_server(&listed(&files)).await;
    let fixed = params(4, 1, Protocol::Http1);
    let out = scratch("session-fixed-surveyed");
    let options = Options {
        survey: true,
        ..Options::default()
    };
    let net = Network {
        rtt_ms: None,
        bandwidth_mbps: 9.0,
    };
    let mut seen = Seen {
        conns: Some(conns.clone()),
        ..Seen::default()
    };
    let o = Session::new(specs(&base, &files), options)
        .unwrap()
        .run(&Tuning::Fixed(fixed), net, &out, &mut seen)
        .await
        .unwrap();
    let sv = o.survey.as_ref().unwrap();
    let c = o.groups[0].group.condition;
    let mean = files.iter().map(|f| f.1.len() as f64).sum::<f64>() / files.len() as f64;
    assert_eq!((c.rtt_ms, c.mean_file_bytes), (sv.rtt_ms, mean));
    assert!(c.rtt_ms.is_finite() && c.rtt_ms > 0.0);
    arrived(&files, &out);
    assert_eq!(
        conns.busiest().0,
        2 * files.len(),
        "the survey's and one a file"
    );
    assert!(conns.accepted() <= seen.at_start.unwrap().0 + 1);
    let _ = std::fs::remove_dir_all(&out);
}

/// A broker's HTTP/2 is taken where the server advertises it for every file of the group: the
/// dataset listed by its HTTP/1.1 URLs moves over one HTTP/2 connection; where it is not
/// advertised the group moves over HTTP/1.1 and its note says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_brokers_http2_is_taken_where_advertised() {
    let files: Vec<(String, Vec<u8>)> = mixed_files().into_iter().take(12).collect();
    let h2 = params(8, 2, Protocol::Http2);
    let b = broker(h2, h2);
    let tuning = Tuning::Broker {
        broker: &b,
        max_channels: 64,
    };
    let (port, h2_conns, _) = h2c_server(&listed(&files)).await;
    let alt = format!("h2c=\":{port}\"");
    for advertised in [true, false] {
        let (base, _) =
            advertising_server(&listed(&files), advertised.then_some(alt.as_str())).await;
        let out = scratch(&format!("session-h2-{advertised}"));
        let o = Session::new(specs(&base, &files), Options::default())
            .unwrap()
            .run(&tuning, NET, &out, &mut ())
            .await
            .unwrap();
        let g = &o.groups[0];
        assert!(g.report.failures().is_empty(), "{:?}", g.report.failures());
        arrived(&files, &out);
        if advertised {
            assert_eq!((g.group.choice.params, g.group.note), (h2, None));
            let c = h2_conns.load(Ordering::SeqCst);
            assert!((1..=2).contains(&c), "{c} HTTP/2 connections");
        } else {
            assert_eq!(g.group.choice.params.protocol, Protocol::Http1);
            assert!(g.group.note.unwrap().contains("does not offer it"));
            assert!(g
                .report
                .files
                .iter()
                .all(|f| f.params.protocol == Protocol::Http1));
        }
        let _ = std::fs::remove_dir_all(&out);
    }
}

/// A survey that cannot finish ends at the session's time limit, naming the phase; a file
/// the survey cannot size fails the session, naming it; two files under one name are
/// refused before anything moves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_fails_at_its_limit_at_an_unknown_file_and_at_a_clash() {
    let files = vec![
        ("/mute/a.bin".to_string(), bytes(1000, 1)),
        ("/m/b.bin".to_string(), bytes(1000, 2)),
    ];
    let (base, conns) = counting_server(&listed(&files)).await;
    let b = Broker::default();
    let tuning = Tuning::Broker {
        broker: &b,
        max_channels: 64,
    };
    let out = scratch("session-limit");
    let options = Options {
        time_limit: Some(Duration::from_millis(300)),
        ..Options::default()
    };
    let e = Session::new(specs(&base, &files), options.clone())
        .unwrap()
        .run(&tuning, NET, &out, &mut ())
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            SessionError::TimedOut {
                phase: Phase::Survey,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("survey did not finish"), "{e}");
    let missing = vec![FileSpec::from_url(&format!("{base}/m/none.bin")).unwrap()];
    let e = Session::new(missing, options)
        .unwrap()
        .run(&tuning, NET, &out, &mut ())
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("none.bin") && e.contains("404"), "{e}");
    let before = conns.accepted();
    let twice = specs(&base, &[files[1].clone(), files[1].clone()]);
    let e = Session::new(twice, Options::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("listed twice"), "{e}");
    assert_eq!(conns.accepted(), before);
    assert!(!out.exists());
}
