//! The spin-projected hopping term (1320 flops/site): for each hop, project the neighbour's
//! spinor to a half spinor h = psi_up + s A_mu psi_dn (s = -1 forward, +1 backward, A_mu
//! the upper-right block of g_mu), multiply the two colour vectors of h by the link, and
//! rebuild the lower half as s A_mu^+ (U h). Rayon over sites; each output site is
//! written by one task, so the result does not depend on the thread count.

use super::Sites;
use crate::field::gamma::ChiralBlock;
use crate::field::su3::{Colour, C64, ZERO};
use crate::field::{GaugeField, SpinorField};
use crate::geometry::lattice::NDIM;
use rayon::prelude::*;

/// A_mu for x, y, z, t as compile-time constants, so the unrolled loop over mu needs no
/// run-time phase dispatch; `chiral_blocks_match_gamma` checks them against `ChiralBlock::of`.
pub const CHIRAL_BLOCKS: [ChiralBlock; NDIM] = [
    ChiralBlock {
        col: [1, 0],
        phase: [1, 1],
    },
    ChiralBlock {
        col: [1, 0],
        phase: [2, 0],
    },
    ChiralBlock {
        col: [0, 1],
        phase: [1, 3],
    },
    ChiralBlock {
        col: [0, 1],
        phase: [0, 0],
    },
];

#[inline(always)]
pub(crate) fn load(psi: &[C64], site: usize) -> [[C64; 3]; 4] {
    let s = &psi[site * 12..site * 12 + 12];
    [
        [s[0], s[1], s[2]],
        [s[3], s[4], s[5]],
        [s[6], s[7], s[8]],
        [s[9], s[10], s[11]],
    ]
}

/// h_r = psi_r + s (A psi_dn)_r for r = 0, 1, times the boundary phase.
#[inline(always)]
pub(crate) fn project(b: &ChiralBlock, p: &[[C64; 3]; 4], sign: f64, phase: f64) -> [Colour; 2] {
    let lower = [p[2], p[3]];
    let mut h = [[ZERO; 3]; 2];
    for r in 0..2 {
        let a = b.apply(r, &lower);
        for c in 0..3 {
            h[r][c] = (p[r][c] + a[c] * sign) * phase;
        }
    }
    h
}

#[inline(always)]
pub(crate) fn accumulate(b: &ChiralBlock, acc: &mut [[C64; 3]; 4], uh: &[Colour; 2], sign: f64) {
    for r in 0..2 {
        let lo = b.apply_dagger(r, uh);
        for c in 0..3 {
            acc[r][c] += uh[r][c];
            acc[2 + r][c] += lo[c] * sign;
        }
    }
}

/// What the kernel writes at a site once the hopping sum `acc` is known.
#[derive(Clone, Copy, Debug)]
pub enum Epilogue {
    /// out = H psi.
    Hop,
    /// out = psi - kappa H psi, times g5 when `gamma5` (fused: no second pass).
    Wilson { kappa: f64, gamma5: bool },
}

/// out = H psi on the selected sites (zero elsewhere).
pub fn hop(gauge: &GaugeField, psi: &SpinorField, out: &mut SpinorField, sites: Sites) {
    apply(gauge, psi, out, sites, Epilogue::Hop)
}

/// The hopping sum with its epilogue, on the selected sites (zero elsewhere).
pub fn apply(
    gauge: &GaugeField,
    psi: &SpinorField,
    out: &mut SpinorField,
    sites: Sites,
    epilogue: Epilogue,
) {
    let l = &gauge.lattice;
    let blocks = &CHIRAL_BLOCKS;
    let psi = &psi.data;
    out.data.par_chunks_mut(12).enumerate().for_each(|(x, o)| {
        if let Sites::Parity(p) = sites {
            if l.parity(x) != p {
                o.fill(ZERO);
                return;
            }
        }
        let mut acc = [[ZERO; 3]; 4];
        let nb = l.neighbours(x);
        for mu in 0..NDIM {
            let b = &blocks[mu];
            let (up, ph) = nb[mu][0];
            let h = project(b, &load(psi, up), -1.0, ph);
            let u = gauge.link(x, mu);
            let uh = [u.mul_vec(&h[0]), u.mul_vec(&h[1])];
            accumulate(b, &mut acc, &uh, -1.0);

            let (dn, ph) = nb[mu][1];
            let h = project(b, &load(psi, dn), 1.0, ph);
            let u = gauge.link(dn, mu);
            let uh = [u.dagger_mul_vec(&h[0]), u.dagger_mul_vec(&h[1])];
            accumulate(b, &mut acc, &uh, 1.0);
        }
        match epilogue {
            Epilogue::Hop => {
                for s in 0..4 {
                    o[3 * s..3 * s + 3].copy_from_slice(&acc[s]);
                }
            }
            Epilogue::Wilson { kappa, gamma5 } => {
                let own = load(psi, x);
                for s in 0..4 {
                    let sign = if gamma5 && s >= 2 { -1.0 } else { 1.0 };
                    for c in 0..3 {
                        o[3 * s + c] = (own[s][c] - acc[s][c] * kappa) * sign;
                    }
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chiral_blocks_match_gamma() {
        for (mu, b) in CHIRAL_BLOCKS.iter().enumerate() {
            let g = ChiralBlock::of(mu);
            assert_eq!((b.col, b.phase), (g.col, g.phase), "mu = {mu}");
        }
    }
}
