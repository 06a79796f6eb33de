//! Issue 43, finding 3: what a tier holds for a peer that never authenticates, measured with a
//! counting allocator (a binary of its own, so that no other test allocates meanwhile). Before
//! the fix a first message that never ended was gathered whole before it was parsed: 40 MiB
//! sent made the tier hold 65 MiB. Now the tier takes at most `MAX_AUTH_MESSAGE` before the
//! peer is authenticated and roam-net's per-link buffers are small.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use roam_net::runtime::blocking::MultiSocket;
use roam_net::runtime::{Options, Tls};
use roam_net::{Deps, Label};
use roam_store::ownership::Tier;
use roam_store::tier::wire::MORE;
use roam_store::tier::{serve, TierService};

struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        System.dealloc(p, l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        System.alloc_zeroed(l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        LIVE.fetch_add(n as isize - l.size() as isize, Ordering::Relaxed);
        System.realloc(p, l, n)
    }
}

#[global_allocator]
static A: Counting = Counting;

fn mib(b: isize) -> f64 {
    b as f64 / (1 << 20) as f64
}

/// Peers that never authenticate, each sending 40 MiB of a first message that never ends
/// (the attacker's bytes are a static buffer, so nearly all that is counted is the tier's):
/// the tier holds a few MiB for them all, and nothing once they are closed.
#[test]
fn peers_that_never_authenticate_make_the_tier_hold_little() {
    let r = std::env::temp_dir().join(format!("roam-preauth-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&r);
    let c = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert, key) = (c.cert.pem(), c.signing_key.serialize_pem());
    let tls = Tls::server(cert.as_bytes(), key.as_bytes()).unwrap();
    let svc = Arc::new(TierService::open(Tier::Server, &r, [7; 32]).unwrap());
    let h = serve(svc, "127.0.0.1:0".parse().unwrap(), Some(tls)).unwrap();
    // The attacker's roam-net allows IROBs as large as it likes (its defaults: 64 MiB).
    let opts = Options {
        tls: Some(Tls::client(cert.as_bytes(), "localhost").unwrap()),
        ..Options::default()
    };
    const PEERS: usize = 4;
    // The attacker's mebibyte, sent 40 times by each peer (static: sending it allocates
    // nothing). It starts with the byte of a fragment that more follow.
    let mut mebibyte = vec![b'x'; 1 << 20];
    mebibyte[0] = MORE;
    let part: &'static [u8] = Box::leak(mebibyte.into_boxed_slice());
    let peers: Vec<MultiSocket> = (0..PEERS)
        .map(|_| MultiSocket::connect(h.addr(), opts.clone()).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let base = LIVE.load(Ordering::Relaxed);
    let mut peak = 0isize;
    // Half the peers send one IROB that never ends; the others fragments of a message that
    // never ends, each an IROB within roam-net's limit.
    let senders: Vec<_> = peers
        .iter()
        .enumerate()
        .map(|(i, ms)| {
            let ms = ms.clone();
            std::thread::spawn(move || {
                let mut sent = 0;
                if i % 2 == 0 {
                    let irob = ms
                        .begin_irob(Label::ForegroundLarge, Deps::AllEarlier, None)
                        .unwrap();
                    while sent < 40 && ms.irob_send(irob, part).is_ok() {
                        sent += 1;
                    }
                } else {
                    while sent < 40 && ms.send(Label::BackgroundLarge, part, None).is_ok() {
                        sent += 1;
                    }
                }
                sent
            })
        })
        .collect();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(3) {
        peak = peak.max(LIVE.load(Ordering::Relaxed) - base);
        std::thread::sleep(Duration::from_millis(5));
    }
    let held = LIVE.load(Ordering::Relaxed) - base;
    eprintln!(
        "{PEERS} unauthenticated peers: the tier holds {:.2} MiB ({:.2} MiB at most meanwhile)",
        mib(held),
        mib(peak)
    );
    assert!(
        held < 2 << 20,
        "the tier holds {:.1} MiB for peers that never authenticated",
        mib(held)
    );
    assert!(peak < 24 << 20, "{:.1} MiB at the peak", mib(peak));
    assert_eq!(h.links().pending, 0, "they were closed");
    let sent: Vec<usize> = senders.into_iter().map(|s| s.join().unwrap()).collect();
    eprintln!("MiB each peer had sent when the tier closed its link: {sent:?}");
    drop(h);
    let _ = std::fs::remove_dir_all(&r);
}
