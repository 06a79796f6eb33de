//! The running emulator: two network namespaces joined by one TUN pair per link, and a user-space
//! forwarder per link and direction that applies the link's [`LinkQueue`](crate::queue::LinkQueue).
//!
//! ```text
//!   client namespace                 roam (this process)                server namespace
//!   app --> dev `wifi` (TUN) --fd--> [up queue: loss, queue, capacity, delay] --fd--> dev `wifi`
//!       <--                  <------ [down queue]                       <------       (TUN) <-- server
//! ```
//!
//! Addressing (link i counts from 1): the client's address on link i is `10.77.i.2/24`, the
//! server side of the link `10.77.i.1/24`, and the server answers on `10.77.0.1` (its loopback).
//!
//! **More hosts** ([`EmuConfig::hosts`], [`EmuConfig::ends`]): besides the client and the
//! server, named hosts (a phone, a second client) each get a namespace and an address of their
//! own on loopback, `10.78.k.1` for the k-th ([`Emulator::host_addr`]); a link may join any two
//! hosts (`client`, `server` or a named one; by default the client and the server). On a link
//! between A and B, A takes `10.77.i.2` and B `10.77.i.1`, and each routes the other's own
//! address over it (the first such link by metric); A's default route goes over its links to
//! the server only, so a client with a USB link to the phone still reaches the server over
//! its WAN. Policy routing by source address works on every A side as on the client.
//! The client's default route uses the first link; policy routing (`from 10.77.i.2 lookup
//! 100+i`) sends a socket bound to a link's address through that link, and SO_BINDTODEVICE on the
//! device name works as well. Every link's address is also an MPTCP subflow endpoint, so an
//! MPTCP socket uses all links.
//!
//! [`Emulator::start`] builds this in steps, one module each:
//!
//! 1. check the configuration before touching the kernel (`config`);
//! 2. create a namespace per host (`hosts`, which also holds the address plan);
//! 3. create each link's two TUN devices, then give every host its addresses, routes and MPTCP
//!    endpoints (`netconf`);
//! 4. start the clock and, per link and direction, a forwarding thread with its queue and logs
//!    (`links`);
//! 5. start what changes links while they run: scripted events and the control socket
//!    (`dispatch`).
//!
//! [`Emulator::shutdown`] stops the threads and writes `summary.json` (`summary`).

mod config;
mod dispatch;
mod hosts;
mod links;
mod netconf;
mod summary;

pub use self::config::{EmuConfig, EmuError};
pub use self::hosts::SERVER_ADDR;
pub use self::links::LinkHandle;
pub use crate::forward::{DirCounters, LATE, LOG_HEADER};

use self::config::io_err;
use self::dispatch::Dispatcher;
use self::hosts::{host_addr, spawn_in, Namespaces};
use crate::control::Command;
use crate::spec::env_name;
use crate::sys::{self, EventFd};
use roam_core::Clock;
use std::net::Ipv4Addr;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// A running emulator. Dropping it stops the forwarders and removes its namespaces.
pub struct Emulator {
    clock: Clock,
    ns: Namespaces,
    links: Vec<LinkHandle>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    wakes: Vec<Arc<EventFd>>,
    dispatcher: Dispatcher,
    log_dir: Option<PathBuf>,
    control_socket: Option<PathBuf>,
    stopped: bool,
    warnings: Arc<Mutex<Vec<String>>>,
}

impl Emulator {
    /// Create the namespaces, devices and forwarders, and start the clock.
    ///
    /// The steps run in the order the module documentation lists; the emulator's time zero
    /// is taken once the network is configured, just before the first forwarder starts, so
    /// that setting up (which takes a while with many links) is not counted as time the
    /// links ran. A kernel without MPTCP is not an error: the emulator runs without it and
    /// says so in [`Emulator::warnings`].
    pub fn start(cfg: EmuConfig) -> Result<Emulator, EmuError> {
        let ends = config::validate(&cfg)?;
        sys::check_privileges().map_err(EmuError::Privilege)?;
        let ns = Namespaces::create(&cfg.hosts)?;
        let names: Vec<String> = cfg.links.iter().map(|l| l.name.clone()).collect();
        let tuns = netconf::create_devices(&ns, &names, &ends)?;
        netconf::configure_addresses(&ns, &cfg.hosts, &names, &ends)?;
        if let Some(cc) = &cfg.congestion_control {
            netconf::set_congestion_control(&ns, &cfg.hosts, cc)?;
        }
        let mut warnings = Vec::new();
        let mptcp = match netconf::configure_mptcp(&ns, &names, &ends) {
            Ok(()) => true,
            Err(e) => {
                warnings.push(format!("MPTCP is not available here ({e})"));
                false
            }
        };
        // A client link whose carrier follows its outages also withdraws and re-adds its MPTCP
        // endpoint, as a phone's connection manager does (`netconf::follow_carrier_endpoints`).
        let client_side: Vec<bool> = ends.iter().map(|(a, _)| a == "client").collect();
        let follows = mptcp
            && cfg
                .links
                .iter()
                .zip(&client_side)
                .any(|(l, &c)| c && l.carrier_after.is_some());
        let (carrier_events, carrier_rx) = if follows {
            let (tx, rx) = std::sync::mpsc::channel();
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };

        let clock = Clock::start();
        let started_unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let stop = Arc::new(AtomicBool::new(false));
        links::create_output_dirs(&cfg)?;
        let shared = links::Shared {
            clock,
            started_unix,
            stop: &stop,
            cfg: &cfg,
            carrier_events,
        };
        let (links, forwarders) = links::start_links(&shared, tuns)?;
        // The forwarders hold the only senders now: the endpoint manager ends after them.
        drop(shared);

        let dispatcher = Dispatcher::new(clock, forwarders.mailboxes);
        let warnings = Arc::new(Mutex::new(warnings));
        let mut threads = forwarders.threads;
        if let Some(rx) = carrier_rx {
            let client = ns
                .client
                .try_clone()
                .map_err(io_err("sharing the client namespace"))?;
            threads.push(
                netconf::follow_carrier_endpoints(
                    client,
                    names.clone(),
                    client_side,
                    rx,
                    warnings.clone(),
                )
                .map_err(io_err("starting the MPTCP endpoint manager"))?,
            );
        }
        threads.extend(dispatch::start_events(
            &cfg.events,
            &dispatcher,
            &stop,
            &warnings,
        ));
        threads.extend(dispatch::start_control(
            cfg.control_socket.as_deref(),
            &dispatcher,
            &stop,
        )?);
        Ok(Emulator {
            clock,
            ns,
            links,
            stop,
            threads,
            wakes: forwarders.wakes,
            dispatcher,
            log_dir: cfg.log_dir.clone(),
            control_socket: cfg.control_socket.clone(),
            stopped: false,
            warnings,
        })
    }

    /// The emulator's clock; time zero is when it started forwarding.
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// The links.
    pub fn links(&self) -> &[LinkHandle] {
        &self.links
    }

    /// A link by name.
    pub fn link(&self, name: &str) -> Option<&LinkHandle> {
        self.links.iter().find(|l| l.name == name)
    }

    /// The client namespace.
    pub fn client_ns(&self) -> &OwnedFd {
        &self.ns.client
    }

    /// The server namespace.
    pub fn server_ns(&self) -> &OwnedFd {
        &self.ns.server
    }

    /// Every namespace: the client's, the server's, the named hosts'.
    pub fn namespaces(&self) -> Vec<&OwnedFd> {
        self.ns.all()
    }

    /// Host `name`'s namespace (`client`, `server` or one of [`EmuConfig::hosts`]).
    pub fn host_ns(&self, name: &str) -> Option<&OwnedFd> {
        self.ns.get(name)
    }

    /// Host `name`'s own address, reachable over every link that joins it to another host
    /// (the server's is [`SERVER_ADDR`]; the client has none).
    pub fn host_addr(&self, name: &str) -> Option<Ipv4Addr> {
        self.ns.own_addr(name)
    }

    /// Run `f` on a new thread inside host `name`'s namespace (`None`: no such host).
    pub fn spawn_in_host<R: Send + 'static>(
        &self,
        name: &str,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> Option<JoinHandle<std::io::Result<R>>> {
        self.host_ns(name).map(|ns| spawn_in(ns, f))
    }

    /// Warnings gathered so far (e.g. MPTCP unavailable, an event for an unknown link).
    pub fn warnings(&self) -> Vec<String> {
        self.warnings.lock().unwrap().clone()
    }

    /// Apply a command now.
    pub fn command(&self, c: &Command) -> Result<(), String> {
        self.dispatcher.send(c)
    }

    /// Environment for commands run in the client (`server == false`) or server namespace.
    pub fn env(&self, server: bool) -> Vec<(String, String)> {
        let mut v = vec![
            ("ROAM_SERVER_ADDR".to_string(), SERVER_ADDR.to_string()),
            (
                "ROAM_LINKS".to_string(),
                self.links
                    .iter()
                    .map(|l| l.name.clone())
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            (
                "ROAM_NAMESPACE".to_string(),
                if server { "server" } else { "client" }.to_string(),
            ),
        ];
        for l in &self.links {
            let n = env_name(&l.name);
            v.push((format!("ROAM_LINK_{n}_ADDR"), l.client_addr.to_string()));
            v.push((format!("ROAM_LINK_{n}_PEER"), l.peer_addr.to_string()));
            v.push((format!("ROAM_LINK_{n}_DEV"), l.name.clone()));
        }
        for (k, (h, _)) in self.ns.hosts.iter().enumerate() {
            v.push((
                format!("ROAM_HOST_{}_ADDR", env_name(h)),
                host_addr(k).to_string(),
            ));
        }
        if let Some(p) = &self.control_socket {
            v.push(("ROAM_EMU_CONTROL".into(), p.display().to_string()));
        }
        v
    }

    /// Run `f` on a new thread inside the client namespace.
    pub fn spawn_in_client<R: Send + 'static>(
        &self,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> JoinHandle<std::io::Result<R>> {
        spawn_in(&self.ns.client, f)
    }

    /// Run `f` on a new thread inside the server namespace.
    pub fn spawn_in_server<R: Send + 'static>(
        &self,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> JoinHandle<std::io::Result<R>> {
        spawn_in(&self.ns.server, f)
    }

    /// Stop forwarding, flush logs and write `summary.json`. Idempotent.
    ///
    /// Every thread is told through the stop flag and woken through its eventfd (a forwarder
    /// may be asleep until its next packet is due), then joined; each forwarder flushes its
    /// last log rows as it ends, so the counters read for the summary are final.
    pub fn shutdown(&mut self) -> Result<(), EmuError> {
        if self.stopped {
            return Ok(());
        }
        self.stopped = true;
        self.stop.store(true, Ordering::SeqCst);
        for w in &self.wakes {
            w.notify();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        if let Some(p) = &self.control_socket {
            let _ = std::fs::remove_file(p);
        }
        if let Some(d) = &self.log_dir {
            summary::write_summary(d, self.clock, &self.links, &self.ns.client)?;
        }
        Ok(())
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}
