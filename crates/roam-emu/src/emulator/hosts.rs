//! The hosts: one network namespace each, and the address plan that numbers them and their
//! links.
//!
//! Every host (`client`, `server`, and each of [`EmuConfig::hosts`](super::EmuConfig::hosts))
//! is an anonymous network namespace held open by a descriptor ([`crate::sys::new_netns`]): it
//! lives exactly as long as the [`Namespaces`] (and any process still inside it), so a crashed
//! run leaves no named namespace behind.
//!
//! The address plan is fixed by position, so that a program inside can be told its addresses
//! in advance (`ROAM_LINK_<NAME>_ADDR`, see [`Emulator::env`](super::Emulator::env)):
//!
//! | what | address |
//! |---|---|
//! | link `i` (from 0), A side | `10.77.(i+1).2/24` ([`client_addr`]) |
//! | link `i`, B side | `10.77.(i+1).1/24` ([`peer_addr`]) |
//! | the server's own address | `10.77.0.1/32` on loopback ([`SERVER_ADDR`]) |
//! | named host `k` (from 0) | `10.78.(k+1).1/32` on loopback ([`host_addr`]) |
//!
//! A host's own address is reachable over every link that joins it, whichever that is; the
//! client has none, since it only ever opens connections.

use super::config::{io_err, EmuError};
use crate::sys;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::thread::JoinHandle;

/// The server's address, reachable over every link.
pub const SERVER_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);

/// The own address of the `k`-th named host (from 0).
pub(super) fn host_addr(k: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 78, k as u8 + 1, 1)
}

/// The address of link `i`'s A side (the client's, by default).
pub(super) fn client_addr(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 77, i as u8 + 1, 2)
}

/// The address of link `i`'s B side (the server's, by default).
pub(super) fn peer_addr(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 77, i as u8 + 1, 1)
}

/// Host `h`'s own address, given the named hosts' names in order: [`SERVER_ADDR`] for
/// `server`, [`host_addr`] for a named host, `None` for the client (or an unknown name).
pub(super) fn own_addr<'a>(hosts: impl IntoIterator<Item = &'a str>, h: &str) -> Option<Ipv4Addr> {
    match h {
        "client" => None,
        "server" => Some(SERVER_ADDR),
        _ => hosts.into_iter().position(|n| n == h).map(host_addr),
    }
}

/// Every host's network namespace.
pub(super) struct Namespaces {
    pub(super) client: OwnedFd,
    pub(super) server: OwnedFd,
    /// The named hosts' namespaces, in `EmuConfig::hosts` order.
    pub(super) hosts: Vec<(String, OwnedFd)>,
}

impl Namespaces {
    /// Create a fresh namespace for the client, the server and each of `hosts`, in that
    /// order. Each starts empty: only a loopback device, down.
    pub(super) fn create(hosts: &[String]) -> Result<Namespaces, EmuError> {
        let client = sys::new_netns().map_err(io_err("creating the client namespace"))?;
        let server = sys::new_netns().map_err(io_err("creating the server namespace"))?;
        let mut named = Vec::with_capacity(hosts.len());
        for h in hosts {
            let ns = sys::new_netns().map_err(io_err(format!("creating host {h}'s namespace")))?;
            named.push((h.clone(), ns));
        }
        Ok(Namespaces {
            client,
            server,
            hosts: named,
        })
    }

    /// Host `name`'s namespace (`client`, `server` or a named host).
    pub(super) fn get(&self, name: &str) -> Option<&OwnedFd> {
        match name {
            "client" => Some(&self.client),
            "server" => Some(&self.server),
            _ => self.hosts.iter().find(|(n, _)| n == name).map(|(_, ns)| ns),
        }
    }

    /// Host `name`'s namespace, for a name [`validate`](super::config::validate) has checked.
    pub(super) fn of(&self, name: &str) -> &OwnedFd {
        self.get(name).expect("host names are validated")
    }

    /// Host `name`'s own address ([`own_addr`]).
    pub(super) fn own_addr(&self, name: &str) -> Option<Ipv4Addr> {
        own_addr(self.hosts.iter().map(|(n, _)| n.as_str()), name)
    }

    /// Every namespace: the client's, the server's, the named hosts'.
    pub(super) fn all(&self) -> Vec<&OwnedFd> {
        let mut v = vec![&self.client, &self.server];
        v.extend(self.hosts.iter().map(|(_, ns)| ns));
        v
    }
}

/// Run `f` on a new thread that first enters namespace `ns`: the thread's sockets, and the
/// `/proc/sys/net` it reads, are that host's.
pub(super) fn spawn_in<R: Send + 'static>(
    ns: &OwnedFd,
    f: impl FnOnce() -> R + Send + 'static,
) -> JoinHandle<std::io::Result<R>> {
    let ns = ns.try_clone();
    std::thread::spawn(move || {
        let ns = ns?;
        sys::enter_netns(ns.as_raw_fd())?;
        Ok(f())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_address_plan_numbers_links_from_one_and_hosts_apart() {
        assert_eq!(client_addr(0), Ipv4Addr::new(10, 77, 1, 2));
        assert_eq!(peer_addr(0), Ipv4Addr::new(10, 77, 1, 1));
        assert_eq!(client_addr(199), Ipv4Addr::new(10, 77, 200, 2));
        let hosts = ["phone", "tablet"];
        assert_eq!(own_addr(hosts, "client"), None);
        assert_eq!(own_addr(hosts, "server"), Some(SERVER_ADDR));
        assert_eq!(own_addr(hosts, "tablet"), Some(Ipv4Addr::new(10, 78, 2, 1)));
        assert_eq!(own_addr(hosts, "laptop"), None);
    }
}
