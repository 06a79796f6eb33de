//! `roam parcel`: Horatio on the command line (the Horatio paper; docs/horatio.md). `serve` runs the
//! phone's or the server's tier; `secret` makes the user's access secret; `init`, `resume`
//! (`checkout`), `run` and `guest` (the parcel's QEMU guest), `eager`, `suspend`, `clean`,
//! `hoard`, `status` and `reclaim` run on the client (the borrowed PC), with progress on stderr.
//!
//! Links are TLS: a tier makes its certificate on first start (`DIR/tls/`, for the name
//! `roam-parcel`) and clients pin it (`--server-cert`, `--phone-cert`). Every link then
//! presents the user's access secret (`--secret-file`, 64 hex digits, made by `roam parcel
//! secret`).
//!
//! Secrets on disk are their owner's alone: the access secret file and a tier's
//! `DIR/tls/key.pem` are created with mode 0600 (and `DIR/tls/` 0700), and a secret file, TLS
//! key or control state that its group or others may read is refused, naming the file and the
//! `chmod 600` that fixes it, as OpenSSH refuses such a key. What `serve` holds its peers to
//! (links, deadlines) is set by its flags (docs/horatio.md, "Limits against hostile peers").

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use roam_core::progress::{Progress, Unit};
use roam_net::runtime::Tls;
use roam_store::ownership::Tier;
use roam_store::tier::wire::{unhex, Request};
use roam_store::tier::{serve_with, Limits, TierClient, TierService};
use roam_store::vm::{GuestKit, Images, Vm};
use roam_store::{files, parcel};

use super::write_private;

/// The name in a tier's certificate (clients pin the certificate and check this name).
pub(crate) const TLS_NAME: &str = "roam-parcel";

/// `roam parcel` commands.
#[derive(Subcommand, Debug)]
pub enum ParcelCmd {
    /// Run the phone's or the server's tier (until interrupted).
    Serve(ServeArgs),
    /// Make an access secret file (64 hex digits, mode 0600) for the user's tiers and clients.
    Secret {
        /// Where to write it (refused if it exists).
        #[arg(long)]
        out: PathBuf,
    },
    /// Create a parcel at the server from a disk image (and optionally a memory image).
    Init(InitArgs),
    /// Resume (check out) a parcel: control state from its owner, data from the phone first and
    /// the server on a miss; the images land in the parcel's directory. With the server out of
    /// reach (or --offline), a phone that owns the parcel and has hoarded it lends it: the
    /// parcel then suspends back to that phone alone.
    #[command(alias = "checkout")]
    Resume(ResumeArgs),
    /// Run the parcel's guest (QEMU) on its images in the background: from its memory image
    /// when it has one, else booting. A dirty bitmap records the disk chunks it writes.
    Run(RunArgs),
    /// Send a command line to the running guest's console (`dirty MEM_MB DISK_MB SEED`,
    /// `sum`, `ping`) and print its answer.
    Guest {
        /// The parcel's name.
        name: String,
        /// Where the client keeps parcels.
        #[arg(long, default_value = "parcels")]
        dir: PathBuf,
        /// The command line.
        #[arg(trailing_var_arg = true, required = true)]
        line: Vec<String>,
    },
    /// Suspend the parcel to the phone or the server: a running guest is stopped and its
    /// memory saved, then its changed chunks go and ownership follows; the client's copy of
    /// the images and control state is deleted.
    Suspend(SuspendArgs),
    /// Have the phone self-clean a parcel: upload what the server lacks and hand it the
    /// parcel; waits, showing progress.
    Clean(OpArgs),
    /// Eager propagation: every --every seconds, send the phone the chunks changed since the
    /// checkout that it lacks, while the guest runs (or --cycles times), so a suspend has only
    /// the final difference left; prints what each cycle sent and the total.
    Eager(EagerArgs),
    /// Have the phone hoard the parcel's current version (fetch from the server every chunk
    /// it lacks), so a resume elsewhere gets all its data from the phone; waits, showing
    /// progress.
    Hoard(OpArgs),
    /// Who owns a parcel, its versions, and what the phone and the client hold.
    Status(OpArgs),
    /// The parcel's owner is lost: the server takes it back at its last committed version.
    Reclaim(OpArgs),
}

/// Which tier `serve` runs.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ServeTier {
    /// The phone: a portable cache that self-cleans to the server.
    Phone,
    /// The server: the trust anchor, keeping the ownership record.
    Server,
}

/// Options of `roam parcel serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The tier.
    #[arg(long, value_enum)]
    tier: ServeTier,
    /// Its directory (chunks, control state, the server's ownership record, its TLS
    /// certificate).
    #[arg(long)]
    dir: PathBuf,
    /// Listen here.
    #[arg(long)]
    listen: SocketAddr,
    /// The user's access secret.
    #[arg(long)]
    secret_file: PathBuf,
    /// Phone: the server's address, for self-cleaning.
    #[arg(long)]
    server: Option<SocketAddr>,
    /// Phone: the server's certificate (its `DIR/tls/cert.pem`).
    #[arg(long)]
    server_cert: Option<PathBuf>,
    /// Server: keep blobs in this S3-compatible endpoint's bucket (`--s3-bucket`) instead of
    /// DIR; the keys come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
    #[arg(long, requires = "s3_bucket")]
    s3_endpoint: Option<String>,
    /// Server: the S3 bucket.
    #[arg(long, requires = "s3_endpoint")]
    s3_bucket: Option<String>,
    /// Server: the S3 region.
    #[arg(long, default_value = "us-east-1")]
    s3_region: String,
    /// Server: the prefix of the blobs' object names.
    #[arg(long, default_value = "")]
    s3_prefix: String,
    /// Most authenticated links served at once (a thread each); a link authenticated over
    /// it is told so and closed.
    #[arg(long, default_value_t = roam_store::tier::MAX_LINKS)]
    max_links: usize,
    /// Most links accepted and not yet authenticated at once (a pool apart from
    /// --max-links); when it is full the oldest of the source holding most of it is closed.
    #[arg(long, default_value_t = roam_store::tier::MAX_PENDING)]
    max_pending: usize,
    /// Of those, most from one source address (an IPv6 /64 counting as one); past it, that
    /// source's oldest is closed.
    #[arg(long, default_value_t = roam_store::tier::MAX_PENDING_PER_SOURCE)]
    max_pending_per_source: usize,
    /// Seconds a link has to present the access secret after it is accepted (the whole
    /// authentication).
    #[arg(long, default_value_t = roam_store::tier::AUTH_DEADLINE.as_secs_f64())]
    auth_deadline: f64,
    /// Seconds a link may go without a request before it is closed.
    #[arg(long, default_value_t = roam_store::tier::LINK_IDLE.as_secs_f64())]
    idle_timeout: f64,
    /// Seconds a request may take to arrive whole from its first byte (raise it for the
    /// largest control states over slow links: at 120 s, 48 MiB needs 3.4 Mbit/s).
    #[arg(long, default_value_t = roam_store::tier::MESSAGE_DEADLINE.as_secs_f64())]
    message_deadline: f64,
}

impl ServeArgs {
    /// The limits its flags set.
    fn limits(&self) -> Result<Limits> {
        let secs = |v: f64, flag: &str| -> Result<Duration> {
            if v.is_finite() && v > 0.0 && v < 1e9 {
                Ok(Duration::from_secs_f64(v))
            } else {
                bail!("--{flag} {v}: a positive number of seconds")
            }
        };
        if self.max_links == 0 || self.max_pending == 0 || self.max_pending_per_source == 0 {
            bail!("--max-links, --max-pending and --max-pending-per-source must be at least 1");
        }
        Ok(Limits {
            max_links: self.max_links,
            max_pending: self.max_pending,
            max_pending_per_source: self.max_pending_per_source,
            auth_deadline: secs(self.auth_deadline, "auth-deadline")?,
            idle: secs(self.idle_timeout, "idle-timeout")?,
            message_deadline: secs(self.message_deadline, "message-deadline")?,
        })
    }
}

/// How a client reaches the tiers.
#[derive(Args, Debug)]
pub struct Links {
    /// The server's address.
    #[arg(long)]
    server: SocketAddr,
    /// The server's certificate (its `DIR/tls/cert.pem`).
    #[arg(long)]
    server_cert: PathBuf,
    /// The phone's address.
    #[arg(long)]
    phone: Option<SocketAddr>,
    /// The phone's certificate.
    #[arg(long)]
    phone_cert: Option<PathBuf>,
    /// The user's access secret.
    #[arg(long)]
    secret_file: PathBuf,
    /// Where the client keeps parcels (a directory per parcel).
    #[arg(long, default_value = "parcels")]
    dir: PathBuf,
}

/// Options of `roam parcel init`.
#[derive(Args, Debug)]
pub struct InitArgs {
    /// The parcel's name (1-64 of A-Z a-z 0-9 . _ -).
    name: String,
    /// Its disk image (any raw image).
    #[arg(long)]
    disk: PathBuf,
    /// Its memory image (a saved guest's RAM file; with --state).
    #[arg(long, requires = "state")]
    memory: Option<PathBuf>,
    /// Its device state (a saved guest's; with --memory).
    #[arg(long, requires = "memory")]
    state: Option<PathBuf>,
    #[command(flatten)]
    links: Links,
}

/// Options of the commands that name a parcel.
#[derive(Args, Debug)]
pub struct OpArgs {
    /// The parcel's name.
    name: String,
    #[command(flatten)]
    links: Links,
}

/// Options of `roam parcel resume`.
#[derive(Args, Debug)]
pub struct ResumeArgs {
    /// The parcel's name.
    name: String,
    /// Do not try the server: borrow the parcel from the phone (which must own it and have
    /// hoarded it). Without this, a resume falls back to the phone when the server cannot be
    /// reached.
    #[arg(long)]
    offline: bool,
    #[command(flatten)]
    links: Links,
}

/// Options of `roam parcel eager`.
#[derive(Args, Debug)]
pub struct EagerArgs {
    /// The parcel's name.
    name: String,
    /// Seconds between cycles (the paper's were about a minute apart).
    #[arg(long, default_value_t = 60.0)]
    every: f64,
    /// Stop after this many cycles (default: while the parcel's guest runs; one cycle without
    /// a guest).
    #[arg(long)]
    cycles: Option<u64>,
    #[command(flatten)]
    links: Links,
}

/// Options of `roam parcel run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The parcel's name (resumed on this client).
    name: String,
    /// Where the client keeps parcels.
    #[arg(long, default_value = "parcels")]
    dir: PathBuf,
    /// The guest's kernel and initramfs (`scripts/build-guest DIR`); default
    /// `$ROAM_GUEST_DIR`, else `~/.cache/roam/guest`.
    #[arg(long)]
    guest: Option<PathBuf>,
    /// The guest's memory, MiB (a resumed guest needs what it was saved with).
    #[arg(long, default_value_t = roam_store::vm::DEFAULT_MEMORY_MB)]
    memory_mb: u32,
}

/// Marks a guest run since the parcel was resumed: a second run's bitmap misses the first's
/// writes, so suspend then compares every chunk.
const RAN: &str = "ran";

/// Options of `roam parcel suspend`.
#[derive(Args, Debug)]
pub struct SuspendArgs {
    /// The parcel's name.
    name: String,
    /// Where to.
    #[arg(long, value_enum, default_value = "phone")]
    to: ServeTier,
    /// After a suspend to the phone, upload its dirty chunks from this client straight to the
    /// server too (what arrives, the phone's self-cleaning need not send).
    #[arg(long)]
    upload_behind: bool,
    #[command(flatten)]
    links: Links,
}

/// The access secret in the file `path`, refused when its group or others may read it.
fn read_secret(path: &Path) -> Result<[u8; 32]> {
    let bytes = files::read_private(path, "the access secret")?
        .ok_or_else(|| anyhow!("{}: no such file", path.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    unhex::<32>(text.trim(), "access secret").map_err(|e| anyhow!("{}: {e}", path.display()))
}

fn client_tls(cert: &Path) -> Result<Tls> {
    let pem = std::fs::read(cert).with_context(|| format!("{}", cert.display()))?;
    Tls::client(&pem, TLS_NAME).with_context(|| format!("{}", cert.display()))
}

/// The tier's certificate and key under `dir/tls/` (0700; the key 0600), made on first
/// start; a key its group or others may read is refused.
fn tier_tls(dir: &Path) -> Result<Tls> {
    let tls = dir.join("tls");
    let (cert, key) = (tls.join("cert.pem"), tls.join("key.pem"));
    if !cert.exists() {
        files::make_private_dir(&tls)?;
        let c = rcgen::generate_simple_self_signed(vec![TLS_NAME.to_string()])?;
        write_private(&key, c.signing_key.serialize_pem().as_bytes())?;
        std::fs::write(&cert, c.cert.pem()).with_context(|| format!("{}", cert.display()))?;
        eprintln!(
            "made a TLS certificate: {} (clients pin it with --server-cert / --phone-cert)",
            cert.display()
        );
    }
    let c = std::fs::read(&cert).with_context(|| format!("{}", cert.display()))?;
    let k = files::read_private(&key, "the tier's TLS private key")?.ok_or_else(|| {
        anyhow!(
            "{}: no such file (remove {} to make both again)",
            key.display(),
            cert.display()
        )
    })?;
    Tls::server(&c, &k).with_context(|| format!("{}", tls.display()))
}

struct Connected {
    server: TierClient,
    phone: Option<TierClient>,
}

fn connect(l: &Links) -> Result<Connected> {
    let secret = read_secret(&l.secret_file)?;
    let server = TierClient::connect(
        "server",
        l.server,
        Some(client_tls(&l.server_cert)?),
        &secret,
    )?;
    let phone = match l.phone {
        Some(_) => Some(connect_phone(l)?),
        None => None,
    };
    Ok(Connected { server, phone })
}

/// The link to the phone alone (`--phone` and `--phone-cert` required).
fn connect_phone(l: &Links) -> Result<TierClient> {
    let secret = read_secret(&l.secret_file)?;
    match (l.phone, &l.phone_cert) {
        (Some(addr), Some(cert)) => Ok(TierClient::connect(
            "phone",
            addr,
            Some(client_tls(cert)?),
            &secret,
        )?),
        (Some(_), None) => bail!("--phone needs --phone-cert (the phone's DIR/tls/cert.pem)"),
        (None, _) => bail!("this needs the phone: give --phone and --phone-cert"),
    }
}

/// The progress of a parcel's chunks on stderr, with the bytes moved so far when known
/// ([`roam_core::progress`], as every roam command shows long work).
struct Bar(Progress);

impl Bar {
    fn new(label: &'static str) -> Bar {
        Bar(Progress::builder(Unit::Count("chunks"))
            .label(label)
            .start())
    }

    fn chunks(&mut self, n: u64, total: Option<u64>, bytes: Option<u64>) {
        if let Some(t) = total {
            self.0.set_total(t);
        }
        self.0.set_position(n);
        if let Some(b) = bytes {
            self.0.set_message(format!("{:.1} MB", b as f64 / 1e6));
        }
    }

    fn done(&self) {
        self.0.finish();
    }
}

/// Run `roam parcel ...`.
pub fn run(cmd: ParcelCmd) -> Result<()> {
    match cmd {
        ParcelCmd::Secret { out } => secret_cmd(&out),
        ParcelCmd::Serve(a) => serve_cmd(a),
        ParcelCmd::Init(a) => init_cmd(&a),
        ParcelCmd::Run(a) => run_guest(&a),
        ParcelCmd::Guest { name, dir, line } => guest_cmd(&name, &dir, &line),
        ParcelCmd::Resume(a) => resume_cmd(&a),
        ParcelCmd::Suspend(a) => suspend_cmd(&a),
        ParcelCmd::Clean(a) => clean_cmd(&a),
        ParcelCmd::Eager(a) => eager_cmd(&a),
        ParcelCmd::Hoard(a) => hoard_cmd(&a),
        ParcelCmd::Status(a) => status_cmd(&a),
        ParcelCmd::Reclaim(a) => reclaim_cmd(&a),
    }
}

/// `roam parcel secret`: a fresh access secret in a file only its owner reads.
fn secret_cmd(out: &Path) -> Result<()> {
    let s = super::random_32()?;
    write_private(
        out,
        format!("{}\n", roam_store::tier::wire::hex(&s)).as_bytes(),
    )?;
    eprintln!("wrote {}", out.display());
    Ok(())
}

/// `roam parcel init`: the images copied into the parcel's directory, then sealed and
/// uploaded to the server, which owns the new parcel.
fn init_cmd(a: &InitArgs) -> Result<()> {
    let c = connect(&a.links)?;
    let dir = parcel::parcel_dir(&a.links.dir, &a.name);
    // The images are copied into the parcel's directory (its owner's alone: they are the
    // guest's data in clear), which init then clears.
    files::make_private_dir(dir.image("disk").parent().unwrap())?;
    for (src, name) in [
        (Some(&a.disk), "disk"),
        (a.memory.as_ref(), "memory"),
        (a.state.as_ref(), "state"),
    ] {
        if let Some(m) = src {
            let to = dir.image(name);
            std::fs::copy(m, &to).with_context(|| format!("{}", m.display()))?;
            std::fs::set_permissions(&to, std::os::unix::fs::PermissionsExt::from_mode(0o600))
                .with_context(|| format!("{}", to.display()))?;
        }
    }
    let mut bar = Bar::new("upload");
    let m = parcel::init(&c.server, &a.name, &dir, &mut |n, b| {
        bar.chunks(n, None, Some(b))
    })?;
    bar.done();
    println!(
        "parcel `{}` created at the server, version {}: {} chunks, {:.1} MB sent",
        a.name,
        m.version,
        m.chunks,
        m.bytes as f64 / 1e6
    );
    Ok(())
}

/// `roam parcel guest`: one command line to the running guest's console, and its answer.
fn guest_cmd(name: &str, dir: &Path, line: &[String]) -> Result<()> {
    let dir = parcel::parcel_dir(dir, name);
    let mut vm = Vm::attach(&dir.vm_dir())?;
    println!("{}", vm.command(&line.join(" "))?);
    Ok(())
}

/// `roam parcel suspend`: a running guest saved, the parcel suspended to the phone or the
/// server, and with `--upload-behind` its dirty chunks uploaded to the server too.
fn suspend_cmd(a: &SuspendArgs) -> Result<()> {
    let dir = parcel::parcel_dir(&a.links.dir, &a.name);
    if dir.is_lent() {
        return suspend_lent_cmd(a, &dir);
    }
    let c = connect(&a.links)?;
    let to = match a.to {
        ServeTier::Phone => Tier::Phone,
        ServeTier::Server => Tier::Server,
    };
    let t0 = Instant::now();
    let map = save_guest(&dir)?;
    let mut bar = Bar::new("suspend");
    let m = parcel::suspend_dirty(
        &c.server,
        c.phone.as_ref(),
        to,
        &dir,
        map.as_ref(),
        &mut |n, b| bar.chunks(n, None, Some(b)),
    )?;
    bar.done();
    println!(
        "parcel `{}` version {} suspended to the {to:?} tier in {:.1} s: {} chunks ({:.1} MB) sent, {} dirty",
        a.name,
        m.version,
        t0.elapsed().as_secs_f64(),
        m.chunks,
        m.bytes as f64 / 1e6,
        m.dirty
    );
    if a.upload_behind && to == Tier::Phone && !m.dirty_ids.is_empty() {
        upload_behind_cmd(&c.server, &dir, &m.dirty_ids)?;
    }
    Ok(())
}

/// After a suspend to the phone: its dirty chunks uploaded from this client to the server.
fn upload_behind_cmd(
    server: &TierClient,
    dir: &parcel::ParcelDir,
    ids: &[roam_store::ChunkId],
) -> Result<()> {
    let mut bar = Bar::new("upload behind");
    let (n, b) = parcel::upload_behind(server, dir, ids, &mut |n, b| {
        bar.chunks(n, Some(ids.len() as u64), Some(b))
    })?;
    bar.done();
    println!(
        "uploaded {n} chunks ({:.1} MB) to the server behind the phone",
        b as f64 / 1e6
    );
    Ok(())
}

/// The link to the phone, which `what` needs (an error saying so without one).
fn phone_of<'a>(c: &'a Connected, what: &str) -> Result<&'a TierClient> {
    c.phone
        .as_ref()
        .ok_or_else(|| anyhow!("{what}: give --phone and --phone-cert"))
}

/// `roam parcel clean`: the phone self-cleans the parcel; waits, showing progress.
fn clean_cmd(a: &OpArgs) -> Result<()> {
    let c = connect(&a.links)?;
    let phone = phone_of(&c, "clean runs on the phone")?;
    let end = parcel::clean(phone, &a.name, Duration::from_millis(250), &mut |s| {
        eprint!("\rself-cleaning: {s}          ");
    })?;
    eprintln!();
    println!("{end}");
    Ok(())
}

/// `roam parcel eager`: cycles of eager propagation to the phone while the guest runs (or
/// `--cycles` of them).
fn eager_cmd(a: &EagerArgs) -> Result<()> {
    if !(a.every.is_finite() && a.every > 0.0) {
        bail!("--every {}: a positive number of seconds", a.every);
    }
    let c = connect(&a.links)?;
    let phone = phone_of(&c, "eager propagation goes to the phone")?;
    let dir = parcel::parcel_dir(&a.links.dir, &a.name);
    let guest = roam_store::vm::running(&dir.vm_dir()).is_some();
    let (mut total, mut bytes, mut k) = (0u64, 0u64, 0u64);
    loop {
        let (n, b) = parcel::eager(phone, &dir, &mut |_, _| {})?;
        k += 1;
        total += n;
        bytes += b;
        eprintln!("cycle {k}: {n} chunks ({:.1} MB) sent", b as f64 / 1e6);
        let more = match a.cycles {
            Some(c) => k < c,
            None => guest && roam_store::vm::running(&dir.vm_dir()).is_some(),
        };
        if !more {
            break;
        }
        std::thread::sleep(Duration::from_secs_f64(a.every));
    }
    println!(
        "eager propagation: {k} cycles, {total} chunks ({:.1} MB) sent to the phone",
        bytes as f64 / 1e6
    );
    Ok(())
}

/// `roam parcel hoard`: the phone fetches every chunk of the version it lacks; waits,
/// showing progress.
fn hoard_cmd(a: &OpArgs) -> Result<()> {
    let c = connect(&a.links)?;
    let phone = phone_of(&c, "hoarding runs on the phone")?;
    let dir = parcel::parcel_dir(&a.links.dir, &a.name);
    let end = parcel::hoard(
        &c.server,
        phone,
        &a.name,
        &dir,
        Duration::from_millis(250),
        &mut |s| eprint!("\r{s}          "),
    )?;
    eprintln!();
    println!("{end}");
    Ok(())
}

/// `roam parcel status`: what the server, the phone and this client know of the parcel.
fn status_cmd(a: &OpArgs) -> Result<()> {
    let c = connect(&a.links)?;
    let dir = parcel::parcel_dir(&a.links.dir, &a.name);
    let s = parcel::status(&c.server, c.phone.as_ref(), &a.name, &dir)?;
    println!("parcel `{}`", a.name);
    println!(
        "  owner: {:?}{}",
        s.owner,
        if s.pending {
            " (a handoff is prepared)"
        } else {
            ""
        }
    );
    println!("  server: last committed version {}", s.committed);
    match s.client {
        Some((v, dirty)) => println!(
            "  this client: version {v}, {dirty} chunks not yet at the server{}",
            if dir.is_lent() {
                " (lent by the phone: it suspends back to the phone)"
            } else {
                ""
            }
        ),
        None => println!("  this client: no control state"),
    }
    if let Some((control, cleaning, chunks)) = s.phone {
        println!(
            "  phone: {}, {chunks} chunks held{}",
            control.map_or("no control state".to_string(), |v| format!("version {v}")),
            cleaning.map_or(String::new(), |c| format!(", {c}"))
        );
    }
    Ok(())
}

/// `roam parcel reclaim`: the server takes a lost owner's parcel back.
fn reclaim_cmd(a: &OpArgs) -> Result<()> {
    let c = connect(&a.links)?;
    let (_, v) = c.server.owned(&Request::Reclaim {
        parcel: a.name.clone(),
    })?;
    println!(
        "parcel `{}`: the server owns it again at version {v}; the lost owner's nonce is stale",
        a.name
    );
    Ok(())
}

/// `roam parcel run`: the guest on the parcel's images, left running.
fn run_guest(a: &RunArgs) -> Result<()> {
    let dir = parcel::parcel_dir(&a.dir, &a.name);
    if dir.held()?.is_none() {
        bail!(
            "parcel `{}`: not resumed on this client ({}): `roam parcel resume` it first",
            a.name,
            a.dir.display()
        );
    }
    let kit = GuestKit::in_dir(&a.guest.clone().unwrap_or_else(GuestKit::default_dir))?;
    let run = dir.vm_dir();
    std::fs::create_dir_all(&run)?;
    if run.join(RAN).exists() {
        eprintln!(
            "note: the guest ran before since the resume; the next suspend compares every chunk"
        );
    }
    let (disk, memory, state) = (dir.image("disk"), dir.image("memory"), dir.image("state"));
    let images = Images {
        disk: &disk,
        ram: &memory,
        state: &state,
    };
    let t0 = Instant::now();
    let saved = state.exists();
    let vm = Vm::start(&kit, images, &run, a.memory_mb)?;
    // Written after the start: a start that failed wrote nothing to the disk.
    let first = !run.join(RAN).exists();
    std::fs::write(run.join(RAN), if first { "1" } else { "2" })?;
    println!(
        "parcel `{}`: guest running (pid {}, {:?}) after {:.1} s, {} ({})",
        a.name,
        vm.pid(),
        vm.accel,
        t0.elapsed().as_secs_f64(),
        if saved {
            "from its saved memory and state"
        } else {
            "booted"
        },
        run.display()
    );
    vm.detach();
    Ok(())
}

/// `roam parcel resume`: through the server, or borrowed from the phone when the server is
/// out of reach (or `--offline`).
fn resume_cmd(a: &ResumeArgs) -> Result<()> {
    let dir = parcel::parcel_dir(&a.links.dir, &a.name);
    // A fresh checkout: whatever a guest left of an earlier one goes.
    let _ = std::fs::remove_dir_all(dir.vm_dir());
    let c = if a.offline {
        None
    } else {
        match connect(&a.links) {
            Ok(c) => Some(c),
            Err(e) if a.links.phone.is_some() => {
                eprintln!("{e:#}: resuming from the phone alone (a disconnected resume)");
                None
            }
            Err(e) => return Err(e),
        }
    };
    let mut bar = Bar::new("resume");
    let mut progress = |n, t| bar.chunks(n, Some(t), None);
    let (m, how) = match &c {
        Some(c) => (
            parcel::resume(&c.server, c.phone.as_ref(), &a.name, &dir, &mut progress),
            "",
        ),
        None => {
            let phone = connect_phone(&a.links)?;
            (
                parcel::resume_offline(&phone, &a.name, &dir, None, &mut progress),
                "; lent by the phone: suspend it back to the phone",
            )
        }
    };
    let m = m?;
    bar.done();
    println!(
        "parcel `{}` version {} resumed into {} ({} chunks; {} not yet at the server{how})",
        a.name,
        m.version,
        dir.image("disk").parent().unwrap().display(),
        m.chunks,
        m.dirty
    );
    Ok(())
}

/// `roam parcel suspend` of a parcel the phone lent: back to the phone, without the server.
fn suspend_lent_cmd(a: &SuspendArgs, dir: &parcel::ParcelDir) -> Result<()> {
    if !matches!(a.to, ServeTier::Phone) {
        bail!(
            "parcel `{}` was lent by the phone (resumed while the server was out of reach): suspend it with --to phone",
            a.name
        );
    }
    let phone = connect_phone(&a.links)?;
    let t0 = Instant::now();
    let map = save_guest(dir)?;
    let mut bar = Bar::new("suspend");
    let m = parcel::suspend_lent(&phone, dir, map.as_ref(), &mut |n, b| {
        bar.chunks(n, None, Some(b))
    })?;
    bar.done();
    println!(
        "parcel `{}` version {} given back to the phone in {:.1} s: {} chunks ({:.1} MB) sent, {} dirty",
        a.name,
        m.version,
        t0.elapsed().as_secs_f64(),
        m.chunks,
        m.bytes as f64 / 1e6,
        m.dirty
    );
    Ok(())
}

/// Before a suspend: a guest running on the parcel is stopped (its RAM is the memory image)
/// and its device state saved; the chunks its disk bitmap names (when it was the only run since
/// the resume), else `None` (every chunk compared).
fn save_guest(dir: &parcel::ParcelDir) -> Result<Option<parcel::DirtyMap>> {
    let run = dir.vm_dir();
    if roam_store::vm::running(&run).is_none() {
        // Without a guest now, a run since the resume may have written anything.
        return Ok(None);
    }
    let first = std::fs::read_to_string(run.join(RAN)).is_ok_and(|s| s.trim() == "1");
    let vm = Vm::attach(&run)?;
    let t0 = Instant::now();
    let disk = vm.suspend(&dir.image("state"))?;
    eprintln!(
        "guest saved in {:.1} s: {} disk chunks written since it started",
        t0.elapsed().as_secs_f64(),
        disk.len()
    );
    Ok(first.then(|| [("disk".to_string(), disk)].into_iter().collect()))
}

fn serve_cmd(a: ServeArgs) -> Result<()> {
    let limits = a.limits()?;
    let secret = read_secret(&a.secret_file)?;
    files::make_private_dir(&a.dir)?;
    let tls = tier_tls(&a.dir)?;
    let tier = match a.tier {
        ServeTier::Phone => Tier::Phone,
        ServeTier::Server => Tier::Server,
    };
    let mut svc = TierService::open(tier, &a.dir, secret)?;
    if let (Some(endpoint), Some(bucket)) = (&a.s3_endpoint, &a.s3_bucket) {
        let key = |v: &str| {
            std::env::var(v).map_err(|_| anyhow!("--s3-endpoint needs {v} in the environment"))
        };
        let store = roam_store::S3Store::open(roam_store::S3Config {
            endpoint: endpoint.clone(),
            bucket: bucket.clone(),
            region: a.s3_region.clone(),
            access_key: key("AWS_ACCESS_KEY_ID")?,
            secret_key: key("AWS_SECRET_ACCESS_KEY")?,
            prefix: a.s3_prefix.clone(),
        })?;
        svc = svc.with_blobs(Box::new(store))?;
    }
    match (tier, a.server, &a.server_cert) {
        (Tier::Phone, Some(addr), Some(cert)) => {
            let tls = client_tls(cert)?;
            svc = svc.with_upstream(Box::new(move || {
                TierClient::connect("server", addr, Some(tls.clone()), &secret)
            }));
        }
        (Tier::Phone, Some(_), None) => bail!("--server needs --server-cert"),
        (Tier::Phone, None, _) => eprintln!("no --server: this phone cannot self-clean"),
        (_, Some(_), _) => bail!("--server is the phone's option"),
        _ => {}
    }
    let h = serve_with(Arc::new(svc), a.listen, Some(tls), limits)?;
    eprintln!(
        "{tier:?} tier listening on {} (directory {})",
        h.addr(),
        a.dir.display()
    );
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, stop.clone())?;
    signal_hook::flag::register(signal_hook::consts::SIGTERM, stop.clone())?;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(200));
    }
    h.stop();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// An access secret file (or a TLS key) others may read is refused, naming the file and
    /// the fix; the one `roam parcel secret` makes is its owner's alone and is read.
    #[test]
    fn a_secret_file_others_may_read_is_refused() {
        let dir = std::env::temp_dir().join(format!("roam-parcel-secret-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("secret");
        secret_cmd(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        read_secret(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = format!("{:#}", read_secret(&path).unwrap_err());
        assert!(
            e.contains(&path.display().to_string()) && e.contains("chmod 600"),
            "{e}"
        );
        // The tier's TLS key: made 0600 in a 0700 directory, refused once opened up.
        let tier = dir.join("tier");
        tier_tls(&tier).unwrap();
        let key = tier.join("tls/key.pem");
        assert_eq!(
            std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let tls = std::fs::metadata(tier.join("tls"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(tls & 0o077, 0);
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
        let e = format!("{:#}", tier_tls(&tier).err().unwrap());
        assert!(e.contains("key.pem") && e.contains("chmod 600"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// `serve`'s limit flags, and what they refuse.
    #[test]
    fn serve_flags_set_the_limits() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            serve: ServeArgs,
        }
        let args = |extra: &[&str]| {
            let mut v = vec!["serve", "--tier", "server", "--dir", "d", "--listen"];
            v.extend(["127.0.0.1:0", "--secret-file", "s"]);
            v.extend(extra);
            Cli::try_parse_from(v).unwrap().serve
        };
        assert_eq!(args(&[]).limits().unwrap(), Limits::default());
        let l = args(&[
            "--max-links",
            "8",
            "--max-pending",
            "4",
            "--max-pending-per-source",
            "2",
            "--auth-deadline",
            "2.5",
            "--idle-timeout",
            "30",
            "--message-deadline",
            "600",
        ])
        .limits()
        .unwrap();
        assert_eq!(
            l,
            Limits {
                max_links: 8,
                max_pending: 4,
                max_pending_per_source: 2,
                auth_deadline: Duration::from_millis(2500),
                idle: Duration::from_secs(30),
                message_deadline: Duration::from_secs(600),
            }
        );
        assert!(args(&["--max-links", "0"]).limits().is_err());
        assert!(args(&["--auth-deadline=-1"]).limits().is_err());
        assert!(args(&["--message-deadline", "0"]).limits().is_err());
    }
}
