//! Network configuration inside the namespaces: each link's two TUN devices, then the
//! addresses, routes and routing rules that steer traffic onto them, then MPTCP's endpoints.
//!
//! A link is a pair of TUN devices of the same name, one in each of the two namespaces it
//! joins (A and B, see [`EmuConfig::ends`](super::EmuConfig::ends)). The kernel in A routes a
//! packet into its device; roam reads it from that device's descriptor, holds it as the link
//! would ([`crate::queue`]), and writes it into B's device, where B's kernel receives it. So
//! the devices carry no addresses of their own beyond the ones given here, and nothing crosses
//! between namespaces except through roam.
//!
//! Addresses and routes are given by running `ip -batch` inside each namespace ([`run_ip`]):
//! one script per host, built by [`address_scripts`] from the address plan in
//! [`super::hosts`]. Building the scripts is pure, so what each host is told can be read (and
//! tested) without a kernel.

use super::config::{io_err, EmuError, Ends};
use super::hosts::{client_addr, own_addr, peer_addr, Namespaces};
use crate::sys;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Stdio;

/// Create each link's TUN device in its A namespace and in its B namespace (named as the
/// link in both), and return the pairs `(A's descriptor, B's descriptor)` in link order.
///
/// Before each device the namespace it goes into gets the settings every experiment relies
/// on ([`tune_namespace`]).
pub(super) fn create_devices(
    ns: &Namespaces,
    names: &[String],
    ends: &[Ends],
) -> Result<Vec<(OwnedFd, OwnedFd)>, EmuError> {
    let mut tuns = Vec::with_capacity(names.len());
    for (n, (a, b)) in names.iter().zip(ends) {
        let a_tun = create_tun_in(ns.of(a), a, n)?;
        let b_tun = create_tun_in(ns.of(b), b, n)?;
        tuns.push((a_tun, b_tun));
    }
    Ok(tuns)
}

/// Create TUN device `name` inside host `host`'s namespace `ns`, tuning the namespace first.
fn create_tun_in(ns: &OwnedFd, host: &str, name: &str) -> Result<OwnedFd, EmuError> {
    sys::in_netns(ns, || {
        tune_namespace();
        sys::create_tun(name).map_err(io_err(format!("creating TUN device {name}")))
    })
    .map_err(io_err(format!("entering host {host}'s namespace")))?
}

/// Settings of the calling thread's namespace: no IPv6 (the emulator routes IPv4 only, and
/// IPv6 router solicitations and duplicate-address probes would be traffic on the links that
/// nobody asked for), and no TCP metrics saved per route (each experiment starts from a clean
/// TCP state, with no ssthresh or RTT cached from the previous connection).
fn tune_namespace() {
    write_sysctl("/proc/sys/net/ipv6/conf/all/disable_ipv6", "1");
    write_sysctl("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1");
    write_sysctl("/proc/sys/net/ipv4/tcp_no_metrics_save", "1");
}

/// Make `cc` the default TCP congestion control of every namespace (the client, the server
/// and `hosts`): an error names the namespace and the kernel's reason (an unknown name).
///
/// A namespace other than the host's may only default to an algorithm the host allows
/// (`net.ipv4.tcp_allowed_congestion_control`, one list for the whole machine; the kernel
/// answers EPERM otherwise), and a host whose own default is BBR allows only BBR and Reno. So
/// `cc` is added to that list first if it is missing: a change to the host that stays after
/// the emulator (it lets unprivileged sockets choose `cc` too), said in the error if refused.
pub(super) fn set_congestion_control(
    ns: &Namespaces,
    hosts: &[String],
    cc: &str,
) -> Result<(), EmuError> {
    const PATH: &str = "/proc/sys/net/ipv4/tcp_congestion_control";
    const ALLOWED: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";
    let allowed = std::fs::read_to_string(ALLOWED).map_err(io_err(format!("reading {ALLOWED}")))?;
    if !allowed.split_whitespace().any(|a| a == cc) {
        let list = format!("{} {cc}", allowed.trim());
        std::fs::write(ALLOWED, &list).map_err(io_err(format!(
            "allowing `{cc}` in the host's {ALLOWED} (namespaces may only default to what the \
             host allows)"
        )))?;
    }
    for host in ["client", "server"]
        .into_iter()
        .chain(hosts.iter().map(String::as_str))
    {
        let what = format!("setting {host}'s tcp_congestion_control to `{cc}`");
        sys::in_netns(ns.of(host), || std::fs::write(PATH, cc))
            .map_err(io_err(what.clone()))?
            .map_err(io_err(what))?;
    }
    Ok(())
}

fn write_sysctl(path: &str, value: &str) {
    // Best effort: a kernel without IPv6 has no such file, and that is fine.
    let _ = std::fs::write(path, value);
}

/// The `ip -batch` script of each host, `client`, `server`, then the named `hosts` in order,
/// for links `names` joining `ends`.
///
/// Every host brings its loopback up and puts its own address there (if it has one). For
/// link `i` (device `n`) joining A to B:
/// - A brings `n` up with [`client_addr`]`(i)`, and routes what a socket bound to that
///   address sends through `n` (routing table `100+i`, chosen by a rule on the source address
///   at preference `1000+i`), so a program picks a link by binding to its address;
/// - if B is the server, A's default route goes over `n` at metric `100+i`, so the first link
///   (in `EmuConfig::links` order) is preferred and the next takes over when it goes;
/// - A routes B's own address over `n` at the same metric (`route append`: several links to
///   one host give several routes, the lowest metric in use), and B routes A's likewise;
/// - B brings `n` up with [`peer_addr`]`(i)`.
pub(super) fn address_scripts(
    hosts: &[String],
    names: &[String],
    ends: &[Ends],
) -> Vec<(String, String)> {
    let own = |h: &str| own_addr(hosts.iter().map(String::as_str), h);
    let mut scripts: Vec<(String, String)> = ["client", "server"]
        .into_iter()
        .chain(hosts.iter().map(|h| h.as_str()))
        .map(|h| {
            let mut sc = String::from("link set lo up\n");
            if let Some(a) = own(h) {
                sc += &format!("addr add {a}/32 dev lo\n");
            }
            (h.to_string(), sc)
        })
        .collect();
    for (i, (n, (a, b))) in names.iter().zip(ends).enumerate() {
        let (c, p) = (client_addr(i), peer_addr(i));
        let (table, pref, metric) = (100 + i, 1000 + i, 100 + i);
        let sa = script_of(&mut scripts, a);
        *sa += &format!(
            "link set dev {n} up\naddr add {c}/24 dev {n}\nroute add default dev {n} table {table}\nrule add from {c} lookup {table} pref {pref}\n"
        );
        if b == "server" {
            *sa += &format!("route add default dev {n} metric {metric}\n");
        }
        if let Some(ob) = own(b) {
            *sa += &format!("route append {ob}/32 dev {n} metric {metric}\n");
        }
        let sb = script_of(&mut scripts, b);
        *sb += &format!("link set dev {n} up\naddr add {p}/24 dev {n}\n");
        if let Some(oa) = own(a) {
            *sb += &format!("route append {oa}/32 dev {n} metric {metric}\n");
        }
    }
    scripts
}

/// Host `h`'s script in `scripts`.
fn script_of<'a>(scripts: &'a mut [(String, String)], h: &str) -> &'a mut String {
    &mut scripts
        .iter_mut()
        .find(|(n, _)| n == h)
        .expect("every host has a script")
        .1
}

/// Give every host its addresses and routes: run its [`address_scripts`] script in its
/// namespace. The devices must exist ([`create_devices`]).
pub(super) fn configure_addresses(
    ns: &Namespaces,
    hosts: &[String],
    names: &[String],
    ends: &[Ends],
) -> Result<(), EmuError> {
    for (h, sc) in address_scripts(hosts, names, ends) {
        run_ip(ns.of(&h), &sc, &format!("host {h}'s namespace"))?;
    }
    Ok(())
}

/// Let MPTCP use every link: the client announces each of its links' addresses as a subflow
/// endpoint (bound to that link's device), and both ends allow up to 8 subflows.
///
/// Links whose A side is not the client (a phone's WAN, say) are not the client's to
/// announce. On a kernel without MPTCP this fails, and the emulator runs on without it: the
/// error comes back for the caller to turn into a warning.
pub(super) fn configure_mptcp(
    ns: &Namespaces,
    names: &[String],
    ends: &[Ends],
) -> Result<(), EmuError> {
    run_ip(
        &ns.client,
        &mptcp_client_script(names, ends),
        "MPTCP endpoints",
    )?;
    run_ip(&ns.server, MPTCP_LIMITS, "MPTCP limits")
}

/// MPTCP's limits, for both ends: 8 subflows, 8 addresses accepted from the peer.
const MPTCP_LIMITS: &str = "mptcp limits set subflows 8 add_addr_accepted 8\n";

/// The client's MPTCP script: [`MPTCP_LIMITS`] and one subflow endpoint per link of its
/// ([`endpoint_add`]).
fn mptcp_client_script(names: &[String], ends: &[Ends]) -> String {
    let mut sc = String::from(MPTCP_LIMITS);
    for (i, (n, (a, _))) in names.iter().zip(ends).enumerate() {
        if a == "client" {
            sc += &endpoint_add(i, n);
        }
    }
    sc
}

/// Link `i`'s (device `n`'s) subflow endpoint, id `i + 1`.
fn endpoint_add(i: usize, n: &str) -> String {
    format!(
        "mptcp endpoint add {} dev {n} id {} subflow\n",
        client_addr(i),
        i + 1
    )
}

/// Play a phone's connection manager for MPTCP: as each client link's carrier goes down, its
/// endpoint is withdrawn (the kernel closes that link's subflows and sends their queued data
/// over the others), and as it comes back the endpoint is added again (the in-kernel path
/// manager then opens a subflow over it on every established connection). Without this a
/// join that failed during an outage is never tried again: the in-kernel path manager marks
/// an endpoint usable again only when it is deleted or flushed (the MPTCP maintainers:
/// "If the corresponding endpoint is removed and re-added, the subflow should be
/// re-created", multipath-tcp/mptcp_net-next#440). mptcpd would do the same only if the
/// address went away with the carrier.
///
/// A thread of its own (`roam-emu mptcp-pm`) takes each `(link, on)` from `events` in order
/// and runs `ip` in the client namespace; it ends once every forwarder has let its sender go.
/// A failed change becomes one of the emulator's warnings.
pub(super) fn follow_carrier_endpoints(
    client: OwnedFd,
    names: Vec<String>,
    client_side: Vec<bool>,
    events: std::sync::mpsc::Receiver<(usize, bool)>,
    warnings: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("roam-emu mptcp-pm".into())
        .spawn(move || {
            for (i, on) in events {
                if !client_side.get(i).copied().unwrap_or(false) {
                    continue;
                }
                let script = if on {
                    endpoint_add(i, &names[i])
                } else {
                    format!("mptcp endpoint delete id {}\n", i + 1)
                };
                if let Err(e) = run_ip(&client, &script, "MPTCP endpoint") {
                    warnings.lock().unwrap().push(format!(
                        "following link {}'s carrier with its MPTCP endpoint: {e}",
                        names[i]
                    ));
                }
            }
        })
}

/// Run `ip -batch -` with `script` inside namespace `ns`; `what` names the namespace in the
/// error. `ip` runs as a child process that enters `ns` between fork and exec, so this
/// process's own threads stay where they are.
fn run_ip(ns: &OwnedFd, script: &str, what: &str) -> Result<(), EmuError> {
    let raw = ns.as_raw_fd();
    let mut cmd = std::process::Command::new("ip");
    cmd.args(["-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: the closure only calls setns, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || sys::enter_netns(raw));
    }
    let mut child = cmd.spawn().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            EmuError::Privilege(
                "roam emu needs the `ip` command (Debian package iproute2: apt-get install iproute2)"
                    .into(),
            )
        } else {
            EmuError::Io {
                what: "running ip".into(),
                source: e,
            }
        }
    })?;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .map_err(io_err("writing to ip"))?;
    let out = child.wait_with_output().map_err(io_err("waiting for ip"))?;
    if !out.status.success() {
        return Err(EmuError::Config(format!(
            "configuring {what} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn ends(v: &[(&str, &str)]) -> Vec<Ends> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn two_links_to_the_server_prefer_the_first_and_route_by_source() {
        let scripts = address_scripts(
            &[],
            &strings(&["wifi", "lte"]),
            &ends(&[("client", "server"), ("client", "server")]),
        );
        assert_eq!(
            scripts,
            [
                (
                    "client".to_string(),
                    "link set lo up\n\
                     link set dev wifi up\naddr add 10.77.1.2/24 dev wifi\n\
                     route add default dev wifi table 100\n\
                     rule add from 10.77.1.2 lookup 100 pref 1000\n\
                     route add default dev wifi metric 100\n\
                     route append 10.77.0.1/32 dev wifi metric 100\n\
                     link set dev lte up\naddr add 10.77.2.2/24 dev lte\n\
                     route add default dev lte table 101\n\
                     rule add from 10.77.2.2 lookup 101 pref 1001\n\
                     route add default dev lte metric 101\n\
                     route append 10.77.0.1/32 dev lte metric 101\n"
                        .to_string()
                ),
                (
                    "server".to_string(),
                    "link set lo up\naddr add 10.77.0.1/32 dev lo\n\
                     link set dev wifi up\naddr add 10.77.1.1/24 dev wifi\n\
                     link set dev lte up\naddr add 10.77.2.1/24 dev lte\n"
                        .to_string()
                ),
            ]
        );
        assert_eq!(
            mptcp_client_script(
                &strings(&["wifi", "lte"]),
                &ends(&[("client", "server"); 2])
            ),
            "mptcp limits set subflows 8 add_addr_accepted 8\n\
             mptcp endpoint add 10.77.1.2 dev wifi id 1 subflow\n\
             mptcp endpoint add 10.77.2.2 dev lte id 2 subflow\n"
        );
    }

    #[test]
    fn a_phone_routes_the_client_and_the_server_over_its_own_links() {
        let names = strings(&["wan", "usb"]);
        let ends = ends(&[("phone", "server"), ("client", "phone")]);
        let scripts = address_scripts(&strings(&["phone"]), &names, &ends);
        let of = |h: &str| scripts.iter().find(|(n, _)| n == h).unwrap().1.clone();
        // The client reaches the phone's own address over USB, but has no default route:
        // USB does not lead to the server.
        assert!(of("client").contains("route append 10.78.1.1/32 dev usb metric 101\n"));
        assert!(!of("client").contains("route add default dev usb metric"));
        // The phone's default route is its WAN; the server routes the phone back over it.
        assert!(of("phone").starts_with("link set lo up\naddr add 10.78.1.1/32 dev lo\n"));
        assert!(of("phone").contains("route add default dev wan metric 100\n"));
        assert!(of("phone").contains("link set dev usb up\naddr add 10.77.2.1/24 dev usb\n"));
        assert!(of("server").contains("route append 10.78.1.1/32 dev wan metric 100\n"));
        // Only the client's own links become its MPTCP endpoints.
        assert_eq!(
            mptcp_client_script(&names, &ends),
            "mptcp limits set subflows 8 add_addr_accepted 8\n\
             mptcp endpoint add 10.77.2.2 dev usb id 2 subflow\n"
        );
    }
}
