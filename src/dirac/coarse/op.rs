//! The coarse operator stored densely: per coarse site the site matrix X and the eight hop
//! matrices Y_d (module docs of `coarse`), applied over all sites or, for the even-odd
//! form of the coarse solve, over one parity with the site blocks' inverses.

use super::{hop_target, mat_vec, Stencil, HOPS};
use crate::field::su3::{C64, ZERO};
use crate::geometry::lattice::Lattice;
use crate::{Error, Result};
use rayon::prelude::*;

/// The most numbers a coarse site holds: 2 x 64 vectors (`[multigrid] vectors` <= 64).
pub const MAX_DOF: usize = 128;

/// A level's operator: X(x) and Y_d(x), dof x dof row-major, on a periodic lattice.
#[derive(Clone, Debug)]
pub struct CoarseOp {
    pub lattice: Lattice,
    pub dof: usize,
    /// X(x) at site[x * dof^2 ..].
    pub site: Vec<C64>,
    /// Y_d(x) at hops[(x * 8 + d) * dof^2 ..].
    pub hops: Vec<C64>,
    /// The neighbour of x in direction d at neighbours[x][d].
    neighbours: Vec<[u32; HOPS]>,
    /// X(x)^-1 (the even-odd form; made by `with_site_inverse`).
    site_inverse: Option<Vec<C64>>,
}

impl CoarseOp {
    /// An operator with zero matrices on `lattice`.
    pub fn zeros(lattice: Lattice, dof: usize) -> CoarseOp {
        let v = lattice.volume();
        let neighbours = (0..v)
            .map(|x| std::array::from_fn(|d| hop_target(&lattice, x, d).0 as u32))
            .collect();
        // Zeroed in parallel: the hops of a 32^3x64 level with 24 vectors are 2.4 GB.
        let zeros = |n: usize| {
            let mut z = Vec::new();
            (0..n)
                .into_par_iter()
                .map(|_| ZERO)
                .collect_into_vec(&mut z);
            z
        };
        CoarseOp {
            site: zeros(v * dof * dof),
            hops: zeros(v * HOPS * dof * dof),
            lattice,
            dof,
            neighbours,
            site_inverse: None,
        }
    }

    pub fn volume(&self) -> usize {
        self.lattice.volume()
    }

    /// X(x)^-1 at [x * dof^2 ..] when made (`with_site_inverse`).
    pub fn site_inverse(&self) -> Option<&[C64]> {
        self.site_inverse.as_deref()
    }

    /// Bytes of its matrices (X, the eight Y and X^-1 when made).
    pub fn bytes(&self) -> usize {
        let m = self.site.len() + self.hops.len() + self.site_inverse.as_ref().map_or(0, Vec::len);
        m * std::mem::size_of::<C64>()
    }

    fn site_at(&self, x: usize) -> &[C64] {
        let n2 = self.dof * self.dof;
        &self.site[x * n2..(x + 1) * n2]
    }

    fn hop_at(&self, x: usize, d: usize) -> &[C64] {
        let n2 = self.dof * self.dof;
        &self.hops[(x * HOPS + d) * n2..(x * HOPS + d + 1) * n2]
    }

    /// out = A inp on full fields (dof numbers a site).
    pub fn apply(&self, inp: &[C64], out: &mut [C64]) {
        let n = self.dof;
        out.par_chunks_mut(n).enumerate().for_each(|(x, o)| {
            mat_vec(self.site_at(x), &inp[x * n..(x + 1) * n], o, false);
            for (d, &y) in self.neighbours[x].iter().enumerate() {
                let y = y as usize;
                mat_vec(self.hop_at(x, d), &inp[y * n..(y + 1) * n], o, true);
            }
        });
    }

    /// Whether the even-odd form exists: every extent even (a hop then always changes
    /// parity, and half fields are in the checkerboard order cb = x / 2).
    pub fn even_odd_possible(&self) -> bool {
        self.lattice.dims.iter().all(|&l| l.is_multiple_of(2))
    }

    /// The inverse of each site matrix, for the even-odd form; a singular one is refused
    /// by site.
    pub fn with_site_inverse(mut self) -> Result<CoarseOp> {
        let n = self.dof;
        let inv: Vec<Option<Vec<C64>>> = (0..self.volume())
            .into_par_iter()
            .map(|x| invert(self.site_at(x), n))
            .collect();
        let mut all = Vec::with_capacity(self.site.len());
        for (x, m) in inv.into_iter().enumerate() {
            match m {
                Some(m) => all.extend(m),
                None => {
                    return Err(Error::internal(format!(
                        "the coarse site matrix at {:?} is singular",
                        self.lattice.coords(x)
                    )))
                }
            }
        }
        self.site_inverse = Some(all);
        Ok(self)
    }

    /// out = X inp (or X^-1 inp) on half fields of parity p.
    pub fn apply_site_half(
        &self,
        p: usize,
        inp: &[C64],
        out: &mut [C64],
        inverse: bool,
    ) -> Result<()> {
        let n = self.dof;
        let inv = if inverse {
            Some(self.site_inverse.as_ref().ok_or_else(|| {
                Error::internal("the coarse operator's site inverses were not made")
            })?)
        } else {
            None
        };
        out.par_chunks_mut(n).enumerate().for_each(|(cb, o)| {
            // Half fields hold site x of parity p at cb = x / 2.
            let x = self.lattice.checkerboard_site(p, cb);
            let m = match inv {
                Some(i) => &i[x * n * n..(x + 1) * n * n],
                None => self.site_at(x),
            };
            mat_vec(m, &inp[cb * n..(cb + 1) * n], o, false);
        });
        Ok(())
    }

    /// out = sum_d Y_d inp on the sites of parity p, inp a half field of the other
    /// parity (with `add`: out += that, times `scale`).
    pub fn hop_half(&self, p: usize, inp: &[C64], out: &mut [C64], scale: C64, add: bool) {
        let n = self.dof;
        out.par_chunks_mut(n).enumerate().for_each(|(cb, o)| {
            let x = self.lattice.checkerboard_site(p, cb);
            // The site's sum on the stack (dof <= MAX_DOF): no allocation per site.
            let mut acc = [ZERO; MAX_DOF];
            let acc = &mut acc[..n];
            for (d, &y) in self.neighbours[x].iter().enumerate() {
                let ycb = y as usize / 2;
                mat_vec(self.hop_at(x, d), &inp[ycb * n..(ycb + 1) * n], acc, true);
            }
            for (o, &a) in o.iter_mut().zip(acc.iter()) {
                if add {
                    *o += scale * a;
                } else {
                    *o = scale * a;
                }
            }
        });
    }

    /// The even Schur complement: out = (X_ee - Y_eo X_oo^-1 Y_oe) inp on even half
    /// fields; `tmp` two odd half fields.
    pub fn apply_schur(&self, inp: &[C64], out: &mut [C64], tmp: &mut [Vec<C64>; 2]) -> Result<()> {
        let [a, b] = tmp;
        self.hop_half(1, inp, a, C64::new(1.0, 0.0), false);
        self.apply_site_half(1, a, b, true)?;
        self.apply_site_half(0, inp, out, false)?;
        self.hop_half(0, b, out, C64::new(-1.0, 0.0), true);
        Ok(())
    }
}

impl Stencil for CoarseOp {
    fn lattice(&self) -> &Lattice {
        &self.lattice
    }
    fn dof(&self) -> usize {
        self.dof
    }
    fn site_matrix(&self, x: usize, m: &mut [C64]) {
        m.copy_from_slice(self.site_at(x));
    }
    fn hop_matrix(&self, x: usize, d: usize, m: &mut [C64]) {
        m.copy_from_slice(self.hop_at(x, d));
    }
}

/// The inverse of an n x n row-major matrix by Gauss-Jordan with partial pivoting (None
/// when a pivot vanishes).
pub fn invert(m: &[C64], n: usize) -> Option<Vec<C64>> {
    let mut a = m.to_vec();
    let mut inv = vec![ZERO; n * n];
    (0..n).for_each(|i| inv[i * n + i] = C64::new(1.0, 0.0));
    let scale = m.iter().map(|z| z.norm()).fold(0.0, f64::max);
    for col in 0..n {
        let piv =
            (col..n).max_by(|&i, &j| a[i * n + col].norm().total_cmp(&a[j * n + col].norm()))?;
        if a[piv * n + col].norm() <= 1e-14 * scale {
            return None;
        }
        if piv != col {
            for k in 0..n {
                a.swap(piv * n + k, col * n + k);
                inv.swap(piv * n + k, col * n + k);
            }
        }
        let d = C64::new(1.0, 0.0) / a[col * n + col];
        for k in 0..n {
            a[col * n + k] *= d;
            inv[col * n + k] *= d;
        }
        for i in 0..n {
            if i != col {
                let f = a[i * n + col];
                if f != ZERO {
                    for k in 0..n {
                        let (ak, ik) = (a[col * n + k], inv[col * n + k]);
                        a[i * n + k] -= f * ak;
                        inv[i * n + k] -= f * ik;
                    }
                }
            }
        }
    }
    Some(inv)
}
