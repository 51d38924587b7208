//! 3x3 complex matrices (SU(3) links, row-major) and colour vectors.

use crate::rng::Stream;
pub use num_complex::Complex64 as C64;

pub const ZERO: C64 = C64::new(0.0, 0.0);
pub const ONE: C64 = C64::new(1.0, 0.0);

/// A colour vector.
pub type Colour = [C64; 3];

/// A 3x3 complex matrix, row-major: `m[row][col]`.
#[derive(Clone, Copy, Debug, PartialEq)]
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
