//! A gauge transformation: one SU(3) matrix G(x) a site, and its action on gauge fields
//! (`U_mu(x) -> G(x) U_mu(x) G(x + mu)^dagger`, links periodic) and on spinors
//! (`psi(x) -> G(x) psi(x)` on colour, every spin).

use crate::field::su3::Su3;
use crate::field::{GaugeField, SpinorField};
use crate::geometry::lattice::Lattice;
use crate::rng::Stream;
use rayon::prelude::*;

#[derive(Clone, Debug, PartialEq)]
pub struct GaugeTransform {
    /// G(x) at the site index of `Lattice::index`.
    pub matrices: Vec<Su3>,
}

impl GaugeTransform {
    /// G = 1 everywhere.
    pub fn identity(lattice: &Lattice) -> Self {
        GaugeTransform {
            matrices: vec![Su3::identity(); lattice.volume()],
        }
    }

    /// Haar-random G(x) (`Su3::random`), each site from its own stream keyed by (seed,
    /// site), so the transform is the same for any thread count.
    pub fn random(lattice: &Lattice, seed: u64) -> Self {
        GaugeTransform {
            matrices: (0..lattice.volume())
                .into_par_iter()
                .map(|x| Su3::random(&mut Stream::new(seed, x as u64)))
                .collect(),
        }
    }

    /// `U_mu(x) -> G(x) U_mu(x) G(x + mu)^dagger`.
    ///
    /// # Panics
    /// When the transform holds another number of sites than the field (a transform
    /// built for another lattice).
    pub fn apply_gauge(&self, g: &GaugeField) -> GaugeField {
        self.assert_volume(g.lattice.volume(), "gauge field");
        g.gauge_transform(&self.matrices)
    }

    /// `psi(x) -> G(x) psi(x)`.
    ///
    /// # Panics
    /// When the transform holds another number of sites than the spinor.
    pub fn apply_spinor(&self, psi: &SpinorField) -> SpinorField {
        self.assert_volume(psi.volume(), "spinor field");
        psi.gauge_transform(&self.matrices)
    }

    /// The transform that applies `first`, then `self`: `G(x) = self(x) first(x)`.
    pub fn after(&self, first: &GaugeTransform) -> GaugeTransform {
        self.assert_volume(first.matrices.len(), "transform");
        GaugeTransform {
            matrices: self
                .matrices
                .par_iter()
                .zip(&first.matrices)
                .map(|(a, b)| a.mul(b))
                .collect(),
        }
    }

    /// The inverse transform, `G(x)^dagger`.
    pub fn inverse(&self) -> GaugeTransform {
        GaugeTransform {
            matrices: self.matrices.par_iter().map(|g| g.dagger()).collect(),
        }
    }

    /// Worst deviation of any G(x) from SU(3) (`Su3::unitarity_deviation`).
    pub fn max_unitarity_deviation(&self) -> f64 {
        crate::field::gauge::worst_link(&self.matrices).map_or(0.0, |(_, d)| d)
    }

    fn assert_volume(&self, sites: usize, what: &str) {
        assert_eq!(
            self.matrices.len(),
            sites,
            "a gauge transform of {} sites applied to a {what} of {sites} sites",
            self.matrices.len()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::lattice::DEFAULT_BOUNDARY;

    #[test]
    fn a_transform_and_its_inverse_give_the_field_back() {
        let l = Lattice::new([4, 4, 4, 4], DEFAULT_BOUNDARY).unwrap();
        let u = GaugeField::random(&l, 3);
        let g = GaugeTransform::random(&l, 8);
        // G^+ (G U G^+) G = U: rounding of two products of three SU(3) matrices.
        let back = g.inverse().apply_gauge(&g.apply_gauge(&u));
        let diff = u
            .links
            .iter()
            .zip(&back.links)
            .map(|(a, b)| a.max_abs_diff(b))
            .fold(0.0, f64::max);
        assert!(diff < 1e-14, "{diff}");
        // G^+ G = 1 exactly to rounding.
        let one = g.inverse().after(&g);
        assert!(one
            .matrices
            .iter()
            .all(|m| m.max_abs_diff(&Su3::identity()) < 1e-15));
        assert!(g.max_unitarity_deviation() < 1e-14);
        assert_eq!(GaugeTransform::identity(&l).apply_gauge(&u).links, u.links);
    }
}
