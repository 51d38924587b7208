//! The gauge field on the host: one SU(3) link U_mu(x) per site and direction, stored
//! `[site][mu]` with the site index of `Lattice::index` (x fastest), each link row-major.

use super::su3::Su3;
use crate::lattice::{Lattice, NDIM};
use crate::reduce::det_sum;
use crate::rng::Stream;
use rayon::prelude::*;

#[derive(Clone, Debug)]
pub struct GaugeField {
    pub lattice: Lattice,
    pub links: Vec<Su3>,
}

/// The averages a gauge file header carries, plus the split the `info` command prints.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Plaquette {
    /// Sum over sites and the 6 planes mu<nu of Re Tr U_p / (6 V 3).
    pub total: f64,
    /// The 3 spatial planes, normalised by 3 V 3.
    pub spatial: f64,
    /// The 3 planes containing t, normalised by 3 V 3.
    pub temporal: f64,
}

impl GaugeField {
    pub fn unit(lattice: &Lattice) -> Self {
        GaugeField {
            lattice: lattice.clone(),
            links: vec![Su3::identity(); lattice.volume() * NDIM],
        }
    }

    /// A random ("hot") field: every link drawn from its own counter-based stream keyed by
    /// (seed, site, mu), so the field is the same for any thread count.
    pub fn random(lattice: &Lattice, seed: u64) -> Self {
        let links = (0..lattice.volume() * NDIM)
            .into_par_iter()
            .map(|k| Su3::random(&mut Stream::new(seed, k as u64)))
            .collect();
        GaugeField {
            lattice: lattice.clone(),
            links,
        }
    }

    #[inline]
    pub fn link(&self, site: usize, mu: usize) -> &Su3 {
        &self.links[site * NDIM + mu]
    }

    /// Re Tr of the plaquette U_mu(x) U_nu(x+mu) U_mu(x+nu)^+ U_nu(x)^+ (links periodic).
    fn plaquette_at(&self, x: usize, mu: usize, nu: usize) -> f64 {
        let l = &self.lattice;
        let xpmu = l.neighbour(x, mu, true).0;
        let xpnu = l.neighbour(x, nu, true).0;
        let a = self.link(x, mu).mul(self.link(xpmu, nu));
        let b = self.link(x, nu).mul(self.link(xpnu, mu));
        a.re_trace_mul(&b.dagger())
    }

    pub fn plaquette(&self) -> Plaquette {
        let v = self.lattice.volume();
        let per_site: Vec<[f64; 2]> = (0..v)
            .into_par_iter()
            .map(|x| {
                let mut s = [0.0; 2];
                for mu in 0..NDIM {
                    for nu in mu + 1..NDIM {
                        s[(nu == 3) as usize] += self.plaquette_at(x, mu, nu);
                    }
                }
                s
            })
            .collect();
        let spatial = det_sum(&per_site, |s| s[0]);
        let temporal = det_sum(&per_site, |s| s[1]);
        let norm = 3.0 * v as f64 * 3.0;
        Plaquette {
            total: (spatial + temporal) / (2.0 * norm),
            spatial: spatial / norm,
            temporal: temporal / norm,
        }
    }

    /// Sum over sites and directions of Re Tr U_mu(x) / (4 V 3).
    pub fn link_trace(&self) -> f64 {
        det_sum(&self.links, |u| u.trace().re) / (self.links.len() as f64 * 3.0)
    }

    /// Worst deviation from SU(3) over all links (see `Su3::unitarity_deviation`).
    pub fn max_unitarity_deviation(&self) -> f64 {
        self.links
            .par_iter()
            .map(|u| u.unitarity_deviation())
            .reduce(|| 0.0, f64::max)
    }

    pub fn reunitarise(&mut self) {
        self.links.par_iter_mut().for_each(|u| *u = u.reunitarise());
    }

    /// U'_mu(x) = G(x) U_mu(x) G(x+mu)^+.
    pub fn gauge_transform(&self, g: &[Su3]) -> GaugeField {
        let l = &self.lattice;
        let links = (0..self.links.len())
            .into_par_iter()
            .map(|k| {
                let (x, mu) = (k / NDIM, k % NDIM);
                let xp = l.neighbour(x, mu, true).0;
                g[x].mul(&self.links[k]).mul(&g[xp].dagger())
            })
            .collect();
        GaugeField {
            lattice: l.clone(),
            links,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lattice::DEFAULT_BOUNDARY;

    #[test]
    fn unit_field_has_plaquette_one() {
        let l = Lattice::new([4, 4, 4, 4], DEFAULT_BOUNDARY).unwrap();
        let g = GaugeField::unit(&l);
        let p = g.plaquette();
        // Analytic: every plaquette of the unit field is Tr 1 = 3.
        assert!((p.total - 1.0).abs() < 1e-15);
        assert!((g.link_trace() - 1.0).abs() < 1e-15);
    }

    #[test]
    fn plaquette_is_gauge_invariant() {
        let l = Lattice::new([4, 4, 4, 6], DEFAULT_BOUNDARY).unwrap();
        let u = GaugeField::random(&l, 5);
        let g: Vec<Su3> = (0..l.volume())
            .map(|x| Su3::random(&mut Stream::new(99, x as u64)))
            .collect();
        let p0 = u.plaquette();
        let p1 = u.gauge_transform(&g).plaquette();
        // Analytic: Tr of a closed loop is gauge invariant; rounding only.
        assert!((p0.total - p1.total).abs() < 1e-13);
        assert!((p0.temporal - p1.temporal).abs() < 1e-13);
    }
}
