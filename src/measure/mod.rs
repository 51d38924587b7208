//! Two-point contractions of a point-to-all propagator: the flavour non-singlet mesons of
//! all 16 x 16 Dirac structures (`mesons`) and the nucleon (`nucleon`), projected to sink
//! momenta. The conventions (the 16 structures and their order, the sign of each
//! correlator, the momentum phase, the nucleon's interpolator and projector, the
//! antiperiodic-time sign) are in docs/conventions.md, "Dirac structures and
//! correlators".
//!
//! Input: the propagator as the 12 spin-colour columns of a point source at x0,
//! `prop[s' * 3 + c']` = psi = D^-1 eta with eta the unit source of spin s' and colour c'
//! at x0, so that `prop[s' * 3 + c'](x)_{s c}` = S(x, x0)_{s c, s' c'}.
//!
//! Every correlator sums the sites of a timeslice in blocks of a fixed size
//! (`slices::BLOCK`) in parallel, and adds the blocks in order: the result does not depend
//! on the thread count.

pub mod gammas;
pub mod mesons;
pub mod nucleon;
pub mod slices;

pub use gammas::{
    adjoint_sign, chroma_gamma, gamma_by_name, parity_projector, physical_sign, reflection_sign,
    structure, GAMMA_NAMES,
};
pub use mesons::{all_pairs, mesons, try_mesons};
pub use nucleon::{nucleon, nucleon_projected, try_nucleon_projected};

use crate::field::su3::C64;
use crate::field::SpinorField;
use crate::geometry::lattice::Lattice;
use crate::{Error, Result};
use serde::Serialize;

/// One correlator: the source and sink structures (indices of `GAMMA_NAMES`), the sink
/// momentum's mode numbers (p_j = 2 pi n_j / L_j) and the values at t = 0 .. LT - 1,
/// counted from the source's timeslice t0 (value t is the sink timeslice (t0 + t) mod LT).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Correlator {
    pub source_gamma: usize,
    pub sink_gamma: usize,
    pub momentum: [i64; 3],
    pub values: Vec<C64>,
}

/// Check that `prop` is 12 fields of `lattice`'s volume, that the source timeslice `t0`
/// and the momentum `origin` lie on the lattice: the errors name the argument.
pub fn check_inputs(
    lattice: &Lattice,
    prop: &[SpinorField],
    t0: usize,
    origin: [usize; 3],
) -> Result<()> {
    if prop.len() != 12 {
        return Err(Error::invalid(
            "propagator",
            format!(
                "a point-source propagator has 12 spin-colour columns, got {}",
                prop.len()
            ),
        ));
    }
    let v = lattice.volume();
    if let Some((j, f)) = prop.iter().enumerate().find(|(_, f)| f.volume() != v) {
        return Err(Error::invalid(
            "propagator",
            format!("column {j} holds {} sites, the lattice {}", f.volume(), v),
        ));
    }
    if t0 >= lattice.dims[3] {
        return Err(Error::invalid(
            "t0",
            format!(
                "source timeslice {t0} is not on a lattice of LT = {}",
                lattice.dims[3]
            ),
        ));
    }
    for j in 0..3 {
        if origin[j] >= lattice.dims[j] {
            return Err(Error::invalid(
                "origin",
                format!(
                    "origin {origin:?} is not on the lattice: component {j} must be below {}",
                    lattice.dims[j]
                ),
            ));
        }
    }
    Ok(())
}
