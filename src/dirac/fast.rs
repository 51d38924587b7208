//! The spin-projected hopping term (1320 flops/site): for each hop, project the neighbour's
//! spinor to a half spinor h = psi_up + s A_mu psi_dn (s = -1 forward, +1 backward, A_mu
//! the upper-right block of g_mu), multiply the two colour vectors of h by the link, and
//! rebuild the lower half as s A_mu^+ (U h). Rayon over sites; each output site is
//! written by one task, so the result does not depend on the thread count.

use super::Sites;
use crate::field::gamma::ChiralBlock;
use crate::field::su3::{Colour, C64, ZERO};
use crate::field::{GaugeField, SpinorField};
use crate::lattice::NDIM;
use rayon::prelude::*;

#[inline(always)]
fn load(psi: &[C64], site: usize) -> [[C64; 3]; 4] {
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
fn project(b: &ChiralBlock, p: &[[C64; 3]; 4], sign: f64, phase: f64) -> [Colour; 2] {
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
fn accumulate(b: &ChiralBlock, acc: &mut [[C64; 3]; 4], uh: &[Colour; 2], sign: f64) {
    for r in 0..2 {
        let lo = b.apply_dagger(r, uh);
        for c in 0..3 {
            acc[r][c] += uh[r][c];
            acc[2 + r][c] += lo[c] * sign;
        }
    }
}

/// out = H psi on the selected sites (zero elsewhere).
pub fn hop(gauge: &GaugeField, psi: &SpinorField, out: &mut SpinorField, sites: Sites) {
    let l = &gauge.lattice;
    let blocks: [ChiralBlock; NDIM] = std::array::from_fn(ChiralBlock::of);
    let psi = &psi.data;
    out.data
        .par_chunks_mut(12)
        .enumerate()
        .for_each(|(x, o)| {
            if let Sites::Parity(p) = sites {
                if l.parity(x) != p {
                    o.fill(ZERO);
                    return;
                }
            }
            let mut acc = [[ZERO; 3]; 4];
            for mu in 0..NDIM {
                let b = &blocks[mu];
                let (up, ph) = l.neighbour(x, mu, true);
                let h = project(b, &load(psi, up), -1.0, ph);
                let u = gauge.link(x, mu);
                let uh = [u.mul_vec(&h[0]), u.mul_vec(&h[1])];
                accumulate(b, &mut acc, &uh, -1.0);

                let (dn, ph) = l.neighbour(x, mu, false);
                let h = project(b, &load(psi, dn), 1.0, ph);
                let u = gauge.link(dn, mu);
                let uh = [u.dagger_mul_vec(&h[0]), u.dagger_mul_vec(&h[1])];
                accumulate(b, &mut acc, &uh, 1.0);
            }
            for s in 0..4 {
                o[3 * s..3 * s + 3].copy_from_slice(&acc[s]);
            }
        });
}
