//! The timer task of a multi-socket: the session's timeouts, passive estimates from TCP_INFO,
//! and publication of each network's queue and estimates in shared memory.

use super::*;

/// The timer task: session timeouts, TCP_INFO samples, shared-memory publication.
pub(super) async fn ticker(weak: Weak<Shared>) {
    let mut last_info = Time::ZERO;
    // Per connection: when the current throughput interval began, the acknowledged-bytes
    // counter then, and the path's load then.
    let mut acked: HashMap<ConnId, (Time, u64, PathLoad)> = HashMap::new();
    loop {
        let Some(sh) = weak.upgrade() else { return };
        let deadline = sh.session().poll_timeout();
        let now = sh.now();
        let wait = deadline
            .map_or(Duration::from_millis(100), |d| d.saturating_since(now))
            .min(Duration::from_millis(100));
        drop(sh);
        tokio::time::sleep(wait.max(Duration::from_millis(1))).await;
        let Some(sh) = weak.upgrade() else { return };
        let now = sh.now();
        let conns: Vec<(ConnId, i32, NetId, bool)> = sh
            .conns
            .lock()
            .unwrap()
            .iter()
            .map(|(&id, c)| (id, c.fd, c.net, c.capped.load(Ordering::Relaxed)))
            .collect();
        let mut s = sh.session();
        if now.saturating_since(last_info) >= Duration::from_millis(100) {
            last_info = now;
            acked.retain(|id, _| conns.iter().any(|c| c.0 == *id));
            for (id, fd, net, capped) in &conns {
                // One SIOCOUTQ read per connection and tick: the path's load and the
                // shared-memory table both use it.
                let outq = sys::outq(*fd).unwrap_or(0);
                if let Ok(info) = sys::tcp_info(*fd) {
                    // Throughput over at least 250 ms from the acknowledged-bytes counter, with
                    // the path's load over the interval: the lesser of its loads at the two
                    // ends (`TcpInfo::load`). Saturated, the throughput is the bandwidth;
                    // otherwise a lower bound (see `PathLoad`). Taking a raised smoothed RTT
                    // alone for saturation once turned a trickle of small requests into a
                    // 2 kbit/s WiFi estimate. (The kernel's delivery-rate samples are per
                    // round trip and noisy upwards; a filter that accepts larger
                    // application-limited samples would ratchet on that noise.)
                    // Held back by our own anticipatory cap, the socket counts as backlogged
                    // even when the path drained it between passes (loopback): otherwise a
                    // network whose cap limits every transfer never gets a first estimate and
                    // its cap stays at the unmeasured 256 KiB.
                    let load_now = match info.load(outq) {
                        PathLoad::Light if *capped => PathLoad::Backlogged,
                        l => l,
                    };
                    let prev = acked
                        .entry(*id)
                        .or_insert((now, info.bytes_acked, load_now));
                    let dt = now.saturating_since(prev.0);
                    let mut rate = None;
                    let mut load = PathLoad::Light;
                    if dt >= Duration::from_millis(250) {
                        let bytes = info.bytes_acked.saturating_sub(prev.1);
                        load = prev.2.min(load_now);
                        *prev = (now, info.bytes_acked, load_now);
                        if bytes > 0 {
                            rate =
                                Some(BitRate::bps((bytes as f64 * 8.0 / dt.as_secs_f64()) as u64));
                        }
                    }
                    s.tcp_info(*id, info.min_rtt, rate, load);
                    // Also between the writer's passes: a stall shows within a tick.
                    s.kernel_queue(*id, kernel_queue(Some(&info), outq));
                }
                if let (Some(m), Some(name)) = (&sh.shm, net_key(&sh, *net)) {
                    let est = s.estimates().into_iter().find(|e| e.0 == *net);
                    m.publish(&name, outq, est.and_then(|e| e.1), est.and_then(|e| e.2));
                }
            }
        }
        s.handle_timeout(now);
        sh.after(&mut s);
        let done = s.failure().is_some() || (s.is_finished() && conns.is_empty());
        drop(s);
        if done {
            return;
        }
    }
}
