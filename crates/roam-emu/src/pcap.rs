//! Packet capture in the classic pcap format (readable by tcpdump, Wireshark and tshark): the
//! packets an emulated link delivers, one file per link and direction, as raw IP
//! (`LINKTYPE_RAW`), stamped with the wall-clock time they left the link.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::time::Duration;

/// `LINKTYPE_RAW`: each packet begins with its IPv4 or IPv6 header.
const LINKTYPE_RAW: u32 = 101;
/// The largest packet kept whole.
const SNAPLEN: u32 = 65_535;

/// Writes one pcap file.
pub struct PcapWriter {
    out: BufWriter<File>,
}

impl PcapWriter {
    /// Create `path` and write the file header.
    pub fn create(path: &Path) -> io::Result<PcapWriter> {
        let mut out = BufWriter::new(File::create(path)?);
        out.write_all(&0xa1b2_c3d4u32.to_le_bytes())?; // magic: microsecond stamps
        out.write_all(&2u16.to_le_bytes())?; // version 2.4
        out.write_all(&4u16.to_le_bytes())?;
        out.write_all(&0i32.to_le_bytes())?; // time zone offset
        out.write_all(&0u32.to_le_bytes())?; // timestamp accuracy
        out.write_all(&SNAPLEN.to_le_bytes())?;
        out.write_all(&LINKTYPE_RAW.to_le_bytes())?;
        Ok(PcapWriter { out })
    }

    /// Append `packet`, taken at `unix` (time since the Unix epoch).
    pub fn write(&mut self, unix: Duration, packet: &[u8]) -> io::Result<()> {
        let kept = packet.len().min(SNAPLEN as usize);
        self.out.write_all(&(unix.as_secs() as u32).to_le_bytes())?;
        self.out.write_all(&unix.subsec_micros().to_le_bytes())?;
        self.out.write_all(&(kept as u32).to_le_bytes())?;
        self.out.write_all(&(packet.len() as u32).to_le_bytes())?;
        self.out.write_all(&packet[..kept])
    }

    /// Write out what is buffered.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes follow the format: a 24-byte header, then per packet a 16-byte record header
    /// and the packet.
    #[test]
    fn a_capture_has_the_pcap_layout() {
        let path = std::env::temp_dir().join(format!("roam-pcap-{}.pcap", std::process::id()));
        let mut w = PcapWriter::create(&path).unwrap();
        let packet = [0x45u8, 0, 0, 20, 1, 2, 3, 4];
        w.write(Duration::new(1_700_000_000, 250_000_000), &packet)
            .unwrap();
        w.flush().unwrap();
        let b = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).ok();
        assert_eq!(b.len(), 24 + 16 + packet.len());
        assert_eq!(&b[..4], &[0xd4, 0xc3, 0xb2, 0xa1]);
        assert_eq!(u32::from_le_bytes(b[20..24].try_into().unwrap()), 101);
        let rec = &b[24..40];
        assert_eq!(
            u32::from_le_bytes(rec[..4].try_into().unwrap()),
            1_700_000_000
        );
        assert_eq!(u32::from_le_bytes(rec[4..8].try_into().unwrap()), 250_000);
        assert_eq!(u32::from_le_bytes(rec[8..12].try_into().unwrap()), 8);
        assert_eq!(&b[40..], &packet);
    }
}
