//! 3x3 complex matrices (SU(3) links, row-major) and colour vectors.

use crate::rng::Stream;
pub use num_complex::Complex64 as C64;
use std::f64::consts::PI;

pub const ZERO: C64 = C64::new(0.0, 0.0);
pub const ONE: C64 = C64::new(1.0, 0.0);

/// A colour vector.
pub type Colour = [C64; 3];

/// A 3x3 complex matrix, row-major: `m[row][col]`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(transparent)]
pub struct Su3(pub [[C64; 3]; 3]);

impl Su3 {
    /// The 18 reals of the matrix, row-major, re then im (messages between ranks).
    pub fn push_reals(&self, out: &mut Vec<f64>) {
        for row in &self.0 {
            for z in row {
                out.push(z.re);
                out.push(z.im);
            }
        }
    }

    /// The matrix from 18 reals in `push_reals`'s order.
    pub fn from_reals(r: &[f64]) -> Su3 {
        Su3(std::array::from_fn(|i| {
            std::array::from_fn(|j| C64::new(r[6 * i + 2 * j], r[6 * i + 2 * j + 1]))
        }))
    }
}

impl Default for Su3 {
    fn default() -> Self {
        Su3::identity()
    }
}

impl Su3 {
    pub const fn zero() -> Self {
        Su3([[ZERO; 3]; 3])
    }

    pub const fn identity() -> Self {
        Su3([[ONE, ZERO, ZERO], [ZERO, ONE, ZERO], [ZERO, ZERO, ONE]])
    }

    pub fn mul(&self, b: &Su3) -> Su3 {
        let mut c = Su3::zero();
        for i in 0..3 {
            for j in 0..3 {
                c.0[i][j] =
                    self.0[i][0] * b.0[0][j] + self.0[i][1] * b.0[1][j] + self.0[i][2] * b.0[2][j];
            }
        }
        c
    }

    /// self b^dagger, without forming b^dagger.
    #[inline]
    pub fn mul_dagger(&self, b: &Su3) -> Su3 {
        let mut c = Su3::zero();
        for i in 0..3 {
            for j in 0..3 {
                c.0[i][j] = self.0[i][0] * b.0[j][0].conj()
                    + self.0[i][1] * b.0[j][1].conj()
                    + self.0[i][2] * b.0[j][2].conj();
            }
        }
        c
    }

    /// Conjugate transpose.
    pub fn dagger(&self) -> Su3 {
        let mut c = Su3::zero();
        for i in 0..3 {
            for j in 0..3 {
                c.0[i][j] = self.0[j][i].conj();
            }
        }
        c
    }

    pub fn trace(&self) -> C64 {
        self.0[0][0] + self.0[1][1] + self.0[2][2]
    }

    pub fn det(&self) -> C64 {
        let m = &self.0;
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
            - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    }

    /// U x (matrix times colour vector).
    #[inline]
    pub fn mul_vec(&self, v: &Colour) -> Colour {
        let m = &self.0;
        [
            m[0][0] * v[0] + m[0][1] * v[1] + m[0][2] * v[2],
            m[1][0] * v[0] + m[1][1] * v[1] + m[1][2] * v[2],
            m[2][0] * v[0] + m[2][1] * v[1] + m[2][2] * v[2],
        ]
    }

    /// U^dagger x without forming U^dagger.
    #[inline]
    pub fn dagger_mul_vec(&self, v: &Colour) -> Colour {
        let m = &self.0;
        [
            m[0][0].conj() * v[0] + m[1][0].conj() * v[1] + m[2][0].conj() * v[2],
            m[0][1].conj() * v[0] + m[1][1].conj() * v[1] + m[2][1].conj() * v[2],
            m[0][2].conj() * v[0] + m[1][2].conj() * v[1] + m[2][2].conj() * v[2],
        ]
    }

    /// The third row of an SU(3) matrix from its first two: conj(row0 x row1).
    pub fn third_row(r0: &Colour, r1: &Colour) -> Colour {
        [
            (r0[1] * r1[2] - r0[2] * r1[1]).conj(),
            (r0[2] * r1[0] - r0[0] * r1[2]).conj(),
            (r0[0] * r1[1] - r0[1] * r1[0]).conj(),
        ]
    }

    /// Project back onto SU(3) by Gram-Schmidt on rows 0 and 1 and rebuilding row 2
    /// (the standard reunitarisation of 32-bit input and of long update chains).
    pub fn reunitarise(&self) -> Su3 {
        let mut r0 = self.0[0];
        let n0 = r0.iter().map(|z| z.norm_sqr()).sum::<f64>().sqrt();
        r0.iter_mut().for_each(|z| *z /= n0);
        let mut r1 = self.0[1];
        let proj: C64 = (0..3).map(|k| r0[k].conj() * r1[k]).sum();
        for k in 0..3 {
            r1[k] -= proj * r0[k];
        }
        let n1 = r1.iter().map(|z| z.norm_sqr()).sum::<f64>().sqrt();
        r1.iter_mut().for_each(|z| *z /= n1);
        let r2 = Su3::third_row(&r0, &r1);
        Su3([r0, r1, r2])
    }

    /// max |(U U^dagger - 1)_ij| together with |det U - 1|: the worst deviation from SU(3).
    pub fn unitarity_deviation(&self) -> f64 {
        let p = self.mul(&self.dagger());
        let mut worst: f64 = 0.0;
        for i in 0..3 {
            for j in 0..3 {
                let target = if i == j { ONE } else { ZERO };
                worst = worst.max((p.0[i][j] - target).norm());
            }
        }
        worst.max((self.det() - ONE).norm())
    }

    /// A random SU(3) matrix: Gram-Schmidt of a complex Gaussian matrix (Haar measure on
    /// U(3), phase fixed by building row 2 from rows 0 and 1, so det = 1).
    pub fn random(stream: &mut Stream) -> Su3 {
        let mut m = Su3::zero();
        for row in m.0.iter_mut().take(2) {
            for z in row.iter_mut() {
                *z = C64::new(stream.gaussian(), stream.gaussian());
            }
        }
        m.reunitarise()
    }

    /// Re Tr(A B) without forming the product.
    pub fn re_trace_mul(&self, b: &Su3) -> f64 {
        let mut t = 0.0;
        for i in 0..3 {
            for k in 0..3 {
                t += (self.0[i][k] * b.0[k][i]).re;
            }
        }
        t
    }
}

/// `Su3::pack8`'s flag in the slot of arg U20 / pi for a link whose row 0 is (e^{i a}, 0,
/// 0): above 1, so no phase is taken for it.
pub const PACK8_DEGENERATE: f64 = 8.0;
/// Below this n = |U01|^2 + |U02|^2 a link is packed in the degenerate form: the dropped
/// U01, U02, U10, U20 are then at most 1e-16 in magnitude.
pub const PACK8_MIN_N: f64 = 1e-32;

impl Su3 {
    /// The 8-real form of an SU(3) matrix that 3.0 stores with `reconstruct = 8`, as four
    /// real pairs: [U01, U02, U10, (arg U00, arg U20) / pi]. kernels/v3_core.cuh (v3_unpack_8)
    /// derives the decoding: |U00| and |U20| from the norms of row 0 and column 0, the 2x2
    /// block from the cofactor identities of U^-1 = U^+. Where n = |U01|^2 + |U02|^2 <
    /// PACK8_MIN_N the block is not determined by row 0 and column 0 (a unit link), and the
    /// degenerate form [U11, U12, 0, (arg U00 / pi, PACK8_DEGENERATE)] is stored instead. Exact
    /// to rounding for SU(3) matrices only.
    pub fn pack8(&self) -> [f64; 8] {
        let u = &self.0;
        let n = u[0][1].norm_sqr() + u[0][2].norm_sqr();
        if n < PACK8_MIN_N {
            let (a, b) = (u[1][1], u[1][2]);
            [
                a.re,
                a.im,
                b.re,
                b.im,
                0.0,
                0.0,
                u[0][0].arg() / PI,
                PACK8_DEGENERATE,
            ]
        } else {
            let (a, b, c) = (u[0][1], u[0][2], u[1][0]);
            [
                a.re,
                a.im,
                b.re,
                b.im,
                c.re,
                c.im,
                u[0][0].arg() / PI,
                u[2][0].arg() / PI,
            ]
        }
    }

    /// The matrix from `pack8`'s reals: the host's transcription of v3_unpack_8 (the
    /// formulas are derived there).
    pub fn unpack8(r: &[f64; 8]) -> Su3 {
        let u01 = C64::new(r[0], r[1]);
        let u02 = C64::new(r[2], r[3]);
        let e0 = C64::from_polar(1.0, PI * r[6]);
        if r[7] > 4.0 {
            return Su3([
                [e0, ZERO, ZERO],
                [ZERO, u01, u02],
                [ZERO, -e0.conj() * u02.conj(), e0.conj() * u01.conj()],
            ]);
        }
        let u10 = C64::new(r[4], r[5]);
        let n = u01.norm_sqr() + u02.norm_sqr();
        let u00 = e0 * (1.0 - n).max(0.0).sqrt();
        let u20 = C64::from_polar((n - u10.norm_sqr()).max(0.0).sqrt(), PI * r[7]);
        let u11 = -(u00.conj() * u01 * u10 + (u02 * u20).conj()) / n;
        let u12 = ((u01 * u20).conj() - u00.conj() * u02 * u10) / n;
        let u21 = ((u02 * u10).conj() - u00.conj() * u01 * u20) / n;
        let u22 = -(u00.conj() * u02 * u20 + (u01 * u10).conj()) / n;
        Su3([[u00, u01, u02], [u10, u11, u12], [u20, u21, u22]])
    }

    /// max |A_ij - B_ij|.
    pub fn max_abs_diff(&self, b: &Su3) -> f64 {
        let mut worst: f64 = 0.0;
        for i in 0..3 {
            for j in 0..3 {
                worst = worst.max((self.0[i][j] - b.0[i][j]).norm());
            }
        }
        worst
    }
}

impl std::ops::Mul for Su3 {
    type Output = Su3;
    fn mul(self, b: Su3) -> Su3 {
        Su3::mul(&self, &b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_is_special_unitary() {
        let mut s = Stream::new(11, 0);
        for _ in 0..100 {
            let u = Su3::random(&mut s);
            // Analytic: U U^dagger = 1 and det U = 1; Gram-Schmidt leaves rounding only.
            assert!(
                u.unitarity_deviation() < 1e-14,
                "{}",
                u.unitarity_deviation()
            );
        }
    }

    /// The error bound of the 8-real round trip for link u whose reals were rounded to
    /// relative precision eps (or computed with it): the square roots that give |U00| and
    /// |U20| turn an error eps of n = 1 - |U00|^2 into about eps / |U00| (eps / |U20|),
    /// and the SU(3) input itself is off by its unitarity deviation d (v3_unpack_8's edge
    /// cases). 8 (eps + d) (1 + 1 / |U00| + 1 / |U20|) covers the constants.
    fn pack8_bound(u: &Su3, eps: f64) -> f64 {
        let d = u.unitarity_deviation();
        8.0 * (eps + d) * (1.0 + 1.0 / u.0[0][0].norm() + 1.0 / u.0[2][0].norm())
    }

    /// The reals rounded to single precision, as 3.0's single links hold them.
    fn to_single(r: [f64; 8]) -> [f64; 8] {
        r.map(|x| x as f32 as f64)
    }

    #[test]
    fn pack8_round_trips_random_su3_matrices() {
        // Haar-random SU(3) (Su3::random): the round trip must return the matrix to the
        // bound's rounding, in double and after rounding the 8 reals to f32 (eps 6e-8).
        let mut s = Stream::new(8, 1);
        let (mut worst_d, mut worst_s) = (0.0f64, 0.0f64);
        for _ in 0..20000 {
            let u = Su3::random(&mut s);
            let r = u.pack8();
            assert!(r[7].abs() <= 1.0, "not degenerate");
            let d = Su3::unpack8(&r).max_abs_diff(&u);
            let f = Su3::unpack8(&to_single(r)).max_abs_diff(&u);
            assert!(d <= pack8_bound(&u, 1.2e-16), "double {d:e} for {u:?}");
            assert!(f <= pack8_bound(&u, 6e-8), "single {f:e} for {u:?}");
            worst_d = worst_d.max(d);
            worst_s = worst_s.max(f);
        }
        // Typical links: most |U00|, |U20| are O(1); the stated tolerances.
        let mut typical = Stream::new(8, 2);
        for _ in 0..1000 {
            let u = Su3::random(&mut typical);
            if u.0[0][0].norm() > 0.1 && u.0[2][0].norm() > 0.1 {
                assert!(Su3::unpack8(&u.pack8()).max_abs_diff(&u) < 1e-14);
                assert!(Su3::unpack8(&to_single(u.pack8())).max_abs_diff(&u) < 1e-6);
            }
        }
        eprintln!("pack8 round trip, 20000 random links: max error {worst_d:e} (double), {worst_s:e} (f32 reals)");
    }

    #[test]
    fn pack8_keeps_unit_and_block_diagonal_links() {
        // n = 0: row 0 = (e^{i a}, 0, 0); the degenerate form must give the matrix back
        // (the unit field exactly: angle 0, cos 0 = 1, sin 0 = 0).
        let one = Su3::identity();
        assert_eq!(one.pack8()[7], PACK8_DEGENERATE);
        assert_eq!(Su3::unpack8(&one.pack8()), one);
        // diag(e^{ia}) + e^{-ia/2} S, S in SU(2).
        let a = 0.7f64;
        let (p, q) = (C64::new(0.6, 0.48), C64::new(0.0, 0.64));
        let h = C64::from_polar(1.0, -a / 2.0);
        let u = Su3([
            [C64::from_polar(1.0, a), ZERO, ZERO],
            [ZERO, h * p, h * q],
            [ZERO, -h * q.conj(), h * p.conj()],
        ]);
        assert!(u.unitarity_deviation() < 1e-15);
        assert!(Su3::unpack8(&u.pack8()).max_abs_diff(&u) < 1e-15);
        // Just above the threshold the general form holds: U = R(theta) between rows and
        // columns 0 and 1 with sin theta = 1e-15 (n = 1e-30).
        let (c, sn) = ((1.0f64 - 1e-30).sqrt(), 1e-15);
        let r = Su3([
            [C64::new(c, 0.0), C64::new(sn, 0.0), ZERO],
            [C64::new(-sn, 0.0), C64::new(c, 0.0), ZERO],
            [ZERO, ZERO, ONE],
        ]);
        assert!(r.pack8()[7] < 4.0);
        assert!(Su3::unpack8(&r.pack8()).max_abs_diff(&r) < 1e-15);
    }

    #[test]
    fn dagger_mul_vec_matches_dagger() {
        let mut s = Stream::new(3, 9);
        let u = Su3::random(&mut s);
        let v = [
            C64::new(1.0, 2.0),
            C64::new(-0.5, 0.25),
            C64::new(3.0, -1.0),
        ];
        let a = u.dagger_mul_vec(&v);
        let b = u.dagger().mul_vec(&v);
        for k in 0..3 {
            assert!((a[k] - b[k]).norm() < 1e-15);
        }
    }
}
