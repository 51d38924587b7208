//! The site-local part of the Wilson-clover and twisted-mass operators (docs:
//! conventions.md, The clover term and twisted mass):
//!
//! ```text
//! D = A - kappa H,   A(x) = 1 + i kappa c_sw sum_{mu<nu} sigma_{mu nu} Fhat_{mu nu}(x)
//!                           + 2 i kappa mu g5,
//! sigma_{mu nu} = (i/2) [g_mu, g_nu],   Fhat_{mu nu} = (1/8) (Q_{mu nu} - Q_{mu nu}^+),
//! ```
//!
//! with Q the four plaquette leaves in the mu-nu plane at x, all oriented the same way;
//! Fhat keeps its trace, as in openQCD, QUDA, Chroma and Grid. This is openQCD's
//! `c_sw (i/4) sigma_{mu nu} Fhat_{mu nu}` (summed over all mu, nu) times 2 kappa.
//!
//! In the DeGrand-Rossi basis sigma_{mu nu} commutes with g5 = diag(1, 1, -1, -1), so A
//! is block diagonal: chirality block b holds spins 2b, 2b+1 (each 3 colours), a 6x6
//! matrix indexed by (spin - 2b) * 3 + colour. The clover part of each block is Hermitian
//! and is stored packed, 36 reals a block, 72 a site (`pack`); the twist adds +i 2 kappa mu
//! to block 0 and -i 2 kappa mu to block 1. The inverse of each whole block is kept as a
//! full complex matrix (the CPU's even-odd needs A_oo^-1). Everything here is written
//! plainly from the definitions: it is the reference the fast paths are checked against.

use super::Action;
use crate::field::gamma::{gamma, SpinMatrix};
use crate::field::su3::{Su3, C64, ONE, ZERO};
use crate::field::{GaugeField, SpinorField};
use crate::geometry::lattice::Lattice;
use crate::geometry::partition::Partition;
use crate::{Error, Result};
use rayon::prelude::*;

/// A 6x6 complex matrix (one chirality block of a site).
pub type Block = [[C64; 6]; 6];
/// Reals of a packed Hermitian block: 6 diagonal reals, then the 15 entries below the
/// diagonal (row > col, row-major) as (re, im).
pub const PACKED_BLOCK: usize = 36;
/// Reals of a site's clover term.
pub const PACKED_SITE: usize = 2 * PACKED_BLOCK;

/// Flops per site of applying A (two 6x6 complex mat-vecs, QUDA's count for the clover
/// term: 504).
pub const CLOVER_FLOPS_PER_SITE: u64 = 504;

/// The six planes mu < nu in the order the field strength is stored.
pub const PLANES: [(usize, usize); 6] = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)];

/// sigma_{mu nu} = (i/2) [g_mu, g_nu] (Hermitian).
pub fn sigma(mu: usize, nu: usize) -> SpinMatrix {
    let (a, b) = (gamma(mu), gamma(nu));
    let mut s = [[ZERO; 4]; 4];
    for i in 0..4 {
        for j in 0..4 {
            let mut c = ZERO;
            for k in 0..4 {
                c += a[i][k] * b[k][j] - b[i][k] * a[k][j];
            }
            s[i][j] = C64::new(0.0, 0.5) * c;
        }
    }
    s
}

fn shift(gauge: &GaugeField, x: usize, mu: usize, forward: bool) -> usize {
    gauge.lattice.neighbour(x, mu, forward).0
}

/// Q_{mu nu}(x): the sum of the four plaquette leaves at x in the mu-nu plane, each a
/// counter-clockwise loop (first step +mu, then +nu, for the leaf in the first quadrant).
pub fn leaves(gauge: &GaugeField, x: usize, mu: usize, nu: usize) -> Su3 {
    let u = |y: usize, d: usize| *gauge.link(y, d);
    let ud = |y: usize, d: usize| gauge.link(y, d).dagger();
    let xpm = shift(gauge, x, mu, true);
    let xpn = shift(gauge, x, nu, true);
    let xmm = shift(gauge, x, mu, false);
    let xmn = shift(gauge, x, nu, false);
    let xmm_pn = shift(gauge, xmm, nu, true);
    let xmm_mn = shift(gauge, xmm, nu, false);
    let xpm_mn = shift(gauge, xpm, nu, false);
    let l1 = u(x, mu) * u(xpm, nu) * ud(xpn, mu) * ud(x, nu);
    let l2 = u(x, nu) * ud(xmm_pn, mu) * ud(xmm, nu) * u(xmm, mu);
    let l3 = ud(xmm, mu) * ud(xmm_mn, nu) * u(xmm_mn, mu) * u(xmn, nu);
    let l4 = ud(xmn, nu) * u(xmn, mu) * u(xpm_mn, nu) * ud(x, mu);
    let mut q = Su3::zero();
    for l in [l1, l2, l3, l4] {
        for i in 0..3 {
            for j in 0..3 {
                q.0[i][j] += l.0[i][j];
            }
        }
    }
    q
}

/// Fhat_{mu nu}(x) = (1/8)(Q - Q^+): anti-Hermitian, its trace kept (an element of
/// u(3), as in openQCD, QUDA, Chroma and Grid).
pub fn field_strength(gauge: &GaugeField, x: usize, mu: usize, nu: usize) -> Su3 {
    let q = leaves(gauge, x, mu, nu);
    let mut f = Su3::zero();
    for i in 0..3 {
        for j in 0..3 {
            f.0[i][j] = (q.0[i][j] - q.0[j][i].conj()) * 0.125;
        }
    }
    f
}

/// The clover part of A at x as two 6x6 blocks: 1 + i kappa c_sw sum sigma (x) Fhat.
pub fn clover_blocks(gauge: &GaugeField, x: usize, kappa: f64, csw: f64) -> [Block; 2] {
    let mut blocks = [[[ZERO; 6]; 6]; 2];
    for block in blocks.iter_mut() {
        for (k, row) in block.iter_mut().enumerate() {
            row[k] = ONE;
        }
    }
    if csw == 0.0 {
        return blocks;
    }
    let coeff = C64::new(0.0, kappa * csw);
    for &(mu, nu) in &PLANES {
        let s = sigma(mu, nu);
        let f = field_strength(gauge, x, mu, nu);
        for (b, block) in blocks.iter_mut().enumerate() {
            for s1 in 0..2 {
                for s2 in 0..2 {
                    let sv = s[2 * b + s1][2 * b + s2];
                    if sv == ZERO {
                        continue;
                    }
                    for c1 in 0..3 {
                        for c2 in 0..3 {
                            block[3 * s1 + c1][3 * s2 + c2] += coeff * sv * f.0[c1][c2];
                        }
                    }
                }
            }
        }
    }
    blocks
}

/// A Hermitian block packed into 36 reals (the lower triangle; the upper is its
/// conjugate).
pub fn pack(block: &Block) -> [f64; PACKED_BLOCK] {
    let mut p = [0.0; PACKED_BLOCK];
    for (i, row) in block.iter().enumerate() {
        p[i] = row[i].re;
    }
    let mut k = 6;
    for (i, row) in block.iter().enumerate() {
        for z in &row[..i] {
            p[k] = z.re;
            p[k + 1] = z.im;
            k += 2;
        }
    }
    p
}

/// The Hermitian block from its 36 packed reals.
pub fn unpack(p: &[f64]) -> Block {
    let mut b = [[ZERO; 6]; 6];
    for (i, row) in b.iter_mut().enumerate() {
        row[i] = C64::new(p[i], 0.0);
    }
    let mut k = 6;
    for i in 0..6 {
        for j in 0..i {
            let z = C64::new(p[k], p[k + 1]);
            b[i][j] = z;
            b[j][i] = z.conj();
            k += 2;
        }
    }
    b
}

/// The inverse of a 6x6 complex matrix by Gauss-Jordan elimination with partial
/// pivoting; None when a pivot vanishes (the block is singular).
pub fn invert(m: &Block) -> Option<Block> {
    let mut a = *m;
    let mut inv = [[ZERO; 6]; 6];
    for (i, row) in inv.iter_mut().enumerate() {
        row[i] = ONE;
    }
    for col in 0..6 {
        let piv = (col..6).max_by(|&i, &j| a[i][col].norm().total_cmp(&a[j][col].norm()))?;
        if a[piv][col].norm() < 1e-300 || !a[piv][col].norm().is_finite() {
            return None;
        }
        a.swap(col, piv);
        inv.swap(col, piv);
        let d = ONE / a[col][col];
        for j in 0..6 {
            a[col][j] *= d;
            inv[col][j] *= d;
        }
        for i in 0..6 {
            if i != col {
                let f = a[i][col];
                if f != ZERO {
                    for j in 0..6 {
                        let (ac, ic) = (a[col][j], inv[col][j]);
                        a[i][j] -= f * ac;
                        inv[i][j] -= f * ic;
                    }
                }
            }
        }
    }
    Some(inv)
}

/// The conjugate transpose of a block.
pub fn adjoint_of(m: &Block) -> Block {
    std::array::from_fn(|i| std::array::from_fn(|j| m[j][i].conj()))
}

/// out = m v for a block and a 6-vector.
#[inline]
pub fn block_mul(m: &Block, v: &[C64]) -> [C64; 6] {
    std::array::from_fn(|i| (0..6).map(|j| m[i][j] * v[j]).sum())
}

/// The site-local term A of an action on every site of a lattice: the packed clover
/// blocks (72 reals a site) and the inverse of each whole block (twist included).
pub struct SiteTerms {
    pub kappa: f64,
    pub csw: f64,
    /// 2 kappa mu: block 0 gets +i twist, block 1 -i twist.
    pub twist: f64,
    pub clover: Vec<[f64; PACKED_SITE]>,
    inverse: Vec<[Block; 2]>,
}

impl SiteTerms {
    /// Build A and its inverse on every site; a singular block is an error naming the
    /// site (it happens only for c_sw far beyond any simulated value).
    pub fn new(gauge: &GaugeField, action: &Action) -> Result<SiteTerms> {
        let sites: Vec<usize> = (0..gauge.lattice.volume()).collect();
        SiteTerms::on_sites(gauge, action, &sites, |x| gauge.lattice.coords(x))
    }

    /// Build A and its inverse on the sites `sites` of `gauge` (the result's site i is
    /// `sites[i]`): a rank's own sites of its field padded with its neighbours' links.
    /// `coords(i)` names site i in an error (its global coordinates).
    pub fn on_sites(
        gauge: &GaugeField,
        action: &Action,
        sites: &[usize],
        coords: impl Fn(usize) -> [usize; crate::geometry::lattice::NDIM],
    ) -> Result<SiteTerms> {
        let twist = action.twist();
        let (kappa, csw) = (action.kappa, action.csw);
        let built: Vec<([f64; PACKED_SITE], Option<[Block; 2]>)> = sites
            .par_iter()
            .map(|&x| {
                let blocks = clover_blocks(gauge, x, kappa, csw);
                let mut packed = [0.0; PACKED_SITE];
                let mut inv = [[[ZERO; 6]; 6]; 2];
                let mut ok = true;
                for b in 0..2 {
                    packed[b * PACKED_BLOCK..(b + 1) * PACKED_BLOCK]
                        .copy_from_slice(&pack(&blocks[b]));
                    let mut whole = blocks[b];
                    let t = C64::new(0.0, if b == 0 { twist } else { -twist });
                    for (k, row) in whole.iter_mut().enumerate() {
                        row[k] += t;
                    }
                    match invert(&whole) {
                        Some(i) => inv[b] = i,
                        None => ok = false,
                    }
                }
                (packed, ok.then_some(inv))
            })
            .collect();
        let mut clover = Vec::with_capacity(sites.len());
        let mut inverse = Vec::with_capacity(sites.len());
        for (i, (p, inv)) in built.into_iter().enumerate() {
            let Some(inv) = inv else {
                return Err(Error::InvalidValue {
                    key: "dirac.csw".into(),
                    message: format!(
                        "the clover term is singular at site {:?} for c_sw = {csw}, \
                         kappa = {kappa}, mu = {}",
                        coords(i),
                        action.mu
                    ),
                });
            };
            clover.push(p);
            inverse.push(inv);
        }
        Ok(SiteTerms {
            kappa,
            csw,
            twist,
            clover,
            inverse,
        })
    }

    /// The restriction to one rank's sites of a split lattice: `self` built on the whole
    /// `global` lattice, the result holding the same blocks and inverses (the same bits)
    /// for the rank's local sites in local order (local site x is global site
    /// `partition.global_site(x)`). The clover term is site-local, but building it needs
    /// the links around a site, some of them on neighbouring ranks: building once on the
    /// whole lattice and restricting needs no ghost links.
    pub fn restrict(&self, global: &Lattice, partition: &Partition) -> Result<SiteTerms> {
        if global.dims != partition.global
            || global.offset != [0; crate::geometry::lattice::NDIM]
            || self.volume() != global.volume()
        {
            return Err(Error::internal(format!(
                "restrict: a site term of {} sites on {} (offset {:?}), but the partition splits {:?}",
                self.volume(),
                global.dims_string(),
                global.offset,
                partition.global
            )));
        }
        Ok(SiteTerms {
            kappa: self.kappa,
            csw: self.csw,
            twist: self.twist,
            clover: partition.scatter_sites(&self.clover, 1)?,
            inverse: partition.scatter_sites(&self.inverse, 1)?,
        })
    }

    /// The sites held.
    pub fn volume(&self) -> usize {
        self.clover.len()
    }

    /// The whole block b of site x (clover part plus the twist).
    pub fn block(&self, x: usize, b: usize) -> Block {
        let mut m = unpack(&self.clover[x][b * PACKED_BLOCK..(b + 1) * PACKED_BLOCK]);
        let t = C64::new(0.0, if b == 0 { self.twist } else { -self.twist });
        for (k, row) in m.iter_mut().enumerate() {
            row[k] += t;
        }
        m
    }

    /// out = A psi on one site's 12 values (`inverse`: A^-1 psi; `adjoint`: with A^dag,
    /// which is A with the twist negated, and whose inverse is the inverse's adjoint).
    pub fn apply_site(&self, x: usize, psi: &[C64], out: &mut [C64], inverse: bool, adjoint: bool) {
        for b in 0..2 {
            let v = &psi[6 * b..6 * b + 6];
            let r = match (inverse, adjoint) {
                (false, false) => block_mul(&self.block(x, b), v),
                (true, false) => block_mul(&self.inverse[x][b], v),
                (false, true) => block_mul(&adjoint_of(&self.block(x, b)), v),
                (true, true) => block_mul(&adjoint_of(&self.inverse[x][b]), v),
            };
            out[6 * b..6 * b + 6].copy_from_slice(&r);
        }
    }

    /// A psi (or A^-1 psi, and with `adjoint` A^dag) on the sites of a full field of
    /// `lattice`; with `parity`, only the sites of that parity are written (the others are
    /// zero).
    pub fn apply(
        &self,
        lattice: &Lattice,
        psi: &SpinorField,
        parity: Option<usize>,
        inverse: bool,
        adjoint: bool,
    ) -> SpinorField {
        let mut out = SpinorField::zeros(psi.volume());
        out.data
            .par_chunks_mut(12)
            .zip(psi.data.par_chunks(12))
            .enumerate()
            .for_each(|(x, (o, p))| {
                if parity.is_none_or(|par| lattice.parity(x) == par) {
                    self.apply_site(x, p, o, inverse, adjoint);
                }
            });
        out
    }
}
