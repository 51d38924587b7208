//! The local step of the gauge fixing: the SU(3) matrix g that maximises Re tr(g w) for a
//! site's sum of links w, found through the three SU(2) subgroups of Cabibbo and Marinari,
//! each subgroup's maximum raised to the overrelaxation power omega.
//!
//! SU(2) elements are unit quaternions r = (r0, r1, r2, r3), the matrix
//! `[[r0 + i r3, r2 + i r1], [-r2 + i r1, r0 - i r3]]` (the convention of
//! `gauge_gen::su2`, restated here because this module imports only the field layers).
//! For any 2x2 complex w, `Re tr(r w) = r . v` with
//! `v = (Re w00 + Re w11, -Im w01 - Im w10, Re w10 - Re w01, Im w11 - Im w00)`, so the
//! unit r maximising it is `v / |v|`.
//!
//! Overrelaxation raises that maximum to the power omega exactly: with
//! `r = (cos phi, n sin phi)`, `r^omega = (cos(omega phi), n sin(omega phi))`. The local
//! functional `|v| cos(angle(r, v))` is `|v| cos phi` before the step and
//! `|v| cos((omega - 1) phi)` after it, so for 0 < omega < 2 no step lowers it. (QUDA and
//! Chroma use a first-order approximation of the power; the exact power costs one atan2,
//! one sin and one cos per subgroup.)

use crate::field::su3::{Su3, C64};

/// The three SU(2) subgroups of SU(3), as the (row, column) pairs they act on.
pub const SUBGROUPS: [(usize, usize); 3] = [(0, 1), (0, 2), (1, 2)];

/// The unit quaternion maximising `Re tr(r w)` for the 2x2 block of `w` on rows and
/// columns (i, j), raised to the power `omega`; `None` where the block gives no direction
/// (v = 0, or not finite).
fn subgroup_step(w: &Su3, i: usize, j: usize, omega: f64) -> Option<[f64; 4]> {
    let (a, b, c, d) = (w.0[i][i], w.0[i][j], w.0[j][i], w.0[j][j]);
    let v = [a.re + d.re, -b.im - c.im, c.re - b.re, d.im - a.im];
    let norm = (v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + v[3] * v[3]).sqrt();
    if !(norm > 0.0 && norm.is_finite()) {
        return None;
    }
    Some(power(
        [v[0] / norm, v[1] / norm, v[2] / norm, v[3] / norm],
        omega,
    ))
}

/// `r^omega` for a unit quaternion r (module comment). r = +-1 has no axis and is
/// returned as it is.
pub fn power(r: [f64; 4], omega: f64) -> [f64; 4] {
    let s = (r[1] * r[1] + r[2] * r[2] + r[3] * r[3]).sqrt();
    if s == 0.0 {
        return r;
    }
    let phi = s.atan2(r[0]);
    let (sin, cos) = (omega * phi).sin_cos();
    let k = sin / s;
    [cos, r[1] * k, r[2] * k, r[3] * k]
}

/// Rows i and j of `m` replaced by `q` (as a 2x2 matrix) times them.
fn rotate_rows(m: &mut Su3, i: usize, j: usize, q: &[f64; 4]) {
    let q00 = C64::new(q[0], q[3]);
    let q01 = C64::new(q[2], q[1]);
    let q10 = C64::new(-q[2], q[1]);
    let q11 = C64::new(q[0], -q[3]);
    for k in 0..3 {
        let (x, y) = (m.0[i][k], m.0[j][k]);
        m.0[i][k] = q00 * x + q01 * y;
        m.0[j][k] = q10 * x + q11 * y;
    }
}

/// The local gauge update at a site whose links sum to `w`: the product of the three
/// overrelaxed subgroup steps, each taken on w as the steps before it left it.
pub fn local_update(w: &Su3, omega: f64) -> Su3 {
    let mut w = *w;
    let mut g = Su3::identity();
    for (i, j) in SUBGROUPS {
        if let Some(q) = subgroup_step(&w, i, j, omega) {
            rotate_rows(&mut w, i, j, &q);
            rotate_rows(&mut g, i, j, &q);
        }
    }
    g
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Stream;

    fn random_matrix(s: &mut Stream) -> Su3 {
        let mut w = Su3::zero();
        for z in w.0.iter_mut().flatten() {
            *z = C64::new(s.gaussian(), s.gaussian());
        }
        w
    }

    #[test]
    fn a_step_never_lowers_the_local_functional_and_omega_one_is_the_maximum() {
        // Module comment: Re tr(g w) after the step is at least Re tr(w) for 0 < omega <
        // 2, and g is SU(3) (a product of SU(2) rotations; rounding only).
        let mut s = Stream::new(5, 3);
        for _ in 0..2000 {
            let w = random_matrix(&mut s);
            for omega in [0.5, 1.0, 1.7, 1.95] {
                let g = local_update(&w, omega);
                assert!(g.unitarity_deviation() < 1e-14);
                assert!(g.re_trace_mul(&w) >= w.trace().re - 1e-12);
            }
        }
        // omega = 1 in one subgroup: Re tr(g w) = Re tr w outside the block plus |v|
        // (analytic maximum of r . v over unit r).
        let w = random_matrix(&mut s);
        let g = {
            let mut g = Su3::identity();
            rotate_rows(&mut g, 0, 1, &subgroup_step(&w, 0, 1, 1.0).unwrap());
            g
        };
        let (a, b, c, d) = (w.0[0][0], w.0[0][1], w.0[1][0], w.0[1][1]);
        let v = [a.re + d.re, -b.im - c.im, c.re - b.re, d.im - a.im];
        let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        let want = w.0[2][2].re + norm;
        assert!((g.re_trace_mul(&w) - want).abs() < 1e-13);
    }

    #[test]
    fn the_power_is_the_exact_power() {
        // r = (cos phi, n sin phi): r^2 by quaternion product must equal power(r, 2), and
        // power(power(r, a), b) = power(r, a b) for a b phi below pi.
        let (phi, n) = (0.7f64, [0.6f64, 0.0, 0.8]);
        let r = [
            phi.cos(),
            n[0] * phi.sin(),
            n[1] * phi.sin(),
            n[2] * phi.sin(),
        ];
        let sq = {
            let (a0, a) = (r[0], [r[1], r[2], r[3]]);
            let dot = a[0] * a[0] + a[1] * a[1] + a[2] * a[2];
            [
                a0 * a0 - dot,
                2.0 * a0 * a[0],
                2.0 * a0 * a[1],
                2.0 * a0 * a[2],
            ]
        };
        let p = power(r, 2.0);
        for k in 0..4 {
            assert!((p[k] - sq[k]).abs() < 1e-15);
        }
        let pp = power(power(r, 1.5), 1.2);
        let p18 = power(r, 1.8);
        for k in 0..4 {
            assert!((pp[k] - p18[k]).abs() < 1e-15);
        }
        assert_eq!(power([1.0, 0.0, 0.0, 0.0], 1.7), [1.0, 0.0, 0.0, 0.0]);
    }
}
