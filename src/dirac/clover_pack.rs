//! The clover term's device form for kernel 3.0 (kernels/clover.cuh, docs/gpu.md): per
//! site the packed Hermitian clover part H_b of each chirality block (`clover::pack`, 72
//! reals a site) and, for the inverse, the packed Hermitian P_b = (H_b^2 + c^2)^-1 with c =
//! 2 kappa mu the twist, QUDA's form for twisted clover: with A_b = H_b + i s_b c (s_0 =
//! +1, s_1 = -1) the kernel applies A_b^-1 = (H_b - i s_b c) P_b. Without a twist (c = 0)
//! P_b = H_b^-1 directly and the kernel applies P_b alone.
//!
//! `device_clover` gives both arrays in canonical (lexicographic) site order, [site][72];
//! `to_parity_soa` reorders one into 3.0's parity-major structure of arrays: pair e (0 ..
//! 36) of site (p, cb) at p*36*Vh + e*Vh + cb, so consecutive threads read consecutive
//! pairs, as the links (fast_layout::links_to_soa) and spinors are stored. Pair e of block
//! b is e = 18 b + k: k = 0, 1, 2 the diagonal (d0, d1), (d2, d3), (d4, d5), k = 3 .. 17 the
//! 15 entries below the diagonal (row > col, row-major) as (re, im).

use super::clover::{invert, pack, unpack, Block, SiteTerms, PACKED_BLOCK, PACKED_SITE};
use crate::field::su3::C64;
use crate::geometry::lattice::Lattice;
use crate::{Error, Result};
use rayon::prelude::*;

/// Pairs (double2 or float2 on the device) of a site's packed term.
pub const PAIRS_PER_SITE: usize = PACKED_SITE / 2;

/// A packed term per site, canonical order.
pub type PackedSites = Vec<[f64; PACKED_SITE]>;

/// m n for two blocks.
fn block_product(m: &Block, n: &Block) -> Block {
    std::array::from_fn(|i| std::array::from_fn(|j| (0..6).map(|k| m[i][k] * n[k][j]).sum()))
}

/// P_b of one Hermitian clover block H_b and twist c: (H_b^2 + c^2)^-1, or H_b^-1 when c
/// = 0. None when the matrix is singular.
pub fn inverse_factor(h: &Block, twist: f64) -> Option<Block> {
    if twist == 0.0 {
        return invert(h);
    }
    let mut m = block_product(h, h);
    for (k, row) in m.iter_mut().enumerate() {
        row[k] += C64::new(twist * twist, 0.0);
    }
    invert(&m)
}

/// The device form of a site term on every site, canonical order: (the packed clover
/// parts H_b, the packed P_b), 72 reals a site each.
pub fn device_clover(terms: &SiteTerms) -> Result<(PackedSites, PackedSites)> {
    let inverse = (terms.clover.iter().enumerate())
        .map(|(x, site)| inverse_site(x, site, terms.twist))
        .collect::<Result<_>>()?;
    Ok((terms.clover.clone(), inverse))
}

/// The packed P_b of both blocks of site x (its packed clover part `site`).
fn inverse_site(x: usize, site: &[f64; PACKED_SITE], twist: f64) -> Result<[f64; PACKED_SITE]> {
    let mut p = [0.0; PACKED_SITE];
    for b in 0..2 {
        let range = b * PACKED_BLOCK..(b + 1) * PACKED_BLOCK;
        let h = unpack(&site[range.clone()]);
        let inv = inverse_factor(&h, twist).ok_or_else(|| {
            Error::internal(format!("the clover block {b} of site {x} is singular"))
        })?;
        p[range].copy_from_slice(&pack(&inv));
    }
    Ok(p)
}

/// Both device arrays of `device_clover` straight in 3.0's parity-major structure of
/// arrays (`to_parity_soa`'s order), built site by site without the canonical copies:
/// (clover, inverse factor), 72 V reals each.
pub fn device_clover_soa(lattice: &Lattice, terms: &SiteTerms) -> Result<(Vec<f64>, Vec<f64>)> {
    let v = lattice.volume();
    if terms.volume() != v {
        return Err(Error::internal("the site terms are not of this lattice"));
    }
    let vh = v / 2;
    // The factors in parallel (two 6x6 inversions a site), then the reordering.
    let factors: Vec<[f64; PACKED_SITE]> = (terms.clover.par_iter().enumerate())
        .map(|(x, site)| inverse_site(x, site, terms.twist))
        .collect::<Result<_>>()?;
    let mut clover = vec![0.0; PACKED_SITE * v];
    let mut inverse = vec![0.0; PACKED_SITE * v];
    for (x, (site, p)) in terms.clover.iter().zip(&factors).enumerate() {
        let base = lattice.parity(x) * PAIRS_PER_SITE * vh + x / 2;
        for e in 0..PAIRS_PER_SITE {
            let at = 2 * (base + e * vh);
            clover[at..at + 2].copy_from_slice(&site[2 * e..2 * e + 2]);
            inverse[at..at + 2].copy_from_slice(&p[2 * e..2 * e + 2]);
        }
    }
    Ok((clover, inverse))
}

/// One packed array ([site][72], canonical order on `lattice`) in 3.0's parity-major
/// structure of arrays (module doc): 2 * 36 * V reals, pair e of site (p, cb) at reals
/// 2 (p*36*Vh + e*Vh + cb) and the next.
pub fn to_parity_soa(lattice: &Lattice, packed: &[[f64; PACKED_SITE]]) -> Vec<f64> {
    let v = lattice.volume();
    assert_eq!(packed.len(), v, "one packed term per site");
    let vh = v / 2;
    let mut soa = vec![0.0; PACKED_SITE * v];
    for (x, site) in packed.iter().enumerate() {
        let base = lattice.parity(x) * PAIRS_PER_SITE * vh + x / 2;
        for e in 0..PAIRS_PER_SITE {
            let at = 2 * (base + e * vh);
            soa[at] = site[2 * e];
            soa[at + 1] = site[2 * e + 1];
        }
    }
    soa
}

/// (H_b - i s_b c) P_b: the inverse of block b the kernel applies (c = 0: P_b).
pub fn applied_inverse(h: &Block, p: &Block, b: usize, twist: f64) -> Block {
    if twist == 0.0 {
        return *p;
    }
    let mut m = *h;
    let t = C64::new(0.0, if b == 0 { -twist } else { twist });
    for (k, row) in m.iter_mut().enumerate() {
        row[k] += t;
    }
    block_product(&m, p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dirac::Action;
    use crate::field::su3::ZERO;
    use crate::field::GaugeField;
    use crate::geometry::lattice::DEFAULT_BOUNDARY;

    fn terms(mu: f64) -> (Lattice, SiteTerms) {
        let lattice = Lattice::new([4, 2, 2, 4], DEFAULT_BOUNDARY).unwrap();
        let gauge = GaugeField::random(&lattice, 5);
        let action = Action {
            kappa: 0.124,
            csw: 1.17,
            mu,
        };
        let t = SiteTerms::new(&gauge, &action).unwrap();
        (lattice, t)
    }

    const ZERO_BLOCK: Block = [[ZERO; 6]; 6];

    fn max_dev(a: &Block, b: &Block) -> f64 {
        let mut worst: f64 = 0.0;
        for i in 0..6 {
            for j in 0..6 {
                worst = worst.max((a[i][j] - b[i][j]).norm());
            }
        }
        worst
    }

    #[test]
    fn the_direct_parity_arrays_are_the_reordered_canonical_ones() {
        for mu in [0.0, 0.05] {
            let (lattice, t) = terms(mu);
            let (clover, inverse) = device_clover(&t).unwrap();
            let (c, i) = device_clover_soa(&lattice, &t).unwrap();
            assert_eq!(c, to_parity_soa(&lattice, &clover), "mu {mu}");
            assert_eq!(i, to_parity_soa(&lattice, &inverse), "mu {mu}");
        }
    }

    #[test]
    fn the_inverse_factor_inverts_h2_plus_c2_and_gives_the_site_inverse() {
        for mu in [0.0, 0.05, 0.7] {
            let (_, t) = terms(mu);
            let (clover, inverse) = device_clover(&t).unwrap();
            let c = t.twist;
            for x in 0..t.volume() {
                for b in 0..2 {
                    let r = b * PACKED_BLOCK..(b + 1) * PACKED_BLOCK;
                    let h = unpack(&clover[x][r.clone()]);
                    let p = unpack(&inverse[x][r]);
                    // P (H^2 + c^2) = 1 (c = 0: P H = 1).
                    let mut m = if c == 0.0 { h } else { block_product(&h, &h) };
                    if c != 0.0 {
                        for (k, row) in m.iter_mut().enumerate() {
                            row[k] += C64::new(c * c, 0.0);
                        }
                    }
                    let mut one = ZERO_BLOCK;
                    for (k, row) in one.iter_mut().enumerate() {
                        row[k] = C64::new(1.0, 0.0);
                    }
                    assert!(
                        max_dev(&block_product(&p, &m), &one) < 1e-12,
                        "mu {mu} x {x} b {b}"
                    );
                    // (H - i s c) P against SiteTerms' inverse block, column by column.
                    let applied = applied_inverse(&h, &p, b, c);
                    let mut want = ZERO_BLOCK;
                    for col in 0..6 {
                        let mut e = [ZERO; 12];
                        e[6 * b + col] = C64::new(1.0, 0.0);
                        let mut out = [ZERO; 12];
                        t.apply_site(x, &e, &mut out, true, false);
                        for row in 0..6 {
                            want[row][col] = out[6 * b + row];
                        }
                    }
                    assert!(max_dev(&applied, &want) < 1e-12, "mu {mu} x {x} b {b}");
                }
            }
        }
    }

    #[test]
    fn the_parity_soa_puts_pair_e_of_site_p_cb_at_its_slot() {
        let (lattice, t) = terms(0.05);
        let (clover, _) = device_clover(&t).unwrap();
        let soa = to_parity_soa(&lattice, &clover);
        let vh = lattice.volume() / 2;
        for (x, site) in clover.iter().enumerate() {
            let p = lattice.parity(x);
            for e in 0..PAIRS_PER_SITE {
                let at = 2 * (p * PAIRS_PER_SITE * vh + e * vh + x / 2);
                assert_eq!([soa[at], soa[at + 1]], [site[2 * e], site[2 * e + 1]]);
            }
        }
    }
}
