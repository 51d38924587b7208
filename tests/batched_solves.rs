//! Batched solves (`solver::batch::solve_batch`) on the CPU backend, whose batched
//! operator is its one-by-one default: the batch's columns against their own solves.
//!
//! - In double, each column's solution, iterations and history are the bits of the same
//!   method's host-scalar solve of that column alone (`solver::solve`, unfused, a check
//!   every iteration): the batch shares applications, never arithmetic. Expected value:
//!   the single solve, an independent path through `solver::cr` / `solver::bicgstab`.
//!   The columns are chosen to need different iteration counts, so the comparison covers
//!   columns leaving the batch while others go on.
//! - In single (defect correction), every column's true residual ||b - D x|| / ||b||,
//!   recomputed in double on the host by `solver::true_residual`, meets the tolerance.
//! - A method without a batched form is refused by key.

use qcd_solve::backend::cpu::{CpuBackend, CpuField};
use qcd_solve::backend::prelude::*;
use qcd_solve::dirac::Action;
use qcd_solve::field::{GaugeField, SpinorField};
use qcd_solve::geometry::lattice::{Lattice, DEFAULT_BOUNDARY};
use qcd_solve::linalg::{Operator, Precision};
use qcd_solve::solver::batch::solve_batch;
use qcd_solve::solver::{solve, true_residual, Method, SolveSpec, StopReason, StopRules};

/// On a random field (far from the critical kappa of a smooth one) 0.2 makes the columns
/// need different iteration counts, so that columns leave the batch at different steps.
const KAPPA: f64 = 0.2;
const TOL: f64 = 1e-10;

/// A random 4^3x8 field and four sources of different shapes: two point sources (spin 0
/// colour 0, spin 3 colour 2 at another site), a random field and a point source scaled
/// by 1e3 (the same system as the first, scaled: the same iterations, a different b).
fn problem() -> (GaugeField, Vec<SpinorField>) {
    let lattice = Lattice::new([4, 4, 4, 8], DEFAULT_BOUNDARY).unwrap();
    let v = lattice.volume();
    let gauge = GaugeField::random(&lattice, 77);
    let mut scaled = SpinorField::point(&lattice, [0, 0, 0, 0], 0, 0);
    scaled.data.iter_mut().for_each(|z| *z *= 1e3);
    let sources = vec![
        SpinorField::point(&lattice, [0, 0, 0, 0], 0, 0),
        SpinorField::point(&lattice, [1, 2, 3, 5], 3, 2),
        SpinorField::random(v, 9, 0),
        scaled,
    ];
    (gauge, sources)
}

fn spec(method: Method, even_odd: bool, precision: Precision) -> SolveSpec {
    let mut s = SolveSpec::new(method, StopRules::new(TOL, 3000));
    s.even_odd = even_odd;
    s.precision = precision;
    s
}

/// The form's right-hand side or the even-odd source, uploaded (as the app makes them).
fn input(be: &mut CpuBackend, spec: &SolveSpec, source: &SpinorField) -> CpuField {
    let op = spec.method.iterated_form(spec.method.default_operator());
    if op.gamma5() && !spec.even_odd {
        be.upload(&source.gamma5()).unwrap()
    } else {
        be.upload(source).unwrap()
    }
}

/// Each column of a batch against its own solve, bit for bit, for `method` on `action`
/// (`fused`: BiCGStab through the backend's fused passes, checked every 3 iterations).
fn batch_matches_single_solves(method: Method, action: Action, even_odd: bool) {
    batch_matches(method, action, even_odd, false)
}

fn batch_matches(method: Method, action: Action, even_odd: bool, fused: bool) {
    let (gauge, sources) = problem();
    let mut sp = spec(method, even_odd, Precision::Double);
    sp.fused = fused;
    sp.check_every = if fused { 3 } else { 1 };
    let op = sp.method.default_operator();
    let mut be = CpuBackend::with_action(&gauge, &action).unwrap();
    let inputs: Vec<CpuField> = sources.iter().map(|s| input(&mut be, &sp, s)).collect();
    let batch = solve_batch(&mut be, &sp, op, inputs).unwrap();
    assert_eq!(batch.len(), sources.len());
    let mut counts = Vec::new();
    for (k, (source, got)) in sources.iter().zip(&batch).enumerate() {
        let b = input(&mut be, &sp, source);
        let src = even_odd.then(|| be.upload(source).unwrap());
        let one = solve(&mut be, &sp, op, &b, src.as_ref(), &mut |_, _| {}).unwrap();
        let what = format!("{method:?} {action:?} even-odd {even_odd} column {k}");
        assert_eq!(one.reason, StopReason::Converged, "{what}");
        assert_eq!(got.reason, one.reason, "{what}");
        assert_eq!(got.iterations, one.iterations, "{what}");
        assert_eq!(got.history, one.history, "{what}");
        let (x, y) = (be.download(&got.x).unwrap(), be.download(&one.x).unwrap());
        assert!(x.data == y.data, "{what}: the solutions differ");
        counts.push(one.iterations);
    }
    // The columns leave the batch at different iterations.
    counts.sort();
    counts.dedup();
    assert!(
        counts.len() >= 2,
        "{method:?}: every column took {counts:?} iterations"
    );
}

#[test]
fn batched_cr_is_each_columns_own_solve_wilson_even_odd() {
    batch_matches_single_solves(Method::Cr, Action::wilson(KAPPA), true);
}

#[test]
fn batched_cr_is_each_columns_own_solve_clover_full_lattice() {
    let clover = Action {
        kappa: KAPPA,
        csw: 1.2,
        mu: 0.0,
    };
    batch_matches_single_solves(Method::Cr, clover, false);
}

#[test]
fn batched_bicgstab_is_each_columns_own_solve_clover_even_odd() {
    let clover = Action {
        kappa: KAPPA,
        csw: 1.2,
        mu: 0.0,
    };
    batch_matches_single_solves(Method::Bicgstab, clover, true);
}

#[test]
fn batched_bicgstab_is_each_columns_own_solve_twisted_full_lattice() {
    let twisted = Action {
        kappa: KAPPA,
        csw: 1.2,
        mu: 0.05,
    };
    batch_matches_single_solves(Method::Bicgstab, twisted, false);
}

#[test]
fn batched_fused_bicgstab_is_each_columns_own_fused_solve() {
    // The fused passes' scalars stay with the backend; the host reads them every few
    // iterations, and a column stopped by its device flag inside a run ends at the same
    // iteration as alone.
    batch_matches(Method::Bicgstab, Action::wilson(KAPPA), true, true);
    let clover = Action {
        kappa: KAPPA,
        csw: 1.2,
        mu: 0.0,
    };
    batch_matches(Method::Bicgstab, clover, false, true);
}

#[test]
fn mixed_precision_batches_meet_the_tolerance_in_double() {
    let (gauge, sources) = problem();
    let clover = Action {
        kappa: KAPPA,
        csw: 1.2,
        mu: 0.0,
    };
    for (method, fused) in [
        (Method::Cr, false),
        (Method::Bicgstab, false),
        (Method::Bicgstab, true),
    ] {
        let mut sp = spec(method, true, Precision::Single);
        sp.delta = 1e-3;
        sp.fused = fused;
        sp.check_every = 4;
        let op = sp.method.default_operator();
        let mut be = CpuBackend::with_action(&gauge, &clover).unwrap();
        let inputs: Vec<CpuField> = sources.iter().map(|s| input(&mut be, &sp, s)).collect();
        let batch = solve_batch(&mut be, &sp, op, inputs).unwrap();
        for (k, (source, got)) in sources.iter().zip(&batch).enumerate() {
            assert_eq!(got.reason, StopReason::Converged, "{method:?} column {k}");
            assert!(
                got.stats.reliable_updates >= 2,
                "{method:?} column {k}: one round only"
            );
            // ||source - D x|| / ||source|| in double, from scratch.
            let b = be.upload(source).unwrap();
            let r = true_residual(&mut be, Operator::D, &b, &got.x).unwrap();
            assert!(r <= TOL, "{method:?} column {k}: true residual {r:e}");
        }
    }
}

#[test]
fn a_method_without_a_batched_form_is_refused_by_key() {
    let (gauge, sources) = problem();
    let sp = spec(Method::Gcr, false, Precision::Double);
    let mut be = CpuBackend::new(&gauge, KAPPA);
    let inputs = vec![be.upload(&sources[0]).unwrap()];
    match solve_batch(&mut be, &sp, Operator::D, inputs) {
        Err(qcd_solve::Error::InvalidValue { key, message }) => {
            assert_eq!(key, "solver.method", "{message}");
            assert!(message.contains("gcr"), "{message}");
        }
        Err(e) => panic!("refused with {e}"),
        Ok(_) => panic!("GCR ran as a batch"),
    }
}
