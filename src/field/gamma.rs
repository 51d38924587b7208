//! Dirac gamma matrices in the DeGrand-Rossi basis (Chroma, QDP++, Grid, MILC, QUDA's host
//! side): g1..g4 for x, y, z, t and g5 = g1 g2 g3 g4 = diag(1, 1, -1, -1).
//!
//! In this chiral basis every g_mu is block off-diagonal, g_mu = [[0, A_mu], [A_mu^+, 0]],
//! with A_mu a 2x2 matrix whose rows hold one entry from {1, i, -1, -i}. That structure
//! is what the spin-projected operator uses: `ChiralBlock` stores A_mu as a permutation
//! and a power of i per row.

use super::su3::{C64, ONE, ZERO};
use serde::{Deserialize, Serialize};

pub type SpinMatrix = [[C64; 4]; 4];

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum GammaBasis {
    #[default]
    DegrandRossi,
}

const I: C64 = C64::new(0.0, 1.0);
const MI: C64 = C64::new(0.0, -1.0);
const M1: C64 = C64::new(-1.0, 0.0);

/// g_{mu+1} for mu = 0..3 (x, y, z, t), DeGrand-Rossi.
pub fn gamma(mu: usize) -> SpinMatrix {
    match mu {
        0 => [
            [ZERO, ZERO, ZERO, I],
            [ZERO, ZERO, I, ZERO],
            [ZERO, MI, ZERO, ZERO],
            [MI, ZERO, ZERO, ZERO],
        ],
        1 => [
            [ZERO, ZERO, ZERO, M1],
            [ZERO, ZERO, ONE, ZERO],
            [ZERO, ONE, ZERO, ZERO],
            [M1, ZERO, ZERO, ZERO],
        ],
        2 => [
            [ZERO, ZERO, I, ZERO],
            [ZERO, ZERO, ZERO, MI],
            [MI, ZERO, ZERO, ZERO],
            [ZERO, I, ZERO, ZERO],
        ],
        3 => [
            [ZERO, ZERO, ONE, ZERO],
            [ZERO, ZERO, ZERO, ONE],
            [ONE, ZERO, ZERO, ZERO],
            [ZERO, ONE, ZERO, ZERO],
        ],
        _ => panic!("gamma index {mu} out of range 0..4"),
    }
}

/// Sign of g5 on spin component s: diag(1, 1, -1, -1).
pub const GAMMA5_SIGN: [f64; 4] = [1.0, 1.0, -1.0, -1.0];

pub fn matmul(a: &SpinMatrix, b: &SpinMatrix) -> SpinMatrix {
    let mut c = [[ZERO; 4]; 4];
    for i in 0..4 {
        for j in 0..4 {
            c[i][j] = (0..4).map(|k| a[i][k] * b[k][j]).sum();
        }
    }
    c
}

/// 1 + sign * g_mu: the spin matrix of a hop (sign = -1 forward, +1 backward).
pub fn projector(mu: usize, sign: f64) -> SpinMatrix {
    let g = gamma(mu);
    let mut p = [[ZERO; 4]; 4];
    for i in 0..4 {
        for j in 0..4 {
            p[i][j] = g[i][j] * sign;
        }
        p[i][i] += ONE;
    }
    p
}

/// Multiply by i^k (k = 0..3) without a complex multiplication.
#[inline(always)]
pub fn mul_i_pow(z: C64, k: u8) -> C64 {
    match k & 3 {
        0 => z,
        1 => C64::new(-z.im, z.re),
        2 => -z,
        _ => C64::new(z.im, -z.re),
    }
}

/// The upper-right block A_mu of g_mu as a sparse unit matrix: row r of A has the entry
/// i^phase[r] in column col[r].
#[derive(Clone, Copy, Debug)]
pub struct ChiralBlock {
    pub col: [usize; 2],
    pub phase: [u8; 2],
}

impl ChiralBlock {
    /// Read A_mu off the dense matrix, checking that it has the assumed structure.
    pub fn of(mu: usize) -> ChiralBlock {
        let g = gamma(mu);
        let mut col = [0; 2];
        let mut phase = [0; 2];
        for r in 0..2 {
            assert!(g[r][0] == ZERO && g[r][1] == ZERO, "g_{mu} not chiral");
            let c = (0..2).find(|&c| g[r][2 + c] != ZERO).expect("empty row");
            col[r] = c;
            let v = g[r][2 + c];
            phase[r] = (0..4u8)
                .find(|&k| mul_i_pow(ONE, k) == v)
                .expect("entry not a power of i");
        }
        ChiralBlock { col, phase }
    }

    /// (A v)_r for a pair of spin components v (each a colour vector).
    #[inline(always)]
    pub fn apply(&self, r: usize, v: &[[C64; 3]; 2]) -> [C64; 3] {
        let src = &v[self.col[r]];
        [
            mul_i_pow(src[0], self.phase[r]),
            mul_i_pow(src[1], self.phase[r]),
            mul_i_pow(src[2], self.phase[r]),
        ]
    }

    /// (A^+ w)_r: A^+ has entry conj(i^phase[r']) = i^(4-phase[r']) at (col[r'], r').
    #[inline(always)]
    pub fn apply_dagger(&self, r: usize, w: &[[C64; 3]; 2]) -> [C64; 3] {
        let rr = if self.col[0] == r { 0 } else { 1 };
        let ph = (4 - self.phase[rr]) & 3;
        let src = &w[rr];
        [
            mul_i_pow(src[0], ph),
            mul_i_pow(src[1], ph),
            mul_i_pow(src[2], ph),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: &SpinMatrix, b: &SpinMatrix) -> bool {
        (0..4).all(|i| (0..4).all(|j| (a[i][j] - b[i][j]).norm() < 1e-15))
    }

    #[test]
    fn clifford_algebra_and_hermiticity() {
        // Analytic: {g_mu, g_nu} = 2 delta_mu_nu and g_mu^+ = g_mu.
        for mu in 0..4 {
            for nu in 0..4 {
                let ab = matmul(&gamma(mu), &gamma(nu));
                let ba = matmul(&gamma(nu), &gamma(mu));
                for i in 0..4 {
                    for j in 0..4 {
                        let want = if mu == nu && i == j { 2.0 } else { 0.0 };
                        assert!((ab[i][j] + ba[i][j] - C64::new(want, 0.0)).norm() < 1e-15);
                    }
                }
            }
            let g = gamma(mu);
            for i in 0..4 {
                for j in 0..4 {
                    assert_eq!(g[i][j], g[j][i].conj());
                }
            }
        }
    }

    #[test]
    fn gamma5_is_product_and_diagonal() {
        let g5 = matmul(&matmul(&gamma(0), &gamma(1)), &matmul(&gamma(2), &gamma(3)));
        let mut want = [[ZERO; 4]; 4];
        for s in 0..4 {
            want[s][s] = C64::new(GAMMA5_SIGN[s], 0.0);
        }
        assert!(close(&g5, &want));
    }

    #[test]
    fn chiral_block_reproduces_gamma() {
        for mu in 0..4 {
            let b = ChiralBlock::of(mu);
            let g = gamma(mu);
            // Apply to unit vectors in spin and compare columns of g.
            for s in 0..4 {
                let mut v = [[[ZERO; 3]; 2]; 2]; // [upper/lower][spin in pair][colour]
                v[s / 2][s % 2][0] = ONE;
                for r in 0..2 {
                    let up = b.apply(r, &v[1]);
                    assert_eq!(up[0], g[r][s], "mu {mu} row {r} col {s}");
                    let dn = b.apply_dagger(r, &v[0]);
                    assert_eq!(dn[0], g[2 + r][s], "mu {mu} row {} col {s}", 2 + r);
                }
            }
        }
    }
}
