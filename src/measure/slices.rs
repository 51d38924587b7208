//! What the contractions share: the propagator's 12x12 matrix at a site, the Fourier
//! phases of the sink momenta, and deterministic sums over the sites of each timeslice.
//!
//! The sites of a timeslice (contiguous: t is the slowest coordinate) are cut into
//! blocks of `BLOCK` sites whatever the thread count; each block is summed in site order
//! and the blocks of a timeslice are added in block order, so a correlator is bitwise the
//! same for any number of threads (as `crate::reduce`'s sums are).

use crate::field::su3::{C64, ZERO};
use crate::field::SpinorField;
use crate::geometry::lattice::Lattice;
use rayon::prelude::*;

/// Sites per block of a timeslice (fixed: the summation tree must not depend on the
/// thread count).
pub const BLOCK: usize = 128;

/// Blocks summed at once: bounds the memory of the partial sums (each holds the
/// caller's `width` complex numbers).
const BLOCKS_IN_FLIGHT: usize = 512;

/// The propagator at one site as a 12x12 matrix `m[s * 3 + c][s' * 3 + c']` =
/// S(x, x0)_{sc, s'c'} (sink row, source column).
pub type SiteMatrix = [[C64; 12]; 12];

/// Gather the 12 columns' values at `site`.
#[inline]
pub fn site_matrix(prop: &[SpinorField], site: usize) -> SiteMatrix {
    let mut m = [[ZERO; 12]; 12];
    for (j, col) in prop.iter().enumerate() {
        let v = &col.data[site * 12..site * 12 + 12];
        for r in 0..12 {
            m[r][j] = v[r];
        }
    }
    m
}

/// The phases `e^{-i p.(x - origin)}` of a list of sink momenta, `p_j = 2 pi n_j / L_j`,
/// read from exact per-direction tables (the phase of `n_j (x_j - o_j) mod L_j`).
pub struct Phases {
    /// Per momentum, per spatial direction: the mode number reduced mod L_j.
    modes: Vec<[usize; 3]>,
    /// Per spatial direction, `e^{-2 pi i m / L_j}` for m = 0..L_j.
    tables: [Vec<C64>; 3],
    origin: [usize; 3],
    dims: [usize; 3],
}

impl Phases {
    pub fn new(lattice: &Lattice, momenta: &[[i64; 3]], origin: [usize; 3]) -> Phases {
        let dims = [lattice.dims[0], lattice.dims[1], lattice.dims[2]];
        let tables = dims.map(|l| {
            (0..l)
                .map(|m| C64::from_polar(1.0, -2.0 * std::f64::consts::PI * m as f64 / l as f64))
                .collect()
        });
        let modes = momenta
            .iter()
            .map(|n| std::array::from_fn(|j| n[j].rem_euclid(dims[j] as i64) as usize))
            .collect();
        Phases {
            modes,
            tables,
            origin,
            dims,
        }
    }

    pub fn len(&self) -> usize {
        self.modes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.modes.is_empty()
    }

    /// The phases of every momentum at spatial coordinates `x` (into `out`).
    #[inline]
    pub fn at(&self, x: [usize; 3], out: &mut [C64]) {
        let d: [usize; 3] = std::array::from_fn(|j| {
            (x[j] + self.dims[j] - self.origin[j] % self.dims[j]) % self.dims[j]
        });
        for (o, n) in out.iter_mut().zip(&self.modes) {
            let e: [C64; 3] = std::array::from_fn(|j| self.tables[j][n[j] * d[j] % self.dims[j]]);
            *o = e[0] * e[1] * e[2];
        }
    }
}

/// Per timeslice t = 0..LT (absolute), the sum over its sites x of `term(x, acc)`, where
/// `term` adds a site's `width` complex numbers into `acc`. Deterministic: see the
/// module's comment.
pub fn timeslice_sums<F>(lattice: &Lattice, width: usize, term: F) -> Vec<Vec<C64>>
where
    F: Fn(usize, &mut [C64]) + Sync,
{
    let lt = lattice.dims[3];
    let slice = lattice.volume() / lt;
    let per_slice = slice.div_ceil(BLOCK).max(1);
    let blocks = lt * per_slice;
    let mut sums = vec![vec![ZERO; width]; lt];
    let mut first = 0;
    while first < blocks {
        let last = (first + BLOCKS_IN_FLIGHT).min(blocks);
        let partial: Vec<Vec<C64>> = (first..last)
            .into_par_iter()
            .map(|b| {
                let (t, k) = (b / per_slice, b % per_slice);
                let start = t * slice + k * BLOCK;
                let end = (start + BLOCK).min((t + 1) * slice);
                let mut acc = vec![ZERO; width];
                for x in start..end {
                    term(x, &mut acc);
                }
                acc
            })
            .collect();
        for (b, p) in (first..last).zip(partial) {
            for (s, v) in sums[b / per_slice].iter_mut().zip(p) {
                *s += v;
            }
        }
        first = last;
    }
    sums
}

/// The spatial coordinates of a site.
#[inline]
pub fn spatial(lattice: &Lattice, site: usize) -> [usize; 3] {
    let c = lattice.coords(site);
    [c[0], c[1], c[2]]
}
