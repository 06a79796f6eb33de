//! The Meatballs thesis's speech application (seed 000 §4.4.3, §4.5.5.2): every 30 s the user
//! speaks one of 20 utterances (1-8 s); it is recognised on the phone (PocketSphinx in a CPU
//! cgroup of a quarter of a core), on the server (PocketSphinx with a full core), or both at
//! once, the first result kept. The delay is from the end of speech to the text. Under server
//! load (other clients' recognitions sharing the server's CPU) the phone and the server get
//! 0.8/9 and 0.8 of a core ([`LOAD_SHARES`]).
//!
//! Remote recognition streams the audio to the server while the user speaks (half-second
//! chunks, large foreground IROBs), then asks for the text. The thesis ran it only when WiFi
//! was available ("the upload bandwidth of both 3G and LTE networks is too low"), and so do
//! remote-preferred and the WiFi-side strategies; without WiFi, Meatballs and adaptive may
//! also recognise remotely over the cellular network, with the 3G radio's energy (modelled)
//! and the audio's bytes priced, and that strategy's own error record. Whether the phone is
//! associated with the WiFi is what the emulated scenario says at that moment, as a phone's
//! system knows its association. The decision is
//! made when the user starts to speak, with the utterance's length predicted from those before
//! (the thesis's application-specific predictor); recognition starts when speech ends.
//!
//! Rules (the lab's [`Selection`]): local-only, remote-only (remote always, over 3G when the
//! WiFi is gone), remote-preferred (remote whenever the WiFi is there), adaptive (the single strategy of least weighted cost at the predicted values), and
//! Meatballs (roam-decide with a method and a cost level: local, remote or both, re-evaluated
//! at twice the expected time and every 200 ms after, when a local copy may be started).
//!
//! Energy is modelled: the phone's CPU at [`PHONE_CPU_W`] while it recognises (a
//! reconstructed constant, R), and the radios from the client's interface counters as in the
//! network-selection workload.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use roam_decide::{Meatballs, Method, Outcome, Prices, Reevaluation, Running};
use roam_net::Label;

use crate::harness::channel::Conn;
use crate::harness::system::System;
use crate::harness::trial::{Metric, Trial};
use crate::report::{mean_or_unfinished, UNFINISHED};
use crate::servers::speech::{utterances, CpuLimit, CpuUse, Recognizer, Utterance};
use crate::studies::imp::client::Metered;
use crate::studies::meatballs::net::weighted_costs;
use crate::studies::meatballs::selection::Selection;

/// The application's port.
const PORT: u16 = 6330;
/// One utterance every this long.
pub const EVERY: Duration = Duration::from_secs(30);
/// The phone's and the server's CPU for recognition, in cores of this machine.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shares {
    /// The phone's recognizer.
    pub phone: f64,
    /// The server's recognizer (its own requests and its other clients').
    pub server: f64,
}

/// On the walk: a quarter core for the phone, a core for the server.
pub const WALK_SHARES: Shares = Shares {
    phone: 0.25,
    server: 1.0,
};

/// Under server load: a server core 9x the phone's speed, 0.8 and 0.8/9 of a core, so two
/// trials fit on two cores with room for the emulator. Status D (our decision): the thesis
/// gives neither machine's speed, but reports Meatballs 23% better than *both* local-only and
/// remote-only under a load of 6 rising to 10 other clients, so those two rules were close.
/// With 9x, a remote recognition sharing the server with the load's mean of 8 others takes as
/// long as a local one (9 sharing 9x). The walk's 4x made a remote recognition under that load
/// twice as slow as a local one; 8x still 1.5x (`--quick`, 5 utterances each).
pub const LOAD_SHARES: Shares = Shares {
    phone: 0.8 / 9.0,
    server: 0.8,
};

/// The phone's power while its CPU recognises, in watts. Status R (reconstructed): PowerTutor's
/// HTC Dream CPU model as we recall it (121 mW on, 4.34 mW per percent of use at 384 MHz),
/// about 0.56 W at full use; not checked against the paper.
pub const PHONE_CPU_W: f64 = 0.555;
/// The other clients' concurrent recognitions on a loaded server: Poisson with a mean rising
/// from 6 to 10 over the run (seed 000 §4.5.5.2), redrawn every this long.
const LOAD_EVERY: Duration = Duration::from_secs(10);
/// How long past the run's end the last utterances may take to be recognised: under server
/// load a recognition can outlast the 30 s between utterances, the schedule slips, and the
/// twentieth utterance comes after the run's nominal end (the links are emulated 300 s past
/// it). An utterance still unanswered then is unfinished.
const GRACE: Duration = Duration::from_secs(180);
/// Audio per streamed chunk.
const CHUNK: Duration = Duration::from_millis(500);
/// Bytes of audio a second (16 kHz, 16-bit mono).
const AUDIO_BYTES_PER_S: f64 = crate::servers::speech::SAMPLE_RATE as f64 * 2.0;
/// The cellular radio the remote strategy over 3G is priced with.
const CELL_RADIO: &str = "powertutor-nexus-one/3g-att";
/// The interactive event whose latencies a trial records.
pub const EVENT: &str = "recognition_ms";
/// Where the utterances are synthesised once.
fn cache_dir() -> std::path::PathBuf {
    std::env::temp_dir().join("roam-speech-utterances")
}

/// Server: assemble each utterance's streamed audio; on `E id`, recognise it and answer
/// `R id server_ms\ntext`.
fn serve(
    conn: Arc<Conn>,
    load: bool,
    duration: Duration,
    seed: u64,
    used: &Mutex<Option<CpuUse>>,
) -> Result<()> {
    let dir = std::env::temp_dir();
    let share = if load { LOAD_SHARES } else { WALK_SHARES }.server;
    let limit = CpuLimit::new("server", share)?;
    let rec = Arc::new(Recognizer::new(&dir, Some(limit))?);
    let stop = Arc::new(AtomicBool::new(false));
    let loader = load.then(|| {
        let (rec, stop) = (rec.clone(), stop.clone());
        std::thread::spawn(move || server_load(rec, stop, duration, seed))
    });
    let mut audio: std::collections::HashMap<String, Vec<u8>> = Default::default();
    let result = (|| -> Result<()> {
        while let Some(m) = conn.recv()? {
            let nl = m
                .data
                .iter()
                .position(|&b| b == b'\n')
                .unwrap_or(m.data.len());
            let head = String::from_utf8_lossy(&m.data[..nl]).into_owned();
            let mut f = head.split_whitespace();
            match (f.next(), f.next()) {
                (Some("A"), Some(id)) => audio
                    .entry(id.to_string())
                    .or_default()
                    .extend_from_slice(m.data.get(nl + 1..).unwrap_or(&[])),
                (Some("E"), Some(id)) => {
                    // The phone orders the end after the audio; an end without audio is
                    // answered with an error, and the server goes on.
                    let Some(wav) = audio.remove(id) else {
                        let reply = format!("F {id}\nno audio for {id}");
                        conn.send(Label::ForegroundSmall, &[], reply.into_bytes(), None)?;
                        continue;
                    };
                    let (conn, rec, id) = (conn.clone(), rec.clone(), id.to_string());
                    // Each request on its own thread: the server serves them concurrently.
                    std::thread::spawn(move || {
                        let r = rec.recognize(&wav, &format!("req-{id}"));
                        let reply = match r {
                            Ok(r) => format!("R {id} {}\n{}", r.wall.as_millis(), r.text),
                            Err(e) => format!("F {id}\n{e:#}"),
                        };
                        let _ = conn.send(Label::ForegroundSmall, &[], reply.into_bytes(), None);
                    });
                }
                _ => bail!("a message the speech server does not know: `{head}`"),
            }
        }
        Ok(())
    })();
    stop.store(true, Ordering::SeqCst);
    if let Some(l) = loader {
        let _ = l.join();
    }
    *used.lock().unwrap() = Some(rec.cpu_use());
    result
}

/// Other clients' recognitions: every [`LOAD_EVERY`], a Poisson number of them (mean rising
/// from 6 to 10) run concurrently on the server's CPU, each recognising utterances in a loop.
fn server_load(rec: Arc<Recognizer>, stop: Arc<AtomicBool>, duration: Duration, seed: u64) {
    let Ok(us) = utterances(&cache_dir()) else {
        return;
    };
    let us = Arc::new(us);
    let want = Arc::new(AtomicUsize::new(0));
    let running = Arc::new(AtomicUsize::new(0));
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x10ad);
    let start = Instant::now();
    let mut workers = Vec::new();
    while !stop.load(Ordering::SeqCst)
        && start.elapsed() < duration + GRACE + Duration::from_secs(30)
    {
        let frac = (start.elapsed().as_secs_f64() / duration.as_secs_f64()).min(1.0);
        let n = poisson(&mut rng, 6.0 + 4.0 * frac);
        want.store(n, Ordering::SeqCst);
        while running.load(Ordering::SeqCst) < n {
            running.fetch_add(1, Ordering::SeqCst);
            let k = workers.len();
            let (rec, us, want, running, stop) = (
                rec.clone(),
                us.clone(),
                want.clone(),
                running.clone(),
                stop.clone(),
            );
            workers.push(std::thread::spawn(move || {
                let mut i = k;
                // A worker leaves once fewer are wanted than are running.
                while !stop.load(Ordering::SeqCst)
                    && running.load(Ordering::SeqCst) <= want.load(Ordering::SeqCst)
                {
                    let _ = rec.recognize(&us[i % us.len()].wav, &format!("load-{k}"));
                    i += 7;
                }
                running.fetch_sub(1, Ordering::SeqCst);
            }));
        }
        std::thread::sleep(LOAD_EVERY);
    }
    for w in workers {
        let _ = w.join();
    }
}

/// A Poisson draw with mean `mean` (Knuth's method; the means here are small).
fn poisson(rng: &mut ChaCha8Rng, mean: f64) -> usize {
    let l = (-mean).exp();
    let (mut k, mut p) = (0, 1.0);
    loop {
        p *= rng.gen::<f64>();
        if p <= l {
            return k;
        }
        k += 1;
    }
}

/// The id of a message sent now (a foreground message is never deferred).
fn sent_id(s: crate::harness::channel::Sent) -> Result<roam_net::IrobId> {
    match s {
        crate::harness::channel::Sent::Id(id) => Ok(id),
        crate::harness::channel::Sent::Deferred(_) => bail!("roam deferred a foreground message"),
    }
}

/// What the phone does with one utterance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Plan {
    Local,
    Remote,
    Both,
}

/// The phone's decision-making: the rule, and for Meatballs and adaptive the predictors of the
/// local and remote recognition times and of the utterance's length.
struct Decider {
    rule: Selection,
    mb: Meatballs,
    local: roam_decide::PredictorId,
    remote: roam_decide::PredictorId,
    /// Remote recognition with the audio over the cellular network (its own error record:
    /// the 3G's upload and round trips add to the server's time).
    remote_cell: roam_decide::PredictorId,
    s_local: roam_decide::StrategyId,
    s_remote: roam_decide::StrategyId,
    s_remote_cell: roam_decide::StrategyId,
    with_wifi: roam_decide::EvaluatorId,
    without_wifi: roam_decide::EvaluatorId,
    /// Whether the last decision was made without WiFi (which remote strategy ran).
    cellular: bool,
    /// The cellular remote strategy's energy (J) and data (bytes) for the utterance being
    /// decided, as f64 bits.
    cell: Arc<(AtomicU64, AtomicU64)>,
    /// The cellular radio's model.
    radio: Arc<roam_budget::profile::RadioProfile>,
    /// Local and remote times against the utterance's length (regressions).
    local_fit: roam_decide::predictors::LinearRegression,
    remote_fit: roam_decide::predictors::LinearRegression,
    lengths: Vec<f64>,
}

impl Decider {
    fn new(rule: Selection) -> Result<Decider> {
        let (method, prices) = match rule {
            Selection::Meatballs(m, l) => (m, Prices::level(l)),
            _ => (Method::Empirical, Prices::FREE),
        };
        let mut mb = Meatballs::new(prices);
        let local = mb.create_predictor("local recognition (s)");
        let remote = mb.create_predictor("remote recognition (s)");
        let remote_cell = mb.create_predictor("remote recognition over the cellular network (s)");
        // Until measured: a quarter of a core takes about the utterance's length, the
        // server a quarter of it (what a first look at PocketSphinx here gave).
        mb.set_prediction(local, 3.0)?;
        mb.set_prediction(remote, 1.0)?;
        mb.set_prediction(remote_cell, 1.5)?;
        let s_local = mb.make_strategy("local", &[local], move |v| {
            Outcome::new(v[local], PHONE_CPU_W * v[local], 0.0)
        })?;
        // WiFi only: no metered data; the radio's energy of a WiFi upload is small (0.04 J per
        // transfer on Huang et al.'s model), the phone's CPU idle.
        let s_remote = mb.make_strategy("remote", &[remote], move |v| {
            Outcome::new(v[remote], 0.04, 0.0)
        })?;
        // Over the cellular network the audio is metered data, and the radio is up for the
        // utterance and its tail (modelled per decision for the predicted length:
        // `Decider::cellular_cost`).
        let cell = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
        let c = cell.clone();
        let s_remote_cell = mb.make_strategy("remote over cellular", &[remote_cell], move |v| {
            let j = f64::from_bits(c.0.load(Ordering::Relaxed));
            let bytes = f64::from_bits(c.1.load(Ordering::Relaxed));
            Outcome::new(v[remote_cell], j, bytes)
        })?;
        let both = mb.make_redundant_strategy("both", &[s_local, s_remote])?;
        let both_cell =
            mb.make_redundant_strategy("both over cellular", &[s_local, s_remote_cell])?;
        let with_wifi = mb.register_strategies(&[both], method)?;
        let without_wifi = mb.register_strategies(&[both_cell], method)?;
        Ok(Decider {
            rule,
            mb,
            local,
            remote,
            remote_cell,
            s_local,
            s_remote,
            s_remote_cell,
            with_wifi,
            without_wifi,
            cellular: false,
            cell,
            radio: Arc::new(
                roam_budget::profile::profile(CELL_RADIO)
                    .map_err(|e| anyhow!("radio profile {CELL_RADIO}: {e}"))?,
            ),
            local_fit: Default::default(),
            remote_fit: Default::default(),
            lengths: Vec::new(),
        })
    }

    /// The predicted length of the next utterance: the mean of those before (5 s at first).
    fn predicted_length(&self) -> f64 {
        if self.lengths.is_empty() {
            5.0
        } else {
            self.lengths.iter().sum::<f64>() / self.lengths.len() as f64
        }
    }

    /// Set the predictors' predictions for an utterance of `len` seconds.
    fn predict(&mut self, len: f64) -> Result<(f64, f64)> {
        let l = self.local_fit.predict(len).unwrap_or(len).max(0.01);
        let r = self.remote_fit.predict(len).unwrap_or(len / 4.0).max(0.01);
        self.mb.set_prediction(self.local, l)?;
        self.mb.set_prediction(self.remote, r)?;
        // The same regression: what the cellular network adds shows in its error record.
        self.mb.set_prediction(self.remote_cell, r)?;
        Ok((l, r))
    }

    /// Streaming `seconds` of audio over the cellular network: the radio's energy (modelled:
    /// from an idle radio, the upload at the audio's rate, then the tail) and the bytes.
    fn cellular_cost(&self, seconds: f64) -> (f64, f64) {
        let bytes = AUDIO_BYTES_PER_S * seconds.max(0.1);
        let radio = roam_budget::radio::Radio::new(self.radio.clone(), roam_core::Time::ZERO);
        let j = radio.marginal_energy(
            roam_core::Time::ZERO,
            roam_core::Bytes(bytes as u64),
            roam_budget::radio::Direction::Up,
            roam_core::BitRate::bps((AUDIO_BYTES_PER_S * 8.0) as u64),
        );
        (j.0, bytes)
    }

    fn decide(&mut self, wifi: bool) -> Result<(Plan, f64)> {
        let len = self.predicted_length();
        let (l, r) = self.predict(len)?;
        let (j, bytes) = self.cellular_cost(len);
        self.cell.0.store(j.to_bits(), Ordering::Relaxed);
        self.cell.1.store(bytes.to_bits(), Ordering::Relaxed);
        self.cellular = !wifi;
        let ev = if wifi {
            self.with_wifi
        } else {
            self.without_wifi
        };
        Ok(match self.rule {
            Selection::LocalOnly => (Plan::Local, l),
            Selection::RemoteOnly => (Plan::Remote, r),
            Selection::RemotePreferred if wifi => (Plan::Remote, r),
            Selection::RemotePreferred => (Plan::Local, l),
            Selection::Meatballs(..) => {
                let c = self.mb.choose(ev)?;
                let plan = if c.strategy == self.s_local {
                    Plan::Local
                } else if c.strategy == self.s_remote || c.strategy == self.s_remote_cell {
                    Plan::Remote
                } else {
                    Plan::Both
                };
                (plan, c.expected.time.0)
            }
            _ => {
                let c = self.mb.choose_single(ev)?;
                let plan = if c.strategy == self.s_local {
                    Plan::Local
                } else {
                    Plan::Remote
                };
                (plan, c.expected.time.0)
            }
        })
    }

    /// A remote recognition running `elapsed` s past the end of speech: start a local one too?
    fn add_local(&self, elapsed: f64) -> bool {
        if !matches!(self.rule, Selection::Meatballs(..)) {
            return false;
        }
        let (strategy, ev) = if self.cellular {
            (self.s_remote_cell, self.without_wifi)
        } else {
            (self.s_remote, self.with_wifi)
        };
        let running = Running { strategy, elapsed };
        self.mb
            .reevaluate(ev, running)
            .is_ok_and(|c| c.strategy != strategy)
    }

    /// What happened: each measured time against its prediction.
    fn measured(&mut self, len: f64, local: Option<f64>, remote: Option<f64>) -> Result<()> {
        self.lengths.push(len);
        let (pl, pr) = self.predict(len)?;
        if let Some(t) = local {
            self.mb.add_measurement(self.local, t, pl)?;
            self.local_fit.add(len, t)?;
        }
        match remote {
            // Over the cellular network: its own error record; the regression stays the
            // server's over WiFi.
            Some(t) if self.cellular => self.mb.add_measurement(self.remote_cell, t, pr)?,
            Some(t) => {
                self.mb.add_measurement(self.remote, t, pr)?;
                self.remote_fit.add(len, t)?;
            }
            None => {}
        }
        Ok(())
    }
}

/// What a trial's client measured.
struct Measured {
    delays_ms: Vec<f64>,
    cpu_s: f64,
    radio_j: f64,
    metered: u64,
    plans: [u64; 3],
    phone_cpu: CpuUse,
}

/// Run one trial of the speech application; `load`: other clients load the server.
pub fn run(t: &Trial, load: bool) -> Result<Vec<Metric>> {
    let rule = match t.system {
        System::Select(s) if s.speech() => s,
        other => bail!(
            "the speech application runs with a speech rule, not `{}`",
            other.name()
        ),
    };
    let (seed, duration) = (t.seed, t.duration);
    let us = utterances(&cache_dir()).context("synthesising the utterances")?;
    let server_cpu = Arc::new(Mutex::new(None));
    let used = server_cpu.clone();
    let server = t.start_server(
        "speech",
        PORT,
        || Ok(()),
        move |(), c| serve(c, load, duration, seed, &used),
    )?;
    let locals = t.client_links();
    let system = t.system;
    let progress = t.progress.clone();
    let clock = t.emu.clock();
    let wifi = t
        .emu
        .links()
        .iter()
        .find(|l| l.config.kind == roam_trace::LinkKind::Wifi)
        .map(|l| l.config.trace.availability.clone());
    let wifi_up = move || wifi.as_ref().is_some_and(|a| *a.value_at(clock.now()));
    let client = move || -> Result<(Measured, Arc<Conn>)> {
        let conn = Arc::new(Conn::connect(system, &locals, PORT)?);
        let meter = Metered::start(&conn)?;
        let share = if load { LOAD_SHARES } else { WALK_SHARES }.phone;
        let out = phone(&conn, &us, rule, duration, share, &wifi_up, &*progress);
        let (radio_j, metered) = meter.finish();
        let (delays_ms, cpu_s, plans, phone_cpu) = out?;
        Ok((
            Measured {
                delays_ms,
                cpu_s,
                radio_j,
                metered,
                plans,
                phone_cpu,
            },
            conn,
        ))
    };
    let out = t.run_client("speech", client);
    let (m, recovery) = server.finish_client(out)?;
    t.event_latencies(EVENT, m.delays_ms.iter().copied());
    let total_s = m.delays_ms.iter().sum::<f64>() / 1e3;
    let energy = m.radio_j + PHONE_CPU_W * m.cpu_s;
    let mut metrics = vec![
        Metric::new("recognition_ms", mean_or_unfinished(&m.delays_ms), "ms"),
        Metric::new("energy_J", energy, "J"),
        Metric::new("cpu_J", PHONE_CPU_W * m.cpu_s, "J"),
        Metric::new("data_kB", m.metered as f64 / 1e3, "kB"),
        Metric::new("utterances", m.delays_ms.len() as f64, "msgs"),
        Metric::new("local", m.plans[0] as f64, "msgs"),
        Metric::new("remote", m.plans[1] as f64, "msgs"),
        Metric::new("both", m.plans[2] as f64, "msgs"),
    ];
    // Whether the recognizers got the CPU they stand for (trials side by side share the
    // machine): the fraction of its share each obtained while busy.
    let server_cpu = *server_cpu.lock().unwrap();
    for (name, u) in [
        ("phone_cpu_got", Some(m.phone_cpu)),
        ("server_cpu_got", server_cpu),
    ] {
        if let Some(x) = u.and_then(|u| u.obtained()) {
            metrics.push(Metric::new(name, x, "of share"));
        }
    }
    Ok(metrics
        .into_iter()
        .chain(weighted_costs(total_s, energy, m.metered))
        .chain(recovery)
        .collect())
}

/// The phone: an utterance every [`EVERY`] until the run is over; each recognition's delay
/// (ms), the phone's CPU seconds spent recognising, how often each plan was taken, and the CPU
/// its recognizer obtained.
fn phone(
    conn: &Arc<Conn>,
    us: &[Utterance],
    rule: Selection,
    duration: Duration,
    share: f64,
    wifi_up: &dyn Fn() -> bool,
    progress: &(dyn Fn(u64) + Send + Sync),
) -> Result<(Vec<f64>, f64, [u64; 3], CpuUse)> {
    let limit = CpuLimit::new("phone", share)?;
    let local = Arc::new(Recognizer::new(&std::env::temp_dir(), Some(limit))?);
    let replies = Arc::new(Mutex::new(std::collections::HashMap::<
        String,
        mpsc::Sender<f64>,
    >::new()));
    {
        let (conn, replies) = (conn.clone(), replies.clone());
        std::thread::spawn(move || {
            while let Ok(Some(m)) = conn.recv() {
                let text = String::from_utf8_lossy(&m.data);
                let mut f = text.split_whitespace();
                // `R id ms`: recognised; `F id`: the server failed (NaN: a failure).
                let (kind, id, ms) = (f.next(), f.next(), f.next());
                let v = match (kind, ms) {
                    (Some("R"), Some(ms)) => ms.parse::<f64>().map_or(f64::NAN, |v| v / 1e3),
                    (Some("F"), _) => f64::NAN,
                    _ => continue,
                };
                if let Some(tx) = id.and_then(|id| replies.lock().unwrap().remove(id)) {
                    let _ = tx.send(v);
                }
            }
        });
    }
    let mut decider = Decider::new(rule)?;
    let start = Instant::now();
    let mut delays = Vec::new();
    let mut cpu_s = 0.0;
    let mut plans = [0u64; 3];
    let mut k = 0usize;
    // One utterance every EVERY: 20 in the thesis's 10 minutes.
    let count = ((duration.as_secs_f64() / EVERY.as_secs_f64()).floor() as usize).max(1);
    while k < count {
        let speak_at = start + EVERY * k as u32;
        std::thread::sleep(speak_at.saturating_duration_since(Instant::now()));
        progress(start.elapsed().as_secs());
        let u = &us[k % us.len()];
        let len = u.seconds();
        let wifi = wifi_up();
        let (plan, expected) = decider.decide(wifi)?;
        plans[plan as usize] += 1;
        let id = format!("u{k}");
        // Speaking: the audio streams to the server as it is produced if remote is planned.
        let remote_rx = if plan != Plan::Local {
            let (tx, rx) = mpsc::channel();
            replies.lock().unwrap().insert(id.clone(), tx);
            let per =
                (crate::servers::speech::SAMPLE_RATE as f64 * 2.0 * CHUNK.as_secs_f64()) as usize;
            // Each chunk depends on the one before and the end on the last: roam-net may carry
            // them over different networks, and the server must get the audio in order and
            // whole before it recognises.
            let mut last: Option<roam_net::IrobId> = None;
            for (i, part) in u.wav.chunks(per).enumerate() {
                let mut m = format!("A {id}\n").into_bytes();
                m.extend_from_slice(part);
                last = Some(sent_id(conn.send(
                    Label::ForegroundLarge,
                    last.as_slice(),
                    m,
                    None,
                )?)?);
                std::thread::sleep(
                    (speak_at + CHUNK * (i as u32 + 1)).saturating_duration_since(Instant::now()),
                );
            }
            sent_id(conn.send(
                Label::ForegroundSmall,
                last.as_slice(),
                format!("E {id}").into_bytes(),
                None,
            )?)?;
            Some(rx)
        } else {
            std::thread::sleep(
                (speak_at + Duration::from_secs_f64(len)).saturating_duration_since(Instant::now()),
            );
            None
        };
        let end = Instant::now();
        let (first_tx, first_rx) = mpsc::channel::<(&'static str, f64)>();
        let run_local = |tx: mpsc::Sender<(&'static str, f64)>| {
            let (local, wav, tag) = (local.clone(), u.wav.clone(), id.clone());
            std::thread::spawn(move || {
                let r = local.recognize(&wav, &tag).map(|r| r.wall.as_secs_f64());
                let _ = tx.send(("local", r.unwrap_or(f64::INFINITY)));
            })
        };
        let mut local_thread = (plan != Plan::Remote).then(|| run_local(first_tx.clone()));
        if let Some(rx) = remote_rx {
            let tx = first_tx.clone();
            std::thread::spawn(move || {
                if let Ok(v) = rx.recv() {
                    let s = if v.is_finite() {
                        end.elapsed().as_secs_f64()
                    } else {
                        f64::NAN
                    };
                    let _ = tx.send(("remote", s));
                }
            });
        }
        // Wait for the first result, re-evaluating a lone remote recognition as it runs late.
        let deadline = start + duration + GRACE;
        let schedule = Reevaluation::default();
        let mut next = end + Duration::from_secs_f64((expected * schedule.factor).clamp(0.0, 60.0));
        // A recognition that failed (not finite) leaves the other to answer: a failed remote
        // one starts a local one if none runs; with neither left, the utterance is unfinished.
        let mut remote_alive = plan != Plan::Local;
        let first = loop {
            let wait = next.min(deadline).saturating_duration_since(Instant::now());
            match first_rx.recv_timeout(wait) {
                Ok(x) if x.1.is_finite() => break Some(x),
                Ok(("remote", _)) => {
                    remote_alive = false;
                    if local_thread.is_none() {
                        local_thread = Some(run_local(first_tx.clone()));
                    }
                }
                Ok(_) if remote_alive => {}
                Ok(_) => break None,
                Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() >= deadline => break None,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if local_thread.is_none() && decider.add_local(end.elapsed().as_secs_f64()) {
                        local_thread = Some(run_local(first_tx.clone()));
                        plans[Plan::Both as usize] += 1;
                    }
                    next = Instant::now() + schedule.every;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break None,
            }
        };
        let delay_s = end.elapsed().as_secs_f64();
        match first {
            Some(_) => delays.push(delay_s * 1e3),
            None => {
                delays.push(UNFINISHED);
                break;
            }
        }
        // The rest of the measurements: the local recognition runs to its end (its CPU time
        // counts), the remote answer is waited for a little.
        let mut local_s = None;
        let mut remote_s = None;
        let mut record = |(who, s): (&str, f64)| match who {
            "local" => local_s = Some(s),
            _ => remote_s = Some(s),
        };
        if let Some(f) = first {
            record(f);
        }
        if let Some(h) = local_thread {
            let _ = h.join();
        }
        while let Ok(x) = first_rx.recv_timeout(Duration::from_millis(50)) {
            record(x);
        }
        // The phone's CPU is busy for as long as its recognition runs.
        if let Some(s) = local_s.filter(|s| s.is_finite()) {
            cpu_s += s;
        }
        decider.measured(
            len,
            local_s.filter(|s| s.is_finite()),
            remote_s.filter(|s| s.is_finite()),
        )?;
        k += 1;
    }
    Ok((delays, cpu_s, plans, local.cpu_use()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use roam_decide::CostLevel;

    /// Without WiFi, Meatballs may recognise remotely over the cellular network: free, the
    /// server's faster recognition wins (alone or beside a local one); when a second saved is
    /// worth only 1 J or 1 KB, the 3G's energy and the audio's bytes keep it local.
    #[test]
    fn without_wifi_the_cellular_network_is_a_priced_option() {
        let mut free =
            Decider::new(Selection::Meatballs(Method::Empirical, CostLevel::None)).unwrap();
        let (plan, _) = free.decide(false).unwrap();
        assert_ne!(
            plan,
            Plan::Local,
            "free: the server's 1.5 s against the phone's 3 s"
        );
        assert!(free.cellular);
        let (j, bytes) = free.cellular_cost(5.0);
        assert!(j > 1.0 && bytes == 160_000.0, "{j} J {bytes} B");
        let mut dear =
            Decider::new(Selection::Meatballs(Method::Empirical, CostLevel::High)).unwrap();
        assert_eq!(dear.decide(false).unwrap().0, Plan::Local);
        // With WiFi, remote costs next to nothing at any level.
        assert_ne!(dear.decide(true).unwrap().0, Plan::Local);
        assert!(!dear.cellular);
    }
}
