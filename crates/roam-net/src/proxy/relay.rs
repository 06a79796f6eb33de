//! The server's side ([`Relay`]): proxies' multi-sockets in, a TCP connection to the target
//! each asks for out, where the allow list permits, for proxies that prove the key.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::auth::{self, hex, proof_matches, unhex, Key};
use super::carry::{pump, recv_line, Codec, Plain, Slots};
use super::compress::{Dictionaries, RelayZstd};
use super::dedup::RelayEnd;
use super::features::Features;
use super::target;
use super::{
    Allow, Error, Event, DEFAULT_MAX_CONNECTIONS, IDLE_TIMEOUT, MAX_REQUEST, REQUEST_TIMEOUT,
    STOP_POLL,
};
use crate::proto::Label;
use crate::runtime::blocking::{Listener, MultiSocket};
use crate::runtime::Options;

/// What a [`Relay`] does.
#[derive(Debug, Clone)]
pub struct RelayConfig {
    /// Where proxies' multi-sockets arrive.
    pub listen: SocketAddr,
    /// Where the relay may connect; a target no entry permits is refused. Empty: nowhere.
    pub allow: Vec<Allow>,
    /// The key proxies must prove before anything is done for them. `None` only with
    /// `insecure_no_auth`.
    pub key: Option<Key>,
    /// Serve whoever reaches `listen` when there is no key (otherwise [`Relay::bind`] refuses:
    /// [`Error::NoKey`]).
    pub insecure_no_auth: bool,
    /// Most connections relayed at once; further multi-sockets are aborted at once.
    pub max_connections: usize,
    /// From a multi-socket's arrival to the relay's answer: the challenge, the whole request,
    /// resolving and connecting to the target ([`REQUEST_TIMEOUT`]).
    pub request_timeout: Duration,
    /// A relayed connection with no byte moving either way for this long is closed
    /// ([`IDLE_TIMEOUT`]).
    pub idle_timeout: Duration,
    /// The multi-sockets' options (TLS, limits, timeouts). Their path memory
    /// ([`Options::paths`]) is shared by all of them, a new one unless one is given.
    pub options: Options,
    /// Asymmetric caching's source, shared by every connection, for proxies that ask for it
    /// (`None`: carried plain).
    pub dedup: Option<Arc<Mutex<roam_dedup::Source>>>,
    /// Compress with zstd for proxies that ask (`zstd`, [`super::compress`]).
    pub zstd: bool,
    /// Previous responses kept as zstd dictionaries, for proxies that ask (`zstd-dict`;
    /// `None`: not offered).
    pub dictionaries: Option<Arc<Mutex<Dictionaries>>>,
}

impl RelayConfig {
    /// A relay on `listen` to where `allow` permits, for proxies that prove `key`; default
    /// limits and multi-socket options.
    pub fn new(listen: SocketAddr, allow: Vec<Allow>, key: Key) -> RelayConfig {
        RelayConfig {
            listen,
            allow,
            key: Some(key),
            insecure_no_auth: false,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            request_timeout: REQUEST_TIMEOUT,
            idle_timeout: IDLE_TIMEOUT,
            options: Options::default(),
            dedup: None,
            zstd: true,
            dictionaries: None,
        }
    }
}

/// What each relayed connection needs of the configuration.
struct Shared {
    allow: Vec<Allow>,
    key: Option<Key>,
    request_timeout: Duration,
    idle_timeout: Duration,
    dedup: Option<Arc<Mutex<roam_dedup::Source>>>,
    zstd: bool,
    dictionaries: Option<Arc<Mutex<Dictionaries>>>,
}

impl Shared {
    /// The features this relay offers.
    fn offers(&self) -> Features {
        Features {
            dedup: self.dedup.is_some(),
            zstd: self.zstd,
            zstd_dict: self.dictionaries.is_some(),
        }
    }
}

/// The server's side: accepts proxies' multi-sockets, opens the TCP connection each asks for
/// (where allowed, once the proxy has proved the key) and copies bytes both ways.
pub struct Relay {
    listener: Listener,
    shared: Arc<Shared>,
    max_connections: usize,
}

impl Relay {
    /// Listen as `config` says (nothing is relayed until [`Relay::run`]). Refused without a key
    /// unless `insecure_no_auth` ([`Error::NoKey`]).
    pub fn bind(mut config: RelayConfig) -> Result<Relay, Error> {
        if config.key.is_none() && !config.insecure_no_auth {
            return Err(Error::NoKey);
        }
        config.options.paths.get_or_insert_with(Default::default);
        let listener =
            Listener::bind(config.listen, config.options).map_err(|cause| Error::ListenMulti {
                addr: config.listen,
                cause,
            })?;
        Ok(Relay {
            listener,
            shared: Arc::new(Shared {
                allow: config.allow,
                key: config.key,
                request_timeout: config.request_timeout,
                idle_timeout: config.idle_timeout,
                dedup: config.dedup,
                zstd: config.zstd,
                dictionaries: config.dictionaries,
            }),
            max_connections: config.max_connections,
        })
    }

    /// The address actually bound (port 0 asks for any).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr()
    }

    /// Relay multi-sockets, each on a thread of its own, until accepting fails. What happens
    /// to single connections (refused when full, failed) goes to `report`; the relay goes on.
    pub fn run(self, report: impl Fn(Event) + Send + Sync + 'static) -> Result<(), Error> {
        self.run_until(&AtomicBool::new(false), report)
    }

    /// [`Relay::run`] until `stop` is set (looked at every [`STOP_POLL`]); connections under
    /// way go on to their end.
    pub fn run_until(
        self,
        stop: &AtomicBool,
        report: impl Fn(Event) + Send + Sync + 'static,
    ) -> Result<(), Error> {
        let report = Arc::new(report);
        let slots = Slots::new(self.max_connections);
        loop {
            if stop.load(Ordering::SeqCst) {
                return Ok(());
            }
            let Some(ms) = self.listener.accept_timeout(STOP_POLL)? else {
                continue;
            };
            let Some(slot) = slots.take() else {
                ms.as_async().abort("the relay is full");
                report(Event::Refused {
                    from: None,
                    max: slots.max(),
                });
                continue;
            };
            let (shared, report) = (self.shared.clone(), report.clone());
            std::thread::spawn(move || {
                let events = report.clone();
                let on_dedup = Box::new(move |stats| events(Event::Deduplicated { stats }));
                if let Err(error) = relay_one(ms, &shared, on_dedup) {
                    report(Event::Failed { from: None, error });
                }
                drop(slot);
            });
        }
    }

    /// Relay one multi-socket (accepted elsewhere) on the calling thread: challenge it, read
    /// its request, check its proof, connect where it asks if the allow list permits, answer,
    /// copy bytes both ways until both sides have closed. A refusal is answered `error REASON`
    /// and returned.
    pub fn serve(&self, ms: MultiSocket) -> Result<(), Error> {
        relay_one(ms, &self.shared, Box::new(|_| {}))
    }
}

/// [`Relay::serve`] with the configuration given; `on_dedup` hears what a deduplicated
/// connection's source did when it ends.
fn relay_one(
    ms: MultiSocket,
    shared: &Shared,
    on_dedup: Box<dyn Fn(roam_dedup::source::FlowStats) + Send + Sync>,
) -> Result<(), Error> {
    let after = shared.request_timeout;
    let deadline = Instant::now() + after;
    let refuse = |e: Error| {
        let _ = ms.send(
            Label::ForegroundSmall,
            format!("error {e}").into_bytes(),
            None,
        );
        ms.close(Duration::from_millis(500));
        ms.abort("refused");
        Err(e)
    };
    let challenge = auth::random();
    ms.send(
        Label::ForegroundSmall,
        format!("roam-relay 2 challenge {}", hex(&challenge)).into_bytes(),
        None,
    )?;
    let line = match recv_line(&ms, MAX_REQUEST, deadline, "the relay request", after) {
        Ok(l) => l,
        Err(e) => {
            ms.abort("no request");
            return Err(e);
        }
    };
    let request = match Request::parse(&line) {
        Ok(r) => r,
        Err(e) => return refuse(e),
    };
    // Features are asked for in the label word (which the proof covers), and accepted by an
    // answer whose proof covers them (`features`).
    let (label_word, asked) = Features::split_label(request.label);
    let accepted = asked.and(shared.offers());
    let answered_target = accepted.proved(request.target);
    // Nothing is looked at, let alone resolved or connected to, before the proof.
    let mut answer = match &shared.key {
        Some(key) => {
            let proof = unhex(request.nonce).map(|nonce| {
                let ok = key.request_proof(&challenge, &nonce, request.target, request.label);
                (ok, key.answer_proof(&challenge, &nonce, &answered_target))
            });
            match proof {
                Some((ok, answer)) if proof_matches(request.proof, &ok) => {
                    format!("ok {}", hex(&answer))
                }
                _ => return refuse(Error::Unauthenticated),
            }
        }
        None => "ok".to_string(),
    };
    for w in accepted.words() {
        answer = format!("{answer} {w}");
    }
    let label = match Label::parse(label_word) {
        Some(l) => l,
        None => {
            return refuse(Error::NotALabel {
                word: request.label.into(),
            })
        }
    };
    let tcp = match target::split(request.target)
        .and_then(|(host, port)| target::resolve(host, port, &shared.allow, deadline, after))
        .and_then(|addrs| target::connect(&addrs, deadline, after))
    {
        Ok(t) => t,
        Err(e) => return refuse(e),
    };
    tcp.set_nodelay(true)?;
    ms.send(Label::ForegroundSmall, answer.into_bytes(), None)?;
    let phone = ms.peer_addr().map(|a| a.ip());
    let codec: Arc<dyn Codec> = match (&shared.dedup, accepted.dedup) {
        (Some(source), true) => Arc::new(RelayEnd::new(source.clone(), phone, on_dedup)),
        _ => Arc::new(Plain),
    };
    let codec: Arc<dyn Codec> = if accepted.zstd_dict {
        Arc::new(RelayZstd::new(
            codec,
            shared.dictionaries.clone(),
            request.target,
            phone,
        ))
    } else if accepted.zstd {
        Arc::new(RelayZstd::new(codec, None, request.target, phone))
    } else {
        codec
    };
    pump(ms, tcp, label, shared.idle_timeout, codec)
}

/// A relay request: `roam-relay 2 HOST:PORT LABEL NONCE PROOF` (the nonce and proof in hex,
/// `-` for none), its words as written.
#[derive(Debug)]
pub struct Request<'a> {
    /// Where to connect, `HOST:PORT`.
    pub target: &'a str,
    /// The label the connection's traffic carries.
    pub label: &'a str,
    /// The proxy's nonce, in hex.
    pub nonce: &'a str,
    /// The proof of the key over both nonces and the request, in hex.
    pub proof: &'a str,
}

impl<'a> Request<'a> {
    /// The request's words, or why the line is not a request.
    pub fn parse(line: &'a str) -> Result<Request<'a>, Error> {
        let mut w = line.split(' ');
        let (
            Some("roam-relay"),
            Some("2"),
            Some(target),
            Some(label),
            Some(nonce),
            Some(proof),
            None,
        ) = (
            w.next(),
            w.next(),
            w.next(),
            w.next(),
            w.next(),
            w.next(),
            w.next(),
        )
        else {
            return Err(Error::NotARequest { line: line.into() });
        };
        Ok(Request {
            target,
            label,
            nonce,
            proof,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the relay does with a request from a proxy that knows the key (the proof made as
    /// a proxy makes it), short of connecting: the permitted addresses, or why not.
    fn ask(line_target: &str, allow: &[&str]) -> Result<Vec<String>, Error> {
        let allow: Vec<Allow> = allow.iter().map(|s| s.parse().unwrap()).collect();
        let deadline = Instant::now() + REQUEST_TIMEOUT;
        let (host, port) = target::split(line_target)?;
        target::resolve(host, port, &allow, deadline, REQUEST_TIMEOUT)
            .map(|v| v.iter().map(|a| a.to_string()).collect())
    }

    #[test]
    fn the_relay_connects_only_where_allowed() {
        let rules = ["10.77.0.1", "192.168.0.0/16:80"];
        let ok = |t: &str| ask(t, &rules);
        assert_eq!(ok("10.77.0.1:5201").unwrap(), ["10.77.0.1:5201"]);
        assert!(ok("192.168.3.4:80").is_ok());
        assert!(ok("192.168.3.4:22").is_err());
        assert!(ok("10.77.0.2:80").is_err());
        assert!(ok("[2001:db8::5]:80").is_err());
        // IPv6: networks, with a port in brackets, never matching IPv4.
        let v6 = ["2001:db8::/32", "[fd00::7]:443"];
        assert_eq!(ask("[2001:db8::5]:80", &v6).unwrap(), ["[2001:db8::5]:80"]);
        assert!(ask("[fd00::7]:443", &v6).is_ok());
        assert!(ask("[fd00::7]:80", &v6).is_err());
        assert!(ask("10.77.0.1:80", &v6).is_err());
    }

    /// The attacker names the relay host's own services in ways a check on the text misses:
    /// a name that resolves to loopback, a number the resolver reads as 127.0.0.1, an
    /// IPv4-mapped IPv6 address. (Before: all passed `0.0.0.0/0` or `::/0`.)
    #[test]
    fn names_and_mapped_addresses_are_checked_as_what_they_reach() {
        let wide = ["0.0.0.0/0", "::/0"];
        for t in [
            "localhost:80",
            "2130706433:80",
            "127.1:80",
            "[::ffff:127.0.0.1]:80",
            "[::ffff:7f00:1]:80",
            "[::1]:80",
            "0.0.0.0:80",
        ] {
            let e = ask(t, &wide).expect_err(t);
            assert!(
                matches!(e, Error::NotAllowed { .. } | Error::NoAllowedAddress { .. }),
                "{t}: {e}"
            );
        }
        assert_eq!(
            ask("[::ffff:127.0.0.1]:80", &["::/0"])
                .unwrap_err()
                .to_string(),
            "127.0.0.1:80 is not allowed (--allow; loopback addresses only where a rule names \
             them, as --allow 127.0.0.1)"
        );
        // Named explicitly, they are permitted, connected to as IPv4.
        assert_eq!(
            ask("[::ffff:127.0.0.1]:80", &["127.0.0.1"]).unwrap(),
            ["127.0.0.1:80"]
        );
        assert!(ask("localhost:80", &["127.0.0.0/8"]).is_ok());
    }

    #[test]
    fn a_refusal_says_why() {
        let e = |t: &str| ask(t, &["10.77.0.1"]).unwrap_err();
        assert!(matches!(e("10.77.0.1"), Error::NoPort { .. }));
        assert!(matches!(e("10.77.0.1:99999"), Error::BadPort { .. }));
        assert_eq!(
            e("10.77.0.2:80").to_string(),
            "10.77.0.2:80 is not allowed (--allow)"
        );
        assert!(matches!(
            Request::parse("roam-relay 1 10.77.0.1:80 foreground-small"),
            Err(Error::NotARequest { .. })
        ));
        assert!(Request::parse("GET / HTTP/1.1").is_err());
        let r = Request::parse("roam-relay 2 10.77.0.1:80 foreground-small ab -").unwrap();
        assert_eq!(
            (r.target, r.label, r.nonce, r.proof),
            ("10.77.0.1:80", "foreground-small", "ab", "-")
        );
    }
}
