//! Sources of a fixed shape: the wall, the Gaussian wavefunction, and the momentum phase
//! a source is multiplied by.
//!
//! Coordinates (the wall's timeslice, the source site, the origin) are global: a site of
//! this lattice is at `coords + offset` in the `global` extents, so a rank's part of a
//! split lattice holds its share of the same source.

use crate::field::spinor::idx;
use crate::field::{SpinorField, C64};
use crate::geometry::lattice::{Lattice, NDIM};
use rayon::prelude::*;
use std::f64::consts::PI;

/// The global coordinates of local site `x`.
pub fn global_coords(lattice: &Lattice, x: usize) -> [usize; NDIM] {
    let c = lattice.coords(x);
    std::array::from_fn(|mu| c[mu] + lattice.offset[mu])
}

/// A field zero except for component (spin, colour) of each site, which is `value` of
/// the site's global coordinates.
fn fill_component(
    lattice: &Lattice,
    spin: usize,
    colour: usize,
    value: impl Fn([usize; NDIM]) -> C64 + Sync,
) -> SpinorField {
    assert!(
        spin < 4 && colour < 3,
        "spin {spin} colour {colour}: see sources::check_spin_colour"
    );
    let mut f = SpinorField::zeros(lattice.volume());
    f.data
        .par_chunks_mut(crate::field::spinor::SITE_LEN)
        .enumerate()
        .for_each(|(x, s)| s[idx(0, spin, colour)] = value(global_coords(lattice, x)));
    f
}

/// 1 in component (spin, colour) of every site of global timeslice `t`, 0 elsewhere.
pub fn wall(lattice: &Lattice, t: usize, spin: usize, colour: usize) -> SpinorField {
    fill_component(lattice, spin, colour, |c| {
        C64::new(if c[3] == t { 1.0 } else { 0.0 }, 0.0)
    })
}

/// The shortest periodic distance squared between spatial coordinates `a` and `b` of a
/// lattice of global extents `global`: sum over i of min(|a_i - b_i|, L_i - |a_i - b_i|)^2.
pub fn periodic_distance2(global: &[usize; NDIM], a: &[usize; NDIM], b: &[usize; NDIM]) -> f64 {
    (0..3)
        .map(|i| {
            let d = a[i].abs_diff(b[i]) % global[i];
            let d = d.min(global[i] - d) as f64;
            d * d
        })
        .sum()
}

/// exp(-r^2 / r0^2) in component (spin, colour) on the source's timeslice `site[3]`, r
/// the shortest periodic spatial distance to `site` (global coordinates); 0 elsewhere.
/// Not normalised: the source site holds 1.
pub fn gaussian_wavefunction(
    lattice: &Lattice,
    site: [usize; NDIM],
    r0: f64,
    spin: usize,
    colour: usize,
) -> SpinorField {
    let global = lattice.global;
    fill_component(lattice, spin, colour, |c| {
        if c[3] == site[3] {
            C64::new(
                (-periodic_distance2(&global, &c, &site) / (r0 * r0)).exp(),
                0.0,
            )
        } else {
            C64::new(0.0, 0.0)
        }
    })
}

/// psi(x) *= exp(+i 2 pi sum_i p_i (x_i - origin_i) / L_i) over the spatial i, with
/// global coordinates and extents: a source so multiplied is projected onto momentum
/// 2 pi p / L by a sink summed with exp(-i p x).
pub fn momentum_phase(lattice: &Lattice, psi: &mut SpinorField, p: [i64; 3], origin: [usize; 3]) {
    assert_eq!(psi.volume(), lattice.volume(), "field and lattice volumes");
    let global = lattice.global;
    psi.data
        .par_chunks_mut(crate::field::spinor::SITE_LEN)
        .enumerate()
        .for_each(|(x, s)| {
            let c = global_coords(lattice, x);
            let phase: f64 = (0..3)
                .map(|i| {
                    // p_i (x_i - origin_i) mod L_i, exact in integers, then the angle.
                    let l = global[i] as i128;
                    let k = (p[i] as i128 * (c[i] as i128 - origin[i] as i128)).rem_euclid(l);
                    2.0 * PI * k as f64 / l as f64
                })
                .sum();
            let e = C64::from_polar(1.0, phase);
            s.iter_mut().for_each(|z| *z *= e);
        });
}
