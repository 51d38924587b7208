//! Tests of the vectorised (site-blocked) Wilson operator and the CPU backend built on it:
//! agreement with the reference operator, the fallback for LX % 4 != 0, bit-exact layout
//! round trips, and bitwise independence of the thread count.

use qcd_solve::backend::cpu::CpuBackend;
use qcd_solve::backend::prelude::*;
use qcd_solve::backend::Operator;
use qcd_solve::dirac::fast::Epilogue;
use qcd_solve::dirac::simd::layout::{LaneGauge, LaneSpinor};
use qcd_solve::dirac::simd::{self, Isa};
use qcd_solve::dirac::{self, Sites};
use qcd_solve::field::{GaugeField, SpinorField, C64};
use qcd_solve::geometry::lattice::{Boundary, Lattice, DEFAULT_BOUNDARY};
use qcd_solve::solver::{conjugate_residual, CrParams};

fn lat(d: [usize; 4]) -> Lattice {
    Lattice::new(d, DEFAULT_BOUNDARY).unwrap()
}

/// The instruction sets this CPU can run (always the portable one).
fn isas() -> Vec<Isa> {
    let mut v = vec![Isa::Portable];
    if Isa::detect() != Isa::Portable {
        v.push(Isa::detect());
    }
    v
}

fn in_pool<T: Send>(threads: usize, f: impl FnOnce() -> T + Send) -> T {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
        .install(f)
}

#[test]
fn vectorised_operator_equals_reference() {
    // LX = 4 (one block per row, both x neighbours are the block itself), LX = 8 and 12
    // (blocks cross), odd other extents, and every boundary antiperiodic (x phase on the
    // wrapping lane).
    let anti = [Boundary::Antiperiodic; 4];
    let cases = [
        Lattice::new([4, 4, 4, 4], DEFAULT_BOUNDARY).unwrap(),
        Lattice::new([8, 3, 2, 6], DEFAULT_BOUNDARY).unwrap(),
        Lattice::new([12, 2, 5, 4], DEFAULT_BOUNDARY).unwrap(),
        Lattice::new([4, 6, 3, 2], anti).unwrap(),
        Lattice::new([8, 4, 2, 3], anti).unwrap(),
    ];
    for l in cases {
        assert!(simd::lanes::supported(&l));
        let g = GaugeField::random(&l, 21);
        let lg = LaneGauge::new(&g).unwrap();
        let psi = SpinorField::random(l.volume(), 4, 0);
        let lpsi = LaneSpinor::from_canonical(&psi);
        for op in [Operator::D, Operator::G5D] {
            let want = dirac::apply_reference(op, &g, 0.131, &psi);
            let epi = Epilogue::Wilson {
                kappa: 0.131,
                gamma5: op == Operator::G5D,
            };
            for isa in isas() {
                let mut out = LaneSpinor::zeros(l.volume());
                simd::apply(isa, &lg, &lpsi, &mut out, epi);
                let d = out.to_canonical().rel_diff(&want);
                assert!(d < 1e-14, "{} {op} {isa:?}: rel diff {d}", l.dims_string());
            }
        }
        // The bare hopping term against the scalar one.
        let mut want = SpinorField::zeros(l.volume());
        dirac::fast::hop(&g, &psi, &mut want, Sites::All);
        for isa in isas() {
            let mut out = LaneSpinor::zeros(l.volume());
            simd::apply(isa, &lg, &lpsi, &mut out, Epilogue::Hop);
            let d = out.to_canonical().rel_diff(&want);
            assert!(d < 1e-14, "{} hop {isa:?}: rel diff {d}", l.dims_string());
        }
    }
}

#[test]
fn lx_not_multiple_of_four_falls_back_to_scalar() {
    // LX = 3, 6, 5: no blocked gauge field; the result is exactly the scalar operator's.
    // 5x3x1x3 has a volume that is not a multiple of 4 (a zero-padded last block).
    for dims in [[3, 5, 2, 6], [6, 4, 4, 8], [5, 3, 1, 3]] {
        let l = lat(dims);
        assert!(!simd::lanes::supported(&l));
        let g = GaugeField::random(&l, 17);
        assert!(LaneGauge::new(&g).is_none());
        let psi = SpinorField::random(l.volume(), 3, 0);
        for op in [Operator::D, Operator::G5D] {
            let mut got = SpinorField::zeros(l.volume());
            simd::apply_canonical(op, &g, 0.124, &psi, &mut got);
            let mut scalar = SpinorField::zeros(l.volume());
            dirac::apply(op, &g, 0.124, &psi, &mut scalar);
            assert_eq!(got, scalar, "{dims:?} {op}");
            let d = got.rel_diff(&dirac::apply_reference(op, &g, 0.124, &psi));
            assert!(d < 1e-14, "{dims:?} {op}: rel diff {d}");
        }
    }
}

#[test]
fn free_field_through_the_blocked_path() {
    // U = 1, constant spinor, all boundaries periodic: H psi = 8 psi (analytic), so
    // D psi = (1 - 8 kappa) psi exactly in binary for kappa = 1/16.
    let l = Lattice::new([8, 4, 2, 4], [Boundary::Periodic; 4]).unwrap();
    let g = GaugeField::unit(&l);
    let mut psi = SpinorField::zeros(l.volume());
    for (k, z) in psi.data.iter_mut().enumerate() {
        *z = C64::new((k % 12) as f64 - 5.0, 0.5 * (k % 12) as f64);
    }
    let mut got = SpinorField::zeros(l.volume());
    simd::apply_canonical(Operator::D, &g, 1.0 / 16.0, &psi, &mut got);
    let want = SpinorField {
        data: psi.data.iter().map(|z| z * 0.5).collect(),
    };
    assert_eq!(got, want);
}

#[test]
fn layout_round_trips_are_bit_exact() {
    for dims in [[4, 4, 4, 4], [8, 2, 3, 2], [5, 3, 1, 3], [3, 1, 1, 1]] {
        let l = lat(dims);
        let psi = SpinorField::random(l.volume(), 9, 0);
        let lp = LaneSpinor::from_canonical(&psi);
        assert_eq!(lp.volume(), l.volume());
        assert_eq!(lp.to_canonical(), psi, "{dims:?}");
        // Padding lanes of a partial last block are zero.
        let padded = lp.data.len() * 4 / 24 - l.volume();
        assert!(padded < 4);
        if simd::lanes::supported(&l) {
            let g = GaugeField::random(&l, 10);
            let lg = LaneGauge::new(&g).unwrap();
            for x in 0..l.volume() {
                for mu in 0..4 {
                    assert_eq!(lg.link(x, mu), *g.link(x, mu), "{dims:?} site {x} mu {mu}");
                }
            }
        }
    }
}

#[test]
fn operator_is_bitwise_independent_of_thread_count() {
    for dims in [[8, 4, 4, 6], [4, 2, 2, 2], [6, 2, 2, 2]] {
        let l = lat(dims);
        let g = GaugeField::random(&l, 30);
        let psi = SpinorField::random(l.volume(), 31, 0);
        let run = |threads: usize, isa: Isa| {
            in_pool(threads, || {
                let lg = LaneGauge::new(&g);
                let lpsi = LaneSpinor::from_canonical(&psi);
                let mut out = LaneSpinor::zeros(l.volume());
                let epi = Epilogue::Wilson {
                    kappa: 0.12,
                    gamma5: true,
                };
                match &lg {
                    Some(lg) => simd::apply(isa, lg, &lpsi, &mut out, epi),
                    None => simd::apply_lanes(Operator::G5D, &g, None, 0.12, &lpsi, &mut out),
                }
                out
            })
        };
        for isa in isas() {
            let one = run(1, isa);
            assert_eq!(run(2, isa), one, "{dims:?} {isa:?} 2 threads");
            assert_eq!(run(3, isa), one, "{dims:?} {isa:?} 3 threads");
        }
    }
}

#[test]
fn cpu_backend_solve_is_bitwise_independent_of_thread_count() {
    // The whole CR solve (operator, BLAS-1, reductions) on the blocked backend: iterate
    // history and solution must be bit-identical for 1, 2 and 3 threads. The volume spans
    // several reduction chunks so the fixed chunking is exercised.
    for dims in [[8, 8, 8, 8], [6, 4, 4, 4]] {
        let l = lat(dims);
        let g = GaugeField::random(&l, 40);
        let b = SpinorField::random(l.volume(), 41, 0);
        let solve = |threads: usize| {
            in_pool(threads, || {
                let mut be = CpuBackend::new(&g, 0.11);
                let bf = be.upload(&b).unwrap();
                let params = CrParams::new(1e-10, 30);
                let out = conjugate_residual(&mut be, Operator::G5D, &bf, &params).unwrap();
                (out.history, be.download(&out.x).unwrap())
            })
        };
        let one = solve(1);
        assert!(one.0.len() > 5, "{dims:?}: the solve should iterate");
        assert_eq!(solve(2), one, "{dims:?} 2 threads");
        assert_eq!(solve(3), one, "{dims:?} 3 threads");
    }
}

#[test]
fn cpu_backend_blas_matches_canonical_arithmetic() {
    // axpy/xpay do the same operations as on C64, so they agree bit for bit; dot and
    // norm2 sum in a different order, so to rounding.
    let l = lat([8, 2, 2, 4]);
    let g = GaugeField::unit(&l);
    let x = SpinorField::random(l.volume(), 50, 0);
    let y = SpinorField::random(l.volume(), 51, 0);
    let a = C64::new(0.3, -1.7);
    let mut be = CpuBackend::new(&g, 0.1);
    let (lx, mut ly) = (be.upload(&x).unwrap(), be.upload(&y).unwrap());
    be.axpy(a, &lx, &mut ly).unwrap();
    let want: Vec<C64> = x.data.iter().zip(&y.data).map(|(x, y)| y + a * x).collect();
    assert_eq!(be.download(&ly).unwrap().data, want);
    be.xpay(&lx, a, &mut ly).unwrap();
    let want: Vec<C64> = x.data.iter().zip(&want).map(|(x, y)| x + a * y).collect();
    assert_eq!(be.download(&ly).unwrap().data, want);

    let ly = be.upload(&y).unwrap();
    let dot = be.dot(&lx, &ly).unwrap();
    let want: C64 = x.data.iter().zip(&y.data).map(|(x, y)| x.conj() * y).sum();
    assert!((dot - want).norm() < 1e-12 * want.norm(), "{dot} vs {want}");
    let n = be.norm2(&lx).unwrap();
    assert!((n - x.norm2()).abs() < 1e-12 * n);
}
