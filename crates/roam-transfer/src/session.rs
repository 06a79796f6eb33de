//! FastHLA's client session: one dataset fetched the way the device's broker has it fetched,
//! from the first look at the files to their last byte. `roam transfer get` and the lab's
//! FastHLA tool (`roam lab fasthla`) both run this, so the lab measures what users run.
//!
//! # The idea
//!
//! FastHLA ("Energy-Efficient Mobile Network I/O Optimization at the Application Layer",
//! Guner, Nine, Kosar and Bulut; the FastHLA paper) tunes three application-layer parameters of a bulk
//! transfer, concurrency (files in flight), parallelism (range streams per file) and block size,
//! without probing the network during the transfer. It learns instead from **historical logs**:
//! every transfer a device runs leaves a record of its condition (round trip, bandwidth, mean
//! file size), its parameters and the throughput and energy they gave; the HLA server clusters
//! those records by condition and keeps, per cluster, the parameters of most throughput per
//! joule ([`crate::hla`]), and a model for the conditions between ([`crate::model`]). The
//! device's broker ([`crate::broker`]) then looks a new transfer's condition up: the cache of
//! the clusters' optima, else the model, else the defaults.
//!
//! The mean file size is part of the condition, and files of very different sizes want
//! different parameters (many small pages want concurrency, a few large videos parallelism),
//! so a mixed dataset is cut into **size clusters** first, each looked up under its own
//! condition ([`crate::mixed`], the paper's Algorithm 1), and the clusters' channels are scaled
//! down together to the user's limit.
//!
//! # A session
//!
//! [`Session::run`] takes the files and does, in order:
//!
//! 1. **Survey** ([`Engine::survey`]): every file's size (a size the dataset's listing gives
//!    saves its request), whether it is served in ranges and over HTTP/2 too, and the round
//!    trip, over up to [`SURVEY_CC`] connections. Always with a broker; with fixed parameters
//!    when [`Options::survey`] asks (for the condition the transfer is logged under).
//! 2. **Plan** (sans-IO): with a broker ([`Tuning::Broker`]) one [`Group`] per size cluster,
//!    with the broker's [`Choice`] for the cluster's [`Condition`] (the [`Network`]'s round
//!    trip and bandwidth, the cluster's mean size), the channels scaled to the limit, and a
//!    choice of HTTP/2 kept only where the server offers it for every file of the cluster;
//!    with fixed parameters ([`Tuning::Fixed`]) one group of every file.
//! 3. **Transfer**: every group at once, each on an engine with its own parameters. After a
//!    survey the engines share its connections ([`Engine::sharing`]): they are open and warm,
//!    and a transfer of many small files would otherwise pay a handshake and slow start again
//!    on each.
//! 4. **Outcome** ([`Outcome`]): per group its choice, condition and report, which is what the
//!    caller logs for the HLA server ([`crate::hla::Record`], [`Broker::ran`]) so that the
//!    next update learns from this transfer too.
//!
//! What differs between callers stays with them: where the broker's update comes from (the
//! HLA server, or the lab's sweeps), the network's condition as the caller knows it
//! ([`Network`]), what is shown while it runs ([`Watch`]: the CLI's plan lines and progress
//! bar), and what is done with the outcome (the CLI's log records and uploads, the lab's
//! notes and metrics).

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::broker::{Broker, Choice, Source};
use crate::engine::{
    distinct_names, Connector, Engine, FileSpec, Limits, Report, Survey, MIN_STEAL_PIECE, SURVEY_CC,
};
use crate::error::{Phase, SessionError, TransferError};
use crate::mixed;
use crate::model::Condition;
use crate::params::{Params, Protocol};

/// The most channels (concurrency × parallelism, summed over the size clusters) a broker's
/// plan opens unless told otherwise.
pub const MAX_CHANNELS: u32 = 64;

/// Where a session's parameters come from.
#[derive(Clone, Copy, Debug)]
pub enum Tuning<'a> {
    /// These parameters for every file, in one group (over HTTP/2 when [`Options::http2`]).
    Fixed(Params),
    /// The broker's choice per size cluster, the clusters' channels scaled to at most
    /// `max_channels` in all (each cluster keeps at least one).
    Broker {
        /// The device's broker, with whatever update it has.
        broker: &'a Broker,
        /// The channel limit ([`MAX_CHANNELS`] by default).
        max_channels: u32,
    },
}

/// The network's condition as the caller knows it: with each group's mean file size, the
/// [`Condition`] a broker looks its parameters up under and the transfer is logged under.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Network {
    /// The round trip, ms; `None`: the survey's (its shortest first-request time), or 0
    /// without a survey.
    pub rtt_ms: Option<f64>,
    /// The bandwidth, Mbit/s.
    pub bandwidth_mbps: f64,
}

/// How a session reaches servers and runs its engines.
#[derive(Clone, Debug)]
pub struct Options {
    /// Routes (direct, or through a SOCKS5 proxy) and the certificate authorities trusted for
    /// `https://`.
    pub connector: Connector,
    /// Survey the files even with fixed parameters: their sizes and the round trip give the
    /// condition the transfer is logged under, and the survey's connections carry it. A
    /// broker's plan always surveys.
    pub survey: bool,
    /// The URLs themselves speak HTTP/2 (the user said so): the survey and every group over
    /// HTTP/2, whatever a broker chose.
    pub http2: bool,
    /// The least piece a stream that finished its range takes from a slower one
    /// ([`MIN_STEAL_PIECE`]; `u64::MAX`: never).
    pub min_steal: u64,
    /// Each phase (the survey, the transfer) within this long, else
    /// [`SessionError::TimedOut`]; `None`: no limit.
    pub time_limit: Option<Duration>,
    /// What the downloads may write (a file's size, the session's total, the disk left free,
    /// files already in the output directory), counted over every group together.
    pub limits: Limits,
}

impl Default for Options {
    /// Direct connections trusting the system's authorities, no survey with fixed parameters,
    /// HTTP/1.1 unless a broker chooses HTTP/2, the engine's stealing, no time limit, the
    /// default limits ([`Limits::default`]).
    fn default() -> Options {
        Options {
            connector: Connector::new(None),
            survey: false,
            http2: false,
            min_steal: MIN_STEAL_PIECE,
            time_limit: None,
            limits: Limits::default(),
        }
    }
}

/// Files moved by one engine, the parameters chosen for them and the condition they were
/// chosen (and are logged) under.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    /// The files, with what the survey learnt of them.
    pub files: Vec<FileSpec>,
    /// The parameters (HTTP version included, as the server allows it) and where they came
    /// from (fixed parameters: [`Source::Default`]).
    pub choice: Choice,
    /// The network's round trip and bandwidth, and the group's mean file size.
    pub condition: Condition,
    /// Why the version chosen was not taken, if it was not ([`Survey::version`]).
    pub note: Option<&'static str>,
}

/// A group and its engine's report.
#[derive(Clone, Debug)]
pub struct GroupRun {
    /// The group as planned.
    pub group: Group,
    /// Its files' logs, bytes and wall time.
    pub report: Report,
}

/// What a session did.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The survey, if there was one.
    pub survey: Option<Survey>,
    /// Every group, in the plan's order, with its report.
    pub groups: Vec<GroupRun>,
}

impl Outcome {
    /// The groups' reports as one: every file's log, the bytes summed, the longest wall time
    /// (the groups ran at once).
    pub fn whole(&self) -> Report {
        let mut whole = Report {
            files: Vec::new(),
            bytes: 0,
            seconds: 0.0,
        };
        for g in &self.groups {
            whole.files.extend(g.report.files.iter().cloned());
            whole.bytes += g.report.bytes;
            whole.seconds = whole.seconds.max(g.report.seconds);
        }
        whole
    }
}

/// What a caller sees of a session as it runs. Both default to nothing.
pub trait Watch {
    /// The plan, before any file moves.
    fn planned(&mut self, _groups: &[Group]) {}
    /// The groups' engines, in the plan's order, as they start: a progress display reads their
    /// counters (`received`, `expected`, `sized`).
    fn started(&mut self, _engines: &[Arc<Engine>]) {}
}

/// Watching nothing.
impl Watch for () {}

/// A dataset to fetch and how: see the [module](self).
#[derive(Clone, Debug)]
pub struct Session {
    files: Vec<FileSpec>,
    options: Options,
}

impl Session {
    /// A session of `files`; refused before anything moves if two of them would be saved
    /// under one name ([`distinct_names`]: size clusters run at once, each on its own engine,
    /// which checks only its own files).
    pub fn new(files: Vec<FileSpec>, options: Options) -> Result<Session, TransferError> {
        distinct_names(&files)?;
        Ok(Session { files, options })
    }

    /// The files, as given.
    pub fn files(&self) -> &[FileSpec] {
        &self.files
    }

    /// Survey, plan and transfer into `out` with `tuning`'s parameters in `network`'s
    /// condition, telling `watch` the plan and the engines. A file that fails leaves its log in
    /// its group's report; the session fails for what stops it as a whole: a file the survey
    /// cannot size, parameters or an output directory refused, a phase past the time limit.
    /// Must run inside a tokio runtime.
    pub async fn run(
        self,
        tuning: &Tuning<'_>,
        network: Network,
        out: &Path,
        watch: &mut impl Watch,
    ) -> Result<Outcome, SessionError> {
        let Session { mut files, options } = self;
        let limit = options.time_limit;
        let (groups, surveyed) = match *tuning {
            Tuning::Fixed(params) => {
                let surveyed = if options.survey {
                    Some(within(limit, Phase::Survey, survey(&mut files, &options)).await?)
                } else {
                    None
                };
                let sv = surveyed.as_ref().map(|(_, sv)| sv);
                let group = one_group(files, sv, params, network, options.http2);
                (vec![group], surveyed)
            }
            Tuning::Broker {
                broker,
                max_channels,
            } => {
                let (probe, sv) =
                    within(limit, Phase::Survey, survey(&mut files, &options)).await?;
                let groups = by_size(&files, &sv, broker, max_channels, network, options.http2);
                (groups, Some((probe, sv)))
            }
        };
        watch.planned(&groups);
        let (probe, survey) = surveyed.unzip();
        let runs = within(
            limit,
            Phase::Transfer,
            transfer(groups, probe.as_deref(), &options, out, watch),
        )
        .await?;
        Ok(Outcome {
            survey,
            groups: runs,
        })
    }
}

/// `f`, within `limit` if there is one.
async fn within<T>(
    limit: Option<Duration>,
    phase: Phase,
    f: impl Future<Output = Result<T, SessionError>>,
) -> Result<T, SessionError> {
    match limit {
        None => f.await,
        Some(limit) => tokio::time::timeout(limit, f)
            .await
            .map_err(|_| SessionError::TimedOut { phase, limit })?,
    }
}

/// The survey of `files`, its findings written into them: the surveying engine (whose
/// connections the transfer reuses) and what it learnt. It asks [`SURVEY_CC`] files at a time
/// over HTTP/1.1, or over HTTP/2 when the URLs speak it ([`Options::http2`]).
async fn survey(
    files: &mut [FileSpec],
    options: &Options,
) -> Result<(Arc<Engine>, Survey), SessionError> {
    let params = Params {
        cc: SURVEY_CC,
        protocol: if options.http2 {
            Protocol::Http2
        } else {
            Protocol::Http1
        },
        ..Params::default()
    };
    let probe = Arc::new(
        Engine::with_connector(params, options.connector.clone())?
            .with_min_steal(options.min_steal)
            .with_limits(options.limits),
    );
    let sv = probe.survey(files).await?;
    sv.apply(files);
    Ok((probe, sv))
}

/// The condition of files of mean size `mean` in `network`, its round trip else the survey's.
fn condition(network: Network, survey: Option<&Survey>, mean: f64) -> Condition {
    Condition {
        rtt_ms: network.rtt_ms.or(survey.map(|sv| sv.rtt_ms)).unwrap_or(0.0),
        bandwidth_mbps: network.bandwidth_mbps,
        mean_file_bytes: mean,
    }
}

/// Every file in one group with `params` (over HTTP/2 if `http2`), under the condition of
/// the survey's mean size (0 without a survey).
fn one_group(
    files: Vec<FileSpec>,
    survey: Option<&Survey>,
    params: Params,
    network: Network,
    http2: bool,
) -> Group {
    let mean = survey.map_or(0.0, |sv| {
        sv.sizes.iter().sum::<u64>() as f64 / sv.sizes.len().max(1) as f64
    });
    let params = if http2 {
        Params {
            protocol: Protocol::Http2,
            ..params
        }
    } else {
        params
    };
    Group {
        files,
        choice: Choice {
            params,
            source: Source::Default,
            expected_mbps: None,
        },
        condition: condition(network, survey, mean),
        note: None,
    }
}

/// The surveyed `files` clustered by size ([`mixed::plan`]), each cluster with `broker`'s
/// choice for its condition, scaled to `max_channels` in all, over the HTTP version the server
/// allows (HTTP/2 whatever was chosen if `http2`).
fn by_size(
    files: &[FileSpec],
    sv: &Survey,
    broker: &Broker,
    max_channels: u32,
    network: Network,
    http2: bool,
) -> Vec<Group> {
    let cond_of = |mean: f64| condition(network, Some(sv), mean);
    let choose = |mean: f64, _files: usize| broker.choose(&cond_of(mean)).params;
    mixed::plan(&sv.sizes, choose, max_channels)
        .into_iter()
        .map(|c| {
            let condition = cond_of(c.mean_size);
            let mut choice = broker.choose(&condition);
            let (protocol, note) = sv.version(c.params.protocol, &c.files, http2);
            // As scaled to the channel limit, over the version the server allows.
            choice.params = Params {
                protocol,
                ..c.params
            };
            Group {
                files: c.files.iter().map(|&i| files[i].clone()).collect(),
                choice,
                condition,
                note,
            }
        })
        .collect()
}

/// Every group into `out` at once, each on an engine with its parameters: sharing the
/// survey's connections (`warm`) if there was a survey. The engines are shown to `watch` as
/// they start; every group is waited for, then the first group whose run failed as a whole is
/// the error.
async fn transfer(
    groups: Vec<Group>,
    warm: Option<&Engine>,
    options: &Options,
    out: &Path,
    watch: &mut impl Watch,
) -> Result<Vec<GroupRun>, SessionError> {
    let engines = groups
        .iter()
        .map(|g| {
            let e = match warm {
                Some(w) => w.sharing(g.choice.params)?,
                None => Engine::with_connector(g.choice.params, options.connector.clone())?
                    .with_min_steal(options.min_steal)
                    .with_limits(options.limits),
            };
            Ok(Arc::new(e))
        })
        .collect::<Result<Vec<_>, TransferError>>()?;
    watch.started(&engines);
    let mut tasks = Tasks(Vec::new());
    for (e, g) in engines.into_iter().zip(&groups) {
        let (files, out) = (g.files.clone(), out.to_path_buf());
        tasks
            .0
            .push(tokio::spawn(async move { e.run(&files, &out).await }));
    }
    let mut reports = Vec::new();
    for t in &mut tasks.0 {
        reports.push(t.await);
    }
    let mut runs = Vec::new();
    for (i, (r, group)) in reports.into_iter().zip(groups).enumerate() {
        let report = r.map_err(|e| SessionError::Task {
            group: i,
            files: group.files.len(),
            why: e.to_string(),
        })??;
        runs.push(GroupRun { group, report });
    }
    Ok(runs)
}

/// The groups' tasks, stopped if the session is dropped before they end (a time limit
/// passed): no file keeps arriving after the session has returned.
struct Tasks(Vec<tokio::task::JoinHandle<Result<Report, TransferError>>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::Update;
    use crate::hla::{Optimum, Table};

    fn files(n: usize) -> Vec<FileSpec> {
        (0..n)
            .map(|i| FileSpec::from_url(&format!("http://h/f{i}.bin")).unwrap())
            .collect()
    }

    /// A survey of `sizes` from one server, `h2` whether it offers HTTP/2.
    fn surveyed(sizes: &[u64], h2: bool) -> Survey {
        Survey {
            sizes: sizes.to_vec(),
            ranged: vec![true; sizes.len()],
            h2c: (0..sizes.len())
                .map(|i| h2.then(|| format!("http://h:81/f{i}.bin")))
                .collect(),
            rtt_ms: 12.0,
        }
    }

    fn params(cc: u32, p: u32, protocol: Protocol) -> Params {
        Params {
            cc,
            p,
            bs: 65536,
            protocol,
        }
    }

    /// A broker whose cache has an optimum for pages and one for images at 50 ms and
    /// 100 Mbit/s: the images' over HTTP/2.
    fn broker() -> Broker {
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
            throughput_mbps: 40.0,
            energy_j_per_100mb: 10.0,
        };
        let mut b = Broker::default();
        b.apply(Update {
            table: Table {
                entries: vec![
                    (at(100e3), optimum(params(16, 1, Protocol::Http1))),
                    (at(3e6), optimum(params(4, 4, Protocol::Http2))),
                ],
            },
            model: None,
        });
        b
    }

    const NET: Network = Network {
        rtt_ms: Some(50.0),
        bandwidth_mbps: 100.0,
    };

    #[test]
    fn a_broker_gives_each_size_cluster_its_own_parameters_under_its_own_condition() {
        let mut sizes = vec![100_000; 10];
        sizes.extend([3_000_000; 2]);
        let (fs, b) = (files(12), broker());
        let g = by_size(&fs, &surveyed(&sizes, true), &b, 64, NET, false);
        assert_eq!(g.len(), 2);
        assert_eq!(
            (g[0].files.len(), g[0].files[0].name.as_str()),
            (10, "f0.bin")
        );
        assert_eq!(
            (g[0].choice.params, g[0].choice.source),
            (params(16, 1, Protocol::Http1), Source::Cache)
        );
        assert_eq!(g[1].choice.params, params(4, 4, Protocol::Http2));
        assert_eq!(g[1].choice.expected_mbps, Some(40.0));
        assert_eq!(
            g[1].condition,
            Condition {
                rtt_ms: 50.0,
                bandwidth_mbps: 100.0,
                mean_file_bytes: 3e6
            }
        );
        assert!(g.iter().all(|g| g.note.is_none()));
        // Without the network's round trip, the survey's.
        let own = Network {
            rtt_ms: None,
            ..NET
        };
        let g = by_size(&fs, &surveyed(&sizes, true), &b, 64, own, false);
        assert_eq!(g[0].condition.rtt_ms, 12.0);
    }

    #[test]
    fn http2_is_kept_only_where_offered_and_channels_fit_the_limit() {
        let mut sizes = vec![100_000; 10];
        sizes.extend([3_000_000; 2]);
        let (fs, b) = (files(12), broker());
        let g = by_size(&fs, &surveyed(&sizes, false), &b, 64, NET, false);
        assert_eq!(g[1].choice.params.protocol, Protocol::Http1);
        assert!(g[1].note.unwrap().contains("does not offer it"));
        // The URLs speak HTTP/2: every group over it.
        let g = by_size(&fs, &surveyed(&sizes, false), &b, 64, NET, true);
        assert!(g
            .iter()
            .all(|g| g.choice.params.protocol == Protocol::Http2 && g.note.is_none()));
        // 16 + 16 channels wanted, 8 allowed: the images' 6 MB take most.
        let g = by_size(&fs, &surveyed(&sizes, true), &b, 8, NET, false);
        let channels: Vec<u32> = g
            .iter()
            .map(|g| g.choice.params.cc * g.choice.params.p)
            .collect();
        assert!(
            channels.iter().sum::<u32>() <= 8 && channels[1] > channels[0],
            "{channels:?}"
        );
    }

    #[test]
    fn fixed_parameters_are_one_group_under_the_surveys_mean_or_none() {
        let fixed = params(3, 2, Protocol::Http1);
        let g = one_group(
            files(3),
            None,
            fixed,
            Network {
                rtt_ms: None,
                bandwidth_mbps: 7.0,
            },
            false,
        );
        assert_eq!(g.files.len(), 3);
        assert_eq!((g.choice.params, g.choice.source), (fixed, Source::Default));
        assert_eq!(
            g.condition,
            Condition {
                rtt_ms: 0.0,
                bandwidth_mbps: 7.0,
                mean_file_bytes: 0.0
            }
        );
        let sv = surveyed(&[1000, 2000, 6000], false);
        let g = one_group(
            files(3),
            Some(&sv),
            fixed,
            Network {
                rtt_ms: None,
                bandwidth_mbps: 7.0,
            },
            true,
        );
        assert_eq!(
            (g.condition.rtt_ms, g.condition.mean_file_bytes),
            (12.0, 3000.0)
        );
        assert_eq!(g.choice.params.protocol, Protocol::Http2);
    }
}
