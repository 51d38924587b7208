//! Adaptive aggregation multigrid as the preconditioner of flexible GCR (Babich et al.
//! 2010; Frommer et al. 2014, DD-alpha-AMG; QUDA's `lib/multigrid.cpp`), with 2 or more
//! levels, for any operator written as a `Stencil` (Wilson, Wilson-clover):
//!
//! - set-up (`setup`): near-null vectors by inverse iteration from random vectors
//!   (`near_null`: approximate solves of A y = x by a few BiCGStab iterations, batched and
//!   even-odd, or GCR iterations, each result orthonormalised against the vectors found
//!   before), refined adaptively by inverse iteration with the
//!   multigrid-preconditioned solver; aggregates of `blocks` split by chirality, block
//!   orthonormalisation in double (`dirac::coarse::Prolongator`); the coarse operator by
//!   Galerkin projection (`Coarsen::galerkin`: the host's `dirac::coarse::galerkin`, or
//!   the backend's own, which the GPU's is for the fine Wilson operator);
//! - the K-cycle (`cycle`): minimal residual smoothing, the coarse correction solved by
//!   flexible GCR to a loose tolerance on every coarse level, preconditioned by the next
//!   level's cycle; the coarsest level by GCR on its even Schur complement;
//! - precision: the preconditioner's fields in `precision` (single by default; the coarse
//!   levels hold single or double), the outer solve in double to the requested tolerance.
//!
//! The fine level works on the backend's fields through the seam (`Space`, the Wilson
//! form D), moving fields to and from the host for the transfers (`Space::to_host`,
//! `field_from_host`); the coarse levels are host fields.

pub mod cycle;
pub mod near_null;
pub mod setup;

pub use cycle::{CoarseCounts, CoarseLevel, Smoother, Smoothing, GCR_SMOOTHING_MAX};
pub use setup::{setup, Hierarchy};

use crate::geometry::lattice::NDIM;
use crate::linalg::Precision;
use serde::Serialize;

/// The multigrid's parameters (`[multigrid]`; docs/config.md).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MgParams {
    /// Levels, the fine one included (2 or 3).
    pub levels: usize,
    /// The aggregate of each coarsening (levels - 1 entries).
    pub blocks: Vec<[usize; NDIM]>,
    /// Near-null vectors of each coarsening (levels - 1 entries).
    pub vectors: Vec<usize>,
    /// Inverse-iteration steps from the random start of each vector.
    pub setup_iterations: usize,
    /// Iterations of each step's approximate solve.
    pub setup_solver_iterations: usize,
    /// The fine level's set-up solver (the coarse levels' is GCR).
    pub setup_solver: SetupSolver,
    /// Adaptive refinement passes (each vector one inverse-iteration step with the
    /// multigrid-preconditioned solver, a quarter of `setup_solver_iterations` at least 2,
    /// then the hierarchy rebuilt).
    pub refine: usize,
    /// Smoothing steps before and after the coarse correction, and the smoother.
    pub pre_smoothing: usize,
    pub post_smoothing: usize,
    pub smoother: Smoother,
    /// The coarse levels' relative tolerance and iteration limit per solve.
    pub coarse_tol: f64,
    pub coarse_max_iterations: usize,
    /// GCR's restart length on the coarse levels (and in the set-up).
    pub coarse_restart: usize,
    /// The coarsest level solved on its even Schur complement (where every coarse extent
    /// is even).
    pub coarse_even_odd: bool,
    /// The preconditioner's precision (half: single on the coarse levels).
    pub precision: Precision,
    /// The seed of the random start vectors.
    pub seed: u64,
}

impl Default for MgParams {
    fn default() -> Self {
        MgParams {
            levels: 2,
            blocks: vec![[4; NDIM]],
            vectors: vec![24],
            setup_iterations: 3,
            setup_solver_iterations: 20,
            setup_solver: SetupSolver::Bicgstab,
            refine: 1,
            pre_smoothing: 0,
            post_smoothing: 4,
            smoother: Smoother::Mr,
            coarse_tol: 0.25,
            coarse_max_iterations: 30,
            coarse_restart: 10,
            coarse_even_odd: true,
            precision: Precision::Single,
            seed: 1,
        }
    }
}

/// The solver of the fine level's inverse-iteration steps (`[multigrid] setup_solver`;
/// `near_null`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SetupSolver {
    /// The backend's BiCGStab, batched over the vectors, even-odd where the extents are
    /// even, in the preconditioner's precision (single for half).
    #[default]
    Bicgstab,
    /// GCR(`coarse_restart`) on the full operator in double, one vector after another.
    Gcr,
}

impl SetupSolver {
    pub fn name(self) -> &'static str {
        match self {
            SetupSolver::Bicgstab => "bicgstab",
            SetupSolver::Gcr => "gcr",
        }
    }
}

impl MgParams {
    /// The coarse levels' field precision.
    pub fn coarse_precision(&self) -> Precision {
        match self.precision {
            Precision::Half => Precision::Single,
            p => p,
        }
    }

    pub fn smoothing(&self) -> Smoothing {
        Smoothing {
            pre: self.pre_smoothing,
            post: self.post_smoothing,
            smoother: self.smoother,
        }
    }
}

use crate::dirac::coarse::{Coarsen, Stencil};
use crate::linalg::engines::FusedCr;
use crate::linalg::{Form, Operator};
use crate::solver::gcr::Gcr;
use crate::solver::{run_plain, Monitor, SolveOutcome, StopRules};
use crate::Result;

/// What a multigrid solve did beyond its outcome.
#[derive(Clone, Debug, Default, Serialize)]
pub struct MgStats {
    pub setup_seconds: f64,
    /// Fine-operator applications of the set-up.
    pub setup_applications: usize,
    pub solve_seconds: f64,
    /// Each coarse level: lattice, numbers a site, bytes of its operator.
    pub levels: Vec<([usize; NDIM], usize, usize)>,
    /// Coarse solves and their Krylov iterations per coarse level.
    pub coarse_solves: Vec<usize>,
    pub coarse_iterations: Vec<usize>,
    /// Wall seconds in each coarse level's solves (the levels below included).
    pub coarse_seconds: Vec<f64>,
    /// Wall seconds in the fine level's cycles (smoothing, transfers and the coarse
    /// solves); the outer GCR's own work is `solve_seconds` less this.
    pub cycle_seconds: f64,
}

/// The hierarchy of the Wilson form D on a backend's fields (what `solve` builds and a
/// caller may keep for its next right-hand side, boxed: it is large).
pub type WilsonHierarchy<S> = Box<Hierarchy<S, Form>>;

/// D x = b on the full lattice by flexible GCR(`restart`) preconditioned by multigrid:
/// the hierarchy in `cache` if there is one (built for this operator), else built here
/// from `stencil` (D as dense matrices on the host) and left in `cache`. The stats' set-up
/// time is this call's (0 when the cache served).
#[allow(clippy::too_many_arguments)]
pub fn solve<S: FusedCr + Coarsen>(
    space: &mut S,
    stencil: &dyn Stencil,
    params: &MgParams,
    restart: usize,
    b: &S::Field,
    rules: StopRules,
    observe: &mut dyn FnMut(usize, f64),
    cache: &mut Option<WilsonHierarchy<S>>,
) -> Result<(SolveOutcome<S::Field>, MgStats)> {
    let d = Form(Operator::D);
    let mut stats = MgStats::default();
    let h = match cache {
        Some(h) => h,
        None => {
            let h = setup(space, d, stencil, params)?;
            stats.setup_seconds = h.setup_seconds;
            stats.setup_applications = h.setup_applications;
            cache.insert(Box::new(h))
        }
    };
    stats.levels = h.describe_levels();
    let t = std::time::Instant::now();
    let nb = space.norm2(b)?;
    let mut monitor = Monitor::new(rules, nb, observe);
    let mut gcr = Gcr::preconditioned(d, restart, &mut **h);
    let out = run_plain(space, &mut gcr, b, &mut monitor)?;
    stats.solve_seconds = t.elapsed().as_secs_f64();
    let counts = h.take_counts();
    stats.coarse_solves = counts.solves;
    stats.coarse_iterations = counts.iterations;
    stats.coarse_seconds = counts.seconds;
    stats.cycle_seconds = h.take_cycle_seconds();
    Ok((out, stats))
}

impl MgStats {
    /// "coarse levels 4x4x4x8 (48 numbers a site, 56.6 MB); set-up 3.94 s (720
    /// applications); cycles 1.20 s of the 1.42 s solve; coarse solves 32 (141
    /// iterations, 0.950 s)".
    pub fn describe(&self) -> String {
        let levels: Vec<String> = self
            .levels
            .iter()
            .map(|(d, n, bytes)| {
                format!(
                    "{}x{}x{}x{} ({n} numbers a site, {:.1} MB)",
                    d[0],
                    d[1],
                    d[2],
                    d[3],
                    *bytes as f64 / 1e6
                )
            })
            .collect();
        let coarse: Vec<String> = self
            .coarse_solves
            .iter()
            .zip(&self.coarse_iterations)
            .zip(&self.coarse_seconds)
            .map(|((s, i), t)| format!("{s} ({i} iterations, {t:.3} s)"))
            .collect();
        format!(
            "coarse levels {}; set-up {:.3} s ({} applications); cycles {:.3} s of the {:.3} s \
             solve; coarse solves {}",
            levels.join(", "),
            self.setup_seconds,
            self.setup_applications,
            self.cycle_seconds,
            self.solve_seconds,
            coarse.join(", ")
        )
    }
}
