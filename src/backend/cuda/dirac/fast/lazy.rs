//! 3.0's state built on first use: the single-precision links and stencil, the half
//! stencil, the Schur temporary and its norms, and the launch description of a precision.

use super::access::{made, vh};
use super::FastStencil;
use crate::backend::cuda::core::device::{err, load_module};
use crate::backend::cuda::core::kernels::{Kernel, BLAS_BLOCK};
use crate::backend::cuda::core::launch::{cfg_1d, dptr};
use crate::backend::cuda::core::stencil::programs;
use crate::backend::cuda::core::stencil::v3::{SiteArgs, V3Kernels, V3Launch};
use crate::backend::cuda::core::timing::launch;
use crate::backend::cuda::core::version::{Reconstruct, StencilVersion};
use crate::backend::cuda::dirac::blas::Core;
use crate::backend::ledger::Purpose;
use crate::error::Result;
use crate::linalg::Precision;
use cudarc::driver::{CudaFunction, CudaSlice};

impl FastStencil {
    /// The single-precision stencil and links, built on first use from the double links.
    pub(super) fn ensure_single(&mut self, core: &mut Core) -> Result<()> {
        self.ensure_site_single(core)?;
        if self.single.is_some() {
            return Ok(());
        }
        let f = if self.site_term() {
            let program = programs::v3_clover_program(self.reconstruct, true, false);
            V3Kernels::load_clover(&load_module(&core.gpu.ctx, &program)?.0)?
        } else {
            let program = programs::program(StencilVersion::V3_0, self.reconstruct, true);
            V3Kernels::load(&load_module(&core.gpu.ctx, &program)?.0)?
        };
        let links = float_copy(
            core,
            &self.blas.to_single,
            &self.links,
            "to_single (links)",
            "allocating the single-precision links",
        )?;
        let booking = core.ledger.book(
            Purpose::Links {
                precision: Precision::Single,
                reals: self.reconstruct.reals() as u8,
                per_site: 4,
            },
            (links.len() * 4) as u64,
        );
        self.single = Some((f, links, booking));
        Ok(())
    }

    /// The half-precision stencil, built on first use, with the links it reads: 16-bit
    /// ones made from the double links (18 or 12 reals a link), or the single links (8).
    pub(super) fn ensure_half(&mut self, core: &mut Core) -> Result<()> {
        let link16 = self.reconstruct != Reconstruct::R8;
        if link16 {
            self.ensure_site_single(core)?;
        } else {
            self.ensure_single(core)?;
        }
        if self.half.is_some() {
            return Ok(());
        }
        let f = if self.site_term() {
            let program = programs::v3_clover_program(self.reconstruct, true, true);
            V3Kernels::load_clover(&load_module(&core.gpu.ctx, &program)?.0)?
        } else {
            let program = programs::v3_program(self.reconstruct, true, true);
            V3Kernels::load(&load_module(&core.gpu.ctx, &program)?.0)?
        };
        let links = if link16 {
            let n = self.links.len() / 2;
            let mut q = core
                .gpu
                .stream
                .alloc_zeros::<i16>(2 * n)
                .map_err(err("allocating the half-precision (16-bit) links"))?;
            let nn = n as i64;
            launch!(
                core.gpu,
                Kernel::Setup("to_link16 (links)"),
                n,
                &self.blas.to_link16,
                cfg_1d(n, BLAS_BLOCK, 0),
                [&self.links, &mut q, &nn]
            );
            let booking = core.ledger.book(
                Purpose::Links {
                    precision: Precision::Half,
                    reals: self.reconstruct.reals() as u8,
                    per_site: 4,
                },
                (q.len() * 2) as u64,
            );
            Some((q, booking))
        } else {
            None
        };
        self.half = Some((f, links));
        Ok(())
    }

    /// The norms of the Schur temporary as a half field (made on first use).
    pub(super) fn ensure_tmp_norm(&mut self, core: &mut Core) -> Result<u64> {
        let stream = core.gpu.stream.clone();
        if self.tmp_norm.is_none() {
            let n = vh(core);
            let t = stream
                .alloc_zeros::<f32>(n)
                .map_err(err("allocating the Schur temporary's norms"))?;
            let b = core.ledger.book(Purpose::SchurTemporary, (n * 4) as u64);
            self.tmp_norm = Some((t, b));
        }
        Ok(dptr(
            &made(&self.tmp_norm, "the Schur temporary's norms")?.0,
            &stream,
        ))
    }

    /// The odd temporary of the Schur operator (made on first use), for either precision.
    pub(super) fn ensure_tmp(&mut self, core: &mut Core) -> Result<u64> {
        let stream = core.gpu.stream.clone();
        if self.tmp.is_none() {
            let n = vh(core) * 24;
            let t = stream
                .alloc_zeros::<f64>(n)
                .map_err(err("allocating the Schur temporary"))?;
            let b = core.ledger.book(Purpose::SchurTemporary, (n * 8) as u64);
            self.tmp = Some((t, b));
        }
        Ok(dptr(&made(&self.tmp, "the Schur temporary")?.0, &stream))
    }

    /// The stencil function and link address of a precision (single built if needed).
    pub(super) fn stencil_for(
        &mut self,
        core: &mut Core,
        precision: Precision,
    ) -> Result<(V3Kernels, u64)> {
        let stream = core.gpu.stream.clone();
        match precision {
            Precision::Double => Ok((self.stencil_d.clone(), dptr(&self.links, &stream))),
            Precision::Single => {
                self.ensure_single(core)?;
                let (f, l, _) = made(&self.single, "the single-precision stencil")?;
                Ok((f.clone(), dptr(l, &stream)))
            }
            Precision::Half => {
                self.ensure_half(core)?;
                let (f, link16) = made(&self.half, "the half-precision stencil")?;
                let links = match link16 {
                    Some((q, _)) => dptr(q, &stream),
                    None => dptr(
                        &made(&self.single, "the single-precision links")?.1,
                        &stream,
                    ),
                };
                Ok((f.clone(), links))
            }
        }
    }

    pub(super) fn v3_launch(&self, core: &Core, links: u64, precision: Precision) -> V3Launch {
        V3Launch {
            parity: None,
            single: precision != Precision::Double,
            half: precision == Precision::Half,
            inp_norm: 0,
            y_norm: 0,
            out_norm: 0,
            reconstruct: self.reconstruct,
            inp: 0,
            y: 0,
            out: 0,
            links,
            c: 0.0,
            g5: false,
            dims: core.dims(),
            volume: core.lattice.volume(),
            block: self.geometry.coarse_block,
            link_hint: self.geometry.link_hint,
            split_mask: 0,
            anti_lo: core.antiperiodic_mask,
            anti_hi: core.antiperiodic_mask,
            s: 0,
            partials: 0,
            ticket: 0,
            site: SiteArgs::default(),
        }
    }
}

/// A float copy on the device of a double array of complex numbers (the `to_single`
/// kernel), booked as the set-up launch `setup`; `what` names a failed allocation.
pub(super) fn float_copy(
    core: &mut Core,
    to_single: &CudaFunction,
    d: &CudaSlice<f64>,
    setup: &'static str,
    what: &'static str,
) -> Result<CudaSlice<f32>> {
    let n = d.len() / 2;
    let mut s = core
        .gpu
        .stream
        .alloc_zeros::<f32>(2 * n)
        .map_err(err(what))?;
    let nn = n as i64;
    launch!(
        core.gpu,
        Kernel::Setup(setup),
        n,
        to_single,
        cfg_1d(n, BLAS_BLOCK, 0),
        [d, &mut s, &nn]
    );
    Ok(s)
}
