//! Starting QEMU on a guest's images ([`Vm::launch`]), step by step: the paths made absolute
//! (QEMU runs daemonized from `/`), the RAM file sized (a saved guest's as it is, a fresh boot's
//! zeroed), the command line built, QEMU started and attached to, the saved device state taken
//! back, the dirty bitmap added, and the guest waited for on its console.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;

use super::{
    absolute, opt_path, running, shell_path, which, Accel, GuestKit, Images, Vm, BITMAP, DISK_NODE,
    MIB,
};
use crate::chunk::CHUNK_SIZE;
use crate::error::VmError;

/// A guest's files as QEMU is given them: absolute.
struct Paths {
    disk: PathBuf,
    ram: PathBuf,
    state: PathBuf,
    run: PathBuf,
}

impl Vm {
    /// Start QEMU (`accel`) on `images` with its sockets in `run`, and wait up to `deadline`
    /// for the guest to answer on its console (see [`Vm::start`]).
    pub(super) fn launch(
        kit: &GuestKit,
        images: Images,
        run: &Path,
        memory_mb: u32,
        accel: Accel,
        deadline: Duration,
    ) -> Result<Vm, VmError> {
        let qemu = which("qemu-system-x86_64").ok_or(VmError::NotInstalled {
            tool: "qemu-system-x86_64",
            packages: "qemu-system-x86 qemu-utils",
        })?;
        std::fs::create_dir_all(run).map_err(|error| VmError::Io {
            what: run.display().to_string(),
            error,
        })?;
        let p = Paths {
            disk: absolute(images.disk)?,
            ram: absolute(images.ram)?,
            state: absolute(images.state)?,
            run: absolute(run)?,
        };
        if let Some(pid) = running(&p.run) {
            return Err(VmError::AlreadyRunning { run: p.run, pid });
        }
        let resuming = p.state.is_file();
        let mb = ram_mb(&p.ram, resuming, memory_mb)?;
        let mut cmd = qemu_command(&qemu, kit, &p, accel, mb)?;
        if resuming {
            cmd.args(["-incoming", "defer"]);
        }
        // With -daemonize the first process exits once the sockets are ready.
        let out = cmd.output().map_err(|error| VmError::Io {
            what: "starting qemu-system-x86_64".into(),
            error,
        })?;
        if !out.status.success() {
            return Err(VmError::Start {
                status: out.status,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        let mut vm = Vm::attach(&p.run)?;
        vm.accel = accel;
        vm.kill_on_drop = true;
        if resuming {
            vm.restore_state(&p.state)?;
        }
        vm.qmp.run(
            "block-dirty-bitmap-add",
            json!({ "node": DISK_NODE, "name": BITMAP, "granularity": CHUNK_SIZE }),
        )?;
        if resuming {
            vm.qmp.run("cont", json!({}))?;
        }
        vm.wait_console(deadline)?;
        Ok(vm)
    }

    /// Take the saved device state back from `state` (QEMU started with `-incoming defer`).
    fn restore_state(&mut self, state: &Path) -> Result<(), VmError> {
        self.ignore_shared()?;
        self.qmp.run(
            "migrate-incoming",
            json!({ "uri": format!("exec:cat {}", shell_path(state)?) }),
        )?;
        self.wait_migration("restoring the device state", Duration::from_secs(600))
    }
}

/// The guest's memory, MiB: a saved guest's RAM file as it is (a whole number of MiB), or for
/// a fresh boot `memory_mb` of fresh (zero) RAM in a new file.
fn ram_mb(ram: &Path, resuming: bool, memory_mb: u32) -> Result<u64, VmError> {
    if resuming {
        let len = std::fs::metadata(ram)
            .map_err(|error| VmError::Io {
                what: format!("{}: the RAM image of a saved guest", ram.display()),
                error,
            })?
            .len();
        if len == 0 || len % MIB != 0 {
            return Err(VmError::RamImage {
                path: ram.to_path_buf(),
                len,
            });
        }
        return Ok(len / MIB);
    }
    // A fresh boot gets fresh (zero) RAM.
    let _ = std::fs::remove_file(ram);
    std::fs::File::create(ram)
        .and_then(|f| f.set_len(u64::from(memory_mb) * MIB))
        .map_err(|error| VmError::Io {
            what: ram.display().to_string(),
            error,
        })?;
    Ok(u64::from(memory_mb))
}

/// QEMU's command line: `mb` MiB of RAM shared from the RAM file, the kit's kernel and
/// initramfs, the disk on virtio, the console and QMP on sockets in the run directory (those
/// of an earlier run removed), daemonized with a pid file.
fn qemu_command(
    qemu: &Path,
    kit: &GuestKit,
    p: &Paths,
    accel: Accel,
    mb: u64,
) -> Result<Command, VmError> {
    let (qmp_sock, con_sock, pidfile) = (
        p.run.join("qmp.sock"),
        p.run.join("console.sock"),
        p.run.join("qemu.pid"),
    );
    for f in [&qmp_sock, &con_sock, &pidfile] {
        let _ = std::fs::remove_file(f);
    }
    let mut cmd = Command::new(qemu);
    cmd.args(["-accel", accel.arg(), "-m"])
        .arg(format!("{mb}M"))
        .arg("-object")
        .arg(format!(
            "memory-backend-file,id=ram0,size={mb}M,mem-path={},share=on",
            opt_path(&p.ram)?
        ))
        .args(["-machine", "memory-backend=ram0"])
        .args(["-nodefaults", "-display", "none", "-no-reboot", "-kernel"])
        .arg(kit.dir.join("vmlinuz"))
        .arg("-initrd")
        .arg(kit.dir.join("initrd.img"))
        .args([
            "-append",
            "console=ttyS0 quiet init_on_free=1 panic=-1",
            "-blockdev",
        ])
        .arg(format!(
            "driver=file,filename={},node-name=file0",
            opt_path(&p.disk)?
        ))
        .args([
            "-blockdev",
            &format!("driver=raw,file=file0,node-name={DISK_NODE}"),
            "-device",
            &format!("virtio-blk-pci,drive={DISK_NODE}"),
            "-chardev",
        ])
        .arg(format!(
            "socket,id=con,path={},server=on,wait=off",
            opt_path(&con_sock)?
        ))
        .args(["-serial", "chardev:con", "-qmp"])
        .arg(format!("unix:{},server=on,wait=off", opt_path(&qmp_sock)?))
        .arg("-pidfile")
        .arg(&pidfile)
        .arg("-daemonize")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    Ok(cmd)
}
