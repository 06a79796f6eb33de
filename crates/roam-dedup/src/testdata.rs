//! Bytes for the crate's tests: noise (incompressible, like compressed media) and text-like
//! bytes from a small alphabet, both from a seeded xorshift.

/// `n` bytes of xorshift noise from `seed`.
pub(crate) fn noise(n: usize, seed: u64) -> Vec<u8> {
    xorshift(seed).take(n).map(|x| x as u8).collect()
}

/// `n` text-like bytes (letters and spaces) from `seed`.
pub(crate) fn text(n: usize, seed: u64) -> Vec<u8> {
    const A: &[u8; 32] = b"abcdefgh ijk lmnop qrs tuv wxyz ";
    xorshift(seed)
        .take(n)
        .map(|x| A[(x % 32) as usize])
        .collect()
}

fn xorshift(seed: u64) -> impl Iterator<Item = u64> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    std::iter::repeat_with(move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    })
}
