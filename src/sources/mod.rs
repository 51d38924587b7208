//! The sources of a lattice calculation and the smearing of quark fields: point-like
//! shapes (wall, Gaussian wavefunction) and the momentum phase (`shapes`), stochastic
//! Z2/Z4 noise with dilution (`noise`), and Wuppertal/Jacobi quark smearing with the
//! spatial hopping term (`quark_smear`; links smeared beforehand by `crate::smear`).
//!
//! The functions take parameters already checked (`check_*` here,
//! `QuarkSmearing::check`): the config layer calls those first, so that a bad value is
//! refused at its key. The conventions are in docs/conventions.md ("Sources and
//! smearing").

pub mod noise;
pub mod quark_smear;
pub mod shapes;

use crate::error::{Error, Result};
use crate::geometry::lattice::{Lattice, DIR_NAMES, NDIM};
pub use noise::{noise, Dilution, Noise, Support};
pub use quark_smear::{hopping_spatial, smear_quark, QuarkSmearing};
pub use shapes::{gaussian_wavefunction, momentum_phase, wall};

/// Refuse a spin outside 0..4 or a colour outside 0..3, naming `key`.
pub fn check_spin_colour(spin: usize, colour: usize, key: &str) -> Result<()> {
    if spin < 4 && colour < 3 {
        Ok(())
    } else {
        Err(Error::invalid(
            key,
            format!("spin must be 0..3 and colour 0..2, got spin {spin}, colour {colour}"),
        ))
    }
}

/// Refuse a timeslice outside the lattice's global time extent, naming `key`.
pub fn check_timeslice(lattice: &Lattice, t: usize, key: &str) -> Result<()> {
    let lt = lattice.global[3];
    if t < lt {
        Ok(())
    } else {
        Err(Error::invalid(
            key,
            format!("timeslice {t} is outside the lattice (LT = {lt})"),
        ))
    }
}

/// Refuse a site outside the lattice's global extents, naming `key`.
pub fn check_site(lattice: &Lattice, site: [usize; NDIM], key: &str) -> Result<()> {
    match (0..NDIM).find(|&mu| site[mu] >= lattice.global[mu]) {
        None => Ok(()),
        Some(mu) => Err(Error::invalid(
            key,
            format!(
                "site {site:?} is outside the lattice: {} = {} but L{} = {}",
                DIR_NAMES[mu],
                site[mu],
                DIR_NAMES[mu].to_uppercase(),
                lattice.global[mu]
            ),
        )),
    }
}

/// Refuse a Gaussian radius that is not a positive finite number, naming `key`.
pub fn check_radius(r0: f64, key: &str) -> Result<()> {
    if r0.is_finite() && r0 > 0.0 {
        Ok(())
    } else {
        Err(Error::invalid(
            key,
            format!("the Gaussian radius r0 must be a positive number, got {r0}"),
        ))
    }
}
