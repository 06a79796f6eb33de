//! One Horatio trial: a parcel checked out on the client with the real tiers running, its dirty
//! state written, then suspend and resume over the system's path, or self-cleaning from the
//! phone with its radios' energy modelled.

use std::collections::BTreeSet;
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

use super::path::Path;
use super::workloads::{dirty_for, workload_of, Dirty};
use crate::harness::trial::{Metric, Trial};

pub(super) fn now_unix() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// An image of `mb` MB ([`roam_store::image::synthetic`]).
pub(super) fn base_image(path: &FsPath, mb: f64, seed: u64) -> Result<()> {
    let v = roam_store::image::synthetic(((mb * 1e6) as usize).max(1), seed);
    std::fs::write(path, v).with_context(|| format!("{}", path.display()))
}

/// The guest's memory, MiB: room for the largest workload's 264 MB in its tmpfs.
pub(super) const GUEST_MB: u32 = roam_store::vm::DEFAULT_MEMORY_MB;

/// A parcel directory's image paths, for the guest.
pub(super) struct GuestImages {
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

pub(super) fn guest_images(cdir: &ParcelDir) -> GuestImages {
    GuestImages {
        disk: cdir.image("disk"),
        ram: cdir.image("memory"),
        state: cdir.image("state"),
    }
}

/// The real guest, for the six workloads, when it has been built (`scripts/build-guest`) and
/// QEMU is installed; else the workloads write synthetic dirty state (said in the report).
pub(super) fn guest_kit() -> Option<GuestKit> {
    GuestKit::available().ok()
}

/// Run a workload in the checked-out guest: resume it from its saved state, have it write
/// the workload's memory and disk, save it again. The dirty map (the disk's bitmap; the RAM
/// and device state are sealed whole, their unchanged chunks already at the tiers).
pub(super) fn guest_workload(
    kit: &GuestKit,
    cdir: &ParcelDir,
    dirty: Dirty,
    seed: u64,
) -> Result<DirtyMap> {
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
pub(super) fn dirty_image(path: &FsPath, mb: f64) -> Result<BTreeSet<u64>> {
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
pub(super) struct Tiers {
    server: Arc<TierService>,
    phone: Option<Arc<TierService>>,
    _handles: Vec<ServeHandle>,
    secret: [u8; 32],
    cert: String,
    server_addr: SocketAddr,
    phone_addr: Option<SocketAddr>,
}

pub(super) const PORT: u16 = 7500;

pub(super) fn start_tiers(
    t: &Trial,
    dir: &FsPath,
    phone: bool,
    phone_to_server: bool,
) -> Result<Tiers> {
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
pub(super) fn checked_out(
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
pub(super) fn up_bytes(t: &Trial, name: &str) -> u64 {
    t.emu
        .link(name)
        .map_or(0, |l| l.up.delivered_bytes.load(Ordering::Relaxed))
}

/// One trial of `app` over `path`: set the parcel up as checked out ([`checked_out`]), write
/// its dirty state ([`write_dirty`]), suspend it ([`suspend`], [`suspend_metrics`]), then
/// either let the phone clean it (the self-cleaning paths, [`clean`]) or resume it on another
/// client ([`resume`]).
pub(super) fn trial(t: &Trial, path: Path, app: &str) -> Result<Vec<Metric>> {
    let dirty = dirty_for(app)?;
    let work = trial_dir(t, path, app);
    let _ = std::fs::remove_dir_all(&work);
    let _cleanup = RemoveOnDrop(work.clone());
    let cleaning = Path::CLEAN.contains(&path);
    let tiers = start_tiers(t, &work, path.to_phone(), cleaning)?;
    let cdir = ParcelDir::new(work.join("client"));
    let guest = workload_of(app).and_then(|_| guest_kit());
    checked_out(&tiers, &cdir, dirty, t.seed, guest.as_ref())?;
    let map = write_dirty(guest.as_ref(), &cdir, dirty, t.seed)?;
    let to = if path.to_phone() {
        Tier::Phone
    } else {
        Tier::Server
    };
    let tiers = Arc::new(tiers);
    let (suspend_s, moved) = suspend(t, &tiers, to, cdir.clone(), map)?;
    let mut out = suspend_metrics(t, path, guest.is_some(), suspend_s, &moved)?;
    if cleaning {
        out.extend(clean(t, path, &tiers)?);
        return Ok(out);
    }
    let (resume_s, running_s) = resume(t, &tiers, &work, dirty, guest)?;
    out.push(Metric::new("resume_s", resume_s, "s"));
    if let Some(s) = running_s {
        out.push(Metric::new("guest_running_s", s, "s"));
    }
    drop(tiers);
    Ok(out)
}

/// The trial's own working directory: one per trial, since trials of several applications
/// run at once (`--jobs`).
pub(super) fn trial_dir(t: &Trial, path: Path, app: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    std::env::temp_dir().join(format!(
        "roam-horatio-{}-{}-{app}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        path.name(),
        t.seed
    ))
}

/// Write the `dirty` state into the checked-out parcel in `cdir`: the workload in the real
/// `guest` if there is one ([`guest_workload`]), else random bytes over the start of the
/// memory and disk images ([`dirty_image`]). The dirty map names the chunks to move.
pub(super) fn write_dirty(
    guest: Option<&GuestKit>,
    cdir: &ParcelDir,
    dirty: Dirty,
    seed: u64,
) -> Result<DirtyMap> {
    Ok(match guest {
        Some(kit) => guest_workload(kit, cdir, dirty, seed)?,
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
    })
}

/// Suspend the parcel in `cdir` to the tier `to`, from the client's namespace: the chunks
/// `map` names, then ownership. The seconds from the first connection to the committed
/// handoff, and what moved.
pub(super) fn suspend(
    t: &Trial,
    tiers: &Arc<Tiers>,
    to: Tier,
    cdir: ParcelDir,
    map: DirtyMap,
) -> Result<(f64, parcel::Moved)> {
    let tt = tiers.clone();
    t.emu
        .spawn_in_client(move || -> Result<(f64, parcel::Moved)> {
            let t0 = Instant::now();
            let (server, phone) = tt.links()?;
            let m = parcel::suspend_dirty(
                &server,
                phone.as_ref(),
                to,
                &cdir,
                Some(&map),
                &mut |_, _| {},
            )
            .map_err(anyhow::Error::msg)?;
            Ok((t0.elapsed().as_secs_f64(), m))
        })
        .join()
        .map_err(|_| anyhow!("the client's thread panicked"))??
}

/// The suspend's metrics (`guest`: whether the real guest ran; `moved`, what the suspend of
/// `suspend_s` seconds moved), and its time as an interactive event. Over the phone's WiFi,
/// also the modelled radio energy of receiving it.
pub(super) fn suspend_metrics(
    t: &Trial,
    path: Path,
    guest: bool,
    suspend_s: f64,
    moved: &parcel::Moved,
) -> Result<Vec<Metric>> {
    let mut out = vec![
        Metric::new("guest", f64::from(u8::from(guest)), "real guest"),
        Metric::new("suspend_s", suspend_s, "s"),
        Metric::new("dirty_mb", (moved.bytes as f64) / 1e6, "MB"),
        Metric::new("dirty_chunks", moved.dirty as f64, "chunks"),
    ];
    t.event_latencies("suspend_s", [suspend_s * 1e3]);
    if path == Path::PhoneWifi {
        let e = crate::harness::energy::radio_energy(
            "huang2012/wifi",
            moved.bytes,
            suspend_s,
            roam_budget::radio::Direction::Down,
        )?;
        out.push(Metric::new("suspend_energy_j", e, "J"));
    }
    Ok(out)
}

/// The phone's uplinks to the server on `path`: each link's name and its radio's profile.
pub(super) fn phone_uplinks(path: Path) -> Vec<(&'static str, &'static str)> {
    path.links()
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
        .collect()
}

/// Self-cleaning, after the suspend to the phone: the phone uploads what the server lacks and
/// hands it the parcel (asked from the client's namespace), while each of its uplinks' radios
/// is fed what the link carries ([`UplinkRadios`]). The time, as a metric and an interactive
/// event, then the bytes and the modelled energy.
pub(super) fn clean(t: &Trial, path: Path, tiers: &Arc<Tiers>) -> Result<Vec<Metric>> {
    let uplinks = phone_uplinks(path);
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
    let mut radios = UplinkRadios::new(t, uplinks, b0)?;
    while !clean.is_finished() {
        std::thread::sleep(Duration::from_millis(100));
        radios.sample();
    }
    radios.sample();
    let clean_s = clean
        .join()
        .map_err(|_| anyhow!("the client's thread panicked"))???;
    let mut out = vec![Metric::new("clean_s", clean_s, "s")];
    out.extend(radios.finish());
    t.event_latencies("clean_s", [clean_s * 1e3]);
    Ok(out)
}

/// Energy (modelled) of the phone's uplinks while it cleans: each uplink's radio fed what its
/// link carried in every 100 ms ([`UplinkRadios::sample`]), then left to run out its tail
/// ([`UplinkRadios::finish`]).
pub(super) struct UplinkRadios<'t> {
    t: &'t Trial,
    /// Each uplink's link name and radio profile ([`phone_uplinks`]).
    uplinks: Vec<(&'static str, &'static str)>,
    /// Bytes each link had carried when the cleaning began.
    b0: Vec<u64>,
    /// Bytes each link had carried at the last sample.
    seen: Vec<u64>,
    radios: Vec<roam_budget::radio::Radio>,
    /// The radios' time zero.
    start: Instant,
}

impl<'t> UplinkRadios<'t> {
    /// A radio per uplink of `uplinks`, each link having carried `b0` bytes so far.
    fn new(
        t: &'t Trial,
        uplinks: Vec<(&'static str, &'static str)>,
        b0: Vec<u64>,
    ) -> Result<UplinkRadios<'t>> {
        let radios = uplinks
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
        let (start, seen) = (Instant::now(), b0.clone());
        Ok(UplinkRadios {
            t,
            uplinks,
            b0,
            seen,
            radios,
            start,
        })
    }

    /// Feed each radio what its link carried since the last sample.
    fn sample(&mut self) {
        let now = roam_core::Time::ZERO + self.start.elapsed();
        for (i, (name, _)) in self.uplinks.iter().enumerate() {
            let b = up_bytes(self.t, name);
            if b > self.seen[i] {
                self.radios[i].on_packet(
                    now,
                    roam_core::Bytes(b - self.seen[i]),
                    roam_budget::radio::Direction::Up,
                );
                self.seen[i] = b;
            }
        }
    }

    /// Run the radios a minute past now (their tails), and the metrics: MB each uplink
    /// carried (when there are several), MB in all, and the energy.
    fn finish(mut self) -> Vec<Metric> {
        let mut out = Vec::new();
        let end = roam_core::Time::ZERO + self.start.elapsed() + Duration::from_secs(60);
        let (mut total, mut energy) = (0u64, 0.0);
        let several = self.uplinks.len() > 1;
        for (((name, _), b0), radio) in self.uplinks.iter().zip(self.b0).zip(&mut self.radios) {
            radio.advance(end);
            energy += radio.energy().0;
            let bytes = up_bytes(self.t, name) - b0;
            total += bytes;
            if several {
                out.push(Metric::new(
                    &format!("clean_mb_{}", if *name == "cell" { "3g" } else { "wifi" }),
                    bytes as f64 / 1e6,
                    "MB",
                ));
            }
        }
        out.push(Metric::new("clean_mb", total as f64 / 1e6, "MB"));
        out.push(Metric::new("clean_energy_j", energy, "J"));
        out
    }
}

/// Resume on another client (in `work`'s `client2`): control state, the memory image and the
/// device state; with the real `guest`, then until it runs again (its disk, fetched on
/// demand, is not modelled: an empty disk of the same size as the `dirty` trial's stands
/// in). The seconds until the data is in, and until the guest runs.
pub(super) fn resume(
    t: &Trial,
    tiers: &Arc<Tiers>,
    work: &FsPath,
    dirty: Dirty,
    guest: Option<GuestKit>,
) -> Result<(f64, Option<f64>)> {
    let tt = tiers.clone();
    let rdir = ParcelDir::new(work.join("client2"));
    let disk_len = ((dirty.disk_mb + 16.0) * 1e6) as u64;
    t.emu
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
        .map_err(|_| anyhow!("the client's thread panicked"))??
}

pub(super) struct RemoveOnDrop(PathBuf);
impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
