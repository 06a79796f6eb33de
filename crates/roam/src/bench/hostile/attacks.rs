//! The hostile clients of `roam bench hostile`. Each attack is a loop on a thread of its own,
//! from a loopback source address of its own (127.0.0.2 and up: the honest clients come from
//! 127.0.0.1, as attackers and users come from different hosts), reconnecting whenever the
//! server closes it, until the soak ends. Attacks are paced: the soak measures what the servers
//! hold and how they treat honest clients while attacked, not how fast this process can send.
//!
//! The attacks are those of issue 43's audit, one function each: silent `Hello`s and a
//! trickled `Hello` (slowloris) against roam-net listeners, `ResendRequest` floods about a
//! gappy IROB from a peer that never reads, one-byte pieces with gaps, sparse IROB ids, and
//! oversized sends; against the relay also unauthenticated and silent multi-sockets; against
//! the HLA server silent and slowloris HTTP, oversized and forged uploads and hostile records;
//! against a tier silent TCP, silent links, wrong secrets, oversized and trickled
//! authentications.

use std::io::{self, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use roam_net::proto::wire::{Caps, Chunk, Frame};
use roam_net::proto::{Deps, Label, NetKind};
use roam_net::runtime::blocking::MultiSocket;
use roam_net::runtime::{LocalNetwork, Networks, Options, Tls};
use roam_store::tier::net::{link_options, send_message};
use roam_store::tier::wire::{encode, Request, LAST};
use socket2::{Domain, Socket, Type};

/// What every attack gets: where to attack from and to, when to stop, and counters.
pub struct Ctx {
    /// The server attacked.
    pub target: SocketAddr,
    /// This attack's source address.
    pub from: Ipv4Addr,
    /// Set when the soak is over.
    pub stop: Arc<AtomicBool>,
    /// Connections (or multi-sockets) the attack opened.
    pub opened: AtomicU64,
    /// Of those, ones the server refused or closed.
    pub cut: AtomicU64,
    /// The tier's certificate (PEM) and TLS name, for attacks on a tier.
    pub tls: Option<(Vec<u8>, &'static str)>,
    /// A valid device token, for the hostile records of a compromised device.
    pub token: Option<String>,
}

impl Ctx {
    fn live(&self) -> bool {
        !self.stop.load(Ordering::Relaxed)
    }

    /// Sleep `d`, or less if the soak ends meanwhile.
    fn pause(&self, d: Duration) {
        let until = Instant::now() + d;
        while self.live() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20).min(d));
        }
    }

    fn opened(&self) {
        self.opened.fetch_add(1, Ordering::Relaxed);
    }

    fn cut(&self) {
        self.cut.fetch_add(1, Ordering::Relaxed);
    }

    /// A TCP connection from this attack's address that never reads (its receive buffer
    /// small) and gives up a write after a second.
    fn tcp(&self) -> io::Result<TcpStream> {
        let s = Socket::new(Domain::IPV4, Type::STREAM, None)?;
        s.set_recv_buffer_size(4096)?;
        s.bind(&SocketAddr::V4(SocketAddrV4::new(self.from, 0)).into())?;
        s.connect_timeout(&self.target.into(), Duration::from_secs(5))?;
        s.set_write_timeout(Some(Duration::from_secs(1)))?;
        self.opened();
        Ok(s.into())
    }

    /// A multi-socket from this attack's address, with the options of the server's clients
    /// (a tier's link options with its certificate when attacking a tier).
    fn multi_socket(&self) -> Result<MultiSocket, roam_net::runtime::Error> {
        let mut o = match &self.tls {
            Some((pem, name)) => link_options(Tls::client(pem, name).ok()),
            None => Options::default(),
        };
        o.networks = Networks::Explicit(vec![LocalNetwork {
            name: "lo".into(),
            addr: self.from.into(),
            kind: NetKind::default(),
        }]);
        o.connect_timeout = Duration::from_secs(5);
        let ms = MultiSocket::connect(self.target, o)?;
        self.opened();
        Ok(ms)
    }
}

/// An attack: its name (in the report) and its loop.
pub type Attack = (&'static str, fn(&Ctx));

/// The attacks on a roam-net listener (an application's, or the relay's: the transport's
/// attacks come before anything the application sees).
pub const ON_ROAM_NET: [Attack; 6] = [
    ("silent_hellos", silent_hellos),
    ("slowloris_hello", slowloris_hello),
    ("resend_request_flood", resend_request_flood),
    ("one_byte_chunks_with_gaps", one_byte_chunks_with_gaps),
    ("sparse_ids", sparse_ids),
    ("oversized_sends", oversized_sends),
];

/// The relay's own attacks, besides [`ON_ROAM_NET`].
pub const ON_RELAY: [Attack; 2] = [
    ("unauthenticated_requests", unauthenticated_requests),
    ("silent_multi_sockets", silent_multi_sockets),
];

/// The attacks on the HLA server.
pub const ON_HLA: [Attack; 5] = [
    ("silent_connections", silent_tcp),
    ("slowloris_headers", slowloris_http),
    ("oversized_uploads", oversized_upload),
    ("forged_tokens", forged_token),
    ("hostile_records", hostile_records),
];

/// The attacks on a tier.
pub const ON_TIER: [Attack; 5] = [
    ("silent_tcp", silent_tcp),
    ("silent_links", silent_multi_sockets),
    ("wrong_secrets", wrong_secret),
    ("oversized_authentications", oversized_auth),
    ("trickled_authentications", trickled_auth),
];

/// Most connections one holding attack keeps open at once.
const HELD: usize = 48;

fn hello() -> Vec<u8> {
    Frame::Hello {
        key: [0x5a; 32],
        window: 1 << 20,
        caps: Caps::NONE,
        networks: vec![],
    }
    .to_bytes()
}

fn piece(irob: u64, offset: u64, end: bool, data: Bytes) -> Vec<u8> {
    Frame::Data(Chunk {
        irob,
        label: Label::BackgroundSmall,
        offset,
        deps: None,
        end,
        acks: vec![],
        data,
    })
    .to_bytes()
}

/// Whether the peer has closed `s` (a read that ends, or fails other than by waiting).
fn closed(s: &TcpStream) -> bool {
    let mut b = [0u8; 1];
    if s.set_nonblocking(true).is_err() {
        return true;
    }
    let r = s.peek(&mut b);
    let _ = s.set_nonblocking(false);
    match r {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != io::ErrorKind::WouldBlock,
    }
}

/// Keep up to [`HELD`] connections open, each opened by `open` (which sends what the attack
/// sends once), replacing those the server closes, checking every `every`.
fn hold(ctx: &Ctx, every: Duration, open: impl Fn(&Ctx) -> io::Result<TcpStream>) {
    let mut held: Vec<TcpStream> = Vec::new();
    while ctx.live() {
        held.retain(|s| {
            let gone = closed(s);
            if gone {
                ctx.cut();
            }
            !gone
        });
        while held.len() < HELD && ctx.live() {
            match open(ctx) {
                Ok(s) => held.push(s),
                Err(_) => {
                    ctx.cut();
                    break;
                }
            }
        }
        ctx.pause(every);
    }
}

/// Hellos that are never followed by anything: each holds a multi-socket of the listener
/// until roam-net gives up on it.
fn silent_hellos(ctx: &Ctx) {
    hold(ctx, Duration::from_millis(500), |ctx| {
        let mut s = ctx.tcp()?;
        s.write_all(&hello())?;
        Ok(s)
    });
}

/// Connections that trickle a `Hello` a byte every 500 ms (slowloris).
fn slowloris_hello(ctx: &Ctx) {
    let h = hello();
    let mut conns: Vec<(TcpStream, usize)> = Vec::new();
    while ctx.live() {
        while conns.len() < HELD / 2 {
            match ctx.tcp() {
                Ok(s) => conns.push((s, 0)),
                Err(_) => {
                    ctx.cut();
                    break;
                }
            }
        }
        conns.retain_mut(|(s, sent)| {
            if *sent < h.len() && s.write_all(&h[*sent..*sent + 1]).is_ok() {
                *sent += 1;
                true
            } else {
                ctx.cut();
                false
            }
        });
        ctx.pause(Duration::from_millis(500));
    }
}

/// Run `each` on one connection after a `Hello` until the server closes it (or its writes
/// stall for a second: the server stopped reading), then open another.
fn after_hello(ctx: &Ctx, mut each: impl FnMut(&mut TcpStream, u64) -> io::Result<()>) {
    while ctx.live() {
        let mut s = match ctx
            .tcp()
            .and_then(|mut s| s.write_all(&hello()).map(|()| s))
        {
            Ok(s) => s,
            Err(_) => {
                ctx.cut();
                ctx.pause(Duration::from_millis(200));
                continue;
            }
        };
        let mut round = 0u64;
        while ctx.live() {
            if each(&mut s, round).is_err() || closed(&s) {
                ctx.cut();
                break;
            }
            round += 1;
        }
    }
}

/// One IROB of 2,000 one-byte pieces with gaps, then `ResendRequest`s naming it 4,096 times,
/// twenty a second, from a peer that never reads the answers.
fn resend_request_flood(ctx: &Ctx) {
    let ask = Frame::ResendRequest {
        irobs: vec![0; 4096],
    }
    .to_bytes();
    after_hello(ctx, |s, round| {
        if round == 0 {
            let mut gappy = Vec::new();
            for k in 0..2000u64 {
                gappy.extend(piece(0, 2 * k + 1, false, Bytes::from_static(b"x")));
            }
            s.write_all(&gappy)?;
        }
        s.write_all(&ask)?;
        ctx.pause(Duration::from_millis(50));
        Ok(())
    });
}

/// One-byte pieces at every other offset of ever new IROBs (nothing ever completes), a
/// thousand pieces a second.
fn one_byte_chunks_with_gaps(ctx: &Ctx) {
    after_hello(ctx, |s, round| {
        let mut batch = Vec::new();
        for k in 0..100u64 {
            let n = round * 100 + k;
            batch.extend(piece(
                n / 64,
                2 * (n % 64) + 1,
                false,
                Bytes::from_static(b"x"),
            ));
        }
        s.write_all(&batch)?;
        ctx.pause(Duration::from_millis(100));
        Ok(())
    });
}

/// Complete one-byte IROBs with ids far apart (each 4,099 past the last), a thousand a second.
fn sparse_ids(ctx: &Ctx) {
    after_hello(ctx, |s, round| {
        let mut batch = Vec::new();
        for k in 0..100u64 {
            let id = (round * 100 + k) * 4099;
            batch.extend(piece(id, 0, true, Bytes::from_static(b"x")));
        }
        s.write_all(&batch)?;
        ctx.pause(Duration::from_millis(100));
        Ok(())
    });
}

/// IROBs of 64 KiB pieces sent as fast as the server takes them (about 20 MB/s at most),
/// never ending, never reading.
fn oversized_sends(ctx: &Ctx) {
    let data = Bytes::from(vec![0x41u8; 64 << 10]);
    after_hello(ctx, |s, round| {
        s.write_all(&piece(
            round / 256,
            (round % 256) * (64 << 10),
            false,
            data.clone(),
        ))?;
        ctx.pause(Duration::from_millis(3));
        Ok(())
    });
}

/// Multi-sockets that ask the relay for a connection with a forged proof, twenty a second.
fn unauthenticated_requests(ctx: &Ctx) {
    while ctx.live() {
        match ctx.multi_socket() {
            Ok(ms) => {
                let _ = ms.recv_timeout(Duration::from_secs(2));
                let forged = "roam-relay 2 127.0.0.1:1 foreground-small 00 00".to_string();
                let _ = ms.send(Label::ForegroundSmall, forged.into_bytes(), None);
                // The refusal, then the relay's end.
                let _ = ms.recv_timeout(Duration::from_secs(2));
                if ms.peer_closed() || ms.recv_timeout(Duration::from_secs(1)).is_err() {
                    ctx.cut();
                }
                ms.abort("done");
            }
            Err(_) => ctx.cut(),
        }
        ctx.pause(Duration::from_millis(50));
    }
}

/// Multi-sockets that connect and then say nothing, as many as [`HELD`] at once.
fn silent_multi_sockets(ctx: &Ctx) {
    let mut held: Vec<MultiSocket> = Vec::new();
    while ctx.live() {
        held.retain(|ms| {
            let gone = ms.peer_closed() || ms.try_recv().is_err();
            if gone {
                ctx.cut();
            }
            !gone
        });
        while held.len() < HELD && ctx.live() {
            match ctx.multi_socket() {
                Ok(ms) => held.push(ms),
                Err(_) => {
                    ctx.cut();
                    break;
                }
            }
        }
        ctx.pause(Duration::from_millis(500));
    }
}

/// TCP connections that send nothing (before TLS, before HTTP).
fn silent_tcp(ctx: &Ctx) {
    hold(ctx, Duration::from_millis(500), |ctx| ctx.tcp());
}

/// HTTP requests whose headers trickle a byte a second (slowloris).
fn slowloris_http(ctx: &Ctx) {
    let head = b"POST /logs HTTP/1.1\r\nHost: hla\r\nX-Slow: ".to_vec();
    let mut conns: Vec<TcpStream> = Vec::new();
    while ctx.live() {
        while conns.len() < HELD / 2 {
            match ctx.tcp().and_then(|mut s| s.write_all(&head).map(|()| s)) {
                Ok(s) => conns.push(s),
                Err(_) => {
                    ctx.cut();
                    break;
                }
            }
        }
        conns.retain_mut(|s| {
            let ok = s.write_all(b"a").is_ok() && !closed(s);
            if !ok {
                ctx.cut();
            }
            ok
        });
        ctx.pause(Duration::from_secs(1));
    }
}

/// Uploads announcing a gibibyte and sending it at about 10 MB/s.
fn oversized_upload(ctx: &Ctx) {
    let block = vec![b'x'; 64 << 10];
    while ctx.live() {
        let head = "POST /logs HTTP/1.1\r\nHost: hla\r\nAuthorization: Bearer \
                    0000000000000000000000000000000000000000\r\nContent-Length: 1073741824\r\n\r\n";
        match ctx
            .tcp()
            .and_then(|mut s| s.write_all(head.as_bytes()).map(|()| s))
        {
            Ok(mut s) => {
                while ctx.live() && s.write_all(&block).is_ok() && !closed(&s) {
                    ctx.pause(Duration::from_millis(6));
                }
                ctx.cut();
            }
            Err(_) => ctx.cut(),
        }
        ctx.pause(Duration::from_millis(100));
    }
}

/// One HTTP request on a new connection from this attack's address; whether an answer came.
fn http(ctx: &Ctx, request: &[u8]) -> bool {
    let Ok(mut s) = ctx.tcp() else {
        ctx.cut();
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    if s.write_all(request).is_err() {
        ctx.cut();
        return false;
    }
    let mut b = [0u8; 512];
    let answered = matches!(io::Read::read(&mut s, &mut b), Ok(n) if n > 0);
    if !answered {
        ctx.cut();
    }
    answered
}

fn post(token: &str, body: &str) -> Vec<u8> {
    format!(
        "POST /logs HTTP/1.1\r\nHost: hla\r\nAuthorization: Bearer {token}\r\nContent-Length: \
         {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Uploads with made-up tokens, twenty a second.
fn forged_token(ctx: &Ctx) {
    let mut k = 0u64;
    while ctx.live() {
        http(ctx, &post(&format!("{k:040x}"), "{}\n"));
        k += 1;
        ctx.pause(Duration::from_millis(50));
    }
}

/// A compromised device's uploads: records whose ranges would make learning loop for ever
/// (cc and p of 4294967295), negative and infinite figures, ten a second.
fn hostile_records(ctx: &Ctx) {
    let token = ctx.token.clone().unwrap_or_default();
    let bodies = [
        r#"{"rtt_ms":50,"bandwidth_mbps":10,"mean_file_bytes":1000000,"params":{"cc":4294967295,"p":4294967295,"bs":65536},"throughput_mbps":5,"energy_j_per_100mb":10,"ok":true}"#,
        r#"{"rtt_ms":-1,"bandwidth_mbps":1e308,"mean_file_bytes":-5,"params":{"cc":0,"p":0,"bs":0},"throughput_mbps":1e309,"energy_j_per_100mb":-1,"ok":true}"#,
        "not json at all",
    ];
    let mut k = 0usize;
    while ctx.live() {
        http(
            ctx,
            &post(&token, &(bodies[k % bodies.len()].to_string() + "\n")),
        );
        k += 1;
        ctx.pause(Duration::from_millis(100));
    }
}

/// A tier link's first message, as raw bytes in one IROB.
fn send_raw(ms: &MultiSocket, bytes: Vec<u8>) -> bool {
    let until = Instant::now() + Duration::from_secs(2);
    send_message(ms, Label::ForegroundSmall, &bytes, until, "tier").is_ok()
}

/// Whether the tier closes link `ms` within `limit`.
fn cut_within(ms: &MultiSocket, limit: Duration) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if ms.peer_closed() || ms.try_recv().is_err() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Links authenticating with a wrong secret, ten a second.
fn wrong_secret(ctx: &Ctx) {
    while ctx.live() {
        if let Ok(ms) = ctx.multi_socket() {
            let msg = encode(
                &Request::Auth {
                    secret: "00".repeat(32),
                },
                b"",
            );
            if send_raw(&ms, msg) && cut_within(&ms, Duration::from_secs(3)) {
                ctx.cut();
            }
            ms.abort("done");
        }
        ctx.pause(Duration::from_millis(100));
    }
}

/// Links whose first message is 64 KiB (a tier takes 1 KiB before authentication).
fn oversized_auth(ctx: &Ctx) {
    while ctx.live() {
        if let Ok(ms) = ctx.multi_socket() {
            let mut msg = vec![LAST];
            msg.extend(std::iter::repeat_n(b'{', 64 << 10));
            let _ = ms.send(Label::ForegroundSmall, msg, None);
            if cut_within(&ms, Duration::from_secs(3)) {
                ctx.cut();
            }
            ms.abort("done");
        }
        ctx.pause(Duration::from_millis(100));
    }
}

/// Links trickling their authentication a byte every 300 ms, eight at a time.
fn trickled_auth(ctx: &Ctx) {
    let msg = encode(
        &Request::Auth {
            secret: "11".repeat(32),
        },
        b"",
    );
    let mut links: Vec<(MultiSocket, roam_net::proto::IrobId, usize)> = Vec::new();
    while ctx.live() {
        while links.len() < 8 {
            let Ok(ms) = ctx.multi_socket() else { break };
            match ms.begin_irob(Label::ForegroundSmall, Deps::AllEarlier, None) {
                Ok(irob) if ms.irob_send(irob, vec![LAST]).is_ok() => links.push((ms, irob, 0)),
                _ => ctx.cut(),
            }
        }
        links.retain_mut(|(ms, irob, sent)| {
            let ok = *sent < msg.len()
                && !ms.peer_closed()
                && ms.irob_send(*irob, vec![msg[*sent]]).is_ok();
            *sent += 1;
            if !ok {
                ctx.cut();
                ms.abort("done");
            }
            ok
        });
        ctx.pause(Duration::from_millis(300));
    }
}
