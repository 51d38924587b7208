//! The `[multigrid]` table (`[solver] method = "mg"`): the hierarchy's levels,
//! aggregates and near-null vectors, its set-up, smoothing and coarse solves, and the
//! preconditioner's precision; each key validated against the lattice before any work
//! (docs/config.md).

use super::{LoadedConfig, Preconditioning, SolverPrecision};
use crate::geometry::lattice::NDIM;
use crate::linalg::{Operator, Precision};
use crate::solver::mg::{MgParams, SetupSolver, Smoother, GCR_SMOOTHING_MAX};
use crate::solver::Method;
use crate::Result;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MultigridConfig {
    /// Levels, the fine one included (2..=4).
    #[serde(default = "d_levels")]
    pub levels: i64,
    /// The aggregate of each coarsening, [bx, by, bz, bt] (levels - 1 of them).
    #[serde(default = "d_blocks")]
    pub blocks: Vec<[i64; NDIM]>,
    /// Near-null vectors of each coarsening (levels - 1 of them; 1..=64).
    #[serde(default = "d_vectors")]
    pub vectors: Vec<i64>,
    /// Inverse-iteration steps from each random start (1..=100).
    #[serde(default = "d_setup_iterations")]
    pub setup_iterations: i64,
    /// Iterations of each set-up step's solve (1..=10000).
    #[serde(default = "d_setup_solver_iterations")]
    pub setup_solver_iterations: i64,
    /// The fine level's set-up solver: "bicgstab" (default: batched, even-odd, in the
    /// preconditioner's precision) or "gcr" (full operator, double, one vector at a time).
    #[serde(default)]
    pub setup_solver: SetupSolver,
    /// Adaptive refinement passes (0..=10).
    #[serde(default = "d_refine")]
    pub refine: i64,
    /// Minimal residual steps before and after the coarse correction (0..=100 each, at
    /// least one in all).
    #[serde(default)]
    pub pre_smoothing: i64,
    #[serde(default = "d_post_smoothing")]
    pub post_smoothing: i64,
    /// The smoother of those steps: "mr" (minimal residual, default) or "gcr" (GCR without
    /// a restart, at most `GCR_SMOOTHING_MAX` steps).
    #[serde(default)]
    pub smoother: Smoother,
    /// Relative tolerance of each coarse solve (0 < t < 1).
    #[serde(default = "d_coarse_tolerance")]
    pub coarse_tolerance: f64,
    /// Iteration limit of each coarse solve (1..=100000).
    #[serde(default = "d_coarse_max_iterations")]
    pub coarse_max_iterations: i64,
    /// GCR's restart on the coarse levels and in the set-up (1..=64).
    #[serde(default = "d_coarse_restart")]
    pub coarse_restart: i64,
    /// The coarsest level solved on its even Schur complement where its extents are even.
    #[serde(default = "d_true")]
    pub coarse_even_odd: bool,
    /// "single" (default), "double" or "half": the preconditioner's fields (the outer
    /// solve is double; half keeps single coarse levels).
    #[serde(default = "d_precision")]
    pub precision: Precision,
    /// Seed of the set-up's random start vectors.
    #[serde(default = "d_seed")]
    pub seed: u64,
}

fn d_levels() -> i64 {
    2
}
fn d_blocks() -> Vec<[i64; NDIM]> {
    vec![[4; NDIM]]
}
fn d_vectors() -> Vec<i64> {
    vec![24]
}
fn d_setup_iterations() -> i64 {
    MgParams::default().setup_iterations as i64
}
fn d_setup_solver_iterations() -> i64 {
    MgParams::default().setup_solver_iterations as i64
}
fn d_refine() -> i64 {
    MgParams::default().refine as i64
}
fn d_post_smoothing() -> i64 {
    MgParams::default().post_smoothing as i64
}
fn d_coarse_tolerance() -> f64 {
    MgParams::default().coarse_tol
}
fn d_coarse_max_iterations() -> i64 {
    MgParams::default().coarse_max_iterations as i64
}
fn d_coarse_restart() -> i64 {
    MgParams::default().coarse_restart as i64
}
fn d_true() -> bool {
    true
}
fn d_precision() -> Precision {
    Precision::Single
}
fn d_seed() -> u64 {
    1
}

impl Default for MultigridConfig {
    fn default() -> Self {
        MultigridConfig {
            levels: d_levels(),
            blocks: d_blocks(),
            vectors: d_vectors(),
            setup_iterations: d_setup_iterations(),
            setup_solver_iterations: d_setup_solver_iterations(),
            setup_solver: SetupSolver::default(),
            refine: d_refine(),
            pre_smoothing: 0,
            post_smoothing: d_post_smoothing(),
            smoother: Smoother::Mr,
            coarse_tolerance: d_coarse_tolerance(),
            coarse_max_iterations: d_coarse_max_iterations(),
            coarse_restart: d_coarse_restart(),
            coarse_even_odd: true,
            precision: d_precision(),
            seed: d_seed(),
        }
    }
}

impl MultigridConfig {
    /// The solver's parameters (after `check_multigrid`).
    pub fn params(&self) -> MgParams {
        MgParams {
            levels: self.levels as usize,
            blocks: self.blocks.iter().map(|b| b.map(|v| v as usize)).collect(),
            vectors: self.vectors.iter().map(|&v| v as usize).collect(),
            setup_iterations: self.setup_iterations as usize,
            setup_solver_iterations: self.setup_solver_iterations as usize,
            setup_solver: self.setup_solver,
            refine: self.refine as usize,
            pre_smoothing: self.pre_smoothing as usize,
            post_smoothing: self.post_smoothing as usize,
            smoother: self.smoother,
            coarse_tol: self.coarse_tolerance,
            coarse_max_iterations: self.coarse_max_iterations as usize,
            coarse_restart: self.coarse_restart as usize,
            coarse_even_odd: self.coarse_even_odd,
            precision: self.precision,
            seed: self.seed,
        }
    }
}

impl LoadedConfig {
    /// `[multigrid]` against the lattice, and `method = "mg"` against the rest of
    /// `[solver]` and `[parallel]`.
    pub(super) fn check_multigrid(&self) -> Result<()> {
        let c = &self.config;
        let mg_method = c.solver.method == Method::Mg;
        let Some(m) = &c.multigrid else {
            return Ok(());
        };
        if !mg_method {
            return Err(self.bad(
                "multigrid",
                "levels",
                format!(
                    "the [multigrid] table is read by method = \"mg\" only; method = \"{}\"",
                    c.solver.method
                ),
            ));
        }
        let bad = |key: &str, message: String| self.bad("multigrid", key, message);
        if !(2..=4).contains(&m.levels) {
            return Err(bad("levels", format!("must be in 2..=4, got {}", m.levels)));
        }
        let n = (m.levels - 1) as usize;
        if m.blocks.len() != n {
            return Err(bad(
                "blocks",
                format!(
                    "{} levels need {n} blocks (one a coarsening), got {}",
                    m.levels,
                    m.blocks.len()
                ),
            ));
        }
        if m.vectors.len() != n {
            return Err(bad(
                "vectors",
                format!(
                    "{} levels need {n} vector counts (one a coarsening), got {}",
                    m.levels,
                    m.vectors.len()
                ),
            ));
        }
        let mut dims = [c.lattice.lx, c.lattice.ly, c.lattice.lz, c.lattice.lt];
        // Numbers a site and chirality on the level being coarsened.
        let mut half = 6;
        for (k, (block, &nv)) in m.blocks.iter().zip(&m.vectors).enumerate() {
            for mu in 0..NDIM {
                if block[mu] < 1 || dims[mu] % block[mu] != 0 {
                    return Err(bad(
                        "blocks",
                        format!(
                            "block {k} ({block:?}) does not tile level {k}'s lattice {dims:?} \
                             (extent {} in direction {})",
                            dims[mu],
                            crate::geometry::lattice::DIR_NAMES[mu]
                        ),
                    ));
                }
            }
            if !(1..=64).contains(&nv) {
                return Err(bad(
                    "vectors",
                    format!("each count must be in 1..=64, got {nv}"),
                ));
            }
            let room = block.iter().product::<i64>() * half;
            if nv > room {
                return Err(bad(
                    "vectors",
                    format!(
                        "{nv} vectors on block {k} ({block:?}) need {nv} independent numbers a \
                         chirality on an aggregate, which has {room}: fewer vectors or larger blocks"
                    ),
                ));
            }
            dims = std::array::from_fn(|mu| dims[mu] / block[mu]);
            half = nv;
        }
        let ranges: [(&str, i64, i64, i64); 7] = [
            ("setup_iterations", m.setup_iterations, 1, 100),
            (
                "setup_solver_iterations",
                m.setup_solver_iterations,
                1,
                10_000,
            ),
            ("refine", m.refine, 0, 10),
            ("pre_smoothing", m.pre_smoothing, 0, 100),
            ("post_smoothing", m.post_smoothing, 0, 100),
            ("coarse_max_iterations", m.coarse_max_iterations, 1, 100_000),
            ("coarse_restart", m.coarse_restart, 1, 64),
        ];
        for (key, v, lo, hi) in ranges {
            if !(lo..=hi).contains(&v) {
                return Err(bad(key, format!("must be in {lo}..={hi}, got {v}")));
            }
        }
        if m.smoother == Smoother::Gcr {
            let max = GCR_SMOOTHING_MAX as i64;
            for (key, v) in [
                ("pre_smoothing", m.pre_smoothing),
                ("post_smoothing", m.post_smoothing),
            ] {
                if v > max {
                    return Err(bad(
                        key,
                        format!(
                            "smoother = \"gcr\" keeps two fields a step: at most {max} steps, \
                             got {v} (or smoother = \"mr\")"
                        ),
                    ));
                }
            }
        }
        let t = m.coarse_tolerance;
        if !(t.is_finite() && t > 0.0 && t < 1.0) {
            return Err(bad(
                "coarse_tolerance",
                format!("must be in (0, 1), got {t}"),
            ));
        }
        Ok(())
    }

    /// `method = "mg"` against the other keys (also without a [multigrid] table).
    pub(super) fn check_mg_method(&self) -> Result<()> {
        let c = &self.config;
        if c.solver.method != Method::Mg {
            return Ok(());
        }
        let s = &c.solver;
        if s.operator().gamma5() || s.operator() != Operator::D {
            return Err(self.bad(
                "solver",
                "operator",
                "method = \"mg\" solves D x = b: leave operator out or set \"D\"".into(),
            ));
        }
        if s.preconditioning != Preconditioning::None {
            return Err(self.bad(
                "solver",
                "preconditioning",
                "method = \"mg\" smooths the full operator: preconditioning = \"none\" (the \
                 coarsest level is solved even-odd by [multigrid] coarse_even_odd)"
                    .into(),
            ));
        }
        if s.precision != SolverPrecision::Double {
            return Err(self.bad(
                "solver",
                "precision",
                "method = \"mg\" iterates in double; the preconditioner's precision is \
                 [multigrid] precision"
                    .into(),
            ));
        }
        if c.parallel.ranks() > 1 {
            return Err(self.bad(
                "parallel",
                "grid",
                "method = \"mg\" runs on one device or one CPU process: the coarse levels are \
                 not split over ranks yet"
                    .into(),
            ));
        }
        Ok(())
    }
}
