//! `CudaBackend` as the solvers see it: `Space`, `WilsonKernels`, `FusedCr` and `Prepare`,
//! each delegating to the backend's stencil object (`StencilImpl`) with no version branch.
//! What a stencil family lacks is refused through its `Capabilities`: half-lattice and
//! single fields at allocation, the fused CR at every fused method (`repeat` then runs its
//! body plainly).

use crate::backend::cuda::backend::CudaBackend;
use crate::backend::cuda::core::cr_state::{CrReduction, DeviceCrState, CR_GATHERED, CR_LOCAL_RE};
use crate::backend::cuda::core::device::err;
use crate::backend::cuda::core::field::{as_f64, as_f64_mut, DeviceSpinor};
use crate::backend::cuda::core::launch::dptr;
use crate::backend::cuda::dirac::fast::prec::ops;
use crate::backend::cuda::engines::fused::Fused;
use crate::backend::{
    unsupported, CrScalars, FusedCr, Layout, Operator, Precision, Prepare, Space, Subset,
    WilsonKernels,
};
use crate::error::{Error, Result};
use crate::field::{SpinorField, C64};

impl Space for CudaBackend {
    type Field = DeviceSpinor;

    fn describe(&self) -> String {
        let one = self.stencil.describe(&self.core.device_name);
        match &self.core.halo {
            Some(h) => format!(
                "{one}, rank {} of grid {:?} ({})",
                h.partition.rank(),
                h.partition.grid,
                h.exchange.describe()
            ),
            None => one,
        }
    }

    fn alloc_layout(&mut self, layout: Layout) -> Result<DeviceSpinor> {
        let half = layout.subset != Subset::Full;
        let single = layout.precision == Precision::Single;
        let half_precision = layout.precision == Precision::Half;
        if (half && !self.caps.half_lattice)
            || (single && !self.caps.single)
            || (half_precision && !self.caps.half)
        {
            return Err(unsupported(
                self,
                "half-lattice, single- or half-precision fields",
            ));
        }
        self.stencil.alloc(&mut self.core, layout)
    }

    fn layout(&self, field: &DeviceSpinor) -> Layout {
        field.layout
    }

    /// Staged: chunks laid out on the host while the previous ones are copied
    /// (`Core::upload_spinor`).
    fn upload(&mut self, host: &SpinorField) -> Result<DeviceSpinor> {
        self.core.check_len(host.data.len(), "source")?;
        let mut field = self.alloc()?;
        let order = self.stencil.spinor_order();
        self.core
            .upload_spinor(order, as_f64(&host.data), field.double_mut()?)?;
        Ok(field)
    }

    /// Full double fields staged (`Core::download_spinor`), the other layouts read whole.
    fn download(&mut self, field: &DeviceSpinor) -> Result<SpinorField> {
        let mut host = SpinorField::zeros(self.core.lattice.volume());
        if field.layout != Layout::FULL {
            // Other layouts: widened to double, the sites a half field lacks zero.
            let raw = self.core.read_raw(field)?;
            let parity = field.layout.subset.parity();
            self.stencil.to_canonical_order(
                &self.core.lattice,
                &raw,
                as_f64_mut(&mut host.data),
                parity,
            );
            return Ok(host);
        }
        self.core.check_len(field.len(), "field")?;
        let order = self.stencil.spinor_order();
        self.core
            .download_spinor(order, field.double()?, as_f64_mut(&mut host.data))?;
        Ok(host)
    }

    fn set_zero(&mut self, x: &mut DeviceSpinor) -> Result<()> {
        ops(x).zero(&mut self.core.gpu, x)
    }

    fn copy(&mut self, dst: &mut DeviceSpinor, src: &DeviceSpinor) -> Result<()> {
        self.stencil.copy(&mut self.core, dst, src)
    }

    fn convert(&mut self, dst: &mut DeviceSpinor, src: &DeviceSpinor) -> Result<()> {
        self.stencil.convert(&mut self.core, dst, src)
    }

    fn axpy(&mut self, a: C64, x: &DeviceSpinor, y: &mut DeviceSpinor) -> Result<()> {
        self.stencil.axpy(&mut self.core, a, x, y)
    }

    fn xpay(&mut self, x: &DeviceSpinor, a: C64, y: &mut DeviceSpinor) -> Result<()> {
        self.stencil.xpay(&mut self.core, x, a, y)
    }

    /// On a decomposed lattice the reduction's read sums over the ranks
    /// (`Core::read_reduction`).
    fn dot(&mut self, x: &DeviceSpinor, y: &DeviceSpinor) -> Result<C64> {
        self.stencil.dot(&mut self.core, x, y)
    }

    fn norm2(&mut self, x: &DeviceSpinor) -> Result<f64> {
        self.stencil.norm2(&mut self.core, x)
    }

    /// One kernel where the stencil has it (3.0: single into double), else the default's
    /// conversion and axpy.
    fn add_converted(
        &mut self,
        x: &DeviceSpinor,
        y: &mut DeviceSpinor,
        scratch: &mut DeviceSpinor,
    ) -> Result<()> {
        if self.stencil.add_converted(&mut self.core, x, y)? {
            return Ok(());
        }
        crate::linalg::add_converted_in_steps(self, x, y, scratch)
    }

    /// One launch where the stencil has it (3.0: double r, single low), else the default's
    /// xpay, norm2 and conversion; on a decomposed lattice the norm summed over the ranks.
    fn residual_converted(
        &mut self,
        b: &DeviceSpinor,
        r: &mut DeviceSpinor,
        low: &mut DeviceSpinor,
    ) -> Result<f64> {
        if let Some(nr) = self.stencil.residual_converted(&mut self.core, b, r, low)? {
            return Ok(nr);
        }
        crate::linalg::residual_converted_in_steps(self, b, r, low)
    }

    /// With `tuning.record_updates` (or `set_record_updates`), a CUDA graph where
    /// `FusedCr::repeat` records
    /// (kernel 3.0; on a decomposed lattice an exchange that can be captured); by default
    /// the body runs as it comes. Measured (four H200, the main job at 32^3x64 a GPU, the
    /// reliable updates' x_d += x_s and A x_d): no gain on four GPUs (z-t 0.2-0.9% slower,
    /// t from 0.4% faster to 4.9% slower), 0.3-1.1% on one: not the default (validate/RESULTS.md).
    fn queue_recorded(
        &mut self,
        key: u64,
        body: &mut dyn FnMut(&mut Self) -> Result<()>,
    ) -> Result<()> {
        if !self.record_updates {
            return body(self);
        }
        <Self as FusedCr>::repeat(self, key, 1, body)
    }

    fn forget_records(&mut self) {
        self.fused.forget_graphs();
    }
}

impl WilsonKernels for CudaBackend {
    fn kappa(&self) -> f64 {
        self.core.kappa
    }

    fn apply(&mut self, op: Operator, out: &mut DeviceSpinor, inp: &DeviceSpinor) -> Result<()> {
        self.stencil.apply(&mut self.core, op, out, inp, None)
    }

    fn hop_xpay(
        &mut self,
        out: &mut DeviceSpinor,
        inp: &DeviceSpinor,
        y: &DeviceSpinor,
        c: f64,
        gamma5: bool,
    ) -> Result<()> {
        self.stencil
            .hop_xpay(&mut self.core, out, inp, y, c, gamma5)
    }

    fn apply_adjoint(
        &mut self,
        op: Operator,
        out: &mut DeviceSpinor,
        inp: &DeviceSpinor,
    ) -> Result<()> {
        self.stencil.apply_adjoint(&mut self.core, op, out, inp)
    }

    fn has_site_term(&self) -> bool {
        self.stencil.has_site_term()
    }

    fn apply_batch(
        &mut self,
        op: Operator,
        outs: &mut [&mut DeviceSpinor],
        inps: &[&DeviceSpinor],
    ) -> Result<()> {
        // The batch entries run on kernel 3.0's whole lattice; elsewhere one at a time.
        if !self.caps.fused_cr || self.core.halo.is_some() {
            return crate::linalg::operator::apply_each(self, op, outs, inps);
        }
        let chunk = crate::backend::cuda::core::kernels::BATCH_MAX;
        for (o, i) in outs.chunks_mut(chunk).zip(inps.chunks(chunk)) {
            CudaBackend::apply_batch(self, op, o, i)?;
        }
        Ok(())
    }

    fn site_inverse(&mut self, out: &mut DeviceSpinor, inp: &DeviceSpinor) -> Result<()> {
        self.stencil.site_inverse(&mut self.core, out, inp)
    }
}

impl CudaBackend {
    /// Make the operator D = A - kappa H of `action` (the clover term of `gauge`, a twist):
    /// the site terms built on the host (`dirac::clover::SiteTerms`), laid out for the
    /// device and uploaded. A no-op for the Wilson action; refused by a stencil without
    /// the site term (the seed versions) and for another kappa than the backend's.
    pub fn set_action(
        &mut self,
        gauge: &crate::field::GaugeField,
        action: &crate::dirac::Action,
    ) -> Result<()> {
        if !action.has_site_term() {
            return Ok(());
        }
        if !self.caps.site_term {
            return Err(unsupported(self, "the clover term and twisted mass"));
        }
        let terms = crate::dirac::clover::SiteTerms::new(gauge, action)?;
        self.set_site_terms(&gauge.lattice, &terms)
    }

    /// Make the operator D = A - kappa H with the site terms `terms` of this backend's
    /// `lattice` (a rank's: built from its links and its neighbours' ring of links, whose
    /// construction needs the links around each site).
    pub fn set_site_terms(
        &mut self,
        lattice: &crate::geometry::lattice::Lattice,
        terms: &crate::dirac::clover::SiteTerms,
    ) -> Result<()> {
        if !self.caps.site_term {
            return Err(unsupported(self, "the clover term and twisted mass"));
        }
        if terms.kappa != self.core.kappa {
            return Err(Error::internal(format!(
                "site terms of kappa {} for a backend built with kappa {}",
                terms.kappa, self.core.kappa
            )));
        }
        let (clover, inverse) = crate::dirac::clover_pack::device_clover_soa(lattice, terms)?;
        let site = crate::backend::cuda::dirac::stencil_impl::HostSiteTerm {
            clover,
            inverse,
            twist: terms.twist,
        };
        self.stencil.set_site_term(&mut self.core, &site)
    }
}

impl CudaBackend {
    /// The fused CR iteration, or its refusal by name.
    fn fused_path(&self) -> Result<()> {
        if self.caps.fused_cr {
            Ok(())
        } else {
            Err(unsupported(self, "the fused CR iteration"))
        }
    }

    /// On a decomposed lattice, the end of a fused CR reduction: every rank's partials
    /// (the scalar block's CR_LOCAL_RE, CR_LOCAL_IM and CR_LOCAL_NR) all-gathered on the
    /// device (NCCL, or device copies), then added in rank order by `cr_global`, all
    /// enqueued (capturable where the exchange is); where the ranks share peer memory
    /// (`Halo::peer_sums`), both in one `cr_peer_sum` launch. A no-op on one GPU.
    fn cr_global(&mut self, state: &mut DeviceCrState, which: CrReduction) -> Result<()> {
        let Some(halo) = &mut self.core.halo else {
            return Ok(());
        };
        let stream = self.core.gpu.stream.clone();
        if let Some(peer) = &halo.peer_sums {
            let peer = Some((peer.table(&stream), halo.partition.rank()));
            return self.fused.global(&mut self.core.gpu, state, which, peer);
        }
        let Some(gathered) = &state.gathered else {
            return Err(Error::internal(
                "a fused CR state made for one GPU used on a decomposed lattice",
            ));
        };
        let src = dptr(&state.scalars, &stream) + 8 * CR_LOCAL_RE as u64;
        let dst = dptr(gathered, &stream);
        halo.exchange
            .all_gather_on(&stream, src, dst, 8 * CR_GATHERED)?;
        self.core.gpu.mark("all-gather")?;
        self.fused.global(&mut self.core.gpu, state, which, None)
    }

    /// Build now what the stencil otherwise makes on first use for `precision` (3.0: the
    /// single-precision links and stencil module, the Schur temporary), so that no
    /// allocation or set-up launch happens later, e.g. inside a recorded CUDA graph. A
    /// no-op for the seed versions.
    pub fn prepare_fast_path(&mut self, precision: Precision) -> Result<()> {
        self.stencil
            .prepare(&mut self.core, Layout::new(Subset::Even, precision))
    }

    /// Read a scalar block and check that every ticket counter is back at zero (tests).
    #[doc(hidden)]
    pub fn fast_test_cr_read(&mut self, state: &DeviceCrState) -> Result<CrScalars> {
        let stream = self.core.gpu.stream.clone();
        let t = stream
            .clone_dtoh(&state.tickets)
            .map_err(err("reading the CR tickets"))?;
        stream
            .synchronize()
            .map_err(err("reading the CR tickets"))?;
        if t.iter().any(|&k| k != 0) {
            return Err(Error::Cuda(format!("CR tickets not back to zero: {t:?}")));
        }
        self.cr_get(state)
    }
}

impl FusedCr for CudaBackend {
    type CrState = DeviceCrState;

    fn fused_cr_available(&self) -> bool {
        self.caps.fused_cr
    }

    fn cr_state(&mut self, s: &CrScalars) -> Result<DeviceCrState> {
        self.fused_path()?;
        let volume = self.core.lattice.volume();
        let ranks = self.core.halo.as_ref().map(|h| h.partition.ranks());
        let ledger = self.core.ledger.clone();
        self.fused
            .new_state(&mut self.core.gpu, &ledger, volume, s, ranks)
    }

    fn cr_set(&mut self, state: &mut DeviceCrState, s: &CrScalars) -> Result<()> {
        self.fused_path()?;
        Fused::set(&mut self.core.gpu, state, s)
    }

    fn cr_get(&mut self, state: &DeviceCrState) -> Result<CrScalars> {
        self.fused_path()?;
        Fused::get(&mut self.core.gpu, state)
    }

    fn cr_history(&mut self, state: &DeviceCrState) -> Result<Vec<f64>> {
        self.fused_path()?;
        Fused::history(&mut self.core.gpu, state)
    }

    fn cr_history_upto(&mut self, state: &DeviceCrState, iter: u64) -> Result<Vec<f64>> {
        self.fused_path()?;
        Fused::history_upto(&mut self.core.gpu, state, iter)
    }

    /// One cr_load pass on double or single fields (the fused CR's precisions); other
    /// layouts the default's copy and zeroings.
    fn cr_load(
        &mut self,
        rhs: &DeviceSpinor,
        r: &mut DeviceSpinor,
        x: &mut DeviceSpinor,
        p: &mut DeviceSpinor,
        ap: &mut DeviceSpinor,
    ) -> Result<()> {
        if !self.caps.fused_cr || rhs.layout.precision == Precision::Half {
            return crate::backend::cr_load_in_steps(self, rhs, r, x, p, ap);
        }
        let layouts = [r.layout, x.layout, p.layout, ap.layout];
        if let Some(&other) = layouts.iter().find(|&&l| l != rhs.layout) {
            return Err(crate::linalg::layout_mismatch("cr_load", rhs.layout, other));
        }
        let (rhs, r, x, p, ap) = (
            rhs.raw(),
            r.raw_mut(),
            x.raw_mut(),
            p.raw_mut(),
            ap.raw_mut(),
        );
        self.fused.load(&mut self.core.gpu, rhs, r, x, p, ap)
    }

    fn cr_update_xr(
        &mut self,
        state: &mut DeviceCrState,
        p: &DeviceSpinor,
        ap: &DeviceSpinor,
        x: &mut DeviceSpinor,
        r: &mut DeviceSpinor,
    ) -> Result<()> {
        self.fused_path()?;
        let (p, ap, x, r) = (p.raw(), ap.raw(), x.raw_mut(), r.raw_mut());
        // On a decomposed lattice the rank's nr waits in the scalar block: apply's
        // all-gather carries it (`CrReduction::Apply`).
        self.fused.update_xr(&mut self.core.gpu, state, p, ap, x, r)
    }

    fn cr_apply_dot(
        &mut self,
        op: Operator,
        state: &mut DeviceCrState,
        r: &DeviceSpinor,
        ar: &mut DeviceSpinor,
    ) -> Result<()> {
        self.fused_path()?;
        // Decomposed: the interior's epilogue and the exterior kernels leave the rank's
        // (r|Ar) in the scalar block (kernels/halo.cu); `cr_global` adds the ranks'. Both
        // do nothing while the iteration is inactive, as on one GPU.
        self.stencil.apply(&mut self.core, op, ar, r, Some(state))?;
        self.cr_global(state, CrReduction::Apply)
    }

    fn cr_update_p(
        &mut self,
        state: &mut DeviceCrState,
        r: &DeviceSpinor,
        ar: &DeviceSpinor,
        p: &mut DeviceSpinor,
        ap: &mut DeviceSpinor,
    ) -> Result<()> {
        self.fused_path()?;
        let (r, ar, p, ap) = (r.raw(), ar.raw(), p.raw_mut(), ap.raw_mut());
        self.fused
            .update_p(&mut self.core.gpu, state, r, ar, p, ap)?;
        self.cr_global(state, CrReduction::P)
    }

    fn repeat(
        &mut self,
        key: u64,
        times: usize,
        body: &mut dyn FnMut(&mut Self) -> Result<()>,
    ) -> Result<()> {
        // Graphs need a stencil with the fused kernels and, on a decomposed lattice, an
        // exchange that can be captured (NCCL; not the host-ordered device copies
        // between ranks as threads on one GPU).
        let capturable = self
            .core
            .halo
            .as_ref()
            .is_none_or(|h| h.exchange.capturable());
        if !self.caps.fused_cr || !capturable {
            return (0..times).try_for_each(|_| body(self));
        }
        crate::backend::cuda::engines::fused::repeat(
            self,
            |b| (&mut b.core.gpu, &mut b.fused),
            key,
            times,
            body,
        )
    }

    fn forget_graphs(&mut self) {
        self.fused.forget_graphs();
    }
}

impl Prepare for CudaBackend {
    /// One allocation of `bytes`, freed at once: the default pool keeps it mapped
    /// (by default; where `[tuning] pool_keep_mib` sets less, a larger reserve would be
    /// released again, so it is skipped).
    fn reserve(&mut self, bytes: u64) -> Result<()> {
        if bytes == 0 || bytes > self.core.gpu.tuning.pool_keep_mib.bytes() {
            return Ok(());
        }
        let block = self
            .core
            .gpu
            .stream
            .alloc_zeros::<u8>(bytes as usize)
            .map_err(|e| {
                crate::backend::cuda::core::device::driver_err("reserving pool memory", e)
            })?;
        drop(block);
        self.core.gpu.sync()
    }

    fn barrier(&mut self) -> Result<()> {
        self.halo_barrier()
    }

    fn prepare(&mut self, layout: Layout, fused: bool) -> Result<()> {
        self.stencil.prepare(&mut self.core, layout)?;
        if fused && self.caps.fused_cr {
            // Loads the fused-CR module (its first use compiles it). On a decomposed
            // lattice also one end of a reduction (inactive: only the all-gather does
            // anything), so that the exchange's first collective, which may set up
            // connections, happens before any graph capture. Every rank prepares.
            let s = CrScalars::default();
            let mut state = self.cr_state(&s)?;
            self.cr_global(&mut state, CrReduction::Apply)?;
            self.core.gpu.sync()?;
            // And the fused BiCGStab's module.
            self.prepare_bicgstab()?;
        }
        Ok(())
    }
}
