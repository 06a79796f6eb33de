//! Content-defined chunking: where a byte stream is cut into chunks, decided by the bytes
//! themselves, so that an insertion moves only the chunks around it and the same content cuts
//! the same way in any stream.
//!
//! Two chunkers behind [`Chunking`]:
//! - **FastCDC** (Xia et al., USENIX ATC 2016, the `fastcdc` crate's 2020 version): a gear
//!   hash with normalized chunk sizes, several times faster than Rabin; the default.
//! - **Rabin fingerprints** over a 48-byte window, the thesis's chunker (§4.4.1, and LBFS's
//!   before it): a polynomial fingerprint modulo an irreducible polynomial over GF(2), a cut
//!   where its low bits are all ones. Kept to compare (`roam bench dedup` measures both).

use fastcdc::v2020::FastCDC;

/// How a stream is cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chunking {
    /// FastCDC with these sizes (bytes; the crate's limits: min >= 64, avg >= 256, max >= 1024).
    FastCdc { min: u32, avg: u32, max: u32 },
    /// Rabin fingerprints: a cut where the fingerprint's low `log2(avg)` bits are all ones,
    /// no chunk shorter than `min` or longer than `max` (`avg` a power of two).
    Rabin { min: u32, avg: u32, max: u32 },
}

impl Default for Chunking {
    /// FastCDC, 256 bytes on average: the smallest the crate allows, near the thesis's 128-byte
    /// comparison (small chunks find more redundancy; each costs a 10-byte reference).
    fn default() -> Chunking {
        Chunking::FastCdc {
            min: 64,
            avg: 256,
            max: 2048,
        }
    }
}

/// A chunking the crate refuses, and why.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("chunk sizes min {min}, avg {avg}, max {max}: {why}")]
pub struct BadChunking {
    min: u32,
    avg: u32,
    max: u32,
    why: &'static str,
}

impl Chunking {
    /// The thesis's Rabin chunking: 128 bytes on average (its comparison's segment size), at
    /// least 16 (twice a name: no reference is longer than what it replaces).
    pub const RABIN: Chunking = Chunking::Rabin {
        min: 16,
        avg: 128,
        max: 2048,
    };

    /// Check the sizes.
    pub fn validate(&self) -> Result<(), BadChunking> {
        let (min, avg, max) = self.sizes();
        let bad = |why| Err(BadChunking { min, avg, max, why });
        // A literal's length must fit the shim's 15 bits.
        if max > crate::wire::MAX_SHIM_LEN as u32 {
            return bad("max above 32767 (the shim's 15-bit length)");
        }
        if !(min <= avg && avg <= max) {
            return bad("not min <= avg <= max");
        }
        match self {
            Chunking::FastCdc { .. } => {
                if min < fastcdc::v2020::MINIMUM_MIN
                    || avg < fastcdc::v2020::AVERAGE_MIN
                    || max < fastcdc::v2020::MAXIMUM_MIN
                {
                    return bad("FastCDC needs min >= 64, avg >= 256, max >= 1024");
                }
            }
            Chunking::Rabin { .. } => {
                if !avg.is_power_of_two() || (min as usize) < crate::name::Name::LEN * 2 {
                    return bad("Rabin needs a power-of-two avg and min >= 16");
                }
            }
        }
        Ok(())
    }

    /// The mean chunk size it aims at, bytes.
    pub fn avg(&self) -> u32 {
        self.sizes().1
    }

    fn sizes(&self) -> (u32, u32, u32) {
        match *self {
            Chunking::FastCdc { min, avg, max } | Chunking::Rabin { min, avg, max } => {
                (min, avg, max)
            }
        }
    }

    /// The end offset of every chunk of `data`, in order; the last is `data.len()` (a cut
    /// forced by the end of the data, not by its content, unless it falls there by chance).
    pub fn cuts(&self, data: &[u8], out: &mut Vec<usize>) {
        out.clear();
        if data.is_empty() {
            return;
        }
        match *self {
            Chunking::FastCdc { min, avg, max } => {
                out.extend(FastCDC::new(data, min, avg, max).map(|c| c.offset + c.length));
            }
            Chunking::Rabin { min, avg, max } => rabin::cuts(data, min, avg, max, out),
        }
    }
}

/// The thesis's Rabin fingerprints (the rolling polynomial fingerprint of LBFS), written here:
/// a fingerprint is the window's bytes, read as a polynomial over GF(2), modulo an irreducible
/// polynomial of degree 63; sliding the window one byte removes the outgoing byte's term
/// (table `OUT`) and multiplies by x^8 with the incoming byte added, reducing the overflow
/// (table `SHIFT`).
mod rabin {
    use std::sync::OnceLock;

    /// An irreducible polynomial of degree 63 over GF(2) (the one LBFS published).
    const POLY: u64 = 0xbfe6_b8a5_bf37_8d83;
    /// Bytes in the window.
    pub const WINDOW: usize = 48;
    const SHIFT_BITS: u32 = 55; // degree - 8

    struct Tables {
        shift: [u64; 256],
        out: [u64; 256],
    }

    /// `a * x mod POLY` for `a` of degree below 63.
    fn mulx(a: u64) -> u64 {
        let s = a << 1;
        if s >> 63 == 1 {
            s ^ POLY
        } else {
            s
        }
    }

    /// `f * x^8 + byte mod POLY`, given the tables.
    #[inline]
    fn append(shift: &[u64; 256], f: u64, byte: u8) -> u64 {
        ((f << 8) | u64::from(byte)) ^ shift[(f >> SHIFT_BITS) as usize]
    }

    fn tables() -> &'static Tables {
        static T: OnceLock<Tables> = OnceLock::new();
        T.get_or_init(|| {
            // SHIFT[t]: cancels the bit that f << 8 keeps at 63 (t's low bit) and adds
            // t * x^63 mod POLY, the reduction of the bits shifted out.
            let x63 = POLY ^ (1 << 63);
            let mut shift = [0u64; 256];
            for (t, s) in shift.iter_mut().enumerate() {
                let mut acc = 0u64;
                let mut term = x63;
                for bit in 0..8 {
                    if t >> bit & 1 == 1 {
                        acc ^= term;
                    }
                    term = mulx(term);
                }
                *s = acc ^ ((t as u64) << 63);
            }
            // OUT[b]: b * x^(8 (WINDOW - 1)) mod POLY, the outgoing byte's term.
            let mut out = [0u64; 256];
            for (b, o) in out.iter_mut().enumerate() {
                let mut f = b as u64;
                for _ in 0..WINDOW - 1 {
                    f = append(&shift, f, 0);
                }
                *o = f;
            }
            Tables { shift, out }
        })
    }

    pub fn cuts(data: &[u8], min: u32, avg: u32, max: u32, out: &mut Vec<usize>) {
        let t = tables();
        let mask = u64::from(avg - 1);
        let (min, max) = (min as usize, max as usize);
        let mut start = 0;
        while start < data.len() {
            let end = (start + max).min(data.len());
            let mut f = 0u64;
            let mut cut = end;
            // The fingerprint covers the last WINDOW bytes; start it WINDOW before `min`.
            let warm = (start + min).saturating_sub(WINDOW).max(start);
            for i in warm..end {
                if i >= warm + WINDOW {
                    f ^= t.out[data[i - WINDOW] as usize];
                }
                f = append(&t.shift, f, data[i]);
                if i + 1 - start >= min && f & mask == mask {
                    cut = i + 1;
                    break;
                }
            }
            out.push(cut);
            start = cut;
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// The window's fingerprint computed from scratch.
        fn direct(window: &[u8]) -> u64 {
            let t = tables();
            window.iter().fold(0, |f, &b| append(&t.shift, f, b))
        }

        #[test]
        fn sliding_equals_recomputing() {
            let t = tables();
            let data: Vec<u8> = (0..500u64)
                .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
                .collect();
            let mut f = 0;
            for i in 0..data.len() {
                if i >= WINDOW {
                    f ^= t.out[data[i - WINDOW] as usize];
                }
                f = append(&t.shift, f, data[i]);
                if i + 1 >= WINDOW {
                    assert_eq!(f, direct(&data[i + 1 - WINDOW..=i]), "at {i}");
                }
                assert!(f >> 63 == 0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::noise;

    #[test]
    fn cuts_cover_the_data_within_the_sizes_and_resynchronise_after_an_insert() {
        for c in [Chunking::default(), Chunking::RABIN] {
            c.validate().unwrap();
            let (min, _, max) = c.sizes();
            let data = noise(200_000, 7);
            let mut cuts = Vec::new();
            c.cuts(&data, &mut cuts);
            assert_eq!(*cuts.last().unwrap(), data.len());
            let mut prev = 0;
            for (i, &e) in cuts.iter().enumerate() {
                let len = e - prev;
                assert!(len <= max as usize, "{c:?}: chunk {i} is {len}");
                if i + 1 < cuts.len() {
                    assert!(len >= min as usize, "{c:?}: chunk {i} is {len}");
                }
                prev = e;
            }
            // Ten bytes inserted near the start: the cuts after the next few are the same.
            let mut edited = data[..1000].to_vec();
            edited.extend_from_slice(b"0123456789");
            edited.extend_from_slice(&data[1000..]);
            let mut cuts2 = Vec::new();
            c.cuts(&edited, &mut cuts2);
            let shifted: std::collections::HashSet<usize> = cuts2.iter().map(|e| e - 10).collect();
            let kept = cuts.iter().filter(|e| shifted.contains(e)).count();
            assert!(
                kept * 10 >= cuts.len() * 9,
                "{c:?}: {kept} of {}",
                cuts.len()
            );
        }
    }

    #[test]
    fn bad_sizes_are_refused() {
        let bad = Chunking::FastCdc {
            min: 64,
            avg: 256,
            max: 40_000,
        };
        assert!(bad.validate().unwrap_err().to_string().contains("15-bit"));
        assert!(Chunking::Rabin {
            min: 16,
            avg: 100,
            max: 2048
        }
        .validate()
        .is_err());
    }
}
