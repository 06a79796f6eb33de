//! TCP streams out of packet captures (pcap and pcapng, read by `pcap-parser`; headers by
//! `etherparse`), for `roam dedup analyze`: each connection's two directions reassembled by
//! sequence number (retransmissions and overlaps taken once, segments out of order held until
//! the gap fills, up to a bound), the server's side told by who sent the SYN (or, without a
//! handshake in the capture, by the lower port).

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::path::Path;

use anyhow::{bail, Context, Result};
use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use pcap_parser::{create_reader, Block, Linktype, PcapBlockOwned, PcapError};
use roam_dedup::analyze::Stream;

/// Bytes of segments held out of order per direction; past it the rest of that direction is
/// dropped (counted as a gap).
const MAX_OUT_OF_ORDER: usize = 16 << 20;

/// One direction of a connection being reassembled.
#[derive(Default)]
struct Half {
    /// The sequence number of the first byte.
    base: Option<u32>,
    data: Vec<u8>,
    ahead: BTreeMap<u64, Vec<u8>>,
    ahead_bytes: usize,
    /// The direction gave up after a gap it could not fill.
    broken: bool,
}

impl Half {
    fn segment(&mut self, seq: u32, syn: bool, payload: &[u8]) {
        if syn {
            self.base = Some(seq.wrapping_add(1));
            return;
        }
        if payload.is_empty() || self.broken {
            return;
        }
        let base = *self.base.get_or_insert(seq);
        let off = u64::from(seq.wrapping_sub(base));
        // Sequence numbers before the base (a retransmission of the SYN's data) wrap far ahead.
        if off > u64::from(u32::MAX / 2) {
            return;
        }
        self.put(off, payload);
        while let Some((&o, _)) = self.ahead.iter().next() {
            if o > self.data.len() as u64 {
                break;
            }
            let b = self.ahead.remove(&o).expect("first entry");
            self.ahead_bytes -= b.len();
            self.put(o, &b);
        }
    }

    fn put(&mut self, off: u64, payload: &[u8]) {
        let have = self.data.len() as u64;
        let end = off + payload.len() as u64;
        if end <= have {
            return; // all seen
        }
        if off <= have {
            self.data
                .extend_from_slice(&payload[(have - off) as usize..]);
        } else if self.ahead_bytes + payload.len() <= MAX_OUT_OF_ORDER {
            self.ahead_bytes += payload.len();
            self.ahead.insert(off, payload.to_vec());
        } else {
            self.broken = true;
        }
    }
}

/// One connection: its halves, keyed by the sending side.
struct Connection {
    first: usize,
    client: Option<SocketAddr>,
    halves: HashMap<SocketAddr, Half>,
}

/// What reading captures found.
#[derive(Default)]
pub struct Captures {
    connections: HashMap<(SocketAddr, SocketAddr), Connection>,
    order: usize,
    /// Packets that were not TCP over IP (or whose link type is not read).
    pub skipped: u64,
    /// TCP packets read.
    pub packets: u64,
}

fn key(a: SocketAddr, b: SocketAddr) -> (SocketAddr, SocketAddr) {
    if a <= b {
        (a, b)
    } else {
        (b, a)
    }
}

impl Captures {
    /// Read `path` (pcap or pcapng) into the connections.
    pub fn read(&mut self, path: &Path) -> Result<()> {
        let file =
            std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let name = path.display();
        let mut reader = match create_reader(1 << 20, file) {
            Ok(r) => r,
            Err(PcapError::Eof) => bail!("{name}: empty (not a pcap or pcapng file)"),
            Err(e) => bail!("{name}: not a pcap or pcapng file ({e:?} at byte 0)"),
        };
        let mut offset = 0u64;
        // pcapng: each interface's link type, in order of appearance within the section.
        let mut interfaces: Vec<Linktype> = Vec::new();
        let mut legacy = Linktype::ETHERNET;
        loop {
            match reader.next() {
                Ok((n, block)) => {
                    match block {
                        PcapBlockOwned::LegacyHeader(h) => legacy = h.network,
                        PcapBlockOwned::Legacy(b) => self.packet(legacy, b.data),
                        PcapBlockOwned::NG(Block::SectionHeader(_)) => interfaces.clear(),
                        PcapBlockOwned::NG(Block::InterfaceDescription(i)) => {
                            interfaces.push(i.linktype)
                        }
                        PcapBlockOwned::NG(Block::EnhancedPacket(p)) => {
                            let lt = interfaces.get(p.if_id as usize).copied();
                            match lt {
                                Some(lt) => self.packet(lt, p.data),
                                None => bail!(
                                    "{name}: a packet of interface {} at byte {offset}, which no \
                                     interface description precedes",
                                    p.if_id
                                ),
                            }
                        }
                        PcapBlockOwned::NG(Block::SimplePacket(p)) => {
                            let lt = interfaces.first().copied().unwrap_or(Linktype::ETHERNET);
                            self.packet(lt, p.data)
                        }
                        PcapBlockOwned::NG(_) => {}
                    }
                    offset += n as u64;
                    reader.consume(n);
                }
                Err(PcapError::Eof) => break,
                Err(PcapError::Incomplete(_)) => {
                    if reader.reader_exhausted() {
                        bail!("{name}: truncated: the block at byte {offset} is cut short");
                    }
                    if let Err(e) = reader.refill() {
                        bail!("{name}: reading at byte {offset}: {e:?}");
                    }
                }
                Err(PcapError::UnexpectedEof) => {
                    bail!("{name}: truncated: the block at byte {offset} is cut short")
                }
                Err(e) => bail!("{name}: malformed block at byte {offset}: {e:?}"),
            }
        }
        Ok(())
    }

    /// One captured frame of link type `lt`.
    fn packet(&mut self, lt: Linktype, data: &[u8]) {
        let sliced = match lt {
            Linktype::ETHERNET => SlicedPacket::from_ethernet(data),
            Linktype::LINUX_SLL => SlicedPacket::from_linux_sll(data),
            // LINKTYPE_RAW, and DLT_RAW's numbers on some systems (12, 14); IPv4, IPv6.
            Linktype::RAW | Linktype(12) | Linktype(14) | Linktype::IPV4 | Linktype::IPV6 => {
                SlicedPacket::from_ip(data)
            }
            _ => {
                self.skipped += 1;
                return;
            }
        };
        let Ok(p) = sliced else {
            self.skipped += 1;
            return;
        };
        let (Some(net), Some(TransportSlice::Tcp(tcp))) = (p.net, p.transport) else {
            self.skipped += 1;
            return;
        };
        let (src, dst): (IpAddr, IpAddr) = match &net {
            NetSlice::Ipv4(s) => (
                s.header().source_addr().into(),
                s.header().destination_addr().into(),
            ),
            NetSlice::Ipv6(s) => (
                s.header().source_addr().into(),
                s.header().destination_addr().into(),
            ),
        };
        self.packets += 1;
        let from = SocketAddr::new(src, tcp.source_port());
        let to = SocketAddr::new(dst, tcp.destination_port());
        let order = self.order;
        let c = self
            .connections
            .entry(key(from, to))
            .or_insert_with(|| Connection {
                first: order,
                client: None,
                halves: HashMap::new(),
            });
        self.order += 1;
        if tcp.syn() && !tcp.ack() {
            c.client = Some(from);
        }
        c.halves
            .entry(from)
            .or_default()
            .segment(tcp.sequence_number(), tcp.syn(), tcp.payload());
    }

    /// Every connection's server-to-client bytes, in the order the connections began.
    pub fn streams(self) -> Vec<Stream> {
        let mut conns: Vec<((SocketAddr, SocketAddr), Connection)> =
            self.connections.into_iter().collect();
        conns.sort_by_key(|(_, c)| c.first);
        conns
            .into_iter()
            .filter_map(|((a, b), mut c)| {
                let server = match c.client {
                    Some(cl) if cl == a => b,
                    Some(_) => a,
                    None if a.port() <= b.port() => a,
                    None => b,
                };
                let half = c.halves.remove(&server)?;
                (!half.data.is_empty()).then(|| Stream {
                    port: server.port(),
                    bytes: half.data,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;
    use std::time::Duration;

    fn segment(
        from: ([u8; 4], u16),
        to: ([u8; 4], u16),
        seq: u32,
        syn: bool,
        ack: bool,
        data: &[u8],
    ) -> Vec<u8> {
        let mut b = PacketBuilder::ipv4(from.0, to.0, 64).tcp(from.1, to.1, seq, 65535);
        if syn {
            b = b.syn();
        }
        if ack {
            b = b.ack(1);
        }
        let mut out = Vec::new();
        b.write(&mut out, data).unwrap();
        out
    }

    /// A capture the emulator's writer makes (LINKTYPE_RAW): a handshake, the server's bytes
    /// out of order with a retransmission.
    #[test]
    fn a_connection_is_reassembled_from_raw_ip_in_any_order() {
        let dir = std::env::temp_dir().join(format!("roam-pcap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.pcap");
        let (c, s) = (([10, 0, 0, 2], 40000), ([10, 0, 0, 1], 80));
        let mut w = roam_emu::pcap::PcapWriter::create(&path).unwrap();
        let t = Duration::from_secs(1);
        for p in [
            segment(c, s, 100, true, false, b""),
            segment(s, c, 5000, true, true, b""),
            segment(c, s, 101, false, true, b"GET / HTTP/1.0\r\n\r\n"),
            segment(s, c, 5001 + 6, false, true, b"world"),
            segment(s, c, 5001, false, true, b"hello "),
            segment(s, c, 5001, false, true, b"hello "),
        ] {
            w.write(t, &p).unwrap();
        }
        w.flush().unwrap();
        drop(w);
        let mut caps = Captures::default();
        caps.read(&path).unwrap();
        let streams = caps.streams();
        assert_eq!(streams.len(), 1);
        assert_eq!(streams[0].port, 80);
        assert_eq!(streams[0].bytes, b"hello world");
        // Cut short, and not a capture at all: errors that say which and where.
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        let e = Captures::default().read(&path).unwrap_err().to_string();
        assert!(e.contains("truncated") && e.contains("t.pcap"), "{e}");
        std::fs::write(&path, b"this is not a capture at all, just some text").unwrap();
        let e = Captures::default().read(&path).unwrap_err().to_string();
        assert!(e.contains("not a pcap"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
