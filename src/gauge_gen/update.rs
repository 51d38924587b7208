//! Checkerboard sweeps of the Wilson gauge action: the staple sum of a link, and heatbath
//! and overrelaxation passes over one (direction, parity) set of links at a time.
//!
//! The links U_mu(x) of one direction mu and one parity of x share no staple: every link
//! in the staple of U_mu(x) is either in another direction or U_mu(x +- nu), of the other
//! parity (all extents even). So a set is updated in parallel from the field as it was
//! before the set, and written back: the result does not depend on the thread count.
//! Order of a pass: mu = 0..3 outer, parity 0 (even) then 1 inner; the GPU host code must
//! launch in the same order to draw the same numbers against the same field.

use super::draws::Su2Draws;
use super::su2::{heatbath_link, overrelax_link};
use crate::error::Result;
use crate::field::su3::{Su3, C64};
use crate::field::GaugeField;
use crate::geometry::lattice::{Lattice, NDIM};
use rayon::prelude::*;

/// Neighbour tables and parity site lists, built once per lattice.
#[derive(Clone, Debug)]
pub struct Geometry {
    /// `[x+0, x+1, x+2, x+3, x-0, x-1, x-2, x-3]` for every site (links periodic).
    pub neighbours: Vec<[u32; 2 * NDIM]>,
    /// The sites of each parity in increasing lexicographic order.
    pub parity_sites: [Vec<u32>; 2],
    /// The global lexicographic index of each site (the Philox site counter).
    pub global_index: Vec<u32>,
}

impl Geometry {
    /// Checkerboard updates need every extent even (then parities alternate across the
    /// periodic edge too).
    pub fn new(lattice: &Lattice) -> Result<Self> {
        lattice.require_even("the checkerboard gauge update")?;
        let v = lattice.volume();
        let neighbours = (0..v)
            .map(|x| {
                let mut n = [0u32; 2 * NDIM];
                for mu in 0..NDIM {
                    n[mu] = lattice.neighbour(x, mu, true).0 as u32;
                    n[NDIM + mu] = lattice.neighbour(x, mu, false).0 as u32;
                }
                n
            })
            .collect();
        let mut parity_sites = [Vec::with_capacity(v / 2), Vec::with_capacity(v / 2)];
        for x in 0..v {
            parity_sites[lattice.parity(x)].push(x as u32);
        }
        let g = lattice.global;
        let global_index = (0..v)
            .map(|x| {
                let c = lattice.coords(x);
                let gc: Vec<usize> = (0..NDIM).map(|mu| c[mu] + lattice.offset[mu]).collect();
                (gc[0] + g[0] * (gc[1] + g[1] * (gc[2] + g[2] * gc[3]))) as u32
            })
            .collect();
        Ok(Geometry {
            neighbours,
            parity_sites,
            global_index,
        })
    }
}

/// a^dagger b.
#[inline]
fn adj_mul(a: &Su3, b: &Su3) -> Su3 {
    let mut c = Su3::zero();
    for i in 0..3 {
        for j in 0..3 {
            c.0[i][j] = a.0[0][i].conj() * b.0[0][j]
                + a.0[1][i].conj() * b.0[1][j]
                + a.0[2][i].conj() * b.0[2][j];
        }
    }
    c
}

#[inline]
fn add_assign(acc: &mut Su3, m: &Su3) {
    for (ra, rm) in acc.0.iter_mut().zip(m.0.iter()) {
        for (a, b) in ra.iter_mut().zip(rm.iter()) {
            *a += *b;
        }
    }
}

/// The staple sum A of U_mu(x), so that the action of the link is -(beta/3) Re Tr(U_mu(x) A):
/// `A = sum_{nu != mu} [ U_nu(x+mu) U_mu(x+nu)^+ U_nu(x)^+ + U_nu(x+mu-nu)^+ U_mu(x-nu)^+ U_nu(x-nu) ]`,
/// summed over nu in increasing order, upper staple before lower.
pub fn staple(links: &[Su3], geom: &Geometry, x: usize, mu: usize) -> Su3 {
    let n = &geom.neighbours[x];
    let link = |site: u32, dir: usize| &links[site as usize * NDIM + dir];
    let xpmu = n[mu];
    let mut a = Su3([[C64::new(0.0, 0.0); 3]; 3]);
    for nu in (0..NDIM).filter(|&nu| nu != mu) {
        let xpnu = n[nu];
        let xmnu = n[NDIM + nu];
        let xpmu_mnu = geom.neighbours[xpmu as usize][NDIM + nu];
        // Upper: U_nu(x+mu) U_mu(x+nu)^+ U_nu(x)^+.
        let up = Su3::mul_dagger(
            &Su3::mul_dagger(link(xpmu, nu), link(xpnu, mu)),
            link(x as u32, nu),
        );
        add_assign(&mut a, &up);
        // Lower: (U_mu(x-nu) U_nu(x-nu+mu))^+ U_nu(x-nu).
        let down = adj_mul(&link(xmnu, mu).mul(link(xpmu_mnu, nu)), link(xmnu, nu));
        add_assign(&mut a, &down);
    }
    a
}

/// What a pass does to each link of a set.
#[derive(Clone, Copy, Debug)]
pub enum Update {
    /// Cabibbo-Marinari heatbath at `beta` with the draws of compound sweep `sweep`.
    Heatbath { beta: f64, seed: u64, sweep: u32 },
    /// Cabibbo-Marinari overrelaxation (draws nothing).
    Overrelax,
}

/// Update all links U_mu(x) with x of the given parity, in parallel, from the field as it
/// was before; bitwise independent of the thread count.
pub fn update_set(field: &mut GaugeField, geom: &Geometry, mu: usize, parity: usize, what: Update) {
    let links = &field.links;
    let sites = &geom.parity_sites[parity];
    let new: Vec<Su3> = sites
        .par_iter()
        .map(|&x| {
            let x = x as usize;
            let a = staple(links, geom, x, mu);
            let u = &links[x * NDIM + mu];
            match what {
                Update::Heatbath { beta, seed, sweep } => {
                    let site = geom.global_index[x];
                    heatbath_link(u, &a, beta, |sg| Su2Draws::new(seed, sweep, site, mu, sg))
                }
                Update::Overrelax => overrelax_link(u, &a),
            }
        })
        .collect();
    for (&x, u) in sites.iter().zip(new) {
        field.links[x as usize * NDIM + mu] = u;
    }
}

/// One pass over every link: mu = 0..3, and within each mu even sites then odd sites.
pub fn update_pass(field: &mut GaugeField, geom: &Geometry, what: Update) {
    for mu in 0..NDIM {
        for parity in 0..2 {
            update_set(field, geom, mu, parity, what);
        }
    }
}

/// -(beta/3) Re Tr(U_mu(x) A) without the constant: the part of the Wilson action that
/// depends on the link U_mu(x).
pub fn local_action(field: &GaugeField, geom: &Geometry, x: usize, mu: usize, beta: f64) -> f64 {
    let a = staple(&field.links, geom, x, mu);
    -beta / 3.0 * field.links[x * NDIM + mu].re_trace_mul(&a)
}

/// The Wilson action S = beta sum_p (1 - Re Tr U_p / 3) of the whole field.
pub fn wilson_action(field: &GaugeField, beta: f64) -> f64 {
    let plaquettes = 6.0 * field.lattice.volume() as f64;
    beta * plaquettes * (1.0 - field.plaquette().total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::lattice::DEFAULT_BOUNDARY;

    #[test]
    fn staple_reproduces_the_plaquette_sum() {
        // Every plaquette contains 4 links, so sum_{x,mu} Re Tr(U_mu(x) A_mu(x)) equals
        // 4 * sum_p Re Tr U_p = 4 * 18 V * plaquette (definition of `plaquette`).
        let l = Lattice::new([4, 2, 4, 6], DEFAULT_BOUNDARY).unwrap();
        let f = GaugeField::random(&l, 3);
        let g = Geometry::new(&l).unwrap();
        let mut s = 0.0;
        for x in 0..l.volume() {
            for mu in 0..NDIM {
                s += f.link(x, mu).re_trace_mul(&staple(&f.links, &g, x, mu));
            }
        }
        let expect = 4.0 * 18.0 * l.volume() as f64 * f.plaquette().total;
        assert!(
            (s - expect).abs() < 1e-10 * expect.abs().max(1.0),
            "{s} vs {expect}"
        );
    }

    #[test]
    fn odd_extent_is_refused() {
        let l = Lattice::new([4, 3, 4, 4], DEFAULT_BOUNDARY).unwrap();
        let e = Geometry::new(&l).unwrap_err().to_string();
        assert!(e.contains("LY"), "{e}");
    }

    #[test]
    fn parity_lists_split_the_lattice() {
        let l = Lattice::new([4, 4, 2, 2], DEFAULT_BOUNDARY).unwrap();
        let g = Geometry::new(&l).unwrap();
        assert_eq!(g.parity_sites[0].len(), l.volume() / 2);
        assert_eq!(g.parity_sites[1].len(), l.volume() / 2);
        // The neighbours of an even site are all odd.
        for &x in &g.parity_sites[0] {
            for n in g.neighbours[x as usize] {
                assert_eq!(l.parity(n as usize), 1);
            }
        }
    }
}
