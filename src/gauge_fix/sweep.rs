//! One checkerboard sweep of the overrelaxation: the even sites, then the odd sites. A
//! half-sweep computes the local update g(x) of every site of one parity from the links
//! as they are (`su2::local_update` of `w(x) = sum_mu [U_mu(x) + U_mu(x - mu)^dagger]`),
//! then applies all of them at once, `U_mu(y) -> g(y) U_mu(y) g(y + mu)^dagger` with g = 1
//! on the other parity, and multiplies them into the accumulated transform,
//! `G(x) -> g(x) G(x)`. Sites of one parity share no link (every extent the gauge
//! condition couples is even), so this is the sequential site-by-site update; each step is
//! a pure function of its site's data, so the result is the same for any thread count.

use super::su2::local_update;
use crate::field::su3::Su3;
use crate::geometry::lattice::{Lattice, NDIM};
use rayon::prelude::*;

/// Sites a rayon task takes at least.
const MIN_SITES: usize = 256;

/// The neighbour and parity tables of a lattice (computed once per fix).
pub struct Tables {
    /// x + mu for each site and direction.
    fwd: Vec<[u32; NDIM]>,
    /// x - mu for each site and direction.
    bwd: Vec<[u32; NDIM]>,
    /// (x + y + z + t) % 2.
    parity: Vec<u8>,
}

impl Tables {
    /// The tables of `lattice`; sites are indexed by u32 (`HOST_MAX_SITES` is u32::MAX).
    pub fn new(lattice: &Lattice) -> Tables {
        let per_site: Vec<([u32; NDIM], [u32; NDIM], u8)> = (0..lattice.volume())
            .into_par_iter()
            .with_min_len(MIN_SITES)
            .map(|x| {
                let nb = lattice.neighbours(x);
                (
                    std::array::from_fn(|mu| nb[mu][0].0 as u32),
                    std::array::from_fn(|mu| nb[mu][1].0 as u32),
                    lattice.parity(x) as u8,
                )
            })
            .collect();
        Tables {
            fwd: per_site.iter().map(|s| s.0).collect(),
            bwd: per_site.iter().map(|s| s.1).collect(),
            parity: per_site.iter().map(|s| s.2).collect(),
        }
    }
}

/// The working state of a fix: the links as transformed so far, the accumulated G, and
/// the buffer of one half-sweep's local updates.
pub struct State<'a> {
    pub tables: &'a Tables,
    /// `[site][mu]`, as `GaugeField::links`.
    pub links: Vec<Su3>,
    pub transform: Vec<Su3>,
    local: Vec<Su3>,
}

impl<'a> State<'a> {
    pub fn new(tables: &'a Tables, links: Vec<Su3>) -> State<'a> {
        let v = tables.parity.len();
        State {
            tables,
            links,
            transform: vec![Su3::identity(); v],
            local: vec![Su3::identity(); v],
        }
    }

    /// Even sites, then odd sites, over the first `ndir` directions.
    pub fn sweep(&mut self, ndir: usize, omega: f64) {
        for parity in 0..2 {
            self.local_updates(parity, ndir, omega);
            self.apply_to_links(parity);
            self.accumulate(parity);
        }
    }

    /// g(x) for every site of `parity` (1 elsewhere) from the current links.
    fn local_updates(&mut self, parity: u8, ndir: usize, omega: f64) {
        let (t, links) = (self.tables, &self.links);
        self.local
            .par_iter_mut()
            .with_min_len(MIN_SITES)
            .enumerate()
            .for_each(|(x, g)| {
                *g = if t.parity[x] == parity {
                    local_update(&site_sum(links, t, x, ndir), omega)
                } else {
                    Su3::identity()
                };
            });
    }

    /// `U_mu(y) -> g(y) U_mu(y) g(y + mu)^dagger` for every link, all four directions
    /// (Coulomb gauge transforms the temporal links too), multiplying only by the g of
    /// sites of `parity`.
    fn apply_to_links(&mut self, parity: u8) {
        let (t, local) = (self.tables, &self.local);
        self.links
            .par_chunks_mut(NDIM)
            .with_min_len(MIN_SITES)
            .enumerate()
            .for_each(|(y, l)| {
                let left = t.parity[y] == parity;
                for mu in 0..NDIM {
                    let z = t.fwd[y][mu] as usize;
                    if left {
                        l[mu] = local[y].mul(&l[mu]);
                    }
                    if t.parity[z] == parity {
                        l[mu] = Su3::mul_dagger(&l[mu], &local[z]);
                    }
                }
            });
    }

    /// `G(x) -> g(x) G(x)` on the sites of `parity`.
    fn accumulate(&mut self, parity: u8) {
        let (t, local) = (self.tables, &self.local);
        self.transform
            .par_iter_mut()
            .with_min_len(MIN_SITES)
            .enumerate()
            .filter(|(x, _)| t.parity[*x] == parity)
            .for_each(|(x, g)| *g = local[x].mul(g));
    }
}

/// `w(x) = sum_{mu < ndir} [U_mu(x) + U_mu(x - mu)^dagger]`: Re tr(g w) is the part of
/// the functional that g(x) changes.
fn site_sum(links: &[Su3], t: &Tables, x: usize, ndir: usize) -> Su3 {
    let mut w = Su3::zero();
    for mu in 0..ndir {
        let up = &links[x * NDIM + mu];
        let down = &links[t.bwd[x][mu] as usize * NDIM + mu];
        for i in 0..3 {
            for j in 0..3 {
                w.0[i][j] += up.0[i][j] + down.0[j][i].conj();
            }
        }
    }
    w
}
