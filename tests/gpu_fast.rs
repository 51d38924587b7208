#![cfg(feature = "gpu-tests")]
//! GPU execution tests of version 3.0's fast path (half-lattice and single-precision
//! fields, the even-odd operators, conversions, hop_xpay, the fused (r|Ar) epilogue),
//! each against the CPU backend on the same fields. Built only with `--features
//! gpu-tests`; every test opens the GPU first and fails loudly when there is none.
//!
//! Tolerances (relative, norm-wise): double 1e-13 (1e-12 for reductions, whose summation
//! order differs), single 1e-6 (the GPU computes in binary32, the CPU rounds only what it
//! stores) and 1e-5 for the single-precision (r|g5 D r), whose terms cancel (see there).

use qcd_solve::backend::cpu::CpuBackend;
use qcd_solve::backend::cuda::{
    CudaBackend, CudaOptions, LinkUpload, Reconstruct, StageShape, StencilVersion,
};
use qcd_solve::backend::prelude::*;
use qcd_solve::backend::{CrScalars, Layout, Operator, Precision, Subset};
use qcd_solve::field::{GaugeField, SpinorField, C64};
use qcd_solve::geometry::lattice::{Lattice, DEFAULT_BOUNDARY};
use qcd_solve::Error;

mod gpu_common;
use gpu_common::{field, gpu, lattices, require_gpu, KAPPA};

fn tol(p: Precision) -> f64 {
    match p {
        Precision::Double => 1e-13,
        Precision::Single => 1e-6,
        Precision::Half => panic!("half precision is tests/gpu_half.rs's"),
    }
}

const OPS: [Operator; 4] = [
    Operator::D,
    Operator::G5D,
    Operator::Schur,
    Operator::G5Schur,
];

fn op_layout(op: Operator, p: Precision) -> Layout {
    Layout::new(op.subset(), p)
}

/// ||op_gpu psi - op_cpu psi|| / ||op_cpu psi|| on fields of op's layout in `prec`.
fn gpu_vs_cpu(
    g: &mut CudaBackend,
    cpu: &mut CpuBackend,
    op: Operator,
    prec: Precision,
    psi: &SpinorField,
) -> f64 {
    let layout = op_layout(op, prec);
    let cx = field(cpu, psi, layout);
    let mut cy = cpu.alloc_layout(layout).unwrap();
    cpu.apply(op, &mut cy, &cx).unwrap();
    let want = cpu.download(&cy).unwrap();
    let gx = field(g, psi, layout);
    let mut gy = g.alloc_layout(layout).unwrap();
    g.apply(op, &mut gy, &gx).unwrap();
    g.download(&gy).unwrap().rel_diff(&want)
}

#[test]
fn every_operator_matches_the_cpu_in_both_precisions() {
    require_gpu();
    let mut failures = Vec::new();
    for l in lattices() {
        let gauge = GaugeField::random(&l, 21);
        let psi = SpinorField::random(l.volume(), 21, 1 << 40);
        let mut cpu = CpuBackend::new(&gauge, KAPPA);
        for (r, block) in [
            (Reconstruct::R18, 96),
            (Reconstruct::R12, 32),
            (Reconstruct::R18, 256),
        ] {
            let mut g = gpu(&gauge, r, block);
            if r == Reconstruct::R12 {
                // Built ahead (as before a graph capture) or lazily: the same results.
                g.prepare_fast_path(Precision::Single).unwrap();
            }
            for prec in [Precision::Double, Precision::Single] {
                for op in OPS {
                    let rel = gpu_vs_cpu(&mut g, &mut cpu, op, prec, &psi);
                    eprintln!(
                        "{} {op} {prec:?} {} block {block}: {rel:.2e}",
                        l.dims_string(),
                        r.label()
                    );
                    if rel.is_nan() || rel > tol(prec) {
                        failures.push(format!(
                            "{} {op} {prec:?} {} b{block}: {rel:e}",
                            l.dims_string(),
                            r.label()
                        ));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures:?}");
}

/// Every link hint of the full mode (the tuner's choice, tune::link_hint_candidates) gives
/// the CPU's operator within the file's tolerances, in both precisions, with 18, 12 and 8
/// reals (the column entries and, with 8 reals, the plain ones), and exactly the default
/// hint's output: the variants differ only in the link loads' cache hints, not in their
/// arithmetic. A hint past the last is refused.
#[test]
fn every_link_hint_matches_the_cpu_and_the_default() {
    use qcd_solve::backend::cuda::Geometry;
    require_gpu();
    let mut failures = Vec::new();
    for l in lattices() {
        let gauge = GaugeField::random(&l, 33);
        let psi = SpinorField::random(l.volume(), 33, 1 << 40);
        let mut cpu = CpuBackend::new(&gauge, KAPPA);
        for r in [Reconstruct::R18, Reconstruct::R12, Reconstruct::R8] {
            let mut g = gpu(&gauge, r, 128);
            let base = g.geometry();
            let hints = qcd_solve::backend::cuda::core::tune::link_hint_candidates(
                StencilVersion::V3_0,
                base,
                true,
            );
            assert_eq!(hints.len(), 2, "two hints besides the default");
            for prec in [Precision::Double, Precision::Single] {
                for op in [Operator::D, Operator::G5D] {
                    g.set_geometry(base).unwrap();
                    let layout = op_layout(op, prec);
                    let x = field(&mut g, &psi, layout);
                    let mut y = g.alloc_layout(layout).unwrap();
                    g.apply(op, &mut y, &x).unwrap();
                    let default = g.download(&y).unwrap();
                    for &h in &hints {
                        g.set_geometry(h).unwrap();
                        let rel = gpu_vs_cpu(&mut g, &mut cpu, op, prec, &psi);
                        g.apply(op, &mut y, &x).unwrap();
                        let same = g.download(&y).unwrap().rel_diff(&default);
                        let what = format!(
                            "{} {op} {prec:?} {} hint {}",
                            l.dims_string(),
                            r.label(),
                            h.link_hint
                        );
                        eprintln!("{what}: cpu {rel:.2e}, default {same:.2e}");
                        if rel.is_nan() || rel > tol(prec) || same != 0.0 {
                            failures.push(format!("{what}: cpu {rel:e}, default {same:e}"));
                        }
                    }
                }
            }
            let past = Geometry {
                link_hint: 3,
                ..base
            };
            match g.set_geometry(past) {
                Err(Error::InvalidValue { key, .. }) => assert_eq!(key, "link_hint"),
                other => panic!("link hint 3: {other:?}"),
            }
        }
    }
    assert!(failures.is_empty(), "{failures:?}");
}

#[test]
fn reconstruct_12_equals_18_reals_in_double() {
    require_gpu();
    for l in lattices() {
        let gauge = GaugeField::random(&l, 4);
        let psi = SpinorField::random(l.volume(), 4, 1 << 40);
        for op in OPS {
            let layout = op_layout(op, Precision::Double);
            let mut outs = Vec::new();
            for r in [Reconstruct::R18, Reconstruct::R12] {
                let mut g = gpu(&gauge, r, 128);
                let x = field(&mut g, &psi, layout);
                let mut y = g.alloc_layout(layout).unwrap();
                g.apply(op, &mut y, &x).unwrap();
                outs.push(g.download(&y).unwrap());
            }
            let rel = outs[1].rel_diff(&outs[0]);
            assert!(rel <= 1e-13, "{} {op}: {rel:e}", l.dims_string());
        }
    }
}

/// The gauge fields of the 8-real tests: random SU(3) on each test lattice and the unit
/// field (every link takes v3_unpack_8's degenerate branch). (The device machine has no
/// ../shared: the 8-real form of the real configurations there is checked on the CPU,
/// src/field/su3.rs and validate/emu/run_v3eo.sh.)
fn r8_fields() -> Vec<(String, GaugeField)> {
    let mut out: Vec<(String, GaugeField)> = lattices()
        .into_iter()
        .map(|l| {
            (
                format!("random {}", l.dims_string()),
                GaugeField::random(&l, 21),
            )
        })
        .collect();
    out.push(("unit 4x4x4x8".into(), GaugeField::unit(&lattices()[0])));
    out
}

/// reconstruct = 8 (links rebuilt from 8 stored reals in registers) against the CPU's full
/// links, every operator, both precisions. Tolerances as the file's: double 1e-13 (the 8
/// reals rebuild a link to about 1e-16 / min(|U00|, |U20|), src/field/su3.rs's round-trip
/// tests, norm-wise far below), single 1e-6 (binary32 arithmetic; the 8 reals and the
/// rebuilt elements are rounded to single like the 18 of r18, validate/emu/run_v3eo.sh
/// measures the same kernel on the CPU at a few 1e-7).
#[test]
fn reconstruct_8_matches_the_cpu_in_both_precisions() {
    require_gpu();
    let mut failures = Vec::new();
    for (name, gauge) in r8_fields() {
        let l = gauge.lattice.clone();
        let psi = SpinorField::random(l.volume(), 21, 1 << 40);
        let mut cpu = CpuBackend::new(&gauge, KAPPA);
        let mut g = gpu(&gauge, Reconstruct::R8, 64);
        for prec in [Precision::Double, Precision::Single] {
            for op in OPS {
                let rel = gpu_vs_cpu(&mut g, &mut cpu, op, prec, &psi);
                eprintln!("{name} {op} {prec:?} r8: {rel:.2e}");
                if rel.is_nan() || rel > tol(prec) {
                    failures.push(format!("{name} {op} {prec:?} r8: {rel:e}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures:?}");
}

/// CR solves with reconstruct = 8 through the main job's solve_on: the fused CR in double
/// on the full lattice and even-odd single-double (reliable updates in double). Expected:
/// converged, and the true residual ||b - D x|| / ||b|| <= tol as the backend computes it
/// (the solver stops on the double residual; even-odd: the full system's residual after
/// the reconstruction, 1.5 tol as tests/gpu_fused.rs allows it), recomputed on the CPU
/// with the full 18-real links within the same bounds.
#[test]
fn reconstruct_8_cr_solves_reach_the_true_residual() {
    use qcd_solve::app::run::{solve_on, Problem, SolvePlan};
    use qcd_solve::config::Preconditioning;
    use qcd_solve::solver::{CrParams, StopReason};
    require_gpu();
    let l = Lattice::new([8, 8, 8, 16], DEFAULT_BOUNDARY).unwrap();
    let gauge = GaugeField::random(&l, 7);
    let source = SpinorField::random(l.volume(), 8, 0);
    let tol = 1e-10;
    let problem = Problem {
        lattice: l.clone(),
        plaquette: gauge.plaquette(),
        link_trace: gauge.link_trace(),
        gauge: gauge.clone(),
        gauge_description: "random".into(),
        gauge_reunitarised: None,
        kappa: KAPPA,
        csw: 0.0,
        mu: 0.0,
        operator: Operator::G5D,
        source: source.clone(),
        source_description: "random".into(),
        gauge_fixing: None,
        setup_seconds: 0.0,
    };
    let mut g = gpu(&gauge, Reconstruct::R8, 128);
    let mut cpu = CpuBackend::new(&gauge, KAPPA);
    let b = cpu.upload(&source).unwrap();
    for (eo, bound) in [(false, tol), (true, 1.5 * tol)] {
        let mut plan = SolvePlan::seed(CrParams::new(tol, 2000));
        plan.fused = true;
        if eo {
            plan.preconditioning = Preconditioning::EvenOdd;
            plan.precision = Precision::Single;
            plan.check_every = 5;
        }
        let r = solve_on(&mut g, &problem, &plan).unwrap();
        let x = cpu.upload(&r.solution).unwrap();
        let on_cpu = qcd_solve::solver::true_residual(&mut cpu, Operator::D, &b, &x).unwrap();
        eprintln!(
            "r8 {}: {} iterations, true residual {:.2e} (GPU), {on_cpu:.2e} (CPU, 18 reals)",
            plan.describe(),
            r.iterations,
            r.true_residual
        );
        assert_eq!(r.reason, StopReason::Converged, "{}", plan.describe());
        assert!(
            r.true_residual <= bound,
            "{}: {:e}",
            plan.describe(),
            r.true_residual
        );
        assert!(on_cpu <= bound, "{}: CPU {on_cpu:e}", plan.describe());
    }
}

#[test]
fn hop_xpay_matches_the_cpu() {
    require_gpu();
    for l in lattices() {
        let gauge = GaugeField::random(&l, 8);
        let a = SpinorField::random(l.volume(), 8, 1 << 40);
        let b = SpinorField::random(l.volume(), 8, 2 << 40);
        let mut cpu = CpuBackend::new(&gauge, KAPPA);
        let mut g = gpu(&gauge, Reconstruct::R18, 64);
        for prec in [Precision::Double, Precision::Single] {
            for p in [Subset::Even, Subset::Odd] {
                let q = Subset::from_parity(1 - p.parity().unwrap());
                for (c, g5) in [(KAPPA, false), (-0.37, true)] {
                    let (lo, li) = (Layout::new(p, prec), Layout::new(q, prec));
                    let (ci, cy) = (field(&mut cpu, &a, li), field(&mut cpu, &b, lo));
                    let mut co = cpu.alloc_layout(lo).unwrap();
                    cpu.hop_xpay(&mut co, &ci, &cy, c, g5).unwrap();
                    let want = cpu.download(&co).unwrap();
                    let (gi, gy) = (field(&mut g, &a, li), field(&mut g, &b, lo));
                    let mut go = g.alloc_layout(lo).unwrap();
                    g.hop_xpay(&mut go, &gi, &gy, c, g5).unwrap();
                    let rel = g.download(&go).unwrap().rel_diff(&want);
                    eprintln!(
                        "{} {p:?} {prec:?} c={c} g5={g5}: {rel:.2e}",
                        l.dims_string()
                    );
                    assert!(rel <= tol(prec), "{p:?} {prec:?} c={c} g5={g5}: {rel:e}");
                }
            }
        }
    }
}

#[test]
fn conversions_round_trip_and_match_the_cpu() {
    require_gpu();
    let l = &lattices()[1];
    let gauge = GaugeField::random(l, 2);
    let psi = SpinorField::random(l.volume(), 2, 1 << 40);
    let mut cpu = CpuBackend::new(&gauge, KAPPA);
    let mut g = gpu(&gauge, Reconstruct::R18, 256);
    let full = g.upload(&psi).unwrap();
    // Gather both parities in double and scatter them back: exact.
    let mut back = g.alloc().unwrap();
    for p in [Subset::Even, Subset::Odd] {
        let mut h = g.alloc_layout(Layout::new(p, Precision::Double)).unwrap();
        g.convert(&mut h, &full).unwrap();
        g.convert(&mut back, &h).unwrap();
    }
    assert_eq!(g.download(&back).unwrap(), psi);
    // Through single precision and every subset, against the CPU's same sequence.
    for subset in [Subset::Full, Subset::Even, Subset::Odd] {
        let s = Layout::new(subset, Precision::Single);
        let d = Layout::new(subset, Precision::Double);
        let gs = field(&mut g, &psi, s);
        let mut gd = g.alloc_layout(d).unwrap();
        g.convert(&mut gd, &gs).unwrap();
        let cs = field(&mut cpu, &psi, s);
        let mut cd = cpu.alloc_layout(d).unwrap();
        cpu.convert(&mut cd, &cs).unwrap();
        let (a, b) = (g.download(&gd).unwrap(), cpu.download(&cd).unwrap());
        assert_eq!(a, b, "{subset:?}: f32 rounding is the same on both");
        assert_eq!(g.download(&gs).unwrap(), b);
        let exact = field(&mut cpu, &psi, d);
        assert!(a.rel_diff(&cpu.download(&exact).unwrap()) < 1e-7);
        // Scatter a single half into a full single field: the other parity stays.
        if subset != Subset::Full {
            let mut gf = field(&mut g, &psi, Layout::new(Subset::Full, Precision::Single));
            let zero = g.alloc_layout(s).unwrap();
            g.convert(&mut gf, &zero).unwrap();
            let mut cf = field(&mut cpu, &psi, Layout::new(Subset::Full, Precision::Single));
            let czero = cpu.alloc_layout(s).unwrap();
            cpu.convert(&mut cf, &czero).unwrap();
            assert_eq!(g.download(&gf).unwrap(), cpu.download(&cf).unwrap());
        }
    }
}

#[test]
fn blas_and_reductions_on_half_and_single_fields_match_the_cpu() {
    require_gpu();
    let l = &lattices()[0];
    let gauge = GaugeField::unit(l);
    let x = SpinorField::random(l.volume(), 3, 1 << 40);
    let y = SpinorField::random(l.volume(), 3, 2 << 40);
    let a = C64::new(0.7, -1.3);
    let mut cpu = CpuBackend::new(&gauge, KAPPA);
    let mut g = gpu(&gauge, Reconstruct::R18, 256);
    for subset in [Subset::Full, Subset::Even, Subset::Odd] {
        for prec in [Precision::Double, Precision::Single] {
            let lay = Layout::new(subset, prec);
            let (gx, mut gy) = (field(&mut g, &x, lay), field(&mut g, &y, lay));
            let (cx, mut cy) = (field(&mut cpu, &x, lay), field(&mut cpu, &y, lay));
            let (n0, nc) = (g.norm2(&gx).unwrap(), cpu.norm2(&cx).unwrap());
            assert!((n0 - nc).abs() / nc < 1e-12, "{lay:?} norm2 {n0} vs {nc}");
            let (d0, dc) = (g.dot(&gx, &gy).unwrap(), cpu.dot(&cx, &cy).unwrap());
            assert!(
                (d0 - dc).norm() / dc.norm() < 1e-12,
                "{lay:?} dot {d0} vs {dc}"
            );
            // Bitwise repeatable.
            assert_eq!(g.dot(&gx, &gy).unwrap(), d0);
            g.axpy(a, &gx, &mut gy).unwrap();
            cpu.axpy(a, &cx, &mut cy).unwrap();
            let rel = g
                .download(&gy)
                .unwrap()
                .rel_diff(&cpu.download(&cy).unwrap());
            assert!(rel <= tol(prec), "{lay:?} axpy {rel:e}");
            g.xpay(&gx, a, &mut gy).unwrap();
            cpu.xpay(&cx, a, &mut cy).unwrap();
            let rel = g
                .download(&gy)
                .unwrap()
                .rel_diff(&cpu.download(&cy).unwrap());
            assert!(rel <= tol(prec), "{lay:?} xpay {rel:e}");
            let mut gz = g.alloc_layout(lay).unwrap();
            g.copy(&mut gz, &gy).unwrap();
            assert_eq!(g.download(&gz).unwrap(), g.download(&gy).unwrap());
        }
    }
}

/// The reliable update's fused steps (Space::add_converted, one add_widened launch, and
/// Space::residual_converted, one residual_norm2 launch) against the unfused sequence they
/// replace on the same GPU (to_double + xaxpy; xscal + xaxpy, norm2, to_single: the CPU
/// backend's `Space` defaults, run here through the same backend's plain methods), on a
/// 16x16x16x32 lattice's even fields (786432 complex: the climb's two levels) and on the
/// small test lattices. Expected: the fields bit for bit (b - r and x + 1 y round once in
/// both); (r|r) to 1e-15, which sums the same values in the same tree (only the kernel's
/// own contraction of |z|^2 could differ), and equal to the CPU backend's to 1e-12.
#[test]
fn reliable_update_fused_steps_equal_the_unfused_sequence() {
    require_gpu();
    let mut all = lattices();
    all.push(Lattice::new([16, 16, 16, 32], DEFAULT_BOUNDARY).unwrap());
    for l in &all {
        let gauge = GaugeField::unit(l);
        let mut g = gpu(&gauge, Reconstruct::R18, 256);
        let mut cpu = CpuBackend::new(&gauge, KAPPA);
        let (x, y, b) = (
            SpinorField::random(l.volume(), 4, 1 << 40),
            SpinorField::random(l.volume(), 4, 2 << 40),
            SpinorField::random(l.volume(), 4, 3 << 40),
        );
        let even_d = Layout::new(Subset::Even, Precision::Double);
        let even_s = Layout::new(Subset::Even, Precision::Single);
        // x_d += x_s.
        let xs = field(&mut g, &x, even_s);
        let (mut fused, mut plain) = (field(&mut g, &y, even_d), field(&mut g, &y, even_d));
        let mut scratch = g.alloc_layout(even_d).unwrap();
        g.add_converted(&xs, &mut fused, &mut scratch).unwrap();
        g.convert(&mut scratch, &xs).unwrap();
        g.axpy(C64::new(1.0, 0.0), &scratch, &mut plain).unwrap();
        assert_eq!(g.download(&fused).unwrap(), g.download(&plain).unwrap());
        // r = b - r, (r|r), r_s = r.
        let bd = field(&mut g, &b, even_d);
        let (mut low_f, mut low_p) = (
            g.alloc_layout(even_s).unwrap(),
            g.alloc_layout(even_s).unwrap(),
        );
        let n_fused = g.residual_converted(&bd, &mut fused, &mut low_f).unwrap();
        g.xpay(&bd, C64::new(-1.0, 0.0), &mut plain).unwrap();
        let n_plain = g.norm2(&plain).unwrap();
        g.convert(&mut low_p, &plain).unwrap();
        assert_eq!(g.download(&fused).unwrap(), g.download(&plain).unwrap());
        assert_eq!(g.download(&low_f).unwrap(), g.download(&low_p).unwrap());
        assert!(
            (n_fused - n_plain).abs() <= 1e-15 * n_plain,
            "{:?}: (r|r) {n_fused} vs {n_plain}",
            l.dims
        );
        // Repeatable bit for bit, and the CPU backend's defaults agree.
        let mut again = field(&mut g, &y, even_d);
        g.add_converted(&xs, &mut again, &mut scratch).unwrap();
        let n_again = g.residual_converted(&bd, &mut again, &mut low_p).unwrap();
        assert_eq!(n_again.to_bits(), n_fused.to_bits());
        let cxs = field(&mut cpu, &x, even_s);
        let mut cy = field(&mut cpu, &y, even_d);
        let mut cscratch = cpu.alloc_layout(even_d).unwrap();
        cpu.add_converted(&cxs, &mut cy, &mut cscratch).unwrap();
        let cb = field(&mut cpu, &b, even_d);
        let mut clow = cpu.alloc_layout(even_s).unwrap();
        let n_cpu = cpu.residual_converted(&cb, &mut cy, &mut clow).unwrap();
        assert!(
            (n_fused - n_cpu).abs() / n_cpu < 1e-12,
            "{n_fused} vs {n_cpu}"
        );
        let rel = g
            .download(&fused)
            .unwrap()
            .rel_diff(&cpu.download(&cy).unwrap());
        assert!(rel <= tol(Precision::Double), "residual {rel:e}");
    }
}

#[test]
fn cr_apply_dot_matches_the_cpu_and_obeys_active() {
    require_gpu();
    for l in lattices() {
        let gauge = GaugeField::random(&l, 13);
        let r = SpinorField::random(l.volume(), 13, 1 << 40);
        let mut cpu = CpuBackend::new(&gauge, KAPPA);
        // Block 32: the most blocks the partials have room for.
        for block in [32, 256] {
            let mut g = gpu(&gauge, Reconstruct::R18, block);
            for prec in [Precision::Double, Precision::Single] {
                for op in OPS {
                    let layout = op_layout(op, prec);
                    let s = CrScalars {
                        rar: C64::new(0.7, -0.2),
                        iter: 3,
                        max_iter: 10,
                        nr: 1.0,
                        active: true,
                        ..CrScalars::default()
                    };
                    let (cr, mut car) = (
                        field(&mut cpu, &r, layout),
                        cpu.alloc_layout(layout).unwrap(),
                    );
                    let mut cs = cpu.cr_state(&s).unwrap();
                    cpu.cr_apply_dot(op, &mut cs, &cr, &mut car).unwrap();
                    let want = cpu.cr_get(&cs).unwrap();
                    let (gr, mut gar) =
                        (field(&mut g, &r, layout), g.alloc_layout(layout).unwrap());
                    let mut gs = g.cr_state(&s).unwrap();
                    // Twice: the ticket must have wrapped back to zero in between.
                    for _ in 0..2 {
                        let mut gs1 = g.cr_state(&s).unwrap();
                        g.cr_apply_dot(op, &mut gs1, &gr, &mut gar).unwrap();
                        g.cr_apply_dot(op, &mut gs, &gr, &mut gar).unwrap();
                    }
                    let got = g.fast_test_cr_read(&gs).unwrap();
                    // The second call saw rar = rar_new: beta = 1.
                    let rel = (got.rar - want.rar).norm() / want.rar.norm();
                    // Single: (r|g5 D r) sums terms of both signs (g5 D is indefinite), so
                    // the f32 rounding of Ar (6e-8 per element) comes out magnified by the
                    // cancellation; run 6 measured 1.1e-6 on 4x4x4x8 at block 32.
                    let tol_dot = if prec == Precision::Double {
                        1e-12
                    } else {
                        1e-5
                    };
                    eprintln!(
                        "{} {op} {prec:?} block {block}: rar {rel:.2e}",
                        l.dims_string()
                    );
                    assert!(
                        rel <= tol_dot,
                        "{op} {prec:?} b{block}: rar {} vs {}",
                        got.rar,
                        want.rar
                    );
                    assert!(
                        (got.beta - C64::new(1.0, 0.0)).norm() < 1e-14,
                        "{}",
                        got.beta
                    );
                    let one = {
                        let mut gs1 = g.cr_state(&s).unwrap();
                        g.cr_apply_dot(op, &mut gs1, &gr, &mut gar).unwrap();
                        g.fast_test_cr_read(&gs1).unwrap()
                    };
                    let rb = (one.beta - want.beta).norm() / want.beta.norm();
                    assert!(
                        rb <= tol_dot,
                        "{op} {prec:?}: beta {} vs {}",
                        one.beta,
                        want.beta
                    );
                    let rel = g
                        .download(&gar)
                        .unwrap()
                        .rel_diff(&cpu.download(&car).unwrap());
                    assert!(rel <= tol(prec), "{op} {prec:?}: Ar {rel:e}");
                    // Inactive: nothing changes, neither the field nor the scalars.
                    let off = CrScalars { active: false, ..s };
                    let mut gz = g.alloc_layout(layout).unwrap();
                    let mut gs0 = g.cr_state(&off).unwrap();
                    g.cr_apply_dot(op, &mut gs0, &gr, &mut gz).unwrap();
                    assert_eq!(g.norm2(&gz).unwrap(), 0.0);
                    assert_eq!(g.fast_test_cr_read(&gs0).unwrap(), off);
                }
            }
        }
    }
}

#[test]
fn odd_extents_are_refused_by_3_0() {
    require_gpu();
    let l = Lattice::new([4, 4, 5, 8], DEFAULT_BOUNDARY).unwrap();
    let gauge = GaugeField::unit(&l);
    let opts = CudaOptions {
        version: StencilVersion::V3_0,
        coarse_block: 64,
        ..CudaOptions::default()
    };
    match CudaBackend::new(&gauge, KAPPA, &opts) {
        Err(Error::InvalidValue { message, .. }) => {
            assert!(
                message.contains("even extents") && message.contains("4x4x5x8"),
                "{message}"
            )
        }
        other => panic!("expected InvalidValue, got {:?}", other.err()),
    }
}

#[test]
fn mixed_layouts_and_seed_versions_are_refused_not_panics() {
    require_gpu();
    let l = &lattices()[0];
    let gauge = GaugeField::unit(l);
    let psi = SpinorField::random(l.volume(), 1, 0);
    let mut g = gpu(&gauge, Reconstruct::R18, 64);
    let even = Layout::new(Subset::Even, Precision::Double);
    let odd = Layout::new(Subset::Odd, Precision::Double);
    let even_s = Layout::new(Subset::Even, Precision::Single);
    let e = field(&mut g, &psi, even);
    let mut o = field(&mut g, &psi, odd);
    let mut es = field(&mut g, &psi, even_s);
    let mut full = g.upload(&psi).unwrap();
    // Fields of different layouts in one operation are an internal invariant (exit 9);
    // an operator or capability the backend lacks is a refused value (exit 2). Either
    // way an error, never a panic.
    let invalid = |r: Result<(), Error>| {
        matches!(r, Err(Error::InvalidValue { .. }) | Err(Error::Internal(_)))
    };
    assert!(matches!(
        g.axpy(C64::new(1.0, 0.0), &e, &mut o),
        Err(Error::Internal(_))
    ));
    assert!(invalid(g.xpay(&e, C64::new(1.0, 0.0), &mut es)));
    assert!(matches!(g.dot(&e, &es), Err(Error::Internal(_))));
    assert!(invalid(g.copy(&mut o, &e)));
    assert!(invalid(g.convert(&mut o, &e)));
    assert!(invalid(g.apply(Operator::D, &mut o, &e)));
    let full2 = g.upload(&psi).unwrap();
    assert!(invalid(g.apply(Operator::Schur, &mut full, &full2)));
    assert!(invalid(g.apply(Operator::Schur, &mut es, &e)));
    let o2 = field(&mut g, &psi, odd);
    assert!(invalid(g.hop_xpay(&mut o, &o2, &e, 1.0, false)));
    assert!(invalid(g.hop_xpay(&mut es, &o2, &e, 1.0, false)));
    // A seed version refuses the fast path by name.
    let opts = CudaOptions {
        version: StencilVersion::V1_5,
        ..CudaOptions::default()
    };
    let mut seed = CudaBackend::new(&gauge, KAPPA, &opts).unwrap();
    match seed.alloc_layout(even) {
        Err(Error::InvalidValue { message, .. }) => {
            assert!(message.contains("fast path"), "{message}")
        }
        other => panic!("expected a refusal, got {:?}", other.err()),
    }
    let x = seed.upload(&psi).unwrap();
    let mut y = seed.alloc().unwrap();
    assert!(invalid(seed.apply(Operator::Schur, &mut y, &x)));
    assert!(invalid(seed.convert(&mut y, &x)));
    assert!(invalid(seed.hop_xpay(&mut y, &x, &x, 1.0, false)));
    assert_eq!(seed.layout(&x), Layout::FULL);
}

/// 3.0's link array laid out on the device from whole sites (the workers link upload) is
/// the host layout's bit for bit, r18 and r12, on both test lattices (6x4x8x4, 4x4x4x8),
/// in one chunk and in several (50 or 74 sites a chunk, the last partial; 2 sites a chunk,
/// through 2 or 3 of each worker's staging buffers); r8 keeps the host layout whatever is
/// asked.
#[test]
fn device_laid_links_are_the_host_layout_bit_for_bit() {
    require_gpu();
    let whole = 1 << 23;
    for l in lattices() {
        let g = GaugeField::random(&l, 21);
        let v = l.volume();
        for r in [Reconstruct::R18, Reconstruct::R12, Reconstruct::R8] {
            let opts = CudaOptions {
                version: StencilVersion::V3_0,
                coarse_block: 64,
                reconstruct: r,
                ..CudaOptions::default()
            };
            // The shared buffers' shape and each worker's.
            let shape = |values, buffers| StageShape {
                values,
                buffers,
                lane_values: values,
                lane_buffers: buffers,
            };
            let mut host = CudaBackend::new_with_link_upload(
                &g,
                KAPPA,
                &opts,
                LinkUpload::Host,
                shape(whole, 2),
            )
            .unwrap();
            assert_eq!(host.setup_times().links_upload, "host");
            let want = host.download_links().unwrap().expect("3.0 has links");
            assert_eq!(want.len(), 2 * 4 * r.elems() * v);
            for mode in [LinkUpload::Workers] {
                for (chunk_values, buffers) in
                    [(whole, 2), (72 * 50, 2), (72 * 2 + 1, 2), (72 * 2 + 1, 3)]
                {
                    let label = format!(
                        "{} {r:?} {mode:?} chunk {chunk_values}, {buffers} buffers",
                        l.dims_string()
                    );
                    let mut b = CudaBackend::new_with_link_upload(
                        &g,
                        KAPPA,
                        &opts,
                        mode,
                        shape(chunk_values, buffers),
                    )
                    .unwrap_or_else(|e| panic!("{label}: {e}"));
                    let st = b.setup_times().clone();
                    let taken = if r == Reconstruct::R8 {
                        "host"
                    } else {
                        mode.name()
                    };
                    assert_eq!(st.links_upload, taken, "{label}");
                    assert_eq!(st.links_bytes, (want.len() * 8) as u64, "{label}");
                    let got = b.download_links().unwrap().expect("3.0 has links");
                    assert_eq!(got.len(), want.len(), "{label}");
                    let wrong: Vec<usize> = (0..want.len())
                        .filter(|&i| got[i].to_bits() != want[i].to_bits())
                        .collect();
                    assert!(
                        wrong.is_empty(),
                        "{label}: {} of {} values differ, first at {} ({} instead of {})",
                        wrong.len(),
                        want.len(),
                        wrong[0],
                        got[wrong[0]],
                        want[wrong[0]]
                    );
                }
            }
        }
    }
}
