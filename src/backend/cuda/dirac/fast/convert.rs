//! 3.0's operations between two precisions, each dispatched once on the pair: conversions
//! (copies within a precision through `FieldOps::copy`, widening and narrowing, half
//! fields to and from double) and the reliable update's fused steps (`add_converted`,
//! `residual_converted`).

use super::access::{addr, vh};
use super::prec::{ops_for, FastBlas};
use crate::backend::cuda::core::field::{DeviceData, DeviceSpinor};
use crate::backend::cuda::core::kernels::{Kernel, BLAS_BLOCK};
use crate::backend::cuda::core::launch::cfg_1d;
use crate::backend::cuda::core::timing::launch;
use crate::backend::cuda::dirac::blas::{reduce_cfg, Core};
use crate::error::{Error, Result};
use crate::linalg::{layout_mismatch as mismatch, Precision};

impl FastBlas {
    /// dst = src across precisions, gathering a parity from a full field or scattering a
    /// half field into a full one (with the parity-major layout these are offset copies).
    /// Within a precision a device copy (half: the integers and the norms); double to half
    /// and back the site-wise kernels (which round as the host does); half and single do
    /// not convert into each other (no solve needs it).
    pub(super) fn convert(
        &self,
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
        match (src.layout.precision, dst.layout.precision) {
            (s, d) if s == d => ops_for(s).copy(core, dst, src, src_off, dst_off, n),
            (Precision::Double, Precision::Single) | (Precision::Single, Precision::Double) => {
                let (s, s_size) = addr(src, &stream);
                let (d, d_size) = addr(dst, &stream);
                let (s, d) = (s + src_off as u64 * s_size, d + dst_off as u64 * d_size);
                let nn = n as i64;
                let cfg = cfg_1d(n, BLAS_BLOCK, 0);
                if dst.layout.precision == Precision::Single {
                    launch!(
                        core.gpu,
                        Kernel::Convert { to_single: true },
                        n,
                        &self.to_single,
                        cfg,
                        [&s, &d, &nn]
                    );
                } else {
                    launch!(
                        core.gpu,
                        Kernel::Convert { to_single: false },
                        n,
                        &self.to_double,
                        cfg,
                        [&s, &d, &nn]
                    );
                }
                Ok(())
            }
            (Precision::Double, Precision::Half) => {
                let s = addr(src, &stream).0 + 16 * src_off as u64;
                self.double_to_half(core, s, dst, dst_off, n / 12)
            }
            (Precision::Half, Precision::Double) => {
                let d = addr(dst, &stream).0 + 16 * dst_off as u64;
                self.half_to_double(core, src, src_off, d, n / 12)
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

    /// y += x in one pass for a single x and a double y of one subset (false: no kernel
    /// for these layouts).
    pub(super) fn add_converted(
        &self,
        core: &mut Core,
        x: &DeviceSpinor,
        y: &mut DeviceSpinor,
    ) -> Result<bool> {
        let n = x.len();
        if x.layout.subset != y.layout.subset || y.len() != n {
            return Ok(false);
        }
        let ni = n as i32;
        let (DeviceData::Single(xs), DeviceData::Double(yd)) = (&x.data, &mut y.data) else {
            return Ok(false);
        };
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

    /// r = b - r, low = r and (r|r) in one launch for double b and r and a single low of
    /// one subset (None: no kernel for these layouts).
    pub(super) fn residual_converted(
        &self,
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
        let (DeviceData::Double(bd), DeviceData::Double(rd), DeviceData::Single(ls)) =
            (&b.data, &mut r.data, &mut low.data)
        else {
            return Ok(None);
        };
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
}
