//! `SeedStencil`: the seed's stencil versions 1.0 to 2.0 behind `StencilImpl`. Full
//! double fields in the canonical order [site][spin][colour]; links in the version's layout
//! (the seed buffer, or 1.6's reordering) with the boundary phases folded in, and the
//! bufMove table of 1.0-1.3; `axpy` the seed's xaxpy, `xpay` its xscal then xaxpy, `dot`
//! and `norm2` its multi-pass tree reductions (deterministic). Half-lattice and single
//! fields, conversions, hops and the fused CR are refused by name.

use crate::backend::cuda::core::cr_state::DeviceCrState;
use crate::backend::cuda::core::device::err;
use crate::backend::cuda::core::fast_layout::SpinorOrder;
use crate::backend::cuda::core::field::{DeviceData, DeviceSpinor};
use crate::backend::cuda::core::kernels::Kernel;
use crate::backend::cuda::core::stencil::{StencilArgs, StencilKernels};
use crate::backend::cuda::core::version::StencilVersion;
use crate::backend::cuda::dirac::blas::Core;
use crate::backend::cuda::dirac::stencil_impl::{Geometry, StencilImpl};
use crate::backend::ledger::{field_bytes, Booking, Purpose};
use crate::backend::{unsupported_described, Capabilities};
use crate::error::{Error, Result};
use crate::field::C64;
use crate::geometry::lattice::Lattice;
use crate::linalg::{Layout, Operator};
use cudarc::driver::CudaSlice;

pub(crate) struct SeedStencil {
    pub version: StencilVersion,
    pub geometry: Geometry,
    pub kernels: StencilKernels,
    pub links: CudaSlice<f64>,
    pub move_table: CudaSlice<i32>,
    /// The links, the table and 2.0's temporaries on the backend's books.
    pub _bookings: Vec<Booking>,
}

impl SeedStencil {
    pub const CAPABILITIES: Capabilities = Capabilities {
        name: "a seed kernel version (1.0-2.0)",
        half_lattice: false,
        single: false,
        half: false,
        fused_cr: false,
        site_term: false,
    };

    fn refuse(&self, core: &Core, what: &str) -> Error {
        unsupported_described(&self.describe(&core.device_name), what)
    }
}

impl StencilImpl for SeedStencil {
    fn capabilities(&self) -> Capabilities {
        Self::CAPABILITIES
    }

    fn version(&self) -> StencilVersion {
        self.version
    }

    fn geometry(&self) -> Geometry {
        self.geometry
    }

    fn set_geometry(&mut self, g: Geometry) {
        self.geometry = g;
    }

    fn block_threads(&self) -> usize {
        if self.version.uses_coarse_block() {
            self.geometry.coarse_block
        } else {
            self.version.block_threads(self.geometry.multiple)
        }
    }

    fn tune_kernel(&self) -> String {
        format!("stencil-{}", self.version)
    }

    fn bytes_per_site(&self) -> u64 {
        self.version.bytes_per_site()
    }

    fn alloc(&mut self, core: &mut Core, layout: Layout) -> Result<DeviceSpinor> {
        if layout != Layout::FULL {
            return Err(self.refuse(core, "half-lattice or single-precision fields"));
        }
        let n = core.n_complex();
        let data = DeviceData::Double(core.alloc_double(n)?);
        let bytes = field_bytes(Layout::FULL, core.lattice.volume());
        Ok(DeviceSpinor {
            data,
            layout: Layout::FULL,
            _booking: core.ledger.book(Purpose::Fields(Layout::FULL), bytes),
        })
    }

    fn spinor_order(&self) -> SpinorOrder {
        SpinorOrder::Canonical
    }

    fn to_canonical_order(
        &self,
        _lattice: &Lattice,
        src: &[f64],
        canonical: &mut [f64],
        _parity: Option<usize>,
    ) {
        canonical.copy_from_slice(src);
    }

    fn copy(&mut self, core: &mut Core, dst: &mut DeviceSpinor, src: &DeviceSpinor) -> Result<()> {
        let p = core.gpu.begin(&Kernel::Copy)?;
        core.gpu
            .stream
            .memcpy_dtod(src.double()?, dst.double_mut()?)
            .map_err(err("copying a field"))?;
        let n = core.n_complex();
        core.gpu.end(p, Kernel::Copy, n)
    }

    fn convert(&mut self, core: &mut Core, _: &mut DeviceSpinor, _: &DeviceSpinor) -> Result<()> {
        Err(self.refuse(core, "field conversions"))
    }

    fn axpy(
        &mut self,
        core: &mut Core,
        a: C64,
        x: &DeviceSpinor,
        y: &mut DeviceSpinor,
    ) -> Result<()> {
        let n = core.n_complex();
        core.axpy_d(a, x.double()?, y.double_mut()?, n)
    }

    fn xpay(
        &mut self,
        core: &mut Core,
        x: &DeviceSpinor,
        a: C64,
        y: &mut DeviceSpinor,
    ) -> Result<()> {
        let n = core.n_complex();
        core.xpay_d(x.double()?, a, y.double_mut()?, n)
    }

    fn dot(&mut self, core: &mut Core, x: &DeviceSpinor, y: &DeviceSpinor) -> Result<C64> {
        let n = core.n_complex();
        core.dot_d(x.double()?, y.double()?, n)
    }

    fn norm2(&mut self, core: &mut Core, x: &DeviceSpinor) -> Result<f64> {
        let n = core.n_complex();
        core.norm2_d(x.double()?, n)
    }

    fn apply(
        &mut self,
        core: &mut Core,
        op: Operator,
        out: &mut DeviceSpinor,
        inp: &DeviceSpinor,
        cr: Option<&mut DeviceCrState>,
    ) -> Result<()> {
        if cr.is_some() {
            return Err(self.refuse(core, "the fused CR iteration"));
        }
        if op.is_schur() {
            return Err(self.refuse(core, "the even-odd Schur operator"));
        }
        let args = StencilArgs {
            version: self.version,
            multiple: self.geometry.multiple,
            coarse_block: self.geometry.coarse_block,
            dims: core.dims(),
            volume: core.lattice.volume(),
            links: &self.links,
            move_table: &self.move_table,
            kappa: core.kappa,
            g5: op.gamma5(),
            antiperiodic_mask: core.antiperiodic_mask,
            reconstruct: crate::backend::cuda::core::version::Reconstruct::R18,
        };
        self.kernels
            .launch(&mut core.gpu, &args, inp.double()?, out.double_mut()?)?;
        core.applications += 1;
        Ok(())
    }

    fn hop_xpay(
        &mut self,
        core: &mut Core,
        _: &mut DeviceSpinor,
        _: &DeviceSpinor,
        _: &DeviceSpinor,
        _: f64,
        _: bool,
    ) -> Result<()> {
        Err(self.refuse(core, "even-odd hopping terms"))
    }

    fn prepare(&mut self, _: &mut Core, _: Layout) -> Result<()> {
        Ok(())
    }
}
