//! Operators of the multigrid hierarchy as dense nearest-neighbour stencils, and the
//! transfer between levels (adaptive aggregation: Brannick et al. 2008, Babich et al.
//! 2010; the shape of QUDA's `coarse_op` and DD-alpha-AMG's coarse operator).
//!
//! A level's field holds `dof` complex numbers a site, site after site in the lexicographic
//! order of its lattice; the first half of a site's numbers has chirality +1, the second
//! -1. The fine Wilson field is such a field with dof = 12 (DeGrand-Rossi: g5 =
//! diag(1, 1, -1, -1), spins 0 and 1 first), and every coarse field is one because its
//! aggregates are split by chirality. An operator of a level is then
//!
//! ```text
//! out(x) = X(x) in(x) + sum_{d < 8} Y_d(x) in(x + e_d)
//! ```
//!
//! with e_d = +mu for d = mu and -mu for d = 4 + mu, and dense dof x dof matrices X and
//! Y_d (`Stencil`). The fine Wilson-clover operator is one (`WilsonStencil`, its
//! matrices made on the fly from the links), and so is the coarse operator
//! P^dag D P (`galerkin`), stored densely (`CoarseOp`), so one Galerkin product serves
//! every level.

pub mod galerkin;
pub mod op;
pub mod seam;
pub mod transfer;

pub use galerkin::galerkin;
pub use op::CoarseOp;
pub use seam::{host_coarsen, CoarseLevelSpace, CoarseOperator, Coarsen, LevelSpace};
pub use transfer::{Aggregation, Prolongator};

use super::clover::SiteTerms;
use crate::field::gamma::projector;
use crate::field::su3::{C64, ZERO};
use crate::field::GaugeField;
use crate::geometry::lattice::{Boundary, Lattice, NDIM};
use crate::Result;
use rayon::prelude::*;

/// Hop directions of a nearest-neighbour stencil: d = mu forward, 4 + mu backward.
pub const HOPS: usize = 2 * NDIM;

/// The neighbour of `x` in hop direction `d` and the hop's fermion phase.
#[inline]
pub fn hop_target(lattice: &Lattice, x: usize, d: usize) -> (usize, f64) {
    lattice.neighbour(x, d % NDIM, d < NDIM)
}

/// A periodic lattice of `dims` (a coarse level's geometry: no fermion phases there,
/// they are inside the fine links' products).
pub fn periodic(dims: [usize; NDIM]) -> Result<Lattice> {
    Lattice::new(dims, [Boundary::Periodic; NDIM])
}

/// A level's operator as dense site and hop matrices (row-major, dof x dof).
pub trait Stencil: Sync {
    /// The lattice of this level (with the fermion boundary of the fine level).
    fn lattice(&self) -> &Lattice;
    /// Complex numbers a site (even: two chiral halves).
    fn dof(&self) -> usize;
    /// m = X(x).
    fn site_matrix(&self, x: usize, m: &mut [C64]);
    /// m = Y_d(x): what multiplies in(x + e_d) in out(x), the hop's phase included.
    fn hop_matrix(&self, x: usize, d: usize, m: &mut [C64]);
    /// The fine Wilson operator this stencil is, if it is one (a backend may then form
    /// its Galerkin product from the links).
    fn as_wilson(&self) -> Option<&WilsonStencil<'_>> {
        None
    }
}

/// out = M v for a dof x dof row-major M (accumulating when `add`).
#[inline]
pub fn mat_vec(m: &[C64], v: &[C64], out: &mut [C64], add: bool) {
    let n = v.len();
    for (i, o) in out.iter_mut().enumerate() {
        let row = &m[i * n..(i + 1) * n];
        let s: C64 = row.iter().zip(v).map(|(a, b)| a * b).sum();
        if add {
            *o += s;
        } else {
            *o = s;
        }
    }
}

/// out = A inp for any stencil, site by site from its matrices: the obviously right form
/// the tests hold the coarse operator and the fine kernels to.
pub fn apply_stencil(stencil: &dyn Stencil, inp: &[C64], out: &mut [C64]) {
    let n = stencil.dof();
    let lattice = stencil.lattice();
    out.par_chunks_mut(n).enumerate().for_each(|(x, o)| {
        let mut m = vec![ZERO; n * n];
        stencil.site_matrix(x, &mut m);
        mat_vec(&m, &inp[x * n..(x + 1) * n], o, false);
        for d in 0..HOPS {
            let (y, _) = hop_target(lattice, x, d);
            stencil.hop_matrix(x, d, &mut m);
            mat_vec(&m, &inp[y * n..(y + 1) * n], o, true);
        }
    });
}

/// The Wilson(-clover, twisted) operator D = A - kappa H of `docs/conventions.md` as a
/// stencil of 12 numbers a site (index spin * 3 + colour): X = A (1 without a site term),
/// Y_mu = -kappa (1 - g_mu) U_mu(x), Y_{4+mu} = -kappa (1 + g_mu) U_mu(x - mu)^dag, each
/// times the boundary phase of its hop.
pub struct WilsonStencil<'a> {
    pub gauge: &'a GaugeField,
    pub kappa: f64,
    pub terms: Option<&'a SiteTerms>,
    spin: [[[[C64; 4]; 4]; 2]; NDIM],
}

impl<'a> WilsonStencil<'a> {
    pub fn new(gauge: &'a GaugeField, kappa: f64, terms: Option<&'a SiteTerms>) -> Self {
        WilsonStencil {
            gauge,
            kappa,
            terms,
            spin: std::array::from_fn(|mu| [projector(mu, -1.0), projector(mu, 1.0)]),
        }
    }

    /// The spin matrix of hop d: 1 - g_mu forward (d < 4), 1 + g_mu backward.
    pub fn hop_spin(&self, d: usize) -> &[[C64; 4]; 4] {
        &self.spin[d % NDIM][usize::from(d >= NDIM)]
    }
}

impl Stencil for WilsonStencil<'_> {
    fn lattice(&self) -> &Lattice {
        &self.gauge.lattice
    }
    fn as_wilson(&self) -> Option<&WilsonStencil<'_>> {
        Some(self)
    }
    fn dof(&self) -> usize {
        12
    }
    fn site_matrix(&self, x: usize, m: &mut [C64]) {
        m.fill(ZERO);
        match self.terms {
            None => (0..12).for_each(|i| m[i * 13] = C64::new(1.0, 0.0)),
            Some(t) => {
                for b in 0..2 {
                    let blk = t.block(x, b);
                    for (i, row) in blk.iter().enumerate() {
                        for (j, v) in row.iter().enumerate() {
                            m[(6 * b + i) * 12 + 6 * b + j] = *v;
                        }
                    }
                }
            }
        }
    }
    fn hop_matrix(&self, x: usize, d: usize, m: &mut [C64]) {
        let lattice = &self.gauge.lattice;
        let mu = d % NDIM;
        let (y, phase) = hop_target(lattice, x, d);
        let spin = self.hop_spin(d);
        let u = if d < NDIM {
            *self.gauge.link(x, mu)
        } else {
            self.gauge.link(y, mu).dagger()
        };
        let f = -self.kappa * phase;
        for s in 0..4 {
            for t in 0..4 {
                let g = spin[s][t] * f;
                for c in 0..3 {
                    for e in 0..3 {
                        m[(3 * s + c) * 12 + 3 * t + e] = g * u.0[c][e];
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dirac::{apply_reference_with, Action};
    use crate::field::SpinorField;
    use crate::linalg::Operator;

    /// The stencil form of D is the reference operator (dirac::reference, an independent
    /// formulation: the seed's 3x4 products), to rounding.
    #[test]
    fn wilson_stencil_is_the_reference_operator() {
        let lattice = Lattice::new(
            [4, 4, 2, 4],
            [
                Boundary::Periodic,
                Boundary::Periodic,
                Boundary::Periodic,
                Boundary::Antiperiodic,
            ],
        )
        .unwrap();
        let gauge = GaugeField::random(&lattice, 7);
        let psi = SpinorField::random(lattice.volume(), 3, 0);
        for action in [
            Action::wilson(0.13),
            Action {
                kappa: 0.13,
                csw: 1.7,
                mu: 0.05,
            },
        ] {
            let terms = action
                .has_site_term()
                .then(|| SiteTerms::new(&gauge, &action).unwrap());
            let st = WilsonStencil::new(&gauge, action.kappa, terms.as_ref());
            let mut out = vec![ZERO; psi.data.len()];
            apply_stencil(&st, &psi.data, &mut out);
            let want =
                apply_reference_with(Operator::D, &gauge, action.kappa, terms.as_ref(), &psi);
            let err = out
                .iter()
                .zip(&want.data)
                .map(|(a, b)| (a - b).norm())
                .fold(0.0, f64::max);
            assert!(err < 1e-13, "{}: max deviation {err}", action.describe());
        }
    }
}
