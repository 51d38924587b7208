//! The decomposed CPU backend (issue 11): ranks as threads (`comms::threads::run_ranks`),
//! each running `backend::cpu_decomposed::DecomposedCpu` on its sub-lattice with halo
//! exchanges. Every expected value comes from the UNDECOMPOSED `CpuBackend` on the whole
//! lattice (itself tested against the reference operator in the other test files); the
//! decomposed results are gathered (`gather_spinor`) and compared with stated tolerances.

use qcd_solve::backend::cpu::CpuBackend;
use qcd_solve::backend::cpu_decomposed::{
    gather_spinor, scatter_gauge, scatter_spinor, DecomposedCpu,
};
use qcd_solve::backend::prelude::*;
use qcd_solve::comms::threads::run_ranks;
use qcd_solve::comms::Comms;
use qcd_solve::field::{GaugeField, SpinorField, C64};
use qcd_solve::geometry::lattice::{Lattice, DEFAULT_BOUNDARY};
use qcd_solve::geometry::partition::Partition;
use qcd_solve::io::{read_gauge, GaugeFormat};
use qcd_solve::linalg::{Layout, Operator, Precision, Subset};
use qcd_solve::solver::{solve, Method, SolveSpec, StopReason, StopRules};
use qcd_solve::Result;
use std::path::PathBuf;

/// Operator results in double: max |diff| / max |value| at most this (a different
/// summation order of the same 8 hops: a few ulps).
const OP_TOL_DOUBLE: f64 = 1e-14;
/// In single: the stored values are rounded to f32, so a last-bit flip (6e-8) is allowed.
const OP_TOL_SINGLE: f64 = 1e-6;

fn random_8x8x8x8() -> (GaugeField, SpinorField, SpinorField) {
    let lattice = Lattice::new([8, 8, 8, 8], DEFAULT_BOUNDARY).unwrap();
    let v = lattice.volume();
    (
        GaugeField::random(&lattice, 11),
        SpinorField::random(v, 5, 0),
        SpinorField::random(v, 5, 1 << 20),
    )
}

/// The AnalysisToolbox's 8^3x4 NERSC file (thermalised, beta 3.36), read through crate::io.
fn atb_file() -> GaugeField {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/lattices/ATB_nersc.l8t4b3360");
    assert!(
        path.exists(),
        "{} is missing: the shared lattices are part of the test set-up",
        path.display()
    );
    read_gauge(
        &path,
        Some(GaugeFormat::Nersc),
        Some([8, 8, 8, 4]),
        DEFAULT_BOUNDARY,
    )
    .unwrap()
    .0
}

fn partitions(global: [usize; 4], grid: [usize; 4]) -> Vec<Partition> {
    (0..grid.iter().product())
        .map(|r| Partition::new(global, grid, r).unwrap())
        .collect()
}

/// Run `body` on every rank of `grid` with its backend built from the scattered links;
/// `body` gets the backend and the rank's partition.
fn on_ranks<T: Send>(
    gauge: &GaugeField,
    kappa: f64,
    grid: [usize; 4],
    body: impl Fn(&mut DecomposedCpu<qcd_solve::comms::threads::ThreadComms>, &Partition) -> Result<T>
        + Sync,
) -> Vec<T> {
    let global = gauge.lattice.dims;
    run_ranks(grid.iter().product(), |comms| {
        let p = Partition::new(global, grid, comms.rank())?;
        let local = scatter_gauge(gauge, &p)?;
        let mut be = DecomposedCpu::new(p.clone(), local, kappa, comms)?;
        body(&mut be, &p)
    })
    .unwrap()
}

/// Every Wilson form on `a` (and `b` for the hopping inputs), in double and single: D,
/// g5D (full), Mee, g5Mee (even), hop_xpay into both parities with and without g5. Each
/// result downloaded as a full field (zeros off a half field's parity), with its name.
fn operator_results<S: WilsonKernels>(
    s: &mut S,
    a: &SpinorField,
    b: &SpinorField,
) -> Result<Vec<(String, SpinorField)>> {
    let mut out = Vec::new();
    let (a, b) = (s.upload(a)?, s.upload(b)?);
    for prec in [Precision::Double, Precision::Single] {
        let field = |s: &mut S, subset: Subset, from: &S::Field| -> Result<S::Field> {
            let mut f = s.alloc_layout(Layout::new(subset, prec))?;
            s.convert(&mut f, from)?;
            Ok(f)
        };
        let x = field(s, Subset::Full, &a)?;
        for op in [Operator::D, Operator::G5D] {
            let mut y = s.alloc_layout(Layout::new(Subset::Full, prec))?;
            s.apply(op, &mut y, &x)?;
            out.push((format!("{op} {prec:?}"), s.download(&y)?));
        }
        let xe = field(s, Subset::Even, &a)?;
        for op in [Operator::Schur, Operator::G5Schur] {
            let mut y = s.alloc_layout(Layout::new(Subset::Even, prec))?;
            s.apply(op, &mut y, &xe)?;
            out.push((format!("{op} {prec:?}"), s.download(&y)?));
        }
        for p in [0, 1] {
            for gamma5 in [false, true] {
                let inp = field(s, Subset::from_parity(1 - p), &b)?;
                let y = field(s, Subset::from_parity(p), &a)?;
                let mut o = s.alloc_layout(Layout::new(Subset::from_parity(p), prec))?;
                s.hop_xpay(&mut o, &inp, &y, 0.37, gamma5)?;
                let name = format!("hop_xpay parity {p} g5 {gamma5} {prec:?}");
                out.push((name, s.download(&o)?));
            }
        }
    }
    Ok(out)
}

fn max_abs(f: &SpinorField) -> f64 {
    f.data.iter().map(|z| z.norm()).fold(0.0, f64::max)
}

fn max_rel_diff(got: &SpinorField, want: &SpinorField) -> f64 {
    let d = got
        .data
        .iter()
        .zip(&want.data)
        .map(|(a, b)| (a - b).norm())
        .fold(0.0, f64::max);
    d / max_abs(want)
}

/// Every form through `grid` against the undecomposed backend.
fn check_operators(what: &str, gauge: &GaugeField, kappa: f64, grid: [usize; 4]) {
    let v = gauge.lattice.volume();
    let (a, b) = (
        SpinorField::random(v, 5, 0),
        SpinorField::random(v, 5, 1 << 20),
    );
    // Expected: the undecomposed CPU backend on the whole lattice.
    let mut whole = CpuBackend::new(gauge, kappa);
    let want = operator_results(&mut whole, &a, &b).unwrap();
    let per_rank = on_ranks(gauge, kappa, grid, |be, p| {
        operator_results(be, &scatter_spinor(&a, p)?, &scatter_spinor(&b, p)?)
    });
    let parts = partitions(gauge.lattice.dims, grid);
    for (k, (name, w)) in want.iter().enumerate() {
        let pieces: Vec<SpinorField> = per_rank.iter().map(|r| r[k].1.clone()).collect();
        let got = gather_spinor(&pieces, &parts).unwrap();
        let tol = if name.ends_with("Single") {
            OP_TOL_SINGLE
        } else {
            OP_TOL_DOUBLE
        };
        let d = max_rel_diff(&got, w);
        assert!(max_abs(w) > 0.1, "{what} {grid:?} {name}: a zero result");
        assert!(
            d <= tol,
            "{what} grid {grid:?} {name}: max|diff|/max|value| = {d:.3e}"
        );
    }
}

#[test]
fn scatter_then_gather_is_the_identity() {
    // Exact: every value of the global source comes back where it was, and every rank's
    // links are the global links of its sites, on its local lattice.
    let (gauge, src, _) = random_8x8x8x8();
    for grid in [[1, 1, 1, 2], [2, 2, 2, 2], [1, 4, 1, 2]] {
        let parts = partitions([8, 8, 8, 8], grid);
        let pieces: Vec<SpinorField> = parts
            .iter()
            .map(|p| scatter_spinor(&src, p).unwrap())
            .collect();
        assert_eq!(gather_spinor(&pieces, &parts).unwrap(), src);
        for p in &parts {
            let g = scatter_gauge(&gauge, p).unwrap();
            assert_eq!(g.lattice, p.local_lattice(DEFAULT_BOUNDARY).unwrap());
            for x in 0..g.lattice.volume() {
                for mu in 0..4 {
                    assert_eq!(g.link(x, mu), gauge.link(p.global_site(x), mu));
                }
            }
        }
    }
}

#[test]
fn operators_on_a_random_field_match_the_undecomposed_backend() {
    // 8^4 random links: t, xt, yt and xyzt (16 sub-lattices of 4^4) splits.
    let (gauge, _, _) = random_8x8x8x8();
    for grid in [[1, 1, 1, 2], [2, 1, 1, 2], [1, 2, 1, 2], [2, 2, 2, 2]] {
        check_operators("random 8^4", &gauge, 0.12, grid);
    }
}

#[test]
fn operators_on_a_gauge_file_match_the_undecomposed_backend() {
    // The real 8^3x4 file split in t (local t = 2: both faces of a rank are its whole
    // t-extent) and in x.
    let gauge = atb_file();
    for grid in [[1, 1, 1, 2], [2, 1, 1, 1]] {
        check_operators("ATB 8^3x4", &gauge, 0.12, grid);
    }
}

#[test]
fn one_rank_and_unsplit_grids_need_no_exchange() {
    // Grid [1,1,1,1] with ThreadComms of one rank: no faces, no bytes, same results.
    let (gauge, _, _) = random_8x8x8x8();
    check_operators("random 8^4", &gauge, 0.12, [1, 1, 1, 1]);
    let stats = on_ranks(&gauge, 0.12, [1, 1, 1, 1], |be, p| {
        let x = be.upload(&scatter_spinor(&SpinorField::random(4096, 1, 0), p)?)?;
        let mut y = be.alloc()?;
        be.apply(Operator::D, &mut y, &x)?;
        Ok(be.halo_stats())
    });
    assert_eq!(stats[0].hops, 1);
    assert_eq!((stats[0].exchanges, stats[0].face_bytes_sent), (0, 0));
}

#[test]
fn halo_bytes_are_the_projected_faces_of_the_input_parity() {
    // Grid [1,1,1,2] of 8^4: a face has 8^3 = 512 sites. D sends both faces of every
    // site (2 x 512 x 12 reals x 8 bytes); a hop on a half field only the 256 sites of
    // its parity per face; the Schur form two such hops. Links: one face of 512 x 18 x 8.
    let (gauge, src, _) = random_8x8x8x8();
    let stats = on_ranks(&gauge, 0.12, [1, 1, 1, 2], |be, p| {
        let x = be.upload(&scatter_spinor(&src, p)?)?;
        let mut y = be.alloc()?;
        be.apply(Operator::D, &mut y, &x)?;
        let after_d = be.halo_stats();
        let mut xe = be.alloc_layout(Layout::new(Subset::Even, Precision::Double))?;
        be.convert(&mut xe, &x)?;
        let mut ye = be.alloc_layout(Layout::new(Subset::Even, Precision::Double))?;
        be.apply(Operator::Schur, &mut ye, &xe)?;
        Ok((after_d, be.halo_stats()))
    });
    for (after_d, after_schur) in stats {
        assert_eq!(after_d.link_bytes_sent, 512 * 18 * 8);
        assert_eq!((after_d.hops, after_d.exchanges), (1, 1));
        assert_eq!(after_d.face_bytes_sent, 2 * 512 * 12 * 8);
        assert_eq!((after_schur.hops, after_schur.exchanges), (3, 3));
        assert_eq!(
            after_schur.face_bytes_sent - after_d.face_bytes_sent,
            2 * (2 * 256 * 12 * 8)
        );
        assert!(after_schur.interior_seconds > 0.0 && after_schur.exterior_seconds > 0.0);
    }
}

/// What a solve gives, to compare: iterations, why it stopped, the relative residual
/// history and the solution (this rank's part for the decomposed backend).
struct Solved {
    iterations: usize,
    reason: StopReason,
    history: Vec<f64>,
    x: SpinorField,
}

/// Solve D x = source as the app does (rhs = g5 source for the g5 forms; the source
/// itself for the even-odd preparation).
fn run_solve<B: FusedCr>(be: &mut B, spec: &SolveSpec, source: &SpinorField) -> Result<Solved> {
    let op = spec.method.default_operator();
    let rhs = if op.gamma5() {
        source.gamma5()
    } else {
        source.clone()
    };
    let b = be.upload(&rhs)?;
    let src = if spec.even_odd {
        Some(be.upload(source)?)
    } else {
        None
    };
    let out = solve(be, spec, op, &b, src.as_ref(), &mut |_, _| {})?;
    Ok(Solved {
        iterations: out.iterations,
        reason: out.reason,
        history: out.history,
        x: be.download(&out.x)?,
    })
}

fn spec(method: Method, even_odd: bool, precision: Precision) -> SolveSpec {
    let mut s = SolveSpec::new(method, StopRules::new(1e-10, 2000));
    s.even_odd = even_odd;
    s.precision = precision;
    s
}

/// Solve on every rank of `grid`: checks that all ranks agree bitwise and returns rank
/// 0's outcome with the gathered solution.
fn decomposed_solve(
    gauge: &GaugeField,
    kappa: f64,
    grid: [usize; 4],
    spec: &SolveSpec,
    source: &SpinorField,
) -> Solved {
    let ranks = on_ranks(gauge, kappa, grid, |be, p| {
        run_solve(be, spec, &scatter_spinor(source, p)?)
    });
    for (r, s) in ranks.iter().enumerate() {
        // Global sums are the same bits on every rank, so every rank iterates alike.
        assert_eq!(s.iterations, ranks[0].iterations, "rank {r}");
        let bits = |h: &[f64]| h.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&s.history), bits(&ranks[0].history), "rank {r}");
    }
    let pieces: Vec<SpinorField> = ranks.iter().map(|s| s.x.clone()).collect();
    let x = gather_spinor(&pieces, &partitions(gauge.lattice.dims, grid)).unwrap();
    let r0 = &ranks[0];
    Solved {
        iterations: r0.iterations,
        reason: r0.reason,
        history: r0.history.clone(),
        x,
    }
}

/// Residual history entries of a double solve: |h_dec - h_whole| / h_whole at most this.
/// The two differ only in the summation order of the reductions and of the hops (1e-16
/// relative per operation), which the iteration amplifies mildly.
const HISTORY_TOL: f64 = 1e-12;
/// The same for a single-double solve. Its inner iterations store every value rounded to
/// f32: a 1e-16 difference before rounding flips the last f32 bit of a few values
/// (6e-8 relative), and those flips are what the history shows (measured: 4.4e-8 on the
/// file below). The reliable updates in double remove them from the solution.
const HISTORY_TOL_SINGLE: f64 = 1e-6;
/// The gathered solution: ||x_dec - x_whole|| / ||x_whole|| at most this.
const SOLUTION_TOL: f64 = 1e-10;

#[test]
fn solves_match_the_undecomposed_solves() {
    // CR (on g5 D) and BiCGStab (on D), full and even-odd, in double, on the real file
    // at kappa 0.12 split over [2,1,1,2] (4 ranks of 4x8x8x2), and one single-double solve.
    let gauge = atb_file();
    let kappa = 0.12;
    let source = SpinorField::random(gauge.lattice.volume(), 7, 0);
    let grid = [2, 1, 1, 2];
    let mut cases = Vec::new();
    for method in [Method::Cr, Method::Bicgstab] {
        for even_odd in [false, true] {
            cases.push(spec(method, even_odd, Precision::Double));
        }
    }
    cases.push(spec(Method::Bicgstab, true, Precision::Single));
    for spec in cases {
        let name = format!(
            "{} even-odd {} {:?}",
            spec.method.name(),
            spec.even_odd,
            spec.precision
        );
        // Expected: the same solve on the undecomposed CPU backend.
        let mut whole = CpuBackend::new(&gauge, kappa);
        let want = run_solve(&mut whole, &spec, &source).unwrap();
        assert_eq!(want.reason, StopReason::Converged, "{name}");
        let got = decomposed_solve(&gauge, kappa, grid, &spec, &source);
        let worst = got
            .history
            .iter()
            .zip(&want.history)
            .map(|(g, w)| (g - w).abs() / w)
            .fold(0.0, f64::max);
        eprintln!(
            "{name}: {} iterations (undecomposed {}), history rel. diff {worst:.2e}, solution rel. diff {:.2e}",
            got.iterations,
            want.iterations,
            got.x.rel_diff(&want.x)
        );
        assert_eq!(got.reason, want.reason, "{name}");
        assert_eq!(got.iterations, want.iterations, "{name}");
        assert_eq!(got.history.len(), want.history.len(), "{name}");
        let tol = match spec.precision {
            Precision::Double => HISTORY_TOL,
            Precision::Single => HISTORY_TOL_SINGLE,
            Precision::Half => panic!("{name}: this test has no half-precision variant"),
        };
        assert!(worst <= tol, "{name}: history differs by {worst:.3e}");
        let d = got.x.rel_diff(&want.x);
        assert!(d <= SOLUTION_TOL, "{name}: solution differs by {d:.3e}");
    }
}

#[test]
fn reductions_are_the_same_bits_on_every_rank_and_in_every_run() {
    // The same decomposition run twice: dot and norm2 (of fields and of an operator
    // result) give the same bits on every rank and in both runs, and a CR solve's
    // history is the same bits in both runs.
    let (gauge, a, b) = random_8x8x8x8();
    let grid = [2, 2, 2, 2];
    let run = || {
        on_ranks(&gauge, 0.12, grid, |be, p| {
            let x = be.upload(&scatter_spinor(&a, p)?)?;
            let y = be.upload(&scatter_spinor(&b, p)?)?;
            let mut dy = be.alloc()?;
            be.apply(Operator::G5D, &mut dy, &y)?;
            let d: C64 = be.dot(&x, &dy)?;
            let n = be.norm2(&x)?;
            let mut xe = be.alloc_layout(Layout::new(Subset::Even, Precision::Single))?;
            be.convert(&mut xe, &x)?;
            let ne = be.norm2(&xe)?;
            Ok([d.re.to_bits(), d.im.to_bits(), n.to_bits(), ne.to_bits()])
        })
    };
    let (first, second) = (run(), run());
    for r in 0..first.len() {
        assert_eq!(first[r], first[0], "rank {r} differs from rank 0");
        assert_eq!(second[r], first[r], "rank {r}: second run differs");
    }
    let source = SpinorField::random(gauge.lattice.volume(), 3, 0);
    let s = spec(Method::Cr, true, Precision::Double);
    let bits = |h: &[f64]| h.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    let h1 = decomposed_solve(&gauge, 0.12, [1, 2, 1, 2], &s, &source);
    let h2 = decomposed_solve(&gauge, 0.12, [1, 2, 1, 2], &s, &source);
    assert_eq!(bits(&h1.history), bits(&h2.history));
    assert_eq!(h1.x, h2.x);
}

#[test]
fn impossible_grids_are_refused_by_key() {
    // LT = 8 over 8 ranks leaves local t = 1 (odd); LX = 8 over 3 does not divide.
    for grid in [[1, 1, 1, 8], [3, 1, 1, 1]] {
        let e = Partition::new([8, 8, 8, 8], grid, 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("parallel.grid"), "{e}");
    }
    // A backend whose communicator does not match its partition is refused, not run.
    let (gauge, _, _) = random_8x8x8x8();
    let e = run_ranks(2, |comms| {
        let p = Partition::new([8, 8, 8, 8], [1, 1, 1, 4], comms.rank())?;
        let local = scatter_gauge(&gauge, &p)?;
        DecomposedCpu::new(p, local, 0.12, comms).map(|_| ())
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("communicator"), "{e}");
}

#[test]
fn the_barrier_returns_on_every_rank_only_once_the_last_has_come() {
    // Rank r arrives at the barrier r * 60 ms late (Prepare::barrier, which the main job
    // calls before it starts the solve's clock). Every rank must leave it after the last
    // arrival: at 180 ms for 4 ranks, the sleeps being the lower bound (a no-op barrier
    // would let rank 0 leave at once).
    let (gauge, _, _) = random_8x8x8x8();
    let t0 = std::time::Instant::now();
    let left = on_ranks(&gauge, 0.12, [1, 1, 2, 2], |be, p| {
        std::thread::sleep(std::time::Duration::from_millis(60 * p.rank() as u64));
        be.barrier()?;
        Ok(t0.elapsed())
    });
    for (r, t) in left.iter().enumerate() {
        assert!(
            *t >= std::time::Duration::from_millis(180),
            "rank {r} left the barrier at {t:?}, before the last rank arrived (180 ms)"
        );
    }
}
