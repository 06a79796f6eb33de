//! A real speech recognizer for the Meatballs thesis's second application (Meatballs thesis §4.4.3):
//! Debian's PocketSphinx (`pocketsphinx_continuous` with the `pocketsphinx-en-us` model)
//! recognising utterances synthesised once with Debian's `espeak-ng`.
//!
//! - [`Utterance`]s: 20 sentences of 1-8 s, spoken by espeak-ng, resampled to the model's 16 kHz
//!   mono 16-bit (linear interpolation) and kept in a cache directory, so every trial hears the
//!   same audio. 16 kHz × 16 bit is 32 KB of audio a second; the thesis's recordings were 20
//!   KB/s.
//! - [`Recognizer`]: runs PocketSphinx on one utterance, optionally inside a CPU cgroup whose
//!   quota stands for a phone's slower CPU (cgroup v1 `cpu.cfs_quota_us` or v2 `cpu.max`): a
//!   share of 0.25 gives it a quarter of one core, as a 2010 phone against a desktop core.
//!   Where no CPU cgroup can be made (not root, no cpu controller) the share is refused with
//!   a one-line reason instead of silently running at full speed.
//! - [`CpuUse`]: whether a recognizer really got its share. A quota is a ceiling, not a
//!   floor: trials run side by side (or anything else on the machine) can leave a recognizer
//!   less than its share, which would make it look slower than the CPU it stands for. Each
//!   recognition's CPU time (the shell's `times`) is summed against the time the recognizer
//!   was busy, so a report can say what fraction of its share it obtained.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// The 20 sentences, from short to long (espeak-ng at 150 words a minute speaks them in about
/// 1 to 8 seconds).
pub const SENTENCES: [&str; 20] = [
    "Call home.",
    "What time is it?",
    "Open my calendar.",
    "Send a message to Anna.",
    "How is the weather tomorrow?",
    "Find a coffee shop near here.",
    "Remind me to buy milk after work.",
    "Play the next song on my playlist please.",
    "How long does it take to drive to the airport?",
    "Set an alarm for six thirty tomorrow morning and turn on the radio.",
    "Tell me the score of last night's game between the two teams from the city.",
    "Read me the last three messages from my brother and mark them as read.",
    "Which restaurants nearby are still open and have a table for four people tonight?",
    "Book a taxi to the train station for half past seven and send the driver my number.",
    "Add eggs, bread, butter, apples and two bottles of water to the shopping list for Saturday.",
    "Translate good morning, how are you, and where is the nearest pharmacy into Spanish for me.",
    "Show me the fastest way to the museum by bus and tell me when the next one leaves from here.",
    "Write an email to the team saying that the meeting is moved to Thursday afternoon at three o'clock.",
    "Find the photos I took at the beach last summer and share the best ones with my parents and my sister.",
    "Check my flight to Boston on Friday, tell me if it is on time, and which gate it leaves from in the morning.",
];

/// The sample rate the en-us model wants.
pub const SAMPLE_RATE: u32 = 16_000;

/// One utterance: its text and its audio as a 16 kHz mono 16-bit WAV file.
#[derive(Clone, Debug)]
pub struct Utterance {
    /// What was said.
    pub text: String,
    /// The WAV file's bytes.
    pub wav: Vec<u8>,
}

impl Utterance {
    /// Its length in seconds.
    pub fn seconds(&self) -> f64 {
        self.wav.len().saturating_sub(44) as f64 / (2.0 * SAMPLE_RATE as f64)
    }
}

/// Whether espeak-ng and PocketSphinx (with its English model) are installed; if not, what is
/// missing.
pub fn missing() -> Option<String> {
    let mut m = Vec::new();
    if which("espeak-ng").is_none() {
        m.push("espeak-ng");
    }
    if which("pocketsphinx_continuous").is_none() {
        m.push("pocketsphinx");
    }
    if !Path::new("/usr/share/pocketsphinx/model/en-us").exists() {
        m.push("pocketsphinx-en-us");
    }
    (!m.is_empty()).then(|| m.join(", "))
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(program))
        .find(|p| p.is_file())
}

/// The 20 utterances, synthesised into `cache` the first time (one WAV file each).
pub fn utterances(cache: &Path) -> Result<Vec<Utterance>> {
    std::fs::create_dir_all(cache).with_context(|| format!("creating {}", cache.display()))?;
    SENTENCES
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let path = cache.join(format!("utterance-{i:02}.wav"));
            if !path.exists() {
                let raw = cache.join(format!(".utterance-{i:02}.espeak.wav"));
                let out = Command::new("espeak-ng")
                    .args(["-s", "150", "-w"])
                    .arg(&raw)
                    .arg(text)
                    .output()
                    .context("running espeak-ng")?;
                if !out.status.success() {
                    bail!(
                        "espeak-ng failed on utterance {i}: {}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
                let wav =
                    std::fs::read(&raw).with_context(|| format!("reading {}", raw.display()))?;
                let resampled = to_16k(&wav).with_context(|| format!("{}", raw.display()))?;
                let tmp = cache.join(format!(".utterance-{i:02}.wav.tmp"));
                std::fs::write(&tmp, &resampled)?;
                std::fs::rename(&tmp, &path)?;
                let _ = std::fs::remove_file(&raw);
            }
            Ok(Utterance {
                text: text.to_string(),
                wav: std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?,
            })
        })
        .collect()
}

/// A mono 16-bit PCM WAV file at any rate, resampled to [`SAMPLE_RATE`] by linear
/// interpolation, as a WAV file.
pub fn to_16k(wav: &[u8]) -> Result<Vec<u8>> {
    let (rate, samples) = parse_wav(wav)?;
    let n = (samples.len() as u64 * SAMPLE_RATE as u64 / rate as u64) as usize;
    let step = rate as f64 / SAMPLE_RATE as f64;
    let out: Vec<i16> = (0..n)
        .map(|i| {
            let x = i as f64 * step;
            let j = x.floor() as usize;
            let f = x - j as f64;
            let a = samples[j.min(samples.len() - 1)] as f64;
            let b = samples[(j + 1).min(samples.len() - 1)] as f64;
            (a + (b - a) * f).round() as i16
        })
        .collect();
    Ok(wav_file(SAMPLE_RATE, &out))
}

/// The sample rate and samples of a mono 16-bit PCM WAV file (its `fmt ` and `data` chunks).
fn parse_wav(b: &[u8]) -> Result<(u32, Vec<i16>)> {
    if b.len() < 12 || &b[..4] != b"RIFF" || &b[8..12] != b"WAVE" {
        bail!("not a WAV file");
    }
    let (mut rate, mut data) = (None, None);
    let mut i = 12;
    while i + 8 <= b.len() {
        let id = &b[i..i + 4];
        let len = u32::from_le_bytes(b[i + 4..i + 8].try_into().unwrap()) as usize;
        // espeak-ng writing to a file leaves the data length at its maximum when streaming.
        let body = &b[i + 8..(i + 8).saturating_add(len).min(b.len())];
        match id {
            b"fmt " if body.len() >= 16 => {
                let format = u16::from_le_bytes([body[0], body[1]]);
                let channels = u16::from_le_bytes([body[2], body[3]]);
                let bits = u16::from_le_bytes([body[14], body[15]]);
                if (format, channels, bits) != (1, 1, 16) {
                    bail!("format {format}, {channels} channel(s), {bits} bits: expected mono 16-bit PCM");
                }
                rate = Some(u32::from_le_bytes(body[4..8].try_into().unwrap()));
            }
            b"data" => {
                data = Some(
                    body.chunks_exact(2)
                        .map(|s| i16::from_le_bytes([s[0], s[1]]))
                        .collect::<Vec<_>>(),
                );
            }
            _ => {}
        }
        i = i + 8 + len + (len & 1);
    }
    match (rate, data) {
        (Some(r), Some(d)) if r > 0 && !d.is_empty() => Ok((r, d)),
        _ => bail!("a WAV file without a format or samples"),
    }
}

/// A mono 16-bit PCM WAV file of `samples` at `rate`.
fn wav_file(rate: u32, samples: &[i16]) -> Vec<u8> {
    let data = samples.len() as u32 * 2;
    let mut v = Vec::with_capacity(44 + data as usize);
    v.extend_from_slice(b"RIFF");
    v.extend_from_slice(&(36 + data).to_le_bytes());
    v.extend_from_slice(b"WAVEfmt ");
    v.extend_from_slice(&16u32.to_le_bytes());
    v.extend_from_slice(&1u16.to_le_bytes()); // PCM
    v.extend_from_slice(&1u16.to_le_bytes()); // mono
    v.extend_from_slice(&rate.to_le_bytes());
    v.extend_from_slice(&(rate * 2).to_le_bytes());
    v.extend_from_slice(&2u16.to_le_bytes());
    v.extend_from_slice(&16u16.to_le_bytes());
    v.extend_from_slice(b"data");
    v.extend_from_slice(&data.to_le_bytes());
    for s in samples {
        v.extend_from_slice(&s.to_le_bytes());
    }
    v
}

/// A CPU cgroup limiting the processes put in it to `share` of one core; removed on drop.
pub struct CpuLimit {
    dir: PathBuf,
    share: f64,
}

impl CpuLimit {
    /// A new cgroup named `name` (unique per process) with `share` of one core (0 < share).
    pub fn new(name: &str, share: f64) -> Result<CpuLimit> {
        if !(share > 0.0 && share.is_finite()) {
            bail!("a CPU share of {share}: expected a positive fraction of one core");
        }
        let period: u64 = 100_000;
        let quota = ((share * period as f64) as u64).max(1_000);
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let leaf = format!("roam-{name}-{}-{n}", std::process::id());
        // cgroup v2: a `cpu.max` of "quota period"; v1: the cpu controller's CFS quota.
        let v2 = Path::new("/sys/fs/cgroup/cgroup.controllers");
        let (dir, files): (PathBuf, Vec<(&str, String)>) = if std::fs::read_to_string(v2)
            .is_ok_and(|c| c.split_whitespace().any(|x| x == "cpu"))
        {
            (
                Path::new("/sys/fs/cgroup").join(&leaf),
                vec![("cpu.max", format!("{quota} {period}"))],
            )
        } else if Path::new("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").exists() {
            (
                Path::new("/sys/fs/cgroup/cpu").join(&leaf),
                vec![
                    ("cpu.cfs_period_us", period.to_string()),
                    ("cpu.cfs_quota_us", quota.to_string()),
                ],
            )
        } else {
            bail!("no CPU cgroup controller (neither cgroup v2 `cpu` nor v1 `cpu`) to limit the recognizer with");
        };
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("creating the CPU cgroup {} (needs root)", dir.display()))?;
        let limit = CpuLimit { dir, share };
        for (f, v) in files {
            let p = limit.dir.join(f);
            std::fs::write(&p, &v).with_context(|| format!("writing {v} to {}", p.display()))?;
        }
        Ok(limit)
    }

    /// The file a process joins the cgroup by (writing its pid).
    fn procs(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }
}

impl Drop for Recognizer {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}

impl Drop for CpuLimit {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// PocketSphinx on one utterance at a time, optionally CPU-limited.
pub struct Recognizer {
    limit: Option<CpuLimit>,
    scratch: PathBuf,
    usage: std::sync::Mutex<Busy>,
}

/// One recognition's result.
#[derive(Clone, Debug)]
pub struct Recognition {
    /// What PocketSphinx heard.
    pub text: String,
    /// From its start to its exit.
    pub wall: Duration,
    /// The CPU time (user and system) it used.
    pub cpu: Duration,
}

/// The CPU a recognizer used against the time it was busy (one or more recognitions running).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CpuUse {
    /// CPU seconds of all its recognitions.
    pub cpu_s: f64,
    /// Seconds during which at least one recognition ran.
    pub busy_s: f64,
    /// The share of one core it was limited to (1 without a limit).
    pub share: f64,
}

impl CpuUse {
    /// The fraction of its share the recognizer obtained while busy: near 1 when the quota was
    /// what limited it (or a single-threaded recognition used a whole core); lower when the
    /// machine's other work took CPU from it. `None` before any recognition.
    pub fn obtained(&self) -> Option<f64> {
        (self.busy_s > 0.0).then(|| self.cpu_s / self.busy_s / self.share)
    }
}

/// Book-keeping of the busy time: recognitions running, since when, and the totals.
#[derive(Default)]
struct Busy {
    running: usize,
    since: Option<Instant>,
    busy: Duration,
    cpu: Duration,
}

impl Recognizer {
    /// A recognizer writing its input under a directory of its own below `scratch`, limited to
    /// `limit`'s CPU share if given.
    pub fn new(scratch: &Path, limit: Option<CpuLimit>) -> Result<Recognizer> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let scratch = &scratch.join(format!("recognizer-{}-{n}", std::process::id()));
        if let Some(m) = missing() {
            bail!("the speech recognizer needs {m} (apt-get install pocketsphinx pocketsphinx-en-us espeak-ng)");
        }
        std::fs::create_dir_all(scratch)
            .with_context(|| format!("creating {}", scratch.display()))?;
        Ok(Recognizer {
            limit,
            scratch: scratch.to_path_buf(),
            usage: Default::default(),
        })
    }

    /// The CPU its recognitions used so far against the time it was busy.
    pub fn cpu_use(&self) -> CpuUse {
        let b = self.usage.lock().unwrap();
        let open = b.since.map_or(Duration::ZERO, |t| t.elapsed());
        CpuUse {
            cpu_s: b.cpu.as_secs_f64(),
            busy_s: (b.busy + open).as_secs_f64(),
            share: self.limit.as_ref().map_or(1.0, |l| l.share),
        }
    }

    /// Recognise `wav` (`tag` names its scratch files; unique among concurrent calls).
    pub fn recognize(&self, wav: &[u8], tag: &str) -> Result<Recognition> {
        let input = self.scratch.join(format!("{tag}.wav"));
        let times = self.scratch.join(format!("{tag}.times"));
        std::fs::write(&input, wav).with_context(|| format!("writing {}", input.display()))?;
        // The shell joins the cgroup first, so nothing of the recognizer runs outside the
        // limit, and stays to write its child's CPU times.
        let join = match &self.limit {
            Some(l) => format!("echo $$ > '{}' && ", l.procs().display()),
            None => String::new(),
        };
        let script = format!(
            "{join}pocketsphinx_continuous -infile '{}' -logfn /dev/null; s=$?; times > '{}'; exit $s",
            input.display(),
            times.display()
        );
        let t0 = Instant::now();
        self.started(t0);
        let out = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .output()
            .context("running pocketsphinx_continuous");
        let took = t0.elapsed();
        let cpu = std::fs::read_to_string(&times)
            .ok()
            .and_then(|t| children_cpu(&t))
            .unwrap_or(Duration::ZERO);
        self.ended(cpu);
        let _ = std::fs::remove_file(&input);
        let _ = std::fs::remove_file(&times);
        let out = out?;
        if !out.status.success() {
            bail!(
                "pocketsphinx_continuous failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let text = String::from_utf8_lossy(&out.stdout)
            .lines()
            .rfind(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim()
            .to_string();
        Ok(Recognition {
            text,
            wall: took,
            cpu,
        })
    }

    fn started(&self, now: Instant) {
        let mut b = self.usage.lock().unwrap();
        if b.running == 0 {
            b.since = Some(now);
        }
        b.running += 1;
    }

    fn ended(&self, cpu: Duration) {
        let mut b = self.usage.lock().unwrap();
        b.running -= 1;
        b.cpu += cpu;
        if b.running == 0 {
            if let Some(t) = b.since.take() {
                b.busy += t.elapsed();
            }
        }
    }
}

/// The children's user and system time from the output of the shell's `times` (two lines of
/// `XmY.YYs XmY.YYs`: the shell's, then its children's).
fn children_cpu(times: &str) -> Option<Duration> {
    let line = times.lines().nth(1)?;
    let mut total = 0.0;
    for f in line.split_whitespace() {
        let (m, s) = f.strip_suffix('s')?.split_once('m')?;
        total += m.parse::<f64>().ok()? * 60.0 + s.parse::<f64>().ok()?;
    }
    (total.is_finite() && total >= 0.0).then(|| Duration::from_secs_f64(total))
}

/// Words of `heard` found in `said`, as a fraction of `said`'s words (a rough accuracy, for
/// reports; the thesis measured delay, not accuracy).
pub fn word_overlap(said: &str, heard: &str) -> f64 {
    let norm = |s: &str| -> Vec<String> {
        s.split_whitespace()
            .map(|w| {
                w.trim_matches(|c: char| !c.is_alphanumeric())
                    .to_lowercase()
            })
            .filter(|w| !w.is_empty())
            .collect()
    };
    let (a, b) = (norm(said), norm(heard));
    if a.is_empty() {
        return 0.0;
    }
    a.iter().filter(|w| b.contains(w)).count() as f64 / a.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resampling_keeps_the_length_in_seconds() {
        let samples: Vec<i16> = (0..22050)
            .map(|i| ((i as f64 / 10.0).sin() * 8000.0) as i16)
            .collect();
        let wav = wav_file(22050, &samples);
        let out = to_16k(&wav).unwrap();
        let (rate, s) = parse_wav(&out).unwrap();
        assert_eq!(rate, SAMPLE_RATE);
        assert_eq!(s.len(), 16_000);
        assert!(to_16k(b"RIFF....WAVE").is_err());
        assert!(parse_wav(&wav_file(8000, &[])).is_err());
    }

    /// The real thing, where it is installed: one short utterance synthesised and recognised,
    /// and recognised again at a quarter of a core, slower.
    #[test]
    fn pocketsphinx_recognises_an_utterance_and_a_cpu_limit_slows_it() {
        if let Some(m) = missing() {
            eprintln!("skipped: {m} not installed");
            return;
        }
        let dir = std::env::temp_dir().join(format!("roam-speech-test-{}", std::process::id()));
        let u = utterances(&dir).unwrap();
        assert_eq!(u.len(), 20);
        assert!(
            u[0].seconds() > 0.3 && u[0].seconds() < 3.0,
            "{}",
            u[0].seconds()
        );
        assert!(u[19].seconds() > 5.0, "{}", u[19].seconds());
        let full = Recognizer::new(&dir, None).unwrap();
        let fast = full.recognize(&u[5].wav, "full").unwrap();
        assert!(fast.cpu > Duration::ZERO && fast.cpu <= fast.wall + Duration::from_millis(20));
        assert_eq!(full.cpu_use().cpu_s, fast.cpu.as_secs_f64());
        match CpuLimit::new("test", 0.1) {
            Ok(limit) => {
                let slow = Recognizer::new(&dir, Some(limit)).unwrap();
                let r = slow.recognize(&u[5].wav, "slow").unwrap();
                assert!(
                    r.wall > fast.wall,
                    "limited {:?}, unlimited {:?}",
                    r.wall,
                    fast.wall
                );
                // The quota is a ceiling: a tenth of a core, give or take one period's quota.
                let got = slow.cpu_use();
                assert!(got.share == 0.1 && got.busy_s >= r.wall.as_secs_f64() * 0.99);
                assert!(
                    got.cpu_s <= 0.1 * got.busy_s + 0.02,
                    "{} s of CPU in {} s at a tenth of a core",
                    got.cpu_s,
                    got.busy_s
                );
            }
            Err(e) => eprintln!("skipped the CPU limit: {e:#}"),
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_childrens_cpu_time_is_read_from_times() {
        let t = "0m0.001000s 0m0.002000s\n1m2.500000s 0m0.250000s\n";
        assert_eq!(children_cpu(t), Some(Duration::from_millis(62_750)));
        assert_eq!(children_cpu("0m0.00s 0m0.00s\n"), None);
        assert_eq!(children_cpu("0m0.00s 0m0.00s\n0mxs 0m0s\n"), None);
        assert_eq!(
            CpuUse {
                cpu_s: 1.0,
                busy_s: 8.0,
                share: 0.25
            }
            .obtained(),
            Some(0.5)
        );
        assert_eq!(CpuUse::default().obtained(), None);
    }

    #[test]
    fn overlap_counts_words_said_that_were_heard() {
        assert_eq!(word_overlap("Call home.", "call home"), 1.0);
        assert_eq!(word_overlap("What time is it?", "what is"), 0.5);
        assert_eq!(word_overlap("", "x"), 0.0);
    }
}
