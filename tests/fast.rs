//! The fast path on the CPU backend: the fused CR iteration, even-odd preconditioning and
//! single-double mixed precision. Expected values come from the seed-style reference
//! operator (dirac::reference, written independently of the even-odd and fused code), from
//! the seed's CR (solver::cr, Algorithm 1 as printed), and from the tolerance itself (true
//! residuals recomputed from scratch with the reference operator).

use qcd_solve::app::run::{solve_on, Problem, SolvePlan};
use qcd_solve::backend::cpu::CpuBackend;
use qcd_solve::backend::prelude::*;
use qcd_solve::backend::{Layout, Operator, Precision, Subset};
use qcd_solve::dirac;
use qcd_solve::field::{GaugeField, SpinorField};
use qcd_solve::geometry::lattice::{Boundary, Lattice, DEFAULT_BOUNDARY};
use qcd_solve::solver::{conjugate_residual, fused_cr, CrParams, FusedParams, StopReason};

fn lattice(dims: [usize; 4]) -> Lattice {
    Lattice::new(dims, DEFAULT_BOUNDARY).unwrap()
}

/// The even (or odd) sites of a full field, others zero.
fn on_parity(l: &Lattice, f: &SpinorField, p: usize) -> SpinorField {
    let mut out = f.clone();
    for x in 0..l.volume() {
        if l.parity(x) != p {
            out.data[12 * x..12 * x + 12].fill(Default::default());
        }
    }
    out
}

/// M_ee x_e from the seed-style reference D alone: with x_o = kappa H_oe x_e the full
/// D (x_e, x_o) is (M_ee x_e, 0) (conventions.md, Even-odd), and H_oe x_e = (x - D x)/kappa
/// on odd sites for x = x_e.
fn schur_by_reference(g: &GaugeField, kappa: f64, xe: &SpinorField) -> SpinorField {
    let l = &g.lattice;
    let dx = dirac::apply_reference(Operator::D, g, kappa, xe);
    // D x_e = x_e - kappa H x_e; its odd part is -kappa H_oe x_e.
    let mut x = xe.clone();
    for k in 0..x.data.len() {
        let site = k / 12;
        if l.parity(site) == 1 {
            x.data[k] = -dx.data[k];
        }
    }
    let dfull = dirac::apply_reference(Operator::D, g, kappa, &x);
    for x in 0..l.volume() {
        if l.parity(x) == 1 {
            let odd = dfull.data[12 * x..12 * x + 12]
                .iter()
                .map(|z| z.norm())
                .sum::<f64>();
            assert!(odd < 1e-12, "odd part of D (x_e, kappa H_oe x_e) is {odd}");
        }
    }
    on_parity(l, &dfull, 0)
}

#[test]
fn schur_operator_matches_the_reference_d_to_1e_13() {
    for dims in [[4, 4, 4, 4], [4, 6, 2, 8]] {
        let l = Lattice::new(
            dims,
            [
                Boundary::Periodic,
                Boundary::Antiperiodic,
                Boundary::Periodic,
                Boundary::Antiperiodic,
            ],
        )
        .unwrap();
        let g = GaugeField::random(&l, 5);
        let kappa = 0.13;
        let xe = on_parity(&l, &SpinorField::random(l.volume(), 9, 0), 0);
        let want = schur_by_reference(&g, kappa, &xe);
        let mut be = CpuBackend::new(&g, kappa);
        let full = be.upload(&xe).unwrap();
        for (prec, tol) in [(Precision::Double, 1e-13), (Precision::Single, 1e-6)] {
            let lay = Layout::new(Subset::Even, prec);
            let mut e = be.alloc_layout(lay).unwrap();
            be.convert(&mut e, &full).unwrap();
            for op in [Operator::Schur, Operator::G5Schur] {
                let mut out = be.alloc_layout(lay).unwrap();
                be.apply(op, &mut out, &e).unwrap();
                let got = be.download(&out).unwrap();
                let w = if op == Operator::G5Schur {
                    want.gamma5()
                } else {
                    want.clone()
                };
                let d = got.rel_diff(&w);
                assert!(d <= tol, "{dims:?} {prec:?} {op}: {d:.2e}");
            }
        }
    }
}

#[test]
fn single_precision_full_operator_is_within_1e_6_of_the_reference() {
    let l = lattice([4, 4, 4, 8]);
    let g = GaugeField::random(&l, 2);
    let psi = SpinorField::random(l.volume(), 3, 0);
    let mut be = CpuBackend::new(&g, 0.12);
    let d = be.upload(&psi).unwrap();
    let lay = Layout::new(Subset::Full, Precision::Single);
    let mut s = be.alloc_layout(lay).unwrap();
    be.convert(&mut s, &d).unwrap();
    let mut out = be.alloc_layout(lay).unwrap();
    be.apply(Operator::G5D, &mut out, &s).unwrap();
    let want = dirac::apply_reference(Operator::G5D, &g, 0.12, &psi);
    let diff = be.download(&out).unwrap().rel_diff(&want);
    assert!(
        diff <= 1e-6 && diff > 0.0,
        "single vs double reference: {diff:.2e}"
    );
}

#[test]
fn hop_xpay_prepares_and_reconstructs_as_conventions_say() {
    // x_o = b_o + kappa H_oe x_e must make the odd part of D x equal b_o.
    let l = lattice([4, 4, 4, 4]);
    let g = GaugeField::random(&l, 8);
    let kappa = 0.11;
    let mut be = CpuBackend::new(&g, kappa);
    let xe = on_parity(&l, &SpinorField::random(l.volume(), 1, 0), 0);
    let b = SpinorField::random(l.volume(), 2, 0);
    let (fx, fb) = (be.upload(&xe).unwrap(), be.upload(&b).unwrap());
    let ev = Layout::new(Subset::Even, Precision::Double);
    let od = Layout::new(Subset::Odd, Precision::Double);
    let (mut e, mut bo, mut xo) = (
        be.alloc_layout(ev).unwrap(),
        be.alloc_layout(od).unwrap(),
        be.alloc_layout(od).unwrap(),
    );
    be.convert(&mut e, &fx).unwrap();
    be.convert(&mut bo, &fb).unwrap();
    be.hop_xpay(&mut xo, &e, &bo, kappa, false).unwrap();
    let mut x = be.alloc().unwrap();
    be.convert(&mut x, &e).unwrap();
    be.convert(&mut x, &xo).unwrap();
    let x = be.download(&x).unwrap();
    let dx = dirac::apply_reference(Operator::D, &g, kappa, &x);
    let d = on_parity(&l, &dx, 1).rel_diff(&on_parity(&l, &b, 1));
    assert!(d < 1e-14, "odd part of D x vs b_o: {d:.2e}");
}

#[test]
fn mismatched_layouts_and_odd_extents_are_errors_not_panics() {
    let l = lattice([4, 4, 4, 4]);
    let g = GaugeField::random(&l, 8);
    let mut be = CpuBackend::new(&g, 0.1);
    let full = be.alloc().unwrap();
    let mut half = be
        .alloc_layout(Layout::new(Subset::Even, Precision::Double))
        .unwrap();
    assert!(be.axpy(1.0.into(), &full, &mut half).is_err());
    assert!(be.apply(Operator::D, &mut half, &full).is_err());
    let odd = Lattice::new([5, 4, 4, 4], DEFAULT_BOUNDARY).unwrap();
    let g5 = GaugeField::random(&odd, 1);
    let mut be5 = CpuBackend::new(&g5, 0.1);
    match be5.alloc_layout(Layout::new(Subset::Even, Precision::Double)) {
        Err(qcd_solve::Error::InvalidValue { key, message }) => {
            assert_eq!(key, "LX");
            assert!(message.contains("even-odd"), "{message}");
        }
        other => panic!("expected InvalidValue, got {:?}", other.err()),
    }
}

fn problem(dims: [usize; 4], kappa: f64) -> Problem {
    let l = lattice(dims);
    let gauge = GaugeField::random(&l, 2013);
    let p = gauge.plaquette();
    Problem {
        lattice: l.clone(),
        link_trace: gauge.link_trace(),
        gauge,
        gauge_description: "random".into(),
        gauge_reunitarised: None,
        plaquette: p,
        kappa,
        csw: 0.0,
        mu: 0.0,
        operator: Operator::G5D,
        source: SpinorField::random(l.volume(), 4, 0),
        source_description: "random".into(),
        gauge_fixing: None,
        setup_seconds: 0.0,
    }
}

#[test]
fn fused_cr_gives_the_seed_history_and_does_not_depend_on_the_check_interval() {
    let p = problem([4, 4, 4, 8], 0.124);
    let mut be = CpuBackend::new(&p.gauge, p.kappa);
    let b = be.upload(&p.source.gamma5()).unwrap();
    let seed = conjugate_residual(&mut be, Operator::G5D, &b, &CrParams::new(1e-10, 500)).unwrap();
    assert_eq!(seed.reason, StopReason::Converged);
    let mut histories = vec![];
    for k in [1, 7, 10] {
        let fp = FusedParams {
            check_every: k,
            ..FusedParams::new(1e-10, 500)
        };
        let (out, stats) = fused_cr(&mut be, Operator::G5D, &b, &fp, &mut |_, _| {}).unwrap();
        assert_eq!(out.reason, StopReason::Converged);
        assert_eq!(out.iterations, seed.iterations, "check every {k}");
        for (a, s) in out.history.iter().zip(&seed.history) {
            assert!((a - s).abs() <= 1e-12 * s, "check every {k}: {a} vs {s}");
        }
        // One host read per check: about iterations / k, not one per reduction.
        assert!(
            stats.checks <= seed.iterations / k + 2,
            "{k}: {}",
            stats.checks
        );
        histories.push(out.history);
    }
    // The device-side stop makes the batch size invisible: identical bits.
    assert!(histories.windows(2).all(|w| w[0] == w[1]));
}

#[test]
fn even_odd_and_single_double_solves_reach_tol_with_the_double_true_residual() {
    let p = problem([8, 4, 4, 8], 0.124);
    let tol = 1e-10;
    let mut full_iters = 0;
    for (eo, prec) in [
        (false, Precision::Double),
        (true, Precision::Double),
        (false, Precision::Single),
        (true, Precision::Single),
    ] {
        let mut plan = SolvePlan::seed(CrParams::new(tol, 2000));
        plan.fused = true;
        plan.check_every = 5;
        plan.precision = prec;
        if eo {
            plan.preconditioning = qcd_solve::config::Preconditioning::EvenOdd;
        }
        let mut be = CpuBackend::new(&p.gauge, p.kappa);
        let r = solve_on(&mut be, &p, &plan).unwrap();
        assert_eq!(r.reason, StopReason::Converged, "{}", plan.describe());
        // The truth: ||b - D x|| / ||b|| with the seed-style reference operator.
        let dx = dirac::apply_reference(Operator::D, &p.gauge, p.kappa, &r.solution);
        let res = dx.rel_diff(&p.source);
        assert!(
            res <= 1.5 * tol,
            "{}: true residual {res:.3e}",
            plan.describe()
        );
        let st = r.fused.unwrap();
        if prec == Precision::Single {
            assert!(st.reliable_updates >= 3, "{}", plan.describe());
            let last = st.true_residuals.last().unwrap().1;
            assert!(last <= tol, "last reliable update {last:.3e}");
        } else {
            assert_eq!(st.reliable_updates, 0);
        }
        if !eo && prec == Precision::Double {
            full_iters = r.iterations;
        }
        if eo {
            // The Schur system is better conditioned: fewer iterations than the full one.
            assert!(
                r.iterations < full_iters,
                "{}: {} vs {full_iters}",
                plan.describe(),
                r.iterations
            );
        }
    }
}

#[test]
fn a_late_reliable_update_with_a_large_drift_still_converges() {
    // delta = 1e-9: the single iteration runs unchecked until its own residual reaches
    // tol, while the true residual has drifted to ~1e-5 (float rounding); the update must
    // restart the recurrence from the true residual (keeping p stalled at 5e-6).
    let p = problem([8, 4, 4, 8], 0.124);
    let mut plan = SolvePlan::seed(CrParams::new(1e-10, 1000));
    plan.fused = true;
    plan.precision = Precision::Single;
    plan.reliable_delta = 1e-9;
    let mut be = CpuBackend::new(&p.gauge, p.kappa);
    let r = solve_on(&mut be, &p, &plan).unwrap();
    assert_eq!(r.reason, StopReason::Converged);
    let st = r.fused.unwrap();
    let first = st.true_residuals[0].1;
    assert!(first > 1e-7, "expected a visible drift, got {first:.2e}");
    let dx = dirac::apply_reference(Operator::D, &p.gauge, p.kappa, &r.solution);
    assert!(dx.rel_diff(&p.source) <= 1.5e-10);
}

#[test]
fn fast_path_options_on_a_seed_kernel_are_refused_by_key() {
    use qcd_solve::backend::cuda::StencilVersion;
    use qcd_solve::backend::Capabilities;
    let mut plan = SolvePlan::seed(CrParams::new(1e-10, 10));
    assert!(plan
        .check(Capabilities::of_stencil(StencilVersion::V1_6_1))
        .is_ok());
    plan.fused = true;
    plan.preconditioning = qcd_solve::config::Preconditioning::EvenOdd;
    match plan.check(Capabilities::of_stencil(StencilVersion::V1_6_1)) {
        Err(qcd_solve::Error::InvalidValue { key, message }) => {
            assert_eq!(key, "solver.preconditioning");
            assert!(message.contains("3.0"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert!(plan
        .check(Capabilities::of_stencil(StencilVersion::V3_0))
        .is_ok());
    assert!(plan.check(Capabilities::ALL_CPU).is_ok());
    // The new methods run plain on a seed version (full double fields only).
    let mut bicg = SolvePlan::seed(CrParams::new(1e-10, 10));
    bicg.method = qcd_solve::solver::Method::Bicgstab;
    assert!(bicg
        .check(Capabilities::of_stencil(StencilVersion::V1_6_1))
        .is_ok());
    bicg.precision = qcd_solve::backend::Precision::Single;
    let e = bicg
        .check(Capabilities::of_stencil(StencilVersion::V1_6_1))
        .unwrap_err();
    assert!(e.to_string().contains("solver.precision"), "{e}");
}

#[test]
fn command_line_options_give_exit_code_2_with_the_value_named() {
    let bin = env!("CARGO_BIN_EXE_qcd-solve");
    let d = tempfile::tempdir().unwrap();
    let cfg = d.path().join("odd.toml");
    std::fs::write(
        &cfg,
        "[lattice]\nLX = 4\nLY = 4\nLZ = 4\nLT = 5\n[gauge]\ntype = \"unit\"\n[dirac]\nkappa = 0.1\n\
         [backend]\ndevice = \"cpu\"\n",
    )
    .unwrap();
    let out = std::process::Command::new(bin)
        .args([
            "--quiet",
            cfg.to_str().unwrap(),
            "--preconditioning",
            "even-odd",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("LT = 5"), "{err}");
    let out = std::process::Command::new(bin)
        .args(["--quiet", cfg.to_str().unwrap(), "--precision", "half"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("half") && err.contains("single-double"),
        "{err}"
    );
}

#[test]
fn the_iteration_limit_holds_exactly_whatever_the_batch() {
    // max_iterations 23 with batches of 10: the device-side stop ends at 23, not 30.
    let p = problem([4, 4, 4, 8], 0.124);
    let mut be = CpuBackend::new(&p.gauge, p.kappa);
    let b = be.upload(&p.source.gamma5()).unwrap();
    let fp = FusedParams {
        check_every: 10,
        ..FusedParams::new(1e-14, 23)
    };
    let (out, _) = fused_cr(&mut be, Operator::G5D, &b, &fp, &mut |_, _| {}).unwrap();
    assert_eq!(out.reason, StopReason::MaxIterations);
    assert_eq!(out.iterations, 23);
    assert_eq!(out.history.len(), 24);
    assert_eq!(out.operator_applications, 24);
}
