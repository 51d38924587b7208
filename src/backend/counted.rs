//! `Counted<B>`: any backend whose every field is booked in a ledger (`backend::ledger`)
//! at the size the GPU would give it (`field_bytes`: 12 complex per site of the layout's
//! subset, 16 or 8 bytes each), whatever the backend stores. Running the real solve flow
//! (`app::run::solve_on`) on `Counted<CpuBackend>` counts, without a GPU, the fields a
//! plan allocates and frees, phase by phase: the test that the device estimate
//! (`app::footprint`) counts what the solvers really do. The fused CR runs as the host
//! loop (`HostFusedCr`), which allocates no fields either.

use super::host_cr::HostFusedCr;
use super::ledger::{field_bytes, Booking, Ledger, MemoryBooks, Purpose};
use super::{Layout, Operator, Precision, Prepare, Space, WilsonKernels};
use crate::dirac::coarse::{Aggregation, CoarseOp, Coarsen, Prolongator, Stencil};
use crate::field::{SpinorField, C64};
use crate::Result;
use std::sync::Arc;

/// A field of the wrapped backend and its booking.
pub struct CountedField<F> {
    pub inner: F,
    _booking: Booking,
}

/// A backend whose fields are booked (see the module documentation).
pub struct Counted<B> {
    pub inner: B,
    volume: usize,
    ledger: Ledger,
}

impl<B: Space> Counted<B> {
    /// Wrap `inner`, whose full fields have `volume` sites.
    pub fn new(inner: B, volume: usize) -> Self {
        Counted {
            inner,
            volume,
            ledger: Ledger::new(),
        }
    }

    /// What is held now and the peak, by layout.
    pub fn books(&self) -> MemoryBooks {
        self.ledger.books()
    }

    fn wrap(&self, inner: B::Field, layout: Layout) -> CountedField<B::Field> {
        CountedField {
            inner,
            _booking: self
                .ledger
                .book(Purpose::Fields(layout), field_bytes(layout, self.volume)),
        }
    }
}

impl<B: Space> Space for Counted<B> {
    type Field = CountedField<B::Field>;

    fn describe(&self) -> String {
        format!("{} (fields counted)", self.inner.describe())
    }

    fn alloc_layout(&mut self, layout: Layout) -> Result<Self::Field> {
        let f = self.inner.alloc_layout(layout)?;
        Ok(self.wrap(f, layout))
    }

    fn layout(&self, field: &Self::Field) -> Layout {
        self.inner.layout(&field.inner)
    }

    fn upload(&mut self, host: &SpinorField) -> Result<Self::Field> {
        let f = self.inner.upload(host)?;
        let layout = self.inner.layout(&f);
        Ok(self.wrap(f, layout))
    }

    fn download(&mut self, field: &Self::Field) -> Result<SpinorField> {
        self.inner.download(&field.inner)
    }

    fn set_zero(&mut self, x: &mut Self::Field) -> Result<()> {
        self.inner.set_zero(&mut x.inner)
    }

    fn copy(&mut self, dst: &mut Self::Field, src: &Self::Field) -> Result<()> {
        self.inner.copy(&mut dst.inner, &src.inner)
    }

    fn convert(&mut self, dst: &mut Self::Field, src: &Self::Field) -> Result<()> {
        self.inner.convert(&mut dst.inner, &src.inner)
    }

    fn axpy(&mut self, a: C64, x: &Self::Field, y: &mut Self::Field) -> Result<()> {
        self.inner.axpy(a, &x.inner, &mut y.inner)
    }

    fn xpay(&mut self, x: &Self::Field, a: C64, y: &mut Self::Field) -> Result<()> {
        self.inner.xpay(&x.inner, a, &mut y.inner)
    }

    fn dot(&mut self, x: &Self::Field, y: &Self::Field) -> Result<C64> {
        self.inner.dot(&x.inner, &y.inner)
    }

    fn norm2(&mut self, x: &Self::Field) -> Result<f64> {
        self.inner.norm2(&x.inner)
    }

    fn dots(&mut self, xs: &[&Self::Field], y: &Self::Field) -> Result<Vec<C64>> {
        let xs: Vec<&B::Field> = xs.iter().map(|x| &x.inner).collect();
        self.inner.dots(&xs, &y.inner)
    }

    fn axpys(&mut self, a: &[C64], xs: &[&Self::Field], y: &mut Self::Field) -> Result<()> {
        let xs: Vec<&B::Field> = xs.iter().map(|x| &x.inner).collect();
        self.inner.axpys(a, &xs, &mut y.inner)
    }

    fn add_converted(
        &mut self,
        x: &Self::Field,
        y: &mut Self::Field,
        scratch: &mut Self::Field,
    ) -> Result<()> {
        self.inner
            .add_converted(&x.inner, &mut y.inner, &mut scratch.inner)
    }

    fn residual_converted(
        &mut self,
        b: &Self::Field,
        r: &mut Self::Field,
        low: &mut Self::Field,
    ) -> Result<f64> {
        self.inner
            .residual_converted(&b.inner, &mut r.inner, &mut low.inner)
    }
}

impl<B: WilsonKernels> WilsonKernels for Counted<B> {
    fn kappa(&self) -> f64 {
        self.inner.kappa()
    }

    fn apply(&mut self, op: Operator, out: &mut Self::Field, inp: &Self::Field) -> Result<()> {
        self.inner.apply(op, &mut out.inner, &inp.inner)
    }

    fn hop_xpay(
        &mut self,
        out: &mut Self::Field,
        inp: &Self::Field,
        y: &Self::Field,
        c: f64,
        gamma5: bool,
    ) -> Result<()> {
        self.inner
            .hop_xpay(&mut out.inner, &inp.inner, &y.inner, c, gamma5)
    }

    fn has_site_term(&self) -> bool {
        self.inner.has_site_term()
    }

    fn apply_batch(
        &mut self,
        op: Operator,
        outs: &mut [&mut Self::Field],
        inps: &[&Self::Field],
    ) -> Result<()> {
        let mut o: Vec<&mut B::Field> = outs.iter_mut().map(|f| &mut f.inner).collect();
        let i: Vec<&B::Field> = inps.iter().map(|f| &f.inner).collect();
        self.inner.apply_batch(op, &mut o, &i)
    }

    fn apply_adjoint(
        &mut self,
        op: Operator,
        out: &mut Self::Field,
        inp: &Self::Field,
    ) -> Result<()> {
        self.inner.apply_adjoint(op, &mut out.inner, &inp.inner)
    }

    fn site_inverse(&mut self, out: &mut Self::Field, inp: &Self::Field) -> Result<()> {
        self.inner.site_inverse(&mut out.inner, &inp.inner)
    }
}

impl<B: WilsonKernels> HostFusedCr for Counted<B> {}

impl<B: Coarsen> Coarsen for Counted<B> {
    type Coarse = B::Coarse;
    type Transfer = B::Transfer;
    fn coarse_space(&mut self, op: Arc<CoarseOp>, precision: Precision) -> Result<B::Coarse> {
        self.inner.coarse_space(op, precision)
    }
    fn transfer(&mut self, p: &Prolongator, precision: Precision) -> Result<B::Transfer> {
        self.inner.transfer(p, precision)
    }
    fn galerkin(&mut self, fine: &dyn Stencil, p: &Prolongator) -> Result<CoarseOp> {
        self.inner.galerkin(fine, p)
    }
    fn coarsen(
        &mut self,
        fine: &dyn Stencil,
        agg: Aggregation,
        fields: &[&Self::Field],
        precision: Precision,
    ) -> Result<(CoarseOp, B::Transfer)> {
        let inner: Vec<&B::Field> = fields.iter().map(|f| &f.inner).collect();
        self.inner.coarsen(fine, agg, &inner, precision)
    }
    fn restrict(
        &mut self,
        t: &B::Transfer,
        fine: &Self::Field,
        coarse: &mut B::Coarse,
        out: &mut <B::Coarse as Space>::Field,
    ) -> Result<()> {
        self.inner.restrict(t, &fine.inner, coarse, out)
    }
    fn prolong(
        &mut self,
        t: &B::Transfer,
        coarse: &mut B::Coarse,
        inp: &<B::Coarse as Space>::Field,
        fine: &mut Self::Field,
    ) -> Result<()> {
        self.inner.prolong(t, coarse, inp, &mut fine.inner)
    }
}

impl<B: Prepare> Prepare for Counted<B> {
    fn prepare(&mut self, layout: Layout, fused: bool) -> Result<()> {
        self.inner.prepare(layout, fused)
    }
    fn reserve(&mut self, bytes: u64) -> Result<()> {
        self.inner.reserve(bytes)
    }
    fn barrier(&mut self) -> Result<()> {
        self.inner.barrier()
    }
}
