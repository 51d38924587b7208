//! The half-precision storage format (QUDA's "half"): a site's 12 complex numbers, 24
//! reals, kept as signed 16-bit integers q with one f32 norm per site, value = q / 32767 *
//! norm, norm = the site's largest |real| (rounded to f32). Every backend rounds a half
//! field site by site through these functions (the GPU kernels, kernels/half.cu and
//! v3_core.cuh, do the same operations), so the CPU backend's half fields are the
//! validator of the GPU's.
//!
//! Rounding a site moves each real by at most half a step, norm / 32767 / 2 (plus the f32
//! rounding of the norm, below 2^-24 of it): `round_site` promises |error| <= norm / 32767.

use crate::field::C64;

/// The largest stored integer: q in -32767..=32767 (QUDA's MAX_SHORT).
pub const MAX_SHORT: f64 = 32767.0;

/// Bytes per site of a half spinor: 24 16-bit integers and the f32 norm.
pub const SITE_BYTES: u64 = 24 * 2 + 4;

/// A site's stored form: the 24 integers (re, im of each complex in order) and the norm.
pub fn quantize_site(site: &[C64]) -> ([i16; 24], f32) {
    let max = site
        .iter()
        .fold(0.0f64, |m, z| m.max(z.re.abs()).max(z.im.abs()));
    let norm = max as f32;
    let mut q = [0i16; 24];
    if norm > 0.0 {
        let scale = MAX_SHORT / norm as f64;
        for (k, z) in site.iter().enumerate() {
            q[2 * k] = to_short(z.re * scale);
            q[2 * k + 1] = to_short(z.im * scale);
        }
    }
    (q, norm)
}

/// The real a stored integer means.
#[inline]
pub fn dequantize(q: i16, norm: f32) -> f64 {
    q as f64 * (norm as f64 / MAX_SHORT)
}

/// Round to the nearest integer (ties to even, as the GPU's rint) and clamp to the
/// stored range (a norm rounded below the largest |real| may put it a hair past 32767).
#[inline]
fn to_short(v: f64) -> i16 {
    v.round_ties_even().clamp(-MAX_SHORT, MAX_SHORT) as i16
}

/// Replace a site's values (12 complex) by what a half field stores.
pub fn round_site(site: &mut [C64]) {
    let (q, norm) = quantize_site(site);
    for (k, z) in site.iter_mut().enumerate() {
        *z = C64::new(dequantize(q[2 * k], norm), dequantize(q[2 * k + 1], norm));
    }
}

/// Round every site (12 complex each) of a field's data, in parallel.
pub fn round_sites(data: &mut [C64]) {
    use rayon::prelude::*;
    data.par_chunks_mut(12).for_each(round_site);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(seed: u64) -> Vec<C64> {
        // A deterministic spread of magnitudes over six decades, both signs.
        let mut s = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut next = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = (s >> 11) as f64 / (1u64 << 53) as f64;
            (u - 0.5) * 10f64.powf(3.0 * ((s >> 7) & 1) as f64 - 3.0 * u)
        };
        (0..12).map(|_| C64::new(next(), next())).collect()
    }

    /// Each rounded real is within norm / 32767 of the original (half a step, 0.5 *
    /// norm / 32767, plus the norm's f32 rounding: the analytic bound of the format), the
    /// largest real keeps its magnitude to that bound, and rounding twice changes nothing
    /// (a stored site is a fixed point, so repeated stores do not drift).
    #[test]
    fn a_site_rounds_within_one_step_of_its_norm_and_is_a_fixed_point() {
        for seed in 0..200 {
            let orig = site(seed);
            let norm = orig
                .iter()
                .fold(0.0f64, |m, z| m.max(z.re.abs()).max(z.im.abs()));
            let mut r = orig.clone();
            round_site(&mut r);
            for (a, b) in orig.iter().zip(&r) {
                assert!((a.re - b.re).abs() <= norm / MAX_SHORT, "{a} vs {b}");
                assert!((a.im - b.im).abs() <= norm / MAX_SHORT, "{a} vs {b}");
            }
            let mut again = r.clone();
            round_site(&mut again);
            assert_eq!(again, r, "seed {seed}");
        }
    }

    /// The largest |real| is stored as +-32767 exactly (q / 32767 * norm = the f32 norm),
    /// and an all-zero site stays zero (norm 0, no division).
    #[test]
    fn the_largest_real_maps_to_max_short_and_zero_sites_stay_zero() {
        let mut s = vec![C64::new(0.25, -3.0), C64::new(1.5, 0.0)];
        s.resize(12, C64::new(0.0, 0.0));
        let (q, norm) = quantize_site(&s);
        assert_eq!(norm, 3.0);
        assert_eq!(q[1], -32767);
        // 0.25 / 3 * 32767 = 2730.58 -> 2731; 1.5 / 3 * 32767 = 16383.5 -> 16384 (ties to even)
        assert_eq!(q[0], 2731);
        assert_eq!(q[2], 16384);
        let mut z = vec![C64::new(0.0, 0.0); 12];
        round_site(&mut z);
        assert!(z.iter().all(|c| *c == C64::new(0.0, 0.0)));
    }
}
