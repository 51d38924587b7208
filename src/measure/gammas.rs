//! The 16 Dirac structures of the two-point functions: their names and order
//! (`GAMMA_NAMES`), their 4x4 matrices as products of the DeGrand-Rossi gamma matrices
//! (`structure`), each one's sparse form (one entry a row, a power of i), and the signs
//! that relate the correlators to other conventions: the adjoint sign (`adjoint_sign`,
//! g4 G^+ g4 = eta G), the time-reflection sign (`reflection_sign`) and the matching
//! Chroma `Gamma(n)` (`chroma_gamma`). docs/conventions.md, "Dirac structures and
//! correlators", holds the table.

use crate::field::gamma::{gamma, matmul, SpinMatrix, GAMMA5_SIGN};
use crate::field::su3::{C64, ONE, ZERO};

/// The 16 Dirac structures, in this order. `G1..G4` are the DeGrand-Rossi g1..g4 (x, y,
/// z, t), `G5 = G1 G2 G3 G4 = diag(1, 1, -1, -1)`; a name of two factors is their
/// product in the order written (`G1G5 = G1 G5`, `G1G4 = G1 G4`).
pub const GAMMA_NAMES: [&str; 16] = [
    "1", "G1", "G2", "G3", "G4", "G5", "G1G5", "G2G5", "G3G5", "G4G5", "G1G2", "G1G3", "G1G4",
    "G2G3", "G2G4", "G3G4",
];

/// The number of Dirac structures.
pub const NGAMMA: usize = 16;

/// The index of a structure by its name in `GAMMA_NAMES` (exact, case-sensitive).
pub fn gamma_by_name(name: &str) -> Option<usize> {
    GAMMA_NAMES.iter().position(|&n| n == name)
}

/// g1..g4 for `mu = 1..4`, g5 for 5.
fn factor(mu: usize) -> SpinMatrix {
    match mu {
        1..=4 => gamma(mu - 1),
        5 => diag(GAMMA5_SIGN.map(|s| C64::new(s, 0.0))),
        _ => unreachable!("a factor of a structure name is 1..5"),
    }
}

fn diag(d: [C64; 4]) -> SpinMatrix {
    let mut m = [[ZERO; 4]; 4];
    for s in 0..4 {
        m[s][s] = d[s];
    }
    m
}

/// The 4x4 identity.
pub fn identity() -> SpinMatrix {
    diag([ONE; 4])
}

/// The factors of a name of `GAMMA_NAMES`: "G1G5" -> [1, 5], "1" -> [].
fn factors(name: &str) -> Vec<usize> {
    if name == "1" {
        return Vec::new();
    }
    name.split('G')
        .skip(1)
        .map(|s| s.parse().expect("GAMMA_NAMES holds G1..G5 only"))
        .collect()
}

/// The 4x4 matrix of `GAMMA_NAMES[k]`. Panics for `k >= 16` (an index the caller made,
/// not input: names from a user go through `gamma_by_name`).
pub fn structure(k: usize) -> SpinMatrix {
    assert!(k < NGAMMA, "Dirac structure index {k} out of range 0..16");
    factors(GAMMA_NAMES[k])
        .into_iter()
        .fold(identity(), |m, mu| matmul(&m, &factor(mu)))
}

/// A structure in sparse form: row `r` holds `phase[r]` (one of 1, i, -1, -i) in column
/// `col[r]` and zeros elsewhere. Every product of gamma matrices in the DeGrand-Rossi
/// basis has this form.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sparse {
    pub col: [usize; 4],
    pub phase: [C64; 4],
}

impl Sparse {
    /// The sparse form of `m`; panics if a row has other than one non-zero entry.
    pub fn of(m: &SpinMatrix) -> Sparse {
        let mut col = [0; 4];
        let mut phase = [ZERO; 4];
        for r in 0..4 {
            let nz: Vec<usize> = (0..4).filter(|&c| m[r][c] != ZERO).collect();
            assert_eq!(
                nz.len(),
                1,
                "row {r} of a Dirac structure is not a unit row"
            );
            col[r] = nz[0];
            phase[r] = m[r][nz[0]];
        }
        Sparse { col, phase }
    }

    /// The sparse form of `structure(k)`.
    pub fn structure(k: usize) -> Sparse {
        Sparse::of(&structure(k))
    }
}

/// The Hermitian conjugate of a spin matrix.
pub fn dagger(m: &SpinMatrix) -> SpinMatrix {
    std::array::from_fn(|i| std::array::from_fn(|j| m[j][i].conj()))
}

/// The transpose of a spin matrix.
pub fn transpose(m: &SpinMatrix) -> SpinMatrix {
    std::array::from_fn(|i| std::array::from_fn(|j| m[j][i]))
}

/// `s * m` for a complex `s`.
pub fn scale(m: &SpinMatrix, s: C64) -> SpinMatrix {
    m.map(|row| row.map(|z| z * s))
}

/// The real sign `e` with `a = e b` (a and b are structures up to a sign); panics if
/// there is none.
fn sign_between(a: &SpinMatrix, b: &SpinMatrix) -> f64 {
    for e in [1.0, -1.0] {
        if (0..4).all(|i| (0..4).all(|j| (a[i][j] - b[i][j] * e).norm() < 1e-14)) {
            return e;
        }
    }
    panic!("the two matrices are not equal up to a sign")
}

/// eta_k with `g4 G_k^+ g4 = eta_k G_k`: the adjoint of the bilinear `ubar G d` is
/// `eta_k dbar G d`. The correlator `mesons` returns is `-eta_src` times
/// `<O_snk(x) O_src(x0)^+>` (docs/conventions.md).
pub fn adjoint_sign(k: usize) -> f64 {
    let g4 = gamma(3);
    let g = structure(k);
    sign_between(&matmul(&matmul(&g4, &dagger(&g)), &g4), &g)
}

/// The sign that makes `mesons`'s correlator `<O_snk(x) O_src(x0)^+>` for the source
/// structure `k`: `-adjoint_sign(k)` (+1 for G5, Gi, GiG5, GiGj; -1 for 1, G4, G4G5,
/// GiG4).
pub fn physical_sign(k: usize) -> f64 {
    -adjoint_sign(k)
}

/// tau_k with `M^+ G_k M = tau_k G_k`, `M = g4 g5`: the spin rotation of time reflection
/// (`M^+ g4 M = -g4`, `M^+ gi M = gi`). On a time-reflected field the meson correlator
/// of (src, snk) at t is `tau_src tau_snk` times the original's at `LT - t`.
pub fn reflection_sign(k: usize) -> f64 {
    let m = matmul(&gamma(3), &factor(5));
    let g = structure(k);
    sign_between(&matmul(&matmul(&dagger(&m), &g), &m), &g)
}

/// Chroma's (QDP++'s) `Gamma(n) = g1^n0 g2^n1 g3^n2 g4^n3` (bits n0..n3 of n), the same
/// DeGrand-Rossi matrices.
pub fn chroma_matrix(n: usize) -> SpinMatrix {
    assert!(n < NGAMMA, "Chroma's Gamma index {n} out of range 0..16");
    (0..4)
        .filter(|b| n >> b & 1 == 1)
        .fold(identity(), |m, b| matmul(&m, &gamma(b)))
}

/// `(n, e)` with `structure(k) = e * Gamma(n)` in Chroma's numbering.
pub fn chroma_gamma(k: usize) -> (usize, f64) {
    let g = structure(k);
    (0..NGAMMA)
        .find_map(|n| {
            let c = chroma_matrix(n);
            [1.0, -1.0].into_iter().find_map(|e| {
                (0..4)
                    .all(|i| (0..4).all(|j| (g[i][j] - c[i][j] * e).norm() < 1e-14))
                    .then_some((n, e))
            })
        })
        .expect("every structure is a signed Gamma(n)")
}

/// The parity projector `(1 + sign g4) / 2` (sign = +1: positive parity).
pub fn parity_projector(sign: f64) -> SpinMatrix {
    let g4 = gamma(3);
    std::array::from_fn(|i| {
        std::array::from_fn(|j| {
            let d = if i == j { 1.0 } else { 0.0 };
            (C64::new(d, 0.0) + g4[i][j] * sign) * 0.5
        })
    })
}

/// The charge conjugation matrix `C = g2 g4` (DeGrand-Rossi; Chroma's `Gamma(10)`).
pub fn charge_conjugation() -> SpinMatrix {
    matmul(&gamma(1), &gamma(3))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: &SpinMatrix, b: &SpinMatrix) -> bool {
        (0..4).all(|i| (0..4).all(|j| (a[i][j] - b[i][j]).norm() < 1e-15))
    }

    #[test]
    fn names_round_trip_and_structures_are_signed_permutations() {
        for (k, name) in GAMMA_NAMES.iter().enumerate() {
            assert_eq!(gamma_by_name(name), Some(k));
            let s = Sparse::structure(k);
            // A permutation: every column hit once; phases of modulus 1.
            let mut cols = s.col;
            cols.sort();
            assert_eq!(cols, [0, 1, 2, 3], "{name}");
            assert!(s.phase.iter().all(|p| (p.norm() - 1.0).abs() < 1e-15));
        }
        assert_eq!(gamma_by_name("g5"), None);
        // Analytic: G5 = diag(1, 1, -1, -1); G4 is the factor itself; G1G5 = g1 g5.
        let g5 = structure(gamma_by_name("G5").unwrap());
        assert!(close(
            &g5,
            &diag([1.0, 1.0, -1.0, -1.0].map(|x| C64::new(x, 0.0)))
        ));
        assert!(close(&structure(4), &gamma(3)));
        assert!(close(&structure(6), &matmul(&gamma(0), &g5)));
    }

    #[test]
    fn the_sixteen_structures_are_a_basis() {
        // Analytic: tr(G_a^+ G_b) = 4 delta_ab for the 16 products of gamma matrices.
        for a in 0..NGAMMA {
            for b in 0..NGAMMA {
                let p = matmul(&dagger(&structure(a)), &structure(b));
                let tr: C64 = (0..4).map(|i| p[i][i]).sum();
                let want = if a == b { 4.0 } else { 0.0 };
                assert!((tr - C64::new(want, 0.0)).norm() < 1e-14, "{a} {b}");
            }
        }
    }

    #[test]
    fn signs_follow_the_clifford_algebra() {
        // Analytic (g_mu Hermitian, anticommuting): g4 G^+ g4 = +G for 1, G4, G4G5, GiG4
        // and -G for the other ten; M = g4 g5 flips g4 and g5 and keeps gi.
        let eta_plus = ["1", "G4", "G4G5", "G1G4", "G2G4", "G3G4"];
        let tau_minus = ["G4", "G5", "G1G5", "G2G5", "G3G5", "G1G4", "G2G4", "G3G4"];
        for (k, name) in GAMMA_NAMES.iter().enumerate() {
            let eta = if eta_plus.contains(name) { 1.0 } else { -1.0 };
            assert_eq!(adjoint_sign(k), eta, "{name}");
            assert_eq!(physical_sign(k), -eta, "{name}");
            let tau = if tau_minus.contains(name) { -1.0 } else { 1.0 };
            assert_eq!(reflection_sign(k), tau, "{name}");
        }
    }

    #[test]
    fn chroma_numbering_and_the_diquark_matrix() {
        // Chroma: Gamma(15) = g5, Gamma(8) = g4, Gamma(10) = C, C g5 = Gamma(5) (its
        // baryon code's comment "C gamma_5 = Gamma(5)"); G4G5 = g4 g1 g2 g3 g4 =
        // -g1 g2 g3 = -Gamma(7).
        let k = |n| gamma_by_name(n).unwrap();
        assert_eq!(chroma_gamma(k("G5")), (15, 1.0));
        assert_eq!(chroma_gamma(k("G4")), (8, 1.0));
        assert_eq!(chroma_gamma(k("G4G5")), (7, -1.0));
        assert_eq!(chroma_gamma(k("G2G4")), (10, 1.0));
        let cg5 = matmul(&charge_conjugation(), &structure(k("G5")));
        assert!(close(&cg5, &chroma_matrix(5)));
        assert!(close(&cg5, &structure(k("G1G3"))));
        // Every Chroma Gamma(n) is one of ours up to a sign.
        let mut seen: Vec<usize> = (0..NGAMMA).map(|k| chroma_gamma(k).0).collect();
        seen.sort();
        assert_eq!(seen, (0..NGAMMA).collect::<Vec<_>>());
    }

    #[test]
    fn parity_projectors_are_complementary_projectors() {
        let (p, m) = (parity_projector(1.0), parity_projector(-1.0));
        assert!(close(&matmul(&p, &p), &p));
        assert!(close(&matmul(&p, &m), &[[ZERO; 4]; 4]));
        let sum: SpinMatrix = std::array::from_fn(|i| std::array::from_fn(|j| p[i][j] + m[i][j]));
        assert!(close(&sum, &identity()));
    }
}
