//! `roam lab horatio`: Horatio's evaluation (seed 004, ../shared/spec/horatio.md) on the
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
//!   the seed's amounts of fresh random data into its memory and onto its disk (a stand-in
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

pub mod report;

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::{Path as FsPath, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};
use rand::RngCore;
use roam_emu::SERVER_ADDR;
use roam_net::proto::session::NetKind;
use roam_net::runtime::Tls;
use roam_store::ownership::Tier;
use roam_store::parcel::{self, DirtyMap, ParcelDir};
use roam_store::tier::wire::{hex, Reply, Request};
use roam_store::tier::{serve, Control, Held, ServeHandle, TierClient, TierService};
use roam_store::vm::{GuestKit, Images, Vm};
use roam_store::{ingest, CHUNK_SIZE};

use crate::harness::matrix::{self, App, Plan};
use crate::harness::system::System;
use crate::harness::trial::{Metric, Trial};
use crate::report::Row;

/// Where a parcel goes, and over which links (the lab's systems).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Path {
    /// ISR: suspend to (and resume from) the server over a 1 Mbit/s WAN.
    Isr1,
    /// ISR over a 10 Mbit/s WAN.
    Isr10,
    /// Horatio: the phone over USB.
    PhoneUsb,
    /// Horatio: the phone over its WiFi.
    PhoneWifi,
    /// A fast local card (a USB 2.0 reader) in the phone's place.
    SdUsb,
    /// Self-cleaning from the phone over WiFi.
    CleanWifi,
    /// Self-cleaning from the phone over 3G.
    Clean3g,
    /// Self-cleaning over roam-net with both of the phone's networks: WiFi as a walking phone
    /// meets it (in reach 69% of the time) and the 3G.
    CleanRoam,
}

impl Path {
    /// The suspend and resume systems, in report order.
    pub const SUSPEND: [Path; 5] = [
        Path::Isr1,
        Path::Isr10,
        Path::PhoneWifi,
        Path::PhoneUsb,
        Path::SdUsb,
    ];
    /// The self-cleaning systems.
    pub const CLEAN: [Path; 3] = [Path::CleanWifi, Path::Clean3g, Path::CleanRoam];

    /// Name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Path::Isr1 => "isr-1mbit",
            Path::Isr10 => "isr-10mbit",
            Path::PhoneUsb => "phone-usb",
            Path::PhoneWifi => "phone-wifi",
            Path::SdUsb => "sd-usb",
            Path::CleanWifi => "clean-wifi",
            Path::Clean3g => "clean-3g",
            Path::CleanRoam => "clean-roam",
        }
    }

    /// Parse a name.
    pub fn parse(s: &str) -> Option<Path> {
        Path::SUSPEND
            .into_iter()
            .chain(Path::CLEAN)
            .find(|p| p.name() == s)
    }

    /// The `horatio` scenario's links this path uses, with the two hosts each joins (the
    /// first takes the link's client side).
    pub fn links(self) -> Vec<(&'static str, &'static str, &'static str)> {
        let wan1 = ("wan1", "client", "server");
        match self {
            Path::Isr1 => vec![wan1],
            Path::Isr10 => vec![("wan10", "client", "server")],
            Path::PhoneUsb => vec![wan1, ("usb", "client", "phone")],
            Path::PhoneWifi => vec![wan1, ("lwifi", "client", "phone")],
            Path::SdUsb => vec![wan1, ("sd", "client", "phone")],
            Path::CleanWifi => vec![
                wan1,
                ("usb", "client", "phone"),
                ("pwifi", "phone", "server"),
            ],
            Path::Clean3g => vec![
                wan1,
                ("usb", "client", "phone"),
                ("cell", "phone", "server"),
            ],
            Path::CleanRoam => vec![
                wan1,
                ("usb", "client", "phone"),
                ("pwifi-onoff", "phone", "server"),
                ("cell", "phone", "server"),
            ],
        }
    }

    /// Whether the parcel is suspended to the phone (else to the server).
    fn to_phone(self) -> bool {
        !matches!(self, Path::Isr1 | Path::Isr10)
    }
}

/// A dirty state: MB of memory image (rewritten whole) and of disk chunks.
#[derive(Clone, Copy, Debug)]
struct Dirty {
    memory_mb: f64,
    disk_mb: f64,
}

/// `dirty-N`: N MB, half of it (at most 64 MB) the memory image.
fn dirty_of(total_mb: f64) -> Dirty {
    let memory_mb = (total_mb / 2.0).min(64.0);
    Dirty {
        memory_mb,
        disk_mb: total_mb - memory_mb,
    }
}

/// The seed's six workloads: dirty memory and disk (MB).
pub const WORKLOADS: [(&str, f64, f64); 6] = [
    ("email", 16.1, 3.4),
    ("word", 40.8, 3.3),
    ("photo", 24.5, 3.9),
    ("shop", 30.6, 13.8),
    ("podcast", 120.4, 109.3),
    ("video", 263.8, 368.1),
];

/// The suspend applications: by dirty state, then the workloads.
pub const DIRTY_APPS: [&str; 4] = ["dirty-1mb", "dirty-10mb", "dirty-100mb", "dirty-500mb"];
/// The self-cleaning applications: by dirty state, then the six workloads' dirty state (the
/// seed's Table 8), made by the real guest when it is built.
pub const CLEAN_APPS: [&str; 9] = [
    "clean-1mb",
    "clean-10mb",
    "clean-100mb",
    "clean-email",
    "clean-word",
    "clean-photo",
    "clean-shop",
    "clean-podcast",
    "clean-video",
];

/// The workload an application runs (`email` and `clean-email`: `email`), if any.
fn workload_of(app: &str) -> Option<&'static str> {
    let name = app.strip_prefix("clean-").unwrap_or(app);
    WORKLOADS.iter().map(|w| w.0).find(|w| *w == name)
}

fn dirty_for(app: &str) -> Result<Dirty> {
    if let Some((_, m, d)) = WORKLOADS.iter().find(|w| Some(w.0) == workload_of(app)) {
        return Ok(Dirty {
            memory_mb: *m,
            disk_mb: *d,
        });
    }
    let mb = app
        .strip_prefix("dirty-")
        .or_else(|| app.strip_prefix("clean-"))
        .and_then(|s| s.strip_suffix("mb"))
        .and_then(|s| s.parse::<f64>().ok())
        .ok_or_else(|| anyhow!("application `{app}`: not a Horatio workload"))?;
    Ok(dirty_of(mb))
}

/// The seed's figures (seconds) for a cell, where it has one.
pub fn paper(app: &str, path: Path) -> Option<f64> {
    let i = DIRTY_APPS.iter().position(|a| *a == app);
    let c = CLEAN_APPS.iter().position(|a| *a == app);
    match (path, i, c) {
        (Path::Isr1, Some(i), _) => Some([1433.5, 1487.5, 2118.0, 4936.0][i]),
        (Path::PhoneWifi, Some(i), _) => Some([39.0, 68.7, 301.3, 1239.2][i]),
        (Path::PhoneUsb, Some(i), _) => Some([29.3, 44.0, 142.0, 625.0][i]),
        (Path::SdUsb, Some(i), _) => Some([23.3, 25.3, 40.3, 136.0][i]),
        // Table 7, then Table 8 (the workloads; its estimates, not measured, are left out:
        // podcast over 3G and video over both).
        (Path::CleanWifi, _, Some(c)) => [
            Some(36.3),
            Some(97.0),
            Some(869.0),
            Some(213.3),
            Some(953.0),
            Some(839.3),
            Some(1103.0),
            Some(2199.7),
            None,
        ][c],
        (Path::Clean3g, _, Some(c)) => [
            Some(152.7),
            Some(477.7),
            Some(3848.3),
            Some(739.3),
            Some(4353.5),
            Some(3381.0),
            Some(4830.0),
            None,
            None,
        ][c],
        _ => None,
    }
}

/// The seed's resume time (s) from the card, by dirty state (ISR's plain resume: 281.5 s).
pub fn paper_resume(app: &str, path: Path) -> Option<f64> {
    let i = DIRTY_APPS.iter().position(|a| *a == app)?;
    match path {
        Path::SdUsb => Some([34.7, 34.3, 35.7, 51.3][i]),
        Path::Isr1 => Some(281.5),
        _ => None,
    }
}

fn run_app(t: &Trial, app: &str) -> Result<Vec<Metric>> {
    match t.system {
        System::Parcel(p) => trial(t, p, app),
        other => bail!("system `{}` is not a Horatio path", other.name()),
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

fn now_unix() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// An image of `mb` MB ([`roam_store::image::synthetic`]).
fn base_image(path: &FsPath, mb: f64, seed: u64) -> Result<()> {
    let v = roam_store::image::synthetic(((mb * 1e6) as usize).max(1), seed);
    std::fs::write(path, v).with_context(|| format!("{}", path.display()))
}

/// The guest's memory, MiB: room for the largest workload's 264 MB in its tmpfs.
const GUEST_MB: u32 = roam_store::vm::DEFAULT_MEMORY_MB;

/// A parcel directory's image paths, for the guest.
struct GuestImages {
    disk: PathBuf,
    ram: PathBuf,
    state: PathBuf,
}

impl GuestImages {
    fn images(&self) -> Images<'_> {
        Images {
            disk: &self.disk,
            ram: &self.ram,
            state: &self.state,
        }
    }
}

fn guest_images(cdir: &ParcelDir) -> GuestImages {
    GuestImages {
        disk: cdir.image("disk"),
        ram: cdir.image("memory"),
        state: cdir.image("state"),
    }
}

/// The real guest, for the six workloads, when it has been built (`scripts/build-guest`) and
/// QEMU is installed; else the workloads write synthetic dirty state (said in the report).
fn guest_kit() -> Option<GuestKit> {
    GuestKit::available().ok()
}

/// Run a workload in the checked-out guest: resume it from its saved state, have it write
/// the workload's memory and disk, save it again. The dirty map (the disk's bitmap; the RAM
/// and device state are sealed whole, their unchanged chunks already at the tiers).
fn guest_workload(kit: &GuestKit, cdir: &ParcelDir, dirty: Dirty, seed: u64) -> Result<DirtyMap> {
    let mut vm = Vm::start(kit, guest_images(cdir).images(), &cdir.vm_dir(), GUEST_MB)
        .map_err(anyhow::Error::msg)?;
    vm.dirty(
        dirty.memory_mb.round() as u64,
        dirty.disk_mb.round() as u64,
        seed,
    )
    .map_err(anyhow::Error::msg)?;
    let disk = vm
        .suspend(&cdir.image("state"))
        .map_err(anyhow::Error::msg)?;
    Ok([("disk".to_string(), disk)].into_iter().collect())
}

/// Overwrite the first `mb` MB of the image with random bytes; the chunks written.
fn dirty_image(path: &FsPath, mb: f64) -> Result<BTreeSet<u64>> {
    use std::io::{Seek, SeekFrom, Write};
    let n = (mb * 1e6) as usize;
    let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
    let mut buf = vec![0u8; n];
    rand::thread_rng().fill_bytes(&mut buf);
    f.seek(SeekFrom::Start(0))?;
    f.write_all(&buf)?;
    f.sync_all()?;
    Ok((0..n.div_ceil(CHUNK_SIZE) as u64).collect())
}

/// The tiers of one trial: the server (and phone) serving in their namespaces.
struct Tiers {
    server: Arc<TierService>,
    phone: Option<Arc<TierService>>,
    _handles: Vec<ServeHandle>,
    secret: [u8; 32],
    cert: String,
    server_addr: SocketAddr,
    phone_addr: Option<SocketAddr>,
}

const PORT: u16 = 7500;

fn start_tiers(t: &Trial, dir: &FsPath, phone: bool, phone_to_server: bool) -> Result<Tiers> {
    let mut secret = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut secret);
    let c = rcgen::generate_simple_self_signed(vec!["roam-parcel".to_string()])?;
    let (cert, key) = (c.cert.pem(), c.signing_key.serialize_pem());
    let tls = Tls::server(cert.as_bytes(), key.as_bytes())?;
    let server_addr = SocketAddr::new(SERVER_ADDR.into(), PORT);
    let server = Arc::new(
        TierService::open(Tier::Server, &dir.join("server"), secret).map_err(anyhow::Error::msg)?,
    );
    let (svc, tls2) = (server.clone(), tls.clone());
    let mut handles = vec![t
        .emu
        .spawn_in_server(move || serve(svc, server_addr, Some(tls2)))
        .join()
        .map_err(|_| anyhow!("the server's thread panicked"))??
        .map_err(anyhow::Error::msg)?];
    let mut phone_addr = None;
    let mut phone_svc = None;
    if phone {
        let addr = t
            .emu
            .host_addr("phone")
            .ok_or_else(|| anyhow!("no phone host"))?;
        let addr = SocketAddr::new(addr.into(), PORT);
        let mut svc = TierService::open(Tier::Phone, &dir.join("phone"), secret)
            .map_err(anyhow::Error::msg)?;
        if phone_to_server {
            let client_tls = Tls::client(cert.as_bytes(), "roam-parcel")?;
            // The emulator's `cell` link is the phone's cellular network (its name does not
            // say so to roam-net's scout): background traffic then prefers the WiFi.
            svc = svc.with_upstream(Box::new(move || {
                let mut o = roam_store::tier::net::link_options(Some(client_tls.clone()));
                o.kinds = vec![(
                    "cell".to_string(),
                    NetKind {
                        cellular: true,
                        ..NetKind::default()
                    },
                )];
                TierClient::connect_with("server", server_addr, o, &secret)
            }));
        }
        let svc = Arc::new(svc);
        phone_svc = Some(svc.clone());
        let tls = tls.clone();
        let h = t
            .emu
            .spawn_in_host("phone", move || serve(svc, addr, Some(tls)))
            .ok_or_else(|| anyhow!("no phone host"))?
            .join()
            .map_err(|_| anyhow!("the phone's thread panicked"))??
            .map_err(anyhow::Error::msg)?;
        handles.push(h);
        phone_addr = Some(addr);
    }
    Ok(Tiers {
        server,
        phone: phone_svc,
        _handles: handles,
        secret,
        cert,
        server_addr,
        phone_addr,
    })
}

impl Tiers {
    /// Ask the server's service directly (set-up, not measured).
    fn ask(&self, req: Request, payload: &[u8]) -> Result<Reply> {
        match self.server.handle(req, payload, now_unix()) {
            (Reply::Error(e), _) => bail!("server: {e}"),
            (r, _) => Ok(r),
        }
    }

    /// Links from the client's namespace: (server, phone).
    fn links(&self) -> Result<(TierClient, Option<TierClient>)> {
        let tls = Tls::client(self.cert.as_bytes(), "roam-parcel")?;
        let server =
            TierClient::connect("server", self.server_addr, Some(tls.clone()), &self.secret)
                .map_err(anyhow::Error::msg)?;
        let phone = match self.phone_addr {
            Some(a) => Some(
                TierClient::connect("phone", a, Some(tls), &self.secret)
                    .map_err(anyhow::Error::msg)?,
            ),
            None => None,
        };
        Ok((server, phone))
    }
}

/// Set the parcel up as checked out on the client in `cdir`: its base images' chunks at the
/// server, the ownership record moved to the client by the same two-phase commit (asked of
/// the server's service directly: set-up crosses no emulated link).
fn checked_out(
    tiers: &Tiers,
    cdir: &ParcelDir,
    dirty: Dirty,
    seed: u64,
    guest: Option<&GuestKit>,
) -> Result<()> {
    std::fs::create_dir_all(cdir.image("disk").parent().unwrap())?;
    // The images: the dirty part and 16 MB more of disk; a memory image of its dirty size, or
    // the guest's RAM and device state after it booted.
    base_image(&cdir.image("disk"), dirty.disk_mb + 16.0, seed)?;
    match guest {
        Some(kit) => {
            let vm = Vm::start(kit, guest_images(cdir).images(), &cdir.vm_dir(), GUEST_MB)
                .map_err(anyhow::Error::msg)?;
            vm.suspend(&cdir.image("state"))
                .map_err(anyhow::Error::msg)?;
        }
        None => base_image(&cdir.image("memory"), dirty.memory_mb.max(0.2), seed ^ 1)?,
    }
    let mut key = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut key);
    let mut keyrings = Vec::new();
    for name in parcel::IMAGES {
        if !cdir.image(name).exists() {
            continue; // no device state without a guest
        }
        let mut f = std::fs::File::open(cdir.image(name))?;
        let got = ingest(&mut f, tiers.server.store(), None)?;
        // The guest's phone has hoarded the checked-out version (`roam parcel hoard`): its
        // RAM image's basis is then on the phone for a resume, not only at the server.
        if let (Some(_), Some(phone)) = (guest, &tiers.phone) {
            let mut f = std::fs::File::open(cdir.image(name))?;
            ingest(&mut f, phone.store(), None)?;
        }
        keyrings.push((name, got.keyring));
    }
    let list: Vec<(&str, &roam_store::Keyring)> = keyrings.iter().map(|(n, k)| (*n, k)).collect();
    let control = Control::new("lab", 1, &key, &list);
    let held = Held {
        control: control.clone(),
        nonce: hex(&[0; 16]),
    };
    tiers.ask(
        Request::PutControl {
            parcel: "lab".into(),
        },
        &serde_json::to_vec(&held)?,
    )?;
    let Reply::Owned { nonce, .. } = tiers.ask(
        Request::Create {
            parcel: "lab".into(),
        },
        b"",
    )?
    else {
        bail!("server: no nonce on create");
    };
    let hash = hex(&control.hash());
    let Reply::Prepared { next } = tiers.ask(
        Request::Prepare {
            parcel: "lab".into(),
            nonce: nonce.clone(),
            to: Tier::Client,
            version: 1,
            hash: hash.clone(),
        },
        b"",
    )?
    else {
        bail!("server: no nonce on prepare");
    };
    cdir.write_held(&Held {
        control,
        nonce: next.clone(),
    })
    .map_err(anyhow::Error::msg)?;
    tiers.ask(
        Request::Commit {
            parcel: "lab".into(),
            nonce,
            next,
            hash,
        },
        b"",
    )?;
    Ok(())
}

/// Bytes link `name` carried from its A side so far.
fn up_bytes(t: &Trial, name: &str) -> u64 {
    t.emu
        .link(name)
        .map_or(0, |l| l.up.delivered_bytes.load(Ordering::Relaxed))
}

/// Modelled radio energy (J) of moving `bytes` in `secs` over a link of this profile.
fn radio_energy(
    profile: &str,
    bytes: u64,
    secs: f64,
    dir: roam_budget::radio::Direction,
) -> Result<f64> {
    let p = roam_budget::profile::profile(profile)
        .map_err(|e| anyhow!("radio profile {profile}: {e}"))?;
    let radio = roam_budget::radio::Radio::new(Arc::new(p), roam_core::Time::ZERO);
    let bps = ((bytes as f64 * 8.0 / secs.max(1e-3)) as u64).max(1);
    Ok(radio
        .marginal_energy(
            roam_core::Time::ZERO,
            roam_core::Bytes(bytes),
            dir,
            roam_core::BitRate::bps(bps),
        )
        .0)
}

fn trial(t: &Trial, path: Path, app: &str) -> Result<Vec<Metric>> {
    let dirty = dirty_for(app)?;
    // One directory per trial: trials of several applications run at once (`--jobs`).
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let work = std::env::temp_dir().join(format!(
        "roam-horatio-{}-{}-{app}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        path.name(),
        t.seed
    ));
    let _ = std::fs::remove_dir_all(&work);
    let _cleanup = RemoveOnDrop(work.clone());
    let cleaning = Path::CLEAN.contains(&path);
    let tiers = start_tiers(t, &work, path.to_phone(), cleaning)?;
    let cdir = ParcelDir::new(work.join("client"));
    let guest = workload_of(app).and_then(|_| guest_kit());
    checked_out(&tiers, &cdir, dirty, t.seed, guest.as_ref())?;
    let map = match &guest {
        Some(kit) => guest_workload(kit, &cdir, dirty, t.seed)?,
        None => {
            let mut map = DirtyMap::new();
            map.insert(
                "memory".into(),
                dirty_image(&cdir.image("memory"), dirty.memory_mb.max(0.2))?,
            );
            map.insert(
                "disk".into(),
                dirty_image(&cdir.image("disk"), dirty.disk_mb)?,
            );
            map
        }
    };
    let to = if path.to_phone() {
        Tier::Phone
    } else {
        Tier::Server
    };

    // Suspend, timed from the first connection to the committed handoff.
    let (tiers, cdir2) = (Arc::new(tiers), cdir.clone());
    let tt = tiers.clone();
    let suspended = t
        .emu
        .spawn_in_client(move || -> Result<(f64, parcel::Moved)> {
            let t0 = Instant::now();
            let (server, phone) = tt.links()?;
            let m = parcel::suspend_dirty(
                &server,
                phone.as_ref(),
                to,
                &cdir2,
                Some(&map),
                &mut |_, _| {},
            )
            .map_err(anyhow::Error::msg)?;
            Ok((t0.elapsed().as_secs_f64(), m))
        })
        .join()
        .map_err(|_| anyhow!("the client's thread panicked"))??;
    let (suspend_s, moved) = suspended?;
    let mut out = vec![
        Metric::new("guest", f64::from(u8::from(guest.is_some())), "real guest"),
        Metric::new("suspend_s", suspend_s, "s"),
        Metric::new("dirty_mb", (moved.bytes as f64) / 1e6, "MB"),
        Metric::new("dirty_chunks", moved.dirty as f64, "chunks"),
    ];
    t.event_latencies("suspend_s", [suspend_s * 1e3]);
    if path == Path::PhoneWifi {
        let e = radio_energy(
            "huang2012/wifi",
            moved.bytes,
            suspend_s,
            roam_budget::radio::Direction::Down,
        )?;
        out.push(Metric::new("suspend_energy_j", e, "J"));
    }

    if cleaning {
        // The phone's uplinks to the server, each with its radio's profile.
        let uplinks: Vec<(&str, &str)> = path
            .links()
            .into_iter()
            .filter(|(_, a, b)| (*a, *b) == ("phone", "server"))
            .map(|(n, _, _)| {
                let profile = if n == "cell" {
                    "huang2012/3g"
                } else {
                    "huang2012/wifi"
                };
                (n, profile)
            })
            .collect();
        let b0: Vec<u64> = uplinks.iter().map(|(n, _)| up_bytes(t, n)).collect();
        let tt = tiers.clone();
        let clean = t.emu.spawn_in_client(move || -> Result<f64> {
            let (_, phone) = tt.links()?;
            let phone = phone.ok_or_else(|| anyhow!("no phone link"))?;
            let t0 = Instant::now();
            parcel::clean(&phone, "lab", Duration::from_millis(50), &mut |_| {})
                .map_err(anyhow::Error::msg)?;
            Ok(t0.elapsed().as_secs_f64())
        });
        // Energy (modelled): each uplink's radio fed what its link carried in every 100 ms,
        // then left to run out its tail.
        let mut radios = uplinks
            .iter()
            .map(|(_, profile)| {
                let p = roam_budget::profile::profile(profile)
                    .map_err(|e| anyhow!("radio profile {profile}: {e}"))?;
                Ok(roam_budget::radio::Radio::new(
                    Arc::new(p),
                    roam_core::Time::ZERO,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        let (start, mut seen) = (Instant::now(), b0.clone());
        let mut sample = |radios: &mut Vec<roam_budget::radio::Radio>| {
            let now = roam_core::Time::ZERO + start.elapsed();
            for (i, (name, _)) in uplinks.iter().enumerate() {
                let b = up_bytes(t, name);
                if b > seen[i] {
                    radios[i].on_packet(
                        now,
                        roam_core::Bytes(b - seen[i]),
                        roam_budget::radio::Direction::Up,
                    );
                    seen[i] = b;
                }
            }
        };
        while !clean.is_finished() {
            std::thread::sleep(Duration::from_millis(100));
            sample(&mut radios);
        }
        sample(&mut radios);
        let clean_s = clean
            .join()
            .map_err(|_| anyhow!("the client's thread panicked"))???;
        out.push(Metric::new("clean_s", clean_s, "s"));
        let end = roam_core::Time::ZERO + start.elapsed() + Duration::from_secs(60);
        let (mut total, mut energy) = (0u64, 0.0);
        for (((name, _), b0), radio) in uplinks.iter().zip(b0).zip(&mut radios) {
            radio.advance(end);
            energy += radio.energy().0;
            let bytes = up_bytes(t, name) - b0;
            total += bytes;
            if uplinks.len() > 1 {
                out.push(Metric::new(
                    &format!("clean_mb_{}", if *name == "cell" { "3g" } else { "wifi" }),
                    bytes as f64 / 1e6,
                    "MB",
                ));
            }
        }
        out.push(Metric::new("clean_mb", total as f64 / 1e6, "MB"));
        out.push(Metric::new("clean_energy_j", energy, "J"));
        t.event_latencies("clean_s", [clean_s * 1e3]);
        return Ok(out);
    }

    // Resume on another client: control state, the memory image and the device state; with
    // the real guest, then until it runs again (its disk, fetched on demand, is not modelled:
    // an empty disk of the same size stands in).
    let tt = tiers.clone();
    let rdir = ParcelDir::new(work.join("client2"));
    let disk_len = ((dirty.disk_mb + 16.0) * 1e6) as u64;
    let r = t
        .emu
        .spawn_in_client(move || -> Result<(f64, Option<f64>)> {
            let t0 = Instant::now();
            let (server, phone) = tt.links()?;
            parcel::resume_images(
                &server,
                phone.as_ref(),
                "lab",
                &rdir,
                Some(&["memory", "state"]),
                &mut |_, _| {},
            )
            .map_err(anyhow::Error::msg)?;
            let data = t0.elapsed().as_secs_f64();
            let Some(kit) = guest else {
                return Ok((data, None));
            };
            std::fs::File::create(rdir.image("disk"))?.set_len(disk_len)?;
            let vm = Vm::start(&kit, guest_images(&rdir).images(), &rdir.vm_dir(), GUEST_MB)
                .map_err(anyhow::Error::msg)?;
            let running = t0.elapsed().as_secs_f64();
            vm.kill();
            Ok((data, Some(running)))
        })
        .join()
        .map_err(|_| anyhow!("the client's thread panicked"))??;
    let (resume_s, running_s) = r?;
    out.push(Metric::new("resume_s", resume_s, "s"));
    if let Some(s) = running_s {
        out.push(Metric::new("guest_running_s", s, "s"));
    }
    drop(tiers);
    Ok(out)
}

struct RemoveOnDrop(PathBuf);
impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The hosts and link ends of a Horatio system.
pub fn topology(path: Path) -> (Vec<String>, HashMap<String, (String, String)>) {
    let links = path.links();
    let hosts = if links.iter().any(|(_, a, b)| *a == "phone" || *b == "phone") {
        vec!["phone".to_string()]
    } else {
        Vec::new()
    };
    let ends = links
        .into_iter()
        .map(|(n, a, b)| (n.to_string(), (a.to_string(), b.to_string())))
        .collect();
    (hosts, ends)
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
        matrix::charts(&suspend, &all, &m)?;
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
        matrix::charts(&clean, &all, &m)?;
        rows.extend(m.rows);
        notes.extend(m.notes);
        version = m.version;
    }
    let md =
        crate::studies::horatio::report::markdown(plan, &suspend, &clean, &rows, &notes, &version);
    std::fs::write(plan.out.join("report.md"), &md)?;
    Ok((md, rows))
}
