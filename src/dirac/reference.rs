//! The reference hopping term, written the seed's way (report 004, listing 2): the spinor
//! at a site is a 3x4 matrix (colour rows, spin columns); for each of the 8 hops,
//! `tmp1 = psi(neighbour) * Li` (xgemm34x44, Li the transposed spin matrix 1 -/+ g_mu)
//! and `tmp2 += Ulink * tmp1` (xgemm33x34), with Ulink = U_mu(x) up and U_mu(x-mu)^+ down.
//! No projection, no sparsity: obviously right, and slow.

use crate::field::gamma::projector;
use crate::field::su3::{C64, ZERO};
use crate::field::{GaugeField, SpinorField};
use crate::geometry::lattice::NDIM;
use rayon::prelude::*;

type M34 = [[C64; 4]; 3];
type M44 = [[C64; 4]; 4];

/// The seed's Li matrices: Li[mu][0] for the up hop (transpose of 1 - g_mu), Li[mu][1]
/// for the down hop (transpose of 1 + g_mu).
pub fn li_matrices() -> [[M44; 2]; NDIM] {
    let mut li = [[[[ZERO; 4]; 4]; 2]; NDIM];
    for (mu, l) in li.iter_mut().enumerate() {
        for (d, sign) in [(0, -1.0), (1, 1.0)] {
            let p = projector(mu, sign);
            for i in 0..4 {
                for j in 0..4 {
                    l[d][i][j] = p[j][i];
                }
            }
        }
    }
    li
}

/// xgemm34x44: c = a * b.
fn xgemm34x44(a: &M34, b: &M44) -> M34 {
    let mut c = [[ZERO; 4]; 3];
    for i in 0..3 {
        for j in 0..4 {
            for k in 0..4 {
                c[i][j] += a[i][k] * b[k][j];
            }
        }
    }
    c
}

/// xgemm33x34 accumulating: c += a * b.
fn xgemm33x34_acc(a: &[[C64; 3]; 3], b: &M34, c: &mut M34) {
    for i in 0..3 {
        for j in 0..4 {
            for k in 0..3 {
                c[i][j] += a[i][k] * b[k][j];
            }
        }
    }
}

fn as_matrix(psi: &SpinorField, site: usize, phase: f64) -> M34 {
    let mut m = [[ZERO; 4]; 3];
    for (c, row) in m.iter_mut().enumerate() {
        for (s, z) in row.iter_mut().enumerate() {
            *z = psi.data[crate::field::spinor::idx(site, s, c)] * phase;
        }
    }
    m
}

/// H psi for every site.
pub fn hop(gauge: &GaugeField, psi: &SpinorField) -> SpinorField {
    let l = &gauge.lattice;
    let li = li_matrices();
    let mut out = SpinorField::zeros(l.volume());
    out.data.par_chunks_mut(12).enumerate().for_each(|(x, o)| {
        let mut tmp2 = [[ZERO; 4]; 3];
        for mu in 0..NDIM {
            let (up, ph_up) = l.neighbour(x, mu, true);
            let tmp1 = xgemm34x44(&as_matrix(psi, up, ph_up), &li[mu][0]);
            xgemm33x34_acc(&gauge.link(x, mu).0, &tmp1, &mut tmp2);

            let (dn, ph_dn) = l.neighbour(x, mu, false);
            let tmp1 = xgemm34x44(&as_matrix(psi, dn, ph_dn), &li[mu][1]);
            xgemm33x34_acc(&gauge.link(dn, mu).dagger().0, &tmp1, &mut tmp2);
        }
        for c in 0..3 {
            for s in 0..4 {
                o[s * 3 + c] = tmp2[c][s];
            }
        }
    });
    out
}
