//! The timer task of a multi-socket: the session's timeouts, TCP_INFO readings for its passive
//! estimates (`Session::tcp_sample` turns them into throughput samples), and publication of each network's queue and estimates in shared memory.

use super::*;

/// The timer task: session timeouts, TCP_INFO samples, shared-memory publication.
pub(super) async fn ticker(weak: Weak<Shared>) {
    let mut last_info = Time::ZERO;
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
            for (id, fd, net, capped) in &conns {
                // One SIOCOUTQ read per connection and tick: the path's load and the
                // shared-memory table both use it.
                let outq = sys::outq(*fd).unwrap_or(0);
                if let Ok(info) = sys::tcp_info(*fd) {
                    let sample = TcpSample {
                        min_rtt: info.min_rtt,
                        bytes_acked: info.bytes_acked,
                        load: info.load(outq),
                        held_by_cap: *capped,
                    };
                    s.tcp_sample(*id, now, sample);
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
