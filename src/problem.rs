//! A problem (lattice, gauge field, kappa, operator, source) and what a solve of it
//! produced: the records the application builds and the reports read.

use crate::field::gauge::Plaquette;
use crate::field::{GaugeField, SpinorField};
use crate::geometry::lattice::Lattice;
use crate::linalg::Operator;
use crate::solver::{SolveStats, StopReason};
use serde::Serialize;

/// Everything the solver needs, built from a config.
pub struct Problem {
    pub lattice: Lattice,
    pub gauge: GaugeField,
    pub gauge_description: String,
    /// Set when the links used are not the links the gauge file stores: what was done
    /// (32-bit links projected onto SU(3) in double; links off SU(3) projected on request).
    pub gauge_reunitarised: Option<String>,
    pub plaquette: Plaquette,
    pub link_trace: f64,
    pub kappa: f64,
    /// The clover coefficient and the twisted mass (0: none; `action`).
    pub csw: f64,
    pub mu: f64,
    pub operator: Operator,
    /// The right-hand side b of D x = b.
    pub source: SpinorField,
    pub source_description: String,
    /// The gauge fixing done to the field before the solve (`[gauge] fix`): its report.
    pub gauge_fixing: Option<serde_json::Value>,
    pub setup_seconds: f64,
}

impl Problem {
    /// The operator's parameters.
    pub fn action(&self) -> crate::dirac::Action {
        crate::dirac::Action {
            kappa: self.kappa,
            csw: self.csw,
            mu: self.mu,
        }
    }
}

/// What one solve on one backend produced.
pub struct SolveResult {
    pub solution: SpinorField,
    pub iterations: usize,
    pub reason: StopReason,
    /// Relative residual of the system iterated (the Schur system for even-odd).
    pub history: Vec<f64>,
    pub operator_applications: usize,
    /// ||rhs - A x|| / ||rhs|| of the full system on the backend that solved.
    pub true_residual: f64,
    pub timings: Timings,
    /// The solve's counts (checks, reliable updates).
    pub fused: Option<SolveStats>,
    pub plan: String,
    /// `method = "mg"`: the set-up and the coarse levels (the solve time excludes the
    /// set-up).
    pub multigrid: Option<crate::solver::mg::MgStats>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Timings {
    /// Gauge field and source construction (or reading).
    pub setup: f64,
    pub upload: f64,
    /// The CR iterations only.
    pub solve: f64,
    pub download: f64,
    pub true_residual: f64,
}
