//! How the global lattice is split over processes (ranks): a process grid
//! [gx, gy, gz, gt], each rank holding a local sub-lattice (`Lattice` with `global` and
//! `offset` set) and exchanging the faces of the split directions with its neighbours.
//! One rank (grid all ones) is today's single-GPU case; a multi-GPU version fills in the
//! rest of the grid (README, "Layout") without touching the kernels, which
//! already index local sites and take parity and boundary phases from global coordinates.

use super::lattice::{Boundary, Lattice, NDIM};
use crate::{Error, Result};
use rayon::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    /// Extents of the whole lattice.
    pub global: [usize; NDIM],
    /// Ranks per direction.
    pub grid: [usize; NDIM],
    /// This rank's coordinates in the grid.
    pub coords: [usize; NDIM],
}

impl Partition {
    /// The whole lattice on one rank.
    pub fn single(global: [usize; NDIM]) -> Partition {
        Partition {
            global,
            grid: [1; NDIM],
            coords: [0; NDIM],
        }
    }

    /// Rank `rank` (x fastest in the grid) of a split of `global` over `grid`. Every
    /// split extent must divide evenly, and every local extent of a split direction must
    /// be even (so the even-odd checkerboard of each rank matches the global one).
    pub fn new(global: [usize; NDIM], grid: [usize; NDIM], rank: usize) -> Result<Partition> {
        let ranks: usize = grid.iter().product();
        if grid.contains(&0) || rank >= ranks {
            return Err(Error::invalid(
                "parallel.grid",
                format!("grid {grid:?} has no rank {rank}"),
            ));
        }
        for mu in 0..NDIM {
            if !global[mu].is_multiple_of(grid[mu]) {
                return Err(Error::invalid(
                    "parallel.grid",
                    format!(
                        "extent {} of direction {mu} does not divide over {} ranks",
                        global[mu], grid[mu]
                    ),
                ));
            }
            let local = global[mu] / grid[mu];
            if grid[mu] > 1 && !local.is_multiple_of(2) {
                return Err(Error::invalid(
                    "parallel.grid",
                    format!("local extent {local} of direction {mu} is odd (needs even)"),
                ));
            }
        }
        let mut coords = [0; NDIM];
        let mut r = rank;
        for mu in 0..NDIM {
            coords[mu] = r % grid[mu];
            r /= grid[mu];
        }
        Ok(Partition {
            global,
            grid,
            coords,
        })
    }

    pub fn ranks(&self) -> usize {
        self.grid.iter().product()
    }

    /// This rank's number (x fastest).
    pub fn rank(&self) -> usize {
        self.rank_of(self.coords)
    }

    fn rank_of(&self, c: [usize; NDIM]) -> usize {
        (0..NDIM).rev().fold(0, |r, mu| r * self.grid[mu] + c[mu])
    }

    pub fn local_dims(&self) -> [usize; NDIM] {
        std::array::from_fn(|mu| self.global[mu] / self.grid[mu])
    }

    /// Global coordinates of the local site (0, 0, 0, 0).
    pub fn offset(&self) -> [usize; NDIM] {
        let l = self.local_dims();
        std::array::from_fn(|mu| self.coords[mu] * l[mu])
    }

    /// Whether direction mu is split (faces are exchanged in it).
    pub fn is_split(&self, mu: usize) -> bool {
        self.grid[mu] > 1
    }

    /// The rank holding the next (forward) or previous sub-lattice in direction mu
    /// (periodic in the grid).
    pub fn neighbour(&self, mu: usize, forward: bool) -> usize {
        let mut c = self.coords;
        let g = self.grid[mu];
        c[mu] = if forward {
            (c[mu] + 1) % g
        } else {
            (c[mu] + g - 1) % g
        };
        self.rank_of(c)
    }

    /// Sites on one face perpendicular to mu.
    pub fn face_sites(&self, mu: usize) -> usize {
        let l = self.local_dims();
        (0..NDIM).filter(|&nu| nu != mu).map(|nu| l[nu]).product()
    }

    /// This rank's sub-lattice: local extents, the global extents and its offset.
    pub fn local_lattice(&self, boundary: [Boundary; NDIM]) -> Result<Lattice> {
        let mut l = Lattice::new(self.local_dims(), boundary)?;
        l.global = self.global;
        l.offset = self.offset();
        Ok(l)
    }

    /// The global lexicographic index (x fastest) of local site `local`.
    pub fn global_site(&self, local: usize) -> usize {
        let (l, o, g) = (self.local_dims(), self.offset(), self.global);
        let mut i = local;
        let mut c = [0; NDIM];
        for mu in 0..NDIM {
            c[mu] = i % l[mu] + o[mu];
            i /= l[mu];
        }
        c[0] + g[0] * (c[1] + g[1] * (c[2] + g[2] * c[3]))
    }

    /// This rank's part of a global site-major array (`per_site` values per site, sites
    /// in global lexicographic order): the values of its sites in local order. Typed
    /// wrappers for gauge and spinor fields are in `crate::backend::cpu_decomposed`
    /// (geometry sits below field in the module graph).
    pub fn scatter_sites<T: Clone + Send + Sync>(
        &self,
        global: &[T],
        per_site: usize,
    ) -> Result<Vec<T>> {
        let volume: usize = self.global.iter().product();
        if global.len() != volume * per_site {
            return Err(Error::internal(format!(
                "scatter: a global field of {} values, expected {} sites x {per_site}",
                global.len(),
                volume
            )));
        }
        let local: usize = self.local_dims().iter().product();
        // Each site's global index once, then element by element over the threads,
        // collected in place: the copy and the first touch of the new pages run in
        // parallel (one thread a rank before; a 96^3x192 process on four GPUs took 153 s
        // with it and 122 s with this, validate/RESULTS.md).
        let sites: Vec<usize> = (0..local)
            .into_par_iter()
            .map(|x| self.global_site(x))
            .collect();
        Ok((0..local * per_site)
            .into_par_iter()
            .map(|i| global[sites[i / per_site] * per_site + i % per_site].clone())
            .collect())
    }
}

/// The global site-major array whose parts (in local order, `per_site` values per site)
/// are `parts`, one per rank of one grid: `partitions[r]` is rank r's. The inverse of
/// `Partition::scatter_sites`.
pub fn gather_sites<T: Clone + Send + Sync, P: AsRef<[T]>>(
    parts: &[P],
    partitions: &[Partition],
    per_site: usize,
) -> Result<Vec<T>> {
    let first = partitions
        .first()
        .ok_or_else(|| Error::internal("gather: no ranks"))?;
    if parts.len() != partitions.len() || partitions.len() != first.ranks() {
        return Err(Error::internal(format!(
            "gather: {} parts and {} partitions for a grid of {} ranks",
            parts.len(),
            partitions.len(),
            first.ranks()
        )));
    }
    let local: usize = first.local_dims().iter().product();
    let volume: usize = first.global.iter().product();
    for (r, (part, p)) in parts.iter().zip(partitions).enumerate() {
        let part = part.as_ref();
        if p.global != first.global || p.grid != first.grid || p.rank() != r {
            return Err(Error::internal(format!(
                "gather: part {r} is rank {} of grid {:?} on {:?}, expected rank {r} of {:?} on {:?}",
                p.rank(),
                p.grid,
                p.global,
                first.grid,
                first.global
            )));
        }
        if part.len() != local * per_site {
            return Err(Error::internal(format!(
                "gather: rank {r} gave {} values, expected {local} sites x {per_site}",
                part.len()
            )));
        }
    }
    // Element by element over the threads, collected in place (see `scatter_sites`): the
    // global site's coordinates, its rank's, and its index on that rank's sub-lattice.
    let global = Lattice::new(first.global, super::lattice::DEFAULT_BOUNDARY)?;
    let local_lattice = first.local_lattice(super::lattice::DEFAULT_BOUNDARY)?;
    let l = local_lattice.dims;
    let parts: Vec<&[T]> = parts.iter().map(AsRef::as_ref).collect();
    Ok((0..volume * per_site)
        .into_par_iter()
        .map(|i| {
            let c = global.coords(i / per_site);
            let rank = first.rank_of(std::array::from_fn(|mu| c[mu] / l[mu]));
            let x = local_lattice.index(std::array::from_fn(|mu| c[mu] % l[mu]));
            parts[rank][x * per_site + i % per_site].clone()
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::lattice::DEFAULT_BOUNDARY;

    #[test]
    fn ranks_tile_the_global_lattice_once() {
        // Every global site belongs to exactly one rank's sub-lattice (counted).
        let global = [8, 4, 4, 8];
        let grid = [2, 1, 1, 2];
        let mut owner = vec![0u32; global.iter().product()];
        for rank in 0..4 {
            let p = Partition::new(global, grid, rank).unwrap();
            assert_eq!(p.rank(), rank);
            let l = p.local_lattice(DEFAULT_BOUNDARY).unwrap();
            assert_eq!(l.dims, [4, 4, 4, 4]);
            for i in 0..l.volume() {
                let c = l.coords(i);
                let g: [usize; 4] = std::array::from_fn(|mu| c[mu] + l.offset[mu]);
                owner[g[0] + 8 * (g[1] + 4 * (g[2] + 4 * g[3]))] += 1;
            }
        }
        assert!(owner.iter().all(|&n| n == 1));
    }

    #[test]
    fn scatter_and_gather_invert_each_other_on_an_uneven_split() {
        // Exact (integers): every global value lands at its rank's local index and comes
        // back; extents and grid all different, so no index can stand in for another.
        let (global, grid, per_site) = ([4, 6, 2, 8], [2, 3, 1, 2], 3);
        let volume: usize = global.iter().product();
        let values: Vec<u64> = (0..(volume * per_site) as u64).collect();
        let parts: Vec<Partition> = (0..12)
            .map(|r| Partition::new(global, grid, r).unwrap())
            .collect();
        let shares: Vec<Vec<u64>> = parts
            .iter()
            .map(|p| p.scatter_sites(&values, per_site).unwrap())
            .collect();
        for (p, share) in parts.iter().zip(&shares) {
            assert_eq!(share.len(), 2 * 2 * 2 * 4 * per_site);
            for (x, site) in share.chunks(per_site).enumerate() {
                let g = p.global_site(x);
                assert_eq!(site, &values[g * per_site..(g + 1) * per_site]);
            }
        }
        assert_eq!(gather_sites(&shares, &parts, per_site).unwrap(), values);
    }

    #[test]
    fn neighbours_wrap_around_the_grid() {
        let p = Partition::new([8, 8, 8, 8], [2, 1, 1, 4], 1).unwrap(); // coords (1,0,0,0)
        assert_eq!(p.coords, [1, 0, 0, 0]);
        assert_eq!(p.neighbour(0, true), 0);
        assert_eq!(p.neighbour(3, false), 1 + 2 * 3);
        assert_eq!(p.neighbour(1, true), 1);
        assert_eq!(p.face_sites(3), 4 * 8 * 8);
        assert!(p.is_split(3) && !p.is_split(2));
        assert_eq!(Partition::single([4, 4, 4, 4]).ranks(), 1);
    }

    #[test]
    fn impossible_splits_are_refused_by_key() {
        for (grid, what) in [([3, 1, 1, 1], "does not divide"), ([1, 1, 1, 8], "odd")] {
            let e = Partition::new([8, 4, 4, 8], grid, 0)
                .unwrap_err()
                .to_string();
            assert!(e.contains("parallel.grid") && e.contains(what), "{e}");
        }
        // [1,1,1,8] on LT = 8 leaves local t = 1: odd.
    }

    #[test]
    fn scatter_then_gather_is_the_identity() {
        // Every global value tagged by its own index: scatter over the grid and gather
        // back must return exactly the input, for several grids (incl. one rank).
        let global = [4, 2, 6, 8];
        let per_site = 3;
        let volume: usize = global.iter().product();
        let field: Vec<u64> = (0..(volume * per_site) as u64).collect();
        for grid in [[1, 1, 1, 1], [1, 1, 1, 2], [2, 1, 1, 2], [2, 1, 3, 4]] {
            let parts: Vec<Partition> = (0..grid.iter().product())
                .map(|r| Partition::new(global, grid, r).unwrap())
                .collect();
            let pieces: Vec<Vec<u64>> = parts
                .iter()
                .map(|p| p.scatter_sites(&field, per_site).unwrap())
                .collect();
            // The first local site of a rank is its offset, globally.
            for (p, piece) in parts.iter().zip(&pieces) {
                let o = p.offset();
                let g0 = o[0] + global[0] * (o[1] + global[1] * (o[2] + global[2] * o[3]));
                assert_eq!(piece[0], (g0 * per_site) as u64);
            }
            assert_eq!(gather_sites(&pieces, &parts, per_site).unwrap(), field);
        }
        // A part of the wrong length, or parts out of rank order, are refused.
        let parts: Vec<Partition> = (0..2)
            .map(|r| Partition::new(global, [1, 1, 1, 2], r).unwrap())
            .collect();
        let mut pieces: Vec<Vec<u64>> = parts
            .iter()
            .map(|p| p.scatter_sites(&field, per_site).unwrap())
            .collect();
        let swapped = [parts[1].clone(), parts[0].clone()];
        assert!(gather_sites(&pieces, &swapped, per_site).is_err());
        pieces[1].pop();
        assert!(gather_sites(&pieces, &parts, per_site).is_err());
        assert!(parts[0].scatter_sites(&field[1..], per_site).is_err());
    }
}
