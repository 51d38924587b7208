//! What a gauge fixing run is asked for (`GaugeKind`, `FixOptions` with their checks) and
//! what it reports (`FixReport`).

use crate::error::{Error, Result};
use crate::geometry::lattice::{Lattice, DIR_NAMES, NDIM};
use serde::Serialize;

/// The gauge condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GaugeKind {
    /// sum_i d_i A_i = 0 over the spatial directions mu = 0, 1, 2 (x, y, z): every
    /// timeslice is fixed on its own; the temporal links are transformed, never used.
    Coulomb,
    /// sum_mu d_mu A_mu = 0 over all four directions.
    Landau,
}

impl GaugeKind {
    /// The directions the functional and theta run over: 3 (x, y, z) or 4.
    pub fn ndir(self) -> usize {
        match self {
            GaugeKind::Coulomb => 3,
            GaugeKind::Landau => NDIM,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            GaugeKind::Coulomb => "Coulomb",
            GaugeKind::Landau => "Landau",
        }
    }
}

/// Options of `fix`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct FixOptions {
    pub kind: GaugeKind,
    /// Overrelaxation parameter: each SU(2) subgroup's local maximum r is applied as
    /// r^omega. 1 is the plain local maximisation (Gauss-Seidel); 0 < omega < 2.
    pub omega: f64,
    /// Stop only when theta (`measure::theta`) is below this; for Coulomb gauge, the theta
    /// of every timeslice (`measure::theta_per_timeslice`), so each timeslice is fixed to
    /// this tolerance and their mean, the reported theta, is below it too.
    pub theta_tolerance: f64,
    /// ... and the functional's relative change over the last iteration is below this.
    pub functional_tolerance: f64,
    /// Give up (`converged = false`) after this many iterations (sweeps over even and odd
    /// sites).
    pub max_iterations: usize,
}

impl Default for FixOptions {
    fn default() -> Self {
        FixOptions {
            kind: GaugeKind::Landau,
            omega: 1.7,
            theta_tolerance: 1e-12,
            functional_tolerance: 1e-12,
            max_iterations: 5000,
        }
    }
}

/// What `fix` did and where it stopped; functional and theta are those of the returned
/// field.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct FixReport {
    /// Sweeps made (each: the even sites, then the odd sites).
    pub iterations: usize,
    pub functional: f64,
    pub theta: f64,
    /// Whether both tolerances were met before `max_iterations`.
    pub converged: bool,
    /// Wall time of the whole fix, tables and final transform included.
    pub seconds: f64,
}

impl FixOptions {
    /// Refuse options the iteration cannot run with, naming the option.
    pub fn check(&self) -> Result<()> {
        if !(self.omega > 0.0 && self.omega < 2.0) {
            return Err(Error::invalid(
                "omega",
                format!(
                    "the overrelaxation parameter must lie in (0, 2) (1 = no overrelaxation, \
                     1.7 usual), got {}",
                    self.omega
                ),
            ));
        }
        for (key, v) in [
            ("theta_tolerance", self.theta_tolerance),
            ("functional_tolerance", self.functional_tolerance),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(Error::invalid(
                    key,
                    format!("must be a finite number >= 0, got {v}"),
                ));
            }
        }
        if self.max_iterations == 0 {
            return Err(Error::invalid(
                "max_iterations",
                "must be at least 1, got 0",
            ));
        }
        Ok(())
    }

    /// Refuse a lattice the checkerboard update cannot fix: a sub-lattice of a split
    /// lattice (its neighbours live on other ranks), or an odd extent in a direction the
    /// gauge condition couples (even and odd sites would then be neighbours of their own
    /// parity across the edge). Coulomb gauge never couples timeslices, so its t extent
    /// may be odd.
    pub fn check_lattice(&self, lattice: &Lattice) -> Result<()> {
        if lattice.dims != lattice.global || lattice.offset != [0; NDIM] {
            return Err(Error::invalid(
                "lattice",
                "gauge fixing runs on the whole lattice, not on one rank's sub-lattice",
            ));
        }
        for mu in 0..self.kind.ndir() {
            let l = lattice.dims[mu];
            if !l.is_multiple_of(2) {
                return Err(Error::invalid(
                    format!("L{}", DIR_NAMES[mu].to_uppercase()),
                    format!(
                        "{} gauge fixing updates even and odd sites in turn, which needs an \
                         even extent in {}; got {l}",
                        self.kind.name(),
                        DIR_NAMES[mu]
                    ),
                ));
            }
        }
        Ok(())
    }
}
