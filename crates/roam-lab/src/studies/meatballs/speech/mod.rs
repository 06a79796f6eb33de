//! The Meatballs thesis's speech application (Meatballs thesis §4.4.3, §4.5.5.2): every 30 s the user
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
//!
//! The server is in `server`, the phone's decisions in `decider`, and the phone that speaks
//! and recognises in `phone`; this module runs a trial and reports it.

mod decider;
mod phone;
mod server;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::harness::channel::Conn;
use crate::harness::trial::{Metric, Trial};
use crate::report::mean_or_unfinished;
use crate::servers::speech::{utterances, CpuUse};
use crate::studies::imp::client::Metered;
use crate::studies::meatballs::net::weighted_costs;
use crate::studies::meatballs::selection::Selection;
use phone::phone;
use server::serve;

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
/// from 6 to 10 over the run (Meatballs thesis §4.5.5.2), redrawn every this long.
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
    let rule = match t.system.get::<Selection>() {
        Some(&s) if s.speech() => s,
        _ => bail!(
            "the speech application runs with a speech rule, not `{}`",
            t.system.name()
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
    let system = t.system.clone();
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
