//! The file service: it answers demand fetches at once and composes prefetch replies only when
//! the connection can take them.

use std::collections::HashSet;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail, Result};
use roam_net::Label;

use super::{header, parse_header, BLOCK, PREFETCH_MAX};
use crate::harness::channel::{background_sender, Conn, Readiness};

/// A prefetch reply the server has yet to send: `count` blocks of `file` from `first`,
/// composed when it is sent.
#[derive(Clone, Copy)]
struct Prefetch {
    label: Label,
    file: u32,
    first: u64,
    count: u64,
}

/// A message to send now, and what of the [`Prefetch`] remains after it.
type Step = ((Label, Vec<u8>), Option<Prefetch>);

impl Prefetch {
    /// The next message to send, given the blocks already sent on demand, and what remains
    /// once it is sent (`None`: nothing).
    fn next(&self, sent: &HashSet<(u32, u64)>) -> Option<Step> {
        let (file, end) = (self.file, self.first + self.count);
        let a = (self.first..end).find(|k| !sent.contains(&(file, *k)))?;
        let b = (a..end).find(|k| sent.contains(&(file, *k))).unwrap_or(end);
        let mut r = header(b'p', file, a, b - a);
        r.resize(21 + ((b - a) * BLOCK) as usize, file as u8);
        let rest = (b < end).then_some(Prefetch {
            first: b,
            count: end - b,
            ..*self
        });
        Some(((self.label, r), rest))
    }
}

/// Answer requests. Background replies go through their own threads, so a background send
/// that has to wait never holds up a demand fetch behind it.
///
/// Prefetch replies are composed only when they can go ([`Readiness`]; over roam with a
/// thunk, as the paper's BlueFS RPCs did, §4.1), leaving out blocks the client has meanwhile
/// fetched on demand, so those do not cross the network twice. The logic is the same for
/// every system; over roam a reply waits while its label's backlog is over the bound, over
/// TCP or MPTCP while the socket has not taken the previous message. Write-back acknowledgements have a thread of their own: each RPC is
/// answered on its own, so an acknowledgement waits for roam to take it, not behind prefetch
/// replies still deferred in the server (on the vehicular drive's collapsed 3G that queue
/// held the last acknowledgements for 20 s after the write-backs had arrived).
pub(super) fn serve(conn: Arc<Conn>) -> Result<()> {
    let sent_on_demand: Arc<Mutex<HashSet<(u32, u64)>>> = Arc::default();
    let (ack_tx, acks) = background_sender(conn.clone());
    let (bg_tx, bg_rx) = mpsc::channel::<Prefetch>();
    let (bconn, bsent) = (conn.clone(), sent_on_demand.clone());
    let bg = std::thread::spawn(move || -> Result<()> {
        let ready = Readiness::default();
        for p in bg_rx {
            let mut p = Some(p);
            while let Some(cur) = p.take() {
                let Some(((label, m), rest)) = cur.next(&bsent.lock().unwrap()) else {
                    break;
                };
                // Deferred: composed again (without what went on demand meanwhile) and retried.
                p = if ready.send(&bconn, label, m)? {
                    rest
                } else {
                    Some(cur)
                };
            }
        }
        Ok(())
    });
    while let Some(m) = conn.recv()? {
        let (tag, file, a, b) = parse_header(&m.data)?;
        match tag {
            b'D' => {
                sent_on_demand.lock().unwrap().insert((file, a));
                let mut r = header(b'd', file, a, 1);
                r.resize(21 + BLOCK as usize, file as u8);
                conn.send(m.label, &[], r, None)?;
            }
            b'P' => {
                let count = b.min(PREFETCH_MAX / BLOCK);
                let p = Prefetch {
                    label: m.label,
                    file,
                    first: a,
                    count,
                };
                if bg_tx.send(p).is_err() {
                    break;
                }
            }
            b'W' => {
                if ack_tx.send((m.label, header(b'w', file, b, 0))).is_err() {
                    break;
                }
            }
            _ => bail!("unknown request {tag}"),
        }
    }
    drop(bg_tx);
    drop(ack_tx);
    let acked = acks
        .join()
        .map_err(|_| anyhow!("write-back acknowledgements panicked"))?;
    bg.join()
        .map_err(|_| anyhow!("background replies panicked"))?
        .and(acked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefetch_reply_leaves_out_blocks_sent_on_demand() {
        let sent: HashSet<(u32, u64)> = [(7, 2), (7, 3), (7, 6), (8, 0)].into_iter().collect();
        let prefetch = |first, count| Prefetch {
            label: Label::BackgroundLarge,
            file: 7,
            first,
            count,
        };
        let mut p = Some(prefetch(0, 8));
        let mut runs = Vec::new();
        while let Some(cur) = p.take() {
            let Some(((_, m), rest)) = cur.next(&sent) else {
                break;
            };
            let (tag, file, a, n) = parse_header(&m).unwrap();
            assert_eq!((tag, file), (b'p', 7));
            assert_eq!(m.len() as u64, 21 + n * BLOCK);
            runs.push((a, n));
            p = rest;
        }
        assert_eq!(runs, vec![(0, 2), (4, 2), (7, 1)]);
        // Everything already sent: nothing to send.
        assert!(prefetch(2, 2).next(&sent).is_none());
    }
}
