//! `floor`'s byte models: each row's DRAM floor in bytes per lattice site (every field read
//! or written once, as the module comment of `floor` lists them), the clover rows' arrays,
//! the rows' kinds and the bounds on their ratios (`target`).

use crate::backend::Precision;

/// Bytes per lattice site of the row's floor.
pub fn dslash_floor(reconstruct: usize, precision: Precision) -> f64 {
    (4 * reconstruct * link_real_bytes(precision, reconstruct)) as f64
        + 2.0 * spinor_bytes(precision)
}

pub fn schur_floor(reconstruct: usize, precision: Precision) -> f64 {
    // Per full-lattice site: 2 hops x all links, 5 half spinors = 2.5 spinors.
    (2 * 4 * reconstruct * link_real_bytes(precision, reconstruct)) as f64
        + 2.5 * spinor_bytes(precision)
}

pub fn cr_iteration_floor(reconstruct: usize, precision: Precision) -> f64 {
    dslash_floor(reconstruct, precision) + 2.0 * 6.0 * spinor_bytes(precision)
}

/// Per full-lattice site: the Schur operator and 12 half-lattice spinors.
pub fn cr_iteration_eo_floor(reconstruct: usize, precision: Precision) -> f64 {
    schur_floor(reconstruct, precision) + 6.0 * spinor_bytes(precision)
}

/// Per full-lattice site: two Schur operators and 18 half-lattice spinors.
pub fn bicgstab_iteration_eo_floor(reconstruct: usize, precision: Precision) -> f64 {
    2.0 * schur_floor(reconstruct, precision) + 9.0 * spinor_bytes(precision)
}

/// The clover rows' c_sw (about the non-perturbative value at beta 6.0) and the twisted
/// rows' mu.
pub const CLOVER_CSW: f64 = 1.77;
pub const CLOVER_MU: f64 = 0.05;

/// Reals of the clover arrays (72 a site each, kernels/clover.cuh) a row reads per
/// full-lattice site: D reads A once a site (72); the Schur operator A_oo^-1 on the odd
/// half (the inverse's factor, 72 reals a site; both arrays with a twist) and A_ee on the
/// even half: 72 a full-lattice site, 108 with a twist; a BiCGStab iteration two Schur
/// operators, a CR iteration one.
pub fn clover_reals(kind: RowKind, twist: bool) -> f64 {
    let schur = if twist { 108.0 } else { 72.0 };
    match kind {
        RowKind::Dslash | RowKind::CloverDslash | RowKind::CrFull => 72.0,
        RowKind::Schur | RowKind::CloverSchur | RowKind::CrEvenOdd => schur,
        RowKind::BicgstabEvenOdd => 2.0 * schur,
    }
}

/// A row's floor with the clover term: the Wilson row's and the clover arrays (double for
/// double fields, float for single and half ones).
pub fn clover_floor(wilson: f64, kind: RowKind, twist: bool, precision: Precision) -> f64 {
    wilson + clover_reals(kind, twist) * clover_real_bytes(precision) as f64
}

/// The rows `floor` times (`target` says which bound each has, if any).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowKind {
    Dslash,
    Schur,
    CrFull,
    CrEvenOdd,
    BicgstabEvenOdd,
    /// The dslash and Schur operator with the clover term (no twist).
    CloverDslash,
    CloverSchur,
}

/// The bound on a row's ratio to its floor: full dslash <= 1.25 with 18
/// reals per link and <= 1.3 with 12 (double and single), the Schur operator <= 1.2,
/// a fused CR iteration (on the full lattice or even-odd) <= 1.15, the clover dslash and
/// Schur operator <= 1.25; none for half precision, 8-real links or BiCGStab, which are
/// not bounded (nor are the twisted rows and the iterations with the clover term).
pub fn target(kind: RowKind, reconstruct: usize, precision: Precision) -> Option<f64> {
    if precision == Precision::Half || !matches!(reconstruct, 12 | 18) {
        return None;
    }
    match kind {
        RowKind::CloverDslash | RowKind::CloverSchur => Some(1.25),
        RowKind::Dslash if reconstruct == 18 => Some(1.25),
        RowKind::Dslash => Some(1.3),
        RowKind::Schur => Some(1.2),
        RowKind::CrFull | RowKind::CrEvenOdd => Some(1.15),
        RowKind::BicgstabEvenOdd => None,
    }
}

/// Bytes of a link real the stencil in `p` reads: the half build's 16-bit links with 18 or
/// 12 reals (float with 8; `half_link_real_bytes`).
pub(super) fn link_real_bytes(p: Precision, reconstruct: usize) -> usize {
    match p {
        Precision::Double => 8,
        Precision::Single => 4,
        Precision::Half if reconstruct == 8 => 4,
        Precision::Half => 2,
    }
}

/// Bytes of a clover-array real the stencil in `p` reads (float for single and half).
pub(super) fn clover_real_bytes(p: Precision) -> usize {
    match p {
        Precision::Double => 8,
        Precision::Single | Precision::Half => 4,
    }
}

/// Bytes of one site's spinor (half: 24 16-bit integers and the f32 norm).
pub(super) fn spinor_bytes(p: Precision) -> f64 {
    match p {
        Precision::Double => 24.0 * 8.0,
        Precision::Single => 24.0 * 4.0,
        Precision::Half => crate::linalg::half::SITE_BYTES as f64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_the_stated_bounds() {
        use Precision::*;
        // "full dslash double r18 <= 1.25x, single r18 <= 1.25x, r12 (double and single)
        // <= 1.3x, Schur <= 1.2x, fused CR iteration <= 1.15x".
        for p in [Double, Single] {
            assert_eq!(target(RowKind::Dslash, 18, p), Some(1.25));
            assert_eq!(target(RowKind::Dslash, 12, p), Some(1.3));
            for r in [18, 12] {
                assert_eq!(target(RowKind::Schur, r, p), Some(1.2));
                assert_eq!(target(RowKind::CrFull, r, p), Some(1.15));
                assert_eq!(target(RowKind::CrEvenOdd, r, p), Some(1.15));
                assert_eq!(target(RowKind::BicgstabEvenOdd, r, p), None);
            }
            assert_eq!(target(RowKind::Dslash, 8, p), None);
        }
        assert_eq!(target(RowKind::Dslash, 18, Half), None);
        assert_eq!(target(RowKind::Schur, 12, Half), None);
    }

    #[test]
    fn clover_floors_add_the_arrays_each_row_reads() {
        use Precision::*;
        // D reads one clover array a site: 960 + 72 x 8 in double with 18 reals.
        let d = clover_floor(
            dslash_floor(18, Double),
            RowKind::CloverDslash,
            false,
            Double,
        );
        assert_eq!(d, 960.0 + 576.0);
        // The Schur operator reads A_oo^-1 on odd and A_ee on even sites (72 reals a
        // full-lattice site; float arrays in single): 624 + 288 with 12 reals.
        let s = clover_floor(schur_floor(12, Single), RowKind::CloverSchur, false, Single);
        assert_eq!(s, 624.0 + 288.0);
        // With a twist the odd inverse reads both arrays: 108 reals a site.
        let t = clover_floor(schur_floor(18, Double), RowKind::CloverSchur, true, Double);
        assert_eq!(t, 1632.0 + 864.0);
        // A BiCGStab iteration has two Schur operators.
        assert_eq!(clover_reals(RowKind::BicgstabEvenOdd, false), 144.0);
        assert_eq!(target(RowKind::CloverDslash, 12, Single), Some(1.25));
        assert_eq!(target(RowKind::CloverSchur, 18, Double), Some(1.25));
        assert_eq!(target(RowKind::CloverSchur, 8, Double), None);
        assert_eq!(target(RowKind::CloverDslash, 18, Half), None);
    }

    #[test]
    fn floors_are_the_byte_model() {
        // 960 B/site dslash and 3264 B/site CR iteration, double, 18 reals.
        assert_eq!(dslash_floor(18, Precision::Double), 960.0);
        assert_eq!(cr_iteration_floor(18, Precision::Double), 3264.0);
        assert_eq!(dslash_floor(12, Precision::Single), 384.0);
        // 8 reals: 4 * 8 * 8 + 2 * 192 double, half that in single (conventions.md).
        assert_eq!(dslash_floor(8, Precision::Double), 640.0);
        assert_eq!(dslash_floor(8, Precision::Single), 320.0);
        assert_eq!(schur_floor(8, Precision::Single), 256.0 + 240.0);
        assert_eq!(schur_floor(18, Precision::Double), 1152.0 + 480.0);
        // Even-odd CR, single, 12 reals: 2 hops x 4 links x 12 x 4 B + 2.5 spinors of 96
        // B, then 12 half-lattice spinors (6 per full-lattice site): 1200 B/site.
        assert_eq!(
            cr_iteration_eo_floor(12, Precision::Single),
            384.0 + 240.0 + 576.0
        );
        // Even-odd BiCGStab, single, 12 reals: two Schur operators (624 each) and 18
        // half-lattice spinors (9 x 96 per full-lattice site): 2112 B/site.
        assert_eq!(
            bicgstab_iteration_eo_floor(12, Precision::Single),
            2.0 * 624.0 + 864.0
        );
    }
}
