//! The device's side ([`Proxy`]): programs' TCP connections in, one multi-socket to the relay
//! out per connection: the default relay, or the relay of the network roam-net would use now
//! ([`ProxyConfig::per_network`], [`super::per_network`]).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::auth::{self, hex, proof_matches, unhex, Key};
use super::carry::{pump, recv_line, Codec, Deadlined, PerSource, Plain, Slots};
use super::compress::{Dictionaries, ProxyZstd};
use super::dedup::ProxyEnd;
use super::features::Features;
use super::per_network::{self, NetworkRelay, NetworksNow};
use super::socks5::{self, code};
use super::{
    transparent, Error, Event, LabelRules, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_PER_SOURCE,
    HANDSHAKE_TIMEOUT, IDLE_TIMEOUT, MAX_REQUEST, REQUEST_TIMEOUT, STOP_POLL,
};
use crate::proto::Label;
use crate::runtime::blocking::MultiSocket;
use crate::runtime::Options;

/// How the proxy learns where a program's connection was going.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Intercept {
    /// The program asks, as a SOCKS5 client (`curl --socks5`, a browser's proxy setting).
    #[default]
    Socks5,
    /// The firewall redirected the program's connection to the proxy; the kernel kept its
    /// original destination (`SO_ORIGINAL_DST`). Any program, no settings.
    Transparent,
}

/// What a [`Proxy`] does.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// Where programs connect (or where the firewall redirects them).
    pub listen: SocketAddr,
    /// The [`Relay`](super::Relay) at the server side (the default one, when `per_network`
    /// names others).
    pub relay: SocketAddr,
    /// The relay's key, proved to it for every connection (and required of its answer).
    /// `None` only for a relay that serves anyone (`insecure_no_auth`).
    pub key: Option<Key>,
    /// Relays of some networks (the thesis's multi-homed phone: WiFi and cellular through
    /// different upstream nodes): each new connection goes to the relay of the network
    /// roam-net would use now, a network that is not cellular whenever one is up, else a
    /// cellular one; to `relay` when none serves it. Open connections stay with their relay,
    /// carried over whichever networks remain ([`super::per_network`]). Empty by default.
    pub per_network: Vec<NetworkRelay>,
    /// Which local networks are up when a relay is picked by `per_network` (`None`: the
    /// multi-sockets' networks, [`Options::networks`]: an explicit list, or the interfaces
    /// with a carrier).
    pub networks_now: Option<NetworksNow>,
    /// How destinations are learnt.
    pub intercept: Intercept,
    /// The label of each connection, by destination port.
    pub rules: LabelRules,
    /// Most connections carried at once; further ones are closed at once.
    pub max_connections: usize,
    /// Most connections carried at once from one source address (an IPv6 /64); further ones
    /// from it are closed at once ([`DEFAULT_MAX_PER_SOURCE`]).
    pub max_per_source: usize,
    /// How long a program may take for its whole SOCKS5 negotiation ([`HANDSHAKE_TIMEOUT`]).
    pub handshake_timeout: Duration,
    /// From the multi-socket to the relay being open to the relay's answer
    /// ([`REQUEST_TIMEOUT`]).
    pub request_timeout: Duration,
    /// A carried connection with no byte moving either way for this long is closed
    /// ([`IDLE_TIMEOUT`]).
    pub idle_timeout: Duration,
    /// The multi-sockets' options (networks, TLS, timeouts). Their path memory
    /// ([`Options::paths`]) is shared by all of them: the proxy gives them a new one unless one
    /// is given, so a carried connection does not probe what the one before it measured.
    pub options: Options,
    /// Asymmetric caching's destination (the phone's cache), shared by every connection;
    /// asked of the relay for every destination port not in `no_dedup_ports` (`None`: off).
    pub dedup: Option<Arc<std::sync::Mutex<roam_dedup::Destination>>>,
    /// Destination ports carried plain even with `dedup`.
    pub no_dedup_ports: Vec<u16>,
    /// Compression of the downstream asked of the relay ([`super::compress`]).
    pub compress: Compression,
}

/// Compression a proxy asks of its relay for every connection.
#[derive(Clone, Debug, Default)]
pub enum Compression {
    /// None.
    #[default]
    Off,
    /// Per-connection zstd (`zstd`).
    Zstd,
    /// zstd with the previous response to the same request as a dictionary (`zstd-dict`),
    /// the proxy's dictionaries shared by every connection.
    ZstdDict(Arc<std::sync::Mutex<Dictionaries>>),
}

impl ProxyConfig {
    /// A SOCKS5 proxy on `listen` to the relay at `relay` proving `key` (`None`: to a relay
    /// without one), every connection foreground-small, default limits and multi-socket
    /// options.
    pub fn new(listen: SocketAddr, relay: SocketAddr, key: Option<Key>) -> ProxyConfig {
        ProxyConfig {
            listen,
            relay,
            key,
            per_network: Vec::new(),
            networks_now: None,
            intercept: Intercept::Socks5,
            rules: LabelRules::default(),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_per_source: DEFAULT_MAX_PER_SOURCE,
            handshake_timeout: HANDSHAKE_TIMEOUT,
            request_timeout: REQUEST_TIMEOUT,
            idle_timeout: IDLE_TIMEOUT,
            options: Options::default(),
            dedup: None,
            no_dedup_ports: Vec::new(),
            compress: Compression::Off,
        }
    }
}

/// The device's side: accepts programs' TCP connections and carries each over a multi-socket
/// of its own to the relay, labelled by its destination port.
pub struct Proxy {
    listener: TcpListener,
    config: Arc<ProxyConfig>,
}

impl Proxy {
    /// Listen as `config` says (nothing is carried until [`Proxy::run`]).
    pub fn bind(mut config: ProxyConfig) -> Result<Proxy, Error> {
        config.options.paths.get_or_insert_with(Default::default);
        let listener = TcpListener::bind(config.listen).map_err(|cause| Error::Listen {
            addr: config.listen,
            cause,
        })?;
        Ok(Proxy {
            listener,
            config: Arc::new(config),
        })
    }

    /// The address actually bound (port 0 asks for any).
    pub fn local_addr(&self) -> Result<SocketAddr, Error> {
        Ok(self.listener.local_addr()?)
    }

    /// What it was configured with.
    pub fn config(&self) -> &ProxyConfig {
        &self.config
    }

    /// Where a connection opened now goes: the relay of the network roam-net would use now
    /// ([`ProxyConfig::per_network`]), else the default one; its address, key and
    /// multi-socket options.
    pub fn upstream_now(&self) -> (SocketAddr, Option<&Key>, Options) {
        let c = &*self.config;
        let chosen = if c.per_network.is_empty() {
            None
        } else {
            let up = per_network::networks_now(c.networks_now.as_ref(), &c.options);
            per_network::choose(&c.per_network, &up)
        };
        let mut options = c.options.clone();
        match chosen {
            Some(r) => {
                if let Some(tls) = &r.tls {
                    options.tls = Some(tls.clone());
                }
                (r.relay, r.key.as_ref(), options)
            }
            None => (c.relay, c.key.as_ref(), options),
        }
    }

    /// Carry connections, each on a thread of its own, for as long as the listener lasts (in
    /// practice until the process ends). What happens to single connections (refused, failed)
    /// goes to `report`; the proxy goes on.
    pub fn run(self, report: impl Fn(Event) + Send + Sync + 'static) -> Result<(), Error> {
        self.run_until(&AtomicBool::new(false), report)
    }

    /// [`Proxy::run`] until `stop` is set (looked at every [`STOP_POLL`]); connections under
    /// way go on to their end.
    pub fn run_until(
        self,
        stop: &AtomicBool,
        report: impl Fn(Event) + Send + Sync + 'static,
    ) -> Result<(), Error> {
        let report = Arc::new(report);
        let slots = Slots::new(self.config.max_connections);
        let sources = PerSource::new(self.config.max_per_source);
        let this = Arc::new(self);
        loop {
            if stop.load(Ordering::SeqCst) {
                return Ok(());
            }
            if !readable(&this.listener, STOP_POLL) {
                continue;
            }
            let Ok((c, from)) = this.listener.accept() else {
                continue;
            };
            let Some(source) = sources.take(from.ip()) else {
                report(Event::RefusedSource {
                    from,
                    max: sources.max(),
                });
                continue;
            };
            let Some(slot) = slots.take() else {
                report(Event::Refused {
                    from: Some(from),
                    max: slots.max(),
                });
                continue;
            };
            let (this, report) = (this.clone(), report.clone());
            std::thread::spawn(move || {
                if let Err(error) = this.carry(c) {
                    report(Event::Failed {
                        from: Some(from),
                        error,
                    });
                }
                drop((slot, source));
            });
        }
    }

    /// Carry one program's connection on the calling thread, until both sides have closed:
    /// learn its destination (SOCKS5 within the handshake timeout), ask the relay for it
    /// (proving the key), copy bytes both ways.
    pub fn carry(&self, mut client: TcpStream) -> Result<(), Error> {
        let c = &*self.config;
        let socks = c.intercept == Intercept::Socks5;
        let (host, port) = if socks {
            let mut d = Deadlined {
                stream: &client,
                deadline: Instant::now() + c.handshake_timeout,
            };
            socks5::accept(&mut d).map_err(|e| match e {
                Error::Io(io) if io.kind() == std::io::ErrorKind::TimedOut => Error::Timeout {
                    what: "the SOCKS5 negotiation",
                    after: c.handshake_timeout,
                },
                e => e,
            })?
        } else {
            transparent::original_destination(&client)?
        };
        client.set_read_timeout(None)?;
        client.set_write_timeout(Some(c.request_timeout))?;
        let label = c.rules.label(port);
        let answer = |client: &mut TcpStream, code| {
            if socks {
                socks5::reply(client, code)?;
            }
            Ok::<(), Error>(())
        };
        // A name with white space or control characters would not be one word of the request.
        if host.is_empty() || host.chars().any(|ch| ch.is_whitespace() || ch.is_control()) {
            answer(&mut client, code::GENERAL_FAILURE)?;
            return Err(Error::BadDestination { host });
        }
        let (relay, key, options) = self.upstream_now();
        let ms = match MultiSocket::connect(relay, options) {
            Ok(ms) => ms,
            Err(cause) => {
                answer(&mut client, code::GENERAL_FAILURE)?;
                return Err(Error::ConnectRelay { relay, cause });
            }
        };
        let target = format!("{host}:{port}");
        let dst = c
            .dedup
            .as_ref()
            .filter(|_| !c.no_dedup_ports.contains(&port));
        let asked = Features {
            dedup: dst.is_some(),
            zstd: matches!(c.compress, Compression::Zstd),
            zstd_dict: matches!(c.compress, Compression::ZstdDict(_)),
        };
        let accepted = match self.ask(&ms, (relay, key), &target, label, asked) {
            Ok(a) => a,
            Err(e) => {
                ms.abort("no answer");
                let refused = matches!(e, Error::RelayRefused { .. });
                answer(
                    &mut client,
                    if refused {
                        code::CONNECTION_REFUSED
                    } else {
                        code::GENERAL_FAILURE
                    },
                )?;
                return Err(e);
            }
        };
        answer(&mut client, code::SUCCEEDED)?;
        let codec: Arc<dyn Codec> = match (dst, accepted.dedup) {
            (Some(d), true) => Arc::new(ProxyEnd::new(d.clone(), source_id(relay)).with_links(&ms)),
            _ => Arc::new(Plain),
        };
        let codec: Arc<dyn Codec> = match &c.compress {
            Compression::ZstdDict(dicts) if accepted.zstd_dict => {
                Arc::new(ProxyZstd::new(codec, Some(dicts.clone()), &target))
            }
            Compression::Zstd if accepted.zstd => Arc::new(ProxyZstd::new(codec, None, &target)),
            _ => codec,
        };
        pump(ms, client, label, c.idle_timeout, codec)
    }

    /// The relay exchange on `ms` with `relay` and its key, within the request timeout: its
    /// challenge, our request for `target` with its proof, its answer (with its proof, when we
    /// have a key).
    fn ask(
        &self,
        ms: &MultiSocket,
        (relay, key): (SocketAddr, Option<&Key>),
        target: &str,
        label: Label,
        asked: Features,
    ) -> Result<Features, Error> {
        let c = &*self.config;
        let after = c.request_timeout;
        let deadline = Instant::now() + after;
        let line = recv_line(ms, MAX_REQUEST, deadline, "the relay's challenge", after)?;
        let challenge = line
            .strip_prefix("roam-relay 2 challenge ")
            .and_then(unhex)
            .ok_or_else(|| Error::NoChallenge {
                relay,
                line: line.clone(),
            })?;
        let nonce = auth::random();
        let word = asked.label_word(&label.to_string());
        let proof = key.map_or("-".to_string(), |k| {
            hex(&k.request_proof(&challenge, &nonce, target, &word))
        });
        ms.send(
            Label::ForegroundSmall,
            format!("roam-relay 2 {target} {word} {} {proof}", hex(&nonce)).into_bytes(),
            None,
        )?;
        let full = recv_line(ms, MAX_REQUEST, deadline, "the relay's answer", after)?;
        // `ok [PROOF] FEATURE...`: the relay accepted those, and its proof covers
        // `TARGET FEATURE...`.
        let mut words: Vec<&str> = full.split(' ').collect();
        let named = words
            .len()
            .saturating_sub(if key.is_some() { 2 } else { 1 });
        let accepted = Features::parse(words[words.len() - named..].iter().copied());
        if named > 0 && (accepted.words().len() != named || !accepted.within(asked)) {
            return Err(Error::RelayRefused {
                target: target.into(),
                answer: full,
            });
        }
        words.truncate(words.len() - named);
        let answer = words.join(" ");
        let proved_target = accepted.proved(target);
        let proved = match (answer.split_once(' '), key) {
            (_, None) if answer == "ok" => true,
            (Some(("ok", p)), Some(k)) => {
                proof_matches(p, &k.answer_proof(&challenge, &nonce, &proved_target))
            }
            (_, Some(_)) if answer == "ok" => false,
            _ => {
                return Err(Error::RelayRefused {
                    target: target.into(),
                    answer: full,
                })
            }
        };
        if !proved {
            return Err(Error::RelayUnauthenticated { relay });
        }
        Ok(accepted)
    }
}

/// The phone's name for the source behind `relay` (what one relay's source has seen says
/// nothing of another's).
fn source_id(relay: SocketAddr) -> roam_dedup::destination::SourceId {
    roam_dedup::Name::of(relay.to_string().as_bytes()).0 as u32
}

/// Whether `listener` has a connection to accept within `wait` (poll(2); an interrupted or
/// failed poll counts as none, and the caller looks again).
fn readable(listener: &TcpListener, wait: Duration) -> bool {
    let mut fd = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, for the duration of the call.
    let n = unsafe { libc::poll(&mut fd, 1, wait.as_millis() as libc::c_int) };
    n > 0 && fd.revents & libc::POLLIN != 0
}
