//! `Coarsen` for `CudaBackend`: multigrid's first coarse level on the device
//! (`cuda::mg::CudaCoarseSpace`), and the restriction and prolongation of the fine fields
//! in their own order (3.0: parity-major, element k of a site Vh apart; the seed
//! versions: canonical, 12 numbers a site). A half-precision fine field goes through a
//! single one.

use super::CudaBackend;
use crate::backend::cuda::core::fast_layout::{spinor_index, SpinorOrder};
use crate::backend::cuda::core::field::{DeviceData, DeviceSpinor};
use crate::backend::cuda::mg::galerkin::galerkin_on_device;
use crate::backend::cuda::mg::prolongator::coarsen_on_device;
use crate::backend::cuda::mg::{CoarseDeviceField, CudaCoarseSpace, DeviceTransfer};
use crate::dirac::coarse::{
    galerkin, host_coarsen, Aggregation, CoarseOp, Coarsen, Prolongator, Stencil,
};
use crate::error::{Error, Result};
use crate::linalg::{Layout, Precision, Space, Subset};
use std::sync::Arc;

impl CudaBackend {
    /// The device address of a full field's numbers in `precision` (double or single).
    fn fine_ptr(&self, f: &DeviceSpinor, precision: Precision) -> Result<u64> {
        let s = &self.core.gpu.stream;
        if f.layout.subset != Subset::Full {
            return Err(Error::internal(
                "a multigrid transfer of a half-lattice field",
            ));
        }
        match (&f.data, precision) {
            (DeviceData::Double(d), Precision::Double) => {
                Ok(crate::backend::cuda::core::launch::dptr(d, s))
            }
            (DeviceData::Single(d), Precision::Single) => {
                Ok(crate::backend::cuda::core::launch::dptr(d, s))
            }
            _ => Err(Error::internal(format!(
                "a {:?} field through a {precision:?} prolongator",
                f.layout.precision
            ))),
        }
    }
}

impl Coarsen for CudaBackend {
    type Coarse = CudaCoarseSpace;
    type Transfer = DeviceTransfer;

    fn coarse_space(&mut self, op: Arc<CoarseOp>, precision: Precision) -> Result<CudaCoarseSpace> {
        CudaCoarseSpace::new(&self.core.gpu.stream, &self.core.ledger, op, precision)
    }

    /// The fine Wilson operator's product on the device (the host's for any other).
    fn galerkin(&mut self, fine: &dyn Stencil, p: &Prolongator) -> Result<CoarseOp> {
        match fine.as_wilson() {
            Some(w) => galerkin_on_device(&self.core.gpu.stream, &self.core.ledger, w, p),
            None => galerkin(fine, p),
        }
    }

    /// On the device for the fine Wilson operator and fields of 3.0's order (the vectors
    /// never leave it: `cuda::mg::prolongator`); through the host otherwise.
    fn coarsen(
        &mut self,
        fine: &dyn Stencil,
        agg: Aggregation,
        fields: &[&DeviceSpinor],
        precision: Precision,
    ) -> Result<(CoarseOp, DeviceTransfer)> {
        let full_double = fields.iter().all(|f| f.layout == Layout::FULL);
        let order = self.stencil.spinor_order();
        let w = match fine.as_wilson() {
            Some(w) if full_double && order == SpinorOrder::ParityMajor => w,
            _ => return host_coarsen(self, fine, agg, fields, precision),
        };
        let ptrs = fields
            .iter()
            .map(|f| self.fine_ptr(f, Precision::Double))
            .collect::<Result<Vec<_>>>()?;
        let l = self.core.lattice.clone();
        let vh = l.volume() / 2;
        coarsen_on_device(
            &self.core.gpu.stream,
            &self.core.ledger,
            w,
            agg,
            &ptrs,
            |x| spinor_index(vh, l.parity(x), x / 2, 0) as i64,
            vh as i64,
            precision,
        )
    }

    fn transfer(&mut self, p: &Prolongator, precision: Precision) -> Result<DeviceTransfer> {
        let l = self.core.lattice.clone();
        let vh = l.volume() / 2;
        let (s, ledger) = (&self.core.gpu.stream, &self.core.ledger);
        match self.stencil.spinor_order() {
            SpinorOrder::ParityMajor => DeviceTransfer::new(
                s,
                ledger,
                p,
                precision,
                |x| spinor_index(vh, l.parity(x), x / 2, 0) as i64,
                vh as i64,
            ),
            SpinorOrder::Canonical => {
                DeviceTransfer::new(s, ledger, p, precision, |x| (x * 12) as i64, 1)
            }
        }
    }

    fn restrict(
        &mut self,
        t: &DeviceTransfer,
        fine: &DeviceSpinor,
        coarse: &mut CudaCoarseSpace,
        out: &mut CoarseDeviceField,
    ) -> Result<()> {
        let p = t.precision();
        let widened = if fine.layout.precision == Precision::Half {
            let mut w = self.alloc_layout(Layout::new(Subset::Full, p))?;
            self.convert(&mut w, fine)?;
            Some(w)
        } else {
            None
        };
        let ptr = self.fine_ptr(widened.as_ref().unwrap_or(fine), p)?;
        t.restrict(&self.core.gpu.stream, coarse.kernels(), ptr, &mut out.buf)
    }

    fn prolong(
        &mut self,
        t: &DeviceTransfer,
        coarse: &mut CudaCoarseSpace,
        inp: &CoarseDeviceField,
        fine: &mut DeviceSpinor,
    ) -> Result<()> {
        let p = t.precision();
        if fine.layout.precision == Precision::Half {
            let w = self.alloc_layout(Layout::new(Subset::Full, p))?;
            let ptr = self.fine_ptr(&w, p)?;
            t.prolong(&self.core.gpu.stream, coarse.kernels(), &inp.buf, ptr)?;
            return self.convert(fine, &w);
        }
        let ptr = self.fine_ptr(fine, p)?;
        t.prolong(&self.core.gpu.stream, coarse.kernels(), &inp.buf, ptr)
    }
}
