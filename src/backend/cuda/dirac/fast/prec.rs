//! The one precision dispatch of 3.0's field operations: `FieldOps`, implemented once per
//! precision, and `ops_for` (with `ops`, its form for a field), the one `match` that picks
//! the implementation. Double fields run the seed's BLAS-1 and reductions (`blas::Core`:
//! xaxpy, xscal then xaxpy, dot_partial, norm2_partial), as for the seed versions; single
//! fields blas1.cu's and reduce.cu's `_f` kernels; half fields the site-wise kernels of
//! kernels/half.cuh. Adding an operation is one method and its three bodies here; adding a
//! precision, one implementation and one arm of `ops_for`. Operations between two
//! precisions dispatch on the pair, once, in `convert`.

use super::access::{half_addr, single, single_mut, vh, wrong_field};
use crate::backend::cuda::core::device::{err, function};
use crate::backend::cuda::core::field::{DeviceData, DeviceSpinor};
use crate::backend::cuda::core::kernels::{HalfOp, Kernel, BLAS_BLOCK};
use crate::backend::cuda::core::launch::{cfg_1d, dptr};
use crate::backend::cuda::core::timing::{launch, GpuStream};
use crate::backend::cuda::dirac::blas::{reduce_cfg, Core};
use crate::error::Result;
use crate::field::C64;
use crate::linalg::Precision;
use cudarc::driver::{CudaFunction, CudaModule, CudaStream};
use std::sync::Arc;

/// 3.0's own BLAS-1, reduction and conversion kernels (blas1.cu, reduce.cu, layout.cu);
/// double fields use the seed's, in `Core`.
pub(crate) struct FastBlas {
    single: SingleKernels,
    half: HalfKernels,
    /// The reliable update's fused steps (blas1.cu add_widened, reduce.cu residual_norm2).
    pub(super) add_widened: CudaFunction,
    pub(super) residual_norm2: CudaFunction,
    pub(super) to_single: CudaFunction,
    pub(super) to_double: CudaFunction,
    /// The half build's 16-bit links from the double ones (layout.cu `to_link16`).
    pub(super) to_link16: CudaFunction,
}

/// The float2 kernels of single fields.
struct SingleKernels {
    axpy: CudaFunction,
    xpay: CudaFunction,
    norm2: CudaFunction,
    dot: CudaFunction,
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

impl FastBlas {
    pub(super) fn load(
        blas: &Arc<CudaModule>,
        reduce: &Arc<CudaModule>,
        layout: &Arc<CudaModule>,
    ) -> Result<Self> {
        Ok(FastBlas {
            single: SingleKernels {
                axpy: function(blas, "xaxpy_f")?,
                xpay: function(blas, "xpay_f")?,
                norm2: function(reduce, "norm2_partial_f")?,
                dot: function(reduce, "dot_partial_f")?,
            },
            add_widened: function(blas, "add_widened")?,
            residual_norm2: function(reduce, "residual_norm2")?,
            to_single: function(layout, "to_single")?,
            to_double: function(layout, "to_double")?,
            to_link16: function(layout, "to_link16")?,
            half: HalfKernels {
                axpy: function(blas, "xaxpy_h")?,
                xpay: function(blas, "xpay_h")?,
                norm2: function(reduce, "norm2_partial_h")?,
                dot: function(reduce, "dot_partial_h")?,
                from_double: function(layout, "to_half")?,
                to_double: function(layout, "from_half")?,
            },
        })
    }

    /// double -> half, site by site (layout.cu to_half): `sites` sites from address `src`
    /// into the half field at complex index `dst_off` of `dst`.
    pub(super) fn double_to_half(
        &self,
        core: &mut Core,
        src: u64,
        dst: &DeviceSpinor,
        dst_off: usize,
        sites: usize,
    ) -> Result<()> {
        let stream = core.gpu.stream.clone();
        let (ns, nvh) = (sites as i64, vh(core) as i64);
        let (dq, dn) = half_addr(dst, &stream, dst_off)?;
        launch!(
            core.gpu,
            Kernel::Half(HalfOp::FromDouble),
            sites,
            &self.half.from_double,
            cfg_1d(sites, BLAS_BLOCK, 0),
            [&src, &dq, &dn, &ns, &nvh]
        );
        Ok(())
    }

    /// half -> double, site by site (layout.cu from_half): `sites` sites of the half field
    /// at complex index `src_off` of `src` to address `dst`.
    pub(super) fn half_to_double(
        &self,
        core: &mut Core,
        src: &DeviceSpinor,
        src_off: usize,
        dst: u64,
        sites: usize,
    ) -> Result<()> {
        let stream = core.gpu.stream.clone();
        let (ns, nvh) = (sites as i64, vh(core) as i64);
        let (sq, sn) = half_addr(src, &stream, src_off)?;
        launch!(
            core.gpu,
            Kernel::Half(HalfOp::ToDouble),
            sites,
            &self.half.to_double,
            cfg_1d(sites, BLAS_BLOCK, 0),
            [&sq, &sn, &dst, &ns, &nvh]
        );
        Ok(())
    }
}

/// What a field of one precision can do: its storage, copies and BLAS-1. `x` and `y` are
/// of one layout (the callers check).
pub(crate) trait FieldOps: Sync {
    /// The zeroed storage of a field of `sites` sites.
    fn alloc(&self, stream: &Arc<CudaStream>, sites: usize) -> Result<DeviceData>;
    /// x = 0 (device memsets, booked as the precision's zero).
    fn zero(&self, gpu: &mut GpuStream, x: &mut DeviceSpinor) -> Result<()>;
    /// n complex numbers (whole sites) from complex index `src_off` of src to `dst_off` of
    /// dst, both of this precision (device-to-device copies).
    fn copy(
        &self,
        core: &mut Core,
        dst: &mut DeviceSpinor,
        src: &DeviceSpinor,
        src_off: usize,
        dst_off: usize,
        n: usize,
    ) -> Result<()>;
    /// y = y + a x.
    fn axpy(
        &self,
        k: &FastBlas,
        core: &mut Core,
        a: C64,
        x: &DeviceSpinor,
        y: &mut DeviceSpinor,
    ) -> Result<()>;
    /// y = x + a y.
    fn xpay(
        &self,
        k: &FastBlas,
        core: &mut Core,
        x: &DeviceSpinor,
        a: C64,
        y: &mut DeviceSpinor,
    ) -> Result<()>;
    /// (x|y), summed in double.
    fn dot(&self, k: &FastBlas, core: &mut Core, x: &DeviceSpinor, y: &DeviceSpinor)
        -> Result<C64>;
    /// (x|x), summed in double.
    fn norm2(&self, k: &FastBlas, core: &mut Core, x: &DeviceSpinor) -> Result<f64>;
}

/// The one precision dispatch: the operations of fields of precision `p`.
pub(crate) fn ops_for(p: Precision) -> &'static dyn FieldOps {
    match p {
        Precision::Double => &DoubleOps,
        Precision::Single => &SingleOps,
        Precision::Half => &HalfOps,
    }
}

/// The operations of `f`'s precision.
pub(crate) fn ops(f: &DeviceSpinor) -> &'static dyn FieldOps {
    ops_for(f.layout.precision)
}

/// Double fields: the seed's kernels (`blas::Core`), as for the seed versions.
struct DoubleOps;
/// Single fields: the float2 kernels.
struct SingleOps;
/// Half fields: 16-bit integers and a norm per site, the site-wise kernels.
struct HalfOps;

/// Book device memsets as `kernel` over `items`.
fn timed_zero(
    gpu: &mut GpuStream,
    kernel: Kernel,
    items: usize,
    zero: impl FnOnce(&Arc<CudaStream>) -> Result<()>,
) -> Result<()> {
    let stream = gpu.stream.clone();
    let p = gpu.begin(&kernel)?;
    zero(&stream)?;
    gpu.end(p, kernel, items)
}

/// Device-to-device copies, each (dst, src, bytes), booked together as `kernel` over `n`.
fn timed_copy(
    core: &mut Core,
    kernel: Kernel,
    copies: &[(u64, u64, usize)],
    n: usize,
) -> Result<()> {
    let stream = core.gpu.stream.clone();
    let p = core.gpu.begin(&kernel)?;
    for &(dst, src, bytes) in copies {
        // SAFETY: both ranges lie inside live allocations of this context (the callers
        // check the layouts), on the backend's one stream.
        unsafe { cudarc::driver::result::memcpy_dtod_async(dst, src, bytes, stream.cu_stream()) }
            .map_err(err("copying a field"))?;
    }
    core.gpu.end(p, kernel, n)
}

impl FieldOps for DoubleOps {
    fn alloc(&self, stream: &Arc<CudaStream>, sites: usize) -> Result<DeviceData> {
        Ok(DeviceData::Double(
            stream
                .alloc_zeros::<f64>(sites * 24)
                .map_err(err("allocating a spinor field"))?,
        ))
    }

    fn zero(&self, gpu: &mut GpuStream, x: &mut DeviceSpinor) -> Result<()> {
        let n = x.len();
        let d = x.double_mut()?;
        timed_zero(gpu, Kernel::Zero { single: false }, n, |s| {
            s.memset_zeros(d).map_err(err("zeroing a field"))
        })
    }

    fn copy(
        &self,
        core: &mut Core,
        dst: &mut DeviceSpinor,
        src: &DeviceSpinor,
        src_off: usize,
        dst_off: usize,
        n: usize,
    ) -> Result<()> {
        let stream = core.gpu.stream.clone();
        let s = dptr(src.double()?, &stream) + 16 * src_off as u64;
        let d = dptr(dst.double()?, &stream) + 16 * dst_off as u64;
        timed_copy(core, Kernel::Copy, &[(d, s, 16 * n)], n)
    }

    fn axpy(
        &self,
        _: &FastBlas,
        core: &mut Core,
        a: C64,
        x: &DeviceSpinor,
        y: &mut DeviceSpinor,
    ) -> Result<()> {
        let n = x.len();
        core.axpy_d(a, x.double()?, y.double_mut()?, n)
    }

    /// The seed's way, as for full fields: y = a y, then y = y + x.
    fn xpay(
        &self,
        _: &FastBlas,
        core: &mut Core,
        x: &DeviceSpinor,
        a: C64,
        y: &mut DeviceSpinor,
    ) -> Result<()> {
        let n = x.len();
        core.xpay_d(x.double()?, a, y.double_mut()?, n)
    }

    fn dot(
        &self,
        _: &FastBlas,
        core: &mut Core,
        x: &DeviceSpinor,
        y: &DeviceSpinor,
    ) -> Result<C64> {
        core.dot_d(x.double()?, y.double()?, x.len())
    }

    fn norm2(&self, _: &FastBlas, core: &mut Core, x: &DeviceSpinor) -> Result<f64> {
        core.norm2_d(x.double()?, x.len())
    }
}

impl FieldOps for SingleOps {
    fn alloc(&self, stream: &Arc<CudaStream>, sites: usize) -> Result<DeviceData> {
        Ok(DeviceData::Single(
            stream
                .alloc_zeros::<f32>(sites * 24)
                .map_err(err("allocating a spinor field"))?,
        ))
    }

    fn zero(&self, gpu: &mut GpuStream, x: &mut DeviceSpinor) -> Result<()> {
        let n = x.len();
        let d = single_mut(x)?;
        timed_zero(gpu, Kernel::Zero { single: true }, n, |s| {
            s.memset_zeros(d).map_err(err("zeroing a field"))
        })
    }

    fn copy(
        &self,
        core: &mut Core,
        dst: &mut DeviceSpinor,
        src: &DeviceSpinor,
        src_off: usize,
        dst_off: usize,
        n: usize,
    ) -> Result<()> {
        let stream = core.gpu.stream.clone();
        let s = dptr(single(src)?, &stream) + 8 * src_off as u64;
        let d = dptr(single(dst)?, &stream) + 8 * dst_off as u64;
        timed_copy(core, Kernel::CopySingle, &[(d, s, 8 * n)], n)
    }

    fn axpy(
        &self,
        k: &FastBlas,
        core: &mut Core,
        a: C64,
        x: &DeviceSpinor,
        y: &mut DeviceSpinor,
    ) -> Result<()> {
        let n = x.len();
        let ni = n as i32;
        let (xs, ys) = (single(x)?, single_mut(y)?);
        launch!(
            core.gpu,
            Kernel::XaxpyF,
            n,
            &k.single.axpy,
            cfg_1d(n, BLAS_BLOCK, 0),
            [xs, ys, &a.re, &a.im, &ni]
        );
        Ok(())
    }

    fn xpay(
        &self,
        k: &FastBlas,
        core: &mut Core,
        x: &DeviceSpinor,
        a: C64,
        y: &mut DeviceSpinor,
    ) -> Result<()> {
        let n = x.len();
        let ni = n as i32;
        let (xs, ys) = (single(x)?, single_mut(y)?);
        launch!(
            core.gpu,
            Kernel::XpayF,
            n,
            &k.single.xpay,
            cfg_1d(n, BLAS_BLOCK, 0),
            [xs, ys, &a.re, &a.im, &ni]
        );
        Ok(())
    }

    fn dot(
        &self,
        k: &FastBlas,
        core: &mut Core,
        x: &DeviceSpinor,
        y: &DeviceSpinor,
    ) -> Result<C64> {
        let n = x.len();
        let ni = n as i32;
        let (xs, ys) = (single(x)?, single(y)?);
        let r = core.reduce_args();
        launch!(
            core.gpu,
            Kernel::DotPartialF,
            n,
            &k.single.dot,
            reduce_cfg(n),
            [xs, ys, &ni, &r.level0, &r.upper, &r.tickets, &r.result]
        );
        let (re, im) = core.read_reduction(true)?;
        Ok(C64::new(re, im))
    }

    fn norm2(&self, k: &FastBlas, core: &mut Core, x: &DeviceSpinor) -> Result<f64> {
        let n = x.len();
        let ni = n as i32;
        let xs = single(x)?;
        let r = core.reduce_args();
        launch!(
            core.gpu,
            Kernel::Norm2PartialF,
            n,
            &k.single.norm2,
            reduce_cfg(n),
            [xs, &ni, &r.level0, &r.upper, &r.tickets, &r.result]
        );
        Ok(core.read_reduction(false)?.0)
    }
}

impl FieldOps for HalfOps {
    fn alloc(&self, stream: &Arc<CudaStream>, sites: usize) -> Result<DeviceData> {
        Ok(DeviceData::Half {
            q: stream
                .alloc_zeros::<i16>(24 * sites)
                .map_err(err("allocating a spinor field"))?,
            norm: stream
                .alloc_zeros::<f32>(sites)
                .map_err(err("allocating a spinor field"))?,
        })
    }

    fn zero(&self, gpu: &mut GpuStream, x: &mut DeviceSpinor) -> Result<()> {
        let (sites, layout) = (x.len() / 12, x.layout);
        let DeviceData::Half { q, norm } = &mut x.data else {
            return Err(wrong_field(layout, "half"));
        };
        timed_zero(gpu, Kernel::Half(HalfOp::Zero), sites, |s| {
            s.memset_zeros(q).map_err(err("zeroing a field"))?;
            s.memset_zeros(norm).map_err(err("zeroing a field"))
        })
    }

    /// The integers and the norms, copied as they are.
    fn copy(
        &self,
        core: &mut Core,
        dst: &mut DeviceSpinor,
        src: &DeviceSpinor,
        src_off: usize,
        dst_off: usize,
        n: usize,
    ) -> Result<()> {
        let stream = core.gpu.stream.clone();
        let sites = n / 12;
        let (sq, sn) = half_addr(src, &stream, src_off)?;
        let (dq, dn) = half_addr(dst, &stream, dst_off)?;
        let copies = [(dq, sq, 4 * n), (dn, sn, 4 * sites)];
        timed_copy(core, Kernel::Half(HalfOp::Copy), &copies, sites)
    }

    fn axpy(
        &self,
        k: &FastBlas,
        core: &mut Core,
        a: C64,
        x: &DeviceSpinor,
        y: &mut DeviceSpinor,
    ) -> Result<()> {
        half_blas(core, HalfOp::Axpy, &k.half.axpy, a, x, y)
    }

    fn xpay(
        &self,
        k: &FastBlas,
        core: &mut Core,
        x: &DeviceSpinor,
        a: C64,
        y: &mut DeviceSpinor,
    ) -> Result<()> {
        half_blas(core, HalfOp::Xpay, &k.half.xpay, a, x, y)
    }

    fn dot(
        &self,
        k: &FastBlas,
        core: &mut Core,
        x: &DeviceSpinor,
        y: &DeviceSpinor,
    ) -> Result<C64> {
        half_reduce(k, core, x, y)
    }

    fn norm2(&self, k: &FastBlas, core: &mut Core, x: &DeviceSpinor) -> Result<f64> {
        Ok(half_reduce(k, core, x, x)?.re)
    }
}

/// y = y + a x (axpy) or y = x + a y (xpay) on half fields, site by site.
fn half_blas(
    core: &mut Core,
    op: HalfOp,
    f: &CudaFunction,
    a: C64,
    x: &DeviceSpinor,
    y: &mut DeviceSpinor,
) -> Result<()> {
    let stream = core.gpu.stream.clone();
    let (xq, xn) = half_addr(x, &stream, 0)?;
    let (yq, yn) = half_addr(y, &stream, 0)?;
    let sites = x.len() / 12;
    let (ns, nvh) = (sites as i64, vh(core) as i64);
    launch!(
        core.gpu,
        Kernel::Half(op),
        sites,
        f,
        cfg_1d(sites, BLAS_BLOCK, 0),
        [&xq, &xn, &yq, &yn, &a.re, &a.im, &ns, &nvh]
    );
    Ok(())
}

/// (x|y) of half fields by sites, summed in double; x and y the same field: (x|x) in re,
/// by the norm kernel.
fn half_reduce(k: &FastBlas, core: &mut Core, x: &DeviceSpinor, y: &DeviceSpinor) -> Result<C64> {
    let stream = core.gpu.stream.clone();
    let (xq, xn) = half_addr(x, &stream, 0)?;
    let (yq, yn) = half_addr(y, &stream, 0)?;
    let sites = x.len() / 12;
    let (ns, nvh) = (sites as i64, vh(core) as i64);
    let norm = std::ptr::eq(x, y);
    let r = core.reduce_args();
    if norm {
        launch!(
            core.gpu,
            Kernel::Half(HalfOp::Norm2Partial),
            sites,
            &k.half.norm2,
            reduce_cfg(sites),
            [&xq, &xn, &ns, &nvh, &r.level0, &r.upper, &r.tickets, &r.result]
        );
    } else {
        launch!(
            core.gpu,
            Kernel::Half(HalfOp::DotPartial),
            sites,
            &k.half.dot,
            reduce_cfg(sites),
            [&xq, &xn, &yq, &yn, &ns, &nvh, &r.level0, &r.upper, &r.tickets, &r.result]
        );
    }
    let (re, im) = core.read_reduction(!norm)?;
    Ok(C64::new(re, if norm { 0.0 } else { im }))
}
