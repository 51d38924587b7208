//! A prolongator on the device: for each aggregate, its member sites' addresses in the
//! fine field and the orthonormal vectors as [aggregate][member][row][vector] (vectors
//! fastest: the restriction's threads of one aggregate read consecutive numbers), applied
//! by kernels/mg_coarse.cu's `mg_restrict` and `mg_prolong` to the fine 3.0 field
//! (element k of a site at stride Vh), a seed field or a coarse field (stride 1).

use super::kernels::{cfg, launch_args, Buffer, MgKernels, Pair};
use crate::backend::ledger::Ledger;
use crate::dirac::coarse::{Aggregation, Prolongator};
use crate::error::Result;
use crate::field::C64;
use crate::linalg::Precision;
use cudarc::driver::{CudaSlice, CudaStream};
use rayon::prelude::*;
use std::sync::Arc;

/// A prolongator in one precision for one fine field order.
pub struct DeviceTransfer {
    v: Buffer,
    /// The fine address of row 0 of each member site, [aggregate][member].
    base: CudaSlice<i64>,
    /// The distance between rows k and k + 1 of a site in the fine field.
    stride: i64,
    members: i32,
    fine_dof: i32,
    nvec: i32,
    aggregates: i32,
}

impl DeviceTransfer {
    /// `p` uploaded in `precision` (half: single, the fine field converted around it),
    /// fine site x's row 0 at `addr(x)`, rows `stride` apart.
    pub(crate) fn new(
        stream: &Arc<CudaStream>,
        ledger: &Ledger,
        p: &Prolongator,
        precision: Precision,
        addr: impl Fn(usize) -> i64,
        stride: i64,
    ) -> Result<DeviceTransfer> {
        let precision = if precision == Precision::Half {
            Precision::Single
        } else {
            precision
        };
        let v = Buffer::upload(stream, ledger, precision, &device_order(p))?;
        let base = upload_base(stream, &p.aggregation, addr)?;
        Ok(DeviceTransfer::from_parts(
            v,
            base,
            stride,
            &p.aggregation,
            p.fine_dof,
            p.nvec,
        ))
    }

    /// A prolongator already on the device: `v` in the device order (`device_order`) of
    /// `nvec` vectors of `fine_dof` numbers on `agg`, the fine addresses `base`
    /// (`upload_base`) with rows `stride` apart.
    pub(crate) fn from_parts(
        v: Buffer,
        base: CudaSlice<i64>,
        stride: i64,
        agg: &Aggregation,
        fine_dof: usize,
        nvec: usize,
    ) -> DeviceTransfer {
        DeviceTransfer {
            v,
            base,
            stride,
            members: agg.block_volume() as i32,
            fine_dof: fine_dof as i32,
            nvec: nvec as i32,
            aggregates: agg.coarse.volume() as i32,
        }
    }

    /// The precision of the fields it applies to.
    pub fn precision(&self) -> Precision {
        self.v.precision()
    }

    /// out = P^dag fine (`fine`: the device address of the fine field's numbers).
    pub(crate) fn restrict(
        &self,
        s: &Arc<CudaStream>,
        k: &MgKernels,
        fine: u64,
        out: &mut Buffer,
    ) -> Result<()> {
        let n = self.aggregates as usize * 2 * self.nvec as usize;
        self.launch(s, &k.restrict, n, fine, out.ptr(s))
    }

    /// fine = P inp.
    pub(crate) fn prolong(
        &self,
        s: &Arc<CudaStream>,
        k: &MgKernels,
        inp: &Buffer,
        fine: u64,
    ) -> Result<()> {
        let n = self.aggregates as usize * self.members as usize * self.fine_dof as usize;
        self.launch(s, &k.prolong, n, inp.ptr(s), fine)
    }

    /// `mg_restrict` or `mg_prolong` (the same parameters: input, output, then the
    /// prolongator's) over `n` threads.
    fn launch(&self, s: &Arc<CudaStream>, f: &Pair, n: usize, inp: u64, out: u64) -> Result<()> {
        let (v, base) = (
            self.v.ptr(s),
            crate::backend::cuda::core::launch::dptr(&self.base, s),
        );
        launch_args!(
            s,
            f.of(self.precision()),
            cfg(n),
            [
                &inp,
                &out,
                &v,
                &base,
                &self.stride,
                &self.members,
                &self.fine_dof,
                &self.nvec,
                &self.aggregates
            ]
        )
    }
}

/// The fine address `addr(x)` of row 0 of each aggregate's member sites, as
/// [aggregate][member], on the device.
pub(crate) fn upload_base(
    stream: &Arc<CudaStream>,
    agg: &Aggregation,
    addr: impl Fn(usize) -> i64,
) -> Result<CudaSlice<i64>> {
    let base: Vec<i64> = (0..agg.coarse.volume())
        .flat_map(|a| agg.members(a).iter().map(|&x| addr(x)))
        .collect();
    stream.clone_htod(&base).map_err(|e| {
        crate::backend::cuda::core::device::driver_err("uploading a transfer table", e)
    })
}

/// The complex numbers of `p`'s vectors in the device order.
pub fn device_order(p: &Prolongator) -> Vec<C64> {
    let agg = &p.aggregation;
    let per = agg.block_volume() * p.fine_dof * p.nvec;
    let mut v = vec![C64::new(0.0, 0.0); agg.coarse.volume() * per];
    v.par_chunks_mut(per).enumerate().for_each(|(a, out)| {
        let mut at = out.iter_mut();
        for &x in agg.members(a) {
            for k in 0..p.fine_dof {
                for w in 0..p.nvec {
                    *at.next().expect("sized above") = p.vector(x, w)[k];
                }
            }
        }
    });
    v
}
