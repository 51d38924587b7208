//! The gauge field on the host: one SU(3) link U_mu(x) per site and direction, stored
//! `[site][mu]` with the site index of `Lattice::index` (x fastest), each link row-major.

use super::su3::Su3;
use crate::geometry::lattice::{Lattice, NDIM};
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

    /// Re Tr of the plaquette U_mu(x) U_nu(x+mu) U_mu(x+nu)^+ U_nu(x)^+ (links periodic),
    /// with x+mu and x+nu given.
    fn plaquette_at(&self, x: usize, mu: usize, nu: usize, xpmu: usize, xpnu: usize) -> f64 {
        let a = self.link(x, mu).mul(self.link(xpmu, nu));
        let b = self.link(x, nu).mul(self.link(xpnu, mu));
        a.re_trace_mul(&b.dagger())
    }

    pub fn plaquette(&self) -> Plaquette {
        let v = self.lattice.volume();
        Plaquette::from_sums(self.plaquette_sums(v, |x| x), v)
    }

    /// The sums of Re Tr U_p over the sites `site(0..n)` of this field's lattice and the 6
    /// planes mu < nu: [the 3 spatial planes, the 3 containing t], not normalised. The
    /// slab reader sums the sites a rank owns inside the box it read (its sub-lattice plus
    /// a forward layer), whose neighbours are all in the box.
    pub fn plaquette_sums(&self, n: usize, site: impl Fn(usize) -> usize + Sync) -> [f64; 2] {
        let per_site: Vec<[f64; 2]> = (0..n)
            .into_par_iter()
            .map(|i| {
                let x = site(i);
                // The forward neighbours once per site (not twice per plaquette).
                let up = self.lattice.neighbours(x).map(|n| n[0].0);
                let mut s = [0.0; 2];
                for mu in 0..NDIM {
                    for nu in mu + 1..NDIM {
                        s[(nu == 3) as usize] += self.plaquette_at(x, mu, nu, up[mu], up[nu]);
                    }
                }
                s
            })
            .collect();
        [det_sum(&per_site, |s| s[0]), det_sum(&per_site, |s| s[1])]
    }

    /// Sum over sites and directions of Re Tr U_mu(x) / (4 V 3).
    pub fn link_trace(&self) -> f64 {
        det_sum(&self.links, |u| u.trace().re) / (self.links.len() as f64 * 3.0)
    }

    /// Worst deviation from SU(3) over all links (see `Su3::unitarity_deviation`). A link
    /// holding NaN makes it NaN (f64::max would drop the NaN and report the rest).
    pub fn max_unitarity_deviation(&self) -> f64 {
        self.worst_link().map_or(0.0, |(_, d)| d)
    }

    /// The link farthest from SU(3): its index in `links` (site * 4 + mu) and its
    /// deviation; a NaN deviation counts as the worst. `None` for an empty field.
    pub fn worst_link(&self) -> Option<(usize, f64)> {
        worst_link(&self.links)
    }

    /// How many links deviate from SU(3) by more than `tol` (or by NaN).
    pub fn links_beyond(&self, tol: f64) -> usize {
        links_beyond(&self.links, tol)
    }

    /// The first link (lowest index site * 4 + mu) holding a non-finite element, with that
    /// element's row, column and part (0 = re, 1 = im) and its value; and how many links
    /// hold one.
    pub fn first_non_finite(&self) -> Option<(NonFinite, usize)> {
        first_non_finite(&self.links)
    }

    pub fn reunitarise(&mut self) {
        reunitarise(&mut self.links);
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

impl Plaquette {
    /// The averages from `GaugeField::plaquette_sums` over `volume` sites.
    pub fn from_sums([spatial, temporal]: [f64; 2], volume: usize) -> Plaquette {
        let norm = 3.0 * volume as f64 * 3.0;
        Plaquette {
            total: (spatial + temporal) / (2.0 * norm),
            spatial: spatial / norm,
            temporal: temporal / norm,
        }
    }
}

/// Every link projected onto SU(3) (`Su3::reunitarise`).
pub fn reunitarise(links: &mut [Su3]) {
    links.par_iter_mut().for_each(|u| *u = u.reunitarise());
}

/// The link of `links` farthest from SU(3): its index and its deviation; a NaN deviation
/// counts as the worst, and on a tie the lower index wins (`worse_link`), so the answer
/// does not depend on how the work is split. `None` for no links.
pub fn worst_link(links: &[Su3]) -> Option<(usize, f64)> {
    links
        .par_iter()
        .enumerate()
        .map(|(k, u)| (k, u.unitarity_deviation()))
        .reduce_with(worse_link)
}

/// Of two (index, deviation from SU(3)), the worse: NaN ranks above every number; on a
/// tie the lower index.
pub fn worse_link(a: (usize, f64), b: (usize, f64)) -> (usize, f64) {
    let key = |d: f64| (d.is_nan(), if d.is_nan() { 0.0 } else { d });
    match key(b.1).partial_cmp(&key(a.1)) {
        Some(std::cmp::Ordering::Greater) => b,
        Some(std::cmp::Ordering::Equal) if b.0 < a.0 => b,
        _ => a,
    }
}

/// How many of `links` deviate from SU(3) by more than `tol` (or by NaN).
pub fn links_beyond(links: &[Su3], tol: f64) -> usize {
    links
        .par_iter()
        .filter(|u| {
            let d = u.unitarity_deviation();
            d.is_nan() || d > tol
        })
        .count()
}

/// Where a link holds a value that is not a finite number.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NonFinite {
    /// Index in the link array: site * 4 + mu.
    pub link: usize,
    pub row: usize,
    pub col: usize,
    /// 0 = real part, 1 = imaginary part.
    pub part: usize,
    pub value: f64,
}

/// The first non-finite element of `links` and how many links hold one.
pub fn first_non_finite(links: &[Su3]) -> Option<(NonFinite, usize)> {
    let bad = |u: &Su3| {
        u.0.iter()
            .flatten()
            .any(|z| !(z.re.is_finite() && z.im.is_finite()))
    };
    let count = links.par_iter().filter(|u| bad(u)).count();
    if count == 0 {
        return None;
    }
    let link = links.iter().position(bad)?;
    let u = &links[link];
    for row in 0..3 {
        for col in 0..3 {
            for (part, value) in [u.0[row][col].re, u.0[row][col].im].into_iter().enumerate() {
                if !value.is_finite() {
                    return Some((
                        NonFinite {
                            link,
                            row,
                            col,
                            part,
                            value,
                        },
                        count,
                    ));
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::lattice::DEFAULT_BOUNDARY;

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
    fn the_hot_field_is_the_same_for_any_thread_count_and_haar_like() {
        // 8x8x8x8: 16384 links, drawn in parallel from per-link Philox streams.
        let l = Lattice::new([8, 8, 8, 8], DEFAULT_BOUNDARY).unwrap();
        let pool = |n| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .unwrap()
        };
        let one = pool(1).install(|| GaugeField::random(&l, 2013));
        let four = pool(4).install(|| GaugeField::random(&l, 2013));
        let bits = |g: &GaugeField| -> Vec<u64> {
            g.links
                .iter()
                .flat_map(|u| {
                    u.0.iter()
                        .flatten()
                        .flat_map(|z| [z.re.to_bits(), z.im.to_bits()])
                })
                .collect()
        };
        assert_eq!(bits(&one), bits(&four), "bit for bit, 1 or 4 threads");
        // Gram-Schmidt in double: SU(3) to rounding (a few units of 2^-52 per element).
        assert!(one.max_unitarity_deviation() < 1e-14);
        // Haar-random links: E Re Tr U_p / 3 = 0, and distinct plaquettes are
        // uncorrelated (each holds a link no other in the pair holds, which by the Haar
        // measure's invariance makes the pair's product mean zero), each with variance
        // E (Re Tr U)^2 / 9 = (1/2) / 9 = 1/18. The mean of 6V plaquettes then has
        // standard deviation sqrt(1 / (18 * 6 * 4096)) = 1.5e-3; 5 of them bound it.
        // The mean link trace (16384 links): sqrt(1 / (18 * 16384)) = 1.8e-3.
        let p = one.plaquette();
        assert!(p.total.abs() < 5.0 * 1.5e-3, "plaquette {}", p.total);
        assert!(
            one.link_trace().abs() < 5.0 * 1.8e-3,
            "link trace {}",
            one.link_trace()
        );
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
