//! The Krylov methods through the linear-operator seam (CR, BiCGStab, GCR(m), CGNE), each
//! plain, even-odd, single-double and both, on the CPU backend. Expected values: the
//! analytic free-field solution (conventions.md: for U = 1 the plane wave e^{ipx} u is an
//! eigenvector of D with the spin matrix M(p) = a + i sum_mu b_mu g_mu, a = 1 - 2k sum cos
//! p_mu, b_mu = 2k sin p_mu, so D^-1 acts as (a - i sum b_mu g_mu) / (a^2 + |b|^2)), and
//! on real gauge files (../shared/lattices, written by other codes) the true residual of
//! D x = b recomputed from scratch by the CPU reference operator.

use qcd_solve::app::run::{build_problem, cpu_residual_of_d, solve_on, SolvePlan};
use qcd_solve::backend::cpu::CpuBackend;
use qcd_solve::backend::prelude::*;
use qcd_solve::config::{LoadedConfig, Preconditioning};
use qcd_solve::field::gamma::gamma;
use qcd_solve::field::spinor::{plane_wave_momentum, SITE_LEN};
use qcd_solve::field::{SpinorField, C64};
use qcd_solve::linalg::{Form, LinearOperator, Normal, Operator, Precision};
use qcd_solve::solver::{Method, StopReason};
use std::path::PathBuf;

/// The (preconditioning, precision) variants every method must run.
fn variants() -> Vec<(&'static str, Preconditioning, Precision)> {
    vec![
        ("plain", Preconditioning::None, Precision::Double),
        ("even-odd", Preconditioning::EvenOdd, Precision::Double),
        ("single-double", Preconditioning::None, Precision::Single),
        ("eo+single", Preconditioning::EvenOdd, Precision::Single),
    ]
}

/// Multigrid runs plain only: its smoother works on the full operator and its own
/// precision key sets the preconditioner's (the config refuses even-odd and
/// single-double with method = "mg").
fn skipped(method: Method, variant: &str) -> bool {
    method == Method::Mg && variant != "plain"
}

fn config(lattice: &str, gauge: &str, kappa: f64, source: &str) -> LoadedConfig {
    let text = format!(
        "[lattice]\n{lattice}\n[gauge]\n{gauge}\n[dirac]\nkappa = {kappa}\n[source]\n{source}\n\
         [solver]\ntolerance = 1e-10\nmax_iterations = 3000\n[backend]\ndevice = \"cpu\"\n\
         [output]\n"
    );
    LoadedConfig::from_str(&text, "test", PathBuf::from(".")).unwrap()
}

fn plan(method: Method, pre: Preconditioning, precision: Precision) -> SolvePlan {
    let mut c = config(
        "LX = 4\nLY = 4\nLZ = 4\nLT = 8",
        "type = \"unit\"",
        0.1,
        "type = \"random\"\nseed = 1",
    );
    c.config.solver.method = method;
    c.config.solver.preconditioning = pre;
    let mut p = SolvePlan::from_config(&c.config, false);
    p.precision = precision;
    p.preconditioning = pre;
    p
}

#[test]
fn every_method_reaches_the_analytic_free_field_solution() {
    let kappa = 0.12;
    let cfg = config(
        "LX = 4\nLY = 4\nLZ = 4\nLT = 8",
        "type = \"unit\"",
        kappa,
        "type = \"plane-wave\"\nmomentum = [1, 0, 2, 1]\nspin = 2\ncolour = 1",
    );
    let mut problem = build_problem(&cfg).unwrap();
    // A source of six plane waves with random spin-colour vectors (so that the Krylov
    // space is not one eigenvector's), and its analytic solution, wave by wave.
    let mut rng = qcd_solve::rng::Stream::new(11, 0);
    let mut source = SpinorField::zeros(problem.lattice.volume());
    let mut want = SpinorField::zeros(problem.lattice.volume());
    for n in [
        [0, 0, 0, 0],
        [1, 0, 2, 1],
        [3, 1, 0, 2],
        [2, 2, 2, 3],
        [0, 3, 1, 0],
        [1, 1, 3, 2],
    ] {
        let u: [C64; SITE_LEN] = std::array::from_fn(|_| C64::new(rng.gaussian(), rng.gaussian()));
        let p = plane_wave_momentum(&problem.lattice, n);
        let a = 1.0 - 2.0 * kappa * p.iter().map(|x| x.cos()).sum::<f64>();
        let b: Vec<f64> = p.iter().map(|x| 2.0 * kappa * x.sin()).collect();
        let den = a * a + b.iter().map(|x| x * x).sum::<f64>();
        let mut w = [C64::new(0.0, 0.0); SITE_LEN];
        for sp in 0..4 {
            for c in 0..3 {
                let mut v = u[3 * sp + c] * a;
                for (mu, bm) in b.iter().enumerate() {
                    for t in 0..4 {
                        v -= C64::new(0.0, *bm) * gamma(mu)[sp][t] * u[3 * t + c];
                    }
                }
                w[3 * sp + c] = v / den;
            }
        }
        for (s, z) in source
            .data
            .iter_mut()
            .zip(SpinorField::plane_wave(&problem.lattice, n, &u).data)
        {
            *s += z;
        }
        for (s, z) in want
            .data
            .iter_mut()
            .zip(SpinorField::plane_wave(&problem.lattice, n, &w).data)
        {
            *s += z;
        }
    }
    problem.source = source;
    for method in Method::ALL {
        for (name, pre, prec) in variants() {
            if skipped(method, name) {
                continue;
            }
            problem.operator = method.default_operator();
            let mut be = CpuBackend::new(&problem.gauge, kappa);
            let r = solve_on(&mut be, &problem, &plan(method, pre, prec)).unwrap();
            assert_eq!(r.reason, StopReason::Converged, "{method} {name}");
            // ||x - x*|| <= cond(D) ||r|| / ||b||: the free-field D at kappa 0.12 on this
            // lattice has cond below 100 (|a| >= 0.04 at the smallest momenta), tol 1e-10.
            let err = r.solution.rel_diff(&want);
            eprintln!(
                "free field {method} {name}: {} iterations, error {err:.2e}",
                r.iterations
            );
            assert!(
                err < 1e-7,
                "{method} {name}: |x - x_analytic| / |x| = {err:.3e}"
            );
        }
    }
}

#[test]
fn every_method_solves_real_gauge_files_to_tolerance() {
    // Two files from other codes: tmLQCD's 4^3x8 (64-bit ILDG) and the AnalysisToolbox's
    // 8^3x4 NERSC file.
    for (file, format, dims, kappa) in [
        ("ahmidas_conf.48", "ildg", [4, 4, 4, 8], 0.125),
        ("ATB_nersc.l8t4b3360", "nersc", [8, 8, 8, 4], 0.12),
    ] {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/lattices")
            .join(file);
        assert!(
            path.exists(),
            "{} is missing: the shared lattices are part of the test set-up",
            path.display()
        );
        let cfg = config(
            &format!(
                "LX = {}\nLY = {}\nLZ = {}\nLT = {}",
                dims[0], dims[1], dims[2], dims[3]
            ),
            &format!(
                "type = \"file\"\npath = {:?}\nformat = \"{format}\"",
                path.display().to_string()
            ),
            kappa,
            "type = \"random\"\nseed = 7",
        );
        let mut problem = build_problem(&cfg).unwrap();
        for method in Method::ALL {
            for (name, pre, prec) in variants() {
                if skipped(method, name) {
                    continue;
                }
                problem.operator = method.default_operator();
                let mut be = CpuBackend::new(&problem.gauge, kappa);
                let r = solve_on(&mut be, &problem, &plan(method, pre, prec)).unwrap();
                assert_eq!(r.reason, StopReason::Converged, "{file} {method} {name}");
                // The residual of D x = b, recomputed from scratch on the CPU, at or below
                // tol (the mixed solves end on a double true residual; the double ones'
                // recurrences drift by less than their last step here: the CPU results are
                // the same bits for any thread count, so this is a fixed outcome).
                let tr = cpu_residual_of_d(&problem, &r.solution);
                eprintln!("{file} {method} {name}: {} iterations, {} applications, true residual {tr:.2e}", r.iterations, r.operator_applications);
                assert!(
                    tr <= 1e-10,
                    "{file} {method} {name}: true residual {tr:.3e} ({} iterations)",
                    r.iterations
                );
            }
        }
    }
}

#[test]
fn cr_through_the_seam_keeps_the_seed_history_bitwise() {
    // The seed's Algorithm 1 (solver::conjugate_residual, host scalars) and the plan's CR
    // (host engine and the CPU's fused capability) are the same arithmetic: equal bits.
    let cfg = config(
        "LX = 4\nLY = 4\nLZ = 4\nLT = 4",
        "type = \"random\"\nseed = 3",
        0.124,
        "type = \"random\"\nseed = 2",
    );
    let problem = build_problem(&cfg).unwrap();
    let mut be = CpuBackend::new(&problem.gauge, problem.kappa);
    let b = be.upload(&problem.source.gamma5()).unwrap();
    let seed = qcd_solve::solver::conjugate_residual(
        &mut be,
        Operator::G5D,
        &b,
        &qcd_solve::solver::CrParams::new(1e-10, 500),
    )
    .unwrap();
    for fused in [false, true] {
        let mut p = plan(Method::Cr, Preconditioning::None, Precision::Double);
        p.fused = fused;
        p.check_every = 1;
        let r = solve_on(&mut be, &problem, &p).unwrap();
        assert_eq!(r.history, seed.history, "fused = {fused}");
    }
}

#[test]
fn normal_operator_is_two_applications_of_a_hermitian_one() {
    let cfg = config(
        "LX = 4\nLY = 4\nLZ = 4\nLT = 4",
        "type = \"random\"\nseed = 3",
        0.124,
        "type = \"random\"\nseed = 2",
    );
    let problem = build_problem(&cfg).unwrap();
    let mut be = CpuBackend::new(&problem.gauge, problem.kappa);
    let x = be.upload(&problem.source).unwrap();
    let mut q = Form(Operator::G5D);
    let mut n = Normal::new(Form(Operator::G5D)).unwrap();
    let mut t = be.alloc().unwrap();
    let mut qq = be.alloc().unwrap();
    LinearOperator::apply(&mut q, &mut be, &mut t, &x).unwrap();
    LinearOperator::apply(&mut q, &mut be, &mut qq, &t).unwrap();
    let mut nx = be.alloc().unwrap();
    n.apply(&mut be, &mut nx, &x).unwrap();
    let (a, b) = (be.download(&qq).unwrap(), be.download(&nx).unwrap());
    assert_eq!(a.rel_diff(&b), 0.0, "the same two applications");
    // (x|N x) = |Q x|^2 > 0: positive definite, as CG needs.
    let xnx = be.dot(&x, &nx).unwrap();
    let tt = be.norm2(&t).unwrap();
    assert!(
        (xnx.re - tt).abs() <= 1e-12 * tt && xnx.im.abs() <= 1e-12 * tt,
        "{xnx} vs {tt}"
    );
    assert_eq!(n.stencil_applications(), 2);
    // A non-Hermitian operator is refused.
    assert!(Normal::<CpuBackend, _>::new(Form(Operator::D)).is_err());
}

#[test]
fn bicgstab_on_d_with_a_point_source_survives_the_exact_breakdown() {
    // With r0 = b a point source, (r0|r_1) is exactly zero on the Wilson D: a hop forth
    // and back along one direction carries (1 - g_mu)(1 + g_mu) = 0 (conventions.md's
    // projectors), so the unguarded recurrence divided 0 by 0 at iteration 2 (measured
    // on the H100, run 18). The restart of the shadow residual must carry it to tol,
    // with the true residual of D x = b recomputed on the CPU at or below 1e-10.
    for (gauge, pre) in [
        ("type = \"random\"\nseed = 5", Preconditioning::None),
        ("type = \"random\"\nseed = 5", Preconditioning::EvenOdd),
        ("type = \"unit\"", Preconditioning::None),
    ] {
        let cfg = config(
            "LX = 4\nLY = 4\nLZ = 4\nLT = 8",
            gauge,
            0.12,
            "type = \"point\"\nsite = [1, 2, 0, 3]\nspin = 2\ncolour = 1",
        );
        let mut problem = build_problem(&cfg).unwrap();
        problem.operator = Operator::D;
        for prec in [Precision::Double, Precision::Single] {
            let mut be = CpuBackend::new(&problem.gauge, problem.kappa);
            let r = solve_on(&mut be, &problem, &plan(Method::Bicgstab, pre, prec)).unwrap();
            assert_eq!(r.reason, StopReason::Converged, "{gauge} {pre:?} {prec:?}");
            let tr = cpu_residual_of_d(&problem, &r.solution);
            assert!(tr <= 1e-10, "{gauge} {pre:?} {prec:?}: {tr:.3e}");
        }
    }
}

#[test]
fn fused_bicgstab_repeats_the_host_loop_bit_for_bit_on_the_cpu() {
    // The fused BiCGStab (scalars where the backend computes, read every check_every
    // iterations, breakdowns restarted by the host) runs on the CPU backend through the
    // host form of its passes (backend::host_cr), which are the host loop's own
    // vector-space operations in its order. The expected values are the host loop's
    // (solver::bicgstab::BiCgStab): the same iteration count, stop reason and residual
    // history to the last bit, for point sources (the exact breakdown of
    // `bicgstab_on_d_with_a_point_source_survives_the_exact_breakdown`) and random ones,
    // plain and even-odd, double and single-double, reading every iteration and every
    // third; and the true residual of D x = b recomputed by the CPU reference <= 1e-10.
    let mut fused_plans = 0;
    for (gauge, source) in [
        (
            "type = \"random\"\nseed = 5",
            "type = \"point\"\nsite = [1, 2, 0, 3]\nspin = 2\ncolour = 1",
        ),
        ("type = \"random\"\nseed = 7", "type = \"random\"\nseed = 3"),
    ] {
        let cfg = config("LX = 4\nLY = 4\nLZ = 4\nLT = 8", gauge, 0.12, source);
        let mut problem = build_problem(&cfg).unwrap();
        problem.operator = Operator::D;
        for (name, pre, prec) in variants() {
            let host = plan(Method::Bicgstab, pre, prec);
            assert!(!host.fused, "auto on the CPU is the host loop");
            let mut be = CpuBackend::new(&problem.gauge, problem.kappa);
            let want = solve_on(&mut be, &problem, &host).unwrap();
            assert_eq!(want.reason, StopReason::Converged, "{source} {name}");
            for check_every in [1, 3] {
                let fused = SolvePlan {
                    fused: true,
                    check_every,
                    ..host.clone()
                };
                assert!(fused.describe().starts_with("fused BiCGStab"));
                fused_plans += 1;
                let got = solve_on(&mut be, &problem, &fused).unwrap();
                let label = format!("{source} {name} every {check_every}");
                assert_eq!(got.reason, want.reason, "{label}");
                assert_eq!(got.iterations, want.iterations, "{label}");
                let bits = |h: &[f64]| h.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got.history), bits(&want.history), "{label}");
                let tr = cpu_residual_of_d(&problem, &got.solution);
                assert!(tr <= 1e-10, "{label}: true residual {tr:.3e}");
            }
        }
    }
    assert_eq!(fused_plans, 16);
}
