//! 3.0's operators on several right-hand sides at once (`StencilImpl::apply_batch`): the
//! full D and g5 D as one batch launch, the Schur operator and g5 times it as two (the hop
//! into one odd temporary per right-hand side, then the xpay), with the site term's
//! epilogues where one is installed, and the odd temporaries, made on first use and kept.

use super::access::{addr, half_addr, made, vh};
use super::FastStencil;
use crate::backend::cuda::core::device::err;
use crate::backend::cuda::core::field::DeviceSpinor;
use crate::backend::cuda::core::launch::dptr;
use crate::backend::cuda::core::stencil::batch::{launch_v3_batch, V3Rhs};
use crate::backend::cuda::dirac::blas::Core;
use crate::backend::ledger::{Booking, Purpose};
use crate::error::{Error, Result};
use crate::linalg::{Operator, Precision};
use cudarc::driver::CudaSlice;

/// One right-hand side's odd temporary of the batched Schur operator: room for a double
/// half field (lower precisions use its start), and the norms of a half field (made when
/// a half batch first needs them).
pub(super) struct BatchTemp {
    data: (CudaSlice<f64>, Booking),
    norm: Option<(CudaSlice<f32>, Booking)>,
}

impl FastStencil {
    /// out_k = op inp_k for every k, in one batch launch (D, g5 D) or two (the Schur
    /// operator and g5 times it: tmp_o,k = [A_oo^-1] H_oe x_e,k, then out_k = [g5]
    /// ([A_ee] x_e,k - kappa^2 H_eo tmp_o,k)): each right-hand side the bits of `apply`
    /// on it alone. The caller (`CudaBackend::apply_batch`) has checked the count (1 to
    /// `BATCH_MAX`), that every field has the layout of `inps[0]` and that it is the
    /// operator's subset.
    pub(super) fn launch_batch(
        &mut self,
        core: &mut Core,
        op: Operator,
        outs: &mut [&mut DeviceSpinor],
        inps: &[&DeviceSpinor],
    ) -> Result<()> {
        if core.halo.is_some() {
            return Err(Error::invalid(
                "backend",
                "the batched operator runs on one GPU's whole lattice, not on a decomposed one",
            ));
        }
        let n = inps.len();
        let precision = inps[0].layout.precision;
        let (f, links) = self.stencil_for(core, precision)?;
        let stream = core.gpu.stream.clone();
        let mut rhs = V3Rhs::default();
        for (k, (o, x)) in outs.iter().zip(inps).enumerate() {
            rhs.inp[k] = addr(x, &stream).0;
            rhs.out[k] = addr(o, &stream).0;
            rhs.inp_norm[k] = half_addr(x, &stream, 0).map_or(0, |a| a.1);
            rhs.out_norm[k] = half_addr(o, &stream, 0).map_or(0, |a| a.1);
        }
        let mut l = self.v3_launch(core, links, precision);
        let last = if op.is_schur() {
            let tmps = self.ensure_batch_tmp(core, n, precision)?;
            // tmp_o,k = [A_oo^-1] H_oe x_e,k (y null, c = 1).
            let mut hop = rhs;
            for (k, &(t, t_norm)) in tmps.iter().enumerate() {
                hop.out[k] = t;
                hop.out_norm[k] = t_norm;
            }
            l.parity = Some(1);
            l.c = 1.0;
            l.site = self.site_args(core, precision, true, false)?;
            launch_v3_batch(&mut core.gpu, &f, &l, &hop, n)?;
            // out_k = [g5] ([A_ee] x_e,k - kappa^2 H_eo tmp_o,k).
            let mut xpay = rhs;
            xpay.inp = hop.out;
            xpay.inp_norm = hop.out_norm;
            xpay.y = rhs.inp;
            xpay.y_norm = rhs.inp_norm;
            l.parity = Some(0);
            l.c = -core.kappa * core.kappa;
            xpay
        } else {
            // out_k = [g5] ([A] x_k - kappa H x_k).
            let mut full = rhs;
            full.y = rhs.inp;
            full.y_norm = rhs.inp_norm;
            l.c = -core.kappa;
            full
        };
        l.site = self.site_args(core, precision, false, false)?;
        l.g5 = op.gamma5();
        launch_v3_batch(&mut core.gpu, &f, &l, &last, n)?;
        core.applications += n as u64;
        Ok(())
    }

    /// The first `n` odd temporaries of the batched Schur operator (made on first use and
    /// kept), with norms for a half batch: their device addresses (norms 0 otherwise).
    fn ensure_batch_tmp(
        &mut self,
        core: &mut Core,
        n: usize,
        precision: Precision,
    ) -> Result<Vec<(u64, u64)>> {
        let stream = core.gpu.stream.clone();
        let half = vh(core);
        while self.batch_tmp.len() < n {
            let t = stream
                .alloc_zeros::<f64>(half * 24)
                .map_err(err("allocating the batched Schur operator's temporaries"))?;
            let b = core
                .ledger
                .book(Purpose::SchurTemporary, (half * 24 * 8) as u64);
            self.batch_tmp.push(BatchTemp {
                data: (t, b),
                norm: None,
            });
        }
        let mut out = Vec::with_capacity(n);
        for tmp in &mut self.batch_tmp[..n] {
            let mut norm = 0;
            if precision == Precision::Half {
                if tmp.norm.is_none() {
                    let t = stream
                        .alloc_zeros::<f32>(half)
                        .map_err(err("allocating the batched Schur operator's norms"))?;
                    let b = core.ledger.book(Purpose::SchurTemporary, (half * 4) as u64);
                    tmp.norm = Some((t, b));
                }
                norm = dptr(&made(&tmp.norm, "a batch temporary's norms")?.0, &stream);
            }
            out.push((dptr(&tmp.data.0, &stream), norm));
        }
        Ok(out)
    }
}
