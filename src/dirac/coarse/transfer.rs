//! The transfer between a level and the next coarser one: aggregates (blocks of fine
//! sites, each one coarse site) and the prolongator P built from near-null vectors.
//!
//! Each aggregate is split by chirality (QUDA, DD-alpha-AMG): the columns of P on
//! aggregate a are the near-null vectors restricted to a's sites and to one chiral half of
//! the fine numbers, orthonormalised there (`Prolongator::new`). So P has 2 nvec columns a
//! coarse site, commutes with g5 (+1 on the first nvec coarse numbers, -1 on the others),
//! and P^dag P = 1: restriction is P^dag, prolongation P.

use super::periodic;
use crate::field::su3::{C64, ZERO};
use crate::geometry::lattice::{Lattice, NDIM};
use crate::{Error, Result};
use rayon::prelude::*;

/// Blocks of fine sites, one coarse site each.
#[derive(Clone, Debug)]
pub struct Aggregation {
    /// The fine lattice (its fermion boundary is inside the fine operator).
    pub fine: Lattice,
    /// The coarse lattice: fine extent / block extent, periodic.
    pub coarse: Lattice,
    pub block: [usize; NDIM],
    /// The fine sites of aggregate a: members[a * block_volume ..][.. block_volume],
    /// lexicographic within the block.
    members: Vec<usize>,
    /// The aggregate of each fine site.
    of_site: Vec<usize>,
}

impl Aggregation {
    /// Blocks of `block` fine sites; `key` names the config key in an error (every fine
    /// extent must be a multiple of the block's).
    pub fn new(fine: &Lattice, block: [usize; NDIM], key: &str) -> Result<Aggregation> {
        let mut dims = [0; NDIM];
        for mu in 0..NDIM {
            if block[mu] == 0 || !fine.dims[mu].is_multiple_of(block[mu]) {
                return Err(Error::invalid(
                    key,
                    format!(
                        "a block of {:?} does not tile the level's lattice {:?} (extent {} in direction {mu})",
                        block, fine.dims, fine.dims[mu]
                    ),
                ));
            }
            dims[mu] = fine.dims[mu] / block[mu];
        }
        let coarse = periodic(dims)?;
        let bv: usize = block.iter().product();
        let mut members = vec![0; fine.volume()];
        let mut of_site = vec![0; fine.volume()];
        let mut filled = vec![0usize; coarse.volume()];
        for x in 0..fine.volume() {
            let c = fine.coords(x);
            let a = coarse.index(std::array::from_fn(|mu| c[mu] / block[mu]));
            of_site[x] = a;
            members[a * bv + filled[a]] = x;
            filled[a] += 1;
        }
        Ok(Aggregation {
            fine: fine.clone(),
            coarse,
            block,
            members,
            of_site,
        })
    }

    /// Fine sites an aggregate.
    pub fn block_volume(&self) -> usize {
        self.block.iter().product()
    }

    /// The fine sites of aggregate a.
    pub fn members(&self, a: usize) -> &[usize] {
        let bv = self.block_volume();
        &self.members[a * bv..(a + 1) * bv]
    }

    /// The error of near-null vector `v` linearly dependent on the ones before it on
    /// aggregate `a`, chirality `s` (0: +, 1: -), found orthonormalising a prolongator.
    pub fn dependent_vector(&self, a: usize, s: usize, v: usize) -> Error {
        Error::invalid(
            "multigrid.vectors",
            format!(
                "near-null vector {v} is linearly dependent on the ones before it on aggregate \
                 {:?}, chirality {}: use fewer vectors or larger blocks",
                self.coarse.coords(a),
                if s == 0 { "+" } else { "-" }
            ),
        )
    }

    /// The aggregate of fine site x.
    pub fn aggregate_of(&self, x: usize) -> usize {
        self.of_site[x]
    }
}

/// P: on each aggregate and chirality, nvec orthonormal vectors of the fine numbers.
#[derive(Clone, Debug)]
pub struct Prolongator {
    pub aggregation: Aggregation,
    /// Numbers a fine site (two chiral halves).
    pub fine_dof: usize,
    /// Near-null vectors: 2 nvec numbers a coarse site.
    pub nvec: usize,
    /// Vector v at fine site x: data[(x * nvec + v) * fine_dof ..][.. fine_dof].
    data: Vec<C64>,
}

impl Prolongator {
    /// P from near-null vectors (each a field of `fine_dof` numbers a site on the fine
    /// lattice), orthonormalised on each aggregate and chirality in double by modified
    /// Gram-Schmidt, twice (the second pass restores orthogonality lost to rounding).
    /// Vectors that are linearly dependent on an aggregate are refused by name.
    pub fn new(
        aggregation: Aggregation,
        fine_dof: usize,
        vectors: &[Vec<C64>],
    ) -> Result<Prolongator> {
        let nvec = vectors.len();
        let volume = aggregation.fine.volume();
        if nvec == 0 || !fine_dof.is_multiple_of(2) {
            return Err(Error::internal(format!(
                "a prolongator of {nvec} vectors of {fine_dof} numbers a site"
            )));
        }
        if let Some(v) = vectors.iter().find(|v| v.len() != volume * fine_dof) {
            return Err(Error::internal(format!(
                "a near-null vector of {} numbers on {volume} sites of {fine_dof}",
                v.len()
            )));
        }
        let mut data = vec![ZERO; volume * nvec * fine_dof];
        data.par_chunks_mut(nvec * fine_dof)
            .enumerate()
            .for_each(|(x, site)| {
                for (v, vec) in vectors.iter().enumerate() {
                    site[v * fine_dof..(v + 1) * fine_dof]
                        .copy_from_slice(&vec[x * fine_dof..(x + 1) * fine_dof]);
                }
            });
        let mut p = Prolongator {
            aggregation,
            fine_dof,
            nvec,
            data,
        };
        p.orthonormalise()?;
        Ok(p)
    }

    /// Numbers a coarse site.
    pub fn coarse_dof(&self) -> usize {
        2 * self.nvec
    }

    /// Vector v at fine site x (all fine_dof numbers; P's column (s, v) is its chiral half
    /// s).
    #[inline]
    pub fn vector(&self, x: usize, v: usize) -> &[C64] {
        let n = self.fine_dof;
        let at = (x * self.nvec + v) * n;
        &self.data[at..at + n]
    }

    fn orthonormalise(&mut self) -> Result<()> {
        let agg = &self.aggregation;
        let (n, nvec, h) = (self.fine_dof, self.nvec, self.fine_dof / 2);
        // Gather each aggregate's numbers, orthonormalise, scatter back.
        let blocks: Vec<Result<Vec<C64>>> = (0..agg.coarse.volume())
            .into_par_iter()
            .map(|a| {
                let sites = agg.members(a);
                let mut local: Vec<C64> = sites
                    .iter()
                    .flat_map(|&x| self.data[x * nvec * n..(x + 1) * nvec * n].iter().copied())
                    .collect();
                // local[(k * nvec + v) * n + i]: member k, vector v, number i.
                let at = |k: usize, v: usize, i: usize| (k * nvec + v) * n + i;
                for s in 0..2 {
                    let rows = s * h..(s + 1) * h;
                    for _pass in 0..2 {
                        for v in 0..nvec {
                            for w in 0..v {
                                let mut dot = ZERO;
                                for k in 0..sites.len() {
                                    for i in rows.clone() {
                                        dot += local[at(k, w, i)].conj() * local[at(k, v, i)];
                                    }
                                }
                                for k in 0..sites.len() {
                                    for i in rows.clone() {
                                        let sub = dot * local[at(k, w, i)];
                                        local[at(k, v, i)] -= sub;
                                    }
                                }
                            }
                            let mut norm = 0.0;
                            for k in 0..sites.len() {
                                for i in rows.clone() {
                                    norm += local[at(k, v, i)].norm_sqr();
                                }
                            }
                            if norm.sqrt() < 1e-12 {
                                return Err(agg.dependent_vector(a, s, v));
                            }
                            let inv = 1.0 / norm.sqrt();
                            for k in 0..sites.len() {
                                for i in rows.clone() {
                                    local[at(k, v, i)] *= inv;
                                }
                            }
                        }
                    }
                }
                Ok(local)
            })
            .collect();
        for (a, block) in blocks.into_iter().enumerate() {
            let block = block?;
            for (k, &x) in self.aggregation.members(a).iter().enumerate() {
                self.data[x * nvec * n..(x + 1) * nvec * n]
                    .copy_from_slice(&block[k * nvec * n..(k + 1) * nvec * n]);
            }
        }
        Ok(())
    }

    /// coarse = P^dag fine: on aggregate a, coarse number s * nvec + v is the sum over a's
    /// sites of (vector v, chiral half s | fine).
    pub fn restrict(&self, fine: &[C64], coarse: &mut [C64]) {
        let (n, nvec, h) = (self.fine_dof, self.nvec, self.fine_dof / 2);
        let cd = self.coarse_dof();
        coarse.par_chunks_mut(cd).enumerate().for_each(|(a, out)| {
            out.fill(ZERO);
            for &x in self.aggregation.members(a) {
                let f = &fine[x * n..(x + 1) * n];
                for v in 0..nvec {
                    let vec = self.vector(x, v);
                    for s in 0..2 {
                        let mut sum = ZERO;
                        for i in s * h..(s + 1) * h {
                            sum += vec[i].conj() * f[i];
                        }
                        out[s * nvec + v] += sum;
                    }
                }
            }
        });
    }

    /// fine = P coarse.
    pub fn prolong(&self, coarse: &[C64], fine: &mut [C64]) {
        let (n, nvec, h) = (self.fine_dof, self.nvec, self.fine_dof / 2);
        let cd = self.coarse_dof();
        fine.par_chunks_mut(n).enumerate().for_each(|(x, out)| {
            let a = self.aggregation.aggregate_of(x);
            let c = &coarse[a * cd..(a + 1) * cd];
            out.fill(ZERO);
            for v in 0..nvec {
                let vec = self.vector(x, v);
                for (i, o) in out.iter_mut().enumerate() {
                    *o += vec[i] * c[(i / h) * nvec + v];
                }
            }
        });
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::geometry::lattice::Boundary;
    use crate::rng::Stream;

    pub(crate) fn random_vectors(volume: usize, dof: usize, n: usize, seed: u64) -> Vec<Vec<C64>> {
        let mut rng = Stream::new(seed, 0);
        (0..n)
            .map(|_| {
                (0..volume * dof)
                    .map(|_| C64::new(rng.gaussian(), rng.gaussian()))
                    .collect()
            })
            .collect()
    }

    fn prolongator() -> Prolongator {
        let fine = Lattice::new([4, 4, 4, 8], [Boundary::Periodic; NDIM]).unwrap();
        let agg = Aggregation::new(&fine, [2, 2, 2, 4], "multigrid.blocks").unwrap();
        Prolongator::new(agg, 12, &random_vectors(fine.volume(), 12, 5, 11)).unwrap()
    }

    /// P^dag P = 1 (columns orthonormal on each aggregate and chirality): exact in exact
    /// arithmetic, so to rounding (1e-13).
    #[test]
    fn columns_are_orthonormal_per_aggregate() {
        let p = prolongator();
        let cd = p.coarse_dof();
        let nc = p.aggregation.coarse.volume();
        let mut worst: f64 = 0.0;
        for j in 0..nc * cd {
            let mut e = vec![ZERO; nc * cd];
            e[j] = C64::new(1.0, 0.0);
            let mut f = vec![ZERO; p.aggregation.fine.volume() * 12];
            p.prolong(&e, &mut f);
            let mut back = vec![ZERO; nc * cd];
            p.restrict(&f, &mut back);
            for (k, z) in back.iter().enumerate() {
                let want = if k == j { 1.0 } else { 0.0 };
                worst = worst.max((z - C64::new(want, 0.0)).norm());
            }
        }
        assert!(worst < 1e-13, "P^dag P - 1: {worst}");
    }

    /// P commutes with g5: a coarse vector of one chirality prolongs to a fine field of
    /// that chirality only (exactly: the other half's numbers are never written).
    #[test]
    fn prolongation_keeps_chirality() {
        let p = prolongator();
        let cd = p.coarse_dof();
        let nc = p.aggregation.coarse.volume();
        let mut e = vec![ZERO; nc * cd];
        for a in 0..nc {
            for v in 0..p.nvec {
                e[a * cd + v] = C64::new(1.0 + v as f64, a as f64);
            }
        }
        let mut f = vec![ZERO; p.aggregation.fine.volume() * 12];
        p.prolong(&e, &mut f);
        let lower: f64 = f.chunks(12).flat_map(|s| &s[6..]).map(|z| z.norm()).sum();
        let upper: f64 = f.chunks(12).flat_map(|s| &s[..6]).map(|z| z.norm()).sum();
        assert_eq!(lower, 0.0);
        assert!(upper > 1.0);
    }

    /// A block that does not tile the lattice is refused by the key named.
    #[test]
    fn a_block_that_does_not_tile_is_refused() {
        let fine = Lattice::new([4, 4, 4, 8], [Boundary::Periodic; NDIM]).unwrap();
        let e = Aggregation::new(&fine, [3, 2, 2, 2], "multigrid.blocks").unwrap_err();
        assert!(e.to_string().contains("multigrid.blocks"), "{e}");
    }
}
