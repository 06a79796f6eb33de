//! `roam energy`: the radio energy model (`roam_budget`) driven by real traffic: after a run,
//! from an emulator log directory (per-link packet logs where there are, else the 100 ms bins),
//! or live, from network interfaces' counters sampled every 100 ms. Prints energy (modelled)
//! and data per link, and draws each radio's power and state over time.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use roam_budget::live::{Counters, InterfaceMeter};
use roam_budget::{profile, DataMeter, Direction, Radio, RadioProfile, RadioState};
use roam_core::plot::{Figure, Panel, Series};
use roam_core::{Bytes, Time};

/// Arguments of `roam energy`.
#[derive(Args, Debug)]
pub struct EnergyArgs {
    /// An emulator log directory (`roam emu run --log-dir`, or a lab trial's directory under
    /// `--emu-logs`).
    dir: Option<PathBuf>,
    /// A link's (or, with --live, an interface's) radio profile, LINK=PROFILE, e.g.
    /// `cell=huang2012/lte` or `wlan0=powertutor-nexus-one/wifi` (docs/budgets.md). Default:
    /// huang2012/wifi for names starting `wifi` or `wl`, huang2012/3g for the rest.
    #[arg(long = "radio", value_name = "LINK=PROFILE")]
    radios: Vec<String>,
    /// Links whose bytes a data plan does not count, comma-separated (default: those with a
    /// WiFi profile).
    #[arg(long, value_delimiter = ',')]
    unmetered: Option<Vec<String>>,
    /// Where to draw power and state over time (SVG; default DIR/energy.svg, or energy.svg with
    /// --live).
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// Sample these interfaces' counters live (/proc/net/dev) every 100 ms
    /// instead of reading a log directory, comma-separated.
    #[arg(long, value_delimiter = ',', conflicts_with = "dir")]
    live: Option<Vec<String>>,
    /// With --live: stop after this long (default: until interrupted).
    #[arg(long = "for", value_parser = crate::parse_dur)]
    duration: Option<Duration>,
}

/// Traffic in one bin or one packet: when, how much, which way.
#[derive(Clone, Copy, Debug)]
struct Activity {
    t: f64,
    bytes: u64,
    packets: u64,
    dir: Direction,
}

/// The profile for link `name`: `--radio` if given, else by the name.
fn profile_for(name: &str, radios: &[String]) -> Result<Arc<RadioProfile>> {
    for r in radios {
        let (link, p) = r
            .split_once('=')
            .ok_or_else(|| anyhow!("--radio {r}: expected LINK=PROFILE"))?;
        if link == name {
            return Ok(Arc::new(
                profile(p).map_err(|e| anyhow!("--radio {r}: {e}"))?,
            ));
        }
    }
    let default = if name.starts_with("wifi") || name.starts_with("wl") {
        "huang2012/wifi"
    } else {
        "huang2012/3g"
    };
    Ok(Arc::new(profile(default).map_err(|e| anyhow!("{e}"))?))
}

/// The activity of `link` going `dir` in `dir_path`: the packet log's departures if there is
/// one (`<link>.<up|down>.mm.log`), else the CSV bins'.
fn read_activity(dir_path: &Path, link: &str, d: Direction) -> Result<Vec<Activity>> {
    let way = match d {
        Direction::Up => "up",
        Direction::Down => "down",
    };
    let mm = dir_path.join(format!("{link}.{way}.mm.log"));
    if mm.exists() {
        let text =
            std::fs::read_to_string(&mm).with_context(|| format!("reading {}", mm.display()))?;
        let mut out = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let f: Vec<&str> = line.split_whitespace().collect();
            // `t - bytes delay`: a departure (the other events move no bytes to the device).
            if let [t, "-", bytes, _] = f[..] {
                let at = |what: &str| anyhow!("{}:{}: {what} in `{line}`", mm.display(), i + 1);
                out.push(Activity {
                    t: t.parse::<f64>().map_err(|_| at("bad time"))? / 1e3,
                    bytes: bytes.parse().map_err(|_| at("bad size"))?,
                    packets: 1,
                    dir: d,
                });
            }
        }
        return Ok(out);
    }
    let csv = dir_path.join(format!("{link}.{way}.csv"));
    let text =
        std::fs::read_to_string(&csv).with_context(|| format!("reading {}", csv.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().skip(1) {
        let c: Vec<&str> = line.split(',').collect();
        let at = |what: &str| anyhow!("{}:{}: {what}", csv.display(), i + 1);
        if c.len() != 12 {
            return Err(at(&format!("expected 12 columns, found {}", c.len())));
        }
        let t: f64 = c[0].parse().map_err(|_| at("bad t_s"))?;
        let bytes: u64 = c[2].parse().map_err(|_| at("bad delivered_bytes"))?;
        let packets: u64 = c[3].parse().map_err(|_| at("bad delivered_pkts"))?;
        if bytes > 0 {
            out.push(Activity {
                t,
                bytes,
                packets: packets.max(1),
                dir: d,
            });
        }
    }
    Ok(out)
}

/// How often power and state are sampled, and the bins of traffic counted.
const STEP: f64 = 0.1;

/// Feed `activity` to `radio` packet by packet (a bin's packets spread evenly over the bin),
/// sampling power and state every [`STEP`] from `from` to `end`, adding the time in each state
/// to `states`.
fn drive(
    radio: &mut Radio,
    meter: &mut DataMeter,
    link: &str,
    activity: &[Activity],
    (from, end): (f64, f64),
    states: &mut BTreeMap<String, f64>,
) -> Vec<(f64, f64)> {
    let bin = STEP;
    let mut events: Vec<(f64, u64, Direction)> = Vec::new();
    for a in activity {
        let size = a.bytes / a.packets;
        for k in 0..a.packets {
            let extra = if k + 1 == a.packets {
                a.bytes - size * a.packets
            } else {
                0
            };
            let t = a.t + bin * k as f64 / a.packets as f64;
            events.push((t, size + extra, a.dir));
        }
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut power = Vec::new();
    let mut next = events.iter().peekable();
    let mut t = from;
    while t <= end + 1e-9 {
        while let Some(&&(at, bytes, dir)) = next.peek() {
            if at > t {
                break;
            }
            radio.on_packet(Time::from_secs_f64(at), Bytes(bytes), dir);
            meter.on_bytes(link, Bytes(bytes), dir);
            next.next();
        }
        radio.advance(Time::from_secs_f64(t));
        power.push((t, radio.power().0));
        *states.entry(state_name(radio)).or_default() += STEP;
        t += STEP;
    }
    power
}

/// The radio's state, as the table names it.
fn state_name(radio: &Radio) -> String {
    match radio.state() {
        RadioState::Idle => "idle".to_string(),
        RadioState::Promotion => "promotion".to_string(),
        RadioState::Tail(p) => p,
    }
}

/// One link's result.
struct LinkEnergy {
    name: String,
    radio: Radio,
    power: Vec<(f64, f64)>,
    states: BTreeMap<String, f64>,
}

/// The table and the figure.
fn report(links: &[LinkEnergy], meter: &DataMeter, title: &str, svg: &Path) -> Result<()> {
    println!("| link | radio (modelled) | metered | up | down | energy | time by state (s) |");
    println!("|---|---|---|---:|---:|---:|---|");
    for l in links {
        let d = meter
            .networks()
            .find(|(n, _)| *n == l.name)
            .map(|x| x.1.clone())
            .unwrap_or_default();
        let states: Vec<String> = l
            .states
            .iter()
            .map(|(s, t)| format!("{s} {t:.1}"))
            .collect();
        println!(
            "| {} | {} | {} | {} B | {} B | {:.2} J | {} |",
            l.name,
            l.radio.profile().name,
            if d.metered { "yes" } else { "no" },
            d.up.0,
            d.down.0,
            l.radio.energy().0,
            states.join(", ")
        );
    }
    println!(
        "Energy is modelled from published power models, not measured: {}.",
        links
            .iter()
            .map(|l| l.radio.profile().label())
            .collect::<Vec<_>>()
            .join("; ")
    );
    println!(
        "Metered data (a data plan's count): {} B",
        meter.metered().0
    );
    let fig = Figure {
        title: format!("{title}: radio power, modelled"),
        x_label: "time (s)".into(),
        panels: links
            .iter()
            .map(|l| Panel {
                title: format!("{} ({})", l.name, l.radio.profile().name),
                y_label: "power above idle (mW)".into(),
                series: vec![Series {
                    name: "power".into(),
                    points: l.power.clone(),
                }],
                bands: on_bands(&l.power),
                band_label: Some("radio up".into()),
            })
            .collect(),
    };
    std::fs::write(svg, fig.to_svg()).with_context(|| format!("writing {}", svg.display()))?;
    eprintln!("wrote {}", svg.display());
    Ok(())
}

/// The spans where the power is above zero (the radio is up).
fn on_bands(power: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut bands = Vec::new();
    let mut start = None;
    for w in power.windows(2) {
        match (start, w[0].1 > 0.0) {
            (None, true) => start = Some(w[0].0),
            (Some(s), false) => {
                bands.push((s, w[0].0));
                start = None;
            }
            _ => {}
        }
    }
    if let (Some(s), Some(last)) = (start, power.last()) {
        bands.push((s, last.0));
    }
    bands
}

/// Whether `name` is metered under `args`.
fn metered(name: &str, p: &RadioProfile, args: &EnergyArgs) -> bool {
    match &args.unmetered {
        Some(v) => !v.iter().any(|x| x == name),
        None => p.network != roam_budget::NetworkKind::Wifi,
    }
}

/// Run it.
pub fn energy(args: &EnergyArgs) -> Result<()> {
    if let Some(ifaces) = &args.live {
        return live(args, ifaces);
    }
    let Some(dir) = &args.dir else {
        bail!("give an emulator log directory, or --live IFACE");
    };
    let summary = dir.join("summary.json");
    let text = std::fs::read_to_string(&summary).with_context(|| {
        format!(
            "reading {} (is it an emulator log directory?)",
            summary.display()
        )
    })?;
    let v: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{}: not JSON", summary.display()))?;
    let names: Vec<String> = v["links"]
        .as_array()
        .ok_or_else(|| anyhow!("{}: no `links` list", summary.display()))?
        .iter()
        .filter_map(|l| l["name"].as_str().map(String::from))
        .collect();
    let end = v["duration_s"].as_f64().unwrap_or(0.0);
    let mut meter = DataMeter::new();
    let mut links = Vec::new();
    for name in names {
        let p = profile_for(&name, &args.radios)?;
        meter.network(&name, metered(&name, &p, args));
        let mut activity = read_activity(dir, &name, Direction::Up)?;
        activity.extend(read_activity(dir, &name, Direction::Down)?);
        activity.sort_by(|a, b| a.t.total_cmp(&b.t));
        let last = activity.last().map_or(0.0, |a| a.t);
        let mut radio = Radio::new(p.clone(), Time::ZERO);
        let until = end.max(last) + p.tail_length().as_secs_f64();
        let mut states = BTreeMap::new();
        let power = drive(
            &mut radio,
            &mut meter,
            &name,
            &activity,
            (0.0, until),
            &mut states,
        );
        links.push(LinkEnergy {
            name,
            radio,
            power,
            states,
        });
    }
    let svg = args
        .output
        .clone()
        .unwrap_or_else(|| dir.join("energy.svg"));
    report(&links, &meter, &dir.display().to_string(), &svg)
}

/// `--live`: sample the interfaces' counters every 100 ms (the driver; the model is sans-IO),
/// print a line per interface each second, and the table and figure at the end.
fn live(args: &EnergyArgs, ifaces: &[String]) -> Result<()> {
    let step = Duration::from_secs_f64(STEP);
    let mut meter = DataMeter::new();
    let mut meters = Vec::new();
    for i in ifaces {
        let p = profile_for(i, &args.radios)?;
        meter.network(i, metered(i, &p, args));
        let mut m = InterfaceMeter::new(i, Radio::new(p, Time::ZERO));
        m.sample(Time::ZERO, Counters::read(i).map_err(|e| anyhow!(e))?);
        meters.push((m, Vec::new(), BTreeMap::new()));
    }
    let start = Instant::now();
    // Interrupted, it still prints what it measured.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    let mut tick = 0u64;
    loop {
        tick += 1;
        let due = start + step * tick as u32;
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        let now = Time::from_nanos(start.elapsed().as_nanos() as u64);
        let over = args.duration.is_some_and(|d| start.elapsed() >= d)
            || stop.load(std::sync::atomic::Ordering::Relaxed);
        for (m, power, states) in meters.iter_mut() {
            let (up, down) = m.sample(now, Counters::read(&m.iface).map_err(|e| anyhow!(e))?);
            meter.on_bytes(&m.iface, up, Direction::Up);
            meter.on_bytes(&m.iface, down, Direction::Down);
            power.push((now.as_secs_f64(), m.radio.power().0));
            *states.entry(state_name(&m.radio)).or_insert(0.0) += STEP;
            if tick.is_multiple_of(10) {
                println!(
                    "{:6.1} s  {}: {}, {:.0} mW, {:.3} J so far (modelled)",
                    now.as_secs_f64(),
                    m.iface,
                    state_name(&m.radio),
                    m.radio.power().0,
                    m.radio.energy().0
                );
            }
        }
        if over {
            break;
        }
    }
    let links: Vec<LinkEnergy> = meters
        .into_iter()
        .map(|(m, power, states)| LinkEnergy {
            name: m.iface,
            radio: m.radio,
            power,
            states,
        })
        .collect();
    let svg = args
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from("energy.svg"));
    report(&links, &meter, "live", &svg)
}
