//! The main job on a split lattice (`[parallel] grid`, issue 11): the problem is built
//! once (rank 0's read and verification), scattered into sub-lattices, solved by one rank
//! per sub-lattice, and the solution gathered for the outputs.

use crate::config::LoadedConfig;
use crate::report::SolveReport;
use crate::{Error, Result};

pub fn run(cfg: &LoadedConfig) -> Result<SolveReport> {
    Err(Error::invalid(
        "parallel.grid",
        format!(
            "grid {:?}: the decomposed solve is not wired into the main job yet",
            cfg.config.parallel.grid
        ),
    ))
}
