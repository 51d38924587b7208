//! `StencilImpl`: what a stencil family of the CUDA backend is, behind one trait object
//! chosen once at construction from the version table (`StencilVersion::is_fast_path`):
//! `seed::SeedStencil` (versions 1.0 to 2.0: the seed's link layouts, full double fields,
//! the seed's BLAS-1 and multi-pass reductions) or `fast::FastStencil` (3.0: parity-major
//! layouts, both precisions, even-odd hops, the fused (r|Ar) epilogue). `CudaBackend`
//! delegates the vector space and the Wilson kernels to it and checks the fused CR against
//! its `capabilities`; it holds no version branch of its own.
//!
//! A stencil also carries its tuning mixin: its launch geometry (`geometry`,
//! `set_geometry`: nothing else depends on it, so a tuner can time candidates on the live
//! backend), its tune-cache kernel name and its own flop and byte counts.

use crate::backend::cuda::core::cr_state::DeviceCrState;
use crate::backend::cuda::core::fast_layout::SpinorOrder;
use crate::backend::cuda::core::field::DeviceSpinor;
pub use crate::backend::cuda::core::tune::Geometry;
use crate::backend::cuda::core::version::StencilVersion;
use crate::backend::cuda::dirac::blas::Core;
use crate::backend::Capabilities;
use crate::error::Result;
use crate::field::C64;
use crate::geometry::lattice::Lattice;
use crate::linalg::{Layout, Operator};

pub(crate) trait StencilImpl {
    /// What this family holds and runs beyond full double fields (one source of truth:
    /// `Capabilities::of_stencil` reads the same constants).
    fn capabilities(&self) -> Capabilities;
    fn version(&self) -> StencilVersion;
    /// "cuda NAME (stencilCore V, multiple M)".
    fn describe(&self, device_name: &str) -> String {
        format!(
            "cuda {device_name} (stencilCore {}, multiple {})",
            self.version(),
            self.geometry().multiple
        )
    }

    /// The launch geometry in use, and a new one (validated by the caller).
    fn geometry(&self) -> Geometry;
    fn set_geometry(&mut self, g: Geometry);
    /// Threads per block of the stencil launch as configured.
    fn block_threads(&self) -> usize;
    /// The tune cache's kernel name ("stencil-1.5", "stencil-3.0-r12").
    fn tune_kernel(&self) -> String;
    /// The launch geometries a tuner times (around the current one).
    fn candidates(&self) -> Vec<Geometry> {
        crate::backend::cuda::core::tune::geometry_candidates(self.version(), self.geometry())
    }
    /// The version's own executed flops and global-memory bytes per site and full
    /// application (see `StencilVersion`).
    fn flops_per_site(&self) -> u64 {
        self.version().flops_per_site()
    }
    fn bytes_per_site(&self) -> u64;
    /// The double-precision link array as the stencil reads it (3.0's; None for the seed
    /// family), for the tests' readback.
    fn double_links(&self) -> Option<&cudarc::driver::CudaSlice<f64>> {
        None
    }

    /// A zeroed field of a layout this family holds (others are refused by the caller
    /// through `capabilities`).
    fn alloc(&mut self, core: &mut Core, layout: Layout) -> Result<DeviceSpinor>;
    /// This family's order of a full double field, which the staged uploads and
    /// downloads map chunk by chunk to and from the canonical [site][12 complex].
    fn spinor_order(&self) -> SpinorOrder;
    /// A field read whole in this family's order (`Core::read_raw`: the layouts other
    /// than full double) to the canonical order; with `parity` Some(p) `src` is a half
    /// field of parity p and only those sites of `canonical` are written.
    fn to_canonical_order(
        &self,
        lattice: &Lattice,
        src: &[f64],
        canonical: &mut [f64],
        parity: Option<usize>,
    );

    fn copy(&mut self, core: &mut Core, dst: &mut DeviceSpinor, src: &DeviceSpinor) -> Result<()>;
    fn convert(
        &mut self,
        core: &mut Core,
        dst: &mut DeviceSpinor,
        src: &DeviceSpinor,
    ) -> Result<()>;
    fn axpy(
        &mut self,
        core: &mut Core,
        a: C64,
        x: &DeviceSpinor,
        y: &mut DeviceSpinor,
    ) -> Result<()>;
    fn xpay(
        &mut self,
        core: &mut Core,
        x: &DeviceSpinor,
        a: C64,
        y: &mut DeviceSpinor,
    ) -> Result<()>;
    fn dot(&mut self, core: &mut Core, x: &DeviceSpinor, y: &DeviceSpinor) -> Result<C64>;
    fn norm2(&mut self, core: &mut Core, x: &DeviceSpinor) -> Result<f64>;
    /// `Space::add_converted` in one pass where this stencil has a kernel for the layouts
    /// (true), else nothing done (false: the caller converts and adds).
    fn add_converted(
        &mut self,
        _core: &mut Core,
        _x: &DeviceSpinor,
        _y: &mut DeviceSpinor,
    ) -> Result<bool> {
        Ok(false)
    }
    /// `Space::residual_converted` in one launch where this stencil has a kernel for the
    /// layouts: Some((r|r)), else None with nothing done. (Reductions read through
    /// `Core::read_reduction`, which sums over the ranks of a decomposed lattice.)
    fn residual_converted(
        &mut self,
        _core: &mut Core,
        _b: &DeviceSpinor,
        _r: &mut DeviceSpinor,
        _low: &mut DeviceSpinor,
    ) -> Result<Option<f64>> {
        Ok(None)
    }

    /// out = A inp; with `cr` (fused CR only) gated on the iteration's `active` and with
    /// the (inp|out) epilogue into the scalar block.
    fn apply(
        &mut self,
        core: &mut Core,
        op: Operator,
        out: &mut DeviceSpinor,
        inp: &DeviceSpinor,
        cr: Option<&mut DeviceCrState>,
    ) -> Result<()>;
    /// out_k = A inp_k for every k (1 to `BATCH_MAX` right-hand sides of one layout, the
    /// operator's subset, checked by the caller), in as few launches as one application
    /// takes; refused by a stencil family without batch entries (the seed versions).
    fn apply_batch(
        &mut self,
        core: &mut Core,
        op: Operator,
        outs: &mut [&mut DeviceSpinor],
        inps: &[&DeviceSpinor],
    ) -> Result<()> {
        let _ = (op, outs, inps);
        Err(crate::backend::unsupported_described(
            &self.describe(&core.device_name),
            "the batched operator",
        ))
    }
    /// out = [g5] (y + c H inp) on half fields.
    fn hop_xpay(
        &mut self,
        core: &mut Core,
        out: &mut DeviceSpinor,
        inp: &DeviceSpinor,
        y: &DeviceSpinor,
        c: f64,
        gamma5: bool,
    ) -> Result<()>;
    /// Build now what a solve iterating on fields of `layout` would otherwise make on
    /// first use.
    fn prepare(&mut self, core: &mut Core, layout: Layout) -> Result<()>;

    /// Make D = A - kappa H with the site term A of `site` (the clover term, a twist);
    /// refused by a stencil family without `Capabilities::site_term`.
    fn set_site_term(&mut self, core: &mut Core, site: &HostSiteTerm) -> Result<()> {
        let _ = site;
        Err(crate::backend::unsupported_described(
            &self.describe(&core.device_name),
            "the clover term and twisted mass",
        ))
    }
    /// Whether `set_site_term` installed a site term.
    fn has_site_term(&self) -> bool {
        false
    }
    /// out = A^-1 inp on a half field (only with a site term).
    fn site_inverse(
        &mut self,
        core: &mut Core,
        out: &mut DeviceSpinor,
        inp: &DeviceSpinor,
    ) -> Result<()> {
        let _ = (core, out, inp);
        Err(crate::Error::internal(
            "site_inverse: this stencil has no site term",
        ))
    }
    /// `apply` with the site term's adjoint (`WilsonKernels::apply_adjoint`); without a
    /// twist, `apply`.
    fn apply_adjoint(
        &mut self,
        core: &mut Core,
        op: Operator,
        out: &mut DeviceSpinor,
        inp: &DeviceSpinor,
    ) -> Result<()> {
        self.apply(core, op, out, inp, None)
    }
}

/// A site term on the host, in the device's order (`dirac::clover_pack::device_clover_soa`):
/// the clover parts H_b and the inverse's factors P_b, 72 V reals each in 3.0's
/// parity-major structure of arrays, and the twist 2 kappa mu.
pub(crate) struct HostSiteTerm {
    pub clover: Vec<f64>,
    pub inverse: Vec<f64>,
    pub twist: f64,
}
