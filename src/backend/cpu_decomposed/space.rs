//! The fields of the decomposed CPU backend and its `Space`: BLAS-1 on the local sites,
//! reductions summed over the ranks.

use super::rank::DecomposedCpu;
use crate::backend::{layout_mismatch as mismatch, Layout, Space, Subset};
use crate::comms::{global_sum, Comms};
use crate::field::gamma::GAMMA5_SIGN;
use crate::field::su3::ZERO;
use crate::field::{SpinorField, C64};
use crate::reduce::{det_sum, det_sum2};
use crate::{Error, Result};
use rayon::prelude::*;

/// A field of one rank: 12 complex numbers per local site in the canonical order; half
/// fields hold the local sites of one (global) parity in checkerboard order (cb = local
/// lexicographic index / 2). Single fields store every value rounded to f32, half fields
/// every site rounded to the 16-bit format (`linalg::half`).
pub struct DecomposedField {
    pub(super) layout: Layout,
    pub(super) data: Vec<C64>,
}

impl DecomposedField {
    pub fn layout(&self) -> Layout {
        self.layout
    }
}

impl<C: Comms> DecomposedCpu<C> {
    pub(super) fn volume(&self) -> usize {
        self.gauge.lattice.volume()
    }

    /// The field as a full local canonical field (zeros on the sites a half field lacks).
    pub(super) fn canonical(&self, f: &DecomposedField) -> Vec<C64> {
        match f.layout.subset.parity() {
            None => f.data.clone(),
            Some(p) => {
                let l = self.lattice();
                let mut out = vec![ZERO; 12 * l.volume()];
                for (cb, s) in f.data.chunks_exact(12).enumerate() {
                    let x = l.checkerboard_site(p, cb);
                    out[12 * x..12 * x + 12].copy_from_slice(s);
                }
                out
            }
        }
    }

    /// Write the sites of `f`'s subset from a full local canonical field, rounding to its
    /// precision.
    pub(super) fn assign(&self, f: &mut DecomposedField, full: &[C64]) {
        let prec = f.layout.precision;
        match f.layout.subset.parity() {
            None => {
                for (d, s) in f.data.iter_mut().zip(full) {
                    *d = prec.store(*s);
                }
            }
            Some(p) => {
                let l = &self.gauge.lattice;
                for (cb, d) in f.data.chunks_exact_mut(12).enumerate() {
                    let x = l.checkerboard_site(p, cb);
                    for (dk, sk) in d.iter_mut().zip(&full[12 * x..12 * x + 12]) {
                        *dk = prec.store(*sk);
                    }
                }
            }
        }
        prec.round_sites(&mut f.data);
    }

    pub(super) fn gamma5_in_place(v: &mut [C64]) {
        for s in v.chunks_exact_mut(12) {
            for (k, z) in s.iter_mut().enumerate() {
                *z *= GAMMA5_SIGN[k / 3];
            }
        }
    }
}

impl<C: Comms> Space for DecomposedCpu<C> {
    type Field = DecomposedField;

    fn describe(&self) -> String {
        format!(
            "cpu decomposed (rank {} of grid {:?}, local {}, {}, {})",
            self.partition.rank(),
            self.partition.grid,
            self.lattice().dims_string(),
            self.comms.describe(),
            crate::threads::count(rayon::current_num_threads())
        )
    }

    fn alloc_layout(&mut self, layout: Layout) -> Result<DecomposedField> {
        if layout.subset != Subset::Full {
            self.lattice().require_even("even-odd preconditioning")?;
        }
        Ok(DecomposedField {
            layout,
            data: vec![ZERO; 12 * layout.subset.sites(self.volume())],
        })
    }

    fn layout(&self, field: &DecomposedField) -> Layout {
        field.layout
    }

    /// `host` is this rank's part (`scatter_spinor`).
    fn upload(&mut self, host: &SpinorField) -> Result<DecomposedField> {
        if host.data.len() != 12 * self.volume() {
            return Err(Error::internal(format!(
                "upload: a field of {} sites on a rank of {} sites",
                host.volume(),
                self.volume()
            )));
        }
        Ok(DecomposedField {
            layout: Layout::FULL,
            data: host.data.clone(),
        })
    }

    /// This rank's part (`gather_spinor` puts the parts together).
    fn download(&mut self, field: &DecomposedField) -> Result<SpinorField> {
        Ok(SpinorField {
            data: self.canonical(field),
        })
    }

    fn set_zero(&mut self, x: &mut DecomposedField) -> Result<()> {
        x.data.fill(ZERO);
        Ok(())
    }

    fn copy(&mut self, dst: &mut DecomposedField, src: &DecomposedField) -> Result<()> {
        if dst.layout != src.layout {
            return Err(mismatch("copy", dst.layout, src.layout));
        }
        dst.data.copy_from_slice(&src.data);
        Ok(())
    }

    fn convert(&mut self, dst: &mut DecomposedField, src: &DecomposedField) -> Result<()> {
        let (ds, ss) = (dst.layout.subset, src.layout.subset);
        if !(ds == ss || ds == Subset::Full || ss == Subset::Full) {
            return Err(mismatch("convert", dst.layout, src.layout));
        }
        let full = self.canonical(src);
        if ds == Subset::Full && ss != Subset::Full {
            // Scatter: only the sites of src's parity change.
            let mut d = self.canonical(dst);
            let p = ss.parity().unwrap_or(0);
            let l = self.lattice();
            for x in (0..l.volume()).filter(|&x| l.parity(x) == p) {
                d[12 * x..12 * x + 12].copy_from_slice(&full[12 * x..12 * x + 12]);
            }
            self.assign(dst, &d);
        } else {
            self.assign(dst, &full);
        }
        Ok(())
    }

    fn axpy(&mut self, a: C64, x: &DecomposedField, y: &mut DecomposedField) -> Result<()> {
        if x.layout != y.layout {
            return Err(mismatch("axpy", x.layout, y.layout));
        }
        let prec = y.layout.precision;
        y.data
            .par_iter_mut()
            .zip(x.data.par_iter())
            .for_each(|(y, x)| *y = prec.store(*y + a * *x));
        prec.round_sites(&mut y.data);
        Ok(())
    }

    fn xpay(&mut self, x: &DecomposedField, a: C64, y: &mut DecomposedField) -> Result<()> {
        if x.layout != y.layout {
            return Err(mismatch("xpay", x.layout, y.layout));
        }
        let prec = y.layout.precision;
        y.data
            .par_iter_mut()
            .zip(x.data.par_iter())
            .for_each(|(y, x)| *y = prec.store(*x + a * *y));
        prec.round_sites(&mut y.data);
        Ok(())
    }

    fn dot(&mut self, x: &DecomposedField, y: &DecomposedField) -> Result<C64> {
        if x.layout != y.layout {
            return Err(mismatch("dot", x.layout, y.layout));
        }
        let re = det_sum2(&x.data, &y.data, 0.0, |a, b| a.re * b.re + a.im * b.im);
        let im = det_sum2(&x.data, &y.data, 0.0, |a, b| a.re * b.im - a.im * b.re);
        let s = global_sum(&mut self.comms, &[re, im])?;
        Ok(C64::new(s[0], s[1]))
    }

    fn norm2(&mut self, x: &DecomposedField) -> Result<f64> {
        let local = det_sum(&x.data, |a| a.norm_sqr());
        Ok(global_sum(&mut self.comms, &[local])?[0])
    }
}
