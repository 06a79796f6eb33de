//! The timer task of a multi-socket: the session's timeouts, TCP_INFO readings for its passive
//! estimates (`Session::tcp_sample` turns them into throughput samples), and publication of
//! each network's queue and estimates in shared memory.
//!
//! **Idle sessions tick once a second.** A relay holds many sessions, most of them idle; a tick
//! every 100 ms for each (and the writer it wakes) cost an idle session about ten wake-ups a second
//! (`roam bench net --sessions`, issue 48). While the session is quiet (nothing unacknowledged,
//! nothing deferred or in doubt: `Session::is_quiet`), the ticker sleeps until the session's next
//! deadline (`Session::poll_timeout`: probes, reconnects, handshakes, failure) or [`IDLE_TICK`],
//! whichever is first, and readings go at that pace: there is nothing in flight to sample. It goes
//! idle only once the session has been quiet for [`IDLE_AFTER`] (a session of requests and answers
//! is quiet between them). The first change that ends an idle ticker's quiet wakes it at once
//! (`Shared::after`, [`Ticker::busy`]), so a transfer is sampled from its start every [`TICK`].

use super::*;

/// The tick while the session is not quiet: TCP_INFO readings and timeouts.
pub(super) const TICK: Duration = Duration::from_millis(100);

/// The longest an idle session's ticker sleeps.
pub(super) const IDLE_TICK: Duration = Duration::from_secs(1);

/// A session quiet this long has its ticker go idle. Until then it keeps [`TICK`], so that a
/// session exchanging requests and answers, quiet between them, does not have its ticker
/// woken (a runtime worker woken: a futex or an eventfd write) for every request (issue 48:
/// a hand-off per request on loopback).
pub(super) const IDLE_AFTER: Duration = Duration::from_secs(1);

/// What the ticker shares with the rest of the multi-socket.
#[derive(Default)]
pub(super) struct Ticker {
    /// The ticker sleeps its idle sleep.
    idle: AtomicBool,
    /// Wakes an idle ticker.
    pub(super) wake: Notify,
}

impl Ticker {
    /// The session is no longer quiet: whether the ticker was idle, and must be woken now
    /// (`Wakes::ticker`, once the session's lock is let go).
    pub(super) fn busy(&self) -> bool {
        // A load first: on a busy session's data path this is a read of a shared line, not
        // a write to it.
        self.idle.load(Ordering::SeqCst) && self.idle.swap(false, Ordering::SeqCst)
    }
}

/// The timer task: session timeouts, TCP_INFO samples, shared-memory publication.
pub(super) async fn ticker(weak: Weak<Shared>) {
    let mut last_info = Time::ZERO;
    // Since when the session has been quiet, as last seen.
    let mut quiet_since: Option<Time> = None;
    loop {
        let Some(sh) = weak.upgrade() else { return };
        let ticker = sh.ticker.clone();
        // Idle is announced before the session is looked at: a change made after the look
        // (under the session's lock, as every `Shared::after` is) then finds it set and wakes
        // the ticker, and one made before it shows in the look.
        ticker.idle.store(true, Ordering::SeqCst);
        let (deadline, quiet) = {
            let s = sh.session();
            (s.poll_timeout(), s.is_quiet())
        };
        let now = sh.now();
        quiet_since = if quiet {
            quiet_since.or(Some(now))
        } else {
            None
        };
        let idle = quiet_since.is_some_and(|t| now.saturating_since(t) >= IDLE_AFTER);
        if !idle {
            ticker.idle.store(false, Ordering::SeqCst);
        }
        let most = if idle { IDLE_TICK } else { TICK };
        let wait = deadline
            .map_or(most, |d| d.saturating_since(now))
            .min(most)
            .max(Duration::from_millis(1));
        drop(sh);
        if idle {
            // A wake-up left over from a change the look already saw ends one sleep early.
            tokio::select! {
                _ = ticker.wake.notified() => {}
                _ = tokio::time::sleep(wait) => {}
            }
            ticker.idle.store(false, Ordering::SeqCst);
        } else {
            tokio::time::sleep(wait).await;
        }
        let Some(sh) = weak.upgrade() else { return };
        let now = sh.now();
        type Row = (
            ConnId,
            i32,
            NetId,
            bool,
            Arc<AtomicBool>,
            Option<(IpAddr, IpAddr)>,
        );
        let conns: Vec<Row> = sh
            .conns
            .lock()
            .unwrap()
            .iter()
            .map(|(&id, c)| {
                let capped = c.capped.load(Ordering::Relaxed);
                (id, c.fd, c.net, capped, c.cellular.clone(), c.path)
            })
            .collect();
        // The kernel's readings, one SIOCOUTQ and one TCP_INFO per connection and tick (the
        // path's load and the shared-memory table both use them), taken before the session's
        // lock: no system call of the data path under it (issue 48).
        // With them, the device's other multi-sockets' latest foreground activity (shared
        // memory; it checks that their processes live, a system call each).
        let due = now.saturating_since(last_info) >= TICK;
        let (readings, elsewhere): (Vec<(u64, Option<sys::TcpInfo>)>, _) = if due {
            let readings = conns
                .iter()
                .map(|(_, fd, ..)| (sys::outq(*fd).unwrap_or(0), sys::tcp_info(*fd).ok()))
                .collect();
            (
                readings,
                sh.shm.as_ref().and_then(|m| m.foreground_elsewhere()),
            )
        } else {
            (Vec::new(), None)
        };
        // Connections whose keepalives change pace, set once the lock is let go.
        let mut keepalives = Vec::new();
        let mut s = sh.session();
        if due {
            last_info = now;
            // This multi-socket's last foreground activity, as wall-clock milliseconds.
            let wall_ms = shm::now_ms();
            let foreground_ms = s.last_foreground().map_or(0, |t| {
                wall_ms.saturating_sub(now.saturating_since(t).as_millis() as u64)
            });
            for ((id, fd, net, capped, cellular, path), (outq, info)) in conns.iter().zip(readings)
            {
                // Keepalives at the cellular pace once the session knows the network is
                // cellular (the server learns it from the client's announcement).
                let is_cellular = s.connection_is_cellular(*id);
                if is_cellular != cellular.load(Ordering::Relaxed) {
                    keepalives.push((*fd, cellular.clone(), is_cellular));
                }
                if let Some(info) = info {
                    let sample = TcpSample {
                        min_rtt: info.min_rtt,
                        srtt: (!info.rtt.is_zero()).then_some(info.rtt),
                        bytes_acked: info.bytes_acked,
                        load: info.load(outq),
                        held_by_cap: *capped,
                    };
                    s.tcp_sample(*id, now, sample);
                    // Also between the writer's passes: a stall shows within a tick.
                    s.kernel_queue(*id, kernel_queue(Some(&info), outq));
                }
                // The network's estimates, for the path memory and the shared table (each
                // only when the multi-socket has one).
                if sh.options.paths.is_none() && sh.shm.is_none() {
                    continue;
                }
                let est = s.estimates().into_iter().find(|e| e.0 == *net);
                let (rtt, bw) = (est.and_then(|e| e.1), est.and_then(|e| e.2));
                sh.remember_path(&s, *id, *path, rtt, bw);
                if let (Some(m), Some(name)) = (&sh.shm, net_key(&sh, *net)) {
                    m.publish(&name, outq, rtt, bw, foreground_ms);
                }
            }
            // The device's other multi-sockets' foreground activity shrinks this one's
            // anticipatory budget (shared memory carries wall-clock milliseconds).
            if let Some(t) = elsewhere {
                let age = Duration::from_millis(wall_ms.saturating_sub(t));
                s.foreground_elsewhere(now.saturating_sub(age));
            }
        }
        sh.probe_turns(&mut s, conns.iter().map(|r| (r.0, r.5)), now);
        s.handle_timeout(now);
        sh.after(&mut s);
        let done = s.failure().is_some() || (s.is_finished() && conns.is_empty());
        drop(s);
        for (fd, cellular, is_cellular) in keepalives {
            if set_keepalive(fd, &sh.options, is_cellular).is_ok() {
                cellular.store(is_cellular, Ordering::Relaxed);
            }
        }
        if done {
            return;
        }
    }
}
