//! The main job: the host's checks and the outputs' folders, then the problem solved as a
//! decomposition (`parallel`: one rank on one device, or a split lattice; a launched
//! rank joins its launcher's), through `solve`, and reported.

pub use super::plan::{cuda_options, SolvePlan};
pub use super::problem::{build_problem, thread_pool};
pub use super::solve::{cpu_residual_of_d, solve_on, solve_on_rank};
use crate::config::LoadedConfig;
use crate::error::Result;
pub use crate::problem::{Problem, SolveResult};
use crate::report::timeline::timed;
use crate::report::SolveReport;

/// The whole main job. Returns the report; a solve that stopped without converging
/// returns `Error::NotConverged` after the report has been written.
pub fn run(cfg: &LoadedConfig) -> Result<SolveReport> {
    let c = &cfg.config;
    let launch = crate::comms::launch::Launch::from_env()?.filter(|l| l.size > 1);
    // Under a launcher only rank 0 holds the whole problem and writes the outputs; the
    // others hold their share (checked on the GPU by the launched mode).
    // The outputs' locks are held until this returns, after the last rename.
    let mut _outputs = None;
    if launch.as_ref().is_none_or(|l| l.rank == 0) {
        timed("host memory check", || crate::app::memory::check_run(cfg))?;
        _outputs = Some(timed("output folders", || {
            crate::app::outputs::prepare(cfg)
        })?);
    }
    let pool = thread_pool(c.backend.threads)?;
    if let Some(launch) = launch {
        return pool.install(|| crate::app::parallel::launched::run_launched(cfg, &launch));
    }
    pool.install(|| crate::app::parallel::run(cfg))
}
