//! Smearing of the spatial gauge links (APE and stout) for smeared quark sources and sinks.
//!
//! Only the spatial links U_i (i = x, y, z) are smeared, each with the four staples of its
//! spatial planes; the temporal links are copied. Each iteration smears every spatial link
//! from the previous iteration's field (a simultaneous update), so the result does not
//! depend on the order of sites or on the thread count. The conventions, and how they map
//! to Chroma's and QUDA's parameters, are in docs/conventions.md ("Sources and smearing").

mod matrix;
pub mod project;
pub mod staple;
pub mod stout;

use crate::error::{Error, Result};
use crate::field::{GaugeField, Su3};
use crate::geometry::lattice::NDIM;
use matrix::{add, scale_re};
use rayon::prelude::*;
pub use staple::{spatial_staples, SPATIAL};

/// How the spatial links are smeared before they build a smeared quark source or sink.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LinkSmearing {
    /// The links as they are.
    None,
    /// APE: `U' = Proj_SU3[(1 - alpha) U + (alpha / 4) sum of the 4 spatial staples]`
    /// (QUDA's normalisation; Chroma's `sm_fact` is `4 (1 - alpha) / alpha`), projected by
    /// `project::project_su3`. `0 <= alpha <= 1`.
    Ape { alpha: f64, iterations: usize },
    /// Stout (Morningstar-Peardon) with one rho for the spatial staples:
    /// `U' = exp(iQ) U`, Q the traceless Hermitian part of `rho C U^+` and C the sum of the
    /// 4 spatial staples. `rho >= 0`.
    Stout { rho: f64, iterations: usize },
}

impl LinkSmearing {
    /// Refuse a parameter outside its range, naming `key.alpha` or `key.rho` (`key` is
    /// where the smearing is configured).
    pub fn check(&self, key: &str) -> Result<()> {
        match *self {
            LinkSmearing::None => Ok(()),
            LinkSmearing::Ape { alpha, .. } => {
                if alpha.is_finite() && (0.0..=1.0).contains(&alpha) {
                    Ok(())
                } else {
                    Err(Error::invalid(
                        format!("{key}.alpha"),
                        format!("APE smearing needs 0 <= alpha <= 1, got {alpha}"),
                    ))
                }
            }
            LinkSmearing::Stout { rho, .. } => {
                if rho.is_finite() && rho >= 0.0 {
                    Ok(())
                } else {
                    Err(Error::invalid(
                        format!("{key}.rho"),
                        format!("stout smearing needs a finite rho >= 0, got {rho}"),
                    ))
                }
            }
        }
    }
}

/// The field with its spatial links smeared by `s` (spatial staples only) and its
/// temporal links copied. The parameters are those `LinkSmearing::check` accepts.
pub fn smear_spatial(g: &GaugeField, s: &LinkSmearing) -> GaugeField {
    match *s {
        LinkSmearing::None => g.clone(),
        LinkSmearing::Ape { alpha, iterations } => {
            iterate(g, iterations, |u, staples| ape_link(u, staples, alpha))
        }
        LinkSmearing::Stout { rho, iterations } => iterate(g, iterations, |u, staples| {
            stout::stout_link(u, staples, rho)
        }),
    }
}

/// One APE link: `Proj_SU3[(1 - alpha) U + (alpha / 4) staples]`.
pub fn ape_link(u: &Su3, staples: &Su3, alpha: f64) -> Su3 {
    let x = add(&scale_re(u, 1.0 - alpha), &scale_re(staples, alpha / 4.0));
    project::project_su3(&x)
}

/// `n` simultaneous updates of every spatial link by `link(U, staples)`.
fn iterate(g: &GaugeField, n: usize, link: impl Fn(&Su3, &Su3) -> Su3 + Sync) -> GaugeField {
    let mut current = g.clone();
    for _ in 0..n {
        current = update(&current, &link);
    }
    current
}

/// Every spatial link of `g` replaced by `link(U, its spatial staples)`, read from `g`.
fn update(g: &GaugeField, link: &(impl Fn(&Su3, &Su3) -> Su3 + Sync)) -> GaugeField {
    let links = (0..g.links.len())
        .into_par_iter()
        .map(|k| {
            let (x, mu) = (k / NDIM, k % NDIM);
            if mu < SPATIAL {
                link(&g.links[k], &spatial_staples(g, x, mu))
            } else {
                g.links[k]
            }
        })
        .collect();
    GaugeField {
        lattice: g.lattice.clone(),
        links,
    }
}
