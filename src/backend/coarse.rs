//! A coarse level of the multigrid hierarchy on the host: its vector space (fields of
//! `dof` numbers a site, `crate::dirac::coarse`) and its operator as a `LinearOperator`,
//! the full one or the even Schur complement, so that the Krylov solvers of
//! `crate::solver` run on it unchanged. Fields in single precision store each number
//! rounded through f32 (`Precision::store`); half fields are not held here.

use super::{layout_mismatch as mismatch, Layout, Precision, Space, Subset};
use crate::dirac::coarse::CoarseOp;
use crate::dirac::coarse::{CoarseLevelSpace, Coarsen, Prolongator};
use crate::field::{SpinorField, C64};
use crate::reduce::{det_sum, det_sum2};
use crate::{Error, Result};
use rayon::prelude::*;
use std::sync::Arc;

/// The space of a coarse level.
pub struct CoarseSpace {
    pub op: Arc<CoarseOp>,
    /// Two odd half fields of the Schur complement.
    tmp: [Vec<C64>; 2],
}

/// A coarse field: `layout.subset` sites (all, or one parity in checkerboard order) of
/// `dof` numbers.
#[derive(Clone, Debug)]
pub struct CoarseField {
    pub layout: Layout,
    pub data: Vec<C64>,
}

impl CoarseSpace {
    pub fn new(op: Arc<CoarseOp>) -> CoarseSpace {
        CoarseSpace {
            op,
            tmp: [Vec::new(), Vec::new()],
        }
    }

    /// A field of `layout` holding `numbers` (rounded to its precision).
    pub fn field(&self, layout: Layout, numbers: Vec<C64>) -> Result<CoarseField> {
        self.check(layout)?;
        if numbers.len() != self.numbers(layout.subset) {
            return Err(Error::internal(format!(
                "a coarse field of {} numbers as {layout:?}",
                numbers.len()
            )));
        }
        let mut data = numbers;
        store(layout.precision, &mut data);
        Ok(CoarseField { layout, data })
    }

    fn numbers(&self, subset: Subset) -> usize {
        subset.sites(self.op.volume()) * self.op.dof
    }

    fn check(&self, layout: Layout) -> Result<()> {
        if layout.precision == Precision::Half {
            return Err(Error::invalid(
                "multigrid.precision",
                "a coarse level holds double or single fields, not half",
            ));
        }
        if layout.subset != Subset::Full && !self.op.even_odd_possible() {
            return Err(Error::internal(format!(
                "a coarse lattice {:?} with an odd extent has no half fields",
                self.op.lattice.dims
            )));
        }
        Ok(())
    }
}

fn store(p: Precision, v: &mut [C64]) {
    if p == Precision::Single {
        v.par_iter_mut().for_each(|z| *z = p.store(*z));
    }
}

impl Space for CoarseSpace {
    type Field = CoarseField;

    fn describe(&self) -> String {
        format!(
            "cpu coarse level ({} numbers a site on {:?})",
            self.op.dof, self.op.lattice.dims
        )
    }

    fn alloc_layout(&mut self, layout: Layout) -> Result<CoarseField> {
        self.check(layout)?;
        Ok(CoarseField {
            layout,
            data: vec![C64::new(0.0, 0.0); self.numbers(layout.subset)],
        })
    }

    fn layout(&self, field: &CoarseField) -> Layout {
        field.layout
    }

    fn upload(&mut self, _host: &SpinorField) -> Result<CoarseField> {
        Err(Error::internal("a coarse level holds no spinor fields"))
    }

    fn download(&mut self, _field: &CoarseField) -> Result<SpinorField> {
        Err(Error::internal("a coarse level holds no spinor fields"))
    }

    fn to_host(&mut self, field: &CoarseField) -> Result<Vec<C64>> {
        Ok(field.data.clone())
    }

    fn field_from_host(&mut self, numbers: Vec<C64>, layout: Layout) -> Result<CoarseField> {
        if layout.subset != Subset::Full {
            return Err(Error::internal(
                "a coarse field from the host is a full one",
            ));
        }
        self.field(layout, numbers)
    }

    fn set_zero(&mut self, x: &mut CoarseField) -> Result<()> {
        x.data.fill(C64::new(0.0, 0.0));
        Ok(())
    }

    fn copy(&mut self, dst: &mut CoarseField, src: &CoarseField) -> Result<()> {
        if dst.layout != src.layout {
            return Err(mismatch("copy", dst.layout, src.layout));
        }
        dst.data.copy_from_slice(&src.data);
        Ok(())
    }

    fn convert(&mut self, dst: &mut CoarseField, src: &CoarseField) -> Result<()> {
        let (ds, ss) = (dst.layout.subset, src.layout.subset);
        let n = self.op.dof;
        let l = &self.op.lattice;
        match (ds, ss) {
            _ if ds == ss => dst.data.copy_from_slice(&src.data),
            (Subset::Full, half) => {
                let p = half.parity().unwrap_or(0);
                for (cb, v) in src.data.chunks(n).enumerate() {
                    let x = l.checkerboard_site(p, cb);
                    dst.data[x * n..(x + 1) * n].copy_from_slice(v);
                }
            }
            (half, Subset::Full) => {
                let p = half.parity().unwrap_or(0);
                for (cb, v) in dst.data.chunks_mut(n).enumerate() {
                    let x = l.checkerboard_site(p, cb);
                    v.copy_from_slice(&src.data[x * n..(x + 1) * n]);
                }
            }
            _ => return Err(mismatch("convert", dst.layout, src.layout)),
        }
        store(dst.layout.precision, &mut dst.data);
        Ok(())
    }

    fn axpy(&mut self, a: C64, x: &CoarseField, y: &mut CoarseField) -> Result<()> {
        if x.layout != y.layout {
            return Err(mismatch("axpy", x.layout, y.layout));
        }
        let p = y.layout.precision;
        y.data
            .par_iter_mut()
            .zip(&x.data)
            .for_each(|(y, x)| *y = p.store(*y + a * *x));
        Ok(())
    }

    fn xpay(&mut self, x: &CoarseField, a: C64, y: &mut CoarseField) -> Result<()> {
        if x.layout != y.layout {
            return Err(mismatch("xpay", x.layout, y.layout));
        }
        let p = y.layout.precision;
        y.data
            .par_iter_mut()
            .zip(&x.data)
            .for_each(|(y, x)| *y = p.store(*x + a * *y));
        Ok(())
    }

    fn dot(&mut self, x: &CoarseField, y: &CoarseField) -> Result<C64> {
        if x.layout != y.layout {
            return Err(mismatch("dot", x.layout, y.layout));
        }
        let re = det_sum2(&x.data, &y.data, 0.0, |a, b| a.re * b.re + a.im * b.im);
        let im = det_sum2(&x.data, &y.data, 0.0, |a, b| a.re * b.im - a.im * b.re);
        Ok(C64::new(re, im))
    }

    fn norm2(&mut self, x: &CoarseField) -> Result<f64> {
        Ok(det_sum(&x.data, |a| a.norm_sqr()))
    }
}

/// The even-odd pieces of a coarse solve D_c x = b: the even right-hand side
/// b_e - Y_eo X_oo^-1 b_o, and x_o = X_oo^-1 (b_o - Y_oe x_e).
pub fn schur_source(op: &CoarseOp, b: &[C64]) -> Result<(Vec<C64>, Vec<C64>)> {
    let (b_e, b_o) = split(op, b);
    let mut xo_b = vec![C64::new(0.0, 0.0); b_o.len()];
    op.apply_site_half(1, &b_o, &mut xo_b, true)?;
    let mut rhs = b_e;
    op.hop_half(0, &xo_b, &mut rhs, C64::new(-1.0, 0.0), true);
    Ok((rhs, b_o))
}

/// The full solution from the even one and the odd source.
pub fn schur_reconstruct(op: &CoarseOp, x_e: &[C64], b_o: &[C64]) -> Result<Vec<C64>> {
    let mut r_o = b_o.to_vec();
    op.hop_half(1, x_e, &mut r_o, C64::new(-1.0, 0.0), true);
    let mut x_o = vec![C64::new(0.0, 0.0); r_o.len()];
    op.apply_site_half(1, &r_o, &mut x_o, true)?;
    let n = op.dof;
    let mut x = vec![C64::new(0.0, 0.0); op.volume() * n];
    for (p, half) in [(0, x_e), (1, &x_o[..])] {
        for (cb, v) in half.chunks(n).enumerate() {
            let s = op.lattice.checkerboard_site(p, cb);
            x[s * n..(s + 1) * n].copy_from_slice(v);
        }
    }
    Ok(x)
}

/// A full field's even and odd halves.
fn split(op: &CoarseOp, f: &[C64]) -> (Vec<C64>, Vec<C64>) {
    let n = op.dof;
    let half = |p: usize| -> Vec<C64> {
        (0..op.volume() / 2)
            .flat_map(|cb| {
                let s = op.lattice.checkerboard_site(p, cb);
                f[s * n..(s + 1) * n].iter().copied()
            })
            .collect()
    };
    (half(0), half(1))
}

impl CoarseLevelSpace for CoarseSpace {
    fn op(&self) -> &Arc<CoarseOp> {
        &self.op
    }

    fn apply_coarse(
        &mut self,
        schur: bool,
        out: &mut CoarseField,
        inp: &CoarseField,
    ) -> Result<()> {
        let want = if schur { Subset::Even } else { Subset::Full };
        if inp.layout.subset != want || out.layout != inp.layout {
            return Err(mismatch("coarse apply", out.layout, inp.layout));
        }
        if schur {
            let n = inp.data.len();
            for t in &mut self.tmp {
                t.resize(n, C64::new(0.0, 0.0));
            }
            self.op
                .apply_schur(&inp.data, &mut out.data, &mut self.tmp)?;
        } else {
            self.op.apply(&inp.data, &mut out.data);
        }
        store(out.layout.precision, &mut out.data);
        Ok(())
    }

    fn schur_source(&mut self, b: &CoarseField) -> Result<(CoarseField, CoarseField)> {
        let (rhs, b_o) = schur_source(&self.op, &b.data)?;
        let p = b.layout.precision;
        Ok((
            self.field(Layout::new(Subset::Even, p), rhs)?,
            self.field(Layout::new(Subset::Odd, p), b_o)?,
        ))
    }

    fn schur_reconstruct(&mut self, x_e: &CoarseField, b_o: &CoarseField) -> Result<CoarseField> {
        let x = schur_reconstruct(&self.op, &x_e.data, &b_o.data)?;
        self.field(Layout::new(Subset::Full, x_e.layout.precision), x)
    }
}

impl Coarsen for CoarseSpace {
    type Coarse = CoarseSpace;
    type Transfer = Arc<Prolongator>;

    fn coarse_space(&mut self, op: Arc<CoarseOp>, _precision: Precision) -> Result<CoarseSpace> {
        Ok(CoarseSpace::new(op))
    }

    fn transfer(&mut self, p: &Prolongator, _precision: Precision) -> Result<Arc<Prolongator>> {
        Ok(Arc::new(p.clone()))
    }

    fn restrict(
        &mut self,
        t: &Arc<Prolongator>,
        fine: &CoarseField,
        _coarse: &mut CoarseSpace,
        out: &mut CoarseField,
    ) -> Result<()> {
        t.restrict(&fine.data, &mut out.data);
        store(out.layout.precision, &mut out.data);
        Ok(())
    }

    fn prolong(
        &mut self,
        t: &Arc<Prolongator>,
        _coarse: &mut CoarseSpace,
        inp: &CoarseField,
        fine: &mut CoarseField,
    ) -> Result<()> {
        t.prolong(&inp.data, &mut fine.data);
        store(fine.layout.precision, &mut fine.data);
        Ok(())
    }
}

/// `Coarsen::restrict` for a fine space whose coarse levels live on the host: the fine
/// field through the host (`Space::to_host`), restricted there.
pub fn host_restrict<S: Space>(
    space: &mut S,
    p: &Prolongator,
    fine: &S::Field,
    out: &mut CoarseField,
) -> Result<()> {
    let f = space.to_host(fine)?;
    p.restrict(&f, &mut out.data);
    store(out.layout.precision, &mut out.data);
    Ok(())
}

/// `Coarsen::prolong` for a fine space whose coarse levels live on the host.
pub fn host_prolong<S: Space>(
    space: &mut S,
    p: &Prolongator,
    inp: &CoarseField,
    fine: &mut S::Field,
) -> Result<()> {
    let mut f = vec![C64::new(0.0, 0.0); p.aggregation.fine.volume() * p.fine_dof];
    p.prolong(&inp.data, &mut f);
    let layout = space.layout(fine);
    let field = space.field_from_host(f, layout)?;
    space.copy(fine, &field)
}

/// `Coarsen` for a backend whose coarse levels live on the host (`CoarseSpace`), through
/// `host_restrict` and `host_prolong`.
#[macro_export]
macro_rules! host_coarsen {
    ($($t:tt)*) => {
        impl $($t)* {
            type Coarse = $crate::backend::coarse::CoarseSpace;
            type Transfer = std::sync::Arc<$crate::dirac::coarse::Prolongator>;
            fn coarse_space(
                &mut self,
                op: std::sync::Arc<$crate::dirac::coarse::CoarseOp>,
                _precision: $crate::linalg::Precision,
            ) -> $crate::Result<Self::Coarse> {
                Ok($crate::backend::coarse::CoarseSpace::new(op))
            }
            fn transfer(
                &mut self,
                p: &$crate::dirac::coarse::Prolongator,
                _precision: $crate::linalg::Precision,
            ) -> $crate::Result<Self::Transfer> {
                Ok(std::sync::Arc::new(p.clone()))
            }
            fn restrict(
                &mut self,
                t: &Self::Transfer,
                fine: &Self::Field,
                _coarse: &mut Self::Coarse,
                out: &mut $crate::backend::coarse::CoarseField,
            ) -> $crate::Result<()> {
                $crate::backend::coarse::host_restrict(self, t, fine, out)
            }
            fn prolong(
                &mut self,
                t: &Self::Transfer,
                _coarse: &mut Self::Coarse,
                inp: &$crate::backend::coarse::CoarseField,
                fine: &mut Self::Field,
            ) -> $crate::Result<()> {
                $crate::backend::coarse::host_prolong(self, t, inp, fine)
            }
        }
    };
}
