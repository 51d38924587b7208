//! The first prolongator made on the device from near-null vectors that live there
//! (kernels/mg_galerkin.cu's `mg_gather_vector`, `mg_orthonormalise`, `mg_narrow`): the
//! host's `Prolongator::new` without the vectors' trip to the host and back. It stays on
//! the device in double for the Galerkin product (`galerkin::galerkin_with`) and becomes
//! the transfer (`DeviceTransfer`) in the cycle's precision, narrowed there.

use super::galerkin::galerkin_with;
use super::kernels::{cfg, launch_args, Buffer};
use super::transfer::{upload_base, DeviceTransfer};
use crate::backend::cuda::core::compile::{Program, MG_GALERKIN};
use crate::backend::cuda::core::device::{driver_err, function, load_module};
use crate::backend::ledger::Ledger;
use crate::clock::timed;
use crate::dirac::coarse::{Aggregation, CoarseOp, WilsonStencil};
use crate::error::{Error, Result};
use crate::linalg::Precision;
use cudarc::driver::{CudaSlice, CudaStream, LaunchConfig};
use std::sync::Arc;

/// Threads of a block of `mg_orthonormalise` (a power of two: its sums halve it).
const ORTHO_BLOCK: usize = 256;

/// The near-null vectors `fields` (device addresses of full double fields; fine site x's
/// row 0 at `addr(x)`, rows `stride` apart, 12 numbers a site) as the prolongator on
/// `agg`, orthonormalised per aggregate and chirality as the host's `Prolongator::new`
/// does it. Returns it in double in the device order (`transfer::device_order`) and the
/// fine addresses of the aggregates' members (`transfer::upload_base`).
pub(crate) fn prolongator_on_device(
    stream: &Arc<CudaStream>,
    ledger: &Ledger,
    agg: &Aggregation,
    fields: &[u64],
    addr: impl Fn(usize) -> i64,
    stride: i64,
) -> Result<(Buffer, CudaSlice<i64>)> {
    const FINE_DOF: usize = 12;
    let nvec = fields.len();
    let sites = agg.fine.volume();
    if nvec == 0 {
        return Err(Error::internal("a prolongator of no vectors"));
    }
    let base = upload_base(stream, agg, addr)?;
    let v = Buffer::zeros(stream, ledger, Precision::Double, sites * FINE_DOF * nvec)?;
    let (module, _) = load_module(stream.context(), &Program::plain(&MG_GALERKIN))?;
    let gather = function(&module, "mg_gather_vector")?;
    let (s, vp) = (stream, v.ptr(stream));
    let basep = crate::backend::cuda::core::launch::dptr(&base, s);
    let (fd, nv, n_am) = (FINE_DOF as i32, nvec as i32, sites as i64);
    for (w, &f) in fields.iter().enumerate() {
        let w = w as i32;
        launch_args!(
            s,
            &gather,
            cfg(sites * FINE_DOF),
            [&f, &vp, &basep, &stride, &fd, &nv, &w, &n_am]
        )?;
    }
    let blocks = 2 * agg.coarse.volume();
    let failed: CudaSlice<i32> = s
        .alloc_zeros(blocks)
        .map_err(|e| driver_err("allocating the orthonormalisation's flags", e))?;
    let ortho = function(&module, "mg_orthonormalise")?;
    let config = LaunchConfig {
        grid_dim: (
            u32::try_from(blocks)
                .map_err(|_| Error::internal("more aggregates than a grid holds"))?,
            1,
            1,
        ),
        block_dim: (ORTHO_BLOCK as u32, 1, 1),
        shared_mem_bytes: (16 * ORTHO_BLOCK) as u32,
    };
    let (members, fp) = (
        agg.block_volume() as i32,
        crate::backend::cuda::core::launch::dptr(&failed, s),
    );
    launch_args!(s, &ortho, config, [&vp, &members, &fd, &nv, &fp])?;
    let flags = s
        .clone_dtoh(&failed)
        .map_err(|e| driver_err("the prolongator's orthonormalisation", e))?;
    if let Some((b, &f)) = flags.iter().enumerate().find(|(_, &f)| f != 0) {
        return Err(agg.dependent_vector(b / 2, b % 2, f as usize - 1));
    }
    // The flags' copy waited for the launches: `v` is complete.
    Ok((v, base))
}

/// `v` (double) as the transfer of fields of `precision` (half: single, as
/// `DeviceTransfer::new` makes it): itself in double, narrowed on the device otherwise.
fn transfer_buffer(
    stream: &Arc<CudaStream>,
    ledger: &Ledger,
    v: Buffer,
    precision: Precision,
) -> Result<Buffer> {
    if precision == Precision::Double {
        return Ok(v);
    }
    let out = Buffer::zeros(stream, ledger, Precision::Single, v.len)?;
    let (module, _) = load_module(stream.context(), &Program::plain(&MG_GALERKIN))?;
    let narrow = function(&module, "mg_narrow")?;
    let (inp, o, n) = (v.ptr(stream), out.ptr(stream), v.len as i64);
    launch_args!(stream, &narrow, cfg(v.len), [&inp, &o, &n])?;
    Ok(out)
}

/// `Coarsen::coarsen` on the device for the fine Wilson operator `w`: the prolongator
/// from the near-null vectors `fields` (as `prolongator_on_device` takes them), the
/// Galerkin product with it, and the transfer for fields of `precision`, the vectors
/// never leaving the device; each piece a step of the run's report.
#[allow(clippy::too_many_arguments)]
pub(crate) fn coarsen_on_device(
    stream: &Arc<CudaStream>,
    ledger: &Ledger,
    w: &WilsonStencil<'_>,
    agg: Aggregation,
    fields: &[u64],
    addr: impl Fn(usize) -> i64,
    stride: i64,
    precision: Precision,
) -> Result<(CoarseOp, DeviceTransfer)> {
    let (v, base) = timed("multigrid set-up: prolongator (device)", || {
        prolongator_on_device(stream, ledger, &agg, fields, addr, stride)
    })?;
    let nvec = fields.len();
    let op = timed("multigrid set-up: Galerkin product", || {
        galerkin_with(stream, ledger, w, &agg, nvec, &v)
    })?;
    let t = timed("multigrid set-up: prolongator to the level's space", || {
        let buf = transfer_buffer(stream, ledger, v, precision)?;
        stream
            .synchronize()
            .map_err(|e| driver_err("narrowing the prolongator", e))?;
        Ok(DeviceTransfer::from_parts(
            buf, base, stride, &agg, 12, nvec,
        ))
    })?;
    Ok((op, t))
}
