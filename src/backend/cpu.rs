//! The CPU backend: fields in the site-blocked layout of `dirac::simd` (converted on
//! upload/download), the vectorised rayon operator, BLAS-1 on the lanes and deterministic
//! reductions. Run it inside a rayon pool to choose the thread count; results are bitwise
//! the same for any count (fixed chunking, see `crate::reduce`).

use super::{layout_mismatch as mismatch, Layout, Operator, Prepare, Space, Subset, WilsonKernels};
use crate::dirac::clover::SiteTerms;
use crate::dirac::simd::lanes::{Lane, W};
use crate::dirac::simd::layout::{LaneGauge, LaneSpinor};
use crate::dirac::simd::{self, Isa};
use crate::dirac::{Action, Sites};
use crate::field::{GaugeField, SpinorField, C64};
use crate::reduce::det_sum2;
use crate::{Error, Result};
use rayon::prelude::*;

/// Complex groups (a re lane and an im lane, W numbers) per task in the BLAS-1 loops.
const GROUPS_PER_TASK: usize = 2048;

pub struct CpuBackend<'g> {
    pub gauge: &'g GaugeField,
    pub kappa: f64,
    /// The links in the blocked layout, built once; None when LX % 4 != 0 (scalar path).
    blocked: Option<LaneGauge>,
    /// The clover term and twist, when the action has them (applied through the
    /// spin-projected operator on canonical fields).
    site: Option<SiteTerms>,
}

impl<'g> CpuBackend<'g> {
    /// The plain Wilson operator.
    pub fn new(gauge: &'g GaugeField, kappa: f64) -> Self {
        CpuBackend {
            gauge,
            kappa,
            blocked: LaneGauge::new(gauge),
            site: None,
        }
    }

    /// Any action: plain Wilson exactly as `new`, or with its site term built here.
    pub fn with_action(gauge: &'g GaugeField, action: &Action) -> Result<Self> {
        let mut be = CpuBackend::new(gauge, action.kappa);
        if action.has_site_term() {
            be.site = Some(SiteTerms::new(gauge, action)?);
        }
        Ok(be)
    }

    /// Whether `apply` runs the vectorised kernel (else the scalar fallback).
    pub fn vectorised(&self) -> bool {
        self.blocked.is_some()
    }
}

/// A field as (re lane, im lane) pairs: W complex numbers each.
fn groups(f: &LaneSpinor) -> &[[Lane; 2]] {
    f.data.as_chunks::<2>().0
}

fn groups_mut(f: &mut LaneSpinor) -> &mut [[Lane; 2]] {
    f.data.as_chunks_mut::<2>().0
}

/// Per-lane partial sums of a complex reduction; lanes are combined in a fixed order at
/// the end, so vectorising the sum does not make it depend on the thread count.
#[derive(Clone, Copy, Default)]
struct LaneSum {
    re: [f64; W],
    im: [f64; W],
}

impl std::ops::Add for LaneSum {
    type Output = LaneSum;
    #[inline(always)]
    fn add(self, o: LaneSum) -> LaneSum {
        LaneSum {
            re: std::array::from_fn(|i| self.re[i] + o.re[i]),
            im: std::array::from_fn(|i| self.im[i] + o.im[i]),
        }
    }
}

impl LaneSum {
    fn total(self) -> C64 {
        let s = |v: [f64; W]| (v[0] + v[1]) + (v[2] + v[3]);
        C64::new(s(self.re), s(self.im))
    }
}

impl CpuBackend<'_> {
    fn lane_describe(&self) -> String {
        let kernel = match &self.blocked {
            Some(_) => format!("{} lanes", Isa::detect().name()),
            None => "scalar, LX % 4 != 0".to_string(),
        };
        format!(
            "cpu (rayon, {}, {kernel})",
            crate::threads::count(rayon::current_num_threads())
        )
    }

    fn lane_alloc(&mut self) -> Result<LaneSpinor> {
        Ok(LaneSpinor::zeros(self.gauge.lattice.volume()))
    }

    fn lane_upload(&mut self, host: &SpinorField) -> Result<LaneSpinor> {
        Ok(LaneSpinor::from_canonical(host))
    }

    fn lane_copy(&mut self, dst: &mut LaneSpinor, src: &LaneSpinor) -> Result<()> {
        dst.data
            .par_iter_mut()
            .zip(&src.data)
            .for_each(|(d, s)| *d = *s);
        Ok(())
    }

    fn lane_apply(&mut self, op: Operator, out: &mut LaneSpinor, inp: &LaneSpinor) -> Result<()> {
        simd::apply_lanes(op, self.gauge, self.blocked.as_ref(), self.kappa, inp, out);
        Ok(())
    }

    fn lane_axpy(&mut self, a: C64, x: &LaneSpinor, y: &mut LaneSpinor) -> Result<()> {
        // Same operations as `y += a * x` on C64 (no fused multiply-add): the blocked
        // field gives the bits the canonical one would.
        groups_mut(y)
            .par_chunks_mut(GROUPS_PER_TASK)
            .zip(groups(x).par_chunks(GROUPS_PER_TASK))
            .for_each(|(y, x)| {
                for ([yr, yi], [xr, xi]) in y.iter_mut().zip(x) {
                    for i in 0..W {
                        yr.0[i] += a.re * xr.0[i] - a.im * xi.0[i];
                        yi.0[i] += a.re * xi.0[i] + a.im * xr.0[i];
                    }
                }
            });
        Ok(())
    }

    fn lane_xpay(&mut self, x: &LaneSpinor, a: C64, y: &mut LaneSpinor) -> Result<()> {
        groups_mut(y)
            .par_chunks_mut(GROUPS_PER_TASK)
            .zip(groups(x).par_chunks(GROUPS_PER_TASK))
            .for_each(|(y, x)| {
                for ([yr, yi], [xr, xi]) in y.iter_mut().zip(x) {
                    for i in 0..W {
                        let (r, m) = (yr.0[i], yi.0[i]);
                        yr.0[i] = xr.0[i] + (a.re * r - a.im * m);
                        yi.0[i] = xi.0[i] + (a.re * m + a.im * r);
                    }
                }
            });
        Ok(())
    }

    fn lane_dot(&mut self, x: &LaneSpinor, y: &LaneSpinor) -> Result<C64> {
        let s = det_sum2(
            groups(x),
            groups(y),
            LaneSum::default(),
            |[xr, xi], [yr, yi]| LaneSum {
                re: std::array::from_fn(|i| xr.0[i] * yr.0[i] + xi.0[i] * yi.0[i]),
                im: std::array::from_fn(|i| xr.0[i] * yi.0[i] - xi.0[i] * yr.0[i]),
            },
        );
        Ok(s.total())
    }

    fn lane_norm2(&mut self, x: &LaneSpinor) -> Result<f64> {
        let g = groups(x);
        let s = det_sum2(g, g, LaneSum::default(), |[xr, xi], _| LaneSum {
            re: std::array::from_fn(|i| xr.0[i] * xr.0[i] + xi.0[i] * xi.0[i]),
            im: [0.0; W],
        });
        Ok(s.total().re)
    }
}

/// A field of the CPU backend. Full double-precision fields (the seed's solve) use the
/// vectorised site-blocked layout; every other layout (half lattices, single precision)
/// is kept plainly: 12 complex numbers per site in the canonical order, half fields in
/// checkerboard order (cb = lexicographic index / 2). Single precision is storage
/// precision: every value written to a single field is rounded to f32 (arithmetic in
/// f64), which is what mixed precision changes about the solve; half precision is the
/// same with every site rounded to the 16-bit format after each write (`linalg::half`).
/// The CPU stays the simple validator.
pub struct CpuField {
    layout: Layout,
    repr: Repr,
}

enum Repr {
    Lanes(LaneSpinor),
    Plain(Vec<C64>),
}

impl CpuField {
    pub fn layout(&self) -> Layout {
        self.layout
    }
}

impl CpuBackend<'_> {
    fn lattice(&self) -> &crate::geometry::lattice::Lattice {
        &self.gauge.lattice
    }

    /// The field as a full canonical field (zeros on the sites a half field lacks).
    fn canonical(&self, f: &CpuField) -> SpinorField {
        match &f.repr {
            Repr::Lanes(l) => l.to_canonical(),
            Repr::Plain(v) => match f.layout.subset.parity() {
                None => SpinorField { data: v.clone() },
                Some(p) => {
                    let l = self.lattice();
                    let mut out = SpinorField::zeros(l.volume());
                    for (cb, s) in v.chunks_exact(12).enumerate() {
                        let x = l.checkerboard_site(p, cb);
                        out.data[12 * x..12 * x + 12].copy_from_slice(s);
                    }
                    out
                }
            },
        }
    }

    /// Write the sites of `f`'s subset from a full canonical field, rounding to its
    /// precision.
    fn assign(&self, f: &mut CpuField, full: &SpinorField) {
        let layout = f.layout;
        match &mut f.repr {
            Repr::Lanes(l) => l.assign_canonical(full),
            Repr::Plain(v) => {
                match layout.subset.parity() {
                    None => {
                        for (d, s) in v.iter_mut().zip(&full.data) {
                            *d = layout.precision.store(*s);
                        }
                    }
                    Some(p) => {
                        let l = &self.gauge.lattice;
                        for (cb, d) in v.chunks_exact_mut(12).enumerate() {
                            let x = l.checkerboard_site(p, cb);
                            for (dk, sk) in d.iter_mut().zip(&full.data[12 * x..12 * x + 12]) {
                                *dk = layout.precision.store(*sk);
                            }
                        }
                    }
                }
                layout.precision.round_sites(v);
            }
        }
    }

    fn require_half_lattice(&self) -> Result<()> {
        self.lattice().require_even("even-odd preconditioning")
    }

    /// D or g5 D on a full canonical field: the fast operator, plus the site term when
    /// there is one (A psi - kappa H psi).
    fn full_apply(&self, op: Operator, full: &SpinorField, adjoint: bool) -> SpinorField {
        let mut r = SpinorField::zeros(full.volume());
        let Some(terms) = &self.site else {
            crate::dirac::apply(op, self.gauge, self.kappa, full, &mut r);
            return r;
        };
        crate::dirac::fast::hop(self.gauge, full, &mut r, Sites::All);
        let mut out = terms.apply(self.lattice(), full, None, false, adjoint);
        for (o, h) in out.data.iter_mut().zip(&r.data) {
            *o -= self.kappa * *h;
        }
        if op.gamma5() {
            out.gamma5()
        } else {
            out
        }
    }

    /// The Schur operator M_ee = A_ee - kappa^2 H_eo A_oo^-1 H_oe (A = 1 without a site
    /// term; times g5 for the Hermitian form) on an even field, in double through
    /// full-lattice temporaries.
    fn schur(&self, gamma5: bool, inp: &SpinorField, adjoint: bool) -> SpinorField {
        let v = self.lattice().volume();
        let mut odd = SpinorField::zeros(v);
        crate::dirac::fast::hop(self.gauge, inp, &mut odd, Sites::Parity(1));
        if let Some(terms) = &self.site {
            odd = terms.apply(self.lattice(), &odd, Some(1), true, adjoint);
        }
        let mut even = SpinorField::zeros(v);
        crate::dirac::fast::hop(self.gauge, &odd, &mut even, Sites::Parity(0));
        let k2 = self.kappa * self.kappa;
        if let Some(terms) = &self.site {
            let a = terms.apply(self.lattice(), inp, Some(0), false, adjoint);
            for (o, i) in even.data.iter_mut().zip(&a.data) {
                *o = *i - k2 * *o;
            }
        } else {
            for (o, i) in even.data.iter_mut().zip(&inp.data) {
                *o = *i - k2 * *o;
            }
        }
        if gamma5 {
            even.gamma5()
        } else {
            even
        }
    }
}

impl CpuBackend<'_> {
    /// `apply` through canonical fields (every layout but the full double one of plain
    /// Wilson); `adjoint`: with the site term's adjoint (`WilsonKernels::apply_adjoint`).
    fn apply_canonical(
        &mut self,
        op: Operator,
        out: &mut CpuField,
        inp: &CpuField,
        adjoint: bool,
    ) -> Result<()> {
        let full = self.canonical(inp);
        let result = if op.is_schur() {
            if inp.layout.subset != Subset::Even {
                return Err(Error::internal(
                    "the Schur operator acts on even-site fields",
                ));
            }
            self.schur(op.gamma5(), &full, adjoint)
        } else {
            if inp.layout.subset != Subset::Full {
                return Err(Error::internal(format!(
                    "operator {op} acts on full-lattice fields"
                )));
            }
            self.full_apply(op, &full, adjoint)
        };
        self.assign(out, &result);
        Ok(())
    }
}

impl Space for CpuBackend<'_> {
    type Field = CpuField;

    fn describe(&self) -> String {
        self.lane_describe()
    }

    fn alloc_layout(&mut self, layout: Layout) -> Result<CpuField> {
        if layout == Layout::FULL {
            return Ok(CpuField {
                layout: Layout::FULL,
                repr: Repr::Lanes(self.lane_alloc()?),
            });
        }
        if layout.subset != Subset::Full {
            self.require_half_lattice()?;
        }
        let n = layout.subset.sites(self.lattice().volume()) * 12;
        Ok(CpuField {
            layout,
            repr: Repr::Plain(vec![C64::new(0.0, 0.0); n]),
        })
    }

    fn layout(&self, field: &CpuField) -> Layout {
        field.layout
    }

    fn upload(&mut self, host: &SpinorField) -> Result<CpuField> {
        Ok(CpuField {
            layout: Layout::FULL,
            repr: Repr::Lanes(self.lane_upload(host)?),
        })
    }

    fn download(&mut self, field: &CpuField) -> Result<SpinorField> {
        Ok(self.canonical(field))
    }

    fn set_zero(&mut self, x: &mut CpuField) -> Result<()> {
        match &mut x.repr {
            Repr::Lanes(l) => l.data.par_iter_mut().for_each(|d| *d = Lane([0.0; W])),
            Repr::Plain(v) => v.fill(C64::new(0.0, 0.0)),
        }
        Ok(())
    }

    fn copy(&mut self, dst: &mut CpuField, src: &CpuField) -> Result<()> {
        match (&mut dst.repr, &src.repr) {
            (Repr::Lanes(d), Repr::Lanes(s)) => self.lane_copy(d, s),
            (Repr::Plain(d), Repr::Plain(s)) if dst.layout == src.layout => {
                d.copy_from_slice(s);
                Ok(())
            }
            _ => Err(mismatch("copy", dst.layout, src.layout)),
        }
    }

    fn convert(&mut self, dst: &mut CpuField, src: &CpuField) -> Result<()> {
        let (ds, ss) = (dst.layout.subset, src.layout.subset);
        let ok = ds == ss || ds == Subset::Full || ss == Subset::Full;
        if !ok {
            return Err(mismatch("convert", dst.layout, src.layout));
        }
        let full = self.canonical(src);
        if ds == Subset::Full && ss != Subset::Full {
            // Scatter: only the sites of src's parity change.
            let mut d = self.canonical(dst);
            let p = ss.parity().unwrap();
            let l = self.lattice();
            for x in 0..l.volume() {
                if l.parity(x) == p {
                    d.data[12 * x..12 * x + 12].copy_from_slice(&full.data[12 * x..12 * x + 12]);
                }
            }
            self.assign(dst, &d);
        } else {
            self.assign(dst, &full);
        }
        Ok(())
    }

    fn axpy(&mut self, a: C64, x: &CpuField, y: &mut CpuField) -> Result<()> {
        let prec = y.layout.precision;
        match (&x.repr, &mut y.repr) {
            (Repr::Lanes(x), Repr::Lanes(y)) => self.lane_axpy(a, x, y),
            (Repr::Plain(xv), Repr::Plain(yv)) if x.layout == y.layout => {
                yv.par_iter_mut()
                    .zip(xv.par_iter())
                    .for_each(|(y, x)| *y = prec.store(*y + a * *x));
                prec.round_sites(yv);
                Ok(())
            }
            _ => Err(mismatch("axpy", x.layout, y.layout)),
        }
    }

    fn xpay(&mut self, x: &CpuField, a: C64, y: &mut CpuField) -> Result<()> {
        let prec = y.layout.precision;
        match (&x.repr, &mut y.repr) {
            (Repr::Lanes(x), Repr::Lanes(y)) => self.lane_xpay(x, a, y),
            (Repr::Plain(xv), Repr::Plain(yv)) if x.layout == y.layout => {
                yv.par_iter_mut()
                    .zip(xv.par_iter())
                    .for_each(|(y, x)| *y = prec.store(*x + a * *y));
                prec.round_sites(yv);
                Ok(())
            }
            _ => Err(mismatch("xpay", x.layout, y.layout)),
        }
    }

    fn dot(&mut self, x: &CpuField, y: &CpuField) -> Result<C64> {
        match (&x.repr, &y.repr) {
            (Repr::Lanes(x), Repr::Lanes(y)) => self.lane_dot(x, y),
            (Repr::Plain(xv), Repr::Plain(yv)) if x.layout == y.layout => {
                let re = crate::reduce::det_sum2(xv, yv, 0.0, |a, b| a.re * b.re + a.im * b.im);
                let im = crate::reduce::det_sum2(xv, yv, 0.0, |a, b| a.re * b.im - a.im * b.re);
                Ok(C64::new(re, im))
            }
            _ => Err(mismatch("dot", x.layout, y.layout)),
        }
    }

    fn norm2(&mut self, x: &CpuField) -> Result<f64> {
        match &x.repr {
            Repr::Lanes(l) => self.lane_norm2(l),
            Repr::Plain(v) => Ok(crate::reduce::det_sum(v, |a| a.norm_sqr())),
        }
    }
}

impl WilsonKernels for CpuBackend<'_> {
    fn kappa(&self) -> f64 {
        self.kappa
    }

    fn apply(&mut self, op: Operator, out: &mut CpuField, inp: &CpuField) -> Result<()> {
        if out.layout != inp.layout {
            return Err(mismatch("apply", out.layout, inp.layout));
        }
        if let (Repr::Lanes(o), Repr::Lanes(i), None) = (&mut out.repr, &inp.repr, &self.site) {
            if op.is_schur() {
                return Err(Error::internal(
                    "the Schur operator acts on even-site fields, not full ones",
                ));
            }
            return self.lane_apply(op, o, i);
        }
        self.apply_canonical(op, out, inp, false)
    }

    fn apply_adjoint(&mut self, op: Operator, out: &mut CpuField, inp: &CpuField) -> Result<()> {
        if self.site.as_ref().is_none_or(|t| t.twist == 0.0) {
            return self.apply(op, out, inp);
        }
        if out.layout != inp.layout {
            return Err(mismatch("apply_adjoint", out.layout, inp.layout));
        }
        self.apply_canonical(op, out, inp, true)
    }

    fn hop_xpay(
        &mut self,
        out: &mut CpuField,
        inp: &CpuField,
        y: &CpuField,
        c: f64,
        gamma5: bool,
    ) -> Result<()> {
        let p = crate::linalg::hop_xpay_parity(out.layout, inp.layout, y.layout)?;
        let full = self.canonical(inp);
        let mut h = SpinorField::zeros(full.volume());
        crate::dirac::fast::hop(self.gauge, &full, &mut h, Sites::Parity(p));
        let yf = self.canonical(y);
        for (o, yv) in h.data.iter_mut().zip(&yf.data) {
            *o = *yv + c * *o;
        }
        let h = if gamma5 { h.gamma5() } else { h };
        self.assign(out, &h);
        Ok(())
    }

    fn has_site_term(&self) -> bool {
        self.site.is_some()
    }

    fn site_inverse(&mut self, out: &mut CpuField, inp: &CpuField) -> Result<()> {
        let (Some(terms), Some(p)) = (&self.site, inp.layout.subset.parity()) else {
            return Err(Error::internal(
                "site_inverse needs a site term and a half field",
            ));
        };
        if out.layout != inp.layout {
            return Err(mismatch("site_inverse", out.layout, inp.layout));
        }
        let r = terms.apply(self.lattice(), &self.canonical(inp), Some(p), true, false);
        self.assign(out, &r);
        Ok(())
    }
}

impl super::host_cr::HostFusedCr for CpuBackend<'_> {}

crate::host_coarsen!(<'g> crate::dirac::coarse::Coarsen for CpuBackend<'g>);

impl Prepare for CpuBackend<'_> {
    fn prepare(&mut self, _layout: Layout, _fused: bool) -> Result<()> {
        Ok(())
    }
}
