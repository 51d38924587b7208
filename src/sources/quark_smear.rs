//! Gauge-covariant smearing of a quark field with the spatial hopping term (Wuppertal,
//! also called Gaussian, and Jacobi), each timeslice separately and each spin alike.
//!
//! H psi(x) = sum_{i = x, y, z} [ U_i(x) psi(x+i) + U_i(x-i)^+ psi(x-i) ], with the
//! lattice's boundary phase on a hop across a spatial edge (1 for the default periodic
//! space, -1 where a spatial direction is antiperiodic). It acts on the whole lattice of
//! one process (no halo): the links are those of the caller, link-smeared beforehand.

use crate::error::{Error, Result};
use crate::field::spinor::SITE_LEN;
use crate::field::{GaugeField, SpinorField, C64};
use crate::smear::SPATIAL;
use rayon::prelude::*;

/// How a quark source or sink is smeared.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum QuarkSmearing {
    /// The field as it is.
    None,
    /// Wuppertal (Gusken), QUDA's form (`performWuppertalnStep`): `iterations` times
    /// `psi <- (psi + alpha H psi) / (1 + 6 alpha)`. Chroma's GAUSSIAN smearing of width w
    /// and N iterations is the same operator with `alpha = a / (1 - 6 a)`, `a = w^2 / (4N)`
    /// (`QuarkSmearing::chroma_gaussian`). `alpha >= 0`.
    Wuppertal { alpha: f64, iterations: usize },
    /// Jacobi: `psi_{n+1} = psi_0 + kappa H psi_n`, `iterations` times from psi_0, the
    /// truncated series sum_{k <= N} (kappa H)^k psi_0 of (1 - kappa H)^{-1} psi_0, not
    /// normalised. `kappa >= 0`.
    Jacobi { kappa: f64, iterations: usize },
}

impl QuarkSmearing {
    /// Refuse a parameter outside its range, naming `key.alpha` or `key.kappa`.
    pub fn check(&self, key: &str) -> Result<()> {
        let (name, value) = match *self {
            QuarkSmearing::None => return Ok(()),
            QuarkSmearing::Wuppertal { alpha, .. } => ("alpha", alpha),
            QuarkSmearing::Jacobi { kappa, .. } => ("kappa", kappa),
        };
        if value.is_finite() && value >= 0.0 {
            Ok(())
        } else {
            Err(Error::invalid(
                format!("{key}.{name}"),
                format!("quark smearing needs a finite {name} >= 0, got {value}"),
            ))
        }
    }

    /// The Wuppertal smearing equal to Chroma's GAUSSIAN quark smearing (`gausSmear`:
    /// `N` times `psi <- (1 + a Laplacian) psi`, `a = w^2 / (4N)`, Laplacian = H - 6):
    /// `alpha = a / (1 - 6 a)`, which needs `w^2 < 2N / 3` (`key` names the width).
    pub fn chroma_gaussian(width: f64, iterations: usize, key: &str) -> Result<QuarkSmearing> {
        let a = width * width / (4.0 * iterations.max(1) as f64);
        if !(width.is_finite() && 6.0 * a < 1.0) {
            return Err(Error::invalid(
                key,
                format!(
                    "a Gaussian width {width} with {iterations} iterations has w^2/(4N) = {a} >= 1/6: \
                     it is no Wuppertal smearing with alpha >= 0 (use more iterations)"
                ),
            ));
        }
        Ok(QuarkSmearing::Wuppertal {
            alpha: a / (1.0 - 6.0 * a),
            iterations,
        })
    }
}

/// The smeared field (`s` as `QuarkSmearing::check` accepts it); `links` on the lattice of
/// `psi`.
pub fn smear_quark(links: &GaugeField, psi: &SpinorField, s: &QuarkSmearing) -> SpinorField {
    assert_eq!(
        links.lattice.volume(),
        psi.volume(),
        "links and field volumes"
    );
    match *s {
        QuarkSmearing::None => psi.par_clone(),
        QuarkSmearing::Wuppertal { alpha, iterations } => {
            let norm = 1.0 / (1.0 + 6.0 * alpha);
            let mut cur = psi.par_clone();
            for _ in 0..iterations {
                cur = combine(&cur, norm, alpha * norm, &hopping_spatial(links, &cur));
            }
            cur
        }
        QuarkSmearing::Jacobi { kappa, iterations } => {
            let mut cur = psi.par_clone();
            for _ in 0..iterations {
                cur = combine(psi, 1.0, kappa, &hopping_spatial(links, &cur));
            }
            cur
        }
    }
}

/// a x + b h, element by element.
fn combine(x: &SpinorField, a: f64, b: f64, h: &SpinorField) -> SpinorField {
    SpinorField {
        data: x
            .data
            .par_iter()
            .zip(h.data.par_iter())
            .map(|(x, h)| a * x + b * h)
            .collect(),
    }
}

/// H psi: the spatial hopping term of the module's documentation, every spin alike.
pub fn hopping_spatial(links: &GaugeField, psi: &SpinorField) -> SpinorField {
    let l = &links.lattice;
    let mut out = SpinorField::zeros(psi.volume());
    out.data
        .par_chunks_mut(SITE_LEN)
        .enumerate()
        .for_each(|(x, o)| {
            let nb = l.neighbours(x);
            for i in 0..SPATIAL {
                let ((up, pu), (dn, pd)) = (nb[i][0], nb[i][1]);
                let (u_up, u_dn) = (links.link(x, i), links.link(dn, i));
                for spin in 0..4 {
                    let fwd = u_up.mul_vec(&colour(psi, up, spin));
                    let bwd = u_dn.dagger_mul_vec(&colour(psi, dn, spin));
                    for c in 0..3 {
                        o[3 * spin + c] += pu * fwd[c] + pd * bwd[c];
                    }
                }
            }
        });
    out
}

/// The colour vector of one spin at one site.
fn colour(psi: &SpinorField, site: usize, spin: usize) -> [C64; 3] {
    let k = site * SITE_LEN + 3 * spin;
    [psi.data[k], psi.data[k + 1], psi.data[k + 2]]
}
