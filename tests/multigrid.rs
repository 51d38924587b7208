//! Adaptive aggregation multigrid (solver::mg) on the CPU: the algebraic properties of the
//! two-grid method and the solve on the free field and on gauge files written by other
//! codes (../shared/lattices), each solution held to its true residual recomputed from
//! scratch.

use qcd_solve::backend::coarse::CoarseSpace;
use qcd_solve::backend::cpu::CpuBackend;
use qcd_solve::backend::prelude::*;
use qcd_solve::dirac::clover::SiteTerms;
use qcd_solve::dirac::coarse::CoarseOperator;
use qcd_solve::dirac::coarse::{galerkin, Aggregation, Prolongator, WilsonStencil};
use qcd_solve::dirac::Action;
use qcd_solve::field::{GaugeField, SpinorField, C64};
use qcd_solve::geometry::lattice::{Lattice, DEFAULT_BOUNDARY};
use qcd_solve::linalg::{Form, Layout, LinearOperator, Operator, Precision};
use qcd_solve::rng::Stream;
use qcd_solve::solver::gcr::Gcr;
use qcd_solve::solver::mg::{self, MgParams, SetupSolver};
use qcd_solve::solver::{run_plain, true_residual, Monitor, StopReason, StopRules};
use std::path::Path;
use std::sync::Arc;

fn shared(name: &str) -> GaugeField {
    let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/lattices")).join(name);
    qcd_solve::io::read_gauge(&path, None, None, DEFAULT_BOUNDARY)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .0
}

fn gaussian(n: usize, seed: u64) -> Vec<C64> {
    let mut rng = Stream::new(seed, 0);
    (0..n)
        .map(|_| C64::new(rng.gaussian(), rng.gaussian()))
        .collect()
}

/// Wilson-clover at c_sw = 1, no twist.
fn clover(kappa: f64) -> Action {
    Action {
        kappa,
        csw: 1.0,
        mu: 0.0,
    }
}

fn norm(v: &[C64]) -> f64 {
    v.iter().map(|z| z.norm_sqr()).sum::<f64>().sqrt()
}

/// With the coarse system solved exactly, the coarse-grid correction
/// I - P D_c^-1 P^dag D annihilates the range of P (D_c = P^dag D P): for v = P w,
/// P D_c^-1 P^dag D v = v. An identity of exact arithmetic, checked to 1e-9 relative with
/// the coarse solve at 1e-12, on a Wilson-clover operator on the tmLQCD file.
#[test]
fn exact_coarse_correction_annihilates_the_range_of_p() {
    let gauge = shared("ahmidas_conf.48");
    let action = clover(0.13);
    let terms = SiteTerms::new(&gauge, &action).unwrap();
    let stencil = WilsonStencil::new(&gauge, action.kappa, Some(&terms));
    let lattice = &gauge.lattice;
    let agg = Aggregation::new(lattice, [2, 2, 2, 2], "blocks").unwrap();
    let vectors: Vec<Vec<C64>> = (0..4)
        .map(|k| gaussian(lattice.volume() * 12, 10 + k))
        .collect();
    let p = Prolongator::new(agg, 12, &vectors).unwrap();
    let dc = Arc::new(galerkin(&stencil, &p).unwrap());
    let w = gaussian(dc.volume() * dc.dof, 99);
    let mut v = vec![C64::new(0.0, 0.0); lattice.volume() * 12];
    p.prolong(&w, &mut v);
    // D v by the backend's own operator (not the stencil).
    let mut be = CpuBackend::with_action(&gauge, &action).unwrap();
    let vf = be.upload(&SpinorField { data: v.clone() }).unwrap();
    let mut dv = be.alloc().unwrap();
    be.apply(Operator::D, &mut dv, &vf).unwrap();
    let dv = be.download(&dv).unwrap();
    let mut rc = vec![C64::new(0.0, 0.0); w.len()];
    p.restrict(&dv.data, &mut rc);
    let mut space = CoarseSpace::new(dc.clone());
    let b = space.field(Layout::FULL, rc).unwrap();
    let nb = space.norm2(&b).unwrap();
    let mut quiet = |_: usize, _: f64| {};
    let mut monitor = Monitor::new(StopRules::new(1e-12, 2000), nb, &mut quiet);
    let mut gcr = Gcr::new(CoarseOperator::full(), 20);
    let out = run_plain(&mut space, &mut gcr, &b, &mut monitor).unwrap();
    assert_eq!(out.reason, StopReason::Converged);
    let mut back = vec![C64::new(0.0, 0.0); v.len()];
    p.prolong(&out.x.data, &mut back);
    let diff: Vec<C64> = back.iter().zip(&v).map(|(a, b)| a - b).collect();
    let rel = norm(&diff) / norm(&v);
    assert!(rel < 1e-9, "|P Dc^-1 P^dag D v - v| / |v| = {rel}");
}

/// Near the AnalysisToolbox field's critical kappa with c_sw = 1: plain GCR(10) to 1e-10
/// takes 719 iterations there (105 at kappa 0.14, 3050 at 0.165).
const KAPPA_ATB: f64 = 0.16;

fn params(vectors: usize, blocks: [usize; 4]) -> MgParams {
    MgParams {
        blocks: vec![blocks],
        vectors: vec![vectors],
        ..MgParams::default()
    }
}

/// Iterations of plain GCR(10) and of multigrid-preconditioned GCR(10) to 1e-10 on
/// D x = b (b Gaussian), each solution's true residual recomputed by the backend's
/// operator.
fn solve_both(gauge: &GaugeField, action: Action, p: &MgParams) -> (usize, usize, mg::MgStats) {
    let terms = action
        .has_site_term()
        .then(|| SiteTerms::new(gauge, &action).unwrap());
    let stencil = WilsonStencil::new(gauge, action.kappa, terms.as_ref());
    let mut be = CpuBackend::with_action(gauge, &action).unwrap();
    let b = be
        .upload(&SpinorField {
            data: gaussian(gauge.lattice.volume() * 12, 5),
        })
        .unwrap();
    let tol = 1e-10;
    let (out, stats) = mg::solve(
        &mut be,
        &stencil,
        p,
        10,
        &b,
        StopRules::new(tol, 500),
        &mut |_, _| {},
        &mut None,
    )
    .unwrap();
    assert_eq!(
        out.reason,
        StopReason::Converged,
        "multigrid: {:?}",
        out.history
    );
    let res = true_residual(&mut be, Operator::D, &b, &out.x).unwrap();
    assert!(res <= 1.5 * tol, "multigrid true residual {res}");
    let nb = be.norm2(&b).unwrap();
    let mut quiet = |_: usize, _: f64| {};
    let mut monitor = Monitor::new(StopRules::new(tol, 20_000), nb, &mut quiet);
    let mut gcr = Gcr::new(Form(Operator::D), 10);
    let plain = run_plain(&mut be, &mut gcr, &b, &mut monitor).unwrap();
    assert_eq!(plain.reason, StopReason::Converged);
    (plain.iterations, out.iterations, stats)
}

/// The free field near its critical kappa (1/8; here m = 1/(2 kappa) - 4 = 0.032 on 8^4):
/// the multigrid solve converges to the true residual and takes at most a fifth of plain
/// GCR's iterations.
#[test]
fn multigrid_solves_the_free_field_near_critical_kappa() {
    let lattice = Lattice::new([8, 8, 8, 8], DEFAULT_BOUNDARY).unwrap();
    let gauge = GaugeField::unit(&lattice);
    let (plain, mg, stats) = solve_both(&gauge, Action::wilson(0.124), &params(8, [4, 4, 4, 4]));
    eprintln!("free field: GCR {plain}, MG {mg} iterations; {stats:?}");
    assert!(5 * mg <= plain, "GCR {plain}, MG {mg}");
}

/// Wilson-clover on the AnalysisToolbox file (8^3 x 4, beta 3.36 plaquette 0.504): the
/// multigrid solve converges to the true residual in at most a third of plain GCR's
/// iterations.
#[test]
fn multigrid_solves_wilson_clover_on_a_real_gauge_file() {
    let gauge = shared("ATB_nersc.l8t4b3360");
    let action = clover(0.14);
    let (plain, mg, stats) = solve_both(&gauge, action, &params(8, [4, 4, 4, 2]));
    eprintln!("ATB clover: GCR {plain}, MG {mg} iterations; {stats:?}");
    assert!(3 * mg <= plain, "GCR {plain}, MG {mg}");
}

/// Three levels on the free field (8^4 -> 4^4 -> 2^4): converges to the true residual.
#[test]
fn three_level_multigrid_converges() {
    let lattice = Lattice::new([8, 8, 8, 8], DEFAULT_BOUNDARY).unwrap();
    let gauge = GaugeField::unit(&lattice);
    let p = MgParams {
        levels: 3,
        blocks: vec![[2, 2, 2, 2], [2, 2, 2, 2]],
        vectors: vec![6, 6],
        ..MgParams::default()
    };
    let (plain, mg, stats) = solve_both(&gauge, Action::wilson(0.124), &p);
    eprintln!("three levels: GCR {plain}, MG {mg} iterations; {stats:?}");
    assert_eq!(stats.levels.len(), 2);
    assert!(3 * mg <= plain, "GCR {plain}, MG {mg}");
}

/// The preconditioner in double and in single give solves to the same tolerance (the
/// outer GCR corrects the single-precision cycle).
#[test]
fn single_and_double_preconditioners_both_reach_the_tolerance() {
    let lattice = Lattice::new([8, 8, 8, 8], DEFAULT_BOUNDARY).unwrap();
    let gauge = GaugeField::random(&lattice, 4);
    for precision in [Precision::Double, Precision::Single] {
        let p = MgParams {
            precision,
            ..params(6, [4, 4, 4, 4])
        };
        let (_, mg, _) = solve_both(&gauge, Action::wilson(0.11), &p);
        assert!(mg < 100, "{precision:?}: {mg} iterations");
    }
}

/// The two-grid error propagator E = 1 - M D reduces a near-null vector, which the
/// smoother alone cannot: v a mixture of the lowest modes by inverse iteration (three
/// steps of GCR to 1e-8 from a Gaussian vector), 16 near-null vectors made by each set-up
/// solver. The two-grid cycle leaves |E v| / |v| below 0.4 and at most 0.6 of what 4
/// minimal residual steps leave: on the free field near its critical kappa (8^4, kappa
/// 0.124; smoother 0.877) and on Wilson-clover on the AnalysisToolbox file (smoother
/// 0.720). Measured (2026-12-05): two-grid 0.282 and 0.242 with the batched even-odd
/// BiCGStab set-up in single, 0.235 and 0.303 with GCR in double.
#[test]
fn the_two_grid_cycle_reduces_near_null_vectors_the_smoother_cannot() {
    let lattice = Lattice::new([8, 8, 8, 8], DEFAULT_BOUNDARY).unwrap();
    let free = GaugeField::unit(&lattice);
    let atb = shared("ATB_nersc.l8t4b3360");
    let problems = [
        (&free, Action::wilson(0.124), [4, 4, 4, 4], "free field"),
        (&atb, clover(KAPPA_ATB), [4, 4, 4, 2], "ATB clover"),
    ];
    let cases = [SetupSolver::Bicgstab, SetupSolver::Gcr]
        .into_iter()
        .flat_map(|setup| problems.iter().map(move |p| (p, setup)));
    for ((gauge, action, blocks, name), setup) in cases {
        let name = format!("{name}, {} set-up", setup.name());
        let (two_grid, smoother) = reductions(gauge, *action, *blocks, setup);
        eprintln!("{name}: |E v| / |v|: two-grid {two_grid:.3}, smoother {smoother:.3}");
        assert!(two_grid < 0.4, "{name}: two-grid {two_grid}");
        assert!(
            two_grid <= 0.6 * smoother,
            "{name}: two-grid {two_grid}, smoother {smoother}"
        );
    }
}

fn reductions(
    gauge: &GaugeField,
    action: Action,
    blocks: [usize; 4],
    setup: SetupSolver,
) -> (f64, f64) {
    let terms = action
        .has_site_term()
        .then(|| SiteTerms::new(gauge, &action).unwrap());
    let stencil = WilsonStencil::new(gauge, action.kappa, terms.as_ref());
    let mut be = CpuBackend::with_action(gauge, &action).unwrap();
    let d = Form(Operator::D);
    let mut v = be
        .upload(&SpinorField {
            data: gaussian(gauge.lattice.volume() * 12, 21),
        })
        .unwrap();
    for _ in 0..3 {
        let nb = be.norm2(&v).unwrap();
        let mut quiet = |_: usize, _: f64| {};
        let mut monitor = Monitor::new(StopRules::new(1e-8, 5000), nb, &mut quiet);
        let out = run_plain(&mut be, &mut Gcr::new(d, 20), &v, &mut monitor).unwrap();
        let n = be.norm2(&out.x).unwrap().sqrt();
        v = be.alloc().unwrap();
        be.axpy(C64::new(1.0 / n, 0.0), &out.x, &mut v).unwrap();
    }
    let mut dv = be.alloc().unwrap();
    be.apply(Operator::D, &mut dv, &v).unwrap();
    /// An approximate inverse M applied: m(space, out, inp), out = M inp.
    type Inverse<'a, B> = dyn FnMut(&mut B, &mut <B as Space>::Field, &<B as Space>::Field) + 'a;
    /// |v - M D v| for the approximate inverse m.
    fn reduction<B: Space>(be: &mut B, v: &B::Field, dv: &B::Field, m: &mut Inverse<'_, B>) -> f64 {
        let mut mdv = be.alloc().unwrap();
        m(be, &mut mdv, dv);
        be.xpay(v, C64::new(-1.0, 0.0), &mut mdv).unwrap();
        be.norm2(&mdv).unwrap().sqrt()
    }
    let p = MgParams {
        setup_solver: setup,
        ..params(16, blocks)
    };
    let mut h = mg::setup(&mut be, d, &stencil, &p).unwrap();
    let two_grid = reduction(&mut be, &v, &dv, &mut |be, out, inp| {
        h.apply(be, out, inp).unwrap()
    });
    let smoother = reduction(&mut be, &v, &dv, &mut |be, out, inp| {
        let mut w = [be.alloc().unwrap(), be.alloc().unwrap()];
        let [r, q] = &mut w;
        let mut op = d;
        mg::cycle::minimal_residual(be, &mut op, inp, [out, r, q], 4).unwrap();
    });
    (two_grid, smoother)
}

/// `qcd-solve kappa-scan` on the CPU: every (method, kappa) point solved to the
/// tolerance, the CSV holding one row each with its true residual <= 1.5 x the tolerance,
/// and the two charts written.
#[test]
fn kappa_scan_writes_a_row_per_point_and_the_charts() {
    let d = tempfile::tempdir().unwrap();
    let cfg = d.path().join("scan.toml");
    std::fs::write(
        &cfg,
        "[lattice]\nLX = 4\nLY = 4\nLZ = 4\nLT = 8\n[gauge]\ntype = \"random\"\nseed = 3\n\
         [dirac]\nkappa = 0.1\n[solver]\nmethod = \"mg\"\ntolerance = 1e-10\n\
         max_iterations = 5000\n[multigrid]\nblocks = [[2, 2, 2, 2]]\nvectors = [4]\n\
         [backend]\ndevice = \"cpu\"\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_qcd-solve"))
        .args(["--quiet", "kappa-scan"])
        .arg(&cfg)
        .args(["--kappas", "0.1,0.11", "--methods", "gcr,mg", "--out"])
        .arg(d.path().join("scan"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = std::fs::read_to_string(d.path().join("scan/kappa-scan.csv")).unwrap();
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    assert_eq!(rows.len(), 4, "{csv}");
    for row in rows {
        let f: Vec<&str> = row.split(',').collect();
        assert_eq!(f[3], "true", "{row}");
        let res: f64 = f[7].parse().unwrap();
        assert!(res <= 1.5e-10, "{row}");
    }
    for chart in ["kappa-scan-iterations.svg", "kappa-scan-time.png"] {
        assert!(d.path().join("scan").join(chart).exists(), "{chart}");
    }
}

/// Twisted-mass clover (the Galerkin hierarchy of the twisted operator as it is, no
/// coarse-mu scaling): the solve reaches the tolerance in fewer iterations than plain GCR
/// on the AnalysisToolbox file.
#[test]
fn multigrid_solves_twisted_mass_clover() {
    let gauge = shared("ATB_nersc.l8t4b3360");
    let action = Action {
        kappa: 0.155,
        csw: 1.0,
        mu: 0.01,
    };
    let (plain, mg, stats) = solve_both(&gauge, action, &params(8, [4, 4, 4, 2]));
    eprintln!("ATB twisted clover: GCR {plain}, MG {mg} iterations; {stats:?}");
    assert!(2 * mg <= plain, "GCR {plain}, MG {mg}");
}

/// GCR smoothing against minimal residual smoothing, the same number of steps from x = 0
/// on the AnalysisToolbox clover operator: GCR's x minimises ||b - D x|| over the Krylov
/// space K_k(D, b), which holds MR's x, so its residual is at most MR's (exact arithmetic;
/// 1e-12 relative slack for rounding), and one step of each is the same step.
#[test]
fn gcr_smoothing_leaves_at_most_the_residual_of_as_many_minimal_residual_steps() {
    use qcd_solve::solver::mg::cycle::{gcr_steps, minimal_residual};
    let gauge = shared("ATB_nersc.l8t4b3360");
    let action = clover(KAPPA_ATB);
    let mut be = CpuBackend::with_action(&gauge, &action).unwrap();
    let b = be
        .upload(&SpinorField {
            data: gaussian(gauge.lattice.volume() * 12, 21),
        })
        .unwrap();
    let mut f = || be.alloc().unwrap();
    let (mut x, mut r, mut q) = (f(), f(), f());
    let mut dirs: Vec<_> = (0..12).map(|_| f()).collect();
    let mut op = Form(Operator::D);
    let nb = be.norm2(&b).unwrap().sqrt();
    let mut last = f64::INFINITY;
    for k in 1..=6 {
        let a = minimal_residual(&mut be, &mut op, &b, [&mut x, &mut r, &mut q], k).unwrap();
        assert_eq!(a, k);
        let mr = be.norm2(&r).unwrap().sqrt() / nb;
        let a = gcr_steps(&mut be, &mut op, &b, [&mut x, &mut r], &mut dirs, k).unwrap();
        assert_eq!(a, k);
        let gcr = be.norm2(&r).unwrap().sqrt() / nb;
        // r is b - D x: recomputed from x.
        let res = true_residual(&mut be, Operator::D, &b, &x).unwrap();
        assert!(
            (res - gcr).abs() <= 1e-12,
            "k = {k}: r {gcr} against b - D x {res}"
        );
        eprintln!("{k} steps: MR {mr:.6}, GCR {gcr:.6}");
        assert!(gcr <= mr * (1.0 + 1e-12), "k = {k}: GCR {gcr} > MR {mr}");
        if k == 1 {
            assert!(
                (gcr - mr).abs() <= 1e-12 * mr,
                "one step: GCR {gcr}, MR {mr}"
            );
        }
        // A minimum over a growing space: never larger than with a step fewer.
        assert!(gcr <= last * (1.0 + 1e-12), "k = {k}: {gcr} after {last}");
        last = gcr;
    }
}

/// `smoother = "gcr"`: the multigrid solve on the AnalysisToolbox clover field converges
/// to the true residual (solve_both) in at most a third of plain GCR's iterations, as with
/// MR smoothing.
#[test]
fn multigrid_with_gcr_smoothing_solves_wilson_clover_on_a_real_gauge_file() {
    let gauge = shared("ATB_nersc.l8t4b3360");
    let action = clover(0.14);
    let mut p = params(8, [4, 4, 4, 2]);
    let (_, mr, _) = solve_both(&gauge, action, &p);
    p.smoother = mg::Smoother::Gcr;
    let (plain, gcr, stats) = solve_both(&gauge, action, &p);
    eprintln!(
        "ATB clover: GCR {plain}, MG with MR smoothing {mr}, with GCR smoothing {gcr}; {stats:?}"
    );
    assert!(3 * gcr <= plain, "GCR {plain}, MG {gcr}");
}
