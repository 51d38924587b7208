//! Projection of a 3x3 complex matrix onto SU(3), as QUDA's APE smearing does it: the
//! unitary polar factor by Newton's iteration, then the determinant's phase divided out.
//!
//! For X = V P (V unitary, P = (X^+ X)^{1/2} positive), V is the unitary matrix that
//! maximises Re Tr(V X^+) over U(3). It is reached by Newton's iteration
//! `V <- (zeta V + (zeta V)^{-+}) / 2` (Higham's scaled form, `zeta` a positive real, which
//! converges quadratically), then `W = V det(V)^{-1/3}` with the principal cube root. Every
//! step commutes with X -> G X H^+ for unitary G, H (the inverse, the adjoint and positive
//! multiples do), and det V is invariant, so the projection is exactly gauge covariant.

use super::matrix::{add, frobenius, inverse, scale_re, sub};
use crate::field::su3::{Su3, C64};

/// Newton steps after which the iteration stops even if not converged: a safeguard (the
/// scaled iteration converges quadratically for any invertible matrix).
const MAX_STEPS: usize = 100;
/// A step smaller than this (Frobenius norm) ends the iteration: the error after it is
/// about its square, below double rounding.
const CONVERGED: f64 = 1e-8;
/// Steps larger than this are scaled (Higham's Frobenius-norm scaling); near convergence
/// the unscaled step is used (its quadratic convergence needs no help).
const SCALE_ABOVE: f64 = 1e-2;

/// The SU(3) matrix W = V det(V)^{-1/3} of the unitary polar factor V of `x`. A singular
/// or non-finite `x` (no polar factor) falls back to Gram-Schmidt (`Su3::reunitarise`).
pub fn project_su3(x: &Su3) -> Su3 {
    match polar_unitary(x) {
        Some(v) => remove_det_phase(&v),
        None => x.reunitarise(),
    }
}

/// The unitary polar factor of `x`, or `None` when an iterate has no inverse.
pub fn polar_unitary(x: &Su3) -> Option<Su3> {
    let mut v = *x;
    let mut step = f64::INFINITY;
    for _ in 0..MAX_STEPS {
        let inv = inverse(&v)?;
        let zeta = if step > SCALE_ABOVE {
            (frobenius(&inv) / frobenius(&v)).sqrt()
        } else {
            1.0
        };
        let next = scale_re(
            &add(&scale_re(&v, zeta), &scale_re(&inv.dagger(), 1.0 / zeta)),
            0.5,
        );
        step = frobenius(&sub(&next, &v));
        v = next;
        if step < CONVERGED {
            return Some(v);
        }
    }
    Some(v)
}

/// v det(v)^{-1/3}, the principal cube root of the determinant's phase removed (det v is
/// a phase for unitary v; its modulus is divided out too, to rounding a no-op).
fn remove_det_phase(v: &Su3) -> Su3 {
    let det = v.det();
    let factor = C64::from_polar(det.norm().powf(-1.0 / 3.0), -det.arg() / 3.0);
    super::matrix::scale(v, factor)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Stream;

    fn gaussian_matrix(s: &mut Stream) -> Su3 {
        Su3(std::array::from_fn(|_| {
            std::array::from_fn(|_| C64::new(s.gaussian(), s.gaussian()))
        }))
    }

    #[test]
    fn the_polar_factor_is_unitary_and_maximises_the_trace() {
        let mut s = Stream::new(21, 0);
        for _ in 0..50 {
            let x = gaussian_matrix(&mut s);
            let v = polar_unitary(&x).unwrap();
            // Unitary: V V^+ = 1 to rounding.
            let vv = v.mul(&v.dagger());
            assert!(vv.max_abs_diff(&Su3::identity()) < 1e-13, "{vv:?}");
            // The polar decomposition: P = V^+ X is Hermitian positive, so Re Tr(V^+ X)
            // = Tr P is the sum of X's singular values and at least Re Tr(U^+ X) for any
            // unitary U (von Neumann's trace inequality); checked against random SU(3).
            let p = v.dagger().mul(&x);
            assert!(p.max_abs_diff(&p.dagger()) < 1e-12, "P Hermitian");
            let best = p.trace().re;
            for _ in 0..20 {
                let u = Su3::random(&mut s);
                assert!(u.dagger().mul(&x).trace().re <= best + 1e-12);
            }
            // The projection is SU(3).
            assert!(project_su3(&x).unitarity_deviation() < 1e-13);
        }
    }

    #[test]
    fn an_su3_matrix_times_a_positive_number_projects_to_itself() {
        // Analytic: X = c U (c > 0, U in SU(3)) has V = U, det V = 1.
        let mut s = Stream::new(22, 0);
        let u = Su3::random(&mut s);
        let w = project_su3(&scale_re(&u, 3.7));
        assert!(w.max_abs_diff(&u) < 1e-14, "{}", w.max_abs_diff(&u));
    }
}
