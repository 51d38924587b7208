//! How to run on the GPU: the options a backend is built with (the plan's kernel, link
//! form, launch geometry, device and tuning switches).

use crate::backend::cuda::core::version::{Reconstruct, StencilVersion};

/// How to run on the GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CudaOptions {
    /// The stencilCore version.
    pub version: StencilVersion,
    /// Sites per block of the fine-grain versions 1.2 to 1.6.1 and 2.0 (12 * multiple
    /// threads); the seed used 16 (Fermi), 8 (Kepler 3.0) and 64 (Kepler 3.5).
    pub multiple: usize,
    /// Threads per block of the coarse-grain version 1.0 (one thread per site); the seed
    /// chose 256, the autotuner sweeps 64..=512 (`StencilVersion::max_coarse_block`).
    pub coarse_block: usize,
    /// GPU ordinal.
    pub device: usize,
    /// Reals stored and read per link: 18, or (version 3.0 only, exact for SU(3) fields to
    /// rounding) 12 (rows 0 and 1, row 2 = conj(row0 x row1) rebuilt in registers) or 8
    /// (`Reconstruct`).
    pub reconstruct: Reconstruct,
    /// The performance switches (`[tuning]`, docs/tuning.md).
    pub tuning: crate::backend::TuningOptions,
}

impl Default for CudaOptions {
    fn default() -> Self {
        CudaOptions {
            version: StencilVersion::V1_5,
            multiple: 16,
            coarse_block: crate::backend::cuda::core::version::COARSE_BLOCK,
            device: 0,
            reconstruct: Reconstruct::R18,
            tuning: Default::default(),
        }
    }
}
