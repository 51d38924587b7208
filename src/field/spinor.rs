//! Spinor fields on the host: 12 complex numbers per site in the canonical order
//! `[site][spin][colour]` (spin slower than colour), site index of `Lattice::index`.

use super::gamma::GAMMA5_SIGN;
use super::su3::{Su3, C64};
use crate::geometry::lattice::{Lattice, NDIM};
use crate::rng::Stream;
use rayon::prelude::*;

/// Complex numbers per site: 4 spins x 3 colours.
pub const SITE_LEN: usize = 12;

#[derive(Clone, Debug, PartialEq)]
pub struct SpinorField {
    pub data: Vec<C64>,
}

#[inline]
pub fn idx(site: usize, spin: usize, colour: usize) -> usize {
    site * SITE_LEN + spin * 3 + colour
}

/// `n` complex zeros from zeroed memory (see `SpinorField::zeros`).
pub fn zeroed_complex(n: usize) -> Vec<C64> {
    const _: () = assert!(
        std::mem::size_of::<C64>() == 16 && std::mem::align_of::<C64>() == 8,
        "C64 is two f64"
    );
    // vec![0.0f64; m] allocates zeroed memory (calloc) of exactly m values.
    let mut v = std::mem::ManuallyDrop::new(vec![0.0f64; 2 * n]);
    if v.capacity() != 2 * n {
        return vec![C64::new(0.0, 0.0); n];
    }
    // SAFETY: the allocation holds 2n f64 = n C64 (Complex<f64> is #[repr(C)] {re, im},
    // size 16, align 8, as asserted above: the same size and alignment as allocated), all
    // bits zero, which is 0.0 + 0.0i; ownership moves to the new Vec (ManuallyDrop).
    unsafe { Vec::from_raw_parts(v.as_mut_ptr() as *mut C64, n, n) }
}

impl SpinorField {
    /// A zero field. Its memory comes zeroed from the allocator (calloc: fresh pages are
    /// mapped lazily, so the cost is paid by whoever writes them, in parallel), not
    /// written once here on one thread: a 48^3x96 field is 2 GB.
    pub fn zeros(volume: usize) -> Self {
        SpinorField {
            data: zeroed_complex(volume * SITE_LEN),
        }
    }

    /// A copy written in parallel (`clone` copies on one thread).
    pub fn par_clone(&self) -> SpinorField {
        let mut out = SpinorField::zeros(self.volume());
        crate::threads::par_copy(&mut out.data, &self.data);
        out
    }

    pub fn volume(&self) -> usize {
        self.data.len() / SITE_LEN
    }

    /// A delta source at one site, spin and colour.
    pub fn point(lattice: &Lattice, site: [usize; NDIM], spin: usize, colour: usize) -> Self {
        let mut f = SpinorField::zeros(lattice.volume());
        f.data[idx(lattice.index(site), spin, colour)] = C64::new(1.0, 0.0);
        f
    }

    /// Complex Gaussian noise, each site from its own counter-based stream (thread-count
    /// independent). `stream_base` separates sources drawn with the same seed.
    pub fn random(volume: usize, seed: u64, stream_base: u64) -> Self {
        let data = (0..volume)
            .into_par_iter()
            .flat_map_iter(|x| {
                let mut s = Stream::new(seed, stream_base.wrapping_add(x as u64));
                (0..SITE_LEN)
                    .map(|_| C64::new(s.gaussian(), s.gaussian()))
                    .collect::<Vec<_>>()
            })
            .collect();
        SpinorField { data }
    }

    /// e^{i p.x} u with p_mu = (2 n_mu + theta_mu) pi / L_mu, theta = 1 for antiperiodic
    /// directions, so the wave satisfies the fermion boundary conditions.
    pub fn plane_wave(lattice: &Lattice, n: [i64; NDIM], u: &[C64; SITE_LEN]) -> Self {
        let p = plane_wave_momentum(lattice, n);
        let data = (0..lattice.volume())
            .into_par_iter()
            .flat_map_iter(|x| {
                let c = lattice.coords(x);
                let phase: f64 = (0..NDIM).map(|mu| p[mu] * c[mu] as f64).sum();
                let e = C64::from_polar(1.0, phase);
                u.iter().map(move |&z| e * z).collect::<Vec<_>>()
            })
            .collect();
        SpinorField { data }
    }

    /// Multiply each site's colour vectors by G(x) (gauge transformation of a spinor).
    pub fn gauge_transform(&self, g: &[Su3]) -> SpinorField {
        let mut out = self.par_clone();
        out.data
            .par_chunks_mut(SITE_LEN)
            .enumerate()
            .for_each(|(x, s)| {
                for spin in 0..4 {
                    let v = [s[3 * spin], s[3 * spin + 1], s[3 * spin + 2]];
                    let w = g[x].mul_vec(&v);
                    s[3 * spin..3 * spin + 3].copy_from_slice(&w);
                }
            });
        out
    }

    /// g5 psi (DeGrand-Rossi: diag(1, 1, -1, -1) in spin).
    pub fn gamma5(&self) -> SpinorField {
        let mut out = self.par_clone();
        out.data.par_chunks_mut(SITE_LEN).for_each(|s| {
            for (k, z) in s.iter_mut().enumerate() {
                *z *= GAMMA5_SIGN[k / 3];
            }
        });
        out
    }

    pub fn norm2(&self) -> f64 {
        crate::reduce::det_sum(&self.data, |z| z.norm_sqr())
    }

    /// ||a - b|| / ||b||.
    pub fn rel_diff(&self, b: &SpinorField) -> f64 {
        let num = crate::reduce::det_sum2(&self.data, &b.data, 0.0, |x, y| (x - y).norm_sqr());
        (num / b.norm2()).sqrt()
    }
}

/// The momentum of a plane wave with integer mode numbers n on this lattice.
pub fn plane_wave_momentum(lattice: &Lattice, n: [i64; NDIM]) -> [f64; NDIM] {
    let mut p = [0.0; NDIM];
    for mu in 0..NDIM {
        let theta = match lattice.boundary[mu] {
            crate::geometry::lattice::Boundary::Periodic => 0.0,
            crate::geometry::lattice::Boundary::Antiperiodic => 1.0,
        };
        p[mu] = (2.0 * n[mu] as f64 + theta) * std::f64::consts::PI / lattice.dims[mu] as f64;
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_fields_are_zero_and_parallel_clones_are_copies() {
        // Sizes around the parallel copy's 65536-element chunks (and zero).
        for volume in [0, 1, 5461, 5462, 20000] {
            let z = SpinorField::zeros(volume);
            assert_eq!(z.data.len(), volume * SITE_LEN);
            assert!(z
                .data
                .iter()
                .all(|c| c.re.to_bits() == 0 && c.im.to_bits() == 0));
            let r = SpinorField::random(volume, 7, 0);
            assert_eq!(r.par_clone(), r);
            // g5 flips spins 2 and 3 (DeGrand-Rossi), as the sign table says.
            let g = r.gamma5();
            for (k, (a, b)) in g.data.iter().zip(&r.data).enumerate() {
                assert_eq!(*a, *b * GAMMA5_SIGN[(k % SITE_LEN) / 3]);
            }
        }
    }
}
