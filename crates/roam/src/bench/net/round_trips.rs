//! `round_trip_us` of `roam bench net`: a 64-byte request answered by a 64-byte response, one
//! at a time, over one TCP connection and over one multi-socket, with what each round trip cost
//! the process (issue 48, item 1: the hand-offs between threads).

use super::*;

/// Round-trip times, in microseconds, and what a round trip cost the process (both ends):
/// context switches (each a thread put to sleep or woken: the hand-offs) and CPU time.
pub(super) struct RoundTrips {
    pub(super) median_us: f64,
    p90_us: f64,
    switches: f64,
    /// The voluntary ones alone (a thread that slept waiting: the hand-offs); readable on a
    /// loaded machine, where preemption adds involuntary ones.
    voluntary: f64,
    cpu_us: f64,
}

impl RoundTrips {
    /// From the round trips' times `us` and the process's use before and after them.
    fn of(mut us: Vec<f64>, before: Cpu, after: Cpu) -> RoundTrips {
        us.sort_by(f64::total_cmp);
        let n = us.len() as f64;
        let q = |q| crate::bench::hostile::quantile(&us, q).unwrap_or(f64::NAN);
        RoundTrips {
            median_us: q(0.5),
            p90_us: q(0.9),
            switches: after.switches.saturating_sub(before.switches) as f64 / n,
            voluntary: after.voluntary.saturating_sub(before.voluntary) as f64 / n,
            cpu_us: after.cpu_us.saturating_sub(before.cpu_us) as f64 / n,
        }
    }

    pub(super) fn json(&self) -> serde_json::Value {
        json!({
            "median": self.median_us,
            "p90": self.p90_us,
            "switches_per_round_trip": self.switches,
            "voluntary_switches_per_round_trip": self.voluntary,
            "cpu_us_per_round_trip": self.cpu_us,
        })
    }
}

/// `n` round trips of a 64-byte request answered by a 64-byte response over one TCP_NODELAY
/// connection (the server a thread of its own, blocking reads).
pub(super) fn tcp_round_trips(n: u32) -> Result<RoundTrips> {
    let (mut c, mut s) = tcp_pair()?;
    s.set_nodelay(true)?;
    let server = std::thread::spawn(move || -> std::io::Result<()> {
        let mut m = [0u8; 64];
        loop {
            if let Err(e) = s.read_exact(&mut m) {
                return if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    Ok(())
                } else {
                    Err(e)
                };
            }
            s.write_all(&m)?;
        }
    });
    let mut m = [7u8; 64];
    let mut us = Vec::with_capacity(n as usize);
    let before = net_sessions::usage::cpu();
    for _ in 0..n {
        let t = Instant::now();
        c.write_all(&m)?;
        c.read_exact(&mut m)?;
        us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let after = net_sessions::usage::cpu();
    drop(c);
    server.join().map_err(|_| anyhow!("server panicked"))??;
    Ok(RoundTrips::of(us, before, after))
}

/// As [`tcp_round_trips`], over one multi-socket: each request and response one
/// foreground-small IROB.
pub(super) fn roam_round_trips(n: u32, setup: Setup) -> Result<RoundTrips> {
    let (c, s, _l) = roam_pair(false, setup)?;
    let server = std::thread::spawn(move || -> Result<()> {
        while let Some((_, _, m)) = s.recv_irob()? {
            s.send(Label::ForegroundSmall, m, None)?;
        }
        Ok(())
    });
    let m = Bytes::from_static(&[7u8; 64]);
    let mut us = Vec::with_capacity(n as usize);
    let before = net_sessions::usage::cpu();
    for _ in 0..n {
        let t = Instant::now();
        c.send(Label::ForegroundSmall, m.clone(), None)?;
        let r = c.recv_irob()?.context("the server closed")?;
        if r.2.len() != m.len() {
            bail!("a response of {} bytes", r.2.len());
        }
        us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let after = net_sessions::usage::cpu();
    c.close(Duration::from_secs(30));
    server.join().map_err(|_| anyhow!("server panicked"))??;
    Ok(RoundTrips::of(us, before, after))
}
