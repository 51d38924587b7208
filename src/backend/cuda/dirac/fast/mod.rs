//! `FastStencil`: version 3.0 behind `StencilImpl`: fields of every `Layout` (full or one
//! parity, double or single precision) in the parity-major structure of arrays of
//! kernels/stencil_v3.cu (`fast_layout`), the even-odd operators, conversions, the
//! hop_xpay of the even-odd source and reconstruction, the (r|Ar) epilogue of the fused CR
//! iteration (the V3_HALF stencil of half fields reads 16-bit links), the
//! operators on several right-hand sides in one launch (`batch`), and
//! BLAS-1 and reductions on every layout, dispatched on the precision in one place (`prec`:
//! double fields the seed's kernels, as for the seed versions; float fields `xaxpy_f`,
//! `xpay_f`, `norm2_partial_f`, `dot_partial_f`; half fields, kernels/half.cuh, the
//! site-wise `xaxpy_h`, `xpay_h`, `norm2_partial_h`, `dot_partial_h`; reductions
//! accumulate in double) and on the pair of precisions in another (`convert`:
//! `to_single`, `to_double`, `to_half`, `from_half`, the reliable update's fused
//! `add_widened` and `residual_norm2`).

mod access;
mod batch;
mod convert;
mod lazy;
pub(crate) mod prec;
mod site;

use self::access::{addr, half_addr};
use self::prec::{ops, ops_for, FastBlas};
use crate::backend::cuda::core::cr_state::{DeviceCrState, CR_TICKET_APPLY};
use crate::backend::cuda::core::fast_layout::{spinor_from_soa, SpinorOrder};
use crate::backend::cuda::core::field::DeviceSpinor;
use crate::backend::cuda::core::kernels::{v3_bytes_per_site, V3Mode};
use crate::backend::cuda::core::launch::dptr;
use crate::backend::cuda::core::stencil::v3::V3Kernels;
use crate::backend::cuda::core::version::{Reconstruct, StencilVersion};
use crate::backend::cuda::dirac::blas::Core;
use crate::backend::cuda::dirac::stencil_impl::{Geometry, HostSiteTerm, StencilImpl};
use crate::backend::ledger::{field_bytes, Booking, Purpose};
use crate::backend::Capabilities;
use crate::error::{Error, Result};
use crate::field::C64;
use crate::geometry::lattice::Lattice;
use crate::linalg::{layout_mismatch as mismatch, Layout, Operator, Precision, Subset};
use cudarc::driver::{CudaModule, CudaSlice};
use std::sync::Arc;

/// 3.0's kernels, links and lazily built state.
/// The half build's 16-bit links on the device, and their booking.
type Link16 = (CudaSlice<i16>, Booking);

pub(crate) struct FastStencil {
    geometry: Geometry,
    reconstruct: Reconstruct,
    /// The double links (4 per site, parity-major), and their booking.
    links: CudaSlice<f64>,
    _links_booking: Booking,
    /// The BLAS-1, reduction and conversion kernels of single and half fields.
    blas: FastBlas,
    /// The double-precision stencil (the module loaded at construction).
    stencil_d: V3Kernels,
    /// The single-precision stencil and links (float2, same layout), built on first use.
    single: Option<(V3Kernels, CudaSlice<f32>, Booking)>,
    /// The half-precision stencil and, with 18 or 12 reals a link, its 16-bit links
    /// (kernels/v3_core.cuh V3_LINK16; the 8-real form reads the single links), built on
    /// first use.
    half: Option<(V3Kernels, Option<Link16>)>,
    /// The odd half-field temporary of the Schur operator, made on first use: room for a
    /// double field, which a single one uses the first half of (one stream: the two
    /// precisions never use it at once).
    tmp: Option<(CudaSlice<f64>, Booking)>,
    /// The norms of the Schur temporary when it holds a half field (made on first use).
    tmp_norm: Option<(CudaSlice<f32>, Booking)>,
    /// The site term (the clover term, a twist), once installed (`set_site_term`).
    site: Option<site::SiteArrays>,
    /// The batched Schur operator's odd temporaries, one per right-hand side (made on
    /// first use, `apply_batch`).
    batch_tmp: Vec<batch::BatchTemp>,
}

impl FastStencil {
    pub const CAPABILITIES: Capabilities = Capabilities {
        name: "kernel 3.0",
        half_lattice: true,
        single: true,
        half: true,
        fused_cr: true,
        site_term: true,
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
            blas: FastBlas::load(blas, reduce, layout)?,
            stencil_d,
            single: None,
            half: None,
            tmp: None,
            tmp_norm: None,
            site: None,
            batch_tmp: Vec::new(),
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
        let sites = layout.subset.sites(core.lattice.volume());
        let data = ops_for(layout.precision).alloc(&core.gpu.stream, sites)?;
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

    /// dst = src across precisions (`FastBlas::convert`).
    fn convert(
        &mut self,
        core: &mut Core,
        dst: &mut DeviceSpinor,
        src: &DeviceSpinor,
    ) -> Result<()> {
        self.blas.convert(core, dst, src)
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
        ops(x).axpy(&self.blas, core, a, x, y)
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
        ops(x).xpay(&self.blas, core, x, a, y)
    }

    fn dot(&mut self, core: &mut Core, x: &DeviceSpinor, y: &DeviceSpinor) -> Result<C64> {
        if x.layout != y.layout {
            return Err(mismatch("dot", x.layout, y.layout));
        }
        ops(x).dot(&self.blas, core, x, y)
    }

    fn norm2(&mut self, core: &mut Core, x: &DeviceSpinor) -> Result<f64> {
        ops(x).norm2(&self.blas, core, x)
    }

    /// y += x in one pass for a single x and a double y of one subset.
    fn add_converted(
        &mut self,
        core: &mut Core,
        x: &DeviceSpinor,
        y: &mut DeviceSpinor,
    ) -> Result<bool> {
        self.blas.add_converted(core, x, y)
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
        self.blas.residual_converted(core, b, r, low)
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
        self.apply_with(core, op, out, inp, cr, false)
    }

    fn apply_adjoint(
        &mut self,
        core: &mut Core,
        op: Operator,
        out: &mut DeviceSpinor,
        inp: &DeviceSpinor,
    ) -> Result<()> {
        self.apply_with(core, op, out, inp, None, true)
    }

    fn apply_batch(
        &mut self,
        core: &mut Core,
        op: Operator,
        outs: &mut [&mut DeviceSpinor],
        inps: &[&DeviceSpinor],
    ) -> Result<()> {
        self.launch_batch(core, op, outs, inps)
    }

    fn set_site_term(&mut self, core: &mut Core, site: &HostSiteTerm) -> Result<()> {
        self.install_site_term(core, site)
    }

    fn has_site_term(&self) -> bool {
        self.site_term()
    }

    fn site_inverse(
        &mut self,
        core: &mut Core,
        out: &mut DeviceSpinor,
        inp: &DeviceSpinor,
    ) -> Result<()> {
        self.launch_site_inverse(core, out, inp)
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
    /// single-precision links and stencil module; half: the 16-bit links and the half
    /// stencil module; even-odd fields: the Schur temporary, and its norms for half
    /// fields, which a full-lattice solve never needs), so that no allocation or set-up
    /// launch happens later, e.g. inside a recorded CUDA graph.
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
            if self.site_term() && core.halo.is_some() {
                self.ensure_tmp2(core)?;
            }
        }
        Ok(())
    }
}

impl FastStencil {
    /// `StencilImpl::apply` (`adjoint`: with A^dag, `apply_adjoint`). With a site term A
    /// the full forms end in out = [g5] (A x - kappa H x), and the Schur forms run
    /// tmp_o = A_oo^-1 H_oe x_e, then out_e = [g5] (A_ee x_e - kappa^2 H_eo tmp_o)
    /// (kernels/clover.cuh's epilogues).
    fn apply_with(
        &mut self,
        core: &mut Core,
        op: Operator,
        out: &mut DeviceSpinor,
        inp: &DeviceSpinor,
        cr: Option<&mut DeviceCrState>,
        adjoint: bool,
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
            // With a site term: tmp_o = A_oo^-1 H_oe x_e (on a split lattice in a second
            // temporary, `split_inverse_hop`).
            let mut hop_out = tmp;
            if self.site_term() && core.halo.is_some() {
                hop_out = self.split_inverse_hop(core, &f, l, precision, adjoint)?;
            } else {
                l.site = self.site_args(core, precision, true, adjoint)?;
                core.launch_v3(&f, &l)?;
            }
            // out_e = [g5] (x_e - kappa^2 H_eo tmp_o)
            l.parity = Some(0);
            l.inp = hop_out;
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
        l.site = self.site_args(core, precision, false, adjoint)?;
        l.out = o;
        l.out_norm = o_norm;
        l.g5 = op.gamma5();
        l.partials = partials;
        l.ticket = ticket;
        core.launch_v3(&f, &l)?;
        core.applications += 1;
        Ok(())
    }
}
