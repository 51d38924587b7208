//! The coarse operator by Galerkin projection, D_c = P^dag D P, for any level's stencil:
//! on aggregate a,
//!
//! ```text
//! X_c(a)   = sum_{x in a} [ P(x)^dag X(x) P(x) + sum_{d: x + e_d in a} P(x)^dag Y_d(x) P(x + e_d) ]
//! Y_c,d(a) = sum_{x in a, x + e_d not in a} P(x)^dag Y_d(x) P(x + e_d)
//! ```
//!
//! A hop that leaves a lands in a's neighbour in direction d (blocks tile the lattice), so
//! D_c is again nearest-neighbour. The products that land on a's own site from one x (its
//! site matrix and the hops that stay in a) share one left product P(x)^dag (...): with
//! 4^4 blocks on average three left products a site instead of nine, the left product being four
//! fifths of the work. With one block across a whole extent every hop of that
//! direction stays inside and the coarse hop is zero.

use super::{hop_target, CoarseOp, Prolongator, Stencil, HOPS};
use crate::field::su3::{C64, ZERO};
use crate::{Error, Result};
use rayon::prelude::*;

/// P^dag A P for the level operator `fine` and the prolongator `p` of its lattice.
pub fn galerkin(fine: &dyn Stencil, p: &Prolongator) -> Result<CoarseOp> {
    let agg = &p.aggregation;
    if fine.dof() != p.fine_dof || fine.lattice().dims != agg.fine.dims {
        return Err(Error::internal(format!(
            "galerkin: an operator of {} numbers a site on {:?}, a prolongator of {} on {:?}",
            fine.dof(),
            fine.lattice().dims,
            p.fine_dof,
            agg.fine.dims
        )));
    }
    let (n, cd) = (p.fine_dof, p.coarse_dof());
    let mut op = CoarseOp::zeros(agg.coarse.clone(), cd);
    let c2 = cd * cd;
    let per_site: Vec<(Vec<C64>, Vec<C64>)> = (0..agg.coarse.volume())
        .into_par_iter()
        .map(|a| {
            let mut site = vec![ZERO; c2];
            let mut hops = vec![ZERO; HOPS * c2];
            let mut m = vec![ZERO; n * n];
            // t: what lands on a's own coarse site from x, X(x) P(x) plus the hops that
            // stay in a (one left product for all of them); u: one hop that leaves a.
            let mut t = vec![ZERO; n * cd];
            let mut u = vec![ZERO; n * cd];
            for &x in agg.members(a) {
                fine.site_matrix(x, &mut m);
                right(p, x, &m, &mut t, false);
                for d in 0..HOPS {
                    let (y, _) = hop_target(fine.lattice(), x, d);
                    fine.hop_matrix(x, d, &mut m);
                    if agg.aggregate_of(y) == a {
                        right(p, y, &m, &mut t, true);
                    } else {
                        right(p, y, &m, &mut u, false);
                        left(p, x, &u, &mut hops[d * c2..(d + 1) * c2]);
                    }
                }
                left(p, x, &t, &mut site);
            }
            (site, hops)
        })
        .collect();
    for (a, (site, hops)) in per_site.into_iter().enumerate() {
        op.site[a * c2..(a + 1) * c2].copy_from_slice(&site);
        op.hops[a * HOPS * c2..(a + 1) * HOPS * c2].copy_from_slice(&hops);
    }
    Ok(op)
}

/// t = M P(y) (or t += M P(y) when `add`) for the fine matrix M (n x n) from site y; t is
/// n x 2 nvec, column (s', w) the chiral half s' of vector w.
fn right(p: &Prolongator, y: usize, m: &[C64], t: &mut [C64], add: bool) {
    let (n, nvec, h, cd) = (p.fine_dof, p.nvec, p.fine_dof / 2, p.coarse_dof());
    // t[i][(s', w)] = sum_{j in half s'} M[i][j] V_w(y)[j]
    for w in 0..nvec {
        let vy = p.vector(y, w);
        for i in 0..n {
            let row = &m[i * n..(i + 1) * n];
            for s in 0..2 {
                let mut sum = ZERO;
                for j in s * h..(s + 1) * h {
                    sum += row[j] * vy[j];
                }
                let at = &mut t[i * cd + s * nvec + w];
                *at = if add { *at + sum } else { sum };
            }
        }
    }
}

/// acc += P(x)^dag t for t = (sum of) M P(y) from `right`: the n x 2 nvec product's
/// coarse rows, the cd x cd contribution of x.
fn left(p: &Prolongator, x: usize, t: &[C64], acc: &mut [C64]) {
    let (nvec, h, cd) = (p.nvec, p.fine_dof / 2, p.coarse_dof());
    // acc[(s, v)][col] += sum_{i in half s} conj(V_v(x)[i]) t[i][col]
    for v in 0..nvec {
        let vx = p.vector(x, v);
        for s in 0..2 {
            let out = &mut acc[(s * nvec + v) * cd..(s * nvec + v + 1) * cd];
            for i in s * h..(s + 1) * h {
                let c = vx[i].conj();
                if c == ZERO {
                    continue;
                }
                let trow = &t[i * cd..(i + 1) * cd];
                for (o, tv) in out.iter_mut().zip(trow) {
                    *o += c * tv;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::transfer::tests::random_vectors;
    use super::super::{apply_stencil, Aggregation, WilsonStencil};
    use super::*;
    use crate::dirac::clover::SiteTerms;
    use crate::dirac::Action;
    use crate::field::GaugeField;
    use crate::geometry::lattice::{Boundary, Lattice, NDIM};

    fn max_diff(a: &[C64], b: &[C64]) -> f64 {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).norm())
            .fold(0.0, f64::max)
    }

    /// D_c v = P^dag D P v for random coarse v: the stored coarse operator against the fine
    /// operator applied through the transfer, for Wilson-clover on a random field with an
    /// antiperiodic time boundary, at two levels (the second coarsening of the first
    /// coarse operator, and a block of the whole extent in x).
    #[test]
    fn coarse_operator_is_the_projection_of_the_fine_one() {
        let mut bc = [Boundary::Periodic; NDIM];
        bc[3] = Boundary::Antiperiodic;
        let fine = Lattice::new([4, 4, 4, 8], bc).unwrap();
        let gauge = GaugeField::random(&fine, 5);
        let action = Action {
            kappa: 0.12,
            csw: 1.5,
            mu: 0.0,
        };
        let terms = SiteTerms::new(&gauge, &action).unwrap();
        let st = WilsonStencil::new(&gauge, action.kappa, Some(&terms));
        let agg = Aggregation::new(&fine, [2, 2, 2, 2], "b").unwrap();
        let p = Prolongator::new(agg, 12, &random_vectors(fine.volume(), 12, 3, 4)).unwrap();
        let dc = galerkin(&st, &p).unwrap();
        let check = |fine_op: &dyn Stencil, p: &Prolongator, dc: &CoarseOp, seed: u64| {
            let nc = dc.volume() * dc.dof;
            let v = &random_vectors(dc.volume(), dc.dof, 1, seed)[0];
            let mut pv = vec![ZERO; p.aggregation.fine.volume() * p.fine_dof];
            p.prolong(v, &mut pv);
            let mut dpv = vec![ZERO; pv.len()];
            apply_stencil(fine_op, &pv, &mut dpv);
            let mut want = vec![ZERO; nc];
            p.restrict(&dpv, &mut want);
            let mut got = vec![ZERO; nc];
            dc.apply(v, &mut got);
            let scale = want.iter().map(|z| z.norm()).fold(0.0, f64::max);
            let err = max_diff(&got, &want) / scale;
            assert!(err < 1e-13, "relative deviation {err}");
        };
        check(&st, &p, &dc, 9);
        // The next level: blocks of 2 x 1 x 2 x 2 ... and the whole x extent in one.
        let agg2 = Aggregation::new(&dc.lattice, [2, 2, 1, 2], "b").unwrap();
        let p2 =
            Prolongator::new(agg2, dc.dof, &random_vectors(dc.volume(), dc.dof, 2, 8)).unwrap();
        let dc2 = galerkin(&dc, &p2).unwrap();
        check(&dc, &p2, &dc2, 10);
        assert!(dc2.hops[..dc2.dof * dc2.dof].iter().all(|z| *z == ZERO));
    }

    /// The coarse operator keeps g5-hermiticity (D^dag = g5 D g5 for Wilson-clover, and P
    /// commutes with g5): <u, g5 D_c v> = <g5 D_c u, v> to rounding.
    #[test]
    fn coarse_operator_is_gamma5_hermitian() {
        let fine = Lattice::new([4, 4, 4, 4], [Boundary::Periodic; NDIM]).unwrap();
        let gauge = GaugeField::random(&fine, 2);
        let st = WilsonStencil::new(&gauge, 0.1, None);
        let agg = Aggregation::new(&fine, [2, 2, 2, 2], "b").unwrap();
        let p = Prolongator::new(agg, 12, &random_vectors(fine.volume(), 12, 3, 6)).unwrap();
        let dc = galerkin(&st, &p).unwrap();
        let nc = dc.volume() * dc.dof;
        let vs = random_vectors(dc.volume(), dc.dof, 2, 12);
        let g5 = |v: &mut [C64]| {
            for site in v.chunks_mut(dc.dof) {
                site[dc.dof / 2..].iter_mut().for_each(|z| *z = -*z);
            }
        };
        let (mut du, mut dv) = (vec![ZERO; nc], vec![ZERO; nc]);
        dc.apply(&vs[0], &mut du);
        dc.apply(&vs[1], &mut dv);
        g5(&mut du);
        g5(&mut dv);
        let left: C64 = vs[0].iter().zip(&dv).map(|(a, b)| a.conj() * b).sum();
        let right: C64 = du.iter().zip(&vs[1]).map(|(a, b)| a.conj() * b).sum();
        assert!(
            (left - right).norm() < 1e-12 * left.norm(),
            "{left} vs {right}"
        );
    }

    /// The even Schur complement of the coarse operator solves the full system: with
    /// x_o = X_oo^-1 (b_o - Y_oe x_e) and M_ee x_e = b_e - Y_eo X_oo^-1 b_o, D_c x = b.
    /// Checked by building b = D_c x for a random x and recovering b_e from x.
    #[test]
    fn coarse_schur_complement_matches_the_full_operator() {
        let fine = Lattice::new([4, 4, 4, 4], [Boundary::Periodic; NDIM]).unwrap();
        let gauge = GaugeField::random(&fine, 3);
        let st = WilsonStencil::new(&gauge, 0.11, None);
        let agg = Aggregation::new(&fine, [2, 2, 2, 2], "b").unwrap();
        let p = Prolongator::new(agg, 12, &random_vectors(fine.volume(), 12, 2, 1)).unwrap();
        let dc = galerkin(&st, &p).unwrap().with_site_inverse().unwrap();
        let (n, vh) = (dc.dof, dc.volume() / 2);
        let x = &random_vectors(dc.volume(), n, 1, 2)[0];
        let mut b = vec![ZERO; x.len()];
        dc.apply(x, &mut b);
        let half = |f: &[C64], p: usize| -> Vec<C64> {
            (0..vh)
                .flat_map(|cb| {
                    let s = dc.lattice.checkerboard_site(p, cb);
                    f[s * n..(s + 1) * n].to_vec()
                })
                .collect()
        };
        let (x_e, b_e, b_o) = (half(x, 0), half(&b, 0), half(&b, 1));
        // rhs_e = b_e - Y_eo X_oo^-1 b_o
        let mut xo_b = vec![ZERO; vh * n];
        dc.apply_site_half(1, &b_o, &mut xo_b, true).unwrap();
        let mut rhs_e = b_e.clone();
        dc.hop_half(0, &xo_b, &mut rhs_e, C64::new(-1.0, 0.0), true);
        let mut m_xe = vec![ZERO; vh * n];
        let mut tmp = [vec![ZERO; vh * n], vec![ZERO; vh * n]];
        dc.apply_schur(&x_e, &mut m_xe, &mut tmp).unwrap();
        let scale = rhs_e.iter().map(|z| z.norm()).fold(0.0, f64::max);
        assert!(max_diff(&m_xe, &rhs_e) / scale < 1e-12);
    }
}
