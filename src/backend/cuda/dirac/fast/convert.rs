//! 3.0's conversions between precisions (copies, widening and narrowing, and half fields
//! to and from double) and the site-wise BLAS-1 and reductions of half fields.

use super::access::{addr, half_addr, vh};
use super::FastStencil;
use crate::backend::cuda::core::device::err;
use crate::backend::cuda::core::field::DeviceSpinor;
use crate::backend::cuda::core::kernels::{HalfOp, Kernel, BLAS_BLOCK};
use crate::backend::cuda::core::launch::cfg_1d;
use crate::backend::cuda::core::timing::launch;
use crate::backend::cuda::dirac::blas::{reduce_cfg, Core};
use crate::error::{Error, Result};
use crate::field::C64;
use crate::linalg::Precision;

impl FastStencil {
    /// Convert n complex numbers between addresses (precisions given by the sizes).
    pub(super) fn convert_raw(
        &mut self,
        core: &mut Core,
        src: u64,
        src_size: u64,
        dst: u64,
        dst_size: u64,
        n: usize,
    ) -> Result<()> {
        let nn = n as i64;
        let cfg = cfg_1d(n, BLAS_BLOCK, 0);
        if src_size == dst_size {
            let k = if src_size == 16 {
                Kernel::Copy
            } else {
                Kernel::CopySingle
            };
            let p = core.gpu.begin(&k)?;
            // SAFETY: both ranges lie inside live allocations of this context (the callers
            // check the layouts), on the backend's one stream.
            unsafe {
                cudarc::driver::result::memcpy_dtod_async(
                    dst,
                    src,
                    n * src_size as usize,
                    core.gpu.stream.cu_stream(),
                )
            }
            .map_err(err("copying a field"))?;
            return core.gpu.end(p, k, n);
        }
        if dst_size == 8 {
            launch!(
                core.gpu,
                Kernel::Convert { to_single: true },
                n,
                &self.to_single,
                cfg,
                [&src, &dst, &nn]
            );
        } else {
            launch!(
                core.gpu,
                Kernel::Convert { to_single: false },
                n,
                &self.to_double,
                cfg,
                [&src, &dst, &nn]
            );
        }
        Ok(())
    }

    /// `convert` where either side is half: n complex numbers (whole sites) from complex
    /// index src_off of src to dst_off of dst; half to half is a copy of the integers and
    /// the norms, double to half and back the site-wise kernels (which round as the host
    /// does); half and single do not convert into each other (no solve needs it).
    pub(super) fn convert_half(
        &mut self,
        core: &mut Core,
        dst: &mut DeviceSpinor,
        src: &DeviceSpinor,
        src_off: usize,
        dst_off: usize,
        n: usize,
    ) -> Result<()> {
        let stream = core.gpu.stream.clone();
        let sites = n / 12;
        let (ns, nvh) = (sites as i64, vh(core) as i64);
        let cfg = cfg_1d(sites, BLAS_BLOCK, 0);
        match (src.layout.precision, dst.layout.precision) {
            (Precision::Half, Precision::Half) => {
                let (sq, sn) = half_addr(src, &stream, src_off)?;
                let (dq, dn) = half_addr(dst, &stream, dst_off)?;
                let p = core.gpu.begin(&Kernel::Half(HalfOp::Copy))?;
                for (d, s, bytes) in [(dq, sq, 4 * n), (dn, sn, 4 * sites)] {
                    // SAFETY: both ranges lie inside live allocations of this context
                    // (the caller checked the layouts), on the backend's one stream.
                    unsafe {
                        cudarc::driver::result::memcpy_dtod_async(d, s, bytes, stream.cu_stream())
                    }
                    .map_err(err("copying a field"))?;
                }
                core.gpu.end(p, Kernel::Half(HalfOp::Copy), sites)
            }
            (Precision::Double, Precision::Half) => {
                let s = addr(src, &stream).0 + 16 * src_off as u64;
                let (dq, dn) = half_addr(dst, &stream, dst_off)?;
                launch!(
                    core.gpu,
                    Kernel::Half(HalfOp::FromDouble),
                    sites,
                    &self.half_k.from_double,
                    cfg,
                    [&s, &dq, &dn, &ns, &nvh]
                );
                Ok(())
            }
            (Precision::Half, Precision::Double) => {
                let (sq, sn) = half_addr(src, &stream, src_off)?;
                let d = addr(dst, &stream).0 + 16 * dst_off as u64;
                launch!(
                    core.gpu,
                    Kernel::Half(HalfOp::ToDouble),
                    sites,
                    &self.half_k.to_double,
                    cfg,
                    [&sq, &sn, &d, &ns, &nvh]
                );
                Ok(())
            }
            _ => Err(Error::invalid(
                "backend",
                format!(
                    "no conversion between {:?} and {:?} fields (half converts to and from double)",
                    src.layout, dst.layout
                ),
            )),
        }
    }

    /// y = y + a x (axpy) or y = x + a y (xpay) on half fields, site by site.
    pub(super) fn half_blas(
        &mut self,
        core: &mut Core,
        op: HalfOp,
        a: C64,
        x: &DeviceSpinor,
        y: &mut DeviceSpinor,
    ) -> Result<()> {
        let stream = core.gpu.stream.clone();
        let (xq, xn) = half_addr(x, &stream, 0)?;
        let (yq, yn) = half_addr(y, &stream, 0)?;
        let sites = x.len() / 12;
        let (ns, nvh) = (sites as i64, vh(core) as i64);
        let f = if op == HalfOp::Axpy {
            &self.half_k.axpy
        } else {
            &self.half_k.xpay
        };
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

    /// (x|y) of half fields (x = y: (x|x) in re), by sites, summed in double.
    pub(super) fn half_reduce(
        &mut self,
        core: &mut Core,
        x: &DeviceSpinor,
        y: &DeviceSpinor,
    ) -> Result<C64> {
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
                &self.half_k.norm2,
                reduce_cfg(sites),
                [&xq, &xn, &ns, &nvh, &r.level0, &r.upper, &r.tickets, &r.result]
            );
        } else {
            launch!(
                core.gpu,
                Kernel::Half(HalfOp::DotPartial),
                sites,
                &self.half_k.dot,
                reduce_cfg(sites),
                [&xq, &xn, &yq, &yn, &ns, &nvh, &r.level0, &r.upper, &r.tickets, &r.result]
            );
        }
        let (re, im) = core.read_reduction(!norm)?;
        Ok(C64::new(re, if norm { 0.0 } else { im }))
    }
}
