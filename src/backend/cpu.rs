//! The CPU backend: fields in the site-blocked layout of `dirac::simd` (converted on
//! upload/download), the vectorised rayon operator, BLAS-1 on the lanes and deterministic
//! reductions. Run it inside a rayon pool to choose the thread count; results are bitwise
//! the same for any count (fixed chunking, see `crate::reduce`).

use super::{Backend, Operator};
use crate::dirac::simd::{self, Isa, Lane, LaneGauge, LaneSpinor, W};
use crate::field::{GaugeField, SpinorField, C64};
use crate::reduce::det_sum2;
use crate::Result;
use rayon::prelude::*;

/// Complex groups (a re lane and an im lane, W numbers) per task in the BLAS-1 loops.
const GROUPS_PER_TASK: usize = 2048;

pub struct CpuBackend<'g> {
    pub gauge: &'g GaugeField,
    pub kappa: f64,
    /// The links in the blocked layout, built once; None when LX % 4 != 0 (scalar path).
    blocked: Option<LaneGauge>,
}

impl<'g> CpuBackend<'g> {
    pub fn new(gauge: &'g GaugeField, kappa: f64) -> Self {
        CpuBackend {
            gauge,
            kappa,
            blocked: LaneGauge::new(gauge),
        }
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

impl Backend for CpuBackend<'_> {
    type Field = LaneSpinor;

    fn describe(&self) -> String {
        let kernel = match &self.blocked {
            Some(_) => format!("{} lanes", Isa::detect().name()),
            None => "scalar, LX % 4 != 0".to_string(),
        };
        format!(
            "cpu (rayon, {} threads, {kernel})",
            rayon::current_num_threads()
        )
    }

    fn alloc(&mut self) -> Result<LaneSpinor> {
        Ok(LaneSpinor::zeros(self.gauge.lattice.volume()))
    }

    fn upload(&mut self, host: &SpinorField) -> Result<LaneSpinor> {
        Ok(LaneSpinor::from_canonical(host))
    }

    fn download(&mut self, field: &LaneSpinor) -> Result<SpinorField> {
        Ok(field.to_canonical())
    }

    fn copy(&mut self, dst: &mut LaneSpinor, src: &LaneSpinor) -> Result<()> {
        dst.data
            .par_iter_mut()
            .zip(&src.data)
            .for_each(|(d, s)| *d = *s);
        Ok(())
    }

    fn apply(&mut self, op: Operator, out: &mut LaneSpinor, inp: &LaneSpinor) -> Result<()> {
        simd::apply_lanes(op, self.gauge, self.blocked.as_ref(), self.kappa, inp, out);
        Ok(())
    }

    fn axpy(&mut self, a: C64, x: &LaneSpinor, y: &mut LaneSpinor) -> Result<()> {
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

    fn xpay(&mut self, x: &LaneSpinor, a: C64, y: &mut LaneSpinor) -> Result<()> {
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

    fn dot(&mut self, x: &LaneSpinor, y: &LaneSpinor) -> Result<C64> {
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

    fn norm2(&mut self, x: &LaneSpinor) -> Result<f64> {
        let g = groups(x);
        let s = det_sum2(g, g, LaneSum::default(), |[xr, xi], _| LaneSum {
            re: std::array::from_fn(|i| xr.0[i] * xr.0[i] + xi.0[i] * xi.0[i]),
            im: [0.0; W],
        });
        Ok(s.total().re)
    }
}
