//! The phone: it speaks an utterance every [`EVERY`], streams the audio to the server when
//! the decision includes a remote recognition, and keeps the first result of the
//! recognitions it started.

use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use roam_decide::Reevaluation;
use roam_net::Label;

use super::decider::{Decider, Plan};
use super::{CHUNK, EVERY, GRACE};
use crate::harness::channel::Conn;
use crate::report::UNFINISHED;
use crate::servers::speech::{CpuLimit, CpuUse, Recognizer, Utterance};
use crate::studies::meatballs::selection::Selection;

/// The id of a message sent now (a foreground message is never deferred).
fn sent_id(s: crate::harness::channel::Sent) -> Result<roam_net::IrobId> {
    match s {
        crate::harness::channel::Sent::Id(id) => Ok(id),
        crate::harness::channel::Sent::Deferred(_) => bail!("roam deferred a foreground message"),
    }
}

/// Where the server's answers go, by utterance id: each to the channel of the utterance that
/// awaits it, as the server's recognition time (s; NaN if it failed).
type Replies = Arc<Mutex<std::collections::HashMap<String, mpsc::Sender<f64>>>>;

/// A recognition's result: who gave it (`"local"` or `"remote"`) and its time, s (not finite
/// if it failed).
type Answer = (&'static str, f64);

/// The phone: an utterance every [`EVERY`] until the run is over; each recognition's delay
/// (ms), the phone's CPU seconds spent recognising, how often each plan was taken, and the CPU
/// its recognizer obtained.
///
/// Per utterance: wait until it is spoken, decide where to recognise it ([`Decider::decide`]),
/// speak it ([`speak`]: the audio streams to the server if remote is planned), start the
/// recognitions ([`Recognitions::start`]), wait for the first result ([`Recognitions::first`];
/// an utterance without one ends the run) and then for the rest ([`Recognitions::rest`]),
/// which the decider learns from.
pub(super) fn phone(
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
    let replies: Replies = Arc::new(Mutex::new(std::collections::HashMap::new()));
    spawn_reply_reader(conn.clone(), replies.clone());
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
        let remote_rx = speak(conn, &replies, u, &id, plan, speak_at)?;
        let end = Instant::now();
        let mut recognitions = Recognitions::start(&local, u, &id, plan, remote_rx, end);
        let deadline = start + duration + GRACE;
        let first = recognitions.first(&decider, &mut plans, plan, expected, end, deadline);
        let delay_s = end.elapsed().as_secs_f64();
        let Some(first) = first else {
            delays.push(UNFINISHED);
            break;
        };
        delays.push(delay_s * 1e3);
        let (local_s, remote_s) = recognitions.rest(first);
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

/// Start the thread that reads the server's answers and hands each to the utterance awaiting
/// it in `replies`: `R id ms` (recognised) or `F id` (the server failed, NaN).
fn spawn_reply_reader(conn: Arc<Conn>, replies: Replies) {
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

/// The user speaks utterance `u` (named `id`) from `speak_at`. If `plan` includes a remote
/// recognition, its audio streams to the server as it is produced, then the end of speech
/// asks for the text; the channel the answer will come on (registered in `replies`) comes
/// back. Otherwise speaking only takes the utterance's length.
fn speak(
    conn: &Conn,
    replies: &Replies,
    u: &Utterance,
    id: &str,
    plan: Plan,
    speak_at: Instant,
) -> Result<Option<mpsc::Receiver<f64>>> {
    if plan == Plan::Local {
        std::thread::sleep(
            (speak_at + Duration::from_secs_f64(u.seconds()))
                .saturating_duration_since(Instant::now()),
        );
        return Ok(None);
    }
    let (tx, rx) = mpsc::channel();
    replies.lock().unwrap().insert(id.to_string(), tx);
    let per = (crate::servers::speech::SAMPLE_RATE as f64 * 2.0 * CHUNK.as_secs_f64()) as usize;
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
    Ok(Some(rx))
}

/// One utterance's recognitions, from the end of speech: a local one on a thread of its own
/// and the server's answer, each reporting on one channel.
struct Recognitions<'a> {
    local: &'a Arc<Recognizer>,
    u: &'a Utterance,
    id: &'a str,
    /// Kept open for the whole utterance, so that the results' channel never disconnects.
    first_tx: mpsc::Sender<Answer>,
    first_rx: mpsc::Receiver<Answer>,
    /// The local recognition, once one has started.
    local_thread: Option<std::thread::JoinHandle<()>>,
}

impl<'a> Recognitions<'a> {
    /// Start the recognitions of utterance `u` (named `id`), whose speech ended at `end`: a
    /// local one unless `plan` is remote only, and a thread that reports the server's answer
    /// (on `remote_rx`, if it was asked) with its delay from `end`.
    fn start(
        local: &'a Arc<Recognizer>,
        u: &'a Utterance,
        id: &'a str,
        plan: Plan,
        remote_rx: Option<mpsc::Receiver<f64>>,
        end: Instant,
    ) -> Recognitions<'a> {
        let (first_tx, first_rx) = mpsc::channel::<Answer>();
        let mut r = Recognitions {
            local,
            u,
            id,
            first_tx,
            first_rx,
            local_thread: None,
        };
        r.local_thread = (plan != Plan::Remote).then(|| r.run_local());
        if let Some(rx) = remote_rx {
            let tx = r.first_tx.clone();
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
        r
    }

    /// Start a local recognition on a thread of its own: it reports its wall time (infinite
    /// if it failed).
    fn run_local(&self) -> std::thread::JoinHandle<()> {
        let tx = self.first_tx.clone();
        let (local, wav, tag) = (self.local.clone(), self.u.wav.clone(), self.id.to_string());
        std::thread::spawn(move || {
            let r = local.recognize(&wav, &tag).map(|r| r.wall.as_secs_f64());
            let _ = tx.send(("local", r.unwrap_or(f64::INFINITY)));
        })
    }

    /// Wait for the first result of a recognition planned as `plan`, until `deadline`.
    /// A lone remote recognition running late is re-evaluated, at `expected` s (times the
    /// schedule's factor) after the speech's `end` and then on the schedule: the `decider` may
    /// start a local one beside it (counted as both in `plans`). A recognition that failed
    /// (not finite) leaves the other to answer: a failed remote one starts a local one if
    /// none runs; with neither left, or past the deadline, the utterance is unfinished
    /// (`None`).
    fn first(
        &mut self,
        decider: &Decider,
        plans: &mut [u64; 3],
        plan: Plan,
        expected: f64,
        end: Instant,
        deadline: Instant,
    ) -> Option<Answer> {
        let schedule = Reevaluation::default();
        let mut next = end + Duration::from_secs_f64((expected * schedule.factor).clamp(0.0, 60.0));
        let mut remote_alive = plan != Plan::Local;
        loop {
            let wait = next.min(deadline).saturating_duration_since(Instant::now());
            match self.first_rx.recv_timeout(wait) {
                Ok(x) if x.1.is_finite() => return Some(x),
                Ok(("remote", _)) => {
                    remote_alive = false;
                    if self.local_thread.is_none() {
                        self.local_thread = Some(self.run_local());
                    }
                }
                Ok(_) if remote_alive => {}
                Ok(_) => return None,
                Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() >= deadline => return None,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if self.local_thread.is_none() && decider.add_local(end.elapsed().as_secs_f64())
                    {
                        self.local_thread = Some(self.run_local());
                        plans[Plan::Both as usize] += 1;
                    }
                    next = Instant::now() + schedule.every;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    /// The rest of the measurements after the `first` result: the local recognition runs to
    /// its end (its CPU time counts), the remote answer is waited for a little. The local and
    /// remote times, where there are some.
    fn rest(self, first: Answer) -> (Option<f64>, Option<f64>) {
        let mut local_s = None;
        let mut remote_s = None;
        let mut record = |(who, s): Answer| match who {
            "local" => local_s = Some(s),
            _ => remote_s = Some(s),
        };
        record(first);
        if let Some(h) = self.local_thread {
            let _ = h.join();
        }
        while let Ok(x) = self.first_rx.recv_timeout(Duration::from_millis(50)) {
            record(x);
        }
        (local_s, remote_s)
    }
}
