//! 3.0's site term (the clover term, a twist; kernels/clover.cuh): the clover arrays on the
//! device in double and, made on first use, in float for single and half fields; the
//! epilogue arguments of a launch; and the site kernel out = A^-1 inp. Installing it
//! swaps the stencil modules for their CLOVER builds, whose entry points take the
//! epilogue's arguments (a launch without them, as `hop_xpay`'s, ends as Wilson's).

use super::access::{addr, half_addr, made, vh};
use super::FastStencil;
use crate::backend::cuda::core::device::{err, load_module};
use crate::backend::cuda::core::field::DeviceSpinor;
use crate::backend::cuda::core::kernels::{Kernel, BLAS_BLOCK};
use crate::backend::cuda::core::launch::{cfg_1d, dptr};
use crate::backend::cuda::core::stencil::programs;
use crate::backend::cuda::core::stencil::v3::{SiteArgs, V3Kernels, V3Launch};
use crate::backend::cuda::core::timing::launch_values;
use crate::backend::cuda::dirac::blas::Core;
use crate::backend::cuda::dirac::stencil_impl::HostSiteTerm;
use crate::backend::ledger::{Booking, Purpose};
use crate::dirac::clover::PACKED_SITE;
use crate::error::{Error, Result};
use crate::linalg::{layout_mismatch as mismatch, Precision};
use cudarc::driver::CudaSlice;

/// The site term on the device: the twist 2 kappa mu, the clover part and the inverse's
/// factor (`HostSiteTerm`) in double, and in float once a single or half field needs them.
pub(super) struct SiteArrays {
    twist: f64,
    double: [CudaSlice<f64>; 2],
    single: Option<[CudaSlice<f32>; 2]>,
    /// A second odd temporary of the Schur operator on a split lattice (`split_inverse_hop`),
    /// made on first use.
    tmp2: Option<CudaSlice<f64>>,
    _bookings: Vec<Booking>,
}

impl FastStencil {
    /// Upload `site` and load the double stencil's CLOVER build; the single and half
    /// builds are remade as CLOVER builds on first use.
    pub(super) fn install_site_term(&mut self, core: &mut Core, site: &HostSiteTerm) -> Result<()> {
        let n = PACKED_SITE * core.lattice.volume();
        if site.clover.len() != n || site.inverse.len() != n {
            return Err(Error::internal(format!(
                "clover arrays of {} and {} reals for a lattice that needs {n}",
                site.clover.len(),
                site.inverse.len()
            )));
        }
        let stream = core.gpu.stream.clone();
        let up = |v: &[f64]| {
            stream
                .clone_htod(v)
                .map_err(err("uploading the clover term"))
        };
        let double = [up(&site.clover)?, up(&site.inverse)?];
        let booking = core
            .ledger
            .book(Purpose::CloverTerm(Precision::Double), (2 * n * 8) as u64);
        let program = programs::v3_clover_program(self.reconstruct, false, false);
        let (module, _) = load_module(&core.gpu.ctx, &program)?;
        self.stencil_d = V3Kernels::load_clover(&module)?;
        self.single = None;
        self.half = None;
        self.site = Some(SiteArrays {
            twist: site.twist,
            double,
            single: None,
            tmp2: None,
            _bookings: vec![booking],
        });
        Ok(())
    }

    /// The float clover arrays, converted from the double ones on first use (a no-op
    /// without a site term).
    pub(super) fn ensure_site_single(&mut self, core: &mut Core) -> Result<()> {
        let Some(site) = &mut self.site else {
            return Ok(());
        };
        if site.single.is_some() {
            return Ok(());
        }
        let mut single = Vec::with_capacity(2);
        for d in &site.double {
            single.push(super::lazy::float_copy(
                core,
                &self.blas.to_single,
                d,
                "to_single (clover)",
                "allocating the single-precision clover term",
            )?);
        }
        let bytes = single.iter().map(|s| 4 * s.len() as u64).sum();
        site._bookings.push(
            core.ledger
                .book(Purpose::CloverTerm(Precision::Single), bytes),
        );
        site.single = Some(single.try_into().expect("two clover arrays"));
        Ok(())
    }

    /// The epilogue arguments of a launch on fields of `precision` (none without a site
    /// term): `inverse` 0: out = A y + c hop, 1: out = A^-1 (y + c hop); `adjoint`: with
    /// A^dag, the twist's sign flipped. The float arrays must have been made
    /// (`stencil_for` makes them).
    pub(super) fn site_args(
        &self,
        core: &Core,
        precision: Precision,
        inverse: bool,
        adjoint: bool,
    ) -> Result<SiteArgs> {
        let Some(site) = &self.site else {
            return Ok(SiteArgs::default());
        };
        let stream = &core.gpu.stream;
        let (clover, inv) = match precision {
            Precision::Double => (dptr(&site.double[0], stream), dptr(&site.double[1], stream)),
            _ => {
                let s = made(&site.single, "the single-precision clover term")?;
                (dptr(&s[0], stream), dptr(&s[1], stream))
            }
        };
        Ok(SiteArgs {
            clover,
            inv,
            twist: if adjoint { -site.twist } else { site.twist },
            inverse: inverse as i32,
        })
    }

    /// Whether a site term is installed.
    pub(super) fn site_term(&self) -> bool {
        self.site.is_some()
    }

    /// out = A^-1 inp on a half field (the site kernel `stencil_v3_clover_inv`).
    pub(super) fn launch_site_inverse(
        &mut self,
        core: &mut Core,
        out: &mut DeviceSpinor,
        inp: &DeviceSpinor,
    ) -> Result<()> {
        if out.layout != inp.layout {
            return Err(mismatch("site_inverse", out.layout, inp.layout));
        }
        let Some(parity) = inp.layout.subset.parity() else {
            return Err(Error::internal("site_inverse acts on half fields"));
        };
        let precision = inp.layout.precision;
        let (f, _) = self.stencil_for(core, precision)?;
        let a = self.site_args(core, precision, true, false)?;
        let stream = core.gpu.stream.clone();
        let x = (
            addr(inp, &stream).0,
            half_addr(inp, &stream, 0).map_or(0, |a| a.1),
        );
        let o = (
            addr(out, &stream).0,
            half_addr(out, &stream, 0).map_or(0, |a| a.1),
        );
        site_kernel(core, &f, &a, precision, parity, x, o)
    }

    /// The first half of the Schur operator on a split lattice, tmp_o = A_oo^-1 H_oe x_e
    /// (`adjoint`: with A^dag): the hop `l` (parity 1 into `l.out`, c = 1, no y) launched
    /// with the Wilson epilogue, so that the faces' kernels add their hops before the
    /// inverse (an inverse epilogue would apply to the interior's part alone), then the
    /// site kernel into a second odd temporary, whose address it returns.
    pub(super) fn split_inverse_hop(
        &mut self,
        core: &mut Core,
        f: &V3Kernels,
        mut l: V3Launch,
        precision: Precision,
        adjoint: bool,
    ) -> Result<u64> {
        if precision == Precision::Half {
            return Err(Error::internal("half fields on a split lattice"));
        }
        l.site = SiteArgs::default();
        core.launch_v3(f, &l)?;
        let a = self.site_args(core, precision, true, adjoint)?;
        let tmp2 = self.ensure_tmp2(core)?;
        site_kernel(core, f, &a, precision, 1, (l.out, 0), (tmp2, 0))?;
        Ok(tmp2)
    }

    /// The split Schur operator's second odd temporary (made on first use, or by
    /// `prepare`, before any graph is recorded), its address.
    pub(super) fn ensure_tmp2(&mut self, core: &mut Core) -> Result<u64> {
        let stream = core.gpu.stream.clone();
        let n = vh(core) * 24;
        let Some(site) = self.site.as_mut() else {
            return Err(Error::internal(
                "a second Schur temporary without a site term",
            ));
        };
        if site.tmp2.is_none() {
            let t = stream.alloc_zeros::<f64>(n).map_err(err(
                "allocating the split Schur operator's second temporary",
            ))?;
            site._bookings
                .push(core.ledger.book(Purpose::SchurTemporary, (n * 8) as u64));
            site.tmp2 = Some(t);
        }
        Ok(dptr(
            made(&site.tmp2, "the second Schur temporary")?,
            &stream,
        ))
    }
}

/// One launch of the site kernel out = A^-1 inp (`a`: the arrays and twist) on the half
/// fields of `parity` at device addresses (data, norms; norms 0 but for half fields).
fn site_kernel(
    core: &mut Core,
    f: &V3Kernels,
    a: &SiteArgs,
    precision: Precision,
    parity: usize,
    x: (u64, u64),
    o: (u64, u64),
) -> Result<()> {
    let func = f
        .clover_inv
        .as_ref()
        .ok_or_else(|| Error::internal("site_inverse without a site term"))?;
    let n = vh(core);
    let parity = parity as i32;
    let volume = core.lattice.volume() as i32;
    let kernel = Kernel::CloverInv {
        single: precision != Precision::Double,
        half: precision == Precision::Half,
        twist: a.twist != 0.0,
    };
    let ((x, x_norm), (o, o_norm)) = (x, o);
    launch_values!(
        core.gpu,
        kernel,
        n,
        func,
        cfg_1d(n, BLAS_BLOCK, 0),
        [&x, &o, &a.clover, &a.inv, &a.twist, &parity, &volume, &x_norm, &o_norm]
    );
    Ok(())
}
