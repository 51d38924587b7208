//! The CPU backend: host fields, the fast rayon operator, deterministic reductions.
//! Run it inside a rayon pool to choose the thread count; results are bitwise the same
//! for any count (see `crate::reduce`).

use super::{Backend, Operator};
use crate::dirac;
use crate::field::{GaugeField, SpinorField, C64};
use crate::reduce::det_sum2;
use crate::Result;
use rayon::prelude::*;

pub struct CpuBackend<'g> {
    pub gauge: &'g GaugeField,
    pub kappa: f64,
}

impl<'g> CpuBackend<'g> {
    pub fn new(gauge: &'g GaugeField, kappa: f64) -> Self {
        CpuBackend { gauge, kappa }
    }
}

impl Backend for CpuBackend<'_> {
    type Field = SpinorField;

    fn describe(&self) -> String {
        format!("cpu (rayon, {} threads)", rayon::current_num_threads())
    }

    fn alloc(&mut self) -> Result<SpinorField> {
        Ok(SpinorField::zeros(self.gauge.lattice.volume()))
    }

    fn upload(&mut self, host: &SpinorField) -> Result<SpinorField> {
        Ok(host.clone())
    }

    fn download(&mut self, field: &SpinorField) -> Result<SpinorField> {
        Ok(field.clone())
    }

    fn copy(&mut self, dst: &mut SpinorField, src: &SpinorField) -> Result<()> {
        dst.data
            .par_iter_mut()
            .zip(&src.data)
            .for_each(|(d, s)| *d = *s);
        Ok(())
    }

    fn apply(&mut self, op: Operator, out: &mut SpinorField, inp: &SpinorField) -> Result<()> {
        dirac::apply(op, self.gauge, self.kappa, inp, out);
        Ok(())
    }

    fn axpy(&mut self, a: C64, x: &SpinorField, y: &mut SpinorField) -> Result<()> {
        y.data
            .par_iter_mut()
            .zip(&x.data)
            .for_each(|(y, x)| *y += a * x);
        Ok(())
    }

    fn xpay(&mut self, x: &SpinorField, a: C64, y: &mut SpinorField) -> Result<()> {
        y.data
            .par_iter_mut()
            .zip(&x.data)
            .for_each(|(y, x)| *y = x + a * *y);
        Ok(())
    }

    fn dot(&mut self, x: &SpinorField, y: &SpinorField) -> Result<C64> {
        Ok(det_sum2(&x.data, &y.data, C64::new(0.0, 0.0), |a, b| {
            a.conj() * b
        }))
    }

    fn norm2(&mut self, x: &SpinorField) -> Result<f64> {
        Ok(x.norm2())
    }
}
