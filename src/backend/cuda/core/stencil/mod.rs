//! The loaded kernel(s) of each stencil version and one operator application as the
//! version's sequence of launches (`StencilKernels::launch`); the programs they compile
//! from are in `programs`, 3.0's launch in `v3`, its batch over several right-hand sides in
//! `batch`.

pub mod batch;
pub mod programs;
pub mod v3;

use self::v3::{launch_v3, V3Kernels, V3Launch};
use crate::backend::cuda::core::kernels::{Kernel, BLAS_BLOCK};
use crate::backend::cuda::core::launch::{cfg_1d, dptr, grid};
use crate::backend::cuda::core::timing::{launch, GpuStream};
use crate::backend::cuda::core::version::{Reconstruct, StencilVersion};
use crate::error::Result;
use cudarc::driver::{CudaFunction, CudaSlice, LaunchConfig};

/// The loaded kernel(s) of a version, plus 2.0's intermediate buffers.
pub(crate) enum StencilKernels {
    Coarse(CudaFunction),
    Fine(CudaFunction),
    Projected(V3Kernels),
    Split {
        gemm34: CudaFunction,
        gemm33: CudaFunction,
        combine: CudaFunction,
        tmp1: CudaSlice<f64>,
        tmp2: CudaSlice<f64>,
    },
}

/// Everything a launch needs besides the kernels: geometry and device buffers.
pub(crate) struct StencilArgs<'a> {
    pub version: StencilVersion,
    pub multiple: usize,
    /// Threads (= sites) per block of the one-thread-per-site versions 1.0 and 3.0.
    pub coarse_block: usize,
    pub dims: [i32; 4],
    pub volume: usize,
    pub links: &'a CudaSlice<f64>,
    /// The displacement table (1.0-1.3) or a one-element placeholder.
    pub move_table: &'a CudaSlice<i32>,
    pub kappa: f64,
    pub g5: bool,
    /// Bit mu set: fermions antiperiodic in direction mu (3.0 applies the phases itself;
    /// the other versions have them folded into their link buffers).
    pub antiperiodic_mask: i32,
    /// 3.0: the reals per link the module reads (for the books).
    pub reconstruct: Reconstruct,
}

impl StencilKernels {
    /// Run out = A psi as the version's sequence of launches on `gpu`, booking each.
    pub(crate) fn launch(
        &mut self,
        gpu: &mut GpuStream,
        a: &StencilArgs<'_>,
        psi: &CudaSlice<f64>,
        out: &mut CudaSlice<f64>,
    ) -> Result<()> {
        let v = a.version;
        let volume = a.volume as i32;
        let g5 = a.g5 as i32;
        let [lx, ly, lz, lt] = a.dims;
        match self {
            StencilKernels::Coarse(f) => {
                let cfg = cfg_1d(a.volume, a.coarse_block, 0);
                launch!(
                    gpu,
                    Kernel::Stencil(v),
                    a.volume,
                    f,
                    cfg,
                    [psi, out, a.links, a.move_table, &a.kappa, &g5, &volume]
                );
            }
            StencilKernels::Fine(f) => {
                let spb = v.sites_per_block(a.multiple);
                let spb_i = spb as i32;
                let cfg = LaunchConfig {
                    grid_dim: (grid(a.volume, spb), 1, 1),
                    block_dim: (v.block_threads(a.multiple) as u32, 1, 1),
                    shared_mem_bytes: v.shared_bytes(a.multiple) as u32,
                };
                launch!(
                    gpu,
                    Kernel::Stencil(v),
                    a.volume,
                    f,
                    cfg,
                    [
                        psi,
                        out,
                        a.links,
                        a.move_table,
                        &a.kappa,
                        &g5,
                        &volume,
                        &lx,
                        &ly,
                        &lz,
                        &lt,
                        &spb_i
                    ]
                );
            }
            StencilKernels::Projected(f) => {
                let stream = gpu.stream.clone();
                let inp = dptr(psi, &stream);
                let l = V3Launch {
                    parity: None,
                    single: false,
                    reconstruct: a.reconstruct,
                    inp,
                    y: inp,
                    out: dptr(out, &stream),
                    links: dptr(a.links, &stream),
                    c: -a.kappa,
                    g5: a.g5,
                    dims: a.dims,
                    volume: a.volume,
                    block: a.coarse_block,
                    // This path launches the default hint (the fast path's backend, fast.rs,
                    // the tuned one).
                    link_hint: 0,
                    split_mask: 0,
                    anti_lo: a.antiperiodic_mask,
                    anti_hi: a.antiperiodic_mask,
                    s: 0,
                    partials: 0,
                    ticket: 0,
                    half: false,
                    inp_norm: 0,
                    y_norm: 0,
                    out_norm: 0,
                    site: Default::default(),
                };
                launch_v3(gpu, f, &l)?;
            }
            StencilKernels::Split {
                gemm34,
                gemm33,
                combine,
                tmp1,
                tmp2,
            } => {
                let elems = a.volume * 12;
                let cfg = cfg_1d(elems, v.block_threads(a.multiple), 0);
                for h in 0..8i32 {
                    launch!(
                        gpu,
                        Kernel::Xgemm34x44,
                        a.volume,
                        gemm34,
                        cfg,
                        [psi, &mut *tmp1, &h, &volume, &lx, &ly, &lz, &lt]
                    );
                    let accumulate = h > 0;
                    let acc_i = accumulate as i32;
                    launch!(
                        gpu,
                        Kernel::Xgemm33x34 { accumulate },
                        a.volume,
                        gemm33,
                        cfg,
                        [a.links, &*tmp1, &mut *tmp2, &h, &acc_i, &volume]
                    );
                }
                let n = elems as i32;
                let cfg = cfg_1d(elems, BLAS_BLOCK, 0);
                launch!(
                    gpu,
                    Kernel::DslashCombine,
                    a.volume,
                    combine,
                    cfg,
                    [psi, &*tmp2, out, &a.kappa, &g5, &n]
                );
            }
        }
        Ok(())
    }
}
