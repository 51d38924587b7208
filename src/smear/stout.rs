//! Stout smearing (Morningstar and Peardon, Phys. Rev. D 69 (2004) 054501): the link
//! U' = exp(iQ) U with Q the traceless Hermitian part of rho C U^+, C the sum of staples,
//! and the exact exponential of iQ by the Cayley-Hamilton theorem (their eqs. 29-44).

use super::matrix::{add, scale, scale_re, sub};
use crate::field::su3::{Su3, C64};

/// Below this c1 = Tr(Q^2)/2 the exponential is its series to second order (error below
/// |Q|^3 / 6 < 1e-36): the closed form divides by 9u^2 - w^2, of order c1.
const SMALL_C1: f64 = 1e-24;
/// Below this |w| the function sin(w)/w is its Taylor series to w^6 (error below
/// w^8 / 9! = 1e-16 at w = 0.05).
const SMALL_W: f64 = 0.05;

/// The stout link exp(iQ) U for the staple sum `staples` (C = rho * staples):
/// Omega = C U^+, Q = (i/2)(Omega^+ - Omega) - (i/6) Tr(Omega^+ - Omega).
pub fn stout_link(u: &Su3, staples: &Su3, rho: f64) -> Su3 {
    let omega = scale_re(staples, rho).mul(&u.dagger());
    exp_i(&traceless_hermitian_part(&omega)).mul(u)
}

/// Q = (i/2)(Omega^+ - Omega) - (i/6) Tr(Omega^+ - Omega) 1: Hermitian and traceless.
pub fn traceless_hermitian_part(omega: &Su3) -> Su3 {
    let d = sub(&omega.dagger(), omega);
    let mut q = scale(&d, C64::new(0.0, 0.5));
    let t = C64::new(0.0, 1.0 / 6.0) * d.trace();
    for k in 0..3 {
        q.0[k][k] -= t;
    }
    q
}

/// exp(iQ) = f0 + f1 Q + f2 Q^2 for a Hermitian traceless Q (Cayley-Hamilton; the f_j
/// from Morningstar-Peardon's eqs. 29-34 with c0 = det Q >= 0, and their symmetry
/// f_j(-c0) = (-1)^j f_j(c0)^* for c0 < 0).
pub fn exp_i(q: &Su3) -> Su3 {
    let q2 = q.mul(q);
    let f = exp_coefficients(q.det().re, 0.5 * q2.trace().re);
    let mut e = add(&scale(q, f[1]), &scale(&q2, f[2]));
    for k in 0..3 {
        e.0[k][k] += f[0];
    }
    e
}

/// [f0, f1, f2] of exp(iQ) for c0 = det Q and c1 = Tr(Q^2)/2.
pub fn exp_coefficients(c0: f64, c1: f64) -> [C64; 3] {
    if c1 < SMALL_C1 {
        // exp(iQ) = 1 + iQ - Q^2/2 + O(|Q|^3).
        return [C64::new(1.0, 0.0), C64::new(0.0, 1.0), C64::new(-0.5, 0.0)];
    }
    let f = coefficients_nonnegative(c0.abs(), c1);
    if c0 < 0.0 {
        [f[0].conj(), -f[1].conj(), f[2].conj()]
    } else {
        f
    }
}

/// The f_j for c0 >= 0: theta = arccos(c0 / c0_max), u = sqrt(c1/3) cos(theta/3),
/// w = sqrt(c1) sin(theta/3), f_j = h_j / (9u^2 - w^2) (which is at least 2 c1 here,
/// as theta/3 lies in [0, pi/6]).
fn coefficients_nonnegative(c0: f64, c1: f64) -> [C64; 3] {
    let c0_max = 2.0 * (c1 / 3.0).powf(1.5);
    let theta = (c0 / c0_max).clamp(-1.0, 1.0).acos();
    let u = (c1 / 3.0).sqrt() * (theta / 3.0).cos();
    let w = c1.sqrt() * (theta / 3.0).sin();
    let (u2, w2) = (u * u, w * w);
    let (cw, xi0) = (w.cos(), sin_over(w));
    let e2iu = C64::from_polar(1.0, 2.0 * u);
    let emiu = C64::from_polar(1.0, -u);
    let i = C64::new(0.0, 1.0);
    let h0 = e2iu * (u2 - w2) + emiu * (8.0 * u2 * cw + i * (2.0 * u * (3.0 * u2 + w2) * xi0));
    let h1 = e2iu * (2.0 * u) - emiu * (2.0 * u * cw - i * ((3.0 * u2 - w2) * xi0));
    let h2 = e2iu - emiu * (cw + i * (3.0 * u * xi0));
    let d = 9.0 * u2 - w2;
    [h0 / d, h1 / d, h2 / d]
}

/// sin(w) / w, by its series near 0.
fn sin_over(w: f64) -> f64 {
    if w.abs() < SMALL_W {
        let w2 = w * w;
        1.0 - w2 / 6.0 * (1.0 - w2 / 20.0 * (1.0 - w2 / 42.0))
    } else {
        w.sin() / w
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Stream;

    /// A random Hermitian traceless matrix of size about `size`.
    fn hermitian(s: &mut Stream, size: f64) -> Su3 {
        let a = Su3(std::array::from_fn(|_| {
            std::array::from_fn(|_| C64::new(s.gaussian(), s.gaussian()) * size)
        }));
        traceless_hermitian_part(&scale(&a, C64::new(0.0, 1.0)))
    }

    /// exp(iQ) by its power series (40 terms: |Q|^40/40! < 1e-30 for |Q| < 3).
    fn exp_series(q: &Su3) -> Su3 {
        let iq = scale(q, C64::new(0.0, 1.0));
        let (mut term, mut sum) = (Su3::identity(), Su3::identity());
        for n in 1..40 {
            term = scale_re(&term.mul(&iq), 1.0 / n as f64);
            sum = add(&sum, &term);
        }
        sum
    }

    #[test]
    fn cayley_hamilton_matches_the_power_series() {
        // Independent: the power series; sizes from 1e-9 (the series branch of sin w / w
        // and of small c1) to 1 (a link of a rough field).
        let mut s = Stream::new(31, 0);
        for size in [1e-13, 1e-9, 1e-4, 0.03, 0.3, 1.0] {
            for _ in 0..40 {
                let q = hermitian(&mut s, size);
                let e = exp_i(&q);
                let d = e.max_abs_diff(&exp_series(&q));
                assert!(d < 1e-14, "size {size}: {d:e}");
                assert!(e.unitarity_deviation() < 1e-14);
            }
        }
    }

    #[test]
    fn degenerate_eigenvalues_and_both_signs_of_det() {
        // Q = diag(a, a, -2a): c0 = -2a^3 (+/-), theta = 0 or pi; exp is diagonal with
        // e^{ia}, e^{ia}, e^{-2ia} (analytic).
        for a in [0.4, -0.4, 1e-3, -1e-3] {
            let mut q = Su3::zero();
            q.0[0][0] = C64::new(a, 0.0);
            q.0[1][1] = C64::new(a, 0.0);
            q.0[2][2] = C64::new(-2.0 * a, 0.0);
            let e = exp_i(&q);
            let mut want = Su3::zero();
            want.0[0][0] = C64::from_polar(1.0, a);
            want.0[1][1] = C64::from_polar(1.0, a);
            want.0[2][2] = C64::from_polar(1.0, -2.0 * a);
            assert!(e.max_abs_diff(&want) < 1e-15, "a = {a}: {e:?}");
        }
    }
}
