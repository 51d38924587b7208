//! Even-odd (Schur) preconditioning as a wrapper around any solve (conventions.md,
//! Even-odd): with D = [[A_ee, -k H_eo], [-k H_oe, A_oo]] (A = 1 for plain Wilson; the
//! clover term and the twist otherwise), in the asymmetric form:
//!
//! ```text
//! prepare:     rhs_e = [g5] (b_e + kappa H_eo A_oo^-1 b_o)
//! solve:       [g5] M_ee x_e = rhs_e,  M_ee = A_ee - kappa^2 H_eo A_oo^-1 H_oe
//! reconstruct: x_o = A_oo^-1 (b_o + kappa H_oe x_e)
//! ```
//!
//! With A = 1 the A_oo^-1 steps are skipped, not applied as identities.

use crate::linalg::{Layout, Precision, Subset, WilsonKernels};
use crate::Result;

/// The even-site right-hand side (g5 applied when `gamma5`) and b_o, from a full double
/// source b (of D x = b).
pub fn prepare<S: WilsonKernels>(
    space: &mut S,
    source: &S::Field,
    gamma5: bool,
) -> Result<(S::Field, S::Field)> {
    let even = Layout::new(Subset::Even, Precision::Double);
    let odd = Layout::new(Subset::Odd, Precision::Double);
    let mut b_e = space.alloc_layout(even)?;
    let mut b_o = space.alloc_layout(odd)?;
    space.convert(&mut b_e, source)?;
    space.convert(&mut b_o, source)?;
    let mut rhs_e = space.alloc_layout(even)?;
    let kappa = space.kappa();
    if space.has_site_term() {
        let mut t_o = space.alloc_layout(odd)?;
        space.site_inverse(&mut t_o, &b_o)?;
        space.hop_xpay(&mut rhs_e, &t_o, &b_e, kappa, gamma5)?;
    } else {
        space.hop_xpay(&mut rhs_e, &b_o, &b_e, kappa, gamma5)?;
    }
    Ok((rhs_e, b_o))
}

/// The full solution from x_e and b_o.
pub fn reconstruct<S: WilsonKernels>(
    space: &mut S,
    x_e: &S::Field,
    b_o: &S::Field,
) -> Result<S::Field> {
    let mut x_o = space.alloc_layout(space.layout(b_o))?;
    let kappa = space.kappa();
    space.hop_xpay(&mut x_o, x_e, b_o, kappa, false)?;
    if space.has_site_term() {
        let mut t_o = space.alloc_layout(space.layout(b_o))?;
        space.site_inverse(&mut t_o, &x_o)?;
        x_o = t_o;
    }
    let mut x = space.alloc()?;
    space.convert(&mut x, x_e)?;
    space.convert(&mut x, &x_o)?;
    Ok(x)
}
