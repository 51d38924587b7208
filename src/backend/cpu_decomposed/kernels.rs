//! The Wilson forms on a rank: D, g5 D and the Schur forms through the halo's hopping
//! term, and the even-odd hop_xpay.

use super::rank::DecomposedCpu;
use super::space::DecomposedField;
use crate::backend::{layout_mismatch as mismatch, Operator, Subset, WilsonKernels};
use crate::comms::Comms;
use crate::{Error, Result};

impl<C: Comms> WilsonKernels for DecomposedCpu<C> {
    fn kappa(&self) -> f64 {
        self.kappa
    }

    fn apply(
        &mut self,
        op: Operator,
        out: &mut DecomposedField,
        inp: &DecomposedField,
    ) -> Result<()> {
        if out.layout != inp.layout {
            return Err(mismatch("apply", out.layout, inp.layout));
        }
        let psi = self.canonical(inp);
        let mut result = if op.is_schur() {
            if inp.layout.subset != Subset::Even {
                return Err(Error::internal(
                    "the Schur operator acts on even-site fields",
                ));
            }
            // M_ee = 1 - kappa^2 H_eo H_oe: two hops, two exchanges.
            let odd = self.hop(&psi, Some(0), Some(1))?;
            let mut even = self.hop(&odd, Some(1), Some(0))?;
            let k2 = self.kappa * self.kappa;
            for (o, i) in even.iter_mut().zip(&psi) {
                *o = *i - k2 * *o;
            }
            even
        } else {
            if inp.layout.subset != Subset::Full {
                return Err(Error::internal(format!(
                    "operator {op} acts on full-lattice fields"
                )));
            }
            let mut h = self.hop(&psi, None, None)?;
            for (o, i) in h.iter_mut().zip(&psi) {
                *o = *i - *o * self.kappa;
            }
            h
        };
        if op.gamma5() {
            Self::gamma5_in_place(&mut result);
        }
        self.assign(out, &result);
        Ok(())
    }

    fn hop_xpay(
        &mut self,
        out: &mut DecomposedField,
        inp: &DecomposedField,
        y: &DecomposedField,
        c: f64,
        gamma5: bool,
    ) -> Result<()> {
        let p = crate::linalg::hop_xpay_parity(out.layout, inp.layout, y.layout)?;
        let psi = self.canonical(inp);
        let mut h = self.hop(&psi, Some(1 - p), Some(p))?;
        let yf = self.canonical(y);
        for (o, yv) in h.iter_mut().zip(&yf) {
            *o = *yv + c * *o;
        }
        if gamma5 {
            Self::gamma5_in_place(&mut h);
        }
        self.assign(out, &h);
        Ok(())
    }
}
