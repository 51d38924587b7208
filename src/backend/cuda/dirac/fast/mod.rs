//! `FastStencil`: version 3.0 behind `StencilImpl`: fields of every `Layout` (full or one
//! parity, double or single precision) in the parity-major structure of arrays of
//! kernels/stencil_v3.cu (`fast_layout`), the even-odd operators, conversions, the
//! hop_xpay of the even-odd source and reconstruction, the (r|Ar) epilogue of the fused CR
//! iteration, and BLAS-1 and reductions on every layout (double fields: the seed's kernels,
//! as for the seed versions; float fields: `xaxpy_f`, `xpay_f`, `norm2_partial_f`,
//! `dot_partial_f`; the reliable update's fused `add_widened` and `residual_norm2`; half
//! fields, kernels/half.cuh: the site-wise `xaxpy_h`, `xpay_h`, `norm2_partial_h`,
//! `dot_partial_h`, `to_half`, `from_half` and the V3_HALF stencil with the
//! single-precision links; reductions accumulate in double).

mod access;
mod convert;
mod lazy;

use self::access::{addr, half_addr, vh};
use crate::backend::cuda::core::cr_state::{DeviceCrState, CR_TICKET_APPLY};
use crate::backend::cuda::core::device::{err, function};
use crate::backend::cuda::core::fast_layout::{spinor_from_soa, SpinorOrder};
use crate::backend::cuda::core::field::{DeviceData, DeviceSpinor};
use crate::backend::cuda::core::kernels::{v3_bytes_per_site, HalfOp, Kernel, V3Mode, BLAS_BLOCK};
use crate::backend::cuda::core::launch::{cfg_1d, dptr};
use crate::backend::cuda::core::stencil::v3::V3Kernels;
use crate::backend::cuda::core::timing::launch;
use crate::backend::cuda::core::version::{Reconstruct, StencilVersion};
use crate::backend::cuda::dirac::blas::{reduce_cfg, Core};
use crate::backend::cuda::dirac::stencil_impl::{Geometry, StencilImpl};
use crate::backend::ledger::{field_bytes, Booking, Purpose};
use crate::backend::Capabilities;
use crate::error::{Error, Result};
use crate::field::C64;
use crate::geometry::lattice::Lattice;
use crate::linalg::{layout_mismatch as mismatch, Layout, Operator, Precision, Subset};
use cudarc::driver::{CudaFunction, CudaModule, CudaSlice};
use std::sync::Arc;

/// 3.0's kernels, links and lazily built state.
pub(crate) struct FastStencil {
    geometry: Geometry,
    reconstruct: Reconstruct,
    /// The double links (4 per site, parity-major), and their booking.
    links: CudaSlice<f64>,
    _links_booking: Booking,
    xaxpy_f: CudaFunction,
    xpay_f: CudaFunction,
    norm2_f: CudaFunction,
    dot_f: CudaFunction,
    /// The reliable update's fused steps (blas1.cu add_widened, reduce.cu residual_norm2).
    add_widened: CudaFunction,
    residual_norm2: CudaFunction,
    to_single: CudaFunction,
    to_double: CudaFunction,
    /// The site-wise kernels of half fields.
    half_k: HalfKernels,
    /// The double-precision stencil (the module loaded at construction).
    stencil_d: V3Kernels,
    /// The single-precision stencil and links (float2, same layout), built on first use.
    single: Option<(V3Kernels, CudaSlice<f32>, Booking)>,
    /// The half-precision stencil (reading the single links), built on first use.
    half: Option<V3Kernels>,
    /// The odd half-field temporary of the Schur operator, made on first use: room for a
    /// double field, which a single one uses the first half of (one stream: the two
    /// precisions never use it at once).
    tmp: Option<(CudaSlice<f64>, Booking)>,
    /// The norms of the Schur temporary when it holds a half field (made on first use).
    tmp_norm: Option<(CudaSlice<f32>, Booking)>,
}

/// kernels/half.cuh's site-wise kernels (in blas1.cu, reduce.cu and layout.cu).
struct HalfKernels {
    axpy: CudaFunction,
    xpay: CudaFunction,
    norm2: CudaFunction,
    dot: CudaFunction,
    from_double: CudaFunction,
    to_double: CudaFunction,
}
impl FastStencil {
    pub const CAPABILITIES: Capabilities = Capabilities {
        name: "kernel 3.0",
        half_lattice: true,
        single: true,
        half: true,
        fused_cr: true,
    };

    pub(crate) fn new(
        blas: &Arc<CudaModule>,
        reduce: &Arc<CudaModule>,
        layout: &Arc<CudaModule>,
        stencil_d: V3Kernels,
        links: (CudaSlice<f64>, Booking),
        geometry: Geometry,
        reconstruct: Reconstruct,
    ) -> Result<Self> {
        let (links, _links_booking) = links;
        Ok(FastStencil {
            geometry,
            reconstruct,
            links,
            _links_booking,
            xaxpy_f: function(blas, "xaxpy_f")?,
            xpay_f: function(blas, "xpay_f")?,
            norm2_f: function(reduce, "norm2_partial_f")?,
            dot_f: function(reduce, "dot_partial_f")?,
            add_widened: function(blas, "add_widened")?,
            residual_norm2: function(reduce, "residual_norm2")?,
            to_single: function(layout, "to_single")?,
            to_double: function(layout, "to_double")?,
            half_k: HalfKernels {
                axpy: function(blas, "xaxpy_h")?,
                xpay: function(blas, "xpay_h")?,
                norm2: function(reduce, "norm2_partial_h")?,
                dot: function(reduce, "dot_partial_h")?,
                from_double: function(layout, "to_half")?,
                to_double: function(layout, "from_half")?,
            },
            stencil_d,
            single: None,
            half: None,
            tmp: None,
            tmp_norm: None,
        })
    }
}

impl StencilImpl for FastStencil {
    fn capabilities(&self) -> Capabilities {
        Self::CAPABILITIES
    }

    fn double_links(&self) -> Option<&CudaSlice<f64>> {
        Some(&self.links)
    }

    fn version(&self) -> StencilVersion {
        StencilVersion::V3_0
    }

    fn geometry(&self) -> Geometry {
        self.geometry
    }

    fn set_geometry(&mut self, g: Geometry) {
        self.geometry = g;
    }

    fn block_threads(&self) -> usize {
        self.geometry.coarse_block
    }

    fn tune_kernel(&self) -> String {
        match self.reconstruct {
            Reconstruct::R18 => "stencil-3.0".into(),
            r => format!("stencil-3.0-{}", r.label()),
        }
    }

    fn bytes_per_site(&self) -> u64 {
        v3_bytes_per_site(V3Mode::Full, false, self.reconstruct)
    }

    fn alloc(&mut self, core: &mut Core, layout: Layout) -> Result<DeviceSpinor> {
        let n = layout.subset.sites(core.lattice.volume()) * 12 * 2;
        let stream = &core.gpu.stream;
        let data = match layout.precision {
            Precision::Double => DeviceData::Double(
                stream
                    .alloc_zeros::<f64>(n)
                    .map_err(err("allocating a spinor field"))?,
            ),
            Precision::Single => DeviceData::Single(
                stream
                    .alloc_zeros::<f32>(n)
                    .map_err(err("allocating a spinor field"))?,
            ),
            Precision::Half => {
                let sites = layout.subset.sites(core.lattice.volume());
                DeviceData::Half {
                    q: stream
                        .alloc_zeros::<i16>(24 * sites)
                        .map_err(err("allocating a spinor field"))?,
                    norm: stream
                        .alloc_zeros::<f32>(sites)
                        .map_err(err("allocating a spinor field"))?,
                }
            }
        };
        let bytes = field_bytes(layout, core.lattice.volume());
        Ok(DeviceSpinor {
            data,
            layout,
            _booking: core.ledger.book(Purpose::Fields(layout), bytes),
        })
    }

    fn spinor_order(&self) -> SpinorOrder {
        SpinorOrder::ParityMajor
    }

    fn to_canonical_order(
        &self,
        lattice: &Lattice,
        src: &[f64],
        canonical: &mut [f64],
        parity: Option<usize>,
    ) {
        spinor_from_soa(lattice, src, canonical, parity);
    }

    fn copy(&mut self, core: &mut Core, dst: &mut DeviceSpinor, src: &DeviceSpinor) -> Result<()> {
        if dst.layout != src.layout {
            return Err(mismatch("copy", dst.layout, src.layout));
        }
        self.convert(core, dst, src)
    }

    /// dst = src across precisions, gathering a parity from a full field or scattering a
    /// half field into a full one (with the parity-major layout these are offset copies).
    fn convert(
        &mut self,
        core: &mut Core,
        dst: &mut DeviceSpinor,
        src: &DeviceSpinor,
    ) -> Result<()> {
        let (ds, ss) = (dst.layout.subset, src.layout.subset);
        let half = vh(core) * 12;
        let (src_off, dst_off, n) = match (ds.parity(), ss.parity()) {
            (None, None) => (0, 0, 2 * half),
            (Some(p), Some(q)) if p == q => (0, 0, half),
            (Some(p), None) => (p * half, 0, half),
            (None, Some(q)) => (0, q * half, half),
            _ => return Err(mismatch("convert", dst.layout, src.layout)),
        };
        let stream = core.gpu.stream.clone();
        let (sp, dp) = (src.layout.precision, dst.layout.precision);
        if sp == Precision::Half || dp == Precision::Half {
            return self.convert_half(core, dst, src, src_off, dst_off, n);
        }
        let (s, s_size) = addr(src, &stream);
        let (d, d_size) = addr(dst, &stream);
        self.convert_raw(
            core,
            s + src_off as u64 * s_size,
            s_size,
            d + dst_off as u64 * d_size,
            d_size,
            n,
        )
    }

    fn axpy(
        &mut self,
        core: &mut Core,
        a: C64,
        x: &DeviceSpinor,
        y: &mut DeviceSpinor,
    ) -> Result<()> {
        if x.layout != y.layout {
            return Err(mismatch("axpy", x.layout, y.layout));
        }
        let n = x.len();
        let ni = n as i32;
        let cfg = cfg_1d(n, BLAS_BLOCK, 0);
        match (&x.data, &mut y.data) {
            (DeviceData::Double(xd), DeviceData::Double(yd)) => core.axpy_d(a, xd, yd, n)?,
            (DeviceData::Single(xs), DeviceData::Single(ys)) => launch!(
                core.gpu,
                Kernel::XaxpyF,
                n,
                &self.xaxpy_f,
                cfg,
                [xs, ys, &a.re, &a.im, &ni]
            ),
            (DeviceData::Half { .. }, DeviceData::Half { .. }) => {
                self.half_blas(core, HalfOp::Axpy, a, x, y)?
            }
            _ => return Err(mismatch("axpy", x.layout, y.layout)),
        }
        Ok(())
    }

    fn xpay(
        &mut self,
        core: &mut Core,
        x: &DeviceSpinor,
        a: C64,
        y: &mut DeviceSpinor,
    ) -> Result<()> {
        if x.layout != y.layout {
            return Err(mismatch("xpay", x.layout, y.layout));
        }
        let n = x.len();
        let ni = n as i32;
        let cfg = cfg_1d(n, BLAS_BLOCK, 0);
        match (&x.data, &mut y.data) {
            // The seed's way, as for full fields: y = a y, then y = y + x.
            (DeviceData::Double(xd), DeviceData::Double(yd)) => core.xpay_d(xd, a, yd, n)?,
            (DeviceData::Single(xs), DeviceData::Single(ys)) => launch!(
                core.gpu,
                Kernel::XpayF,
                n,
                &self.xpay_f,
                cfg,
                [xs, ys, &a.re, &a.im, &ni]
            ),
            (DeviceData::Half { .. }, DeviceData::Half { .. }) => {
                self.half_blas(core, HalfOp::Xpay, a, x, y)?
            }
            _ => return Err(mismatch("xpay", x.layout, y.layout)),
        }
        Ok(())
    }

    fn dot(&mut self, core: &mut Core, x: &DeviceSpinor, y: &DeviceSpinor) -> Result<C64> {
        if x.layout != y.layout {
            return Err(mismatch("dot", x.layout, y.layout));
        }
        let n = x.len();
        let ni = n as i32;
        match (&x.data, &y.data) {
            (DeviceData::Double(xd), DeviceData::Double(yd)) => core.dot_d(xd, yd, n),
            (DeviceData::Single(xs), DeviceData::Single(ys)) => {
                let r = core.reduce_args();
                launch!(
                    core.gpu,
                    Kernel::DotPartialF,
                    n,
                    &self.dot_f,
                    reduce_cfg(n),
                    [xs, ys, &ni, &r.level0, &r.upper, &r.tickets, &r.result]
                );
                let (re, im) = core.read_reduction(true)?;
                Ok(C64::new(re, im))
            }
            (DeviceData::Half { .. }, DeviceData::Half { .. }) => self.half_reduce(core, x, y),
            _ => Err(mismatch("dot", x.layout, y.layout)),
        }
    }

    fn norm2(&mut self, core: &mut Core, x: &DeviceSpinor) -> Result<f64> {
        let n = x.len();
        let ni = n as i32;
        match &x.data {
            DeviceData::Double(xd) => core.norm2_d(xd, n),
            DeviceData::Single(xs) => {
                let r = core.reduce_args();
                launch!(
                    core.gpu,
                    Kernel::Norm2PartialF,
                    n,
                    &self.norm2_f,
                    reduce_cfg(n),
                    [xs, &ni, &r.level0, &r.upper, &r.tickets, &r.result]
                );
                Ok(core.read_reduction(false)?.0)
            }
            DeviceData::Half { .. } => Ok(self.half_reduce(core, x, x)?.re),
        }
    }

    /// y += x in one pass for a single x and a double y of one subset.
    fn add_converted(
        &mut self,
        core: &mut Core,
        x: &DeviceSpinor,
        y: &mut DeviceSpinor,
    ) -> Result<bool> {
        let n = x.len();
        if x.layout.subset != y.layout.subset || y.len() != n {
            return Ok(false);
        }
        let ni = n as i32;
        match (&x.data, &mut y.data) {
            (DeviceData::Single(xs), DeviceData::Double(yd)) => {
                launch!(
                    core.gpu,
                    Kernel::AddWidened,
                    n,
                    &self.add_widened,
                    cfg_1d(n, BLAS_BLOCK, 0),
                    [xs, yd, &ni]
                );
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// r = b - r, low = r and (r|r) in one launch for double b and r and a single low of
    /// one subset.
    fn residual_converted(
        &mut self,
        core: &mut Core,
        b: &DeviceSpinor,
        r: &mut DeviceSpinor,
        low: &mut DeviceSpinor,
    ) -> Result<Option<f64>> {
        let n = r.len();
        if b.layout != r.layout || low.layout.subset != r.layout.subset || low.len() != n {
            return Ok(None);
        }
        let ni = n as i32;
        match (&b.data, &mut r.data, &mut low.data) {
            (DeviceData::Double(bd), DeviceData::Double(rd), DeviceData::Single(ls)) => {
                let a = core.reduce_args();
                launch!(
                    core.gpu,
                    Kernel::ResidualNorm2,
                    n,
                    &self.residual_norm2,
                    reduce_cfg(n),
                    [bd, rd, ls, &ni, &a.level0, &a.upper, &a.tickets, &a.result]
                );
                Ok(Some(core.read_reduction(false)?.0))
            }
            _ => Ok(None),
        }
    }

    /// out = A inp for every operator (D, G5D on full fields; Schur, G5Schur on even
    /// ones). With `cr`: gated on the iteration's `active`, and the last launch reduces
    /// (inp|out) into the scalar block (rar, beta).
    fn apply(
        &mut self,
        core: &mut Core,
        op: Operator,
        out: &mut DeviceSpinor,
        inp: &DeviceSpinor,
        cr: Option<&mut DeviceCrState>,
    ) -> Result<()> {
        if out.layout != inp.layout {
            return Err(mismatch("apply", out.layout, inp.layout));
        }
        let want = op.subset();
        if inp.layout.subset != want {
            return Err(Error::invalid(
                "backend",
                if op.is_schur() {
                    format!(
                        "operator {op} acts on even-site fields, not {:?} ones",
                        inp.layout.subset
                    )
                } else {
                    format!(
                        "operator {op} acts on full-lattice fields, not {:?} ones",
                        inp.layout.subset
                    )
                },
            ));
        }
        let precision = inp.layout.precision;
        let (f, links) = self.stencil_for(core, precision)?;
        let stream = core.gpu.stream.clone();
        let (x, _) = addr(inp, &stream);
        let (o, _) = addr(out, &stream);
        let x_norm = half_addr(inp, &stream, 0).map_or(0, |a| a.1);
        let o_norm = half_addr(out, &stream, 0).map_or(0, |a| a.1);
        let (s, partials, ticket) = match &cr {
            Some(st) => (
                dptr(&st.scalars, &stream),
                dptr(&st.partials, &stream),
                dptr(&st.tickets, &stream) + 4 * CR_TICKET_APPLY as u64,
            ),
            None => (0, 0, 0),
        };
        let mut l = self.v3_launch(core, links, precision);
        l.s = s;
        if op.is_schur() {
            let tmp = self.ensure_tmp(core)?;
            let tmp_norm = if precision == Precision::Half {
                self.ensure_tmp_norm(core)?
            } else {
                0
            };
            // tmp_o = H_oe x_e
            l.parity = Some(1);
            l.inp = x;
            l.inp_norm = x_norm;
            l.out = tmp;
            l.out_norm = tmp_norm;
            l.c = 1.0;
            core.launch_v3(&f, &l)?;
            // out_e = [g5] (x_e - kappa^2 H_eo tmp_o)
            l.parity = Some(0);
            l.inp = tmp;
            l.inp_norm = tmp_norm;
            l.y = x;
            l.y_norm = x_norm;
            l.c = -core.kappa * core.kappa;
        } else {
            l.inp = x;
            l.inp_norm = x_norm;
            l.y = x;
            l.y_norm = x_norm;
            l.c = -core.kappa;
        }
        l.out = o;
        l.out_norm = o_norm;
        l.g5 = op.gamma5();
        l.partials = partials;
        l.ticket = ticket;
        core.launch_v3(&f, &l)?;
        core.applications += 1;
        Ok(())
    }

    /// out = [g5] (y + c H inp) on half fields (out, y of one parity; inp the other).
    fn hop_xpay(
        &mut self,
        core: &mut Core,
        out: &mut DeviceSpinor,
        inp: &DeviceSpinor,
        y: &DeviceSpinor,
        c: f64,
        gamma5: bool,
    ) -> Result<()> {
        let p = crate::linalg::hop_xpay_parity(out.layout, inp.layout, y.layout)?;
        if inp.layout.precision != out.layout.precision {
            return Err(mismatch("hop_xpay", out.layout, inp.layout));
        }
        let precision = out.layout.precision;
        let (f, links) = self.stencil_for(core, precision)?;
        let stream = core.gpu.stream.clone();
        let mut l = self.v3_launch(core, links, precision);
        l.parity = Some(p);
        l.inp = addr(inp, &stream).0;
        l.y = addr(y, &stream).0;
        l.out = addr(out, &stream).0;
        l.inp_norm = half_addr(inp, &stream, 0).map_or(0, |a| a.1);
        l.y_norm = half_addr(y, &stream, 0).map_or(0, |a| a.1);
        l.out_norm = half_addr(out, &stream, 0).map_or(0, |a| a.1);
        l.c = c;
        l.g5 = gamma5;
        core.launch_v3(&f, &l)
    }

    /// Build now what otherwise is made on first use for fields of `layout` (single: the
    /// single-precision links and stencil module; half fields: the Schur temporary, which
    /// a full-lattice solve never needs), so that no allocation or set-up launch happens
    /// later, e.g. inside a recorded CUDA graph.
    fn prepare(&mut self, core: &mut Core, layout: Layout) -> Result<()> {
        if layout.precision == Precision::Half && core.halo.is_some() {
            return Err(Error::invalid(
                "solver.precision",
                "half-double on a decomposed lattice: the halo kernels have no half-precision build; use single-double or one GPU",
            ));
        }
        if layout.precision == Precision::Single {
            self.ensure_single(core)?;
            if let Some(h) = &mut core.halo {
                h.prepare_single(&core.gpu.ctx)?;
            }
        }
        if layout.precision == Precision::Half {
            self.ensure_half(core)?;
        }
        if layout.subset != Subset::Full {
            self.ensure_tmp(core)?;
            if layout.precision == Precision::Half {
                self.ensure_tmp_norm(core)?;
            }
        }
        Ok(())
    }
}
