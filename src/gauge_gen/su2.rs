//! SU(2) as unit quaternions, the SU(2) heatbath (Kennedy-Pendleton, with Creutz's
//! sampler where KP accepts poorly) and SU(2) overrelaxation, and their Cabibbo-Marinari
//! embedding in SU(3): the link heatbath and overrelaxation for a fixed staple sum.
//!
//! Conventions. A quaternion q = (q0, q1, q2, q3) is the SU(2) matrix
//! `q0 + i (q1 s1 + q2 s2 + q3 s3)` (s_k the Pauli matrices), i.e.
//! `[[q0 + i q3, q2 + i q1], [-q2 + i q1, q0 - i q3]]`; matrix product = quaternion product.
//! For the Wilson action the weight of a link U with staple sum A is
//! exp((beta/3) Re Tr(U A)). Updating U -> R U with R in the SU(2) subgroup acting on
//! rows (i, j), `Re Tr(R U A) = r . v + const` with `v = project(block_ij(U A))` (4-vector
//! dot product), so the SU(2) problem has `alpha = (beta/3) |v|`; in the usual notation
//! `alpha = beta_eff k` with `beta_eff = 2 beta / 3` and `k = |v| / 2 = sqrt(det)` of the
//! block's SU(2) part.

use super::draws::Su2Draws;
use crate::field::su3::{Su3, C64};

/// The three SU(2) subgroups of SU(3), as the (row, column) pairs they act on.
pub const SUBGROUPS: [(usize, usize); 3] = [(0, 1), (0, 2), (1, 2)];

/// Below this alpha Creutz's sampler is used: its acceptance (pi/4 at alpha = 0, falling)
/// and KP's (rising from 0) cross near alpha = 1.7, where both accept about 70 %.
pub const CREUTZ_BELOW: f64 = 1.7;

/// Below this alpha the weight exp(alpha a0) is flat to rounding: a0 from sqrt(1 - a0^2).
pub const FLAT_BELOW: f64 = 1e-10;

/// A unit quaternion (an SU(2) matrix, see the module comment).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quat(pub [f64; 4]);

impl Quat {
    pub const IDENTITY: Quat = Quat([1.0, 0.0, 0.0, 0.0]);

    /// The quaternion (= SU(2) matrix) product a b:
    /// c0 = a0 b0 - a.b, c = a0 b + b0 a - a x b.
    #[inline]
    pub fn mul(&self, b: &Quat) -> Quat {
        let [a0, a1, a2, a3] = self.0;
        let [b0, b1, b2, b3] = b.0;
        Quat([
            a0 * b0 - a1 * b1 - a2 * b2 - a3 * b3,
            a0 * b1 + b0 * a1 - (a2 * b3 - a3 * b2),
            a0 * b2 + b0 * a2 - (a3 * b1 - a1 * b3),
            a0 * b3 + b0 * a3 - (a1 * b2 - a2 * b1),
        ])
    }

    /// The 4-vector dot product; for unit quaternions a.b = Re Tr(a b^dagger) / 2.
    #[inline]
    pub fn dot(&self, b: &Quat) -> f64 {
        self.0[0] * b.0[0] + self.0[1] * b.0[1] + self.0[2] * b.0[2] + self.0[3] * b.0[3]
    }

    #[inline]
    pub fn norm(&self) -> f64 {
        self.dot(self).sqrt()
    }

    /// The 2x2 matrix `[[q0 + i q3, q2 + i q1], [-q2 + i q1, q0 - i q3]]`.
    pub fn matrix(&self) -> [[C64; 2]; 2] {
        let [q0, q1, q2, q3] = self.0;
        [
            [C64::new(q0, q3), C64::new(q2, q1)],
            [C64::new(-q2, q1), C64::new(q0, -q3)],
        ]
    }
}

/// The 4-vector v with `Re Tr(r w) = r . v` for every quaternion r (w any 2x2 matrix):
/// `v = (Re w00 + Re w11, -Im w01 - Im w10, Re w10 - Re w01, Im w11 - Im w00)`.
#[inline]
pub fn project(w: &[[C64; 2]; 2]) -> Quat {
    Quat([
        w[0][0].re + w[1][1].re,
        -w[0][1].im - w[1][0].im,
        w[1][0].re - w[0][1].re,
        w[1][1].im - w[0][0].im,
    ])
}

/// The block (i, j) of the product U A, without forming the rest of it:
/// `w[a][b] = sum_c U[i_a][c] A[c][i_b]`, c in order 0, 1, 2.
#[inline]
pub fn block_of_product(u: &Su3, a: &Su3, (i, j): (usize, usize)) -> [[C64; 2]; 2] {
    let idx = [i, j];
    let mut w = [[C64::new(0.0, 0.0); 2]; 2];
    for (ra, wrow) in idx.iter().zip(w.iter_mut()) {
        for (cb, wab) in idx.iter().zip(wrow.iter_mut()) {
            *wab =
                u.0[*ra][0] * a.0[0][*cb] + u.0[*ra][1] * a.0[1][*cb] + u.0[*ra][2] * a.0[2][*cb];
        }
    }
    w
}

/// U -> R U with R acting on rows (i, j).
#[inline]
pub fn left_multiply(u: &mut Su3, (i, j): (usize, usize), r: &Quat) {
    let m = r.matrix();
    for c in 0..3 {
        let (ui, uj) = (u.0[i][c], u.0[j][c]);
        u.0[i][c] = m[0][0] * ui + m[0][1] * uj;
        u.0[j][c] = m[1][0] * ui + m[1][1] * uj;
    }
}

/// a0 in [-1, 1] with density proportional to sqrt(1 - a0^2) exp(alpha a0).
///
/// alpha >= CREUTZ_BELOW: Kennedy-Pendleton. delta = 1 - a0 is proposed from
/// delta^(1/2) exp(-alpha delta) as `-(ln u0 + cos^2(2 pi u1) ln u2) / alpha` and accepted
/// when `u3^2 <= 1 - delta/2` (trial t: u0, u1 from block 1+2t; u2, u3 from block 2+2t).
/// alpha < CREUTZ_BELOW: Creutz. a0 is proposed from exp(alpha a0) on [-1, 1] as
/// `1 + ln(1 - u0 (1 - e^(-2 alpha))) / alpha` and accepted when `u1^2 <= 1 - a0^2`
/// (trial t: u0, u1 from block 1+2t); for alpha < FLAT_BELOW the proposal is `2 u0 - 1`.
pub fn sample_a0(alpha: f64, draws: &Su2Draws) -> f64 {
    let mut t: u32 = 0;
    if alpha >= CREUTZ_BELOW {
        loop {
            let (u0, u1) = draws.pair(1 + 2 * t);
            let (u2, u3) = draws.pair(2 + 2 * t);
            let c = (std::f64::consts::TAU * u1).cos();
            let delta = -(u0.ln() + c * c * u2.ln()) / alpha;
            if u3 * u3 <= 1.0 - 0.5 * delta {
                return 1.0 - delta;
            }
            t = t.wrapping_add(1);
        }
    } else {
        let span = -(-2.0 * alpha).exp_m1();
        loop {
            let (u0, u1) = draws.pair(1 + 2 * t);
            let a0 = if alpha < FLAT_BELOW {
                2.0 * u0 - 1.0
            } else {
                1.0 + (-u0 * span).ln_1p() / alpha
            };
            if u1 * u1 <= 1.0 - a0 * a0 {
                return a0;
            }
            t = t.wrapping_add(1);
        }
    }
}

/// A random SU(2) element with density proportional to exp(alpha a0) in Haar measure:
/// a0 from `sample_a0`, the direction of (a1, a2, a3) uniform on the sphere from block 0
/// (cos theta = 2 u0 - 1, phi = 2 pi u1).
pub fn sample_su2(alpha: f64, draws: &Su2Draws) -> Quat {
    let a0 = sample_a0(alpha, draws);
    let (u0, u1) = draws.pair(0);
    let cos_theta = 2.0 * u0 - 1.0;
    let sin_theta = (1.0 - cos_theta * cos_theta).max(0.0).sqrt();
    let phi = std::f64::consts::TAU * u1;
    let r = (1.0 - a0 * a0).max(0.0).sqrt();
    Quat([
        a0,
        r * sin_theta * phi.cos(),
        r * sin_theta * phi.sin(),
        r * cos_theta,
    ])
}

/// v / |v|, or the identity when v = 0 (then every direction is as good).
#[inline]
fn unit(v: &Quat) -> (Quat, f64) {
    let k = v.norm();
    if k > 0.0 {
        let inv = 1.0 / k;
        (
            Quat([v.0[0] * inv, v.0[1] * inv, v.0[2] * inv, v.0[3] * inv]),
            k,
        )
    } else {
        (Quat::IDENTITY, 0.0)
    }
}

/// The heatbath SU(2) element R for `Re Tr(r w) = r . v` and weight exp(scale r . v):
/// R = a V with V = v/|v| and a drawn with alpha = scale |v| (then R . V = a0).
pub fn su2_heatbath(v: &Quat, scale: f64, draws: &Su2Draws) -> Quat {
    let (vhat, k) = unit(v);
    sample_su2(scale * k, draws).mul(&vhat)
}

/// The overrelaxation SU(2) element R = V V (V = v/|v|): the reflection of the identity
/// that keeps r . v fixed, since (V V) . V = V . 1 for a unit quaternion V.
pub fn su2_overrelax(v: &Quat) -> Quat {
    let (vhat, _) = unit(v);
    vhat.mul(&vhat)
}

/// Cabibbo-Marinari heatbath of one SU(3) link for its staple sum A (weight
/// exp((beta/3) Re Tr(U A))): the three subgroups in order, each with its own draws.
pub fn heatbath_link(u: &Su3, staple: &Su3, beta: f64, draws: impl Fn(usize) -> Su2Draws) -> Su3 {
    let mut u = *u;
    for (sg, &pair) in SUBGROUPS.iter().enumerate() {
        let v = project(&block_of_product(&u, staple, pair));
        let r = su2_heatbath(&v, beta / 3.0, &draws(sg));
        left_multiply(&mut u, pair, &r);
    }
    u
}

/// Cabibbo-Marinari overrelaxation of one SU(3) link: Re Tr(U A) is unchanged.
pub fn overrelax_link(u: &Su3, staple: &Su3) -> Su3 {
    let mut u = *u;
    for &pair in SUBGROUPS.iter() {
        let v = project(&block_of_product(&u, staple, pair));
        left_multiply(&mut u, pair, &su2_overrelax(&v));
    }
    u
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Stream;

    fn random_quat(s: &mut Stream) -> Quat {
        let q = Quat([s.gaussian(), s.gaussian(), s.gaussian(), s.gaussian()]);
        unit(&q).0
    }

    fn mat_mul2(a: &[[C64; 2]; 2], b: &[[C64; 2]; 2]) -> [[C64; 2]; 2] {
        let mut c = [[C64::new(0.0, 0.0); 2]; 2];
        for i in 0..2 {
            for j in 0..2 {
                c[i][j] = a[i][0] * b[0][j] + a[i][1] * b[1][j];
            }
        }
        c
    }

    #[test]
    fn quaternion_product_is_the_matrix_product() {
        let mut s = Stream::new(1, 2);
        for _ in 0..100 {
            let (a, b) = (random_quat(&mut s), random_quat(&mut s));
            let m = mat_mul2(&a.matrix(), &b.matrix());
            let q = a.mul(&b).matrix();
            for i in 0..2 {
                for j in 0..2 {
                    // Algebraic identity; rounding only.
                    assert!((m[i][j] - q[i][j]).norm() < 1e-15);
                }
            }
            let det = {
                let m = a.matrix();
                m[0][0] * m[1][1] - m[0][1] * m[1][0]
            };
            assert!((det - C64::new(1.0, 0.0)).norm() < 1e-15);
        }
    }

    #[test]
    fn projection_gives_re_trace() {
        // Re Tr(r w) = r . project(w) for any complex 2x2 w: algebraic, rounding only.
        let mut s = Stream::new(3, 4);
        for _ in 0..100 {
            let mut w = [[C64::new(0.0, 0.0); 2]; 2];
            for z in w.iter_mut().flatten() {
                *z = C64::new(s.gaussian(), s.gaussian());
            }
            let r = random_quat(&mut s);
            let rw = mat_mul2(&r.matrix(), &w);
            let lhs = (rw[0][0] + rw[1][1]).re;
            assert!((lhs - r.dot(&project(&w))).abs() < 1e-14);
        }
    }

    #[test]
    fn embedded_action_is_r_dot_v_plus_constant() {
        // For every subgroup: Re Tr(R U A) - Re Tr(U A) = (R - 1) . v, exactly linear in R.
        let mut s = Stream::new(5, 6);
        for _ in 0..50 {
            let u = Su3::random(&mut s);
            let mut a = Su3::zero();
            for _ in 0..6 {
                let m = Su3::random(&mut s);
                for i in 0..3 {
                    for j in 0..3 {
                        a.0[i][j] += m.0[i][j];
                    }
                }
            }
            for pair in SUBGROUPS {
                let v = project(&block_of_product(&u, &a, pair));
                let r = random_quat(&mut s);
                let mut ru = u;
                left_multiply(&mut ru, pair, &r);
                let lhs = ru.re_trace_mul(&a) - u.re_trace_mul(&a);
                let rhs = r.dot(&v) - Quat::IDENTITY.dot(&v);
                assert!((lhs - rhs).abs() < 1e-13, "{lhs} vs {rhs}");
            }
        }
    }

    #[test]
    fn overrelaxation_keeps_su2_action() {
        let mut s = Stream::new(7, 8);
        for _ in 0..100 {
            let v = Quat([s.gaussian(), s.gaussian(), s.gaussian(), s.gaussian()]);
            let r = su2_overrelax(&v);
            // (V V) . v = 1 . v analytically.
            assert!((r.dot(&v) - v.0[0]).abs() < 1e-14);
            assert!((r.norm() - 1.0).abs() < 1e-15);
        }
    }
}
