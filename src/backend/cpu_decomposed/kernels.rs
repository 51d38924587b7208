//! The Wilson forms on a rank: D, g5 D and the Schur forms through the halo's hopping
//! term, and the even-odd hop_xpay; with a site term A (the clover term, a twist) the
//! forms of the single-device `CpuBackend`: D = A - kappa H, the asymmetric Schur form
//! M_ee = A_ee - kappa^2 H_eo A_oo^-1 H_oe, `site_inverse` and `apply_adjoint` (A^dag).
//! A is site-local: no exchange beyond the hops'. Without a site term the code is the
//! plain Wilson one, unchanged.

use super::rank::DecomposedCpu;
use super::space::DecomposedField;
use crate::backend::{layout_mismatch as mismatch, Operator, Subset, WilsonKernels};
use crate::comms::Comms;
use crate::dirac::clover::SiteTerms;
use crate::field::su3::ZERO;
use crate::field::C64;
use crate::geometry::lattice::Lattice;
use crate::{Error, Result};
use rayon::prelude::*;

/// A psi (`inverse`: A^-1 psi; `adjoint`: with A^dag) on the local sites of `parity` (all
/// when None; zero elsewhere) of a full local canonical field: `SiteTerms::apply` on a
/// rank's slice.
fn site_term(
    l: &Lattice,
    terms: &SiteTerms,
    psi: &[C64],
    parity: Option<usize>,
    inverse: bool,
    adjoint: bool,
) -> Vec<C64> {
    let mut out = vec![ZERO; psi.len()];
    out.par_chunks_mut(12)
        .zip(psi.par_chunks(12))
        .enumerate()
        .for_each(|(x, (o, p))| {
            if parity.is_none_or(|q| l.parity(x) == q) {
                terms.apply_site(x, p, o, inverse, adjoint);
            }
        });
    out
}

impl<C: Comms> DecomposedCpu<C> {
    /// `apply`, with the site term's adjoint when `adjoint` (`apply_adjoint`).
    fn apply_with(
        &mut self,
        op: Operator,
        out: &mut DecomposedField,
        inp: &DecomposedField,
        adjoint: bool,
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
            // M_ee = A_ee - kappa^2 H_eo A_oo^-1 H_oe (A = 1 without a site term): two
            // hops, two exchanges.
            let mut odd = self.hop(&psi, Some(0), Some(1))?;
            if let Some(terms) = &self.site {
                odd = site_term(self.lattice(), terms, &odd, Some(1), true, adjoint);
            }
            let mut even = self.hop(&odd, Some(1), Some(0))?;
            let k2 = self.kappa * self.kappa;
            let a_psi = self
                .site
                .as_ref()
                .map(|terms| site_term(self.lattice(), terms, &psi, Some(0), false, adjoint));
            for (o, i) in even.iter_mut().zip(a_psi.as_deref().unwrap_or(&psi)) {
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
            match &self.site {
                None => {
                    for (o, i) in h.iter_mut().zip(&psi) {
                        *o = *i - *o * self.kappa;
                    }
                }
                Some(terms) => {
                    let a = site_term(self.lattice(), terms, &psi, None, false, adjoint);
                    for (o, a) in h.iter_mut().zip(&a) {
                        *o = *a - self.kappa * *o;
                    }
                }
            }
            h
        };
        if op.gamma5() {
            Self::gamma5_in_place(&mut result);
        }
        self.assign(out, &result);
        Ok(())
    }
}

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
        self.apply_with(op, out, inp, false)
    }

    fn apply_adjoint(
        &mut self,
        op: Operator,
        out: &mut DecomposedField,
        inp: &DecomposedField,
    ) -> Result<()> {
        if self.site.as_ref().is_none_or(|t| t.twist == 0.0) {
            return self.apply_with(op, out, inp, false);
        }
        if out.layout != inp.layout {
            return Err(mismatch("apply_adjoint", out.layout, inp.layout));
        }
        self.apply_with(op, out, inp, true)
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

    fn has_site_term(&self) -> bool {
        self.site.is_some()
    }

    fn site_inverse(&mut self, out: &mut DecomposedField, inp: &DecomposedField) -> Result<()> {
        let (Some(terms), Some(p)) = (&self.site, inp.layout.subset.parity()) else {
            return Err(Error::internal(
                "site_inverse needs a site term and a half field",
            ));
        };
        if out.layout != inp.layout {
            return Err(mismatch("site_inverse", out.layout, inp.layout));
        }
        let r = site_term(
            self.lattice(),
            terms,
            &self.canonical(inp),
            Some(p),
            true,
            false,
        );
        self.assign(out, &r);
        Ok(())
    }
}
