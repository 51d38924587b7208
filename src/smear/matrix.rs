//! The few 3x3 complex matrix operations link smearing needs beyond `field::su3`: sums,
//! real and complex multiples, the Frobenius norm and the inverse.

use crate::field::su3::{Su3, C64, ZERO};

/// a + b.
pub fn add(a: &Su3, b: &Su3) -> Su3 {
    Su3(std::array::from_fn(|i| {
        std::array::from_fn(|j| a.0[i][j] + b.0[i][j])
    }))
}

/// a - b.
pub fn sub(a: &Su3, b: &Su3) -> Su3 {
    Su3(std::array::from_fn(|i| {
        std::array::from_fn(|j| a.0[i][j] - b.0[i][j])
    }))
}

/// z a for a complex z.
pub fn scale(a: &Su3, z: C64) -> Su3 {
    Su3(std::array::from_fn(|i| {
        std::array::from_fn(|j| z * a.0[i][j])
    }))
}

/// s a for a real s.
pub fn scale_re(a: &Su3, s: f64) -> Su3 {
    scale(a, C64::new(s, 0.0))
}

/// sqrt(sum |a_ij|^2).
pub fn frobenius(a: &Su3) -> f64 {
    a.0.iter()
        .flatten()
        .map(|z| z.norm_sqr())
        .sum::<f64>()
        .sqrt()
}

/// a^-1 from the adjugate, or `None` when det a is zero or not finite.
pub fn inverse(a: &Su3) -> Option<Su3> {
    let det = a.det();
    if det == ZERO || !(det.re.is_finite() && det.im.is_finite()) {
        return None;
    }
    let m = &a.0;
    // The cofactor of (r, c), read cyclically: C_rc = m[r+1][c+1] m[r+2][c+2] -
    // m[r+1][c+2] m[r+2][c+1] (indices mod 3); inv[c][r] = C_rc / det.
    let cof = |r: usize, c: usize| {
        let (r1, r2, c1, c2) = ((r + 1) % 3, (r + 2) % 3, (c + 1) % 3, (c + 2) % 3);
        m[r1][c1] * m[r2][c2] - m[r1][c2] * m[r2][c1]
    };
    Some(Su3(std::array::from_fn(|i| {
        std::array::from_fn(|j| cof(j, i) / det)
    })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Stream;

    #[test]
    fn inverse_times_matrix_is_one() {
        // A general complex matrix (not unitary): a a^-1 = 1 to rounding.
        let mut s = Stream::new(4, 4);
        let a = Su3(std::array::from_fn(|_| {
            std::array::from_fn(|_| C64::new(s.gaussian(), s.gaussian()))
        }));
        let p = a.mul(&inverse(&a).unwrap());
        assert!(p.max_abs_diff(&Su3::identity()) < 1e-13, "{p:?}");
        assert!(inverse(&Su3::zero()).is_none());
    }
}
