//! Backends: where fields live and the Wilson kernels run. Each implements the vector
//! space (`crate::linalg::Space`) and the Wilson kernels (`crate::linalg::WilsonKernels`)
//! that every solver is written against; `cpu::CpuBackend` (rayon) and
//! `crate::backend::cuda::CudaBackend` (cudarc) are the two. A backend may add the engines of
//! `crate::linalg::engines` beyond the seam (the fused CR and BiCGStab iterations).

pub mod coarse;
pub mod counted;
pub mod cpu;
pub mod cpu_decomposed;
pub mod cuda;
pub mod host_cr;
pub mod ledger;
pub mod tuning;

pub use crate::linalg::{
    layout_mismatch, Layout, Operator, Precision, Space, Subset, WilsonKernels,
};

pub use tuning::TuningOptions;

pub use crate::linalg::engines::{
    breakdown, cr_load_in_steps, unsupported, unsupported_described, BiScalars, Capabilities,
    CrScalars, FusedBiCgStab, FusedCr, Prepare,
};

/// Everything the application layer drives: the seam, the capabilities, and the
/// multigrid transfers (`Coarsen`).
pub trait Backend: FusedCr + Prepare + crate::dirac::coarse::Coarsen {}
impl<B: FusedCr + Prepare + crate::dirac::coarse::Coarsen> Backend for B {}

impl Capabilities {
    /// What a CUDA stencil version has: its stencil family's own capabilities (3.0
    /// everything, the seed versions full double only).
    pub fn of_stencil(version: cuda::StencilVersion) -> Capabilities {
        cuda::stencil_capabilities(version)
    }
}

/// The traits a caller of a backend needs in scope.
pub mod prelude {
    pub use super::{Backend, FusedBiCgStab, FusedCr, Prepare};
    pub use crate::linalg::{LinearOperator, Space, WilsonKernels};
}
