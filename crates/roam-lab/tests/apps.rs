//! The lab's applications run end to end through the emulator, with roam and with an
//! unmodified baseline, and produce the metrics the report needs. (Needs root or user
//! namespaces; skipped with a reason otherwise.)

use std::sync::Arc;
use std::time::Duration;

use roam_lab::harness::system::{Builtin, System};
use roam_lab::harness::trial::{self, Metric};
use roam_lab::servers::dovecot;
use roam_lab::studies::in_paper::fs;
use roam_lab::studies::in_paper::mail;
use roam_lab::studies::in_paper::sensing;
use roam_trace::scenario::Scenario;

fn privileged() -> bool {
    roam_emu::testing::privileged_or_skip()
}

fn get(ms: &[Metric], name: &str) -> f64 {
    ms.iter()
        .find(|m| m.name == name)
        .unwrap_or_else(|| panic!("no metric {name} in {ms:?}"))
        .value
}

#[test]
fn sensing_delivers_urgent_messages_and_bulk_data() {
    if !privileged() {
        return;
    }
    let sc = Scenario::by_name("hotspot", 1).unwrap();
    let d = Duration::from_secs(12);
    for system in [Builtin::Roam, Builtin::Aggregation].map(System::from) {
        let logs = std::env::temp_dir().join(format!("roam-sensing-test-{}", std::process::id()));
        let ms = trial::run(
            sensing::run,
            &sc,
            roam_lab::harness::system::QUEUE,
            system.clone(),
            d,
            1,
            Arc::new(|_| {}),
            Some(logs.clone()),
        )
        .unwrap()
        .metrics;
        // Every urgent message in the trial's log directory, agreeing with the median.
        let urgent = std::fs::read_to_string(logs.join("sensing-urgent.csv")).unwrap();
        let _ = std::fs::remove_dir_all(&logs);
        let mut lines = urgent.lines();
        assert_eq!(lines.next(), Some("sent_s,latency_ms"));
        let mut lat: Vec<f64> = lines
            .map(|l| l.split(',').nth(1).unwrap().parse().unwrap())
            .collect();
        assert_eq!(lat.len(), sensing::urgent_schedule(d, 1).len(), "{urgent}");
        lat.sort_by(f64::total_cmp);
        let median = get(&ms, "urgent_ms");
        assert!(
            lat.iter().any(|&l| (l - median).abs() < 0.1),
            "{system:?}: median {median} not among {lat:?}"
        );
        assert_eq!(get(&ms, "urgent_lost"), 0.0, "{system:?}: {ms:?}");
        let u = get(&ms, "urgent_ms");
        assert!(u > 5.0 && u < 2000.0, "{system:?}: urgent {u} ms");
        // 29 KB/s offered; both links together carry far more.
        let bulk = get(&ms, "bulk_kBps");
        assert!(bulk > 20.0 && bulk < 30.0, "{system:?}: bulk {bulk} KB/s");
        // roam's recovery costs are recorded for roam only (plain TCP hides its own).
        let recorded = ms.iter().any(|m| m.name == "duplicate_kB");
        assert_eq!(recorded, system == Builtin::Roam, "{system:?}: {ms:?}");
    }
}

/// MPTCP connects even when a trial starts in a WiFi outage (its first subflow over the
/// link that answers): seed 2 of the vehicular drive has no WiFi for its first minute.
#[test]
fn mptcp_connects_over_the_cellular_link_while_the_wifi_is_out() {
    if !privileged() {
        return;
    }
    let sc = Scenario::by_name("vehicular", 2).unwrap();
    let wifi = &sc.links[0];
    assert_eq!(wifi.name, "wifi");
    assert!(
        !*wifi.trace.availability.value_at(roam_core::Time::ZERO),
        "seed 2 should start in a WiFi outage"
    );
    let d = Duration::from_secs(4);
    let ms = trial::run(
        sensing::run,
        &sc,
        roam_lab::harness::system::QUEUE,
        Builtin::Mptcp.into(),
        d,
        2,
        Arc::new(|_| {}),
        None,
    )
    .unwrap_or_else(|e| panic!("{e:#}"))
    .metrics;
    assert!(get(&ms, "bulk_kBps") > 0.0, "{ms:?}");
}

#[test]
fn file_system_replays_the_build_and_writes_everything_back() {
    if !privileged() {
        return;
    }
    let sc = Scenario::by_name("hotspot", 1).unwrap();
    let d = Duration::from_secs(3);
    let trace = fs::FsTrace::parse(fs::FIXTURE).unwrap();
    let ops = trace.prefix(d);
    let writes = ops.iter().filter(|o| o.kind == fs::OpKind::Write).count() as f64;
    // Blocks the build reads from files it did not create (or truncate) before: only these
    // can need the server.
    let mut created = std::collections::HashSet::new();
    let mut remote = std::collections::HashSet::new();
    for o in ops {
        match o.kind {
            fs::OpKind::Create => {
                created.insert(o.file);
            }
            fs::OpKind::Read if !created.contains(&o.file) => {
                let blocks = o.off / fs::BLOCK..(o.off + o.len).div_ceil(fs::BLOCK);
                remote.extend(blocks.map(|b| (o.file, b)));
            }
            _ => {}
        }
    }
    for system in [Builtin::Roam, Builtin::Aggregation].map(System::from) {
        let logs = std::env::temp_dir().join(format!("roam-fs-test-{}", std::process::id()));
        let ran = trial::run(
            fs::run,
            &sc,
            roam_lab::harness::system::QUEUE,
            system.clone(),
            d,
            1,
            Arc::new(|_| {}),
            Some(logs.clone()),
        )
        .unwrap();
        assert!(ran.notes.is_empty(), "{system:?}: {:?}", ran.notes);
        let ms = ran.metrics;
        // The reads that waited, in the trial's log directory: their waits are the replay's
        // time beyond the recorded span.
        let waits = std::fs::read_to_string(logs.join("fs-waits.csv")).unwrap();
        let _ = std::fs::remove_dir_all(&logs);
        let mut lines = waits.lines();
        assert_eq!(
            lines.next(),
            Some("t_build_ms,file,blocks,demanded,waited_ms,at_s")
        );
        let mut waited_s = 0.0;
        let mut last_at = 0.0;
        for l in lines {
            let f: Vec<f64> = l.split(',').map(|x| x.parse().unwrap()).collect();
            assert!(f[3] <= f[2], "{system:?}: more demanded than read: {l}");
            // On the emulator's clock: in order, after the emulator started.
            assert!(
                f[5] > 0.0 && f[5] >= last_at,
                "{system:?}: at_s out of order: {l}"
            );
            last_at = f[5];
            waited_s += f[4] / 1e3;
        }
        let span = ops.last().unwrap().t_ms as f64 / 1e3;
        assert_eq!(get(&ms, "span_s"), span, "{system:?}: the replay's floor");
        assert_eq!(get(&ms, "writebacks"), writes, "{system:?}");
        let i = get(&ms, "interactive_s");
        let w = get(&ms, "writeback_s");
        assert!(
            i.is_finite() && i >= 2.9,
            "{system:?}: the replay keeps the build's gaps ({i} s)"
        );
        assert!(
            waited_s > 0.0 && waited_s <= i - span + 0.05,
            "{system:?}: waits {waited_s} s in a replay of {i} s of a {span} s span"
        );
        assert!(w.is_finite() && w > 0.0, "{system:?}: write-back {w}");
        let demand = get(&ms, "demand_fetches");
        assert!(
            demand > 0.0 && demand <= remote.len() as f64,
            "{system:?}: {demand} demand fetches, {} blocks read from files the build did \
             not create",
            remote.len()
        );
    }
}

/// One mail trial on the hotspot (seed 1) lasting at most `secs`, its logs in `logs`; None
/// (with the reason printed) when this machine cannot run it.
fn mail_trial(system: System, secs: u64, logs: Option<std::path::PathBuf>) -> Option<trial::Ran> {
    if !privileged() {
        return None;
    }
    if dovecot::binary().is_none() {
        eprintln!("skipped: Dovecot is not installed (apt-get install -y dovecot-imapd)");
        return None;
    }
    let sc = Scenario::by_name("hotspot", 1).unwrap();
    let d = Duration::from_secs(secs);
    Some(
        trial::run(
            mail::run,
            &sc,
            roam_lab::harness::system::QUEUE,
            system.clone(),
            d,
            1,
            Arc::new(|_| {}),
            logs,
        )
        .unwrap_or_else(|e| panic!("{system:?}: {e:#}")),
    )
}

#[test]
fn mail_fetches_every_message_from_a_real_dovecot() {
    for system in [Builtin::Roam, Builtin::Mptcp, Builtin::Aggregation].map(System::from) {
        let logs = std::env::temp_dir().join(format!("roam-mail-test-{}", std::process::id()));
        let Some(ran) = mail_trial(system.clone(), 120, Some(logs.clone())) else {
            return;
        };
        assert!(ran.notes.is_empty(), "{system:?}: {:?}", ran.notes);
        let ms = ran.metrics;
        // Every open in the trial's log directory, agreeing with the metrics.
        let opens = std::fs::read_to_string(logs.join("mail-opens.csv")).unwrap();
        let _ = std::fs::remove_dir_all(&logs);
        let mut lines = opens.lines();
        assert_eq!(lines.next(), Some("at_s,uid,bytes,from_network,cached,ms"));
        let rows: Vec<Vec<f64>> = lines
            .map(|l| l.split(',').map(|x| x.parse().unwrap()).collect())
            .collect();
        assert_eq!(rows.len(), 5, "{system:?}: {opens}");
        let fetched: Vec<f64> = rows.iter().filter(|r| r[3] == 1.0).map(|r| r[5]).collect();
        assert_eq!(
            fetched.len() as f64,
            get(&ms, "opens_from_network"),
            "{system:?}"
        );
        let net = get(&ms, "network_open_ms");
        if fetched.is_empty() {
            assert!(net.is_nan(), "{system:?}: {net}");
        } else {
            let m = fetched.iter().sum::<f64>() / fetched.len() as f64;
            assert!((m - net).abs() < 0.1, "{system:?}: {net} ms; {opens}");
        }
        let mean = rows.iter().map(|r| r[5]).sum::<f64>() / 5.0;
        assert!(
            (mean - get(&ms, "ondemand_ms")).abs() < 0.1,
            "{system:?}: {opens}"
        );
        let bg = get(&ms, "background_s");
        // About 3 MB over 2.6 Mbit/s of links: tens of seconds, never instant.
        assert!(bg.is_finite() && bg > 2.0, "{system:?}: background {bg} s");
        let od = get(&ms, "ondemand_ms");
        assert!(
            od.is_finite() && od >= 0.0 && od < bg * 1e3,
            "{system:?}: {od} ms"
        );
        assert!(get(&ms, "headers_s") > 0.0, "{system:?}");
        // Only a message opened from the network can arrive twice (its prefetch as well).
        let twice = get(&ms, "bodies_twice");
        assert!(
            twice <= get(&ms, "opens_from_network"),
            "{system:?}: {twice} bodies twice"
        );
    }
}

/// A workload too short for the mailbox leaves the background unfinished, and the trial
/// says how far it got.
#[test]
fn an_unfinished_mail_trial_says_how_far_it_got() {
    // About 3 MB over 2.6 Mbit/s cannot arrive in 6 s.
    let Some(ran) = mail_trial(Builtin::Roam.into(), 6, None) else {
        return;
    };
    assert!(get(&ran.metrics, "background_s").is_infinite());
    assert!(
        ran.notes.iter().any(|n| n.starts_with("background: ")
            && n.ends_with(" of 100 bodies in the cache at the end of the workload")),
        "{:?}",
        ran.notes
    );
}

/// A server side that cannot start says why; one whose client never connects stops when the
/// trial is over instead of waiting for it.
#[test]
fn a_server_side_says_why_it_did_not_start_and_ends_with_its_trial() {
    if !privileged() {
        return;
    }
    fn broken(t: &trial::Trial) -> anyhow::Result<Vec<Metric>> {
        t.start_server(
            "test",
            7001,
            || -> anyhow::Result<()> { anyhow::bail!("its data directory is missing") },
            |(), _| Ok(()),
        )?;
        Ok(Vec::new())
    }
    fn lonely(t: &trial::Trial) -> anyhow::Result<Vec<Metric>> {
        let server = t.start_server("test", 7002, || Ok(()), |(), _| Ok(()))?;
        let started = std::time::Instant::now();
        let (recovery, served) = server.finish(None);
        served?;
        assert!(recovery.is_empty());
        Ok(vec![Metric::new(
            "finish_s",
            started.elapsed().as_secs_f64(),
            "s",
        )])
    }
    let sc = Scenario::by_name("hotspot", 1).unwrap();
    let d = Duration::from_secs(5);
    for system in [Builtin::Roam, Builtin::Aggregation].map(System::from) {
        let e = trial::run(
            broken,
            &sc,
            roam_lab::harness::system::QUEUE,
            system.clone(),
            d,
            1,
            Arc::new(|_| {}),
            None,
        )
        .err()
        .unwrap_or_else(|| panic!("{system:?}: a broken server side started"));
        assert_eq!(
            format!("{e:#}"),
            "the test server side did not start: its data directory is missing"
        );
        let ms = trial::run(
            lonely,
            &sc,
            roam_lab::harness::system::QUEUE,
            system.clone(),
            d,
            1,
            Arc::new(|_| {}),
            None,
        )
        .unwrap_or_else(|e| panic!("{system:?}: {e:#}"))
        .metrics;
        assert!(get(&ms, "finish_s") < 5.0, "{system:?}: {ms:?}");
    }
}

/// One short IMP trial of `run` with `strategy` on the hotspot, or `None` (skipped) without
/// privileges or the server `binary`.
fn imp_trial(
    run: fn(&trial::Trial) -> anyhow::Result<Vec<Metric>>,
    strategy: roam_prefetch::Strategy,
    binary: Option<std::path::PathBuf>,
    package: &str,
) -> Option<Vec<Metric>> {
    if !privileged() {
        return None;
    }
    if binary.is_none() {
        eprintln!("skipped: {package} is not installed (apt-get install -y {package})");
        return None;
    }
    let sc = Scenario::by_name("hotspot", 1).unwrap();
    Some(
        trial::run(
            run,
            &sc,
            roam_lab::harness::system::QUEUE,
            System::new(strategy),
            Duration::from_secs(25),
            1,
            Arc::new(|_| {}),
            None,
        )
        .unwrap_or_else(|e| panic!("{strategy:?}: {e:#}"))
        .metrics,
    )
}

/// The IMP e-mail application reads its 28 messages, with prefetching (IMP, no constraint
/// binds in a short run) and without (never-prefetch, every read a demand fetch).
#[test]
fn imp_mail_reads_every_message_with_and_without_prefetching() {
    for strategy in [roam_prefetch::Strategy::Imp, roam_prefetch::Strategy::Never] {
        let Some(ms) = imp_trial(
            roam_lab::studies::imp::mail::run_data,
            strategy,
            dovecot::binary(),
            "dovecot-imapd",
        ) else {
            return;
        };
        let hits = get(&ms, "prefetch_hits");
        let demand = get(&ms, "demand_fetches");
        assert_eq!(hits + demand, 28.0, "{strategy:?}: {ms:?}");
        assert!(get(&ms, "fetch_ms").is_finite(), "{ms:?}");
        assert!(get(&ms, "energy_J") > 0.0, "{ms:?}");
        if strategy == roam_prefetch::Strategy::Never {
            assert_eq!(demand, 28.0, "{ms:?}");
        }
    }
}

/// The IMP news reader reads its articles from a real nginx, feed by feed, with and without
/// prefetching.
#[test]
fn imp_news_reads_its_articles_from_a_real_nginx() {
    let reads: f64 = roam_lab::studies::imp::news::READ_RATES
        .iter()
        .map(|r| (r * roam_lab::servers::nginx::PER_FEED as f64).round())
        .sum();
    for strategy in [roam_prefetch::Strategy::Imp, roam_prefetch::Strategy::Never] {
        let Some(ms) = imp_trial(
            roam_lab::studies::imp::news::run_data,
            strategy,
            roam_lab::servers::nginx::binary(),
            "nginx",
        ) else {
            return;
        };
        let done = get(&ms, "prefetch_hits") + get(&ms, "demand_fetches");
        assert_eq!(done, reads, "{strategy:?}: {ms:?}");
        assert!(get(&ms, "fetch_ms").is_finite(), "{ms:?}");
        if strategy == roam_prefetch::Strategy::Never {
            assert_eq!(get(&ms, "prefetches"), 0.0, "{ms:?}");
        }
    }
}

/// The dedup lab's mail corpus on the real servers: Dovecot serves the first half from its
/// start and the second once delivered, each message under the UID of its place, and the
/// bytes curl's trace gives back are the server's whole side of the connection, the message
/// inside it as delivered.
#[test]
fn the_dedup_lab_s_mail_is_served_by_uid_and_read_back_whole_from_curl_s_trace() {
    use roam_lab::studies::dedup::{fetch, mail as list};
    if !roam_emu::sys::is_root() {
        eprintln!("skipped: Dovecot's IMAP port (143) needs root");
        return;
    }
    if dovecot::binary().is_none() {
        eprintln!("skipped: Dovecot is not installed (apt-get install -y dovecot-imapd)");
        return;
    }
    let articles: Vec<(String, String)> = (0..12)
        .map(|i| {
            let p = format!(
                "Article {i} says that a vacuum reclaims the storage that dead tuples \
                 occupy and makes it available for reuse by the same table."
            );
            (
                format!("A{i}"),
                format!("{p}\n\n{p} Again.\n\n{p} Once more."),
            )
        })
        .collect();
    let files = vec![("page.html".to_string(), vec![b'<'; 3000])];
    let mb = list::mailbox(&articles, &files, 5, 4).unwrap();
    let bytes: Vec<Vec<u8>> = mb.messages.iter().map(|m| m.bytes.clone()).collect();
    let d = dovecot::Dovecot::with_messages(&bytes[..mb.before]).unwrap();
    let url = |uid: usize| {
        format!(
            "imap://{}:{}@127.0.0.1:{}/INBOX;UID={uid}",
            dovecot::USER.0,
            dovecot::USER.1,
            dovecot::IMAP_PORT
        )
    };
    assert!(fetch::fetch(&url(mb.before + 1), None).0.is_err());
    d.deliver(mb.before, &bytes[mb.before..]).unwrap();
    for (i, want) in bytes.iter().enumerate() {
        let got = fetch::fetch(&url(i + 1), None)
            .0
            .unwrap_or_else(|e| panic!("message {}: {e:#}", i + 1));
        assert_eq!(got.body(), want.as_slice(), "message {}", i + 1);
        let wire = String::from_utf8_lossy(&got.wire);
        assert!(wire.starts_with("* OK "), "{wire}");
        assert!(wire.contains(&String::from_utf8_lossy(want).into_owned()));
        assert!(
            got.wire.len() > want.len() + 300,
            "{} bytes",
            got.wire.len()
        );
    }
}
