//! How to solve, and the one place that checks it against what the backend can do: the
//! method and, for CR, the seed's loop or the fused iteration, with the wrappers (even-odd,
//! single-double). Every option runs on the CPU; on the GPU the seed versions 1.0-2.0
//! hold full double fields only (any method, plain), and kernel 3.0 has everything.

use crate::backend::{Capabilities, Precision};
use crate::config::{Iteration, Preconditioning};
use crate::solver::{CrParams, Method, SolveSpec};
use crate::{Error, Result};

/// How to solve: the method, and for CR the seed's loop or the fused iteration, with the
/// wrappers (even-odd, single-double).
#[derive(Clone, Debug)]
pub struct SolvePlan {
    pub method: Method,
    pub cr: CrParams,
    /// CR: the backend's fused iteration instead of the seed's Algorithm 1 loop; BiCGStab:
    /// the fused iteration (scalars on the device) instead of the host loop.
    pub fused: bool,
    pub preconditioning: Preconditioning,
    /// Precision of the iteration's fields (Single: single-double).
    pub precision: Precision,
    pub reliable_delta: f64,
    pub check_every: usize,
    /// GCR's restart length.
    pub restart: usize,
    /// The fused BiCGStab's recorded graphs (`[tuning] bicgstab_graphs`).
    pub bicgstab_graphs: bool,
}

impl SolvePlan {
    /// The seed's CR on the full lattice in double.
    pub fn seed(cr: CrParams) -> Self {
        SolvePlan {
            method: Method::Cr,
            cr,
            fused: false,
            preconditioning: Preconditioning::None,
            precision: Precision::Double,
            reliable_delta: 0.1,
            check_every: 1,
            restart: 10,
            bicgstab_graphs: true,
        }
    }

    /// What the config's [solver] asks for; `fast_kernel`: the backend runs the fast path
    /// (kernel 3.0 on the GPU), which makes CR's `iteration = "auto"` fused.
    pub fn from_config(c: &crate::config::Config, fast_kernel: bool) -> Self {
        let s = &c.solver;
        let precision = s.precision.inner();
        let needs_fused =
            s.preconditioning != Preconditioning::None || precision != Precision::Double;
        // Half-double iterates through the generic solver (the fused CR's kernels work
        // element by element; a half field is rounded site by site).
        // BiCGStab's fused iteration is the GPU's (on the CPU the host loop is the same
        // arithmetic): "auto" picks it on the fast kernel only.
        let fused = precision != Precision::Half
            && match (s.method, s.iteration) {
                (Method::Cr | Method::Bicgstab, Iteration::Fused) => true,
                (Method::Cr, Iteration::Auto) => needs_fused || fast_kernel,
                (Method::Bicgstab, Iteration::Auto) => fast_kernel,
                _ => false,
            };
        SolvePlan {
            method: s.method,
            cr: CrParams::new(s.tolerance, s.max_iterations as usize),
            fused,
            preconditioning: s.preconditioning,
            precision,
            reliable_delta: s.reliable_delta,
            check_every: s.check_every as usize,
            restart: s.restart as usize,
            bicgstab_graphs: c.tuning.bicgstab_graphs,
        }
    }

    /// The solver's spec.
    pub fn spec(&self) -> SolveSpec {
        SolveSpec {
            fused: self.fused,
            check_every: if self.fused { self.check_every } else { 1 },
            precision: self.precision,
            delta: self.reliable_delta,
            even_odd: self.preconditioning == Preconditioning::EvenOdd,
            restart: self.restart,
            bicgstab_graphs: self.bicgstab_graphs,
            ..SolveSpec::new(self.method, self.cr.clone())
        }
    }

    /// "seed CR", "fused CR, even-odd, single-double (delta 0.1), check every 10",
    /// "BiCGStab, even-odd".
    pub fn describe(&self) -> String {
        let mut d = match self.method {
            Method::Cr if self.fused => String::from("fused CR"),
            Method::Cr => String::from("seed CR"),
            Method::Bicgstab if self.fused => String::from("fused BiCGStab"),
            Method::Bicgstab => String::from("BiCGStab"),
            Method::Gcr => format!("GCR({})", self.restart),
            Method::Cgne => String::from("CGNE"),
        };
        if self.preconditioning == Preconditioning::EvenOdd {
            d.push_str(", even-odd");
        }
        if self.precision != Precision::Double {
            d.push_str(&format!(
                ", {}-double (delta {})",
                self.precision.name(),
                self.reliable_delta
            ));
        }
        if self.fused {
            d.push_str(&format!(", check every {}", self.check_every));
        }
        d
    }
}

impl SolvePlan {
    /// Refuse, by config key, an option the backend cannot run (before it is built).
    pub fn check(&self, caps: Capabilities) -> Result<()> {
        let Some((key, missing)) = caps.missing(
            self.preconditioning != Preconditioning::None,
            self.precision,
            self.fused,
        ) else {
            return Ok(());
        };
        Err(Error::invalid(
            format!("solver.{key}"),
            format!(
                "{} needs {missing}, which {} does not have (on the GPU: backend.kernel = \"3.0\")",
                self.describe(),
                caps.name
            ),
        ))
    }
}
