//! Real VM state (the Horatio paper §4: the parcel is a VM's disk and memory): a QEMU guest running on a
//! parcel's `disk.img` with its RAM in `memory.img` and its device state saved to
//! `state.img`; the disk chunks it wrote are found by a QEMU dirty bitmap, so a suspend
//! seals only those.
//!
//! - **The guest** is Debian's cloud kernel and a BusyBox initramfs, built from Debian packages
//!   by `scripts/build-guest DIR` (nothing installed on the host). Its init loads the virtio
//!   block driver and answers one-line commands on the serial console ([`Vm::command`]):
//!   `dirty MEM_MB DISK_MB SEED` writes fresh random data into memory (a tmpfs) and onto the
//!   disk (direct I/O, so the page cache does not inflate the memory image), `sum` gives
//!   checksums of both, `ping` answers `pong`. Freed pages are zeroed (`init_on_free=1`), so
//!   the memory image holds what the guest uses, not what it once used.
//! - **Dirty disk**: at start a dirty bitmap (`block-dirty-bitmap-add`) with the chunk size as
//!   its granularity; at suspend the guest is stopped, the bitmap exported over QEMU's own NBD
//!   server and read with `qemu-img map` (`x-dirty-bitmap`, where dirty areas read as
//!   `"data": false`): the chunk numbers written since the start.
//! - **Memory**: the guest's RAM is a file (`memory-backend-file`, shared), so the parcel's
//!   memory image is page-aligned raw RAM: a suspend seals it whole and only chunks that
//!   changed since the basis are new (the memory delta comes from content addressing, at
//!   about 1 GB/s of sealing). The device state goes by migration with `x-ignore-shared`
//!   (RAM left out) to `exec:cat > state.img` (QEMU 7.2 has no `file:` URI); a resume starts
//!   QEMU with `-incoming defer` on the same RAM file and takes the state back.
//! - **Acceleration**: KVM where it boots the guest, else TCG with a one-line note. `/dev/kvm`
//!   can be present and still not boot a guest (nested virtualisation on these machines stops
//!   in the kernel's decompressor), so the first use boots the guest once under KVM with a
//!   deadline and records the outcome in the guest's directory (`accel.json`).
//!   `ROAM_QEMU_ACCEL=kvm|tcg` overrides.
//!
//! QEMU runs daemonized with its sockets in a run directory, so `roam parcel run` can start
//! it, and a later `roam parcel suspend` finds it there ([`Vm::attach`]).

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::chunk::CHUNK_SIZE;
pub use crate::error::VmError;
use qmp::Qmp;

mod launch;
mod qmp;

/// The guest's kernel and initramfs (`scripts/build-guest DIR`).
#[derive(Clone, Debug)]
pub struct GuestKit {
    /// Its directory.
    pub dir: PathBuf,
}

/// How QEMU runs the guest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accel {
    /// Hardware virtualisation.
    Kvm,
    /// QEMU's own translator (slower, always there).
    Tcg,
}

impl Accel {
    fn arg(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

/// The guest's memory, MiB (room for the largest workload's 264 MB of dirty memory).
pub const DEFAULT_MEMORY_MB: u32 = 768;
/// How long a guest may take to answer its first `ping`: under TCG it boots in 3-6 s alone,
/// but seven guests booting at once on a loaded 2-core machine took over 30 s.
const BOOT_DEADLINE: Duration = Duration::from_secs(180);
/// How long KVM gets to boot the guest when it is probed.
const KVM_PROBE_DEADLINE: Duration = Duration::from_secs(12);
/// The bitmap's name.
const BITMAP: &str = "roam";
/// The disk's node name.
const DISK_NODE: &str = "disk0";

impl GuestKit {
    /// The kit in `dir`, checked: both files there.
    pub fn in_dir(dir: &Path) -> Result<GuestKit, VmError> {
        for file in ["vmlinuz", "initrd.img"] {
            if !dir.join(file).is_file() {
                return Err(VmError::NoGuest {
                    dir: dir.to_path_buf(),
                    file,
                });
            }
        }
        Ok(GuestKit {
            dir: dir.to_path_buf(),
        })
    }

    /// The guest in [`GuestKit::default_dir`], with QEMU and qemu-img installed; else why not.
    pub fn available() -> Result<GuestKit, VmError> {
        for tool in ["qemu-system-x86_64", "qemu-img"] {
            if which(tool).is_none() {
                return Err(VmError::NotInstalled {
                    tool,
                    packages: "qemu-system-x86 qemu-utils",
                });
            }
        }
        GuestKit::in_dir(&GuestKit::default_dir())
    }

    /// Where the guest is kept unless told: `$ROAM_GUEST_DIR`, else `$XDG_CACHE_HOME/roam/guest`,
    /// else `~/.cache/roam/guest`.
    pub fn default_dir() -> PathBuf {
        if let Some(d) = std::env::var_os("ROAM_GUEST_DIR") {
            return d.into();
        }
        let cache = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .unwrap_or_else(std::env::temp_dir);
        cache.join("roam/guest")
    }

    /// KVM if it boots this guest (probed once, the outcome kept in `accel.json`), else TCG;
    /// `ROAM_QEMU_ACCEL` decides when set.
    pub fn accel(&self) -> Result<Accel, VmError> {
        match std::env::var("ROAM_QEMU_ACCEL").as_deref() {
            Ok("kvm") => return Ok(Accel::Kvm),
            Ok("tcg") => return Ok(Accel::Tcg),
            Ok(other) => return Err(VmError::Accel(other.to_string())),
            Err(_) => {}
        }
        if std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/kvm")
            .is_err()
        {
            eprintln!("note: /dev/kvm cannot be opened; the guest runs under TCG (slower)");
            return Ok(Accel::Tcg);
        }
        let record = self.dir.join("accel.json");
        if let Some(kvm) = std::fs::read_to_string(&record)
            .ok()
            .and_then(|s| serde_json::from_str::<Value>(&s).ok())
            .and_then(|v| v.get("kvm_boots")?.as_bool())
        {
            return Ok(if kvm { Accel::Kvm } else { Accel::Tcg });
        }
        let boots = self.kvm_boots()?;
        let _ = std::fs::write(&record, json!({ "kvm_boots": boots }).to_string());
        if !boots {
            eprintln!(
                "note: KVM did not boot the guest within {} s (nested virtualisation?); the guest runs under TCG (slower)",
                KVM_PROBE_DEADLINE.as_secs()
            );
        }
        Ok(if boots { Accel::Kvm } else { Accel::Tcg })
    }

    /// Whether KVM boots this guest: once, on a scratch disk, within [`KVM_PROBE_DEADLINE`].
    fn kvm_boots(&self) -> Result<bool, VmError> {
        let run = tempdir("kvm-probe")?;
        let (disk, ram, state) = (
            run.join("disk.img"),
            run.join("ram.img"),
            run.join("state.img"),
        );
        std::fs::File::create(&disk)
            .and_then(|f| f.set_len(MIB))
            .map_err(|error| VmError::Io {
                what: disk.display().to_string(),
                error,
            })?;
        let images = Images {
            disk: &disk,
            ram: &ram,
            state: &state,
        };
        let boots = Vm::launch(self, images, &run, 256, Accel::Kvm, KVM_PROBE_DEADLINE)
            .map(|vm| vm.kill())
            .is_ok();
        let _ = std::fs::remove_dir_all(&run);
        Ok(boots)
    }
}

fn tempdir(what: &str) -> Result<PathBuf, VmError> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let d = std::env::temp_dir().join(format!(
        "roam-vm-{what}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d).map_err(|error| VmError::Io {
        what: d.display().to_string(),
        error,
    })?;
    Ok(d)
}

/// A running guest.
pub struct Vm {
    qmp: Qmp,
    console: BufReader<UnixStream>,
    pid: u32,
    run: PathBuf,
    /// How it runs.
    pub accel: Accel,
    kill_on_drop: bool,
}

impl Drop for Vm {
    fn drop(&mut self) {
        if self.kill_on_drop {
            self.terminate();
        }
    }
}

/// QEMU's `-drive`-style option strings double a comma.
fn opt_path(p: &Path) -> Result<String, VmError> {
    Ok(utf8(p)?.replace(',', ",,"))
}

/// `p` as UTF-8 (QEMU's options are strings).
fn utf8(p: &Path) -> Result<&str, VmError> {
    p.to_str().ok_or_else(|| VmError::Path {
        path: p.display().to_string(),
        why: "not UTF-8",
    })
}

/// A path for `exec:cat ... 'PATH'` (a shell word): no single quotes in it.
fn shell_path(p: &Path) -> Result<String, VmError> {
    let s = utf8(p)?;
    if s.contains('\'') {
        return Err(VmError::Path {
            path: s.to_string(),
            why: "a path with a quote cannot be given to QEMU's exec: migration",
        });
    }
    Ok(format!("'{s}'"))
}

/// A guest's images: its disk; its RAM, a file QEMU maps shared, so that it is a page-aligned
/// raw image in which a page unchanged since the last check-in is a chunk unchanged (the
/// memory delta against the basis comes from content addressing); its device state, QEMU's
/// migration stream without the RAM (`x-ignore-shared`: a few hundred KB).
#[derive(Clone, Copy, Debug)]
pub struct Images<'a> {
    /// The disk (raw).
    pub disk: &'a Path,
    /// The RAM file.
    pub ram: &'a Path,
    /// The device state (present once a suspend wrote it).
    pub state: &'a Path,
}

const MIB: u64 = 1 << 20;

impl Vm {
    /// Start the guest on `images`: from its saved RAM and device state when the state is
    /// there (the RAM file's size is the memory), else booting with `memory_mb` of fresh RAM;
    /// QEMU's sockets in `run`. Returns once the guest answers on its console. The disk's
    /// dirty bitmap counts from here. The guest is killed when the value is dropped, unless
    /// [`Vm::detach`] is called.
    pub fn start(
        kit: &GuestKit,
        images: Images,
        run: &Path,
        memory_mb: u32,
    ) -> Result<Vm, VmError> {
        let accel = kit.accel()?;
        Vm::launch(kit, images, run, memory_mb, accel, BOOT_DEADLINE)
    }

    /// The guest running from `run` (started by [`Vm::start`], perhaps by another process).
    /// It keeps running when the value is dropped.
    pub fn attach(run: &Path) -> Result<Vm, VmError> {
        let run = &absolute(run)?;
        let pid: u32 = std::fs::read_to_string(run.join("qemu.pid"))
            .map_err(|error| VmError::Io {
                what: format!("no guest running from {}", run.display()),
                error,
            })?
            .trim()
            .parse()
            .map_err(|_| VmError::PidFile {
                path: run.join("qemu.pid"),
            })?;
        let qmp = Qmp::connect(&run.join("qmp.sock"))?;
        let console = |error| VmError::Io {
            what: format!("the guest's console in {}", run.display()),
            error,
        };
        let con = UnixStream::connect(run.join("console.sock")).map_err(console)?;
        con.set_read_timeout(Some(Duration::from_millis(500)))
            .map_err(console)?;
        Ok(Vm {
            qmp,
            console: BufReader::new(con),
            pid,
            run: run.to_path_buf(),
            accel: Accel::Tcg,
            kill_on_drop: false,
        })
    }

    /// Leave the guest running when this value is dropped.
    pub fn detach(mut self) {
        self.kill_on_drop = false;
    }

    /// Its process.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    fn wait_migration(&mut self, what: &str, limit: Duration) -> Result<(), VmError> {
        let failed = |why: String| VmError::Migration {
            what: what.to_string(),
            why,
        };
        let t0 = Instant::now();
        loop {
            let r = self.qmp.run("query-migrate", json!({}))?;
            match r.get("status").and_then(Value::as_str) {
                Some("completed") => break,
                Some("failed") | Some("cancelled") => {
                    return Err(failed(format!(
                        "migration {}",
                        r.get("error-desc")
                            .and_then(Value::as_str)
                            .unwrap_or("failed")
                    )))
                }
                _ if t0.elapsed() > limit => {
                    return Err(failed(format!("not done in {} s", limit.as_secs())))
                }
                _ => std::thread::sleep(Duration::from_millis(50)),
            }
        }
        // An incoming guest is paused once its state is in; an outgoing one is stopped.
        loop {
            let s = self.qmp.run("query-status", json!({}))?;
            if s.get("status").and_then(Value::as_str) != Some("inmigrate") {
                return Ok(());
            }
            if t0.elapsed() > limit {
                return Err(failed("the guest stayed in migration".into()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Ping until the guest answers (`deadline`).
    fn wait_console(&mut self, deadline: Duration) -> Result<(), VmError> {
        let t0 = Instant::now();
        while t0.elapsed() < deadline {
            if self
                .command_within("ping", Duration::from_secs(1))
                .is_ok_and(|r| r == "pong")
            {
                return Ok(());
            }
        }
        Err(VmError::Guest(format!(
            "the guest did not answer on its console within {} s ({:?})",
            deadline.as_secs(),
            self.accel
        )))
    }

    /// Send one command line to the guest; its answer (after `roam-guest `).
    pub fn command(&mut self, line: &str) -> Result<String, VmError> {
        self.command_within(line, Duration::from_secs(600))
    }

    fn command_within(&mut self, line: &str, limit: Duration) -> Result<String, VmError> {
        let console = |error| VmError::Io {
            what: "the guest's console".into(),
            error,
        };
        let word = line.split_whitespace().next().unwrap_or("");
        let expect = match word {
            "ping" => "pong",
            "dirty" => "dirtied",
            other => other,
        };
        self.console
            .get_mut()
            .write_all(format!("{line}\n").as_bytes())
            .map_err(console)?;
        let t0 = Instant::now();
        let mut buf = String::new();
        while t0.elapsed() < limit {
            match self.console.read_line(&mut buf) {
                Ok(0) => return Err(VmError::Guest("the guest's console closed".into())),
                Ok(_) if buf.ends_with('\n') => {
                    let l = buf.trim_end_matches(['\r', '\n']).to_string();
                    buf.clear();
                    if let Some(rest) = l.strip_prefix("roam-guest ") {
                        if rest.starts_with(expect) {
                            return Ok(rest.to_string());
                        }
                        if rest.starts_with("unknown") {
                            return Err(VmError::Guest(format!(
                                "the guest does not know `{line}`"
                            )));
                        }
                    }
                }
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => return Err(console(e)),
            }
        }
        Err(VmError::Guest(format!(
            "the guest did not answer `{line}` within {} s",
            limit.as_secs()
        )))
    }

    /// Run a workload in the guest: `mem_mb` of fresh data into memory, `disk_mb` onto the disk.
    pub fn dirty(&mut self, mem_mb: u64, disk_mb: u64, seed: u64) -> Result<(), VmError> {
        self.command(&format!("dirty {mem_mb} {disk_mb} {seed}"))
            .map(|_| ())
    }

    /// Checksums of the guest's memory files and of its disk, as the guest computes them.
    pub fn checksum(&mut self) -> Result<String, VmError> {
        self.command("sum")
    }

    /// Suspend: stop the guest, leave its RAM in its RAM file, write its device state to
    /// `state` (replaced whole, atomically), read the disk chunks it wrote since it started,
    /// and end QEMU. The chunk numbers.
    pub fn suspend(mut self, state: &Path) -> Result<BTreeSet<u64>, VmError> {
        let state = &absolute(state)?;
        let part = state.with_extension("img.part");
        let status = self.qmp.run("query-status", json!({}))?;
        // A suspend that failed after its migration finished left the guest in `postmigrate`
        // with its state in `part`; QEMU will not migrate it twice.
        if !(status.get("status").and_then(Value::as_str) == Some("postmigrate") && part.is_file())
        {
            self.qmp.run("stop", json!({}))?;
            let _ = std::fs::remove_file(&part);
            self.ignore_shared()?;
            self.qmp.run(
                "migrate",
                json!({ "uri": format!("exec:cat > {}", shell_path(&part)?) }),
            )?;
            self.wait_migration("saving the device state", Duration::from_secs(600))?;
        }
        let dirty = self.dirty_chunks()?;
        let _ = self.qmp.run("quit", json!({}));
        // The RAM file is complete once QEMU has unmapped it.
        self.wait_exit(Duration::from_secs(30));
        self.kill_on_drop = false;
        std::fs::File::open(&part)
            .and_then(|f| f.sync_all())
            .map_err(|error| VmError::Io {
                what: part.display().to_string(),
                error,
            })?;
        std::fs::rename(&part, state).map_err(|error| VmError::Io {
            what: state.display().to_string(),
            error,
        })?;
        Ok(dirty)
    }

    /// Migrate the device state only: the RAM is in the shared RAM file.
    fn ignore_shared(&mut self) -> Result<(), VmError> {
        self.qmp.run(
            "migrate-set-capabilities",
            json!({ "capabilities": [{ "capability": "x-ignore-shared", "state": true }] }),
        )?;
        Ok(())
    }

    /// The bitmap's chunks: exported over QEMU's NBD server and read by `qemu-img map`.
    fn dirty_chunks(&mut self) -> Result<BTreeSet<u64>, VmError> {
        let img = which("qemu-img").ok_or(VmError::NotInstalled {
            tool: "qemu-img",
            packages: "qemu-utils",
        })?;
        self.qmp.run(
            "block-dirty-bitmap-disable",
            json!({ "node": DISK_NODE, "name": BITMAP }),
        )?;
        let sock = self.run.join("nbd.sock");
        let _ = std::fs::remove_file(&sock);
        self.qmp.run(
            "nbd-server-start",
            json!({ "addr": { "type": "unix", "data": { "path": sock } } }),
        )?;
        self.qmp.run(
            "block-export-add",
            json!({ "type": "nbd", "id": "roam", "node-name": DISK_NODE, "name": DISK_NODE, "bitmaps": [BITMAP] }),
        )?;
        let out = Command::new(img)
            .args(["map", "--output=json", "--image-opts"])
            .arg(format!(
                "driver=nbd,export={DISK_NODE},server.type=unix,server.path={},x-dirty-bitmap=qemu:dirty-bitmap:{BITMAP}",
                opt_path(&sock)?
            ))
            .output()
            .map_err(|error| VmError::Io {
                what: "running qemu-img".into(),
                error,
            })?;
        if !out.status.success() {
            return Err(VmError::DirtyMap(format!(
                "qemu-img map of the dirty bitmap failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        parse_dirty_map(&String::from_utf8_lossy(&out.stdout))
    }

    fn wait_exit(&self, limit: Duration) {
        let t0 = Instant::now();
        while alive(self.pid) && t0.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn terminate(&mut self) {
        let _ = self.qmp.run("quit", json!({}));
        self.wait_exit(Duration::from_secs(5));
        if alive(self.pid) {
            // SAFETY: kill(2) on the pid QEMU wrote for itself.
            unsafe {
                libc::kill(self.pid as i32, libc::SIGKILL);
            }
        }
    }

    /// Stop QEMU without saving anything.
    pub fn kill(mut self) {
        self.terminate();
        self.kill_on_drop = false;
    }
}

/// The chunk numbers that `qemu-img map --output=json` of an `x-dirty-bitmap` export names
/// dirty (its `"data": false` extents).
pub fn parse_dirty_map(json: &str) -> Result<BTreeSet<u64>, VmError> {
    let bad = VmError::DirtyMap;
    let v: Value = serde_json::from_str(json)
        .map_err(|e| bad(format!("qemu-img map printed bad JSON: {e}")))?;
    let extents = v
        .as_array()
        .ok_or_else(|| bad("qemu-img map printed no list of extents".into()))?;
    let mut out = BTreeSet::new();
    let chunk = CHUNK_SIZE as u64;
    for e in extents {
        let (Some(start), Some(len), Some(data)) = (
            e.get("start").and_then(Value::as_u64),
            e.get("length").and_then(Value::as_u64),
            e.get("data").and_then(Value::as_bool),
        ) else {
            return Err(bad(format!(
                "qemu-img map printed an extent without start, length or data: {e}"
            )));
        };
        if !data && len > 0 {
            out.extend(start / chunk..=(start + len - 1) / chunk);
        }
    }
    Ok(out)
}

fn absolute(p: &Path) -> Result<PathBuf, VmError> {
    std::path::absolute(p).map_err(|error| VmError::Io {
        what: p.display().to_string(),
        error,
    })
}

/// Whether `pid` runs (a zombie does not: a daemonized QEMU's parent may never reap it).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            Some(
                s[s.rfind(')')? + 1..]
                    .trim_start()
                    .starts_with(|c| c != 'Z'),
            )
        })
        .unwrap_or(false)
}

/// The QEMU running from `run`, if one is.
pub fn running(run: &Path) -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(run.join("qemu.pid"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    (alive(pid) && String::from_utf8_lossy(&cmdline).contains("qemu-system")).then_some(pid)
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|c| c.is_file())
    })
}
