//! `roam lab horatio`: Horatio's evaluation (the Horatio paper, ../shared/spec/horatio.md) on the
//! emulator with three hosts (client, phone, server) and the real tiers (`roam-store`'s
//! services and links over roam-net with TLS, the same code as `roam parcel`).
//!
//! Every trial sets a parcel up as checked out on the client (its chunks at the server, the
//! ownership record saying the client owns it), writes its dirty state, and then measures:
//!
//! - **Suspend** (apps `dirty-1mb` ... `dirty-500mb` and the six workloads): the changed
//!   chunks and then ownership to the destination the system names, the phone over USB or its
//!   WiFi, a fast local card, or ISR's server over a 1 or 10 Mbit/s WAN. Dirty state: the
//!   memory image is rewritten whole (as after any run of a VM; half the dirty state, at most
//!   64 MB) and the rest is disk chunks. Dirty chunks are random bytes (state that is
//!   compressed or encrypted already) and are named by a dirty bitmap, as QEMU gives one.
//!   The six workloads run in the real guest when it is built (`scripts/build-guest`,
//!   [`roam_store::vm`]): it boots and is saved (the checked-out version), is resumed, writes
//!   the paper's amounts of fresh random data into its memory and onto its disk (a stand-in
//!   for the applications), and is saved again; the disk's chunks come from QEMU's dirty
//!   bitmap and the RAM image (768 MB) is sealed whole, only its changed chunks new; the
//!   phone has hoarded the checked-out version at set-up (the RAM's basis, about 80 MB
//!   after the boot, would otherwise come from the server over the WAN at resume). Without
//!   the guest they write synthetic state like the `dirty-` applications (column `guest` 0).
//! - **Resume** on another client from wherever the parcel went: control state and the memory
//!   image (the guest can then run; its disk is fetched on demand, not modelled); with the
//!   real guest, also the time until it runs again (`guest_running_s`).
//! - **Self-cleaning** (apps `clean-1mb` ... `clean-100mb`, and `clean-email` ...
//!   `clean-video` with the workloads' dirty state; systems `clean-wifi`, `clean-3g`,
//!   `clean-roam`): after a suspend to the phone over USB, the phone uploads what the server
//!   lacks over WiFi (behind the 1 Mbit/s WAN), a measured 3G trace, or both as a walking
//!   phone has them (the WiFi in reach 69% of the time; roam-net's background label keeps to
//!   the WiFi while it is there), and hands the parcel to the server. Its radio energy is
//!   **modelled**: each uplink's radio (roam-budget's huang2012 WiFi and 3G profiles) fed the
//!   bytes its link carried in every 100 ms, tails included.
//!
//! The links are the `horatio` scenario's; which two hosts each joins is [`Path::links`].

mod paper;
mod path;
pub mod report;
mod trial;
mod workloads;

pub use paper::{paper, paper_resume};
pub use path::{topology, Path};
use trial::trial;
pub use workloads::{CLEAN_APPS, DIRTY_APPS, WORKLOADS};

use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};

use crate::harness::charts::charts;
use crate::harness::matrix;
use crate::harness::plan::{App, Plan};
use crate::harness::study::{self, report_lines, Defaults, Study};
use crate::harness::system::System;
use crate::harness::trial::{Metric, Trial};
use crate::report::Row;

fn run_app(t: &Trial, app: &str) -> Result<Vec<Metric>> {
    match t.system.get::<Path>() {
        Some(&p) => trial(t, p, app),
        None => bail!("system `{}` is not a Horatio path", t.system.name()),
    }
}

macro_rules! app_fn {
    ($f:ident, $name:expr) => {
        fn $f(t: &Trial) -> Result<Vec<Metric>> {
            run_app(t, $name)
        }
    };
}

app_fn!(d1, "dirty-1mb");
app_fn!(d10, "dirty-10mb");
app_fn!(d100, "dirty-100mb");
app_fn!(d500, "dirty-500mb");
app_fn!(w_email, "email");
app_fn!(w_word, "word");
app_fn!(w_photo, "photo");
app_fn!(w_shop, "shop");
app_fn!(w_podcast, "podcast");
app_fn!(w_video, "video");
app_fn!(c1, "clean-1mb");
app_fn!(c10, "clean-10mb");
app_fn!(c100, "clean-100mb");
app_fn!(c_email, "clean-email");
app_fn!(c_word, "clean-word");
app_fn!(c_photo, "clean-photo");
app_fn!(c_shop, "clean-shop");
app_fn!(c_podcast, "clean-podcast");
app_fn!(c_video, "clean-video");

/// The applications: suspend and resume by dirty state and workload, and self-cleaning.
pub fn apps() -> Vec<App> {
    type RunFn = fn(&Trial) -> Result<Vec<Metric>>;
    let suspend: [(&'static str, RunFn); 10] = [
        ("dirty-1mb", d1),
        ("dirty-10mb", d10),
        ("dirty-100mb", d100),
        ("dirty-500mb", d500),
        ("email", w_email),
        ("word", w_word),
        ("photo", w_photo),
        ("shop", w_shop),
        ("podcast", w_podcast),
        ("video", w_video),
    ];
    let clean: [(&'static str, RunFn); 9] = [
        ("clean-1mb", c1),
        ("clean-10mb", c10),
        ("clean-100mb", c100),
        ("clean-email", c_email),
        ("clean-word", c_word),
        ("clean-photo", c_photo),
        ("clean-shop", c_shop),
        ("clean-podcast", c_podcast),
        ("clean-video", c_video),
    ];
    let app = |name, run, interactive, background| App {
        name,
        run,
        full: Duration::from_secs(3600),
        quick: Duration::from_secs(120),
        interactive,
        background,
        event: interactive,
        needs: &[],
        interactive_floor: None,
        stagger: None,
    };
    suspend
        .into_iter()
        .map(|(n, r)| {
            app(
                n,
                r,
                ("suspend_s", "suspend time (s)"),
                ("resume_s", "resume time (s)", false),
            )
        })
        .chain(clean.into_iter().map(|(n, r)| {
            app(
                n,
                r,
                ("clean_s", "self-cleaning time (s)"),
                (
                    "clean_energy_j",
                    "self-cleaning radio energy, modelled (J)",
                    false,
                ),
            )
        }))
        .collect()
}

/// `roam lab horatio`: Horatio's evaluation. `--systems` names paths (isr-1mbit, isr-10mbit,
/// phone-wifi, phone-usb, sd-usb; clean-wifi, clean-3g, clean-roam) and `--apps` dirty states
/// (dirty-1mb ... dirty-500mb), workloads (email, word, photo, shop, podcast, video) and
/// self-cleaning amounts (clean-1mb ...); the self-cleaning applications run over the
/// self-cleaning paths, the others over the suspend paths.
pub struct Horatio;

impl Study for Horatio {
    fn name(&self) -> &'static str {
        "horatio"
    }

    fn paper(&self) -> &'static str {
        "Horatio (Smaldone et al., MobiSys 2009): a phone carrying a suspended VM's state, and \
         self-cleaning"
    }

    fn defaults(&self) -> Defaults {
        Defaults {
            scenarios: vec!["horatio".into()],
            quick_scenarios: vec!["horatio".into()],
            apps: DIRTY_APPS
                .iter()
                .copied()
                .chain(WORKLOADS.iter().map(|w| w.0))
                .chain(CLEAN_APPS)
                .map(str::to_string)
                .collect(),
            quick_apps: ["dirty-1mb", "dirty-10mb", "clean-1mb"]
                .map(String::from)
                .to_vec(),
            // Each trial's transfer fills its link and its tiers seal and check chunks: one at
            // a time, so that trials do not take CPU from each other.
            jobs: 1,
            quick_jobs: Some(1),
            out: "results/horatio",
        }
    }

    fn apps(&self) -> Vec<App> {
        apps()
    }

    fn system(&self, name: &str) -> Result<System> {
        Path::parse(name).map(System::new).ok_or_else(|| {
            anyhow!(
                "unknown system `{name}` (expected isr-1mbit, isr-10mbit, phone-wifi, \
                 phone-usb, sd-usb, clean-wifi, clean-3g or clean-roam)"
            )
        })
    }

    fn systems(&self, quick: bool) -> Vec<System> {
        let paths: Vec<Path> = if quick {
            vec![Path::Isr10, Path::PhoneUsb, Path::CleanWifi]
        } else {
            Path::SUSPEND.into_iter().chain(Path::CLEAN).collect()
        };
        paths.into_iter().map(System::new).collect()
    }

    fn paper_figure(&self, app: &str, _scenario: &str, system: &str) -> Option<String> {
        paper(app, Path::parse(system)?).map(|s| format!("{s} s"))
    }

    /// The plan's self-cleaning applications run over its self-cleaning paths, the others over
    /// its suspend paths.
    fn measure(&self, plan: &Plan, _request: &study::Request) -> Result<(String, Vec<Row>)> {
        let (clean_apps, apps): (Vec<String>, Vec<String>) = plan
            .apps
            .iter()
            .cloned()
            .partition(|x| x.starts_with("clean-"));
        let (clean_systems, systems): (Vec<System>, Vec<System>) = plan
            .systems
            .iter()
            .cloned()
            .partition(|s| s.get::<Path>().is_some_and(|p| Path::CLEAN.contains(p)));
        let suspend = Plan {
            apps,
            systems,
            scenarios: plan.scenarios.clone(),
            out: plan.out.clone(),
            emu_logs: plan.emu_logs.clone(),
            ..*plan
        };
        horatio(&suspend, &clean_apps, &clean_systems)
    }

    fn summary(&self, _plan: &Plan, report: &str, _rows: &[Row]) -> String {
        report_lines(report, |l| l.starts_with("## ") || l.starts_with("- "))
    }
}

/// Run the lab: the suspend and resume matrix (`OUT/suspend/`) and the self-cleaning one
/// (`OUT/clean/`), and write `OUT/report.md`.
pub fn horatio(
    plan: &Plan,
    clean_apps: &[String],
    clean_systems: &[System],
) -> Result<(String, Vec<Row>)> {
    let all = apps();
    std::fs::create_dir_all(&plan.out)
        .with_context(|| format!("creating {}", plan.out.display()))?;
    let suspend = Plan {
        out: plan.out.join("suspend"),
        apps: plan.apps.clone(),
        scenarios: plan.scenarios.clone(),
        systems: plan.systems.clone(),
        emu_logs: plan.emu_logs.clone(),
        ..*plan
    };
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    let mut version = String::new();
    if !suspend.apps.is_empty() && !suspend.systems.is_empty() {
        eprintln!(
            "suspend and resume: {} application(s) x {} system(s)",
            suspend.apps.len(),
            suspend.systems.len()
        );
        let m = matrix::measure(&suspend, &all)?;
        charts(&suspend, &all, &m)?;
        rows.extend(m.rows);
        notes.extend(m.notes);
        version = m.version;
    }
    let clean = Plan {
        out: plan.out.join("clean"),
        apps: clean_apps.to_vec(),
        scenarios: plan.scenarios.clone(),
        systems: clean_systems.to_vec(),
        emu_logs: plan.emu_logs.clone(),
        ..*plan
    };
    if !clean.apps.is_empty() && !clean.systems.is_empty() {
        eprintln!(
            "self-cleaning: {} application(s) x {} system(s)",
            clean.apps.len(),
            clean.systems.len()
        );
        let m = matrix::measure(&clean, &all)?;
        charts(&clean, &all, &m)?;
        rows.extend(m.rows);
        notes.extend(m.notes);
        version = m.version;
    }
    let md =
        crate::studies::horatio::report::markdown(plan, &suspend, &clean, &rows, &notes, &version);
    std::fs::write(plan.out.join("report.md"), &md)?;
    Ok((md, rows))
}
