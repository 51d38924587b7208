//! The random numbers of the gauge generator: every draw is a pure function of
//! (seed, sweep, site, direction, subgroup, step) through one Philox4x32-10 block, so a run
//! gives the same field for any thread count and `kernels/heatbath.cu` draws the same bits.
//!
//! # The contract with the GPU kernel (keep `kernels/heatbath.cu` in step with this)
//!
//! ```text
//! key[0]     = seed bits  0..31          key[1]     = seed bits 32..63
//! counter[0] = site: global lexicographic index x + LX*(y + LY*(z + LZ*t))
//! counter[1] = sweep: 0-based index of the compound sweep, thermalisation included
//! counter[2] = 0x4842_0000 | subgroup << 2 | mu      ("HB" tag; subgroup 0..2, mu 0..3)
//! counter[3] = step: 0 -> direction of the SU(2) element,
//!                    1 + 2t and 2 + 2t -> the four uniforms of trial t of the a0 sampler
//!                    (Creutz's sampler uses only block 1 + 2t)
//! ```
//!
//! A block of four 32-bit words (w0, w1, w2, w3) gives two doubles in (0, 1]:
//! `u53(w0, w1)` and `u53(w2, w3)` with `u53(hi, lo) = ((hi >> 5) * 2^26 + (lo >> 6) + 0.5)
//! / 2^53`, the conversion of `rng::Stream::uniform` (the top value rounds to exactly 1.0,
//! which no formula below minds; 0 never occurs, so logarithms are finite).
//!
//! Subgroups are numbered 0 = rows/cols (0,1), 1 = (0,2), 2 = (1,2). Overrelaxation draws
//! nothing. The tag keeps these counters apart from `GaugeField::random`'s hot start, whose
//! counter[2] is a link index below V*4 < 2^29 < 0x4842_0000, under the same key.

use crate::rng::philox4x32;

/// The tag in the upper half of counter[2] ("HB").
pub const HB_TAG: u32 = 0x4842_0000;

/// The 64-bit Philox key of a seed.
#[inline]
pub fn seed_key(seed: u64) -> [u32; 2] {
    [seed as u32, (seed >> 32) as u32]
}

/// A double in (0, 1] from two 32-bit words, 53 random bits (same as `Stream::uniform`).
#[inline]
pub fn u53(hi: u32, lo: u32) -> f64 {
    let bits = ((hi >> 5) as u64) << 26 | (lo >> 6) as u64;
    (bits as f64 + 0.5) / (1u64 << 53) as f64
}

/// The draws of one SU(2) subgroup update of one link in one sweep.
#[derive(Clone, Copy, Debug)]
pub struct Su2Draws {
    key: [u32; 2],
    prefix: [u32; 3],
}

impl Su2Draws {
    pub fn new(seed: u64, sweep: u32, site: u32, mu: usize, subgroup: usize) -> Self {
        debug_assert!(mu < 4 && subgroup < 3);
        Su2Draws {
            key: seed_key(seed),
            prefix: [site, sweep, HB_TAG | (subgroup as u32) << 2 | mu as u32],
        }
    }

    /// The Philox counter of block `step` (see the module comment).
    #[inline]
    pub fn counter(&self, step: u32) -> [u32; 4] {
        [self.prefix[0], self.prefix[1], self.prefix[2], step]
    }

    /// The two uniforms of block `step`.
    #[inline]
    pub fn pair(&self, step: u32) -> (f64, f64) {
        let w = philox4x32(self.counter(step), self.key);
        (u53(w[0], w[1]), u53(w[2], w[3]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Stream;

    #[test]
    fn u53_matches_stream_uniform() {
        // Stream::new(seed, stream) draws block b from counter [b, 0, stream lo, stream hi];
        // its first uniform is u53(w0, w1) of block 0.
        let mut s = Stream::new(0x1234_5678_9abc_def0, 77);
        let w = philox4x32([0, 0, 77, 0], seed_key(0x1234_5678_9abc_def0));
        assert_eq!(s.uniform().to_bits(), u53(w[0], w[1]).to_bits());
        assert_eq!(s.uniform().to_bits(), u53(w[2], w[3]).to_bits());
    }

    #[test]
    fn counter_layout_is_the_documented_one() {
        let d = Su2Draws::new(0xAAAA_BBBB_CCCC_DDDD, 7, 1234, 3, 2);
        assert_eq!(d.key, [0xCCCC_DDDD, 0xAAAA_BBBB]);
        assert_eq!(d.counter(5), [1234, 7, 0x4842_000B, 5]);
        assert!(u53(u32::MAX, u32::MAX) <= 1.0 && u53(0, 0) > 0.0);
    }
}
